"""Warm start of PPO by behaviour cloning: of the forecast plan (``PPOConfig.imitation = "plan"``, with the forecast
plan observed) or of the oracle's schedules (``"oracle"``, the per-job action: :mod:`agents.teacher`).

Before PPO's first update, the fresh policy is fitted by behaviour cloning to the forecast plan on the training days:
:func:`plan_demonstrations` follows the plan's choice (the one-hot of :mod:`agents.plan_features`) through the training
wrapper on every training day and records the observations, masks, choices and returns to go; :func:`pretrain` minimises
the choices' negative log-likelihood (masked) plus ``vf_coef`` × the value error on the returns, so that PPO starts from
the plan (what ``forecast-plan`` and, on a day, ``mpc`` apply) with a critic of it, and learns where to depart from it.
The plans read the day-ahead forecasts only: nothing here sees a held-out day or the truth of a slot before it is
realised (the demonstrations' rewards are the env's, paid on the truth after each step, as PPO's are).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.plan_features import ForecastPlans
from agents.ppo_config import PPOConfig
from agents.steps import wrap_env
from aidc_env.env import DispatchEnv
from aidc_env.instance import Instance

IMITATION_LEARNING_RATE = 1e-3
"""Adam step size of the warm start (a supervised fit: larger than PPO's 3e-4)."""
IMITATION_BATCH_SIZE = 256
"""Minibatch of the warm start (PPO's batch size)."""


@dataclass
class Demonstrations:
    """A policy followed on the training days (a plan or the oracle's schedules): one row per agent decision."""

    observations: np.ndarray
    masks: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    """Undiscounted return to go of the wrapper's reward (γ = 1, the default), from this decision on."""


def record_episode(env, day: str, choose: Callable[[Any, np.ndarray], tuple[int, bool]]) -> tuple[Demonstrations, int]:
    """Play ``day`` in a (wrapped) env, each action from ``choose(env, obs) -> (action, followed)``: every decision
    with its mask and return to go, and how many choices were not followed (replaced by a valid one)."""
    observations, masks, actions, rewards = [], [], [], []
    refused = 0
    obs, _ = env.reset(options={"day": day})
    raw = env.unwrapped
    done = raw.slot >= raw.n_slots
    while not done:
        action, followed = choose(env, obs)
        refused += not followed
        observations.append(obs)
        masks.append(env.action_masks())
        actions.append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(float(reward))
        done = terminated or truncated
    returns = np.cumsum(rewards[::-1])[::-1] if rewards else np.zeros(0)
    return Demonstrations(np.asarray(observations, dtype=np.float32).reshape(len(actions), -1),
                          np.asarray(masks, dtype=bool).reshape(len(actions), -1), np.asarray(actions, dtype=np.int64),
                          np.asarray(returns, dtype=np.float32)), refused


def concatenate(parts: Sequence[Demonstrations]) -> Demonstrations:
    """The decisions of several episodes, in order."""
    return Demonstrations(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                            ("observations", "masks", "actions", "returns")))


def plan_demonstrations(config: PPOConfig, instances: Sequence[Instance], plans: ForecastPlans) -> Demonstrations:
    """Follow each training instance's forecast plan in the training wrapper; record every decision."""
    env = wrap_env(DispatchEnv(case=list(instances), action="joint", **config.behaviour_env_kwargs()), config, plans)
    width = int(env.action_space.n)

    def plan_choice(env, obs: np.ndarray) -> tuple[int, bool]:
        mask = env.action_masks()
        action = int(np.argmax(obs[-width:]))  # the plan's choice of the job choosing (one-hot, last)
        return (action, True) if mask[action] else (int(np.flatnonzero(mask)[0]), False)

    return concatenate([record_episode(env, inst.day, plan_choice)[0] for inst in instances])


def pretrain(model, demos: Demonstrations, epochs: int, seed: int = 0, vf_coef: float = 0.5) -> dict[str, float]:
    """Fit ``model``'s policy (masked log-likelihood of the demonstrated choices) and value (returns to go).

    Returns the final epoch's mean losses and the share of decisions the deterministic policy then matches.
    """
    import torch

    policy = model.policy
    optimizer = torch.optim.Adam(policy.parameters(), lr=IMITATION_LEARNING_RATE)
    obs, masks, actions, returns = (torch.as_tensor(array) for array in (demos.observations, demos.masks,
                                                                         demos.actions, demos.returns))
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


__all__ = ["IMITATION_BATCH_SIZE", "IMITATION_LEARNING_RATE", "Demonstrations", "concatenate", "plan_demonstrations",
           "pretrain", "record_episode"]
