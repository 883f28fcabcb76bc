"""The simulator: the one place where costs and metrics are computed (DESIGN §2, §9).

:func:`simulate` turns an instance and a schedule (per job, per checkpoint segment: a mode index or
``PAUSE``) into :class:`Metrics` plus per-slot flows. The env, the oracle (its objective and its
precomputed joint-state costs), the baselines and every report call the functions of this module:

- :func:`facility_load_mw`: L = PUE · [Σ P + (N − Σ n) · P_idle] / 1000;
- :func:`renewable_first`: u = min(L, R), g = L − u, c = R − u;
- :func:`slot_decision_cost_usd`: λ g Δ + c_cur c Δ (the part of the cost that decisions change);
- :func:`segment_productive_hours`: segment hours minus the checkpoint load after a (re)start;
- :func:`pool_load_mw`: the facility load of the jobs' GPUs and power *plus the inference services'*;
- :func:`slot_idle_value_usd`: the idle-GPU value credited in each slot.

**Workloads** (:mod:`aidc_env.workloads`). Inference GPUs come out of the pool first: they count in the
capacity check (jobs + inference ≤ N), draw their own power and are never idle. A fine-tuning job may run
only inside its window ``[release_slot, deadline_slot)``: :func:`validate_schedule` refuses a schedule that runs
it outside (like a mode index out of range); its target is due by the deadline (``JobMetrics.tranche_met``).
The objective is ``Metrics.objective_usd`` = operating cost − idle-GPU value (equal to the operating cost
without an idle value, as in the day case).

An instance of D days is one time axis: restarts are judged across midnight like any other boundary.
:class:`Metrics` holds the horizon's totals and, in ``days``, the same energy and cost figures per day
with each job's tokens that day; a job's tranche is met when the horizon target *and* every day's minimum
(``Instance.daily_min_tokens``) are.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aidc_env.errors import CliParser, InputError, require, run_cli
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance, Job, load_instance
from aidc_env.io import dumps_json, read_json_file

TRANCHE_TOLERANCE = 1e-9
"""Relative shortfall below which a tranche counts as met (floating-point rounding only)."""


# ------------------------------------------------------------------------------ the physics, vectorised


def idle_gpus(inst: Instance, gpus_used: np.ndarray | int) -> np.ndarray:
    """GPUs left idle: N − all GPUs in use (inference included); a breach (reported) has no idle GPU."""
    return np.maximum(inst.n_gpus - np.asarray(gpus_used), 0)


def facility_load_mw(inst: Instance, gpus_used: np.ndarray | int, it_power_kw: np.ndarray | float) -> np.ndarray:
    """Facility load L (MW): PUE × (IT power of the running modes + idle power of unused GPUs)."""
    idle = idle_gpus(inst, gpus_used)
    return inst.pue * (np.asarray(it_power_kw, dtype=float) + idle * inst.idle_kw_per_gpu) / 1000.0


def pool_load_mw(inst: Instance, job_gpus: np.ndarray, job_it_kw: np.ndarray,
                 slots: slice | np.ndarray | int = slice(None)) -> np.ndarray:
    """Facility load L (MW) of the jobs' GPUs and IT power in ``slots``, with the inference services' added."""
    if not inst.inference:
        return facility_load_mw(inst, job_gpus, job_it_kw)
    return facility_load_mw(inst, np.asarray(job_gpus) + inst.inference_gpus[slots],
                            np.asarray(job_it_kw) + inst.inference_it_kw[slots])


def slot_idle_value_usd(inst: Instance, gpus_used: np.ndarray | int) -> np.ndarray:
    """Idle-GPU value of each slot ($): value per GPU-hour × idle GPUs × Δ (``gpus_used``: inference included).
    The slot's objective is its decision cost minus this."""
    return inst.idle_value_usd_per_gpu_hour * idle_gpus(inst, gpus_used) * inst.slot_hours


