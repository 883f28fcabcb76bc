"""The settings of a PPO training run (:class:`PPOConfig`): the one source of train.py's defaults.

train.py's argparse defaults are read from ``PPOConfig()``; the defaults table of ``docs/training.md`` is
checked against it by ``tests/test_train.py``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from aidc_env.env import DEFAULT_REWARD_SCALE_USD, DEFAULT_TERMINAL_PENALTY_FACTOR
from aidc_env.case import case_differences, load_case
from aidc_env.errors import InputError, require
from aidc_env.information import ISSUE_HOUR
from aidc_env.schema import validate_dataclass

ENV_KWARGS_KEYS = ("lookahead", "information", "forecast_noise", "reward_scale", "safety_mask",
                   "pause_when_done", "terminal_penalty_factor", "call_stream")
"""Env kwargs that shape behaviour (stored in the config; the day source is given separately)."""

HYPERPARAMETERS = ("learning_rate", "lr_schedule", "n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda",
                   "clip_range", "ent_coef", "net_arch", "activation", "reward_scale_usd", "reward_day_scaled",
                   "factored_actions", "choice_features", "seed", "n_envs")
"""The settings that ``train.py --config FILE`` takes from a file (each also has its own train.py flag, which
wins): what ``python -m agents.tune`` searches and writes, or the same fields of a run's config.json."""


