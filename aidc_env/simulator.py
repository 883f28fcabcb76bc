"""The simulator: the one place where costs and metrics are computed, for one site or several.

:func:`simulate` turns an instance and a :class:`~aidc_env.schedule.Schedule` (per job, per checkpoint segment: a mode
index or ``PAUSE``, and a site) into :class:`Metrics` plus per-slot flows. The env, the oracle (its objective and its
precomputed costs), the baselines and every report call the functions of this module:

- :func:`facility_load_mw`: L = PUE · [Σ P + (N − Σ n) · P_idle] / 1000;
- :func:`renewable_first`: u = min(L, R), g = L − u, c = R − u;
- :func:`slot_decision_cost_usd`: λ g Δ + c_cur c Δ (the part of the cost that decisions change);
- :func:`segment_productive_hours`: segment hours minus the checkpoint load after a (re)start;
- :func:`pool_load_mw`: the facility load of the jobs' GPUs and power *plus the inference services'*;
- :func:`slot_idle_value_usd`: the idle-GPU value credited in each slot.

Inference GPUs (:mod:`aidc_env.workloads`) come out of the pool first: they count in the capacity check, draw their own
power and are never idle. A fine-tuning job runs only inside its window (``validate_schedule`` refuses a schedule that
runs it outside) and its target is due by the deadline. The objective is ``Metrics.objective_usd`` = operating cost −
idle-GPU value.

An instance of D days is one time axis (restarts are judged across midnight like any other boundary); ``Metrics`` holds
the horizon's totals and, in ``days``, each day's; a job's tranche is met when the horizon target *and* every day's
minimum are. Sites (:mod:`aidc_env.sites`): every function reads one site (``Instance.site_views``); each site's load is
that of the jobs and inference it holds, renewable first against its own plant at its own price; totals are the sums
over the sites. A (re)start is a change of (mode, site); a move into a running segment also loses the job's transfer
time (:func:`job_segments`). With one site every number is the day model's.

The grid's side (:mod:`aidc_env.grid`): a schedule's GPU power caps (a level position per job and slot) scale each
running job's tokens/s and IT power slot by slot (tokens are then counted slot by slot: :func:`slot_token_hours`);
each grid call is scored on its site's grid import (:class:`CallMetrics`: the reduction per slot, delivery, payment,
penalty, each job's performance over the call against its baseline and the demonstration's weighted performance); a
training value counts tokens short of the baseline's as training lost. The objective adds penalties and training lost
and subtracts payments. Without caps, calls or a training value every number is computed as before they existed.

The bill (:mod:`aidc_env.billing`): under a utility tariff (``Instance.tariff``) the price of a slot is the tariff's
energy rate, and each site's demand charges (on its meter's highest import in each charge's slots) and fixed charges
join its operating cost (``demand_charge_usd``, ``fixed_charge_usd``; a month's charges belong to no day). A
coincident-peak charge (``Instance.coincident_peak``, :mod:`aidc_env.coincident`) is demand charges on the system's
peak hours, in ``demand_charge_usd`` too, with a tariff or at the LMP; the itemised bill (:func:`site_bills`) shows it
as lines of its own.

Costs in $, energy in MWh, power in MW, time in hours unless a name says otherwise.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from aidc_env.errors import CliParser, run_cli
from aidc_env.grid import CAP_TOLERANCE_MW, GridCall
from aidc_env.instance import SECONDS_PER_HOUR, Instance, Job, load_instance
from aidc_env.io import dumps_json
from aidc_env.metrics import (CallMetrics, DayMetrics, JobMetrics, Metrics, SimulationResult, SiteMetrics, SlotFlows,
                              format_metrics)
from aidc_env.schedule import (PAUSE, Schedule, moves, previous, read_schedule, slot_choices, switches,
                               validate_schedule)

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
    """Idle-GPU value of each slot ($): value per GPU-hour × idle GPUs × Δ (``gpus_used``: inference included). The
    slot's objective is its decision cost minus this."""
    return inst.idle_value_usd_per_gpu_hour * idle_gpus(inst, gpus_used) * inst.slot_hours


