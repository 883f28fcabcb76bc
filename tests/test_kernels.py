"""The oracle's compiled inner loops (oracle/kernels.py) against pure-Python references, to the bit.

The dominance filter of the label search (:func:`oracle.labeling._pareto`, through
:func:`oracle.kernels.staircase_keep`) keeps exactly the labels the interpreted staircase kept (the first
implementation, kept here), and those are the labels no other label of their state dominates (brute force over
every pair). The restricted completion bound (:meth:`RestrictedCompletionBound.bound`, through
:func:`oracle.kernels.table_bound`) equals its numpy reference to the bit on tiny two-day horizons and on two days
of the 2048 case. The tables themselves (:func:`oracle.kernels.back_rows`) are checked against their reference in
tests/test_horizon_tables.py.
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracle.completion import RESTRICT_MARGIN, RestrictedCompletionBound
from oracle.labeling import _pareto
from tests.test_horizon_tables import priced_search, tiny_two_days, two_days_of_the_2048_case


def reference_pareto(state: np.ndarray, cost: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """:func:`oracle.labeling._pareto` as first written (the staircase in Python lists)."""
    second = tokens[:, 1] if tokens.shape[1] > 1 else np.zeros(state.size)
    order = np.lexsort((-second, -tokens[:, 0], cost, state))
    groups = np.flatnonzero(np.r_[True, state[order][1:] != state[order][:-1]])
    ends = np.r_[groups[1:], order.size]
    keep = np.ones(order.size, dtype=bool)
    xs_all, ys_all = tokens[order, 0].tolist(), second[order].tolist()
    for a, e in zip(groups.tolist(), ends.tolist(), strict=True):
        xs: list[float] = []
        ys: list[float] = []
        for i in range(a, e):
            x, y = xs_all[i], ys_all[i]
            p = bisect_left(xs, x)
            if p < len(xs) and ys[p] >= y:
                keep[i] = False
                continue
            r = p
            while r > 0 and ys[r - 1] <= y:
                r -= 1
            hi = p + 1 if p < len(xs) and xs[p] == x else p
            del xs[r:hi], ys[r:hi]
            xs.insert(r, x)
            ys.insert(r, y)
    return order[keep]


@st.composite
def labels(draw):
    """Labels of a few states on coarse grids of cost and tokens (so that ties and duplicates are common)."""
    n = draw(st.integers(1, 120))
    n_jobs = draw(st.integers(1, 2))
    states = draw(st.integers(1, 5))
    grid = st.integers(0, 6)
    state = np.array(draw(st.lists(st.integers(0, states - 1), min_size=n, max_size=n)))
    cost = np.array(draw(st.lists(grid, min_size=n, max_size=n)), dtype=float)
    tokens = np.array(draw(st.lists(st.lists(grid, min_size=n_jobs, max_size=n_jobs), min_size=n, max_size=n)),
                      dtype=float)
    return state, cost, tokens


@settings(max_examples=300, deadline=None, derandomize=True)
@given(labels())
def test_the_dominance_filter_keeps_the_reference_labels_and_only_undominated_ones(drawn):
    state, cost, tokens = drawn
    kept = _pareto(state, cost, tokens)
    assert np.array_equal(kept, reference_pareto(state, cost, tokens))
    second = tokens[:, 1] if tokens.shape[1] > 1 else np.zeros(state.size)

    def dominates(i: int, j: int) -> bool:  # i is as cheap and makes as many tokens of both jobs
        return state[i] == state[j] and cost[i] <= cost[j] and tokens[i, 0] >= tokens[j, 0] and second[i] >= second[j]

    inside = set(kept.tolist())
    for i in inside:  # no kept label dominates another
        assert not any(dominates(j, i) for j in inside if j != i)
    for i in set(range(state.size)) - inside:  # a dropped label is dominated by a kept one
        assert any(dominates(j, i) for j in inside)


def reference_bound(tables: RestrictedCompletionBound, block: int, state: np.ndarray,
                    tokens: np.ndarray) -> np.ndarray:
    """:meth:`RestrictedCompletionBound.bound` as first written (numpy over the labels)."""
    short = np.maximum(tables.need[None, :] - tokens, 0.0)
    priced = short @ tables.mu
    best = np.full(state.size, -np.inf)
    rows = tables.row[block, state]
    outside = rows < 0
    rows = np.where(outside, 0, rows)
    for j in tables.tracked:
        table = tables.tables[j][block]
        if table.shape[0] == 0:
            return np.full(state.size, np.inf)
        grid, step, penalty, start = tables.grid[j], tables.step[j], tables.penalty[j], int(tables.first[j][block])
        x = np.clip(short[:, j], 0.0, grid[-1])
        low = np.clip(np.floor(x / step).astype(np.int64) - start, 0, table.shape[1] - 2)
        below = penalty * np.maximum(grid[start + low] - x, 0.0)
        above = penalty * (grid[start + low + 1] - x)
        values = table.ravel()
        flat = low + rows * table.shape[1]
        own = np.maximum(values[flat] - below, values[flat + 1] - above)
        best = np.maximum(best, own + priced - tables.mu[j] * short[:, j])
    best[outside] = np.inf
    return best


def assert_same_bounds(tables: RestrictedCompletionBound, n_states: int, rng: np.random.Generator) -> None:
    """Random labels at every block (any state, tokens from none to past the tranche): equal to the bit."""
    for block in range(len(tables.inside)):
        state = rng.integers(0, n_states, 64)
        tokens = rng.uniform(-0.1, 1.2, (64, tables.need.size)) * tables.need[None, :]
        assert np.array_equal(tables.bound(block, state, tokens), reference_bound(tables, block, state, tokens))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_two_days(), share=st.floats(0.0, 1.0), seed=st.integers(0, 2**16))
def test_the_completion_bound_equals_its_reference_on_tiny_horizons(inst, share, seed):
    search = priced_search(inst)
    lagrangian = float(search.through.min())
    ceiling = lagrangian + share * (search.most_cost_usd - lagrangian)
    tables = RestrictedCompletionBound(search, *search._tokens, ceiling, grid_points=5, grid_factor=1)
    assert_same_bounds(tables, search.n_states, np.random.default_rng(seed))


def test_the_completion_bound_equals_its_reference_on_two_days_of_the_2048_case():
    search = priced_search(two_days_of_the_2048_case())
    lagrangian = float(search.through.min())
    tables = RestrictedCompletionBound(search, *search._tokens, lagrangian + RESTRICT_MARGIN * abs(lagrangian))
    assert len(tables.tracked) == 2
    assert_same_bounds(tables, search.n_states, np.random.default_rng(0))
