"""The ``joint`` action type: one step per slot, one joint choice of every job (one site).

Action ``Discrete(A)`` with A = Π_j (M_j + 1) joint choices (a few hundred in the 2048 case). Job j's local choice
is 0 = pause or i = its Pareto mode i − 1; the joint index is the mixed-radix number of the local choices with job
0 the most significant digit (``numpy.ravel_multi_index`` order): a = Σ_j local_j · Π_{k>j} (M_k + 1). An instance
with a cap curve (the grid side, :mod:`aidc_env.env.calls`) adds a last digit, the cap level ℓ of every running job
(held, like the modes, until a job's next checkpoint): ``Discrete(A · L)``, action = joint · L + ℓ; in a call's slot
the env caps deeper where the limit needs it.

**Mask.** A job off its checkpoint boundary may only keep its choice (before t = 0 every job runs its
``initial_mode``; keeping it costs no restart); the joint choice's GPUs fit the pool; with ``pause_when_done`` a job
whose tranche is met may only pause at its boundaries (over a horizon with daily minimums, only on the last day,
once that day's minimum is met); with ``safety_mask`` a joint choice is removed unless some capacity-feasible joint
mode held for all the remaining segments still finishes every tranche (:mod:`aidc_env.env.safety`; if no choice
passes, the plain mask is used and ``info["safety_fallback"]`` is set).

**Observation** (``Box(float32)`` of size 7·J + 4 + 2·L, + 1 over a horizon of D > 1 days, + 3 with ``dayahead``).
Per job (7 values, :data:`~aidc_env.env.observation.JOB_FEATURES`): progress X_j / W_j [0, 4]; required-rate ratio
(W_j − X_j)⁺ / seconds left / fastest tokens/s [0, 10]; GPU share of its current choice; IT power share (of N ·
p_rated); mode index (local choice / M_j); at-checkpoint flag; slots left in the segment / slots per segment. Then
the global values (:func:`~aidc_env.env.observation.global_table`: time of day, [horizon progress,] price λ/100 and
renewable share now, the next L slots' prices and renewable shares, [the last realised values and a flag]) and the
free GPU share. The "current choice" is the one held in the previous slot.

**Reward** every slot: −(grid cost + curtailment penalty of the slot [+ the grid side's call payment, penalty and
training value lost]) / ``reward_scale``; at the last step minus the terminal penalty of each job's missing tokens
(and, with daily minimums, each day's missing minimum).

**Info** every step: ``day``, ``slot``, ``slot_cost_usd``, ``load_mw``, ``grid_mw``, ``renewable_used_mw``,
``curtailment_mw``, ``gpus_used``, ``job_modes``, ``job_progress``, ``invalid_action``, ``terminal_penalty_usd``,
``safety_fallback``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from aidc_env.env.calls import CALL_FEATURES, CallResponse, JobState
from aidc_env.env.demand import DEMAND_FEATURES, DemandCharges
from aidc_env.env.rules import MaskedSteps, local_choice_tables, masked_action, penalty_usd_per_token
from aidc_env.env.observation import (JOB_FEATURES, PROGRESS_OBS_HIGH, RATE_RATIO_OBS_HIGH, global_table,
                                      observation_layout, renewable_share_high)
from aidc_env.env.safety import SafetyTest
from aidc_env.errors import require
from aidc_env.information import DayAhead, Perfect
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.joint_choices import joint_choices
from aidc_env.schedule import Schedule
from aidc_env.simulator import TRANCHE_TOLERANCE, renewable_first, slot_decision_cost_usd, slot_productive_hours

if TYPE_CHECKING:
    from aidc_env.env.core import DispatchEnv


class JointDynamics(MaskedSteps):
    """The joint action type of a :class:`~aidc_env.env.core.DispatchEnv` (see the module docstring). Its tables do not
    depend on the day: built once from the env's first instance; ``reset`` builds the day's observation table."""

    def __init__(self, env: DispatchEnv, inst: Instance):
        require(len(inst.sites) == 1, "action", "the joint action takes one site: use action='per_job' for several")
        require(not inst.has_fleet_workloads, "action",
                "the joint action takes pre-training jobs only: use action='per_job' for fine-tuning, inference or "
                "an idle-GPU value")
        require(env.reward_baseline is None and env.reward_credit == "decision", "reward_baseline",
                "reward_baseline and reward_credit apply to the per_job action")
        self.env = env
        self._template = inst
        self._setup_tables(inst)
        self._inst: Instance | None = None
        self._t = 0
        self._tokens: list[float] = [0.0] * self.n_jobs
        self._daily_shortfall = np.zeros(self.n_jobs)
        self._schedule: list[np.ndarray] = []
        self._day_tables: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # per day: global observation, penalty
        self._start_masks: dict[int, tuple] = {}  # grid side, per instance: its first slot's mask and acceptances
        self._last_info: dict[str, Any] = {}
        self._fallback = False
        self.starts_safe = True

    def _setup_tables(self, inst: Instance) -> None:
        """Joint-action tables and per-job arrays (the same for every day)."""
        jobs = inst.jobs
        self.n_jobs = J = len(jobs)
        self.n_slots, self.slots_per_day = inst.slots, inst.slots_per_day
        self._slot_hours, self._n_gpus = inst.slot_hours, inst.n_gpus
        joint = joint_choices(inst)
        self._sizes = sizes = joint.sizes
        self.n_joint = A = joint.n_choices
        # With a cap curve, each joint choice comes with a cap level for the running jobs (the action's last digit).
        self.n_levels = L = inst.cap_curve.levels if self.env.grid_side and inst.cap_curve is not None else 1
        self.n_actions = A * L
        loc = joint.local  # (A, J) local choices, job 0 most significant
        self._loc_cols = [np.ascontiguousarray(loc[:, j]) for j in range(J)]
        self._strides = [int(np.prod(sizes[j + 1:])) for j in range(J)]
        self._choice_table = joint.choices  # PAUSE (-1) or a mode index
        self._loc_rows = [tuple(int(c) for c in row) for row in loc]
        self._gpus_list = joint.gpus.tolist()
        self._load_table = joint.load_mw
        self._cap_ok = joint.fits

        self._power_ref_kw = inst.n_gpus * inst.rated_kw_per_gpu
        if self._power_ref_kw <= 0:
            self._power_ref_kw = max(float(joint.it_power_kw.max()), 1.0)
        # Per job, arrays indexed by local choice (0 = pause, i = mode i - 1).
        self._sps = [inst.slots_per_segment(job) for job in jobs]
        self._tranche_list = [float(job.tranche_tokens) for job in jobs]
        self._daily_min_list = [inst.daily_min_tokens(job) if inst.horizon_days > 1 else 0.0 for job in jobs]
        gpus_loc, power_loc, rate3600_loc = local_choice_tables(jobs)
        self._rate3600_list = [r.tolist() for r in rate3600_loc]
        self._gpus_loc_list = [g.tolist() for g in gpus_loc]
        self._power_share_list = [(p / self._power_ref_kw).tolist() for p in power_loc]
        self._max_rate = [float(job.tokens_per_s_by_choice.max()) for job in jobs]
        # Productive hours of each slot of a restarted segment (the simulator's function), and suffix sums.
        self._prod_restart = [[slot_productive_hours(inst, job, o, True) for o in range(sps)]
                              for job, sps in zip(jobs, self._sps, strict=True)]
        suffix_restart = [np.cumsum(per_slot[::-1])[::-1].copy() for per_slot in self._prod_restart]
        self._safety = SafetyTest(
            n_gpus=inst.n_gpus, n_slots=inst.slots, slot_hours=inst.slot_hours, slots_per_segment=self._sps,
            restart_hours=[job.restart_hours for job in jobs], tranche_tokens=self._tranche_list, gpus_loc=gpus_loc,
            rate3600_loc=rate3600_loc, suffix_restart=suffix_restart, slots_per_day=inst.slots_per_day,
            daily_min_tokens=self._daily_min_list)
        self._daily = self._safety.daily
        # The grid side (caps in calls, the delivery mask, the call and training-value terms): aidc_env.env.calls.
        self._grid = CallResponse(inst, loc, gpus_loc, power_loc, rate3600_loc, isinstance(self.env.outlook, Perfect)
                                  and not self.env.forecast_noise, self._prod_restart, self._sps
                                  ) if self.env.grid_side else None
        self._demand = DemandCharges() if self.env.demand_charges else None  # a tariff's: aidc_env.env.demand

        # Observation layout and bounds.
        power_high = max(1.0, max(float(p.max()) / self._power_ref_kw for p in power_loc))
        self._ren_high = renewable_share_high(inst)
        self._observation_names, self.observation_space = observation_layout(
            [job.name for job in jobs], self.env.lookahead, power_high, self._ren_high, horizon=inst.horizon_days > 1,
            last_realised=isinstance(self.env.outlook, DayAhead),
            grid_side=(CALL_FEATURES if self._grid else ()) + (DEMAND_FEATURES if self._demand else ()))
        self.action_space = spaces.Discrete(A * L)
        self._n_job_obs = len(JOB_FEATURES) * J
        self._obs_size = self.observation_space.shape[0]
        self._n_demand_obs = len(DEMAND_FEATURES) if self._demand else 0
        self._n_grid_obs = (len(CALL_FEATURES) if self._grid else 0) + self._n_demand_obs

    def observation_names(self) -> list[str]:
        return list(self._observation_names)

    # ------------------------------------------------------------------ action encoding

    def encode(self, choices: Sequence[int], cap_level: int = 0) -> int:
        """Joint action of per-job choices (``PAUSE`` or a mode index) and, with a cap curve, a cap level."""
        require(len(choices) == self.n_jobs, "choices", f"expected {self.n_jobs} values")
        require(0 <= int(cap_level) < self.n_levels, "cap_level", f"must be a level < {self.n_levels}")
        action = 0
        for j, c in enumerate(choices):
            c = int(c)
            require(PAUSE <= c < self._sizes[j] - 1, f"choices[{j}]",
                    f"must be -1 or a mode index < {self._sizes[j] - 1}")
            action += (c + 1) * self._strides[j]
        return action * self.n_levels + int(cap_level)

    def decode(self, action: int) -> list[int]:
        """Per-job choices (``PAUSE`` or a mode index) of a joint action."""
        return [int(c) for c in self._choice_table[int(action) // self.n_levels]]

    def actions_for_schedule(self, schedule: Sequence[Sequence[int]] | Schedule) -> list[int]:
        """The joint action of every slot that replays a schedule (per job, per segment: mode or PAUSE)."""
        rows = schedule.modes if isinstance(schedule, Schedule) else schedule
        require(len(rows) == self.n_jobs, "schedule", f"expected {self.n_jobs} jobs")
        per_slot = [np.repeat(np.asarray(s, dtype=np.int64), sps) for s, sps in zip(rows, self._sps, strict=True)]
        for j, arr in enumerate(per_slot):
            require(arr.size == self.n_slots, f"schedule[{j}]", f"expected {self._template.jobs[j].segments} segments")
        return [self.encode([arr[t] for arr in per_slot]) for t in range(self.n_slots)]

    def schedule(self) -> Schedule:
        caps = tuple(row.copy() for row in self._caps) if self._grid and any(row.any() for row in self._caps) else None
        return Schedule(modes=tuple(arr.copy() for arr in self._schedule),
                        sites=tuple(np.zeros(arr.size, dtype=np.int64) for arr in self._schedule), caps=caps)

    # ------------------------------------------------------------------ episode

    def reset(self, inst: Instance):
        env = self.env
        self._inst = inst
        self._t = 0
        # Per job (plain Python lists: the step is scalar work): current local choice, whether the current segment
        # restarted, tokens so far and since the start of the current day, tokens missing from the days' minimums
        # so far; and the joint action that keeps every choice.
        self._cur = [job.initial_mode + 1 for job in inst.jobs]
        self._restarted = [False] * self.n_jobs
        self._tokens = [0.0] * self.n_jobs
        self._today = [0.0] * self.n_jobs
        self._daily_shortfall = np.zeros(self.n_jobs)
        self._keep = sum(c * s for c, s in zip(self._cur, self._strides, strict=True)) * self.n_levels
        self._schedule = [np.full(job.segments, PAUSE, dtype=np.int64) for job in inst.jobs]
        self._mask = None
        self._renewable = inst.renewable_mw
        tables = None if env.forecast_noise else self._day_tables.get(inst.day)  # noise is drawn per episode
        if tables is None:
            tables = (global_table(inst, env.lookahead, env.outlook, self._ren_high, env.np_random),
                      penalty_usd_per_token(inst, env.terminal_penalty_factor))
            self._day_tables[inst.day] = tables
        self._global_obs, self._penalty_per_token = tables
        if self._demand:
            self._demand.reset(inst)
        if self._grid:
            self._grid.reset(inst)
            self._caps = [np.zeros(inst.slots) for _ in inst.jobs]
            start = self._start_masks.get(id(inst))
            if start is None or start[0] is not inst:  # the first slot's mask depends on the instance alone
                self._compute_mask()
                start = self._start_masks[id(inst)] = (inst, self._mask, self._fallback, list(self._grid.accepted))
            _, self._mask, self._fallback, accepted = start
            self._grid.accepted = list(accepted)
        else:
            self._compute_mask()  # the first slot's: whether it falls back (no joint choice passes the safety test)
        self.starts_safe = not self._fallback
        return self._observation(), {"day": inst.day, "slot": 0, "job_modes": [c - 1 for c in self._cur],
                                     "job_progress": self._progress()}

    def step(self, action):
        inst, t = self._inst, self._t
        mask = self._mask if self._mask is not None else self._compute_mask()
        fallback = self._fallback
        a, invalid = masked_action(action, mask, self._keep)

        cur = self._cur
        choice, level = divmod(a, self.n_levels)
        loc = self._loc_rows[choice]
        restarted = self._restarted
        hours = [0.0] * self.n_jobs  # each job's productive hours in the slot
        for j, c in enumerate(loc):
            sps = self._sps[j]
            offset = t % sps
            if offset == 0:
                restarted[j] = c != 0 and c != cur[j]
                self._schedule[j][t // sps] = c - 1
            hours[j] = self._prod_restart[j][offset] if restarted[j] else self._slot_hours
        load = self._load_table[choice] if level == 0 else self._grid.level_load_mw[level][choice]
        caps, changed = self._grid.positions(t, loc, float(load), level, hours) if self._grid else (None, False)
        made_now = [0.0] * self.n_jobs
        for j, c in enumerate(loc):
            if c:
                rate = self._rate3600_list[j][c]
                if caps is not None:  # the simulator's order: (rate × throughput factor) × hours
                    rate = rate * self._grid.factor(self._grid.throughput_list, caps[j])
                made = made_now[j] = rate * hours[j]
                self._tokens[j] += made
                self._today[j] += made
            cur[j] = c
        self._keep = a

        if caps is not None:
            if changed:
                load = self._grid.load_mw(loc, caps)
            for j, x in enumerate(caps):
                self._caps[j][t] = x
        used, grid, curtailment = renewable_first(load, self._renewable[t])
        cost = float(slot_decision_cost_usd(inst, grid, curtailment, t))
        if self._grid:
            self._grid.record(caps)
            cost += self._grid.slot_usd(t, float(grid), made_now)
        if self._demand:
            cost += self._demand.slot_usd(t, float(grid))
        self._t = t = t + 1
        self._mask = None
        if t % self.slots_per_day == 0:
            self._close_day()
        penalty = self._terminal_penalty(self._daily_shortfall)
        reward = -cost / self.env.reward_scale - penalty / self.env.reward_scale
        info = self._last_info = {
            "day": inst.day, "slot": t - 1, "slot_cost_usd": cost, "load_mw": float(load), "grid_mw": float(grid),
            "renewable_used_mw": float(used), "curtailment_mw": float(curtailment),
            "gpus_used": self._gpus_list[choice],
            "job_modes": [c - 1 for c in loc], "job_progress": self._progress(), "invalid_action": invalid,
            "terminal_penalty_usd": penalty, "safety_fallback": fallback}
        if self._grid:
            info.update(cap_level=level, cap_positions=[0.0] * self.n_jobs if caps is None else caps,
                        calls_accepted=list(self._grid.accepted))
        return self._observation(), reward, t == self.n_slots, False, info

    deciding_job = None

    def render(self) -> str:
        modes = " ".join(f"{job.name}={c - 1:>2d}" for job, c in zip(self._inst.jobs, self._cur, strict=True))
        progress = " ".join(f"{p:.3f}" for p in self._progress())
        cost = self._last_info.get("slot_cost_usd", 0.0)
        return f"{self._inst.day} slot {self._t:3d}/{self.n_slots}: {modes} progress {progress} cost ${cost:.2f}"

    # ------------------------------------------------------------------ tranche bookkeeping

    def _close_day(self) -> None:
        """At midnight: record the tokens the day missed from its minimum, and start the next day's count."""
        for j, (x, w) in enumerate(zip(self._today, self._daily_min_list, strict=True)):
            if x < w * (1 - TRANCHE_TOLERANCE):
                self._daily_shortfall[j] += w - x
        self._today = [0.0] * self.n_jobs

    def daily_shortfall_tokens(self) -> np.ndarray:
        """Tokens missing from the minimums of the days already over, per job (summed over the days)."""
        return self._daily_shortfall.copy()

    def _progress(self) -> list[float]:
        return [x / w if w > 0 else 1.0 for x, w in zip(self._tokens, self._tranche_list, strict=True)]

    def _done(self) -> list[bool]:
        """Per job: nothing more to make (the horizon's target met and, with daily minimums, the last day's)."""
        done = [x >= w * (1 - TRANCHE_TOLERANCE) for x, w in zip(self._tokens, self._tranche_list, strict=True)]
        if self._daily:
            last_day = self._t >= self.n_slots - self.slots_per_day
            for j, w in enumerate(self._daily_min_list):
                if w > 0:
                    done[j] = done[j] and last_day and self._today[j] >= w * (1 - TRANCHE_TOLERANCE)
        return done

    # ------------------------------------------------------------------ mask

    def _compute_mask(self) -> np.ndarray:
        t = self._t
        at_boundary = [t % sps == 0 for sps in self._sps]
        self._fallback = False
        if not any(at_boundary):  # nobody may change: only "keep", which is valid (the previous slot was)
            mask = self._mask = np.zeros(self.n_actions, dtype=bool)
            mask[self._keep] = True
            if self._grid and self._grid.pending(t):
                self._grid.notice(t, mask.reshape(self.n_joint, self.n_levels).any(axis=1), self._job_state(t))
            return mask
        done = self._done()
        mask = self._cap_ok.copy()
        for j in range(self.n_jobs):
            if not at_boundary[j]:
                mask &= self._loc_cols[j] == self._cur[j]
            elif self.env.pause_when_done and done[j]:
                mask &= self._loc_cols[j] == 0
        if self._grid:  # accept the calls noticed now if they can be delivered, and keep the accepted ones deliverable
            state = self._job_state(t)
            self._grid.notice(t, mask, state)
            delivering = mask & self._grid.deliverable(t, state)
            mask = delivering if delivering.any() else mask
        if self.env.safety_mask:
            safe = self._safe_by_level(t, at_boundary, mask)
            self._fallback = not safe.any()
            mask = np.repeat(mask, self.n_levels) if self._fallback else safe
        elif self.n_levels > 1:
            mask = np.repeat(mask, self.n_levels)
        self._mask = mask
        return mask

    def _job_state(self, t: int) -> JobState:
        return JobState(ends=[t - t % sps + sps for sps in self._sps], at_boundary=[t % sps == 0 for sps in self._sps],
                        current=list(self._cur), restarted=list(self._restarted))

    def _safe_by_level(self, t: int, at_boundary: Sequence[bool], mask: np.ndarray) -> np.ndarray:
        """The completion rule per (joint choice, cap level), flattened as the actions are."""
        lost = self._grid.lost_hours() if self._grid else None
        factor = self._grid.throughput_list if self.n_levels > 1 else 1.0  # each level's throughput share
        safe = self._safety.safe(t, at_boundary, self._tokens, self._cur, self._restarted, self._today, lost, factor)
        return mask & safe if self.n_levels == 1 else (mask[:, None] & safe.T).ravel()

    # ------------------------------------------------------------------ observation

    def _observation(self) -> np.ndarray:
        t, n_gpus = self._t, self._n_gpus
        feats: list[float] = []
        gpus_used = 0
        seconds_left = (self.n_slots - t) * self._slot_hours * SECONDS_PER_HOUR
        for j in range(self.n_jobs):
            c, sps, W, X = self._cur[j], self._sps[j], self._tranche_list[j], self._tokens[j]
            offset, missing = t % sps, W - X
            if missing <= W * TRANCHE_TOLERANCE:
                ratio = 0.0
            elif seconds_left <= 0 or self._max_rate[j] <= 0:
                ratio = RATE_RATIO_OBS_HIGH
            else:
                ratio = min(missing / seconds_left / self._max_rate[j], RATE_RATIO_OBS_HIGH)
            gpus = self._gpus_loc_list[j][c]
            gpus_used += gpus
            n_modes = self._sizes[j] - 1
            feats += (min(X / W, PROGRESS_OBS_HIGH) if W > 0 else 1.0, ratio, min(gpus / n_gpus, 1.0),
                      self._power_share_list[j][c], c / n_modes if n_modes else 0.0, 1.0 if offset == 0 else 0.0,
                      (sps - offset) / sps)  # JOB_FEATURES
        obs = np.empty(self._obs_size, dtype=np.float32)
        obs[: self._n_job_obs] = feats
        obs[self._n_job_obs: -1 - self._n_grid_obs] = self._global_obs[t]
        if self._grid:
            obs[-1 - self._n_grid_obs: -1 - self._n_demand_obs] = self._grid.features(min(t, self.n_slots - 1))
        if self._demand:
            obs[-1 - self._n_demand_obs: -1] = self._demand.features(min(t, self.n_slots - 1))
        obs[-1] = min(max((n_gpus - gpus_used) / n_gpus, 0.0), 1.0)
        return obs


__all__ = ["JointDynamics"]
