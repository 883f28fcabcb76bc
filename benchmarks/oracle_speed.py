"""Oracle speed: seconds to proven optimality on the 2048 case, fast build vs textbook build, same run.

For each K (checkpoint segments per job) the reference day is solved with the ``fast`` oracle (joint
states + Lagrangian reduction, the default), optionally with the fast model in one piece
(``fast-plain``), and with the ``textbook`` build, one after the other in the same process and with the
same MIP start. Seconds are wall-clock seconds of ``OracleModel(...).solve()`` plus the model build
(build + solve). A run that hits the time limit is shown with ``>`` and its gap.

    python benchmarks/oracle_speed.py                       # K = 4, 12, 24, 48, 96; 120 s limit
    python benchmarks/oracle_speed.py --ks 12 24 --variants fast,fast-plain,textbook --markdown
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aidc_env.case import build_instance  # noqa: E402
from aidc_env.errors import require, run_cli  # noqa: E402
from oracle.constants import DEFAULT_MIP_GAP  # noqa: E402

DEFAULT_KS = (4, 12, 24, 48, 96)
DEFAULT_TIME_LIMIT_S = 120.0
VARIANTS = {
    "fast": {"formulation": "fast", "reduce": True},
    "fast-bnb": {"formulation": "fast", "reduce": True, "labeling": False},
    "fast-plain": {"formulation": "fast", "reduce": False},
    "textbook": {"formulation": "textbook", "reduce": False},
}
REFERENCE_VARIANT = "textbook"


@dataclass(frozen=True)
class Run:
    variant: str
    segments: int
    status: str
    seconds: float
    gap: float | None
    objective_usd: float | None


def run_once(case: str, day: str | None, segments: int, variant: str, time_limit_s: float, mip_gap: float) -> Run:
    from oracle.model import OracleModel

    inst = build_instance(case, day=day, segments=segments)
    tick = time.perf_counter()
    oracle = OracleModel(inst, **VARIANTS[variant])
    result = oracle.solve(time_limit_s=time_limit_s, mip_gap=mip_gap)
    seconds = time.perf_counter() - tick
    return Run(variant, segments, result.status, seconds, result.gap, result.objective_usd)


def cell(run: Run) -> tuple[str, str]:
    seconds = f"{run.seconds:.1f}" if run.status == "optimal" else f">{run.seconds:.0f}"
    gap = "-" if run.gap is None else f"{run.gap:.1e}"
    return seconds, gap


def table(runs: Sequence[Run], variants: Sequence[str], markdown: bool) -> str:
    header = ["K"]
    for v in variants:
        header += [f"{v} s", f"{v} gap"]
    others = [v for v in variants if v != REFERENCE_VARIANT]
    if REFERENCE_VARIANT in variants:
        header += [f"{REFERENCE_VARIANT} / {v}" for v in others]
    rows = []
    for k in sorted({r.segments for r in runs}):
        by = {r.variant: r for r in runs if r.segments == k}
        row = [str(k)]
        for v in variants:
            row += list(cell(by[v]))
        if REFERENCE_VARIANT in variants:
            ref = by[REFERENCE_VARIANT]
            for v in others:
                ratio = ref.seconds / by[v].seconds
                if ref.status != "optimal" and by[v].status != "optimal":
                    row.append("both at the limit")
                else:
                    bound = "≥ " if ref.status != "optimal" else ""
                    row.append(f"{bound}{ratio:.1f}×")
        rows.append(row)
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=True)]
    return "\n".join("  ".join(x.rjust(w) for x, w in zip(line, widths, strict=True)) for line in [header, *rows])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/oracle_speed.py",
        description="Seconds to proven optimality (gap <= --mip-gap) of the oracle on a case, for several numbers "
        "of checkpoint segments K, fast build against the textbook build of the same model in the same run.")
    parser.add_argument("--case", default="2048", help="bundled case name or TOML file (default: 2048)")
    parser.add_argument("--day", help="day YYYY-MM-DD (default: the case's reference day)")
    parser.add_argument("--ks", type=int, nargs="+", default=list(DEFAULT_KS),
                        help=f"segments per job to run (default: {' '.join(map(str, DEFAULT_KS))})")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S,
                        help=f"time limit per solve in seconds (default {DEFAULT_TIME_LIMIT_S:g})")
    parser.add_argument("--mip-gap", type=float, default=DEFAULT_MIP_GAP,
                        help=f"relative gap counted as proven optimal (default {DEFAULT_MIP_GAP:g})")
    parser.add_argument("--variants", default="fast,textbook",
                        help=f"comma-separated, from {', '.join(VARIANTS)} (default: fast,textbook)")
    parser.add_argument("--markdown", action="store_true", help="print the table in markdown")
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    require(bool(variants) and all(v in VARIANTS for v in variants), "variants",
            f"choose from {', '.join(VARIANTS)}")
    require(args.time_limit > 0, "time-limit", "must be > 0")
    require(all(k > 0 for k in args.ks), "ks", "must be positive")
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}; case {args.case}, time limit {args.time_limit:g} s, gap {args.mip_gap:g}",
          flush=True)
    runs = []
    for k in args.ks:
        for variant in variants:
            run = run_once(args.case, args.day, k, variant, args.time_limit, args.mip_gap)
            runs.append(run)
            print(f"# K={k} {variant}: {run.status} in {run.seconds:.1f} s, objective {run.objective_usd}, "
                  f"gap {run.gap}", flush=True)
    print(table(runs, variants, args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
