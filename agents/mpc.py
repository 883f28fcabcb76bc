"""Model-predictive control: the oracle re-solved at every re-planning point over the rest of the horizon.

At every re-planning point (a slot where every job is at a checkpoint boundary) the controller builds
the rest-of-horizon sub-instance -- the remaining slots, each job's current choice as its initial mode,
what is left of its tranche -- priced with what is known at that slot (:func:`aidc_env.information.outlook`:
the truth with ``information="perfect"``, the day-ahead forecasts already issued with ``"dayahead"``),
solves it with the oracle and commits the plan's segments up to the next re-planning point. Costs are
paid afterwards on the truth by the simulator. With perfect information it reproduces the oracle's optimum.

The oracle's models are kept per structure and re-priced in place (:class:`oracle.rolling.RollingOracle`).
A re-solve is skipped when nothing new is known: if the outlook of the remaining slots is the previous
outlook's tail and the state followed the previous plan, that plan's tail is optimal for the rest (the
tail of an optimal plan is optimal from the state it reaches), so it is kept. With day-ahead information a
new forecast is issued once a day (10:00; with a price issued later, ``Forecast.price_issue_hour``, twice), so
MPC re-solves about once a day -- and on a one-day instance never after slot 0: there it *is* the day-ahead plan
(nothing new is learnt within a day; the realised prices of the past slots do not change the outlook of the
coming ones).

``ForecastNoise`` (a synthetic multiplicative error on the truth, growing with lead time) is kept as a
sensitivity tool for ``information="perfect"`` only; real decisions under uncertainty use the forecasts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from aidc_env.instance import PAUSE, Instance
from aidc_env.information import Forecast, outlook
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


def noisy(price: np.ndarray, shape: np.ndarray, slot_hours: float, noise: ForecastNoise,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``price``/``shape`` of the coming slots with the synthetic error of ``noise`` (none if perfect)."""
    if noise.perfect:
        return price, shape
    scale = np.sqrt(np.arange(price.size) * slot_hours / noise.hours_per_day)
    price = price * (1 + noise.price_sigma_at_24h * scale * rng.standard_normal(price.size))
    shape = np.clip(shape * (1 + noise.renewable_sigma_at_24h * scale * rng.standard_normal(shape.size)), 0, 1)
    return price, shape


def replanning_slots(inst: Instance) -> list[int]:
    """Slots where every job is at a checkpoint boundary (where a full re-plan is possible)."""
    step = math.lcm(*(inst.slots_per_segment(job) for job in inst.jobs))
    return list(range(0, inst.slots, step))


def _forecast_slice(forecast: Forecast | None, start: int, stop: int) -> Forecast | None:
    if forecast is None:
        return None
    return Forecast(price_usd_per_mwh=forecast.price_usd_per_mwh[start:stop],
                    renewable_shape=forecast.renewable_shape[start:stop],
                    price_scenarios_usd_per_mwh=forecast.price_scenarios_usd_per_mwh[:, start:stop],
                    renewable_shape_scenarios=forecast.renewable_shape_scenarios[:, start:stop],
                    source=forecast.source)


def sub_instance(inst: Instance, start: int, stop: int, current: list[int], tokens_done: list[float],
                 price: np.ndarray, shape: np.ndarray) -> Instance:
    """Slots ``start:stop`` of ``inst`` as an instance, from the current state, priced with ``price``/``shape``.

    Each job starts in its current choice (a switch at ``start`` restarts, as in the whole instance) and
    must make what is left of its tranche. The sub-instance is one flat axis (``horizon_days=1``, it need
    not be whole days) and carries the slice of the instance's forecast. The oracle still solves a rest longer
    than a day with its multi-day settings (restricted completion tables, label-setting proof): it chooses them by
    the days an instance spans (:func:`oracle.data.span_days`), so a re-solve from inside a week is proven like a
    week, and every sub-instance of a one-day instance keeps the day's path. Daily minimums
    (``min_daily_share``) are not carried: the re-solve would need the minimum left of the current day, a
    per-day target the instance does not hold (the oracle itself models σ on whole-day horizons).
    """
    span = stop - start
    jobs = tuple(
        dataclasses.replace(
            job,
            segments=span // inst.slots_per_segment(job),
            initial_mode=current[j],
            tranche_tokens=max(0.0, job.tranche_tokens - tokens_done[j]),
        )
        for j, job in enumerate(inst.jobs)
    )
    return dataclasses.replace(inst, jobs=jobs, price_usd_per_mwh=price, renewable_shape=shape, horizon_days=1,
                               min_daily_share=0.0, forecast=_forecast_slice(inst.forecast, start, stop))


