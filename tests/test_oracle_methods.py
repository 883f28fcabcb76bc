"""The one entry of the oracle (oracle/entry.py): every method on days, fleets and sites, one result type.

- the 2048 reference day through ``solve`` (auto and exact) gives the pinned optimum and schedule;
- one site: the decomposition equals the exact day oracle on small days;
- the fleet, sites3 and sites-fleet reference days: a status, a proven bound and its gap, the objective equal to
  the simulator's replay of the schedule and its sites;
- hypothesis: two sites with fleet workloads (a fine-tuning window, inference at one site, an idle-GPU value):
  the decomposition's bound ≤ the brute-force optimum of every schedule ≤ its objective;
- a method that cannot answer a request is one InputError line.
"""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aidc_env.case import build_instance
from aidc_env.errors import EXIT_BAD_INPUT, InputError, run_cli
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.schedule import read_schedule
from aidc_env.sites import Site, SiteNetwork
from oracle import Decomposition, solve
from oracle import __main__ as oracle_cli
from oracle.result import relative_gap
from tests.conftest import mode, simulate_at, tiny_instance, tiny_job
from tests.test_fleet import finetuning_job, inference
from tests.test_oracle import tiny_days
from tests.test_regression import REFERENCE_ORACLE_SCHEDULE, REFERENCE_ORACLE_USD

TOL_USD = 1e-6


def check_replay(inst: Instance, result) -> None:
    """The result's objective is the simulator's replay of its schedule and sites, which is feasible."""
    replay = simulate_at(inst, result.schedule, result.sites).metrics
    assert replay.feasible
    assert replay.objective_usd == pytest.approx(result.objective_usd, rel=1e-9, abs=1e-9)
    assert result.metrics.objective_usd == pytest.approx(result.objective_usd, rel=1e-12, abs=1e-12)
    assert result.best_bound_usd <= result.objective_usd + TOL_USD
    assert result.gap == relative_gap(result.objective_usd, result.best_bound_usd)


# ------------------------------------------------------------------------- one site


@pytest.mark.parametrize("method", ["auto", "exact"])
def test_the_reference_day_keeps_its_pins(method):
    result = solve("2048", method=method)
    assert result.status == "optimal" and result.method == "exact" and result.formulation == "fast"
    assert result.objective_usd == REFERENCE_ORACLE_USD
    assert result.schedule == REFERENCE_ORACLE_SCHEDULE and result.sites is None
    assert result.to_dict()["sites"] is None


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_days())
def test_one_site_decomposition_equals_the_exact_oracle(inst):
    exact = solve(inst, method="exact", mip_gap=1e-9, time_limit_s=60)
    other = solve(inst, method="decomposition", mip_gap=1e-9, time_limit_s=60)
    assert other.method == "decomposition" and other.sites is None
    if exact.status == "infeasible":
        assert other.status == "infeasible" and other.schedule is None and other.reason
        return
    assert exact.status == other.status == "optimal", other.reason
    assert other.objective_usd == pytest.approx(exact.objective_usd, rel=1e-7, abs=1e-7)
    check_replay(inst, other)


# ------------------------------------------------------------------------- the bundled cases


def test_fleet_reference_day():
    inst = build_instance("fleet")
    result = solve(inst, time_limit_s=60)
    assert result.method == "decomposition" and result.status == "optimal" and result.gap <= 1e-4
    check_replay(inst, result)
    assert result.metrics.inference_served and result.metrics.idle_value_usd > 0


def test_sites3_reference_day_has_a_proven_gap():
    """sites3's reference day at K = 4 within 10 s: a schedule with moves allowed, a proven bound within 5 % (0.3 %
    on a quiet machine)."""
    inst = build_instance("sites3", segments=4)
    result = solve(inst, time_limit_s=10)
    assert result.method == "decomposition" and result.status in ("optimal", "time_limit")
    assert result.gap is not None and result.gap <= 0.05
    check_replay(inst, result)
    assert [len(row) for row in result.sites] == [job.segments for job in inst.jobs]
    assert set(result.site_names) == {site.name for site in inst.sites}


