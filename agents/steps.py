"""The PPO agent's view of the dispatch env: :class:`AgentSteps`, one wrapper for both action types.

With the ``per_job`` action the env already asks one real decision per step and pays the reward the config asks
(its ``reward_baseline``, ``reward_credit`` and ``reward_scale``: :func:`agents.ppo.agent_env`); the wrapper appends
each site's hourly forecast table (below). With the ``joint`` action the wrapper also does what follows (the env
is unchanged):

- **One agent step per real decision.** With K checkpoint segments per day only the boundary slots offer a
  choice; at every other slot the mask allows only "keep". The wrapper plays those forced slots itself and
  returns the summed reward, so an episode of 96 slots is 12 agent steps in the 2048 case (a slot whose mask
  has a single valid action, e.g. when the safety mask forces a choice, is also played automatically). The
  day's schedule, and so its cost, is exactly what the env did: the wrapper only batches steps.
- **Reward = savings versus fixed continuous training.** Per slot, (the fixed schedule's decision cost −
  the slot's decision cost) / ``reward_scale_usd``, plus minus the env's terminal penalty. The fixed cost of a
  slot depends only on the day and the slot, not on the agent, so this is the env's reward shifted by a
  function of the state (the day has a fixed length): the best policy is unchanged, but returns no longer
  carry the day's price level, which would otherwise dominate their variance.
- **Observation = the env's observation plus a day-scaled hourly forecast of every site.** The env's own
  observation is kept as is (with ``lookahead`` = 0 by default: no slot-level window). The wrapper appends, per site, a
  sliding 24-hour window at hourly resolution (24 hours from the current slot, zero past the end of the instance, plus a
  validity flag each; on a day instance, the rest of the day): prices divided by the episode's price scale (mean |λ| of
  the outlook at slot 0, at least $5/MWh; decisions are invariant to a common price factor, so every day looks alike),
  renewable shares, and the price scale / $100. Every one of these is read through the env's outlook: with ``"perfect"``
  the truth (foresight, as the oracle has), with ``"dayahead"`` the day-ahead forecasts issued by slot t (the window at
  slot t and the price scale never depend on the truth of slots ≥ t).
- **Rewards are paid on the truth.** The fixed schedule's cost per slot (the reward baseline) is the
  simulator's cost on the true prices: it is paid after the fact and only shifts the return by a function
  of the day, so it carries no information into the observation or the mask.
- **One job at a time** (``factored_actions``). A boundary's joint choice (up to 294 actions in the 2048
  case) is made as one sub-step per job over that job's own choices, each masked so that some valid joint
  action completes it. With ``choice_features`` the job choosing sees, per choice, the tokens that choice
  makes in this segment and the share of its missing tokens it would cover if held for the rest of the day.
- **The forecast plan** (``forecast_plan``, with ``information="dayahead"`` only). The oracle's schedule solved
  once on the day-ahead point forecast (the ``forecast-plan`` rule; on a day, what ``mpc`` applies), and how the
  realised truth departs from the forecast so far: see :mod:`agents.plan_features`. The plans come from
  :attr:`DecisionSteps.plans` (a :class:`~agents.plan_features.ForecastPlans`, solved on first use of a day;
  training fills one shared cache before building its envs). With ``"perfect"`` nothing is added (the plan on
  the truth would be the hindsight oracle's schedule).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from agents.plan_features import PLANS, PROGRESS_GAP_CLIP, ForecastPlans, plan_bounds, realised_error_table
from agents.ppo_config import PPOConfig
from aidc_env.baselines import fixed_schedule
from aidc_env.env import DispatchEnv
from aidc_env.env.observation import outlook_blocks, renewable_share_high
from aidc_env.information import outlook
from aidc_env.instance import SECONDS_PER_HOUR, Instance
from aidc_env.simulator import segment_productive_hours, simulate

HOURS_AHEAD = 24
"""Hourly forecast window of the wrapper's observation (the rest of the day fits in it)."""
PRICE_SCALE_FLOOR_USD_PER_MWH = 5.0
"""Lower bound of the day's price scale (mean |λ|), so that a flat zero-price day does not blow up."""
SCALED_PRICE_CLIP = 10.0
"""Day-scaled prices are clipped to [-10, 10]."""
CHOICE_FEATURE_CLIP = 4.0
"""Per-choice token features (``choice_features``) are clipped to [0, 4]."""
REWARD_REFERENCE_PRICE_USD_PER_MWH = 50.0
"""With ``reward_day_scaled``, a day whose price scale is this keeps its rewards unchanged."""

