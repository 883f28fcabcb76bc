"""Day-ahead price forecasts and forecast scenarios.

The price of day d is forecast from what is known when the day-ahead market closes, at 10:00 local on d − 1
(:data:`aidc_env.forecasts.ISSUE_HOUR`): actual prices and renewables of every hour that ended by then
(:func:`known_prices` masks the rest; every forecaster reads truth through it), the day-ahead load, solar and wind
forecasts of day d, and the calendar. Forecasters, hourly over local clock hours 0..23:

- :func:`persistence_forecast`: the latest price known at issue time at each clock hour;
- :func:`seasonal_naive_forecast`: hour h of d − 7 (d − 14 if d − 7 is missing);
- :class:`PriceForecaster` (:func:`fit_price_forecaster`): scikit-learn's histogram gradient boosting on
  :data:`FEATURES`, fitted on the training days only, seeded, predicting the price minus the last week's mean known
  price (a level the trees cannot extrapolate); or, with ``price_source="supplied"``, the forecast CSV's supplied column
  (e.g. the day-ahead market's LMP), with nothing fitted.

Scenarios (:meth:`PriceForecaster.scenarios`) are a seeded bootstrap of *residual days* of the training days:
out-of-fold price residuals (each day predicted by a model that did not see it) and renewable-shape residuals of the
same day, added to the point forecast, the shape clipped to [0, 1] and the price to the training prices' range.

Sites: :func:`fit_site_forecasters` fits one forecaster per price node on the node's own prices, and the solar and wind
scales of the plants' shapes on the same days; every node's residual days are the same training days, so scenario s of a
day draws the same residual day at every site (the sites' correlation is kept).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pandas.tseries.holiday import USFederalHolidayCalendar
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits  # a hard dependency of scikit-learn

from aidc_env.errors import InputError, require
from aidc_env.forecasts import ISSUE_HOUR, ForecastSet, PlantForecast, common_dates, fit_renewable_scale
from aidc_env.profiles import HOURS_PER_DAY, DayProfile, ProfileSet
from aidc_env.site_profiles import PRICE_NODES, SOLAR, WIND, SiteProfileSet
from aidc_env.sites import Site

MAX_LOOKBACK_DAYS = 7
"""How far back persistence looks for a known price at a clock hour when the last days are missing."""
SEASONAL_LAGS_DAYS = (7, 14)
"""Seasonal-naive: same clock hour one week before, or two if that day is missing."""
LEVEL_DAYS = 7
"""Days of known prices whose mean is the price level the model's target is taken relative to."""
RECENT_MEAN_DAYS = 7
"""Days of known prices averaged, per clock hour, into the outlook of the days whose forecast is not issued yet
(:func:`recent_mean_forecast`); chosen on training weeks by the cost of MPC's plans (docs/uncertainty.md)."""
LATER_DAY_REPEAT_WEIGHT = 0.5
"""Weight of the last issued day's forecast in the outlook of a later day, the rest the recent mean price
(:func:`later_day_outlook`); chosen on training weeks by the cost of MPC's plans (docs/uncertainty.md)."""
WEEKEND_FIRST_WEEKDAY = 5
"""datetime.weekday() of Saturday."""
N_FOLDS = 5
"""Contiguous blocks of training days for the out-of-fold residuals that scenarios bootstrap."""
MODEL_PARAMS = {
    "loss": "squared_error",  # the mean price: what an expected-cost plan needs
    "learning_rate": 0.05,
    "max_iter": 300,
    "max_leaf_nodes": 15,
    "min_samples_leaf": 40,
    "l2_regularization": 1.0,
    "early_stopping": False,  # deterministic, no internal validation split
}
"""Gradient-boosting settings (scikit-learn defaults shrunk for ~5,000 hourly rows); chosen a priori."""
DEFAULT_SEED = 0
PRICE_SOURCES = ("model", "supplied")
"""Where the point forecast of the price comes from: the gradient boosting fitted here (``model``) or the forecast CSV's
:data:`~aidc_env.forecasts.COL_PRICE_FC` column (``supplied``)."""
DEFAULT_PRICE_SOURCE = "model"
OPENMP_THREADS = 1
"""Threads of the model's OpenMP loops: one keeps fits deterministic (fixed summation order) and fast on a shared
machine."""
FEATURES = ("hour", "weekday", "off_day", "month", "day_of_year", "load_fc_mw", "solar_fc_mw", "wind_fc_mw",
            "net_load_fc_mw", "net_load_fc_day_mean_mw", "net_load_fc_day_max_mw", "net_load_fc_rel_mw",
            "price_persistence", "price_d2", "price_d7", "price_last_known", "price_mean_24h", "price_level_7d",
            "renewable_actual_d2_mw")
