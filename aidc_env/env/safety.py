"""The joint action's safety mask: the joint choices after which every tranche can still be completed.

A sufficient test: after taking the joint choice for the current segments, some capacity-feasible joint mode
held for all the remaining segments (paying the restart it costs, and fitting the pool also while the jobs
reach their boundaries at different slots) still finishes every job's tranche. See :meth:`SafetyTest.safe`.

Over a horizon of D > 1 days with a minimum daily share (``Instance.daily_min_tokens`` > 0), the held mode
must also make the rest of today's minimum, and every later day's minimum, besides the horizon total. Every
one of these is "rate × productive hours ≥ tokens still needed", monotone in the mode's rate, so the test
stays exact in the same sense: the plan that made a choice safe stays available after it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aidc_env.simulator import TRANCHE_TOLERANCE

SAFETY_TOLERANCE = 0.5 * TRANCHE_TOLERANCE
"""The safety test asks for X ≥ W·(1 − 5e-10): stricter than the simulator's tranche check (1e-9)."""


def fewest_gpus_by_rate(gpus: np.ndarray, rate: np.ndarray, n_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """A job's modes sorted by ``rate`` (the stable order) and, per k, the fewest GPUs of a mode at least as fast as
    the k-th slowest: a suffix minimum (index M + 1: no mode is fast enough -> more GPUs than the pool)."""
    order = np.argsort(rate, kind="stable")
    suffix_min = np.minimum.accumulate(gpus[order][::-1])[::-1]
    return order, np.append(suffix_min, n_gpus + 1).astype(np.int64)


class SafetyTest:
    """Per-job tables of the safety test, built once per env from its per-local-choice arrays.

    Arguments (per job j, arrays indexed by local choice 0 = pause, i = mode i − 1): ``gpus_loc`` GPUs,
    ``rate3600_loc`` tokens per hour, ``suffix_restart`` the productive hours from each slot of a restarted
    segment to its end; ``slots_per_segment``, ``restart_hours`` and ``tranche_tokens`` per job.
    """

    def __init__(self, *, n_gpus: int, n_slots: int, slot_hours: float, slots_per_segment: Sequence[int],
                 restart_hours: Sequence[float], tranche_tokens: np.ndarray, gpus_loc: Sequence[np.ndarray],
                 rate3600_loc: Sequence[np.ndarray], suffix_restart: Sequence[np.ndarray], slots_per_day: int,
                 daily_min_tokens: Sequence[float]):
        self.n_gpus, self.n_slots, self.slot_hours, self.slots_per_day = n_gpus, n_slots, slot_hours, int(slots_per_day)
        daily = np.asarray(daily_min_tokens, float)
        self.daily_safe = (daily * (1 - SAFETY_TOLERANCE)).tolist()
        # The daily minimums bind only over several days with a positive minimum (D = 1: the tranche covers it).
        self.daily = self.slots_per_day < n_slots and bool(np.any(daily > 0))
        self.sps, self.tau, self.gpus_loc, self.rate3600_loc, self.suffix_restart = (
            list(slots_per_segment), list(restart_hours), list(gpus_loc), list(rate3600_loc), list(suffix_restart))
        self.sizes = [g.size for g in self.gpus_loc]
        self.n_actions = int(np.prod(self.sizes))
        self.tranche_safe = (np.asarray(tranche_tokens, dtype=float) * (1 - SAFETY_TOLERANCE)).tolist()
        self.tables = []  # per job: held modes by tokens per hour (:func:`fewest_gpus_by_rate`), its segment's tokens
        for g, r, suffix, sps in zip(self.gpus_loc, self.rate3600_loc, self.suffix_restart, self.sps, strict=True):
            order, fewest = fewest_gpus_by_rate(g, r, n_gpus)
            self.tables.append({"rate3600_sorted": r[order], "fewest_gpus": fewest, "seg_tokens_restart": r * suffix[0],
                                "seg_tokens_keep": r * (sps * slot_hours)})

    def safe(self, t: int, at_boundary: Sequence[bool], tokens: Sequence[float], current: Sequence[int],
             restarted: Sequence[bool], tokens_today: Sequence[float] | None = None,
             lost_hours: np.ndarray | None = None, segment_factor: float | Sequence[float] = 1.0) -> np.ndarray:
        """Joint actions after which some capacity-feasible held joint mode still finishes every tranche.

        Per job j and local choice c for its current segment (ending at slot e_j), g_j(c) is the fewest GPUs
        of a mode m that, held from e_j to the end of the day (with a restart unless m = c), makes the tokens
        still missing (more than N if none does). Tokens depend on the job's own choices only and capacity is
        additive, so the smallest held modes are the best for every capacity check: the joint action is safe
        if, at each distinct e_j < T, the held modes of the jobs past their boundary plus the current GPUs of
        the others fit the pool (and a job whose segment ends the day finishes with its current choice).

        With daily minimums (``tokens_today``: each job's tokens since the start of the current day), m must
        also make what today's minimum still needs after the current segment (nothing left to do if the
        segment ends the day: the current choice must then make it), and at least the minimum on every later
        day (the first of them pays the restart when e_j is midnight).

        ``lost_hours`` (per slot, from the grid side): the hours of each slot in which a job makes no tokens, e.g. the
        share of a call's slot that its deepest cap takes; they come off the current segment's and the held mode's
        hours (not off the daily minimums). ``segment_factor``: the share of its throughput each job keeps until the end
        of its current segment (a cap level's; afterwards none is assumed); several give one row of the result each.
        """
        factors = np.atleast_1d(np.asarray(segment_factor, dtype=float))[:, None]  # (levels, 1)
        T, N, dt = self.n_slots, self.n_gpus, self.slot_hours
        ends, g_list = [], []
        for j, (sps, sf) in enumerate(zip(self.sps, self.tables, strict=True)):
            offset = t % sps
            end = t - offset + sps
            ends.append(end)
            missing = self.tranche_safe[j] - tokens[j]
            if at_boundary[j]:
                need = missing - factors * sf["seg_tokens_restart"]
                cur = current[j]
                need[:, cur] = missing - factors[:, 0] * sf["seg_tokens_keep"][cur]
            else:
                h = self.suffix_restart[j][offset] if restarted[j] else (sps - offset) * dt
                need = missing - factors * (self.rate3600_loc[j] * h)
            rest_hours = (T - end) * dt
            if lost_hours is not None:
                need = need + self.rate3600_loc[j] * float(lost_hours[t:end].sum())
                rest_hours -= float(lost_hours[end:].sum())
            if self.daily and self.daily_safe[j] > 0:
                made_now = missing - need  # tokens of the current segment, per choice
                need_today = self.daily_safe[j] - tokens_today[j] - made_now  # type: ignore[index]
                g = self._held_gpus_daily(j, t, end, need, need_today)
            elif rest_hours > 0:
                # Switch (or resume) to m at e_j: r_m (rest − τ); the smallest m with enough tokens.
                base = sf["rate3600_sorted"] * (rest_hours - self.tau[j])
                g = sf["fewest_gpus"][np.searchsorted(base, need)]
                # Keep c itself: no restart.
                np.minimum(g, self.gpus_loc[j], out=g, where=self.rate3600_loc[j] * rest_hours >= need)
            else:
                g = np.where(need <= 0, 0, N + 1)
            g_list.append(g)
        rows = self._combine(g_list, ends)
        return rows[0] if np.ndim(segment_factor) == 0 else rows

    def _combine(self, g_list: Sequence[np.ndarray], ends: Sequence[int]) -> np.ndarray:
        """(levels, A): the joint actions whose held modes (``g_list``: per job its held GPUs, (levels, local choices))
        fit the pool at every segment end (see :meth:`safe`); a joint action's index is its local choices' mixed-radix
        number, job 0 the most significant (``numpy.add.outer`` raveled)."""
        T, N = self.n_slots, self.n_gpus
        levels = g_list[0].shape[0]

        def outer(parts: Sequence[np.ndarray], op: np.ufunc) -> np.ndarray:
            total = parts[0]
            for part in parts[1:]:
                total = op(total[:, :, None], part[:, None, :]).reshape(levels, -1)
            return total

        safe = np.ones((levels, self.n_actions), dtype=bool)
        for e in sorted(set(ends)):  # the held GPUs of the jobs past their boundary, the others' current GPUs
            if e < T:
                safe &= outer([g if end <= e else np.broadcast_to(gpus, g.shape) for g, gpus, end
                               in zip(g_list, self.gpus_loc, ends, strict=True)], np.add) <= N
        if any(e >= T for e in ends):  # the jobs whose segment ends the day finish with their current choice
            safe &= outer([g <= N if end >= T else np.ones(g.shape, dtype=bool) for g, end
                           in zip(g_list, ends, strict=True)], np.logical_and)
        return safe

    def _held_gpus_daily(self, j: int, t: int, end: int, need: np.ndarray, need_today: np.ndarray) -> np.ndarray:
        """g_j(c) under daily minimums: the fewest GPUs of a mode m that, held from ``end`` to the horizon's
        end, makes ``need`` (the horizon's missing tokens after the current segment), ``need_today`` (today's
        missing minimum after it) and every later day's minimum (N + 1 if no mode does)."""
        T, dt, spd = self.n_slots, self.slot_hours, self.slots_per_day
        sf = self.tables[j]
        tau = self.tau[j]
        day_end = (t // spd + 1) * spd
        later = day_end < T
        dmin = self.daily_safe[j]
        rest_h, today_h, day_h = (T - end) * dt, (day_end - end) * dt, spd * dt

        def hours(restart: float) -> list[tuple[float, np.ndarray | float]]:
            """(productive hours of the held mode, tokens they must make) per constraint."""
            out: list[tuple[float, np.ndarray | float]] = [(max(rest_h - restart, 0.0), need)]
            out.append((max(today_h - restart, 0.0), need_today))
            if later:
                out.append((day_h - (restart if end == day_end else 0.0), dmin))
            return out

        idx = np.zeros(need.shape, dtype=np.int64)
        for h, n in hours(tau):
            np.maximum(idx, np.searchsorted(sf["rate3600_sorted"] * h, n), out=idx)
        g = sf["fewest_gpus"][idx]
        keep_ok = np.ones(need.shape, dtype=bool)
        for h, n in hours(0.0):
            keep_ok &= self.rate3600_loc[j] * h >= n
        np.minimum(g, self.gpus_loc[j], out=g, where=keep_ok)
        return g


__all__ = ["SAFETY_TOLERANCE", "SafetyTest", "fewest_gpus_by_rate"]
