"""A stronger master for the sites decomposition: job paths linked to exact site patterns (issue 14).

The column generation of :mod:`oracle.sites_cg` prices a site's slot cost f_t(L) at the *mixed* load of its jobs'
paths: a fractional master pays f of an average load, at most the average of f (Jensen), and that is where its
bound loses most (docs/sites.md "Where the gap is"). This master splits the variables: besides each job's path
columns λ it has, for each site s and block b (the common refinement of the jobs' checkpoint segments: in a
block every job holds one state), *pattern* columns μ: one option per job (one of its running states at s, or
"not running at s") whose GPUs fit the site in every slot of the block, at the exact cost Σ_{t∈b} f_t(base_t +
Σ loads). Rows:

- per job, Σ λ = 1; per (site, block), Σ μ = 1;
- linking, per (job j, block b, running state c): Σ_{paths in c at b} λ − Σ_{patterns with j in c} μ = 0.

Capacity is in the patterns (no capacity rows). With one job at a site the site's cost is now exact per path,
and with several the master pays a mixture of exact joint costs whose marginals are the jobs' path flows: a
relaxation of the sites problem at least as strong as the other master's (whose cost is f at the mixed load).

Lagrangian dual: at any linking prices y, const + Σ_j min_path (own − Σ_b y[j, b, path_b]) + Σ_{s,b} min_μ
(cost + Σ_j y[j, b, option_j]) bounds every schedule from below: the paths are priced exactly by the label search
(:class:`oracle.sites_pricing.SiteLabelSearch`) and the patterns by enumeration (all of them are listed once, at
construction). The bound is computed from its definition at every iteration, never read from the LP.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass

import highspy
import numpy as np

from aidc_env.instance import PAUSE
from oracle.fleet_master import INF, Column, _quiet, make_column
from oracle.fleet_pricing import stage_costs
from oracle.sites_graph import SitesData
from oracle.solvers import run_highs

MAX_PATTERNS = 2_000_000
"""A (site, block) with more GPU-feasible patterns than this is refused (ValueError): the caller keeps the other
master. sites3 has at most ~21,000 per (site, block)."""


@dataclass(frozen=True)
class Block:
    """Slots ``start:stop``; ``stage[j]``: job j's checkpoint segment over them."""

    start: int
    stop: int
    stage: tuple[int, ...]


def blocks_of(data: SitesData) -> list[Block]:
    """The common refinement of the jobs' segments."""
    cuts = sorted({int(x) for g in data.graphs for x in g.stage_slots} | {0, data.inst.slots})
    out = []
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        stage = tuple(min(int(np.searchsorted(g.stage_slots, a, side="right")) - 1, g.n_stages - 1)
                      for g in data.graphs)
        out.append(Block(a, b, stage))
    return out


@dataclass
class SiteBlock:
    """Every GPU-feasible pattern of one (site, block): per job its option (a state, −1: not running here)."""

    site: int
    block: int
    options: np.ndarray
    """(patterns, jobs)."""
    cost: np.ndarray
    """(patterns,) exact cost of the site over the block's slots ($)."""


def running_states(graph, site: int, stage: int) -> np.ndarray:
    return np.flatnonzero((graph.site_of == site) & (graph.choices != PAUSE) & graph.allowed[stage])


def enumerate_patterns(data: SitesData, site: int, b: int, block: Block) -> SiteBlock:
    pool = data.pools[site]
    slots = np.arange(block.start, block.stop)
    cap = int(pool.capacity_gpus[slots].min())
    options = np.zeros((1, 0), dtype=np.int64)
    gpus, load = np.zeros(1, dtype=np.int64), np.zeros(1)
    for j, graph in enumerate(data.graphs):
        states = running_states(graph, site, block.stage[j])
        opt = np.concatenate(([-1], states))
        g = np.concatenate(([0], graph.gpus[states, site]))
        ld = np.concatenate(([0.0], graph.load_mw[states, site]))
        G = (gpus[:, None] + g[None, :]).ravel()
        keep = G <= cap
        L = (load[:, None] + ld[None, :]).ravel()[keep]
        n_old, n_new = options.shape[0], opt.size
        rows = np.repeat(np.arange(n_old), n_new)[keep]
        cols = np.tile(np.arange(n_new), n_old)[keep]
        options = np.concatenate([options[rows], opt[cols][:, None]], axis=1)
        gpus, load = G[keep], L
        if gpus.size > MAX_PATTERNS:
            raise ValueError(f"more than {MAX_PATTERNS} patterns at site {site}, block {b}")
    a = pool.grid_usd_per_mw[slots][None, :]
    c = pool.curtailment_usd_per_mw[slots][None, :]
    R = pool.renewable_mw[slots][None, :]
    total = pool.base_load_mw[slots][None, :] + load[:, None]
    cost = (a * np.maximum(total - R, 0.0) + c * np.maximum(R - total, 0.0)).sum(axis=1)
    return SiteBlock(site, b, options, cost)


