"""Pricing of the fleet oracle: one job's cheapest path that meets its token target (an exact label search).

A job's schedule is a path through its :class:`~oracle.fleet_graph.JobGraph`: one state per stage. Given a
cost per (stage, state) (the master problem's prices of the pools' GPUs and load, plus the job's own cost),
:meth:`LabelSearch.cheapest` finds the cheapest path whose tokens reach the target: a resource-constrained
shortest path, solved exactly by label setting. A label is (cost, tokens) at a (stage, state); tokens are
capped at the target (more earns nothing), so a label dominates another at the same node when it costs no
more and makes no fewer tokens: each node keeps a Pareto front. Two bounds prune: a label that cannot reach
the target even with the most tokens left (``max_tokens_left``), and one that cannot beat a known path even
with the cheapest costs left.

Arcs: entering state c from p makes ``arc_tokens[p, c]``. With ``low[c] = min_p arc_tokens[p, c]``, the
candidates of c are the front of *all* states shifted by ``low[c]``, plus, for the few p whose arc makes
more (holding a mode: no restart), p's own front shifted by that arc. The extra candidates made by the
first set (p entered at ``low`` although its arc makes more) are dominated by the second set's true ones, so
the search is exact at O(front) per node instead of O(states × front).

:meth:`LabelSearch.enumerate` lists every path with a cost at most a threshold (no dominance: the fleet
oracle's closing step, see :mod:`oracle.fleet`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from oracle.fleet_graph import FleetData, JobGraph

PRICE_SEARCH_STEPS = 30
"""Steps of the ternary search of the token price of the completion bound (each shrinks the interval by 1/3)."""
PRICE_SEARCH_MIN_SHARE = 1e-3
"""The token price searched is at most (cost spread × stages) / max(target, this share of a stage's most tokens):
any price gives a valid bound; this keeps it finite for minute targets."""
COST_SLACK_USD = 1e-7
"""Labels within this of a known path's cost are kept (a rounding guard of the cost bound)."""


@dataclass(frozen=True)
class PricedPath:
    """A path (one state per stage), its cost under the prices of the search, and its tokens (capped)."""

    path: np.ndarray
    cost: float
    tokens: float


@dataclass
class _Front:
    """The labels of one (stage, state): costs, tokens and where each came from."""

    cost: np.ndarray
    tokens: np.ndarray
    parent_state: np.ndarray
    parent_index: np.ndarray

    @property
    def size(self) -> int:
        return int(self.cost.size)


def pareto(cost: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Indices of the labels no other label dominates (cost ≤ and tokens ≥; the first of equals), by cost."""
    order = np.lexsort((-tokens, cost))
    ordered = tokens[order]
    keep = np.ones(order.size, dtype=bool)
    keep[1:] = ordered[1:] > np.maximum.accumulate(ordered)[:-1]
    return order[keep]


def stage_costs(graph: JobGraph, gpu_price: np.ndarray, load_price: np.ndarray, own: bool = True) -> np.ndarray:
    """(stages, states): each state's cost over each stage at the given prices.

    ``gpu_price``, ``load_price``: (pools, T) $ per GPU and per MW of each pool in each slot; the job's own
    cost per slot is added (unless ``own`` is False: the phase one of :mod:`oracle.fleet`).
    """
    per_slot = graph.own_usd_per_slot[None, :] * own + gpu_price.T @ graph.gpus.T + load_price.T @ graph.load_mw.T
    return np.add.reduceat(per_slot, graph.stage_slots[:-1], axis=0)


def exact_stage_costs(data: FleetData, j: int, paths: Sequence[np.ndarray]) -> np.ndarray:
    """(stages, states): job j's exact cost of each state in each stage with the other jobs' paths fixed (the
    pools' slot costs at the resulting loads, plus its own cost); +inf where the state does not fit the GPUs the
    others leave. A cheapest path at these costs is job j's best response (exact: the cost is separable by slot
    once the others are fixed)."""
    graph = data.graphs[j]
    others = [p if i != j else np.full(graph.n_stages, graph.initial_state) for i, p in enumerate(paths)]
    gpus, load = data.pool_loads(others)
    mine = graph.slot_states(others[j])
    gpus = gpus - graph.gpus[mine].T
    load = load - graph.load_mw[mine].T
    per_slot = np.tile(graph.own_usd_per_slot[:, None], (1, data.inst.slots))
    for k, pool in enumerate(data.pools):
        per_slot = per_slot + pool.slot_cost_usd(load[k][None, :] + graph.load_mw[:, k][:, None])
        per_slot = np.where(gpus[k][None, :] + graph.gpus[:, k][:, None] <= pool.capacity_gpus[None, :], per_slot,
                            np.inf)
    return np.add.reduceat(per_slot.T, graph.stage_slots[:-1], axis=0)


class LabelSearch:
    """The label searches of one job graph (the bounds that depend only on the graph are computed once)."""

    def __init__(self, graph: JobGraph) -> None:
        self.graph = graph
        arc = graph.arc_tokens
        self.low = arc.min(axis=0)
        self.extra = [np.flatnonzero(arc[:, c] > self.low[c]) for c in range(graph.n_states)]
        # Most tokens a path can still make after stage s when in state c there.
        S, allowed = graph.n_stages, graph.allowed
        left = np.zeros((S, graph.n_states))
        for s in range(S - 2, -1, -1):
            reach = np.where(allowed[s + 1][None, :], arc + left[s + 1][None, :], -np.inf)
            left[s] = reach.max(axis=1)
        self.max_tokens_left = left

    def _completion(self, cost: np.ndarray, mu: float) -> np.ndarray:
        """(stages, states): the least of (cost − μ·tokens) over the stages after s, from state c at s."""
        graph = self.graph
        out = np.zeros((graph.n_stages, graph.n_states))
        for s in range(graph.n_stages - 2, -1, -1):
            step = np.where(graph.allowed[s + 1][None, :], cost[s + 1][None, :] - mu * graph.arc_tokens + out[s + 1][None, :],
                            np.inf)
            out[s] = step.min(axis=1)
        return out

    def completion_bounds(self, cost: np.ndarray) -> list[tuple[float, np.ndarray]]:
        """Lower bounds on the cost still to pay from a label: for a token price μ ≥ 0, a path's remaining cost is
        at least ``g_μ[s, c] + μ·(target − tokens)⁺`` (the tokens still needed must be made). μ = 0 (costs only)
        and the μ that maximises the bound from the start (a ternary search on the concave Lagrangian)."""
        graph = self.graph
        W = graph.target_tokens
        bounds = [(0.0, self._completion(cost, 0.0))]
        if W <= 0:
            return bounds

        def value(mu: float) -> float:
            g = self._completion(cost, mu)
            first = np.where(graph.allowed[0], cost[0] - mu * graph.arc_tokens[graph.initial_state] + g[0], np.inf)
            return float(first.min()) + mu * W

        spread = float(np.ptp(cost[np.isfinite(cost)])) if np.isfinite(cost).any() else 0.0
        tokens_scale = max(W, PRICE_SEARCH_MIN_SHARE * float(graph.arc_tokens.max(initial=0.0)), 1.0)
        low, high = 0.0, max(spread, 1.0) * graph.n_stages / tokens_scale
        for _ in range(PRICE_SEARCH_STEPS):
            a, b = low + (high - low) / 3, high - (high - low) / 3
            if value(a) < value(b):
                low = a
            else:
                high = b
        mu = 0.5 * (low + high)
        bounds.append((mu, self._completion(cost, mu)))
        return bounds

    def _first(self, cost: np.ndarray) -> list[_Front | None]:
        graph = self.graph
        fronts: list[_Front | None] = []
        for c in range(graph.n_states):
            if not graph.allowed[0, c]:
                fronts.append(None)
                continue
            tokens = min(float(graph.arc_tokens[graph.initial_state, c]), graph.target_tokens)
            fronts.append(_Front(np.array([cost[0, c]]), np.array([tokens]), np.array([-1]), np.array([-1])))
        return fronts

    def _keep(self, s: int, c: int, front: _Front, bound: float, completion: list[tuple[float, np.ndarray]]) -> np.ndarray:
        """Labels of (s, c) that can still reach the target and stay within the cost bound."""
        W = self.graph.target_tokens
        keep = (front.tokens + self.max_tokens_left[s, c] >= W) & np.isfinite(front.cost)
        if np.isfinite(bound):
            for mu, g in completion:
                keep &= front.cost + g[s, c] + mu * np.maximum(W - front.tokens, 0.0) <= bound + COST_SLACK_USD
        return keep

    def cheapest(self, cost: np.ndarray, upper_usd: float = np.inf) -> list[PricedPath]:
        """The cheapest path ending in each state that meets the target, cheapest first (at most one per end
        state; paths costing more than ``upper_usd`` are not searched). Exact: the first is the optimum of the
        resource-constrained shortest path (or, if it costs more than ``upper_usd``, nothing is returned)."""
        graph = self.graph
        W = graph.target_tokens
        left = self.completion_bounds(cost) if np.isfinite(upper_usd) else []
        fronts = self._first(cost)
        history = [fronts]
        for c, front in enumerate(fronts):
            if front is not None:
                fronts[c] = _subset(front, self._keep(0, c, front, upper_usd, left))
        for s in range(1, graph.n_stages):
            alive = [(p, f) for p, f in enumerate(fronts) if f is not None and f.size]
            if not alive:
                return []
            all_cost = np.concatenate([f.cost for _, f in alive])
            all_tokens = np.concatenate([f.tokens for _, f in alive])
            all_state = np.concatenate([np.full(f.size, p) for p, f in alive])
            all_index = np.concatenate([np.arange(f.size) for _, f in alive])
            best = pareto(all_cost, all_tokens)
            all_cost, all_tokens, all_state, all_index = (a[best] for a in (all_cost, all_tokens, all_state, all_index))
            new: list[_Front | None] = []
            for c in range(graph.n_states):
                if not graph.allowed[s, c]:
                    new.append(None)
                    continue
                parts = [(all_cost, all_tokens + self.low[c], all_state, all_index)]
                for p in self.extra[c]:
                    f = fronts[p]
                    if f is not None and f.size:
                        parts.append((f.cost, f.tokens + graph.arc_tokens[p, c], np.full(f.size, p), np.arange(f.size)))
                cand = _Front(np.concatenate([x[0] for x in parts]) + cost[s, c],
                              np.minimum(np.concatenate([x[1] for x in parts]), W),
                              np.concatenate([x[2] for x in parts]), np.concatenate([x[3] for x in parts]))
                cand = _subset(cand, self._keep(s, c, cand, upper_usd, left))
                new.append(_subset(cand, pareto(cand.cost, cand.tokens)))
            fronts = new
            history.append(fronts)
        ends = []
        for c, front in enumerate(fronts):
            if front is None or not front.size:
                continue
            met = np.flatnonzero(front.tokens >= W)
            if met.size:
                i = int(met[np.argmin(front.cost[met])])
                ends.append(PricedPath(_backtrack(history, c, i), float(front.cost[i]), float(front.tokens[i])))
        ends.sort(key=lambda p: p.cost)
        return ends

    def enumerate(self, cost: np.ndarray, threshold_usd: float, max_labels: int,
                  deadline: float = np.inf) -> list[PricedPath] | None:
        """Every path that meets the target and costs at most ``threshold_usd`` (None: more than ``max_labels``
        labels were alive at some stage, or the clock passed ``deadline``; the caller gives up)."""
        graph = self.graph
        W = graph.target_tokens
        left = self.completion_bounds(cost)
        fronts = self._first(cost)
        for c, front in enumerate(fronts):
            if front is not None:
                fronts[c] = _subset(front, self._keep(0, c, front, threshold_usd, left))
        history = [fronts]
        for s in range(1, graph.n_stages):
            new: list[_Front | None] = []
            total = 0
            for c in range(graph.n_states):
                if not graph.allowed[s, c]:
                    new.append(None)
                    continue
                parts = [(f.cost, f.tokens + graph.arc_tokens[p, c], np.full(f.size, p), np.arange(f.size))
                         for p, f in enumerate(fronts) if f is not None and f.size]
                if not parts:
                    new.append(None)
                    continue
                cand = _Front(np.concatenate([x[0] for x in parts]) + cost[s, c],
                              np.minimum(np.concatenate([x[1] for x in parts]), W),
                              np.concatenate([x[2] for x in parts]), np.concatenate([x[3] for x in parts]))
                cand = _subset(cand, self._keep(s, c, cand, threshold_usd, left))
                total += cand.size
                new.append(cand)
            if total > max_labels or time.perf_counter() > deadline:
                return None
            fronts = new
            history.append(fronts)
        out = []
        for c, front in enumerate(fronts):
            if front is None:
                continue
            for i in np.flatnonzero(front.tokens >= W):
                out.append(PricedPath(_backtrack(history, c, int(i)), float(front.cost[i]), float(front.tokens[i])))
        out.sort(key=lambda p: p.cost)
        return out


def _subset(front: _Front, which: np.ndarray) -> _Front:
    return _Front(front.cost[which], front.tokens[which], front.parent_state[which], front.parent_index[which])


def _backtrack(history: list[list[_Front | None]], state: int, index: int) -> np.ndarray:
    path = np.empty(len(history), dtype=np.int64)
    for s in range(len(history) - 1, -1, -1):
        path[s] = state
        front = history[s][state]
        assert front is not None
        state, index = int(front.parent_state[index]), int(front.parent_index[index])
    return path
