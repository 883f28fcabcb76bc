"""Gymnasium environment for a fleet in one pool: one job's choice per agent step (DESIGN §9, issue 13).

``gymnasium.make("aidc_env/FleetDispatch-v0", case="fleet")`` (registered on ``import aidc_env``). The action
grows linearly with the fleet: Discrete(max modes + 1) instead of the joint env's Π_j (M_j + 1). Every cost
comes from the simulator's functions, so that the episode's total objective equals
``simulate(instance, env.schedule()).metrics.objective_usd``. See ``docs/env.md`` and ``docs/fleet.md``.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from aidc_env.case import Case
from aidc_env.env import (
    JobQueueMasks,
    DEFAULT_REWARD_SCALE_USD,
    DEFAULT_TERMINAL_PENALTY_FACTOR,
    check_day,
    check_env_arguments,
    episode_days,
    instances_by_day,
    masked_action,
    penalty_usd_per_token,
    reset_day,
)
from aidc_env.errors import require
from aidc_env.fleet_plan import FleetPlan
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.observation import (
    DEFAULT_LOOKAHEAD,
    PRICE_OBS_HIGH,
    PRICE_OBS_LOW,
    PROGRESS_OBS_HIGH,
    RATE_RATIO_OBS_HIGH,
    global_table,
    renewable_share_high,
)
from aidc_env.profiles import ProfileSet
from aidc_env.simulator import (
    TRANCHE_TOLERANCE,
    facility_load_mw,
    renewable_first,
    simulate,
    slot_decision_cost_usd,
    slot_idle_value_usd,
)

_max = np.maximum.reduce  # the ufunc itself: a slice's max without ndarray.max's Python wrapper
_sum = np.add.reduce  # what ndarray.sum calls (the same sum), without its Python wrapper (a hot path)
MASK_CACHE_SIZE = 1 << 14
"""Most distinct masks kept as arrays (:meth:`FleetDispatchEnv._mask_array`; a few MB at most). Measured: 439
distinct masks in 200,000 random masked agent steps of the fleet case."""


def _bits(mask: np.ndarray) -> int:
    """The bit mask (bit c set iff ``mask[c]``) of a bool array."""
    return sum(1 << c for c in np.flatnonzero(mask).tolist())


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


FLEET_ENV_ID = "aidc_env/FleetDispatch-v0"
"""Gymnasium id of :class:`FleetDispatchEnv`."""

FLEET_JOB_FEATURES = ("progress", "required_rate_ratio", "gpu_share", "mode_index", "segment_left", "window_left",
                      "to_release", "deciding")
"""Per-job observation features, in order (see :class:`FleetDispatchEnv`)."""
CHOICE_FEATURES = ("gpu_share", "coverage", "efficiency")
"""Per-action features of the job deciding now, in order (see :class:`FleetDispatchEnv`)."""
REWARD_BASELINES = (None, "fixed")
"""``reward_baseline``: none (reward = −objective) or the fixed schedule's objective of the same slots."""
REWARD_CREDITS = ("decision", "job")
"""``reward_credit``: the objective of the slots simulated when a decision point closes ("decision"), or per
agent step the objective change attributable to that job's choice ("job"; see :class:`FleetDispatchEnv`)."""