@dataclass(frozen=True)
class LinkPrices:
    """Linking duals y[j]: (blocks, states) (0 where a state has no row), and the convexity duals."""

    link: list[np.ndarray]
    job: np.ndarray
    site_block: np.ndarray


class PatternMaster:
    """The restricted master LP over path and pattern columns (module docstring)."""

    def __init__(self, data: SitesData, threads: int | None = None) -> None:
        self.data = data
        self.blocks = blocks_of(data)
        J, B, S = len(data.graphs), len(self.blocks), len(data.pools)
        self.site_blocks = [enumerate_patterns(data, s, b, blk) for s in range(S) for b, blk in enumerate(self.blocks)]
        # rows: jobs' convexity, (site, block) convexity, then linking rows per (job, block, running state)
        self.link_row = []
        row = J + S * B
        for graph in data.graphs:
            index = np.full((B, graph.n_states), -1, dtype=np.int64)
            for b, blk in enumerate(self.blocks):
                states = np.flatnonzero((graph.choices != PAUSE) & (graph.site_of >= 0) & graph.allowed[blk.stage[
                    len(self.link_row)]])
                index[b, states] = row + np.arange(states.size)
                row += states.size
            self.link_row.append(index)
        self.n_rows = row
        self.first_link = J + S * B
        self.box_first = -1
        self.h = _quiet(threads)
        lower = np.concatenate([np.ones(J + S * B), np.zeros(row - J - S * B)])
        self.h.addRows(row, lower, lower.copy(), 0, np.zeros(row, dtype=np.int32), np.array([], dtype=np.int32),
                       np.array([], dtype=float))
        self.own = [stage_costs(g, np.zeros((S, data.inst.slots)), np.zeros((S, data.inst.slots)))
                    for g in data.graphs]
        self.block_len = np.array([blk.stop - blk.start for blk in self.blocks])
        self.columns: list[Column] = []
        self.path_index: list[int] = []
        self.keys: set[tuple[int, bytes]] = set()
        self.pattern_keys: set[tuple[int, int]] = set()
        self.n_patterns = 0
        self.value = np.nan

    # ------------------------------------------------------------------ columns

    def _block_states(self, j: int, path: np.ndarray) -> np.ndarray:
        return np.asarray(path)[[blk.stage[j] for blk in self.blocks]]

    def add(self, column: Column) -> bool:
        key = (column.job, column.path.tobytes())
        if key in self.keys:
            return False
        self.keys.add(key)
        j = column.job
        states = self._block_states(j, column.path)
        rows = self.link_row[j][np.arange(len(self.blocks)), states]
        rows = rows[rows >= 0]
        index = np.concatenate(([j], rows)).astype(np.int32)
        self.path_index.append(self.h.getNumCol())
        self.h.addCol(column.own_usd, 0.0, INF, index.size, index, np.ones(index.size))
        self.columns.append(column)
        return True

    def add_pattern(self, sb: int, i: int) -> bool:
        if (sb, i) in self.pattern_keys:
            return False
        self.pattern_keys.add((sb, i))
        block = self.site_blocks[sb]
        opts = block.options[i]
        rows = [self.link_row[j][block.block, c] for j, c in enumerate(opts) if c >= 0]
        index = np.array([len(self.data.graphs) + sb] + rows, dtype=np.int32)
        values = np.concatenate(([1.0], -np.ones(len(rows))))
        self.h.addCol(float(block.cost[i]), 0.0, INF, index.size, index, values)
        self.n_patterns += 1
        return True

    def add_patterns_of(self, paths: Sequence[np.ndarray]) -> None:
        """The patterns a set of paths (one per job) makes (they fit: the caller checked)."""
        states = [self._block_states(j, p) for j, p in enumerate(paths)]
        for sb, block in enumerate(self.site_blocks):
            want = np.array([c if (c >= 0 and self.data.graphs[j].site_of[c] == block.site
                                   and self.data.graphs[j].choices[c] != PAUSE) else -1
                             for j, c in enumerate(int(s[block.block]) for s in states)])
            match = np.flatnonzero(np.all(block.options == want[None, :], axis=1))
            if match.size:
                self.add_pattern(sb, int(match[0]))

    # ------------------------------------------------------------------ solving and pricing

    def solve(self) -> LinkPrices:
        self.h.run()
        status = self.h.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"the pattern master LP ended {self.h.modelStatusToString(status)}")
        self.value = float(self.h.getInfo().objective_function_value)
        dual = np.asarray(self.h.getSolution().row_dual, dtype=float)
        return self.prices_of(dual)

    def prices_of(self, dual: np.ndarray) -> LinkPrices:
        J, SB = len(self.data.graphs), len(self.site_blocks)
        link = []
        for index in self.link_row:
            y = np.where(index >= 0, dual[np.maximum(index, 0)], 0.0)
            link.append(y)
        return LinkPrices(link=link, job=dual[:J].copy(), site_block=dual[J:J + SB].copy())

    def path_costs(self, j: int, prices: LinkPrices) -> np.ndarray:
        """(stages, states): job j's stage costs at the linking prices (own cost less the linking duals)."""
        out = self.own[j].copy()
        for b, blk in enumerate(self.blocks):
            out[blk.stage[j]] -= prices.link[j][b]
        return out

    def add_priced_paths(self, graph, j: int, found: Sequence, job_price_usd: float) -> int:
        """Add the first :data:`PATHS_PER_JOB` of job ``j``'s priced paths ``found`` whose reduced cost is below
        ``job_price_usd`` (the job's convexity dual); how many were new."""
        return sum(self.add(make_column(graph, j, p.path)) for p in found[:PATHS_PER_JOB]
                   if p.cost < job_price_usd - REDUCED_COST_TOL_USD)

    def add_priced_patterns(self, prices: LinkPrices, reduced: Sequence[np.ndarray] | None = None) -> int:
        """Per (site, block), add its :data:`PATTERNS_PER_BLOCK` cheapest patterns whose reduced cost at ``prices``
        (``reduced``, else :meth:`pattern_reduced`) is below the block's price; returns how many were new."""
        added = 0
        for sb in range(len(self.site_blocks)):
            r = reduced[sb] if reduced is not None else self.pattern_reduced(sb, prices)
            for i in np.argsort(r)[:PATTERNS_PER_BLOCK]:
                if r[i] < prices.site_block[sb] - REDUCED_COST_TOL_USD:
                    added += self.add_pattern(sb, int(i))
        return added

    def pattern_reduced(self, sb: int, prices: LinkPrices) -> np.ndarray:
        """Per pattern of (site, block) sb: its cost plus the linking duals of its options (the convexity dual
        not subtracted)."""
        block = self.site_blocks[sb]
        out = block.cost.copy()
        for j in range(len(self.data.graphs)):
            y = np.concatenate([prices.link[j][block.block], [0.0]])  # option −1 → the appended 0
            out += y[block.options[:, j]]
        return out

    def link_values(self, prices: LinkPrices) -> np.ndarray:
        """The linking prices in row order (rows J + SB onwards)."""
        out = np.zeros(self.n_rows - self.first_link)
        for j, index in enumerate(self.link_row):
            used = index >= 0
            out[index[used] - self.first_link] = prices.link[j][used]
        return out

    def set_box(self, center: LinkPrices, width_usd: float) -> None:
        """Box the linking duals to center ± width (artificial columns on every linking row, costed at the box's
        edges). The box only steers the duals the LP hands the pricing: the bound is evaluated from its
        definition at those duals, whatever the box."""
        n = self.n_rows - self.first_link
        y = self.link_values(center)
        if self.box_first < 0:
            self.box_first = self.h.getNumCol()
            rows = np.arange(self.first_link, self.n_rows, dtype=np.int32)
            for sign in (1.0, -1.0):
                self.h.addCols(n, np.zeros(n), np.zeros(n), np.full(n, INF), n, np.arange(n, dtype=np.int32), rows,
                               np.full(n, sign))
        # +1 column: reduced cost (y0 + w) − y ≥ 0 ⇒ y ≤ y0 + w; −1 column: −(y0 − w) + y ≥ 0 ⇒ y ≥ y0 − w
        costs = np.concatenate([y + width_usd, -(y - width_usd)])
        index = np.arange(self.box_first, self.box_first + 2 * n, dtype=np.int32)
        self.h.changeColsCost(index.size, index, costs)

    def box_used(self) -> float:
        """The artificial columns' total value in the LP's solution (0: the box does not bind)."""
        if self.box_first < 0:
            return 0.0
        n = self.n_rows - self.first_link
        x = np.asarray(self.h.getSolution().col_value, dtype=float)
        return float(x[self.box_first:self.box_first + 2 * n].sum())

    def fractional(self) -> list[tuple[Column, float]]:
        """The path columns with a positive value in the LP's solution."""
        x = np.asarray(self.h.getSolution().col_value, dtype=float)
        return [(c, float(x[i])) for c, i in zip(self.columns, self.path_index, strict=True) if x[i] > 1e-9]

    def add_all_patterns(self) -> None:
        """Every pattern of every (site, block) as a column (no pattern pricing needed afterwards)."""
        J = len(self.data.graphs)
        for sb, block in enumerate(self.site_blocks):
            n = block.cost.size
            starts, index, values = [], [], []
            for i in range(n):
                if (sb, i) in self.pattern_keys:
                    continue
                self.pattern_keys.add((sb, i))
                opts = block.options[i]
                rows = [self.link_row[j][block.block, c] for j, c in enumerate(opts) if c >= 0]
                starts.append(len(index))
                index += [J + sb] + rows
                values += [1.0] + [-1.0] * len(rows)
            if not starts:
                continue
            costs = np.array([block.cost[i] for i in range(n)])[[i for i in range(n)][-len(starts):]] \
                if len(starts) != n else block.cost
            self.h.addCols(len(starts), costs, np.zeros(len(starts)), np.full(len(starts), INF), len(index),
                           np.array(starts, dtype=np.int32), np.array(index, dtype=np.int32),
                           np.array(values, dtype=float))
            self.n_patterns += len(starts)


