"""The fleet env's reservation rule (issue 13): the choices after which every target and deadline stays reachable.

Jobs compete for one pool, so a per-job check is not enough: a choice that leaves job j able to finish may
take the GPUs another job needs later. The rule here is a sufficient one, stated per job and checked jointly.

**The plan of a job.** After its committed segment (ending at slot e_j, with ``X_j`` tokens made by then), job
j *holds one mode m* from max(e_j, release_j) to its deadline d_j (the horizon's end for pre-training): either
its committed choice itself (no restart, when the hold starts at e_j) or any mode after a restart (τ_j hours
lost). Among the modes that make the missing tokens (W_j − X_j) by d_j, it reserves the one with the *fewest
GPUs* (:meth:`FleetPlan.held_gpus`; 0 when nothing is missing, N + 1 when no mode can make it).

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
        self.fewest_gpus = []
        for g, r in zip(self.gpus_loc, self.rate3600_loc, strict=True):
            order = np.argsort(r, kind="stable")
            self.rate_sorted.append(r[order])
            suffix_min = np.minimum.accumulate(g[order][::-1])[::-1]
            self.fewest_gpus.append(np.append(suffix_min, self.n_gpus + 1).astype(np.int64))

    def hold_start(self, j: int, end: int) -> int:
        """First slot of job j's held mode after a committed segment ending at ``end``."""
        return max(end, self.release[j])

    def held_gpus(self, j: int, end: int, need: np.ndarray, kept: np.ndarray | None) -> np.ndarray:
        """GPUs job j reserves after a committed segment ending at slot ``end``, per candidate.

        ``need``: tokens still missing after that segment, per candidate (the safe target W·(1 − 5e-10) less the
        tokens made by then); ``kept``: the local choice committed in that segment, per candidate (None: a
        pause, nothing to keep). 0 when nothing is missing, N + 1 when no held mode makes it by the deadline.
        """
        start = self.hold_start(j, end)
        stop = self.deadline[j]
        if start >= stop:
            return np.where(need <= 0, 0, self.n_gpus + 1)
        hours = (stop - start) * self.slot_hours
        productive = max(hours - self.tau[j], 0.0)
        g = self.fewest_gpus[j][np.searchsorted(self.rate_sorted[j] * productive, need)]
        if kept is not None and start == end:  # keep the committed choice: no restart
            keep_ok = self.rate3600_loc[j][kept] * hours >= need
            np.minimum(g, self.gpus_loc[j][kept], out=g, where=keep_ok)
        return g


__all__ = ["FleetPlan"]
