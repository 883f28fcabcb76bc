"""The fleet env's reservation rule (issue 13): the choices after which every target and deadline stays reachable.

Jobs compete for one pool, so a per-job check is not enough: a choice that leaves job j able to finish may
take the GPUs another job needs later. The rule here is a sufficient one, stated per job and checked jointly.

**The plan of a job.** After its committed segment (ending at slot e_j, with ``X_j`` tokens made by then), job
j *holds one mode m* from max(e_j, release_j) to its deadline d_j (the horizon's end for pre-training): either
its committed choice itself (no restart, when the hold starts at e_j) or any mode after a restart (τ_j hours
lost). Among the modes that make the missing tokens (W_j − X_j) by d_j, it reserves the one with the *fewest
GPUs* (:meth:`FleetPlan.held_gpus`; 0 when nothing is missing, N + 1 when no mode can make it). A job whose
deadline has passed is out of the plan (met or, after an unsafe start, missed: it no longer asks for GPUs); the
job deciding now is not: a choice after which it misses its deadline is never safe.

**The rule.** A state is *safe* when, in every slot s ≥ t, the jobs' reservations fit the pool beside the
inference GPUs: Σ_j G_j(s) + inference(s) ≤ N, with G_j(s) the GPUs of the committed choice before e_j and of
the held mode in [max(e_j, release_j), d_j). Tokens depend on a job's own choices only and capacity is
additive, so the fewest-GPU held mode of every job is the best plan for every slot at once: the state is safe
if and only if *some* held-mode plan of all jobs fits. A choice is safe when the state after it is.

**Why it is enough.** If the state is safe, the job deciding next can always take the mode its plan holds:
that segment uses exactly the reserved GPUs and its plan afterwards needs at most as many (holding the same
mode is still possible, without a new restart), so the state stays safe. A policy that follows the mask
therefore meets every target by its deadline whenever the episode starts safe (e.g. when the fixed schedule
is feasible), and the mask is never empty. The rule is sufficient, not necessary: a schedule that pauses and
resumes a job twice may exist when no held mode does.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import numpy as np

from aidc_env.safety import SAFETY_TOLERANCE


class FleetPlan:
    """Per-job tables of the reservation rule, built once per env (arrays indexed by local choice 0 = pause,
    i = mode i − 1): ``gpus_loc``, ``rate3600_loc`` (tokens per hour); per job its ``release``, ``deadline``
    (slots), ``restart_hours`` and ``tranche_tokens``."""

    def __init__(self, *, n_gpus: int, slot_hours: float, gpus_loc: Sequence[np.ndarray],
                 rate3600_loc: Sequence[np.ndarray], release: Sequence[int], deadline: Sequence[int],
                 restart_hours: Sequence[float], tranche_tokens: Sequence[float]):
        self.n_gpus = int(n_gpus)
        self.slot_hours = float(slot_hours)
        self.gpus_loc = [np.asarray(g, dtype=np.int64) for g in gpus_loc]
        self.rate3600_loc = [np.asarray(r, dtype=float) for r in rate3600_loc]
        self.release = list(release)
        self.deadline = list(deadline)
        self.tau = list(restart_hours)
        self.target_safe = [float(w) * (1 - SAFETY_TOLERANCE) for w in tranche_tokens]
        # Modes sorted by tokens per hour: the fewest GPUs of a mode at least as fast as the k-th slowest is a
        # suffix minimum (index M + 1: no mode is fast enough -> more GPUs than the pool).
        self.rate_sorted = []
        self.rate_order = []
        self.fewest_gpus = []
        for g, r in zip(self.gpus_loc, self.rate3600_loc, strict=True):
            order = np.argsort(r, kind="stable")
            self.rate_order.append(order)
            self.rate_sorted.append(r[order])
            suffix_min = np.minimum.accumulate(g[order][::-1])[::-1]
            self.fewest_gpus.append(np.append(suffix_min, self.n_gpus + 1).astype(np.int64))
        self._cache: dict[tuple[int, int], tuple[np.ndarray, list[float], np.ndarray | None, list[float] | None]] = {}
        self._by_gpus_cache: dict[tuple[int, int], tuple[list[int], list[float]]] = {}
        self._fewest_list = [f.tolist() for f in self.fewest_gpus]  # Python scalars for the one-candidate path
        self._gpus_list = [g.tolist() for g in self.gpus_loc]

    def hold_start(self, j: int, end: int) -> int:
        """First slot of job j's held mode after a committed segment ending at ``end``."""
        return max(end, self.release[j])

    def _tables(self, j: int, end: int) -> tuple[np.ndarray, list[float], np.ndarray | None, list[float] | None]:
        """Job j's held-mode tables after a segment ending at ``end`` (cached): tokens each mode makes from a
        restart, sorted (array and list), and tokens each choice makes when kept (array and list; None: no hold,
        or the hold starts after ``end`` at the release, so nothing is kept)."""
        key = (j, end)
        cached = self._cache.get(key)
        if cached is None:
            start, stop = self.hold_start(j, end), self.deadline[j]
            hours = max(stop - start, 0) * self.slot_hours
            restart = self.rate_sorted[j] * max(hours - self.tau[j], 0.0)
            kept = self.rate3600_loc[j] * hours if start == end and start < stop else None
            cached = self._cache[key] = (restart, restart.tolist(), kept, None if kept is None else kept.tolist())
        return cached

    def held_gpus(self, j: int, end: int, need: np.ndarray, kept: bool) -> np.ndarray:
        """GPUs job j reserves after a committed segment ending at slot ``end``, per candidate local choice.

        ``need``: per candidate c (all of the job's local choices, in order), the tokens still missing after that
        segment (the safe target W·(1 − 5e-10) less the tokens made by then); ``kept``: candidate c is also the
        choice committed in that segment (it may be held on without a restart). 0 when nothing is missing,
        N + 1 when no held mode makes it by the deadline.
        """
        restart, _, keep_tokens, _ = self._tables(j, end)
        g = self.fewest_gpus[j][restart.searchsorted(need)]
        if kept and keep_tokens is not None:
            np.minimum(g, self.gpus_loc[j], out=g, where=keep_tokens >= need)
        return g

    def held_gpus_of(self, j: int, end: int, need: float, c: int) -> int:
        """:meth:`held_gpus` (with ``kept``) of one candidate local choice ``c``, in Python scalars: the same
        number (``need`` is the same float, the same comparisons)."""
        _, restart, _, keep_tokens = self._tables(j, end)
        held = self._fewest_list[j][bisect.bisect_left(restart, need)]
        if keep_tokens is not None and keep_tokens[c] >= need:
            held = min(held, self._gpus_list[j][c])
        return held

    def best_restart_tokens(self, j: int, end: int, room: int) -> float:
        """The most tokens a held mode of at most ``room`` GPUs makes from a restart after a segment ending at
        ``end`` (−inf when none fits). ``held_gpus(...)[c] <= room`` (without ``kept``) iff ``need[c]`` is at most
        this: the fewest-GPU mode making ``need`` fits ``room`` iff some mode fitting ``room`` makes it."""
        gpus, best = self._by_gpus(j, end)
        k = bisect.bisect_right(gpus, room)
        return best[k - 1] if k else -math.inf

    def _by_gpus(self, j: int, end: int) -> tuple[list[int], list[float]]:
        """Job j's modes sorted by GPUs after a segment ending at ``end`` (cached): their GPUs, and the running
        maximum of the tokens they make from a restart (:meth:`best_restart_tokens`)."""
        key = (j, end)
        cached = self._by_gpus_cache.get(key)
        if cached is None:
            restart, _, _, _ = self._tables(j, end)
            gpus = self.gpus_loc[j][self.rate_order[j]]  # in the order of ``restart`` (by tokens per hour)
            order = np.argsort(gpus, kind="stable")
            cached = self._by_gpus_cache[key] = (gpus[order].tolist(),
                                                 np.maximum.accumulate(restart[order]).tolist())
        return cached

    def keep_tokens(self, j: int, end: int) -> np.ndarray | None:
        """Tokens each local choice of job j makes when held on without a restart after its segment ending at
        ``end`` (None: nothing can be kept; see :meth:`_tables`)."""
        return self._tables(j, end)[2]

    def keep_list(self, j: int, end: int) -> list[float] | None:
        """:meth:`keep_tokens` as a list (cached)."""
        return self._tables(j, end)[3]

    def held_gpus_paused(self, j: int, end: int, need: float) -> int:
        """:meth:`held_gpus` of one job paused in the segment ending at ``end`` (nothing to keep)."""
        if need <= 0:
            return 0
        _, restart, _, _ = self._tables(j, end)
        k = bisect.bisect_left(restart, need)
        return int(self.fewest_gpus[j][k])


__all__ = ["FleetPlan"]
