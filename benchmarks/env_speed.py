"""Microseconds per step of CheckpointDispatch-v0 and FleetDispatch-v0 beside CartPole-v1, in the same run.

The env runs the 2048 case with masked random actions: ``action_masks()`` is computed every step and a
valid action is drawn uniformly from it. CartPole-v1 draws ``action_space.sample()``. Both are made with
``gymnasium.make`` (the same wrapper stack) and reset at the end of each episode (resets included).
Goal (issue "Gymnasium environment"): the env's time per step ≤ 3 × CartPole's.

``--fleet-case fleet`` (default) also times the per-job fleet env (:mod:`aidc_env.fleet_env`, 12 jobs) per agent
step (one job's choice; ``action_masks()`` every step, a valid action drawn uniformly), alternating rounds with
CartPole-v1 (the median of the rounds' ratios: robust to a shared machine's changing load). Goal (issue 13):
≤ 5 × CartPole's. ``--fleet-case none`` skips it.

``--information dayahead`` also times the env with ``information="dayahead"`` (forecast observations) and
reports its ratio to the perfect-information env. For speed only, the instances carry a placeholder forecast
(their own truth): the step does the same work whatever the forecast's values.

    python benchmarks/env_speed.py [--steps 20000] [--case 2048] [--profiles CSV] [--segments K] [--gpus N]
                                   [--horizon-days D] [--information perfect|dayahead] [--json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import dataclasses

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aidc_env.case import add_case_arguments, build_instances, case_overrides  # noqa: E402
from aidc_env.information import INFORMATION, Forecast  # noqa: E402
from aidc_env.env import ENV_ID, FLEET_ENV_ID  # noqa: E402
from aidc_env.io import dumps_json  # noqa: E402

GOAL_RATIO = 3.0
FLEET_GOAL_RATIO = 5.0
"""Issue 13: the fleet env's time per agent step ≤ 5 × CartPole's at 12 jobs."""


def time_cartpole(steps: int, seed: int) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    env.action_space.seed(seed)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    return (time.perf_counter() - start) / steps * 1e6


def with_placeholder_forecasts(case: str, profiles: str | None, overrides: dict[str, Any]) -> list:
    """The case's instances, each carrying its own truth as a forecast (speed measurements only)."""
    instances = build_instances(case, profiles=profiles, **overrides).values()
    return [dataclasses.replace(inst, forecast=Forecast(
        price_usd_per_mwh=inst.price_usd_per_mwh, renewable_shape=inst.renewable_shape,
        price_scenarios_usd_per_mwh=np.zeros((0, inst.slots)), renewable_shape_scenarios=np.zeros((0, inst.slots)),
        source="placeholder: the truth (benchmark)")) for inst in instances]


def time_dispatch(steps: int, seed: int, profiles: str | None, case: str, safety: bool,
                  overrides: dict[str, Any] | None = None, information: str = "perfect") -> dict[str, float]:
    if information == "dayahead":
        env = gym.make(ENV_ID, case=with_placeholder_forecasts(case, profiles, overrides or {}),
                       safety_mask=safety, information=information)
    else:
        env = gym.make(ENV_ID, case=case, profiles=profiles, safety_mask=safety, overrides=overrides or None)
    unwrapped = env.unwrapped
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    mask_time = 0.0
    start = time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        mask = unwrapped.action_masks()
        mask_time += time.perf_counter() - t0
        valid = np.flatnonzero(mask)
        action = valid[rng.integers(valid.size)]
        _, _, terminated, truncated, info = env.step(action)
        assert not info["invalid_action"]
        if terminated or truncated:
            env.reset()
    total = (time.perf_counter() - start) / steps * 1e6
    return {"us_per_step": total, "mask_us_per_step": mask_time / steps * 1e6, "actions": unwrapped.n_actions}


class _Stepper:
    """Masked random agent steps of an env made with ``gymnasium.make`` (resets included), timed in rounds."""

    def __init__(self, env: gym.Env, seed: int, masked: bool):
        self.env, self.masked = env, masked
        self.rng = np.random.default_rng(seed)
        env.reset(seed=seed)
        env.action_space.seed(seed)

    def run(self, steps: int) -> float:
        env, unwrapped = self.env, self.env.unwrapped
        start = time.perf_counter()
        for _ in range(steps):
            if self.masked:
                valid = np.flatnonzero(unwrapped.action_masks())
                action = valid[self.rng.integers(valid.size)]
            else:
                action = env.action_space.sample()
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        return (time.perf_counter() - start) / steps * 1e6


