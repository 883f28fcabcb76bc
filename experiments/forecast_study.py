"""The day-ahead price forecaster on held-out days: its error, and the true cost of the plan made from it.

For every held-out day inside the forecast period: (1) the hourly MAE and RMSE ($/MWh) of each price forecaster
(``gbm``, fitted once on the training days; ``gbm-walk-forward``, refitted for each day on the training days known at
issue time; persistence; seasonal-naive) and the MAE of the renewable shape forecast against the actual shape of d − 2;
(2) the true cost of the oracle's plan made from each forecast, replayed on the true day, against the hindsight oracle
and fixed continuous training: saving captured = (fixed − plan) / (fixed − hindsight), over totals.

    python -m experiments.forecast_study --profiles CSV --forecasts CSV [--case 2048] [--walk-forward] [--out DIR]

writes ``errors.csv`` (one row per forecaster) and ``plans.csv`` (one row per day and plan) and prints both tables.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from agents.days import held_out_starts, split_days
from aidc_env.baselines import fixed_schedule
from aidc_env.case import build_instances, load_case
from aidc_env.errors import CliParser, require, run_cli
from aidc_env.forecasts import ForecastSet, common_dates, load_forecasts
from aidc_env.instance import Instance
from aidc_env.io import atomic_path
from experiments.runs import result_folder
from aidc_env.parallel import Backend, add_backend_arguments, backend_from_args, open_pool
from aidc_env.price_forecast import (DEFAULT_SEED, PriceForecaster, fit_price_forecaster, known_renewable_mw,
                                     persistence_forecast, seasonal_naive_forecast)
from aidc_env.profiles import ProfileSet, hourly_to_slots, load_profiles
from aidc_env.simulator import simulate

PriceFn = Callable[[str], np.ndarray]
WALK_FORWARD = "gbm-walk-forward"
ISSUE_LAG_DAYS = 2
"""Training days usable for a walk-forward forecast of day d: those up to d − 2 (fully known at issue)."""
ORACLE_THREADS = 1
"""HiGHS threads per solve: the machine is shared, and one thread keeps the solves reproducible."""


def _atomic_csv(frame: pd.DataFrame, path: Path) -> None:
    with atomic_path(path) as temp:
        frame.to_csv(temp, index=False)


def price_forecasters(profiles: ProfileSet, forecasts: ForecastSet, train: Sequence[str], held: Sequence[str],
                      seed: int, walk_forward: bool) -> tuple[PriceForecaster, dict[str, PriceFn]]:
    """The fitted model and each forecaster as a function date -> hourly prices."""
    model = fit_price_forecaster(profiles, forecasts, train, seed, residuals=False)
    functions: dict[str, PriceFn] = {"gbm": lambda d: model.price(profiles, forecasts, d),
                                     "persistence": lambda d: persistence_forecast(profiles, d),
                                     "seasonal-naive": lambda d: seasonal_naive_forecast(profiles, d)}
    if walk_forward:
        refits = {}
        for day in tqdm(held, desc="walk-forward fits", unit="fit"):
            last = (pd.Timestamp(day) - pd.Timedelta(days=ISSUE_LAG_DAYS)).strftime("%Y-%m-%d")
            refits[day] = fit_price_forecaster(profiles, forecasts, [d for d in train if d <= last], seed,
                                               residuals=False)
        functions[WALK_FORWARD] = lambda d: refits[d].price(profiles, forecasts, d)
    return model, functions


def error_table(profiles: ProfileSet, forecasts: ForecastSet, model: PriceForecaster,
                functions: dict[str, PriceFn], held: Sequence[str]) -> pd.DataFrame:
    """MAE and RMSE of each price forecaster, and the renewable shape forecast's MAE, over ``held``."""
    truth = np.concatenate([profiles.days[d].price_usd_per_mwh for d in held])
    errors = [(f"price: {name}", "$/MWh", np.concatenate([function(d) for d in held]) - truth)
              for name, function in functions.items()]
    capacity = profiles.renewable_capacity_mw
    actual = np.concatenate([profiles.days[d].renewable_shape(capacity) for d in held])
    errors += [("renewable shape: day-ahead forecast", "capacity fraction",
                np.concatenate([model.renewable_shape(forecasts, d) for d in held]) - actual),
               ("renewable shape: actual of d-2", "capacity fraction", np.concatenate(
                   [np.clip(known_renewable_mw(profiles, d, ISSUE_LAG_DAYS) / capacity, 0, 1) for d in held]) - actual)]
    return pd.DataFrame([{"forecast": name, "unit": unit, "mae": float(np.abs(error).mean()),
                          "rmse": float(np.sqrt(np.mean(error ** 2)))} for name, unit, error in errors])


