"""Every policy as one call: instance → schedule (scored afterwards by the simulator).

Policies: ``oracle`` (the exact MILP), ``mpc`` (rolling-horizon oracle with forecasts), ``fixed``
(continuous baseline modes), ``greedy`` (threshold rule), ``random`` (random masked actions in the
env, safety mask on) and ``ppo`` (a trained MaskablePPO model acting in the env).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.mpc import ForecastNoise, mpc_schedule
from aidc_env.baselines import fixed_schedule, greedy_schedule
from aidc_env.instance import Instance

POLICY_NAMES = ("oracle", "mpc", "fixed", "greedy", "random", "ppo")
HEAVY_POLICIES = ("oracle", "mpc")
"""Policies that solve MILPs; evaluate.py runs them in worker processes."""


@dataclass
class PolicySettings:
    """Settings shared by the policies of one evaluation."""

    time_limit_s: float = 120.0
    mip_gap: float = 1e-4
    mpc_noise: ForecastNoise = field(default_factory=ForecastNoise)
    seed: int = 0
    model_path: str | None = None
    _model: Any = field(default=None, repr=False)

    def ppo_model(self) -> Any:
        if self._model is None:
            from agents.ppo import load_model

            if self.model_path is None:
                raise FileNotFoundError("no PPO model given")
            self._model = load_model(self.model_path)
        return self._model


def run_policy(name: str, inst: Instance, settings: PolicySettings) -> tuple[list[list[int]], dict[str, Any]]:
    """The policy's schedule for a day, plus facts about how it was made (solver status, gap, ...)."""
    if name == "fixed":
        return fixed_schedule(inst), {}
    if name == "greedy":
        return greedy_schedule(inst), {}
    if name == "oracle":
        from oracle import solve

        result = solve(inst, time_limit_s=settings.time_limit_s, mip_gap=settings.mip_gap)
        info = {"status": result.status, "proof": result.proof, "gap": result.gap,
                "solve_seconds": result.solve_seconds, "reason": result.reason}
        if result.schedule is None:
            raise RuntimeError(f"oracle found no schedule on {inst.day}: {result.status} {result.reason}")
        return [list(s) for s in result.schedule], info
    if name == "mpc":
        return mpc_schedule(inst, noise=settings.mpc_noise, seed=settings.seed,
                            time_limit_s=settings.time_limit_s, mip_gap=settings.mip_gap), {}
    if name == "random":
        from agents.ppo import rollout_schedule

        rng = np.random.default_rng(settings.seed)
        return rollout_schedule(inst, lambda obs, mask: int(rng.choice(np.flatnonzero(mask)))), {}
    if name == "ppo":
        from agents.ppo import ppo_schedule

        return ppo_schedule(settings.ppo_model(), inst), {}
    raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICY_NAMES)}")
