"""Instances with day-ahead forecasts: the entry points' one call for ``information="dayahead"``.

:func:`dayahead_instances` fits the price forecaster (:mod:`aidc_env.price_forecast`) on training days only, never on a
day of the instance it forecasts, and returns the instances whose every day has a forecast, each carrying an
:class:`~aidc_env.information.Forecast`: per day the point forecast of the price and of the renewable shape (as issued
the day before), the persistence price, on a horizon of several days the outlook of each issue, and S scenarios (a
seeded bootstrap of the forecaster's residual training days). Below this module nothing re-reads a CSV: the env, the
oracle and the policies read ``inst.forecast`` (:func:`aidc_env.information.outlook`).

A sites instance takes a :class:`~aidc_env.site_profiles.SiteProfileSet`, and every function here then works per site:
each site carries its own forecast, made from its price node's forecaster and its plant's shape forecast under the same
out-of-sample rule; an instance is forecastable when every one of its nodes is.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import functools
from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np

from aidc_env.instance import Instance
from aidc_env.errors import require
from aidc_env.forecasts import ForecastSet
from aidc_env.information import ISSUE_HOUR, LAST_ISSUE_HOUR, Forecast
from aidc_env.price_forecast import (DEFAULT_PRICE_SOURCE, LATER_DAY_REPEAT_WEIGHT, RECENT_MEAN_DAYS, PriceForecaster,
                                   SiteForecasters, day_features, fit_price_forecaster, fit_site_forecasters,
                                   later_day_outlook, persistence_forecast)
from aidc_env.profiles import ProfileSet, hourly_to_slots
from aidc_env.site_profiles import SiteProfileSet

DEFAULT_SCENARIOS = 10
"""Scenarios carried by each instance (stochastic MPC uses the first S of them)."""
DEFAULT_SEED = 0


def scenario_seed(seed: int, date: str) -> int:
    """The scenario seed of one day: the run's seed and the day, so that every day draws its own residuals and the same
    day draws the same ones in every run and every horizon that contains it."""
    return int(np.random.SeedSequence([seed, dt.date.fromisoformat(date).toordinal()]).generate_state(1)[0])


def forecast_of(inst: Instance, forecaster: PriceForecaster | SiteForecasters, profiles: ProfileSet | SiteProfileSet,
                forecasts: ForecastSet, n_scenarios: int = DEFAULT_SCENARIOS, seed: int = DEFAULT_SEED,
                price_issue_hour: int = ISSUE_HOUR) -> Forecast | tuple[Forecast, ...]:
    """The day-ahead forecast of every slot of ``inst`` (each day as issued the day before; the price at
    ``price_issue_hour`` of d − 1). On a horizon of several days also the outlook made at each issue: the forecasts
    issued so far, then for every later day :func:`~aidc_env.price_forecast.later_day_outlook`. A sites instance (with
    :class:`SiteForecasters` and a :class:`SiteProfileSet`): the tuple of its sites' forecasts, in site order.
    """
    _require_kinds(inst, forecaster, profiles)
    if not inst.has_sites:
        return _forecast(inst, forecaster, profiles, forecasts, n_scenarios, seed, price_issue_hour)
    found = []
    for site, view in zip(inst.sites, inst.site_views, strict=True):
        node = site.price_node
        forecast = _forecast(view, forecaster.of(site, profiles, forecasts), profiles.at_node(node),
                             forecasts.at_node(node), n_scenarios, seed, price_issue_hour)
        found.append(dataclasses.replace(forecast, source=f"site {site.name}, {node} price: {forecast.source}"))
    return tuple(found)


def _forecast(inst: Instance, forecaster: PriceForecaster, profiles: ProfileSet, forecasts: ForecastSet,
              n_scenarios: int, seed: int, price_issue_hour: int) -> Forecast:
    """:func:`forecast_of` of one site (its price node's profiles and forecasts)."""
    spd = inst.slots_per_day
    price, persistence, later, shape, scen_price, scen_shape = [], [], [], [], [], []
    for date in inst.days:
        day_price = forecaster.price(profiles, forecasts, date)
        price.append(hourly_to_slots(day_price, spd))
        persistence.append(hourly_to_slots(persistence_forecast(profiles, date), spd))
        if len(inst.days) > 1:
            later.append(hourly_to_slots(later_day_outlook(profiles, date, day_price), spd))
        shape.append(hourly_to_slots(forecaster.renewable_shape(forecasts, date) if forecaster.plant is not None
                                     else forecasts.day(date).renewable_shape(inst.renewable_capacity_mw,
                                                                              forecaster.renewable_scale), spd))
        if n_scenarios > 0:
            scen = forecaster.scenarios(profiles, forecasts, date, n_scenarios, scenario_seed(seed, date))
            scen_price.append(np.stack([hourly_to_slots(p, spd) for p in scen.price_usd_per_mwh]))
            scen_shape.append(np.stack([hourly_to_slots(s, spd) for s in scen.renewable_shape]))
    issue_outlook = np.stack([np.concatenate(price[:k + 1] + [later[k]] * (len(price) - k - 1))
                              for k in range(len(price))]) if later else None
    return Forecast(
        price_usd_per_mwh=np.concatenate(price), renewable_shape=np.concatenate(shape),
        price_scenarios_usd_per_mwh=np.concatenate(scen_price, axis=1) if scen_price else np.empty((0, inst.slots)),
        renewable_shape_scenarios=np.concatenate(scen_shape, axis=1) if scen_shape else np.empty((0, inst.slots)),
        source=(f"gradient-boosting price forecast fitted on {len(forecaster.train_dates)} training days "
                if forecaster.model is not None else
                f"supplied price forecast ({forecasts.source}), residual days from {len(forecaster.residual_dates)} "
                "training days ")
               + f"({forecaster.train_dates[0]}..{forecaster.train_dates[-1]}); "
               + (forecaster.plant.text() if forecaster.plant is not None else
                  f"CAISO day-ahead solar and wind forecast x {forecaster.renewable_scale:.3f}")
               + f"; {n_scenarios} residual-day scenarios, seed {seed}; "
               "persistence price (latest prices known at issue time)"
               + (f"; later days: {LATER_DAY_REPEAT_WEIGHT:g} x the last issued day's price + "
                  f"{1 - LATER_DAY_REPEAT_WEIGHT:g} x the mean price of the {RECENT_MEAN_DAYS} days before its issue, "
                  "per clock hour" if later else "")
               + (f"; price issued at {price_issue_hour:02d}:00 of the day before"
                  if price_issue_hour != ISSUE_HOUR else ""),
        persistence_price_usd_per_mwh=np.concatenate(persistence), issue_outlook_price_usd_per_mwh=issue_outlook,
        price_issue_hour=price_issue_hour)


def forecastable(inst: Instance, forecasts: ForecastSet, profiles: ProfileSet | SiteProfileSet,
                 price_source: str = DEFAULT_PRICE_SOURCE) -> bool:
    """Whether every day of the instance has a day-ahead forecast and the price history its forecast needs (whatever the
    forecaster's fit), and with ``price_source="supplied"`` a supplied price forecast; for a sites instance, at every
    price node of its sites."""
    _require_kinds(inst, None, profiles)
    if inst.has_sites:
        return all(_forecastable(inst.days, forecasts.at_node(node), profiles.at_node(node), price_source)
                   for node in {site.price_node for site in inst.sites})
    return _forecastable(inst.days, forecasts, profiles, price_source)


def _forecastable(days: Sequence[str], forecasts: ForecastSet, profiles: ProfileSet, price_source: str) -> bool:
    """:func:`forecastable` of the days of one price node."""
    try:
        for date in days:
            forecasts.day(date)
            if price_source == "supplied":
                forecasts.supplied_price(date)
            day_features(profiles, forecasts, date)
            persistence_forecast(profiles, date)
    except (KeyError, ValueError):  # InputError is a ValueError: a day without forecast or price history
        return False
    return True


def attach_forecasts(instances: Mapping[str, Instance], forecaster: PriceForecaster | SiteForecasters,
                     profiles: ProfileSet | SiteProfileSet, forecasts: ForecastSet,
                     n_scenarios: int = DEFAULT_SCENARIOS, seed: int = DEFAULT_SEED,
                     price_issue_hour: int = ISSUE_HOUR) -> dict[str, Instance]:
    """The instances whose every day can be forecast, each with its :class:`Forecast` (a sites instance: each site with
    its own; others dropped)."""
    out = {}
    for day, inst in instances.items():
        if forecastable(inst, forecasts, profiles, _price_source(forecaster)):
            found = forecast_of(inst, forecaster, profiles, forecasts, n_scenarios, seed, price_issue_hour)
            out[day] = inst.with_forecasts(found if isinstance(found, tuple) else (found,))
    return out


def _price_source(forecaster: PriceForecaster | SiteForecasters) -> str:
    one = next(iter(forecaster.nodes.values())) if isinstance(forecaster, SiteForecasters) else forecaster
    return one.price_source


def _require_kinds(inst: Instance, forecaster: PriceForecaster | SiteForecasters | None,
                   profiles: ProfileSet | SiteProfileSet) -> None:
    """InputError unless a sites instance comes with a SiteProfileSet (and SiteForecasters), a one-site instance with a
    ProfileSet (and a PriceForecaster)."""
    sites = inst.has_sites
    require(isinstance(profiles, SiteProfileSet) == sites, "profiles", "a sites instance is forecast from a "
            "SiteProfileSet (load_site_profiles), a one-site instance from a ProfileSet (load_profiles)")
    require(forecaster is None or isinstance(forecaster, SiteForecasters) == sites, "forecaster",
            "a sites instance is forecast by SiteForecasters (fit_site_forecasters), a one-site instance by a "
            "PriceForecaster (fit_price_forecaster)")


def dayahead_instances(instances: Mapping[str, Instance], profiles: ProfileSet | SiteProfileSet, forecasts: ForecastSet,
                       train_days: Sequence[str], n_scenarios: int = DEFAULT_SCENARIOS, seed: int = DEFAULT_SEED, *,
                       out_of_sample: bool = True, price_source: str = DEFAULT_PRICE_SOURCE,
                       price_issue_hour: int = ISSUE_HOUR) -> dict[str, Instance]:
    """Fit the price forecaster on ``train_days`` (only) and attach forecasts to the forecastable instances.

    ``price_source`` (:data:`~aidc_env.price_forecast.PRICE_SOURCES`): the gradient boosting's point forecast
    (``model``) or the forecast CSV's supplied column (``supplied``). ``price_issue_hour``: the hour of d − 1 from which
    day d's price forecast is known (13 for the CAISO day-ahead market's LMP); the renewables are issued at
    :data:`~aidc_env.information.ISSUE_HOUR`.

    ``out_of_sample`` (default): an instance whose horizon contains training days (a held-out week) takes a forecaster
    fitted on the training days outside it (:func:`fit_days_outside`, one fit per distinct set of its days); ``False``:
    one forecaster fitted on all of ``train_days`` (train.py's training instances). Sites instances: the same, with
    :func:`~aidc_env.price_forecast.fit_site_forecasters` for the nodes of their sites.
    """
    fit: Callable[..., PriceForecaster | SiteForecasters] = fit_price_forecaster
    if isinstance(profiles, SiteProfileSet):
        nodes = {site.price_node for inst in instances.values() for site in inst.sites}
        fit = functools.partial(fit_site_forecasters, nodes=nodes)
    fits: dict[frozenset[str], PriceForecaster | SiteForecasters] = {}
    out: dict[str, Instance] = {}
    for day, inst in instances.items():
        if not forecastable(inst, forecasts, profiles, price_source):
            continue
        own = frozenset(inst.days).intersection(train_days) if out_of_sample else frozenset()
        if own not in fits:
            fits[own] = fit(profiles, forecasts, fit_days_outside(train_days, own), seed=seed,
                            price_source=price_source)
        out.update(attach_forecasts({day: inst}, fits[own], profiles, forecasts, n_scenarios, seed, price_issue_hour))
    require(len(out) > 0, "forecasts", f"none of the {len(instances)} instances lies inside the forecast period "
            f"({forecasts.dates()[0]}..{forecasts.dates()[-1]})")
    return out


REVEALED_PRICES = ("dayahead", "all")
"""What :func:`revealed` replaces by the truth: the issued days' prices (``dayahead``), or every price (``all``)."""


def revealed(inst: Instance, prices: str) -> Instance:
    """``inst`` with part of its price forecast replaced by the truth: an information relaxation that measures what a
    perfect forecast of that part would be worth to a policy (renewables, persistence price and scenarios stay).

    - ``dayahead``: each day's issued forecast is the true price, and the outlook of the later days moves with it by
      ``LATER_DAY_REPEAT_WEIGHT`` × the issued day's error at each clock hour (by all of it without an issue outlook,
      whose later days repeat the last issued day);
    - ``all``: every price a policy reads is the truth.

    A sites instance: every site's price forecast, against its own truth.
    """
    require(prices in REVEALED_PRICES, "prices", f"must be one of {', '.join(REVEALED_PRICES)}, got {prices!r}")
    return inst.with_forecasts(tuple(_revealed(view, prices) for view in inst.site_views))


def _revealed(inst: Instance, prices: str) -> Forecast:
    """The forecast of :func:`revealed` for a one-site instance (a site's view)."""
    forecast = inst.forecast
    require(forecast is not None, "forecasts", "a relaxation of the forecast needs an instance with forecasts")
    spd, days = inst.slots_per_day, inst.horizon_days
    truth, point = inst.price_usd_per_mwh, forecast.price_usd_per_mwh
    errors = [truth[k * spd:(k + 1) * spd] - point[k * spd:(k + 1) * spd] for k in range(days)]
    issued_price = truth.copy() if prices == "all" else point + np.concatenate(errors)
    rows, weight = forecast.issue_outlook_price_usd_per_mwh, LATER_DAY_REPEAT_WEIGHT
    if rows is None and days > 1:
        rows = np.stack([np.concatenate([point[:(k + 1) * spd]] + [point[k * spd:(k + 1) * spd]] * (days - k - 1))
                         for k in range(days)])
        weight = 1.0
    if rows is not None:
        rows = np.array(rows, dtype=float)
        for k in range(days):
            issued, later = slice(0, (k + 1) * spd), slice((k + 1) * spd, None)
            rows[k, issued] = issued_price[issued]
            rows[k, later] = truth[later] if prices == "all" else rows[k, later] + weight * np.tile(
                errors[k], days - k - 1)
    source = f"{forecast.source}; revealed: {prices} prices are the truth (an information relaxation)"
    return dataclasses.replace(forecast, price_usd_per_mwh=issued_price, issue_outlook_price_usd_per_mwh=rows,
                               source=source)


def add_price_issue_hour_argument(parser: argparse.ArgumentParser, default: int) -> None:
    """The entry points' ``--price-issue-hour H`` (checked by :func:`require_price_issue_hour`)."""
    parser.add_argument("--price-issue-hour", type=int, default=default, metavar="H",
                        help=f"with --forecasts: the local hour of the day before from which a day's price forecast "
                        f"is known ({ISSUE_HOUR}..{LAST_ISSUE_HOUR}; the load, solar and wind forecasts are issued at "
                        f"{ISSUE_HOUR}:00); 13 for the CAISO day-ahead market's LMP (--price-forecast supplied), "
                        "published at about 13:00")


def require_price_issue_hour(hour: int, has_forecasts: bool) -> None:
    """InputError naming price-issue-hour unless it is an hour ``ISSUE_HOUR..LAST_ISSUE_HOUR``, and, other than the
    default, given with forecasts."""
    require(ISSUE_HOUR <= hour <= LAST_ISSUE_HOUR, "price-issue-hour",
            f"must be an hour within {ISSUE_HOUR}..{LAST_ISSUE_HOUR} (a forecast of day d is issued on d − 1, not "
            f"before the load, solar and wind forecasts at {ISSUE_HOUR}:00), got {hour}")
    require(hour == ISSUE_HOUR or has_forecasts, "price-issue-hour",
            "a price issue hour applies to day-ahead forecasts: give --forecasts CSV")


def fit_days_outside(train_days: Sequence[str], days: Collection[str]) -> list[str]:
    """The days of ``train_days`` (in their order) that are not among ``days``: the fit days of an instance's
    out-of-sample forecaster."""
    excluded = set(days)
    return [d for d in train_days if d not in excluded]


__all__ = ["DEFAULT_SCENARIOS", "REVEALED_PRICES", "add_price_issue_hour_argument", "attach_forecasts",
           "dayahead_instances", "fit_days_outside", "forecast_of", "forecastable", "require_price_issue_hour",
           "revealed"]