"""Model inputs per target hour (prices in $/MWh; ``price_level_7d`` is also the target's offset)."""


# ---------------------------------------------------------------------- What is known at issue time


def _shift(date: str, days: int) -> str:
    return (dt.date.fromisoformat(date) + dt.timedelta(days=days)).isoformat()


def _known_hours(lag_days: int) -> int:
    """Clock hours of day d − lag whose actuals are known at the issue time of day d."""
    return ISSUE_HOUR if lag_days == 1 else HOURS_PER_DAY if lag_days >= 2 else 0


def _known(profiles: ProfileSet, date: str, lag_days: int, values_of: Callable[[DayProfile], np.ndarray]) -> np.ndarray:
    values = np.full(HOURS_PER_DAY, np.nan)
    day = profiles.days.get(_shift(date, -lag_days))
    known = _known_hours(lag_days)
    if day is not None and known:
        values[:known] = values_of(day)[:known]
    return values


def known_prices(profiles: ProfileSet, date: str, lag_days: int) -> np.ndarray:
    """Actual prices of day ``date`` − ``lag_days`` as known when day ``date``'s forecast is issued.

    Shape (24,); NaN for hours not yet known (hours ≥ 10 of d − 1, all of d and later) and for days missing from the
    profile source.
    """
    return _known(profiles, date, lag_days, lambda day: day.price_usd_per_mwh)


def known_renewable_mw(profiles: ProfileSet, date: str, lag_days: int) -> np.ndarray:
    """Actual solar + wind of day ``date`` − ``lag_days`` as known at issue time (NaN where unknown)."""
    return _known(profiles, date, lag_days, DayProfile.renewable_mw)


def _first_known(profiles: ProfileSet, date: str, lags: Sequence[int]) -> np.ndarray:
    """Per clock hour, the known price of the first lag (in order) that has one; NaN if none."""
    result = np.full(HOURS_PER_DAY, np.nan)
    for lag in lags:
        missing = np.isnan(result)
        if not missing.any():
            break
        result[missing] = known_prices(profiles, date, lag)[missing]
    return result


def _require_known(values: np.ndarray, date: str, what: str) -> np.ndarray:
    if np.isnan(values).any():
        raise InputError("day", f"{date}: no known price for the {what} forecast at hours "
                                f"{np.flatnonzero(np.isnan(values)).tolist()}")
    return values


def persistence_forecast(profiles: ProfileSet, date: str) -> np.ndarray:
    """The latest price known at issue time at each clock hour (d − 1 for h < 10, d − 2 for h ≥ 10)."""
    return _require_known(_first_known(profiles, date, range(1, MAX_LOOKBACK_DAYS + 1)), date, "persistence")


def seasonal_naive_forecast(profiles: ProfileSet, date: str) -> np.ndarray:
    """The price at the same clock hour one week before (two weeks if that day is missing)."""
    return _require_known(_first_known(profiles, date, SEASONAL_LAGS_DAYS), date, "seasonal-naive")


