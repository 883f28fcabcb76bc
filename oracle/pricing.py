"""Pricing of the decomposition: one job's cheapest path that meets its token target (an exact label search).

Given a cost per (stage, state) of a :class:`~oracle.graph.JobGraph`, :meth:`LabelSearch.cheapest` solves the
resource-constrained shortest path by label setting: a label (cost, tokens capped at the target) dominates one that
costs more and makes fewer tokens, so each node keeps a Pareto front; labels that cannot reach the target, or beat a
known path even with the cheapest costs left (:meth:`LabelSearch.completion_bounds`), are pruned.

Candidates of a state c at the next stage come in *groups*: a group's merged Pareto front shifted by the least arc from
its members into c. A candidate may make fewer tokens than its true arc, so the true label, always among the candidates,
dominates it: exact, at O(1) fronts per node. The groups of c: every state; c's site's states (a restart without a move)
when that makes more; c itself (held) when that makes more still. This needs every arc into c from c's site (other than
c's own) to be the site's least and every arc from elsewhere the overall least (true of every graph
:func:`~oracle.graph.job_graph` builds); otherwise each state whose arc makes more is a group alone.

:meth:`LabelSearch.enumerate` lists every path costing at most a threshold (the closing step); :func:`price` prices
every job at the path master's duals and adds the paths that enter it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from oracle.call_rows import FIT_TOL_MW
from oracle.graph import DecompositionData, JobGraph
from oracle.master import Column, MasterLP, Prices, make_column

PRICE_SEARCH_MIN_SHARE = 1e-3
"""The token price searched is at most (cost spread × stages) / max(target, this share of a stage's most tokens): any
price gives a valid bound; this keeps it finite for minute targets."""
PRICE_GRID_POINTS = 16
"""Token prices evaluated at once per round of the completion bound's price search (batched dynamic programmes)."""
PRICE_GRID_ROUNDS = 4
"""Rounds of the price search, each narrowing the interval to the best grid point's two neighbours (the interval shrinks
by 7.5^4 ≈ 3,000: any token price gives a valid bound, the search only makes it tighter)."""
COST_SLACK_USD = 1e-7
"""Labels within this of a known path's cost are kept (a rounding guard of the cost bound)."""
ALL = -1
"""Group key of every state (a key k ≥ 0 is site k's states, −2 − p state p alone)."""


@dataclass(frozen=True)
class PricedPath:
    """A path (one state per stage), its cost under the prices of the search, and its tokens (capped)."""

    path: np.ndarray
    cost: float
    tokens: float


@dataclass
class _Front:
    """The labels of one (stage, state), or of a group: costs, tokens and where each came from."""

    cost: np.ndarray
    tokens: np.ndarray
    parent_state: np.ndarray
    parent_index: np.ndarray

    @property
    def size(self) -> int:
        return int(self.cost.size)

    def subset(self, which: np.ndarray) -> _Front:
        return _Front(self.cost[which], self.tokens[which], self.parent_state[which], self.parent_index[which])


def pareto(cost: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Indices of the labels no other label dominates (cost ≤ and tokens ≥; the first of equals), by cost."""
    order = np.lexsort((-tokens, cost))
    ordered = tokens[order]
    keep = np.ones(order.size, dtype=bool)
    keep[1:] = ordered[1:] > np.maximum.accumulate(ordered)[:-1]
    return order[keep]


def stage_costs(graph: JobGraph, gpu_price: np.ndarray, load_price: np.ndarray, own: bool = True) -> np.ndarray:
    """(stages, states): each state's cost over each stage at the given prices.

    ``gpu_price``, ``load_price``: (pools, T) $ per GPU and per MW of each pool in each slot; the job's own cost per
    slot is added (unless ``own`` is False: the phase one of :mod:`oracle.decomposition`).
    """
    per_slot = graph.own_usd_per_slot[None, :] * own + gpu_price.T @ graph.gpus.T + load_price.T @ graph.load_mw.T
    return np.add.reduceat(per_slot, graph.stage_slots[:-1], axis=0)


def exact_stage_costs(data: DecompositionData, j: int, paths: Sequence[np.ndarray]) -> np.ndarray:
    """(stages, states): job j's exact cost of each state in each stage with the other jobs' paths fixed (the pools'
    slot costs at the resulting loads, plus its own cost); +inf where the state does not fit the GPUs the others leave
    or the load a grid call allows (:mod:`oracle.call_rows`). A cheapest path at these costs is job j's best response
    (exact: the cost is separable by slot once the others are fixed)."""
    graph = data.graphs[j]
    others = [p if i != j else np.full(graph.n_stages, graph.initial_state) for i, p in enumerate(paths)]
    gpus, load = data.pool_loads(others)
    mine = graph.slot_states(others[j])
    gpus = gpus - graph.gpus[mine].T
    load = load - graph.load_mw[mine].T
    per_slot = np.tile(graph.own_usd_per_slot[:, None], (1, data.inst.slots))
    for k, pool in enumerate(data.pools):
        per_slot = per_slot + pool.slot_cost_usd(load[k][None, :] + graph.load_mw[:, k][:, None])
        fit = gpus[k][None, :] + graph.gpus[:, k][:, None] <= pool.capacity_gpus[None, :]
        if data.inst.grid_calls:
            fit &= load[k][None, :] + graph.load_mw[:, k][:, None] <= pool.load_limit_mw[None, :] + FIT_TOL_MW
        per_slot = np.where(fit, per_slot, np.inf)
    return np.add.reduceat(per_slot.T, graph.stage_slots[:-1], axis=0)


def _candidate_groups(graph: JobGraph) -> list[list[tuple[int, float]]]:
    """Per state c, its candidate groups (key, least arc from the group into c); see the module docstring."""
    arc, site = graph.arc_tokens, graph.site_of
    n = graph.n_states
    low = arc.min(axis=0)
    site_low = np.array([arc[site == site[c], c].min() if site[c] >= 0 else low[c] for c in range(n)])
    grouped = True
    for c in np.flatnonzero(site >= 0):
        same = (site == site[c]) & (np.arange(n) != c)
        grouped &= bool(np.all(arc[same, c] == site_low[c])) and bool(np.all(arc[(site != site[c]) & (site >= 0), c]
                                                                            == low[c]))
    groups = []
    for c in range(n):
        if not grouped:
            groups.append([(ALL, low[c])] + [(-2 - int(p), arc[p, c]) for p in np.flatnonzero(arc[:, c] > low[c])])
            continue
        mine = [(ALL, low[c])]
        if site_low[c] > low[c]:
            mine.append((int(site[c]), site_low[c]))
        if arc[c, c] > max(low[c], site_low[c]):
            mine.append((-2 - c, arc[c, c]))
        groups.append(mine)
    return groups


class LabelSearch:
    """The label searches of one job graph (the bounds that depend only on the graph are computed once)."""

    def __init__(self, graph: JobGraph) -> None:
        self.graph = graph
        self.groups = _candidate_groups(graph)
        arc, allowed = graph.arc_tokens, graph.allowed
        left = np.zeros((graph.n_stages, graph.n_states))  # most tokens a path can still make after (s, c)
        for s in range(graph.n_stages - 2, -1, -1):
            left[s] = np.where(allowed[s + 1][None, :], arc + left[s + 1][None, :], -np.inf).max(axis=1)
        self.max_tokens_left = left

    def _completions(self, cost: np.ndarray, mus: np.ndarray) -> np.ndarray:
        """(prices, stages, states): the least of (cost − μ·tokens) over the stages after s, from state c at s."""
        graph = self.graph
        out = np.zeros((mus.size, graph.n_stages, graph.n_states))
        arc = graph.arc_tokens[None, :, :]
        for s in range(graph.n_stages - 2, -1, -1):
            step = cost[s + 1][None, None, :] - mus[:, None, None] * arc + out[:, s + 1][:, None, :]
            out[:, s] = np.where(graph.allowed[s + 1][None, None, :], step, np.inf).min(axis=2)
        return out

    def completion_bounds(self, cost: np.ndarray) -> list[tuple[float, np.ndarray]]:
        """Lower bounds on the cost still to pay from a label: for a token price μ ≥ 0, a path's remaining cost is at
        least ``g_μ[s, c] + μ·(target − tokens)⁺`` (the tokens still needed must be made). μ = 0 (costs only) and the μ
        that maximises the bound from the start (the concave Lagrangian searched on a narrowing grid)."""
        graph = self.graph
        W = graph.target_tokens
        if W <= 0:
            return [(0.0, self._completions(cost, np.zeros(1))[0])]
        spread = float(np.ptp(cost[np.isfinite(cost)])) if np.isfinite(cost).any() else 0.0
        tokens_scale = max(W, PRICE_SEARCH_MIN_SHARE * float(graph.arc_tokens.max(initial=0.0)), 1.0)
        low, high = 0.0, max(spread, 1.0) * graph.n_stages / tokens_scale
        first_arc = graph.arc_tokens[graph.initial_state]
        zero, best_mu, best_g, best_value = None, 0.0, None, -np.inf
        for _ in range(PRICE_GRID_ROUNDS):
            mus = np.linspace(low, high, PRICE_GRID_POINTS)
            g = self._completions(cost, mus)
            zero = g[0] if zero is None else zero
            first = np.where(graph.allowed[0][None, :], cost[0][None, :] - mus[:, None] * first_arc[None, :]
                             + g[:, 0], np.inf)
            values = first.min(axis=1) + mus * W
            i = int(np.argmax(values))
            if values[i] > best_value:
                best_mu, best_g, best_value = float(mus[i]), g[i], float(values[i])
            step = mus[1] - mus[0]
            low, high = max(0.0, mus[i] - step), mus[i] + step
        return [(0.0, zero), (best_mu, best_g)]

    def _first(self, cost: np.ndarray, bound: float, completion) -> list[_Front | None]:
        graph = self.graph
        fronts: list[_Front | None] = []
        for c in range(graph.n_states):
            if not graph.allowed[0, c]:
                fronts.append(None)
                continue
            tokens = min(float(graph.arc_tokens[graph.initial_state, c]), graph.target_tokens)
            front = _Front(np.array([cost[0, c]]), np.array([tokens]), np.array([-1]), np.array([-1]))
            fronts.append(front.subset(self._keep(0, c, front, bound, completion)))
        return fronts

    def _keep(self, s: int, c: int, front: _Front, bound: float, completion) -> np.ndarray:
        """Labels of (s, c) that can still reach the target and stay within the cost bound."""
        W = self.graph.target_tokens
        keep = (front.tokens + self.max_tokens_left[s, c] >= W) & np.isfinite(front.cost)
        if np.isfinite(bound):
            for mu, g in completion:
                keep &= front.cost + g[s, c] + mu * np.maximum(W - front.tokens, 0.0) <= bound + COST_SLACK_USD
        return keep

    def _candidates(self, s: int, c: int, parts: list, cost: np.ndarray, bound: float, completion) -> _Front:
        """The labels of (s, c) from (front, tokens added) parts, pruned."""
        cand = _Front(np.concatenate([f.cost for f, _ in parts]) + cost[s, c],
                      np.minimum(np.concatenate([f.tokens + add for f, add in parts]), self.graph.target_tokens),
                      np.concatenate([f.parent_state for f, _ in parts]),
                      np.concatenate([f.parent_index for f, _ in parts]))
        return cand.subset(self._keep(s, c, cand, bound, completion))

    def cheapest(self, cost: np.ndarray, upper_usd: float = np.inf) -> list[PricedPath]:
        """The cheapest path ending in each state that meets the target, cheapest first (at most one per end state;
        paths costing more than ``upper_usd`` are not searched). Exact: the first is the optimum of the
        resource-constrained shortest path (or, if it costs more than ``upper_usd``, nothing is returned)."""
        graph = self.graph
        completion = self.completion_bounds(cost) if np.isfinite(upper_usd) else []
        fronts = self._first(cost, upper_usd, completion)
        history = [fronts]
        for s in range(1, graph.n_stages):
            alive = [(p, f) for p, f in enumerate(fronts) if f is not None and f.size]
            if not alive:
                return []
            merged: dict[int, _Front] = {}
            new: list[_Front | None] = []
            for c in range(graph.n_states):
                if not graph.allowed[s, c]:
                    new.append(None)
                    continue
                parts = []
                for key, shift in self.groups[c]:
                    if key not in merged:
                        merged[key] = _group_front(alive, key, graph.site_of)
                    if merged[key].size:
                        parts.append((merged[key], shift))
                cand = self._candidates(s, c, parts, cost, upper_usd, completion)
                new.append(cand.subset(pareto(cand.cost, cand.tokens)))
            fronts = new
            history.append(fronts)
        return _ends(history, fronts, graph.target_tokens, best_only=True)

    def enumerate(self, cost: np.ndarray, threshold_usd: float, max_labels: int,
                  deadline: float = np.inf) -> list[PricedPath] | None:
        """Every path that meets the target and costs at most ``threshold_usd`` (None: more than ``max_labels`` labels
        were alive at some stage, or the clock passed ``deadline``; the caller gives up)."""
        graph = self.graph
        completion = self.completion_bounds(cost)
        fronts = self._first(cost, threshold_usd, completion)
        history = [fronts]
        for s in range(1, graph.n_stages):
            new: list[_Front | None] = []
            for c in range(graph.n_states):
                parts = [(_own(f, p), graph.arc_tokens[p, c]) for p, f in enumerate(fronts) if f is not None and f.size]
                new.append(self._candidates(s, c, parts, cost, threshold_usd, completion)
                           if parts and graph.allowed[s, c] else None)
            if sum(f.size for f in new if f is not None) > max_labels or time.perf_counter() > deadline:
                return None
            fronts = new
            history.append(fronts)
        return _ends(history, fronts, graph.target_tokens, best_only=False)


def _own(front: _Front, p: int) -> _Front:
    """A node's labels as candidates of the next stage: their parent is the node itself."""
    return _Front(front.cost, front.tokens, np.full(front.size, p), np.arange(front.size))


def _group_front(alive: list[tuple[int, _Front]], key: int, site_of: np.ndarray) -> _Front:
    """The Pareto front of a group's nodes (key: see :data:`ALL`) as candidates of the next stage."""
    if key <= -2:
        members = [(p, f) for p, f in alive if p == -2 - key]
        return _own(members[0][1], members[0][0]) if members else _Front(*(np.zeros(0) for _ in range(4)))
    members = [_own(f, p) for p, f in alive if key == ALL or site_of[p] == key]
    if not members:
        return _Front(*(np.zeros(0) for _ in range(4)))
    front = _Front(*(np.concatenate([getattr(f, name) for f in members])
                     for name in ("cost", "tokens", "parent_state", "parent_index")))
    return front.subset(pareto(front.cost, front.tokens))


def _ends(history: list[list[_Front | None]], fronts: list[_Front | None], target: float,
          best_only: bool) -> list[PricedPath]:
    """The paths of the last stage's labels that meet the target (per end state the cheapest, or all), by cost."""
    out = []
    for c, front in enumerate(fronts):
        if front is None or not front.size:
            continue
        met = np.flatnonzero(front.tokens >= target)
        for i in (met[np.argmin(front.cost[met])],) if best_only and met.size else met:
            out.append(PricedPath(_backtrack(history, c, int(i)), float(front.cost[i]), float(front.tokens[i])))
    out.sort(key=lambda p: p.cost)
    return out


def _backtrack(history: list[list[_Front | None]], state: int, index: int) -> np.ndarray:
    path = np.empty(len(history), dtype=np.int64)
    for s in range(len(history) - 1, -1, -1):
        path[s] = state
        front = history[s][state]
        assert front is not None
        state, index = int(front.parent_state[index]), int(front.parent_index[index])
    return path


REDUCED_COST_TOL_USD = 1e-6
"""A path enters a master when it costs at least this much less than its job's convexity dual."""


def price(master: MasterLP, searches: Sequence[LabelSearch], prices: Prices, per_job: int, *, own: bool = True,
          on_add: Callable[[Column], None] | None = None) -> tuple[list[float], int]:
    """Each job's least path cost at the path master's prices (exact; at most its cheapest column's there), and how many
    paths entered the master: of each job's cheapest (up to ``per_job``, one per end state), those cheaper than its
    convexity dual (``on_add`` gets each). ``own=False`` leaves out the jobs' own costs (phase one)."""
    cheapest, added = [], 0
    for j, search in enumerate(searches):
        graph = search.graph
        costs = stage_costs(graph, prices.gpu, prices.load, own=own)
        known = min(float(costs[np.arange(graph.n_stages), c.path].sum()) for c in master.columns if c.job == j)
        found = search.cheapest(costs, upper_usd=known)
        cheapest.append(min([known] + [p.cost for p in found[:1]]))
        for p in found[:per_job]:
            if p.cost < prices.convexity[j] - REDUCED_COST_TOL_USD:
                column = make_column(graph, j, p.path)
                if master.add(column):
                    added += 1
                    if on_add is not None:
                        on_add(column)
    return cheapest, added
