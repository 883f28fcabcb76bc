"""The PPO agent's view of the fleet env (:class:`FleetSteps`, a wrapper; the env is unchanged).

The per-job env (:class:`aidc_env.env.DispatchEnv`, ``action="per_job"``) already asks one job per agent step and plays the
forced choices itself, so the wrapper only adds what :class:`agents.decision_steps.DecisionSteps` adds to the
joint env's view:

- **an hourly forecast** (``hourly_forecast``): the 24 hours from the current slot at hourly resolution, day-scaled
  prices, renewable shares, validity flags and the price scale (:func:`agents.decision_steps.day_forecast_table`,
  read through :func:`aidc_env.information.outlook` with the env's ``information``);
- **the reward as a saving versus fixed** (``reward_baseline="fixed"``): the env's own ``reward_baseline``, which
  adds back the fixed schedule's objective of the slots it pays (a function of the day and the slot only).

``reward_day_scaled`` does not apply: with an idle-GPU value the objective is not proportional to the price level.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from agents.decision_steps import HOURS_AHEAD, SCALED_PRICE_CLIP, day_forecast_table
from agents.ppo_config import PPOConfig
from aidc_env.env import DispatchEnv
from aidc_env.instance import Instance
from aidc_env.env.observation import renewable_share_high

ENVS = ("auto", "fleet", "joint")
"""``PPOConfig.env``: the fleet env for instances with fleet workloads and the joint env otherwise (auto), or
one of them for every case (the per-job env accepts the 2048 case, so both are comparable)."""


def uses_fleet_env(config: PPOConfig, instances: Sequence[Instance]) -> bool:
    """Whether a run of ``config`` on ``instances`` uses the per-job fleet env (else the joint env)."""
    if config.env == "auto":
        return any(inst.has_fleet_workloads for inst in instances)
    return config.env == "fleet"


def fleet_env(config: PPOConfig, instances: Sequence[Instance]) -> DispatchEnv:
    """The fleet env of a run on ``instances`` (its behaviour kwargs, reward as the config says)."""
    kwargs = config.behaviour_env_kwargs()
    kwargs["reward_scale"] = config.reward_scale_usd
    kwargs["reward_baseline"] = "fixed" if config.reward_baseline == "fixed" else None
    kwargs["reward_credit"] = config.reward_credit
    return DispatchEnv(case=list(instances), days=[inst.day for inst in instances], action="per_job", **kwargs)


class FleetSteps(gym.Wrapper):
    """The fleet env with the hourly forecast appended to its observation (see the module docstring).

    Exposes ``action_masks()`` (the env's) for MaskablePPO.
    """

    def __init__(self, env: gym.Env, *, hourly_forecast: bool = True):
        super().__init__(env)
        self.hourly_forecast = bool(hourly_forecast)
        base: spaces.Box = env.observation_space  # type: ignore[assignment]
        low, high = [base.low], [base.high]
        if self.hourly_forecast:
            ren_high = renewable_share_high(self.fleet.instance(self.fleet.days[0]))
            low += [np.full(HOURS_AHEAD, -SCALED_PRICE_CLIP), np.zeros(2 * HOURS_AHEAD), [0.0]]
            high += [np.full(HOURS_AHEAD, SCALED_PRICE_CLIP), np.full(HOURS_AHEAD, ren_high), np.ones(HOURS_AHEAD),
                     [SCALED_PRICE_CLIP]]
        self.observation_space = spaces.Box(low=np.concatenate(low).astype(np.float32),
                                            high=np.concatenate(high).astype(np.float32), dtype=np.float32)
        self._tables: dict[str, np.ndarray] = {}
        self._table = np.zeros((0, 0), dtype=np.float32)

    @property
    def fleet(self) -> DispatchEnv:
        """The raw env."""
        return self.env.unwrapped  # type: ignore[return-value]

    def action_masks(self) -> np.ndarray:
        return self.fleet.action_masks()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        if self.hourly_forecast:
            inst = self.fleet.instance()
            table = self._tables.get(inst.day)
            if table is None:
                table = self._tables[inst.day] = day_forecast_table(inst, self.fleet.information)
            self._table = table
        return self._observation(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._observation(obs), reward, terminated, truncated, info

    def _observation(self, obs: np.ndarray) -> np.ndarray:
        if not self.hourly_forecast:
            return obs
        high = self.observation_space.high[obs.size:]
        return np.concatenate([obs, np.minimum(self._table[self.fleet.slot], high)]).astype(np.float32)


def wrap_fleet(env: DispatchEnv, config: PPOConfig) -> FleetSteps:
    """The wrapper of a fleet training or evaluation env, as the config says."""
    return FleetSteps(env, hourly_forecast=config.hourly_forecast)


__all__ = ["ENVS", "FleetSteps", "fleet_env", "uses_fleet_env", "wrap_fleet"]
