"""Branch and price on the path master: the decomposition's bound raised after the root.

A branching decision is "job j's state at stage k is in the set S" (one child) or "is not" (the other), S being the
running states of one site, the paused states, or one state. A node's master LP holds the pool's columns that obey its
restrictions and its pricing searches the job's graph without the forbidden (stage, state) nodes, so every Lagrangian
dual it evaluates bounds every schedule that obeys them; the least bound over the open and pruned leaves bounds the
whole problem. Best first; a node whose bound reaches the cutoff (the incumbent less the gap asked for) is pruned, one
whose LP is integral gives a schedule.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aidc_env.instance import PAUSE
from oracle.graph import DecompositionData
from oracle.master import Column, MasterLP, lagrangian_bound, make_column
from oracle.pricing import LabelSearch, price

INTEGRAL_TOL = 1e-6
"""A flow within this of 0 or 1 counts as integral."""
NODE_COLUMNS_PER_JOB = 6
"""Paths a job may add to a node's master per iteration (as the root's column generation)."""

Paths = list[np.ndarray]


@dataclass(order=True)
class Node:
    bound: float
    order: int
    masks: dict[int, np.ndarray] = field(compare=False)
    """Per restricted job, its (stages, states) allowed nodes."""
    depth: int = field(compare=False, default=0)


class BranchAndPrice:
    """The tree search over one decomposition's data (see the module docstring)."""

    def __init__(self, data: DecompositionData, searches: Sequence[LabelSearch], columns: Sequence[Column],
                 threads: int | None = None) -> None:
        self.data = data
        self.root_searches = list(searches)
        self.pool: list[Column] = list(columns)
        self.keys = {(c.job, c.path.tobytes()) for c in self.pool}
        self.threads = threads
        self._searches: dict[tuple[int, bytes], LabelSearch] = {}
        self.nodes = 0

    # ------------------------------------------------------------------ pieces

    def search(self, j: int, mask: np.ndarray | None) -> LabelSearch:
        if mask is None:
            return self.root_searches[j]
        key = (j, mask.tobytes())
        if key not in self._searches:
            graph = dataclasses.replace(self.data.graphs[j], allowed=mask)
            self._searches[key] = LabelSearch(graph)
        return self._searches[key]

    def _add_to_pool(self, column: Column) -> None:
        key = (column.job, column.path.tobytes())
        if key not in self.keys:
            self.keys.add(key)
            self.pool.append(column)

    @staticmethod
    def compatible(column: Column, masks: dict[int, np.ndarray]) -> bool:
        mask = masks.get(column.job)
        return mask is None or bool(np.all(mask[np.arange(column.path.size), column.path]))

    def solve_node(self, node: Node, cutoff: float, deadline: float) -> tuple[str, float, MasterLP | None]:
        """Column generation at a node: ("pruned" | "infeasible" | "solved" | "time", its bound, its master)."""
        master = MasterLP(self.data, self.threads)
        for column in self.pool:
            if self.compatible(column, node.masks):
                master.add(column)
        searches = [self.search(j, node.masks.get(j)) for j in range(len(self.data.graphs))]
        for j, (graph, search) in enumerate(zip(self.data.graphs, searches, strict=True)):
            if not any(c.job == j for c in master.columns):  # every job needs a column: any path of the node
                found = search.cheapest(np.zeros((graph.n_stages, graph.n_states)))
                if not found:
                    return "infeasible", np.inf, None
                master.add(make_column(graph, j, found[0].path))
                self._add_to_pool(master.columns[-1])
        bound = node.bound
        while True:
            if time.perf_counter() >= deadline:
                return "time", bound, master
            prices = master.solve()
            cheapest, added = price(master, searches, prices, NODE_COLUMNS_PER_JOB, on_add=self._add_to_pool)
            bound = max(bound, lagrangian_bound(master, prices, cheapest))
            if bound >= cutoff:
                return "pruned", bound, master
            if added == 0:
                return "solved", bound, master

    def flows(self, master: MasterLP) -> list[np.ndarray]:
        """Per job, (stages, states): the LP's weight on each (stage, state) node."""
        out = [np.zeros((g.n_stages, g.n_states)) for g in self.data.graphs]
        for column, weight in master.fractional():
            out[column.job][np.arange(column.path.size), column.path] += weight
        return out

    def branching(self, flows: Sequence[np.ndarray]) -> tuple[int, int, np.ndarray] | None:
        """The (job, stage, set of states) whose flow is the most fractional; None: the LP is integral. Sets, in order
        of preference: a site's running states, the paused states, one state."""
        best, best_score = None, INTEGRAL_TOL
        for kind in range(3):
            for j, (graph, flow) in enumerate(zip(self.data.graphs, flows, strict=True)):
                running = graph.choices != PAUSE
                if kind == 0:
                    sets = [running & (graph.site_of == s) for s in np.unique(graph.site_of[graph.site_of >= 0])]
                elif kind == 1:
                    sets = [~running]
                else:
                    sets = [np.arange(graph.n_states) == c for c in range(graph.n_states)]
                for k in range(graph.n_stages):
                    for states in sets:
                        f = float(flow[k, states].sum())
                        score = min(f, 1.0 - f)
                        if score > best_score + 1e-9:
                            best, best_score = (j, k, states), score
            if best is not None:
                return best
        return None

    def integral_paths(self, master: MasterLP) -> Paths | None:
        chosen: dict[int, np.ndarray] = {}
        for column, weight in master.fractional():
            if weight > 1.0 - INTEGRAL_TOL:
                chosen[column.job] = column.path
        if len(chosen) < len(self.data.graphs) or master.slack_gpus() > INTEGRAL_TOL:
            return None
        return [chosen[j] for j in range(len(self.data.graphs))]

    # ------------------------------------------------------------------ the search

    def run(self, root_bound: float, incumbent: tuple[Paths, float], deadline: float, mip_gap: float,
            details: dict[str, Any]) -> tuple[tuple[Paths, float], float]:
        """Best-first branch and price from the root (bound ``root_bound``, the column generation's) until the gap
        closes or the clock runs out. Returns (incumbent, proven lower bound)."""
        data = self.data
        counter = itertools.count()
        open_nodes: list[Node] = [Node(root_bound, next(counter), {})]
        pruned_min = np.inf  # the least bound of the nodes pruned by the cutoff (not by infeasibility)
        solved = integral = 0

        def cutoff() -> float:
            return incumbent[1] - mip_gap * abs(incumbent[1])

        while open_nodes and time.perf_counter() < deadline:
            node = heapq.heappop(open_nodes)
            if node.bound >= cutoff():
                pruned_min = min(pruned_min, node.bound)
                continue
            status, bound, master = self.solve_node(node, cutoff(), deadline)
            self.nodes += 1
            if status == "infeasible":
                continue
            if status in ("pruned", "time"):
                if status == "pruned":
                    pruned_min = min(pruned_min, bound)
                else:
                    heapq.heappush(open_nodes, Node(bound, node.order, node.masks, node.depth))
                continue
            solved += 1
            paths = self.integral_paths(master)
            if paths is not None:
                integral += 1
                if data.fits(paths):
                    value = data.objective_usd(paths)
                    if value < incumbent[1]:
                        incumbent = (paths, value)
                # the LP is integral: its schedule is the node's optimum where the costs are exact (no concave
                # slot's chord); the bound stays proven either way
                pruned_min = min(pruned_min, bound)
                continue
            choice = self.branching(self.flows(master))
            if choice is None:
                pruned_min = min(pruned_min, bound)
                continue
            j, k, states = choice
            base = node.masks.get(j, data.graphs[j].allowed)
            for keep in (states, ~states):
                mask = base.copy()
                mask[k, ~keep] = False
                if not mask[k].any():
                    continue
                masks = dict(node.masks)
                masks[j] = mask
                heapq.heappush(open_nodes, Node(bound, next(counter), masks, node.depth + 1))
        least_open = min((n.bound for n in open_nodes), default=np.inf)
        proven = min(least_open, pruned_min, incumbent[1])
        details.update(bp_nodes=self.nodes, bp_open=len(open_nodes), bp_integral=integral,
                       bp_columns=len(self.pool), bp_depth=max((n.depth for n in open_nodes), default=0))
        return incumbent, float(proven)