def prices_from(master: PatternMaster, gpu: np.ndarray, load: np.ndarray) -> LinkPrices:
    """Linking prices from the other master's $ per GPU and per MW (pools, T): y[j, b, c] = −(the state's GPUs
    and load over the block at those prices). The pattern Lagrangian there is at least the other master's."""
    link = []
    for j, graph in enumerate(master.data.graphs):
        y = np.zeros((len(master.blocks), graph.n_states))
        for b, blk in enumerate(master.blocks):
            per = gpu[:, blk.start:blk.stop].sum(axis=1) @ graph.gpus.T \
                + load[:, blk.start:blk.stop].sum(axis=1) @ graph.load_mw.T
            y[b] = np.where(master.link_row[j][b] >= 0, -per, 0.0)
        link.append(y)
    return LinkPrices(link, np.zeros(len(master.data.graphs)), np.zeros(len(master.site_blocks)))


def mixed(a: LinkPrices, b: LinkPrices, weight: float) -> LinkPrices:
    """weight·a + (1 − weight)·b on the linking prices (the convexity duals are b's)."""
    return LinkPrices([weight * x + (1 - weight) * y for x, y in zip(a.link, b.link, strict=True)], b.job,
                      b.site_block)


@dataclass
class PatternOutcome:
    bound: float
    """The best Lagrangian dual found (a proven lower bound of every schedule)."""
    prices: LinkPrices
    cheapest: list[float]
    """Per job, its least path cost at ``prices`` (the path part of the bound)."""
    iterations: int
    converged: bool
    lp_value: float


