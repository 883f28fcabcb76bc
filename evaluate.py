"""Evaluate every policy on the same days and compare it with the oracle.

    python evaluate.py --case 2048 --policies oracle,fixed,greedy,mpc,ppo --model runs/ppo-2048/model.zip \
        --profiles caiso-2023 --out runs/eval

Reads like a report, top to bottom, one path for every case (one site or several, with or without fleet workloads):
1. pick the days (held-out instances of the profile source by default: agents/days.py);
2. build one instance per day (modes resolved once);
3. run each policy on each day (MILP policies in worker processes), score each schedule with the
   simulator — the only place where costs are computed;
4. print one table, write per-day CSV, a JSON summary and PNG figures (to ``--out``, default a new numbered
   folder runs/eval/<case>_N; an earlier run's results in ``--out`` are refused, not overwritten).

Every flag is checked before the work. The per-day rows are rewritten to ``<out>/per_day.csv`` (atomically) as
days finish, so a Ctrl-C (exit code 130) keeps the days already finished.

``--study checkpoints|gpus|renewable|flexibility|headline|days`` runs one of the research studies
instead (see ``experiments/studies.py`` and docs/results.md).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from agents.days import DEFAULT_SPLIT, SPLITS, held_out_starts, split_days, training_days_among
from agents.days import spread as spread_days
from agents.mpc import ForecastNoise
from agents.policies import HEAVY_POLICIES, POLICY_NAMES, RELAXATIONS, PolicySettings, run_policy
from agents.smpc import DEFAULT_THRESHOLD_USD
from aidc_env import limits
from aidc_env.case import add_case_arguments, build_instances, case_overrides, load_case, profiles_for
from aidc_env.dayahead import (DEFAULT_SCENARIOS, add_price_issue_hour_argument, dayahead_instances, forecastable,
                               require_price_issue_hour)
from aidc_env.errors import EXIT_INTERRUPTED, CliParser, InputError, require, require_number, run_cli
from aidc_env.forecasts import load_forecasts
from aidc_env.information import INFORMATION, ISSUE_HOUR
from aidc_env.instance import Instance
from aidc_env.io import atomic_path, check_output_file, path_component, write_json
from aidc_env.parallel import Backend, add_backend_arguments, backend_from_args, open_pool
from aidc_env.price_forecast import DEFAULT_PRICE_SOURCE, PRICE_SOURCES
from aidc_env.simulator import Metrics, SimulationResult, simulate
from experiments.runs import RowsOnDisk, result_folder

EVAL_RESULTS = ("per_day.csv", "summary.json", "*.png")
"""What an evaluation writes to its folder: an --out holding any of them is an earlier run's, refused."""
RATIO_QUANTILE = 0.9
"""Besides the median and the worst day, the summary reports this quantile of each policy's ratio to the oracle."""
DEFAULT_SMPC_SCENARIOS = 3
"""Scenarios of the stochastic MPC by default: the measured time per day grows with S (docs/uncertainty.md)."""

SUMMARY_KEYS = ("objective_usd", "operating_cost_usd", "cost_ratio_to_oracle", "operating_cost_ratio_to_oracle",
                "grid_cost_usd", "grid_energy_mwh", "renewable_used_mwh", "curtailment_mwh", "green_share",
                "completion", "tranches_met", "modes_used", "restarts")


def day_row(metrics: Metrics) -> dict[str, Any]:
    """The per-day record of a policy: the simulator's metrics, flattened."""
    row = {k: v for k, v in metrics.to_dict().items() if k != "jobs"}
    row["tranches_met"] = float(metrics.tranches_met)
    row["capacity_ok"] = float(metrics.capacity_ok)
    row["inference_served"] = float(metrics.inference_served)
    row["feasible"] = float(metrics.feasible)
    row["modes_used"] = sum(job.modes_used for job in metrics.jobs)
    row["restarts"] = sum(job.restarts for job in metrics.jobs)
    for job in metrics.jobs:
        row[f"{job.name}_completion"] = job.completion
        row[f"{job.name}_modes_used"] = job.modes_used
    return row


def _heavy_task(name: str, inst: Instance, settings: PolicySettings) -> tuple[list[list[int]] | None, dict[str, Any]]:
    """A MILP policy on one instance; ``(None, {"refused": message})`` if its solver refuses the instance (e.g. a
    solver that does not model the instance's workloads), so that the other policies still run."""
    try:
        return run_policy(name, inst, settings)
    except InputError as err:
        return None, {"refused": str(err)}


