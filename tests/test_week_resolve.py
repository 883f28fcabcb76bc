"""MPC's re-solves inside a horizon take the oracle's multi-day settings (oracle/data.py: span_days).

A re-solve from a re-planning point inside a week is a flat sub-instance (agents/mpc.py: ``sub_instance``,
``horizon_days=1``, not whole days). The oracle chooses its multi-day settings (restricted completion tables,
the first threshold steps, the tolerance stop) by the days the instance spans, so such a sub-instance longer than
a day is solved like a week, and every one-day instance and sub-instance of one keeps the day's path (its numbers
pinned by tests/test_regression.py). Checked: the span rule; that a mid-horizon re-solve takes the restricted
tables and returns the brute force's optimum and the flat MILP's (branch and bound, no label search, no time
limit in practice) on tiny three-day instances and on a two-day instance of the 2048 case; that MPC on a day
never leaves the day's path.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.mpc import mpc_schedule, replanning_slots, rest_of_horizon
from aidc_env.case import build_instance
from aidc_env.instance import PAUSE
from aidc_env.simulator import simulate
from oracle.completion import CompletionBound, RestrictedCompletionBound
from oracle.data import span_days
from oracle.model import OracleModel
from oracle.rolling import RollingOracle
from tests.conftest import mode, tiny_instance, tiny_job
from tests.test_horizon_tables import priced_search
from tests.test_oracle import REPLAY_RTOL, brute_force

DAYS = 3
SLOTS_PER_DAY = 6
SLOT_HOURS = 4.0
"""Tiny horizons of 3 days × 6 slots of 4 h (real days of 24 h, so that a rest of the horizon spans > 1 day)."""
EXACT_GAP = 1e-9
"""Gap of the solves compared here: exact to float rounding."""


@st.composite
def tiny_rest_of_three_days(draw):
    """A three-day instance (two segments a day per job) and its rest from a re-planning point at noon of day 1
    or 2 (slot 3 or 9), from a drawn state: each job's current choice and a share of its tranche already made."""
    n_jobs = draw(st.integers(1, 2))
    n_gpus = draw(st.integers(2, 6))
    jobs = []
    for j in range(n_jobs):
        modes = tuple(mode(draw(st.integers(1, n_gpus)), draw(st.floats(1.0, 50.0)), draw(st.floats(50.0, 900.0)))
                      for _ in range(2))
        max_tokens = max(m.tokens_per_s for m in modes) * 3600.0 * SLOT_HOURS * DAYS * SLOTS_PER_DAY
        jobs.append(tiny_job(f"J{j}", segments=2 * DAYS, modes=modes, initial_mode=draw(st.sampled_from([PAUSE, 0, 1])),
                             restart_hours=draw(st.floats(0.0, 3.0)),
                             tranche_tokens=draw(st.floats(0.05, 0.8)) * max_tokens / n_jobs))
    slots = DAYS * SLOTS_PER_DAY
    price = draw(st.lists(st.floats(-60.0, 150.0), min_size=slots, max_size=slots))
    shape = draw(st.lists(st.floats(0.0, 1.0), min_size=slots, max_size=slots))
    inst = dataclasses.replace(tiny_instance(jobs, price=price, shape=shape, n_gpus=n_gpus, slot_hours=SLOT_HOURS),
                               horizon_days=DAYS)
    start = draw(st.sampled_from([3, 9]))
    current = [draw(st.sampled_from([PAUSE, 0, 1])) for _ in jobs]
    made = [draw(st.floats(0.0, 0.6)) * job.tranche_tokens for job in jobs]
    sub = rest_of_horizon(inst, start, current, made, ([inst.price_usd_per_mwh[start:]], [inst.renewable_shape[start:]]))
    return inst, start, sub


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=tiny_rest_of_three_days())
def test_a_mid_horizon_resolve_takes_the_horizon_path_and_reaches_the_optimum(case):
    """The rest from noon of day 1 or 2 spans 2.5 or 1.5 days: the restricted tables; the oracle's objective equals
    the brute force's and the flat MILP's (branch and bound on the whole model), and the simulator's replay."""
    inst, start, sub = case
    assert sub.horizon_days == 1 and span_days(sub) == pytest.approx((inst.slots - start) * SLOT_HOURS / 24.0)
    assert span_days(sub) > 1
    assert isinstance(priced_search(sub).completion, RestrictedCompletionBound)
    best = brute_force(sub)
    r = OracleModel(sub).solve(mip_gap=EXACT_GAP, time_limit_s=60)
    flat = OracleModel(sub, reduce=False, labeling=False, race_after_s=None).solve(mip_gap=EXACT_GAP, time_limit_s=60)
    if best is None:
        assert r.status == "infeasible" and flat.status == "infeasible"
        return
    assert r.status == "optimal" and flat.status == "optimal", (r.reason, flat.reason)
    assert r.objective_usd == pytest.approx(best, rel=1e-6, abs=1e-6)
    assert flat.objective_usd == pytest.approx(best, rel=1e-6, abs=1e-6)
    assert r.metrics.operating_cost_usd == pytest.approx(r.objective_usd, rel=REPLAY_RTOL)
    assert r.metrics.tranches_met


