"""MaskablePPO on the dispatch env: the config, the env factory, and running a trained model on a day.

train.py reads top to bottom (args → :class:`PPOConfig` → :func:`make_vec_env` → :func:`make_model` →
callbacks → learn → :func:`save_run`); evaluate.py and ``agents/policies.py`` call :func:`load_model`,
:func:`ppo_schedule` and :func:`rollout_schedule`.

What the agent sees and optimises (all of it in :class:`DecisionSteps`, a wrapper; the env is unchanged):

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
- **Observation = the env's observation plus a day-scaled hourly forecast.** The env's own observation is
  kept as is (with ``lookahead`` = 0 by default: no slot-level window). The wrapper appends the rest of the
  day at hourly resolution (24 hours from the current slot, zero past midnight, plus a validity flag each):
  prices divided by the day's price scale (mean |λ| of the day, at least $5/MWh; decisions are invariant to
  a common price factor, so every day looks alike), renewable shares, and the day's price scale / $100.
  Perfect foresight of the day, as the oracle has (the env's default too).
- **One job at a time** (``factored_actions``). A boundary's joint choice (up to 294 actions in the 2048
  case) is made as one sub-step per job over that job's own choices, each masked so that some valid joint
  action completes it. With ``choice_features`` the job choosing sees, per choice, the tokens that choice
  makes in this segment and the share of its missing tokens it would cover if held for the rest of the day.
"""

from __future__ import annotations

import dataclasses
import json
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from aidc_env.case import SECONDS_PER_HOUR, Instance
from aidc_env.env import CheckpointDispatchEnv
from aidc_env.simulator import segment_productive_hours, simulate

CONFIG_FILE = "config.json"
MODEL_FILE = "model.zip"
CONFIG_ATTRIBUTE = "aidc_config"
"""The run's config is also stored inside model.zip as this model attribute."""

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

ENV_KWARGS_KEYS = ("lookahead", "forecast_noise", "reward_scale", "safety_mask", "pause_when_done",
                   "terminal_penalty_factor")
"""Env kwargs that shape behaviour (stored in the config; the day source is given separately)."""


# ---------------------------------------------------------------------------------------------- config


@dataclass
class PPOConfig:
    """Every setting of a training run; saved as config.json and inside model.zip.

    The defaults are train.py's defaults (see docs/training.md for why and what they reach).
    """

    # Problem.
    case: str = "2048"
    profiles: str | None = None
    """Canonical hourly CSV, or None for the bundled representative days."""
    overrides: dict[str, Any] = field(default_factory=dict)
    train_days: list[str] = field(default_factory=list)
    heldout_days: list[str] = field(default_factory=list)

    # Env (CheckpointDispatchEnv kwargs) and the wrapper.
    env_kwargs: dict[str, Any] = field(default_factory=lambda: {
        "lookahead": 0, "forecast_noise": 0.0, "reward_scale": 100.0, "safety_mask": True,
        "pause_when_done": True, "terminal_penalty_factor": 2.0})
    decision_steps: bool = True
    """Play forced slots inside the wrapper (one agent step per real decision)."""
    hourly_forecast: bool = True
    """Append the day-scaled hourly forecast of the rest of the day to the observation."""
    reward_baseline: str = "fixed"
    """'fixed': reward = savings versus fixed continuous training; 'none': the env's cost."""
    reward_scale_usd: float = 50.0
    """$ per reward unit of the wrapper's reward."""
    reward_day_scaled: bool = True
    """Divide each day's rewards by its price scale / $50/MWh, so that every day weighs alike in training."""
    factored_actions: bool = True
    """Choose the joint action one job at a time (see :class:`DecisionSteps`)."""
    choice_features: bool = True
    """With factored actions: per-choice token features of the job choosing now (see :class:`DecisionSteps`)."""

    # PPO.
    total_timesteps: int = 1_000_000
    """Agent steps (decisions, with ``decision_steps``)."""
    seed: int = 0
    n_envs: int = 16
    vec_env: str = "dummy"
    """'dummy' (one process) or 'subproc'."""
    learning_rate: float = 3e-4
    lr_schedule: str = "linear"
    """'linear' (to 0 at the end) or 'constant'."""
    n_steps: int = 128
    batch_size: int = 256
    n_epochs: int = 10
    gamma: float = 1.0
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = None
    net_arch: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden layers of the policy and of the value network (separate networks)."""
    activation: str = "tanh"
    torch_threads: int = 1
    checkpoint_freq: int = 100_000
    """Agent steps between checkpoints (out/checkpoints)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PPOConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def behaviour_env_kwargs(self) -> dict[str, Any]:
        """The env kwargs that shape what the agent sees and is rewarded for (not the day source)."""
        return {k: v for k, v in self.env_kwargs.items() if k in ENV_KWARGS_KEYS}


