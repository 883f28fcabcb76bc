"""Train a MaskablePPO dispatcher on many days of the 2048 case (or any case).

    python train.py --case 2048                                              # bundled representative days
    python train.py --case 2048 --profiles caiso-2023                        # the full 2023 year
    python train.py --case 2048 --resume                                     # continue an interrupted run
    python train.py --case 2048 --config runs/tune-2048/best_config.json     # a search's best settings

Reads top to bottom, CleanRL style: args → config → days → envs → model → warm start → callbacks → learn → save,
one path for every case (the action type and the defaults follow the case: :func:`agents.ppo.action_type`,
:func:`agents.ppo_config.defaults_for_case`). Train days are the train split of ``agents.days.split_days`` over the
profile source (whole ISO weeks, one in four, are held out for evaluate.py). What the agent sees and is rewarded for
is documented in agents/steps.py, the defaults and their measured results in docs/training.md.

Outputs (``--out``, default runs/ppo-<case>): model.zip (the config inside), config.json (every
hyperparameter, env kwargs, train and held-out days, seed, versions, wall time, a held-out check against
fixed and greedy), tb/ (TensorBoard: ``tensorboard --logdir runs``), checkpoints/ (every
``--checkpoint-freq`` steps; ``--resume`` continues from the newest with its step count).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import signal
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from agents.checkpoints import (CHECKPOINT_PATTERN, checkpoint_callback, checkpoints_newest_first, load_newest_good,
                                newest_checkpoint, save_checkpoint, save_model_atomically, stop_callback)
from agents.days import SPLITS, split_days, spread
from agents.imitation import plan_demonstrations, pretrain
from agents.plan_features import PLANS, ForecastPlans
from agents.ppo import (CONFIG_FILE, PPOConfig, action_type, heldout_check, load_model, make_model, make_vec_env,
                        observes_plan, save_run, warm_starts)
from agents.ppo_config import ENVS, HORIZON_DEFAULTS, IMITATIONS, PER_JOB_DEFAULTS, SITES_DEFAULTS, ppo_overrides
from agents.selection import (WARM_START_FILE, Candidate, select_best, split_horizon_starts, split_validation,
                              validation_cost, write_selection)
from agents.teacher import TEACHER_TIME_LIMIT_S, teacher_demonstrations, teacher_schedules
from aidc_env import limits
from aidc_env.call_streams import CallStream
from aidc_env.case import add_case_arguments, build_instances, case_overrides, load_case, profiles_for
from aidc_env.dayahead import add_price_issue_hour_argument, dayahead_instances, require_price_issue_hour
from aidc_env.env.core import REWARD_CREDITS
from aidc_env.errors import EXIT_INTERRUPTED, CliParser, InputError, require, require_number, run_cli
from aidc_env.forecasts import load_forecasts
from aidc_env.information import INFORMATION
from aidc_env.io import check_output_folder, path_component, read_json_file, write_json
from aidc_env.price_forecast import PRICE_SOURCES

DEFAULTS = PPOConfig()
ISSUE_PLANS_DIR = "issue_plans"
"""OUT's folder of the training and validation horizons' issue plans (``--plan issues``) without --oracle-cache."""
ORACLE_SCHEDULES_DIR = "oracle_schedules"
"""OUT's folder of the oracle's schedules a warm start clones (``--imitation oracle``) without --oracle-cache."""


def add_horizon_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of training on horizons of several days (weeks)."""
    weeks = parser.add_argument_group("horizons of several days (--horizon-days D > 1, e.g. weeks: docs/training.md)")
    weeks.add_argument("--horizon-train-instances", type=int, default=DEFAULTS.horizon_train_instances,
                       help="training instances (D-day horizons starting on training days of the split, with "
                       "--information dayahead all D days with forecasts), evenly spread; held-out starts never train")
    weeks.add_argument("--horizon-validation-instances", type=int, default=DEFAULTS.horizon_validation_instances,
                       help="validation instances (starting on validation days; with --information dayahead)")
    weeks.add_argument("--horizon-plan-time-limit", type=float, default=DEFAULTS.horizon_plan_time_limit_s,
                       help="seconds per plan solve of a training or validation horizon (each issue plan's re-solve)")
    weeks.add_argument("--plan", choices=PLANS, default=DEFAULTS.plan,
                       help="the plan observed and cloned: made once at slot 0 (forecast) or re-made at each forecast "
                       "issue, mpc's plans (issues, the default of horizons; cached in --oracle-cache or OUT/issue_plans)")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = CliParser(
        description="Train sb3-contrib MaskablePPO to dispatch checkpoint-aware LLM pre-training jobs against "
        "day-ahead prices and renewable output. One agent step is one real decision (a checkpoint boundary; "
        "forced slots are played by the wrapper), the reward is the saving versus fixed continuous training, "
        "and the env's safety mask guarantees that every tranche completes. Trains on the train split of the "
        f"profile days (whole weeks, one in four, are held out for evaluate.py: agents/days.py). Shows a progress "
        "bar, logs to TensorBoard (OUT/tb), checkpoints to OUT/checkpoints, and saves OUT/model.zip and "
        f"OUT/config.json. Defaults (docs/training.md): {DEFAULTS.total_timesteps:,} steps. A case with fine-tuning, "
        "inference, an idle-GPU value or several sites takes the per-job action and its defaults "
        f"({', '.join(f'{k}={v}' for k, v in PER_JOB_DEFAULTS.items())}; with several sites also "
        f"{', '.join(f'{k}={v}' for k, v in SITES_DEFAULTS.items())}): a warm start on the oracle's schedules, then PPO.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_case_arguments(parser, day=False, default_case=DEFAULTS.case)
    parser.add_argument("--forecasts", help="day-ahead forecasts, a dataset name or CSV (load, solar, wind; e.g. "
                        "caiso-2023-dayahead): needed with --information dayahead")
    parser.add_argument("--price-forecast", choices=PRICE_SOURCES, default=DEFAULTS.price_forecast,
                        help="with --information dayahead: the price forecast the agent sees, the package's gradient "
                        "boosting fitted on the training days (model, default) or the --forecasts CSV's "
                        "price_forecast_usd_per_mwh column (supplied, e.g. the day-ahead market's LMP)")
    add_price_issue_hour_argument(parser, DEFAULTS.price_issue_hour)
    parser.add_argument("--call-stream", metavar="PROGRAM:SHARE", help="train on grid calls: each episode in a month "
                        "with calls carries, half the time, a call drawn from the generated years 0-199 (e.g. "
                        "bip:0.25, a firm cut of a quarter of the baseline; needs --power-caps or a case with caps)")
    parser.add_argument("--information", choices=INFORMATION, default=DEFAULTS.information,
                        help="what the agent sees: the truth (perfect) or day-ahead forecasts and realised past "
                        "values (dayahead; trains and holds out only days inside the forecast period)")
    parser.add_argument("--timesteps", type=int, default=None, help="total agent steps (decisions: 12 per day in the "
                        f"2048 case; default {DEFAULTS.total_timesteps:,}); with --resume, a new total extends the run")
    parser.add_argument("--split", choices=SPLITS, default=DEFAULTS.split,
                        help="which days train and which are held out: whole ISO weeks, one in four (weeks, "
                        "default), or every 7th day (the earlier split, for comparison); evaluate.py takes the same")
    parser.add_argument("--seed", type=int, default=DEFAULTS.seed, help="seed of the model, the envs and the days")
    parser.add_argument("--n-envs", type=int, default=DEFAULTS.n_envs, help="parallel envs")
    parser.add_argument("--vec-env", choices=("dummy", "subproc"), default=DEFAULTS.vec_env,
                        help="envs in this process (dummy) or one process each (subproc)")
    parser.add_argument("--out", help="output folder (default: runs/ppo-<case>)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest checkpoint in OUT/checkpoints (same config.json)")
    parser.add_argument("--checkpoint-freq", type=int, default=DEFAULTS.checkpoint_freq,
                        help="agent steps between checkpoints")
    parser.add_argument("--config", help="JSON of PPO settings used as the defaults of the flags below (and of "
                        "--seed, --n-envs): best_config.json of python -m agents.tune, or a run's config.json; a "
                        "flag given as well wins")
    hp = parser.add_argument_group("PPO hyperparameters (defaults: docs/training.md)")
    hp.add_argument("--learning-rate", type=float, default=DEFAULTS.learning_rate, help="initial learning rate")
    hp.add_argument("--lr-schedule", choices=("linear", "constant"), default=DEFAULTS.lr_schedule,
                    help="linear decay to 0, or constant")
    hp.add_argument("--n-steps", type=int, default=DEFAULTS.n_steps, help="rollout steps per env per update")
    hp.add_argument("--batch-size", type=int, default=DEFAULTS.batch_size, help="minibatch size")
    hp.add_argument("--n-epochs", type=int, default=DEFAULTS.n_epochs, help="epochs per update")
    hp.add_argument("--gamma", type=float, default=DEFAULTS.gamma, help="discount per decision")
    hp.add_argument("--gae-lambda", type=float, default=DEFAULTS.gae_lambda, help="GAE lambda")
    hp.add_argument("--ent-coef", type=float, default=DEFAULTS.ent_coef, help="entropy bonus")
    hp.add_argument("--clip-range", type=float, default=DEFAULTS.clip_range, help="PPO clip range")
    hp.add_argument("--net-arch", default=",".join(map(str, DEFAULTS.net_arch)),
                    help="hidden layer sizes of the policy and value networks, comma-separated")
    hp.add_argument("--activation", choices=("tanh", "relu"), default=DEFAULTS.activation, help="activation")
    hp.add_argument("--reward-scale-usd", type=float, default=DEFAULTS.reward_scale_usd, help="$ per reward unit")
    hp.add_argument("--lookahead", type=int, default=DEFAULTS.env_kwargs["lookahead"],
                    help="the env's slot-level look-ahead (the wrapper adds a 24-hour hourly forecast)")
    hp.add_argument("--factored-actions", action=argparse.BooleanOptionalAction, default=DEFAULTS.factored_actions,
                    help="choose the joint action one job at a time (else one Discrete over joint actions)")
    hp.add_argument("--choice-features", action=argparse.BooleanOptionalAction, default=DEFAULTS.choice_features,
                    help="per-choice token features of the job choosing (with factored actions)")
    hp.add_argument("--env", choices=ENVS, default=DEFAULTS.env, help="the env's action type: per_job, joint, or "
                    "per_job for cases with fine-tuning, inference, an idle-GPU value or several sites (auto)")
    hp.add_argument("--forecast-plan", action=argparse.BooleanOptionalAction, default=DEFAULTS.forecast_plan,
                    help="with --information dayahead: observe the forecast plan (the oracle's schedule on the "
                    "day-ahead point forecast, solved once per day before training) and the realised forecast error")
    hp.add_argument("--imitation-epochs", type=int, default=DEFAULTS.imitation_epochs,
                    help="epochs of behaviour cloning before PPO starts (0: none): of the forecast plan when it is "
                    "observed, or of the oracle's schedules with --imitation oracle")
    hp.add_argument("--finetune", action=argparse.BooleanOptionalAction, default=DEFAULTS.finetune,
                    help="after the warm start on the plan: PPO at --finetune-lr-factor x the learning rate with "
                    "entropy coefficient 0 (else the full rate and --ent-coef)")
    hp.add_argument("--finetune-lr-factor", type=float, default=DEFAULTS.finetune_lr_factor,
                    help="with --finetune: the learning rate of PPO after the warm start, as a factor of "
                    "--learning-rate")
    hp.add_argument("--validation-every", type=int, default=DEFAULTS.validation_every,
                    help="with --information dayahead: every Nth training day (by date) is a validation day, not "
                    "trained on; the warm start and every checkpoint are evaluated on them and the cheapest is "
                    "saved as OUT/model.zip (OUT/selection.json; 0: off, the last model is saved)")
    hp.add_argument("--imitation", choices=IMITATIONS, default=DEFAULTS.imitation,
                    help="what the warm start clones: the forecast plan (plan) or the oracle's schedules of "
                    "--imitation-days training days (oracle; the per-job action's default)")
    hp.add_argument("--imitation-days", type=int, default=DEFAULTS.imitation_days,
                    help="with --imitation oracle: training days cloned (evenly spread over the train split)")
    hp.add_argument("--oracle-cache", help="folder of cached oracle answers, re-read instead of solved again: with "
                    "--imitation oracle the oracle's schedules (one JSON per day and instance; default "
                    f"OUT/{ORACLE_SCHEDULES_DIR}), with --plan issues the issue plans (default OUT/{ISSUE_PLANS_DIR})")
    hp.add_argument("--oracle-time-limit", type=float, default=TEACHER_TIME_LIMIT_S,
                    help="with --imitation oracle: seconds per training day's oracle solve")
    hp.add_argument("--oracle-workers", type=int, default=1,
                    help="with --imitation oracle: oracle solves at once (processes)")
    hp.add_argument("--reward-credit", choices=REWARD_CREDITS, default=DEFAULTS.reward_credit,
                    help="the per-job action's reward: the objective paid when a decision point closes (decision), or "
                    "per agent step the objective change of that job's choice (job; the per-job defaults)")
    hp.add_argument("--reward-day-scaled", action=argparse.BooleanOptionalAction,
                    default=DEFAULTS.reward_day_scaled, help="divide each day's rewards by its price scale")
    add_horizon_arguments(parser)
    early, _ = parser.parse_known_args(argv)
    overrides = ppo_overrides(load_case(early.case))  # the per-job (and several sites') defaults of the case
    parser.set_defaults(**{k: v for k, v in overrides.items() if k != "total_timesteps"},
                        default_timesteps=overrides.get("total_timesteps", DEFAULTS.total_timesteps))
    if early.horizon_days is not None and early.horizon_days > 1:  # weeks: agents/ppo_config.py HORIZON_DEFAULTS
        parser.set_defaults(**{k: v for k, v in HORIZON_DEFAULTS.items() if k != "total_timesteps"},
                            default_timesteps=HORIZON_DEFAULTS["total_timesteps"])
    if early.config is not None:
        parser.set_defaults(**PPOConfig.hyperparameters_of(read_json_file(early.config, "config")))
    args = parser.parse_args(argv)
    validate_args(args)
    return args


def validate_args(args: argparse.Namespace) -> None:
    """Refuse bad flags before any work (bounds and their reasons: aidc_env/limits.py)."""
    require_number(args.oracle_time_limit, "oracle-time-limit", 0.0, limits.MAX_TIME_LIMIT_S, low_open=True)
    require_number(args.oracle_workers, "oracle-workers", 1, limits.MAX_WORKERS, integer=True)
    if args.timesteps is not None:
        require_number(args.timesteps, "timesteps", 1, limits.MAX_TIMESTEPS, integer=True)
    require_number(args.seed, "seed", 0, limits.MAX_SEED, integer=True)
    require_number(args.n_envs, "n-envs", 1, limits.MAX_N_ENVS, integer=True)
    require_number(args.checkpoint_freq, "checkpoint-freq", 1, limits.MAX_TIMESTEPS, integer=True)
    if args.gpus is not None:
        require_number(args.gpus, "gpus", 1, limits.MAX_GPUS, integer=True)
    if args.segments is not None:
        require_number(args.segments, "segments", 1, limits.MAX_SLOTS_PER_DAY, integer=True)
    if args.renewable_ratio is not None:
        require_number(args.renewable_ratio, "renewable-ratio", 0.0, limits.MAX_RENEWABLE_RATIO)
    require_number(args.learning_rate, "learning-rate", 0.0, limits.MAX_LEARNING_RATE, low_open=True)
    require_number(args.n_steps, "n-steps", 1, limits.MAX_N_STEPS, integer=True)
    require_number(args.batch_size, "batch-size", 1, limits.MAX_N_STEPS * limits.MAX_N_ENVS, integer=True)
    require_number(args.n_epochs, "n-epochs", 1, limits.MAX_N_EPOCHS, integer=True)
    require_number(args.gamma, "gamma", 0.0, 1.0)
    require_number(args.gae_lambda, "gae-lambda", 0.0, 1.0)
    require_number(args.ent_coef, "ent-coef", 0.0, limits.MAX_COEF)
    require_number(args.clip_range, "clip-range", 0.0, limits.MAX_COEF, low_open=True)
    require_number(args.reward_scale_usd, "reward-scale-usd", 0.0, limits.MAX_REWARD_SCALE_USD, low_open=True)
    require_number(args.imitation_epochs, "imitation-epochs", 0, limits.MAX_N_EPOCHS, integer=True)
    require_number(args.finetune_lr_factor, "finetune-lr-factor", 0.0, 1.0, low_open=True)
    require_number(args.validation_every, "validation-every", 0, limits.MAX_VALIDATION_EVERY, integer=True)
    require(args.validation_every != 1, "validation-every", "must be 0 (off) or at least 2 (1 would leave no "
            "training day)")
    require(isinstance(args.finetune, bool), "finetune", "must be true or false")
    require_number(args.imitation_days, "imitation-days", 1, limits.MAX_DAYS, integer=True)
    require(args.imitation in IMITATIONS, "imitation", f"must be one of {', '.join(IMITATIONS)}, got {args.imitation!r}")
    require(args.reward_credit in REWARD_CREDITS, "reward-credit", f"must be one of {', '.join(REWARD_CREDITS)}, got "
            f"{args.reward_credit!r}")
    require_number(args.horizon_train_instances, "horizon-train-instances", 1, limits.MAX_DAYS, integer=True)
    require_number(args.horizon_validation_instances, "horizon-validation-instances", 0, limits.MAX_DAYS, integer=True)
    require_number(args.horizon_plan_time_limit, "horizon-plan-time-limit", 0.0, limits.MAX_TIME_LIMIT_S, low_open=True)
    require_number(args.lookahead, "lookahead", 0, limits.MAX_LOOKAHEAD_SLOTS, integer=True)
    args.net_arch = parse_net_arch(args.net_arch)
    require(args.lr_schedule in ("linear", "constant"), "lr-schedule", f"must be linear or constant, got "
            f"{args.lr_schedule!r}")
    require(args.activation in ("tanh", "relu"), "activation", f"must be tanh or relu, got {args.activation!r}")
    for flag in ("factored_actions", "choice_features", "reward_day_scaled"):
        require(isinstance(getattr(args, flag), bool), flag.replace("_", "-"), "must be true or false")
    require(args.information == "perfect" or args.forecasts is not None, "forecasts",
            "--information dayahead needs --forecasts CSV (the day-ahead load, solar and wind forecasts)")
    require(args.price_forecast == DEFAULTS.price_forecast or args.information == "dayahead", "price-forecast",
            "a price forecast is seen with --information dayahead only")
    require_price_issue_hour(args.price_issue_hour, args.forecasts is not None)
    require(args.price_issue_hour == DEFAULTS.price_issue_hour or args.information == "dayahead", "price-issue-hour",
            "a price issue hour applies with --information dayahead only")


def parse_net_arch(text: str | list[int]) -> list[int]:
    """``"256,256"`` → [256, 256]; InputError naming net-arch unless 1..MAX_LAYERS positive widths."""
    if isinstance(text, list):  # from a --config file: checked like the flag
        text = ",".join(map(str, text))
    parts = [p.strip() for p in str(text).split(",")]
    require(all(p.isdigit() for p in parts), "net-arch", f"must be comma-separated layer sizes like 256,256, got {text!r}")
    widths = [int(p) for p in parts]
    require(1 <= len(widths) <= limits.MAX_LAYERS, "net-arch", f"must have 1..{limits.MAX_LAYERS} layers")
    for width in widths:
        require_number(width, "net-arch", 1, limits.MAX_LAYER_WIDTH, integer=True)
    return widths


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out, config, newest = run_config(args)  # 1. config (a resumed run: its own)
    case = load_case(config.case)  # 2. days: the train split of the profile source, instances built once, here
    profiles = profiles_for(case, config.profiles)
    horizon = int(config.overrides.get("horizon_days") or case.horizon_days)
    instances = training_instances(config, case, profiles, horizon)
    print(f"case {case.name}: training on {len(config.train_days)} days of {profiles.source} "
          f"({len(config.heldout_days)} held out, {len(config.validation_days)} validation), "
          f"{config.total_timesteps:,} steps, seed {config.seed}, {config.n_envs} {config.vec_env} envs -> {out}")
    train = [instances[day] for day in config.train_days]
    config.env = action_type(config, train)  # "auto" resolved, recorded with the model
    require(config.imitation != "oracle" or config.imitation_epochs == 0 or config.env == "per_job",
            "imitation", "--imitation oracle clones into the per-job action: use --env per_job or a per-job case")
    import torch

    torch.set_num_threads(config.torch_threads)
    tick = time.perf_counter()  # 3. envs (with the forecast plan observed, every training day's plan solved once)
    cache = Path(args.oracle_cache) if args.oracle_cache else None
    plans = ForecastPlans() if horizon == 1 else horizon_plans(config, cache or out / ISSUE_PLANS_DIR)
    vec_env = make_vec_env(config, train, plans)
    if observes_plan(config):
        print(f"forecast plans of {len(train)} training days solved in {time.perf_counter() - tick:.0f} s")
    if newest is not None:  # 4. model: the newest checkpoint with its step count, or fresh and warm-started
        from sb3_contrib import MaskablePPO

        model, newest = load_newest_good(out / "checkpoints", lambda path: MaskablePPO.load(
            path, env=vec_env, device="cpu", tensorboard_log=str(out / "tb")))
        print(f"resuming from {newest} at step {model.num_timesteps:,}")
    else:
        model = make_model(config, vec_env, tensorboard_log=str(out / "tb"))
        warm_start(model, config, args, train, plans, cache or out / ORACLE_SCHEDULES_DIR, out)
        write_json(out / CONFIG_FILE, {"config": config.to_dict(), "status": "training"})
    remaining = config.total_timesteps - model.num_timesteps
    seconds, interrupted = learn(model, config, out, remaining, resumed=newest is not None)  # 5. learn
    if interrupted:
        with contextlib.suppress(Exception):  # subprocess envs may have died with the Ctrl-C
            vec_env.close()
        return save_interrupted(model, config, out, seconds)
    vec_env.close()
    wall = previous_train_seconds(out) + seconds if newest is not None else seconds  # 6. save and check
    facts = {"status": "done", "num_timesteps": int(model.num_timesteps), "train_seconds": wall,
             "steps_per_second": (remaining / seconds) if remaining > 0 and seconds > 0 else None}
    if config.validation_days:  # keep the candidate cheapest on the validation days (agents/selection.py)
        tick = time.perf_counter()
        model, kept = select_model(model, config, out, [instances[day] for day in config.validation_days], plans)
        facts["selection"] = {**kept, "seconds": time.perf_counter() - tick}
    model_path, config_path = save_run(model, config, out, extra=facts)  # saved before the check can be interrupted
    # (not on horizons: each held-out week would need its forecast plan solved; evaluate.py compares them)
    check = heldout_check(model, [instances[day] for day in config.heldout_days]) if config.heldout_days \
        and horizon == 1 else {}
    write_json(config_path, {**read_json_file(config_path, "out"), "heldout_check": check})
    print(f"trained {facts['num_timesteps']:,} steps in {seconds / 60:.1f} min; saved {model_path} and {config_path}")
    if check:
        print(f"held-out days ({check['days']}): mean objective ppo ${check['ppo']:,.2f}, fixed ${check['fixed']:,.2f}"
              f", greedy ${check['greedy']:,.2f}; tranches met {check['tranches_met']:.0%}, feasible "
              f"{check['feasible']:.0%}")
    print(f"evaluate: {evaluate_command(config, case.name, model_path)}")
    return 0


def run_config(args: argparse.Namespace) -> tuple[Path, PPOConfig, Path | None]:
    """The output folder, the run's config (from the flags; with --resume the run's own config.json, so that a
    resumed run is the same run) and the newest checkpoint to resume from (None: a fresh run)."""
    case = load_case(args.case)
    out = Path(args.out or Path("runs") / f"ppo-{path_component(case.name, 'name')}")
    check_output_folder(out, "out")
    newest = newest_checkpoint(out / "checkpoints") if args.resume else None
    require(not args.resume or newest is not None, "resume", f"no checkpoint in {out / 'checkpoints'}")
    require(args.resume or not (out / CONFIG_FILE).exists(), "out",
            f"{out} already holds a run; continue it with --resume or give another --out")
    if newest is not None and (out / CONFIG_FILE).exists():
        record = read_json_file(out / CONFIG_FILE, "resume")
        require(isinstance(record, dict) and isinstance(record.get("config"), dict), "resume",
                f"{out / CONFIG_FILE} has no config")
        config = PPOConfig.from_dict(record["config"])
        if args.timesteps is not None:
            config.total_timesteps = args.timesteps
        return out, config, newest
    # every PPOConfig field that a flag of the same name sets
    flags = {f.name: getattr(args, f.name) for f in dataclasses.fields(PPOConfig) if hasattr(args, f.name)}
    config = PPOConfig(**flags, overrides=case_overrides(args),
                       env_kwargs={**DEFAULTS.env_kwargs, "lookahead": args.lookahead, "information": args.information,
                                   **({"call_stream": CallStream.of(args.call_stream).to_dict()} if args.call_stream
                                      else {})},
                       horizon_plan_time_limit_s=args.horizon_plan_time_limit,
                       total_timesteps=args.default_timesteps if args.timesteps is None else args.timesteps)
    case.with_overrides(**config.overrides)  # e.g. --segments 7 is refused here, before any work
    return out, config, newest


def training_instances(config: PPOConfig, case, profiles, horizon: int) -> dict:
    """The instances of the run's days by first day; sets the config's train, validation and held-out days (the
    split of :func:`agents.days.split_days`; with day-ahead information, forecasts fitted on the training days and
    the validation days of :func:`agents.selection.split_validation`)."""
    instances = build_instances(case, profiles=profiles, **config.overrides)
    config.train_days, config.heldout_days = split_days(profiles.dates(), config.split)
    if not config.train_days:
        config.train_days = list(profiles.dates())
    if horizon > 1:  # D-day instances (weeks) starting on training days; held-out starts never train
        return horizon_instances(config, instances, profiles)
    if config.information == "dayahead":  # days without forecasts leave
        instances = dayahead_instances(instances, profiles, load_forecasts(config.forecasts), config.train_days,
                                       seed=config.seed, out_of_sample=False, price_source=config.price_forecast,
                                       price_issue_hour=config.price_issue_hour)
    config.train_days = [day for day in config.train_days if day in instances]  # horizons past the data leave
    config.heldout_days = [day for day in config.heldout_days if day in instances]
    if config.information == "dayahead":
        require(len(config.train_days) > 0, "forecasts", "no training day inside the forecast period")
        config.train_days, config.validation_days = split_validation(config.train_days, config.validation_every)
    return instances


def warm_start(model, config: PPOConfig, args: argparse.Namespace, train: list, plans: ForecastPlans,
               cache: Path, out: Path) -> None:
    """Behaviour cloning before PPO (agents/imitation.py): of the oracle's schedules of ``imitation_days`` training
    days (``--imitation oracle``, cached in ``cache``), or of the forecast plan; nothing without either."""
    tick = time.perf_counter()
    if config.imitation == "oracle" and config.imitation_epochs > 0:
        days = {inst.day: inst for inst in train}
        cloned = [days[day] for day in spread(list(days), config.imitation_days)]
        schedules = teacher_schedules(cloned, cache, args.oracle_time_limit, args.oracle_workers)
        solved = time.perf_counter() - tick
        demos, refused = teacher_demonstrations(config, cloned, schedules)
        fit = pretrain(model, demos, config.imitation_epochs, seed=config.seed, vf_coef=config.vf_coef)
        print(f"warm start on the oracle's schedules of {len(schedules)} of {len(cloned)} training days (solved or "
              f"read from {cache} in {solved:.0f} s): {fit['decisions']:.0f} decisions, {refused} refused by the "
              f"mask, {config.imitation_epochs} epochs, {fit['matches_plan']:.1%} matched, in "
              f"{time.perf_counter() - tick:.0f} s")
    elif warm_starts(config):
        fit = pretrain(model, plan_demonstrations(config, train, plans), config.imitation_epochs,
                       seed=config.seed, vf_coef=config.vf_coef)
        print(f"warm start on the forecast plan: {fit['decisions']:.0f} decisions, {config.imitation_epochs} "
              f"epochs, {fit['matches_plan']:.1%} matched, in {time.perf_counter() - tick:.0f} s")
        if config.validation_days:  # the first candidate of the selection
            save_model_atomically(model, out / WARM_START_FILE)


def learn(model, config: PPOConfig, out: Path, remaining: int, resumed: bool) -> tuple[float, bool]:
    """PPO for ``remaining`` agent steps, a checkpoint every ``checkpoint_freq`` (at the next rollout boundary,
    written atomically); the first Ctrl-C asks for a stop at the next step, a second one interrupts at once.
    Returns (seconds, whether Ctrl-C stopped it)."""
    from stable_baselines3.common.callbacks import CallbackList

    interrupted = []
    callbacks = CallbackList([checkpoint_callback(config.checkpoint_freq, out / "checkpoints"),
                              stop_callback(lambda: bool(interrupted))])
    warnings.filterwarnings("ignore", message="rich is experimental")  # SB3's progress bar is tqdm.rich

    def on_sigint(signum, frame):
        interrupted.append(signum)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    start = time.perf_counter()
    previous_handler = signal.signal(signal.SIGINT, on_sigint)
    try:
        if remaining > 0:
            model.learn(total_timesteps=remaining, callback=callbacks, progress_bar=True,
                        reset_num_timesteps=not resumed, tb_log_name="ppo")
    except (KeyboardInterrupt, EOFError, BrokenPipeError, ConnectionResetError):
        if not interrupted:  # a subprocess env that died on its own: not a Ctrl-C
            raise
    finally:
        signal.signal(signal.SIGINT, previous_handler)
    return time.perf_counter() - start, bool(interrupted)


def evaluate_command(config: PPOConfig, case_name: str, model_path: Path) -> str:
    """The evaluate.py command line of a trained model (its data, information and case overrides)."""
    return (f"python evaluate.py --case {case_name} --model {model_path}"
            + (f" --profiles {config.profiles}" if config.profiles else "")
            + (f" --forecasts {config.forecasts} --information dayahead" if config.information == "dayahead" else "")
            + (f" --price-forecast {config.price_forecast}" if config.price_forecast != DEFAULTS.price_forecast
               else "")
            + (f" --price-issue-hour {config.price_issue_hour}"
               if config.price_issue_hour != DEFAULTS.price_issue_hour else "")
            + "".join(f" --{k.replace('_', '-')} {v['curve'] if k == 'power_caps' else v}"
                      for k, v in config.overrides.items()))


def horizon_instances(config: PPOConfig, instances: dict, profiles) -> dict:
    """The training and validation instances of D-day horizons (with forecasts under day-ahead information); sets
    ``config.train_days``, ``validation_days`` and ``heldout_days`` to their first days
    (:func:`agents.selection.split_horizon_starts`: instances wholly within training days train or validate; the
    held-out weeks are held out). Only the chosen instances carry forecasts, each out of sample as evaluate.py makes
    a held-out week's: from a price forecaster fitted on the split's training days outside the instance."""
    split_train = list(config.train_days)
    dayahead = config.information == "dayahead"
    forecasts = load_forecasts(config.forecasts) if dayahead else None
    covered = None if forecasts is None else set(
        forecasts.supplied_dates() if config.price_forecast == "supplied" else forecasts.dates())
    starts = [day for day, inst in instances.items() if covered is None or set(inst.days) <= covered]
    train, validation, heldout = split_horizon_starts(
        profiles.dates(), starts, config.validation_every if dayahead else 0, config.horizon_train_instances,
        config.horizon_validation_instances if dayahead else 0,
        horizon_days=max((len(inst.days) for inst in instances.values()), default=1), split=config.split)
    chosen = {day: instances[day] for day in train + validation}
    if forecasts is not None and chosen:
        chosen = dayahead_instances(chosen, profiles, forecasts, split_train, seed=config.seed,
                                    price_source=config.price_forecast, price_issue_hour=config.price_issue_hour)
    config.train_days = [day for day in train if day in chosen]
    config.validation_days = [day for day in validation if day in chosen]
    config.heldout_days = heldout
    require(len(config.train_days) > 0, "horizon-days", "no instance of the horizon starts on a training day"
            + (" with forecasts for all its days" if dayahead else ""))
    return chosen


def horizon_plans(config: PPOConfig, cache_dir: Path) -> ForecastPlans:
    """The plans of horizons, each solve with ``config.horizon_plan_time_limit_s``; issue plans kept in
    ``cache_dir`` (re-read by a resumed run or another run given the same ``--oracle-cache``)."""
    from agents.plan_features import PLAN_MIP_GAP
    from oracle.rolling import RollingOracle

    return ForecastPlans(RollingOracle(time_limit_s=config.horizon_plan_time_limit_s, mip_gap=PLAN_MIP_GAP),
                         cache_dir=cache_dir)


def select_model(model, config: PPOConfig, out: Path, validation: list, plans: ForecastPlans):
    """The warm start (if saved) and every checkpoint of the run, evaluated on the validation days; returns the
    cheapest model (the earlier on a tie) and the facts of the choice (the history: OUT/selection.json)."""
    paths = [out / WARM_START_FILE] if (out / WARM_START_FILE).is_file() else []
    paths += checkpoints_newest_first(out / "checkpoints")[::-1]
    candidates, models = [], []
    for path in paths:
        match = CHECKPOINT_PATTERN.fullmatch(path.name)
        steps = int(match.group(1)) if match else 0
        loaded = load_model(path)
        cost, met = validation_cost(loaded, validation, plans)
        candidates.append(Candidate(label="warm start" if not match else path.name, steps=steps, path=str(path),
                                    cost_usd=cost, tranches_met=met))
        models.append(loaded)
        print(f"validation ({len(validation)} days): {candidates[-1].label} ${cost:,.2f}, tranches met {met}")
    if not candidates:  # no checkpoint written (an interrupted start): the model as it is
        cost, met = validation_cost(model, validation, plans)
        candidates.append(Candidate("final", int(model.num_timesteps), "", cost, met))
        models.append(model)
    kept = select_best(candidates)
    write_selection(out, config.validation_days, candidates, kept)
    print(f"selected {candidates[kept].label} (validation ${candidates[kept].cost_usd:,.2f}); history in "
          f"{out / 'selection.json'}")
    return models[kept], {"kept": candidates[kept].label, "kept_steps": candidates[kept].steps,
                          "validation_cost_usd": candidates[kept].cost_usd}


def previous_train_seconds(out: Path) -> float:
    """Wall time of the run so far (its config.json), 0 if unknown."""
    try:
        record = read_json_file(out / CONFIG_FILE, "resume")
    except InputError:
        return 0.0
    seconds = record.get("train_seconds") if isinstance(record, dict) else None
    return float(seconds) if isinstance(seconds, (int, float)) else 0.0


def save_interrupted(model, config: PPOConfig, out: Path, seconds: float) -> int:
    """After Ctrl-C: a resumable checkpoint and the model (status "interrupted"), one line, exit code 130."""
    checkpoint = save_checkpoint(model, out / "checkpoints")
    model_path, _ = save_run(model, config, out, extra={
        "status": "interrupted", "num_timesteps": int(model.num_timesteps),
        "train_seconds": previous_train_seconds(out) + seconds})
    print(f"interrupted at step {model.num_timesteps:,}: saved {checkpoint} and {model_path}; continue with "
          f"python train.py --out {out} --resume", file=sys.stderr)
    return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(run_cli(main))

