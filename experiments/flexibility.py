"""Load models for the flexibility comparison (study ``flexibility``).

(a) fixed continuous and (d) checkpoint-aware 3D dispatch are the baseline and the oracle; this
module adds the restricted and the idealised models:

- (b) :func:`restrict_to_baseline_mode`: pause/resume at checkpoints, one fixed mode per job;
- (c) 3D modes without pausing: the oracle with ``allow_pause=False``;
- (e) :func:`continuous_power_optimum`: the "continuously adjustable power" load model that the
  research criticises — each job may draw any power between 0 and its largest mode's power in any
  slot, with tokens proportional to energy at its most efficient mode's energy per token and GPUs
  proportional to power; no checkpoints, no restarts, no discrete modes. It is solved exactly
  (a small MILP: an LP plus renewable-first binaries in slots where importing more would pay) and its
  load profile is scored by the simulator's :func:`~aidc_env.simulator.energy_accounting`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyomo.environ as pyo

from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.simulator import energy_accounting, facility_load_mw


def restrict_to_baseline_mode(inst: Instance) -> Instance:
    """Each job keeps only its baseline mode (pause still allowed): model (b)."""
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
    """Metrics of the load profile, named as the studies' columns."""


def continuous_power_optimum(inst: Instance, solver: str = "appsi_highs") -> ContinuousResult:
    """Model (e): the cheapest day when every job's power is continuously adjustable."""
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
    columns = {k: totals[k] for k in ("operating_cost_usd", "grid_cost_usd", "grid_energy_mwh", "curtailment_mwh",
                                      "green_share", "load_energy_mwh")}
    columns["modes_used"] = "continuous"
    return ContinuousResult(status=status, it_power_kw=it_kw, gpus_used=gpus, columns=columns)
