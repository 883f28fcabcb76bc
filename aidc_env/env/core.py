"""The dispatch env: one Gymnasium class, its configuration, and what every action type shares.

``gymnasium.make("aidc_env/CheckpointDispatch-v0")`` (and ``FleetDispatch-v0``, ``SitesDispatch-v0``,
``SitesFleetDispatch-v0``: the same class with other default configurations, :data:`VARIANTS`) or
``DispatchEnv(case=..., **config)``. The action type (:data:`ACTIONS`) chooses how decisions are asked:

- ``joint`` (:mod:`aidc_env.env.joint`): one step per slot, one joint choice of every job (one site);
- ``per_job`` (:mod:`aidc_env.env.per_job`): one job's choice (a site and a mode or pause) per step, at the
  decision points only.

Every cost is the simulator's, so the episode's decision cost (joint) or objective (per job) equals the simulator's
replay of ``env.schedule()``. See the class docstring and ``docs/env.md``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from aidc_env import ENV_VARIANTS as VARIANTS
from aidc_env.call_streams import CallStream
from aidc_env.calls import with_calls
from aidc_env.case import Case, build_instances
from aidc_env.env.observation import DEFAULT_LOOKAHEAD
from aidc_env.env.rules import masked_action, penalty_usd_per_token
from aidc_env.errors import InputError, is_finite, is_integer, require
from aidc_env.information import Outlook, Perfect, outlook_of
from aidc_env.instance import Instance
from aidc_env.profiles import ProfileSet
from aidc_env.simulator import TRANCHE_TOLERANCE

ACTIONS = ("joint", "per_job")
REWARD_BASELINES = (None, "fixed")
"""``reward_baseline`` (per job): none (reward = −objective) or the fixed schedule's objective of the same slots."""
REWARD_CREDITS = ("decision", "job")
"""``reward_credit`` (per job): the objective of the slots simulated when a decision point closes, or per agent step
the objective change attributable to that job's choice."""
DEFAULT_REWARD_SCALE_USD = 100.0
"""Reward = −($) / 100: one reward unit is $100."""
DEFAULT_TERMINAL_PENALTY_FACTOR = 2.0
"""Multiplier on the most a missing token could ever save (:func:`penalty_usd_per_token`)."""
DEFAULT_MASK_SEARCH_NODES = 0
"""States the per-job mask's search visits per choice the reservation rule refuses (0: the rule alone)."""


def default_config() -> dict[str, Any]:
    """Every configuration key of :class:`DispatchEnv` with its default (``CheckpointDispatch-v0``'s)."""
    return {
        "case": "2048", "overrides": None, "profiles": None, "days": None,
        "action": "joint", "information": "perfect", "forecast_noise": 0.0, "lookahead": DEFAULT_LOOKAHEAD,
        "reward_scale": DEFAULT_REWARD_SCALE_USD, "reward_baseline": None, "reward_credit": "decision",
        "safety_mask": True, "pause_when_done": True, "terminal_penalty_factor": DEFAULT_TERMINAL_PENALTY_FACTOR,
        "mask_search_nodes": DEFAULT_MASK_SEARCH_NODES, "call_stream": None, "render_mode": None,
    }