def recent_mean_forecast(profiles: ProfileSet, date: str, days: int = RECENT_MEAN_DAYS) -> np.ndarray:
    """Per clock hour, the mean of the prices known at day ``date``'s issue time over the ``days`` days before it (days
    missing from the source left out), shape (24,): what is known of a day whose forecast is not issued yet."""
    rows = np.stack([known_prices(profiles, date, lag) for lag in range(1, days + 1)])
    known = np.isfinite(rows)
    counts = known.sum(axis=0)
    if (counts == 0).any():
        raise InputError("day", f"{date}: no known price in the {days} days before the issue time at hours "
                                f"{np.flatnonzero(counts == 0).tolist()}")
    return np.where(known, rows, 0.0).sum(axis=0) / counts


def later_day_outlook(profiles: ProfileSet, date: str, issued_price_usd_per_mwh: np.ndarray,
                      repeat_weight: float = LATER_DAY_REPEAT_WEIGHT) -> np.ndarray:
    """The price outlook, made at day ``date``'s issue time, of each later day whose forecast is not issued yet, shape
    (24,): ``repeat_weight`` × ``date``'s issued forecast + (1 − ``repeat_weight``) × :func:`recent_mean_forecast`."""
    require(0.0 <= repeat_weight <= 1.0, "repeat_weight", f"must be within 0..1, got {repeat_weight}")
    issued = np.asarray(issued_price_usd_per_mwh, dtype=np.float64)
    require(issued.shape == (HOURS_PER_DAY,), "issued_price_usd_per_mwh",
            f"must hold {HOURS_PER_DAY} hourly prices, got shape {issued.shape}")
    return repeat_weight * issued + (1.0 - repeat_weight) * recent_mean_forecast(profiles, date)


def _price_level(profiles: ProfileSet, date: str) -> float:
    known = np.concatenate([known_prices(profiles, date, lag) for lag in range(1, LEVEL_DAYS + 1)])
    known = known[np.isfinite(known)]
    require(known.size > 0, "day", f"{date}: no price known in the {LEVEL_DAYS} days before the issue time")
    return float(known.mean())


# ----------------------------------------------------------------------------------------- Features


@functools.lru_cache(maxsize=None)
def _off_days(year: int) -> frozenset[str]:
    holidays = USFederalHolidayCalendar().holidays(start=f"{year}-01-01", end=f"{year}-12-31")
    return frozenset(d.strftime("%Y-%m-%d") for d in holidays)


def day_features(profiles: ProfileSet, forecasts: ForecastSet, date: str) -> pd.DataFrame:
    """The 24 rows of :data:`FEATURES` for target day ``date`` (only information known at issue time)."""
    calendar = dt.date.fromisoformat(date)
    fc = forecasts.day(date)
    net = fc.net_load_mw()
    d1 = known_prices(profiles, date, 1)
    d2 = known_prices(profiles, date, 2)
    last_24h = np.concatenate([d2[ISSUE_HOUR:], d1[:ISSUE_HOUR]])
    last_known = last_24h[np.isfinite(last_24h)]
    hours = np.arange(HOURS_PER_DAY)
    columns = {
        "hour": hours,
        "weekday": np.full(HOURS_PER_DAY, calendar.weekday()),
        "off_day": np.full(HOURS_PER_DAY, int(calendar.weekday() >= WEEKEND_FIRST_WEEKDAY
                                              or date in _off_days(calendar.year))),
        "month": np.full(HOURS_PER_DAY, calendar.month),
        "day_of_year": np.full(HOURS_PER_DAY, calendar.timetuple().tm_yday),
        "load_fc_mw": fc.load_forecast_mw,
        "solar_fc_mw": fc.solar_forecast_mw,
        "wind_fc_mw": fc.wind_forecast_mw,
        "net_load_fc_mw": net,
        "net_load_fc_day_mean_mw": np.full(HOURS_PER_DAY, net.mean()),
        "net_load_fc_day_max_mw": np.full(HOURS_PER_DAY, net.max()),
        "net_load_fc_rel_mw": net - net.mean(),
        "price_persistence": _first_known(profiles, date, range(1, MAX_LOOKBACK_DAYS + 1)),
        "price_d2": d2,
        "price_d7": known_prices(profiles, date, 7),
        "price_last_known": np.full(HOURS_PER_DAY, last_known[-1] if last_known.size else np.nan),
        "price_mean_24h": np.full(HOURS_PER_DAY, last_known.mean() if last_known.size else np.nan),
        "price_level_7d": np.full(HOURS_PER_DAY, _price_level(profiles, date)),
        "renewable_actual_d2_mw": known_renewable_mw(profiles, date, 2),
    }
    return pd.DataFrame({name: np.asarray(columns[name], dtype=np.float64) for name in FEATURES})