def renewable_first(load_mw: np.ndarray, renewable_mw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Renewable first, no export: (renewable used u, grid import g, curtailment c), all MW."""
    used = np.minimum(load_mw, renewable_mw)
    return used, load_mw - used, renewable_mw - used


def slot_decision_cost_usd(inst: Instance, grid_mw: np.ndarray, curtailment_mw: np.ndarray,
                           slots: slice | np.ndarray | int = slice(None)) -> np.ndarray:
    """Grid cost plus curtailment penalty of each slot ($): λ_t g_t Δ + c_cur c_t Δ."""
    price = inst.price_usd_per_mwh[slots]
    return (price * grid_mw + inst.curtailment_penalty_usd_per_mwh * curtailment_mw) * inst.slot_hours


def segment_productive_hours(inst: Instance, job: Job, restarted: np.ndarray | bool) -> np.ndarray:
    """Hours of a running segment that make tokens: the segment minus τ_j after a (re)start."""
    return inst.segment_hours(job) - job.restart_hours * np.asarray(restarted, dtype=float)


def slot_productive_hours(inst: Instance, job: Job, offset_in_segment: int, restarted: bool) -> float:
    """Token-making hours of one slot (``offset_in_segment`` slots after the boundary).

    The checkpoint load occupies the first τ_j hours of a restarted segment, possibly spanning slots; summed over a
    segment this equals :func:`segment_productive_hours`.
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
    return {"operating_cost_usd": grid_cost + renewable_cost + penalty, "grid_cost_usd": grid_cost,
            "renewable_cost_usd": renewable_cost, "curtailment_penalty_usd": penalty,
            "decision_cost_usd": float(np.sum(decision)), "load_energy_mwh": load_mwh,
            "grid_energy_mwh": float(np.sum(grid) * dt), "renewable_available_mwh": float(np.sum(renewable) * dt),
            "renewable_used_mwh": float(np.sum(used) * dt), "curtailment_mwh": float(np.sum(curtailment) * dt),
            "green_share": float(np.sum(used) * dt / load_mwh) if load_mwh > 0 else 0.0,
            "peak_load_mw": float(load_mw.max()), "peak_grid_mw": float(grid.max())}


# ------------------------------------------------------------------------------ the schedule's tokens


def job_segments(inst: Instance, j: int, choices: np.ndarray, sites: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per segment of job j: (running, restarted, moved into a running segment, productive hours).

    A (re)start is a change of mode or site from the previous segment (from the initial mode at the home site before
    segment 0), pauses included; it loses τ_j, and a move into a running segment also the transfer time."""
    job = inst.jobs[j]
    running = choices != PAUSE
    restarted = running & ((choices != previous(job.initial_mode, choices))
                           | (sites != previous(inst.home_sites[j], sites)))
    moved = running & moves(inst.home_sites[j], sites)
    productive = segment_productive_hours(inst, job, restarted)
    if moved.any():
        productive = productive - inst.transfer_hours[j] * moved
    return running, restarted, moved, np.where(running, productive, 0.0)


def slot_token_hours(inst: Instance, j: int, choices: np.ndarray, sites: np.ndarray) -> np.ndarray:
    """Per slot, the hours job j makes tokens: the slot, less the part of a (re)started segment's first τ_j hours (and
    transfer time after a move) that falls in it; 0 where it pauses. Summed over a segment: its productive hours."""
    job = inst.jobs[j]
    running, restarted, moved, _ = job_segments(inst, j, choices, sites)
    per = inst.slots_per_segment(job)
    lost = job.restart_hours * restarted + inst.transfer_hours[j] * moved
    offset = np.tile(np.arange(per) * inst.slot_hours, job.segments)
    lost_in_slot = np.clip(np.repeat(lost, per) - offset, 0.0, inst.slot_hours)
    return np.where(np.repeat(running, per), inst.slot_hours - lost_in_slot, 0.0)


def slot_tokens(inst: Instance, j: int, choices: np.ndarray, sites: np.ndarray,
                caps: np.ndarray | None = None) -> np.ndarray:
    """Tokens job j makes in each slot: its mode's tokens/s × the cap's throughput factor × its token hours."""
    job = inst.jobs[j]
    rate = job.tokens_per_s_by_choice[slot_choices(inst, job, choices)] * SECONDS_PER_HOUR
    if caps is not None:
        rate = rate * inst.cap_curve.throughput_at(caps)
    return rate * slot_token_hours(inst, j, choices, sites)


def baseline_tokens(inst: Instance, job: Job, slots: slice) -> float:
    """Tokens the job's baseline mode makes over ``slots`` within its window, held without a restart."""
    release, deadline = inst.job_window(job)
    lo, hi = max(slots.start or 0, release), min(inst.slots if slots.stop is None else slots.stop, deadline)
    return job.baseline_rate[1] * SECONDS_PER_HOUR * max(hi - lo, 0) * inst.slot_hours


def _tokens(job: Job, choices: np.ndarray, running: np.ndarray, productive_hours: np.ndarray) -> float:
    """Tokens of the running segments given: hours per mode first, then tokens, so that a mode held all day gives
    exactly r · 3600 · 24 = its default tranche."""
    hours_by_mode = np.bincount(choices[running], weights=productive_hours[running], minlength=job.n_modes)
    return float(np.sum(job.tokens_per_s_by_choice[:-1] * SECONDS_PER_HOUR * hours_by_mode))


def reaches(tokens: float, target: float) -> bool:
    """Whether tokens meet a target, up to :data:`TRANCHE_TOLERANCE` (floating-point rounding only)."""
    return bool(tokens >= target * (1 - TRANCHE_TOLERANCE))


def _job_metrics(inst: Instance, j: int, choices: np.ndarray, sites: np.ndarray, caps: np.ndarray | None,
                 made: np.ndarray | None) -> JobMetrics:
    """Job j's metrics (``made``: its tokens per slot, given when it is capped)."""
    job = inst.jobs[j]
    running, restarted, moved, productive_h = job_segments(inst, j, choices, sites)
    per_slot = slot_choices(inst, job, choices)
    per_day = inst.segments_per_day(job)
    if caps is None:
        tokens = _tokens(job, choices, running, productive_h)
        by_day = (tokens,) if inst.horizon_days == 1 else tuple(
            _tokens(job, choices[d], running[d], productive_h[d])
            for d in (slice(k * per_day, (k + 1) * per_day) for k in range(inst.horizon_days)))
        it_kw = job.it_power_kw_by_choice[per_slot]
    else:  # capped slots make tokens at their own rate: counted slot by slot
        tokens = float(np.sum(made))
        by_day = tuple(float(np.sum(made[inst.day_slots(d)])) for d in range(inst.horizon_days))
        it_kw = inst.cap_curve.it_power_kw(job.it_power_kw_by_choice[per_slot], job.gpus_by_choice[per_slot], caps)
    daily_min = inst.daily_min_tokens(job)
    minimums_met = all(reaches(x, daily_min) for x in by_day)
    release, deadline = inst.job_window(job)
    return JobMetrics(name=job.name, tokens=tokens, tranche_tokens=job.tranche_tokens,
                      completion=tokens / job.tranche_tokens if job.tranche_tokens > 0 else 1.0,
                      tranche_met=reaches(tokens, job.tranche_tokens) and minimums_met,
                      modes_used=int(np.unique(choices[running]).size), switches=int(switches(job, choices).sum()),
                      restarts=int(restarted.sum()), running_hours=float(running.sum() * inst.segment_hours(job)),
                      gpu_hours=float(np.sum(job.gpus_by_choice[per_slot]) * inst.slot_hours),
                      it_energy_mwh=float(np.sum(it_kw) * inst.slot_hours / 1000.0),
                      tokens_by_day=by_day, daily_min_tokens=daily_min, daily_minimums_met=minimums_met, kind=job.kind,
                      release_slot=release, deadline_slot=deadline, moves=int(moves(inst.home_sites[j], sites).sum()),
                      transfer_hours_lost=float(inst.transfer_hours[j] * moved.sum()))


# ------------------------------------------------------------------------------ simulate

_ADDITIVE = ("operating_cost_usd", "grid_cost_usd", "renewable_cost_usd", "curtailment_penalty_usd",
             "decision_cost_usd", "load_energy_mwh", "grid_energy_mwh", "renewable_available_mwh",
             "renewable_used_mwh", "curtailment_mwh", "demand_charge_usd", "fixed_charge_usd")


def _sum_energy(per_site: Sequence[dict[str, float]], flows: Sequence[SlotFlows], slots: slice) -> dict[str, float]:
    """The energy figures of several sites together: sums, the green share of the sums, the peaks of the sums. With one
    site, that site's figures unchanged."""
    if len(per_site) == 1:
        return dict(per_site[0])
    out = {key: float(sum(e[key] for e in per_site)) for key in _ADDITIVE if key in per_site[0]}
    out["green_share"] = out["renewable_used_mwh"] / out["load_energy_mwh"] if out["load_energy_mwh"] > 0 else 0.0
    out["peak_load_mw"] = float(sum(f.load_mw[slots] for f in flows).max())
    out["peak_grid_mw"] = float(sum(f.grid_mw[slots] for f in flows).max())
    return out


def _site_flows(view: Instance, gpus: np.ndarray, it_kw: np.ndarray) -> tuple[dict[str, float], SlotFlows]:
    """One site's energy totals and per-slot flows (the jobs' GPUs and IT power given; its inference added)."""
    if view.inference:  # served first: its GPUs and power join the jobs' (skipped without, bit for bit as before)
        gpus = gpus + view.inference_gpus
        it_kw = it_kw + view.inference_it_kw
    load = facility_load_mw(view, gpus, it_kw)
    energy, (used, grid, curtailment, decision) = energy_accounting(view, load)
    if view.tariff_terms is not None:  # the month's demand charges on the site's meter, and the fixed charges
        energy["demand_charge_usd"] = view.tariff_terms.demand_usd(grid)
        energy["fixed_charge_usd"] = view.tariff_terms.fixed_usd
        energy["operating_cost_usd"] += energy["demand_charge_usd"] + energy["fixed_charge_usd"]
    return energy, SlotFlows(gpus_used=gpus, it_power_kw=it_kw, load_mw=load, renewable_mw=view.renewable_mw,
                             renewable_used_mw=used, grid_mw=grid, curtailment_mw=curtailment,
                             price_usd_per_mwh=view.price_usd_per_mwh, decision_cost_usd=decision,
                             inference_gpus=view.inference_gpus, idle_value_usd=slot_idle_value_usd(view, gpus))


def _totals(flows: Sequence[SlotFlows]) -> SlotFlows:
    """All sites' flows together (sums; the price is the sites' mean)."""
    if len(flows) == 1:
        return flows[0]
    return SlotFlows(**{name: sum(getattr(f, name) for f in flows) for name in SlotFlows.__dataclass_fields__
                        if name != "price_usd_per_mwh"},
                     price_usd_per_mwh=np.mean([f.price_usd_per_mwh for f in flows], axis=0))


def simulate(inst: Instance, schedule: Schedule | Sequence[Sequence[int]] | Mapping[str, Sequence[int]]
             ) -> SimulationResult:
    """Score a schedule exactly, on one site or several. Capacity breaches are reported, not raised."""
    sched = validate_schedule(inst, schedule)
    views = inst.site_views
    S, T = len(views), inst.slots
    gpus = np.zeros((S, T), dtype=np.int64)
    it_kw = np.zeros((S, T))
    job_choice = np.empty((len(inst.jobs), T), dtype=np.int64)
    job_site = np.empty((len(inst.jobs), T), dtype=np.int64)
    caps = _cap_rows(sched)
    for j, (job, choices, sites) in enumerate(zip(inst.jobs, sched.modes, sched.sites, strict=True)):
        per_slot = job_choice[j] = slot_choices(inst, job, choices)
        site_slot = job_site[j] = slot_choices(inst, job, sites)
        for s in range(S):  # accumulated in job order (one site: exactly the day model's sums)
            here = per_slot if S == 1 else np.where(site_slot == s, per_slot, PAUSE)
            gpus[s] += job.gpus_by_choice[here]
            power = job.it_power_kw_by_choice[here]
            it_kw[s] += power if caps[j] is None else inst.cap_curve.it_power_kw(power, job.gpus_by_choice[here],
                                                                               caps[j])
    per_slot_tokens = bool(inst.grid_calls) or inst.training_value_usd_per_gpu_hour > 0  # calls and value need them
    made = [slot_tokens(inst, j, choices, sites, caps[j]) if caps[j] is not None or per_slot_tokens else None
            for j, (choices, sites) in enumerate(zip(sched.modes, sched.sites, strict=True))]
    job_metrics = tuple(_job_metrics(inst, j, choices, sites, caps[j], made[j])
                        for j, (choices, sites) in enumerate(zip(sched.modes, sched.sites, strict=True)))
    energies, flows = zip(*(_site_flows(view, gpus[s], it_kw[s]) for s, view in enumerate(views)), strict=True)
    site_metrics = []
    for s, (view, energy, f) in enumerate(zip(views, energies, flows, strict=True)):
        over = f.gpus_used > view.n_gpus
        site_metrics.append(SiteMetrics(**energy, name=inst.sites[s].name, peak_gpus=int(f.gpus_used.max()),
                                        capacity_ok=not bool(over.any()), capacity_violation_slots=int(over.sum()),
                                        gpu_hours=float(f.gpus_used.sum() * inst.slot_hours),
                                        idle_gpu_hours=float(np.sum(idle_gpus(view, f.gpus_used)) * inst.slot_hours),
                                        idle_value_usd=float(np.sum(f.idle_value_usd))))
    total = _totals(flows)
    days = []
    for d, day in enumerate(inst.days):
        tokens_today = {m.name: m.tokens_by_day[d] for m in job_metrics}
        slots = inst.day_slots(d)
        energy = energies if inst.horizon_days == 1 and inst.tariff_terms is None else [  # monthly: no day's
            energy_totals(view, f.load_mw, (f.renewable_used_mw, f.grid_mw, f.curtailment_mw, f.decision_cost_usd),
                          slots) for view, f in zip(views, flows, strict=True)]
        days.append(DayMetrics(
            day=day, **_sum_energy(energy, flows, slots), tokens=tokens_today,
            daily_minimums_met=all(reaches(tokens_today[job.name], inst.daily_min_tokens(job)) for job in inst.jobs)))
    idle_value_usd = float(np.sum(total.idle_value_usd))
    totals = _sum_energy(energies, flows, slice(None))
    capacity_ok = all(m.capacity_ok for m in site_metrics)
    tranches_met = all(m.tranche_met for m in job_metrics)
    inference_served = all(bool(np.all(view.inference_gpus <= view.n_gpus)) for view in views)
    grid_terms = _grid_side(inst, made, flows) if per_slot_tokens else {"objective_usd": 0.0, "tiers_met": True}
    metrics = Metrics(
        **totals, peak_gpus=int(total.gpus_used.max()), capacity_ok=capacity_ok,
        capacity_violation_slots=int(sum(m.capacity_violation_slots for m in site_metrics)),
        tranches_met=tranches_met, completion=min(m.completion for m in job_metrics), jobs=job_metrics,
        days=tuple(days), inference_gpu_hours=float(np.sum(inst.inference_gpus) * inst.slot_hours),
        inference_served=inference_served, idle_gpu_hours=float(sum(m.idle_gpu_hours for m in site_metrics)),
        idle_value_usd=idle_value_usd,
        objective_usd=(totals["operating_cost_usd"] - idle_value_usd if idle_value_usd
                       else totals["operating_cost_usd"]) + grid_terms.pop("objective_usd"),
        feasible=capacity_ok and tranches_met and inference_served and grid_terms["tiers_met"],
        sites=tuple(site_metrics), **grid_terms)
    return SimulationResult(metrics=metrics, flows=total, site_flows=tuple(flows), schedule=sched,
                            job_choice=job_choice, job_site=job_site)


def call_slot_usd(call: GridCall, grid_mw: np.ndarray, slot_hours: float,
                  slots: slice = slice(None)) -> tuple[np.ndarray, np.ndarray]:
    """(payment, penalty) of a call's slots ``slots`` (positions within the call) whose grid import is ``grid_mw`` ($
    per slot): the program's $/MWh on the import below the baseline, and its penalty on the import above the limit.
    The payment per MW committed is paid once, on delivery (:func:`_call_metrics`)."""
    payment = call.payment_usd_per_mwh * np.maximum(call.baseline_mw[slots] - grid_mw, 0.0) * slot_hours
    return payment, call.penalty_usd_per_mwh * np.maximum(grid_mw - call.limit_mw[slots], 0.0) * slot_hours


def _call_metrics(inst: Instance, call: GridCall, flows: SlotFlows, made: Sequence[np.ndarray]) -> CallMetrics:
    """One call scored on its site's grid import and the jobs' tokens per slot (``made``)."""
    dt = inst.slot_hours
    grid = flows.grid_mw[call.slots]
    reduction = call.baseline_mw - grid
    over = np.maximum(grid - call.limit_mw, 0.0)
    payment, penalty = call_slot_usd(call, grid, dt)
    short = over > CAP_TOLERANCE_MW
    delivered = not bool(short.any())
    performance, tiers_met, weights = {}, True, []
    for job, tokens in zip(inst.jobs, made, strict=True):
        reference = baseline_tokens(inst, job, call.slots)
        if reference <= 0:
            continue
        performance[job.name] = float(np.sum(tokens[call.slots])) / reference
        floor = 1.0 if job.max_throughput_loss is None else 1.0 - job.max_throughput_loss
        tiers_met &= job.max_throughput_loss is None or reaches(performance[job.name], floor)
        weights.append(floor)
    values = list(performance.values())
    baseline_mwh = float(np.sum(call.baseline_mw) * dt)
    return CallMetrics(
        program=call.program, site=inst.sites[call.site].name, start_slot=call.start_slot, end_slot=call.end_slot,
        delivered=delivered, shortfall_slots=int(short.sum()), baseline_mwh=baseline_mwh,
        import_mwh=float(np.sum(grid) * dt), reduction_mwh=float(np.sum(reduction) * dt),
        required_reduction_mwh=float(np.sum(call.baseline_mw - call.limit_mw) * dt),
        shortfall_mwh=float(np.sum(over) * dt),
        reduction_share=float(np.sum(reduction) * dt / baseline_mwh) if baseline_mwh > 0 else 0.0,
        reduction_mw=tuple(float(x) for x in reduction),
        payment_usd=float(np.sum(payment)) + (call.payment_usd_per_mw * max(call.committed_mw, 0.0) if delivered
                                              else 0.0),
        penalty_usd=float(np.sum(penalty)), performance=performance,
        tiers_met=bool(tiers_met),
        weighted_performance=float(np.average(values, weights=weights)) if values else 1.0)


def _cap_rows(sched: Schedule) -> tuple[np.ndarray | None, ...]:
    """Per job its cap positions, None for a job never capped (scored as before caps existed)."""
    if sched.caps is None:
        return (None,) * len(sched.modes)
    return tuple(row if row.any() else None for row in sched.caps)


def _grid_side(inst: Instance, made: Sequence[np.ndarray], flows: Sequence[SlotFlows]) -> dict[str, Any]:
    """The calls' metrics, their payments and penalties, the training lost, and what they add to the objective, from
    the jobs' tokens per slot (``made``)."""
    calls = tuple(_call_metrics(inst, call, flows[call.site], made) for call in inst.grid_calls)
    lost = sum(inst.token_value_usd(job) * (baseline_tokens(inst, job, slice(None)) - float(np.sum(tokens)))
               for job, tokens in zip(inst.jobs, made, strict=True))
    payment = sum(c.payment_usd for c in calls)
    penalty = sum(c.penalty_usd for c in calls)
    return {"objective_usd": penalty - payment + lost, "calls": calls,
            "calls_delivered": all(c.delivered for c in calls), "call_payment_usd": payment,
            "call_penalty_usd": penalty, "tiers_met": all(c.tiers_met for c in calls), "training_lost_usd": lost}


# ------------------------------------------------------------------------------ command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(
        prog="python -m aidc_env.simulate",
        description="Score any schedule of an instance with the simulator (the single source of every cost and "
        "metric). The schedule gives, per job and per checkpoint segment, a mode index or -1 for pause; for an "
        'instance with several sites, {"schedule": ..., "sites": ...} also gives each segment\'s site.')
    parser.add_argument("--instance", required=True, help="instance JSON (python -m aidc_env.case --json)")
    parser.add_argument("--schedule", required=True,
                        help='schedule JSON: [[...], [...]], {"LLM-A": [...], ...}, {"schedule": ..., "sites": ...} '
                        "or an oracle output")
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    parser.add_argument("--flows", action="store_true", help="with --json, include the per-slot flows")
    parser.add_argument("--tariff", metavar="NAME|FILE", help="also the bill of each site's grid import under a "
                        "utility tariff (a bundled name, python -m aidc_env.tariffs --list, or a URDB JSON file; "
                        "default: the instance's own tariff, if any)")
    args = parser.parse_args(argv)
    tariff = None
    if args.tariff is not None:
        from aidc_env.tariffs import load_tariff

        tariff = load_tariff(args.tariff)
    inst = load_instance(args.instance)
    tariff = tariff if tariff is not None else inst.tariff
    result = simulate(inst, read_schedule(args.schedule, inst))
    bills = site_bills(inst, result, tariff) if tariff is not None or inst.coincident_peak is not None else {}
    if args.json:
        print(dumps_json({**result.to_dict(inst, flows=args.flows),
                          **({"bills": {name: b.to_dict() for name, b in bills.items()}} if bills else {})}, indent=1))
    else:
        print(format_metrics(result.metrics))
        for name, b in bills.items():
            print(bill_line(name, b))
    return 0