def time_fleet(steps: int, seed: int, case: Any, profiles: str | None = None,
               overrides: dict[str, Any] | None = None, rounds: int = 10) -> dict[str, float]:
    """µs per agent step of the fleet env and of CartPole-v1, timed in alternating rounds (the machine's load
    changes over a run; each round's ratio compares like with like). Returns the medians and the median ratio."""
    env = gym.make(FLEET_ENV_ID, case=case, profiles=profiles, overrides=overrides or None) if isinstance(
        case, str) else gym.make(FLEET_ENV_ID, case=case)
    fleet, cartpole = _Stepper(env, seed, True), _Stepper(gym.make("CartPole-v1"), seed, False)
    per_round = max(steps // rounds, 1)
    times = [(fleet.run(per_round), cartpole.run(per_round)) for _ in range(rounds)]
    return {"us_per_step": float(np.median([f for f, _ in times])),
            "cartpole_us_per_step": float(np.median([c for _, c in times])),
            "ratio": float(np.median([f / c for f, c in times])),
            "actions": env.unwrapped.n_actions, "jobs": env.unwrapped.n_jobs,
            "memory_mb": _env_memory_mb(env.unwrapped)}


def _env_memory_mb(env: Any) -> float:
    """Size of the env's numpy state and tables (MB): a lower bound of its memory, without Python overheads."""
    seen: set[int] = set()
    total = 0

    def visit(value: Any) -> None:
        nonlocal total
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, np.ndarray):
            total += value.nbytes
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)

    for value in vars(env).values():
        visit(value)
    for value in vars(env._plan).values():
        visit(value)
    return total / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    add_case_arguments(parser, day=False)
    parser.add_argument("--information", choices=INFORMATION, default="perfect",
                        help="with dayahead, also time the env on forecast observations")
    parser.add_argument("--fleet-case", default="fleet", help="case of the fleet env timing (none: skip it)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cartpole = time_cartpole(args.steps, args.seed)
    overrides = case_overrides(args)
    dispatch = time_dispatch(args.steps, args.seed, args.profiles, args.case, True, overrides)
    plain = time_dispatch(args.steps, args.seed, args.profiles, args.case, False, overrides)
    ratio = dispatch["us_per_step"] / cartpole
    dayahead = (time_dispatch(args.steps, args.seed, args.profiles, args.case, True, overrides, "dayahead")
                if args.information == "dayahead" else None)
    result = {
        "steps": args.steps,
        "overrides": overrides,
        "cartpole_us_per_step": cartpole,
        "env_us_per_step": dispatch["us_per_step"],
        "env_mask_us_per_step": dispatch["mask_us_per_step"],
        "env_plain_mask_us_per_step": plain["us_per_step"],
        "joint_actions": dispatch["actions"],
        "ratio": ratio,
        "goal_ratio": GOAL_RATIO,
        "goal_met": ratio <= GOAL_RATIO,
    }
    if dayahead is not None:
        result["env_dayahead_us_per_step"] = dayahead["us_per_step"]
        result["dayahead_vs_perfect"] = dayahead["us_per_step"] / dispatch["us_per_step"]
        result["dayahead_ratio"] = dayahead["us_per_step"] / cartpole
    if args.fleet_case != "none":
        fleet = time_fleet(args.steps, args.seed, args.fleet_case, args.profiles)
        result.update({"fleet_case": args.fleet_case, "fleet_jobs": fleet["jobs"], "fleet_actions": fleet["actions"],
                       "fleet_us_per_agent_step": fleet["us_per_step"],
                       "fleet_cartpole_us_per_step": fleet["cartpole_us_per_step"],
                       "fleet_ratio": fleet["ratio"], "fleet_goal_ratio": FLEET_GOAL_RATIO,
                       "fleet_goal_met": fleet["ratio"] <= FLEET_GOAL_RATIO})
    result["load_average"] = list(os.getloadavg())
    if args.json:
        print(dumps_json(result, indent=1))
    else:
        print(f"CartPole-v1                          {cartpole:8.1f} us/step")
        print(f"{ENV_ID} (safety mask) {dispatch['us_per_step']:8.1f} us/step "
              f"(of which action_masks {dispatch['mask_us_per_step']:.1f} us), {dispatch['actions']} joint actions")
        print(f"{ENV_ID} (plain mask)  {plain['us_per_step']:8.1f} us/step")
        if dayahead is not None:
            print(f"{ENV_ID} (dayahead)    {dayahead['us_per_step']:8.1f} us/step "
                  f"({result['dayahead_vs_perfect']:.2f} x perfect, {result['dayahead_ratio']:.2f} x CartPole)")
        print(f"ratio {ratio:.2f} x CartPole (goal <= {GOAL_RATIO:g} x): {'met' if ratio <= GOAL_RATIO else 'NOT met'}")
        if "fleet_ratio" in result:
            print(f"{FLEET_ENV_ID} ({result['fleet_case']}, {result['fleet_jobs']} jobs, Discrete "
                  f"{result['fleet_actions']}) {result['fleet_us_per_agent_step']:8.1f} us/agent step: "
                  f"{result['fleet_ratio']:.2f} x CartPole (goal <= {FLEET_GOAL_RATIO:g} x): "
                  f"{'met' if result['fleet_goal_met'] else 'NOT met'}")
        print(f"load average {result['load_average'][0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
