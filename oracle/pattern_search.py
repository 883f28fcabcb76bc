"""Searches on the pattern master (:mod:`oracle.patterns`): price-and-fix dives for schedules, a branch and price for
the bound.

- :func:`stage_dive` fixes (job, stage) states one round at a time and re-optimises with column generation; it returns
  one path per job, or None;
- :func:`branch_bound`: best first over (job, stage, state) rules on the pattern master; every node's bound is a
  Lagrangian dual evaluated from its definition (a proven lower bound of the schedules its rules allow), so the least
  open bound is a proven lower bound of the whole problem.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

import numpy as np

from oracle.master import INF, Column, make_column
from oracle.patterns import (BOX_TOL, BOX_USD, CONVERGED_RTOL, PATHS_PER_JOB, REDUCED_COST_TOL_USD, LinkPrices,
                             PatternMaster)

DIVE_PENALTY_USD = 1e4
"""In the dive, the box's artificial columns cost this much per unit (they only keep the LP feasible when a fixed path
has no fitting pattern yet; a dive whose last LP still uses them is dropped)."""
DIVE_ROUNDS = 6
"""Column generation rounds of a dive between two fixings."""
INTEGRAL_FLOW = 1.0 - 1e-7
"""A (job, stage)'s LP flow on one state counts as all of it from this much (the LP's tolerance)."""
DIVE_FORBID_USD = 1e6
"""The pricing cost added to a state a rule or a dive's fixing excludes (a path using one is never added: its reduced
cost stays above this less the duals' range)."""


def _start_dive(master: PatternMaster) -> None:
    """Price the box's artificial columns at :data:`DIVE_PENALTY_USD`."""
    if master.box_first >= 0:
        m = 2 * (master.n_rows - master.first_link)
        master.h.changeColsCost(m, np.arange(master.box_first, master.box_first + m, dtype=np.int32),
                                np.full(m, DIVE_PENALTY_USD))


def _reoptimise(master: PatternMaster, info: dict, deadline: float, paths_of) -> bool:
    """At most :data:`DIVE_ROUNDS` rounds of column generation: the LP, each job's cheapest paths at its duals
    (``paths_of(j, prices)``; None: the job is not priced) and the cheapest patterns; False when the clock ran out."""
    for _ in range(DIVE_ROUNDS):
        info["rounds"] += 1
        prices = master.solve()
        if time.perf_counter() >= deadline:
            break
        added = 0
        for j, graph in enumerate(master.data.graphs):
            found = paths_of(j, prices)
            if found is not None:
                added += master.add_priced_paths(graph, j, found, prices.job[j])
        if not added + master.add_priced_patterns(prices):
            break
    if time.perf_counter() >= deadline:
        info["stopped"] = "time"
        return False
    return True


def _bound_columns(master: PatternMaster, which: list[int]) -> None:
    """Bound the path columns ``which`` (indices into ``master.columns``) to 0."""
    idx = np.array([master.path_index[k] for k in which], dtype=np.int32)
    if idx.size:
        master.h.changeColsBounds(idx.size, idx, np.zeros(idx.size), np.zeros(idx.size))


def _dive_paths(master: PatternMaster, info: dict) -> list[np.ndarray] | None:
    """The dive's last LP: its value and artificial use in ``info``; each job's path of value above 1/2 (None if some
    job has none, or they do not fit)."""
    x = np.asarray(master.h.getSolution().col_value, dtype=float)
    info["lp_usd"] = master.value + master.data.constant_usd
    info["artificial"] = master.box_used()
    paths: list = [None] * len(master.data.graphs)
    for column, i in zip(master.columns, master.path_index, strict=True):
        if x[i] > 0.5:
            paths[column.job] = column.path
    return None if any(p is None for p in paths) or not master.data.fits(paths) else paths


def release(master: PatternMaster) -> None:
    """Undo a dive's fixings: every path column's bounds back to [0, ∞) (the box keeps the dive's penalty)."""
    idx = np.array(master.path_index, dtype=np.int32)
    master.h.changeColsBounds(idx.size, idx, np.zeros(idx.size), np.full(idx.size, INF))