@dataclass
class PPOConfig:
    """Every setting of a training run; saved as config.json and inside model.zip.

    The defaults are train.py's defaults (see docs/training.md for why and what they reach).
    """

    # Problem.
    case: str = "2048"
    profiles: str | None = None
    """Canonical hourly CSV, or None for the bundled representative days."""
    forecasts: str | None = None
    """Day-ahead forecast CSV (load, solar, wind), needed with ``information="dayahead"``: the price forecaster is
    fitted on the training days and every instance carries its days' forecasts (:mod:`aidc_env.dayahead`)."""
    price_forecast: str = "model"
    """With day-ahead information, where the price forecast comes from (:data:`aidc_env.price_forecast.PRICE_SOURCES`):
    the package's gradient boosting (``model``) or the forecast CSV's ``price_forecast_usd_per_mwh`` column
    (``supplied``). Configs saved before it existed mean ``model``."""
    price_issue_hour: int = ISSUE_HOUR
    """With day-ahead information, the hour of d − 1 from which day d's price forecast is known
    (:attr:`aidc_env.information.Forecast.price_issue_hour`). Configs saved before it existed mean 10."""
    overrides: dict[str, Any] = field(default_factory=dict)
    split: str = "weeks"
    """Which days train and which are held out (:data:`agents.days.SPLITS`); evaluate.py holds out the same."""
    train_days: list[str] = field(default_factory=list)
    heldout_days: list[str] = field(default_factory=list)
    validation_days: list[str] = field(default_factory=list)
    """Training days of the split kept out of training to select the saved model (:mod:`agents.selection`)."""

    # Env (CheckpointDispatchEnv kwargs) and the wrapper. ``env_kwargs["information"]``: "perfect" (the truth)
    # or "dayahead" (forecasts only; the instances must carry them); a model is evaluated with the information
    # it was trained with (read from its stored config). Configs saved before it existed mean "perfect".
    env_kwargs: dict[str, Any] = field(default_factory=lambda: {
        "lookahead": 0, "information": "perfect", "forecast_noise": 0.0, "reward_scale": DEFAULT_REWARD_SCALE_USD,
        "safety_mask": True, "pause_when_done": True, "terminal_penalty_factor": DEFAULT_TERMINAL_PENALTY_FACTOR})
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
    forecast_plan: bool = True
    """With ``information="dayahead"``: observe the forecast plan (the oracle's schedule on the day-ahead point
    forecast) and the realised forecast error so far (:mod:`agents.plan_features`); no effect with "perfect".
    Configs saved before it existed mean False."""
    plan: str = "forecast"
    """With the forecast plan observed: which plan (:data:`agents.plan_features.PLANS`): ``"forecast"`` (made once at
    slot 0) or ``"issues"`` (re-made at each forecast issue, ``mpc``'s plans; the default of horizons,
    :data:`HORIZON_DEFAULTS`). The warm start clones the plan observed. Configs saved before it: forecast."""
    imitation_epochs: int = 50
    """With the forecast plan observed (or ``imitation="oracle"``): epochs of behaviour cloning on the training days
    before PPO (a warm start, :mod:`agents.imitation`; 0 = none)."""
    imitation: str = "plan"
    """What the warm start clones: ``"plan"`` (the forecast plan, only when it is observed) or ``"oracle"`` (the
    oracle's schedules of ``imitation_days`` training days, solved once and cached on disk; the per-job action only)."""
    imitation_days: int = 21
    """With ``imitation="oracle"``: training days whose oracle schedules are cloned (evenly spread over the train
    split, :func:`agents.days.spread`)."""
    reward_credit: str = "decision"
    """The per-job action's reward credit (:data:`aidc_env.env.core.REWARD_CREDITS`): the objective paid when a
    decision point closes, or per agent step the objective change attributable to that job's choice ("job"). No
    effect on the joint action."""

    finetune: bool = True
    """With the warm start: PPO then fine-tunes at ``finetune_lr_factor`` × ``learning_rate`` with entropy
    coefficient ``finetune_ent_coef`` (PPO at full rate with the entropy bonus drifts away from the cloned plan).
    Configs saved before it existed mean False."""
    finetune_lr_factor: float = 0.1
    """Learning rate of the fine-tuning, as a factor of ``learning_rate``."""
    finetune_ent_coef: float = 0.0
    """Entropy coefficient of the fine-tuning (none: the warm start is already the policy to keep)."""
    validation_every: int = 7
    """With ``information="dayahead"``: every ``validation_every``-th training day of the split (by date) is a
    validation day, not trained on; the warm start and the checkpoints are evaluated on them and the cheapest is
    saved as the model (:mod:`agents.selection`; 0 = no selection, the last model is saved). Configs saved before
    it existed mean 0."""

    horizon_train_instances: int = 24
    """With ``horizon_days`` D > 1 (e.g. ``--horizon-days 7``): training instances, evenly spread over the D-day
    instances that start on a training day of the split (and, with day-ahead information, have forecasts for all D
    days). Each needs its forecast plan, a week oracle solve (docs/training.md, "Horizons (weeks)": 24 weeks reproduce the plan
    on unseen weeks, 12 do not quite). No effect on one-day instances."""
    horizon_validation_instances: int = 3
    """With D > 1 and day-ahead information: validation instances (evenly spread over those starting on a
    validation day, :func:`agents.selection.split_horizon_starts`)."""
    horizon_plan_time_limit_s: float = 30.0
    """With D > 1: seconds per training or validation instance's plan solve (each of the issue plans' re-solves with
    ``plan="issues"``; an incumbent plan when the limit stops it; evaluate.py's plans use its ``--time-limit``)."""

    env: str = "auto"
    """The env's action type (:data:`ENVS`): ``"auto"`` (``per_job`` for instances with fine-tuning, inference, an
    idle-GPU value or several sites; ``joint`` otherwise), or ``"per_job"`` or ``"joint"`` for every case (the 2048
    case with the per-job action compares the two action designs)."""

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
    def from_dict(cls, data: Any, field_name: str = "config") -> PPOConfig:
        """A config from its JSON object (:func:`aidc_env.schema.validate_dataclass`: each field of its type, unknown
        keys ignored, absent ones at their defaults); InputError naming ``field_name`` and the bad field."""
        return validate_dataclass(cls, data, field_name)

    @property
    def information(self) -> str:
        """What the agent knows: ``env_kwargs["information"]`` ("perfect" if the config predates it)."""
        return str(self.env_kwargs.get("information", "perfect"))

    @staticmethod
    def hyperparameters_of(record: Any, field_name: str = "config") -> dict[str, Any]:
        """The :data:`HYPERPARAMETERS` of a config file's JSON (``{"config": {...}}`` as train.py and agents.tune
        write it, or the fields themselves); other fields of a PPOConfig are ignored, unknown ones refused."""
        data = record.get("config", record) if isinstance(record, dict) else None
        require(isinstance(data, dict), field_name, "must be a JSON object of PPO settings (or {\"config\": {...}})")
        known = {f.name for f in dataclasses.fields(PPOConfig)}
        unknown = sorted(set(data) - known)
        require(not unknown, field_name, f"unknown settings {', '.join(unknown)}; known: {', '.join(HYPERPARAMETERS)}")
        return {k: data[k] for k in HYPERPARAMETERS if k in data}

    def behaviour_env_kwargs(self) -> dict[str, Any]:
        """The env kwargs that shape what the agent sees and is rewarded for (not the day source)."""
        return {k: v for k, v in self.env_kwargs.items() if k in ENV_KWARGS_KEYS}


ENVS = ("auto", "per_job", "joint")
"""``PPOConfig.env``: the env's action type."""
PER_JOB_DEFAULTS: dict[str, Any] = {
    "total_timesteps": 300_000, "learning_rate": 3e-5, "ent_coef": 0.0, "gae_lambda": 1.0, "n_steps": 512,
    "reward_credit": "job", "imitation": "oracle", "imitation_days": 63, "imitation_epochs": 50}