# ---------------------------------------------------------------------------------------------- wrapper


class DecisionSteps(gym.Wrapper):
    """One agent step per real decision; reward = savings versus fixed; hourly day-scaled forecast.

    See the module docstring. Exposes ``action_masks()`` (the mask of the agent's current choice), so
    MaskablePPO finds it through ``VecEnv.env_method``.

    With ``factored_actions`` the joint choice of a boundary slot is made one job at a time: the action space
    is ``Discrete(max_j (M_j + 1))`` (a local choice: 0 = pause, i = mode i − 1), job j's mask allows the
    local choices that some valid joint action (the env's exact mask) completes given the jobs already
    chosen, and the observation tells which job is choosing and what the earlier jobs chose. The env steps
    once the last job has chosen (reward 0 on the earlier sub-steps). Sub-steps with a single valid choice
    are taken automatically.
    """

    def __init__(self, env: gym.Env, *, decision_steps: bool = True, hourly_forecast: bool = True,
                 reward_baseline: str = "fixed", reward_scale_usd: float = 10.0, reward_day_scaled: bool = False,
                 factored_actions: bool = False, choice_features: bool = False):
        super().__init__(env)
        if reward_baseline not in ("fixed", "none"):
            raise ValueError(f"reward_baseline must be 'fixed' or 'none', got {reward_baseline!r}")
        self.decision_steps = decision_steps
        self.hourly_forecast = hourly_forecast
        self.reward_baseline = reward_baseline
        self.reward_scale_usd = float(reward_scale_usd)
        self.reward_day_scaled = bool(reward_day_scaled)
        self.factored_actions = bool(factored_actions)
        self._reward_div = self.reward_scale_usd
        dispatch = self.dispatch
        template = dispatch.instance(dispatch.days[0])
        self._sizes = [job.n_modes + 1 for job in template.jobs]
        self._gpu_share = [np.append(0.0, [m.gpus / template.n_gpus for m in job.modes]) for job in template.jobs]
        # Per job, by local choice: tokens per hour; the job's tranche, segment and restart hours.
        self._template = template
        self._tokens_per_h = [np.append(0.0, [m.tokens_per_s * SECONDS_PER_HOUR for m in job.modes])
                              for job in template.jobs]
        self.choice_features = bool(choice_features) and self.factored_actions
        base: spaces.Box = env.observation_space  # type: ignore[assignment]
        low, high = [base.low], [base.high]
        if hourly_forecast:
            ren_high = float(base.high[int(base.shape[0]) - 2])  # renewable_now's bound: rho
            low += [np.full(HOURS_AHEAD, -SCALED_PRICE_CLIP), np.zeros(2 * HOURS_AHEAD), [0.0]]
            high += [np.full(HOURS_AHEAD, SCALED_PRICE_CLIP), np.full(HOURS_AHEAD, ren_high), np.ones(HOURS_AHEAD),
                     [SCALED_PRICE_CLIP]]
        if self.factored_actions:
            # Per job: choosing now, already chosen, the chosen mode index / M_j, its GPU share.
            n = 4 * len(self._sizes)
            low.append(np.zeros(n))
            high.append(np.ones(n))
            if self.choice_features:
                low.append(np.zeros(2 * max(self._sizes)))
                high.append(np.full(2 * max(self._sizes), CHOICE_FEATURE_CLIP))
            self.action_space = spaces.Discrete(max(self._sizes))
        self.observation_space = spaces.Box(low=np.concatenate(low).astype(np.float32),
                                            high=np.concatenate(high).astype(np.float32), dtype=np.float32)
        self._days: dict[str, tuple[list[bool], np.ndarray, np.ndarray | None, float]] = {}
        self._boundary: list[bool] = []
        self._baseline_cost = np.zeros(0)
        self._extra: np.ndarray | None = None
        self._partial: list[int] = []
        self._joint_mask: np.ndarray | None = None
        self._obs = np.zeros(0, dtype=np.float32)
        self._current: list[int] = [job.initial_mode for job in template.jobs]

    @property
    def dispatch(self) -> CheckpointDispatchEnv:
        """The raw env."""
        return self.env.unwrapped  # type: ignore[return-value]

    def action_masks(self) -> np.ndarray:
        if not self.factored_actions:
            return self.dispatch.action_masks()
        return self._sub_mask()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._current = list(info["job_modes"])
        self._prepare_day(self.dispatch.instance())
        obs, _, terminated, info = self._advance(obs, info)
        self._obs = obs
        reward = 0.0
        if self.factored_actions and not terminated:
            obs, reward, terminated, info = self._auto_substeps(info)
        return self._observation(self._obs), self._compact(info)

    def step(self, action):
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
                    keep = env.encode(info["job_modes"])
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
            if self.reward_baseline == "fixed":
                from aidc_env.baselines import fixed_schedule

                baseline = simulate(inst, fixed_schedule(inst)).flows.decision_cost_usd
            extra = day_forecast_table(inst) if self.hourly_forecast else None
            div = self.reward_scale_usd
            if self.reward_day_scaled:
                div *= day_price_scale(inst) / REWARD_REFERENCE_PRICE_USD_PER_MWH
            cached = self._days[inst.day] = (boundary.tolist(), baseline, extra, div)
        self._boundary, self._baseline_cost, self._extra, self._reward_div = cached
        self._partial = []
        self._joint_mask = None

    def _choice_features(self, j: int) -> np.ndarray:
        """For the job choosing now, per local choice c: (tokens c makes in this segment, restart paid) /
        missing tokens, and missing tokens / (tokens c makes if held for the rest of the day); both clipped
        to [0, 4] (pause: 0 and 4)."""
        width = max(self._sizes)
        out = np.zeros(2 * width, dtype=np.float32)
        env = self.dispatch
        if j >= len(self._sizes) or env.slot >= env.n_slots:
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
        return np.concatenate(parts).astype(np.float32)


