"""Oracle speed over days: seconds to a proven optimum, default oracle against the textbook MILP, same run.

For each K (checkpoint segments per job) and each chosen day, the day is solved with the default oracle
(``fast``: joint states, label-setting proof, branch and bound as fallback) and with the plain textbook
MILP (``formulation="textbook"``: one binary per job, mode and segment, HiGHS, gap 1e-4), one after the
other in the same worker process. Seconds are wall-clock seconds of ``OracleModel(...)`` + ``solve()``.
Per K it prints the median, p90 and max seconds of each, the five slowest days with the path that proved
them, the days not proven and the ratio oracle / textbook; the per-day rows go to ``runs/`` as CSV and JSON
(written atomically).

    python benchmarks/oracle_speed.py --days all --segments 12            # every day of the profile source
    python benchmarks/oracle_speed.py --days monthly --segments 24 48 96   # the 15th of each month
    python benchmarks/oracle_speed.py --days 2023-01-14 2023-07-25 --segments 12 --workers 1

Profiles: ``--profiles NAME|CSV``; by default the packaged CAISO 2023 year (:data:`YEAR`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aidc_env.case import load_case  # noqa: E402
from aidc_env.errors import require, run_cli  # noqa: E402
from aidc_env.io import atomic_write_text  # noqa: E402
from aidc_env.parallel import add_backend_arguments, backend_from_args, open_pool  # noqa: E402
from aidc_env.profiles import load_profiles  # noqa: E402
from oracle.constants import DEFAULT_MIP_GAP  # noqa: E402

YEAR = "caiso-2023"
"""The full CAISO 2023 year (a packaged dataset, :mod:`aidc_env.datasets`)."""
DEFAULT_SEGMENTS = (12,)
DEFAULT_TIME_LIMIT_S = 600.0
MONTHLY_DAY = 15
"""``--days monthly``: this day of each month (or the first complete day after it)."""
MAX_WORKERS = 2
STALL_LABELS = 50
"""Label budget of the forced-stall variants: every day's search gives up at once, so the day rests on the guard
(the textbook race, with beam + branch and bound on the fast model) or, without it, on beam + branch and bound."""
SPREAD_STRIDE = 16
"""``--order spread``: every 16th day first, then the next offset, ... (a partial run covers the whole year)."""
VARIANTS = {
    "oracle": {"formulation": "fast"},
    "oracle-noguard": {"formulation": "fast", "race_after_s": None},
    "oracle-lp": {"formulation": "fast", "prices": "lp"},
    "oracle-fallback": {"formulation": "fast", "max_labels": STALL_LABELS},
    "oracle-fallback-noguard": {"formulation": "fast", "max_labels": STALL_LABELS, "race_after_s": None},
    "textbook": {"formulation": "textbook", "reduce": False},
}
REFERENCE_VARIANT = "textbook"
SLOWEST_SHOWN = 5
GUARD_RATIO = 1.5
"""The oracle should never take more than this × the textbook MILP's seconds on the same day."""


@dataclass(frozen=True)
class Row:
    day: str
    segments: int
    variant: str
    status: str
    proof: str
    seconds: float
    objective_usd: float | None
    best_bound_usd: float | None
    gap: float | None
    dual_s: float | None = None
    """Seconds of the Lagrangian prices (cutting planes), of the LP relaxation, of the network and completion
    tables, of the label searches, of building the Pyomo model and of branch and bound (OracleResult.details)."""
    lp_s: float | None = None
    tables_s: float | None = None
    labels_s: float | None = None
    pyomo_s: float | None = None
    bnb_s: float | None = None
    searches: int | None = None
    max_labels: int | None = None
    beam_usd: float | None = None
    race_start_s: float | None = None
    """Seconds into the solve at which the textbook race started (None: it did not), and its child's seconds."""
    textbook_s: float | None = None


DETAIL_FIELDS = {"dual_s": "dual", "lp_s": "lp", "tables_s": "tables", "labels_s": "labels", "pyomo_s": "pyomo",
                 "bnb_s": "bnb", "searches": "searches", "max_labels": "max_labels", "beam_usd": "beam_usd",
                 "race_start_s": "race_start", "textbook_s": "textbook"}

def solve_day(profiles, task: tuple[str, str, int, float, float, tuple[str, ...]]) -> list[Row]:
    """Every variant on one (day, K), one after the other in this worker (``profiles``: shared, read-only)."""
    from aidc_env.case import build_instance
    from oracle.model import OracleModel

    case, day, segments, time_limit_s, mip_gap, variants = task
    inst = build_instance(case, day=day, profiles=profiles, segments=segments)
    rows = []
    for variant in variants:
        tick = time.perf_counter()
        result = OracleModel(inst, **VARIANTS[variant]).solve(time_limit_s=time_limit_s, mip_gap=mip_gap)
        seconds = time.perf_counter() - tick
        details = {field: result.details.get(key) for field, key in DETAIL_FIELDS.items()}
        rows.append(Row(day, segments, variant, result.status, result.proof, seconds, result.objective_usd,
                        result.best_bound_usd, result.gap, **details))
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
                later = [d for d in days if int(d[8:]) >= MONTHLY_DAY]
                chosen.add(later[0] if later else days[-1])
        else:
            require(item in set(available), "days", f"{item} is not a complete day of the profile source")
            chosen.add(item)
    return sorted(chosen)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = q * (len(ordered) - 1)
    low = int(math.floor(position))
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _path(row: Row) -> str:
    return row.proof if row.status == "optimal" else f"{row.status} (gap {row.gap:.1e})" if row.gap is not None \
        else row.status


