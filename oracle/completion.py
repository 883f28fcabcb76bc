"""Completion bounds of the label search that know one job's tokens exactly (per-job resource tables).

The label search (:mod:`oracle.labeling`) drops a partial schedule when a lower bound on its cheapest completion shows
that it cannot end below the threshold θ. The Lagrangian bound prices every missing token at μ_j and credits every extra
token at μ_j too: a completion that overshoots one job's tranche is credited for tokens worth nothing, and one that
falls short is charged only μ_j per token. Per job j, this module tabulates by a backward dynamic programme over (block,
joint state, tokens still needed by j, on a grid)

    H_j(b, S, d) = min over completions after block b from S of
                   cost − Σ_{i≠j} μ_i·tokens_i + P_j·max(d − tokens_j, 0),

the other jobs priced as in the Lagrangian bound and job j's shortfall charged P_j = κ·μ_j (κ > 1,
:data:`PENALTY_FACTOR`), its overshoot not credited. For every completion that meets both tranches, cost ≥ H_j(b, S,
d_j) + Σ_{i≠j} μ_i·d_i, a valid bound for any κ ≥ 0, never weaker than the Lagrangian one at κ = 1. H_j is
non-decreasing and P_j-Lipschitz in d, so between two grid points it is bounded below by the larger of the lower point's
value and the upper point's value minus P_j·(distance): the table stays a valid lower bound.

A transition changes a job's tokens only through whether that job changed mode, so the minimum over the next state
splits into four groups (both kept: S' = S; one kept: S' with that job's choice; both changed: any S') and a block costs
O(states × grid) instead of O(states² × grid). On a horizon of several days :class:`RestrictedCompletionBound` tabulates
the same bound only over the (block, state) pairs near the Lagrangian bound, on a finer grid.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from oracle.kernels import back_rows, table_bound

PENALTY_FACTOR = 3.0
"""κ: the shortfall of the tracked job is charged κ·μ_j per token (see the module docstring)."""
GRID_POINTS = 400
"""Fewest grid points of each job's tokens still needed, from 0 to its tranche."""
GRID_POINTS_PER_SEGMENT = 25
"""...and at least this many per checkpoint segment of the job: every segment a job opens shifts its need off
the grid, and the interpolation can lose up to about μ_j × one grid step there, so the loss grows with K at a
fixed grid (``benchmarks/oracle_speed.py --segments 48`` shows the labels it saves)."""
MAX_TABLE_ENTRIES = 100_000_000
"""Largest blocks × states × grid points × jobs held (8 bytes each, 0.8 GB); beyond it the grid is coarser."""


