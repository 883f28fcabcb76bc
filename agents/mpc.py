"""Model-predictive control: the oracle re-solved at every re-planning point over the rest of the horizon.

At every re-planning point (a slot where every job is at a checkpoint boundary) the controller builds
the rest-of-horizon sub-instance -- the remaining slots, each job's current choice as its initial mode,
what is left of its tranche -- priced with what is known at that slot (:func:`aidc_env.information.outlook`:
the truth with ``information="perfect"``, the day-ahead forecasts already issued with ``"dayahead"``),
solves it with the oracle and commits the plan's segments up to the next re-planning point. Costs are
paid afterwards on the truth by the simulator. With perfect information it reproduces the oracle's optimum.

The oracle's models are kept per structure and re-priced in place (:class:`oracle.rolling.RollingOracle`). A re-solve is
skipped when nothing new is known: if the outlook of the remaining slots is the previous outlook's tail and the state
followed the previous plan, that plan's tail is optimal for the rest (the tail of an optimal plan is optimal from the
state it reaches), so it is kept. With day-ahead information a new forecast is issued once a day (10:00; with a price
issued later, ``Forecast.price_issue_hour``, twice), so MPC re-solves about once a day -- and on a one-day instance
never after slot 0: there it *is* the day-ahead plan (nothing new is learnt within a day; the realised prices of the
past slots do not change the outlook of the coming ones).

``ForecastNoise`` (a synthetic multiplicative error on the truth, growing with lead time) is kept as a
sensitivity tool for ``information="perfect"`` only; real decisions under uncertainty use the forecasts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from aidc_env.errors import require
from aidc_env.information import Forecast, outlook
from aidc_env.instance import PAUSE, Instance
from aidc_env.schedule import Schedule, validate_schedule
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
    return list(range(0, inst.slots, math.lcm(*(inst.slots_per_segment(job) for job in inst.jobs))))


def _forecast_slice(forecast: Forecast | None, start: int, stop: int) -> Forecast | None:
    if forecast is None:
        return None
    return Forecast(price_usd_per_mwh=forecast.price_usd_per_mwh[start:stop],
                    renewable_shape=forecast.renewable_shape[start:stop],
                    price_scenarios_usd_per_mwh=forecast.price_scenarios_usd_per_mwh[:, start:stop],
                    renewable_shape_scenarios=forecast.renewable_shape_scenarios[:, start:stop], source=forecast.source)


Views = tuple[list[np.ndarray], list[np.ndarray]]
"""Per site, a price and a renewable-shape series (one entry for a one-site instance)."""


def site_views(inst: Instance, t: int, information: str, scenario: int | None = None) -> Views:
    """Every site's (price, renewable shape) of slots t..T−1 as known at the start of slot t
    (:func:`aidc_env.information.outlook` of each site's view)."""
    views = [outlook(view, t, information, scenario) for view in inst.site_views]
    return [v[0] for v in views], [v[1] for v in views]


def with_series(inst: Instance, prices: list[np.ndarray], shapes: list[np.ndarray],
                forecasts: list[Forecast | None] | None = None, **changes) -> Instance:
    """``inst`` with each site's price and renewable shape replaced, and its forecast with ``forecasts`` (None: kept;
    ``changes`` go to the other fields); with several sites the instance's own price and shape are the first site's."""
    if inst.network is None:
        if forecasts is not None:
            changes["forecast"] = forecasts[0]
        return dataclasses.replace(inst, price_usd_per_mwh=prices[0], renewable_shape=shapes[0], **changes)
    network = changes.get("network", inst.network)
    kept = [site.forecast for site in network.sites] if forecasts is None else forecasts
    sites = tuple(dataclasses.replace(site, price_usd_per_mwh=p, renewable_shape=r, forecast=f)
                  for site, p, r, f in zip(network.sites, prices, shapes, kept, strict=True))
    changes["network"] = dataclasses.replace(network, sites=sites)
    return dataclasses.replace(inst, price_usd_per_mwh=prices[0], renewable_shape=shapes[0], **changes)


def active_jobs(inst: Instance, start: int) -> list[int]:
    """The jobs that may still run from slot ``start`` (a fine-tuning job whose deadline has passed may not)."""
    return [j for j, job in enumerate(inst.jobs) if inst.job_window(job)[1] > start]


def sub_instance(inst: Instance, start: int, stop: int, current: list[int], tokens_done: list[float],
                 views: Views, sites: list[int] | None = None) -> Instance:
    """Slots ``start:stop`` of ``inst`` as an instance, from the current state, priced with ``views``.

    Each active job (:func:`active_jobs`) starts in its current choice at its current site (``sites``; default its
    home; a switch at ``start`` restarts, as in the whole instance) and must make what is left of its target; a
    fine-tuning job's window moves with the start. Inference services keep their slots. The sub-instance is one flat
    axis (``horizon_days=1``, it need not be whole days) and carries the slice of the instance's forecast. The oracle
    still solves a rest longer than a day with its multi-day settings (restricted completion tables, label-setting
    proof): it chooses them by the days an instance spans (:func:`oracle.data.span_days`), so a re-solve from inside
    a week is proven like a week, and every sub-instance of a one-day instance keeps the day's path. Daily minimums
    (``min_daily_share``) are not carried: the re-solve would need the minimum left of the current day, a per-day
    target the instance does not hold (the oracle itself models σ on whole-day horizons). Under a tariff the prices
    are its energy rates and the sub-instance bills them as prices; demand charges are refused (one line).
    """
    span = stop - start
    keep = active_jobs(inst, start)
    jobs = []
    for j in keep:
        job = inst.jobs[j]
        changes = {}
        if job.is_finetuning:
            release, deadline = inst.job_window(job)
            changes = {"release_slot": max(release - start, 0), "deadline_slot": min(deadline, stop) - start}
        jobs.append(dataclasses.replace(job, segments=span // inst.slots_per_segment(job), initial_mode=current[j],
                                        tranche_tokens=max(0.0, job.tranche_tokens - tokens_done[j]), **changes))
    field = "tariff" if inst.tariff is not None else "coincident_peak"
    require(not inst.has_demand_charges and inst.coincident_peak is None, field, "a re-plan from inside a month "
            "would need the month's peaks so far, which sub-instances do not carry yet, and a coincident-peak charge "
            "the system's peak, known only after the month: MPC takes a tariff's energy rates, not its demand charges")
    # The tariff's energy rates are the sub-instance's prices already; it bills no whole days of its own.
    changes: dict = {"jobs": tuple(jobs), "horizon_days": 1, "min_daily_share": 0.0, "tariff": None,
                     "coincident_peak": None}
    if inst.inference:
        changes["inference"] = tuple(dataclasses.replace(service, gpus=service.gpus[start:stop],
                                                         demand_share=service.demand_share[start:stop])
                                     for service in inst.inference)
    if inst.network is not None:
        where = inst.home_sites if sites is None else sites
        changes["network"] = dataclasses.replace(inst.network, home=tuple(where[j] for j in keep),
                                                 transfer_hours=tuple(inst.transfer_hours[j] for j in keep))
    prices, shapes = views
    return with_series(inst, [p[:span] for p in prices], [r[:span] for r in shapes],
                       [_forecast_slice(view.forecast, start, stop) for view in inst.site_views], **changes)


def rest_of_horizon(inst: Instance, start: int, current: list[int], tokens_done: list[float], views: Views,
                    sites: list[int] | None = None) -> Instance:
    """The sub-instance from ``start`` to the end of the horizon (see :func:`sub_instance`)."""
    return sub_instance(inst, start, inst.slots, current, tokens_done, views, sites)


Rows = list[list[int]]
"""Per job, per checkpoint segment: a mode index or PAUSE (or a site index)."""


def tokens_made(inst: Instance, schedule: Rows, start: int, sites: Rows | None = None) -> list[float]:
    """Tokens each job made before slot ``start`` (a boundary of every job) under ``schedule`` at ``sites``
    (default: every job at home; the simulator's count)."""
    trial = []
    for job, row in zip(inst.jobs, schedule, strict=True):
        done = start // inst.slots_per_segment(job)
        trial.append(list(row[:done]) + [PAUSE] * (job.segments - done))
    return [m.tokens for m in simulate(inst, validate_schedule(inst, trial, sites)).metrics.jobs]


def current_choices(inst: Instance, schedule: Rows, start: int, first: Sequence[int] | None = None) -> list[int]:
    """Each job's entry in the segment that ends at slot ``start`` (at slot 0: ``first``, default its initial
    mode; give the home sites to read a site row)."""
    first = [job.initial_mode for job in inst.jobs] if first is None else first
    out = []
    for j, (job, row) in enumerate(zip(inst.jobs, schedule, strict=True)):
        done = start // inst.slots_per_segment(job)
        out.append(int(row[done - 1]) if done else first[j])
    return out


def commit(inst: Instance, schedule: Rows, plan: Rows, start: int, stop: int, jobs: Sequence[int] | None = None
           ) -> None:
    """Copy the segments of ``plan`` (a plan of the sub-instance from ``start``, one row per job of ``jobs``,
    default every job) that fall in ``start:stop``."""
    for row, j in zip(plan, range(len(inst.jobs)) if jobs is None else jobs, strict=True):
        per = inst.slots_per_segment(inst.jobs[j])
        first, last = start // per, stop // per
        schedule[j][first:last] = row[: last - first]


def plan_tail(inst: Instance, plan: Rows, start: int, stop: int, jobs: Sequence[int] | None = None) -> Rows:
    """The part of a plan made at ``start`` that begins at ``stop`` (one row per job of ``jobs``)."""
    return [list(row[(stop - start) // inst.slots_per_segment(inst.jobs[j]):])
            for row, j in zip(plan, range(len(inst.jobs)) if jobs is None else jobs, strict=True)]


def solved_plan(result, sub: Instance, fallback: tuple[Rows, Rows] | None) -> tuple[Rows, Rows]:
    """The oracle's schedule and sites, else the fallback (the previous plan's tail, feasible: tokens do not depend
    on prices), else holding the current choices where the jobs are."""
    if result.schedule is not None:
        sites = result.sites if result.sites is not None else [[0] * job.segments for job in sub.jobs]
        return [list(row) for row in result.schedule], [list(row) for row in sites]
    if fallback is not None:
        return fallback
    return ([[job.initial_mode] * job.segments for job in sub.jobs],
            [[home] * job.segments for job, home in zip(sub.jobs, sub.home_sites, strict=True)])


def mpc_schedule(inst: Instance, information: str = "dayahead", *, oracle=None, noise: ForecastNoise = ForecastNoise(),
                 seed: int = 0, reuse_plans: bool = True,
                 on_replan: Callable[[int, Rows], None] | None = None) -> Schedule:
    """Rolling-horizon oracle; returns the committed schedule (scored by the simulator as usual).

    ``oracle``: a :class:`oracle.rolling.RollingOracle` (shared across calls to reuse its built models;
    its ``seconds`` record every re-solve). ``reuse_plans=False`` re-solves at every point. ``on_replan(slot,
    whole)`` is called after each re-solve with the whole horizon's mode rows it implies (the segments committed
    before ``slot``, then the new plan): :func:`agents.plan_features.issue_plans`.
    """
    from oracle.rolling import RollingOracle  # the oracle imports the env's packages; agents stay importable

    if not noise.perfect and information != "perfect":
        raise ValueError("synthetic forecast noise applies to information='perfect' only")
    oracle = oracle if oracle is not None else RollingOracle()
    rng = np.random.default_rng(seed)
    schedule = [[PAUSE] * job.segments for job in inst.jobs]
    sites = [[home] * job.segments for job, home in zip(inst.jobs, inst.home_sites, strict=True)]
    points = replanning_slots(inst) + [inst.slots]
    plan: tuple[Rows, Rows] | None = None
    known: Views | None = None  # the outlook the current plan was made on
    jobs: list[int] = []
    for start, stop in zip(points[:-1], points[1:], strict=True):
        prices, shapes = site_views(inst, start, information)
        for k, (price, shape) in enumerate(zip(prices, shapes, strict=True)):
            prices[k], shapes[k] = noisy(price, shape, inst.slot_hours, noise, rng)
        now = active_jobs(inst, start)
        unchanged = (reuse_plans and noise.perfect and plan is not None and known is not None and now == jobs
                     and all(np.array_equal(old[-new.size:], new) for old, new in zip(known[0], prices, strict=True))
                     and all(np.array_equal(old[-new.size:], new) for old, new in zip(known[1], shapes, strict=True)))
        if not unchanged:
            jobs = now
            sub = rest_of_horizon(inst, start, current_choices(inst, schedule, start),
                                  tokens_made(inst, schedule, start, sites), (prices, shapes),
                                  current_choices(inst, sites, start, inst.home_sites))
            plan = solved_plan(oracle.solve(sub), sub, plan)
            known = (prices, shapes)
            if on_replan is not None:
                whole = [list(row) for row in schedule]
                commit(inst, whole, plan[0], start, inst.slots, jobs)
                on_replan(start, whole)
        commit(inst, schedule, plan[0], start, stop, jobs)
        commit(inst, sites, plan[1], start, stop, jobs)
        plan = (plan_tail(inst, plan[0], start, stop, jobs), plan_tail(inst, plan[1], start, stop, jobs))
    return validate_schedule(inst, schedule, sites)
