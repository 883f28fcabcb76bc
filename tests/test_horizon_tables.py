"""The restricted, finer completion tables of horizons (oracle/completion.py: RestrictedCompletionBound).

On a horizon of several days the label search prunes with per-job completion tables restricted to the
(block, state) pairs whose Lagrangian through-bound is at most a ceiling, on a finer grid. Checked here
against every schedule of tiny two-day instances (enumerated): for every schedule costing at most the ceiling,
at every block, the cost so far plus the table's bound never exceeds the schedule's cost; the oracle on those
horizons reaches the brute force's optimum, its objective equal to the simulator's replay; a day keeps the
day's tables.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aidc_env.instance import PAUSE
from oracle.completion import CompletionBound, RestrictedCompletionBound
from oracle.dual import lagrangian_prices
from oracle.formulations import tranche_tokens, usable_state_ids
from oracle.labeling import TOKEN_RTOL, LabelSearch
from oracle.model import OracleModel
from tests.conftest import mode, tiny_instance, tiny_job
from tests.test_oracle import REPLAY_RTOL, brute_force

SLOTS = 12
"""Slots of a tiny two-day horizon (6 a day)."""
BOUND_SLACK = 1e-9
"""Relative slack of the bound checks (float rounding of sums in a different order)."""


@st.composite
def tiny_two_days(draw):
    """Two-day instances of one or two jobs with 1-2 segments a day, a tranche of up to 90 % of what fits."""
    n_jobs = draw(st.integers(1, 2))
    n_gpus = draw(st.integers(2, 6))
    jobs = []
    for j in range(n_jobs):
        n_modes = draw(st.integers(2, 3))
        modes = tuple(mode(draw(st.integers(1, n_gpus)), draw(st.floats(1.0, 50.0)), draw(st.floats(50.0, 900.0)))
                      for _ in range(n_modes))
        max_tokens = max(m.tokens_per_s for m in modes) * 3600.0 * 24.0
        jobs.append(tiny_job(f"J{j}", segments=2 * draw(st.sampled_from([1, 2])), modes=modes,
                             initial_mode=draw(st.sampled_from([PAUSE, *range(n_modes)])),
                             restart_hours=draw(st.floats(0.0, 1.5)),
                             tranche_tokens=draw(st.floats(0.05, 0.9)) * max_tokens / n_jobs))
    price = draw(st.lists(st.floats(-60.0, 150.0), min_size=SLOTS, max_size=SLOTS))
    shape = draw(st.lists(st.floats(0.0, 1.0), min_size=SLOTS, max_size=SLOTS))
    inst = tiny_instance(jobs, price=price, shape=shape, n_gpus=n_gpus, slot_hours=24.0 / SLOTS)
    return dataclasses.replace(inst, horizon_days=2)


def priced_search(inst, prices: list[float] | None = None) -> LabelSearch:
    """The oracle's label search of ``inst`` at the Lagrangian dual's token prices, or at ``prices`` × the day's
    cost range per tranche (any μ ≥ 0 gives valid bounds; large ones make the tables bind)."""
    data = OracleModel(inst).data
    ids = usable_state_ids(data, True)
    search = LabelSearch(data, data.joint_states[ids], data.block_cost_usd[:, ids], None, tranche_tokens(data))
    if prices is None:
        search.price(lagrangian_prices(search).mu_per_token)
    else:
        spread = float(np.ptp(search.cost.sum(axis=0))) + 1.0
        search.price(np.asarray(prices[:len(inst.jobs)]) * spread / np.maximum(search.tranche, 1.0))
    return search


def every_schedule(search: LabelSearch):
    """Every path of the network: per block its states, costs so far and capped tokens so far (arrays over paths)."""
    need = search.tranche
    state = np.arange(search.n_states)
    cost = search.cost[0].copy()
    tokens = np.minimum(search.gain[0][0], need)
    prefixes = [(state, cost, tokens)]
    for b in range(1, search.n_blocks):
        parent, new = np.nonzero(search.allowed[b][state])
        state = new
        cost = cost[parent] + search.cost[b, new]
        tokens = np.minimum(tokens[parent] + search.gain[b][prefixes[-1][0][parent], new], need)
        prefixes = [(s[parent], c[parent], t[parent]) for s, c, t in prefixes] + [(state, cost, tokens)]
    return prefixes


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_two_days(), share=st.floats(0.2, 1.0), grid_points=st.sampled_from([2, 5, 40]),
       penalty=st.sampled_from([1.0, 3.0, 10.0]),
       prices=st.none() | st.lists(st.floats(0.05, 2.0), min_size=2, max_size=2))
def test_restricted_tables_never_exceed_a_schedule_within_the_ceiling(inst, share, grid_points, penalty, prices):
    """For every tranche-meeting schedule costing ≤ the ceiling and every block b: cost up to b + the restricted
    bound at b ≤ the schedule's cost (so the bound never exceeds the cheapest completion within the ceiling)."""
    search = priced_search(inst, prices)
    assert isinstance(search.completion, RestrictedCompletionBound)
    prefixes = every_schedule(search)
    total = prefixes[-1][1] + search.constant
    met = np.all(prefixes[-1][2] >= search.tranche * (1 - TOKEN_RTOL), axis=1)
    if not met.any():
        return
    lagrangian = float(search.through.min())
    ceiling = lagrangian + share * (float(total[met].max()) - lagrangian)
    table = RestrictedCompletionBound(search, *search._tokens, ceiling, penalty_factor=penalty,
                                      grid_points=grid_points, grid_factor=1)
    inside = met & (total <= ceiling)
    for b, (state, cost, tokens) in enumerate(prefixes):
        bound = cost[inside] + search.constant + table.bound(b, state[inside], tokens[inside])
        assert np.all(bound <= total[inside] + BOUND_SLACK * np.maximum(1.0, np.abs(total[inside]))), b
    assert search.lower_bound_usd <= float(total[met].min()) * (1 + BOUND_SLACK) + BOUND_SLACK


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_two_days())
def test_the_horizon_oracle_reaches_the_brute_force_optimum(inst):
    """The oracle on a two-day horizon (restricted tables) returns the brute force's optimum, and its objective
    is the simulator's replay of its schedule."""
    best = brute_force(inst)
    r = OracleModel(inst).solve(mip_gap=1e-9, time_limit_s=60)
    if best is None:
        assert r.status == "infeasible"
        return
    assert r.status == "optimal", r.reason
    assert r.objective_usd == pytest.approx(best, rel=1e-6, abs=1e-6)
    assert r.metrics.operating_cost_usd == pytest.approx(r.objective_usd, rel=REPLAY_RTOL)
    assert r.metrics.tranches_met


