"""Warm start of PPO by behaviour cloning: of the forecast plan (``PPOConfig.imitation = "plan"``, with the forecast
plan observed) or of the oracle's schedules (``"oracle"``, the per-job fleet env; :func:`oracle_demonstrations`).

Before PPO's first update, the fresh policy is fitted by behaviour cloning to the forecast plan on the training
days: :func:`plan_demonstrations` follows the plan's choice (the one-hot of :mod:`agents.plan_features`) through the
training wrapper on every training day and records the observations, masks, choices and returns to go;
:func:`pretrain` minimises the choices' negative log-likelihood (masked) plus ``vf_coef`` × the value error on the
returns, so that PPO starts from the plan (what ``forecast-plan`` and, on a day, ``mpc`` apply) with a critic of
it, and learns where to depart from it. The plans read the day-ahead forecasts only: nothing here sees a
held-out day or the truth of a slot before it is realised (the demonstrations' rewards are the env's, paid on
the truth after each step, as PPO's are).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agents.decision_steps import wrap_env
from agents.fleet_steps import fleet_env, wrap_fleet
from agents.plan_features import ForecastPlans
from agents.ppo_config import PPOConfig
from aidc_env.env import CheckpointDispatchEnv
from aidc_env.errors import require
from aidc_env.instance import Instance
from aidc_env.io import read_json_file, write_json
from aidc_env.simulator import simulate

IMITATION_LEARNING_RATE = 1e-3
"""Adam step size of the warm start (a supervised fit: larger than PPO's 3e-4)."""
IMITATION_BATCH_SIZE = 256
"""Minibatch of the warm start (PPO's batch size)."""


@dataclass
class Demonstrations:
    """The plan followed on the training days: one row per agent decision."""

    observations: np.ndarray
    masks: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    """Undiscounted return to go of the wrapper's reward (γ = 1, the default), from this decision on."""


def plan_demonstrations(config: PPOConfig, instances: Sequence[Instance], plans: ForecastPlans) -> Demonstrations:
    """Follow each training instance's forecast plan in the training wrapper; record every decision."""
    env = wrap_env(CheckpointDispatchEnv(case=list(instances), **config.behaviour_env_kwargs()), config, plans)
    width = int(env.action_space.n)
    observations, masks, actions, returns = [], [], [], []
    for inst in instances:
        obs, _ = env.reset(options={"day": inst.day})
        rewards: list[float] = []
        terminated = env.dispatch.slot >= env.dispatch.n_slots
        while not terminated:
            mask = env.action_masks()
            action = int(np.argmax(obs[-width:]))  # the plan's choice of the job choosing (one-hot, last)
            if not mask[action]:
                action = int(np.flatnonzero(mask)[0])
            observations.append(obs)
            masks.append(mask)
            actions.append(action)
            obs, reward, terminated, truncated, _ = env.step(action)
            rewards.append(float(reward))
            terminated = terminated or truncated
        returns += np.cumsum(rewards[::-1])[::-1].tolist()
    return Demonstrations(np.asarray(observations, dtype=np.float32), np.asarray(masks, dtype=bool),
                          np.asarray(actions, dtype=np.int64), np.asarray(returns, dtype=np.float32))


ORACLE_TIME_LIMIT_S = 60.0
"""Seconds per oracle solve of a warm start's day (the fleet oracle closes a fleet day in about 1-17 s on 2 shared
cores, docs/fleet.md); a day whose solve returns no feasible schedule is left out."""
ORACLE_CACHE_VERSION = 1
"""Bumped when the cached files' meaning changes (they are then solved again)."""


def instance_key(inst: Instance) -> str:
    """A short fingerprint of an instance (its exchange JSON): a cached schedule belongs to exactly this instance."""
    return hashlib.sha256(inst.to_json().encode()).hexdigest()[:16]


def reusable(record: Any, time_limit_s: float) -> bool:
    """Whether a cached answer serves a request at ``time_limit_s``: its format is :data:`ORACLE_CACHE_VERSION` and
    it was proven optimal, or solved with at least that time limit (an incumbent found in less time is solved
    again)."""
    if not (isinstance(record, dict) and record.get("version") == ORACLE_CACHE_VERSION):
        return False
    solved_with = record.get("time_limit_s")
    return record.get("status") == "optimal" or (isinstance(solved_with, (int, float))
                                                 and solved_with >= time_limit_s)


def oracle_schedules(instances: Sequence[Instance], cache: str | Path,
                     time_limit_s: float = ORACLE_TIME_LIMIT_S) -> dict[str, list[list[int]]]:
    """The oracle's schedule of every instance (by day), read from ``cache`` (a folder, one JSON per instance keyed
    by :func:`instance_key`) when :func:`reusable`, else solved and written there atomically. Days without a
    feasible schedule are left out (a run warns)."""
    from oracle import solve

    folder = Path(cache)
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[list[int]]] = {}
    for inst in instances:
        path = folder / f"{inst.day}-{instance_key(inst)}.json"
        record = read_json_file(path, "oracle-cache") if path.is_file() else None
        if not reusable(record, time_limit_s):
            result = solve(inst, time_limit_s=time_limit_s)
            record = {"version": ORACLE_CACHE_VERSION, "day": inst.day, "status": result.status,
                      "time_limit_s": time_limit_s,
                      "objective_usd": result.metrics.objective_usd if result.metrics is not None else None,
                      "schedule": [list(map(int, row)) for row in result.schedule] if result.schedule else None}
            write_json(path, record)
        schedule = record.get("schedule")
        if schedule and simulate(inst, schedule).metrics.feasible:
            out[inst.day] = schedule
    return out


