"""MaskablePPO on the dispatch env: the config, the env factory, and running a trained model on a day.

train.py reads top to bottom (args → :class:`PPOConfig` → :func:`make_vec_env` → :func:`make_model` →
callbacks → learn → :func:`save_run`); evaluate.py and ``agents/policies.py`` call :func:`load_model`,
:func:`ppo_schedule` and :func:`rollout_schedule`.

What the agent sees and optimises is in :mod:`agents.steps` (the :class:`AgentSteps` wrapper); the run's settings
are :class:`PPOConfig` (:mod:`agents.ppo_config`). Both are re-exported here. The envs are built from instances only
(:func:`aidc_env.case.build_instances`, called once by the entry point).
"""

from __future__ import annotations

import dataclasses
import platform
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agents.checkpoints import save_model_atomically
from agents.plan_features import ForecastPlans
from agents.ppo_config import ENV_KWARGS_KEYS, PPOConfig
from agents.steps import AgentSteps, day_forecast_table, day_price_scale, wrap_env
from aidc_env.baselines import fixed_schedule, greedy_schedule
from aidc_env.env import DispatchEnv
from aidc_env.errors import InputError, require
from aidc_env.instance import Instance
from aidc_env.io import read_json_file, write_json
from aidc_env.schedule import Schedule
from aidc_env.simulator import simulate

CONFIG_FILE = "config.json"
MODEL_FILE = "model.zip"
CONFIG_ATTRIBUTE = "aidc_config"
"""The run's config is also stored inside model.zip as this model attribute."""


# ---------------------------------------------------------------------------------------------- envs


def make_env(config: PPOConfig, instances: Sequence[Instance], rank: int = 0,
             plans: ForecastPlans | None = None) -> Callable[[], gym.Env]:
    """A picklable thunk building one training env on ``instances`` (for DummyVecEnv / SubprocVecEnv).

    Episodes are drawn from the instances' days, in the order given. ``rank`` names the env (its seed is set by
    :func:`make_vec_env`). ``plans``: the forecast plans' cache shared by the envs (``config.forecast_plan``).
    """
    instances = list(instances)

    def _init() -> gym.Env:
        import torch
        from stable_baselines3.common.monitor import Monitor

        torch.set_num_threads(1)
        return Monitor(agent_env(config, instances, plans))

    return _init


def action_type(config: PPOConfig, instances: Sequence[Instance]) -> str:
    """The env's action type of a run (``config.env``; ``auto``: ``per_job`` for instances with fine-tuning,
    inference, an idle-GPU value or several sites, else ``joint``)."""
    if config.env != "auto":
        return config.env
    return "per_job" if any(inst.has_fleet_workloads or len(inst.sites) > 1 for inst in instances) else "joint"


def agent_env(config: PPOConfig, instances: Sequence[Instance], plans: ForecastPlans | None = None) -> AgentSteps:
    """The env the agent acts in on ``instances``, wrapped as the config says (``plans``: the forecast plans' cache,
    for a config that observes them). With the per-job action the env pays the config's reward (its scale, the
    saving versus fixed with ``reward_baseline="fixed"``, the credit)."""
    action = action_type(config, instances)
    kwargs = config.behaviour_env_kwargs()
    if action == "per_job":
        kwargs.update(reward_scale=config.reward_scale_usd, reward_credit=config.reward_credit,
                      reward_baseline="fixed" if config.reward_baseline == "fixed" else None)
    env = DispatchEnv(case=list(instances), days=[inst.day for inst in instances], action=action, **kwargs)
    return wrap_env(env, config, plans)


def make_vec_env(config: PPOConfig, instances: Sequence[Instance], plans: ForecastPlans | None = None):
    """``n_envs`` training envs on the same instances, seeded from the config's seed (env i resets with seed + i).

    The instances are built once by the caller (:func:`aidc_env.case.build_instances`); subprocess envs receive
    them through fork. With the forecast plan observed (:func:`observes_plan`), every instance's plan is solved
    here, once, into ``plans`` (a new cache if None) shared by the envs.
    """
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    require(len(instances) > 0, "days", "no training day")
    if observes_plan(config):
        plans = (plans or ForecastPlans()).fill(instances, config.plan)
    thunks = [make_env(config, instances, i, plans) for i in range(config.n_envs)]
    subproc = config.vec_env == "subproc" and config.n_envs > 1
    vec = SubprocVecEnv(thunks, start_method="fork") if subproc else DummyVecEnv(thunks)
    vec.seed(config.seed)
    return vec