PATHS_PER_JOB = 6
"""Paths a job may add per iteration (its cheapest, one per end state)."""
PATTERNS_PER_BLOCK = 20
"""Patterns a (site, block) may add per iteration (the cheapest at the priced point)."""
BOX_USD = 0.05
"""Half-width of the box step's box on each linking dual ($ per job state and block)."""
BOX_TOL = 1e-9
"""The box binds when the artificial columns carry more than this."""
REDUCED_COST_TOL_USD = 1e-6
CONVERGED_RTOL = 1e-6
"""A branch node's column generation (:func:`evaluate_node`) stops when the box does not bind and the LP's value
(then the restricted master's, at least the node's LP optimum, itself at least every Lagrangian dual of the node)
is within this share of the node's best bound. A stopping rule only: the bound is the best dual evaluated. Not used
by the root's column generation: there it changed the case day's LP (43 iterations, $0.0001 lower) and so every
dive after it (the first three $766.73, 766.61, 767.26 instead of 766.65, 766.37, 766.67, load 4-6); and without
the box condition it stopped 2023-07-22 at $1,687.03 when $1,687.68 was reachable (duals at the box's edge)."""


def lagrangian(master: PatternMaster, searches, prices: LinkPrices
               ) -> tuple[float, list, list[np.ndarray]]:
    """(the Lagrangian dual at the linking prices, each job's cheapest paths, each (site, block)'s pattern
    reduced costs): exact on both sides, so the value bounds every schedule."""
    bound = master.data.constant_usd
    found_all = []
    for j, search in enumerate(searches):
        found = search.cheapest(master.path_costs(j, prices))
        if not found:
            raise ValueError(f"job {master.data.graphs[j].name} has no path meeting its target")
        bound += found[0].cost
        found_all.append(found)
    reduced = [master.pattern_reduced(sb, prices) for sb in range(len(master.site_blocks))]
    return bound + float(sum(r.min() for r in reduced)), found_all, reduced


