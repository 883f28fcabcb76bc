"""The per-job action's mask: the reservation rule, the choices after which every target and deadline stays reachable.

Jobs compete for each site's pool, so a per-job check is not enough: a choice that leaves job j able to finish may
take the GPUs another job needs later. The rule here is a sufficient one, stated per job and checked jointly.

**The plan of a job.** After its committed segment (ending at slot e_j, with ``X_j`` tokens made by then), job
j *holds one mode m* from max(e_j, release_j) to its deadline d_j (the horizon's end for pre-training): either
its committed choice itself (no restart, when the hold starts at e_j) or any mode after a restart (τ_j hours
lost). Among the modes that make the missing tokens (W_j − X_j) by d_j, it reserves the one with the *fewest
GPUs* (:meth:`FleetPlan.held_gpus`; 0 when nothing is missing, N + 1 when no mode can make it). A job whose
deadline has passed is out of the plan (met or, after an unsafe start, missed: it no longer asks for GPUs); the
job deciding now is not: a choice after which it misses its deadline is never safe.

**The rule.** A state is *safe* when, at every site and in every slot s ≥ t, the reservations of the jobs there fit
the pool beside its inference GPUs: Σ_j G_j(s) + inference(s) ≤ N, with G_j(s) the GPUs of the committed choice
before e_j and of the held mode in [max(e_j, release_j), d_j). Tokens depend on a job's own choices only and
capacity is additive, so the fewest-GPU held mode of every job is the best plan for every slot at once: the state is
safe if and only if *some* held-mode plan of all jobs fits. A choice is safe when the state after it is.

**Why it is enough.** If the state is safe, the job deciding next can always take the mode its plan holds:
that segment uses exactly the reserved GPUs and its plan afterwards needs at most as many (holding the same
mode is still possible, without a new restart), so the state stays safe. A policy that follows the mask
therefore meets every target by its deadline whenever the episode starts safe (e.g. when the fixed schedule
is feasible), and the mask is never empty. The rule is sufficient, not necessary: a schedule that pauses and
resumes a job twice may exist when no held mode does, or one where jobs swap sites.

**Sites.** A choice at another site moves the job: its segment makes the moved tokens (τ_j and the transfer time
lost) and its hold is at the new site from then on (kept or after a restart, as at any site). Each job's hold may be
at any site (after a move, the transfer time lost too): the state is safe when some assignment of the holds to sites
fits every site (:func:`~aidc_env.env.kernels.assignment_rule`; beyond :data:`MAX_HOLD_ASSIGNMENTS` assignments each
hold stays at its job's site). With one site it is the one-pool rule exactly.

**The search** (``mask_search_nodes`` > 0). A choice the rule refuses is allowed when a depth-first search from the
state after it reaches, within that many states, a decision with a choice the rule allows (the rule's plan then
completes the episode) or the end of the episode with every target met. Still sufficient.
"""

from __future__ import annotations

import bisect
import copy
import math
from collections.abc import Sequence

import numpy as np

from aidc_env.env.kernels import assignment_rule
from aidc_env.env.safety import SAFETY_TOLERANCE, fewest_gpus_by_rate

MAX_HOLD_ASSIGNMENTS = 4096
"""The most assignments of the other jobs' holds to sites the rule enumerates (S^(J−1); 27 on sites3): beyond it each
job is held where it is."""
MASK_CACHE_SIZE = 1 << 14
"""Most distinct masks kept as arrays (:meth:`ReservationMasks._mask_array`; a few MB at most): the cache is emptied
beyond it."""


def bits_of(mask: np.ndarray) -> int:
    """The bit mask (bit c set iff ``mask[c]``) of a 1-D bool array."""
    return int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")


def _first_restart_fit(restart: list[float], base: float, best: float) -> int:
    """The first k with ``base - restart[k] <= best`` (``restart`` ascending: the test is monotone in k). A
    bisection for ``base - best`` gives the start; the exact test of the same floats settles rounding."""
    k, n = bisect.bisect_left(restart, base - best), len(restart)
    while k > 0 and base - restart[k - 1] <= best:
        k -= 1
    while k < n and not base - restart[k] <= best:
        k += 1
    return k


def _first_keep_fit(keep: list[float], total: list[float], restart: list[float], base: float) -> int:
    """The first k with ``keep[k] >= base - restart[k]`` (both ascending in k: the test is monotone); ``total``
    (keep + restart, ascending) gives the bisection's start, the exact test settles rounding."""
    k, n = bisect.bisect_left(total, base), len(keep)
    while k > 0 and keep[k - 1] >= base - restart[k - 1]:
        k -= 1
    while k < n and not keep[k] >= base - restart[k]:
        k += 1
    return k