# ---------------------------------------------------------------------------------------------- model


def linear_schedule(initial: float) -> Callable[[float], float]:
    """Learning rate decaying linearly from ``initial`` to 0 over training (SB3 passes progress 1 → 0)."""
    return lambda progress_remaining: progress_remaining * initial


def make_model(config: PPOConfig, vec_env, tensorboard_log: str | None = None):
    """A fresh MaskablePPO with the config's hyperparameters."""
    import torch
    from sb3_contrib import MaskablePPO

    activation = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[config.activation]
    rate, ent_coef = rate_and_entropy(config)
    lr: float | Callable[[float], float] = linear_schedule(rate) if config.lr_schedule == "linear" else rate
    model = MaskablePPO("MlpPolicy", vec_env, learning_rate=lr, n_steps=config.n_steps, batch_size=config.batch_size,
                        n_epochs=config.n_epochs, gamma=config.gamma, gae_lambda=config.gae_lambda,
                        clip_range=config.clip_range, ent_coef=ent_coef, vf_coef=config.vf_coef,
                        max_grad_norm=config.max_grad_norm, target_kl=config.target_kl,
                        policy_kwargs={"net_arch": {"pi": list(config.net_arch), "vf": list(config.net_arch)},
                                       "activation_fn": activation}, tensorboard_log=tensorboard_log, seed=config.seed,
                        device="cpu", verbose=0)
    setattr(model, CONFIG_ATTRIBUTE, config.to_dict())
    return model


def versions() -> dict[str, str]:
    """Versions of the packages a run depends on (recorded in config.json)."""
    import gymnasium
    import sb3_contrib
    import stable_baselines3
    import torch

    return {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
            "gymnasium": gymnasium.__version__, "stable_baselines3": stable_baselines3.__version__,
            "sb3_contrib": sb3_contrib.__version__}


