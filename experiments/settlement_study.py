"""The two-settlement study: day-ahead commitments of the 2048 case on held-out weeks, billed in two settlements.

    python -m experiments.settlement_study [--weeks N] [--time-limit S] [--scenarios S] [--seed N] [--model ZIP]
                                           [--json PATH]

The held-out weeks of the ``weeks`` split (:func:`agents.days.split_starts`, horizon 7 days, the case's K) whose every
day has the CAISO day-ahead LMP in ``caiso-2023-dayahead`` (2023-06-01..11-14: six weeks), ``--weeks N`` of them
evenly spread. Each week is built from ``caiso-2023`` (the truth: the RT LMP of SCE's load zone) with the forecasts of
``caiso-2023-dayahead`` (``price_source="supplied"``: the point price *is* the DA LMP of the same zone, checked here
week by week against the dataset's column; issued at 13:00, :data:`DA_PRICE_ISSUE_HOUR`), the forecaster's
residual days being training days outside the week, ``--scenarios`` seeded scenarios per day.

Rows (:data:`ROWS`; each a commitment of :mod:`agents.commitment` and a real-time dispatch): ``fixed`` and ``mpc``
RT-only (q = 0, today's bill), ``mpc`` with the deterministic and the stochastic commitment, ``oracle`` RT-only and
``hindsight`` (oracle commitment on the true spread, oracle dispatch: the bound); with ``--model``, a PPO dispatch
RT-only and with the deterministic commitment. Per row the two-settlement bill, its DA and RT parts, the energy
committed and deviated, the saving against fixed RT-only and against RT-only with the same dispatch (= −spread), and
the value of the stochastic commitment over the deterministic one (both with MPC's dispatch).

Prints the markdown tables; ``--json PATH`` also writes every row (strict JSON, atomically; ``-``: to stdout instead of
the tables). Progress on stderr.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

from agents.commitment import (DISPATCHES, POLICIES, SUPPLIED_SOURCE, dayahead_price, dispatch_schedule,
                               make_commitment, settle_policy)
from agents.days import DAYS_PER_WEEK, horizon_days_of, split_days, split_starts, spread
from aidc_env import limits
from aidc_env.case import build_instances, load_case, require_one_site_case
from aidc_env.dayahead import DEFAULT_SCENARIOS, dayahead_instances
from aidc_env.errors import CliParser, require, require_number, run_cli
from aidc_env.forecasts import ForecastSet, load_forecasts
from aidc_env.instance import Instance
from aidc_env.io import check_output_file, dumps_json, write_json
from aidc_env.profiles import hourly_to_slots, load_profiles

CASE = "2048"
PROFILES = "caiso-2023"
FORECASTS = "caiso-2023-dayahead"
DA_PRICE_ISSUE_HOUR = 13
"""CAISO publishes the DA LMP at about 13:00 of d − 1 (aidc_env/data/README.md): MPC's dispatch knows it from then."""
DEFAULT_TIME_LIMIT_S = 60.0
"""Seconds per oracle solve: the time limit of MPC's week re-solves in docs/performance.md."""
MAX_SCENARIOS = 100
"""Most scenarios per day: the bootstrap draws from ~120 residual days (training days with a DA LMP); more draws
mostly repeat days."""
ROWS = (("fixed, rt-only", "rt-only", "fixed"), ("mpc, rt-only", "rt-only", "mpc"),
        ("mpc, deterministic", "deterministic", "mpc"), ("mpc, stochastic", "stochastic", "mpc"),
        ("ppo, rt-only", "rt-only", "ppo"), ("ppo, deterministic", "deterministic", "ppo"),
        ("oracle, rt-only", "rt-only", "oracle"), ("hindsight", "hindsight", "oracle"))
"""(label, commitment policy, dispatch) of every row; the ``ppo`` rows only with ``--model``."""
REFERENCE = "fixed, rt-only"
BOUND_TOLERANCE_USD = 1e-6
"""Dollars by which a row must be below hindsight to count as beating it (floating-point rounding only)."""
SUMMED = ("total_usd", "dayahead_usd", "realtime_usd", "realtime_only_usd", "spread_usd", "committed_mwh",
          "grid_mwh", "deviation_mwh", "saving_vs_fixed_usd", "saving_vs_same_dispatch_usd")
"""The row figures added up over the weeks."""


# ------------------------------------------------------------------------------------------ the weeks


def held_out_weeks(profiles, forecasts: ForecastSet) -> list[str]:
    """The first days of the held-out weeks (``weeks`` split) whose every day has a DA LMP in ``forecasts``."""
    starts = split_starts(profiles.dates(), profiles.horizon_starts(DAYS_PER_WEEK), DAYS_PER_WEEK, "weeks")[1]
    return [s for s in starts if all(forecasts.has_supplied_price(d) for d in horizon_days_of(s, DAYS_PER_WEEK))]


