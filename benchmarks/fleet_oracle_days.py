"""The fleet oracle on held-out days of the fleet case: seconds, gap, objective against fixed and greedy.

The held-out days are those of :func:`agents.days.split_days` (every 7th complete day of the profile source);
``--days N`` takes N of them evenly spread over the year. Each day is solved once, in this process, with the
fleet oracle (``--time-limit``, ``--mip-gap``); the table gives its status, proof, seconds, objective
(operating cost − idle value), proven bound and gap, and the simulator's objective of the fixed and greedy
baselines. ``--idle-value`` overrides the case's $ per idle GPU-hour (0: the energy dispatch alone).
State the load average (printed) with any figure: the machine is shared.

    python benchmarks/fleet_oracle_days.py --days 8
    python benchmarks/fleet_oracle_days.py --days 8 --idle-value 0
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.days import split_days  # noqa: E402
from aidc_env.baselines import fixed_schedule, greedy_schedule  # noqa: E402
from aidc_env.case import build_instance  # noqa: E402
from aidc_env.errors import require, run_cli  # noqa: E402
from aidc_env.profiles import load_profiles  # noqa: E402
from aidc_env.simulator import simulate  # noqa: E402
from oracle.constants import DEFAULT_MIP_GAP  # noqa: E402
from oracle import solve  # noqa: E402

YEAR = "caiso-2023"
"""The full CAISO 2023 year (a packaged dataset, :mod:`aidc_env.datasets`)."""
DEFAULT_DAYS = 8
DEFAULT_TIME_LIMIT_S = 120.0


def spread(days: Sequence[str], n: int) -> list[str]:
    """n of the days, evenly spread (first and last included)."""
    if n >= len(days):
        return list(days)
    step = (len(days) - 1) / max(n - 1, 1)
    return [days[round(i * step)] for i in range(n)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="fleet")
    parser.add_argument("--profiles", default=YEAR, help="dataset name or profiles CSV (default: %(default)s)")
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS, help="how many held-out days")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S)
    parser.add_argument("--mip-gap", type=float, default=DEFAULT_MIP_GAP)
    parser.add_argument("--idle-value", type=float, help="$ per idle GPU-hour (default: the case's)")
    args = parser.parse_args(argv)
    require(args.days > 0, "days", "must be positive")
    profiles = load_profiles(args.profiles)
    held_out = spread(split_days(profiles.dates())[1], args.days)
    overrides = {} if args.idle_value is None else {"idle_value_usd_per_gpu_hour": args.idle_value}
    print(f"# {args.case}, {len(held_out)} held-out days, time limit {args.time_limit:g} s, mip gap {args.mip_gap:g}, "
          f"load average {os.getloadavg()[0]:.2f} at start")
    print("| day | status | proof | seconds | objective | bound | gap | fixed | greedy | saving vs fixed |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for day in held_out:
        inst = build_instance(args.case, day=day, profiles=profiles, **overrides)
        tick = time.perf_counter()
        result = solve(inst, method="decomposition", time_limit_s=args.time_limit, mip_gap=args.mip_gap)
        seconds = time.perf_counter() - tick
        fixed = simulate(inst, fixed_schedule(inst)).metrics.objective_usd
        greedy = simulate(inst, greedy_schedule(inst)).metrics.objective_usd
        objective = result.objective_usd
        saving = f"${fixed - objective:,.2f}" if objective is not None else "-"
        print(f"| {day} | {result.status} | {result.proof or '-'} | {seconds:.1f} | "
              f"{'-' if objective is None else f'${objective:,.2f}'} | ${result.best_bound_usd:,.2f} | "
              f"{'-' if result.gap is None else f'{result.gap:.1e}'} | ${fixed:,.2f} | ${greedy:,.2f} | {saving} |",
              flush=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
