"""Model-predictive control: the oracle re-solved at checkpoints over the rest of the day.

At every re-planning point (a slot where every job is at a checkpoint boundary) the controller builds
the rest-of-day sub-instance — remaining slots, each job's current choice as its initial mode, its
remaining tranche — with forecasts of price and renewable (perfect by default; optionally a
multiplicative Gaussian error that grows with the lead time), solves it with the oracle, and commits
the plan's first segments up to the next re-planning point. With perfect forecasts it reproduces the
oracle's optimum; with noisy forecasts it shows what foresight is worth.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from aidc_env.instance import PAUSE, Instance
from aidc_env.simulator import simulate


@dataclass(frozen=True)
class ForecastNoise:
    """Relative forecast error: σ(lead) = σ_at_24h · sqrt(lead hours / 24), per slot, independent."""

    price_sigma_at_24h: float = 0.0
    renewable_sigma_at_24h: float = 0.0
    hours_per_day: float = 24.0

    @property
    def perfect(self) -> bool:
        return self.price_sigma_at_24h == 0 and self.renewable_sigma_at_24h == 0


def forecast(inst: Instance, start_slot: int, noise: ForecastNoise, rng: np.random.Generator) -> tuple[
        np.ndarray, np.ndarray]:
    """Forecast of (price, renewable shape) for slots start_slot..T−1 (the current slot is known)."""
    price = inst.price_usd_per_mwh[start_slot:].copy()
    shape = inst.renewable_shape[start_slot:].copy()
    if noise.perfect:
        return price, shape
    lead_hours = np.arange(price.size) * inst.slot_hours
    scale = np.sqrt(lead_hours / noise.hours_per_day)
    price = price * (1 + noise.price_sigma_at_24h * scale * rng.standard_normal(price.size))
    shape = np.clip(shape * (1 + noise.renewable_sigma_at_24h * scale * rng.standard_normal(shape.size)), 0, 1)
    return price, shape


def replanning_slots(inst: Instance) -> list[int]:
    """Slots where every job is at a checkpoint boundary (where a full re-plan is possible)."""
    step = math.lcm(*(inst.slots_per_segment(job) for job in inst.jobs))
    return list(range(0, inst.slots, step))


def rest_of_day(inst: Instance, start_slot: int, current: list[int], tokens_done: list[float],
                price: np.ndarray, shape: np.ndarray) -> Instance:
    """The sub-instance from ``start_slot`` to the end of the day, from the current state."""
    remaining = inst.slots - start_slot
    jobs = tuple(
        dataclasses.replace(
            job,
            segments=job.segments * remaining // inst.slots,
            initial_mode=current[j],
            tranche_tokens=max(0.0, job.tranche_tokens - tokens_done[j]),
        )
        for j, job in enumerate(inst.jobs)
    )
    return dataclasses.replace(inst, jobs=jobs, price_usd_per_mwh=price, renewable_shape=shape)


def mpc_schedule(
    inst: Instance,
    noise: ForecastNoise = ForecastNoise(),
    seed: int = 0,
    time_limit_s: float = 60.0,
    mip_gap: float = 1e-4,
) -> list[list[int]]:
    """Rolling-horizon oracle; returns the committed schedule (scored by the simulator as usual)."""
    from oracle import solve  # the oracle imports the env's packages; keep agents importable without it

    rng = np.random.default_rng(seed)
    schedule = [[PAUSE] * job.segments for job in inst.jobs]
    current = [job.initial_mode for job in inst.jobs]
    points = replanning_slots(inst) + [inst.slots]
    plan: list[list[int]] | None = None
    for start, stop in zip(points[:-1], points[1:], strict=True):
        committed = [np.asarray(s) for s in schedule]
        tokens_done = [_tokens_before(inst, j, committed[j], start) for j in range(len(inst.jobs))]
        price, shape = forecast(inst, start, noise, rng)
        sub = rest_of_day(inst, start, current, tokens_done, price, shape)
        result = solve(sub, time_limit_s=time_limit_s, mip_gap=mip_gap)
        if result.schedule is not None and len(result.schedule) == len(inst.jobs):
            plan = [list(p) for p in result.schedule]
            offset = [0] * len(inst.jobs)
        elif plan is None:  # nothing feasible: keep the current choices
            plan = [[c] * sub.jobs[j].segments for j, c in enumerate(current)]
            offset = [0] * len(inst.jobs)
        for j, job in enumerate(inst.jobs):
            per = inst.slots_per_segment(job)
            first, last = start // per, stop // per
            take = plan[j][offset[j]: offset[j] + last - first]
            schedule[j][first:last] = take
            offset[j] += last - first
            current[j] = take[-1]
    return schedule


def _tokens_before(inst: Instance, j: int, choices: np.ndarray, start_slot: int) -> float:
    """Tokens job j made before ``start_slot`` under the committed choices (via the simulator)."""
    job = inst.jobs[j]
    done = start_slot // inst.slots_per_segment(job)
    if done == 0:
        return 0.0
    trial = [np.full(other.segments, PAUSE) for other in inst.jobs]
    trial[j] = np.concatenate([choices[:done], np.full(job.segments - done, PAUSE)])
    return simulate(inst, trial).metrics.jobs[j].tokens