def _median_of(runs: Sequence[Row], name: str) -> str:
    """Median of a time split over the runs (a split that did not happen counts 0); '-' if never recorded."""
    if all(getattr(r, name) is None for r in runs) or all(r.variant == REFERENCE_VARIANT for r in runs):
        return "-"
    return f"{percentile([getattr(r, name) or 0.0 for r in runs], 0.5):.2f}"


def summary(rows: Sequence[Row], variants: Sequence[str]) -> str:
    lines = []
    for k in sorted({r.segments for r in rows}):
        by_variant = {v: [r for r in rows if r.segments == k and r.variant == v] for v in variants}
        lines.append(f"\n## K = {k}: {len(by_variant[variants[0]])} days")
        lines.append("| variant | median s | p90 s | max s | not proven | median s of dual / lp / tables / labels / "
                     "pyomo / bnb | labels median (max) |")
        lines.append("|---|---|---|---|---|---|---|")
        for v, runs in by_variant.items():
            secs = [r.seconds for r in runs]
            splits = " / ".join(_median_of(runs, f) for f in ("dual_s", "lp_s", "tables_s", "labels_s", "pyomo_s",
                                                              "bnb_s"))
            labels = [r.max_labels for r in runs if r.max_labels is not None]
            label_text = f"{percentile(labels, 0.5):.0f} ({max(labels)})" if labels else ""
            lines.append(f"| {v} | {percentile(secs, 0.5):.2f} | {percentile(secs, 0.9):.2f} | {max(secs):.2f} | "
                         f"{sum(r.status != 'optimal' for r in runs)} | {splits} | {label_text} |")
        oracle_runs = by_variant[variants[0]]
        lines.append(f"\nslowest {SLOWEST_SHOWN} days ({variants[0]}):")
        reference = {r.day: r for r in by_variant.get(REFERENCE_VARIANT, [])}
        for r in sorted(oracle_runs, key=lambda r: -r.seconds)[:SLOWEST_SHOWN]:
            ref = reference.get(r.day)
            ref_text = f", textbook {ref.seconds:.2f} s ({_path(ref)})" if ref is not None and ref is not r else ""
            lines.append(f"  {r.day}: {r.seconds:.2f} s, {_path(r)}{ref_text}")
        for variant in (v for v in variants if v != REFERENCE_VARIANT and reference):
            oracle_runs = by_variant[variant]
            ratios = [r.seconds / reference[r.day].seconds for r in oracle_runs if r.day in reference]
            paths: dict[str, int] = {}
            for r in oracle_runs:
                paths[_path(r)] = paths.get(_path(r), 0) + 1
            over = [r.day for r in oracle_runs
                    if r.day in reference and r.seconds > GUARD_RATIO * reference[r.day].seconds]
            lines.append(f"ratio {variant} / textbook: median {percentile(ratios, 0.5):.3f}, max "
                         f"{max(ratios):.3f}; days above {GUARD_RATIO:g}x: {len(over)}"
                         + (f" ({', '.join(over[:10])})" if over else ""))
            mismatched = [r.day for r in oracle_runs if r.day in reference and r.status == "optimal"
                          and reference[r.day].status == "optimal"
                          and r.objective_usd > reference[r.day].objective_usd + 1e-4 * abs(r.objective_usd)]
            counted = sorted(paths.items(), key=lambda x: -x[1])
            raced = sum(r.race_start_s is not None for r in oracle_runs)
            lines.append(f"paths ({variant}): " + ", ".join(f"{p} {n}" for p, n in counted)
                         + f"; textbook race started on {raced} days"
                         + f"; oracle above textbook's optimum by > 1e-4 on {len(mismatched)} days")
    return "\n".join(lines)


