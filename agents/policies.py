"""Every policy as one call: instance → schedule (scored afterwards by the simulator on the truth).

Policies (docs/uncertainty.md), each using only what is known at its decision time under
``PolicySettings.information`` (read through :mod:`aidc_env.information`):

- ``hindsight`` (alias ``oracle``): the exact oracle on the truth, the perfect-information bound;
- ``mpc``: the oracle re-solved at every re-planning point on the point forecast (:mod:`agents.mpc`);
- ``smpc``: two-stage stochastic MPC over the forecast's scenarios (:mod:`agents.smpc`);
- ``dayahead-plan``: the oracle's plan made once at the first day's issue time from the persistence price and
  the real renewable forecast, never revised (the naive operator);
- ``forecast-plan``: the same plan from the forecaster's price (on a one-day instance it equals ``mpc``);
- ``greedy``: the threshold rule on the view at slot 0 (the truth only with ``information="perfect"``);
- ``fixed``: continuous baseline modes (reads nothing);
- ``mpc-true-dayahead``, ``mpc-true-price``: ``mpc`` on an information relaxation (:data:`RELAXATIONS`,
  :func:`aidc_env.dayahead.revealed`): the issued days' prices, or every price, replaced by the truth. Not policies
  an operator can run: they measure what a perfect forecast of the price would be worth to ``mpc``
  (``--information dayahead`` only);
- ``random`` (random masked actions in the env) and ``ppo`` (a trained MaskablePPO model in the env);
- for grid calls (:mod:`agents.calls`): ``mpc-notice`` (the oracle re-solved at each call's notice, the past fixed) and
  ``call-rule`` (the demonstration's rule: caps first, then pauses, most tolerant tier first); ``fixed`` is the
  operator who does not respond, ``hindsight`` the one who knows every call in advance.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.calls import mpc_notice_schedule, rule_schedule
from agents.mpc import ForecastNoise, mpc_schedule
from agents.open_loop import dayahead_plan_schedule, forecast_plan_schedule, greedy_view_schedule, oracle_schedule
from agents.smpc import DEFAULT_THRESHOLD_USD, smpc_schedule
from aidc_env.baselines import fixed_schedule
from aidc_env.dayahead import revealed
from aidc_env.errors import require
from aidc_env.information import INFORMATION
from aidc_env.instance import Instance
from aidc_env.schedule import Schedule, validate_schedule

RELAXATIONS = {"mpc-true-dayahead": "dayahead", "mpc-true-price": "all"}
"""``mpc`` on a relaxation of the price forecast: policy → what :func:`aidc_env.dayahead.revealed` makes true."""
POLICY_NAMES = ("hindsight", "oracle", "mpc", "smpc", "dayahead-plan", "forecast-plan", "fixed", "greedy", "random",
                "ppo", "mpc-notice", "call-rule", *RELAXATIONS)
HEAVY_POLICIES = ("hindsight", "oracle", "mpc", "smpc", "dayahead-plan", "forecast-plan", "mpc-notice", *RELAXATIONS)
"""Policies that solve MILPs; evaluate.py runs them in worker processes."""


@dataclass
class PolicySettings:
    """Settings shared by the policies of one evaluation."""

    time_limit_s: float = 120.0
    mip_gap: float = 1e-4
    information: str = "perfect"
    """What the causal policies know: ``perfect`` (the truth) or ``dayahead`` (issued forecasts)."""
    mpc_noise: ForecastNoise = field(default_factory=ForecastNoise)
    """Synthetic error on the truth for ``mpc`` with ``information="perfect"`` (a sensitivity tool)."""
    smpc_scenarios: int | None = None
    """``smpc`` uses the forecast's first S scenarios (None: all)."""
    smpc_threshold_usd: float = DEFAULT_THRESHOLD_USD
    """``smpc`` departs from MPC's plan only for an expected saving above this ($ per stage; inf: never, i.e. MPC)."""
    seed: int = 0
    model_path: str | None = None
    _model: Any = field(default=None, repr=False)
    _oracle: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.information not in INFORMATION:
            raise ValueError(f"information must be one of {', '.join(INFORMATION)}, got {self.information!r}")

    def __getstate__(self) -> dict[str, Any]:
        """Pickled for worker processes without the oracle's cache (built models hold solver handles)."""
        return {**self.__dict__, "_oracle": None}

    def ppo_model(self) -> Any:
        if self._model is None:
            from agents.ppo import load_model

            if self.model_path is None:
                raise FileNotFoundError("no PPO model given")
            self._model = load_model(self.model_path)
        return self._model

    def oracle(self) -> Any:
        """One :class:`oracle.rolling.RollingOracle` per settings: built models are reused across days."""
        if self._oracle is None:
            from oracle.rolling import RollingOracle

            self._oracle = RollingOracle(time_limit_s=self.time_limit_s, mip_gap=self.mip_gap)
        return self._oracle


