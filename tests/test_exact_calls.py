"""Grid calls in the exact day oracle: a call's limit and payment priced into the joint states' block costs
(oracle.data.call_costs). Its answers equal the textbook MILP's and brute force, an impossible call is refused with its
reason, and what the joint states cannot price (power caps, tiers, a training value) stays with the textbook MILP."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oracle
from aidc_env.case import build_instance, load_case
from aidc_env.grid import GridCall
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.schema.case import CallSpec, PowerCaps
from aidc_env.simulator import simulate
from oracle.call_rows import joint_state_calls
from oracle.entry import route
from oracle.model import OracleModel
from oracle.rolling import RollingOracle
from tests.conftest import mode, tiny_instance, tiny_job

DAY = "2023-05-09"


def _called(program: str = "bip", share: float = 0.25, start_hour: float = 16.0, hours: float = 5.0,
            day: str = DAY, **overrides) -> Instance:
    call = CallSpec(program=program, start_hour=start_hour, hours=hours, reduction_share=share, notice_hours=2.0)
    return build_instance(load_case("2048").with_overrides(grid_calls=(call,), **overrides), day=day,
                          profiles="caiso-2023")


@pytest.mark.parametrize("program, day", [("bip", DAY), ("elrp", DAY), ("elrp", "2023-03-17")])
def test_the_exact_oracle_takes_calls_and_equals_the_textbook(program: str, day: str) -> None:
    """auto routes a call day without caps to the exact oracle, which proves the textbook MILP's optimum (ELRP's
    $2,000/MWh below the baseline included) and delivers the call at the simulator's objective."""
    inst = _called(program, day=day)
    assert route(inst) == "exact"
    exact = oracle.solve(inst)
    textbook = oracle.solve(inst, method="textbook", mip_gap=1e-7, time_limit_s=120)
    assert exact.status == textbook.status == "optimal" and exact.method == "exact"
    assert exact.objective_usd == pytest.approx(textbook.objective_usd, rel=1e-6)
    assert exact.metrics.calls_delivered and exact.metrics.objective_usd == pytest.approx(exact.objective_usd, rel=1e-9)
    if program == "elrp":
        assert exact.metrics.call_payment_usd > 0
    plain = oracle.solve(dataclasses.replace(inst, grid_calls=()))
    assert plain.metrics.objective_usd <= exact.objective_usd + 1e-9 or program == "elrp"


def test_every_exact_path_equals_brute_force_on_one_segment() -> None:
    """One segment a day (K = 1) and a 4-9 pm call capping the meter at the median peak of the schedules that meet the
    targets: enumerating every joint choice (a mode or a pause per job) finds the least objective of those that deliver
    it; the exact oracle proves it with the reduction and label search, with branch and bound alone, and with the fast
    model in one piece."""
    plain = _called(segments=1)
    plain = dataclasses.replace(plain, grid_calls=())
    choices = list(itertools.product(*[[*range(job.n_modes), PAUSE] for job in plain.jobs]))
    runs = [simulate(plain, [[c] for c in choice]) for choice in choices]
    peaks = [float(run.flows.grid_mw[64:84].max()) for run in runs if run.metrics.feasible]  # 4-9 pm of 15 min
    call = CallSpec(program="bip", start_hour=16.0, hours=5.0, limit_mw=float(np.median(peaks)), notice_hours=2.0)
    inst = build_instance(load_case("2048").with_overrides(grid_calls=(call,), segments=1), day=DAY,
                          profiles="caiso-2023")
    scored = [m.objective_usd for m in (simulate(inst, [[c] for c in choice]).metrics for choice in choices)
              if m.feasible and m.calls_delivered]
    assert 0 < len(scored) < len(peaks)  # the call binds
    for options in ({}, {"labeling": False}, {"reduce": False}):
        result = OracleModel(inst, **options).solve(mip_gap=0.0)
        assert result.status == "optimal", options
        assert result.objective_usd == pytest.approx(min(scored), rel=1e-9), options
        assert result.metrics.objective_usd == pytest.approx(result.objective_usd, rel=1e-9)


def test_an_impossible_call_is_refused_with_its_reason() -> None:
    """A whole-day call: at 100% no state fits its limit at night (the precheck says where); at 70% the states left
    cannot meet the targets (the solver proves it); the textbook MILP agrees."""
    night = oracle.solve(_called(share=1.0, start_hour=0.0, hours=24.0))
    assert night.status == "infeasible" and "cannot be delivered: in slots" in night.reason
    short = _called(share=0.7, start_hour=0.0, hours=24.0)
    assert oracle.solve(short).status == "infeasible" == oracle.solve(short, method="textbook").status