@dataclass(frozen=True)
class PlanDay:
    """One held-out day: its true instance and the hourly forecasts the plans are made from."""

    truth: Instance
    renewable_shape: np.ndarray
    prices: dict[str, np.ndarray]


def plan_days(instances: dict[str, Instance], model: PriceForecaster, forecasts: ForecastSet,
              functions: dict[str, PriceFn]) -> list[PlanDay]:
    return [PlanDay(truth, model.renewable_shape(forecasts, day), {name: f(day) for name, f in functions.items()})
            for day, truth in instances.items()]


def solve_plans(days: Sequence[PlanDay], time_limit_s: float, progress: Path | None = None) -> list[dict[str, Any]]:
    """Per day: the true cost of fixed, hindsight and each forecaster's day-ahead plan (one oracle model).

    ``progress``: a CSV rewritten after every day with the rows so far (a long run's partial results).
    """
    from oracle import OracleModel

    rows: list[dict[str, Any]] = []
    oracle = None
    for item in days:
        truth = item.truth
        fixed = simulate(truth, fixed_schedule(truth)).metrics
        rows.append({"day": truth.day, "plan": "fixed", "status": "", "solve_seconds": 0.0,
                     "operating_cost_usd": fixed.operating_cost_usd, "tranches_met": fixed.tranches_met})
        shape = hourly_to_slots(item.renewable_shape, truth.slots)
        plans = {"hindsight": truth}
        for name, hourly in item.prices.items():
            price = hourly_to_slots(hourly, truth.slots)
            plans[name] = dataclasses.replace(truth, price_usd_per_mwh=price, renewable_shape=shape)
        for name, planned in plans.items():
            if oracle is None:
                oracle = OracleModel(planned)
            else:
                oracle.update(planned)
            result = oracle.solve(time_limit_s=time_limit_s, threads=ORACLE_THREADS)
            require(result.schedule is not None, "plan", f"{truth.day} {name}: oracle {result.status} ({result.reason})")
            metrics = simulate(truth, result.schedule).metrics
            rows.append({"day": truth.day, "plan": name, "status": result.status,
                         "solve_seconds": result.solve_seconds, "build_seconds": result.build_seconds,
                         "operating_cost_usd": metrics.operating_cost_usd, "tranches_met": metrics.tranches_met})
        if progress is not None:
            _atomic_csv(pd.DataFrame(rows), progress)
    return rows


def plan_rows(days: Sequence[PlanDay], backend: Backend | int, time_limit_s: float, out: Path) -> pd.DataFrame:
    """:func:`solve_plans` with the days dealt round-robin to ``backend``'s workers (or that many local processes); each
    writes its progress, except on a Ray cluster (whose workers may not see ``out``)."""
    backend = Backend.of(backend)
    n = max(1, min(backend.workers, len(days)))
    chunks = [list(days[i::n]) for i in range(n)]
    progress = [out / f"plans.part{i}.csv" if backend.address is None else None for i in range(n)]
    rows: list[dict[str, Any]] = []
    with open_pool(dataclasses.replace(backend, workers=n)) as pool:
        tasks = [(chunk, time_limit_s, path) for chunk, path in zip(chunks, progress, strict=True)]
        for chunk_rows in tqdm(pool.map(solve_plans, tasks), total=n, desc="plans", unit="chunk"):
            rows += chunk_rows
    for path in progress:
        if path is not None:
            path.unlink(missing_ok=True)
    return pd.DataFrame(rows).sort_values("day", kind="stable").reset_index(drop=True)


