"""The closing phase of the sites decomposition: reduced-cost fixing from the Lagrangian, then the direct MILP.

At the Lagrangian prices of the best bound B (:mod:`oracle.sites_cg`), every schedule costs at least
B + Σ_j (cost of job j's path at those prices − job j's cheapest path), each excess ≥ 0. So a schedule cheaper
than the incumbent U uses, for every job, only (stage, state) nodes through which some path of the job meets
its target with an excess ≤ U − B. A lower bound of the cheapest such path through a node, for any token
price μ ≥ 0 (a path that meets the target W makes tokens ≥ W): forward + backward (cost − μ·tokens) + μ·W
(:func:`node_bounds`). Nodes above the gap are fixed out of the direct MILP (:class:`oracle.sites.SitesModel`:
x[j,k,s,m] = 0 for a mode state, and y[j,k,s] = 0 when every state at site s is out), which is then solved from
the incumbent. Its bound holds for every schedule better than U, so min(U, its bound) is a proven lower bound
of the whole problem (and the larger of that and B is kept).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aidc_env.instance import Instance
from oracle.fleet_pricing import LabelSearch
from oracle.sites import SitesModel, SitesOracleResult
from oracle.sites_graph import SiteJobGraph

MILP_OPTIONS = {"move": {}, "home": {"fixed_sites": True}, "stay": {"stay": True}, "free": {"free_start": True}}
"""The direct MILP's options of each placement (:mod:`oracle.sites_graph`)."""
FIXING_SLACK_USD = 1e-6
"""A node is fixed out only when its bound exceeds the gap by more than this (rounding)."""


def node_bounds(graph: SiteJobGraph, search: LabelSearch, cost: np.ndarray) -> np.ndarray:
    """(stages, states): a lower bound on the cost of every path through (stage, state) that meets the target,
    the best over the token prices of :meth:`LabelSearch.completion_bounds` (+inf: no path at all)."""
    W = graph.target_tokens
    arc = graph.arc_tokens
    best = np.full((graph.n_stages, graph.n_states), -np.inf)
    for mu, backward in search.completion_bounds(cost):
        forward = np.full((graph.n_stages, graph.n_states), np.inf)
        forward[0] = np.where(graph.allowed[0], cost[0] - mu * arc[graph.initial_state], np.inf)
        for s in range(1, graph.n_stages):
            step = forward[s - 1][:, None] - mu * arc
            forward[s] = np.where(graph.allowed[s], cost[s] + step.min(axis=0), np.inf)
        best = np.maximum(best, forward + backward + mu * max(W, 0.0))
    return best


def fixings(graphs: Sequence[SiteJobGraph], searches: Sequence[LabelSearch], costs: Sequence[np.ndarray],
            cheapest: Sequence[float], gap_usd: float) -> list[np.ndarray]:
    """Per job, (stages, states) bool: the node may be used by a schedule better than the incumbent."""
    return [node_bounds(g, search, cost) - cheap <= gap_usd + FIXING_SLACK_USD
            for g, search, cost, cheap in zip(graphs, searches, costs, cheapest, strict=True)]


def restricted_milp(inst: Instance, placement: str, graphs: Sequence[SiteJobGraph], keep: Sequence[np.ndarray],
                    start: tuple[list[list[int]], list[list[int]]], time_limit_s: float, mip_gap: float,
                    threads: int | None) -> tuple[SitesOracleResult, dict[str, float]]:
    """The direct MILP with the nodes outside ``keep`` fixed out, from the (schedule, sites) ``start``."""
    model = SitesModel(inst, **MILP_OPTIONS[placement])
    m = model.m
    fixed_x = fixed_y = total_x = 0
    for j, (graph, ok) in enumerate(zip(graphs, keep, strict=True)):
        for k in range(graph.n_stages):
            for s in range(len(inst.sites)):
                here = graph.site_of == s
                if (j, k, s) in m.y and not m.y[j, k, s].fixed and not ok[k, here].any():
                    m.y[j, k, s].fix(0)
                    fixed_y += 1
                for c in model.modes_at.get((j, k, s), []):
                    total_x += 1
                    state = np.flatnonzero(here & (graph.choices == c))
                    if state.size and not ok[k, state[0]]:
                        m.x[j, k, s, c].fix(0)
                        fixed_x += 1
    result = model.solve(time_limit_s=time_limit_s, mip_gap=mip_gap, threads=threads, start=start)
    return result, {"fixed_x": float(fixed_x), "of_x": float(total_x), "fixed_y": float(fixed_y)}
