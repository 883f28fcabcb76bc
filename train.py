"""Train a MaskablePPO dispatcher on many days of the 2048 case (or any case).

    python train.py --case 2048                                              # bundled representative days
    python train.py --case 2048 --profiles ../shared/data/caiso/caiso_2023_hourly.csv   # the full 2023 year
    python train.py --case 2048 --resume                                     # continue an interrupted run

Reads top to bottom, CleanRL style: args → config → days → envs → model → callbacks → learn → save.
Train days are the train split of ``agents.days.split_days`` over the profile source (every 7th complete
day is held out for evaluate.py). What the agent sees and is rewarded for is documented in agents/ppo.py,
the defaults and their measured results in docs/training.md.

Outputs (``--out``, default runs/ppo-<case>): model.zip (the config inside), config.json (every
hyperparameter, env kwargs, train and held-out days, seed, versions, wall time, a held-out check against
fixed and greedy), tb/ (TensorBoard: ``tensorboard --logdir runs``), checkpoints/ (every
``--checkpoint-freq`` steps; ``--resume`` continues from the newest with its step count).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from agents.days import HOLDOUT_EVERY, split_days
from agents.ppo import CONFIG_FILE, PPOConfig, heldout_check, make_model, make_vec_env, save_run
from aidc_env.case import add_case_arguments, build_instances, case_overrides, load_case
from aidc_env.errors import require, run_cli
from aidc_env.profiles import load_profiles

DEFAULTS = PPOConfig()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Train sb3-contrib MaskablePPO to dispatch checkpoint-aware LLM pre-training jobs against "
        "day-ahead prices and renewable output. One agent step is one real decision (a checkpoint boundary; "
        "forced slots are played by the wrapper), the reward is the saving versus fixed continuous training, "
        "and the env's safety mask guarantees that every tranche completes. Trains on the train split of the "
        f"profile days (every {HOLDOUT_EVERY}th complete day is held out for evaluate.py). Shows a progress "
        "bar, logs to TensorBoard (OUT/tb), checkpoints to OUT/checkpoints, and saves OUT/model.zip and "
        f"OUT/config.json. Defaults (docs/training.md): {DEFAULTS.total_timesteps:,} steps, measured 27.4 minutes "
        "on a 2-core machine.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_case_arguments(parser, day=False, default_case=DEFAULTS.case)
    parser.add_argument("--timesteps", type=int, default=None,
                        help=f"total agent steps (decisions: 12 per day in the 2048 case; default "
                        f"{DEFAULTS.total_timesteps:,}); with --resume, a new total extends the run")
    parser.add_argument("--seed", type=int, default=DEFAULTS.seed, help="seed of the model, the envs and the days")
    parser.add_argument("--n-envs", type=int, default=DEFAULTS.n_envs, help="parallel envs")
    parser.add_argument("--vec-env", choices=("dummy", "subproc"), default=DEFAULTS.vec_env,
                        help="envs in this process (dummy) or one process each (subproc)")
    parser.add_argument("--out", help="output folder (default: runs/ppo-<case>)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest checkpoint in OUT/checkpoints (same config.json)")
    parser.add_argument("--checkpoint-freq", type=int, default=DEFAULTS.checkpoint_freq,
                        help="agent steps between checkpoints")
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
    hp.add_argument("--reward-day-scaled", action=argparse.BooleanOptionalAction,
                    default=DEFAULTS.reward_day_scaled, help="divide each day's rewards by its price scale")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    # 1. Config (with --resume: the run's own config.json, so that a resumed run is the same run).
    case = load_case(args.case)
    out = Path(args.out or Path("runs") / f"ppo-{case.name}")
    checkpoints = out / "checkpoints"
    newest = newest_checkpoint(checkpoints) if args.resume else None
    require(not args.resume or newest is not None, "resume", f"no checkpoint in {checkpoints}")
    if newest is not None and (out / CONFIG_FILE).exists():
        config = PPOConfig.from_dict(json.loads((out / CONFIG_FILE).read_text())["config"])
        if args.timesteps is not None:
            config.total_timesteps = args.timesteps
    else:
        config = PPOConfig(
            case=args.case, profiles=args.profiles, overrides=case_overrides(args),
            env_kwargs={**DEFAULTS.env_kwargs, "lookahead": args.lookahead},
            reward_scale_usd=args.reward_scale_usd, reward_day_scaled=args.reward_day_scaled,
            factored_actions=args.factored_actions, choice_features=args.choice_features, seed=args.seed,
            total_timesteps=DEFAULTS.total_timesteps if args.timesteps is None else args.timesteps,
            n_envs=args.n_envs, vec_env=args.vec_env, learning_rate=args.learning_rate,
            lr_schedule=args.lr_schedule, n_steps=args.n_steps, batch_size=args.batch_size, n_epochs=args.n_epochs,
            gamma=args.gamma, gae_lambda=args.gae_lambda, ent_coef=args.ent_coef, clip_range=args.clip_range,
            net_arch=[int(x) for x in args.net_arch.split(",") if x.strip()], activation=args.activation,
            checkpoint_freq=args.checkpoint_freq)
        require(config.total_timesteps > 0, "timesteps", "must be > 0")
        require(config.n_envs > 0, "n-envs", "must be > 0")

    # 2. Days: the train split of the profile source, one instance per day (built once, here).
    case = load_case(config.case)
    profiles = load_profiles(config.profiles, renewable_capacity_mw=case.renewable_capacity_mw)
    instances = build_instances(case, profiles=profiles, **config.overrides)
    config.train_days, config.heldout_days = split_days(profiles.dates())
    if not config.train_days:
        config.train_days = list(profiles.dates())
    print(f"case {case.name}: training on {len(config.train_days)} days of {profiles.source} "
          f"({len(config.heldout_days)} held out), {config.total_timesteps:,} steps, seed {config.seed}, "
          f"{config.n_envs} {config.vec_env} envs -> {out}")

    import torch

    torch.set_num_threads(config.torch_threads)

    # 3. Envs.
    vec_env = make_vec_env(config, [instances[day] for day in config.train_days])

    # 4. Model (fresh, or the newest checkpoint with its step count).
    tb = str(out / "tb")
    if newest is not None:
        from sb3_contrib import MaskablePPO

        model = MaskablePPO.load(newest, env=vec_env, device="cpu", tensorboard_log=tb)
        print(f"resuming from {newest} at step {model.num_timesteps:,}")
    else:
        model = make_model(config, vec_env, tensorboard_log=tb)
        out.mkdir(parents=True, exist_ok=True)
        (out / CONFIG_FILE).write_text(json.dumps({"config": config.to_dict(), "status": "training"}, indent=1))

    # 5. Callbacks: periodic checkpoints (save_freq counts vec-env steps of n_envs agent steps each).
    from stable_baselines3.common.callbacks import CheckpointCallback

    checkpoint_cb = CheckpointCallback(save_freq=max(config.checkpoint_freq // config.n_envs, 1),
                                       save_path=str(checkpoints), name_prefix="ppo")

    # 6. Learn (SB3's progress bar is tqdm.rich, which warns that it is experimental).
    warnings.filterwarnings("ignore", message="rich is experimental")
    remaining = config.total_timesteps - model.num_timesteps
    start = time.perf_counter()
    if remaining > 0:
        model.learn(total_timesteps=remaining, callback=checkpoint_cb, progress_bar=True,
                    reset_num_timesteps=newest is None, tb_log_name="ppo")
    seconds = time.perf_counter() - start
    vec_env.close()

    # 7. Save, and check the model on the held-out days against fixed and greedy (no oracle: evaluate.py).
    check = heldout_check(model, [instances[day] for day in config.heldout_days]) if config.heldout_days else {}
    previous = json.loads((out / CONFIG_FILE).read_text()) if (out / CONFIG_FILE).exists() else {}
    wall = previous.get("train_seconds", 0.0) + seconds if newest is not None else seconds
    model_path, config_path = save_run(model, config, out, extra={
        "status": "done", "num_timesteps": int(model.num_timesteps), "train_seconds": wall,
        "steps_per_second": (remaining / seconds) if remaining > 0 and seconds > 0 else None,
        "heldout_check": check})
    print(f"trained {model.num_timesteps:,} steps in {seconds / 60:.1f} min; saved {model_path} and {config_path}")
    if check:
        print(f"held-out days ({check['days']}): mean operating cost ppo ${check['ppo']:,.2f}, fixed "
              f"${check['fixed']:,.2f}, greedy ${check['greedy']:,.2f}; tranches met {check['tranches_met']:.0%}")
    print(f"evaluate: python evaluate.py --case {case.name} --model {model_path}"
          + (f" --profiles {config.profiles}" if config.profiles else ""))
    return 0


def newest_checkpoint(folder: Path) -> Path | None:
    """The checkpoint with the most steps (files ppo_<steps>_steps.zip)."""
    found = []
    for path in folder.glob("ppo_*_steps.zip"):
        match = re.fullmatch(r"ppo_(\d+)_steps\.zip", path.name)
        if match:
            found.append((int(match.group(1)), path))
    return max(found)[1] if found else None


if __name__ == "__main__":
    sys.exit(run_cli(main))