def write_atomically(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def write_rows(rows: Sequence[Row], out: Path, header: dict) -> None:
    fields = list(Row.__dataclass_fields__)
    csv_lines = [",".join(fields)]
    for r in rows:
        values = asdict(r)
        csv_lines.append(",".join("" if values[f] is None else repr(values[f]) if isinstance(values[f], float)
                                  else str(values[f]) for f in fields))
    write_atomically(out.with_suffix(".csv"), "\n".join(csv_lines) + "\n")
    clean = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(r).items()}
             for r in rows]
    write_atomically(out.with_suffix(".json"), json.dumps({**header, "rows": clean}, indent=1, allow_nan=False))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/oracle_speed.py",
        description="Seconds to proven optimality (gap <= --mip-gap) of the default oracle over days, against the "
        "textbook MILP of the same day in the same run.")
    parser.add_argument("--case", default="2048", help="bundled case name or TOML file (default: 2048)")
    parser.add_argument("--days", nargs="+", default=["monthly"],
                        help="'all', 'monthly' (the 15th of each month, default) or days YYYY-MM-DD")
    parser.add_argument("--segments", type=int, nargs="+", default=list(DEFAULT_SEGMENTS),
                        help="checkpoint segments per job K (default: 12)")
    parser.add_argument("--profiles", default=YEAR, help="dataset name or profile CSV (default: %(default)s)")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S,
                        help=f"time limit per solve in seconds (default {DEFAULT_TIME_LIMIT_S:g})")
    parser.add_argument("--mip-gap", type=float, default=DEFAULT_MIP_GAP,
                        help=f"relative gap counted as proven optimal (default {DEFAULT_MIP_GAP:g})")
    parser.add_argument("--variants", default="oracle,textbook",
                        help="comma-separated from oracle, oracle-noguard (never races the textbook MILP), "
                             "oracle-lp (token prices from the LP relaxation through "
                             "Pyomo, as before issue 11's second round), oracle-fallback (a label budget of 50, so "
                             "that the search gives up at once: the guard's path, the textbook race against beam "
                             "incumbent + branch and bound), oracle-fallback-noguard (the same without the race), "
                             "textbook")
    parser.add_argument("--order", choices=("date", "spread"), default="date",
                        help=f"solve the days in date order, or spread: every {SPREAD_STRIDE}th day first, then the "
                             "next offset (an interrupted run then covers the whole year)")
    parser.add_argument("--workers", type=int, default=MAX_WORKERS,
                        help=f"solves at once (processes or Ray tasks), at most {MAX_WORKERS}")
    add_backend_arguments(parser)
    parser.add_argument("--out", default="runs/oracle_speed", help="folder of the per-day CSV/JSON")
    parser.add_argument("--summarize", metavar="JSON", help="only print the tables of an earlier (or interrupted) "
                                                            "run's JSON")
    args = parser.parse_args(argv)
    if args.summarize:
        saved = json.loads(Path(args.summarize).read_text())
        rows = [Row(**r) for r in saved["rows"]]
        present = [v for v in VARIANTS if any(r.variant == v for r in rows)]
        print(summary(rows, present))
        return 0
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    require(bool(variants) and all(v in VARIANTS for v in variants), "variants", f"choose from {', '.join(VARIANTS)}")
    require(args.time_limit > 0, "time-limit", "must be > 0")
    require(all(k > 0 for k in args.segments), "segments", "must be positive")
    require(1 <= args.workers <= MAX_WORKERS, "workers", f"must be 1..{MAX_WORKERS}")
    backend = backend_from_args(args, workers=args.workers)
    profiles_path = args.profiles
    profiles = load_profiles(profiles_path, renewable_capacity_mw=load_case(args.case).renewable_capacity_mw)
    days = choose_days(args.days, profiles.dates())
    if args.order == "spread":
        days = [d for offset in range(SPREAD_STRIDE) for d in days[offset::SPREAD_STRIDE]]
    stamp = time.strftime("%Y%m%dT%H%M%S")
    out = Path(args.out) / f"{stamp}_K{'-'.join(map(str, args.segments))}_{len(days)}days"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    header = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
              "python": platform.python_version(), "case": args.case, "profiles": profiles_path or "bundled",
              "time_limit_s": args.time_limit, "mip_gap": args.mip_gap, "workers": args.workers,
              "backend": args.backend,
              "load_average_at_start": load}
    print(f"# {header['machine']}, Python {header['python']}, load average {load:.1f}; case {args.case}, profiles "
          f"{header['profiles']}, {len(days)} days, K {args.segments}, limit {args.time_limit:g} s, gap "
          f"{args.mip_gap:g}, {args.workers} workers ({args.backend})", flush=True)
    tasks = [(args.case, d, k, args.time_limit, args.mip_gap, variants) for k in args.segments for d in days]
    rows: list[Row] = []
    tick = time.perf_counter()

    def take(day_rows: list[Row]) -> None:
        rows.extend(day_rows)
        print("  " + "; ".join(f"{r.day} K={r.segments} {r.variant} {r.seconds:.2f} s {_path(r)}" for r in day_rows),
              flush=True)
        write_rows(rows, out, header)  # after every day: an interrupted run keeps what it finished

    with open_pool(backend) as pool:
        shared = pool.put(profiles)  # the year's profiles: once into Ray's object store, not with every task
        for day_rows in pool.map(solve_day, [(shared, task) for task in tasks]):
            take(day_rows)
    header["wall_seconds"] = time.perf_counter() - tick
    header["load_average_at_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    write_rows(rows, out, header)
    print(summary(rows, variants))
    print(f"\nrows: {out.with_suffix('.csv')}, {out.with_suffix('.json')}; load average at end "
          f"{header['load_average_at_end']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