def rest_of_horizon(inst: Instance, start: int, current: list[int], tokens_done: list[float],
                    price: np.ndarray, shape: np.ndarray) -> Instance:
    """The sub-instance from ``start`` to the end of the horizon (see :func:`sub_instance`)."""
    return sub_instance(inst, start, inst.slots, current, tokens_done, price, shape)


def tokens_made(inst: Instance, schedule: list[list[int]], start: int) -> list[float]:
    """Tokens each job made before slot ``start`` (a boundary of every job) under ``schedule`` (simulator)."""
    trial = []
    for job, row in zip(inst.jobs, schedule, strict=True):
        done = start // inst.slots_per_segment(job)
        trial.append(list(row[:done]) + [PAUSE] * (job.segments - done))
    return [m.tokens for m in simulate(inst, trial).metrics.jobs]


def current_choices(inst: Instance, schedule: list[list[int]], start: int) -> list[int]:
    """Each job's choice in the segment that ends at slot ``start`` (its initial mode at slot 0)."""
    out = []
    for job, row in zip(inst.jobs, schedule, strict=True):
        done = start // inst.slots_per_segment(job)
        out.append(int(row[done - 1]) if done else job.initial_mode)
    return out


def commit(inst: Instance, schedule: list[list[int]], plan: list[list[int]], start: int, stop: int) -> None:
    """Copy the segments of ``plan`` (a plan of the sub-instance from ``start``) that fall in ``start:stop``."""
    for j, job in enumerate(inst.jobs):
        per = inst.slots_per_segment(job)
        first, last = start // per, stop // per
        schedule[j][first:last] = plan[j][: last - first]


def plan_tail(inst: Instance, plan: list[list[int]], start: int, stop: int) -> list[list[int]]:
    """The part of a plan made at ``start`` that begins at ``stop``."""
    return [list(row[(stop - start) // inst.slots_per_segment(job):]) for job, row in zip(inst.jobs, plan, strict=True)]


def solved_plan(result, sub: Instance, fallback: list[list[int]] | None) -> list[list[int]]:
    """The oracle's schedule, else the fallback (the previous plan's tail, feasible: tokens do not depend on
    prices), else holding the current choices."""
    if result.schedule is not None:
        return [list(row) for row in result.schedule]
    if fallback is not None:
        return fallback
    return [[job.initial_mode] * job.segments for job in sub.jobs]


def mpc_schedule(
    inst: Instance,
    information: str = "dayahead",
    *,
    oracle=None,
    noise: ForecastNoise = ForecastNoise(),
    seed: int = 0,
    reuse_plans: bool = True,
    on_replan: Callable[[int, list[list[int]]], None] | None = None,
) -> list[list[int]]:
    """Rolling-horizon oracle; returns the committed schedule (scored by the simulator as usual).

    ``oracle``: a :class:`oracle.rolling.RollingOracle` (shared across calls to reuse its built models;
    its ``seconds`` record every re-solve). ``reuse_plans=False`` re-solves at every point. ``on_replan(slot,
    whole)`` is called after each re-solve with the whole horizon's schedule it implies (the segments committed
    before ``slot``, then the new plan): :func:`agents.plan_features.issue_plans`.
    """
    from oracle.rolling import RollingOracle  # the oracle imports the env's packages; agents stay importable

    if not noise.perfect and information != "perfect":
        raise ValueError("synthetic forecast noise applies to information='perfect' only")
    oracle = oracle if oracle is not None else RollingOracle()
    rng = np.random.default_rng(seed)
    schedule = [[PAUSE] * job.segments for job in inst.jobs]
    points = replanning_slots(inst) + [inst.slots]
    plan: list[list[int]] | None = None
    known: tuple[np.ndarray, np.ndarray] | None = None  # the outlook the current plan was made on
    for start, stop in zip(points[:-1], points[1:], strict=True):
        price, shape = noisy(*outlook(inst, start, information), inst.slot_hours, noise, rng)
        unchanged = (reuse_plans and noise.perfect and plan is not None and known is not None
                     and np.array_equal(known[0][-price.size:], price)
                     and np.array_equal(known[1][-shape.size:], shape))
        if not unchanged:
            sub = rest_of_horizon(inst, start, current_choices(inst, schedule, start),
                                  tokens_made(inst, schedule, start), price, shape)
            plan = solved_plan(oracle.solve(sub), sub, plan)
            known = (price, shape)
            if on_replan is not None:
                whole = [list(row) for row in schedule]
                commit(inst, whole, plan, start, inst.slots)
                on_replan(start, whole)
        commit(inst, schedule, plan, start, stop)
        plan = plan_tail(inst, plan, start, stop)
    return schedule