def column_generation(master: PatternMaster, searches, start: LinkPrices, deadline: float,
                      box_usd: float = BOX_USD) -> PatternOutcome:
    """Column generation of the pattern master from linking prices ``start``, stabilised by a box step: the
    LP's linking duals are kept within ``box_usd`` of the centre (the prices of the best Lagrangian dual so far);
    the pricing runs at the LP's duals, a path or pattern enters when its reduced cost is negative there, and
    the centre moves to any point of higher Lagrangian dual, or to the LP's duals when nothing enters while the
    box binds. Stops when nothing enters and the box does not bind (converged), or at the deadline."""
    data = master.data
    best, found_all, reduced = lagrangian(master, searches, start)
    center, cheapest = start, [f[0].cost for f in found_all]
    for sb, r in enumerate(reduced):
        for i in np.argsort(r)[:PATTERNS_PER_BLOCK]:
            master.add_pattern(sb, int(i))
    master.set_box(center, box_usd)
    iterations, converged = 0, False
    while time.perf_counter() < deadline:
        iterations += 1
        prices = master.solve()
        bound, found_all, reduced = lagrangian(master, searches, prices)
        added = 0
        for j, (graph, found) in enumerate(zip(data.graphs, found_all, strict=True)):
            added += master.add_priced_paths(graph, j, found, prices.job[j])
        added += master.add_priced_patterns(prices, reduced)
        binds = master.box_used() > BOX_TOL
        if bound > best + REDUCED_COST_TOL_USD:
            best, center, cheapest = bound, prices, [f[0].cost for f in found_all]
            master.set_box(center, box_usd)
        elif not added and binds:
            center = prices
            master.set_box(center, box_usd)
        if not added and not binds:
            converged = True
            break
    return PatternOutcome(bound=best, prices=center, cheapest=cheapest, iterations=iterations, converged=converged,
                          lp_value=master.value + data.constant_usd)


def lp_rounding(master: PatternMaster) -> list[np.ndarray] | None:
    """Each job's path of largest value in the LP's last solution (None if some job has none)."""
    best: dict[int, tuple[float, np.ndarray]] = {}
    for column, value in master.fractional():
        if column.job not in best or value > best[column.job][0]:
            best[column.job] = (value, column.path)
    if len(best) < len(master.data.graphs):
        return None
    return [best[j][1] for j in range(len(master.data.graphs))]


