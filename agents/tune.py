"""PPO hyper-parameter search with Optuna, resumable, on a process pool or Ray.

    python -m agents.tune --trials 6 --steps 50000 --profiles caiso-2023
    python -m agents.tune --trials 6 --steps 50000 --backend ray --workers 2        # the same search on Ray
    python train.py --config runs/tune-2048/best_config.json --profiles ...         # train the best settings

Each trial trains MaskablePPO for ``--steps`` agent steps (short: a search must fit on 2 cores) with settings
drawn by Optuna's TPE sampler, on the training days less the validation days, and scores it on the validation
days (``--val-days`` of the training split, evenly spread; the held-out days stay unseen): the mean of the
policy's operating cost over fixed continuous training's, day by day (lower is better; 1 = no saving).
The score is reported ``--reports`` times during training, and Optuna's median pruner stops a trial that does
worse than the median of earlier trials at the same step.

The study lives in ``--storage`` (default ``sqlite:///<out>/study.db``): ``--trials N`` is the number of finished trials
(complete or pruned) the study should hold, so running the same command again after a crash (kill -9, a lost node) goes
on where it stopped. A trial left running by a crashed search is marked failed and its settings are tried again first.
Trials run ``--workers`` at a time on the backend (:mod:`aidc_env.parallel`; a batch is drawn, run, and told before the
next); workers report to the storage, so on a Ray cluster give a database every node reaches (e.g.
``postgresql://...``). Writes ``<out>/best_config.json`` (read by ``train.py --config``) and ``<out>/trials.csv``.
``--compare-steps S`` then trains the best settings and train.py's defaults for S steps each on the whole training split
(same seed) and scores both on the held-out days.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.days import split_days, spread
from agents.ppo_config import PPOConfig
from aidc_env import limits
from aidc_env.baselines import fixed_schedule
from aidc_env.case import add_case_arguments, build_instances, case_overrides, load_case
from aidc_env.errors import CliParser, InputError, require, require_number, run_cli
from aidc_env.instance import Instance
from aidc_env.io import atomic_path, check_output_folder, path_component, write_json
from aidc_env.parallel import Backend, add_backend_arguments, backend_from_args, open_pool
from aidc_env.profiles import load_profiles
from aidc_env.simulator import simulate

DEFAULT_STEPS_PER_TRIAL = 50_000
"""Agent steps per trial: about 80 s of training on one core of the 2-core machine (docs/training.md measures
~600 steps/s), against 1,000,000 for a full train.py run."""
DEFAULT_VALIDATION_DAYS = 8
DEFAULT_REPORTS = 4
"""Intermediate scores per trial (each a pruning decision)."""
PRUNER_STARTUP_TRIALS = 2
"""Trials that finish before the median pruner may stop one (Optuna's MedianPruner)."""
STUDY_DIRECTION = "minimize"


def suggest(trial: Any) -> dict[str, Any]:
    """The search space: PPO settings of :class:`PPOConfig`, around train.py's defaults (docs/training.md)."""
    return {"learning_rate": trial.suggest_float("learning_rate", 1e-4, 1e-3, log=True),
            "n_steps": trial.suggest_categorical("n_steps", [64, 128, 256]),
            "batch_size": trial.suggest_categorical("batch_size", [128, 256, 512]),
            "n_epochs": trial.suggest_categorical("n_epochs", [5, 10, 20]),
            "gae_lambda": trial.suggest_float("gae_lambda", 0.9, 0.99),
            "clip_range": trial.suggest_categorical("clip_range", [0.1, 0.2, 0.3]),
            "ent_coef": trial.suggest_float("ent_coef", 1e-4, 5e-2, log=True),
            "net_arch": [int(w) for w in trial.suggest_categorical("net_arch", ["64,64", "256,256"]).split(",")]}


def make_pruner() -> Any:
    import optuna

    return optuna.pruners.MedianPruner(n_startup_trials=PRUNER_STARTUP_TRIALS, n_warmup_steps=0)


def cost_ratio_to_fixed(model: Any, instances: Sequence[Instance]) -> float:
    """Mean over the days of the model's operating cost / fixed continuous training's (simulator-scored)."""
    from agents.ppo import ppo_schedule

    ratios = [simulate(inst, ppo_schedule(model, inst)).metrics.operating_cost_usd
              / simulate(inst, fixed_schedule(inst)).metrics.operating_cost_usd for inst in instances]
    return float(np.mean(ratios))


def train_and_score(config: dict[str, Any], train: Sequence[Instance], score: Sequence[Instance], reports: int = 1,
                    report: Callable[[float, int], bool] | None = None) -> tuple[float, int, bool]:
    """Train ``config`` (a :class:`PPOConfig` as a dict) on ``train`` and score it on ``score``
    (:func:`cost_ratio_to_fixed`), ``reports`` times evenly during training; ``report(score, step)`` returning
    False stops the training (pruned). Returns (last score, steps trained, pruned)."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    from agents.ppo import make_model, make_vec_env

    ppo = PPOConfig.from_dict(config)
    torch.set_num_threads(ppo.torch_threads)
    every = max(1, ppo.total_timesteps // max(1, reports))
    state = {"score": float("nan"), "pruned": False, "next": every}

    class Reports(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps < state["next"] or self.num_timesteps >= ppo.total_timesteps:
                return True
            state["next"] += every
            state["score"] = cost_ratio_to_fixed(self.model, score)
            if report is not None and not report(state["score"], int(self.num_timesteps)):
                state["pruned"] = True
                return False
            return True

    vec_env = make_vec_env(ppo, list(train))
    model = make_model(ppo, vec_env)
    model.learn(total_timesteps=ppo.total_timesteps, callback=Reports(), progress_bar=False)
    vec_env.close()
    if not state["pruned"]:
        state["score"] = cost_ratio_to_fixed(model, score)
        if report is not None:
            report(state["score"], int(model.num_timesteps))
    return state["score"], int(model.num_timesteps), bool(state["pruned"])


def run_trial(storage: str, study_name: str, trial_id: int, config: dict[str, Any], train: Sequence[Instance],
              validation: Sequence[Instance], reports: int) -> tuple[float, int, bool]:
    """One trial in a worker: train, report each score to the study's storage, stop if the pruner says so."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=study_name, storage=storage, pruner=make_pruner())
    trial = optuna.trial.Trial(study, trial_id)

    def report(value: float, step: int) -> bool:
        trial.report(value, step)
        return not trial.should_prune()

    return train_and_score(config, train, validation, reports, report)


def recover_stale_trials(study: Any) -> list[int]:
    """Trials left running by a crashed search: marked failed, their settings queued to be tried first."""
    import optuna

    stale = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.RUNNING]
    for trial in stale:
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        study.enqueue_trial(trial.params, skip_if_exists=False)
    return [t.number for t in stale]


