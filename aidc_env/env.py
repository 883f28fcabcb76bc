"""Gymnasium environment: dispatch checkpoint-aware 3D-parallel pre-training jobs slot by slot (DESIGN §4).

``gymnasium.make("aidc_env/CheckpointDispatch-v0", case="2048")`` (registered on ``import aidc_env``; also
``gymnasium.make("aidc_env:aidc_env/CheckpointDispatch-v0")`` from a fresh process). The env never computes a
cost of its own: every slot's load, renewable use, grid import, curtailment and cost come from the
simulator's functions (:func:`~aidc_env.simulator.facility_load_mw`, :func:`~aidc_env.simulator.renewable_first`,
:func:`~aidc_env.simulator.slot_decision_cost_usd`) and every token from
:func:`~aidc_env.simulator.slot_productive_hours`, so that ``simulate(instance, env.schedule())`` gives the
episode's decision cost exactly. See ``docs/env.md`` for a worked example.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from aidc_env.case import Case, build_instances
from aidc_env.errors import InputError, is_finite, require
from aidc_env.information import INFORMATION
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance, require_one_site
from aidc_env.joint import joint_choices
from aidc_env.observation import (
    DEFAULT_LOOKAHEAD,
    JOB_FEATURES,
    PRICE_OBS_HIGH,
    PRICE_OBS_LOW,
    PRICE_SCALE_USD_PER_MWH,
    PROGRESS_OBS_HIGH,
    RATE_RATIO_OBS_HIGH,
    global_table,
    observation_names,
    observation_space,
    renewable_share_high,
)
from aidc_env.profiles import ProfileSet
from aidc_env.safety import SAFETY_TOLERANCE, SafetyTest
from aidc_env.simulator import TRANCHE_TOLERANCE, renewable_first, slot_decision_cost_usd, slot_productive_hours

ENV_ID = "aidc_env/CheckpointDispatch-v0"
"""Gymnasium id of :class:`CheckpointDispatchEnv`."""

DEFAULT_REWARD_SCALE_USD = 100.0
"""Reward = −(slot decision cost in $) / 100: one reward unit is $100."""
DEFAULT_TERMINAL_PENALTY_FACTOR = 2.0
"""Multiplier on the most a missing token could ever save (see :meth:`CheckpointDispatchEnv.penalty_usd_per_token`)."""
PENALTY_PRICE_FLOOR_USD_PER_MWH = 100.0
"""The terminal penalty prices energy at max(day's highest price, $100/MWh), so it never vanishes."""


def register_envs() -> None:
    """Register ``aidc_env/CheckpointDispatch-v0`` with Gymnasium (idempotent; done on ``import aidc_env``)."""
    from aidc_env import register_envs as register

    register()


class CheckpointDispatchEnv(gym.Env):
    """
    ## Description

    An AI data center with N GPUs runs pre-training jobs, each of which must finish a daily token
    tranche W_j. It is fed first by its own renewable plant (no export) and then by the grid at the
    day's prices. Each job may pause, resume or change its 3D-parallel mode (tensor × pipeline × data
    parallel degrees, hence GPUs, tokens/s and IT power) only at its checkpoint boundaries (K_j segments
    per day). A restart (resume or switch) spends the first τ_j hours of the segment loading the
    checkpoint at full power and zero tokens. The agent picks, every slot, a joint choice for all jobs;
    the env scores it with the simulator's functions (DESIGN §2). One step is one slot, one episode one
    instance: a day, or a horizon of D consecutive days (DESIGN §9; job state carries across midnight, the
    tranche is over the horizon, with an optional minimum share per day). With ``information="dayahead"``
    the agent sees the issued day-ahead forecasts and the realised past only; it is paid on the truth.

    ## Action Space

    ``Discrete(A)`` with A = Π_j (M_j + 1) joint choices (M_j Pareto modes; a few hundred in the 2048
    case). Job j's local choice is 0 = pause or i = its Pareto mode i − 1; the joint index is the
    mixed-radix number of the local choices with job 0 the most significant digit
    (``numpy.ravel_multi_index`` order):
    a = Σ_j local_j · Π_{k>j} (M_k + 1). :meth:`encode` and :meth:`decode` convert.

    :meth:`action_masks` returns the exact bool mask of valid joint actions:

    - a job off its checkpoint boundary may only keep its choice (before t = 0 every job runs its
      ``initial_mode``; keeping it costs no restart);
    - the GPUs of the joint choice fit the pool (Σ_j n ≤ N);
    - with ``pause_when_done`` (default), a job whose tranche is met may only pause at its boundaries;
    - over a horizon with a positive ``min_daily_share``, a job counts as finished only on the last day, once
      that day's minimum is met too;
    - with ``safety_mask`` (default), a joint choice is removed unless, after taking it for the current
      segments, some capacity-feasible joint mode held for all the remaining segments (paying the restart
      it costs, and fitting the pool also while the jobs reach their boundaries at different slots) still
      finishes every job's tranche (and, with daily minimums, the rest of today's minimum and every later
      day's; see :mod:`aidc_env.safety`). If no choice passes, the plain mask above is used (never all-False).
      Since the plan that made the current choice safe stays available, every policy that follows the mask
      completes every tranche whenever the day starts safe (e.g. when fixed continuous training completes).

    An action outside the mask never raises: the env keeps every job's current choice (or, if keeping is
    not in the mask, e.g. a finished job at its boundary, takes the lowest valid joint action) and sets
    ``info["invalid_action"] = True``.

    ## Observation Space

    ``Box(float32)`` of size 7·J + 4 + 2·L (J jobs, L = ``lookahead``; 50 for the 2048 case with L = 16),
    + 1 over a horizon of D > 1 days, + 3 with ``information="dayahead"`` (see below).
    Per job j, in job order (7 values each):

    | # | feature | meaning | range |
    |---|---|---|---|
    | 0 | progress | tokens so far / W_j (1 if W_j = 0) | [0, 4] (clipped) |
    | 1 | required_rate_ratio | (W_j − X_j)⁺ / seconds left / fastest mode's tokens/s | [0, 10] (clipped) |
    | 2 | gpu_share | GPUs of the current choice / N | [0, 1] |
    | 3 | power_share | IT power of the current choice / (N · p_rated) | [0, max] |
    | 4 | mode_index | local choice / M_j (0 = pause, 1 = the last Pareto mode) | [0, 1] |
    | 5 | at_checkpoint | 1 if the slot is one of the job's boundaries | {0, 1} |
    | 6 | slots_to_boundary | slots left in the current segment / slots per segment | (0, 1] |

    Then the global values: time of day (t mod slots per day) / slots per day; only when D > 1, the
    horizon progress t / T; price now λ_t / 100 (clipped to [−2, 10]); renewable now R_t / P_rated (a share
    of the rated facility power, in [0, ρ]); the next L slots' prices (same scaling); the next L slots'
    renewable shares; only with ``dayahead``, the last realised price λ_{t−1} / 100, renewable share
    R_{t−1} / P_rated and a flag that they exist (0, 0, 0 at t = 0: the instance holds no earlier slot);
    the free GPU share (N − Σ_j n) / N. Look-ahead values past the end of the instance are 0. The "current
    choice" is the one held in the previous slot (the initial mode at t = 0).

    The price and renewable values "now" and ahead are those of :func:`aidc_env.information.outlook` at
    slot t: the truth with ``information="perfect"``; with ``"dayahead"`` the point forecasts issued by then
    (day d's at 10:00 on day d − 1, its price at the forecast's ``price_issue_hour``, 10:00 unless later; the price
    of later days is the last issue's outlook, a blend of its forecast and the recent mean price at each clock
    hour, and their renewables repeat the last issued day), since slot t's own truth is not known at its start.
    Nothing observed at slot t depends on the truth of slots ≥ t.

    With ``forecast_noise = σ > 0`` (``perfect`` only: synthetic noise on the truth) the look-ahead (not the
    current values) is the truth plus Gaussian noise of standard deviation σ·√k at lead k (in the scaled
    units above), drawn once per episode at reset from ``self.np_random`` and clipped to the bounds.

    ## Rewards

    Every step: −(the slot's decision cost: grid cost λ_t g_t Δ + curtailment penalty c_cur c_t Δ, in $)
    / ``reward_scale`` (default $100 per unit). The take-or-pay renewable cost does not depend on decisions
    and is left out. At the last step, minus a terminal penalty / ``reward_scale``: for each job,
    missing tokens × :meth:`penalty_usd_per_token` (0 when every tranche is met; only reachable with
    ``safety_mask=False``); over a horizon with daily minimums, the tokens each day missed from its minimum
    are penalised too, at the same price. Rewards are always paid on the truth, whatever ``information``.

    ## Info

    Every step: ``day``, ``slot``, ``slot_cost_usd``, ``load_mw``, ``grid_mw``, ``renewable_used_mw``,
    ``curtailment_mw``, ``gpus_used``, ``job_modes`` (PAUSE = −1 or mode index per job), ``job_progress``
    (X_j / W_j), ``invalid_action``, ``terminal_penalty_usd`` and ``safety_fallback`` (no wall-clock values).
    :meth:`schedule` returns the schedule taken (per job, per segment), which ``simulate`` scores to the same
    decision cost as −Σ reward × ``reward_scale`` (less the terminal penalty).

    ## Starting State

    Slot 0 of a day drawn uniformly (with ``self.np_random``) from ``days``, or the day given by
    ``reset(options={"day": "YYYY-MM-DD"})``; no tokens yet; each job's current choice is its initial mode.

    ## Episode End

    ``terminated`` after the last slot of the instance (T steps: 96 for a day, D × 96 for a horizon). Never
    truncated.

    ## Arguments

    - ``case``: an :class:`~aidc_env.instance.Instance` or a sequence of instances of the same case on different
      days (what the env consumes; build them once with :func:`~aidc_env.case.build_instances`). As a
      convenience, a bundled case name (``"2048"``), a TOML path or a :class:`~aidc_env.case.Case`: the env
      then calls :func:`~aidc_env.case.build_instances` itself, once, for every day of ``profiles``.
    - ``overrides``: with a case, a mapping of case overrides (``gpus``, ``segments``, ``renewable_ratio`` or
      any Case field). Not used with instances.
    - ``profiles``: with a case, None (the bundled days), a CSV path or a loaded
      :class:`~aidc_env.profiles.ProfileSet`. Not used with instances.
    - ``days``: dates to draw episodes from (default: every day of the instances).
    - ``lookahead``: look-ahead window in slots (default 16).
    - ``information``: ``"perfect"`` (default: the truth) or ``"dayahead"`` (forecasts and the realised past;
      every instance must carry a :class:`~aidc_env.information.Forecast`, else ``InputError`` on
      ``forecasts``).
    - ``forecast_noise``: σ of synthetic look-ahead noise on the truth (default 0; ``perfect`` only).
    - ``reward_scale``: $ per reward unit (default 100).
    - ``safety_mask``: remove choices after which the tranches can no longer be met (default True).
    - ``pause_when_done``: a job whose tranche is met may only pause at its boundaries (default True).
    - ``terminal_penalty_factor``: multiplier of the terminal penalty (default 2).
    - ``render_mode``: None or ``"ansi"`` (a one-line text of the slot); other modes render nothing
      (SB3's ``make_vec_env`` asks for ``"rgb_array"`` by default, which ``gymnasium.make`` only warns about).

    The tables that do not depend on the day (joint actions, safety test, observation bounds) are built once
    per env from the first instance; ``reset`` only builds the day's observation table.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        case: str | Path | Case | Instance | Sequence[Instance] = "2048",
        overrides: Mapping[str, Any] | None = None,
        profiles: str | Path | ProfileSet | None = None,
        days: Sequence[str] | None = None,
        lookahead: int = DEFAULT_LOOKAHEAD,
        information: str = "perfect",
        forecast_noise: float = 0.0,
        reward_scale: float = DEFAULT_REWARD_SCALE_USD,
        safety_mask: bool = True,
        pause_when_done: bool = True,
        terminal_penalty_factor: float = DEFAULT_TERMINAL_PENALTY_FACTOR,
        render_mode: str | None = None,
    ):
        super().__init__()
        check_env_arguments(lookahead, information, forecast_noise, reward_scale, terminal_penalty_factor)
        self.render_mode = render_mode
        self.lookahead = int(lookahead)
        self.information = str(information)
        self.forecast_noise = float(forecast_noise)
        self.reward_scale = float(reward_scale)
        self.safety_mask = bool(safety_mask)
        self.pause_when_done = bool(pause_when_done)
        self.terminal_penalty_factor = float(terminal_penalty_factor)

        self._instances = instances_by_day(case, overrides, profiles)
        if self.information == "dayahead":
            for day, inst in self._instances.items():
                require(inst.forecast is not None, "forecasts", f"information='dayahead' needs instances with "
                        f"day-ahead forecasts; the instance of {day} has none (give --forecasts)")
        template = next(iter(self._instances.values()))
        self.days = episode_days(self._instances, days)
        self._template = template
        self._setup_tables(template)

        # Episode state (set by reset).
        self._inst: Instance | None = None
        self._t = 0
        # Per job (plain Python lists: the step is scalar work): current local choice, whether the current
        # segment restarted, tokens so far; and the joint action that keeps every choice.
        self._cur: list[int] = [0] * self.n_jobs
        self._restarted: list[bool] = [False] * self.n_jobs
        self._tokens: list[float] = [0.0] * self.n_jobs
        self._today: list[float] = [0.0] * self.n_jobs  # tokens since the start of the current day
        self._daily_shortfall = np.zeros(self.n_jobs)  # tokens missing from the days' minimums so far
        self._keep = 0
        self._schedule: list[np.ndarray] = []
        self._mask: np.ndarray | None = None
        self._global_obs = np.zeros((0, 0), dtype=np.float32)
        self._renewable = np.zeros(0)
        self._penalty_per_token = np.zeros(self.n_jobs)
        self._last_info: dict[str, Any] = {}
        self._fallback = False

    # ------------------------------------------------------------------ construction helpers

    def instance(self, day: str | None = None) -> Instance:
        """The instance of ``day`` (default: the current episode's)."""
        if day is None:
            require(self._inst is not None, "day", "no episode yet: call reset() or give a day")
            return self._inst  # type: ignore[return-value]
        return self._instances[check_day(self._instances, day)]

    def _setup_tables(self, inst: Instance) -> None:
        """Joint-action tables and per-job arrays (the same for every day)."""
        jobs = inst.jobs
        self.n_jobs = J = len(jobs)
        self.n_slots = inst.slots
        self.horizon_days = inst.horizon_days
        self.slots_per_day = inst.slots_per_day
        self._slot_hours = inst.slot_hours
        self._n_gpus = inst.n_gpus
        joint = joint_choices(inst)
        sizes = joint.sizes
        self._sizes = sizes
        self.n_actions = A = joint.n_choices
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
        self._tranche = np.array([job.tranche_tokens for job in jobs], dtype=float)
        self._tranche_list = self._tranche.tolist()
        self._daily_min_list = [inst.daily_min_tokens(job) if inst.horizon_days > 1 else 0.0 for job in jobs]
        gpus_loc = [np.asarray(job.gpus_by_choice[np.arange(n) - 1], dtype=np.int64) for job, n in
                    zip(jobs, sizes, strict=True)]
        power_loc = [np.asarray(job.it_power_kw_by_choice[np.arange(n) - 1], dtype=float) for job, n in
                     zip(jobs, sizes, strict=True)]
        rate_loc = [np.asarray(job.tokens_per_s_by_choice[np.arange(n) - 1], dtype=float) for job, n in
                    zip(jobs, sizes, strict=True)]
        rate3600_loc = [r * SECONDS_PER_HOUR for r in rate_loc]
        self._rate3600_list = [r.tolist() for r in rate3600_loc]
        self._gpus_loc_list = [g.tolist() for g in gpus_loc]
        self._power_share_list = [(p / self._power_ref_kw).tolist() for p in power_loc]
        self._max_rate = [float(r.max()) if r.size else 0.0 for r in rate_loc]
        # Productive hours of each slot of a restarted segment (the simulator's function), and suffix sums.
        self._prod_restart: list[list[float]] = []
        suffix_restart: list[np.ndarray] = []
        for job, sps in zip(jobs, self._sps, strict=True):
            per_slot = [slot_productive_hours(inst, job, o, True) for o in range(sps)]
            self._prod_restart.append(per_slot)
            suffix_restart.append(np.cumsum(per_slot[::-1])[::-1].copy())
        self._safety = SafetyTest(
            n_gpus=inst.n_gpus, n_slots=inst.slots, slot_hours=inst.slot_hours, slots_per_segment=self._sps,
            restart_hours=[job.restart_hours for job in jobs], tranche_tokens=self._tranche, gpus_loc=gpus_loc,
            rate3600_loc=rate3600_loc, suffix_restart=suffix_restart, slots_per_day=inst.slots_per_day,
            daily_min_tokens=self._daily_min_list)
        self._daily = self._safety.daily

        # Observation layout and bounds.
        power_high = max(1.0, max(float(p.max()) / self._power_ref_kw for p in power_loc))
        self._ren_high = renewable_share_high(inst)
        self._layout = {"horizon": inst.horizon_days > 1, "last_realised": self.information == "dayahead"}
        self.observation_space = observation_space(J, self.lookahead, power_high, self._ren_high, **self._layout)
        self.action_space = spaces.Discrete(A)
        self._n_job_obs = len(JOB_FEATURES) * J
        self._obs_size = self.observation_space.shape[0]

    def observation_names(self) -> list[str]:
        """The name of every observation entry, in order."""
        return observation_names([job.name for job in self._template.jobs], self.lookahead, **self._layout)

    # ------------------------------------------------------------------ action encoding

    def encode(self, choices: Sequence[int]) -> int:
        """Joint action of per-job choices (``PAUSE`` or a mode index)."""
        require(len(choices) == self.n_jobs, "choices", f"expected {self.n_jobs} values")
        action = 0
        for j, c in enumerate(choices):
            c = int(c)
            require(PAUSE <= c < self._sizes[j] - 1, f"choices[{j}]",
                    f"must be -1 or a mode index < {self._sizes[j] - 1}")
            action += (c + 1) * self._strides[j]
        return action

    def decode(self, action: int) -> list[int]:
        """Per-job choices (``PAUSE`` or a mode index) of a joint action."""
        return [int(c) for c in self._choice_table[int(action)]]

    def actions_for_schedule(self, schedule: Sequence[Sequence[int]]) -> list[int]:
        """The joint action of every slot that replays a schedule (per job, per segment: mode or PAUSE)."""
        require(len(schedule) == self.n_jobs, "schedule", f"expected {self.n_jobs} jobs")
        per_slot = [np.repeat(np.asarray(s, dtype=np.int64), sps) for s, sps in zip(schedule, self._sps, strict=True)]
        for j, arr in enumerate(per_slot):
            require(arr.size == self.n_slots, f"schedule[{j}]", f"expected {self._template.jobs[j].segments} segments")
        return [self.encode([arr[t] for arr in per_slot]) for t in range(self.n_slots)]

    def schedule(self) -> list[list[int]]:
        """The schedule taken so far: per job, per segment, a mode index or ``PAUSE`` (segments not yet
        reached are ``PAUSE``). After a full episode, ``simulate(env.instance(), env.schedule())`` scores it."""
        return [arr.tolist() for arr in self._schedule]

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        inst = self.instance(reset_day(self, self.days, options))
        self._inst = inst
        self._t = 0
        self._cur = [job.initial_mode + 1 for job in inst.jobs]
        self._restarted = [False] * self.n_jobs
        self._tokens = [0.0] * self.n_jobs
        self._today = [0.0] * self.n_jobs
        self._daily_shortfall = np.zeros(self.n_jobs)
        self._keep = sum(c * s for c, s in zip(self._cur, self._strides, strict=True))
        self._schedule = [np.full(job.segments, PAUSE, dtype=np.int64) for job in inst.jobs]
        self._mask = None
        self._renewable = inst.renewable_mw
        self._global_obs = global_table(inst, self.lookahead, self.forecast_noise, self._ren_high, self.np_random,
                                        self.information)
        self._penalty_per_token = self.penalty_usd_per_token(inst)
        info = {"day": inst.day, "slot": 0, "job_modes": [c - 1 for c in self._cur],
                "job_progress": self._progress()}
        return self._observation(), info

    def step(self, action):
        inst = self._inst
        if inst is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        t = self._t
        if t >= self.n_slots:
            raise gym.error.ResetNeeded("the day is over: call reset()")
        mask = self._mask if self._mask is not None else self._compute_mask()
        fallback = self._fallback
        a, invalid = masked_action(action, mask, self._keep)

        cur = self._cur
        loc = self._loc_rows[a]
        restarted = self._restarted
        for j in range(self.n_jobs):
            c = loc[j]
            sps = self._sps[j]
            offset = t % sps
            if offset == 0:
                restarted[j] = c != 0 and c != cur[j]
                self._schedule[j][t // sps] = c - 1
            if c:
                hours = self._prod_restart[j][offset] if restarted[j] else self._slot_hours
                made = self._rate3600_list[j][c] * hours
                self._tokens[j] += made
                self._today[j] += made
            cur[j] = c
        self._keep = a

        load = self._load_table[a]
        used, grid, curtailment = renewable_first(load, self._renewable[t])
        cost = float(slot_decision_cost_usd(inst, grid, curtailment, t))
        reward = -cost / self.reward_scale
        self._t = t = t + 1
        self._mask = None
        if t % self.slots_per_day == 0:
            self._close_day()
        terminated = t == self.n_slots
        penalty = 0.0
        if terminated:
            shortfall = self.shortfall_tokens() + self._daily_shortfall
            penalty = float(np.sum(shortfall * self._penalty_per_token))
            reward -= penalty / self.reward_scale
        info = {
            "day": inst.day,
            "slot": t - 1,
            "slot_cost_usd": cost,
            "load_mw": float(load),
            "grid_mw": float(grid),
            "renewable_used_mw": float(used),
            "curtailment_mw": float(curtailment),
            "gpus_used": self._gpus_list[a],
            "job_modes": [c - 1 for c in loc],
            "job_progress": self._progress(),
            "invalid_action": invalid,
            "terminal_penalty_usd": penalty,
            "safety_fallback": fallback,
        }
        self._last_info = info
        return self._observation(), reward, terminated, False, info

    @property
    def slot(self) -> int:
        """The slot the next step simulates (``n_slots`` once the day is over)."""
        return self._t

    @property
    def safety_fallback(self) -> bool:
        """True if, in the current slot, no choice passed the safety test and the plain mask is used."""
        if self._inst is not None and self._mask is None:
            self._compute_mask()
        return self._fallback

    def action_masks(self) -> np.ndarray:
        """Bool mask over the joint actions of the current slot (see the class docstring)."""
        if self._inst is None:
            raise gym.error.ResetNeeded("call reset() before action_masks()")
        mask = self._mask if self._mask is not None else self._compute_mask()
        return mask.copy()

    def render(self):
        if self.render_mode != "ansi" or self._inst is None:
            return None
        info = self._last_info
        modes = " ".join(f"{job.name}={c - 1:>2d}" for job, c in zip(self._inst.jobs, self._cur, strict=True))
        progress = " ".join(f"{p:.3f}" for p in self._progress())
        cost = info.get("slot_cost_usd", 0.0)
        return f"{self._inst.day} slot {self._t:3d}/{self.n_slots}: {modes} progress {progress} cost ${cost:.2f}"

    # ------------------------------------------------------------------ tranche bookkeeping

    def penalty_usd_per_token(self, inst: Instance | None = None) -> np.ndarray:
        """Terminal penalty per missing token of each job ($/token): :func:`penalty_usd_per_token`."""
        return penalty_usd_per_token(inst or self.instance(), self.terminal_penalty_factor)

    def _close_day(self) -> None:
        """At midnight: record the tokens the day missed from its minimum, and start the next day's count."""
        for j, (x, w) in enumerate(zip(self._today, self._daily_min_list, strict=True)):
            if x < w * (1 - TRANCHE_TOLERANCE):
                self._daily_shortfall[j] += w - x
        self._today = [0.0] * self.n_jobs

    def daily_shortfall_tokens(self) -> np.ndarray:
        """Tokens missing from the minimums of the days already over, per job (summed over the days)."""
        return self._daily_shortfall.copy()

    def shortfall_tokens(self) -> np.ndarray:
        """Missing tokens per job (0 where the tranche is met within the simulator's tolerance)."""
        tokens = np.array(self._tokens)
        met = tokens >= self._tranche * (1 - TRANCHE_TOLERANCE)
        return np.where(met, 0.0, np.maximum(self._tranche - tokens, 0.0))

    def tokens(self) -> np.ndarray:
        """Tokens made so far, per job."""
        return np.array(self._tokens)

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
        J = self.n_jobs
        at_boundary = [t % sps == 0 for sps in self._sps]
        if not any(at_boundary):
            # Nobody may change: only "keep", which is valid (the previous slot was).
            mask = np.zeros(self.n_actions, dtype=bool)
            mask[self._keep] = True
            self._mask = mask
            self._fallback = False
            return mask
        self._fallback = False
        done = self._done()
        plain = self._cap_ok.copy()
        for j in range(J):
            if at_boundary[j]:
                if self.pause_when_done and done[j]:
                    plain &= self._loc_cols[j] == 0
            else:
                plain &= self._loc_cols[j] == self._cur[j]
        mask = plain
        if self.safety_mask:
            safe = plain & self._safety.safe(t, at_boundary, self._tokens, self._cur, self._restarted, self._today)
            if safe.any():
                mask = safe
            else:
                self._fallback = True
        self._mask = mask
        return mask

    # ------------------------------------------------------------------ observation

    def _observation(self) -> np.ndarray:
        t = self._t
        T = self.n_slots
        feats: list[float] = []
        gpus_used = 0
        seconds_left = (T - t) * self._slot_hours * SECONDS_PER_HOUR
        n_gpus = self._n_gpus
        for j in range(self.n_jobs):
            c = self._cur[j]
            sps = self._sps[j]
            offset = t % sps
            W = self._tranche_list[j]
            X = self._tokens[j]
            missing = W - X
            if missing <= W * TRANCHE_TOLERANCE:
                ratio = 0.0
            elif seconds_left <= 0 or self._max_rate[j] <= 0:
                ratio = RATE_RATIO_OBS_HIGH
            else:
                ratio = min(missing / seconds_left / self._max_rate[j], RATE_RATIO_OBS_HIGH)
            gpus = self._gpus_loc_list[j][c]
            gpus_used += gpus
            n_modes = self._sizes[j] - 1
            feats += (
                min(X / W, PROGRESS_OBS_HIGH) if W > 0 else 1.0,
                ratio,
                min(gpus / n_gpus, 1.0),
                self._power_share_list[j][c],
                c / n_modes if n_modes else 0.0,
                1.0 if offset == 0 else 0.0,
                (sps - offset) / sps,
            )
        obs = np.empty(self._obs_size, dtype=np.float32)
        obs[: self._n_job_obs] = feats
        obs[self._n_job_obs: -1] = self._global_obs[t]
        obs[-1] = min(max((n_gpus - gpus_used) / n_gpus, 0.0), 1.0)
        return obs


# ---------------------------------------------------------------------------------------------- helpers


def _structure(inst: Instance) -> tuple:
    """Everything but the day's data: instances with equal structure can share the env's tables."""
    return (inst.n_gpus, inst.slots, inst.slot_hours, inst.pue, inst.idle_kw_per_gpu, inst.rated_kw_per_gpu,
            inst.renewable_ratio, inst.curtailment_penalty_usd_per_mwh, inst.horizon_days, inst.min_daily_share)


def _same_jobs(inst: Instance, reference: Instance) -> bool:
    """The same jobs (instances of one :func:`~aidc_env.case.build_instances` call share them)."""
    return inst.jobs is reference.jobs or [job.to_dict() for job in inst.jobs] == [
        job.to_dict() for job in reference.jobs]


class JobQueueMasks:
    """The masks and public state of an env that asks the jobs at a decision point one per agent step (the fleet
    and sites envs). The env sets ``_inst``, ``_t``, ``n_slots``, ``n_actions``, ``_queue`` (the jobs of the
    decision point, in order), ``_k`` (the one deciding now), ``_mask`` (None until computed), ``_fallback``,
    ``_start_safe`` and defines ``_compute_mask()``."""

    def action_masks(self) -> np.ndarray:
        """Bool mask over the actions of the job deciding now (see the class docstring)."""
        if self._inst is None:
            raise gym.error.ResetNeeded("call reset() before action_masks()")
        if self._t >= self.n_slots:
            return np.ones(self.n_actions, dtype=bool)
        mask = self._mask if self._mask is not None else self._compute_mask()
        return mask.copy()

    @property
    def slot(self) -> int:
        """The slot of the current decision point (``n_slots`` once the episode is over)."""
        return self._t

    @property
    def deciding_job(self) -> int | None:
        """Index of the job deciding now (None once the episode is over)."""
        return self._queue[self._k] if self._t < self.n_slots and self._k < len(self._queue) else None

    @property
    def safety_fallback(self) -> bool:
        """True if no choice passes the reservation rule now (the capacity mask is used)."""
        if self._inst is not None and self._t < self.n_slots and self._mask is None:
            self._compute_mask()
        return self._fallback

    @property
    def starts_safe(self) -> bool:
        """The episode's initial state passes the reservation rule (then the mask never falls back)."""
        return self._start_safe


def masked_action(action: Any, mask: np.ndarray, keep: int) -> tuple[int, bool]:
    """(the action taken, whether the one given was invalid): an action outside the mask (or not an integer) never
    raises; ``keep`` is taken if valid, else the lowest valid action."""
    try:
        a = operator.index(action)
    except TypeError:
        arr = np.asarray(action)
        a = int(arr.reshape(-1)[0]) if arr.size == 1 and np.issubdtype(arr.dtype, np.integer) else -1
    invalid = not (0 <= a < mask.size) or not mask[a]
    if invalid:
        a = keep if mask[keep] else int(np.argmax(mask))
    return a, invalid


def check_env_arguments(lookahead: Any, information: Any, forecast_noise: Any, reward_scale: Any,
                        terminal_penalty_factor: Any) -> None:
    """The arguments both envs share (this one and :class:`aidc_env.fleet_env.FleetDispatchEnv`): InputError naming
    the first bad one."""
    require(isinstance(lookahead, (int, np.integer)) and not isinstance(lookahead, bool) and lookahead >= 0,
            "lookahead", f"must be an integer >= 0, got {lookahead!r}")
    require(is_finite(forecast_noise) and forecast_noise >= 0, "forecast_noise", "must be a number >= 0")
    require(information in INFORMATION, "information", f"must be one of {', '.join(INFORMATION)}, got "
            f"{information!r}")
    require(information == "perfect" or forecast_noise == 0, "forecast_noise",
            "is synthetic noise on the truth (information='perfect' only); 'dayahead' observes the forecasts")
    require(is_finite(reward_scale) and reward_scale > 0, "reward_scale", "must be a number > 0")
    require(is_finite(terminal_penalty_factor) and terminal_penalty_factor >= 0, "terminal_penalty_factor",
            "must be a number >= 0")


def penalty_usd_per_token(inst: Instance, factor: float) -> np.ndarray:
    """Terminal penalty per missing token of each job ($/token).

    ``factor`` (the envs' ``terminal_penalty_factor``) × max(the day's highest price, $100/MWh) × the job's
    highest facility energy per token over its modes (PUE·P/1000 / (r·3600), MWh/token) × T_seg / (T_seg − τ)
    (a restart spends energy for no token). The most not making a token can save is its energy at the day's
    highest price, so with a factor ≥ 1 missing a tranche never pays.
    """
    price = max(float(inst.price_usd_per_mwh.max()), PENALTY_PRICE_FLOOR_USD_PER_MWH)
    out = np.zeros(len(inst.jobs))
    for j, job in enumerate(inst.jobs):
        if job.n_modes == 0:
            continue
        rate = job.tokens_per_s_by_choice[:-1]
        energy = inst.pue * job.it_power_kw_by_choice[:-1] / 1000.0 / (rate * SECONDS_PER_HOUR)
        seg = inst.segment_hours(job)
        out[j] = factor * price * float(energy.max()) * seg / (seg - job.restart_hours)
    return out


def check_day(instances: Mapping[str, Instance], day: Any) -> str:
    """``day`` if it is a day of ``instances``; else one line that says whether it is no date or a missing day."""
    require(isinstance(day, str), "day", f"must be a date string YYYY-MM-DD, got {day!r}")
    if day in instances:
        return day
    known = sorted(instances)
    try:
        valid = len(day) == 10 and dt.date.fromisoformat(day).isoformat() == day
    except ValueError:
        valid = False
    if not valid:
        raise InputError("day", f"{day!r} is not a valid date (expected YYYY-MM-DD)")
    raise InputError("day", f"{day} is not a day of the instances ({len(known)} days from {known[0]} to "
                     f"{known[-1]})")


def episode_days(instances: Mapping[str, Instance], days: Sequence[str] | None) -> list[str]:
    """The days an env's episodes draw from: every instance's day, or ``days`` (each a day of ``instances``)."""
    if days is None:
        return sorted(instances)
    require(not isinstance(days, str) and len(days) > 0, "days", "must be a non-empty list of dates")
    for d in days:
        check_day(instances, d)
    return [str(d) for d in days]


def reset_day(env: gym.Env, days: Sequence[str], options: Mapping[str, Any] | None) -> str:
    """The day of a reset: ``options["day"]``, else one of ``days`` drawn with the env's ``np_random``."""
    day = (options or {}).get("day")
    if day is None:
        day = days[int(env.np_random.integers(len(days)))]
    return day


def instances_by_day(case: Any, overrides: Mapping[str, Any] | None = None,
                     profiles: Any = None, fleet: bool = False) -> dict[str, Instance]:
    """The env's instances by day: the given instance(s), or a case's through :func:`build_instances` (once).

    Without ``fleet`` (the joint env), instances with fleet workloads are refused with one line that points to
    the fleet env (:class:`aidc_env.fleet_env.FleetDispatchEnv`).
    """
    if isinstance(case, Instance) or (isinstance(case, Sequence) and not isinstance(case, str) and len(case) > 0
                                      and all(isinstance(c, Instance) for c in case)):
        require(not overrides, "overrides", "cannot be combined with instances")
        require(profiles is None, "profiles", "cannot be combined with instances")
        instances = [case] if isinstance(case, Instance) else list(case)
    else:
        require(isinstance(case, (str, Path, Case)), "case",
                f"must be a case name, a TOML path, a Case or Instance(s), got {type(case).__name__}")
        require(overrides is None or isinstance(overrides, Mapping), "overrides", "must be a mapping")
        overrides = dict(overrides or {})
        require("day" not in overrides, "overrides.day", "choose days with days= or reset(options={'day': ...})")
        require(profiles is None or isinstance(profiles, (str, Path, ProfileSet)), "profiles",
                f"must be None, a CSV path or a ProfileSet, got {type(profiles).__name__}")
        instances = list(build_instances(case, profiles=profiles, **overrides).values())
    reference = instances[0]
    require(fleet or not reference.has_fleet_workloads, "case",
            f"{ENV_ID} (one joint action) does not handle fine-tuning jobs, inference or an idle-GPU value (case "
            f"{reference.case_name!r}); use aidc_env/FleetDispatch-v0 (aidc_env.fleet_env.FleetDispatchEnv)")
    require_one_site(reference, "the env")
    by_day: dict[str, Instance] = {}
    for inst in instances:
        require(inst.day not in by_day, "case", f"two instances for the day {inst.day}")
        require(_structure(inst) == _structure(reference) and _same_jobs(inst, reference), "case",
                f"the instance of {inst.day} differs from the first in jobs or parameters")
        by_day[inst.day] = inst
    return by_day


__all__ = [
    # The env and its constants.
    "DEFAULT_REWARD_SCALE_USD", "DEFAULT_TERMINAL_PENALTY_FACTOR", "ENV_ID", "PENALTY_PRICE_FLOOR_USD_PER_MWH",
    "CheckpointDispatchEnv", "check_env_arguments", "instances_by_day", "masked_action", "penalty_usd_per_token", "register_envs",
    # Re-exported from aidc_env.observation and aidc_env.safety (their home modules).
    "DEFAULT_LOOKAHEAD", "JOB_FEATURES", "PRICE_OBS_HIGH", "PRICE_OBS_LOW", "PRICE_SCALE_USD_PER_MWH",
    "PROGRESS_OBS_HIGH", "RATE_RATIO_OBS_HIGH", "SAFETY_TOLERANCE",
]