def integer_patterns(master: PatternMaster, time_limit_s: float, mip_gap: float,
                     start: Sequence[np.ndarray] | None = None, threads: int | None = None,
                     keep_usd: float = np.inf) -> tuple[list[np.ndarray] | None, float | None]:
    """The pattern master with integer path columns over the columns it holds (the box's artificial columns
    removed): (one path per job, or None; HiGHS's dual bound over these columns). With every λ integral, each
    (site, block)'s linking rows fix its pattern, so the patterns need no integrality; the objective is exact.
    ``start``: paths to start from (their patterns are added); ``keep_usd``: only the path columns whose reduced
    cost in the LP's last solution is at most this (and the start's) may be chosen (a heuristic restriction)."""
    reduced = np.asarray(master.h.getSolution().col_dual, dtype=float) if np.isfinite(keep_usd) else None
    if start is not None:
        for j, path in enumerate(start):
            master.add(make_column(master.data.graphs[j], j, path))
        master.add_patterns_of(start)
    lp = master.h.getLp()
    h = _quiet(threads)
    h.passModel(lp)
    n = h.getNumCol()
    if master.box_first >= 0:
        m = 2 * (master.n_rows - master.first_link)
        index = np.arange(master.box_first, master.box_first + m, dtype=np.int32)
        h.changeColsBounds(m, index, np.zeros(m), np.zeros(m))
    paths_index = np.array(master.path_index, dtype=np.int32)
    if reduced is not None:
        chosen = set() if start is None else {(j, p.tobytes()) for j, p in enumerate(start)}
        drop = np.array([i for column, i in zip(master.columns, master.path_index, strict=True)
                         if i < reduced.size and reduced[i] > keep_usd
                         and (column.job, column.path.tobytes()) not in chosen], dtype=np.int32)
        if drop.size:
            h.changeColsBounds(drop.size, drop, np.zeros(drop.size), np.zeros(drop.size))
    h.changeColsIntegrality(paths_index.size, paths_index,
                            np.array([highspy.HighsVarType.kInteger] * paths_index.size))
    h.setOptionValue("time_limit", float(max(time_limit_s, 0.01)))
    h.setOptionValue("mip_rel_gap", float(mip_gap))
    if start is not None:
        chosen = {(j, p.tobytes()) for j, p in enumerate(start)}
        value = np.zeros(n)
        for column, i in zip(master.columns, master.path_index, strict=True):
            value[i] = float((column.job, column.path.tobytes()) in chosen)
        sol = highspy.HighsSolution()
        sol.col_value = value.tolist()
        sol.value_valid = True
        h.setSolution(sol)
    run_highs(h)  # a MIP with a time limit: Ctrl-C stops it (oracle/solvers.py)
    info = h.getInfo()
    bound = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else None
    if info.primal_solution_status != 2:
        return None, bound
    x = np.asarray(h.getSolution().col_value, dtype=float)
    paths: list[np.ndarray | None] = [None] * len(master.data.graphs)
    for column, i in zip(master.columns, master.path_index, strict=True):
        if x[i] > 0.5:
            paths[column.job] = column.path
    if any(p is None for p in paths):
        return None, bound
    return [p for p in paths if p is not None], bound


DIVE_PENALTY_USD = 1e4
"""In the dive, the box's artificial columns cost this much per unit (they only keep the LP feasible when a fixed
path has no fitting pattern yet; a dive whose last LP still uses them is dropped)."""
DIVE_ROUNDS = 6
"""Column generation rounds of the pattern dive between two fixings."""


