"""Completion bounds of the label search that know one job's tokens exactly (per-job resource tables).

The label search (:mod:`oracle.labeling`) drops a partial schedule when a lower bound on its cheapest
completion shows that it cannot end below the threshold θ. The Lagrangian bound prices every missing
token at the LP's dual μ_j and credits every extra token at μ_j too. That credit is the bound's weakness:
a completion that overshoots one job's tranche (a whole segment more than needed) is credited for tokens
worth nothing, and one that falls short is charged only μ_j per token instead of being impossible. Both
jobs compete for the same cheap hours, so the LP mixes schedules of one job above and below its tranche,
and the gap between the LP and the integer optimum (0.3-0.7 %) is exactly this granularity.

Per job j, this module tabulates by a backward dynamic programme over (block, joint state, tokens still
needed by j, on a grid)

    H_j(b, S, d) = min over completions after block b from S of
                   cost − Σ_{i≠j} μ_i·tokens_i + P_j·max(d − tokens_j, 0),

with the other jobs priced as in the Lagrangian bound and job j's shortfall charged P_j = κ·μ_j (κ > 1,
:data:`PENALTY_FACTOR`), its overshoot not credited. For every completion that meets both tranches,
cost ≥ H_j(b, S, d_j) + Σ_{i≠j} μ_i·d_i, so that is a valid bound for any κ ≥ 0. H_j is non-decreasing
and P_j-Lipschitz in d, so a value between two grid points is bounded below by the larger of the lower
point's value and the upper point's value minus P_j·(distance): the table stays a valid lower bound
(by induction over the blocks), and it is never weaker than the Lagrangian bound at κ = 1.

The transition from S to S' changes a job's tokens only through whether that job changed mode (kept or
restarted segment), so the minimum over S' splits into four groups (both kept: S' = S; one job kept:
S' with the same choice of that job; both changed: any S'), and a block costs O(states × grid) instead of
O(states² × grid). Measured on 2023-01-14 (K = 12), the hardest day of the old search: the search at the
optimum's cost keeps 136 labels instead of 197,774 (κ = 3, 400 grid points).
"""

from __future__ import annotations

from typing import Any

import numpy as np

PENALTY_FACTOR = 3.0
"""κ: the shortfall of the tracked job is charged κ·μ_j per token (see the module docstring)."""

GRID_POINTS = 400
"""Fewest grid points of each job's tokens still needed, from 0 to its tranche."""

GRID_POINTS_PER_SEGMENT = 25
"""...and at least this many per checkpoint segment of the job: every segment a job opens shifts its need off
the grid, and the interpolation can lose up to about μ_j × one grid step there, so the loss grows with K at a
fixed grid. Measured on 2023-05-15, K = 48 (the slowest K = 48 day): 400 points, root bound $527.81 (the
Lagrangian one) and 56,623 labels in the last search; 1,200 points, $529.22 and 2,212 labels (optimum $531.02)."""

MAX_TABLE_ENTRIES = 100_000_000
"""Largest blocks × states × grid points × jobs held (8 bytes each, 0.8 GB); beyond it the grid is coarser."""


class CompletionBound:
    """Per-job tables H_j (see the module docstring) of one :class:`~oracle.labeling.LabelSearch` (typed
    ``Any`` here: labeling imports this module, and the packages' modules may not import in a circle)."""

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
        """Per variant (which jobs change their choice entering a block that opens ``opens``): the variant,
        the price of the other jobs' tokens per S' and the flat gather of H_j after the shift by j's tokens."""
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