def stage_dive(master: PatternMaster, searches, deadline: float, rng: np.random.Generator | None = None,
               top: int = 1, fix_above: float = INTEGRAL_FLOW) -> tuple[list[np.ndarray] | None, dict]:
    """Price and fix on the pattern master's LP by (job, stage): each round fixes every (job, stage) whose LP flow is on
    one state already, and the fractional (job, stage) with the most flow on one state to that state (the columns
    through other states bounded to 0, the pricing forbidding them), then re-optimises with column generation, until
    each job's flow is on one path. With ``rng``, the fixing is drawn among the ``top`` fractional (job, stage)s of most
    flow (a diversified dive). Returns (one path per job, or None; counters); changes the master's bounds and box
    (:func:`release` undoes the bounds). ``fix_above``: a (job, stage) with at least this flow on one state is fixed to
    it along with the drawn one (below 1: fewer LP rounds, a coarser dive)."""
    data = master.data
    info: dict = {"rounds": 0, "fixings": 0}
    _start_dive(master)
    rules: list[tuple[int, int, int, bool]] = []  # the fixings, as the branch's (job, stage, state, keep) rules
    fixed: set[tuple[int, int]] = set()
    banned = np.zeros(0, dtype=bool)
    while _reoptimise(master, info, deadline, lambda j, prices: searches[j].cheapest(
            ruled_costs(master, j, prices, rules))):
        x = np.asarray(master.h.getSolution().col_value, dtype=float)
        value = np.array([x[i] for i in master.path_index])
        jobs = np.array([c.job for c in master.columns])
        if all(value[jobs == j].max() >= INTEGRAL_FLOW for j in range(len(data.graphs))):
            return _dive_paths(master, info), info
        candidates, newly = [], 0
        for j, graph in enumerate(data.graphs):
            mine = np.flatnonzero((jobs == j) & (value > 1e-9))
            paths = np.array([master.columns[k].path for k in mine])
            for k in range(graph.n_stages):
                if (j, k) in fixed:
                    continue
                flow = np.bincount(paths[:, k], weights=value[mine], minlength=graph.n_states)
                c = int(flow.argmax())
                if flow[c] >= fix_above:
                    rules.append((j, k, c, True))
                    fixed.add((j, k))
                    newly += 1
                else:
                    candidates.append((float(flow[c]), j, k, c))
        if candidates:
            candidates.sort(key=lambda item: -item[0])
            _, j, k, c = candidates[0 if rng is None else int(rng.integers(min(top, len(candidates))))]
            rules.append((j, k, c, True))
            fixed.add((j, k))
            newly += 1
        if not newly:
            info["stopped"] = "no fixing"
            return None, info
        info["fixings"] += newly
        banned = np.concatenate([banned, np.zeros(len(master.columns) - banned.size, dtype=bool)])
        drop = [k for k, column in enumerate(master.columns) if not banned[k] and not allowed_by(column, rules)]
        banned[drop] = True
        _bound_columns(master, drop)
    return None, info


BRANCH_ROUNDS = 12
"""Column generation rounds of a branch node of :func:`branch_bound` (its bound is the best Lagrangian dual seen, valid
after any number of rounds)."""


@dataclass
class BranchNode:
    """A node of :func:`branch_bound`: (job, stage, state, keep) rules (keep: the job's path is in that state at that
    stage; else it is not), its proven bound and the prices it was found at."""

    rules: tuple[tuple[int, int, int, bool], ...]
    bound: float
    prices: LinkPrices
    branch: tuple[int, int, int] | None = None
    """The (job, stage, state) of most fractional flow in its last LP (None: integral, or not solved)."""


def ruled_costs(master: PatternMaster, j: int, prices: LinkPrices, rules) -> np.ndarray:
    """Job j's stage costs at the linking prices with the node's rules as a penalty of :data:`DIVE_FORBID_USD` on the
    states they exclude. A penalised minimum is at most the minimum over the allowed paths, so a Lagrangian dual
    computed with these costs is a lower bound of the node's schedules."""
    costs = master.path_costs(j, prices)
    for job, k, c, keep in rules:
        if job != j:
            continue
        if keep:
            own = costs[k, c]
            costs[k] += DIVE_FORBID_USD
            costs[k, c] = own
        else:
            costs[k, c] += DIVE_FORBID_USD
    return costs


def ruled_lagrangian(master: PatternMaster, searches, prices: LinkPrices, rules) -> tuple[float, list]:
    """(the Lagrangian dual of the node at the linking prices, each job's cheapest paths under the rules): const + Σ_j
    min over the paths of the penalised costs + Σ_{s,b} min over the patterns. Every schedule the rules allow costs at
    least this (+∞ when a job has no path meeting its target)."""
    bound = master.data.constant_usd
    found_all = []
    for j, search in enumerate(searches):
        found = search.cheapest(ruled_costs(master, j, prices, rules))
        if not found:
            return np.inf, []
        bound += found[0].cost
        found_all.append(found)
    for sb in range(len(master.site_blocks)):
        bound += float((master.pattern_reduced(sb, prices)).min())
    return bound, found_all


def allowed_by(column: Column, rules) -> bool:
    path = np.asarray(column.path)
    return all((path[k] == c) == keep for job, k, c, keep in rules if job == column.job)