def day_price_scale(inst: Instance) -> float:
    """The day's price scale: mean |λ| over the day, at least $5/MWh."""
    return max(float(np.mean(np.abs(inst.price_usd_per_mwh))), PRICE_SCALE_FLOOR_USD_PER_MWH)


def day_forecast_table(inst: Instance) -> np.ndarray:
    """Per slot t = 0..T: the hourly forecast features of the rest of the day from slot t.

    Hour k (k = 0..23) covers slots t + k·s .. t + (k+1)·s − 1 (s slots per hour); values are means over the
    slots inside the day; a window wholly past midnight is 0 with validity 0.
    """
    T = inst.slots
    s = max(1, round(1.0 / inst.slot_hours))
    scale = day_price_scale(inst)
    price = np.clip(inst.price_usd_per_mwh / scale, -SCALED_PRICE_CLIP, SCALED_PRICE_CLIP)
    rated = inst.rated_facility_mw
    ren = inst.renewable_mw / rated if rated > 0 else np.zeros(T)
    pad = HOURS_AHEAD * s + 1
    price_pad = np.concatenate([price, np.zeros(pad)])
    ren_pad = np.concatenate([ren, np.zeros(pad)])
    inside = np.concatenate([np.ones(T), np.zeros(pad)])
    table = np.zeros((T + 1, 3 * HOURS_AHEAD + 1), dtype=np.float32)
    idx = np.arange(T + 1)[:, None, None] + (np.arange(HOURS_AHEAD)[None, :, None] * s
                                             + np.arange(s)[None, None, :])
    count = inside[idx].sum(axis=2)
    valid = count > 0
    denom = np.where(valid, count, 1.0)
    table[:, :HOURS_AHEAD] = (price_pad[idx] * inside[idx]).sum(axis=2) / denom
    table[:, HOURS_AHEAD: 2 * HOURS_AHEAD] = (ren_pad[idx] * inside[idx]).sum(axis=2) / denom
    table[:, 2 * HOURS_AHEAD: 3 * HOURS_AHEAD] = valid
    table[:, -1] = min(scale / 100.0, SCALED_PRICE_CLIP)
    return table


