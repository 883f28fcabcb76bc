"""Seconds and proofs of MPC's week re-solves (issue 12: MPC's re-solve ≤ 1 s median) on the held-out weeks.

Each week (D = 7 days from its first day, the 2048 case, day-ahead information) is built as evaluate.py builds it
(the forecaster fitted on the training split outside each week, :func:`aidc_env.dayahead.dayahead_instances`) and
run through :func:`agents.mpc.mpc_schedule` with one :class:`oracle.rolling.RollingOracle` per week (a re-solve when
a new forecast is issued, as in the evaluation; ``--every-point``: at every re-planning point). A re-solve from a
point inside the week is a flat rest-of-horizon sub-instance longer than a day, which the oracle solves with its
multi-day settings (:func:`oracle.data.span_days`). Prints strict JSON: per re-solve its week, slot, span in days,
status, proof, gap, seconds (wall), process CPU seconds (this process: a textbook MILP raced in a child process is
not counted) and the load average before it, with the load before and after each week, and the median, p90 and max
of the wall and CPU seconds.

    python benchmarks/week_mpc.py --profiles CSV --forecasts CSV [--days D1 D2 ...] [--mip-gap G] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.days import DAYS_PER_WEEK as HORIZON_DAYS  # noqa: E402
from agents.days import split_days, split_starts  # noqa: E402
from agents.mpc import mpc_schedule  # noqa: E402
from aidc_env.case import build_instances  # noqa: E402
from aidc_env.dayahead import dayahead_instances  # noqa: E402
from aidc_env.errors import require, run_cli  # noqa: E402
from aidc_env.forecasts import load_forecasts  # noqa: E402
from aidc_env.io import atomic_write_text, dumps_json  # noqa: E402
from aidc_env.profiles import load_profiles  # noqa: E402
from aidc_env.simulator import simulate  # noqa: E402
from oracle.constants import DEFAULT_MIP_GAP  # noqa: E402
from oracle.rolling import RollingOracle  # noqa: E402

GOAL_MEDIAN_S = 1.0
"""Issue 12: MPC's per-boundary re-solve ≤ 1 s median."""
DEFAULT_TIME_LIMIT_S = 60.0
"""evaluate.py's ``--time-limit`` of the week runs (docs/uncertainty.md, "Held-out weeks")."""


class TimedOracle:
    """A :class:`oracle.rolling.RollingOracle` that also records each re-solve's process CPU seconds and the load
    average before it (the machine is shared: wall seconds alone do not compare runs)."""

    def __init__(self, oracle: RollingOracle) -> None:
        self.oracle = oracle
        self.cpu_seconds: list[float] = []
        self.load: list[float] = []

    def solve(self, inst):
        self.load.append(os.getloadavg()[0])
        tick = time.process_time()
        result = self.oracle.solve(inst)
        self.cpu_seconds.append(time.process_time() - tick)
        return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", required=True, help="dataset name or profile CSV (e.g. caiso-2023)")
    parser.add_argument("--forecasts", required=True,
                        help="dataset name or day-ahead forecast CSV (e.g. caiso-2023-dayahead)")
    parser.add_argument("--case", default="2048", help="bundled case name or TOML file (default: 2048)")
    parser.add_argument("--days", nargs="+", help="first days of the weeks (default: the held-out weeks)")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S,
                        help=f"seconds per re-solve (default {DEFAULT_TIME_LIMIT_S:g})")
    parser.add_argument("--mip-gap", type=float, default=DEFAULT_MIP_GAP,
                        help=f"relative gap at which a re-solve counts as optimal (default {DEFAULT_MIP_GAP:g}, the oracle's)")
    parser.add_argument("--every-point", action="store_true",
                        help="re-solve at every re-planning point (default: only when a new forecast is known)")
    parser.add_argument("--json", help="also write the JSON to this file")
    args = parser.parse_args(argv)
    require(args.time_limit > 0, "time_limit", "must be > 0")
    require(0 <= args.mip_gap < 1, "mip_gap", "must be in [0, 1)")
    profiles = load_profiles(args.profiles)
    args.days = args.days or split_starts(profiles.dates(), profiles.horizon_starts(HORIZON_DAYS), HORIZON_DAYS)[1]
    instances = build_instances(args.case, args.days, profiles, horizon_days=HORIZON_DAYS)
    instances = dayahead_instances(instances, profiles, load_forecasts(args.forecasts), split_days(profiles.dates())[0])
    solves, weeks = [], []
    for day in args.days:
        require(day in instances, "days", f"{day} does not start {HORIZON_DAYS} days with forecasts")
        inst = instances[day]
        oracle = RollingOracle(time_limit_s=args.time_limit, mip_gap=args.mip_gap)
        timed = TimedOracle(oracle)
        load_before, tick = os.getloadavg()[0], time.perf_counter()
        schedule = mpc_schedule(inst, "dayahead", oracle=timed, reuse_plans=not args.every_point)
        weeks.append({"day": day, "seconds": time.perf_counter() - tick, "re_solves": len(oracle.log),
                      "cost_usd": simulate(inst, schedule).metrics.operating_cost_usd,
                      "load_before": load_before, "load_after": os.getloadavg()[0]})
        solves += [{"day": day, "slot": inst.slots - entry["slots"], **entry, "cpu_seconds": cpu, "load": load}
                   for entry, cpu, load in zip(oracle.log, timed.cpu_seconds, timed.load, strict=True)]
        print(f"{day}: {len(oracle.log)} re-solves, {weeks[-1]['seconds']:.1f} s, statuses "
              f"{[e['status'] for e in oracle.log]}, load {load_before:.1f}-{weeks[-1]['load_after']:.1f}",
              file=sys.stderr)
    times = np.array([s["seconds"] for s in solves])
    cpu = np.array([s["cpu_seconds"] for s in solves])
    summary = {"re_solves": solves, "weeks": weeks, "median_s": float(np.median(times)),
               "p90_s": float(np.percentile(times, 90)), "max_s": float(times.max()),
               "cpu_median_s": float(np.median(cpu)), "cpu_p90_s": float(np.percentile(cpu, 90)),
               "cpu_max_s": float(cpu.max()),
               "optimal": sum(s["status"] == "optimal" for s in solves), "goal_median_s": GOAL_MEDIAN_S,
               "time_limit_s": args.time_limit, "mip_gap": args.mip_gap, "every_point": args.every_point}
    text = dumps_json(summary, indent=1)
    if args.json:
        atomic_write_text(args.json, text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
