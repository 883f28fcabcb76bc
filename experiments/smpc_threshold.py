"""Tune smpc's significance threshold on validation days of the training period (never on held-out days).

The validation instances are ``--validation-days`` training instances inside the forecast period, evenly spread (with
``--horizon-days D``, D-day horizons wholly within training days); the price forecaster (and so the scenarios' residual
days) is refitted on the *other* training days, so that their forecasts are out of sample as the held-out days' are.
Each runs ``mpc`` and ``smpc`` at every threshold of ``--thresholds``; per threshold it reports the value of the
stochastic solution (VSS = mpc − smpc, $) and chooses the largest VSS total (ties: the larger threshold). It also prints
how spread the scenarios are against the error they stand for (:func:`scenario_calibration`).

    python -m experiments.smpc_threshold --case 2048 --profiles P --forecasts F --json runs/smpc/tune.json
    python -m experiments.smpc_threshold --case 2048 --profiles P --forecasts F --horizon-days 7 \
        --validation-days 6 --thresholds 1,5,25 --time-limit 60 --json runs/smpc/tune_weeks.json
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from agents.days import horizon_days_of, split_days, split_starts, spread
from agents.policies import PolicySettings, run_policy
from aidc_env import limits
from aidc_env.case import build_instances, load_case, require_one_site_case
from aidc_env.dayahead import DEFAULT_SCENARIOS, attach_forecasts
from aidc_env.errors import CliParser, require, require_number, run_cli
from aidc_env.forecasts import ForecastSet, common_dates, load_forecasts
from aidc_env.instance import Instance
from aidc_env.io import write_json
from aidc_env.price_forecast import PriceForecaster, fit_price_forecaster
from aidc_env.profiles import ProfileSet, load_profiles
from aidc_env.simulator import simulate
from experiments.runs import result_file

THRESHOLDS_USD = (0.0, 0.5, 1.0, 2.0)
"""Thresholds tried by default ($ per re-planning point); inf (MPC itself) is the reference row."""
VALIDATION_DAYS = 12
"""Validation days by default (each costs one smpc run per threshold)."""
SCENARIOS = 3
"""smpc's scenarios, as evaluate.py's default ``--smpc-scenarios``."""


def validation_split(dates: Sequence[str], forecast_dates: Sequence[str], count: int,
                     starts: Sequence[str] | None = None, horizon_days: int = 1) -> tuple[list[str], list[str]]:
    """(fit days, validation first days): ``count`` training instances inside the forecast period, evenly spread, and
    the training days outside every validation instance. Held-out days are in neither list.

    A validation instance of ``horizon_days`` days starts on one of ``starts`` (default every date), lies wholly within
    training days (:func:`agents.days.split_starts`) and has forecasts for all its days; none of its days is a fit day,
    so its forecasts are out of sample.
    """
    covered = set(forecast_dates)
    candidates = [d for d in split_starts(dates, dates if starts is None else starts, horizon_days)[0]
                  if set(horizon_days_of(d, horizon_days)) <= covered]
    validation = spread(candidates, count)
    used = {day for first in validation for day in horizon_days_of(first, horizon_days)}
    return [d for d in split_days(dates)[0] if d not in used], validation


def scenario_calibration(forecaster: PriceForecaster, profiles: ProfileSet, forecasts: ForecastSet,
                         dates: Sequence[str]) -> dict[str, float]:
    """How spread smpc's price scenarios are against the error they stand for ($/MWh): the mean absolute out-of-fold
    residual the scenarios bootstrap and the mean absolute error of the forecast issued for ``dates``."""
    errors = [forecaster.price(profiles, forecasts, d) - profiles.days[d].price_usd_per_mwh for d in dates]
    return {"scenario_residual_mae_usd_per_mwh": float(np.abs(forecaster.price_residuals).mean()),
            "issued_forecast_mae_usd_per_mwh": float(np.abs(np.concatenate(errors)).mean())}


def _run_day(inst: Instance, thresholds: tuple[float, ...], scenarios: int, time_limit_s: float) -> dict:
    costs, facts = {}, {}
    for name, threshold in [("mpc", math.inf), *[(f"smpc@{t:g}", t) for t in thresholds]]:
        settings = PolicySettings(information="dayahead", time_limit_s=time_limit_s, smpc_scenarios=scenarios,
                                  smpc_threshold_usd=threshold)
        tick = time.perf_counter()
        schedule, info = run_policy("mpc" if name == "mpc" else "smpc", inst, settings)
        metrics = simulate(inst, schedule).metrics
        require(metrics.tranches_met, "tranche", f"{name} missed a tranche on {inst.days[0]}")
        costs[name] = metrics.operating_cost_usd
        facts[name] = {"wall_seconds": time.perf_counter() - tick, "departures": info.get("departures"),
                       "expected_saving_usd": info.get("expected_saving_usd")}
    print(f"{inst.days[0]}: " + ", ".join(f"{k} {v:.2f} ({facts[k]['wall_seconds']:.0f} s)" for k, v in costs.items()),
          file=sys.stderr, flush=True)
    return {"costs": costs, "facts": facts}


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m experiments.smpc_threshold", description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="2048")
    parser.add_argument("--profiles", required=True)
    parser.add_argument("--forecasts", required=True)
    parser.add_argument("--validation-days", type=int, default=VALIDATION_DAYS,
                        help=f"validation instances (default {VALIDATION_DAYS})")
    parser.add_argument("--horizon-days", type=int, default=1,
                        help="days D of each validation instance (default 1; the instances lie within training "
                             "days and the forecaster is fitted without any of their days)")
    parser.add_argument("--thresholds", default=",".join(f"{t:g}" for t in THRESHOLDS_USD),
                        help="comma-separated $ per re-planning point")
    parser.add_argument("--smpc-scenarios", type=int, default=SCENARIOS)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    require_number(args.validation_days, "validation-days", 1, limits.MAX_DAYS, integer=True)
    require_number(args.workers, "workers", 1, limits.MAX_WORKERS, integer=True)
    require_number(args.smpc_scenarios, "smpc-scenarios", 1, DEFAULT_SCENARIOS, integer=True)
    require_number(args.horizon_days, "horizon-days", 1, limits.MAX_HORIZON_DAYS, integer=True)
    try:
        thresholds = tuple(float(t) for t in args.thresholds.split(",") if t.strip())
    except ValueError:
        require(False, "thresholds", f"must be comma-separated numbers, got {args.thresholds!r}")
    require(bool(thresholds) and all(math.isfinite(t) and t >= 0 for t in thresholds), "thresholds",
            "must be finite numbers >= 0")
    result_file(args.json, "json")

    case = load_case(args.case)
    require_one_site_case(case, "experiments.smpc_threshold")
    profiles = load_profiles(args.profiles, renewable_capacity_mw=case.renewable_capacity_mw)
    forecasts = load_forecasts(args.forecasts)
    horizon = args.horizon_days
    several = horizon > 1
    fit, validation = validation_split(profiles.dates(), common_dates(forecasts, profiles), args.validation_days,
                                       starts=profiles.horizon_starts(horizon) if several else None,
                                       horizon_days=horizon)
    require(len(validation) > 0, "horizon-days", f"no {horizon}-day instance starts on a training day with forecasts")
    forecaster = fit_price_forecaster(profiles, forecasts, fit, seed=args.seed)
    instances = attach_forecasts(build_instances(case, validation, profiles, horizon_days=horizon), forecaster,
                                 profiles, forecasts, seed=args.seed)
    days = [d for d in validation if d in instances]
    require(len(days) > 0, "forecasts", f"none of the {len(validation)} validation instances has the price history "
            "its forecast needs")
    what = f"{horizon}-day instances from" if several else "days"
    print(f"{len(days)} validation {what} {days[0]}..{days[-1]}; forecaster fitted on {len(fit)} other training days",
          file=sys.stderr)
    calibration = scenario_calibration(forecaster, profiles, forecasts, [d for f in days for d in instances[f].days])
    print(f"scenario residual MAE {calibration['scenario_residual_mae_usd_per_mwh']:.2f} $/MWh (training days, out of "
          f"fold); the issued forecast's MAE on the validation days "
          f"{calibration['issued_forecast_mae_usd_per_mwh']:.2f} $/MWh", file=sys.stderr)
    tick = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        runs = dict(zip(days, pool.map(_run_day, [instances[d] for d in days], [thresholds] * len(days),
                                       [args.smpc_scenarios] * len(days), [args.time_limit] * len(days)),
                        strict=True))
    rows = {}
    for t in thresholds:
        per_day = {d: runs[d]["costs"]["mpc"] - runs[d]["costs"][f"smpc@{t:g}"] for d in days}
        rows[f"{t:g}"] = {"threshold_usd": t, "vss_usd": sum(per_day.values()),
                          "cheaper": sum(v > 1e-6 for v in per_day.values()),
                          "equal": sum(abs(v) <= 1e-6 for v in per_day.values()),
                          "dearer": sum(v < -1e-6 for v in per_day.values()), "vss_days_usd": per_day}
        print(f"threshold {t:g}: VSS {rows[f'{t:g}']['vss_usd']:+.2f} $ (smpc cheaper on "
              f"{rows[f'{t:g}']['cheaper']}, equal {rows[f'{t:g}']['equal']}, dearer {rows[f'{t:g}']['dearer']})")
    best = max(rows.values(), key=lambda r: (round(r["vss_usd"], 6), r["threshold_usd"]))
    print(f"chosen threshold: {best['threshold_usd']:g} $ (VSS {best['vss_usd']:+.2f} $ on {len(days)} "
          f"{'days' if not several else f'{horizon}-day instances'})")
    write_json(args.json, {"case": case.name, "validation_days": days, "horizon_days": horizon, "fit_days": len(fit),
                           "smpc_scenarios": args.smpc_scenarios, "seed": args.seed,
                           "mpc_total_usd": sum(runs[d]["costs"]["mpc"] for d in days), "thresholds": rows,
                           "scenario_calibration": calibration, "chosen_threshold_usd": best["threshold_usd"],
                           "runs": runs, "wall_seconds": time.perf_counter() - tick})
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