# ---------------------------------------------------------------------------------------------- envs


def wrap_env(env: gym.Env, config: PPOConfig) -> DecisionSteps:
    """The wrapper of a training or evaluation env, as the config says."""
    return DecisionSteps(env, decision_steps=config.decision_steps, hourly_forecast=config.hourly_forecast,
                         reward_baseline=config.reward_baseline, reward_scale_usd=config.reward_scale_usd,
                         reward_day_scaled=config.reward_day_scaled, factored_actions=config.factored_actions,
                         choice_features=config.choice_features)


def make_env(config: PPOConfig, days: Sequence[str], rank: int = 0, profiles: Any = None) -> Callable[[], gym.Env]:
    """A picklable thunk building one training env (for DummyVecEnv / SubprocVecEnv).

    ``profiles``: an already loaded profile source to share (default: ``config.profiles``, read by the env).
    """

    def _init() -> gym.Env:
        import torch
        from stable_baselines3.common.monitor import Monitor

        torch.set_num_threads(1)
        source = config.profiles if profiles is None else profiles
        env = CheckpointDispatchEnv(case=config.case, overrides=config.overrides or None, profiles=source,
                                    days=list(days), **config.behaviour_env_kwargs())
        return Monitor(wrap_env(env, config))

    return _init


def make_vec_env(config: PPOConfig, days: Sequence[str]):
    """``n_envs`` training envs, seeded from the config's seed (env i resets with seed + i)."""
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    if config.vec_env == "subproc" and config.n_envs > 1:
        vec = SubprocVecEnv([make_env(config, days, i) for i in range(config.n_envs)], start_method="fork")
    else:
        from aidc_env.case import load_case
        from aidc_env.profiles import load_profiles

        # One process: read the profile source once and share it.
        profiles = load_profiles(config.profiles, renewable_capacity_mw=load_case(config.case).renewable_capacity_mw)
        vec = DummyVecEnv([make_env(config, days, i, profiles) for i in range(config.n_envs)])
    vec.seed(config.seed)
    return vec


# ---------------------------------------------------------------------------------------------- model


def linear_schedule(initial: float) -> Callable[[float], float]:
    """Learning rate decaying linearly from ``initial`` to 0 over training (SB3 passes progress 1 → 0)."""

    def schedule(progress_remaining: float) -> float:
        return progress_remaining * initial

    return schedule


def make_model(config: PPOConfig, vec_env, tensorboard_log: str | None = None):
    """A fresh MaskablePPO with the config's hyperparameters."""
    import torch
    from sb3_contrib import MaskablePPO

    activation = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[config.activation]
    lr: float | Callable[[float], float] = (linear_schedule(config.learning_rate) if config.lr_schedule == "linear"
                                            else config.learning_rate)
    model = MaskablePPO(
        "MlpPolicy",
        vec_env,
        learning_rate=lr,
        n_steps=config.n_steps,
        batch_size=config.batch_size,
        n_epochs=config.n_epochs,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        clip_range=config.clip_range,
        ent_coef=config.ent_coef,
        vf_coef=config.vf_coef,
        max_grad_norm=config.max_grad_norm,
        target_kl=config.target_kl,
        policy_kwargs={"net_arch": {"pi": list(config.net_arch), "vf": list(config.net_arch)},
                       "activation_fn": activation},
        tensorboard_log=tensorboard_log,
        seed=config.seed,
        device="cpu",
        verbose=0,
    )
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
    model_path = out / MODEL_FILE
    model.save(model_path)
    record = {"config": config.to_dict(), "versions": versions(), **(extra or {})}
    config_path = out / CONFIG_FILE
    config_path.write_text(json.dumps(record, indent=1))
    return model_path, config_path