def check_dayahead_lmp(inst: Instance, forecasts: ForecastSet) -> None:
    """The claim this study rests on: the instance's forecast price is the dataset's DA LMP column, slot by slot."""
    lmp = np.concatenate([hourly_to_slots(forecasts.supplied_price(day), inst.slots_per_day) for day in inst.days])
    if SUPPLIED_SOURCE not in inst.forecast.source or not np.array_equal(lmp, inst.forecast.price_usd_per_mwh):
        raise RuntimeError(f"the forecast price of the week from {inst.day} is not the DA LMP of {forecasts.source}")


def week_instances(profiles, forecasts: ForecastSet, starts: Sequence[str], n_scenarios: int,
                   seed: int) -> dict[str, Instance]:
    """The instances of the weeks from ``starts``, each with its forecast (the DA LMP checked)."""
    instances = build_instances(CASE, list(starts), profiles, horizon_days=DAYS_PER_WEEK)
    train_days = split_days(profiles.dates(), "weeks")[0]
    instances = dayahead_instances(instances, profiles, forecasts, train_days, n_scenarios, seed,
                                   price_source="supplied", price_issue_hour=DA_PRICE_ISSUE_HOUR)
    for inst in instances.values():
        check_dayahead_lmp(inst, forecasts)
    return instances


def run_week(inst: Instance, rows: Sequence[tuple[str, str, str]], time_limit_s: float, n_scenarios: int,
             model: Any, bar: tqdm) -> dict[str, Any]:
    """Every row of one week: the dispatches and commitments made once each, then settled in every pairing."""
    from oracle.rolling import RollingOracle

    oracle = RollingOracle(time_limit_s=time_limit_s)
    dayahead = dayahead_price(inst)
    schedules, commitments, seconds = {}, {}, {}
    for name in dict.fromkeys(d for _, _, d in rows):
        bar.set_postfix_str(f"{inst.day}: {name} dispatch")
        tick = time.perf_counter()
        schedules[name] = dispatch_schedule(inst, name, oracle=oracle, model=model)
        seconds[f"dispatch {name}"] = time.perf_counter() - tick
        bar.update()
    for policy in dict.fromkeys(p for _, p, _ in rows):
        bar.set_postfix_str(f"{inst.day}: {policy} commitment")
        commitments[policy] = make_commitment(inst, policy, oracle=oracle, n_scenarios=n_scenarios,
                                              dayahead_price_usd_per_mwh=dayahead)
        seconds[f"commitment {policy}"] = commitments[policy].seconds
        bar.update()
    settled = {label: settle_policy(inst, policy, dispatch, schedule=schedules[dispatch],
                                    commitment=commitments[policy], dayahead_price_usd_per_mwh=dayahead).row()
               for label, policy, dispatch in rows}
    reference = settled[REFERENCE]["total_usd"]
    for row in settled.values():
        row["saving_vs_fixed_usd"] = reference - row["total_usd"]
        row["saving_vs_same_dispatch_usd"] = -row["spread_usd"]
    scenarios = inst.forecast.price_scenarios_usd_per_mwh[:n_scenarios]
    return {"week": inst.day, "rows": settled, "seconds": seconds,
            "solves": len(oracle.log), "solves_at_time_limit": sum(e["status"] == "time_limit" for e in oracle.log),
            "mean_dayahead_usd_per_mwh": float(dayahead.mean()),
            "mean_realtime_usd_per_mwh": float(inst.price_usd_per_mwh.mean()),
            "mean_scenario_realtime_usd_per_mwh": float(scenarios.mean()),
            "stochastic_value_usd": (settled["mpc, deterministic"]["total_usd"]
                                     - settled["mpc, stochastic"]["total_usd"])}