_DEFAULTS = PPOConfig()


class AgentSteps(gym.Wrapper):
    """One agent step per real decision; reward = savings versus fixed; hourly day-scaled forecast per site.

    See the module docstring. Exposes ``action_masks()`` (the mask of the agent's current choice), so
    MaskablePPO finds it through ``VecEnv.env_method``. With the ``per_job`` action only the hourly forecast is
    added (the other options are the joint action's).

    With ``factored_actions`` the joint choice of a boundary slot is made one job at a time: the action space is
    ``Discrete(max_j (M_j + 1))`` (a local choice: 0 = pause, i = mode i − 1), job j's mask allows the local choices
    that some valid joint action (the env's exact mask) completes given the jobs already chosen, and the observation
    tells which job is choosing and what the earlier jobs chose. The env steps once the last job has chosen (reward 0 on
    the earlier sub-steps). Sub-steps with a single valid choice are taken automatically.
    """

    def __init__(self, env: gym.Env, *, decision_steps: bool = _DEFAULTS.decision_steps,
                 hourly_forecast: bool = _DEFAULTS.hourly_forecast, reward_baseline: str = _DEFAULTS.reward_baseline,
                 reward_scale_usd: float = _DEFAULTS.reward_scale_usd,
                 reward_day_scaled: bool = _DEFAULTS.reward_day_scaled,
                 factored_actions: bool = _DEFAULTS.factored_actions, choice_features: bool = _DEFAULTS.choice_features,
                 forecast_plan: bool = _DEFAULTS.forecast_plan, plan: str = _DEFAULTS.plan):
        super().__init__(env)
        if reward_baseline not in ("fixed", "none"):
            raise ValueError(f"reward_baseline must be 'fixed' or 'none', got {reward_baseline!r}")
        dispatch = self.dispatch
        self.joint = dispatch.action_type == "joint"
        self.decision_steps = decision_steps and self.joint
        self.hourly_forecast = hourly_forecast
        self.reward_baseline = reward_baseline
        self.reward_scale_usd = float(reward_scale_usd)
        self.reward_day_scaled = bool(reward_day_scaled)
        self.factored_actions = bool(factored_actions) and self.joint
        self._reward_div = self.reward_scale_usd
        template = dispatch.template
        self._sizes = [job.n_modes + 1 for job in template.jobs]
        self._gpu_share = [np.append(0.0, [m.gpus / template.n_gpus for m in job.modes]) for job in template.jobs]
        if self.joint and dispatch.n_levels > 1:  # the cap level: the action's last digit, one more sub-step
            self._sizes.append(dispatch.n_levels)
            self._gpu_share.append(np.zeros(dispatch.n_levels))
        # Per job, by local choice: tokens per hour; the job's tranche, segment and restart hours.
        self._template = template
        self._tokens_per_h = [np.append(0.0, [m.tokens_per_s * SECONDS_PER_HOUR for m in job.modes])
                              for job in template.jobs]
        self.choice_features = bool(choice_features) and self.factored_actions
        base: spaces.Box = env.observation_space  # type: ignore[assignment]
        low, high = [base.low], [base.high]
        if hourly_forecast:
            for view in template.site_views:
                ren_high = renewable_share_high(view)  # renewable_now's bound: rho
                low += [np.full(HOURS_AHEAD, -SCALED_PRICE_CLIP), np.zeros(2 * HOURS_AHEAD), [0.0]]
                high += [np.full(HOURS_AHEAD, SCALED_PRICE_CLIP), np.full(HOURS_AHEAD, ren_high),
                         np.ones(HOURS_AHEAD), [SCALED_PRICE_CLIP]]
        if self.factored_actions:
            # Per job: choosing now, already chosen, the chosen mode index / M_j, its GPU share.
            n = 4 * len(self._sizes)
            low.append(np.zeros(n))
            high.append(np.ones(n))
            if self.choice_features:
                low.append(np.zeros(2 * max(self._sizes)))
                high.append(np.full(2 * max(self._sizes), CHOICE_FEATURE_CLIP))
            self.action_space = spaces.Discrete(max(self._sizes))
        self.forecast_plan = bool(forecast_plan) and dispatch.information == "dayahead" and self.joint
        self.plans = ForecastPlans()
        """Where the forecast plans come from (replace it to share one cache between envs)."""
        if plan not in PLANS:
            raise ValueError(f"plan must be one of {', '.join(PLANS)}, got {plan!r}")
        self.plan = plan
        """Which plan is observed (:data:`agents.plan_features.PLANS`): the forecast plan or the issue plans."""
        if self.forecast_plan:
            plan_low, plan_high = plan_bounds(template, max(self._sizes) if self.factored_actions else 0)
            low.append(plan_low)
            high.append(plan_high)
        self.observation_space = spaces.Box(low=np.concatenate(low).astype(np.float32),
                                            high=np.concatenate(high).astype(np.float32), dtype=np.float32)
        self._days: dict[str, tuple[list[bool], np.ndarray, np.ndarray | None, float, tuple | None]] = {}
        self._plan: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._boundary: list[bool] = []
        self._baseline_cost = np.zeros(0)
        self._extra: np.ndarray | None = None
        self._partial: list[int] = []
        self._joint_mask: np.ndarray | None = None
        self._obs = np.zeros(0, dtype=np.float32)
        self._current: list[int] = [job.initial_mode for job in template.jobs]

    @property
    def dispatch(self) -> DispatchEnv:
        """The raw env."""
        return self.env.unwrapped  # type: ignore[return-value]

    def action_masks(self) -> np.ndarray:
        return self._sub_mask() if self.factored_actions else self.dispatch.action_masks()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        if not self.joint:
            self._prepare_day(self.dispatch.instance())
            return self._observation(obs), info
        self._current = list(info["job_modes"])
        self._prepare_day(self.dispatch.instance())
        obs, _, terminated, info = self._advance(obs, info)
        self._obs = obs
        reward = 0.0
        if self.factored_actions and not terminated:
            obs, reward, terminated, info = self._auto_substeps(info)
        return self._observation(self._obs), self._compact(info)

    def step(self, action):
        if not self.joint:
            obs, reward, terminated, truncated, info = self.env.step(action)
            return self._observation(obs), reward, terminated, truncated, info
        if self.factored_actions:
            obs, reward, terminated, info = self._substep(int(action))
            return self._observation(self._obs), reward, terminated, False, self._compact(info)
        obs, reward, terminated, truncated, info = self._env_step(action)
        return self._observation(obs), reward, terminated, truncated, self._compact(info)

    @staticmethod
    def _compact(info: dict[str, Any]) -> dict[str, Any]:
        """The day and the next decision slot only (vec envs deep-copy infos every step)."""
        return {"day": info["day"], "slot": info["slot"] + 1 if "slot_cost_usd" in info else info["slot"]}

    # --------------------------------------------------------------------------------------- internals

    def _env_step(self, action: int):
        """One env step plus the forced slots after it."""
        obs, _, terminated, truncated, info = self.env.step(action)
        total = self._reward(info)
        if not (terminated or truncated):
            obs, extra, terminated, info = self._advance(obs, info)
            total += extra
        if "job_modes" in info:
            self._current = list(info["job_modes"])
        return obs, total, terminated, truncated, info

    def _sub_mask(self) -> np.ndarray:
        """Valid local choices of the job choosing now, given the jobs already chosen."""
        if self._joint_mask is None:
            self._joint_mask = self.dispatch.action_masks().reshape(self._sizes)
        k = len(self._partial)
        rest = self._joint_mask[tuple(self._partial)]
        valid = rest.reshape(self._sizes[k], -1).any(axis=1)
        out = np.zeros(self.action_space.n, dtype=bool)
        out[: valid.size] = valid
        return out

    def _substep(self, action: int):
        """Record one job's local choice; step the env once every job has chosen."""
        mask = self._sub_mask()
        if not (0 <= action < mask.size and mask[action]):
            action = int(np.argmax(mask))
        self._partial.append(action)
        reward = 0.0
        info: dict[str, Any] = {"day": self.dispatch.instance().day, "slot": self.dispatch.slot}
        terminated = False
        if len(self._partial) == len(self._sizes):
            joint = int(np.ravel_multi_index(tuple(self._partial), self._sizes))
            self._partial = []
            self._joint_mask = None
            self._obs, reward, terminated, _, info = self._env_step(joint)
        if not terminated:
            _, extra, terminated, info2 = self._auto_substeps(info)
            reward += extra
            info = info2
        return self._obs, reward, terminated, info

    def _auto_substeps(self, info: dict[str, Any]):
        """Take the sub-steps that have a single valid choice; stop at a real choice or the day's end."""
        reward = 0.0
        while True:
            mask = self._sub_mask()
            valid = np.flatnonzero(mask)
            if valid.size != 1:
                return self._obs, reward, False, info
            self._partial.append(int(valid[0]))
            if len(self._partial) == len(self._sizes):
                joint = int(np.ravel_multi_index(tuple(self._partial), self._sizes))
                self._partial = []
                self._joint_mask = None
                self._obs, extra, terminated, _, info = self._env_step(joint)
                reward += extra
                if terminated:
                    return self._obs, reward, True, info

    def _reward(self, info: dict[str, Any]) -> float:
        cost = info["slot_cost_usd"] + info.get("terminal_penalty_usd", 0.0)
        if self.reward_baseline == "fixed":
            cost -= self._baseline_cost[info["slot"]]
        return -cost / self._reward_div

    def _advance(self, obs, info):
        """Play the slots where only one action is valid; return (obs, reward, terminated, info).

        Off every job's boundary the only valid action is "keep" (the choices just held), so the mask is
        not even computed there; at boundaries the env's mask decides.
        """
        total = 0.0
        if not self.decision_steps:
            return obs, total, False, info
        env = self.dispatch
        keep = None
        while True:
            t = env.slot
            if self._boundary[t]:
                valid = np.flatnonzero(env.action_masks())
                if valid.size != 1:
                    return obs, total, False, info
                action = int(valid[0])
                keep = None
            else:
                if keep is None:
                    keep = env.encode(info["job_modes"], info.get("cap_level", 0))
                action = keep
            obs, _, terminated, truncated, info = self.env.step(action)
            total += self._reward(info)
            if terminated or truncated:
                return obs, total, True, info

    def _prepare_day(self, inst: Instance) -> None:
        """Per-day tables (cached: training days repeat): boundary slots, fixed costs, the forecast."""
        cached = self._days.get(inst.day)
        if cached is None:
            boundary = np.zeros(inst.slots + 1, dtype=bool)
            for job in inst.jobs:
                boundary[: inst.slots: inst.slots_per_segment(job)] = True
            baseline = np.zeros(inst.slots)
            if self.reward_baseline == "fixed" and self.joint:
                baseline = simulate(inst, fixed_schedule(inst)).flows.decision_cost_usd
            information = self.dispatch.information
            extra = np.concatenate([day_forecast_table(view, information) for view in inst.site_views],
                                   axis=1) if self.hourly_forecast else None
            div = self.reward_scale_usd
            scale = float(np.mean([day_price_scale(view, information) for view in inst.site_views]))
            if self.reward_day_scaled:
                div *= scale / REWARD_REFERENCE_PRICE_USD_PER_MWH
            plan = self._plan_tables(inst, scale) if self.forecast_plan else None
            cached = self._days[inst.day] = (boundary.tolist(), baseline, extra, div, plan)
        self._boundary, self._baseline_cost, self._extra, self._reward_div, self._plan = cached
        self._partial = []
        self._joint_mask = None

    def _plan_tables(self, inst: Instance, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(plan table, realised error table, planned progress (J, T + 1), the plan's local choice (J, T + 1))."""
        table, progress, local = self.plans.tables(inst, self.plan)
        return table, realised_error_table(inst, scale), progress, local

    def _plan_observation(self, k: int) -> list[np.ndarray]:
        """The forecast plan's part of the observation at the current slot (``k``: the job choosing)."""
        assert self._plan is not None
        table, errors, progress, local = self._plan
        env = self.dispatch
        t = min(env.slot, table.shape[0] - 1)
        tranche = np.array([job.tranche_tokens for job in self._template.jobs])
        actual = np.where(tranche > 0, env.tokens() / np.where(tranche > 0, tranche, 1.0), 1.0)
        gap = np.clip(actual - progress[:, t], -PROGRESS_GAP_CLIP, PROGRESS_GAP_CLIP)
        parts = [table[t], errors[t], gap]
        if self.factored_actions:
            onehot = np.zeros(max(self._sizes), dtype=np.float32)
            if k < len(self._template.jobs) and env.slot < env.n_slots:  # a job's sub-step (not the cap level's)
                onehot[local[k, env.slot]] = 1.0
            parts.append(onehot)
        return parts

    def _choice_features(self, j: int) -> np.ndarray:
        """For the job choosing now, per local choice c: (tokens c makes in this segment, restart paid) /
        missing tokens, and missing tokens / (tokens c makes if held for the rest of the day); both clipped
        to [0, 4] (pause: 0 and 4)."""
        width = max(self._sizes)
        out = np.zeros(2 * width, dtype=np.float32)
        env = self.dispatch
        if j >= len(self._template.jobs) or env.slot >= env.n_slots:  # the cap level's sub-step: none
            return out
        n = self._sizes[j]
        inst, job = self._template, self._template.jobs[j]
        missing = job.tranche_tokens - float(env.tokens()[j])
        current = self._current[j] + 1
        restarted = np.arange(n) != current
        seg_tokens = self._tokens_per_h[j] * segment_productive_hours(inst, job, restarted)
        rest_tokens = self._tokens_per_h[j] * ((env.n_slots - env.slot) * inst.slot_hours - job.restart_hours)
        rest_tokens[current] += self._tokens_per_h[j][current] * job.restart_hours
        if missing <= 0:
            out[:n] = CHOICE_FEATURE_CLIP
            out[width: width + n] = 0.0
            return out
        out[:n] = np.minimum(seg_tokens / missing, CHOICE_FEATURE_CLIP)
        with np.errstate(divide="ignore"):
            out[width: width + n] = np.minimum(np.where(rest_tokens > 0, missing / np.maximum(rest_tokens, 1e-9),
                                                        CHOICE_FEATURE_CLIP), CHOICE_FEATURE_CLIP)
        return out

    def _observation(self, obs: np.ndarray) -> np.ndarray:
        parts = [obs]
        if self._extra is not None:
            parts.append(self._extra[min(self.dispatch.slot, self._extra.shape[0] - 1)])
        if self.factored_actions:
            J = len(self._sizes)
            sub = np.zeros((J, 4), dtype=np.float32)
            k = len(self._partial)
            if k < J and self.dispatch.slot < self.dispatch.n_slots:
                sub[k, 0] = 1.0
            for j, c in enumerate(self._partial):
                sub[j, 1:] = (1.0, c / max(self._sizes[j] - 1, 1), self._gpu_share[j][c])
            parts.append(sub.ravel())
            if self.choice_features:
                parts.append(self._choice_features(k))
        if self.forecast_plan:
            parts += self._plan_observation(len(self._partial))
        return np.concatenate(parts).astype(np.float32)


def day_price_scale(inst: Instance, information: str = "perfect") -> float:
    """The episode's price scale: mean |λ| of the outlook at slot 0 (the whole instance with ``perfect``; the
    first day's forecast and the later days' outlook with ``dayahead``), at least $5/MWh."""
    price, _ = outlook(inst, 0, information)
    return max(float(np.mean(np.abs(price))), PRICE_SCALE_FLOOR_USD_PER_MWH)


def day_forecast_table(inst: Instance, information: str = "perfect") -> np.ndarray:
    """Per slot t = 0..T: the hourly features of the 24 hours from slot t, as known at slot t.

    Hour k (k = 0..23) covers slots t + k·s .. t + (k+1)·s − 1 (s slots per hour); values are means over the
    slots inside the instance of :func:`~aidc_env.information.outlook` at slot t; a window wholly past the
    end is 0 with validity 0.
    """
    T = inst.slots
    s = max(1, round(1.0 / inst.slot_hours))
    scale = day_price_scale(inst, information)
    rated = inst.rated_facility_mw
    pad = HOURS_AHEAD * s + 1
    inside = np.concatenate([np.ones(T), np.zeros(pad)])
    table = np.zeros((T + 1, 3 * HOURS_AHEAD + 1), dtype=np.float32)
    offsets = np.arange(HOURS_AHEAD)[None, :, None] * s + np.arange(s)[None, None, :]
    for t0, t1, price_usd, renewable_mw in outlook_blocks(inst, information):
        price = np.clip(price_usd / scale, -SCALED_PRICE_CLIP, SCALED_PRICE_CLIP)
        ren = renewable_mw / rated if rated > 0 else np.zeros(T)
        price_pad = np.concatenate([price, np.zeros(pad)])
        ren_pad = np.concatenate([ren, np.zeros(pad)])
        idx = np.arange(t0, t1)[:, None, None] + offsets
        count = inside[idx].sum(axis=2)
        valid = count > 0
        denom = np.where(valid, count, 1.0)
        table[t0:t1, :HOURS_AHEAD] = (price_pad[idx] * inside[idx]).sum(axis=2) / denom
        table[t0:t1, HOURS_AHEAD: 2 * HOURS_AHEAD] = (ren_pad[idx] * inside[idx]).sum(axis=2) / denom
        table[t0:t1, 2 * HOURS_AHEAD: 3 * HOURS_AHEAD] = valid
    table[:, -1] = min(scale / 100.0, SCALED_PRICE_CLIP)
    return table


def wrap_env(env: gym.Env, config: PPOConfig, plans: ForecastPlans | None = None) -> AgentSteps:
    """The wrapper of a training or evaluation env, as the config says (``plans``: a shared plan cache)."""
    wrapper = AgentSteps(env, decision_steps=config.decision_steps, hourly_forecast=config.hourly_forecast,
                         reward_baseline=config.reward_baseline, reward_scale_usd=config.reward_scale_usd,
                         reward_day_scaled=config.reward_day_scaled, factored_actions=config.factored_actions,
                         choice_features=config.choice_features, forecast_plan=config.forecast_plan, plan=config.plan)
    if plans is not None:
        wrapper.plans = plans
    return wrapper


__all__ = ["AgentSteps", "day_forecast_table", "day_price_scale", "wrap_env"]