def test_sites_fleet_reference_day(tmp_path):
    """The sites-fleet case: inference at two sites, fine-tuning windows, an idle value; proven optimal in seconds;
    its JSON is a schedule file the simulator reads back."""
    inst = build_instance("sites-fleet")
    assert inst.has_sites and inst.has_fleet_workloads
    assert sorted(service.site for service in inst.inference) == [0, 1]
    result = solve(inst, time_limit_s=60)
    assert result.method == "decomposition" and result.status == "optimal" and result.gap <= 1e-4
    check_replay(inst, result)
    m = result.metrics
    assert m.inference_served and m.idle_value_usd > 0 and all(site.capacity_ok for site in m.sites)
    for job, row in zip(inst.jobs, result.schedule, strict=True):
        running = np.asarray(row) != PAUSE
        assert not np.any(running & ~inst.allowed_segments(job))  # a fine-tuning job runs inside its window only
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(result.to_dict()))
    schedule = read_schedule(path, inst)
    assert simulate_at(inst, schedule.modes, schedule.sites).metrics.objective_usd == pytest.approx(
        result.objective_usd, rel=1e-12)


def test_cli_answers_sites_and_fleet_through_one_path(capsys):
    for case in ("sites-fleet", "fleet"):
        assert run_cli(oracle_cli.main, ["--case", case, "--time-limit", "60", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["method"] == "decomposition" and out["status"] == "optimal"
        assert out["metrics"]["objective_usd"] == pytest.approx(out["objective_usd"], rel=1e-12)
        assert (out["sites"] is None) == (case == "fleet")


# ------------------------------------------------------------------------- two sites, fleet workloads, brute force


def _site(draw, name: str, n_gpus: int) -> Site:
    return Site(name=name, n_gpus=n_gpus, pue=1.5, idle_kw_per_gpu=100.0, rated_kw_per_gpu=500.0,
                plant=draw(st.sampled_from(["solar", "none"])), renewable_ratio=draw(st.sampled_from([0.0, 1.0])),
                ppa_usd_per_mwh=30.0, curtailment_penalty_usd_per_mwh=10.0,
                price_node=draw(st.sampled_from(["SCE", "PGE"])),
                price_usd_per_mwh=draw(st.lists(st.floats(-50, 300), min_size=4, max_size=4)),
                renewable_shape=draw(st.lists(st.floats(0, 1), min_size=4, max_size=4)))


SHARES = (0.0, 0.1, 0.3, 0.45, 0.7)
"""A target's share of what the job's fastest mode makes in the horizon (or its window): none, or one a MILP's
scaled row holds (a target of 1e-60 tokens is below any solver's tolerance)."""


@st.composite
def two_sites_with_fleet_workloads(draw) -> Instance:
    """Two sites of 2-5 GPUs over four 6-hour slots: a pre-training job (1-2 modes, 2 segments), a fine-tuning job
    with a window (0-1), inference at one site, an idle value, prices down to −50 $/MWh, transfers up to 4 h."""
    modes = tuple(mode(draw(st.integers(1, 3)), draw(st.floats(1, 100)), draw(st.floats(50, 2000)))
                  for _ in range(draw(st.integers(1, 2))))
    rate = max(m.tokens_per_s for m in modes)
    jobs = [tiny_job("P", segments=2, modes=modes, initial_mode=draw(st.integers(PAUSE, 0)),
                     tranche_tokens=draw(st.sampled_from(SHARES)) * rate * SECONDS_PER_HOUR * 24,
                     restart_hours=draw(st.floats(0, 2)))]
    if draw(st.booleans()):
        release = draw(st.integers(0, 1))
        ft_rate = draw(st.floats(1, 50))
        jobs.append(finetuning_job("F", segments=2, release=2 * release, deadline=4, modes=(
            mode(1, ft_rate, draw(st.floats(50, 500))),), restart_hours=0.5,
            tranche_tokens=draw(st.sampled_from(SHARES)) * ft_rate * SECONDS_PER_HOUR * 12 * (2 - release)))
    sites = (_site(draw, "a", draw(st.integers(2, 5))), _site(draw, "b", draw(st.integers(2, 5))))
    first = sites[0]
    inst = tiny_instance(jobs, list(first.price_usd_per_mwh), list(first.renewable_shape), n_gpus=first.n_gpus,
                         slot_hours=6.0, renewable_ratio=first.renewable_ratio)
    served = draw(st.integers(0, 1))
    load = draw(st.lists(st.integers(0, max(sites[served].n_gpus - 1, 0)), min_size=4, max_size=4))
    network = SiteNetwork(sites=sites, home=tuple(draw(st.integers(0, 1)) for _ in jobs),
                          transfer_hours=tuple(draw(st.floats(0, 4)) for _ in jobs))
    services = (dataclasses.replace(inference(load, kw=draw(st.floats(0, 500))), site=served),) if max(load) else ()
    return dataclasses.replace(inst, renewable_capacity_mw=None, network=network, inference=services,
                               idle_value_usd_per_gpu_hour=draw(st.sampled_from([0.0, 0.5, 3.0])))


def brute_force(inst: Instance) -> float | None:
    """The least objective of every feasible (schedule, sites), each scored by the simulator (None: none)."""
    per_job = []
    for job in inst.jobs:
        window = inst.allowed_segments(job)
        options = [[(c, s) for c in ([*range(job.n_modes), PAUSE] if window[k] else [PAUSE]) for s in range(2)]
                   for k in range(job.segments)]
        per_job.append(list(itertools.product(*options)))
    best = None
    for combo in itertools.product(*per_job):
        schedule, sites = [[c for c, _ in row] for row in combo], [[s for _, s in row] for row in combo]
        metrics = simulate_at(inst, schedule, sites).metrics
        if metrics.feasible and (best is None or metrics.objective_usd < best):
            best = metrics.objective_usd
    return best


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(two_sites_with_fleet_workloads())
def test_two_sites_with_fleet_workloads_against_brute_force(inst):
    optimum = brute_force(inst)
    result = Decomposition(inst).solve(time_limit_s=30, mip_gap=1e-9)
    if optimum is None:
        assert result.status == "infeasible" and result.schedule is None, result.reason
        return
    assert result.schedule is not None, result.reason
    check_replay(inst, result)
    assert result.best_bound_usd <= optimum + TOL_USD * max(1.0, abs(optimum))
    assert result.objective_usd >= optimum - TOL_USD * max(1.0, abs(optimum))
    assert result.status == "optimal", result.reason  # tiny: the decomposition proves the brute force's optimum
    assert result.objective_usd == pytest.approx(optimum, rel=1e-6, abs=1e-6)


# ------------------------------------------------------------------------- refusals


def test_a_method_that_cannot_answer_is_one_input_error_line(capsys):
    fleet = build_instance("fleet")
    with pytest.raises(InputError, match="exact solves one site") as error:
        solve(fleet, method="exact")
    assert error.value.field == "method"
    with pytest.raises(InputError, match="must be one of auto, exact, decomposition, textbook"):
        solve("2048", method="magic")
    with pytest.raises(InputError, match="runs HiGHS only"):
        solve(fleet, solver="cbc")
    with pytest.raises(InputError, match="textbook solves the day MILP of one site") as error:
        solve(build_instance("sites3"), method="textbook")
    assert error.value.field == "method"
    for argv in (["--case", "fleet", "--method", "exact"], ["--case", "sites-fleet", "--method", "exact"],
                 ["--case", "sites3", "--method", "textbook"], ["--case", "fleet", "--method", "textbook"]):
        assert run_cli(oracle_cli.main, argv) == EXIT_BAD_INPUT
        err = capsys.readouterr().err
        assert err.startswith("error: method") and err.count("\n") == 1, err