"""train.py's defaults with the per-job action (a case with fine-tuning, inference, an idle-GPU value or several
sites): a warm start by behaviour cloning of the oracle's schedules on 63 training days, then PPO with a small step
(3e-5) and no entropy bonus, so that it refines the cloned policy instead of unlearning it, rewarded per job (each
choice sees its own idle-GPU credit and energy cost at its own step), with whole-episode Monte Carlo advantages (GAE
λ = 1 and 512 steps per env and update: an episode is one agent step per job decision, 40-190 of them). Every other
setting is :class:`PPOConfig`'s default; docs/training.md says what each reaches."""
SITES_DEFAULTS: dict[str, Any] = {"total_timesteps": 900_000, "lr_schedule": "constant", "imitation_epochs": 60}
"""On top of :data:`PER_JOB_DEFAULTS` for a case with several sites: three times the PPO steps at a constant rate and
60 epochs of cloning. On 8 held-out days of sites3 these reach 1.045 × the oracle's total cost, against 1.080 with the
per-job defaults alone (docs/sites.md, "Env and PPO")."""
HORIZON_DEFAULTS: dict[str, Any] = {"total_timesteps": 25_000, "checkpoint_freq": 12_500, "plan": "issues"}
"""train.py's defaults with ``--horizon-days D`` > 1 (weeks; a week episode is 7 x 24 = 168 agent steps of the 2048
case): 25,000 PPO steps with checkpoints every 12,500, the selection on validation weeks keeping the cheapest
candidate (fine-tuning after the warm start gains little on weeks: docs/training.md, "Horizons (weeks)"). ``plan="issues"``:
the observed and cloned plan is re-made at each daily forecast issue (``mpc``'s plans,
:func:`agents.plan_features.issue_plans`); a plan made once at slot 0 is stale after day 1. Every other setting is
:class:`PPOConfig`'s default."""
IMITATIONS = ("plan", "oracle")
"""``PPOConfig.imitation``."""


def case_takes_per_job(case: Any) -> bool:
    """Whether a :class:`aidc_env.case.Case` has fine-tuning jobs, inference, an idle-GPU value or several sites (then
    the ``auto`` env is the per-job action and train.py takes :data:`PER_JOB_DEFAULTS`)."""
    return (bool(getattr(case, "inference", ())) or getattr(case, "idle_value_usd_per_gpu_hour", 0.0) > 0
            or len(getattr(case, "sites", ())) > 1
            or any(getattr(job, "kind", "pretraining") == "finetuning" for job in getattr(case, "jobs", ())))


def trained_case_differences(config: PPOConfig, case: Any, overrides: dict[str, Any]) -> list[str]:
    """What differs between the case a model was trained on (``config.case`` with ``config.overrides``) and
    ``case`` with ``overrides`` (:func:`aidc_env.case.case_differences`, trained -> given): a policy is evaluated on
    the instances it was trained for. A training case file that no longer loads is compared by its overrides."""
    given = case.with_overrides(**overrides)
    try:
        trained = load_case(config.case).with_overrides(**config.overrides)
    except InputError:
        keys = sorted(set(config.overrides) | set(overrides))
        return [f"{k} {config.overrides.get(k, 'the case')} -> {overrides.get(k, 'the case')}" for k in keys
                if config.overrides.get(k) != overrides.get(k)]
    return case_differences(trained, given)


def ppo_overrides(case: Any) -> dict[str, Any]:
    """The settings a run on ``case`` takes instead of :class:`PPOConfig`'s defaults: :data:`PER_JOB_DEFAULTS` for a
    case that takes the per-job action, and :data:`SITES_DEFAULTS` on top for one with several sites."""
    if not case_takes_per_job(case):
        return {}
    return {**PER_JOB_DEFAULTS, **(SITES_DEFAULTS if len(getattr(case, "sites", ())) > 1 else {})}


def defaults_for_case(case: Any) -> PPOConfig:
    """The defaults of a run on ``case``: :class:`PPOConfig`'s with :func:`ppo_overrides`."""
    return PPOConfig(**ppo_overrides(case))


__all__ = ["ENVS", "ENV_KWARGS_KEYS", "HORIZON_DEFAULTS", "HYPERPARAMETERS", "IMITATIONS", "PER_JOB_DEFAULTS",
           "PPOConfig", "SITES_DEFAULTS", "case_takes_per_job", "defaults_for_case", "ppo_overrides",
           "trained_case_differences"]