def finished_trials(study: Any) -> list[Any]:
    import optuna

    done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return study.get_trials(deepcopy=False, states=done)


def search(study: Any, storage: str, base: PPOConfig, train: Sequence[Instance], validation: Sequence[Instance],
           trials: int, backend: Backend, reports: int) -> int:
    """Run trials on ``backend``, ``backend.workers`` at a time, until the study holds ``trials`` finished ones;
    returns how many ran now."""
    import optuna

    ran = 0
    with open_pool(backend) as pool:
        shared_train, shared_validation = pool.put(list(train)), pool.put(list(validation))
        while (missing := trials - len(finished_trials(study))) > 0:
            batch = [study.ask() for _ in range(min(backend.workers, missing))]
            configs = [{**base.to_dict(), **suggest(trial)} for trial in batch]
            tasks = [(storage, study.study_name, trial._trial_id, config, shared_train, shared_validation, reports)
                     for trial, config in zip(batch, configs, strict=True)]
            for trial, (value, steps, pruned) in zip(batch, pool.map(run_trial, tasks), strict=True):
                state = optuna.trial.TrialState.PRUNED if pruned else optuna.trial.TrialState.COMPLETE
                study.tell(trial, None if pruned else value, state=state)
                print(f"trial {trial.number}: {'pruned' if pruned else 'complete'} at step {steps:,}, cost / fixed "
                      f"{value:.4f} ({', '.join(f'{k}={v}' for k, v in trial.params.items())})", flush=True)
                ran += 1
    return ran