def check_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The full configuration (defaults + ``config``); InputError naming the first unknown key or bad value."""
    defaults = default_config()
    unknown = sorted(set(config) - set(defaults))
    require(not unknown, unknown[0] if unknown else "config", f"unknown env option (known: {', '.join(defaults)})")
    c = {**defaults, **config}
    for key, known in (("action", ACTIONS), ("reward_baseline", REWARD_BASELINES), ("reward_credit", REWARD_CREDITS)):
        require(c[key] in known, key, f"must be one of {', '.join(map(repr, known))}, got {c[key]!r}")
    for key, integer, positive in (("lookahead", True, False), ("forecast_noise", False, False),
                                   ("reward_scale", False, True), ("terminal_penalty_factor", False, False),
                                   ("mask_search_nodes", True, False)):
        v = c[key]
        require((is_integer(v) if integer else is_finite(v)) and (v > 0 if positive else v >= 0), key,
                f"must be {'an integer' if integer else 'a number'} {'>' if positive else '>='} 0, got {v!r}")
    for key in ("safety_mask", "pause_when_done"):
        require(isinstance(c[key], (bool, np.bool_)), key, f"must be true or false, got {c[key]!r}")
    outlook = outlook_of(c["information"])
    if c["forecast_noise"]:
        require(isinstance(outlook, Perfect), "forecast_noise",
                "is synthetic noise on the truth (information='perfect' only); 'dayahead' observes the forecasts")
        outlook = Perfect(float(c["forecast_noise"]))
    c["outlook"] = outlook
    c["call_stream"] = CallStream.of(c["call_stream"])
    return c


class DispatchEnv(gym.Env):
    """
    ## Description

    An AI data center (or several: each site with its own pool, facility, renewable plant and price node) runs
    pre-training jobs, each with a token target over the horizon, possibly fine-tuning jobs (a window [release,
    deadline) and a target due by the deadline) and inference services (not deferrable: their GPUs come out of
    their site's pool first); idle GPUs may carry a value. A job may pause, resume, change its 3D-parallel mode
    (GPUs, tokens/s, IT power) or move to another site only at its checkpoint boundaries; a restart spends τ_j
    hours loading the checkpoint at full power, a move into a running segment also the checkpoint's transfer
    time. Each site is fed first by its own plant, then by the grid at its node's price. The env scores every slot
    with the simulator's functions; one episode is one instance (a day, or D consecutive days: job state carries
    across midnight). With ``information="dayahead"`` the agent sees the day-ahead forecasts issued so far and the
    realised past; it is always paid on the truth.

    ## Action Space

    Chosen by ``action``:

    - ``joint`` (one site): ``Discrete(Π_j (M_j + 1))``, one joint choice of every job per slot (mixed radix, job 0
      the most significant digit; :meth:`encode`, :meth:`decode`). A job off its boundary may only keep its choice.
    - ``per_job``: ``Discrete(S · C)`` with C = max_j M_j + 1: a = s · C + c is "site s, local choice c" (0 =
      pause, i = Pareto mode i − 1) of the job deciding now (S = 1: ``Discrete(C)``). At each decision point the
      jobs at a boundary decide one after the other, in job order; a job outside its window or (with
      ``pause_when_done``) done is paused without a step.

    :meth:`action_masks` returns the exact mask of the rules (capacity of every site, windows, done jobs and, with
    ``safety_mask``, a sufficient completion rule: :mod:`aidc_env.env.safety` for ``joint``,
    :mod:`aidc_env.env.reservation` for ``per_job``): a policy that follows it meets every target whenever the
    episode starts safe. An action outside the mask never raises: the job's current choice is kept if valid, else
    the lowest valid action is taken, and ``info["invalid_action"]`` is set.

    ## Observation Space

    ``Box(float32)``, its layout by action type (``observation_names()`` names every entry): per job its progress,
    required-rate ratio, current choice and checkpoint position; the global part of every site (time of day, price
    and renewable now and ``lookahead`` slots ahead as the outlook knows them, with ``dayahead`` the last realised
    values); free GPU shares; with ``per_job`` the deciding job and per action its GPUs, coverage and efficiency.
    Nothing observed at slot t depends on the truth of slots ≥ t beyond what ``information`` allows.

    ## Rewards

    −($) / ``reward_scale``, paid on the truth: ``joint`` pays every slot's decision cost (grid cost + curtailment
    penalty); ``per_job`` pays, when a decision point closes, the objective of the slots simulated (grid cost +
    curtailment penalty + take-or-pay renewable cost − idle-GPU value), with ``reward_baseline="fixed"`` the fixed
    schedule's objective of the same slots added back, or with ``reward_credit="job"`` per step the objective
    change of that job's choice. At the last step, minus a terminal penalty for missing tokens
    (``terminal_penalty_factor`` × the most a token could save; reachable only when the episode starts unsafe or
    without ``safety_mask``).

    ## Starting State

    Slot 0 of a day drawn (with ``self.np_random``) from ``days``, or ``reset(options={"day": "YYYY-MM-DD"})``; each
    job in its initial mode at its home site, no tokens.

    ## Episode End

    ``terminated`` after the last slot of the instance. Never truncated.

    ## Arguments

    ``DispatchEnv(case=..., **config)``, keys and defaults in :func:`default_config`; an unknown key is refused with
    one line. ``case``: an :class:`~aidc_env.instance.Instance`, instances of one case on several days, or a case
    name, TOML path or :class:`~aidc_env.case.Case` (built once for every day of ``profiles``: None for the bundled
    days, a dataset name, a CSV path or a loaded set; ``overrides``: case overrides). ``days``: the days to draw
    episodes from. ``information``: ``"perfect"``, ``"dayahead"``, an :class:`~aidc_env.information.Outlook` or
    ``{"kind": ..., "noise": σ}``; ``forecast_noise``: σ of synthetic look-ahead noise on the truth. The rest:
    ``lookahead``, ``reward_scale``, ``reward_baseline``, ``reward_credit``, ``safety_mask``, ``pause_when_done``,
    ``terminal_penalty_factor``, ``mask_search_nodes`` (per job: states searched to rescue a choice the reservation
    rule refuses), ``call_stream`` (grid calls drawn for each episode: ``"PROGRAM:SHARE"``, a dict or a
    :class:`~aidc_env.call_streams.CallStream`; needs a cap curve), ``render_mode`` (None or ``"ansi"``). Power caps,
    grid calls and a training value run with the ``joint`` action (:mod:`aidc_env.env.calls`).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    @staticmethod
    def default_config() -> dict[str, Any]:
        return default_config()

    def __init__(self, **config: Any):
        super().__init__()
        c = self.config = check_config(config)
        self.render_mode = c["render_mode"]
        self.action_type = c["action"]
        self.outlook: Outlook = c["outlook"]
        self.information = self.outlook.name
        self.forecast_noise = float(getattr(self.outlook, "noise", 0.0))
        self.lookahead = int(c["lookahead"])
        self.reward_scale = float(c["reward_scale"])
        self.reward_baseline = c["reward_baseline"]
        self.reward_credit = c["reward_credit"]
        self.safety_mask = bool(c["safety_mask"])
        self.pause_when_done = bool(c["pause_when_done"])
        self.terminal_penalty_factor = float(c["terminal_penalty_factor"])
        self.mask_search_nodes = int(c["mask_search_nodes"])
        self.call_stream: CallStream | None = c["call_stream"]
        self._instances = instances_by_day(c["case"], c["overrides"], c["profiles"])
        self._episode_instances: dict[tuple[str, tuple], Instance] = {}  # a day with the stream's calls
        for inst in self._instances.values():
            self.outlook.check(inst)
        self.days = episode_days(self._instances, c["days"])
        # The first instance: every instance of the env has its structure (jobs, sites, slots).
        self.template = t = next(iter(self._instances.values()))
        self.n_jobs, self.n_sites, self.n_slots = len(t.jobs), len(t.sites), t.slots
        self.horizon_days, self.slots_per_day = t.horizon_days, t.slots_per_day
        self.grid_side = self.call_stream is not None or any(i.has_grid_side for i in self._instances.values())
        # A coincident-peak option adds the demand entries whether or not a peak falls in an episode: their presence
        # must not tell the system's peak day (aidc_env.coincident: known only after the month).
        self.demand_charges = any(i.has_demand_charges or i.coincident_peak is not None
                                  for i in self._instances.values())
        require(not self.demand_charges or self.action_type == "joint", "action", "a tariff's demand charges and "
                "coincident-peak charges are run by the joint action (one site, pre-training jobs): use action='joint'")
        require(not self.grid_side or self.action_type == "joint", "action", "power caps, grid calls and a training "
                "value are run by the joint action (one site, pre-training jobs): use action='joint'")
        require(self.call_stream is None or t.cap_curve is not None, "call_stream",
                "a call stream needs power caps in the case ([power_caps], or --power-caps)")
        if self.action_type == "joint":
            from aidc_env.env.joint import JointDynamics as Dynamics
        else:
            from aidc_env.env.per_job import PerJobDynamics as Dynamics
        self.dynamics = Dynamics(self, self.template)
        self.observation_space = self.dynamics.observation_space
        self.action_space = self.dynamics.action_space
        self.n_actions = int(self.action_space.n)
        self._inst: Instance | None = None

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        day = (options or {}).get("day")
        if day is None:
            day = self.days[int(self.np_random.integers(len(self.days)))]
        self._inst = self.instance(day)
        if self.call_stream is not None:
            specs = self.call_stream.draw(day, self.np_random)
            key = (day, specs)
            if key not in self._episode_instances:
                self._episode_instances[key] = with_calls(self._inst, specs)
            self._inst = self._episode_instances[key]
        return self.dynamics.reset(self._inst)

    def step(self, action):
        if self._inst is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self.dynamics.slot >= self.n_slots:
            raise gym.error.ResetNeeded("the episode is over: call reset()")
        return self.dynamics.step(action)

    def action_masks(self) -> np.ndarray:
        """Bool mask over the actions of the current step (see the class docstring)."""
        if self._inst is None:
            raise gym.error.ResetNeeded("call reset() before action_masks()")
        return self.dynamics.mask().copy()

    def render(self):
        return self.dynamics.render() if self.render_mode == "ansi" and self._inst is not None else None

    # ------------------------------------------------------------------ public state

    def instance(self, day: str | None = None) -> Instance:
        """The instance of ``day`` (default: the current episode's)."""
        if day is None:
            require(self._inst is not None, "day", "no episode yet: call reset() or give a day")
            return self._inst  # type: ignore[return-value]
        return self._instances[check_day(self._instances, day)]

    def tokens(self) -> np.ndarray:
        """Tokens made so far per job (per job: by the end of its committed segment)."""
        return np.array(self.dynamics.tokens())

    def shortfall_tokens(self) -> np.ndarray:
        """Missing tokens per job (0 where the target is met within the simulator's tolerance)."""
        tokens = self.tokens()
        target = np.array([job.tranche_tokens for job in self.template.jobs])
        return np.where(tokens >= target * (1 - TRANCHE_TOLERANCE), 0.0, np.maximum(target - tokens, 0.0))

    def penalty_usd_per_token(self, inst: Instance | None = None) -> np.ndarray:
        """Terminal penalty per missing token of each job ($/token): :func:`penalty_usd_per_token`."""
        return penalty_usd_per_token(inst or self.instance(), self.terminal_penalty_factor)

    def __getattr__(self, name: str) -> Any:
        """The action type's state and methods: ``slot`` (of the next decision; ``n_slots`` once the episode is
        over), ``deciding_job`` (per job; None once the episode is over or with the joint action),
        ``safety_fallback`` (no choice passes the completion rule now: the capacity mask is used), ``starts_safe``
        (the episode's initial state passes it: the mask never falls back), ``schedule()`` (taken so far, segments
        not reached yet paused at the job's site: the simulator scores it to the episode's total),
        ``observation_names()`` (of every observation entry, in order); ``encode``/``decode``/``actions_for_schedule``
        of ``joint``; ``reserved_gpus``/``committed_gpus``/``action_of``/``objective_usd`` of ``per_job``."""
        if name.startswith("_") or name in ("dynamics", "config"):
            raise AttributeError(name)
        return getattr(self.dynamics, name)


