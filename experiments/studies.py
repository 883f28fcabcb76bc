"""The research's studies, one command each, side by side with the seed's numbers.

    python -m experiments.studies headline|checkpoints|gpus|renewable|flexibility|days [--out DIR] [--workers N]
    python evaluate.py --study checkpoints     # the same

Each study solves the oracle over a grid (in parallel with ``--workers``), scores every schedule with the simulator, and
writes ``<study>.csv``, ``<study>.png`` and ``<study>.md`` (its markdown table) to ``--out`` (default a new numbered
folder runs/studies/<study>_N; a folder holding an earlier run of the study is refused). Rows already solved are kept in
``<study>.partial.csv`` while the study runs (and after a Ctrl-C). ``--update-docs`` also rewrites the table between
``<!-- study:NAME days=KEY -->`` and ``<!-- /study:NAME -->`` of docs/results.md (``--results``) and the study's CSV and
PNG in docs/figures, only if the section's day set (KEY) is the run's.

The flexibility study compares five load models: (a) fixed continuous; (b) pause/resume at checkpoints in one fixed mode
per job (:func:`restrict_to_baseline_mode`); (c) 3D modes without pausing; (d) checkpoint-aware 3D dispatch (the
oracle); (e) the "continuously adjustable power" model the research criticises (:func:`continuous_power_optimum`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo
from tqdm import tqdm

from aidc_env.baselines import fixed_schedule
from aidc_env import limits
from aidc_env.case import Case, add_case_arguments, build_instance, build_instances, case_overrides, load_case
from aidc_env.errors import EXIT_INTERRUPTED, CliParser, InputError, require, require_number, run_cli
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.io import atomic_path, atomic_write_text, check_output_file, check_output_folder
from aidc_env.parallel import Backend, add_backend_arguments, backend_from_args, open_pool
from aidc_env.profiles import load_profiles
from aidc_env.simulator import energy_accounting, facility_load_mw, simulate
from experiments.plots import plot_dispatch, plot_mode_timeline, plot_study
from experiments.runs import RowsOnDisk, result_folder, update_docs_section

STUDIES = ("headline", "checkpoints", "gpus", "renewable", "flexibility", "days")
CHECKPOINT_GRID = (1, 2, 3, 4, 6, 8, 12, 24, 48, 96)
GPU_GRID = tuple(range(768, 2048 + 1, 128))
RENEWABLE_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)


@dataclass(frozen=True)
class SeedFigures:
    """Numbers reported by the research this package reproduces that each study is compared with."""

    cost_reduction: float = -0.2002
    fixed_curtailment_mwh: float = 1.077
    dispatch_curtailment_mwh: float = 0.014
    modes_activated: tuple[int, int] = (4, 3)
    final_checkpoint_step_gain: float = 0.0151
    checkpoints_capturing_most: int = 12
    infeasible_gpus: tuple[int, int] = (768, 1152)
    feasible_from_gpus: int = 1280
    high_ratio: float = 1.5
    high_ratio_green_share: float = 0.8914
    high_ratio_curtailment_mwh: float = 2.127


SEED = SeedFigures()


# ----------------------------------------------------------------------------------- solving


@dataclass(frozen=True)
class Point:
    """One oracle solve of a study grid: its label and its instance."""

    label: dict[str, Any]
    inst: Instance
    allow_pause: bool = True


def solve_chunk(points: Sequence[Point], time_limit_s: float) -> list[dict[str, Any]]:
    """Oracle on a run of points with one model: built once, re-priced in place where the structure allows (days,
    prices, renewable ratio, tranches) and rebuilt only where it changes (K, GPU pool, modes)."""
    return list(iter_solve_chunk(points, time_limit_s))


def iter_solve_chunk(points: Sequence[Point], time_limit_s: float) -> Iterator[dict[str, Any]]:
    """:func:`solve_chunk`, one row at a time."""
    from oracle import OracleModel

    model = None
    for point in points:
        if model is None or model.allow_pause != point.allow_pause:
            model = OracleModel(point.inst, allow_pause=point.allow_pause)
        else:
            model.update(point.inst)
        result = model.solve(time_limit_s=time_limit_s)
        row: dict[str, Any] = {**point.label, "status": result.status, "proof": result.proof, "gap": result.gap,
                               "build_seconds": result.build_seconds, "solve_seconds": result.solve_seconds,
                               "reason": result.reason or ""}
        if result.schedule is not None:
            m = simulate(point.inst, result.schedule).metrics
            row.update(_metric_columns(m))
            row["feasible"] = m.tranches_met
            row["schedule"] = json.dumps(result.schedule)
        else:
            row["feasible"] = False
        yield row


ENERGY_COLUMNS = ("operating_cost_usd", "grid_cost_usd", "grid_energy_mwh", "curtailment_mwh", "green_share",
                  "load_energy_mwh")
"""The simulator's figures each study row carries (named as :class:`~aidc_env.simulator.Metrics`' fields)."""


def _metric_columns(m) -> dict[str, Any]:
    return {**{name: getattr(m, name) for name in ENERGY_COLUMNS},
            "modes_used": "+".join(str(j.modes_used) for j in m.jobs), "restarts": sum(j.restarts for j in m.jobs)}


CHUNKS_PER_WORKER = 8
"""Each worker's share of a sweep is cut into this many contiguous chunks: each chunk reuses one model, and the progress
bar moves as chunks finish."""


def solve_all(points: Sequence[Point], backend: Backend | int, time_limit_s: float, desc: str,
              on_rows: Callable[[list[dict[str, Any]]], Any] | None = None) -> pd.DataFrame:
    """Solve every point; ``backend``'s workers (or that many local processes) take contiguous chunks, each reusing one
    model. The chunks depend on the number of workers only, not on the backend.

    ``on_rows`` receives the rows of each finished chunk (e.g. :class:`RowsOnDisk` keeps them on disk).
    """
    backend = Backend.of(backend)
    workers = max(1, min(backend.workers, len(points)))
    n_chunks = min(len(points), workers * CHUNKS_PER_WORKER)
    bounds = np.linspace(0, len(points), n_chunks + 1).round().astype(int)
    chunks = [list(points[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    rows: list[dict[str, Any]] = []
    with tqdm(total=len(points), desc=desc, unit="solve") as bar, contextlib.ExitStack() as stack:
        if workers == 1 and backend.name == "process":  # one model for every point, each row kept as it is solved
            finished = ([row] for row in iter_solve_chunk(points, time_limit_s))
        else:
            pool = stack.enter_context(open_pool(dataclasses.replace(backend, workers=workers)))
            finished = pool.map(solve_chunk, [(chunk, time_limit_s) for chunk in chunks])
        for chunk_rows in finished:
            rows += chunk_rows
            bar.update(len(chunk_rows))
            if on_rows is not None:
                on_rows(chunk_rows)
    return pd.DataFrame(rows)


def fixed_row(inst: Instance, label: dict[str, Any]) -> dict[str, Any]:
    m = simulate(inst, fixed_schedule(inst)).metrics
    return {**label, "status": "fixed", "feasible": m.tranches_met and m.capacity_ok, **_metric_columns(m)}


# ----------------------------------------------------------------------------------- load models (b) and (e)


def restrict_to_baseline_mode(inst: Instance) -> Instance:
    """Model (b): each job keeps only its baseline mode (pause still allowed)."""
    jobs = []
    for job in inst.jobs:
        if job.baseline_mode == PAUSE:
            raise ValueError(f"{job.name} has no baseline mode in a pool of {inst.n_gpus} GPUs")
        keep = job.modes[job.baseline_mode]
        initial = 0 if job.initial_mode == job.baseline_mode else PAUSE
        jobs.append(dataclasses.replace(job, modes=(keep,), baseline_mode=0, initial_mode=initial))
    return dataclasses.replace(inst, jobs=tuple(jobs))


@dataclass(frozen=True)
class ContinuousResult:
    status: str
    it_power_kw: np.ndarray
    """(jobs, T) IT power per job and slot."""
    gpus_used: np.ndarray
    """(T,) GPUs in use (fractional: GPUs proportional to power)."""
    columns: dict[str, Any]
    """The simulator's energy figures of the load profile, named as the studies' columns."""


def continuous_power_optimum(inst: Instance, solver: str = "appsi_highs") -> ContinuousResult:
    """Model (e): the cheapest day when each job may draw any power between 0 and its largest mode's in any slot, with
    tokens proportional to energy (at its most efficient mode's energy per token) and GPUs proportional to power; no
    checkpoints, restarts or discrete modes. Solved exactly (an LP with renewable-first binaries in the slots where
    importing more would pay); its load profile is scored by :func:`~aidc_env.simulator.energy_accounting`."""
    T, dt = inst.slots, inst.slot_hours
    efficient = [int(np.argmin(job.it_power_kw_by_choice[:-1] / job.tokens_per_s_by_choice[:-1])) for job in inst.jobs]
    tokens_per_kwh = [job.tokens_per_s_by_choice[m] * SECONDS_PER_HOUR / job.it_power_kw_by_choice[m]
                      for job, m in zip(inst.jobs, efficient, strict=True)]
    gpus_per_kw = [job.gpus_by_choice[m] / job.it_power_kw_by_choice[m] for job, m in zip(inst.jobs, efficient,
                                                                                        strict=True)]
    max_kw = [float(job.it_power_kw_by_choice[:-1].max()) for job in inst.jobs]
    # Load is affine in the IT power: L = PUE/1000 * (Σ p + (N − Σ g·p) · idle), from the simulator's own function.
    base_load = float(facility_load_mw(inst, 0, 0.0))
    per_kw = [float(facility_load_mw(inst, g, 1.0)) - base_load for g in gpus_per_kw]
    renewable = inst.renewable_mw
    price = inst.price_usd_per_mwh
    penalty = inst.curtailment_penalty_usd_per_mwh
    big_mw = base_load + sum(k * p for k, p in zip(per_kw, max_kw, strict=True)) + float(renewable.max())
    must_enforce = [t for t in range(T) if price[t] + penalty < 0]

    m = pyo.ConcreteModel()
    m.J = pyo.RangeSet(0, len(inst.jobs) - 1)
    m.T = pyo.RangeSet(0, T - 1)
    m.p = pyo.Var(m.J, m.T, bounds=lambda _, j, t: (0.0, max_kw[j]))
    m.g = pyo.Var(m.T, within=pyo.NonNegativeReals)
    m.load_mw = pyo.Expression(m.T, rule=lambda _, t: base_load + sum(per_kw[j] * m.p[j, t] for j in m.J))
    m.import_ = pyo.Constraint(m.T, rule=lambda _, t: m.g[t] >= m.load_mw[t] - renewable[t])
    m.no_export = pyo.Constraint(m.T, rule=lambda _, t: m.g[t] <= m.load_mw[t])
    m.capacity = pyo.Constraint(m.T, rule=lambda _, t: sum(gpus_per_kw[j] * m.p[j, t] for j in m.J) <= inst.n_gpus)
    m.tranche = pyo.Constraint(m.J, rule=lambda _, j: sum(tokens_per_kwh[j] * m.p[j, t] * dt for t in m.T)
                               >= inst.jobs[j].tranche_tokens)
    # Renewable first where importing more would pay: g = max(0, L − R) through a binary per such slot.
    m.E = pyo.Set(initialize=must_enforce)
    m.short = pyo.Var(m.E, within=pyo.Binary)
    m.g_when_short = pyo.Constraint(m.E, rule=lambda _, t: m.g[t] <= m.load_mw[t] - renewable[t]
                                    + big_mw * (1 - m.short[t]))
    m.g_zero_otherwise = pyo.Constraint(m.E, rule=lambda _, t: m.g[t] <= big_mw * m.short[t])
    m.short_means_deficit = pyo.Constraint(m.E, rule=lambda _, t: m.load_mw[t] - renewable[t] >= -big_mw * (1 - m.short[t]))
    curtail = {t: renewable[t] - m.load_mw[t] + m.g[t] for t in m.T}
    m.cost = pyo.Objective(expr=sum((price[t] * m.g[t] + penalty * curtail[t]) * dt for t in m.T))
    result = pyo.SolverFactory(solver).solve(m)
    status = str(result.solver.termination_condition)
    it_kw = np.array([[pyo.value(m.p[j, t]) for t in m.T] for j in m.J])
    gpus = sum(gpus_per_kw[j] * it_kw[j] for j in range(len(inst.jobs)))
    load = facility_load_mw(inst, gpus, it_kw.sum(axis=0))
    totals, _ = energy_accounting(inst, load)
    columns = {k: totals[k] for k in ENERGY_COLUMNS}
    columns["modes_used"] = "continuous"
    return ContinuousResult(status=status, it_power_kw=it_kw, gpus_used=gpus, columns=columns)


# ----------------------------------------------------------------------------------- studies


@dataclass
class StudyContext:
    case: str | Case
    profiles: Any
    day: str | None
    backend: Backend | int
    """Where the oracle solves run (an int: that many local processes)."""
    time_limit_s: float
    out: Path
    on_rows: Callable[[list[dict[str, Any]]], Any] | None = None
    """Receives the oracle rows as they finish (the CLI keeps them on disk)."""

    def instance(self, **overrides: Any) -> Instance:
        return build_instance(self.case, day=self.day, profiles=self.profiles, **overrides)

    def solve(self, points: Sequence[Point], desc: str) -> pd.DataFrame:
        return solve_all(points, self.backend, self.time_limit_s, desc, on_rows=self.on_rows)


def study_headline(ctx: StudyContext) -> tuple[pd.DataFrame, str]:
    inst = ctx.instance()
    optimum = ctx.solve([Point({"policy": "checkpoint-aware 3D dispatch"}, inst)], "headline")
    frame = pd.DataFrame([fixed_row(inst, {"policy": "fixed continuous"}), *optimum.to_dict("records")])
    fixed, best = frame.iloc[0], frame.iloc[1]
    plot_dispatch(inst, {"fixed continuous": simulate(inst, fixed_schedule(inst)),
                         "checkpoint-aware 3D dispatch (oracle)": simulate(inst, json.loads(best["schedule"]))},
                  ctx.out / "headline.png")
    plot_mode_timeline(inst, {"oracle": simulate(inst, json.loads(best["schedule"]))}, ctx.out / "headline_modes.png")
    reduction = best["operating_cost_usd"] / fixed["operating_cost_usd"] - 1
    table = _markdown(["", "this project", "seed"], [
        ["day", inst.day, "CAISO (unstated)"],
        ["operating cost, fixed continuous ($)", f"{fixed['operating_cost_usd']:,.2f}", ""],
        ["operating cost, 3D dispatch ($)", f"{best['operating_cost_usd']:,.2f}", ""],
        ["cost change", f"{reduction:+.2%}", f"{SEED.cost_reduction:+.2%}"],
        ["curtailment fixed → dispatch (MWh)", f"{fixed['curtailment_mwh']:.3f} → {best['curtailment_mwh']:.3f}",
         f"{SEED.fixed_curtailment_mwh:.3f} → {SEED.dispatch_curtailment_mwh:.3f}"],
        ["green share fixed → dispatch", f"{fixed['green_share']:.2%} → {best['green_share']:.2%}", ""],
        ["modes activated (LLM-A + LLM-B)", best["modes_used"], "+".join(map(str, SEED.modes_activated))],
        ["Pareto modes (LLM-A + LLM-B)", "+".join(str(j.n_modes) for j in inst.jobs), "12+21"],
        ["oracle status, gap, seconds", f"{best['status']}, {best['gap']:.1e}, {best['solve_seconds']:.1f}", ""]])
    return frame, table


def study_checkpoints(ctx: StudyContext, grid: Sequence[int] = CHECKPOINT_GRID) -> tuple[pd.DataFrame, str]:
    points = [Point({"segments": k}, ctx.instance(segments=k)) for k in grid]
    frame = ctx.solve(points, "checkpoints").sort_values("segments")
    fixed = fixed_row(ctx.instance(), {})
    frame["cost_change_vs_fixed"] = frame["operating_cost_usd"] / fixed["operating_cost_usd"] - 1
    frame["step_gain"] = -frame["operating_cost_usd"].pct_change()
    plot_study(frame, "segments", [("operating_cost_usd", "operating cost ($)"), ("curtailment_mwh", "curtailment (MWh)")],
               ctx.out / "checkpoints.png", f"Checkpoint segments K per day ({points[0].inst.day})", logx=True)
    rows = [[int(r.segments), f"{r.operating_cost_usd:,.2f}", f"{r.cost_change_vs_fixed:+.2%}",
             "" if np.isnan(r.step_gain) else f"{r.step_gain:.2%}", f"{r.curtailment_mwh:.3f}", r.modes_used,
             f"{r.solve_seconds:.1f}"] for r in frame.itertuples()]
    table = _markdown(["K", "cost ($)", "vs fixed", "gain of this step", "curtailment (MWh)", "modes used", "solve s"],
                      rows)
    table += (f"\n\nSeed: 12 segments capture most of the flexibility; the final step is worth only "
              f"{SEED.final_checkpoint_step_gain:.2%}. Fixed continuous costs ${fixed['operating_cost_usd']:,.2f}.")
    return frame, table


def study_gpus(ctx: StudyContext, grid: Sequence[int] = GPU_GRID) -> tuple[pd.DataFrame, str]:
    points = [Point({"gpus": n}, ctx.instance(gpus=n)) for n in grid]
    frame = ctx.solve(points, "gpus").sort_values("gpus")
    plot_study(frame.assign(feasible_int=frame["feasible"].astype(int)), "gpus",
               [("feasible_int", "feasible (1) / infeasible (0)"), ("operating_cost_usd", "operating cost ($)")],
               ctx.out / "gpus.png", "GPU pool size")
    rows = [[int(r.gpus), "yes" if r.feasible else "no",
             f"{r.operating_cost_usd:,.2f}" if r.feasible else "—",
             f"{r.curtailment_mwh:.3f}" if r.feasible else "—",
             (r.reason[:90] + ("…" if len(r.reason) > 90 else "")) if not r.feasible else ""] for r in frame.itertuples()]
    table = _markdown(["GPUs", "feasible", "cost ($)", "curtailment (MWh)", "reason"], rows)
    table += "\n\nSeed: 768 to 1152 GPUs cannot complete both daily tranches; 1280 GPUs restore feasibility."
    return frame, table


def study_renewable(ctx: StudyContext, grid: Sequence[float] = RENEWABLE_GRID) -> tuple[pd.DataFrame, str]:
    points = [Point({"renewable_ratio": r}, ctx.instance(renewable_ratio=r)) for r in grid]
    optimum = ctx.solve(points, "renewable").assign(series="3D dispatch")
    fixed = pd.DataFrame([fixed_row(p.inst, p.label) for p in points]).assign(series="fixed continuous")
    frame = pd.concat([optimum, fixed], ignore_index=True).sort_values(["series", "renewable_ratio"])
    plot_study(frame, "renewable_ratio", [("operating_cost_usd", "operating cost ($)"),
                                          ("curtailment_mwh", "curtailment (MWh)"), ("green_share", "green share")],
               ctx.out / "renewable.png", "Renewable-to-AIDC ratio rho",
               seed_points={"green_share": ([SEED.high_ratio], [SEED.high_ratio_green_share]),
                            "curtailment_mwh": ([SEED.high_ratio], [SEED.high_ratio_curtailment_mwh])})
    rows = []
    for r in optimum.sort_values("renewable_ratio").itertuples():
        f = fixed[fixed["renewable_ratio"] == r.renewable_ratio].iloc[0]
        rows.append([f"{r.renewable_ratio:g}", f"{r.operating_cost_usd:,.2f}", f"{f['operating_cost_usd']:,.2f}",
                     f"{r.curtailment_mwh:.3f}", f"{f['curtailment_mwh']:.3f}", f"{r.green_share:.2%}",
                     f"{f['green_share']:.2%}"])
    table = _markdown(["rho", "cost 3D ($)", "cost fixed ($)", "curtailment 3D (MWh)", "curtailment fixed (MWh)",
                       "green 3D", "green fixed"], rows)
    table += (f"\n\nSeed at rho = {SEED.high_ratio}: green share {SEED.high_ratio_green_share:.2%}, cost up slightly, "
              f"curtailment {SEED.high_ratio_curtailment_mwh:.3f} MWh.")
    return frame, table


def study_flexibility(ctx: StudyContext) -> tuple[pd.DataFrame, str]:
    inst = ctx.instance()
    points = [Point({"model": "(b) pause/resume at checkpoints, one fixed mode"}, restrict_to_baseline_mode(inst)),
              Point({"model": "(c) 3D modes, no pausing"}, inst, allow_pause=False),
              Point({"model": "(d) checkpoint-aware 3D dispatch"}, inst)]
    solved = ctx.solve(points, "flexibility")
    continuous = continuous_power_optimum(inst)
    frame = pd.DataFrame([fixed_row(inst, {"model": "(a) fixed continuous"}), *solved.to_dict("records"),
                          {"model": "(e) continuously adjustable power", "status": continuous.status, "feasible": True,
                           **continuous.columns}])
    base = frame.iloc[0]["operating_cost_usd"]
    frame["cost_change_vs_fixed"] = frame["operating_cost_usd"] / base - 1
    exact = frame.iloc[3]
    rows = [[r.model, f"{r.operating_cost_usd:,.2f}", f"{r.cost_change_vs_fixed:+.2%}", f"{r.curtailment_mwh:.3f}",
             f"{r.green_share:.2%}"] for r in frame.itertuples()]
    table = _markdown(["load model", "cost ($)", "vs fixed", "curtailment (MWh)", "green share"], rows)
    overstatement = frame.iloc[4]["cost_change_vs_fixed"] - exact["cost_change_vs_fixed"]
    table += (f"\n\nThe continuously adjustable model claims a saving {abs(overstatement):.2%} points larger than "
              "checkpoint-aware 3D dispatch can deliver on this day.")
    plot_study(frame.assign(index=range(len(frame))), "index", [("operating_cost_usd", "operating cost ($)"),
                                                               ("curtailment_mwh", "curtailment (MWh)")],
               ctx.out / "flexibility.png", "Load models (a)–(e)")
    return frame, table


def study_days(ctx: StudyContext, days: Sequence[str] | None = None) -> tuple[pd.DataFrame, str]:
    case = load_case(ctx.case)
    profiles = ctx.profiles if not isinstance(ctx.profiles, (str, type(None))) else load_profiles(
        ctx.profiles, renewable_capacity_mw=case.renewable_capacity_mw)
    instances = build_instances(case, days, profiles)
    points = [Point({"day": d}, inst) for d, inst in instances.items()]
    optimum = ctx.solve(points, "days")
    fixed = pd.DataFrame([fixed_row(p.inst, p.label) for p in points])
    frame = optimum.merge(fixed, on="day", suffixes=("", "_fixed"))
    frame["cost_change_vs_fixed"] = frame["operating_cost_usd"] / frame["operating_cost_usd_fixed"] - 1
    frame["month"] = frame["day"].str[:7]
    q = frame["cost_change_vs_fixed"].quantile([0.1, 0.5, 0.9])
    plot_study(frame.groupby("month", as_index=False)[["cost_change_vs_fixed", "curtailment_mwh",
                                                       "curtailment_mwh_fixed"]].mean(),
               "month", [("cost_change_vs_fixed", "mean cost change vs fixed"),
                         ("curtailment_mwh", "mean curtailment, dispatch (MWh)")],
               ctx.out / "days.png", f"Oracle vs fixed continuous over {len(frame)} days")
    rows = [["days", len(frame), ""],
            ["cost change vs fixed: mean", f"{frame['cost_change_vs_fixed'].mean():+.2%}",
             f"{SEED.cost_reduction:+.2%}"],
            ["cost change: 10th / 50th / 90th percentile", " / ".join(f"{v:+.2%}" for v in q), ""],
            ["curtailment fixed → dispatch, mean (MWh)",
             f"{frame['curtailment_mwh_fixed'].mean():.3f} → {frame['curtailment_mwh'].mean():.3f}",
             f"{SEED.fixed_curtailment_mwh:.3f} → {SEED.dispatch_curtailment_mwh:.3f} (one day)"],
            ["oracle optimal on", f"{(frame['status'] == 'optimal').sum()} of {len(frame)} days", ""],
            ["oracle seconds: mean / max", f"{frame['solve_seconds'].mean():.1f} / {frame['solve_seconds'].max():.1f}",
             ""]]
    return frame, _markdown(["", "this project", "seed"], rows)


STUDY_FUNCTIONS: dict[str, Callable[[StudyContext], tuple[pd.DataFrame, str]]] = {
    "headline": study_headline, "checkpoints": study_checkpoints, "gpus": study_gpus, "renewable": study_renewable,
    "flexibility": study_flexibility, "days": study_days}


# ----------------------------------------------------------------------------------- output


def _markdown(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)


def study_results(study: str) -> list[str]:
    """What a run of ``study`` writes to its folder (an --out holding any of them is an earlier run's)."""
    return [f"{study}.csv", f"{study}.partial.csv", f"{study}.md", f"{study}*.png"]


GRID_FIELDS = {"checkpoints": "segments", "gpus": "gpus", "renewable": "renewable_ratio"}
"""The case field each grid study sweeps."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m experiments.studies", description=__doc__.splitlines()[0])
    parser.add_argument("study", choices=STUDIES)
    add_case_arguments(parser)
    parser.add_argument("--days", nargs="+", help="for the days study: the days (default: all complete days)")
    parser.add_argument("--grid", help="comma-separated grid values overriding the study's default grid")
    parser.add_argument("--workers", type=int, default=2, help="parallel oracle solves (default 2)")
    add_backend_arguments(parser)
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per oracle solve (default 120)")
    parser.add_argument("--out", help="folder for the CSV, PNG and table (default runs/studies/<study>_N, the next "
                        "free N); one that holds an earlier run of the study is refused")
    parser.add_argument("--update-docs", action="store_true", help="also replace the study's section of --results and "
                        "copy its CSV and PNG to --figures, if the section's day set is this run's")
    parser.add_argument("--results", default="docs/results.md",
                        help="with --update-docs: the markdown file whose study section is replaced")
    parser.add_argument("--figures", help="with --update-docs: the folder of its figures (default: figures/ beside "
                        "--results)")
    args = parser.parse_args(argv)

    # Everything is checked before the work, and nothing is created until a first result exists.
    require_number(args.workers, "workers", 1, limits.MAX_WORKERS, integer=True)
    backend = backend_from_args(args, workers=args.workers)
    require_number(args.time_limit, "time-limit", 0.0, limits.MAX_TIME_LIMIT_S, low_open=True)
    out = result_folder(args.out, Path("runs") / "studies", args.study, study_results(args.study))
    case = load_case(args.case)
    overrides = case_overrides(args)
    if overrides:
        case = case.with_overrides(**overrides)
    profiles = load_profiles(args.profiles, renewable_capacity_mw=case.renewable_capacity_mw)
    if args.study == "days":
        days = list(args.days or profiles.dates())
    else:
        require(not args.days, "days", f"only the days study takes --days (the {args.study} study is one day)")
        days = [args.day or case.day]
    for day in days:
        profiles.day(day)
    grid = parse_grid(args.study, args.grid, case)
    results_md = Path(args.results)
    figures = Path(args.figures) if args.figures else results_md.parent / "figures"
    if args.update_docs:
        check_output_file(results_md, "results")
        check_output_folder(figures, "figures")
        update_docs_section(results_md, args.study, None, days)  # refuses a section over other days, writes nothing

    rows = RowsOnDisk(out / f"{args.study}.partial.csv")
    ctx = StudyContext(case, profiles, args.day, backend, args.time_limit, out, on_rows=rows.add)
    try:
        with backend.running():
            frame, table = run_study(ctx, args.study, grid, days)
    except KeyboardInterrupt:
        rows.write()
        print(f"interrupted: {len(rows.rows)} solved rows kept in {rows.path}" if rows.rows else
              "interrupted before any solve finished", file=sys.stderr)
        return EXIT_INTERRUPTED

    with atomic_path(out / f"{args.study}.csv") as temp:
        frame.to_csv(temp, index=False)
    rows.path.unlink(missing_ok=True)
    pictures = sorted(out.glob(f"{args.study}*.png"))
    atomic_write_text(out / f"{args.study}.md", table + "\n")
    print(table)
    print(f"wrote {out}/{args.study}.csv, {args.study}.md" + (" and figures" if pictures else ""))
    if args.update_docs:
        for path in [out / f"{args.study}.csv", *pictures]:
            with atomic_path(figures / path.name) as temp:
                shutil.copyfile(path, temp)
        main_picture = figures / f"{args.study}.png"
        body = table + (f"\n\n![{args.study}]({_relative(figures, results_md)}/{main_picture.name})"
                        if (out / main_picture.name).exists() else "")
        update_docs_section(results_md, args.study, body, days)
        print(f"updated the {args.study} section of {results_md} and its files in {figures}")
    return 0


def run_study(ctx: StudyContext, study: str, grid: Sequence[Any] | None,
              days: Sequence[str]) -> tuple[pd.DataFrame, str]:
    """One study's frame and markdown table (with its grid, or its days for the days study)."""
    if grid is not None:
        return STUDY_FUNCTIONS[study](ctx, grid)  # type: ignore[call-arg]
    return study_days(ctx, days) if study == "days" else STUDY_FUNCTIONS[study](ctx)


def parse_grid(study: str, text: str | None, case) -> list[int] | list[float] | None:
    """``--grid`` as the study's values, each checked as a case override (InputError naming grid)."""
    if text is None:
        return None
    require(study in GRID_FIELDS, "grid", f"the {study} study has no grid")
    cast = float if study == "renewable" else int
    try:
        grid = [cast(v) for v in text.split(",")]
    except ValueError:
        require(False, "grid", f"not a list of {'numbers' if cast is float else 'integers'}: {text}")
    for value in grid:
        try:
            case.with_overrides(**{GRID_FIELDS[study]: value})
        except InputError as err:
            raise InputError("grid", f"{value}: {err}") from None
    return grid


def _relative(folder: Path, results: Path) -> str:
    try:
        return str(folder.resolve().relative_to(results.resolve().parent))
    except ValueError:
        return str(folder)


if __name__ == "__main__":
    sys.exit(run_cli(main))


__all__ = ["STUDIES", "STUDY_FUNCTIONS", "main"]