def write_results(study: Any, out: Path, base: PPOConfig, storage: str) -> dict[str, Any] | None:
    """``out/trials.csv`` and ``out/best_config.json`` (what train.py --config reads); the best record."""
    import optuna

    with atomic_path(out / "trials.csv") as temp:
        study.trials_dataframe().to_csv(temp, index=False)
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not complete:
        return None
    best = min(complete, key=lambda t: t.value)
    config = PPOConfig.hyperparameters_of({"config": {**dataclasses.asdict(base), **settings_of(best)}})
    record = {"config": config, "score": best.value, "score_is": "mean operating cost / fixed's on the validation "
              "days (lower is better)", "trial": best.number, "study": study.study_name, "storage": storage,
              "steps_per_trial": base.total_timesteps, "trials_finished": len(finished_trials(study))}
    write_json(out / "best_config.json", record)
    return record


def settings_of(trial: Any) -> dict[str, Any]:
    """A finished trial's settings as PPOConfig fields (net_arch back to a list)."""
    params = dict(trial.params)
    if "net_arch" in params:
        params["net_arch"] = [int(w) for w in str(params["net_arch"]).split(",")]
    return params


def check_storage(url: str) -> str:
    """``url`` if it is an Optuna storage URL the trials' workers can share (SQLAlchemy's syntax: a file or server
    database, e.g. ``sqlite:///runs/tune/study.db``, ``postgresql://user@host/db``); :class:`InputError` naming
    storage otherwise (a malformed URL, an in-memory SQLite database, which each worker would see empty)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError, TypeError) as err:
        raise InputError("storage", f"{url!r} is not a database URL such as sqlite:///runs/tune/study.db or "
                         f"postgresql://user@host/db ({err})") from None
    require(parsed.get_backend_name() != "sqlite" or parsed.database not in (None, "", ":memory:"), "storage",
            f"{url!r} is an in-memory SQLite database, which the trials' workers cannot share: give a file, "
            "sqlite:///PATH")
    return url


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m agents.tune", description=__doc__.split("\n")[0])
    add_case_arguments(parser, day=False)
    parser.add_argument("--trials", type=int, required=True, help="finished trials (complete or pruned) the study "
                        "should hold; the same command again resumes a crashed search")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS_PER_TRIAL,
                        help=f"agent steps per trial (default {DEFAULT_STEPS_PER_TRIAL:,})")
    parser.add_argument("--val-days", type=int, default=DEFAULT_VALIDATION_DAYS,
                        help=f"validation days from the training split, evenly spread (default "
                        f"{DEFAULT_VALIDATION_DAYS}); trials train on the other training days")
    parser.add_argument("--reports", type=int, default=DEFAULT_REPORTS,
                        help=f"scores reported per trial, each a pruning decision (default {DEFAULT_REPORTS})")
    parser.add_argument("--n-envs", type=int, default=PPOConfig().n_envs,
                        help=f"parallel envs of each trial (default train.py's, {PPOConfig().n_envs})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampler and of every trial's training")
    parser.add_argument("--workers", type=int, default=1, help="trials at once (default 1)")
    add_backend_arguments(parser)
    parser.add_argument("--storage", help="Optuna storage URL (default sqlite:///OUT/study.db)")
    parser.add_argument("--study-name", help="default: ppo-<case>")
    parser.add_argument("--out", help="folder of best_config.json and trials.csv (default runs/tune-<case>)")
    parser.add_argument("--compare-steps", type=int, help="after the search: train the best settings and train.py's "
                        "defaults this many steps each and score both on the held-out days")
    args = parser.parse_args(argv)

    require_number(args.trials, "trials", 1, limits.MAX_DAYS, integer=True)
    require_number(args.steps, "steps", 1, limits.MAX_TIMESTEPS, integer=True)
    require_number(args.val_days, "val-days", 1, limits.MAX_DAYS, integer=True)
    require_number(args.reports, "reports", 1, limits.MAX_DAYS, integer=True)
    require_number(args.n_envs, "n-envs", 1, limits.MAX_N_ENVS, integer=True)
    require_number(args.seed, "seed", 0, limits.MAX_SEED, integer=True)
    require_number(args.workers, "workers", 1, limits.MAX_WORKERS, integer=True)
    if args.compare_steps is not None:
        require_number(args.compare_steps, "compare-steps", 1, limits.MAX_TIMESTEPS, integer=True)
    backend = backend_from_args(args, workers=args.workers)
    if args.storage is not None:
        check_storage(args.storage)
    case = load_case(args.case)
    out = check_output_folder(args.out or Path("runs") / f"tune-{path_component(case.name, 'name')}", "out")
    made = [folder for folder in (out, *out.parents) if not folder.exists()]  # removed again if the storage fails
    out.mkdir(parents=True, exist_ok=True)
    storage = args.storage or f"sqlite:///{(out / 'study.db').resolve()}"
    study_name = args.study_name or f"ppo-{case.name}"

    overrides = case_overrides(args)
    profiles = load_profiles(args.profiles, renewable_capacity_mw=case.renewable_capacity_mw)
    instances = build_instances(case, profiles=profiles, **overrides)
    train_days, heldout_days = (list(d) for d in split_days(list(instances)))
    validation_days = spread(split_days(train_days)[1] or train_days, args.val_days)
    fit_days = [d for d in train_days if d not in set(validation_days)] or train_days
    base = PPOConfig(case=args.case, profiles=args.profiles, overrides=overrides, train_days=fit_days,
                     seed=args.seed, n_envs=args.n_envs, total_timesteps=args.steps)

    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study(storage=storage, study_name=study_name, load_if_exists=True,
                                    direction=STUDY_DIRECTION, pruner=make_pruner())
    except (ValueError, ImportError, OSError, optuna.exceptions.StorageInternalError, SQLAlchemyError) as err:
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        require(False, "storage", f"{storage}: {str(err).splitlines()[0] if str(err) else type(err).__name__}")
    # A resumed search draws new settings: the sampler's seed moves on with the trials the study already holds.
    study.sampler = optuna.samplers.TPESampler(seed=args.seed + len(study.trials))
    stale = recover_stale_trials(study)
    before = len(finished_trials(study))
    print(f"study {study_name} in {storage}: {before} finished trials" + (
        f", trials {stale} left running by a crashed search marked failed and queued again" if stale else "")
        + f"; {max(0, args.trials - before)} to run on {backend.name} ({backend.workers} at a time), "
        f"{args.steps:,} steps each, {len(fit_days)} training and {len(validation_days)} validation days", flush=True)
    with backend.running():
        search(study, storage, base, [instances[d] for d in fit_days], [instances[d] for d in validation_days],
               args.trials, backend, args.reports)
        best = write_results(study, out, base, storage)
        if best is None:
            print(f"no trial completed (all pruned or failed); trials in {out / 'trials.csv'}")
            return 0
        print(f"best: trial {best['trial']}, cost / fixed {best['score']:.4f} on the validation days; wrote "
              f"{out / 'best_config.json'} (python train.py --config {out / 'best_config.json'})")
        if args.compare_steps is not None and heldout_days:
            compare(best["config"], base, args.compare_steps, [instances[d] for d in train_days],
                    [instances[d] for d in heldout_days], backend, out)
    return 0


def compare(best: dict[str, Any], base: PPOConfig, steps: int, train: Sequence[Instance],
            heldout: Sequence[Instance], backend: Backend, out: Path) -> dict[str, float]:
    """The best settings against train.py's defaults (PPOConfig's), ``steps`` each on the whole training split,
    scored on the held-out days; written to ``out/compare.json``."""
    defaults = PPOConfig()
    common = {"case": base.case, "profiles": base.profiles, "overrides": base.overrides, "seed": base.seed,
              "total_timesteps": steps}
    configs = {"defaults": {**defaults.to_dict(), **common}, "best": {**defaults.to_dict(), **best, **common}}
    with open_pool(dataclasses.replace(backend, workers=min(backend.workers, len(configs)))) as pool:
        shared_train, shared_heldout = pool.put(list(train)), pool.put(list(heldout))
        results = list(pool.map(train_and_score, [(c, shared_train, shared_heldout) for c in configs.values()]))
    scores = {name: result[0] for name, result in zip(configs, results, strict=True)}
    write_json(out / "compare.json", {"steps": steps, "heldout_days": len(heldout), "score_is": "mean operating "
               "cost / fixed's on the held-out days", "scores": scores, "configs": configs})
    print(f"held-out days ({len(heldout)}), {steps:,} steps each: cost / fixed {scores['best']:.4f} with the best "
          f"settings, {scores['defaults']:.4f} with train.py's defaults")
    return scores


if __name__ == "__main__":
    sys.exit(run_cli(main))


__all__ = ["cost_ratio_to_fixed", "main", "recover_stale_trials", "search", "suggest", "train_and_score"]
