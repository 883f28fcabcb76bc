"""Day-ahead load, solar and wind forecasts by local calendar day (CAISO 2023, DESIGN §9 "Information").

A *forecast source* is a CSV with one row per hour::

    timestamp_utc,local_start,solar_forecast_mw,wind_forecast_mw,load_forecast_mw[,price_forecast_usd_per_mwh][,...]
    2023-06-12T07:00:00Z,2023-06-12 00:00-0700,0.0,1421.0,24514.0

It follows the conventions of :mod:`aidc_env.profiles` and is read by the same code
(:mod:`aidc_env.hourly`): local calendar days, every hour indexed by its local clock hour 0..23, the
23-hour DST day holding clock hour 01 over the skipped 02, the 25-hour day averaging its two 01:00 rows;
a day with any missing or non-numeric value or a wrong set of rows is *skipped* (listed in
:attr:`ForecastSet.skipped` with the reason); a malformed file raises
:class:`~aidc_env.errors.InputError` naming the column and the file line.

**A supplied price forecast** (optional column ``price_forecast_usd_per_mwh``, $/MWh): the price of hour h
of day d as it was known at d − 1's issue time, e.g. the day-ahead market's LMP of the site's node or the
operator's own forecaster. With ``price_source="supplied"`` (``--price-forecast supplied`` on evaluate.py and
train.py) it replaces the package's gradient-boosting forecaster (:mod:`aidc_env.price_forecast`). When the
column is present, a day with all 24 hours of it has a supplied price (:meth:`ForecastSet.supplied_price`); a day
with a missing cell keeps its load, solar and wind forecasts but has none (listed in
:attr:`ForecastSet.supplied_skipped` with the reason), so adding the column never changes the days a run on the
model sees. A cell beyond :data:`~aidc_env.limits.MAX_PRICE_USD_PER_MWH` in magnitude is a data error. Nothing
here can check *when* a supplied value was known; a column written after the fact (e.g. the realised price) is a
relaxation, not a forecast. The CAISO day-ahead market publishes its prices at about 13:00 of d − 1, three hours
after :data:`ISSUE_HOUR`: say when the supplied price is known with ``price_issue_hour``
(``--price-issue-hour 13``; :attr:`aidc_env.information.Forecast.price_issue_hour`), or runs issue it with the
other forecasts, at :data:`ISSUE_HOUR`.

**Timing.** The forecasts of day d are those of the CAISO day-ahead market, published before it
closes at 10:00 local on d − 1 (:data:`ISSUE_HOUR`): a policy may use them from that time on.

**Renewable shape.** The forecast is for the SP15 zone, the actuals of the profile source are
CAISO-wide, so megawatts do not compare (the data README: the actuals' mean is 1.35× the forecast's).
The forecast shape is made comparable to :meth:`aidc_env.profiles.DayProfile.renewable_shape` by one
scale factor *fitted on training days only* (:func:`fit_renewable_scale`: ratio of the mean actual
solar + wind to the mean forecast solar + wind over the training hours; mean-preserving, so the
renewable energy a plan expects is unbiased, and the same statistic as the README's 1.35 so it can be
checked against it) and the profile set's own capacity::

    shape_fc = clip(scale · (max(solar_fc, 0) + max(wind_fc, 0)) / renewable_capacity_mw, 0, 1)

**Sources.** :func:`load_forecasts` takes a packaged dataset's name (:mod:`aidc_env.datasets`:
``caiso-2023-dayahead``, these forecasts with the CAISO day-ahead market's LMP of SCE as the supplied price) or a
path to a CSV (gzip too).

Command line: ``python -m aidc_env.forecasts --forecasts NAME|CSV [--json]`` summarises the coverage.
"""

from __future__ import annotations

import os
from types import MappingProxyType
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from aidc_env import datasets, hourly
from aidc_env.errors import CliParser, InputError, require, run_cli
from aidc_env.information import ISSUE_HOUR
from aidc_env.limits import MAX_PRICE_USD_PER_MWH
from aidc_env.profiles import ProfileSet

COL_SOLAR_FC = "solar_forecast_mw"
COL_WIND_FC = "wind_forecast_mw"
COL_LOAD_FC = "load_forecast_mw"
FORECAST_COLUMNS = (COL_SOLAR_FC, COL_WIND_FC, COL_LOAD_FC)
REQUIRED_COLUMNS = (hourly.COL_TIMESTAMP_UTC, hourly.COL_LOCAL_START, *FORECAST_COLUMNS)
"""The canonical columns; a forecast CSV may have more, which are ignored (but :data:`COL_PRICE_FC`)."""
COL_PRICE_FC = "price_forecast_usd_per_mwh"
"""The optional column of a supplied day-ahead price forecast ($/MWh); read when present."""
PRICE_FC_BOUNDS = {COL_PRICE_FC: MAX_PRICE_USD_PER_MWH}
"""Largest |supplied price| (the profiles' bound on a price; reasons in aidc_env/limits.py)."""

