"""A stronger master for the decomposition: job paths linked to exact site patterns.

The path master (:mod:`oracle.master`) prices a site's slot cost f_t(L) at the *mixed* load of its jobs' paths, at most
the average of f (Jensen): its bound is weakest where jobs share a site. This master also has, for each site s and block
b (the common refinement of the jobs' segments), *pattern* columns μ: one option per job (a running state at s, or not
running at s) whose GPUs fit the site in every slot of the block (and whose load every grid call's row:
:mod:`oracle.call_rows`), at the exact cost Σ_{t∈b} f_t(base_t + Σ loads). Rows:
per job Σ λ = 1; per (site, block) Σ μ = 1; per (job, block, running state) the link Σ_{paths in the state} λ −
Σ_{patterns with the job in it} μ = 0.

Lagrangian dual: at any linking prices y, const + Σ_j min_path (own − Σ_b y[j, b, path_b]) + Σ_{s,b} min_μ (cost + Σ_j
y[j, b, option_j]) bounds every schedule from below: the paths are priced exactly by the label search and the patterns
by enumeration (all listed at construction; more than :data:`MAX_PATTERNS` refuses the master). The bound is computed
from its definition at every iteration, never read from the LP.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aidc_env.instance import PAUSE
from oracle.call_rows import FIT_TOL_MW
from oracle.graph import DecompositionData
from oracle.master import INF, Column, _quiet, make_column, run_lp
from oracle.pricing import stage_costs

MAX_PATTERNS = 2_000_000
"""A master whose (site, block)s hold more GPU-feasible patterns than this in all is refused (ValueError): the caller
keeps the path master. sites3 has ~21,000 at most per (site, block); a fleet of twelve jobs in one pool far more."""


@dataclass(frozen=True)
class Block:
    """Slots ``start:stop``; ``stage[j]``: job j's checkpoint segment over them."""

    start: int
    stop: int
    stage: tuple[int, ...]


def blocks_of(data: DecompositionData) -> list[Block]:
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


def enumerate_patterns(data: DecompositionData, site: int, b: int, block: Block, budget: int) -> SiteBlock:
    """Every GPU-feasible pattern of (site, block) within its grid calls' load limits; ValueError when they would be
    more than ``budget``."""
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
        if gpus.size * g.size > 4 * budget:  # even before the GPU check: too many to list
            raise ValueError(f"more than {MAX_PATTERNS} patterns")
        G = (gpus[:, None] + g[None, :]).ravel()
        keep = G <= cap
        L = (load[:, None] + ld[None, :]).ravel()[keep]
        n_old, n_new = options.shape[0], opt.size
        rows = np.repeat(np.arange(n_old), n_new)[keep]
        cols = np.tile(np.arange(n_new), n_old)[keep]
        options = np.concatenate([options[rows], opt[cols][:, None]], axis=1)
        gpus, load = G[keep], L
        if gpus.size > budget:
            raise ValueError(f"more than {MAX_PATTERNS} patterns")
    a = pool.grid_usd_per_mw[slots][None, :]
    c = pool.curtailment_usd_per_mw[slots][None, :]
    R = pool.renewable_mw[slots][None, :]
    total = pool.base_load_mw[slots][None, :] + load[:, None]
    cost = (a * np.maximum(total - R, 0.0) + c * np.maximum(R - total, 0.0)).sum(axis=1)
    if np.isfinite(pool.load_limit_mw[slots]).any():  # a grid call: its patterns above the limit are no schedule's
        keep = np.all(total <= pool.load_limit_mw[slots][None, :] + FIT_TOL_MW, axis=1)
        options, cost = options[keep], cost[keep]
    return SiteBlock(site, b, options, cost)


@dataclass(frozen=True)
class LinkPrices:
    """Linking duals y[j]: (blocks, states) (0 where a state has no row), and the convexity duals."""

    link: list[np.ndarray]
    job: np.ndarray
    site_block: np.ndarray


class PatternMaster:
    """The restricted master LP over path and pattern columns (module docstring)."""

    def __init__(self, data: DecompositionData, threads: int | None = None) -> None:
        self.data = data
        self.blocks = blocks_of(data)
        J, B, S = len(data.graphs), len(self.blocks), len(data.pools)
        self.site_blocks: list[SiteBlock] = []
        for s in range(S):
            for b, blk in enumerate(self.blocks):
                budget = MAX_PATTERNS - sum(sb.cost.size for sb in self.site_blocks)
                self.site_blocks.append(enumerate_patterns(data, s, b, blk, budget))
                if not self.site_blocks[-1].cost.size:  # a grid call no pattern keeps: no schedule either
                    raise ValueError(f"no pattern of site {s} in block {b} keeps its grid calls")
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
        self.own = [stage_costs(g, np.zeros((S, data.inst.slots)), np.zeros((S, data.inst.slots))) for g in data.graphs]
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
        self.value, dual = run_lp(self.h, "pattern master")
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
        """Per pattern of (site, block) sb: its cost plus the linking duals of its options (the convexity dual not
        subtracted)."""
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
        """Box the linking duals to center ± width (artificial columns on every linking row, costed at the box's edges).
        The box only steers the duals the LP hands the pricing: the bound is evaluated from its definition at those
        duals, whatever the box."""
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



def prices_from(master: PatternMaster, gpu: np.ndarray, load: np.ndarray) -> LinkPrices:
    """Linking prices from the other master's $ per GPU and per MW (pools, T): y[j, b, c] = −(the state's GPUs and load
    over the block at those prices). The pattern Lagrangian there is at least the other master's."""
    link = []
    for j, graph in enumerate(master.data.graphs):
        y = np.zeros((len(master.blocks), graph.n_states))
        for b, blk in enumerate(master.blocks):
            per = gpu[:, blk.start:blk.stop].sum(axis=1) @ graph.gpus.T \
                + load[:, blk.start:blk.stop].sum(axis=1) @ graph.load_mw.T
            y[b] = np.where(master.link_row[j][b] >= 0, -per, 0.0)
        link.append(y)
    return LinkPrices(link, np.zeros(len(master.data.graphs)), np.zeros(len(master.site_blocks)))


@dataclass
class PatternOutcome:
    bound: float
    """The best Lagrangian dual found (a proven lower bound of every schedule)."""
    prices: LinkPrices
    cheapest: list[float]
    """Per job, its least path cost at ``prices`` (the path part of the bound)."""
    iterations: int
    converged: bool


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
"""A branch node's column generation (:func:`oracle.pattern_search.evaluate_node`) stops when the box does not bind and
the LP's value is within this share of the node's best bound (a stopping rule only: the bound is the best dual
evaluated). The root's column generation runs to convergence instead."""


def lagrangian(master: PatternMaster, searches, prices: LinkPrices) -> tuple[float, list, list[np.ndarray]]:
    """(the Lagrangian dual at the linking prices, each job's cheapest paths, each (site, block)'s pattern reduced
    costs): exact on both sides, so the value bounds every schedule."""
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
    """Column generation of the pattern master from linking prices ``start``, stabilised by a box step: the LP's linking
    duals are kept within ``box_usd`` of the centre (the prices of the best Lagrangian dual so far); the pricing runs at
    the LP's duals, a path or pattern enters when its reduced cost is negative there, and the centre moves to any point
    of higher Lagrangian dual, or to the LP's duals when nothing enters while the box binds. Stops when nothing enters
    and the box does not bind (converged), or at the deadline."""
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
    return PatternOutcome(bound=best, prices=center, cheapest=cheapest, iterations=iterations, converged=converged)