def run_policy(name: str, inst: Instance, settings: PolicySettings) -> tuple[Schedule, dict[str, Any]]:
    """The policy's schedule for an instance, plus facts about how it was made (solve times, wall time, ...)."""
    start = time.perf_counter()
    schedule, info = _schedule(name, inst, settings)
    return validate_schedule(inst, schedule), {**info, "wall_seconds": time.perf_counter() - start}


def _schedule(name: str, inst: Instance, settings: PolicySettings) -> tuple[Schedule | list, dict[str, Any]]:
    if name == "fixed":
        return fixed_schedule(inst), {}
    if name == "greedy":
        return greedy_view_schedule(inst, settings.information), {}
    if name == "call-rule":
        return rule_schedule(inst), {}
    if name == "mpc-notice":
        log: list[dict] = []
        schedule = mpc_notice_schedule(inst, settings.time_limit_s, settings.mip_gap, log)
        return schedule, {"solves": len(log), "solve_seconds": float(sum(e["seconds"] for e in log)),
                          "solves_optimal": sum(e["status"] == "optimal" for e in log), "solve_log": log}
    if name in HEAVY_POLICIES:
        oracle = settings.oracle()
        first, info = len(oracle.seconds), {}
        if name in ("hindsight", "oracle"):  # the oracle on the truth: the perfect-information bound
            schedule, result = oracle_schedule(inst, oracle)
            info = {"status": result.status, "proof": result.proof, "gap": result.gap, "reason": result.reason}
        elif name == "mpc":
            schedule = mpc_schedule(inst, settings.information, oracle=oracle, noise=settings.mpc_noise,
                                    seed=settings.seed)
        elif name in RELAXATIONS:
            require(settings.information == "dayahead", "policies",
                    f"{name} relaxes the day-ahead forecast: it needs information='dayahead'")
            schedule = mpc_schedule(revealed(inst, RELAXATIONS[name]), "dayahead", oracle=oracle, seed=settings.seed)
        elif name == "smpc":
            log: list[dict] = []
            schedule = smpc_schedule(inst, settings.information, oracle=oracle, n_scenarios=settings.smpc_scenarios,
                                     threshold_usd=settings.smpc_threshold_usd, log=log)
            info = {"replanning_points": len(log), "departures": sum(e["departed"] for e in log),
                    "expected_saving_usd": float(sum(e["mpc_expected_usd"] - e["best_expected_usd"] for e in log
                                                     if e["departed"])), "log": log}
        elif name == "dayahead-plan":
            schedule = dayahead_plan_schedule(inst, oracle, settings.information)
        else:
            schedule = forecast_plan_schedule(inst, oracle, settings.information)
        seconds, log = oracle.seconds[first:], oracle.log[first:]
        return schedule, {**info, "solves": len(seconds), "solve_seconds": float(np.sum(seconds)),
                          "median_solve_seconds": float(np.median(seconds)) if seconds else 0.0,
                          "max_solve_seconds": float(np.max(seconds)) if seconds else 0.0,
                          "solves_optimal": sum(entry["status"] == "optimal" for entry in log),
                          "solve_log": [dict(entry) for entry in log]}
    if name == "random":
        from agents.ppo import rollout_schedule

        rng = np.random.default_rng(settings.seed)
        return rollout_schedule(inst, lambda obs, mask: int(rng.choice(np.flatnonzero(mask)))), {}
    if name == "ppo":
        from agents.plan_features import ForecastPlans
        from agents.ppo import ppo_schedule

        # A model observing the forecast plan solves it with the settings' oracle (the forecast-plan row's); a model
        # observing the issue plans (PPOConfig.plan) re-solves at each forecast issue as mpc does.
        return ppo_schedule(settings.ppo_model(), inst, ForecastPlans(settings.oracle())), {}
    raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICY_NAMES)}")