def plan_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Totals over the days per plan, cost relative to hindsight and saving captured (over totals)."""
    totals = rows.groupby("plan", sort=False).agg(
        days=("day", "count"), operating_cost_usd=("operating_cost_usd", "sum"),
        tranches_met=("tranches_met", "sum"))
    fixed, hindsight = totals.loc["fixed", "operating_cost_usd"], totals.loc["hindsight", "operating_cost_usd"]
    totals["cost_vs_hindsight"] = totals["operating_cost_usd"] / hindsight
    totals["saving_captured"] = (fixed - totals["operating_cost_usd"]) / (fixed - hindsight)
    return totals.reset_index()


def _markdown(frame: pd.DataFrame, formats: dict[str, str]) -> str:
    header = "| " + " | ".join(frame.columns) + " |\n|" + "---|" * len(frame.columns)
    lines = ["| " + " | ".join(format(row[c], formats.get(c, "")) for c in frame.columns) + " |"
             for _, row in frame.iterrows()]
    return "\n".join([header, *lines])


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m experiments.forecast_study", description=__doc__.split("\n")[0])
    parser.add_argument("--profiles", required=True,
                        help="actual prices and renewables: dataset name (e.g. caiso-2023) or canonical hourly CSV")
    parser.add_argument("--forecasts", required=True,
                        help="day-ahead forecasts (load, solar, wind): dataset name (e.g. caiso-2023-dayahead) or CSV")
    parser.add_argument("--case", default="2048", help="bundled case or TOML path (default 2048)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="model seed (default 0)")
    parser.add_argument("--out", help="folder for the CSVs (default runs/forecast_study_N, the next free N; one "
                        "holding an earlier run's results is refused)")
    parser.add_argument("--days", type=int, default=None, help="only the first N held-out days (quick runs)")
    parser.add_argument("--walk-forward", action=argparse.BooleanOptionalAction, default=False,
                        help="also the gbm refitted for each held-out day on the training days up to d - 2 (needs "
                        "training days with forecasts before the first held-out day)")
    parser.add_argument("--no-plans", action="store_true", help="errors only (no oracle solves)")
    parser.add_argument("--workers", type=int, default=2, help="parallel oracle solves (default 2)")
    add_backend_arguments(parser)
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per oracle solve (default 60)")
    args = parser.parse_args(argv)
    require(args.days is None or args.days > 0, "days", "must be > 0")
    require(args.workers > 0, "workers", "must be > 0")
    backend = backend_from_args(args, workers=args.workers)
    case = load_case(args.case)
    profiles = load_profiles(args.profiles, renewable_capacity_mw=case.renewable_capacity_mw)
    forecasts = load_forecasts(args.forecasts)
    train, held = (common_dates(forecasts, profiles, part) for part in split_days(profiles.dates()))
    held = held[: args.days]
    require(bool(held), "forecasts", f"no held-out day of {held_out_starts(profiles.dates(), field='profiles')[0]}.. has a "
            "forecast")
    first_known = (pd.Timestamp(held[0]) - pd.Timedelta(days=ISSUE_LAG_DAYS)).strftime("%Y-%m-%d")
    require(not args.walk_forward or any(d <= first_known for d in train), "walk-forward",
            f"no training day with forecasts up to {first_known}, before the first held-out day {held[0]}")
    out = result_folder(args.out, "runs", "forecast_study", ("errors.csv", "plans.csv", "plans.part*.csv"))
    model, functions = price_forecasters(profiles, forecasts, train, held, args.seed, args.walk_forward)
    errors = error_table(profiles, forecasts, model, functions, held)
    _atomic_csv(errors, out / "errors.csv")
    print(f"{len(train)} training days, {len(held)} held-out days ({held[0]}..{held[-1]}); "
          f"renewable scale {model.renewable_scale:.3f}\n")
    print(_markdown(errors, {"mae": ".3f", "rmse": ".3f"}))
    if not args.no_plans:
        days = plan_days(build_instances(case, held, profiles), model, forecasts, functions)
        with backend.running():
            rows = plan_rows(days, backend, args.time_limit, out)
        _atomic_csv(rows, out / "plans.csv")
        print()
        print(_markdown(plan_table(rows), {"operating_cost_usd": ",.0f", "cost_vs_hindsight": ".4f",
                                           "saving_captured": ".3f"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
