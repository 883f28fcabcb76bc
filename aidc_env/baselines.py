"""Baseline schedules: fixed continuous, a greedy threshold rule, random.

Each baseline returns a schedule (per job, per checkpoint segment: mode index or ``PAUSE``; every job at its home site)
that the simulator scores; none computes a cost of its own.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance, Job
from aidc_env.simulator import pool_load_mw, simulate

TARGET_SLACK = 1e-9
"""Rounding slack in segment counts (a target of exactly k segments needs k, not k + 1)."""


def fixed_schedule(inst: Instance) -> list[list[int]]:
    """Fixed continuous training: every pre-training job runs its baseline mode all day (no restart); a fine-tuning job
    runs its baseline mode from its release for the fewest segments that meet its target, then pauses (all its window if
    the target needs it). Inference is served whatever the schedule."""
    return [[job.baseline_mode] * job.segments if not job.is_finetuning else _finetuning_from_release(inst, job)
            for job in inst.jobs]


def _finetuning_from_release(inst: Instance, job: Job) -> list[int]:
    """The baseline mode from the release, as long as the target needs (the first segment loads the checkpoint)."""
    choices = np.full(job.segments, PAUSE)
    if job.baseline_mode == PAUSE:
        return choices.tolist()
    allowed = np.flatnonzero(inst.allowed_segments(job))
    rate = job.tokens_per_s_by_choice[job.baseline_mode] * SECONDS_PER_HOUR
    needed_hours = job.tranche_tokens / rate if rate > 0 else np.inf
    # k segments held from the release make (k × segment − τ) productive hours.
    k = int(np.ceil((needed_hours + job.restart_hours) / inst.segment_hours(job) - TARGET_SLACK))
    choices[allowed[:max(k, 0)]] = job.baseline_mode
    return choices.tolist()


def jobs_pool(inst: Instance) -> int:
    """GPUs the jobs may share in every slot: the pool minus the inference services' peak (served first)."""
    return int(inst.n_gpus - (inst.inference_gpus.max() if inst.inference else 0))


def _gpu_share(inst: Instance, job: Job) -> int:
    """The job's share of the jobs' pool, proportional to its baseline GPUs, so that shares never overlap."""
    baseline_total = sum(j.gpus_by_choice[j.baseline_mode] for j in inst.jobs)
    own = job.gpus_by_choice[job.baseline_mode]
    pool = jobs_pool(inst)
    return int(pool * own // baseline_total) if baseline_total else pool


def effective_segment_price(inst: Instance, job: Job) -> np.ndarray:
    """Mean price per segment, counting slots where renewable exceeds the baseline load as free."""
    baseline_gpus = sum(j.gpus_by_choice[j.baseline_mode] for j in inst.jobs)
    baseline_kw = sum(j.it_power_kw_by_choice[j.baseline_mode] for j in inst.jobs)
    baseline_load = pool_load_mw(inst, baseline_gpus, baseline_kw)
    slot_price = np.where(inst.renewable_mw >= baseline_load, 0.0, inst.price_usd_per_mwh)
    return slot_price.reshape(job.segments, -1).mean(axis=1)


def greedy_schedule(inst: Instance) -> list[list[int]]:
    """Price threshold rule, tranche-aware: run in the cheapest segments, pause in the others; with several sites, each
    site's rule over the jobs at home there (no job moves)."""
    if len(inst.sites) == 1:
        return _greedy_one_site(inst)
    schedule: list[list[int]] = [[PAUSE] * job.segments for job in inst.jobs]
    for s, view in enumerate(inst.site_views):
        members = [j for j in range(len(inst.jobs)) if inst.home_sites[j] == s]
        if members:
            sub = dataclasses.replace(view, jobs=tuple(inst.jobs[j] for j in members))
            for j, row in zip(members, _greedy_one_site(sub), strict=True):
                schedule[j] = list(row)
    return schedule


def _greedy_one_site(inst: Instance) -> list[list[int]]:
    """Price threshold rule, tranche-aware: run in the cheapest segments, pause in the others.

    Job by job: rank the job's segments by effective price (slots where renewable covers the baseline load count as
    free). For each mode within the job's GPU share, run it in the k cheapest segments and pause in the rest, with the
    smallest k that meets the tranche (restarts included): the price threshold is set by the tranche. Keep the mode
    whose day costs least (objective: operating cost minus any idle-GPU value), or the fixed schedule if none is
    cheaper; so greedy completes whenever fixed continuous does. Jobs stay within disjoint GPU shares of the pool minus
    the inference peak (:func:`jobs_pool`), so capacity holds whatever the segment lengths; a fine-tuning job ranks only
    the segments of its window.
    """
    schedule = fixed_schedule(inst)
    for j, job in enumerate(inst.jobs):
        if job.baseline_mode == PAUSE:
            continue
        share = _gpu_share(inst, job)
        allowed = inst.allowed_segments(job)
        order = np.argsort(effective_segment_price(inst, job), kind="stable")
        order = order[allowed[order]]  # a fine-tuning job ranks only the segments of its window
        best_cost = simulate(inst, schedule).metrics.objective_usd
        for mode in (m for m in range(job.n_modes) if job.gpus_by_choice[m] <= share):
            segment_tokens = job.tokens_per_s_by_choice[mode] * SECONDS_PER_HOUR * inst.segment_hours(job)
            for k in range(int(np.ceil(job.tranche_tokens / segment_tokens)), order.size + 1):
                choices = np.full(job.segments, PAUSE)
                choices[order[:k]] = mode
                trial = [list(s) for s in schedule]
                trial[j] = choices.tolist()
                metrics = simulate(inst, trial).metrics
                if metrics.jobs[j].tranche_met:
                    if metrics.objective_usd < best_cost:
                        best_cost, schedule = metrics.objective_usd, trial
                    break
    return schedule


def random_schedule(inst: Instance, rng: np.random.Generator, pause_probability: float = 0.2) -> list[list[int]]:
    """Random choices per segment within GPU capacity and the jobs' windows (not necessarily meeting the targets)."""
    schedule = []
    for job in inst.jobs:
        share = _gpu_share(inst, job)
        within = np.array([m for m in range(job.n_modes) if job.gpus_by_choice[m] <= share], dtype=np.int64)
        choices = rng.choice(within, size=job.segments) if within.size else np.full(job.segments, PAUSE)
        choices[rng.random(job.segments) < pause_probability] = PAUSE
        choices[~inst.allowed_segments(job)] = PAUSE
        schedule.append(choices.tolist())
    return schedule
