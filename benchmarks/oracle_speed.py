"""Oracle speed over days: seconds to a proven optimum of oracle variants against the textbook MILP, same run.

Each (day, K) is solved by every ``--variants`` entry one after the other in one worker process (``OracleModel(...)``
and ``solve()``, wall seconds); the textbook MILP (``formulation="textbook"``, HiGHS) is the reference. Per K it prints
the median, p90 and max seconds of each variant with the medians of its phases (``OracleResult.details``), the slowest
days and the path that proved them, and the ratio variant / textbook per day (median, max, days above
:data:`GUARD_RATIO`). The rows go to ``--out`` as JSON after every day (an interrupted run keeps what it finished).

    python benchmarks/oracle_speed.py --days all --segments 12            # every complete day of the year
    python benchmarks/oracle_speed.py --days monthly --segments 24 48 96   # the 15th of each month
    python benchmarks/oracle_speed.py --summarize runs/oracle_speed/<run>.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aidc_env.case import load_case  # noqa: E402
from aidc_env.errors import require, run_cli  # noqa: E402
from aidc_env.io import atomic_write_text, dumps_json  # noqa: E402
from aidc_env.parallel import add_backend_arguments, backend_from_args, open_pool  # noqa: E402
from aidc_env.profiles import load_profiles  # noqa: E402
from oracle.constants import DEFAULT_MIP_GAP  # noqa: E402

MONTHLY_DAY = 15
"""``--days monthly``: this day of each month (or the first complete day after it)."""
MAX_WORKERS = 2
STALL_LABELS = 50
"""Label budget of the forced-stall variants: the search gives up at once and the day rests on the fallbacks."""
SPREAD_STRIDE = 16
"""``--order spread``: every 16th day first, then the next offset (a partial run covers the whole year)."""
VARIANTS = {"oracle": {}, "oracle-noguard": {"race_after_s": None}, "oracle-fallback": {"max_labels": STALL_LABELS},
            "oracle-fallback-noguard": {"max_labels": STALL_LABELS, "race_after_s": None},
            "textbook": {"formulation": "textbook", "reduce": False}}
"""``noguard``: never race the textbook MILP; ``fallback``: the label search gives up at once (beam incumbent + branch
and bound, raced by the textbook MILP)."""
REFERENCE = "textbook"
PHASES = ("dual", "lp", "tables", "labels", "pyomo", "bnb")
SLOWEST_SHOWN = 5
GUARD_RATIO = 1.5
"""The oracle should never take more than this × the textbook MILP's seconds on the same day."""


def solve_day(profiles, task: tuple) -> list[dict]:
    """Every variant on one (day, K), one after the other in this worker (``profiles``: shared, read-only)."""
    from aidc_env.case import build_instance
    from oracle.model import OracleModel

    case, day, segments, time_limit_s, mip_gap, variants = task
    inst = build_instance(case, day=day, profiles=profiles, segments=segments)
    rows = []
    for variant in variants:
        tick = time.perf_counter()
        result = OracleModel(inst, **VARIANTS[variant]).solve(time_limit_s=time_limit_s, mip_gap=mip_gap)
        rows.append({"day": day, "segments": segments, "variant": variant, "status": result.status,
                     "proof": result.proof, "seconds": time.perf_counter() - tick,
                     "objective_usd": result.objective_usd, "gap": result.gap, "details": dict(result.details)})
    return rows


def choose_days(spec: Sequence[str], available: Sequence[str]) -> list[str]:
    """'all', 'monthly' (the 15th of each month, or the first complete day after it) and days, in date order."""
    chosen: set[str] = set()
    for item in spec:
        if item == "all":
            chosen.update(available)
        elif item == "monthly":
            for month in sorted({d[:7] for d in available}):
                days = [d for d in available if d[:7] == month]
                chosen.add(next((d for d in days if int(d[8:]) >= MONTHLY_DAY), days[-1]))
        else:
            require(item in set(available), "days", f"{item} is not a complete day of the profile source")
            chosen.add(item)
    return sorted(chosen)


def path_of(row: dict) -> str:
    return row["proof"] if row["status"] == "optimal" else row["status"] + (
        f" (gap {row['gap']:.1e})" if row["gap"] is not None else "")


