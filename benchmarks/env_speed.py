"""Microseconds per agent step of every registered env id beside CartPole-v1, in the same run.

Each id of :data:`aidc_env.ENV_VARIANTS` is made with ``gymnasium.make`` and its default configuration, and stepped
with masked random actions: ``action_masks()`` every agent step (in the env's time: an agent calls it every step) and
a valid action drawn uniformly. CartPole-v1 (``gymnasium.make``: the same wrapper stack) draws
``action_space.sample()``. Both reset at the end of each episode, and the resets are in the time per step (their
cost amortised over the episode's agent steps); the cost of one reset is also timed on its own (``reset_us``).
Rounds alternate between the env and CartPole, so that both see the same machine load: the ratio is the median of
the rounds' ratios. Goal: every id within :data:`GOAL_RATIO` × CartPole per agent step.

    python benchmarks/env_speed.py [--steps 20000] [--rounds 10] [--seed 0] [--ids ID ...] [--json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aidc_env import ENV_VARIANTS  # noqa: E402
from aidc_env.env import FLEET_ENV_ID  # noqa: E402
from aidc_env.io import dumps_json  # noqa: E402

GOAL_RATIO = FLEET_GOAL_RATIO = 5.0
"""Every registered id: its time per agent step (mask, step, resets amortised) ≤ 5 × CartPole-v1's."""


class _Stepper:
    """Agent steps of an env made with ``gymnasium.make`` (masked random, or sampled), resets included."""

    def __init__(self, env: gym.Env, seed: int, masked: bool):
        self.env, self.masked = env, masked
        self.rng = np.random.default_rng(seed)
        self.episodes = 0
        env.reset(seed=seed)
        env.action_space.seed(seed)

    def run(self, steps: int) -> float:
        """µs per agent step over ``steps`` steps."""
        env, unwrapped, rng = self.env, self.env.unwrapped, self.rng
        start = time.perf_counter()
        for _ in range(steps):
            if self.masked:
                valid = np.flatnonzero(unwrapped.action_masks())
                action = valid[rng.integers(valid.size)]
            else:
                action = env.action_space.sample()
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
                self.episodes += 1
        return (time.perf_counter() - start) / steps * 1e6


def time_env(env: gym.Env, steps: int, seed: int, rounds: int = 10) -> dict[str, Any]:
    """µs per agent step of ``env`` and of CartPole-v1 in alternating rounds (medians, and the median of the rounds'
    ratios), the µs of one reset, the agent steps per episode and the env's action count."""
    agent, cartpole = _Stepper(env, seed, True), _Stepper(gym.make("CartPole-v1"), seed, False)
    per_round = max(steps // rounds, 1)
    agent.run(min(per_round, 200))  # warm-up: compiled kernels loaded, caches filled
    agent.episodes = 0
    times = [(agent.run(per_round), cartpole.run(per_round)) for _ in range(rounds)]
    start = time.perf_counter()
    for _ in range(20):
        env.reset()
    reset_us = (time.perf_counter() - start) / 20 * 1e6
    return {"us_per_step": float(np.median([e for e, _ in times])),
            "cartpole_us_per_step": float(np.median([c for _, c in times])),
            "ratio": float(np.median([e / c for e, c in times])), "reset_us": reset_us,
            "steps_per_episode": per_round * rounds / max(agent.episodes, 1), "actions": env.unwrapped.n_actions,
            "jobs": env.unwrapped.n_jobs, "memory_mb": _env_memory_mb(env.unwrapped)}


def time_fleet(steps: int, seed: int, case: Any, profiles: str | None = None,
               overrides: dict[str, Any] | None = None, rounds: int = 10) -> dict[str, Any]:
    """:func:`time_env` of ``FleetDispatch-v0`` on ``case`` (a case name, with ``profiles`` and ``overrides``, or
    instances)."""
    kwargs = {"profiles": profiles, "overrides": overrides or None} if isinstance(case, str) else {}
    return time_env(gym.make(FLEET_ENV_ID, case=case, **kwargs), steps, seed, rounds)


def _env_memory_mb(env: Any) -> float:
    """Size of the env's numpy state and tables (MB): a lower bound of its memory, without Python overheads."""
    seen: set[int] = set()

    def size(value: Any) -> int:
        if id(value) in seen:
            return 0
        seen.add(id(value))
        if isinstance(value, np.ndarray):
            return value.nbytes
        if isinstance(value, (list, tuple, dict)):
            return sum(size(v) for v in (value.values() if isinstance(value, dict) else value))
        return 0

    plan = getattr(env.dynamics, "_plan", None)
    return sum(size(v) for obj in (env.dynamics, plan) if obj is not None for v in vars(obj).values()) / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="agent steps per id (and CartPole steps)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ids", nargs="+", default=list(ENV_VARIANTS), choices=list(ENV_VARIANTS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = {env_id: time_env(gym.make(env_id), args.steps, args.seed, args.rounds) for env_id in args.ids}
    result = {"steps": args.steps, "rounds": args.rounds, "goal_ratio": GOAL_RATIO, "ids": rows,
              "goal_met": all(r["ratio"] <= GOAL_RATIO for r in rows.values()), "load_average": list(os.getloadavg())}
    if args.json:
        print(dumps_json(result, indent=1))
        return 0
    print("| id | actions | agent steps / episode | µs / agent step | steps/s | CartPole µs | ratio | reset µs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for env_id, r in rows.items():
        print(f"| {env_id} | {r['actions']} | {r['steps_per_episode']:.0f} | {r['us_per_step']:.1f} | "
              f"{1e6 / r['us_per_step']:,.0f} | {r['cartpole_us_per_step']:.1f} | {r['ratio']:.2f} | "
              f"{r['reset_us']:.0f} |")
    print(f"goal <= {GOAL_RATIO:g} x CartPole per agent step (resets amortised): "
          f"{'met' if result['goal_met'] else 'NOT met'}; load average {result['load_average'][0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