def test_what_the_joint_states_cannot_price_stays_with_the_textbook() -> None:
    capped = _called(power_caps=PowerCaps())
    valued = dataclasses.replace(_called(), training_value_usd_per_gpu_hour=1.0)
    for inst in (capped, valued):
        assert not joint_state_calls(inst) and route(inst) == "textbook"
        with pytest.raises(Exception, match="exact solves"):
            route(inst, "exact")


def test_a_rolling_oracle_rebuilds_a_model_with_calls() -> None:
    """A model is re-priced in place only without calls (a call changes which states a block allows): the rolling
    oracle's answers on two call days equal fresh solves; ELRP's payment for the baseline is the data's constant."""
    rolling = RollingOracle()
    for day in (DAY, "2023-05-10"):
        inst = _called(day=day)
        assert rolling.solve(inst).objective_usd == pytest.approx(oracle.solve(inst).objective_usd, rel=1e-9)
    assert OracleModel(_called("elrp")).data.calls_usd < 0 == OracleModel(_called()).data.calls_usd


@st.composite
def tiny_called_days(draw) -> Instance:
    """A tiny day (1-2 jobs, 2 segments, 2-3 modes, 12 slots) with one call over 1-4 slots: its limit a share of the
    highest import any schedule draws there, and 0 or $500/MWh below a baseline at that highest import."""
    n_jobs = draw(st.integers(1, 2))
    n_gpus = draw(st.integers(2, 6))
    jobs = []
    for j in range(n_jobs):
        modes = tuple(mode(draw(st.integers(1, n_gpus)), draw(st.floats(1.0, 50.0)), draw(st.floats(50.0, 900.0)))
                      for _ in range(draw(st.integers(2, 3))))
        day_tokens = max(m.tokens_per_s for m in modes) * SECONDS_PER_HOUR * 24.0
        jobs.append(tiny_job(f"J{j}", segments=2, modes=modes, restart_hours=draw(st.floats(0.0, 1.5)),
                             initial_mode=draw(st.sampled_from([PAUSE, *range(len(modes))])),
                             tranche_tokens=draw(st.floats(0.0, 0.4)) * day_tokens / n_jobs))
    inst = tiny_instance(jobs, price=draw(st.lists(st.floats(-60.0, 150.0), min_size=12, max_size=12)),
                         shape=draw(st.lists(st.floats(0.0, 1.0), min_size=12, max_size=12)), n_gpus=n_gpus,
                         slot_hours=2.0)
    start = draw(st.integers(0, 11))
    end = min(12, start + draw(st.integers(1, 4)))
    highest = max(float(simulate(inst, schedule).flows.grid_mw[start:end].max()) for schedule in _schedules(inst)
                  if simulate(inst, schedule).metrics.capacity_ok)
    call = GridCall(program="bip", notice_slot=0, start_slot=start, end_slot=end,
                    baseline_mw=np.full(end - start, highest),
                    limit_mw=np.full(end - start, draw(st.floats(0.4, 1.0)) * highest),
                    payment_usd_per_mwh=draw(st.sampled_from([500.0, 0.0])))
    return dataclasses.replace(inst, grid_calls=(call,))


def _schedules(inst: Instance) -> list[list[list[int]]]:
    rows = [list(itertools.product([*range(job.n_modes), PAUSE], repeat=job.segments)) for job in inst.jobs]
    return [[list(row) for row in choice] for choice in itertools.product(*rows)]


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_called_days())
def test_the_exact_oracle_finds_the_brute_force_minimum_with_a_call(inst: Instance) -> None:
    """On random tiny days with a call, the exact oracle (label search, and branch and bound alone) and the textbook
    MILP find the least objective over every schedule that meets the targets and delivers the call, or prove that none
    does."""
    scored = [m.objective_usd for m in (simulate(inst, s).metrics for s in _schedules(inst))
              if m.feasible and m.calls_delivered]
    for name, options in {"exact": {}, "exact, branch and bound": {"labeling": False},
                          "textbook": {"method": "textbook"}}.items():
        result = oracle.solve(inst, mip_gap=1e-9, time_limit_s=60, **options)
        if not scored:
            assert result.status == "infeasible" and result.reason, (name, result.objective_usd)
        else:
            assert result.status == "optimal", (name, result.reason)
            assert result.objective_usd == pytest.approx(min(scored), rel=1e-6, abs=1e-6), name
            assert result.metrics.calls_delivered