def renewable_first(load_mw: np.ndarray, renewable_mw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Renewable first, no export: (renewable used u, grid import g, curtailment c), all MW."""
    used = np.minimum(load_mw, renewable_mw)
    return used, load_mw - used, renewable_mw - used


def slot_decision_cost_usd(
    inst: Instance, grid_mw: np.ndarray, curtailment_mw: np.ndarray, slots: slice | np.ndarray | int = slice(None)
) -> np.ndarray:
    """Grid cost plus curtailment penalty of each slot ($): λ_t g_t Δ + c_cur c_t Δ."""
    price = inst.price_usd_per_mwh[slots]
    return (price * grid_mw + inst.curtailment_penalty_usd_per_mwh * curtailment_mw) * inst.slot_hours


def segment_productive_hours(inst: Instance, job: Job, restarted: np.ndarray | bool) -> np.ndarray:
    """Hours of a running segment that make tokens: the segment minus τ_j after a (re)start."""
    return inst.segment_hours(job) - job.restart_hours * np.asarray(restarted, dtype=float)


def slot_productive_hours(inst: Instance, job: Job, offset_in_segment: int, restarted: bool) -> float:
    """Token-making hours of one slot (``offset_in_segment`` slots after the boundary).

    The checkpoint load occupies the first τ_j hours of a restarted segment, possibly spanning slots;
    summed over a segment this equals :func:`segment_productive_hours`.
    """
    if not restarted:
        return inst.slot_hours
    start = offset_in_segment * inst.slot_hours
    lost = min(inst.slot_hours, max(0.0, job.restart_hours - start))
    return inst.slot_hours - lost


def energy_accounting(inst: Instance, load_mw: np.ndarray) -> tuple[dict[str, float], tuple[np.ndarray, ...]]:
    """Costs and energies of a facility load profile (MW per slot): the energy part of :class:`Metrics`.

    Returns (totals by Metrics field name, per-slot (renewable used, grid, curtailment, decision cost)).
    """
    used, grid, curtailment = renewable_first(load_mw, inst.renewable_mw)
    decision = slot_decision_cost_usd(inst, grid, curtailment)
    flows = (used, grid, curtailment, decision)
    return energy_totals(inst, load_mw, flows), flows


def energy_totals(inst: Instance, load_mw: np.ndarray, flows: tuple[np.ndarray, ...],
                  slots: slice = slice(None)) -> dict[str, float]:
    """The energy part of :class:`Metrics` over ``slots`` (default all: the horizon; a day's slots: that day).

    ``flows``: the per-slot (renewable used, grid, curtailment, decision cost) of :func:`energy_accounting`.
    """
    used, grid, curtailment, decision = (arr[slots] for arr in flows)
    load_mw, price, renewable = load_mw[slots], inst.price_usd_per_mwh[slots], inst.renewable_mw[slots]
    dt = inst.slot_hours
    grid_cost = float(np.sum(price * grid) * dt)
    penalty = float(np.sum(curtailment) * dt * inst.curtailment_penalty_usd_per_mwh)
    renewable_cost = float(np.sum(renewable) * dt * inst.ppa_usd_per_mwh)
    load_mwh = float(np.sum(load_mw) * dt)
    return {
        "operating_cost_usd": grid_cost + renewable_cost + penalty,
        "grid_cost_usd": grid_cost,
        "renewable_cost_usd": renewable_cost,
        "curtailment_penalty_usd": penalty,
        "decision_cost_usd": float(np.sum(decision)),
        "load_energy_mwh": load_mwh,
        "grid_energy_mwh": float(np.sum(grid) * dt),
        "renewable_available_mwh": float(np.sum(renewable) * dt),
        "renewable_used_mwh": float(np.sum(used) * dt),
        "curtailment_mwh": float(np.sum(curtailment) * dt),
        "green_share": float(np.sum(used) * dt / load_mwh) if load_mwh > 0 else 0.0,
        "peak_load_mw": float(load_mw.max()),
        "peak_grid_mw": float(grid.max()),
    }


# ------------------------------------------------------------------------------ schedules


def validate_schedule(inst: Instance, schedule: Sequence[Sequence[int]] | Mapping[str, Sequence[int]]) -> tuple[
        np.ndarray, ...]:
    """Per job an int array of K_j choices (PAUSE or a mode index); InputError naming the bad entry.

    Accepts a list (job order) or a mapping from job name to its list. A job that runs outside its window
    (a fine-tuning job before its release or from its deadline on) is refused.
    """
    if isinstance(schedule, Mapping):
        missing = [job.name for job in inst.jobs if job.name not in schedule]
        require(not missing, "schedule", f"no entry for job(s) {', '.join(missing)}")
        schedule = [schedule[job.name] for job in inst.jobs]
    require(len(schedule) == len(inst.jobs), "schedule", f"expected {len(inst.jobs)} jobs, got {len(schedule)}")
    out = []
    for job, choices in zip(inst.jobs, schedule, strict=True):
        arr = np.asarray(choices)
        require(arr.shape == (job.segments,), f"schedule.{job.name}",
                f"expected {job.segments} segment choices, got shape {arr.shape}")
        require(arr.size == 0 or np.issubdtype(arr.dtype, np.integer) or bool(np.all(arr == np.round(arr))),
                f"schedule.{job.name}", "choices must be integers")
        arr = arr.astype(np.int64)
        require(bool(np.all((arr >= PAUSE) & (arr < job.n_modes))), f"schedule.{job.name}",
                f"choices must be -1 (pause) or a mode index 0..{job.n_modes - 1}")
        if job.is_finetuning:  # a pre-training job's window is the horizon
            outside = np.flatnonzero((arr != PAUSE) & ~inst.allowed_segments(job))
            if outside.size:
                release, deadline = inst.job_window(job)
                raise InputError(f"schedule.{job.name}", f"runs in segment {outside[0]} outside its window "
                                 f"[{release}, {deadline}) slots (a fine-tuning job runs only between its release "
                                 "and its deadline)")
        out.append(arr)
    return tuple(out)


def restarts(job: Job, choices: np.ndarray) -> np.ndarray:
    """Bool per segment: the job (re)starts a mode there (resume or switch), paying τ_j."""
    previous = np.concatenate(([job.initial_mode], choices[:-1]))
    return (choices != PAUSE) & (choices != previous)


def switches(job: Job, choices: np.ndarray) -> np.ndarray:
    """Bool per segment: the choice differs from the previous one (pauses and resumes included)."""
    previous = np.concatenate(([job.initial_mode], choices[:-1]))
    return choices != previous


def slot_choices(inst: Instance, job: Job, choices: np.ndarray) -> np.ndarray:
    """The job's choice in every slot (segment choices held over their slots)."""
    return np.repeat(choices, inst.slots_per_segment(job))


# ------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class JobMetrics:
    name: str
    tokens: float
    tranche_tokens: float
    completion: float
    """tokens / tranche (1.0 = exactly the tranche; tokens beyond it earn nothing)."""
    tranche_met: bool
    modes_used: int
    switches: int
    restarts: int
    running_hours: float
    gpu_hours: float
    it_energy_mwh: float
    tokens_by_day: tuple[float, ...] = ()
    """Tokens made on each day of the horizon (one value for a day instance)."""
    daily_min_tokens: float = 0.0
    """The fewest tokens each day must make (min_daily_share × tranche / D)."""
    daily_minimums_met: bool = True
    """Every day made at least ``daily_min_tokens``. ``tranche_met`` requires it too."""
    kind: str = "pretraining"
    """``pretraining`` or ``finetuning``; a fine-tuning job's ``tranche_met`` is its target met by its deadline
    (it cannot run after it)."""
    release_slot: int = 0
    deadline_slot: int = 0
    """The job's window [release_slot, deadline_slot) (the horizon for pre-training)."""


@dataclass(frozen=True)
class EnergyMetrics:
    """Costs and energies of a stretch of slots (:func:`energy_totals`). Costs in $, energy in MWh, power in MW."""

    operating_cost_usd: float
    grid_cost_usd: float
    renewable_cost_usd: float
    curtailment_penalty_usd: float
    decision_cost_usd: float
    """Grid cost + curtailment penalty: the part of the operating cost that decisions change."""
    load_energy_mwh: float
    grid_energy_mwh: float
    renewable_available_mwh: float
    renewable_used_mwh: float
    curtailment_mwh: float
    green_share: float
    """Renewable used / facility load energy."""
    peak_load_mw: float
    peak_grid_mw: float


@dataclass(frozen=True)
class DayMetrics(EnergyMetrics):
    """One day of a horizon: the energy figures over its slots, and each job's tokens that day."""

    day: str
    tokens: dict[str, float]
    """Tokens of each job (by name) made this day."""
    daily_minimums_met: bool
    """Every job made at least its daily minimum this day."""


@dataclass(frozen=True)
class Metrics(EnergyMetrics):
    """Everything reported about a day or a horizon (its totals; ``days``: per day)."""

    peak_gpus: int
    capacity_ok: bool
    capacity_violation_slots: int
    tranches_met: bool
    completion: float
    """The lowest completion over the jobs."""
    jobs: tuple[JobMetrics, ...]
    days: tuple[DayMetrics, ...] = ()
    """Per day of the horizon (one entry for a day instance, equal to the totals)."""
    inference_gpu_hours: float = 0.0
    """GPU-hours of the inference services (they are served first; 0 without inference)."""
    inference_served: bool = True
    """The pool holds the inference GPUs in every slot (they come first; a breach beyond it is the jobs')."""
    idle_gpu_hours: float = 0.0
    """GPU-hours left idle (neither a job nor inference)."""
    idle_value_usd: float = 0.0
    """Idle GPU-hours × ``idle_value_usd_per_gpu_hour``."""
    objective_usd: float = 0.0
    """What a dispatcher minimises: operating cost − idle value (the operating cost when there is no idle value;
    :func:`simulate` always sets it)."""
    feasible: bool = True
    """Capacity held, every target met by its deadline and inference served."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["jobs"] = {job.name: asdict(job) for job in self.jobs}
        data["days"] = [asdict(day) for day in self.days]
        return data


@dataclass(frozen=True)
class SlotFlows:
    """Per-slot arrays (length T)."""

    gpus_used: np.ndarray
    it_power_kw: np.ndarray
    load_mw: np.ndarray
    renewable_mw: np.ndarray
    renewable_used_mw: np.ndarray
    grid_mw: np.ndarray
    curtailment_mw: np.ndarray
    price_usd_per_mwh: np.ndarray
    decision_cost_usd: np.ndarray
    job_choice: np.ndarray
    """(jobs, T): each job's choice per slot (PAUSE or mode index)."""
    inference_gpus: np.ndarray
    """GPUs of the inference services per slot (included in ``gpus_used``)."""
    idle_value_usd: np.ndarray
    """Idle-GPU value credited per slot ($)."""


@dataclass(frozen=True)
class SimulationResult:
    metrics: Metrics
    flows: SlotFlows
    schedule: tuple[np.ndarray, ...]

    def schedule_lists(self) -> list[list[int]]:
        return [arr.tolist() for arr in self.schedule]


def simulate(inst: Instance, schedule: Sequence[Sequence[int]] | Mapping[str, Sequence[int]]) -> SimulationResult:
    """Score a schedule exactly (DESIGN §2). Capacity breaches are reported, not raised."""
    choices = validate_schedule(inst, schedule)
    T, D = inst.slots, inst.horizon_days
    gpus_used = np.zeros(T, dtype=np.int64)
    it_power_kw = np.zeros(T)
    job_choice = np.empty((len(inst.jobs), T), dtype=np.int64)
    job_metrics = []
    for j, (job, arr) in enumerate(zip(inst.jobs, choices, strict=True)):
        per_slot = slot_choices(inst, job, arr)
        job_choice[j] = per_slot
        gpus_used += job.gpus_by_choice[per_slot]
        it_power_kw += job.it_power_kw_by_choice[per_slot]
        restarted = restarts(job, arr)
        running = arr != PAUSE
        productive_h = np.where(running, segment_productive_hours(inst, job, restarted), 0.0)
        # Hours per mode first, then tokens: a mode held all day gives exactly r * 3600 * 24 = its tranche.
        tokens = _tokens(job, arr, running, productive_h)
        by_day = (tokens,) if D == 1 else tuple(
            _tokens(job, arr[d], running[d], productive_h[d]) for d in _day_segments(inst, job))
        daily_min = inst.daily_min_tokens(job)
        minimums_met = all(_reaches(x, daily_min) for x in by_day)
        completion = tokens / job.tranche_tokens if job.tranche_tokens > 0 else 1.0
        job_metrics.append(
            JobMetrics(
                name=job.name,
                tokens=tokens,
                tranche_tokens=job.tranche_tokens,
                completion=completion,
                tranche_met=_reaches(tokens, job.tranche_tokens) and minimums_met,
                modes_used=int(np.unique(arr[running]).size),
                switches=int(switches(job, arr).sum()),
                restarts=int(restarted.sum()),
                running_hours=float(running.sum() * inst.segment_hours(job)),
                gpu_hours=float(np.sum(job.gpus_by_choice[per_slot]) * inst.slot_hours),
                it_energy_mwh=float(np.sum(job.it_power_kw_by_choice[per_slot]) * inst.slot_hours / 1000.0),
                tokens_by_day=by_day,
                daily_min_tokens=daily_min,
                daily_minimums_met=minimums_met,
                kind=job.kind,
                release_slot=inst.job_window(job)[0],
                deadline_slot=inst.job_window(job)[1],
            )
        )
    if inst.inference:  # served first: its GPUs and power join the jobs' (skipped without, bit for bit as before)
        gpus_used = gpus_used + inst.inference_gpus
        it_power_kw = it_power_kw + inst.inference_it_kw
    load = facility_load_mw(inst, gpus_used, it_power_kw)
    energy, flows = energy_accounting(inst, load)
    used, grid, curtailment, decision = flows
    over = gpus_used > inst.n_gpus
    days = []
    for d, day in enumerate(inst.days):
        tokens_today = {m.name: m.tokens_by_day[d] for m in job_metrics}
        days.append(DayMetrics(
            day=day,
            **(energy if D == 1 else energy_totals(inst, load, flows, inst.day_slots(d))),
            tokens=tokens_today,
            daily_minimums_met=all(_reaches(tokens_today[job.name], inst.daily_min_tokens(job)) for job in inst.jobs),
        ))
    idle_value = slot_idle_value_usd(inst, gpus_used)
    idle_value_usd = float(np.sum(idle_value))
    inference_served = bool(np.all(inst.inference_gpus <= inst.n_gpus))
    tranches_met = all(m.tranche_met for m in job_metrics)
    metrics = Metrics(
        **energy,
        peak_gpus=int(gpus_used.max()),
        capacity_ok=not bool(over.any()),
        capacity_violation_slots=int(over.sum()),
        tranches_met=tranches_met,
        completion=min(m.completion for m in job_metrics),
        jobs=tuple(job_metrics),
        days=tuple(days),
        inference_gpu_hours=float(np.sum(inst.inference_gpus) * inst.slot_hours),
        inference_served=inference_served,
        idle_gpu_hours=float(np.sum(idle_gpus(inst, gpus_used)) * inst.slot_hours),
        idle_value_usd=idle_value_usd,
        objective_usd=energy["operating_cost_usd"] - idle_value_usd if idle_value_usd else energy["operating_cost_usd"],
        feasible=not bool(over.any()) and tranches_met and inference_served,
    )
    flows = SlotFlows(
        gpus_used=gpus_used,
        it_power_kw=it_power_kw,
        load_mw=load,
        renewable_mw=inst.renewable_mw,
        renewable_used_mw=used,
        grid_mw=grid,
        curtailment_mw=curtailment,
        price_usd_per_mwh=inst.price_usd_per_mwh,
        decision_cost_usd=decision,
        job_choice=job_choice,
        inference_gpus=inst.inference_gpus,
        idle_value_usd=idle_value,
    )
    return SimulationResult(metrics=metrics, flows=flows, schedule=choices)


def _tokens(job: Job, choices: np.ndarray, running: np.ndarray, productive_hours: np.ndarray) -> float:
    """Tokens of the running segments given: hours per mode first, then tokens, so that a mode held all day
    gives exactly r · 3600 · 24 = its default tranche."""
    hours_by_mode = np.bincount(choices[running], weights=productive_hours[running], minlength=job.n_modes)
    return float(np.sum(job.tokens_per_s_by_choice[:-1] * SECONDS_PER_HOUR * hours_by_mode))


def _day_segments(inst: Instance, job: Job) -> list[slice]:
    """The job's segments of each day of the horizon."""
    per_day = inst.segments_per_day(job)
    return [slice(d * per_day, (d + 1) * per_day) for d in range(inst.horizon_days)]


def _reaches(tokens: float, target: float) -> bool:
    """Whether tokens meet a target, up to :data:`TRANCHE_TOLERANCE` (floating-point rounding only)."""
    return bool(tokens >= target * (1 - TRANCHE_TOLERANCE))


# ------------------------------------------------------------------------------ schedule files


def read_schedule(path: str | Path, inst: Instance | None = None) -> list[list[int]] | dict[str, list[int]]:
    """A schedule JSON: a list per job, ``{"schedule": ...}`` (e.g. the oracle's output) or name → list.

    Every choice must be a JSON integer (not a string, null, a boolean or a fraction); with ``inst``, the
    job names of a mapping must be the instance's.
    """
    data = read_json_file(path, "schedule")
    if isinstance(data, Mapping) and "schedule" in data:
        data = data["schedule"]
    require(isinstance(data, (list, Mapping)), "schedule", "must be a list per job or an object job name -> list")
    rows = data.items() if isinstance(data, Mapping) else enumerate(data)
    for key, choices in rows:
        where = f"schedule.{key}" if isinstance(data, Mapping) else f"schedule[{key}]"
        require(isinstance(choices, list), where, f"must be a list of segment choices, got {choices!r}")
        for c in choices:
            require(isinstance(c, int) and not isinstance(c, bool), where,
                    f"choices must be integers (-1 = pause, else a mode index), got {c!r}")
    if inst is not None and isinstance(data, Mapping):
        unknown = sorted(set(data) - {job.name for job in inst.jobs})
        require(not unknown, "schedule", f"unknown job(s) {', '.join(unknown)}; the instance's jobs: "
                f"{', '.join(job.name for job in inst.jobs)}")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(
        prog="python -m aidc_env.simulate",
        description="Score any schedule of an instance with the simulator (the single source of every cost "
        "and metric). The schedule gives, per job and per checkpoint segment, a mode index or -1 for pause.",
    )
    parser.add_argument("--instance", required=True, help="instance JSON (python -m aidc_env.case --json)")
    parser.add_argument("--schedule", required=True,
                        help='schedule JSON: [[...], [...]], {"LLM-A": [...], ...} or an oracle output')
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    parser.add_argument("--flows", action="store_true", help="with --json, include the per-slot flows")
    args = parser.parse_args(argv)
    inst = load_instance(args.instance)
    result = simulate(inst, read_schedule(args.schedule, inst))
    if args.json:
        out: dict[str, Any] = {"metrics": result.metrics.to_dict(), "schedule": result.schedule_lists()}
        if args.flows:
            out["flows"] = {k: np.asarray(v).tolist() for k, v in asdict(result.flows).items()}
        print(dumps_json(out, indent=1))
    else:
        print(format_metrics(result.metrics))
    return 0


def format_metrics(m: Metrics) -> str:
    lines = [
        f"operating cost ${m.operating_cost_usd:,.2f} (grid ${m.grid_cost_usd:,.2f}, renewable "
        f"${m.renewable_cost_usd:,.2f}, curtailment penalty ${m.curtailment_penalty_usd:,.2f})",
        f"load {m.load_energy_mwh:.3f} MWh, grid {m.grid_energy_mwh:.3f} MWh, renewable used "
        f"{m.renewable_used_mwh:.3f} of {m.renewable_available_mwh:.3f} MWh, curtailment {m.curtailment_mwh:.3f} MWh, "
        f"green share {m.green_share:.2%}",
        f"peak {m.peak_gpus} GPUs ({'within' if m.capacity_ok else 'OVER'} capacity), tranches "
        f"{'met' if m.tranches_met else 'NOT met'}",
    ]
    if m.inference_gpu_hours or m.idle_value_usd:
        served = "served" if m.inference_served else "NOT served"
        lines.append(f"inference {m.inference_gpu_hours:,.0f} GPU-h ({served}), idle {m.idle_gpu_hours:,.0f} GPU-h "
                     f"worth ${m.idle_value_usd:,.2f}, objective ${m.objective_usd:,.2f}")
    for job in m.jobs:
        lines.append(f"  {job.name}: completion {job.completion:.4f}, modes used {job.modes_used}, "
                     f"switches {job.switches}, restarts {job.restarts}")
    if len(m.days) > 1:
        for day in m.days:
            tokens = ", ".join(f"{name} {x / 1e9:.3f} B" for name, x in day.tokens.items())
            lines.append(f"  {day.day}: operating cost ${day.operating_cost_usd:,.2f}, tokens {tokens}"
                         f"{'' if day.daily_minimums_met else ' (below the daily minimum)'}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(run_cli(main))
