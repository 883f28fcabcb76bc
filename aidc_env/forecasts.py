"""Day-ahead load, solar and wind forecasts by local calendar day (CAISO 2023, DESIGN §9 "Information").

A *forecast source* is a CSV with one row per hour::

    timestamp_utc,local_start,solar_forecast_mw,wind_forecast_mw,load_forecast_mw[,extra columns ignored]
    2023-06-12T07:00:00Z,2023-06-12 00:00-0700,0.0,1421.0,24514.0

It follows the conventions of :mod:`aidc_env.profiles` and is read by the same code
(:mod:`aidc_env.hourly`): local calendar days, every hour indexed by its local clock hour 0..23, the
23-hour DST day holding clock hour 01 over the skipped 02, the 25-hour day averaging its two 01:00 rows;
a day with any missing or non-numeric value or a wrong set of rows is *skipped* (listed in
:attr:`ForecastSet.skipped` with the reason); a malformed file raises
:class:`~aidc_env.errors.InputError` naming the column and the file line.

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

Command line: ``python -m aidc_env.forecasts --forecasts CSV [--json]`` summarises the coverage.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aidc_env import hourly
from aidc_env.errors import CliParser, require, run_cli
from aidc_env.information import ISSUE_HOUR
from aidc_env.profiles import ProfileSet

COL_SOLAR_FC = "solar_forecast_mw"
COL_WIND_FC = "wind_forecast_mw"
COL_LOAD_FC = "load_forecast_mw"
FORECAST_COLUMNS = (COL_SOLAR_FC, COL_WIND_FC, COL_LOAD_FC)
REQUIRED_COLUMNS = (hourly.COL_TIMESTAMP_UTC, hourly.COL_LOCAL_START, *FORECAST_COLUMNS)
"""The canonical columns; a forecast CSV may have more, which are ignored."""

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
class ForecastSet(hourly.HourlyDaySet[DayForecast]):
    """The complete days of one forecast source and the days skipped (with why)."""

    day_type = DayForecast
    day_field = "forecast day"

    source: str

    def _absent(self, date: str) -> str:
        reason = f": skipped ({self.skipped[date]})" if date in self.skipped else ""
        return f"{date} has no forecast{reason}; {self._extent('covers')}"


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def parse_forecasts_frame(frame: pd.DataFrame, source: str) -> ForecastSet:
    """Build a :class:`ForecastSet` from a table read as text (all cells ``str``)."""
    days, skipped, _ = hourly.parse_hourly_days(frame, source, "forecasts", DayForecast)
    return ForecastSet(days=days, skipped=skipped, source=source)


def load_forecasts(path: str | os.PathLike[str]) -> ForecastSet:
    """Load a day-ahead forecast CSV (schema in the module docstring)."""
    file = Path(path)
    source = str(file)
    if not file.exists():
        raise FileNotFoundError(2, "No such file", source)
    require(file.is_file(), "forecasts", f"{source} is not a file")
    return parse_forecasts_frame(hourly.read_hourly_csv(file, source, REQUIRED_COLUMNS, "forecasts"), source)


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
    return hourly.summarise_days(forecasts, {"issue_hour_local": ISSUE_HOUR}, {
        "renewable_forecast_mw": {"mean": float(renewable.mean()), "max": float(renewable.max())},
        "load_forecast_mw": {"min": float(load.min()), "mean": float(load.mean()), "max": float(load.max())},
    })


def _format_summary(info: Mapping[str, Any]) -> str:
    renewable, load = info["renewable_forecast_mw"], info["load_forecast_mw"]
    details = [
        f"solar + wind forecast: mean {renewable['mean']:.0f}, max {renewable['max']:.0f} MW",
        f"load forecast: min {load['min']:.0f}, mean {load['mean']:.0f}, max {load['max']:.0f} MW",
    ]
    issued = f", issued at {info['issue_hour_local']:02d}:00 local the day before"
    return hourly.format_summary(info, details, MAX_SKIPPED_SHOWN, issued)


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(
        prog="python -m aidc_env.forecasts",
        description="Summarise a day-ahead forecast source: days covered, DST days, skipped days.",
    )
    parser.add_argument("--forecasts", metavar="CSV", required=True,
                        help="CSV with timestamp_utc, local_start, solar_forecast_mw, wind_forecast_mw, "
                             "load_forecast_mw")
    return hourly.print_summary(parser, argv, lambda args: summary(load_forecasts(args.forecasts)), _format_summary)


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