def _design(profiles: ProfileSet, forecasts: ForecastSet, dates: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """Stacked features of ``dates`` and the target (price − level), one row per (day, hour)."""
    features = pd.concat([day_features(profiles, forecasts, d) for d in dates], ignore_index=True)
    prices = np.concatenate([profiles.days[d].price_usd_per_mwh for d in dates])
    return features, prices - features["price_level_7d"].to_numpy()


def _fit(features: pd.DataFrame, target: np.ndarray, seed: int) -> HistGradientBoostingRegressor:
    model = HistGradientBoostingRegressor(**MODEL_PARAMS, random_state=seed)
    categorical = [name in ("hour", "weekday", "off_day") for name in FEATURES]
    model.set_params(categorical_features=categorical)
    with threadpool_limits(OPENMP_THREADS):
        return model.fit(features, target)


def _predict(model: HistGradientBoostingRegressor, features: pd.DataFrame) -> np.ndarray:
    with threadpool_limits(OPENMP_THREADS):
        return model.predict(features)


# ---------------------------------------------------------- The fitted forecaster and its scenarios


@dataclass(frozen=True)
class Scenarios:
    """S equally likely (price, renewable shape) days, hourly: arrays of shape (S, 24)."""

    date: str
    price_usd_per_mwh: np.ndarray
    renewable_shape: np.ndarray
    residual_days: tuple[str, ...]
    """The training day whose residuals made each scenario."""


@dataclass(frozen=True, eq=False)
class PriceForecaster:
    """A price model fitted on training days (or a supplied price forecast), the renewable scale, and the training
    residual days."""

    model: HistGradientBoostingRegressor | None
    """The fitted model; None when the point forecast is supplied (``price_source="supplied"``)."""
    train_dates: tuple[str, ...]
    renewable_scale: float
    """Actual CAISO solar + wind over the SP15 forecast's, fitted on the training days."""
    renewable_capacity_mw: float
    """Capacity that normalises solar + wind into a shape (the profile set's, as in the instances)."""
    residual_dates: tuple[str, ...]
    price_residuals: np.ndarray
    """(days, 24) out-of-fold actual − forecast price of the training days ($/MWh)."""
    shape_residuals: np.ndarray
    """(days, 24) actual − forecast renewable shape of the same days."""
    price_range: tuple[float, float]
    """Lowest and highest actual hourly price of the training days ($/MWh): the scenarios' clip."""
    price_source: str = DEFAULT_PRICE_SOURCE
    """One of :data:`PRICE_SOURCES`."""
    plant: PlantForecast | None = None
    """A site's plant whose shape is forecast (then :attr:`shape_residuals` are its own); None: solar + wind over
    :attr:`renewable_capacity_mw` × :attr:`renewable_scale`."""

    def price(self, profiles: ProfileSet, forecasts: ForecastSet, date: str) -> np.ndarray:
        """Point forecast of day ``date``'s hourly prices ($/MWh), shape (24,)."""
        if self.model is None:
            return np.array(forecasts.supplied_price(date), dtype=np.float64)
        features = day_features(profiles, forecasts, date)
        return _predict(self.model, features) + features["price_level_7d"].to_numpy()

    def renewable_shape(self, forecasts: ForecastSet, date: str) -> np.ndarray:
        """The day-ahead renewable shape of day ``date`` (comparable to the actuals'), shape (24,)."""
        if self.plant is not None:
            return self.plant.shape(forecasts.day(date))
        return forecasts.day(date).renewable_shape(self.renewable_capacity_mw, self.renewable_scale)

    def scenarios(self, profiles: ProfileSet, forecasts: ForecastSet, date: str, n: int,
                  seed: int = DEFAULT_SEED) -> Scenarios:
        """``n`` scenarios of day ``date``: the point forecasts plus bootstrapped training residual days."""
        require(isinstance(n, (int, np.integer)) and n > 0, "scenarios", f"must be a positive integer, got {n!r}")
        require(len(self.residual_dates) > 0, "scenarios", "the forecaster was fitted without residual days")
        picks = np.random.default_rng(seed).integers(len(self.residual_dates), size=int(n))
        price = np.clip(self.price(profiles, forecasts, date) + self.price_residuals[picks], *self.price_range)
        shape = np.clip(self.renewable_shape(forecasts, date) + self.shape_residuals[picks], 0.0, 1.0)
        return Scenarios(date, price, shape, tuple(self.residual_dates[i] for i in picks))


def _out_of_fold(profiles: ProfileSet, forecasts: ForecastSet, dates: Sequence[str], seed: int) -> np.ndarray:
    """(days, 24) price forecasts of ``dates``, each by a model fitted without its block of days."""
    folds = np.array_split(np.arange(len(dates)), min(N_FOLDS, len(dates)))
    features, target = _design(profiles, forecasts, dates)
    day_of_row = np.repeat(np.arange(len(dates)), HOURS_PER_DAY)
    predicted = np.empty(len(target))
    for fold in folds:
        held = np.isin(day_of_row, fold)
        model = _fit(features[~held], target[~held], seed) if (~held).any() else None
        base = features.loc[held, "price_level_7d"].to_numpy()
        predicted[held] = base + (_predict(model, features[held]) if model is not None else 0.0)
    return predicted.reshape(len(dates), HOURS_PER_DAY)


def fit_price_forecaster(profiles: ProfileSet, forecasts: ForecastSet, train_dates: Sequence[str],
                         seed: int = DEFAULT_SEED, *, residuals: bool = True,
                         price_source: str = DEFAULT_PRICE_SOURCE) -> PriceForecaster:
    """Fit the price model on those of ``train_dates`` with forecasts, actuals and a price known in the
    :data:`LEVEL_DAYS` before the issue time, and their residual days (``residuals=False``: none, no scenarios).

    ``price_source="supplied"``: no model; the point forecast is the forecast CSV's supplied price, and the residual
    days are the training days with one (their residual, actual − supplied, is out of sample as it stands).
    """
    require(price_source in PRICE_SOURCES, "price_source", f"{price_source!r} is not one of {', '.join(PRICE_SOURCES)}")
    supplied = price_source == "supplied"
    if supplied:
        require(forecasts.supplies_price, "forecasts", f"price source 'supplied' needs a {forecasts.price_column} "
                f"column in {forecasts.source}")
    dates = [d for d in common_dates(forecasts, profiles, train_dates)  # with a price known in the LEVEL_DAYS before
             if any(_shift(d, -lag) in profiles.days for lag in range(1, LEVEL_DAYS + 1))]
    needed = N_FOLDS if residuals and not supplied else 1
    require(len(dates) >= needed, "train_dates",
            f"{len(dates)} training days with forecasts and actuals; need at least {needed}")
    model = None if supplied else _fit(*_design(profiles, forecasts, dates), seed)
    scale = fit_renewable_scale(forecasts, profiles, dates)
    capacity = profiles.renewable_capacity_mw
    actual_price = np.stack([profiles.days[d].price_usd_per_mwh for d in dates])
    residual_dates: tuple[str, ...] = ()
    price_residuals = shape_residuals = np.empty((0, HOURS_PER_DAY))
    if residuals:
        residual_dates = tuple(d for d in dates if forecasts.has_supplied_price(d)) if supplied else tuple(dates)
        require(len(residual_dates) > 0, "train_dates", f"none of the {len(dates)} training days with forecasts "
                f"and actuals has a supplied price in {forecasts.source}")
        actual = np.stack([profiles.days[d].price_usd_per_mwh for d in residual_dates])
        actual_shape = np.stack([profiles.days[d].renewable_shape(capacity) for d in residual_dates])
        forecast_shape = np.stack([forecasts.days[d].renewable_shape(capacity, scale) for d in residual_dates])
        price_residuals = actual - (np.stack([forecasts.supplied_price(d) for d in residual_dates]) if supplied
                                    else _out_of_fold(profiles, forecasts, dates, seed))
        shape_residuals = actual_shape - forecast_shape
    for array in (price_residuals, shape_residuals):
        array.setflags(write=False)
    return PriceForecaster(model=model, train_dates=tuple(dates), renewable_scale=scale, renewable_capacity_mw=capacity,
                           residual_dates=residual_dates, price_residuals=price_residuals,
                           shape_residuals=shape_residuals,
                           price_range=(float(actual_price.min()), float(actual_price.max())),
                           price_source=price_source)


@dataclass(frozen=True, eq=False)
class SiteForecasters:
    """The day-ahead forecasters of sites instances: per price node the :class:`PriceForecaster` of its prices, and the
    solar and wind scales (actual over forecast, fitted on the same training days) of the plants' shapes."""

    nodes: Mapping[str, PriceForecaster]
    """Price node -> the forecaster fitted on that node's prices (and its supplied price, if the source)."""
    solar_scale: float
    wind_scale: float

    def of(self, site: Site, profiles: SiteProfileSet, forecasts: ForecastSet) -> PriceForecaster:
        """The forecaster of one site: its node's, with its plant's shape forecast and, as shape residuals, the plant's
        actual − forecast shape on the node's residual days."""
        require(site.price_node in self.nodes, "price_node", f"no forecaster was fitted for node {site.price_node} "
                f"(fitted: {', '.join(self.nodes)})")
        node = self.nodes[site.price_node]
        plant = PlantForecast(site.plant, self.solar_scale, self.wind_scale, profiles.solar_peak_mw,
                              profiles.wind_peak_mw)
        residuals = np.array([profiles.shape(profiles.days[d], site.plant) - plant.shape(forecasts.days[d])
                              for d in node.residual_dates]).reshape(-1, HOURS_PER_DAY)
        residuals.setflags(write=False)
        return dataclasses.replace(node, plant=plant, shape_residuals=residuals)


def fit_site_forecasters(profiles: SiteProfileSet, forecasts: ForecastSet, train_dates: Sequence[str],
                         seed: int = DEFAULT_SEED, *, residuals: bool = True, price_source: str = DEFAULT_PRICE_SOURCE,
                         nodes: Collection[str] = tuple(PRICE_NODES)) -> SiteForecasters:
    """Fit :func:`fit_price_forecaster` on ``train_dates`` once per price node of ``nodes`` (on that node's prices and
    supplied price column), and the solar and wind scales of the plants on the days those fits used."""
    require(isinstance(profiles, SiteProfileSet), "profiles", "the sites' forecasters read a SiteProfileSet (three "
            "price nodes, solar and wind apart)")
    require(len(nodes) > 0, "nodes", "at least one price node is needed")
    fits = {node: fit_price_forecaster(profiles.at_node(node), forecasts.at_node(node), train_dates, seed,
                                       residuals=residuals, price_source=price_source) for node in sorted(nodes)}
    dates = next(iter(fits.values())).train_dates  # every node's: the days of one source with forecasts and history
    return SiteForecasters(nodes=fits, solar_scale=fit_renewable_scale(forecasts, profiles, dates, SOLAR),
                           wind_scale=fit_renewable_scale(forecasts, profiles, dates, WIND))