def summary(rows: Sequence[dict], variants: Sequence[str]) -> str:
    lines = []
    for k in sorted({r["segments"] for r in rows}):
        runs = {v: [r for r in rows if r["segments"] == k and r["variant"] == v] for v in variants}
        reference = {r["day"]: r for r in runs.get(REFERENCE, [])}
        lines += [f"\n## K = {k}: {len(runs[variants[0]])} days",
                  f"| variant | median s | p90 s | max s | not proven | median s of {' / '.join(PHASES)} | labels "
                  "median (max) |", "|---|---|---|---|---|---|---|"]
        for v, done in runs.items():
            secs = [r["seconds"] for r in done]
            phases = " / ".join(f"{np.median([r['details'].get(p, 0.0) for r in done]):.2f}" for p in PHASES)
            labels = [r["details"]["max_labels"] for r in done if "max_labels" in r["details"]]
            lines.append(f"| {v} | {np.median(secs):.2f} | {np.percentile(secs, 90):.2f} | {max(secs):.2f} | "
                         f"{sum(r['status'] != 'optimal' for r in done)} | {phases} | "
                         + (f"{np.median(labels):.0f} ({max(labels)})" if labels else "") + " |")
        lines.append(f"\nslowest {SLOWEST_SHOWN} days ({variants[0]}):")
        for r in sorted(runs[variants[0]], key=lambda r: -r["seconds"])[:SLOWEST_SHOWN]:
            ref = reference.get(r["day"])
            lines.append(f"  {r['day']}: {r['seconds']:.2f} s, {path_of(r)}"
                         + (f", textbook {ref['seconds']:.2f} s ({path_of(ref)})" if ref and ref is not r else ""))
        for v in (v for v in variants if v != REFERENCE and reference):
            paired = [(r, reference[r["day"]]) for r in runs[v] if r["day"] in reference]
            ratios = [r["seconds"] / ref["seconds"] for r, ref in paired]
            over = [r["day"] for r, ref in paired if r["seconds"] > GUARD_RATIO * ref["seconds"]]
            dearer = sum(r["status"] == ref["status"] == "optimal"
                         and r["objective_usd"] > ref["objective_usd"] + 1e-4 * abs(r["objective_usd"])
                         for r, ref in paired)
            paths: dict[str, int] = {}
            for r in runs[v]:
                paths[path_of(r)] = paths.get(path_of(r), 0) + 1
            lines.append(f"ratio {v} / textbook: median {np.median(ratios):.3f}, max {max(ratios):.3f}; days above "
                         f"{GUARD_RATIO:g}x: {len(over)}" + (f" ({', '.join(over[:10])})" if over else ""))
            lines.append(f"paths ({v}): " + ", ".join(f"{p} {n}" for p, n in sorted(paths.items(), key=lambda x: -x[1]))
                         + f"; textbook race started on {sum('race_start' in r['details'] for r in runs[v])} days"
                         + f"; above textbook's optimum by > 1e-4 on {dearer} days")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/oracle_speed.py", description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="2048", help="bundled case name or TOML file (default: 2048)")
    parser.add_argument("--days", nargs="+", default=["monthly"], help="'all', 'monthly' (default) or days")
    parser.add_argument("--segments", type=int, nargs="+", default=[12], help="checkpoint segments K (default 12)")
    parser.add_argument("--profiles", default="caiso-2023", help="dataset name or profile CSV (default: %(default)s)")
    parser.add_argument("--time-limit", type=float, default=600.0, help="seconds per solve (default 600)")
    parser.add_argument("--mip-gap", type=float, default=DEFAULT_MIP_GAP)
    parser.add_argument("--variants", default="oracle,textbook", help=f"comma-separated from {', '.join(VARIANTS)}")
    parser.add_argument("--order", choices=("date", "spread"), default="date",
                        help=f"date order, or every {SPREAD_STRIDE}th day first (a partial run covers the year)")
    parser.add_argument("--workers", type=int, default=MAX_WORKERS, help=f"solves at once, at most {MAX_WORKERS}")
    add_backend_arguments(parser)
    parser.add_argument("--out", default="runs/oracle_speed", help="folder of the per-day JSON")
    parser.add_argument("--summarize", metavar="JSON", help="only print the tables of an earlier run's JSON")
    args = parser.parse_args(argv)
    if args.summarize:
        rows = json.loads(Path(args.summarize).read_text())["rows"]
        print(summary(rows, [v for v in VARIANTS if any(r["variant"] == v for r in rows)]))
        return 0
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    require(bool(variants) and all(v in VARIANTS for v in variants), "variants", f"choose from {', '.join(VARIANTS)}")
    require(args.time_limit > 0, "time-limit", "must be > 0")
    require(all(k > 0 for k in args.segments), "segments", "must be positive")
    require(1 <= args.workers <= MAX_WORKERS, "workers", f"must be 1..{MAX_WORKERS}")
    backend = backend_from_args(args, workers=args.workers)
    profiles = load_profiles(args.profiles, renewable_capacity_mw=load_case(args.case).renewable_capacity_mw)
    days = choose_days(args.days, profiles.dates())
    if args.order == "spread":
        days = [d for offset in range(SPREAD_STRIDE) for d in days[offset::SPREAD_STRIDE]]
    out = Path(args.out) / f"{time.strftime('%Y%m%dT%H%M%S')}_K{'-'.join(map(str, args.segments))}_{len(days)}days.json"
    header = {"cpus": os.cpu_count(), "case": args.case, "profiles": args.profiles, "time_limit_s": args.time_limit,
              "mip_gap": args.mip_gap, "workers": args.workers, "backend": args.backend,
              "load_average_at_start": os.getloadavg()[0]}
    print(f"# {header}; {len(days)} days, K {args.segments}", flush=True)
    tasks = [(args.case, d, k, args.time_limit, args.mip_gap, variants) for k in args.segments for d in days]
    rows: list[dict] = []
    with open_pool(backend) as pool:
        shared = pool.put(profiles)  # the year's profiles: once into Ray's object store, not with every task
        for day_rows in pool.map(solve_day, [(shared, task) for task in tasks]):
            rows += day_rows
            print("  " + "; ".join(f"{r['day']} K={r['segments']} {r['variant']} {r['seconds']:.2f} s {path_of(r)}"
                                   for r in day_rows), flush=True)
            atomic_write_text(out, dumps_json({**header, "rows": rows}, indent=1))
    header["load_average_at_end"] = os.getloadavg()[0]
    atomic_write_text(out, dumps_json({**header, "rows": rows}, indent=1))
    print(summary(rows, variants))
    print(f"\nrows: {out}; load average at end {header['load_average_at_end']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