def test_span_days_keeps_every_day_and_its_sub_instances_on_the_day_path():
    """A day (and every rest of it) spans 1 day; a horizon its D days; a rest of a horizon its hours / 24 when it
    is longer than a day, else 1."""
    day = build_instance("2048")
    assert span_days(day) == 1.0
    for start in replanning_slots(day):
        sub = rest_of_horizon(day, start, [job.initial_mode for job in day.jobs], [0.0] * len(day.jobs),
                              ([day.price_usd_per_mwh[start:]], [day.renewable_shape[start:]]))
        assert span_days(sub) == 1.0
    two = build_instance("2048", day="2023-04-15", horizon_days=2)
    assert span_days(two) == 2.0
    rests = {start: rest_of_horizon(two, start, [job.initial_mode for job in two.jobs], [0.0] * len(two.jobs),
                                    ([two.price_usd_per_mwh[start:]], [two.renewable_shape[start:]])) for start in (0, 40, 96, 104)}
    assert {start: span_days(sub) for start, sub in rests.items()} == {
        0: 2.0, 40: pytest.approx(152 / 96), 96: 1.0, 104: 1.0}
    assert type(priced_search(rests[104]).completion) is CompletionBound  # less than a day left: the day's tables
    assert isinstance(priced_search(rests[40]).completion, RestrictedCompletionBound)


def test_a_two_day_resolve_of_the_2048_case_equals_the_flat_milp():
    """The 2048 case over two days (K = 4 a day), re-solved from 06:00 of day 1 in a state off its initial one:
    the label search (restricted tables) proves the same optimum as branch and bound on the flat model."""
    two = build_instance("2048", day="2023-04-15", horizon_days=2, segments=4)
    start = 24  # the first re-planning point after slot 0 (a segment is 24 slots)
    assert start in replanning_slots(two)
    made = [0.2 * job.tranche_tokens for job in two.jobs]
    sub = rest_of_horizon(two, start, [0] * len(two.jobs), made, ([two.price_usd_per_mwh[start:]], [two.renewable_shape[start:]]))
    assert span_days(sub) == pytest.approx(1.75)
    r = OracleModel(sub).solve(mip_gap=EXACT_GAP, time_limit_s=120)
    flat = OracleModel(sub, reduce=False, labeling=False, race_after_s=None).solve(mip_gap=EXACT_GAP, time_limit_s=120)
    assert r.status == "optimal" and r.proof == "label-setting"
    assert flat.status == "optimal"
    assert r.objective_usd == pytest.approx(flat.objective_usd, rel=1e-8)
    assert r.metrics.operating_cost_usd == pytest.approx(r.objective_usd, rel=REPLAY_RTOL)


def test_mpc_on_a_day_stays_on_the_day_path():
    """Every re-solve of MPC on a one-day instance spans one day (the oracle's day settings, bit for bit), and
    with perfect information MPC equals the oracle's optimum."""
    day = build_instance("2048", segments=4)
    oracle = RollingOracle()
    schedule = mpc_schedule(day, "perfect", oracle=oracle, reuse_plans=False)
    assert len(oracle.log) == len(replanning_slots(day))
    assert all(entry["span_days"] == 1.0 and entry["status"] == "optimal" for entry in oracle.log)
    best = OracleModel(day).solve()
    assert simulate(day, schedule).metrics.operating_cost_usd == pytest.approx(best.objective_usd, rel=1e-6)
    assert np.isfinite(oracle.seconds).all()