class FleetPlan:
    """Per-job tables of the reservation rule, built once per env (arrays indexed by local choice 0 = pause,
    i = mode i − 1): ``gpus_loc``, ``rate3600_loc`` (tokens per hour); per job its ``release``, ``deadline``
    (slots), ``restart_hours`` and ``tranche_tokens``."""

    def __init__(self, *, n_gpus: int, slot_hours: float, gpus_loc: Sequence[np.ndarray],
                 rate3600_loc: Sequence[np.ndarray], release: Sequence[int], deadline: Sequence[int],
                 restart_hours: Sequence[float], tranche_tokens: Sequence[float]):
        self.n_gpus, self.slot_hours = int(n_gpus), float(slot_hours)
        self.gpus_loc = [np.asarray(g, dtype=np.int64) for g in gpus_loc]
        self.rate3600_loc = [np.asarray(r, dtype=float) for r in rate3600_loc]
        self.release, self.deadline, self.tau = list(release), list(deadline), list(restart_hours)
        self.target_safe = [float(w) * (1 - SAFETY_TOLERANCE) for w in tranche_tokens]
        self.rate_order, self.fewest_gpus = zip(*(fewest_gpus_by_rate(g, r, self.n_gpus)
                                                  for g, r in zip(self.gpus_loc, self.rate3600_loc, strict=True)))
        self.rate_sorted = [r[o] for r, o in zip(self.rate3600_loc, self.rate_order, strict=True)]
        self._cache: dict[tuple[int, int], tuple[np.ndarray, list[float], np.ndarray | None, list[float] | None]] = {}
        self._by_gpus_cache: dict[tuple[int, int], tuple[list[int], list[float]]] = {}
        self._fewest_list = [f.tolist() for f in self.fewest_gpus]  # Python scalars for the one-candidate path
        self._gpus_list = [g.tolist() for g in self.gpus_loc]

    def hold_start(self, j: int, end: int) -> int:
        """First slot of job j's held mode after a committed segment ending at ``end``."""
        return max(end, self.release[j])

    def tables(self, j: int, end: int) -> tuple[np.ndarray, list[float], np.ndarray | None, list[float] | None]:
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

    def held_gpus(self, j: int, end: int, need: float, c: int) -> int:
        """GPUs job j reserves after a committed segment of local choice ``c`` ending at slot ``end`` with ``need``
        tokens still missing (the safe target W·(1 − 5e-10) less the tokens made by then): the fewest GPUs of a mode
        that makes them from a restart, or c's own when c held on makes them; 0 when nothing is missing, N + 1 when no
        held mode makes it by the deadline."""
        _, restart, _, keep_tokens = self.tables(j, end)
        held = self._fewest_list[j][bisect.bisect_left(restart, need)]
        if keep_tokens is not None and keep_tokens[c] >= need:
            held = min(held, self._gpus_list[j][c])
        return held

    def best_restart_tokens(self, j: int, end: int, room: int) -> float:
        """The most tokens a held mode of at most ``room`` GPUs makes from a restart after a segment ending at
        ``end`` (−inf when none fits). The fewest-GPU mode making ``need`` from a restart (:meth:`held_gpus` of a
        choice not kept on) fits ``room`` iff ``need`` is at most this: iff some mode fitting ``room`` makes it."""
        gpus, best = self._by_gpus(j, end)
        k = bisect.bisect_right(gpus, room)
        return best[k - 1] if k else -math.inf

    def _by_gpus(self, j: int, end: int) -> tuple[list[int], list[float]]:
        """Job j's modes sorted by GPUs after a segment ending at ``end`` (cached): their GPUs, and the running
        maximum of the tokens they make from a restart (:meth:`best_restart_tokens`)."""
        key = (j, end)
        cached = self._by_gpus_cache.get(key)
        if cached is None:
            restart, _, _, _ = self.tables(j, end)
            gpus = self.gpus_loc[j][self.rate_order[j]]  # in the order of ``restart`` (by tokens per hour)
            order = np.argsort(gpus, kind="stable")
            cached = self._by_gpus_cache[key] = (gpus[order].tolist(), np.maximum.accumulate(restart[order]).tolist())
        return cached

    def held_gpus_paused(self, j: int, end: int, need: float) -> int:
        """:meth:`held_gpus` of one job paused in the segment ending at ``end`` (nothing to keep)."""
        return self._fewest_list[j][bisect.bisect_left(self.tables(j, end)[1], need)] if need > 0 else 0


