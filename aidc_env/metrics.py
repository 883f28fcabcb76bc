"""What the simulator (:mod:`aidc_env.simulator`) reports: the metrics of a schedule (totals, per job, per day, per
site, per grid call), its per-slot flows, and their text form (:func:`format_metrics`).

Costs in $, energy in MWh, power in MW, time in hours unless a name says otherwise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from aidc_env.schedule import Schedule

@dataclass(frozen=True)
class JobMetrics:
    """One job: its tokens against its target (``completion`` = tokens / tranche; ``tranche_met`` also needs every
    day's minimum and, for fine-tuning, the target by its deadline), modes used, switches, (re)starts, running hours,
    GPU-hours and IT energy; per day its tokens and the daily minimum (min_daily_share × tranche / D); its kind and
    window [release_slot, deadline_slot); its moves between sites and the hours spent transferring checkpoints."""

    name: str
    tokens: float
    tranche_tokens: float
    completion: float
    tranche_met: bool
    modes_used: int
    switches: int
    restarts: int
    running_hours: float
    gpu_hours: float
    it_energy_mwh: float
    tokens_by_day: tuple[float, ...] = ()
    daily_min_tokens: float = 0.0
    daily_minimums_met: bool = True
    kind: str = "pretraining"
    release_slot: int = 0
    deadline_slot: int = 0
    moves: int = 0
    transfer_hours_lost: float = 0.0


@dataclass(frozen=True)
class EnergyMetrics:
    """Costs and energies of a stretch of slots (:func:`~aidc_env.simulator.energy_totals`)."""

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
class SiteMetrics(EnergyMetrics):
    """One site's energy figures (its price, plant and pool) and its own capacity check."""

    name: str
    peak_gpus: int
    capacity_ok: bool
    capacity_violation_slots: int
    gpu_hours: float
    """GPU-hours of the jobs and inference at this site (a move's destination holds the GPUs during the transfer)."""
    idle_gpu_hours: float
    idle_value_usd: float
    demand_charge_usd: float = 0.0
    """Under a tariff: its demand charges on this site's meter (in the operating cost; 0 without)."""
    fixed_charge_usd: float = 0.0
    """Under a tariff: its fixed charges of the horizon's days (in the operating cost; 0 without)."""


@dataclass(frozen=True)
class CallMetrics:
    """One grid call as delivered: its site's grid import against the baseline and the limit in each of its slots
    (``reduction_mw`` = baseline − import), ``delivered`` when no slot exceeds the limit, the payment and the penalty;
    per job its ``performance`` (tokens over the call / its baseline mode's over the same slots), whether every job's
    tier held (``tiers_met``) and ``weighted_performance``, the demonstration's measure: the mean performance weighted
    by each job's least allowed share of throughput, 1 − its tier's loss (1 without a tier)."""

    program: str
    site: str
    start_slot: int
    end_slot: int
    delivered: bool
    shortfall_slots: int
    baseline_mwh: float
    import_mwh: float
    reduction_mwh: float
    required_reduction_mwh: float
    shortfall_mwh: float
    reduction_share: float
    """Reduction / baseline energy over the call."""
    reduction_mw: tuple[float, ...]
    payment_usd: float
    penalty_usd: float
    performance: dict[str, float]
    tiers_met: bool
    weighted_performance: float


@dataclass(frozen=True)
class Metrics(EnergyMetrics):
    """Everything reported about a day or a horizon: totals over the sites; ``days`` per day and ``sites`` per site
    (one entry each for a one-site day); ``completion``, the lowest over the jobs; the inference GPU-hours (served
    first) and whether every site's pool holds them; the idle GPU-hours and their value; ``objective_usd``, what a
    dispatcher minimises (operating cost − idle value); ``feasible``: capacity held at every site, every target met
    by its deadline and inference served."""

    peak_gpus: int
    capacity_ok: bool
    capacity_violation_slots: int
    tranches_met: bool
    completion: float
    jobs: tuple[JobMetrics, ...]
    days: tuple[DayMetrics, ...] = ()
    inference_gpu_hours: float = 0.0
    inference_served: bool = True
    idle_gpu_hours: float = 0.0
    idle_value_usd: float = 0.0
    objective_usd: float = 0.0
    feasible: bool = True
    sites: tuple[SiteMetrics, ...] = ()
    calls: tuple[CallMetrics, ...] = ()
    calls_delivered: bool = True
    call_payment_usd: float = 0.0
    call_penalty_usd: float = 0.0
    tiers_met: bool = True
    training_lost_usd: float = 0.0
    """The training value of the tokens short of the baseline modes' over the horizon (negative: ahead of them)."""
    demand_charge_usd: float = 0.0
    """Under a tariff (``Instance.tariff``): the sites' demand charges, in the operating cost (the grid cost is then
    the tariff's energy charge)."""
    fixed_charge_usd: float = 0.0
    """Under a tariff: the sites' fixed charges of the horizon's days, in the operating cost."""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "jobs": {job.name: asdict(job) for job in self.jobs},
                "days": [asdict(day) for day in self.days], "sites": {site.name: asdict(site) for site in self.sites},
                "calls": [asdict(call) for call in self.calls]}