def bill_line(site: str, bill: Any) -> str:
    """A site's bill in one line (:class:`aidc_env.tariffs.Bill`); with coincident-peak charges
    (:class:`aidc_env.coincident.PeakBill`), their total in it and one more line per peak hour."""
    from aidc_env.coincident import PeakBill

    peak = isinstance(bill, PeakBill)
    coincident = f", coincident peak ${bill.coincident_usd:,.2f}" if peak else ""
    return "\n".join([f"bill at {site} under {bill.tariff}: ${bill.total_usd:,.2f} (energy ${bill.energy_usd:,.2f}, "
                      f"demand ${bill.demand_usd:,.2f}, fixed ${bill.fixed_usd:,.2f}{coincident})",
                      *(bill.lines() if peak else ())])


def site_bills(inst: Instance, result: SimulationResult, tariff: Any) -> dict[str, Any]:
    """Per site, the bill of its grid import (kW per slot, from the instance's first day) under ``tariff``
    (:func:`aidc_env.tariffs.bill`), itemised per month. Under the instance's own tariff (``inst.tariff``) its total is
    the metrics' grid cost + demand + fixed charges; under another, a report beside the metrics. With a coincident-peak
    charge (``inst.coincident_peak``) each bill is a :class:`~aidc_env.coincident.PeakBill`: the tariff's (``tariff``
    None: the import at the real-time LMP) with a line per peak hour of the horizon."""
    import datetime as dt

    from aidc_env.coincident import PeakBill, coincident_lines
    from aidc_env.tariffs import bill

    start = dt.date.fromisoformat(inst.day)
    bills = {site.name: bill(tariff, flows.grid_mw * 1000.0, start, slot_hours=inst.slot_hours)
             for site, flows in zip(inst.sites, result.site_flows, strict=True)} if tariff is not None else {}
    peak = inst.coincident_peak
    if peak is None:
        return bills
    return {site.name: PeakBill(
        name=f"{tariff.name if tariff is not None else 'real-time LMP'} + {peak.name}", start=start,
        tariff_bill=bills.get(site.name), lmp_energy_usd=0.0 if tariff is not None else metrics.grid_cost_usd,
        coincident=coincident_lines(view.tariff_terms, flows.grid_mw))
        for site, view, flows, metrics in zip(inst.sites, inst.site_views, result.site_flows, result.metrics.sites,
                                              strict=True)}



if __name__ == "__main__":
    sys.exit(run_cli(main))