def schedule_action(env: gym.Env, schedule: Sequence[Sequence[int]]) -> int:
    """The action of the fleet env's current agent step that follows ``schedule``: the local choice (mode + 1, 0 =
    pause) of the deciding job in the segment of the current slot."""
    fleet = env.unwrapped
    j = fleet.deciding_job
    require(j is not None, "schedule", "the episode is over")
    inst = fleet.instance()
    return int(schedule[j][fleet.slot // inst.slots_per_segment(inst.jobs[j])]) + 1


def follow_schedule(env: gym.Env, day: str, schedule: Sequence[Sequence[int]]) -> tuple[Demonstrations, int]:
    """Follow ``schedule`` on ``day`` in a (wrapped) fleet env, one agent step per job choice; the decisions and
    how many of the schedule's choices the mask refused (then the lowest allowed choice is taken and recorded)."""
    observations, masks, actions, rewards = [], [], [], []
    departures = 0
    obs, _ = env.reset(options={"day": day})
    fleet = env.unwrapped
    terminated = fleet.slot >= fleet.n_slots
    while not terminated:
        mask = env.action_masks()
        action = schedule_action(env, schedule)
        if not (0 <= action < mask.size and mask[action]):
            departures += 1
            action = int(np.flatnonzero(mask)[0])
        observations.append(obs)
        masks.append(mask)
        actions.append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(float(reward))
        terminated = terminated or truncated
    returns = np.cumsum(rewards[::-1])[::-1] if rewards else np.zeros(0)
    return Demonstrations(np.asarray(observations, dtype=np.float32).reshape(len(actions), -1),
                          np.asarray(masks, dtype=bool).reshape(len(actions), -1), np.asarray(actions, dtype=np.int64),
                          np.asarray(returns, dtype=np.float32)), departures


def oracle_demonstrations(config: PPOConfig, instances: Sequence[Instance],
                          schedules: dict[str, Sequence[Sequence[int]]]) -> tuple[Demonstrations, int]:
    """The oracle's schedules followed in the training env of ``config`` (the per-job fleet env and its wrapper,
    so the observations and rewards are PPO's): every decision of every day with a schedule, and the number of
    choices the mask refused."""
    days = [inst for inst in instances if inst.day in schedules]
    require(len(days) > 0, "imitation", "no training day has an oracle schedule to clone")
    env = wrap_fleet(fleet_env(config, days), config)
    parts, departures = [], 0
    for inst in days:
        demos, refused = follow_schedule(env, inst.day, schedules[inst.day])
        parts.append(demos)
        departures += refused
    return Demonstrations(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                            ("observations", "masks", "actions", "returns"))), departures


def pretrain(model, demos: Demonstrations, epochs: int, seed: int = 0, vf_coef: float = 0.5) -> dict[str, float]:
    """Fit ``model``'s policy (masked log-likelihood of the demonstrated choices) and value (returns to go).

    Returns the final epoch's mean losses and the share of decisions the deterministic policy then matches.
    """
    import torch

    policy = model.policy
    optimizer = torch.optim.Adam(policy.parameters(), lr=IMITATION_LEARNING_RATE)
    obs = torch.as_tensor(demos.observations)
    masks = torch.as_tensor(demos.masks)
    actions = torch.as_tensor(demos.actions)
    returns = torch.as_tensor(demos.returns)
    rng = np.random.default_rng(seed)
    n = len(actions)
    nll = value_loss = 0.0
    policy.set_training_mode(True)
    for _ in range(epochs):
        order = rng.permutation(n)
        nll_sum = value_sum = 0.0
        for start in range(0, n, IMITATION_BATCH_SIZE):
            idx = torch.as_tensor(order[start: start + IMITATION_BATCH_SIZE])
            values, log_prob, _ = policy.evaluate_actions(obs[idx], actions[idx], action_masks=masks[idx])
            loss_pi = -log_prob.mean()
            loss_v = torch.nn.functional.mse_loss(values.flatten(), returns[idx])
            loss = loss_pi + vf_coef * loss_v
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            nll_sum += loss_pi.item() * len(idx)
            value_sum += loss_v.item() * len(idx)
        nll, value_loss = nll_sum / n, value_sum / n
    policy.set_training_mode(False)
    with torch.no_grad():
        chosen = np.array([policy.predict(o, deterministic=True, action_masks=m)[0]
                           for o, m in zip(demos.observations, demos.masks, strict=True)])
    return {"decisions": float(n), "nll": nll, "value_mse": value_loss,
            "matches_plan": float(np.mean(chosen == demos.actions))}


__all__ = ["IMITATION_BATCH_SIZE", "IMITATION_LEARNING_RATE", "ORACLE_CACHE_VERSION", "ORACLE_TIME_LIMIT_S",
           "Demonstrations", "follow_schedule", "instance_key", "oracle_demonstrations", "oracle_schedules",
           "plan_demonstrations", "pretrain", "reusable", "schedule_action"]