def load_model(path: str | Path):
    """A trained MaskablePPO (CPU) with its run config as ``model.aidc_config`` (a :class:`PPOConfig` dict).

    The config is read from inside the zip; if absent, from config.json beside it.
    """
    from sb3_contrib import MaskablePPO

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no PPO model at {path}")
    model = MaskablePPO.load(path, device="cpu")
    config = getattr(model, CONFIG_ATTRIBUTE, None)
    if not isinstance(config, dict):
        sidecar = path.parent / CONFIG_FILE
        if not sidecar.exists():
            raise FileNotFoundError(f"{path} carries no run config and there is no {sidecar}")
        config = json.loads(sidecar.read_text())["config"]
        setattr(model, CONFIG_ATTRIBUTE, config)
    return model


def model_config(model) -> PPOConfig:
    """The run config a model was trained with."""
    return PPOConfig.from_dict(getattr(model, CONFIG_ATTRIBUTE))


# ---------------------------------------------------------------------------------------------- rollouts


def ppo_schedule(model, inst: Instance) -> list[list[int]]:
    """The schedule of a trained model on one day: deterministic, masked, in the env it was trained in."""
    config = model_config(model)
    env = wrap_env(CheckpointDispatchEnv(case=inst, **config.behaviour_env_kwargs()), config)
    expected = model.observation_space.shape
    if env.observation_space.shape != expected or env.action_space.n != model.action_space.n:
        raise ValueError(f"the model was trained on observations {expected} and {model.action_space.n} actions; "
                         f"the instance of {inst.day} gives {env.observation_space.shape} and "
                         f"{env.action_space.n} (a different case or overrides?)")
    obs, _ = env.reset(options={"day": inst.day})
    terminated = env.dispatch.slot >= env.dispatch.n_slots
    while not terminated:
        action, _ = model.predict(obs, deterministic=True, action_masks=env.action_masks())
        obs, _, terminated, truncated, _ = env.step(int(action))
        terminated = terminated or truncated
    return env.dispatch.schedule()


def rollout_schedule(inst: Instance, choose: Callable[[np.ndarray, np.ndarray], int],
                     **env_kwargs: Any) -> list[list[int]]:
    """Generic masked rollout on one day: ``choose(obs, mask) -> action`` at every slot of the env."""
    env = CheckpointDispatchEnv(case=inst, **env_kwargs)
    obs, _ = env.reset(options={"day": inst.day})
    terminated = truncated = False
    while not (terminated or truncated):
        mask = env.action_masks()
        obs, _, terminated, truncated, _ = env.step(int(choose(obs, mask)))
    return env.schedule()


def heldout_check(model, config: PPOConfig, profiles=None) -> dict[str, Any]:
    """Mean operating cost of the model, fixed and greedy on the config's held-out days (simulator-scored)."""
    from aidc_env.baselines import fixed_schedule, greedy_schedule
    from aidc_env.case import build_instances

    instances = build_instances(config.case, config.heldout_days, profiles if profiles is not None else config.profiles,
                                **config.overrides)
    costs: dict[str, list[float]] = {"ppo": [], "fixed": [], "greedy": []}
    met = []
    for inst in instances.values():
        result = simulate(inst, ppo_schedule(model, inst))
        costs["ppo"].append(result.metrics.operating_cost_usd)
        met.append(result.metrics.tranches_met)
        costs["fixed"].append(simulate(inst, fixed_schedule(inst)).metrics.operating_cost_usd)
        costs["greedy"].append(simulate(inst, greedy_schedule(inst)).metrics.operating_cost_usd)
    return {"days": len(instances), **{k: float(np.mean(v)) for k, v in costs.items()},
            "tranches_met": float(np.mean(met))}


__all__ = ["heldout_check", "PPOConfig", "DecisionSteps", "day_forecast_table", "day_price_scale", "load_model", "make_env",
           "make_model", "make_vec_env", "model_config", "ppo_schedule", "rollout_schedule", "save_run",
           "versions", "wrap_env", "linear_schedule"]