Results = dict[str, dict[str, tuple[SimulationResult, dict[str, Any]]]]
"""policy → day → (simulation result, policy info)."""


def run_all(instances: dict[str, Instance], policies: Sequence[str], settings: PolicySettings, backend: Backend | int,
            results: Results | None = None, on_result: Callable[[], Any] | None = None) -> Results:
    """Run every policy on every day into ``results`` (filled as runs finish; ``on_result`` after each).

    The MILP policies run on ``backend`` (a :class:`Backend`, or a number of local worker processes), each
    instance put once into the backend's store and shared by the policies of its day; results are kept in task
    order, so they do not depend on the backend or its number of workers.
    """
    backend = Backend.of(backend)
    results = results if results is not None else {}
    for p in policies:
        results.setdefault(p, {})
    heavy = [(p, d) for p in policies if p in HEAVY_POLICIES for d in instances]
    light = [(p, d) for p in policies if p not in HEAVY_POLICIES for d in instances]

    refused: dict[str, str] = {}

    def keep(p: str, d: str, schedule: list[list[int]] | None, info: dict[str, Any]) -> None:
        bar.update()
        if schedule is None:
            refused.setdefault(p, info["refused"])
            return
        results[p][d] = (simulate(instances[d], schedule), info)
        if on_result is not None:
            on_result()

    with tqdm(total=len(heavy) + len(light), desc="policies x days", unit="run") as bar:
        if heavy:
            with open_pool(backend) as pool:
                shared = {d: pool.put(instances[d]) for d in dict.fromkeys(d for _, d in heavy)}
                tasks = [(p, shared[d], settings) for p, d in heavy]
                for (p, d), (schedule, info) in zip(heavy, pool.map(_heavy_task, tasks), strict=True):
                    keep(p, d, schedule, info)
        for p, d in light:
            keep(p, d, *run_policy(p, instances[d], settings))
    if refused and not any(results[p] for p in policies):
        raise InputError("policies", "; ".join(f"{p} refused every instance ({message})"
                                               for p, message in refused.items()))
    for p, message in refused.items():
        print(f"{p}: refused ({message}); its row is left out", file=sys.stderr)
    return results


def summarise(results: Results) -> tuple[pd.DataFrame, dict]:
    """Per-day table (one row per policy and day) and the JSON summary."""
    rows = []
    oracle = results.get("hindsight") or results.get("oracle", {})
    for policy, by_day in results.items():
        for day, (result, info) in by_day.items():
            row = {"policy": policy, "day": day, **day_row(result.metrics)}
            reference = oracle.get(day)
            row["cost_ratio_to_oracle"] = (
                result.metrics.objective_usd / reference[0].metrics.objective_usd
                if reference is not None and reference[0].metrics.objective_usd > 0 else float("nan"))
            # With an idle-GPU value the objective can be negative (a fleet case), and its ratio means nothing:
            # the operating cost (energy paid, no idle credit) is compared instead.
            row["operating_cost_ratio_to_oracle"] = (
                result.metrics.operating_cost_usd / reference[0].metrics.operating_cost_usd
                if reference is not None and reference[0].metrics.operating_cost_usd > 0 else float("nan"))
            row.update({f"info_{k}": v for k, v in info.items() if isinstance(v, (int, float, str)) or v is None})
            rows.append(row)
    per_day = pd.DataFrame(rows)
    summary: dict[str, Any] = {"policies": {}}
    for policy, group in per_day.groupby("policy", sort=False):
        numeric = group.select_dtypes("number")
        summary["policies"][policy] = {"mean": {k: _json_number(v) for k, v in numeric.mean().items()},
                                       "days": {row["day"]: {k: _json_number(row[k]) for k in numeric.columns}
                                                for _, row in group.iterrows()}}
        logs = {day: info["solve_log"] for day, (_, info) in results[policy].items() if "solve_log" in info}
        if logs:  # every oracle solve of the policy (slots, span in days, status, proof, gap, seconds)
            summary["policies"][policy]["solve_log"] = {
                day: [{k: _json_number(v) if isinstance(v, float) else v for k, v in entry.items()} for entry in log]
                for day, log in logs.items()}
    costs = {p: {d: r.metrics.objective_usd for d, (r, _) in by_day.items()} for p, by_day in results.items() if by_day}
    compared = comparisons(costs)
    for policy, facts in compared["policies"].items():
        summary["policies"][policy].update(facts)
    if "vss_usd" in compared:
        summary["vss_usd"] = compared["vss_usd"]
    return per_day, summary


