"""Grid calls in the exact day oracle: a call's limit and payment priced into the joint states' block costs
(oracle.data.call_costs). Its answers equal the textbook MILP's and brute force, an impossible call is refused with its
reason, and what the joint states cannot price (power caps, tiers, a training value) stays with the textbook MILP."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

import oracle
from aidc_env.case import build_instance, load_case
from aidc_env.instance import PAUSE, Instance
from aidc_env.schema.case import CallSpec, PowerCaps
from aidc_env.simulator import simulate
from oracle.call_rows import joint_state_calls
from oracle.entry import route
from oracle.model import OracleModel
from oracle.rolling import RollingOracle

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