def pattern_dive(master: PatternMaster, searches, deadline: float) -> tuple[list[np.ndarray] | None, dict]:
    """A primal heuristic on the pattern master's LP (price and fix): the unfixed job whose path column carries
    the most flow is fixed to it (its other columns bounded to 0, no new paths priced for it), the LP re-optimised
    with column generation over the other jobs' paths and all patterns, until every job is fixed. Returns (one
    path per job, or None; counters). With every path fixed the LP's patterns are the site loads of those paths,
    so its value is the schedule's exact cost (the caller replays it anyway). The master's column bounds and box
    are changed: run it after everything else reading the master's LP."""
    data = master.data
    J = len(data.graphs)
    info: dict = {"rounds": 0}
    if master.box_first >= 0:
        m = 2 * (master.n_rows - master.first_link)
        index = np.arange(master.box_first, master.box_first + m, dtype=np.int32)
        master.h.changeColsCost(m, index, np.full(m, DIVE_PENALTY_USD))
    fixed: dict[int, int] = {}  # job -> its column's index in master.columns
    while len(fixed) < J:
        for _ in range(DIVE_ROUNDS):
            info["rounds"] += 1
            prices = master.solve()
            if time.perf_counter() >= deadline:
                break
            _, found_all, reduced = lagrangian(master, searches, prices)
            added = 0
            for j, (graph, found) in enumerate(zip(data.graphs, found_all, strict=True)):
                if j in fixed:
                    continue
                added += master.add_priced_paths(graph, j, found, prices.job[j])
            added += master.add_priced_patterns(prices, reduced)
            if not added:
                break
        if time.perf_counter() >= deadline:
            info["stopped"] = "time"
            return None, info
        x = np.asarray(master.h.getSolution().col_value, dtype=float)
        best_j, best_k, best_w = -1, -1, -1.0
        for k, (column, i) in enumerate(zip(master.columns, master.path_index, strict=True)):
            if column.job not in fixed and x[i] > best_w:
                best_j, best_k, best_w = column.job, k, float(x[i])
        fixed[best_j] = best_k
        drop = np.array([i for k, (column, i) in enumerate(zip(master.columns, master.path_index, strict=True))
                         if column.job == best_j and k != best_k], dtype=np.int32)
        if drop.size:
            master.h.changeColsBounds(drop.size, drop, np.zeros(drop.size), np.zeros(drop.size))
    master.solve()
    info["lp_usd"] = master.value + data.constant_usd
    info["artificial"] = master.box_used()
    paths = [master.columns[fixed[j]].path for j in range(J)]
    return (paths if data.fits(paths) else None), info


INTEGRAL_FLOW = 1.0 - 1e-7
"""A (job, stage)'s LP flow on one state counts as all of it from this much (the LP's tolerance)."""
DIVE_FORBID_USD = 1e6
"""In the stage dive, the pricing cost added to a state its (job, stage) fixing excludes (a path using one is
never added: its reduced cost stays above this less the duals' range)."""


def release(master: PatternMaster) -> None:
    """Undo a dive's fixings: every path column's bounds back to [0, ∞) (the box keeps the dive's penalty)."""
    idx = np.array(master.path_index, dtype=np.int32)
    master.h.changeColsBounds(idx.size, idx, np.zeros(idx.size), np.full(idx.size, INF))


def stage_dive(master: PatternMaster, searches, deadline: float, rng: np.random.Generator | None = None,
               top: int = 1, fix_above: float = INTEGRAL_FLOW) -> tuple[list[np.ndarray] | None, dict]:
    """Price and fix on the pattern master's LP by (job, stage): each round fixes every (job, stage) whose LP flow
    is on one state already, and the fractional (job, stage) with the most flow on one state to that state (the
    columns through other states bounded to 0, the pricing forbidding them), then re-optimises with column
    generation, until each job's flow is on one path. Finer than :func:`pattern_dive` (a job keeps its freedom on
    the stages not fixed yet). With ``rng``, the fixing is drawn among the ``top`` fractional (job, stage)s of most
    flow (a diversified dive). Returns (one path per job, or None; counters); changes the master's bounds and box
    (:func:`release` undoes the bounds). ``fix_above``: a (job, stage) with at least this flow on one state is
    fixed to it along with the drawn one (below 1: fewer LP rounds, a coarser dive)."""
    data = master.data
    J = len(data.graphs)
    info: dict = {"rounds": 0, "fixings": 0}
    if master.box_first >= 0:
        m = 2 * (master.n_rows - master.first_link)
        index = np.arange(master.box_first, master.box_first + m, dtype=np.int32)
        master.h.changeColsCost(m, index, np.full(m, DIVE_PENALTY_USD))
    forced = [np.full(g.n_stages, -1, dtype=np.int64) for g in data.graphs]
    banned = np.zeros(0, dtype=bool)

    def allowed(column: Column) -> bool:
        f = forced[column.job]
        return bool(np.all((f < 0) | (np.asarray(column.path) == f)))

    while True:
        for _ in range(DIVE_ROUNDS):
            info["rounds"] += 1
            prices = master.solve()
            if time.perf_counter() >= deadline:
                break
            added = 0
            for j, (graph, search) in enumerate(zip(data.graphs, searches, strict=True)):
                costs = master.path_costs(j, prices)
                for k, c in enumerate(forced[j]):
                    if c >= 0:
                        keep = costs[k, c]
                        costs[k] += DIVE_FORBID_USD
                        costs[k, c] = keep
                added += master.add_priced_paths(graph, j, search.cheapest(costs), prices.job[j])
            added += master.add_priced_patterns(prices)
            if not added:
                break
        if time.perf_counter() >= deadline:
            info["stopped"] = "time"
            return None, info
        x = np.asarray(master.h.getSolution().col_value, dtype=float)
        value = np.array([x[i] for i in master.path_index])
        jobs = np.array([c.job for c in master.columns])
        integral = all(value[jobs == j].max() >= INTEGRAL_FLOW for j in range(J))
        if integral:
            break
        candidates = []
        newly = 0
        for j, graph in enumerate(data.graphs):
            mine = np.flatnonzero((jobs == j) & (value > 1e-9))
            paths = np.array([master.columns[k].path for k in mine])
            for k in range(graph.n_stages):
                if forced[j][k] >= 0:
                    continue
                flow = np.bincount(paths[:, k], weights=value[mine], minlength=graph.n_states)
                c = int(flow.argmax())
                if flow[c] >= fix_above:
                    forced[j][k] = c
                    newly += 1
                else:
                    candidates.append((float(flow[c]), j, k, c))
        if candidates:
            candidates.sort(key=lambda item: -item[0])
            pick = 0 if rng is None else int(rng.integers(min(top, len(candidates))))
            _, j, k, c = candidates[pick]
            forced[j][k] = c
            newly += 1
        if not newly:
            info["stopped"] = "no fixing"
            return None, info
        info["fixings"] += newly
        if banned.size < len(master.columns):
            banned = np.concatenate([banned, np.zeros(len(master.columns) - banned.size, dtype=bool)])
        drop = [k for k, column in enumerate(master.columns) if not banned[k] and not allowed(column)]
        banned[drop] = True
        idx = np.array([master.path_index[k] for k in drop], dtype=np.int32)
        if idx.size:
            master.h.changeColsBounds(idx.size, idx, np.zeros(idx.size), np.zeros(idx.size))
    x = np.asarray(master.h.getSolution().col_value, dtype=float)
    info["lp_usd"] = master.value + data.constant_usd
    info["artificial"] = master.box_used()
    paths = [None] * J
    for column, i in zip(master.columns, master.path_index, strict=True):
        if x[i] > 0.5:
            paths[column.job] = column.path
    if any(p is None for p in paths):
        return None, info
    return (paths if data.fits(paths) else None), info