def summarise(weeks: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per row label: the :data:`SUMMED` figures added over the weeks, and in how many weeks B met its targets."""
    labels = list(weeks[0]["rows"]) if weeks else []
    return {label: {**{k: float(sum(w["rows"][label][k] for w in weeks)) for k in SUMMED},
                    "weeks_tranches_met": sum(w["rows"][label]["tranches_met"] for w in weeks)} for label in labels}


# ------------------------------------------------------------------------------------------ tables


def tables(record: dict[str, Any]) -> str:
    """The markdown tables: totals over the weeks per row, then the bill and the stochastic value per week."""
    weeks, total = record["weeks"], record["summary"]
    n = len(weeks)
    out = [f"Two settlements, case {record['case']}, {n} held-out week(s) ({', '.join(w['week'] for w in weeks)}), "
           f"horizon {DAYS_PER_WEEK} days; totals over the weeks ($, MWh).", "",
           "| dispatch, commitment | bill | DA part | RT part | committed MWh | deviation MWh | saving vs fixed "
           "RT-only | saving vs same dispatch RT-only | weeks targets met |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, row in total.items():
        out.append(f"| {label} | {row['total_usd']:,.2f} | {row['dayahead_usd']:,.2f} | {row['realtime_usd']:,.2f} | "
                   f"{row['committed_mwh']:,.1f} | {row['deviation_mwh']:,.1f} | {row['saving_vs_fixed_usd']:,.2f} | "
                   f"{row['saving_vs_same_dispatch_usd']:,.2f} | {row['weeks_tranches_met']}/{n} |")
    value = sum(w["stochastic_value_usd"] for w in weeks)
    out += ["", f"Value of the stochastic commitment over the deterministic one (MPC dispatch): {value:,.2f} $ over "
            f"{n} week(s).", "", "| week | mean λDA | mean λRT | mean scenario λRT | " +
            " | ".join(total) + " | stochastic value | solves at the time limit |",
            "|---|---:|---:|---:|" + "---:|" * (len(total) + 2)]
    for w in weeks:
        out.append(f"| {w['week']} | {w['mean_dayahead_usd_per_mwh']:.2f} | {w['mean_realtime_usd_per_mwh']:.2f} | "
                   f"{w['mean_scenario_realtime_usd_per_mwh']:.2f} | "
                   + " | ".join(f"{w['rows'][label]['total_usd']:,.2f}" for label in total)
                   + f" | {w['stochastic_value_usd']:,.2f} | {w['solves_at_time_limit']} of {w['solves']} |")
    bound = total.get("hindsight", {}).get("total_usd")
    if bound is not None:
        others = [label for label, policy, _ in record["rows"] if policy != "hindsight"]
        beaten = [label for label in others if total[label]["total_usd"] < bound - BOUND_TOLERANCE_USD]
        out += ["", "Hindsight is below every row (the bound holds)." if not beaten else
                f"Rows below hindsight (its bound does not cover purchases made against forecast renewables): "
                f"{', '.join(beaten)}."]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------ command line


def load_dispatch_model(path: str | None) -> Any:
    """The PPO model of ``--model`` (None without), refused unless trained with day-ahead information."""
    if path is None:
        return None
    from agents.ppo import load_model, model_config

    model = load_model(path)
    require(model_config(model).information == "dayahead", "model", f"{path} was trained with perfect information "
            "and would see the truth; give a model trained with --information dayahead")
    return model


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m experiments.settlement_study",
                       description="Day-ahead commitments of the 2048 case on held-out weeks, billed in two "
                       "settlements (DA purchase at the DA LMP, deviation at the RT LMP).")
    parser.add_argument("--weeks", type=int, help="held-out weeks with a DA LMP, evenly spread (default: all six)")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S,
                        help="seconds per oracle solve (default: %(default)s)")
    parser.add_argument("--scenarios", type=int, default=DEFAULT_SCENARIOS,
                        help="RT price scenarios per day for the stochastic commitment (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="the scenarios' bootstrap seed (default: %(default)s)")
    parser.add_argument("--model", help="a PPO model (zip) trained with day-ahead information: adds the ppo rows")
    parser.add_argument("--json", help="also write every row as JSON to this file ('-': print it instead of tables)")
    args = parser.parse_args(argv)
    if args.weeks is not None:
        require_number(args.weeks, "weeks", 1, limits.MAX_DAYS, integer=True)
    require_number(args.time_limit, "time-limit", 0.0, limits.MAX_TIME_LIMIT_S, low_open=True)
    require_number(args.scenarios, "scenarios", 1, MAX_SCENARIOS, integer=True)
    require_number(args.seed, "seed", 0, limits.MAX_SEED, integer=True)
    if args.json not in (None, "-"):
        check_output_file(args.json, "json")
    require_one_site_case(load_case(CASE), "the settlement study")
    model = load_dispatch_model(args.model)
    rows = [row for row in ROWS if row[2] != "ppo" or model is not None]
    profiles, forecasts = load_profiles(PROFILES), load_forecasts(FORECASTS)
    starts = held_out_weeks(profiles, forecasts)
    require(bool(starts), "weeks", f"no held-out week of {PROFILES} has a DA LMP in {FORECASTS}")
    chosen = spread(starts, args.weeks or len(starts))
    instances = week_instances(profiles, forecasts, chosen, args.scenarios, args.seed)
    steps = len({d for _, _, d in rows}) + len({p for _, p, _ in rows})
    weeks = []
    with tqdm(total=steps * len(instances), desc="settlement study", unit="step", file=sys.stderr) as bar:
        for inst in instances.values():
            weeks.append(run_week(inst, rows, args.time_limit, args.scenarios, model, bar))
    record = {"case": CASE, "profiles": PROFILES, "forecasts": FORECASTS, "horizon_days": DAYS_PER_WEEK,
              "held_out_weeks": starts, "time_limit_s": args.time_limit, "scenarios": args.scenarios,
              "seed": args.seed, "model": args.model, "policies": list(POLICIES), "dispatches": list(DISPATCHES),
              "rows": [list(r) for r in rows], "weeks": weeks, "summary": summarise(weeks)}
    if args.json == "-":
        print(dumps_json(record, indent=1))
        return 0
    print(tables(record), end="")
    if args.json is not None:
        write_json(args.json, record)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