def comparisons(costs: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per policy, against ``hindsight`` (alias ``oracle``) and ``fixed`` (docs/uncertainty.md), from
    ``costs`` (policy → day → objective, $: the operating cost less any idle-GPU value).

    Each comparison is over the days both (or all three) policies finished, named in ``days_compared``:
    ``total_cost_usd``; ``cost_relative_to_hindsight`` = Σ policy / Σ hindsight; ``saving_captured`` =
    (Σ fixed − Σ policy) / (Σ fixed − Σ hindsight); ``evpi_usd`` (value of perfect information: policy −
    hindsight, total and per day). ``vss_usd`` (value of the stochastic solution: mpc − smpc, total and per
    day) when both ran; positive: the stochastic rule is cheaper.
    """
    reference = costs.get("hindsight") or costs.get("oracle") or {}
    fixed = costs.get("fixed", {})
    out: dict[str, Any] = {"policies": {}}
    for policy, by_day in costs.items():
        facts: dict[str, Any] = {"total_cost_usd": float(sum(by_day.values())), "days_total": len(by_day)}
        days = [d for d in by_day if d in reference]
        if days:
            policy_total, hindsight_total = (float(sum(c[d] for d in days)) for c in (by_day, reference))
            facts["days_compared"] = len(days)
            facts["cost_relative_to_hindsight"] = _json_number(policy_total / hindsight_total) if hindsight_total else None
            facts["evpi_usd"] = {"total": policy_total - hindsight_total,
                                 "days": {d: by_day[d] - reference[d] for d in days}}
            common = [d for d in days if d in fixed]
            if common:
                fixed_total = sum(fixed[d] for d in common)
                hindsight_common = sum(reference[d] for d in common)
                facts["saving_captured"] = _json_number(
                    (fixed_total - sum(by_day[d] for d in common)) / (fixed_total - hindsight_common)
                    if fixed_total != hindsight_common else float("nan"))
                facts["days_saving_compared"] = len(common)
            ratios = np.array([by_day[d] / reference[d] for d in days if reference[d] > 0])
            if ratios.size:  # the distribution over the days, not only the total (the worst day beside the median)
                facts["ratio_to_hindsight"] = {"median": float(np.median(ratios)),
                                               "p90": float(np.quantile(ratios, RATIO_QUANTILE)),
                                               "max": float(ratios.max())}
        out["policies"][policy] = facts
    if "mpc" in costs and "smpc" in costs:
        days = [d for d in costs["smpc"] if d in costs["mpc"]]
        vss = {"total": float(sum(costs["mpc"][d] - costs["smpc"][d] for d in days)), "days_compared": len(days),
               "days": {d: costs["mpc"][d] - costs["smpc"][d] for d in days}}
        out["vss_usd"] = vss
        out["policies"]["smpc"]["vss_usd"] = vss
    return out


def _json_number(value: Any) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None


def print_table(per_day: pd.DataFrame) -> pd.DataFrame:
    table = per_day.groupby("policy", sort=False)[[k for k in SUMMARY_KEYS if k in per_day]].mean()
    with pd.option_context("display.width", 200, "display.max_columns", None, "display.float_format", "{:,.4f}".format):
        print(table)
    return table


def build_parser() -> CliParser:
    parser = CliParser(description="Run every policy on the same days and compare each with the exact oracle: one "
                       "table (operating cost, cost ratio to the oracle, grid energy, curtailment, green share, "
                       "completion, modes used), per-day CSV, a JSON summary and PNG figures. Days default to the "
                       "held-out split (whole ISO weeks, one in four; see agents/days.py).")
    add_case_arguments(parser, day=False)
    parser.add_argument("--policies", default="oracle,fixed,greedy,mpc,ppo",
                        help=f"comma-separated, from {','.join(POLICY_NAMES)} (default: oracle,fixed,greedy,mpc,ppo)")
    parser.add_argument("--model", help="trained MaskablePPO model for the ppo policy: the run folder or its .zip "
                        "(default: runs/ppo-<case>/model.zip if it exists); it runs with the information it was "
                        "trained with (its config)")
    parser.add_argument("--forecasts", help="day-ahead forecasts, a dataset name or CSV (load, solar, wind; e.g. "
                        "caiso-2023-dayahead): the price forecaster is fitted on the training split only, never on a "
                        "day of the instance it forecasts (a week from a held-out day gets its own fit without its six "
                        "training days), and the days are those inside the forecast period; needed with --information "
                        "dayahead and by a model trained with it")
    parser.add_argument("--price-forecast", choices=PRICE_SOURCES, default=DEFAULT_PRICE_SOURCE,
                        help="with --forecasts: the point forecast of the price, the package's gradient boosting "
                        "fitted on the training split (model, default) or the --forecasts CSV's "
                        "price_forecast_usd_per_mwh column (supplied, e.g. the day-ahead market's LMP; its residual "
                        "days for the scenarios are its own errors on the training days)")
    add_price_issue_hour_argument(parser, ISSUE_HOUR)
    parser.add_argument("--information", choices=INFORMATION, default="perfect",
                        help="what the causal policies know: the truth (perfect, default) or the day-ahead forecasts "
                        "issued at 10:00 the day before and the realised past (dayahead)")
    parser.add_argument("--smpc-scenarios", type=int, default=DEFAULT_SMPC_SCENARIOS,
                        help="scenarios of the stochastic MPC (the forecast's first S of "
                        f"{DEFAULT_SCENARIOS}; default {DEFAULT_SMPC_SCENARIOS})")
    parser.add_argument("--smpc-threshold", type=float, default=DEFAULT_THRESHOLD_USD, help="expected saving ($ per "
                        "first decision) the stochastic MPC needs before it departs from MPC's plan (inf: never; "
                        f"default {DEFAULT_THRESHOLD_USD}, tuned on validation days of the training period)")
    parser.add_argument("--days", nargs="+", default=["heldout"], help="dates YYYY-MM-DD (first days), or one of: "
                        "heldout (default: the held-out days of --split; with --horizon-days D the held-out instances "
                        "tile each held-out week from its Monday, D = 7: the week), all, reference; an instance needs "
                        "D consecutive days in the data and, with --forecasts, forecasts for all of them")
    parser.add_argument("--split", choices=SPLITS, default=DEFAULT_SPLIT,
                        help="which days are held out (agents/days.py): whole ISO weeks, one in four (weeks, "
                        "default), or every 7th day (the earlier split); a model is evaluated on its own split")
    parser.add_argument("--max-days", type=int, help="use at most this many of the selected days (evenly spread)")
    parser.add_argument("--workers", type=int, default=2, help="oracle/MPC solves at once: processes, or Ray tasks "
                        "in flight with --backend ray (default 2)")
    add_backend_arguments(parser)
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per MILP solve (default 120)")
    parser.add_argument("--mpc-noise", type=float, default=0.0,
                        help="MPC forecast error (relative sigma at 24 h lead) on price and renewable (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random policy and MPC noise")
    parser.add_argument("--out", help="output folder (CSV, JSON, PNG; default runs/eval/<case>_N, the next free N, "
                        "or runs/studies/<study>_N with --study); one that holds an earlier run's results is refused")
    parser.add_argument("--json", help="also write the JSON summary to this file")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    parser.add_argument("--study", help="run a research study instead: checkpoints, gpus, renewable, flexibility, "
                        "headline, days (see experiments/studies.py; its own flags, e.g. --update-docs, pass through)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, rest = build_parser().parse_known_args(argv)
    if args.study:
        from experiments.studies import main as study_main

        return study_main([args.study, "--case", args.case, "--workers", str(args.workers), "--backend", args.backend,
                           *(["--ray-address", args.ray_address] if args.ray_address else []),
                           "--time-limit", str(args.time_limit), *(["--out", args.out] if args.out else []),
                           *(["--profiles", args.profiles] if args.profiles else []),
                           *[f"--{k.replace('_', '-')}={v}" for k, v in case_overrides(args).items()], *rest])
    require(not rest, "arguments", f"unrecognised: {' '.join(rest)}")
    # 0. Every flag, the model and the outputs are checked before the work.
    validate_args(args)
    backend = backend_from_args(args, workers=args.workers)
    out = result_folder(args.out, Path("runs") / "eval", load_case(args.case).name, EVAL_RESULTS)
    if args.json:
        check_output_file(args.json, "json")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICY_NAMES]
    require(bool(policies), "policies", f"none given; known: {', '.join(POLICY_NAMES)}")
    require(not unknown, "policies", f"unknown {', '.join(unknown)}; known: {', '.join(POLICY_NAMES)}")
    relaxations = [p for p in policies if p in RELAXATIONS]
    require(not relaxations or args.information == "dayahead", "policies",
            f"{', '.join(relaxations)} relax the day-ahead forecast: give --information dayahead")
    case = load_case(args.case)  # 1. instances (built once, here)
    overrides = case_overrides(args)
    horizon = int(overrides.get("horizon_days") or case.horizon_days)
    profiles = profiles_for(case, args.profiles)
    instances = evaluation_instances(args, case, profiles, overrides, horizon)
    days = list(instances)
    model_path = resolve_model_path(args.model, case.name)  # 2. policies (a given model must load and suit them)
    if "ppo" in policies and args.model is None and not Path(model_path).exists():
        require(policies != ["ppo"], "model", f"no trained PPO model at {model_path}; give --model or train one with "
                f"python train.py --case {case.name}")
        print(f"No trained PPO model at {model_path}: evaluating the other policies. Train one with "
              f"python train.py --case {case.name}" + (f" --profiles {args.profiles}" if args.profiles else ""),
              file=sys.stderr)
        policies.remove("ppo")
    elif "ppo" in policies:
        check_model(model_path, args, instances[days[0]])
    settings = PolicySettings(time_limit_s=args.time_limit, seed=args.seed, model_path=model_path,
                              information=args.information, smpc_scenarios=args.smpc_scenarios,
                              smpc_threshold_usd=args.smpc_threshold,
                              mpc_noise=ForecastNoise(args.mpc_noise, args.mpc_noise))
    print(f"{len(policies)} policies x {len(days)} {horizon}-day instances of case {case.name} ({profiles.source}, "
          f"information {args.information})")
    results: Results = {}  # 3. run, every finished policy-day kept on disk
    rows = RowsOnDisk(out / "per_day.csv", rows=lambda: summarise(results)[0] if any(results.values()) else pd.DataFrame())
    try:
        with backend.running():
            run_all(instances, policies, settings, backend, results, on_result=rows.add)
    except KeyboardInterrupt:
        rows.write()
        done = sum(len(by_day) for by_day in results.values())
        print(f"interrupted: {done} finished policy-days kept in {rows.path}" if done else
              "interrupted before any policy-day finished", file=sys.stderr)
        return EXIT_INTERRUPTED
    per_day, summary = summarise(results)  # 4. report
    summary.update({"case": case.name, "days": days, "horizon_days": horizon, "profiles": profiles.source,
                    "overrides": overrides, "information": args.information, "forecasts": args.forecasts,
                    "price_forecast": args.price_forecast if args.forecasts is not None else None,
                    "price_issue_hour": args.price_issue_hour if args.forecasts is not None else None,
                    "smpc_scenarios": args.smpc_scenarios if "smpc" in policies else None,
                    "smpc_threshold_usd": (None if "smpc" not in policies else args.smpc_threshold
                                           if math.isfinite(args.smpc_threshold) else "inf"),
                    "time_limit_s": args.time_limit})
    print_table(per_day)
    with atomic_path(out / "per_day.csv") as temp:
        per_day.to_csv(temp, index=False)
    write_json(out / "summary.json", summary)
    if args.json:
        write_json(args.json, summary)
    if not args.no_plots:
        plot_first(instances[days[0]], {p: results[p] for p in policies}, per_day, out, horizon > 1 or
                   args.forecasts is not None)
    print(f"wrote {out}/per_day.csv, {out}/summary.json" + ("" if args.no_plots else " and figures"))
    return 0


def evaluation_instances(args, case, profiles, overrides: dict, horizon: int) -> dict[str, Instance]:
    """The instances of the selected days (first days), with ``--forecasts`` those inside the forecast period,
    each forecast by a forecaster fitted on the training split outside the instance."""
    days = select_days(args.days, profiles.horizon_starts(horizon), case.day, None, profiles.dates(), horizon,
                       args.split)
    require(bool(days), "days", f"none of the selected days starts {horizon} consecutive days of the profile source")
    instances = build_instances(case, days, profiles, **overrides)
    if args.forecasts is None:
        days = spread(days, args.max_days)
        return {d: instances[d] for d in days}
    forecast_set = load_forecasts(args.forecasts)
    before = len(days)
    days = [d for d in days if forecastable(instances[d], forecast_set, profiles, args.price_forecast)]
    supplied = args.price_forecast == "supplied"
    period = forecast_set.supplied_dates() if supplied else forecast_set.dates()
    require(bool(period), "forecasts", f"{forecast_set.source} has no day with a supplied price forecast "
            "(column price_forecast_usd_per_mwh): add one, or use --price-forecast model")
    require(bool(days), "forecasts", f"none of the {before} instances lies inside the forecast period "
            f"({period[0]}..{period[-1]}{' with a supplied price' if supplied else ''})")
    print(f"{len(days)} of {before} instances lie inside the forecast period", file=sys.stderr)
    days = spread(days, args.max_days)  # a week's forecaster is fitted for the weeks evaluated only
    train_days = split_days(profiles.dates(), args.split)[0]
    refits = sum(1 for d in days if set(instances[d].days) & set(train_days))
    if refits:
        print(f"fitting the price forecaster outside each of the {refits} instances with training days (out of "
              "sample, a few seconds each)", file=sys.stderr)
    return dayahead_instances({d: instances[d] for d in days}, profiles, forecast_set, train_days, seed=args.seed,
                              price_source=args.price_forecast, price_issue_hour=args.price_issue_hour)


def plot_first(inst: Instance, results: dict, per_day: pd.DataFrame, out: Path, horizon_plot: bool) -> None:
    """The figures of the first instance (dispatch, modes and, over a horizon or with forecasts, the horizon) and
    the cost ratios to the oracle."""
    from experiments.plots import plot_cost_ratios, plot_dispatch, plot_horizon, plot_mode_timeline

    day_results = {p: by_day[inst.day][0] for p, by_day in results.items() if inst.day in by_day}
    if horizon_plot:
        plot_horizon(inst, day_results, out / f"horizon_{inst.day}.png")
    plot_dispatch(inst, day_results, out / f"dispatch_{inst.day}.png")
    plot_mode_timeline(inst, day_results, out / f"modes_{inst.day}.png")
    if results.get("oracle"):
        plot_cost_ratios(per_day, out / "cost_ratio.png")


def validate_args(args) -> None:
    """Bounds of evaluate's numeric flags (reasons: aidc_env/limits.py) and the flags that go together."""
    require(args.information == "perfect" or args.forecasts is not None, "forecasts",
            "--information dayahead needs --forecasts CSV (the day-ahead load, solar and wind forecasts)")
    require(args.price_forecast == DEFAULT_PRICE_SOURCE or args.forecasts is not None, "price-forecast",
            f"--price-forecast {args.price_forecast} reads the --forecasts CSV: give --forecasts CSV")
    require_price_issue_hour(args.price_issue_hour, args.forecasts is not None)
    require_number(args.workers, "workers", 1, limits.MAX_WORKERS, integer=True)
    require_number(args.time_limit, "time-limit", 0.0, limits.MAX_TIME_LIMIT_S, low_open=True)
    require_number(args.mpc_noise, "mpc-noise", 0.0, limits.MAX_FORECAST_NOISE)
    require_number(args.seed, "seed", 0, limits.MAX_SEED, integer=True)
    if args.max_days is not None:
        require_number(args.max_days, "max-days", 1, limits.MAX_DAYS, integer=True)
    require_number(args.smpc_scenarios, "smpc-scenarios", 1, DEFAULT_SCENARIOS, integer=True)
    require(not math.isnan(args.smpc_threshold) and args.smpc_threshold >= 0, "smpc-threshold",
            f"must be >= 0 (inf: never depart from MPC), got {args.smpc_threshold}")


def resolve_model_path(model: str | None, case_name: str) -> str:
    """--model as a file: the zip itself, or a run folder's model.zip (default: runs/ppo-<case>/model.zip)."""
    from agents.ppo import MODEL_FILE

    if model is None:
        return str(Path("runs") / f"ppo-{path_component(case_name, 'name')}" / MODEL_FILE)
    return str(Path(model) / MODEL_FILE) if Path(model).is_dir() else model


def check_model(model_path: str, args, inst: Instance) -> None:
    """The model loads, its information suits the evaluation, and it accepts the instances (InputError if not).

    A model trained with day-ahead information needs --forecasts; one trained on the truth is refused under
    --information dayahead (it would see the truth the other policies do not). A day-ahead model trained on another
    price forecast than --price-forecast runs, with a note on stderr (how a policy transfers is a fair question).
    """
    from agents.ppo import load_model, model_config, ppo_schedule

    model = load_model(model_path)  # InputError naming the model if it is missing, corrupt or not a model
    config = model_config(model)
    trained = config.information
    require(trained != "dayahead" or args.forecasts is not None, "forecasts",
            f"the model {model_path} was trained with day-ahead information: give --forecasts CSV")
    require(not (trained == "perfect" and args.information == "dayahead"), "model",
            f"{model_path} was trained with perfect information and would see the truth under --information dayahead")
    seen = config.price_forecast
    if trained == "dayahead" and seen != getattr(args, "price_forecast", seen):
        print(f"note: {model_path} was trained on the {seen} price forecast and is evaluated on the "
              f"{args.price_forecast} one", file=sys.stderr)
    hour = config.price_issue_hour
    if trained == "dayahead" and hour != getattr(args, "price_issue_hour", hour):
        print(f"note: {model_path} was trained on a price issued at {hour:02d}:00 and is evaluated on one issued at "
              f"{args.price_issue_hour:02d}:00", file=sys.stderr)
    require(config.split == args.split, "split", f"{model_path} was trained on the {config.split} split: evaluate "
            f"it with --split {config.split} (another split's held-out days include its training days)")
    require_trained_case(model_path, config, args)
    try:
        ppo_schedule(model, inst)  # a model of another case, overrides or horizon (its observation differs)
    except InputError:
        raise
    except ValueError as err:
        raise InputError("model", str(err)) from None


def require_trained_case(model_path: str, config, args) -> None:
    """Refuse (one line naming what differs) a model trained on another case or other overrides (segments, GPUs,
    horizon, ...) than the evaluation's: its policy was made for those instances."""
    from agents.ppo_config import trained_case_differences

    differs = trained_case_differences(config, load_case(args.case), case_overrides(args))
    require(not differs, "model", f"{model_path} was trained on other instances than these (trained -> given: "
            f"{', '.join(differs[:4])}{', ...' if len(differs) > 4 else ''}): evaluate it with its own case and "
            "overrides (its config.json)")


def select_days(requested: Sequence[str], available: Sequence[str], reference: str, max_days: int | None,
                dates: Sequence[str] | None = None, horizon_days: int = 1, split: str = DEFAULT_SPLIT) -> list[str]:
    """Resolve --days: explicit dates, 'heldout', 'all' or 'reference'; --max-days spreads evenly (:func:`spread`).

    ``available``: the first days of the instances; ``dates``: every complete day of the profile source (default
    ``available``), split by :func:`agents.days.split_starts` into training and held-out instances of
    ``horizon_days`` days."""
    dates = available if dates is None else dates
    if list(requested) == ["heldout"]:  # refused if the source holds no held-out instance
        return spread(held_out_starts(dates, available, horizon_days, split=split), max_days)
    if list(requested) == ["all"]:
        days = list(available)
    elif list(requested) == ["reference"]:
        days = [reference]
    else:
        days = list(requested)
        missing = [d for d in days if d not in available]
        if missing:
            raise InputError("days", f"{', '.join(missing)} not among the {len(available)} complete days of the "
                             "profile source")
    days = spread(days, max_days)
    if list(requested) != ["reference"] and (training := training_days_among(days, dates, split)):
        print(f"note: {len(training)} of the {len(days)} days are training days of the split, not held out "
              f"({', '.join(training[:3])}{', ...' if len(training) > 3 else ''})", file=sys.stderr)
    return days


def spread(days: list[str], max_days: int | None) -> list[str]:
    """At most ``max_days`` of ``days``, evenly spread (all if None)."""
    if max_days is not None:
        require(max_days > 0, "max-days", "must be > 0")
        days = spread_days(days, max_days)
    return days


if __name__ == "__main__":
    sys.exit(run_cli(main))