MAX_SKIPPED_SHOWN = 20
"""Longest list of skipped days the text summary prints in full (the file has ~118 uncovered days)."""


@dataclass(frozen=True, eq=False)
class DayForecast(hourly.HourlyDay):
    """The day-ahead forecasts of one local calendar day, by local clock hour 0..23 (MW, read-only)."""

    value_columns = FORECAST_COLUMNS

    date: str
    solar_forecast_mw: np.ndarray
    wind_forecast_mw: np.ndarray
    load_forecast_mw: np.ndarray
    hours_in_day: int = hourly.HOURS_PER_DAY

    def renewable_mw(self) -> np.ndarray:
        """Forecast solar plus wind, each clipped at 0 (MW, SP15 zone), shape (24,)."""
        return np.maximum(self.solar_forecast_mw, 0.0) + np.maximum(self.wind_forecast_mw, 0.0)

    def net_load_mw(self) -> np.ndarray:
        """Forecast load minus forecast solar and wind (MW), shape (24,)."""
        return self.load_forecast_mw - self.solar_forecast_mw - self.wind_forecast_mw

    def renewable_shape(self, capacity_mw: float, scale: float) -> np.ndarray:
        """``scale`` · :meth:`renewable_mw` / ``capacity_mw`` clipped to [0, 1] (see the module docstring)."""
        capacity = hourly.require_positive(capacity_mw, "capacity_mw")
        factor = hourly.require_positive(scale, "renewable_scale")
        return np.clip(factor * self.renewable_mw() / capacity, 0.0, 1.0)


@dataclass(frozen=True, eq=False)
class DayPriceForecast(hourly.HourlyDay):
    """A supplied day-ahead price forecast of one local calendar day ($/MWh by local clock hour 0..23, read-only)."""

    value_columns = (COL_PRICE_FC,)

    date: str
    price_forecast_usd_per_mwh: np.ndarray
    hours_in_day: int = hourly.HOURS_PER_DAY


@dataclass(frozen=True, eq=False)
class ForecastSet(hourly.HourlyDaySet[DayForecast]):
    """The complete days of one forecast source and the days skipped (with why)."""

    day_type = DayForecast
    day_field = "forecast day"

    source: str
    supplied_prices: Mapping[str, DayPriceForecast] = field(default_factory=dict)
    """The days (among :attr:`days`) with a complete supplied price forecast."""
    supplied_skipped: Mapping[str, str] = field(default_factory=dict)
    """Days with forecasts whose supplied price is incomplete, with why (only when the column is present)."""

    def _absent(self, date: str) -> str:
        reason = f": skipped ({self.skipped[date]})" if date in self.skipped else ""
        return f"{date} has no forecast{reason}; {self._extent('covers')}"

    def __post_init__(self) -> None:
        super().__post_init__()
        for date in self.supplied_prices:
            require(date in self.days, f"supplied_prices[{date}]", "is a day without load, solar and wind forecasts")
        object.__setattr__(self, "supplied_prices", MappingProxyType(dict(sorted(self.supplied_prices.items()))))
        object.__setattr__(self, "supplied_skipped", MappingProxyType(dict(sorted(self.supplied_skipped.items()))))

    @property
    def supplies_price(self) -> bool:
        """Whether the source has a supplied price forecast (the :data:`COL_PRICE_FC` column) on at least one day."""
        return len(self.supplied_prices) > 0

    def has_supplied_price(self, date: str) -> bool:
        """Whether day ``date`` has its forecasts and a complete supplied price forecast."""
        return date in self.supplied_prices

    def supplied_price(self, date: str) -> np.ndarray:
        """The supplied day-ahead price forecast of day ``date`` ($/MWh, shape (24,), read-only); InputError
        ("forecasts", ...) if the source has no :data:`COL_PRICE_FC` column or the day has no complete one."""
        require(self.supplies_price, "forecasts", f"{self.source} has no {COL_PRICE_FC} column (a supplied price "
                "forecast); without it the price is forecast by the package's model (price source 'model')")
        self.day(date)  # InputError if the day itself has no forecast
        found = self.supplied_prices.get(date)
        if found is None:
            why = self.supplied_skipped.get(date, f"no {COL_PRICE_FC} in the file")
            raise InputError("forecasts", f"{date} has no supplied price forecast ({why}) in {self.source}")
        return found.price_forecast_usd_per_mwh

    def supplied_dates(self) -> list[str]:
        """The dates with forecasts and a complete supplied price forecast, sorted."""
        return list(self.supplied_prices)


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def parse_forecasts_frame(frame: pd.DataFrame, source: str) -> ForecastSet:
    """Build a :class:`ForecastSet` from a table read as text (all cells ``str``), with the supplied price forecast
    of each day whose :data:`COL_PRICE_FC` cells are complete when the table has that column."""
    days, skipped, _ = hourly.parse_hourly_days(frame, source, "forecasts", DayForecast)
    if COL_PRICE_FC not in frame.columns:
        return ForecastSet(days=days, skipped=skipped, source=source)
    prices, price_skipped, _ = hourly.parse_hourly_days(frame, source, COL_PRICE_FC, DayPriceForecast,
                                                        PRICE_FC_BOUNDS, allow_empty=True)
    return ForecastSet(days=days, skipped=skipped, source=source,
                       supplied_prices={d: p for d, p in prices.items() if d in days},
                       supplied_skipped={d: why for d, why in price_skipped.items() if d in days})


