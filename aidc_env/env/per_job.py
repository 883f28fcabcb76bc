"""The ``per_job`` action type: one job's choice (a site and a mode or pause) per step, at the decision points.

At each decision point (a slot where some job is at a checkpoint boundary) the jobs at a boundary decide one after
the other, one per step, in job order; the jobs mid-segment keep their choice. A job outside its window or (with
``pause_when_done``) whose target is met is paused where it is without a step. When every job of the slot has decided,
the slots up to the next decision point are simulated with the simulator's functions, site by site. The action grows
linearly with the fleet: ``Discrete(S · C)``, C = max_j M_j + 1 (S = 1: ``Discrete(C)``).

**Mask** (:mod:`aidc_env.env.reservation`): capacity of the site in every slot of the segment beside the committed
choices (inference included); with ``safety_mask`` the reservation rule (every job still has a held mode at its site
that meets its target by its deadline, and the holds fit every site), then, with ``mask_search_nodes`` > 0, a bounded
search that rescues a refused choice after which some continuation completes.

**Observation** (``Box(float32)``), with J jobs, S sites, A actions:

- per job, 8 values (:data:`JOB_FEATURES`) and, with S > 1, its site (one-hot): progress (tokens by the end of its
  committed segment / W_j, [0, 4]); required-rate ratio ((W_j − X_j)⁺ / seconds from then to its deadline / fastest
  tokens/s, [0, 10]); GPU share of its committed choice (of its site's pool); mode index; segment left (slots left
  in its committed segment / slots per segment); window left ((deadline − t) / T); to release ((release − t)⁺ / T);
  deciding (1 for the job deciding now);
- the global values of :func:`~aidc_env.env.observation.sites_global_table` (time once, then each site's price and
  renewable now and ahead);
- per site, its inference share and its free GPU share at slot t;
- per action, 3 values (:data:`CHOICE_FEATURES`) and, with S > 1, whether it moves the job: GPUs / the site's pool,
  coverage (tokens/s × hours to the deadline / missing tokens, [0, 10]; 10 when nothing is missing, 0 for pause) and
  efficiency (tokens per GPU-second / the job's best); 0 for actions the job does not have.

**Rewards**: when a decision point closes, −(the objective of the slots simulated: grid cost + curtailment penalty +
take-or-pay renewable cost − idle-GPU value, over the sites) / ``reward_scale``; with ``reward_baseline="fixed"`` the
fixed schedule's objective of the same slots added back; with ``reward_credit="job"`` per step the objective change of
that job's choice against a profile where every job-slot not yet committed holds the fixed schedule's choice (the
credits telescope to the same total). :attr:`objective_usd` equals the simulator's ``objective_usd`` of
:meth:`schedule`.

**Info**: ``day``, ``slot``, ``job``, ``site``, ``choice``, ``moved``, ``objective_usd``, ``invalid_action``,
``safety_fallback``, ``terminal_penalty_usd``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from aidc_env.env.rules import MaskedSteps, local_choice_tables, masked_action, penalty_usd_per_token
from aidc_env.env.observation import (PRICE_OBS_HIGH, PRICE_OBS_LOW, PROGRESS_OBS_HIGH, RATE_RATIO_OBS_HIGH,
                                      renewable_share_high, sites_global_table, time_columns)
from aidc_env.env.kernels import commit, observe, slot_objectives
from aidc_env.env.reservation import FleetPlan, ReservationMasks
from aidc_env.errors import require
from aidc_env.instance import PAUSE, Instance
from aidc_env.schedule import Schedule
from aidc_env.simulator import TRANCHE_TOLERANCE, simulate

if TYPE_CHECKING:
    from aidc_env.env.core import DispatchEnv

_sum = np.add.reduce  # what ndarray.sum calls (the same sum), without its Python wrapper (a hot path)

JOB_FEATURES = ("progress", "required_rate_ratio", "gpu_share", "mode_index", "segment_left", "window_left",
                "to_release", "deciding")
"""Per-job observation features, in order (then the site one-hot with several sites)."""
CHOICE_FEATURES = ("gpu_share", "coverage", "efficiency")
"""Per-action features of the job deciding now, in order (then ``move`` with several sites)."""


def _move_load(load: Any, here: int, s: int, old: Any, new: Any) -> None:
    """A job's load moves from ``old`` at site ``here`` to ``new`` at site s in ``load`` (per site): one update when
    it stays (the same floats as ever with one site)."""
    if s == here:
        load[s] += new - old
    else:
        load[here] -= old
        load[s] += new


class PerJobDynamics(MaskedSteps, ReservationMasks):
    """The per-job action type of a :class:`~aidc_env.env.core.DispatchEnv` (see the module docstring)."""

    def __init__(self, env: DispatchEnv, inst: Instance):
        require(inst.horizon_days == 1 or inst.min_daily_share == 0, "min_daily_share",
                "the per_job action takes horizons without daily minimums (min_daily_share = 0)")
        require(any(job.tranche_tokens > 0 and job.n_modes > 0 for job in inst.jobs), "case",
                "no job has a target to make: the per_job action would have no decision")
        self.env = env
        self._template = inst
        self._setup_tables(inst)
        self._fixed_cache: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, float]] = {}
        self._day_tables: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # per day: global observation, penalty
        self._inst: Instance | None = None
        self._t = self.n_slots  # no episode: no deciding job

    # ------------------------------------------------------------------ tables (the same for every day)

    def _setup_tables(self, inst: Instance) -> None:
        jobs = inst.jobs
        self.n_jobs = J = len(jobs)
        self.n_slots = T = inst.slots
        self.n_sites = S = len(inst.sites)
        self._dt = inst.slot_hours
        self._site_gpus = [site.n_gpus for site in inst.sites]
        self._pools = np.array(self._site_gpus, dtype=np.int64)
        self._home = list(inst.home_sites)
        self.n_choices = C = max(job.n_modes for job in jobs) + 1
        self.n_actions = S * C
        self._sizes = [job.n_modes + 1 for job in jobs]
        self._gpus_loc, self._kw_loc, rate3600 = local_choice_tables(jobs)
        self._sps = [inst.slots_per_segment(job) for job in jobs]
        windows = [inst.job_window(job) for job in jobs]
        self._release, self._deadline = (list(w) for w in zip(*windows))
        self._allowed = [inst.allowed_segments(job).tolist() for job in jobs]
        self._target = [job.tranche_tokens for job in jobs]
        tau = [job.restart_hours for job in jobs]
        # Per job, its segment's tokens by local choice: kept, restarted, moved (the transfer time lost too).
        self._made = [np.stack([r * h, r * (h - t), r * (h - t - tr)]) for r, h, t, tr
                      in zip(rate3600, map(inst.segment_hours, jobs), tau, inst.transfer_hours, strict=True)]
        self._seg_keep_list, self._seg_restart_list, self._seg_move_list = (
            [m[i].tolist() for m in self._made] for i in range(3))
        self._deadline_arr = np.array(self._deadline, dtype=np.int64)
        self._gpus_list = [g.tolist() for g in self._gpus_loc]
        self._kw_list = [p.tolist() for p in self._kw_loc]
        self._plan, self._move_plan = (
            FleetPlan(n_gpus=max(self._site_gpus), slot_hours=self._dt, gpus_loc=self._gpus_loc, rate3600_loc=rate3600,
                      release=self._release, deadline=self._deadline, tranche_tokens=self._target,
                      restart_hours=[t + moving * tr for t, tr in zip(tau, inst.transfer_hours, strict=True)])
            for moving in (False, True))  # the hold of a job that stays, and of one that moves (transfer lost too)
        boundaries = sorted({s for sps in self._sps for s in range(0, T, sps)}) + [T]
        self._next_boundary = dict(zip(boundaries[:-1], boundaries[1:], strict=True))
        self._boundary_jobs = {t: [j for j in range(J) if t % self._sps[j] == 0] for t in boundaries[:-1]}
        self._sps_arr = np.array(self._sps, dtype=float)
        self._jobs = np.array([[*w, W, float(r.max()), max(n - 1, 1)] for w, W, r, n  # the job features' constants
                               in zip(windows, self._target, rate3600, self._sizes, strict=True)], dtype=float)
        self._setup_masks()
        self._setup_observation(inst, rate3600)
        # Per site and slot: the committed GPUs (inference included), then the reservation profile of every job's plan.
        self._profiles = np.zeros((S, 2 * T), dtype=np.int64)
        self._state = np.zeros((4, J), dtype=np.int64)  # per job: its hold at its site and elsewhere, site, hold start
        self._mask_out = np.zeros((2, self.n_actions), dtype=bool)  # the capacity mask and the rule's (S > 1)
        self._end_arr = np.zeros(J)
        self._bind_views()
        self._start = self._start_state(inst)

    def _start_state(self, inst: Instance) -> tuple:
        """Every day's state at slot 0 but its inference: per job its choice; per site the jobs' GPUs and IT kW; the
        holds (:data:`_state`), their reserved profile, the job features."""
        J, S, T = self.n_jobs, self.n_sites, self.n_slots
        cur = [job.initial_mode + 1 for job in inst.jobs]
        job_gpus, job_kw = [0] * S, [0.0] * S
        profiles, state, feats = np.zeros_like(self._profiles), np.zeros_like(self._state), np.zeros_like(self._feats)
        for j, (c, s) in enumerate(zip(cur, self._home, strict=True)):
            g, need = self._gpus_list[j][c], self._plan.target_safe[j]
            job_gpus[s] += g
            job_kw[s] += self._kw_list[j][c]
            commit(profiles, state, feats, np.zeros(J), self._jobs, self._pools, j, 0, 0, c, g,
                   self._plan.held_gpus(j, 0, need, c), s, s, 0.0, self._dt)
            if S > 1:
                state[1, j] = self._move_plan.held_gpus_paused(j, 0, need)
        return cur, job_gpus, job_kw, state, profiles[:, T:], feats

    def _setup_observation(self, inst: Instance, rate3600: list[np.ndarray]) -> None:
        J, S, T, C, A = self.n_jobs, self.n_sites, self.n_slots, self.n_choices, self.n_actions
        self._n_job_feats = len(JOB_FEATURES) + (S if S > 1 else 0)
        self._n_choice_feats = len(CHOICE_FEATURES) + (S > 1)
        # Per job and current site, its actions' features in float64 (cast to float32 in the observation); the
        # coverage column is filled per observation.
        self._choice_static = np.zeros((J, S, A, self._n_choice_feats))
        self._rate_pad = np.zeros((J, A))
        for j, (n, g, rate) in enumerate(zip(self._sizes, self._gpus_loc, rate3600, strict=True)):
            per_gpu = np.divide(rate, g, out=np.zeros(n), where=g > 0)
            best = float(per_gpu.max())
            for s in range(S):
                cols = slice(s * C, s * C + n)
                self._choice_static[j, :, cols, 0] = np.minimum(g / self._site_gpus[s], 1.0)
                self._choice_static[j, :, cols, 2] = per_gpu / best if best > 0 else 0.0
                self._rate_pad[j, cols] = rate
                if S > 1:  # moves the job: from every other site
                    self._choice_static[j, :, cols, 3] = (np.arange(S) != s)[:, None]
        self._ren_high = max(renewable_share_high(view) for view in inst.site_views)
        n_global = sites_global_table(inst, self.env.lookahead, self.env.outlook, self._ren_high,
                                      np.random.default_rng(0)).shape[1]
        job_high = [PROGRESS_OBS_HIGH, RATE_RATIO_OBS_HIGH] + [1.0] * (self._n_job_feats - 2)
        glob_low = np.where(np.arange(n_global) < time_columns(inst), 0.0, PRICE_OBS_LOW)
        glob_high = np.full(n_global, max(PRICE_OBS_HIGH, self._ren_high))
        choice_high = [1.0, RATE_RATIO_OBS_HIGH] + [1.0] * (self._n_choice_feats - 2)
        low = np.concatenate([np.zeros(self._n_job_feats * J), glob_low, np.zeros(2 * S),
                              np.zeros(self._n_choice_feats * A)]).astype(np.float32)
        high = np.concatenate([job_high * J, glob_high, np.ones(2 * S), np.tile(choice_high, A)]).astype(np.float32)
        self.observation_space = spaces.Box(low=low, high=high, dtype=np.float32)
        self.action_space = spaces.Discrete(A)
        self._n_job_obs = self._n_job_feats * J
        self._n_global = n_global
        self._obs_buffer = np.zeros(self.observation_space.shape, dtype=np.float32)
        self._deciding_index = [j * self._n_job_feats + JOB_FEATURES.index("deciding") for j in range(J)]
        # A job with nothing missing: full coverage (float32 values, as the observation holds them).
        self._choice_done = self._choice_static.astype(np.float32).astype(float)
        for j in range(J):
            for s in range(S):
                self._choice_done[j, :, s * C + 1:s * C + self._sizes[j], 1] = RATE_RATIO_OBS_HIGH
        dl, rel = np.array(self._deadline, dtype=float), np.array(self._release, dtype=float)
        # Features 5-6 (window left, to release) per slot t = 0..T, by the expressions of the observation table.
        self._window_columns = [np.stack([np.minimum(np.maximum((dl - t) / T, 0.0), 1.0),
                                          np.minimum(np.maximum((rel - t) / T, 0.0), 1.0)], axis=1)
                                for t in range(T + 1)]

    def _bind_views(self) -> None:
        """Views of the observation buffer: the job features (``_feats``, updated in place as jobs decide and slots
        pass) and the features of the deciding job's actions; the two GPU profiles, halves of one array per site."""
        self._committed, self._reserved = self._profiles[:, :self.n_slots], self._profiles[:, self.n_slots:]
        self._held, self._held_away = self._state[:2]
        self._capacity, self._ok = self._mask_out
        self._feats = self._obs_buffer[:self._n_job_obs].reshape(self.n_jobs, self._n_job_feats)
        self._choice_view = self._obs_buffer[self._n_job_obs + self._n_global + 2 * self.n_sites:].reshape(
            self.n_actions, self._n_choice_feats)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling and ``copy.deepcopy`` copy arrays, not the views between them: bind the views again."""
        self.__dict__.update(state)
        self._bind_views()

    def observation_names(self) -> list[str]:
        S = self.n_sites
        names = [f"{job.name}.{f}" for job in self._template.jobs
                 for f in (*JOB_FEATURES, *(f"site_{s}" for s in range(S) if S > 1))]
        names += [f"global_{k}" for k in range(self._n_global)]
        names += ["inference_share", "free_gpu_share"] if S == 1 else [
            f"{site.name}.{f}" for site in self._template.sites for f in ("inference_share", "free_gpu_share")]
        features = (*CHOICE_FEATURES, "move")[:self._n_choice_feats]
        return names + [f"action_{a}.{f}" for a in range(self.n_actions) for f in features]

    # ------------------------------------------------------------------ episode

    def reset(self, inst: Instance):
        env = self.env
        self._inst = inst
        J, S = self.n_jobs, self.n_sites
        self._t = 0
        noisy = env.forecast_noise > 0  # noise is drawn per episode: that global table is not kept
        if inst.day not in self._day_tables:
            self._day_tables[inst.day] = (None if noisy else self._global_table(inst), *self._day_of(inst))
        global_obs, self._penalty_per_token, self._inference_share, self._day_arrays = self._day_tables[inst.day]
        self._global_obs = self._global_table(inst) if noisy else global_obs
        cur, job_gpus, job_kw, state, holds, feats = self._start
        self._cur, self._site, self._job_gpus, self._job_kw = list(cur), list(self._home), list(job_gpus), list(job_kw)
        self._end = [0] * J  # end slot of each job's committed segment
        self._tokens = [0.0] * J  # tokens made by the end of the committed segment
        self._schedule = [[PAUSE] * job.segments for job in inst.jobs]
        self._sites = [[h] * job.segments for job, h in zip(inst.jobs, self._home, strict=True)]
        self._committed[:] = self._reserved[:] = self._day_arrays[0]  # the inference GPUs, then the jobs' holds
        self._reserved += holds
        self._state[:] = state
        self._end_arr[:] = 0
        self.starts_safe = self._plan_fits()
        self._baseline = self._fixed(inst)[0] if env.reward_baseline == "fixed" else None
        self.objective_usd = 0.0
        self._fallback = False
        self._last_info: dict[str, Any] = {}
        self._feats[:] = feats
        self._time_columns()
        self._credit = 0.0
        if env.reward_credit == "job":
            _, self._fixed_gpus, self._fixed_kw, fixed_objective = self._fixed(inst)
            self._prof_gpus = np.zeros((S, self.n_slots), dtype=np.int64)
            self._prof_kw = np.zeros((S, self.n_slots))
            for j, home in enumerate(self._home):  # the fixed schedule runs every job at its home site
                self._prof_gpus[home] += self._fixed_gpus[j]
                self._prof_kw[home] += self._fixed_kw[j]
            if env.reward_baseline is None:
                self._credit = fixed_objective
        paid = self._advance(decided=False)  # the first decision point's queue; the slots before it (none at 0)
        self._pending_reward = self._reward(paid)
        return self._observation(), {"day": inst.day, "slot": self._t, "job": self.deciding_job,
                                     "objective_usd": paid}

    def _global_table(self, inst: Instance) -> np.ndarray:
        return sites_global_table(inst, self.env.lookahead, self.env.outlook, self._ren_high, self.env.np_random)

    def _day_of(self, inst: Instance) -> tuple:
        """The day's terminal penalty per token, inference share per site and slot, and the tables of
        :func:`~aidc_env.env.kernels.slot_objectives`."""
        views = inst.site_views
        share = np.minimum(np.array([v.inference_gpus / n for v, n in zip(views, self._site_gpus, strict=True)]), 1.0)
        day = np.array([[v.inference_it_kw, v.renewable_mw, v.price_usd_per_mwh,  # then the take-or-pay cost
                         v.renewable_mw * v.slot_hours * v.ppa_usd_per_mwh] for v in views]).transpose(1, 0, 2)
        sites = np.array([[v.pue, v.idle_kw_per_gpu, v.curtailment_penalty_usd_per_mwh, v.slot_hours,
                           v.idle_value_usd_per_gpu_hour] for v in views], dtype=float).T
        return (penalty_usd_per_token(inst, self.env.terminal_penalty_factor), share,
                (np.array([v.inference_gpus for v in views], dtype=np.int64), np.ascontiguousarray(day), sites))

    def _reward(self, paid: float) -> float:
        """Reward of a simulated objective (with the fixed schedule's objective of the same slots added back), or
        with ``reward_credit="job"`` the credits of the choices since the last reward."""
        scale = self.env.reward_scale
        if self.env.reward_credit == "job":
            credit, self._credit = self._credit, 0.0
            return -credit / scale
        reward = -paid / scale
        if self._baseline is not None:
            reward += self._baseline_paid / scale
        return reward

    def step(self, action):
        mask = self._mask if self._mask is not None else self._compute_mask()
        j = self._queue[self._k]
        here = self._site[j]
        a, invalid = masked_action(action, mask, here * self.n_choices + self._cur[j])
        fallback, slot = self._fallback, self._t  # before the step
        s, c = divmod(a, self.n_choices)
        self._decide(j, s, c, self._held_after_choice(j, s, c))
        self._k += 1
        self._mask = None
        closed = self._k >= len(self._queue)  # every job of the slot has decided: its slots are simulated
        paid = self._advance(decided=True) if closed else 0.0
        reward = (self._reward(paid) if closed or self.env.reward_credit == "job" else 0.0) + self._pending_reward
        self._pending_reward = 0.0
        penalty = self._terminal_penalty()
        reward -= penalty / self.env.reward_scale
        info = self._last_info = {"day": self._inst.day, "slot": slot, "job": j, "site": s, "choice": c - 1,
                                  "moved": s != here, "objective_usd": paid, "invalid_action": invalid,
                                  "safety_fallback": fallback, "terminal_penalty_usd": penalty}
        return self._observation(), reward, self._t >= self.n_slots, False, info

    def render(self) -> str:
        jobs = " ".join(f"{job.name}={c - 1}" + (f"@{s}" if self.n_sites > 1 else "")
                        for job, c, s in zip(self._inst.jobs, self._cur, self._site, strict=True))
        return f"{self._inst.day} slot {self._t}/{self.n_slots} job {self.deciding_job}: {jobs}"

    # ------------------------------------------------------------------ public state

    @property
    def deciding_job(self) -> int | None:
        return self._queue[self._k] if self._t < self.n_slots and self._k < len(self._queue) else None

    def schedule(self) -> Schedule:
        return Schedule(modes=tuple(np.array(row, dtype=np.int64) for row in self._schedule),
                        sites=tuple(np.array(row, dtype=np.int64) for row in self._sites))

    def reserved_gpus(self) -> np.ndarray:
        """(sites, slots): GPUs of the committed choices, the held modes of every job's plan and inference."""
        return self._reserved.copy()

    def committed_gpus(self) -> np.ndarray:
        """(sites, slots): GPUs of the committed choices and inference."""
        return self._committed.copy()

    def action_of(self, job: int, site: int, choice: int) -> int:
        """The action of ``job`` taking ``choice`` (a mode index or ``PAUSE``) at ``site``."""
        return site * self.n_choices + int(choice) + 1

    # ------------------------------------------------------------------ mechanics

    def _decide(self, j: int, s: int, c: int, held: int) -> None:
        """Commit site s and local choice c of job j for its segment from the current slot, and its new hold."""
        t = self._t
        prev, here = self._cur[j], self._site[j]
        self._tokens[j] += self._segment_tokens(j, s, c)
        sps = self._sps[j]
        self._schedule[j][t // sps] = c - 1
        self._sites[j][t // sps] = s
        g = self._gpus_list[j][c]
        _move_load(self._job_gpus, here, s, self._gpus_list[j][prev], g)
        _move_load(self._job_kw, here, s, self._kw_list[j][prev], self._kw_list[j][c])
        self._cur[j], self._site[j] = c, s
        self._end[j] = end = t + sps
        commit(self._profiles, self._state, self._feats, self._end_arr, self._jobs, self._pools, j, t, end, c, g, held,
               here, s, self._tokens[j], self._dt)
        if self.n_sites > 1:
            self._held_away[j] = self._move_plan.held_gpus_paused(j, end, self._plan.target_safe[j] - self._tokens[j])
        if self.env.reward_credit == "job":
            self._credit_choice(j, s, c, slice(t, end))

    def _segment_tokens(self, j: int, s: int, c: int) -> float:
        """Tokens of job j's segment from the current slot with local choice c at site s: moved, kept or restarted."""
        if s != self._site[j]:
            return self._seg_move_list[j][c]
        return (self._seg_keep_list if c == self._cur[j] else self._seg_restart_list)[j][c]

    def _credit_choice(self, j: int, s: int, c: int, sl: slice) -> None:
        """Credit job j's choice: the objective change of replacing its fixed choice by c at s on the segment."""
        fixed_site = self._home[j]
        sites = [fixed_site] if s == fixed_site else [fixed_site, s]
        before = self._profile_objective(sl, sites)
        _move_load(self._prof_gpus[:, sl], fixed_site, s, self._fixed_gpus[j, sl], self._gpus_list[j][c])
        _move_load(self._prof_kw[:, sl], fixed_site, s, self._fixed_kw[j, sl], self._kw_list[j][c])
        self._credit += self._profile_objective(sl, sites) - before

    def _profile_objective(self, sl: slice, sites: list[int]) -> float:
        """The objective of the credit profile (:meth:`_credit_choice`) at ``sites`` in the slots of ``sl``."""
        objectives = slot_objectives(sl.start, sl.stop, self._prof_gpus[:, sl].ravel(), self._prof_kw[:, sl].ravel(),
                                     self._pools, *self._day_arrays)
        return sum(float(objectives[k].sum()) for k in sites)

    def _forced(self, j: int) -> bool:
        """Job j has one choice at the current slot (a boundary): outside its window, or done."""
        return not self._allowed[j][self._t // self._sps[j]] or (
            self.env.pause_when_done and self._tokens[j] >= self._target[j] * (1 - TRANCHE_TOLERANCE))

    def _advance(self, decided: bool) -> float:
        """From slot t (``decided``: every job of slot t has chosen), simulate slot blocks until a decision point
        asks the agent (forced choices applied on the way) or the episode ends; returns the objective paid."""
        paid = base = 0.0
        T = self.n_slots
        while True:
            t = self._t
            if decided:
                nxt = self._next_boundary[t]
                # The slots' objective with every job's committed site and choice: the simulator's functions.
                paid += float(_sum(slot_objectives(t, nxt, np.array(self._job_gpus), np.array(self._job_kw),
                                                   self._pools, *self._day_arrays)[-1]))
                if self._baseline is not None:
                    base += float(_sum(self._baseline[t:nxt]))
                self._t = t = nxt
                self._time_columns()
                if t >= T:
                    self._queue = []
                    break
            queue = []
            for j in self._boundary_jobs[t]:
                if self._forced(j):
                    need = self._plan.target_safe[j] - self._tokens[j]
                    self._decide(j, self._site[j], 0, self._plan.held_gpus_paused(j, t + self._sps[j], need))
                else:
                    queue.append(j)
            self._queue = queue
            self._k = 0
            if queue:
                break
            decided = True
        self._mask = None
        self.objective_usd += paid
        self._baseline_paid = base
        return paid

    def _fixed(self, inst: Instance) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """The fixed schedule on ``inst`` (at the home sites), cached per day: its objective per slot (the simulator's
        replay), per job and slot its GPUs and IT kW, and its objective."""
        cached = self._fixed_cache.get(inst.day)
        if cached is None:
            from aidc_env.baselines import fixed_schedule

            schedule = fixed_schedule(inst)
            result = simulate(inst, schedule)
            per_slot = sum(f.decision_cost_usd + view.renewable_mw * view.slot_hours * view.ppa_usd_per_mwh
                           - f.idle_value_usd for f, view in zip(result.site_flows, inst.site_views, strict=True))
            gpus = np.zeros((self.n_jobs, self.n_slots), dtype=np.int64)
            kw = np.zeros((self.n_jobs, self.n_slots))
            for j, row in enumerate(schedule):
                local = np.repeat(np.asarray(row, dtype=np.int64) + 1, self._sps[j])[:self.n_slots]
                gpus[j], kw[j] = self._gpus_loc[j][local], self._kw_loc[j][local]
            cached = self._fixed_cache[inst.day] = (per_slot, gpus, kw, result.metrics.objective_usd)
        return cached

    # ------------------------------------------------------------------ observation

    def _time_columns(self) -> None:
        """The observation's parts that change with the slot only: features 4-6 of every job (5-6 from a per-slot
        table), the global values and the inference shares."""
        t = self._t
        self._feats[:, 4] = np.minimum(np.maximum((self._end_arr - t) / self._sps_arr, 0.0), 1.0)
        self._feats[:, 5:7] = self._window_columns[t]
        obs = self._obs_buffer
        ng = self._n_job_obs + self._n_global
        obs[self._n_job_obs:ng] = self._global_obs[t]
        if t < self.n_slots:
            obs[ng:ng + 2 * self.n_sites:2] = self._inference_share[:, t]

    def _observation(self) -> np.ndarray:
        """The observation (a copy of the buffer whose job part ``_feats`` is kept up to date in place)."""
        t = self._t
        obs = self._obs_buffer
        ng = self._n_job_obs + self._n_global  # the global values and the inference shares: _time_columns
        choice = self._choice_view
        j = self.deciding_job
        if j is None:
            obs[ng:ng + 2 * self.n_sites] = (0.0, 1.0) * self.n_sites  # per site: inference share, free GPU share
            choice[:] = 0.0
            return obs.copy()
        W = self._target[j]
        missing = W - self._tokens[j]
        done = missing <= W * TRANCHE_TOLERANCE
        return observe(obs, self._committed, self._pools, t, ng, choice,
                       (self._choice_done if done else self._choice_static)[j, self._site[j]], done, self._rate_pad[j],
                       0.0 if done else (self._deadline[j] - t) * self._dt / missing, self._deciding_index[j])


__all__ = ["CHOICE_FEATURES", "JOB_FEATURES", "PerJobDynamics"]