@dataclass(frozen=True)
class SlotFlows:
    """Per-slot arrays (length T) of one site, or of all sites together (sums; the price is the sites' mean)."""

    gpus_used: np.ndarray
    it_power_kw: np.ndarray
    load_mw: np.ndarray
    renewable_mw: np.ndarray
    renewable_used_mw: np.ndarray
    grid_mw: np.ndarray
    curtailment_mw: np.ndarray
    price_usd_per_mwh: np.ndarray
    decision_cost_usd: np.ndarray
    inference_gpus: np.ndarray
    """GPUs of the inference services per slot (included in ``gpus_used``)."""
    idle_value_usd: np.ndarray
    """Idle-GPU value credited per slot ($)."""


@dataclass(frozen=True)
class SimulationResult:
    """The metrics; the per-slot ``flows`` of all sites together and ``site_flows`` per site; the schedule; and (jobs,
    T) arrays of each job's choice (PAUSE or mode index) and site per slot."""

    metrics: Metrics
    flows: SlotFlows
    site_flows: tuple[SlotFlows, ...]
    schedule: Schedule
    job_choice: np.ndarray
    job_site: np.ndarray

    def to_dict(self, inst: Any, flows: bool = False) -> dict[str, Any]:
        out = {"metrics": self.metrics.to_dict(), **self.schedule.to_dict(inst)}
        if flows:
            out["flows"] = {k: np.asarray(v).tolist() for k, v in asdict(self.flows).items()}
            if len(self.site_flows) > 1:
                out["site_flows"] = {site.name: {k: np.asarray(v).tolist() for k, v in asdict(f).items()}
                                     for site, f in zip(self.metrics.sites, self.site_flows, strict=True)}
        return out



def format_metrics(m: Metrics) -> str:
    lines = [f"operating cost ${m.operating_cost_usd:,.2f} (grid ${m.grid_cost_usd:,.2f}, renewable "
             f"${m.renewable_cost_usd:,.2f}, curtailment penalty ${m.curtailment_penalty_usd:,.2f})",
             f"load {m.load_energy_mwh:.3f} MWh, grid {m.grid_energy_mwh:.3f} MWh, renewable used "
             f"{m.renewable_used_mwh:.3f} of {m.renewable_available_mwh:.3f} MWh, curtailment {m.curtailment_mwh:.3f} "
             f"MWh, green share {m.green_share:.2%}",
             f"peak {m.peak_gpus} GPUs ({'within' if m.capacity_ok else 'OVER'} capacity), tranches "
             f"{'met' if m.tranches_met else 'NOT met'}"]
    if m.demand_charge_usd or m.fixed_charge_usd:
        lines.append(f"bill: energy ${m.grid_cost_usd:,.2f}, demand charges ${m.demand_charge_usd:,.2f}, fixed "
                     f"${m.fixed_charge_usd:,.2f} (in the operating cost)")
    if m.inference_gpu_hours or m.idle_value_usd:
        served = "served" if m.inference_served else "NOT served"
        lines.append(f"inference {m.inference_gpu_hours:,.0f} GPU-h ({served}), idle {m.idle_gpu_hours:,.0f} GPU-h "
                     f"worth ${m.idle_value_usd:,.2f}, objective ${m.objective_usd:,.2f}")
    for job in m.jobs:
        moved = f", {job.moves} moves ({job.transfer_hours_lost:.3f} h transferring)" if job.moves else ""
        lines.append(f"  {job.name}: completion {job.completion:.4f}, modes used {job.modes_used}, "
                     f"switches {job.switches}, restarts {job.restarts}{moved}")
    for call in m.calls:
        delivered = "delivered" if call.delivered else f"NOT delivered in {call.shortfall_slots} slots"
        lines.append(f"  call {call.program} at {call.site}, slots {call.start_slot}-{call.end_slot}: {delivered}, "
                     f"reduction {call.reduction_mwh:.4f} MWh ({call.reduction_share:.1%} of the baseline), payment "
                     f"${call.payment_usd:,.2f}, penalty ${call.penalty_usd:,.2f}, weighted performance "
                     f"{call.weighted_performance:.3f}{'' if call.tiers_met else ' (a tier NOT met)'}")
    if m.training_lost_usd:
        lines.append(f"training lost ${m.training_lost_usd:,.2f}, objective ${m.objective_usd:,.2f}")
    if len(m.sites) > 1:
        for site in m.sites:
            lines.append(f"  site {site.name}: operating cost ${site.operating_cost_usd:,.2f}, load "
                         f"{site.load_energy_mwh:.3f} MWh, renewable used {site.renewable_used_mwh:.3f} of "
                         f"{site.renewable_available_mwh:.3f} MWh, peak {site.peak_gpus} GPUs "
                         f"({'within' if site.capacity_ok else 'OVER'} capacity)")
    if len(m.days) > 1:
        for day in m.days:
            tokens = ", ".join(f"{name} {x / 1e9:.3f} B" for name, x in day.tokens.items())
            lines.append(f"  {day.day}: operating cost ${day.operating_cost_usd:,.2f}, tokens {tokens}"
                         f"{'' if day.daily_minimums_met else ' (below the daily minimum)'}")
    return "\n".join(lines)