def load_forecasts(path: str | os.PathLike[str]) -> ForecastSet:
    """Load a packaged dataset by name (:mod:`aidc_env.datasets`) or a day-ahead forecast CSV by path (schema in
    the module docstring)."""
    found = datasets.resolve(path, datasets.FORECASTS)
    if isinstance(found, datasets.Dataset):
        with found.local_path() as file:
            frame = hourly.read_hourly_csv(file, found.name, REQUIRED_COLUMNS, "forecasts", (COL_PRICE_FC,))
        return parse_forecasts_frame(frame, found.name)
    source = str(found)
    if not found.exists():
        raise FileNotFoundError(2, "No such file", source)
    require(found.is_file(), "forecasts", f"{source} is not a file")
    return parse_forecasts_frame(hourly.read_hourly_csv(found, source, REQUIRED_COLUMNS, "forecasts", (COL_PRICE_FC,)),
                                 source)


# --------------------------------------------------------------------------------------------------
# The renewable shape
# --------------------------------------------------------------------------------------------------


def common_dates(forecasts: ForecastSet, profiles: ProfileSet, dates: Iterable[str] | None = None) -> list[str]:
    """The dates (of ``dates``, default all) complete in both the forecasts and the profiles, sorted."""
    both = set(forecasts.days) & set(profiles.days)
    return sorted(both if dates is None else both.intersection(dates))


def fit_renewable_scale(forecasts: ForecastSet, profiles: ProfileSet, train_dates: Iterable[str]) -> float:
    """Mean actual solar + wind over mean forecast solar + wind, over the training days of both sources."""
    dates = common_dates(forecasts, profiles, train_dates)
    require(len(dates) > 0, "train_dates", "no training day has both forecasts and actuals")
    actual = sum(float(profiles.days[d].renewable_mw().sum()) for d in dates)
    forecast = sum(float(forecasts.days[d].renewable_mw().sum()) for d in dates)
    require(forecast > 0, "forecasts", "forecast solar + wind is zero on every training day")
    return actual / forecast


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def summary(forecasts: ForecastSet) -> dict[str, Any]:
    """A JSON-ready summary of a forecast set."""
    renewable = np.concatenate([d.renewable_mw() for d in forecasts.days.values()])
    load = np.concatenate([d.load_forecast_mw for d in forecasts.days.values()])
    dates = forecasts.supplied_dates()
    price = np.concatenate([forecasts.supplied_price(date) for date in dates]) if dates else None
    return hourly.summarise_days(forecasts, {"issue_hour_local": ISSUE_HOUR}, {
        "renewable_forecast_mw": {"mean": float(renewable.mean()), "max": float(renewable.max())},
        "load_forecast_mw": {"min": float(load.min()), "mean": float(load.mean()), "max": float(load.max())},
        "price_forecast_usd_per_mwh": None if price is None else {
            "days": len(dates), "first_day": dates[0], "last_day": dates[-1],
            "min": float(price.min()), "mean": float(price.mean()), "max": float(price.max())},
    })


def _format_summary(info: Mapping[str, Any]) -> str:
    renewable, load = info["renewable_forecast_mw"], info["load_forecast_mw"]
    details = [
        f"solar + wind forecast: mean {renewable['mean']:.0f}, max {renewable['max']:.0f} MW",
        f"load forecast: min {load['min']:.0f}, mean {load['mean']:.0f}, max {load['max']:.0f} MW",
    ]
    price = info["price_forecast_usd_per_mwh"]
    details.append("supplied price forecast: " + ("none (the package's model forecasts the price)" if price is None
                   else f"{price['days']} days ({price['first_day']} to {price['last_day']}), min {price['min']:.2f}, "
                        f"mean {price['mean']:.2f}, max {price['max']:.2f} $/MWh"))
    issued = f", issued at {info['issue_hour_local']:02d}:00 local the day before"
    return hourly.format_summary(info, details, MAX_SKIPPED_SHOWN, issued)


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(
        prog="python -m aidc_env.forecasts",
        description="Summarise a day-ahead forecast source: days covered, DST days, skipped days.",
    )
    parser.add_argument("--forecasts", metavar="NAME|CSV", required=True,
                        help="a dataset name (python -m aidc_env.datasets, e.g. caiso-2023-dayahead) or a CSV with "
                             "timestamp_utc, local_start, solar_forecast_mw, wind_forecast_mw, load_forecast_mw and "
                             "optionally price_forecast_usd_per_mwh")
    return hourly.print_summary(parser, argv, lambda args: summary(load_forecasts(args.forecasts)), _format_summary)


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
