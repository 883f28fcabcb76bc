"""Day-ahead load, solar and wind forecasts by local calendar day (CAISO 2023, DESIGN §9 "Information").

A *forecast source* is a CSV with one row per hour::

    timestamp_utc,local_start,solar_forecast_mw,wind_forecast_mw,load_forecast_mw[,extra columns ignored]
    2023-06-12T07:00:00Z,2023-06-12 00:00-0700,0.0,1421.0,24514.0

It follows the conventions of :mod:`aidc_env.profiles` and reuses its parsing: local calendar days,
every hour indexed by its local clock hour 0..23, the 23-hour DST day holding clock hour 01 over the
skipped 02, the 25-hour day averaging its two 01:00 rows; a day with any missing or non-numeric value
or a wrong set of rows is *skipped* (listed in :attr:`ForecastSet.skipped` with the reason); a
malformed file raises :class:`~aidc_env.errors.InputError` naming the column and the file line.

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
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from aidc_env.errors import CliParser, InputError, require, run_cli
from aidc_env.information import ISSUE_HOUR
from aidc_env.io import dumps_json
from aidc_env.profiles import (
    COL_LOCAL_START,
    COL_TIMESTAMP_UTC,
    HOURS_PER_DAY,
    VALID_HOURS_IN_DAY,
    ProfileSet,
    _clock_hour_values,
    _frozen_hourly,
    _is_valid_date,
    _line,
    _parse_times,
    _parse_values,
    _require_capacity,
    _row_reason,
    _value_reasons,
)

COL_SOLAR_FC = "solar_forecast_mw"
COL_WIND_FC = "wind_forecast_mw"
COL_LOAD_FC = "load_forecast_mw"
FORECAST_COLUMNS = (COL_SOLAR_FC, COL_WIND_FC, COL_LOAD_FC)
REQUIRED_COLUMNS = (COL_TIMESTAMP_UTC, COL_LOCAL_START, *FORECAST_COLUMNS)
"""The canonical columns; a forecast CSV may have more, which are ignored."""

MAX_SKIPPED_SHOWN = 20
"""Longest list of skipped days the text summary prints in full (the file has ~118 uncovered days)."""


@dataclass(frozen=True, eq=False)
class DayForecast:
    """The day-ahead forecasts of one local calendar day, by local clock hour 0..23 (MW, read-only)."""

    date: str
    solar_forecast_mw: np.ndarray
    wind_forecast_mw: np.ndarray
    load_forecast_mw: np.ndarray
    hours_in_day: int = HOURS_PER_DAY

    def __post_init__(self) -> None:
        require(_is_valid_date(self.date), "date", f"{self.date!r} is not a valid YYYY-MM-DD date")
        for name in FORECAST_COLUMNS:
            object.__setattr__(self, name, _frozen_hourly(getattr(self, name), name))
        require(self.hours_in_day in VALID_HOURS_IN_DAY, "hours_in_day",
                f"must be one of {VALID_HOURS_IN_DAY}, got {self.hours_in_day!r}")

    def renewable_mw(self) -> np.ndarray:
        """Forecast solar plus wind, each clipped at 0 (MW, SP15 zone), shape (24,)."""
        return np.maximum(self.solar_forecast_mw, 0.0) + np.maximum(self.wind_forecast_mw, 0.0)

    def net_load_mw(self) -> np.ndarray:
        """Forecast load minus forecast solar and wind (MW), shape (24,)."""
        return self.load_forecast_mw - self.solar_forecast_mw - self.wind_forecast_mw

    def renewable_shape(self, capacity_mw: float, scale: float) -> np.ndarray:
        """``scale`` · :meth:`renewable_mw` / ``capacity_mw`` clipped to [0, 1] (see the module docstring)."""
        capacity = _require_capacity(capacity_mw, "capacity_mw")
        factor = _require_capacity(scale, "renewable_scale")
        return np.clip(factor * self.renewable_mw() / capacity, 0.0, 1.0)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DayForecast):
            return NotImplemented
        return (self.date == other.date and self.hours_in_day == other.hours_in_day
                and all(np.array_equal(getattr(self, n), getattr(other, n)) for n in FORECAST_COLUMNS))

    def __hash__(self) -> int:
        return hash((self.date, self.hours_in_day, *(getattr(self, n).tobytes() for n in FORECAST_COLUMNS)))


@dataclass(frozen=True, eq=False)
class ForecastSet:
    """The complete days of one forecast source and the days skipped (with why)."""

    days: Mapping[str, DayForecast]
    skipped: Mapping[str, str]
    source: str

    def __post_init__(self) -> None:
        require(len(self.days) > 0, "days", "no complete day")
        for date, day in self.days.items():
            require(isinstance(day, DayForecast), f"days[{date}]", "is not a DayForecast")
            require(day.date == date, f"days[{date}]", f"holds the day {day.date}")
        object.__setattr__(self, "days", MappingProxyType(dict(sorted(self.days.items()))))
        object.__setattr__(self, "skipped", MappingProxyType(dict(sorted(self.skipped.items()))))

    def __reduce__(self):
        # MappingProxyType fields do not pickle: rebuild from plain dicts.
        return (ForecastSet, (dict(self.days), dict(self.skipped), self.source))

    def dates(self) -> list[str]:
        """The dates of the complete days, sorted."""
        return list(self.days)

    def day(self, date: str) -> DayForecast:
        """The day ``date``; InputError("forecast day", ...) if it is not a date or not covered."""
        require(_is_valid_date(date), "forecast day", f"{date!r} is not a valid date (expected YYYY-MM-DD)")
        forecast = self.days.get(date)
        if forecast is not None:
            return forecast
        dates = self.dates()
        extent = f"source {self.source} covers {len(dates)} days from {dates[0]} to {dates[-1]}"
        reason = f": skipped ({self.skipped[date]})" if date in self.skipped else ""
        raise InputError("forecast day", f"{date} has no forecast{reason}; {extent}")


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def _read_forecast_csv(file: Path, source: str) -> pd.DataFrame:
    """The required columns as stripped text; InputError if the file is not a forecast CSV."""
    try:
        frame = pd.read_csv(file, dtype=str, keep_default_na=False, na_filter=False, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise InputError("forecasts", f"{source}: empty file, not a CSV with a header") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as err:
        raise InputError("forecasts", f"{source}: not a readable CSV ({' '.join(str(err).split())})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    for column in REQUIRED_COLUMNS:
        require(column in frame.columns, column,
                f"required column missing in {source} (columns found: {', '.join(map(str, frame.columns[:10]))})")
    require(len(frame) > 0, "forecasts", f"{source}: no data rows")
    return frame.loc[:, list(REQUIRED_COLUMNS)].apply(lambda col: col.str.strip())


def parse_forecasts_frame(frame: pd.DataFrame, source: str) -> ForecastSet:
    """Build a :class:`ForecastSet` from a table read as text (all cells ``str``)."""
    times = _parse_times(frame)
    hour_all = times["hour"].to_numpy()
    bad_hour = hour_all >= HOURS_PER_DAY
    if bad_hour.any():
        i = int(np.argmax(bad_hour))
        raise InputError(COL_LOCAL_START, f"line {_line(i)}: clock hour {hour_all[i]} is not in 0..23")
    parsed = {column: _parse_values(frame[column]) for column in FORECAST_COLUMNS}
    value_matrix = np.column_stack([parsed[c][0] for c in FORECAST_COLUMNS])
    utc_hours = times["utc"].to_numpy().astype("datetime64[h]").astype(np.int64)
    offsets = times["offset_min"].to_numpy()
    days: dict[str, DayForecast] = {}
    skipped: dict[str, str] = {}
    for date, rows in sorted(times.groupby("date", sort=False).indices.items()):
        row_reason, hours_in_day = _row_reason(date, utc_hours[rows], offsets[rows])
        reasons = [row_reason] if row_reason else []
        reasons += _value_reasons({c: parsed[c][1][rows] for c in FORECAST_COLUMNS}, len(rows))
        if reasons:
            skipped[date] = "; ".join(reasons)
            continue
        hourly = _clock_hour_values(hour_all[rows], value_matrix[rows])
        days[date] = DayForecast(date, *hourly.T, hours_in_day=hours_in_day)
    if not days:
        shown = "; ".join(f"{d}: {r}" for d, r in list(skipped.items())[:3])
        raise InputError("forecasts", f"{source}: no complete day ({len(skipped)} days skipped, e.g. {shown})")
    return ForecastSet(days=days, skipped=skipped, source=source)


def load_forecasts(path: str | os.PathLike[str]) -> ForecastSet:
    """Load a day-ahead forecast CSV (schema in the module docstring)."""
    file = Path(path)
    source = str(file)
    if not file.exists():
        raise FileNotFoundError(2, "No such file", source)
    require(file.is_file(), "forecasts", f"{source} is not a file")
    return parse_forecasts_frame(_read_forecast_csv(file, source), source)


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
    dates = forecasts.dates()
    renewable = np.concatenate([d.renewable_mw() for d in forecasts.days.values()])
    load = np.concatenate([d.load_forecast_mw for d in forecasts.days.values()])
    return {
        "source": forecasts.source,
        "days_loaded": len(dates),
        "first_day": dates[0],
        "last_day": dates[-1],
        "issue_hour_local": ISSUE_HOUR,
        "dst_days": {d: f.hours_in_day for d, f in forecasts.days.items() if f.hours_in_day != HOURS_PER_DAY},
        "renewable_forecast_mw": {"mean": float(renewable.mean()), "max": float(renewable.max())},
        "load_forecast_mw": {"min": float(load.min()), "mean": float(load.mean()), "max": float(load.max())},
        "days_skipped": len(forecasts.skipped),
        "skipped": dict(forecasts.skipped),
        "dates": dates,
    }


def _format_summary(info: Mapping[str, Any]) -> str:
    renewable, load = info["renewable_forecast_mw"], info["load_forecast_mw"]
    lines = [
        f"source: {info['source']}",
        f"days loaded: {info['days_loaded']} ({info['first_day']} to {info['last_day']}), "
        f"issued at {info['issue_hour_local']:02d}:00 local the day before",
        f"solar + wind forecast: mean {renewable['mean']:.0f}, max {renewable['max']:.0f} MW",
        f"load forecast: min {load['min']:.0f}, mean {load['mean']:.0f}, max {load['max']:.0f} MW",
        "DST days: " + (", ".join(f"{d} ({h} h)" for d, h in info["dst_days"].items()) or "none"),
        f"days skipped: {info['days_skipped']}",
    ]
    skipped = list(info["skipped"].items())
    lines += [f"  {date}: {reason}" for date, reason in skipped[:MAX_SKIPPED_SHOWN]]
    if len(skipped) > MAX_SKIPPED_SHOWN:
        lines.append(f"  ... and {len(skipped) - MAX_SKIPPED_SHOWN} more (use --json)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(
        prog="python -m aidc_env.forecasts",
        description="Summarise a day-ahead forecast source: days covered, DST days, skipped days.",
    )
    parser.add_argument("--forecasts", metavar="CSV", required=True,
                        help="CSV with timestamp_utc, local_start, solar_forecast_mw, wind_forecast_mw, "
                             "load_forecast_mw")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    info = summary(load_forecasts(args.forecasts))
    print(dumps_json(info, indent=2) if args.json else _format_summary(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