def evaluate_node(master: PatternMaster, searches, node: BranchNode, deadline: float,
                  rounds: int = BRANCH_ROUNDS) -> tuple[BranchNode, list[np.ndarray] | None]:
    """Re-optimise the pattern master under the node's rules (other path columns bounded to 0, the pricing penalised,
    box step around the node's prices): its bound is the best Lagrangian dual met (at least the parent's); (the node
    with its bound and branching choice, one path per job if its last LP is integral)."""
    data = master.data
    allowed = np.array([allowed_by(c, node.rules) for c in master.columns])
    idx = np.array(master.path_index, dtype=np.int32)
    upper = np.where(allowed, INF, 0.0)
    master.h.changeColsBounds(idx.size, idx, np.zeros(idx.size), upper)
    if master.box_first >= 0:
        master.set_box(node.prices, BOX_USD)
    best, center = node.bound, node.prices
    prices = node.prices
    converged = False
    for _ in range(rounds):
        bound, found_all = ruled_lagrangian(master, searches, prices, node.rules)
        if bound > best:
            best, center = bound, prices
            master.set_box(center, BOX_USD)
        if not np.isfinite(bound):
            return BranchNode(node.rules, np.inf, prices), None
        added = 0
        for j, (graph, found) in enumerate(zip(data.graphs, found_all, strict=True)):
            for p in found[:PATHS_PER_JOB]:
                if p.cost < min(prices.job[j], DIVE_FORBID_USD / 2) - REDUCED_COST_TOL_USD:
                    n = len(master.columns)
                    if master.add(make_column(graph, j, p.path)) and not allowed_by(master.columns[n], node.rules):
                        master.h.changeColBounds(master.path_index[n], 0.0, 0.0)
                    added += len(master.columns) > n
        added += master.add_priced_patterns(prices)
        if time.perf_counter() >= deadline:
            break
        try:
            prices = master.solve()
        except RuntimeError:
            break
        interior = master.box_used() <= BOX_TOL
        if interior and (not added or master.value + data.constant_usd - best <= CONVERGED_RTOL * max(abs(best), 1.0)):
            converged = not added
            bound, _ = ruled_lagrangian(master, searches, prices, node.rules)
            best = max(best, bound)
            break
    out = BranchNode(node.rules, best, center)
    x = np.asarray(master.h.getSolution().col_value, dtype=float)
    fixed = {(job, k) for job, k, _, keep in node.rules if keep}
    most, choice = 1.0, None
    paths: list = [None] * len(data.graphs)
    for j, graph in enumerate(data.graphs):
        mine = [(master.columns[k], x[i]) for k, i in enumerate(master.path_index)
                if master.columns[k].job == j and x[i] > 1e-9]
        if not mine:
            continue
        top = max(mine, key=lambda item: item[1])
        if top[1] >= INTEGRAL_FLOW:
            paths[j] = top[0].path
        states = np.array([c.path for c, _ in mine])
        weights = np.array([w for _, w in mine])
        for k in range(graph.n_stages):
            if (j, k) in fixed:
                continue
            flow = np.bincount(states[:, k], weights=weights, minlength=graph.n_states)
            c = int(flow.argmax())
            if abs(flow[c] - 0.5) < most and flow[c] < INTEGRAL_FLOW:
                most, choice = abs(flow[c] - 0.5), (j, k, c)
    out.branch = choice
    integral = converged and choice is None and all(p is not None for p in paths) and master.box_used() <= BOX_TOL
    return out, (paths if integral else None)


def branch_bound(master: PatternMaster, searches, root: BranchNode, incumbent_usd: float, deadline: float,
                 info: dict, stop_usd: float = np.inf) -> tuple[float, list[list[np.ndarray]]]:
    """A shallow branch and price on the pattern master for the bound: best first, the open node of least bound is split
    on its most fractional (job, stage) state (that state / not that state); each child is re-optimised
    (:func:`evaluate_node`); it stops when that least bound reaches ``stop_usd``. Returns (the least bound of the open
    nodes, or the incumbent's value when every node is pruned; the schedules met at integral nodes). A child the clock
    leaves unevaluated keeps its parent's bound. The master's column bounds and box are changed."""
    root, _ = evaluate_node(master, searches, root, deadline, rounds=1)
    heap = [(root.bound, 0, root)]
    count, schedules = 1, []
    info.update(nodes=1, pruned=0)
    while heap and time.perf_counter() < deadline:
        bound, _, node = heap[0]
        if bound >= min(incumbent_usd, stop_usd) or node.branch is None:
            break
        heapq.heappop(heap)
        j, k, c = node.branch
        for keep in (True, False):
            child = BranchNode(node.rules + ((j, k, c, keep),), node.bound, node.prices)
            if time.perf_counter() < deadline:  # else it keeps its parent's bound (and stays open)
                child, paths = evaluate_node(master, searches, child, deadline)
                info["nodes"] += 1
                if paths is not None:
                    schedules.append(paths)
            if child.bound >= incumbent_usd:
                info["pruned"] += 1
                continue
            count += 1
            heapq.heappush(heap, (child.bound, count, child))
    least = min([b for b, _, _ in heap], default=incumbent_usd)
    return min(least, incumbent_usd), schedules
