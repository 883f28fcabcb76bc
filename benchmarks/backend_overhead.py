"""Per-task overhead and speed-up of the two backends (aidc_env/parallel.py) for 1, 2 and 4 workers, against a typical
oracle day's solve measured in the same run.

    python benchmarks/backend_overhead.py --days 8 --noop-tasks 400

Per backend and number of workers W: ``start s``, opening the pool and one warm-up task per worker that imports the
oracle and holds its worker :data:`WARM_UP_HOLD_S` (Ray's own start-up, once per run, is printed apart); ``tasks/s`` and
``overhead ms``, ``--noop-tasks`` empty tasks reading their day's instance from the object store (overhead = wall × W /
tasks), and ``% of solve``, that overhead against the median seconds of one oracle day's solve (measured serially first,
after one untimed solve); ``speed-up``, serial seconds / wall seconds of ``--days`` oracle solves, whose objectives must
equal the serial ones to :data:`AGREEMENT_USD`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pickle
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aidc_env.case import build_instances, load_case  # noqa: E402
from aidc_env.errors import require, run_cli  # noqa: E402
from aidc_env.instance import Instance  # noqa: E402
from aidc_env.parallel import Backend, open_pool  # noqa: E402
from aidc_env.profiles import load_profiles  # noqa: E402

WORKER_COUNTS = (1, 2, 4)
DEFAULT_DAYS = 8
DEFAULT_NOOP_TASKS = 200
TIME_LIMIT_S = 120.0
AGREEMENT_USD = 1e-6
WARM_UP_HOLD_S = 0.5


def noop(inst: Instance) -> int:
    """An empty task: reads its instance (as a real task would) and returns."""
    return len(inst.price_usd_per_mwh)


def warm_up(inst: Instance) -> int:
    """A worker's first task: imports the oracle (a fresh Ray worker has not; a forked process has) and holds the worker
    for WARM_UP_HOLD_S, so that each of the W first tasks starts a worker of its own."""
    importlib.import_module("oracle.model")
    time.sleep(WARM_UP_HOLD_S)
    return noop(inst)


def solve(inst: Instance) -> float:
    """One oracle day solve; its objective ($)."""
    from oracle.model import OracleModel

    return float(OracleModel(inst).solve(time_limit_s=TIME_LIMIT_S).objective_usd)


def measure(backend: Backend, instances: Sequence[Instance], noop_tasks: int, serial: list[float]) -> dict[str, float]:
    with open_pool(backend) as pool:
        tick = time.perf_counter()
        shared = [pool.put(inst) for inst in instances]
        list(pool.map(warm_up, [(shared[i % len(shared)],) for i in range(backend.workers)]))
        start_s = time.perf_counter() - tick
        tick = time.perf_counter()
        list(pool.map(noop, [(shared[i % len(shared)],) for i in range(noop_tasks)]))
        noop_wall = time.perf_counter() - tick
        tick = time.perf_counter()
        objectives = list(pool.map(solve, [(ref,) for ref in shared]))
        solve_wall = time.perf_counter() - tick
    require(all(abs(a - b) <= AGREEMENT_USD for a, b in zip(objectives, serial, strict=True)), "objectives",
            f"{backend.name} x {backend.workers} differs from the serial solves")
    return {"start_s": start_s, "tasks_per_s": noop_tasks / noop_wall,
            "overhead_s": noop_wall * backend.workers / noop_tasks, "solve_wall_s": solve_wall}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/backend_overhead.py", description=__doc__.split("\n")[0])
    parser.add_argument("--case", default="2048")
    parser.add_argument("--profiles", default="caiso-2023", help="dataset name or profile CSV (default: %(default)s)")
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS, help=f"oracle days solved (default {DEFAULT_DAYS})")
    parser.add_argument("--noop-tasks", type=int, default=DEFAULT_NOOP_TASKS,
                        help=f"empty tasks per measurement (default {DEFAULT_NOOP_TASKS})")
    parser.add_argument("--backends", default="process,ray", help="comma-separated (default process,ray)")
    args = parser.parse_args(argv)
    require(args.days > 0 and args.noop_tasks > 0, "days", "--days and --noop-tasks must be > 0")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]

    case = load_case(args.case)
    profiles = load_profiles(args.profiles, renewable_capacity_mw=case.renewable_capacity_mw)
    dates = list(profiles.dates())
    days = [dates[round(i * (len(dates) - 1) / max(1, args.days - 1))] for i in range(args.days)]
    instances = list(build_instances(case, days, profiles).values())
    load_start = os.getloadavg()[0]
    print(f"# {os.cpu_count()} CPUs, load average {load_start:.2f}; case {case.name}, {len(instances)} days of "
          f"{args.profiles}; instance {len(pickle.dumps(instances[0])) / 1024:.0f} KiB pickled", flush=True)

    solve(instances[0])  # untimed: the first solve of a process imports and loads the solver
    serial_s, serial = [], []
    for inst in instances:
        tick = time.perf_counter()
        serial.append(solve(inst))
        serial_s.append(time.perf_counter() - tick)
    typical = statistics.median(serial_s)
    print(f"typical oracle day (median of {len(serial_s)} serial solves, {case.name} case): {typical:.2f} s; "
          f"serial total {sum(serial_s):.2f} s", flush=True)

    rows = []
    for name in backends:
        tick = time.perf_counter()
        with Backend(name, max(WORKER_COUNTS)).running():
            if name == "ray":
                print(f"ray: a local Ray of {max(WORKER_COUNTS)} CPUs started in {time.perf_counter() - tick:.2f} s "
                      "(once per run)", flush=True)
            for workers in WORKER_COUNTS:
                facts = measure(Backend(name, workers), instances, args.noop_tasks, serial)
                rows.append((name, workers, facts))
                print(f"  {name} x {workers} done", flush=True)

    print("\n| backend | workers | start s | tasks/s | overhead ms | % of solve | solves wall s | speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    for name, workers, f in rows:
        print(f"| {name} | {workers} | {f['start_s']:.2f} | {f['tasks_per_s']:.0f} | {1000 * f['overhead_s']:.2f} | "
              f"{100 * f['overhead_s'] / typical:.2f} | {f['solve_wall_s']:.2f} | "
              f"{sum(serial_s) / f['solve_wall_s']:.2f} |")
    print(f"\nload average {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; objectives equal to the "
          f"serial solves within {AGREEMENT_USD:g} $ on every backend and worker count")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
