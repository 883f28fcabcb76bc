"""Oracle and MPC solve times on held-out days, weeks or scaled fleets, against a reference solve of the same run.

The reference is the 2048 case's reference day solved by the same ``--method`` (after one untimed solve that loads the
solver): its objective must be the regression pin ``REFERENCE_USD`` and its median seconds over ``REFERENCE_RUNS``
solves is the yardstick every row's seconds are divided by (``x ref``), so runs on a shared machine compare. Each row
also gives the process CPU share and the load average.

    python benchmarks/oracle_days.py --case fleet --days 8 [--idle-value 0]         # the fleet oracle
    python benchmarks/oracle_days.py --case sites3 --days 5 --time-limit 120        # the sites decomposition
    python benchmarks/oracle_days.py --case 2048 --horizon-days 7 --time-limit 300  # held-out weeks
    python benchmarks/oracle_days.py --case fleet --jobs 2 4 8 12 16 --pools 32768  # scaled fleets, the case's day
    python benchmarks/oracle_days.py --mpc --days 35                                # MPC's re-solves, the truth
    python benchmarks/oracle_days.py --mpc --horizon-days 7 --forecasts caiso-2023-dayahead --time-limit 60

Days: the held-out instances of :func:`agents.days.split_starts` (``--days N``: N of them evenly spread; or the first
days themselves). ``--mpc`` runs :func:`agents.mpc.mpc_schedule` on each instance with one
:class:`oracle.rolling.RollingOracle` for the run (as an evaluation worker keeps one) and reports every re-solve: on
day-ahead forecasts (``--forecasts``, the forecaster fitted on the training days) a re-solve when a new forecast is
issued (``--every-point``: at every re-planning point); with perfect information, at every re-planning point. ``--json
FILE`` also writes every row (with the oracle's ``details``) and the summary.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.days import split_days, split_starts, spread  # noqa: E402
from aidc_env.baselines import fixed_schedule  # noqa: E402
from aidc_env.case import build_instance, build_instances, load_case, profiles_for  # noqa: E402
from aidc_env.errors import require, run_cli  # noqa: E402
from aidc_env.io import atomic_write_text, dumps_json  # noqa: E402
from aidc_env.simulator import simulate  # noqa: E402
from oracle import METHODS, solve  # noqa: E402
from oracle.constants import DEFAULT_MIP_GAP  # noqa: E402

REFERENCE_USD = 529.8088802758355
"""The proven optimum of the 2048 reference day (tests/test_regression.py)."""
REFERENCE_RUNS = 3
DEFAULT_DAYS = 5
DEFAULT_TIME_LIMIT_S = 120.0


class Clock:
    """Wall and process CPU seconds since it was made, and the 1-minute load average then."""

    def __init__(self) -> None:
        self.load = os.getloadavg()[0]
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> dict[str, float]:
        wall = time.perf_counter() - self.wall
        return {"seconds": wall, "cpu_share": (time.process_time() - self.cpu) / wall, "load": self.load}


def reference_seconds(method: str, time_limit_s: float) -> float:
    """Median seconds of the 2048 reference day by ``method``; InputError unless it returns the pinned optimum."""
    inst = build_instance("2048")
    times = []
    for _ in range(REFERENCE_RUNS + 1):
        clock = Clock()
        result = solve(inst, method=method, time_limit_s=time_limit_s, mip_gap=1e-9)
        times.append(clock.stop()["seconds"])
        require(result.objective_usd is not None and abs(result.objective_usd - REFERENCE_USD) <= 1e-6,
                "method", f"the reference day gave ${result.objective_usd}, not ${REFERENCE_USD!r}")
    return statistics.median(times[1:])


class TimedOracle:
    """A RollingOracle whose every re-solve also records its CPU share and the load average before it."""

    def __init__(self, oracle) -> None:
        self.oracle, self.clocks = oracle, []

    def solve(self, inst):
        clock = Clock()
        result = self.oracle.solve(inst)
        self.clocks.append(clock.stop())
        return result


def instances(args: argparse.Namespace) -> dict[str, object]:
    """The benchmark's instances by label: held-out instances of the profile source, or scaled fleets."""
    from experiments.fleet_study import scaled_fleet

    case = load_case(args.case)
    profiles = profiles_for(case, args.profiles)
    overrides = {} if args.idle_value is None else {"idle_value_usd_per_gpu_hour": args.idle_value}
    if args.jobs:
        base = build_instance(case, profiles=profiles, **overrides)
        sizes = [(n, None) for n in args.jobs] + [(max(args.jobs), pool) for pool in args.pools]
        return {f"{n} jobs, {pool or 'scaled'} GPUs": scaled_fleet(base, n, pool) for n, pool in sizes}
    dates = profiles.dates()
    held = split_starts(dates, profiles.horizon_starts(args.horizon_days), args.horizon_days)[1]
    count = int(args.days[0]) if len(args.days) == 1 and args.days[0].isdigit() else None
    found = build_instances(case, held if count else args.days, profiles, horizon_days=args.horizon_days, **overrides)
    if args.forecasts:  # the instances inside the forecast period, with their forecasts
        from aidc_env.dayahead import dayahead_instances
        from aidc_env.forecasts import load_forecasts

        found = dayahead_instances(found, profiles, load_forecasts(args.forecasts), split_days(dates)[0])
    return {day: found[day] for day in spread(list(found), count)} if count else found