def save_run(model, config: PPOConfig, out: Path, extra: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """Save out/model.zip (config inside) and out/config.json (config, versions, and ``extra`` facts)."""
    out.mkdir(parents=True, exist_ok=True)
    setattr(model, CONFIG_ATTRIBUTE, config.to_dict())
    model_path = save_model_atomically(model, out / MODEL_FILE)
    record = {"config": config.to_dict(), "versions": versions(), **(extra or {})}
    return model_path, write_json(out / CONFIG_FILE, record)


def load_model(path: str | Path):
    """A trained MaskablePPO (CPU) with its run config as ``model.aidc_config`` (a :class:`PPOConfig` dict).

    The config is read from inside the zip; if absent, from config.json beside it.
    """
    path = Path(path)
    require(path.exists(), "model", f"no PPO model at {path}")
    require(path.is_file(), "model", f"{path} is not a file (give the model .zip)")
    require(zipfile.is_zipfile(path), "model", f"{path} is not a zip file (a saved MaskablePPO model is)")
    from sb3_contrib import MaskablePPO  # torch loads only once the file may be a model

    try:
        model = MaskablePPO.load(path, device="cpu")
    except Exception as err:  # a corrupt zip raises anything from zipfile, torch, json or pickle
        raise InputError("model", f"{path} is not a readable MaskablePPO model ({type(err).__name__})") from None
    config = getattr(model, CONFIG_ATTRIBUTE, None)
    if not isinstance(config, dict):
        sidecar = path.parent / CONFIG_FILE
        require(sidecar.is_file(), "model", f"{path} carries no run config and there is no {sidecar}")
        record = read_json_file(sidecar, "model")
        require(isinstance(record, dict) and isinstance(record.get("config"), dict), "model",
                f"{sidecar} has no config")
        config = record["config"]
        setattr(model, CONFIG_ATTRIBUTE, config)
    return model


def model_config(model) -> PPOConfig:
    """The run config a model was trained with."""
    return PPOConfig.from_dict(getattr(model, CONFIG_ATTRIBUTE))


# ---------------------------------------------------------------------------------------------- rollouts


def observes_plan(config: PPOConfig) -> bool:
    """Whether the config's agent observes the forecast plan (``forecast_plan`` with day-ahead information and the
    joint action: train.py resolves ``env="auto"`` to the case's action type before it builds the envs)."""
    return config.forecast_plan and config.information == "dayahead" and config.env != "per_job"


def warm_starts(config: PPOConfig) -> bool:
    """Whether training starts with behaviour cloning of the forecast plan (:mod:`agents.imitation`)."""
    return observes_plan(config) and config.imitation_epochs > 0


def finetunes(config: PPOConfig) -> bool:
    """Whether PPO after the warm start runs at the fine-tuning rate and entropy (``PPOConfig.finetune``)."""
    return warm_starts(config) and config.finetune


def rate_and_entropy(config: PPOConfig) -> tuple[float, float]:
    """PPO's initial learning rate and entropy coefficient: the config's, or after the warm start with
    ``finetune`` a slower, entropy-free PPO (``finetune_lr_factor`` × the rate, ``finetune_ent_coef``)."""
    if finetunes(config):
        return config.learning_rate * config.finetune_lr_factor, config.finetune_ent_coef
    return config.learning_rate, config.ent_coef


def ppo_schedule(model, inst: Instance, plans: ForecastPlans | None = None) -> Schedule:
    """The schedule of a trained model on one instance (a day or a horizon): deterministic, masked, in the env it
    was trained in, with the information it was trained with (``information="dayahead"``: ``inst`` must carry
    its forecasts). A model that observes the forecast plan rebuilds it (``plans``: a cache to reuse, e.g. one
    holding an oracle already built)."""
    config = model_config(model)
    config = dataclasses.replace(config, env_kwargs={**config.env_kwargs, "call_stream": None})  # the instance's calls
    env = agent_env(config, [inst], plans)
    expected = model.observation_space.shape
    if env.observation_space.shape != expected or env.action_space.n != model.action_space.n:
        raise ValueError(f"the model was trained on observations {expected} and {model.action_space.n} actions; "
                         f"the instance of {inst.day} gives {env.observation_space.shape} and "
                         f"{env.action_space.n} (a different case or overrides?)")
    obs, _ = env.reset(options={"day": inst.day})
    raw = env.unwrapped
    terminated = raw.slot >= raw.n_slots
    while not terminated:
        action, _ = model.predict(obs, deterministic=True, action_masks=env.action_masks())
        obs, _, terminated, truncated, _ = env.step(int(action))
        terminated = terminated or truncated
    return raw.schedule()


def rollout_schedule(inst: Instance, choose: Callable[[np.ndarray, np.ndarray], int], **env_kwargs: Any) -> Schedule:
    """Generic masked rollout on one instance: ``choose(obs, mask) -> action`` at every step of the env (the joint
    action, or the per-job action for an instance with fleet workloads or several sites).

    ``env_kwargs`` are the env's (e.g. ``information="dayahead"``: then ``choose`` sees forecasts only).
    """
    action = "per_job" if inst.has_fleet_workloads or len(inst.sites) > 1 else "joint"
    env = DispatchEnv(case=inst, action=action, **env_kwargs)
    obs, _ = env.reset(options={"day": inst.day})
    terminated = truncated = False
    while not (terminated or truncated):
        mask = env.action_masks()
        obs, _, terminated, truncated, _ = env.step(int(choose(obs, mask)))
    return env.schedule()


def heldout_check(model, instances: Sequence[Instance]) -> dict[str, Any]:
    """Mean objective of the model, fixed and greedy on the held-out instances (simulator-scored: operating cost
    − idle-GPU value, the operating cost itself without an idle value).

    The model runs with the information of its config (:func:`ppo_schedule`); costs are on the truth.
    """
    costs: dict[str, list[float]] = {"ppo": [], "fixed": [], "greedy": []}
    met, feasible = [], []
    plans = ForecastPlans()  # one oracle for every day's plan
    for inst in instances:
        result = simulate(inst, ppo_schedule(model, inst, plans))
        costs["ppo"].append(result.metrics.objective_usd)
        met.append(result.metrics.tranches_met)
        feasible.append(result.metrics.feasible)
        costs["fixed"].append(simulate(inst, fixed_schedule(inst)).metrics.objective_usd)
        costs["greedy"].append(simulate(inst, greedy_schedule(inst)).metrics.objective_usd)
    return {"days": len(instances), **{k: float(np.mean(v)) for k, v in costs.items()},
            "tranches_met": float(np.mean(met)), "feasible": float(np.mean(feasible))}


__all__ = ["CONFIG_ATTRIBUTE", "CONFIG_FILE", "ENV_KWARGS_KEYS", "MODEL_FILE", "AgentSteps", "PPOConfig", "action_type",
           "agent_env", "day_forecast_table", "day_price_scale", "heldout_check", "linear_schedule", "load_model",
           "finetunes", "make_env", "make_model", "make_vec_env", "model_config", "observes_plan", "ppo_schedule",
           "rate_and_entropy", "rollout_schedule", "save_run", "versions", "warm_starts", "wrap_env"]