BRANCH_ROUNDS = 12
"""Column generation rounds of a branch node of :func:`branch_bound` (its bound is the best Lagrangian dual seen,
valid after any number of rounds)."""


@dataclass
class BranchNode:
    """A node of :func:`branch_bound`: (job, stage, state, keep) rules (keep: the job's path is in that state at
    that stage; else it is not), its proven bound and the prices it was found at."""

    rules: tuple[tuple[int, int, int, bool], ...]
    bound: float
    prices: LinkPrices
    branch: tuple[int, int, int] | None = None
    """The (job, stage, state) of most fractional flow in its last LP (None: integral, or not solved)."""


def ruled_costs(master: PatternMaster, j: int, prices: LinkPrices, rules) -> np.ndarray:
    """Job j's stage costs at the linking prices with the node's rules as a penalty of :data:`DIVE_FORBID_USD` on
    the states they exclude. A penalised minimum is at most the minimum over the allowed paths, so a Lagrangian
    dual computed with these costs is a lower bound of the node's schedules."""
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
    """(the Lagrangian dual of the node at the linking prices, each job's cheapest paths under the rules):
    const + Σ_j min over the paths of the penalised costs + Σ_{s,b} min over the patterns. Every schedule the
    rules allow costs at least this (+∞ when a job has no path meeting its target)."""
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
    """Re-optimise the pattern master under the node's rules (other path columns bounded to 0, the pricing
    penalised, box step around the node's prices): its bound is the best Lagrangian dual met (at least the
    parent's); (the node with its bound and branching choice, one path per job if its last LP is integral)."""
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
    """A shallow branch and price on the pattern master for the bound: best first, the open node of least bound
    is split on its most fractional (job, stage) state (that state / not that state); each child is re-optimised
    (:func:`evaluate_node`); it stops when that least bound reaches ``stop_usd``. Returns (the least bound of the
    open nodes, or the incumbent's value when every node is pruned; the schedules met at integral nodes). A child
    the clock leaves unevaluated keeps its parent's bound. The master's column bounds and box are changed."""
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