class CompletionBound:
    """Per-job tables H_j (see the module docstring) of one :class:`~oracle.labeling.LabelSearch` (typed ``Any`` here:
    labeling imports this module, and the packages' modules may not import in a circle)."""

    def __init__(self, search: Any, kept: np.ndarray, restarted: np.ndarray, *,
                 penalty_factor: float = PENALTY_FACTOR, grid_points: int = GRID_POINTS) -> None:
        states = search.states
        n_blocks, n_states = search.n_blocks, search.n_states
        n_jobs = states.shape[1]
        self.mu = search.mu
        self.need = search.tranche
        wanted = max(grid_points, GRID_POINTS_PER_SEGMENT * max(job.segments for job in search.data.inst.jobs))
        per_job = max(8, min(wanted, MAX_TABLE_ENTRIES // max(1, n_blocks * n_states * n_jobs)))
        self.tracked = [j for j in range(n_jobs) if self.need[j] > 0 and self.mu[j] > 0]
        self.grid = {j: np.linspace(0.0, self.need[j], per_job + 1) for j in self.tracked}
        self.step = {j: self.need[j] / per_job for j in self.tracked}
        self.penalty = {j: penalty_factor * self.mu[j] for j in self.tracked}
        self._groups = [[np.flatnonzero(states[:, k] == c) for c in np.unique(states[:, k])] for k in range(n_jobs)]
        self.tables: dict[int, list[np.ndarray]] = {}
        for j in self.tracked:
            shifts: dict[tuple, list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]] = {}
            table: list[np.ndarray] = [np.empty(0)] * n_blocks
            table[n_blocks - 1] = np.broadcast_to(self.penalty[j] * self.grid[j], (n_states, per_job + 1)).copy()
            for b in range(n_blocks - 1, 0, -1):
                key = tuple(bool(v) for v in search.segment_start[b])
                if key not in shifts:  # the same for every block that opens the same jobs' segments
                    shifts[key] = self._variants(j, search.segment_start[b], kept, restarted)
                table[b - 1] = self._step_back(search.cost[b], table[b], shifts[key])
            self.tables[j] = table

    def _where(self, j: int, need: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Grid cell of each ``need`` and the penalties P_j·(distance) to its lower and upper point."""
        grid, step, penalty = self.grid[j], self.step[j], self.penalty[j]
        x = np.clip(need, 0.0, grid[-1])
        low = np.clip(np.floor(x / step).astype(np.int64), 0, grid.size - 2)
        return low, penalty * np.maximum(grid[low] - x, 0.0), penalty * (grid[low + 1] - x)

    def _variants(self, j: int, opens: np.ndarray, kept: np.ndarray, restarted: np.ndarray) -> list:
        """Per variant (which jobs change their choice entering a block that opens ``opens``): the variant, the price of
        the other jobs' tokens per S' and the flat gather of H_j after the shift by j's tokens."""
        n_states, n_jobs = kept.shape
        width = self.grid[j].size
        out = []
        for changed in range(1 << n_jobs):  # bit i set: job i changes its choice when entering the block
            if any((changed >> i) & 1 and not opens[i] for i in range(n_jobs)):
                continue  # a job inside a segment keeps its choice
            gain = np.zeros(kept.shape)
            for i in np.flatnonzero(opens):
                gain[:, i] = restarted[:, i] if (changed >> i) & 1 else kept[:, i]
            others = sum((self.mu[i] * gain[:, i] for i in range(n_jobs) if i != j), np.zeros(n_states))
            low, below, above = self._where(j, self.grid[j][None, :] - gain[:, j][:, None])
            flat = low + (np.arange(n_states) * width)[:, None]
            out.append((changed, others, flat, below, above))
        return out

    def _step_back(self, cost: np.ndarray, after: np.ndarray, variants: list) -> np.ndarray:
        """H_j after block b − 1 from H_j after block b (``cost``: block b's cost per state S')."""
        values = after.ravel()
        n_jobs = len(self._groups)
        best = None
        for changed, others, flat, below, above in variants:
            value = np.maximum(values[flat] - below, values[flat + 1] - above)
            value += (cost - others)[:, None]
            if changed == 0:
                best = value if best is None else np.minimum(best, value)
                continue
            # min over S' by group: a changed variant is never below the kept one of the same S' (fewer
            # tokens), so a group may include S' = S, or any S' sharing the kept job's choice.
            kept_jobs = [i for i in range(n_jobs) if not (changed >> i) & 1]
            if best is None:
                best = np.full_like(value, np.inf)
            if not kept_jobs:
                np.minimum(best, value.min(axis=0)[None, :], out=best)
                continue
            for members in self._groups[kept_jobs[0]]:  # two jobs at most: one kept job
                best[members] = np.minimum(best[members], value[members].min(axis=0)[None, :])
        return best

    def bound(self, block: int, state: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Lower bound on the cost after ``block`` of completing each label (state, tokens capped at the tranche)."""
        short = np.maximum(self.need[None, :] - tokens, 0.0)
        priced = short @ self.mu
        best = np.full(state.size, -np.inf)
        for j in self.tracked:
            values = self.tables[j][block].ravel()
            low, below, above = self._where(j, short[:, j])
            flat = low + state * self.grid[j].size
            own = np.maximum(values[flat] - below, values[flat + 1] - above)
            best = np.maximum(best, own + priced - self.mu[j] * short[:, j])
        return best


HORIZON_GRID_FACTOR = 8
"""On a horizon of several days the tables of :class:`RestrictedCompletionBound` have up to this × the day's grid points
per job (day rule: max(:data:`GRID_POINTS`, :data:`GRID_POINTS_PER_SEGMENT` × K); fewer when :data:`MAX_TABLE_ENTRIES`
caps them), each block's table on its window of needs: a week at K = 12 has 84 segment steps, each of which can lose up
to κ·μ_j × one grid step to interpolation (``benchmarks/oracle_days.py --horizon-days 7`` measures the weeks)."""
RESTRICT_MARGIN = 1e-3
"""The first restricted tables keep the (block, state) pairs whose Lagrangian through-bound is within this (relative) of
the Lagrangian bound; a search at a threshold beyond it rebuilds the tables (:meth:`RestrictedCompletionBound.covers`).
"""


class RestrictedCompletionBound(CompletionBound):
    """The tables H_j restricted to completions that stay inside the (block, state) pairs whose Lagrangian through-bound
    is at most ``ceiling`` (θ_max), on a grid :data:`HORIZON_GRID_FACTOR` × finer.

    Every schedule costing ≤ θ passes only through pairs whose through-bound is ≤ θ, so for a search at θ ≤ θ_max the
    restricted minimum is a valid (and larger) pruning bound; a completion leaving the pairs, or a state outside them,
    is +inf. H_j restricted is still non-decreasing and P_j-Lipschitz in d, so the interpolation rule stays valid. Only
    the kept pairs are tabulated, each block on the window of needs a label can have there (:meth:`_spans`). As a lower
    bound on the optimum a value v of it gives min(v, θ_max).
    """

    def __init__(self, search: Any, kept: np.ndarray, restarted: np.ndarray, ceiling: float, *,
                 penalty_factor: float = PENALTY_FACTOR, grid_points: int = GRID_POINTS,
                 grid_factor: int | None = None) -> None:
        states = search.states
        n_blocks, n_states = search.n_blocks, search.n_states
        n_jobs = states.shape[1]
        self.ceiling = float(ceiling)
        self.mu = search.mu
        self.need = search.tranche
        self.inside = [np.flatnonzero(search.through[b] <= self.ceiling) for b in range(n_blocks)]
        self.row = np.full((n_blocks, n_states), -1, dtype=np.int64)  # (block, state) -> row of its table, or -1
        for b, members in enumerate(self.inside):
            self.row[b, members] = np.arange(members.size)
        self.tracked = [j for j in range(n_jobs) if self.need[j] > 0 and self.mu[j] > 0]
        # Each block's window of needs (share of the tranche): from the tranche less the most tokens made by the
        # end of the block (inside the kept pairs) to the most still reachable after it.
        spans = {j: self._spans(search, j) for j in self.tracked}
        cells = sum(members.size * (hi - lo) for j in self.tracked for members, (lo, hi) in zip(self.inside, spans[j]))
        pairs = sum(members.size for members in self.inside)
        grid_factor = HORIZON_GRID_FACTOR if grid_factor is None else grid_factor
        wanted = grid_factor * max(grid_points, GRID_POINTS_PER_SEGMENT * max(job.segments for job in search.data.inst.jobs))
        room = MAX_TABLE_ENTRIES - 2 * pairs * len(self.tracked)  # each row holds its window's points + 2 at most
        per_job = max(8, min(wanted, int(room // max(cells, 1e-9)) if room > 0 else 8))
        self.grid = {j: np.linspace(0.0, self.need[j], per_job + 1) for j in self.tracked}
        self.step = {j: self.need[j] / per_job for j in self.tracked}
        self.penalty = {j: penalty_factor * self.mu[j] for j in self.tracked}
        self._choices = states
        self.first: dict[int, np.ndarray] = {}
        """Per job and block: the grid index of the window's first point (its table's column 0)."""
        last: dict[int, np.ndarray] = {}
        for j in self.tracked:
            self.first[j] = np.array([min(int(np.floor(lo * per_job)), per_job - 1) for lo, _ in spans[j]],
                                     dtype=np.int64)
            last[j] = np.array([min(max(int(np.ceil(hi * per_job)), k + 1), per_job)
                                for k, (_, hi) in zip(self.first[j], spans[j], strict=True)], dtype=np.int64)

        def job_table(j: int) -> list[np.ndarray]:
            """Job j's tables, from the last block back (each from the next)."""
            first = self.first[j]
            table: list[np.ndarray] = [np.empty((0, 2))] * n_blocks
            end = self.grid[j][first[-1]:last[j][-1] + 1]
            table[n_blocks - 1] = np.broadcast_to(self.penalty[j] * end, (self.inside[-1].size, end.size)).copy()
            for b in range(n_blocks - 1, 0, -1):
                table[b - 1] = self._restricted_back(j, b, search.cost[b], table[b], search.segment_start[b],
                                                     kept, restarted, int(first[b - 1]), int(last[j][b - 1]))
            return table

        # The jobs' tables are independent, and their compiled loop releases the GIL: one thread per job.
        workers = min(len(self.tracked), os.cpu_count() or 1)
        if workers > 1:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                self.tables = dict(zip(self.tracked, pool.map(job_table, self.tracked), strict=True))
        else:
            self.tables = {j: job_table(j) for j in self.tracked}

    def _spans(self, search: Any, j: int) -> list[tuple[float, float]]:
        """Per block, the needs of job j (shares of its tranche) that a label inside the kept pairs can have after it:
        from 1 − (most tokens made by then) to the most tokens still reachable (capped to [0, 1])."""
        need = self.need[j]
        made = np.full(search.n_states, -np.inf)
        made[self.inside[0]] = np.minimum(search.gain[0][0, self.inside[0], j], need)
        spans = []
        for b in range(search.n_blocks):
            if b > 0:
                more = np.where(search.allowed[b], made[:, None] + search.gain[b][:, :, j], -np.inf).max(axis=0)
                made = np.full(search.n_states, -np.inf)
                made[self.inside[b]] = np.minimum(more[self.inside[b]], need)
            members = self.inside[b]
            if members.size == 0:
                spans.append((0.0, 0.0))
                continue
            low = max(0.0, need - float(made[members].max())) / need
            high = min(need, float(search.reachable[b, members, j].max())) / need
            spans.append((min(low, 1.0), max(min(high, 1.0), 0.0)))
        return spans

    def covers(self, threshold_usd: float) -> bool:
        """Whether the tables are a valid pruning bound for a search at this threshold."""
        return threshold_usd <= self.ceiling

    def _restricted_back(self, j: int, b: int, cost: np.ndarray, after: np.ndarray, opens: np.ndarray,
                         kept: np.ndarray, restarted: np.ndarray, first: int, last: int) -> np.ndarray:
        """Rows of block b − 1's inside states on grid points first..last, from ``after`` (rows of block b's inside
        states on its window).

        A transition's variant (which jobs change their choice entering block b) fixes each job's tokens, so the minimum
        over S' splits by variant: S' = S (no job changes), S' sharing the kept job's choice (the other job changes),
        any S' (both change); a changed variant is never below the kept one of the same S', so a group may include S' =
        S. The rows are taken one state S' at a time (compiled: :func:`oracle.kernels.back_rows`): job j's shift of S''s
        row depends only on whether j changes, and each variant adds its offset and takes the minimum into the row of S,
        of S's group, or of every S.

        The grid is uniform, so a shift by g tokens of job j (c = ⌊g/step⌋ whole steps and a fraction f·step) maps grid
        point i to the cell [i − c − 1, i − c], whose interpolated value is max(H[i − c − 1], H[i − c] − P_j·f·step)
        (:meth:`CompletionBound._where`). A need below block b's window is bounded from its first two points (H is
        P_j-Lipschitz); one beyond it, past every token still reachable, is exactly its last point's value + P_j × the
        distance."""
        into, out = self.inside[b], self.inside[b - 1]
        width = last - first + 1
        n_jobs = kept.shape[1]
        if into.size == 0 or out.size == 0:
            return np.full((out.size, width), np.inf)
        others_of = [i for i in range(n_jobs) if i != j]
        k = others_of[0] if others_of else None  # two jobs at most
        opens_j, opens_k = bool(opens[j]), k is not None and bool(opens[k])
        # the other job's price per S' for each of its moves (kept / changed); 0 inside its segment
        offsets = {}
        for moved_k in ((0, 1) if opens_k else (0,)):
            gain = np.zeros(into.size) if k is None or not opens_k else (restarted if moved_k else kept)[into, k]
            others = np.zeros(into.size) if k is None else np.zeros(into.size) + self.mu[k] * gain
            offsets[moved_k] = cost[into] - others
        choices = self._choices + 1  # a pause (−1) is 0
        k_column = k if k is not None else j  # unused without k
        return back_rows(
            np.ascontiguousarray(after, dtype=np.float64), self.row[b - 1][into], choices[into, j],
            choices[into, k_column], choices[out, j], choices[out, k_column],
            kept[into, j] if opens_j else np.zeros(into.size), restarted[into, j], offsets[0],
            offsets[1 if opens_k else 0], k is not None, opens_j, opens_k, self.grid[j], int(self.first[j][b]),
            float(self.step[j]), float(self.penalty[j]), first, width, int(choices.max()) + 1)

    def bound(self, block: int, state: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """As :meth:`CompletionBound.bound`, on each block's window (a need outside it as in :meth:`_restricted_back`);
        +inf for a state outside the kept pairs."""
        short = np.maximum(self.need[None, :] - tokens, 0.0)
        priced = short @ self.mu
        best = np.full(state.size, -np.inf)
        rows = self.row[block, state]
        outside = rows < 0
        rows = np.where(outside, 0, rows)
        for j in self.tracked:
            table = self.tables[j][block]
            if table.shape[0] == 0:
                return np.full(state.size, np.inf)
            table_bound(best, table, rows, np.ascontiguousarray(short[:, j]), priced, float(self.mu[j]),
                        self.grid[j], float(self.step[j]), float(self.penalty[j]), int(self.first[j][block]))
        best[outside] = np.inf
        return best
