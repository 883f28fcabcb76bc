"""How the fleet scales with the number of jobs and the pool: the oracle's seconds and gap (``--part oracle``),
the env's µs per agent step against CartPole (``--part env``, built on branch fleet-env), or both (``all``).

Scaled fleets: J jobs taken in turn from the fleet case's 12 (copies renamed ``<name>#2``, ...), the pool, the
inference service and the renewable plant scaled by the GPUs the J jobs' baseline modes need against the
case's 12 (so the pool holds them as it does in the case): J = 2, 4, 8, 12, 16 give pools of about 2k-22k
GPUs; ``--pools`` adds rows at fixed pool sizes (e.g. 32768) for the largest J. Each row is solved once, in
this process, with the fleet oracle (``--time-limit``, ``--mip-gap``). State the load average (printed) with
any figure: the machine is shared.

    python benchmarks/fleet_scaling.py --part oracle
    python benchmarks/fleet_scaling.py --part oracle --jobs 2 4 8 12 16 --pools 32768
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aidc_env.baselines import fixed_schedule  # noqa: E402
from aidc_env.case import build_instance  # noqa: E402
from aidc_env.errors import require, run_cli  # noqa: E402
from aidc_env.simulator import simulate  # noqa: E402
from experiments.fleet_study import scaled_fleet  # noqa: E402
from oracle.constants import DEFAULT_MIP_GAP  # noqa: E402
from oracle import solve  # noqa: E402

DEFAULT_JOBS = (2, 4, 8, 12, 16)
DEFAULT_TIME_LIMIT_S = 120.0
PARTS = ("oracle", "env", "all")


def oracle_part(args: argparse.Namespace) -> None:
    base = build_instance(args.case)
    print(f"## oracle: {args.case} on {base.day}, time limit {args.time_limit:g} s, mip gap {args.mip_gap:g}, "
          f"load average {os.getloadavg()[0]:.2f} at start")
    print("| jobs | pool GPUs | status | proof | seconds | objective | bound | gap | fixed | peak MB |")
    print("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|")
    rows = [(j, None) for j in args.jobs] + [(max(args.jobs), p) for p in args.pools]
    for n_jobs, pool in rows:
        inst = scaled_fleet(base, n_jobs, pool)
        fixed = simulate(inst, fixed_schedule(inst)).metrics
        tracemalloc.start()
        tick = time.perf_counter()
        result = solve(inst, method="decomposition", time_limit_s=args.time_limit, mip_gap=args.mip_gap)
        seconds = time.perf_counter() - tick
        peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        objective = "-" if result.objective_usd is None else f"${result.objective_usd:,.2f}"
        bound = "-" if result.best_bound_usd is None else f"${result.best_bound_usd:,.2f}"
        gap = "-" if result.gap is None else f"{result.gap:.1e}"
        fixed_text = f"${fixed.objective_usd:,.2f}" + ("" if fixed.feasible else " (infeasible)")
        print(f"| {n_jobs} | {inst.n_gpus:,} | {result.status} | {result.proof or '-'} | {seconds:.1f} | {objective} | "
              f"{bound} | {gap} | {fixed_text} | {peak_mb:.0f} |", flush=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")


def env_part(args: argparse.Namespace) -> None:
    print("## env: µs per agent step against CartPole-v1 (built on branch fleet-env; not in this branch yet)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=PARTS, default="all")
    parser.add_argument("--case", default="fleet")
    parser.add_argument("--jobs", type=int, nargs="+", default=list(DEFAULT_JOBS))
    parser.add_argument("--pools", type=int, nargs="*", default=[], help="extra rows at these pool sizes (GPUs)")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S)
    parser.add_argument("--mip-gap", type=float, default=DEFAULT_MIP_GAP)
    args = parser.parse_args(argv)
    require(all(j > 0 for j in args.jobs), "jobs", "must be positive")
    if args.part in ("oracle", "all"):
        oracle_part(args)
    if args.part in ("env", "all"):
        env_part(args)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