# ---------------------------------------------------------------------------------------------- helpers


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
    return [str(check_day(instances, d)) for d in days]


def _structure(inst: Instance) -> tuple:
    """Everything but the day's data: instances with equal structure share the env's tables."""
    return (inst.n_gpus, inst.slots, inst.slot_hours, inst.pue, inst.idle_kw_per_gpu, inst.rated_kw_per_gpu,
            inst.renewable_ratio, inst.curtailment_penalty_usd_per_mwh, inst.horizon_days, inst.min_daily_share,
            tuple((s.name, s.n_gpus, s.pue, s.idle_kw_per_gpu, s.rated_kw_per_gpu) for s in inst.sites),
            inst.home_sites, inst.transfer_hours, inst.training_value_usd_per_gpu_hour,
            None if inst.cap_curve is None else str(inst.cap_curve.to_dict()))


def _same_jobs(inst: Instance, reference: Instance) -> bool:
    """The same jobs (instances of one :func:`~aidc_env.case.build_instances` call share them)."""
    return inst.jobs is reference.jobs or [job.to_dict() for job in inst.jobs] == [
        job.to_dict() for job in reference.jobs]


def instances_by_day(case: Any, overrides: Mapping[str, Any] | None = None,
                     profiles: Any = None) -> dict[str, Instance]:
    """The env's instances by day: the given instance(s), or a case's through :func:`build_instances` (once)."""
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
        require(profiles is None or isinstance(profiles, (str, Path, ProfileSet)) or hasattr(profiles, "dates"),
                "profiles", f"must be None, a dataset name, a CSV path or a loaded profile set, got "
                f"{type(profiles).__name__}")
        instances = list(build_instances(case, profiles=profiles, **overrides).values())
    reference = instances[0]
    by_day: dict[str, Instance] = {}
    for inst in instances:
        require(inst.day not in by_day, "case", f"two instances for the day {inst.day}")
        require(_structure(inst) == _structure(reference) and _same_jobs(inst, reference), "case",
                f"the instance of {inst.day} differs from the first in jobs, sites or parameters")
        by_day[inst.day] = inst
    return by_day


__all__ = ["ACTIONS", "DEFAULT_MASK_SEARCH_NODES", "DEFAULT_REWARD_SCALE_USD", "DEFAULT_TERMINAL_PENALTY_FACTOR",
           "REWARD_BASELINES", "REWARD_CREDITS", "VARIANTS", "DispatchEnv",
           "check_config", "check_day", "default_config", "episode_days", "instances_by_day", "masked_action",
           "penalty_usd_per_token"]
