"""Baseline schedules (DESIGN §2): fixed continuous, a greedy threshold rule, random.

Each baseline returns a schedule (per job, per checkpoint segment: mode index or ``PAUSE``) that the
simulator scores; none computes a cost of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aidc_env.case import PAUSE, Instance, Job
from aidc_env.simulator import facility_load_mw, simulate


def fixed_schedule(inst: Instance) -> list[list[int]]:
    """Fixed continuous training: every job runs its baseline mode all day (no restart)."""
    return [[job.baseline_mode] * job.segments for job in inst.jobs]


@dataclass(frozen=True)
class GreedyParams:
    """Thresholds of the greedy rule, as quantiles of the day's effective segment prices."""

    cheap_quantile: float = 0.3
    """Segments whose effective price is at most this quantile run the fastest mode within the job's share."""
    expensive_quantile: float = 0.7
    """Segments whose effective price is at least this quantile pause."""


def _gpu_share(inst: Instance, job: Job) -> int:
    """The job's share of the pool, proportional to its baseline GPUs, so that shares never overlap."""
    baseline_total = sum(j.gpus_by_choice[j.baseline_mode] for j in inst.jobs)
    own = job.gpus_by_choice[job.baseline_mode]
    return int(inst.n_gpus * own // baseline_total) if baseline_total else inst.n_gpus


def effective_segment_price(inst: Instance, job: Job) -> np.ndarray:
    """Mean price per segment, counting slots where renewable exceeds the baseline load as free."""
    baseline_gpus = sum(j.gpus_by_choice[j.baseline_mode] for j in inst.jobs)
    baseline_kw = sum(j.it_power_kw_by_choice[j.baseline_mode] for j in inst.jobs)
    baseline_load = facility_load_mw(inst, baseline_gpus, baseline_kw)
    slot_price = np.where(inst.renewable_mw >= baseline_load, 0.0, inst.price_usd_per_mwh)
    return slot_price.reshape(job.segments, -1).mean(axis=1)


def greedy_schedule(inst: Instance, params: GreedyParams = GreedyParams()) -> list[list[int]]:
    """Price/renewable threshold rule, tranche-aware.

    Per job: pause in expensive segments, run the fastest mode within the job's GPU share in cheap
    ones, the baseline mode otherwise. If the tranche is then missed, the most expensive altered
    segments go back to the baseline mode one at a time; with every segment back, this is the fixed
    schedule, so greedy completes whenever fixed continuous does. Jobs stay within disjoint GPU shares,
    so capacity holds whatever the segment lengths.
    """
    schedule = fixed_schedule(inst)
    for j, job in enumerate(inst.jobs):
        if job.baseline_mode == PAUSE:
            continue
        share = _gpu_share(inst, job)
        within = [m for m in range(job.n_modes) if job.gpus_by_choice[m] <= share]
        fastest = max(within, key=lambda m: job.tokens_per_s_by_choice[m])
        price = effective_segment_price(inst, job)
        cheap, expensive = np.quantile(price, [params.cheap_quantile, params.expensive_quantile])
        choices = np.full(job.segments, job.baseline_mode)
        choices[price <= cheap] = fastest
        choices[price >= expensive] = PAUSE
        choices[(price <= cheap) & (price >= expensive)] = job.baseline_mode  # flat prices: no signal
        # Repair: revert altered segments, most expensive first, until the tranche is met.
        order = [s for s in np.argsort(-price, kind="stable") if choices[s] != job.baseline_mode]
        schedule[j] = choices.tolist()
        while not simulate(inst, schedule).metrics.jobs[j].tranche_met and order:
            choices[order.pop(0)] = job.baseline_mode
            schedule[j] = choices.tolist()
    return schedule


def random_schedule(inst: Instance, rng: np.random.Generator, pause_probability: float = 0.2) -> list[list[int]]:
    """Random choices per segment within GPU capacity (not necessarily completing the tranches)."""
    schedule = []
    for job in inst.jobs:
        share = _gpu_share(inst, job)
        within = np.array([m for m in range(job.n_modes) if job.gpus_by_choice[m] <= share], dtype=np.int64)
        choices = rng.choice(within, size=job.segments) if within.size else np.full(job.segments, PAUSE)
        choices[rng.random(job.segments) < pause_probability] = PAUSE
        schedule.append(choices.tolist())
    return schedule


POLICIES = {"fixed": fixed_schedule, "greedy": greedy_schedule}