class ReservationMasks:
    """The mask of :class:`~aidc_env.env.per_job.PerJobDynamics` (mixed into it: it reads the dynamics' state: the
    profiles of committed and reserved GPUs per site, which :func:`~aidc_env.env.kernels.commit` keeps)."""

    def _setup_masks(self) -> None:
        """Per job, bit masks (bit c: local choice c): k -> its choices of rate rank >= k; and its choices of at most
        ``_fit_values[j][k - 1]`` GPUs (k = 0: none), for a bisection on the room; its segment's tokens by rate."""
        self._rate_order = self._plan.rate_order
        self._seg_restart_by_rate = [m[1][o].tolist() for m, o in zip(self._made, self._rate_order, strict=True)]
        self._mask_arrays: dict[int, np.ndarray] = {}
        self._bounds_cache: dict[tuple[int, int, int], np.ndarray] = {}  # _profile_maxima's, per (t, end, stop)
        self._keep_cache: dict[tuple[int, int], tuple[list[float], list[float]] | None] = {}
        self._kernel_cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, bool]] = {}
        self._every_sites = [self.n_sites ** (self.n_jobs - known) <= MAX_HOLD_ASSIGNMENTS for known in (0, 1)]
        ranks = [np.argsort(order) for order in self._rate_order]  # of each choice by rate (the inverse permutation)
        self._faster = [[bits_of(rank >= k) for k in range(rank.size + 1)] for rank in ranks]
        self._fit_values = [sorted(set(g.tolist())) for g in self._gpus_loc]
        self._fit_bits = [[0] + [bits_of(g <= v) for v in values]
                          for g, values in zip(self._gpus_loc, self._fit_values, strict=True)]

    # ------------------------------------------------------------------ the mask

    def _compute_mask(self, search: bool = True) -> np.ndarray:
        """The exact mask of the job deciding now: capacity, then the reservation rule, then (``search``) the search.

        With one site, per candidate c the rule reads: its GPUs fit ``room_now`` and its held mode's GPUs fit
        ``room_after``. The second part is tested without computing the held modes: they fit iff the missing tokens
        after c are at most the most tokens a mode fitting ``room_after`` makes from a restart
        (:meth:`FleetPlan.best_restart_tokens`), or c itself is kept on, makes them and fits. The same comparisons of
        the same floats as :meth:`FleetPlan.held_gpus`; :meth:`_held_after_choice` computes the held mode of the
        choice taken only. With several sites: :meth:`_sites_rule`."""
        t = self._t
        j = self._queue[self._k]
        end = t + self._sps[j]
        rule = self.env.safety_mask
        search = search and rule and self.env.mask_search_nodes
        if self.n_sites > 1:
            found = self._sites_rule(j, t, end, rule)
            if not search:
                self._fallback = rule and not found & 2
                mask = self._mask = self._ok if found & 2 else self._capacity
                return mask
            capacity, safe = bits_of(self._capacity), bits_of(self._ok)
        else:
            N = self._site_gpus[0]
            committed, now, after, later = self._profile_maxima(0, t, end, self._deadline[j])
            room = N - committed
            capacity = self._fits(j, room)
            safe = 0
            if rule and (later is None or later <= N):  # the others, after its deadline
                own = int(self._held[j])  # the job's current hold covers [t, deadline)
                room_now = min(room, N + own - now)
                room_after = min(N, N + own - after) if after is not None else N
                safe = self._safe_choices(j, end, room_now, room_after)
        if search:
            safe |= self._rescued(j, capacity & ~safe)
        self._fallback = rule and not safe
        mask = self._mask = self._mask_array(safe if rule and safe else capacity)
        return mask

    def _sites_rule(self, j: int, t: int, end: int, rule: bool) -> int:
        """Job j's choices that fit their site's pool (``_capacity``, entry s·C + c), and those after which every job
        keeps a held mode at some site and some assignment of the holds to sites fits every site in every slot
        (``_ok``, with ``rule``): :func:`~aidc_env.env.kernels.assignment_rule`, whose flags it returns (j = −1:
        whether the plan fits)."""
        tables = self._kernel_cache.get((j, end))
        if tables is None:
            tables = self._kernel_cache[j, end] = self._kernel_tables(j, end)
        base = self._plan.target_safe[j] - self._tokens[j] if j >= 0 else 0.0
        return assignment_rule(self._committed, t, self._pools, self._state, self._deadline_arr,
                                self._every_sites[j >= 0], j, end, self._cur[j] if j >= 0 else 0, base, *tables, rule,
                                self._mask_out)

    def _kernel_tables(self, j: int, end: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """Job j's tables of :func:`~aidc_env.env.kernels.assignment_rule` after a segment ending at ``end``: (6,
        choices) its segment's tokens kept, restarted, moved, the restart tokens sorted and kept tokens of its own plan,
        the restart tokens sorted of its plan after a move; (3, choices + 1) its GPUs, the fewest GPUs of both plans;
        kept or not."""
        n = self._sizes[j] if j >= 0 else 0
        made, ints = np.zeros((6, n)), np.zeros((3, n + 1), dtype=np.int64)
        if j < 0:
            return made, ints, False
        (restart, _, keep, _), (restart_move, _, _, _) = self._plan.tables(j, end), self._move_plan.tables(j, end)
        made[:3], made[3], made[5] = self._made[j], restart, restart_move
        if keep is not None:
            made[4] = keep
        ints[0, :n], ints[1], ints[2] = self._gpus_loc[j], self._plan.fewest_gpus[j], self._move_plan.fewest_gpus[j]
        return made, ints, keep is not None

    def _plan_fits(self) -> bool:
        """Whether some assignment of every job's hold to a site fits every site from the current slot on."""
        if self.n_sites == 1:
            return bool(np.all(self._reserved.max(axis=1) <= self._site_gpus))
        return bool(self._sites_rule(-1, min(self._t, self.n_slots - 1), self.n_slots, True) & 1)

    def _safe_choices(self, j: int, end: int, room_now: int, room_after: int) -> int:
        """Bit mask (bit c: local choice c) of job j's choices (one site) whose GPUs fit ``room_now`` and whose held
        mode fits ``room_after``.

        A choice c other than the current one (``prev``) leaves ``need[c] = base − tokens of
        c's segment`` missing; its held mode fits iff ``need[c] <= best`` (the most a fitting mode makes from a
        restart), or c is kept on (``keep[c] >= need[c]``) and fits. Both tests are monotone in c's tokens per hour
        (its segment and kept tokens grow with its rate: the instance has restart hours < segment hours; float
        rounding is monotone), so each holds on a suffix of the choices sorted by rate, found by bisection and read from
        a table (``_faster``). ``prev`` (no restart) is tested on its own."""
        plan = self._plan
        base = plan.target_safe[j] - self._tokens[j]
        best = plan.best_restart_tokens(j, end, room_after)
        made = self._seg_restart_by_rate[j]
        k_restart = _first_restart_fit(made, base, best)
        held_fits = self._faster[j][k_restart]
        keep = self._keep_by_rate(j, end)
        if keep is not None:
            k_keep = _first_keep_fit(keep[0], keep[1], made, base)
            if k_keep < k_restart:
                held_fits = held_fits | (self._faster[j][k_keep] & self._fits(j, room_after))
        safe = held_fits & self._fits(j, room_now)
        prev = self._cur[j]
        need = base - self._seg_keep_list[j][prev]
        gpus = self._gpus_list[j][prev]
        keeps = keep is not None and plan.tables(j, end)[3][prev] >= need and gpus <= room_after
        if gpus <= room_now and (need <= best or keeps):
            return safe | 1 << prev
        return safe & ~(1 << prev)

    def _fits(self, j: int, room: int) -> int:
        """Bit mask of job j's choices of at most ``room`` GPUs."""
        return self._fit_bits[j][bisect.bisect_right(self._fit_values[j], room)]

    def _mask_array(self, bits: int) -> np.ndarray:
        """The read-only bool array (size A) of a bit mask, cached (masks repeat: a dict lookup is cheaper than
        building the array; ``action_masks`` returns copies). The cache is emptied at ``MASK_CACHE_SIZE``."""
        mask = self._mask_arrays.get(bits)
        if mask is None:
            if len(self._mask_arrays) >= MASK_CACHE_SIZE:
                self._mask_arrays.clear()
            mask = np.array([bits >> c & 1 for c in range(self.n_actions)], dtype=bool)
            mask.flags.writeable = False
            self._mask_arrays[bits] = mask
        return mask

    def _keep_by_rate(self, j: int, end: int) -> tuple[list[float], list[float]] | None:
        """Job j's kept tokens (:meth:`FleetPlan.tables`) in the order of the choices' rates, and each plus the
        choice's restarted segment tokens (a bisection's start in :meth:`_safe_choices`); None when nothing can be
        kept (cached)."""
        key = (j, end)
        if key not in self._keep_cache:
            keep = self._plan.tables(j, end)[2]
            if keep is not None:
                by_rate = keep[self._rate_order[j]].tolist()
                keep = (by_rate, [k + r for k, r in zip(by_rate, self._seg_restart_by_rate[j], strict=True)])
            self._keep_cache[key] = keep
        return self._keep_cache[key]

    def _profile_maxima(self, s: int, t: int, end: int, stop: int) -> tuple[int, int, int | None, int | None]:
        """At site s: most committed GPUs in a slot of [t, end); most reserved GPUs in a slot of [t, end), of [end,
        stop) (None if empty) and of [stop, T) (None if empty): the deciding job's segment, its hold until its
        deadline ``stop``, the others after it. One ufunc call over both profiles, laid end to end (a hot path: the
        range [end, T + t) spans both and is not used)."""
        T = self.n_slots
        key = (t, end, stop)  # end <= stop: a job decides inside its window, whose deadline is on its boundaries
        bounds = self._bounds_cache.get(key)
        if bounds is None:
            bounds = [t, end, T + t]  # end == T + t (t = 0, end = T): reduceat gives one element there, not used
            if end < T:
                bounds.append(T + end)
                if end < stop < T:
                    bounds.append(T + stop)
            bounds = self._bounds_cache[key] = np.array(bounds, dtype=np.intp)
        maxima = np.maximum.reduceat(self._profiles[s], bounds).tolist()
        if end < stop:
            return maxima[0], maxima[2], maxima[3], maxima[4] if stop < T else None
        return maxima[0], maxima[2], None, maxima[3] if stop < T else None

    def _held_after_choice(self, j: int, s: int, c: int) -> int:
        """GPUs job j holds after its segment from the current slot with local choice c at site s (the rule's held
        mode; :meth:`FleetPlan.held_gpus` of this one candidate)."""
        need = self._plan.target_safe[j] - self._tokens[j] - self._segment_tokens(j, s, c)
        return self._plan.held_gpus(j, self._t + self._sps[j], need, c)

    # ------------------------------------------------------------------ the search

    def _rescued(self, j: int, refused: int) -> int:
        """Bit mask of the refused choices (``refused``: bits over all actions) after which a depth-first search of at
        most ``mask_search_nodes`` states finds a continuation the rule completes."""
        return sum(1 << a for a in range(self.n_actions) if refused >> a & 1
                   and self._completable_after(j, *divmod(a, self.n_choices), [self.env.mask_search_nodes]))

    def _completable_after(self, j: int, s: int, c: int, budget: list[int]) -> bool:
        state = self._snapshot()
        try:
            self._decide(j, s, c, self._held_after_choice(j, s, c))
            self._k += 1
            if self._k >= len(self._queue):
                self._advance(decided=True)
            return self._completable(budget)
        finally:
            self._restore(state)

    def _completable(self, budget: list[int]) -> bool:
        """Whether the search finds, within ``budget`` states, a continuation of the current state that the rule
        completes (or the episode's end with every target met)."""
        plan = self._plan
        for i in range(self.n_jobs):  # a job whose window is over is out of the rule's plan: it must be done
            if plan.hold_start(i, self._end[i]) >= self._deadline[i] and self._tokens[i] < plan.target_safe[i]:
                return False
        if self._t >= self.n_slots:
            return True
        budget[0] -= 1
        if budget[0] < 0:
            return False
        mask = self._compute_mask(search=False)
        if not self._fallback:
            return True
        j, C = self._queue[self._k], self.n_choices
        here, rate = self._site[j], self._rate_pad[j]
        # The capacity-feasible choices: at the job's site first, the fastest first.
        for a in sorted(np.flatnonzero(mask).tolist(), key=lambda a: (a // C != here, -rate[a])):
            if self._completable_after(j, *divmod(a, C), budget):
                return True
            if budget[0] < 0:
                return False
        return False

    _STATE = ("_t", "_k", "_queue", "_cur", "_site", "_end", "_end_arr", "_tokens", "_schedule", "_sites", "_state",
              "_job_gpus", "_job_kw", "_profiles", "_obs_buffer", "_mask", "_fallback", "objective_usd",
              "_baseline_paid", "_credit", "_prof_gpus", "_prof_kw")

    def _snapshot(self) -> dict:
        return {name: copy.deepcopy(self.__dict__[name]) for name in self._STATE if name in self.__dict__}

    def _restore(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind_views()


__all__ = ["FleetPlan", "MASK_CACHE_SIZE", "MAX_HOLD_ASSIGNMENTS", "ReservationMasks", "bits_of"]
