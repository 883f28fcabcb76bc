"""The oracle's decomposition (oracle/decomposition.py) on held-out days of sites3: seconds, objective, bound, gap.

The held-out days are those of :func:`agents.days.split_days` (every 7th complete day of the profile source);
``--days N`` takes N of them evenly spread over the year. Each day is solved once, in this process, with the
decomposition (``--time-limit``, ``--mip-gap``); the table gives status, proof, seconds, objective (the
simulator's replay), proven bound and gap, the branch-and-price nodes (the path master's tree, or the pattern
master's ``branch_bound``), then median / p90 / max of the seconds and gaps and how many days are within 0.1 %. ``--reference``
also solves the 2048 reference day with its one site made explicit (the day oracle's optimum is
$529.8088802758355). State the load average (printed) with any figure: the machine is shared.

    python benchmarks/sites_oracle_days.py --days 5 --time-limit 120 --reference
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.days import split_days  # noqa: E402
from aidc_env.case import build_instance  # noqa: E402
from aidc_env.errors import require, run_cli  # noqa: E402
from aidc_env.site_profiles import load_site_profiles  # noqa: E402
from aidc_env.sites import SiteNetwork  # noqa: E402
from oracle.constants import DEFAULT_MIP_GAP  # noqa: E402
from oracle import solve  # noqa: E402

YEAR = "caiso-2023"
"""The full CAISO 2023 year (three load-zone prices, solar and wind apart; a packaged dataset)."""
DEFAULT_DAYS = 5
DEFAULT_TIME_LIMIT_S = 120.0
GOAL_GAP = 1e-3
"""Issue 14's goal: gap ≤ 0.1 % within 120 s."""
REFERENCE_USD = 529.8088802758355
"""The day oracle's proven optimum of the 2048 reference day (tests/test_regression.py)."""


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (HiGHS's threads included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def spread(days: Sequence[str], n: int) -> list[str]:
    """n of the days, evenly spread (first and last included)."""
    if n >= len(days):
        return list(days)
    step = (len(days) - 1) / max(n - 1, 1)
    return [days[round(i * step)] for i in range(n)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="sites3")
    parser.add_argument("--profiles", default=YEAR, help="dataset name or site profiles CSV (default: %(default)s)")
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS, help="how many held-out days")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S)
    parser.add_argument("--mip-gap", type=float, default=DEFAULT_MIP_GAP)
    parser.add_argument("--reference", action="store_true", help="also the 2048 day with one explicit site")
    args = parser.parse_args(argv)
    require(args.days > 0, "days", "must be positive")
    require(args.time_limit > 0, "time-limit", "must be positive")
    print(f"# {args.case}, time limit {args.time_limit:g} s, mip gap {args.mip_gap:g}, load average "
          f"{os.getloadavg()[0]:.2f} at start")
    if args.reference:
        inst = build_instance("2048")
        one = dataclasses.replace(inst, network=SiteNetwork(sites=inst.sites, home=(0,) * len(inst.jobs),
                                                            transfer_hours=(0.0,) * len(inst.jobs)))
        tick = time.perf_counter()
        result = solve(one, method="decomposition", time_limit_s=args.time_limit, mip_gap=1e-9)
        print(f"# 2048 with one site: {result.status} ({result.proof or '-'}), ${result.objective_usd!r} vs the day "
              f"oracle's ${REFERENCE_USD!r}, equal: {result.objective_usd == REFERENCE_USD}, "
              f"{time.perf_counter() - tick:.1f} s, load average {os.getloadavg()[0]:.2f}", flush=True)
    profiles = load_site_profiles(args.profiles)
    held_out = spread(split_days(profiles.dates())[1], args.days)
    print("| day | status | proof | seconds | CPU share | objective $ | bound $ | gap | start $ | columns | B&P nodes | "
          "load |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    seconds, gaps = [], []
    for day in held_out:
        inst = build_instance(args.case, day=day, profiles=profiles)
        tick, cpu = time.perf_counter(), cpu_seconds()
        result = solve(inst, method="decomposition", time_limit_s=args.time_limit, mip_gap=args.mip_gap)
        took = time.perf_counter() - tick
        share = (cpu_seconds() - cpu) / took
        seconds.append(took)
        gaps.append(np.nan if result.gap is None else result.gap)
        objective = "-" if result.objective_usd is None else f"{result.objective_usd:,.2f}"
        bound = "-" if result.best_bound_usd is None else f"{result.best_bound_usd:,.2f}"
        start = "-" if result.start_objective_usd is None else f"{result.start_objective_usd:,.2f}"
        print(f"| {day} | {result.status} | {result.proof or '-'} | {took:.1f} | {share:.0%} | {objective} | {bound} | "
              f"{'-' if result.gap is None else f'{result.gap:.2%}'} | {start} | "
              f"{result.details.get('columns', 0)} | "
              f"{result.details.get('bp_nodes', 0) + result.details.get('pattern_branch_nodes', 0)} | "
              f"{os.getloadavg()[0]:.1f} |",
              flush=True)
    s, g = np.array(seconds), np.array(gaps)
    print(f"# seconds median {np.median(s):.1f}, p90 {np.percentile(s, 90):.1f}, max {s.max():.1f}; gap median "
          f"{np.nanmedian(g):.2%}, p90 {np.nanpercentile(g, 90):.2%}, max {np.nanmax(g):.2%}; within "
          f"{GOAL_GAP:.1%}: {int(np.sum(g <= GOAL_GAP))}/{g.size}; proven "
          f"{int(np.sum(g <= args.mip_gap))}/{g.size}; load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