class FleetDispatchEnv(JobQueueMasks, gym.Env):
    """
    ## Description

    A pool of N GPUs serves inference (not deferrable: its GPUs come out of the pool first, every slot) and runs
    pre-training jobs (3D modes, checkpoints, a token target over the horizon) and fine-tuning jobs (a window
    [release, deadline) on their checkpoint boundaries, a target due by the deadline); idle GPUs may carry a
    value. A job may pause, resume or change mode only at its checkpoint boundaries; a restart spends τ_j
    hours loading the checkpoint. At each decision point (a slot where some job is at a boundary) the jobs at
    a boundary decide **one after the other, one per agent step, in job order**; the jobs mid-segment keep
    their choice. When every job of the slot has decided, the env simulates the slots up to the next decision
    point with the simulator's functions and pays their objective. A job outside its window, or (with
    ``pause_when_done``) whose target is met, has a single choice, pause: it is applied without an agent step.

    ## Action Space

    ``Discrete(A)`` with A = max_j M_j + 1: the local choice of the job deciding now (0 = pause, i = its Pareto
    mode i − 1); actions above its M_j are masked. :meth:`action_masks` returns the exact mask of the rules:

    - **capacity**: the mode's GPUs fit the pool in every slot of its segment, beside the inference GPUs and
      the GPUs of the choices already committed (jobs mid-segment and jobs that decided earlier this slot);
      the jobs still to decide can always pause, so capacity holds whatever comes next;
    - **windows** and **done** jobs: not asked (see above);
    - with ``safety_mask`` (default), the **reservation rule** of :mod:`aidc_env.fleet_plan`: after the choice,
      every unfinished job must still have a held mode that meets its target by its deadline, and these held
      modes (fewest GPUs each) plus the committed choices plus inference must fit the pool in every future
      slot. Sufficient, and joint (it counts every job's needs at once); if the episode starts safe, following
      the mask meets every target and deadline and the mask is never empty. If no choice passes (only when
      the episode starts unsafe), the capacity mask is used and ``info["safety_fallback"]`` is set.

    An action outside the mask never raises: the env keeps the job's current choice if valid, else takes the
    lowest valid one, and sets ``info["invalid_action"]``.

    ## Observation Space

    ``Box(float32)`` of size 8·J + G + 2 + 3·A (J jobs, G global values of :func:`aidc_env.observation.global_table`:
    time of day, [horizon progress,] price and renewable now, L look-ahead prices and renewables, [the last
    realised values with ``information="dayahead"``]). Per job, in job order:

    | # | feature | meaning | range |
    |---|---|---|---|
    | 0 | progress | tokens made by the end of its committed segment / W_j (1 if W_j = 0) | [0, 4] |
    | 1 | required_rate_ratio | (W_j − X_j)⁺ / seconds from then to its deadline / fastest tokens/s | [0, 10] |
    | 2 | gpu_share | GPUs of its committed choice / N | [0, 1] |
    | 3 | mode_index | local choice / M_j | [0, 1] |
    | 4 | segment_left | slots left in its committed segment / slots per segment (0: deciding this slot) | [0, 1] |
    | 5 | window_left | (deadline − t) / T | [0, 1] |
    | 6 | to_release | (release − t)⁺ / T | [0, 1] |
    | 7 | deciding | 1 for the job deciding now | {0, 1} |

    Then the global values, the inference GPUs of slot t / N and the free GPU share of slot t (N − inference −
    committed) / N, and per action a of the job deciding now (3 values each, 0 for actions it does not have):
    its GPUs / N, its coverage (tokens/s × hours to the deadline / missing tokens, clipped to [0, 10]; 10 when
    nothing is missing, 0 for pause) and its efficiency (tokens per GPU-second / the job's best). Nothing
    observed at slot t depends on the truth of slots ≥ t beyond what ``information`` allows (the look-ahead).

    ## Rewards

    When a decision point closes, −(Σ over the slots simulated of the objective: grid cost + curtailment
    penalty + renewable (take-or-pay) cost − idle-GPU value, in $) / ``reward_scale``; the other steps pay 0.
    With ``reward_baseline="fixed"`` the fixed schedule's objective of the same slots is added back (a saving).

    With ``reward_credit="job"`` each agent step is paid instead the objective change *attributable to that
    job's choice*: the env keeps a per-slot load profile in which every job-slot not yet committed holds the
    fixed schedule's choice; a choice replaces the job's fixed choice on its segment, and its reward is
    −(the objective of the profile after − before, over the segment's slots) / ``reward_scale`` (forced choices
    are paid with the next agent step). The credits telescope from the fixed schedule's objective to the
    episode's: with ``reward_baseline="fixed"`` they sum to the saving against fixed; without, the first
    reward also carries −(the fixed objective), so that they sum to −objective / ``reward_scale`` exactly as
    the decision credit does. Each choice thus sees its own idle-GPU credit and energy cost at once.
    At the last step, minus a terminal penalty for missing tokens (``terminal_penalty_factor`` × the most a
    token could save; only reachable with ``safety_mask=False``). Rewards are paid on the truth; the episode's
    :attr:`objective_usd` equals ``simulate(instance, env.schedule()).metrics.objective_usd``.

    ## Starting State

    Slot 0 of a day drawn from ``days`` (or ``reset(options={"day": ...})``), each job in its initial mode
    (fine-tuning jobs paused), no tokens; the first agent step is the first job that has a choice.

    ## Episode End

    ``terminated`` when the last slot is simulated (the agent steps are the real decisions: about 190 in the
    fleet case, 24 in the 2048 case). Never truncated.

    ## Arguments

    - ``case``: an :class:`~aidc_env.instance.Instance` or instances of one case on several days, or a case name
      (``"fleet"``, ``"2048"``), TOML path or :class:`~aidc_env.case.Case` (built once for ``profiles``' days).
    - ``overrides``, ``profiles``, ``days``, ``lookahead``, ``information``, ``forecast_noise``, ``reward_scale``,
      ``safety_mask``, ``pause_when_done``, ``terminal_penalty_factor``, ``render_mode``: as in
      :class:`~aidc_env.env.CheckpointDispatchEnv`.
    - ``reward_baseline``: None (default) or ``"fixed"`` (see Rewards).
    - ``reward_credit``: ``"decision"`` (default) or ``"job"`` (see Rewards).

    Horizons of several days are accepted without daily minimums (``min_daily_share`` = 0).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, case: str | Path | Case | Instance | Sequence[Instance] = "fleet",
                 overrides: Mapping[str, Any] | None = None, profiles: str | Path | ProfileSet | None = None,
                 days: Sequence[str] | None = None, lookahead: int = DEFAULT_LOOKAHEAD, information: str = "perfect",
                 forecast_noise: float = 0.0, reward_scale: float = DEFAULT_REWARD_SCALE_USD,
                 reward_baseline: str | None = None, reward_credit: str = "decision", safety_mask: bool = True,
                 pause_when_done: bool = True,
                 terminal_penalty_factor: float = DEFAULT_TERMINAL_PENALTY_FACTOR, render_mode: str | None = None):
        super().__init__()
        check_env_arguments(lookahead, information, forecast_noise, reward_scale, terminal_penalty_factor)
        require(reward_baseline in REWARD_BASELINES, "reward_baseline", f"must be None or 'fixed', got "
                f"{reward_baseline!r}")
        require(reward_credit in REWARD_CREDITS, "reward_credit", f"must be one of {', '.join(REWARD_CREDITS)}, got "
                f"{reward_credit!r}")
        self.reward_credit = str(reward_credit)
        self.render_mode = render_mode
        self.lookahead = int(lookahead)
        self.information = str(information)
        self.forecast_noise = float(forecast_noise)
        self.reward_scale = float(reward_scale)
        self.reward_baseline = reward_baseline
        self.safety_mask = bool(safety_mask)
        self.pause_when_done = bool(pause_when_done)
        self.terminal_penalty_factor = float(terminal_penalty_factor)
        self._instances = instances_by_day(case, overrides, profiles, fleet=True)
        template = next(iter(self._instances.values()))
        require(template.horizon_days == 1 or template.min_daily_share == 0, "min_daily_share",
                "the fleet env takes horizons without daily minimums (min_daily_share = 0)")
        require(any(job.tranche_tokens > 0 and job.n_modes > 0 for job in template.jobs), "case",
                "no job has a target to make: the fleet env would have no decision")
        if self.information == "dayahead":
            for day, inst in self._instances.items():
                require(inst.forecast is not None, "forecasts", f"information='dayahead' needs instances with "
                        f"day-ahead forecasts; the instance of {day} has none")
        self.days = episode_days(self._instances, days)
        self._template = template
        self._setup_tables(template)
        self._baseline_cache: dict[str, np.ndarray] = {}
        self._fixed_profiles: dict[str, tuple[np.ndarray, np.ndarray, float]] = {}  # per day (reward_credit="job")
        self._day_tables: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # per day: global observation, penalty
        self._inst: Instance | None = None
        self._t = self.n_slots

    # ------------------------------------------------------------------ tables (the same for every day)

    def _setup_tables(self, inst: Instance) -> None:
        jobs = inst.jobs
        self.n_jobs = J = len(jobs)
        self.n_slots = T = inst.slots
        self._dt = inst.slot_hours
        self._n_gpus = N = inst.n_gpus
        self.n_actions = A = max(job.n_modes for job in jobs) + 1
        self._sizes = [job.n_modes + 1 for job in jobs]
        local = [np.arange(n) - 1 for n in self._sizes]
        self._gpus_loc = [job.gpus_by_choice[c].astype(np.int64) for job, c in zip(jobs, local, strict=True)]
        self._kw_loc = [job.it_power_kw_by_choice[c].astype(float) for job, c in zip(jobs, local, strict=True)]
        rate3600 = [job.tokens_per_s_by_choice[c] * SECONDS_PER_HOUR for job, c in zip(jobs, local, strict=True)]
        self._rate3600 = rate3600
        self._sps = [inst.slots_per_segment(job) for job in jobs]
        windows = [inst.job_window(job) for job in jobs]
        self._release = [w[0] for w in windows]
        self._deadline = [w[1] for w in windows]
        self._allowed = [inst.allowed_segments(job).tolist() for job in jobs]
        self._target = [job.tranche_tokens for job in jobs]
        seg_h = [inst.segment_hours(job) for job in jobs]
        self._seg_keep = [r * h for r, h in zip(rate3600, seg_h, strict=True)]
        self._seg_restart = [r * (h - job.restart_hours) for r, h, job in zip(rate3600, seg_h, jobs, strict=True)]
        self._seg_keep_list = [a.tolist() for a in self._seg_keep]
        self._seg_restart_list = [a.tolist() for a in self._seg_restart]
        self._gpus_list = [g.tolist() for g in self._gpus_loc]
        self._kw_list = [p.tolist() for p in self._kw_loc]
        self._plan = FleetPlan(n_gpus=N, slot_hours=self._dt, gpus_loc=self._gpus_loc, rate3600_loc=rate3600,
                               release=self._release, deadline=self._deadline,
                               restart_hours=[job.restart_hours for job in jobs], tranche_tokens=self._target)
        boundaries = sorted({s for sps in self._sps for s in range(0, T, sps)}) + [T]
        self._next_boundary = dict(zip(boundaries[:-1], boundaries[1:], strict=True))
        self._boundary_jobs = {t: [j for j in range(J) if t % self._sps[j] == 0] for t in boundaries[:-1]}
        # Static per-job and per-choice observation parts.
        self._W = np.array(self._target)
        self._max_rate3600 = [float(r.max()) for r in rate3600]
        self._n_modes = [max(n - 1, 1) for n in self._sizes]
        self._sps_arr = np.array(self._sps, dtype=float)
        self._rel_arr = np.array(self._release, dtype=float)
        self._dl_arr = np.array(self._deadline, dtype=float)
        # Per job, its choices' features in float64 (cast to float32 in the observation, as before); the
        # coverage column is filled per observation.
        self._choice_static = np.zeros((J, A, len(CHOICE_FEATURES)))
        self._rate_pad = np.zeros((J, A))
        self._rate_order = [np.argsort(r, kind="stable") for r in rate3600]
        self._seg_restart_by_rate = [r[o].tolist() for r, o in zip(self._seg_restart, self._rate_order, strict=True)]
        # Bit masks (bit c: local choice c) per job: k -> its choices of rate rank >= k; and its choices of at
        # most _fit_values[j][k - 1] GPUs (k = 0: none), for a bisection on the room.
        self._faster: list[list[int]] = []
        self._fit_values: list[list[int]] = []
        self._fit_bits: list[list[int]] = []
        self._mask_arrays: dict[int, np.ndarray] = {}
        self._bounds_cache: dict[tuple[int, int, int], np.ndarray] = {}  # _profile_maxima's, per (t, end, stop)
        self._keep_cache: dict[tuple[int, int], tuple[list[float], list[float]] | None] = {}
        for j in range(J):
            n = self._sizes[j]
            g = self._gpus_loc[j]
            self._choice_static[j, :n, 0] = np.minimum(g / N, 1.0)
            per_gpu = np.divide(rate3600[j], g, out=np.zeros(n), where=g > 0)
            best = float(per_gpu.max())
            self._choice_static[j, :n, 2] = per_gpu / best if best > 0 else 0.0
            self._rate_pad[j, :n] = rate3600[j]
            rank = np.empty(n, dtype=np.int64)
            rank[self._rate_order[j]] = np.arange(n)
            self._faster.append([_bits(rank >= k) for k in range(n + 1)])
            self._fit_values.append(sorted(set(g.tolist())))
            self._fit_bits.append([0] + [_bits(g <= v) for v in self._fit_values[j]])
        self._ren_high = renewable_share_high(inst)
        n_global = global_table(inst, self.lookahead, 0.0, self._ren_high, np.random.default_rng(0),
                                self.information).shape[1]
        job_low = [0.0] * len(FLEET_JOB_FEATURES)
        job_high = [PROGRESS_OBS_HIGH, RATE_RATIO_OBS_HIGH, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
        glob_low = np.full(n_global, PRICE_OBS_LOW)
        glob_high = np.full(n_global, max(PRICE_OBS_HIGH, self._ren_high))
        glob_low[0] = 0.0
        low = np.concatenate([job_low * J, glob_low, [0.0, 0.0], np.zeros(3 * A)]).astype(np.float32)
        high = np.concatenate([job_high * J, glob_high, [1.0, 1.0],
                               np.tile([1.0, RATE_RATIO_OBS_HIGH, 1.0], A)]).astype(np.float32)
        self.observation_space = spaces.Box(low=low, high=high, dtype=np.float32)
        self.action_space = spaces.Discrete(A)
        self._n_job_obs = len(FLEET_JOB_FEATURES) * J
        self._n_global = n_global
        self._obs_buffer = np.zeros(self.observation_space.shape, dtype=np.float32)
        # Per slot, the committed GPUs (inference included) and the reservation profile of every job's plan.
        self._profiles = np.zeros(2 * T, dtype=np.int64)
        self._bind_views()
        self._deciding_index = [j * len(FLEET_JOB_FEATURES) + FLEET_JOB_FEATURES.index("deciding") for j in range(J)]
        self._choice_done = self._choice_static.astype(np.float32)  # a job with nothing missing: full coverage
        for j in range(J):
            self._choice_done[j, 1:self._sizes[j], 1] = RATE_RATIO_OBS_HIGH
        # Features 5-6 (window left, to release) per slot t = 0..T, by the expressions of the observation table.
        self._window_columns = [np.stack([np.minimum(np.maximum((self._dl_arr - t) / T, 0.0), 1.0),
                                          np.minimum(np.maximum((self._rel_arr - t) / T, 0.0), 1.0)], axis=1)
                                for t in range(T + 1)]

    def _bind_views(self) -> None:
        """Views of the observation buffer: the job features (``_feats``, updated in place as jobs decide and
        slots pass) and the features of the deciding job's choices; the two GPU profiles, rows of one array."""
        self._committed, self._reserved = self._profiles[:self.n_slots], self._profiles[self.n_slots:]
        self._feats = self._obs_buffer[:self._n_job_obs].reshape(self.n_jobs, len(FLEET_JOB_FEATURES))
        self._choice_view = self._obs_buffer[self._n_job_obs + self._n_global + 2:].reshape(
            self.n_actions, len(CHOICE_FEATURES))

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling and ``copy.deepcopy`` copy arrays, not the views between them: bind the views again."""
        self.__dict__.update(state)
        self._bind_views()

    @staticmethod
    def _read_only(mask: np.ndarray) -> np.ndarray:
        """``mask``, made read-only (a shared table: :meth:`action_masks` returns copies)."""
        mask.flags.writeable = False
        return mask

    def observation_names(self) -> list[str]:
        """The name of every observation entry, in order."""
        names = [f"{job.name}.{f}" for job in self._template.jobs for f in FLEET_JOB_FEATURES]
        names += [f"global_{k}" for k in range(self._n_global)] + ["inference_share", "free_gpu_share"]
        return names + [f"action_{a}.{f}" for a in range(self.n_actions) for f in CHOICE_FEATURES]

    def instance(self, day: str | None = None) -> Instance:
        """The instance of ``day`` (default: the current episode's)."""
        if day is None:
            require(self._inst is not None, "day", "no episode yet: call reset() or give a day")
            return self._inst  # type: ignore[return-value]
        return self._instances[check_day(self._instances, day)]

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        inst = self.instance(reset_day(self, self.days, options))
        self._inst = inst
        J = self.n_jobs
        self._t = 0
        self._cur = [job.initial_mode + 1 for job in inst.jobs]
        self._end = [0] * J  # end slot of each job's committed segment
        self._tokens = [0.0] * J  # tokens made by the end of the committed segment
        self._schedule = [[PAUSE] * job.segments for job in inst.jobs]
        self._job_gpus = sum(g[c] for g, c in zip(self._gpus_list, self._cur, strict=True))
        self._job_kw = sum(p[c] for p, c in zip(self._kw_list, self._cur, strict=True))
        self._committed[:] = inst.inference_gpus  # committed GPUs and reservations (the jobs' are added below)
        self._reserved[:] = inst.inference_gpus
        self._held = [0] * J
        self._hold_from = [0] * J
        for j in range(J):
            c = self._cur[j]
            need = np.full(self._sizes[j], self._plan.target_safe[j])
            self._add_hold(j, 0, int(self._plan.held_gpus(j, 0, need, True)[c]))
        self._start_safe = bool(self._reserved.max() <= self._n_gpus)
        day_tables = self._day_tables.get(inst.day)
        if day_tables is None or self.forecast_noise > 0:  # noise is drawn per episode: no cache
            day_tables = (global_table(inst, self.lookahead, self.forecast_noise, self._ren_high, self.np_random,
                                       self.information), penalty_usd_per_token(inst, self.terminal_penalty_factor))
            if self.forecast_noise == 0:
                self._day_tables[inst.day] = day_tables
        self._global_obs, self._penalty_per_token = day_tables
        self._renewable_cost = inst.renewable_mw * inst.slot_hours * inst.ppa_usd_per_mwh  # per slot, take-or-pay
        self._baseline = self._baseline_objective(inst) if self.reward_baseline == "fixed" else None
        self.objective_usd = 0.0
        self._fallback = False
        self._mask: np.ndarray | None = None
        self._queue: list[int] = []
        self._k = 0
        self._last_info: dict[str, Any] = {}
        self._end_arr = np.zeros(J)
        self._feats[:] = 0.0
        self._inference_gpus = inst.inference_gpus.tolist()
        for j in range(J):
            self._job_row(j)
        self._time_columns()
        self._pending_reward = 0.0
        self._credit = 0.0
        if self.reward_credit == "job":
            self._fixed_gpus, self._fixed_kw, fixed_objective = self._fixed_profile(inst)
            self._prof_gpus = self._fixed_gpus.sum(axis=0)
            self._prof_kw = self._fixed_kw.sum(axis=0)
            if self.reward_baseline is None:
                self._credit = fixed_objective
        paid = self._advance(decided=False)  # slots before the first choice (none when a job decides at 0)
        self._pending_reward = self._reward(paid)
        return self._observation(), {"day": inst.day, "slot": self._t, "job": self.deciding_job,
                                     "objective_usd": paid}

    def _reward(self, paid: float) -> float:
        """Reward of a simulated objective (with the fixed schedule's objective of the same slots added back), or
        with ``reward_credit="job"`` the credits of the choices since the last reward."""
        if self.reward_credit == "job":
            credit, self._credit = self._credit, 0.0
            return -credit / self.reward_scale
        reward = -paid / self.reward_scale
        if self._baseline is not None:
            reward += self._baseline_paid / self.reward_scale
        return reward

    def step(self, action):
        inst = self._inst
        if inst is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._t >= self.n_slots:
            raise gym.error.ResetNeeded("the episode is over: call reset()")
        mask = self._mask if self._mask is not None else self._compute_mask()
        j = self._queue[self._k]
        a, invalid = masked_action(action, mask, self._cur[j])
        fallback = self._fallback
        slot = self._t
        self._decide(j, a, self._held_after_choice(j, a))
        self._k += 1
        self._mask = None
        closed = self._k >= len(self._queue)  # every job of the slot has decided: its slots are simulated
        paid = self._advance(decided=True) if closed else 0.0
        reward = (self._reward(paid) if closed or self.reward_credit == "job" else 0.0) + self._pending_reward
        self._pending_reward = 0.0
        terminated = self._t >= self.n_slots
        penalty = 0.0
        if terminated:
            penalty = float(np.sum(self.shortfall_tokens() * self._penalty_per_token))
            reward -= penalty / self.reward_scale
        info = {"day": inst.day, "slot": slot, "job": j, "choice": a - 1, "objective_usd": paid,
                "invalid_action": invalid, "safety_fallback": fallback, "terminal_penalty_usd": penalty,
                "job_gpus": self._job_gpus}
        self._last_info = info
        return self._observation(), reward, terminated, False, info

    def render(self):
        if self.render_mode != "ansi" or self._inst is None:
            return None
        modes = " ".join(f"{job.name}={c - 1}" for job, c in zip(self._inst.jobs, self._cur, strict=True))
        return f"{self._inst.day} slot {self._t}/{self.n_slots} job {self.deciding_job}: {modes}"

    # ------------------------------------------------------------------ public state

    def schedule(self) -> list[list[int]]:
        """The schedule taken so far: per job, per segment, a mode index or ``PAUSE``."""
        return [list(row) for row in self._schedule]

    def tokens(self) -> np.ndarray:
        """Tokens per job made by the end of its committed segment."""
        return np.array(self._tokens)

    def shortfall_tokens(self) -> np.ndarray:
        """Missing tokens per job (0 where the target is met within the simulator's tolerance)."""
        tokens, target = np.array(self._tokens), self._W
        return np.where(tokens >= target * (1 - TRANCHE_TOLERANCE), 0.0, np.maximum(target - tokens, 0.0))

    def reserved_gpus(self) -> np.ndarray:
        """GPUs per slot of the committed choices, the held modes of every job's plan and inference."""
        return self._reserved.copy()

    # ------------------------------------------------------------------ mechanics

    def _drop_hold(self, j: int) -> None:
        """Remove job j's held reservation from the profile."""
        if self._held[j]:
            self._reserved[self._hold_from[j]:self._deadline[j]] -= self._held[j]
            self._held[j] = 0

    def _add_hold(self, j: int, end: int, held: int) -> None:
        """Reserve ``held`` GPUs for job j from max(end, release) to its deadline."""
        start = self._plan.hold_start(j, end)
        self._hold_from[j] = start
        if held and start < self._deadline[j]:
            self._reserved[start:self._deadline[j]] += held
            self._held[j] = held

    def _reserve_segment(self, j: int, t: int, end: int, g: int, held: int) -> None:
        """Replace job j's hold by its segment [t, end) of ``g`` GPUs and its new hold of ``held`` GPUs.

        When the old hold covers the segment and the new one starts where the segment ends (the usual case: a
        job inside its window), the profile changes by g − old on the segment and held − old after it: at most
        two slice updates instead of three (integers: the same profile)."""
        old, stop = self._held[j], self._deadline[j]
        start = self._plan.hold_start(j, end)
        if old and self._hold_from[j] == t and start == end <= stop:
            reserved = self._reserved
            if g != old:
                reserved[t:end] += g - old
            if held != old and end < stop:
                reserved[end:stop] += held - old
            self._hold_from[j] = start
            self._held[j] = held if held and start < stop else 0
            return
        self._drop_hold(j)  # it covered [t, deadline): the segment now holds g, then the new hold
        if g:
            self._reserved[t:end] += g
        self._add_hold(j, end, held)

    def _decide(self, j: int, c: int, held: int) -> None:
        """Commit local choice ``c`` of job j for its segment from the current slot, and its new hold."""
        t = self._t
        prev = self._cur[j]
        restarted = c != 0 and c != prev
        self._tokens[j] += (self._seg_restart_list if restarted else self._seg_keep_list)[j][c]
        sps = self._sps[j]
        self._schedule[j][t // sps] = c - 1
        g = self._gpus_list[j][c]
        self._job_gpus += g - self._gpus_list[j][prev]
        self._job_kw += self._kw_list[j][c] - self._kw_list[j][prev]
        self._cur[j] = c
        end = t + sps
        self._end[j] = end
        self._end_arr[j] = end
        self._job_row(j)
        self._feats[j, 4] = 1.0
        if g:
            self._committed[t:end] += g
        self._reserve_segment(j, t, end, g, held)
        if self.reward_credit == "job":
            sl = slice(t, end)
            before = float(self._slot_objectives(self._prof_gpus[sl], self._prof_kw[sl], sl).sum())
            self._prof_gpus[sl] += g - self._fixed_gpus[j, sl]
            self._prof_kw[sl] += self._kw_list[j][c] - self._fixed_kw[j, sl]
            self._credit += float(self._slot_objectives(self._prof_gpus[sl], self._prof_kw[sl], sl).sum()) - before

    def _forced(self, j: int) -> bool:
        """Job j has one choice at the current slot (a boundary): outside its window, or done."""
        if not self._allowed[j][self._t // self._sps[j]]:
            return True
        return self.pause_when_done and self._tokens[j] >= self._target[j] * (1 - TRANCHE_TOLERANCE)

    def _advance(self, decided: bool) -> float:
        """From slot t (``decided``: every job of slot t has chosen), simulate slot blocks until a decision point
        asks the agent (forced choices applied on the way) or the episode ends; returns the objective paid."""
        paid = base = 0.0
        T = self.n_slots
        while True:
            t = self._t
            if decided:
                nxt = self._next_boundary[t]
                paid += float(_sum(self._simulate_slots(t, nxt)))
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
                    self._decide(j, 0, self._plan.held_gpus_paused(j, t + self._sps[j], need))
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

    def _simulate_slots(self, t0: int, t1: int) -> np.ndarray:
        """The objective of slots [t0, t1) with every job's committed choice: the simulator's functions."""
        return self._slot_objectives(self._job_gpus, self._job_kw, slice(t0, t1))

    def _slot_objectives(self, job_gpus, job_kw, sl: slice) -> np.ndarray:
        """Per slot of ``sl``, the objective with the jobs' GPUs and IT kW given (scalars or per-slot arrays)."""
        inst = self._inst
        gpus = job_gpus + inst.inference_gpus[sl]
        load = facility_load_mw(inst, gpus, job_kw + inst.inference_it_kw[sl])
        renewable = inst.renewable_mw[sl]
        _, grid, curtailment = renewable_first(load, renewable)
        return (slot_decision_cost_usd(inst, grid, curtailment, sl) + self._renewable_cost[sl]
                - slot_idle_value_usd(inst, gpus))

    def _baseline_objective(self, inst: Instance) -> np.ndarray:
        """Per-slot objective of the fixed schedule on ``inst`` (the simulator's replay), cached per day."""
        cached = self._baseline_cache.get(inst.day)
        if cached is None:
            from aidc_env.baselines import fixed_schedule

            flows = simulate(inst, fixed_schedule(inst)).flows
            cached = (flows.decision_cost_usd + inst.renewable_mw * inst.slot_hours * inst.ppa_usd_per_mwh
                      - flows.idle_value_usd)
            self._baseline_cache[inst.day] = cached
        return cached

    def _fixed_profile(self, inst: Instance) -> tuple[np.ndarray, np.ndarray, float]:
        """Per job and slot, the GPUs and IT kW of the fixed schedule on ``inst``, and its objective (cached)."""
        cached = self._fixed_profiles.get(inst.day)
        if cached is None:
            from aidc_env.baselines import fixed_schedule

            schedule = fixed_schedule(inst)
            gpus = np.zeros((self.n_jobs, self.n_slots), dtype=np.int64)
            kw = np.zeros((self.n_jobs, self.n_slots))
            for j, row in enumerate(schedule):
                local = np.repeat(np.asarray(row, dtype=np.int64) + 1, self._sps[j])[:self.n_slots]
                gpus[j] = self._gpus_loc[j][local]
                kw[j] = self._kw_loc[j][local]
            cached = (gpus, kw, simulate(inst, schedule).metrics.objective_usd)
            self._fixed_profiles[inst.day] = cached
        return cached

    def _compute_mask(self) -> np.ndarray:
        """The exact mask of the job deciding now (capacity, then the reservation rule).

        Per candidate c the rule reads: its GPUs fit ``room_now`` and its held mode's GPUs fit ``room_after``.
        The second part is tested without computing the held modes: they fit iff ``need[c]`` is at most the
        most tokens a mode fitting ``room_after`` makes from a restart
        (:meth:`~aidc_env.fleet_plan.FleetPlan.best_restart_tokens`), or c itself is kept on, makes ``need[c]``
        and fits. The same comparisons of the same floats as :meth:`~aidc_env.fleet_plan.FleetPlan.held_gpus`;
        :meth:`step` computes the held mode of the choice taken only (:meth:`_held_after_choice`)."""
        t = self._t
        j = self._queue[self._k]
        N = self._n_gpus
        end = t + self._sps[j]
        stop = self._deadline[j]
        committed, now, after, later = self._profile_maxima(t, end, stop)
        room = N - committed
        self._fallback = False
        if self.safety_mask:
            own = self._held[j]  # the job's current hold covers [t, deadline)
            room_now = min(room, N + own - now)
            room_after = min(N, N + own - after) if after is not None else N
            if later is None or later <= N:  # the others, after its deadline
                safe = self._safe_choices(j, end, room_now, room_after)
                if safe:
                    mask = self._mask = self._mask_array(safe)
                    return mask
            self._fallback = True
        mask = self._mask = self._mask_array(self._fits(j, room))
        return mask

    def _safe_choices(self, j: int, end: int, room_now: int, room_after: int) -> int:
        """Bit mask (bit c: local choice c) of job j's choices whose GPUs fit ``room_now`` and whose held mode
        fits ``room_after``.

        A choice c other than the current one (``prev``) leaves ``need[c] = base − restart tokens of c``
        missing; its held mode fits iff ``need[c] <= best`` (the most a fitting mode makes from a restart), or
        c is kept on (``keep[c] >= need[c]``) and fits. Both tests are monotone in c's tokens per hour (its
        segment and kept tokens grow with its rate: the instance has restart_hours < segment hours; float
        rounding is monotone), so each holds on a suffix of the choices sorted by rate, found by bisection and
        read from a table (``_faster``). ``prev`` (no restart) is tested on its own."""
        plan = self._plan
        base = plan.target_safe[j] - self._tokens[j]
        best = plan.best_restart_tokens(j, end, room_after)
        restart = self._seg_restart_by_rate[j]
        k_restart = _first_restart_fit(restart, base, best)
        held_fits = self._faster[j][k_restart]
        keep = self._keep_by_rate(j, end)
        if keep is not None:
            k_keep = _first_keep_fit(keep[0], keep[1], restart, base)
            if k_keep < k_restart:
                held_fits = held_fits | (self._faster[j][k_keep] & self._fits(j, room_after))
        safe = held_fits & self._fits(j, room_now)
        prev = self._cur[j]
        need = base - self._seg_keep_list[j][prev]
        gpus = self._gpus_list[j][prev]
        keeps = keep is not None and plan.keep_list(j, end)[prev] >= need and gpus <= room_after
        if gpus <= room_now and (need <= best or keeps):
            return safe | 1 << prev
        return safe & ~(1 << prev)

    def _fits(self, j: int, room: int) -> int:
        """Bit mask of job j's choices of at most ``room`` GPUs."""
        return self._fit_bits[j][bisect.bisect_right(self._fit_values[j], room)]

    def _mask_array(self, bits: int) -> np.ndarray:
        """The read-only bool array (size A) of a bit mask, cached (masks repeat: a dict lookup is cheaper than
        building the array; :meth:`action_masks` returns copies). The cache is emptied at ``MASK_CACHE_SIZE``."""
        mask = self._mask_arrays.get(bits)
        if mask is None:
            if len(self._mask_arrays) >= MASK_CACHE_SIZE:
                self._mask_arrays.clear()
            mask = self._mask_arrays[bits] = self._read_only(
                np.array([bits >> c & 1 for c in range(self.n_actions)], dtype=bool))
        return mask

    def _keep_by_rate(self, j: int, end: int) -> tuple[list[float], list[float]] | None:
        """Job j's kept tokens (:meth:`~aidc_env.fleet_plan.FleetPlan.keep_tokens`) in the order of the choices'
        rates, and each plus the choice's restart tokens (a bisection's start in :meth:`_safe_choices`); None
        when nothing can be kept (cached)."""
        key = (j, end)
        if key not in self._keep_cache:
            keep = self._plan.keep_tokens(j, end)
            if keep is None:
                self._keep_cache[key] = None
            else:
                by_rate = keep[self._rate_order[j]].tolist()
                restart = self._seg_restart_by_rate[j]
                self._keep_cache[key] = (by_rate, [k + r for k, r in zip(by_rate, restart, strict=True)])
        return self._keep_cache[key]

    def _profile_maxima(self, t: int, end: int, stop: int) -> tuple[int, int, int | None, int | None]:
        """Most committed GPUs in a slot of [t, end); most reserved GPUs in a slot of [t, end), of [end, stop)
        (None if empty) and of [stop, T) (None if empty): the deciding job's segment, its hold until its
        deadline ``stop``, the others after it. One ufunc call over both profiles, laid end to end (a hot path:
        the range [end, T + t) spans both and is not used)."""
        T = self.n_slots
        if end > stop:  # not reached by the env's segments (a job's deadline is on its boundaries)
            later = int(_max(self._reserved[stop:])) if stop < T else None
            return int(_max(self._committed[t:end])), int(_max(self._reserved[t:end])), None, later
        key = (t, end, stop)
        bounds = self._bounds_cache.get(key)
        if bounds is None:
            bounds = [t, end, T + t]  # end == T + t (t = 0, end = T): reduceat gives one element there, not used
            if end < T:
                bounds.append(T + end)
                if end < stop < T:
                    bounds.append(T + stop)
            bounds = self._bounds_cache[key] = np.array(bounds, dtype=np.intp)
        maxima = np.maximum.reduceat(self._profiles, bounds).tolist()
        if end < stop:
            return maxima[0], maxima[2], maxima[3], maxima[4] if stop < T else None
        return maxima[0], maxima[2], None, maxima[3] if stop < T else None

    def _held_after_choice(self, j: int, c: int) -> int:
        """GPUs job j holds after its segment from the current slot with local choice c (the reservation rule's
        held mode; :meth:`~aidc_env.fleet_plan.FleetPlan.held_gpus` of this one candidate)."""
        base = self._plan.target_safe[j] - self._tokens[j]
        made = (self._seg_keep_list if c == self._cur[j] else self._seg_restart_list)[j][c]
        return self._plan.held_gpus_of(j, self._t + self._sps[j], base - made, c)

    # ------------------------------------------------------------------ observation

    def _job_row(self, j: int) -> None:
        """Observation features 0-3 of job j (they change only when it decides)."""
        row = self._feats[j]
        W, X = self._target[j], self._tokens[j]
        row[0] = min(X / W, PROGRESS_OBS_HIGH) if W > 0 else 1.0
        missing = W - X
        seconds = (self._deadline[j] - max(self._end[j], self._release[j])) * self._dt * SECONDS_PER_HOUR
        rate = self._max_rate3600[j] / SECONDS_PER_HOUR
        if missing <= W * TRANCHE_TOLERANCE:
            row[1] = 0.0
        elif seconds > 0 and rate > 0:
            row[1] = min(missing / (seconds * rate), RATE_RATIO_OBS_HIGH)
        else:
            row[1] = RATE_RATIO_OBS_HIGH
        c = self._cur[j]
        row[2] = min(self._gpus_list[j][c] / self._n_gpus, 1.0)
        row[3] = c / self._n_modes[j]

    def _time_columns(self) -> None:
        """The observation's parts that change with the slot only: features 4-6 of every job (5-6 from a
        per-slot table), the global values and the inference share."""
        t = self._t
        feats = self._feats
        feats[:, 4] = np.minimum(np.maximum((self._end_arr - t) / self._sps_arr, 0.0), 1.0)
        feats[:, 5:7] = self._window_columns[t]
        obs = self._obs_buffer
        ng = self._n_job_obs + self._n_global
        obs[self._n_job_obs:ng] = self._global_obs[t]
        if t < self.n_slots:
            obs[ng] = min(self._inference_gpus[t] / self._n_gpus, 1.0)

    def _observation(self) -> np.ndarray:
        """The observation (a copy of the buffer whose job part ``_feats`` is kept up to date in place)."""
        t = self._t
        obs = self._obs_buffer
        ng = self._n_job_obs + self._n_global  # the global values and the inference share: _time_columns
        choice = self._choice_view
        j = self.deciding_job
        if j is None:
            obs[ng] = 0.0
            obs[ng + 1] = 1.0
            choice[:] = 0.0
            return obs.copy()
        N = self._n_gpus
        obs[ng + 1] = max(N - int(self._committed[t]), 0) / N
        W = self._target[j]
        missing = W - self._tokens[j]
        if missing <= W * TRANCHE_TOLERANCE:
            choice[:] = self._choice_done[j]
        else:
            features = self._choice_static[j]
            hours = (self._deadline[j] - t) * self._dt
            coverage = features[:, 1]  # in place in float64, then one cast to the float32 buffer (a hot path)
            np.multiply(self._rate_pad[j], hours / missing, out=coverage)
            np.minimum(coverage, RATE_RATIO_OBS_HIGH, out=coverage)
            choice[:] = features
        deciding = self._deciding_index[j]
        obs[deciding] = 1.0
        out = obs.copy()
        obs[deciding] = 0.0
        return out


__all__ = ["CHOICE_FEATURES", "FLEET_ENV_ID", "FLEET_JOB_FEATURES", "FleetDispatchEnv", "REWARD_BASELINES",
           "REWARD_CREDITS"]
