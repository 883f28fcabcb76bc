"""The fleet study (docs/fleet.md): the saving of the fleet oracle against fixed as the fleet varies.

    python -m experiments.fleet_study [--profiles CSV] [--days N] [--time-limit S] [--out DIR | --update-docs]

On held-out days (``--days`` of them, evenly spread) the fleet case is solved by the decomposition and compared with the
fixed schedule (saving = fixed objective − oracle objective, both the simulator's replays, split into the operating cost
saved and the idle-GPU value gained) along three sweeps, one at a time: (a) the jobs in the pool (:func:`scaled_fleet`),
(b) the inference GPUs × a factor, (c) the $ value of an idle GPU-hour. Writes ``fleet_study.json`` (every solve),
``fleet_study.md`` (the table of means) and ``fleet_study.png`` into ``--out`` (default a new numbered folder
runs/fleet_study_N), atomically; ``--update-docs`` rewrites the committed ones.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.days import held_out_starts, spread
from aidc_env.baselines import fixed_schedule
from aidc_env.case import build_instances, load_case
from aidc_env import limits
from aidc_env.errors import CliParser, require_number, run_cli
from aidc_env.instance import Instance
from aidc_env.io import atomic_write_text, write_json
from experiments.runs import result_folder
from aidc_env.profiles import load_profiles
from aidc_env.simulator import simulate
from oracle import solve

DEFAULT_PROFILES = "caiso-2023"
JOB_COUNTS = (2, 4, 8, 12, 16)
"""Sweep (a): jobs in the pool (12 = the case; 16 cycles the case's first four jobs again)."""
INFERENCE_FACTORS = (0.0, 0.5, 1.0, 1.25)
"""Sweep (b): the inference GPUs × factor (1 = the case's peak; beyond 1.25 fixed no longer fits the pool)."""
IDLE_VALUES = (0.0, 0.25, 0.5, 1.0, 2.0)
"""Sweep (c): $ per idle GPU-hour (1 = the case's; 0 = the energy dispatch alone)."""
DEFAULT_DAYS = 4
DEFAULT_TIME_LIMIT_S = 120.0


def scaled_fleet(base: Instance, n_jobs: int, pool_gpus: int | None = None) -> Instance:
    """J jobs cycled from ``base`` (copies renamed ``<name>#2``, ...); the pool, inference and renewable plant scaled by
    the jobs' baseline GPUs against the base's (or to ``pool_gpus``). Also ``benchmarks/oracle_days.py --jobs``."""
    jobs = []
    for i in range(n_jobs):
        job = base.jobs[i % len(base.jobs)]
        copy = i // len(base.jobs)
        jobs.append(job if copy == 0 else dataclasses.replace(job, name=f"{job.name}#{copy + 1}"))
    need = sum(int(job.gpus_by_choice[job.baseline_mode]) for job in jobs)
    base_need = sum(int(job.gpus_by_choice[job.baseline_mode]) for job in base.jobs)
    factor = (pool_gpus / base.n_gpus) if pool_gpus else need / base_need
    n_gpus = pool_gpus or int(math.ceil(base.n_gpus * factor))
    inference = tuple(dataclasses.replace(s, gpus=np.ceil(s.gpus * factor).astype(np.int64),
                                          peak_gpus=int(math.ceil(s.peak_gpus * factor))) for s in base.inference)
    capacity = None if base.renewable_capacity_mw is None else base.renewable_capacity_mw * factor
    return dataclasses.replace(base, jobs=tuple(jobs), n_gpus=n_gpus, inference=inference,
                               renewable_capacity_mw=capacity)


def with_inference(base: Instance, factor: float) -> Instance:
    """The instance with every inference service's GPUs (and peak) × ``factor`` (rounded up)."""
    inference = tuple(dataclasses.replace(s, gpus=np.ceil(s.gpus * factor).astype(np.int64),
                                          peak_gpus=int(math.ceil(s.peak_gpus * factor))) for s in base.inference)
    return dataclasses.replace(base, inference=inference)


def variants(base: Instance) -> list[tuple[str, float, Instance]]:
    """(sweep, value, instance) of the three sweeps on one day's instance."""
    out = [("jobs", float(n), scaled_fleet(base, n)) for n in JOB_COUNTS]
    out += [("inference_share", float(f * max((s.peak_gpus for s in base.inference), default=0) / base.n_gpus),
             with_inference(base, f)) for f in INFERENCE_FACTORS]
    out += [("idle_value", v, dataclasses.replace(base, idle_value_usd_per_gpu_hour=float(v))) for v in IDLE_VALUES]
    return out


def solve_one(inst: Instance, time_limit_s: float) -> dict[str, Any]:
    """The fleet oracle and fixed on one instance: objectives, the saving and its two parts."""
    tick = time.perf_counter()
    result = solve(inst, method="decomposition", time_limit_s=time_limit_s)
    seconds = time.perf_counter() - tick
    fixed = simulate(inst, fixed_schedule(inst)).metrics
    row: dict[str, Any] = {"status": result.status, "seconds": seconds, "gap": result.gap, "bound_usd": result.best_bound_usd,
                           "fixed_usd": fixed.objective_usd, "fixed_feasible": bool(fixed.feasible)}
    m = result.metrics
    if m is None:
        return {**row, "oracle_usd": None, "saving_usd": None, "energy_saving_usd": None, "idle_gain_usd": None}
    return {**row, "oracle_usd": m.objective_usd, "saving_usd": fixed.objective_usd - m.objective_usd,
            "energy_saving_usd": fixed.operating_cost_usd - m.operating_cost_usd,
            "idle_gain_usd": m.idle_value_usd - fixed.idle_value_usd, "oracle_feasible": bool(m.feasible)}


def run(profiles: str | Path, n_days: int, time_limit_s: float, log=print) -> dict[str, Any]:
    case = load_case("fleet")
    source = load_profiles(profiles, renewable_capacity_mw=case.renewable_capacity_mw)
    days = spread(held_out_starts(source.dates()), n_days)
    instances = build_instances(case, days, source)
    rows = []
    for day in days:
        for sweep, value, inst in variants(instances[day]):
            row = {"day": day, "sweep": sweep, "value": value, "jobs": len(inst.jobs), "n_gpus": inst.n_gpus,
                   **solve_one(inst, time_limit_s)}
            rows.append(row)
            log(f"{day} {sweep}={value:g}: {row['status']} gap {row['gap']:.1e} saving ${row['saving_usd'] or 0:,.0f} "
                f"({row['seconds']:.1f} s)")
    return {"case": "fleet", "profiles": str(source.source), "days": days, "time_limit_s": time_limit_s, "rows": rows}


def summary_table(record: dict[str, Any]) -> str:
    """Markdown: per sweep and value, the mean (and min-max over days) saving and its parts, the largest gap."""
    lines = ["| sweep | value | days | mean saving vs fixed | min-max | energy part | idle-value part | max gap | "
             "max seconds |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows = record["rows"]
    for sweep in ("jobs", "inference_share", "idle_value"):
        for value in sorted({r["value"] for r in rows if r["sweep"] == sweep}):
            sel = [r for r in rows if r["sweep"] == sweep and r["value"] == value and r["saving_usd"] is not None]
            if not sel:
                continue
            s = np.array([r["saving_usd"] for r in sel])
            label = {"jobs": f"{value:.0f}", "inference_share": f"{value:.1%}", "idle_value": f"${value:g}/GPU-h"}[sweep]
            lines.append(f"| {sweep} | {label} | {len(sel)} | ${s.mean():,.0f} | ${s.min():,.0f}-${s.max():,.0f} | "
                         f"${np.mean([r['energy_saving_usd'] for r in sel]):,.0f} | "
                         f"${np.mean([r['idle_gain_usd'] for r in sel]):,.0f} | "
                         f"{max(r['gap'] for r in sel):.1e} | {max(r['seconds'] for r in sel):.1f} |")
    return "\n".join(lines) + "\n"


def plot(record: dict[str, Any], path: Path) -> None:
    from experiments.plots import plt, save_figure  # matplotlib on its Agg backend

    rows = [r for r in record["rows"] if r["saving_usd"] is not None]
    titles = {"jobs": ("(a) jobs in the pool", "jobs"), "inference_share": ("(b) inference share", "inference peak / pool"),
              "idle_value": ("(c) idle-GPU value", "$ per idle GPU-hour")}
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=False)
    for ax, (sweep, (title, xlabel)) in zip(axes, titles.items(), strict=True):
        values = sorted({r["value"] for r in rows if r["sweep"] == sweep})
        for part, style in (("saving_usd", "o-"), ("energy_saving_usd", "s--"), ("idle_gain_usd", "^:")):
            means = [np.mean([r[part] for r in rows if r["sweep"] == sweep and r["value"] == v]) for v in values]
            ax.plot(values, means, style, label={"saving_usd": "saving", "energy_saving_usd": "operating cost part",
                                                 "idle_gain_usd": "idle-value part"}[part])
        for day in record["days"]:
            pts = [(r["value"], r["saving_usd"]) for r in rows if r["sweep"] == sweep and r["day"] == day]
            ax.plot(*zip(*pts), color="grey", alpha=0.3, lw=0.8)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("oracle saving vs fixed ($/day)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Fleet oracle vs fixed, mean of {len(record['days'])} held-out days (grey: each day)")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


DOCS_FOLDER = "docs/figures"
"""Where ``--update-docs`` writes the study (the committed files docs/fleet.md shows)."""
RESULTS = ("fleet_study.json", "fleet_study.md", "fleet_study.png")
"""What a run writes to its folder."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(description="The fleet study: the fleet oracle's saving against fixed as the number of jobs, "
                       "the inference share and the idle-GPU value vary, on held-out days (docs/fleet.md).")
    parser.add_argument("--profiles", default=DEFAULT_PROFILES,
                        help="dataset name or canonical hourly CSV (default: %(default)s)")
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS, help="held-out days, evenly spread")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S, help="seconds per oracle solve")
    parser.add_argument("--out", help="folder of fleet_study.json, .md and .png (default runs/fleet_study_N, the "
                        "next free N; one holding an earlier run's results is refused)")
    parser.add_argument("--update-docs", action="store_true",
                        help=f"write them to {DOCS_FOLDER} (or --out), replacing the committed ones")
    args = parser.parse_args(argv)
    require_number(args.days, "days", 1, limits.MAX_DAYS, integer=True)
    require_number(args.time_limit, "time-limit", 0.0, limits.MAX_TIME_LIMIT_S, low_open=True)
    out = result_folder(args.out or (DOCS_FOLDER if args.update_docs else None), "runs", "fleet_study", RESULTS,
                        replace=args.update_docs)
    record = run(args.profiles, args.days, args.time_limit, log=lambda s: print(s, flush=True))
    write_json(out / "fleet_study.json", record)
    table = summary_table(record)
    atomic_write_text(out / "fleet_study.md", table)
    plot(record, out / "fleet_study.png")
    print(table)
    print(f"wrote {out}/fleet_study.json, fleet_study.md, fleet_study.png")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