def oracle_rows(label: str, inst, args: argparse.Namespace) -> list[dict]:
    clock = Clock()
    result = solve(inst, method=args.method, time_limit_s=args.time_limit, mip_gap=args.mip_gap)
    fixed = simulate(inst, fixed_schedule(inst)).metrics
    return [{"instance": label, **clock.stop(), "status": result.status, "proof": result.proof,
             "objective_usd": result.objective_usd, "bound_usd": result.best_bound_usd, "gap": result.gap,
             "fixed_usd": fixed.objective_usd if fixed.feasible else None, "details": dict(result.details or {})}]


def mpc_rows(label: str, inst, args: argparse.Namespace, oracle) -> list[dict]:
    from agents.mpc import mpc_schedule

    first = len(oracle.oracle.log)
    information = "dayahead" if args.forecasts else "perfect"
    schedule = mpc_schedule(inst, information, oracle=oracle, reuse_plans=bool(args.forecasts) and not args.every_point)
    cost = simulate(inst, schedule).metrics.operating_cost_usd
    return [{"instance": label, "slot": inst.slots - entry["slots"], **clock, "status": entry["status"],
             "proof": entry["proof"], "gap": entry["gap"], "span_days": entry["span_days"], "cost_usd": cost}
            for entry, clock in zip(oracle.oracle.log[first:], oracle.clocks[first:], strict=True)]


def text(value, spec: str = ",.2f") -> str:
    return "-" if value is None else format(value, spec)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="2048")
    parser.add_argument("--profiles", default="caiso-2023", help="dataset name or CSV (default: %(default)s)")
    parser.add_argument("--days", nargs="+", default=[str(DEFAULT_DAYS)],
                        help=f"N held-out instances evenly spread (default {DEFAULT_DAYS}), or their first days")
    parser.add_argument("--horizon-days", type=int, default=1)
    parser.add_argument("--method", choices=METHODS, default="auto")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S)
    parser.add_argument("--mip-gap", type=float, default=DEFAULT_MIP_GAP)
    parser.add_argument("--idle-value", type=float, help="$ per idle GPU-hour (default: the case's)")
    parser.add_argument("--jobs", type=int, nargs="*", default=[], help="scaled fleets of these job counts instead")
    parser.add_argument("--pools", type=int, nargs="*", default=[], help="with --jobs: also these pool sizes (GPUs)")
    parser.add_argument("--mpc", action="store_true", help="time MPC's re-solves instead of one solve per instance")
    parser.add_argument("--forecasts", help="with --mpc: day-ahead forecasts (dataset name or CSV)")
    parser.add_argument("--every-point", action="store_true", help="with --forecasts: re-solve at every point")
    parser.add_argument("--json", help="also write every row and the summary to this file")
    args = parser.parse_args(argv)
    require(args.time_limit > 0, "time-limit", "must be positive")
    require(0 <= args.mip_gap < 1, "mip-gap", "must be in [0, 1)")
    require(all(n > 0 for n in args.jobs), "jobs", "must be positive")
    require(args.mpc or not args.forecasts, "forecasts", "applies to --mpc")
    reference = reference_seconds(args.method, args.time_limit)
    print(f"# {args.case}, method {args.method}, time limit {args.time_limit:g} s, mip gap {args.mip_gap:g}; "
          f"reference (2048 day, same method) {reference:.3f} s; load average {os.getloadavg()[0]:.2f}", flush=True)
    oracle = None
    if args.mpc:
        from oracle.rolling import RollingOracle

        oracle = TimedOracle(RollingOracle(time_limit_s=args.time_limit, mip_gap=args.mip_gap))
    print("| instance | slot | status | proof | seconds | x ref | CPU | load | objective $ | bound $ | gap | fixed $ |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for label, inst in instances(args).items():
        for row in mpc_rows(label, inst, args, oracle) if oracle else oracle_rows(label, inst, args):
            rows.append(row)
            print(f"| {label} | {row.get('slot', '-')} | {row['status']} | {row['proof'] or '-'} | "
                  f"{row['seconds']:.2f} | {row['seconds'] / reference:.1f} | {row['cpu_share']:.0%} | "
                  f"{row['load']:.1f} | {text(row.get('objective_usd'))} | {text(row.get('bound_usd'))} | "
                  f"{text(row['gap'], '.1e')} | {text(row.get('fixed_usd'))} |", flush=True)
    require(bool(rows), "days", "no instance to solve")
    seconds = np.array([r["seconds"] for r in rows])
    proven = sum(r["status"] == "optimal" for r in rows)
    summary = {"reference_s": reference, "median_s": float(np.median(seconds)),
               "p90_s": float(np.percentile(seconds, 90)), "max_s": float(seconds.max()),
               "median_x_ref": float(np.median(seconds) / reference), "proven": proven, "solves": len(rows),
               "load_average_at_end": os.getloadavg()[0]}
    print(f"# seconds median {summary['median_s']:.2f} ({summary['median_x_ref']:.1f} x ref), p90 "
          f"{summary['p90_s']:.2f}, max {summary['max_s']:.2f}; proven {proven}/{len(rows)}; load average "
          f"{summary['load_average_at_end']:.2f} at the end")
    if args.json:
        atomic_write_text(args.json, dumps_json({"args": vars(args), "summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
