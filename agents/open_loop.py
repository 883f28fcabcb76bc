"""Decision rules that plan once: the oracle (on the truth: hindsight), the day-ahead plans (from the persistence
price or from the forecaster's), greedy on a view.

The causal rules read prices and renewables only through :func:`aidc_env.information.outlook` /
:func:`~aidc_env.information.realised`; every schedule is scored afterwards by the simulator on the truth.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from agents.mpc import site_views, with_series
from aidc_env.baselines import greedy_schedule
from aidc_env.errors import require
from aidc_env.information import PERFECT, realised
from aidc_env.instance import Instance
from aidc_env.schedule import Schedule, validate_schedule


def viewed(inst: Instance, information: str, t: int = 0, scenario: int | None = None) -> Instance:
    """The instance as known at the start of slot ``t``, every site's: the realised truth before t, the outlook
    from t. A coincident-peak charge is known only after the month (:mod:`aidc_env.coincident`): the view drops it,
    but with perfect information (the truth)."""
    past = [realised(view, t) for view in inst.site_views]
    prices, shapes = site_views(inst, t, information, scenario)
    known = information is PERFECT or information == "perfect"
    return with_series(inst, [np.concatenate([p[0], price]) for p, price in zip(past, prices, strict=True)],
                       [np.concatenate([p[1], shape]) for p, shape in zip(past, shapes, strict=True)],
                       **({} if known else {"coincident_peak": None}))


def oracle_schedule(inst: Instance, oracle) -> tuple[Schedule, object]:
    """(schedule, result) of the oracle on ``inst`` as given (``oracle``: a :class:`oracle.rolling.RollingOracle`).

    On the truth this is ``hindsight``, the perfect-information bound (not a causal policy).
    """
    result = oracle.solve(inst)
    if result.schedule is None:
        raise RuntimeError(f"oracle found no schedule on {inst.day}: {result.status} {result.reason}")
    return validate_schedule(inst, result.schedule, result.sites, result.caps), result


def forecast_plan_schedule(inst: Instance, oracle, information: str = "dayahead") -> Schedule:
    """Open loop: the oracle's plan made once, at the first day's issue time, on the point forecast.

    At the first day's issue time only that day's forecast is issued; later days are the outlook of that issue
    (:func:`~aidc_env.information.outlook`), exactly the view at slot 0. Never revised. On a one-day instance
    with day-ahead information this equals ``mpc`` (nothing new is issued within the day).
    """
    return oracle_schedule(viewed(inst, information, 0), oracle)[0]


def with_persistence_price(inst: Instance) -> Instance:
    """``inst`` whose point price forecast is, at every site, its forecast's persistence price (renewable forecast
    kept); later days repeat the first day's (no issue outlook: the naive operator has no forecaster)."""
    forecasts = [view.forecast for view in inst.site_views]
    require(all(f is not None and f.persistence_price_usd_per_mwh is not None for f in forecasts), "forecasts",
            "the day-ahead plan needs the persistence price in the instance's forecast (build the instances "
            "with aidc_env.dayahead)")
    return inst.with_forecasts(tuple(dataclasses.replace(
        f, price_usd_per_mwh=f.persistence_price_usd_per_mwh, issue_outlook_price_usd_per_mwh=None)
        for f in forecasts))


def dayahead_plan_schedule(inst: Instance, oracle, information: str = "dayahead") -> Schedule:
    """Open loop, the naive operator's plan (``dayahead-plan``): made once at the first day's issue
    time from the persistence price (the latest prices known then) and the real renewable forecast.

    Later days of a horizon repeat the first day's values (the rule of :func:`~aidc_env.information.outlook`).
    With ``information="perfect"`` it is the oracle on the truth, as every rule is.
    """
    planned = inst if information == "perfect" else with_persistence_price(inst)
    return oracle_schedule(viewed(planned, information, 0), oracle)[0]


def greedy_view_schedule(inst: Instance, information: str = "dayahead") -> list[list[int]]:
    """The greedy threshold rule applied once, on the view at slot 0 (the truth with ``perfect``)."""
    return greedy_schedule(viewed(inst, information, 0))