def test_a_search_beyond_the_ceiling_rebuilds_the_tables():
    """A search at a threshold above the tables' ceiling rebuilds them first (they would not be valid there)."""
    full = mode(4, 10.0, 2000.0)
    jobs = [tiny_job("A", segments=4, modes=(mode(2, 6.0, 900.0), full), initial_mode=PAUSE, restart_hours=0.5,
                     tranche_tokens=10.0 * 3600.0 * 10)]
    price = [10.0, 80.0, 30.0, 120.0, 5.0, 60.0, 40.0, 20.0, 90.0, 15.0, 70.0, 25.0]
    inst = dataclasses.replace(tiny_instance(jobs, price=price, shape=[0.3] * SLOTS, slot_hours=2.0), horizon_days=2)
    search = priced_search(inst)
    ceiling = search.completion.ceiling
    assert len(search.table_log) == 1
    outcome = search.run(ceiling + 1000.0)
    assert len(search.table_log) == 2 and search.completion.ceiling >= ceiling + 1000.0
    assert outcome.status == "optimal"
    assert outcome.objective_usd == pytest.approx(brute_force(inst), rel=1e-9)


def test_a_day_keeps_the_day_tables():
    """D = 1 takes the day's path: the unrestricted tables (tests/test_regression.py pins its numbers)."""
    job = tiny_job("A", segments=2, tranche_tokens=10.0 * 3600.0 * 6)
    inst = tiny_instance([job], price=[10.0, 20.0, 5.0, 40.0], shape=[0.1, 0.2, 0.3, 0.0], slot_hours=6.0)
    search = priced_search(inst)
    assert type(search.completion) is CompletionBound and search.table_log == []
