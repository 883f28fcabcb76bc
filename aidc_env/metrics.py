"""What the simulator reports (:func:`aidc_env.simulator.simulate`): totals, per job, per day, per site, per slot.

Costs in $, energy in MWh, power in MW, time in hours unless a name says otherwise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from aidc_env.schedule import Schedule


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
    moves: int = 0
    """Segments whose site differs from the previous one's (the home site before segment 0)."""
    transfer_hours_lost: float = 0.0
    """Hours of running segments spent copying the checkpoint in from another site (no tokens)."""


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


@dataclass(frozen=True)
class Metrics(EnergyMetrics):
    """Everything reported about a day or a horizon: totals over the sites; ``days`` per day, ``sites`` per site."""

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
    """Every site's pool holds its inference GPUs in every slot (they come first; a breach beyond it is the jobs')."""
    idle_gpu_hours: float = 0.0
    """GPU-hours left idle (neither a job nor inference)."""
    idle_value_usd: float = 0.0
    """Idle GPU-hours × ``idle_value_usd_per_gpu_hour``."""
    objective_usd: float = 0.0
    """What a dispatcher minimises: operating cost − idle value (the operating cost when there is no idle value)."""
    feasible: bool = True
    """Capacity held at every site, every target met by its deadline and inference served."""
    sites: tuple[SiteMetrics, ...] = ()
    """Per site (one entry for a one-site instance)."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["jobs"] = {job.name: asdict(job) for job in self.jobs}
        data["days"] = [asdict(day) for day in self.days]
        data["sites"] = {site.name: asdict(site) for site in self.sites}
        return data


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
    metrics: Metrics
    flows: SlotFlows
    """Per slot, all sites together (the site's own flows with one site)."""
    site_flows: tuple[SlotFlows, ...]
    """Per site, its per-slot flows."""
    schedule: Schedule
    job_choice: np.ndarray
    """(jobs, T): each job's choice per slot (PAUSE or mode index)."""
    job_site: np.ndarray
    """(jobs, T): each job's site per slot."""

    def to_dict(self, inst: Any, flows: bool = False) -> dict[str, Any]:
        out = {"metrics": self.metrics.to_dict(), **self.schedule.to_dict(inst)}
        if flows:
            out["flows"] = {k: np.asarray(v).tolist() for k, v in asdict(self.flows).items()}
            if len(self.site_flows) > 1:
                out["site_flows"] = {site.name: {k: np.asarray(v).tolist() for k, v in asdict(f).items()}
                                     for site, f in zip(self.metrics.sites, self.site_flows, strict=True)}
        return out
