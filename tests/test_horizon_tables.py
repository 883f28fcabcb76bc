"""The restricted, finer completion tables of horizons (oracle/completion.py: RestrictedCompletionBound).

On a horizon of several days the label search prunes with per-job completion tables restricted to the
(block, state) pairs whose Lagrangian through-bound is at most a ceiling, on a finer grid. Checked here
against every schedule of tiny two-day instances (enumerated): for every schedule costing at most the ceiling,
at every block, the cost so far plus the table's bound never exceeds the schedule's cost; the oracle on those
horizons reaches the brute force's optimum, its objective equal to the simulator's replay; a day keeps the
day's tables; the tables built row by row equal, to the bit, the reference built one transition variant at a time
over whole blocks (the first implementation, kept here), the dual's shortest paths equal their reference, and the
screen of the label extensions never changes a search.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.mpc import rest_of_horizon
from aidc_env.case import build_instance
from aidc_env.instance import PAUSE
from oracle.completion import RESTRICT_MARGIN, CompletionBound, RestrictedCompletionBound
from oracle.reduction import lagrangian_prices
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
    cheapest = float(total[met].min())  # may be negative (negative prices): the slack is on its size
    assert search.lower_bound_usd <= cheapest + BOUND_SLACK * max(1.0, abs(cheapest))


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


class ReferenceTables(RestrictedCompletionBound):
    """The restricted tables as first written (one transition variant at a time over whole blocks): the reference
    that the row-by-row build of :meth:`RestrictedCompletionBound._restricted_back` must equal to the bit."""

    def _restricted_back(self, j, b, cost, after, opens, kept, restarted, first, last):
        into, out = self.inside[b], self.inside[b - 1]
        width = last - first + 1
        n_jobs = kept.shape[1]
        best = np.full((out.size, width), np.inf)
        if into.size == 0 or out.size == 0:
            return best
        step, penalty, grid = self.step[j], self.penalty[j], self.grid[j]
        start = int(self.first[j][b])
        span = after.shape[1]
        points = grid[first:last + 1]
        position = self.row[b - 1]
        choices = self._choices
        for changed in range(1 << n_jobs):
            if any((changed >> i) & 1 and not opens[i] for i in range(n_jobs)):
                continue
            gain = np.zeros((into.size, n_jobs))
            for i in np.flatnonzero(opens):
                gain[:, i] = (restarted if (changed >> i) & 1 else kept)[into, i]
            others = sum((self.mu[i] * gain[:, i] for i in range(n_jobs) if i != j), np.zeros(into.size))
            offset = cost[into] - others
            whole = np.floor(gain[:, j] / step).astype(np.int64)
            part = penalty * np.maximum(gain[:, j] - whole * step, 0.0)
            value = np.empty((into.size, width))
            for c in np.unique(whole).tolist():
                rows = np.flatnonzero(whole == c)
                table = after[rows]
                shift = c + 1 + start - first
                mid_lo, mid_hi = max(0, shift), min(width - 1, span - 2 + shift)
                shifted = np.empty((rows.size, width))
                if mid_lo <= mid_hi:
                    np.maximum(table[:, mid_lo - shift:mid_hi - shift + 1],
                               table[:, mid_lo - shift + 1:mid_hi - shift + 2] - part[rows, None],
                               out=shifted[:, mid_lo:mid_hi + 1])
                below = min(max(0, shift), width)
                if below:
                    x = np.maximum(points[None, :below] - gain[rows, j][:, None], 0.0)
                    shifted[:, :below] = np.maximum(
                        table[:, :1] - penalty * np.maximum(grid[start] - x, 0.0),
                        table[:, 1:2] - penalty * (grid[start + 1] - x))
                beyond = max(mid_hi + 1, below)
                if beyond < width:
                    x = points[None, beyond:] - gain[rows, j][:, None]
                    shifted[:, beyond:] = table[:, -1:] + penalty * (x - grid[start + span - 1])
                value[rows] = shifted
            value += offset[:, None]
            if changed == 0:
                rows = np.flatnonzero(position[into] >= 0)
                target = position[into[rows]]
                best[target] = np.minimum(best[target], value[rows])
                continue
            kept_jobs = [i for i in range(n_jobs) if not (changed >> i) & 1]
            if not kept_jobs:
                np.minimum(best, value.min(axis=0)[None, :], out=best)
                continue
            k = kept_jobs[0]
            mine, theirs = choices[into, k], choices[out, k]
            for c in np.unique(mine):
                target = np.flatnonzero(theirs == c)
                if target.size:
                    best[target] = np.minimum(best[target], value[mine == c].min(axis=0)[None, :])
        return best


def assert_same_tables(search: LabelSearch, ceiling: float, **options) -> None:
    """The row-by-row tables equal the reference's to the bit (every job, every block, the windows too)."""
    fast = RestrictedCompletionBound(search, *search._tokens, ceiling, **options)
    slow = ReferenceTables(search, *search._tokens, ceiling, **options)
    assert fast.tracked == slow.tracked
    for j in fast.tracked:
        assert np.array_equal(fast.first[j], slow.first[j])
        for b, (a, r) in enumerate(zip(fast.tables[j], slow.tables[j], strict=True)):
            assert a.shape == r.shape and np.array_equal(a, r), (j, b)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_two_days(), share=st.floats(0.0, 1.0), grid_points=st.sampled_from([2, 5, 40]),
       prices=st.none() | st.lists(st.floats(0.05, 2.0), min_size=2, max_size=2))
def test_row_by_row_tables_equal_the_reference_to_the_bit(inst, share, grid_points, prices):
    """One or two jobs, segments opening together or not (1 or 2 a day), any ceiling up to the dearest schedule."""
    search = priced_search(inst, prices)
    lagrangian = float(search.through.min())
    ceiling = lagrangian + share * (search.most_cost_usd - lagrangian)
    assert_same_tables(search, ceiling, grid_points=grid_points, grid_factor=1)


def two_days_of_the_2048_case():
    """The 2048 case over two days (K = 12), re-solved from 10:00 of day 1 off its initial state, 30 % made."""
    two = build_instance("2048", day="2023-04-15", horizon_days=2)
    start = 40
    return rest_of_horizon(two, start, [0] * len(two.jobs), [0.3 * job.tranche_tokens for job in two.jobs],
                           ([two.price_usd_per_mwh[start:]], [two.renewable_shape[start:]]))


def test_row_by_row_tables_equal_the_reference_on_two_days_of_the_2048_case():
    """The 2048 case over two days (K = 12, 220 joint states), re-solved from 10:00 of day 1 off its initial state,
    at the oracle's first ceiling and one three times as far above the Lagrangian bound."""
    search = priced_search(two_days_of_the_2048_case())
    lagrangian = float(search.through.min())
    for margin in (RESTRICT_MARGIN, 3 * RESTRICT_MARGIN):
        assert_same_tables(search, lagrangian + margin * abs(lagrangian))


def reference_lagrangian(search: LabelSearch, mu: np.ndarray) -> tuple[float, float, np.ndarray]:
    """:meth:`LabelSearch.lagrangian` as first written (gain·μ and the allowed mask applied block by block)."""
    fwd = search.cost[0] - search.gain[0][0] @ mu
    parents = []
    for b in range(1, search.n_blocks):
        length = np.where(search.allowed[b], fwd[:, None] - search.gain[b] @ mu, np.inf)
        parent = np.argmin(length, axis=0)
        parents.append(parent)
        fwd = search.cost[b] + length[parent, np.arange(search.n_states)]
    state = int(np.argmin(fwd))
    path = [state]
    for parent in reversed(parents):
        path.append(int(parent[path[-1]]))
    path.reverse()
    tokens = search.gain[0][0, path[0]].copy()
    for b in range(1, search.n_blocks):
        tokens += search.gain[b][path[b - 1], path[b]]
    return float(fwd[state]) + float(mu @ search.tranche) + search.constant, search.path_cost(path), tokens


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_two_days(), prices=st.lists(st.floats(0.0, 2.0), min_size=2, max_size=2))
def test_the_lagrangian_shortest_path_equals_the_reference_to_the_bit(inst, prices):
    """The dual's shortest path reads −gain·μ once per distinct block: the same bound, cost and tokens, bit for bit
    (so the same μ, which the day's path shares: tests/test_regression.py); the tokens still reachable too."""
    search = priced_search(inst)
    spread = float(np.ptp(search.cost.sum(axis=0))) + 1.0
    mu = np.asarray(prices[:len(inst.jobs)]) * spread / np.maximum(search.tranche, 1.0)
    value, cost, tokens = search.lagrangian(mu)
    ref_value, ref_cost, ref_tokens = reference_lagrangian(search, mu)
    assert value == ref_value and cost == ref_cost and np.array_equal(tokens, ref_tokens)
    reachable = np.zeros_like(search.reachable)  # the most tokens still reachable, as first written
    for b in range(search.n_blocks - 2, -1, -1):
        more = search.gain[b + 1] + reachable[b + 1][None, :, :]
        reachable[b] = np.max(np.where(search.allowed[b + 1][:, :, None], more, -np.inf), axis=1)
    assert np.array_equal(search.reachable, reachable)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_two_days(), share=st.floats(0.0, 1.0),
       prices=st.none() | st.lists(st.floats(0.05, 2.0), min_size=2, max_size=2))
def test_the_screen_never_changes_a_search(inst, share, prices):
    """The screen of the extensions (the bound without the tranche cap) drops only pairs the bound drops: with it
    and without it (every allowed pair built), a search returns the same status, schedule, cost and labels."""
    search = priced_search(inst, prices)
    lagrangian = float(search.through.min())
    threshold = lagrangian + share * (search.most_cost_usd - lagrangian)
    screened = search.run(threshold)
    search.moves = [None] + [np.where(allowed, -np.inf, np.inf) for allowed in search.allowed[1:]]
    unscreened = search.run(threshold)
    assert (screened.status, screened.schedule, screened.objective_usd, screened.max_labels) == \
        (unscreened.status, unscreened.schedule, unscreened.objective_usd, unscreened.max_labels)
