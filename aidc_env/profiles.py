"""Hourly price and renewable profiles by local calendar day (CAISO 2023 by default).

A *profile source* is a CSV of the canonical form (one row per hour)::

    timestamp_utc,local_start,price_usd_per_mwh,solar_mw,wind_mw[,extra columns ignored]
    2023-03-12T10:00:00Z,2023-03-12 03:00-0700,85.0,-34.0,2257.0

``local_start`` is the start of the hour on the local clock (America/Los_Angeles) *with its UTC offset*;
days are local calendar days and every hour is indexed by its local clock hour 0..23.

Daylight-saving days (the day model always spans 24 clock hours, hourly values held; a horizon of several
days is these 24-hour days end to end, so a DST day has 96 slots at 15 min, not 92 or 100):

- the 23-hour spring-forward day has no 02:00 row; clock hour 02 takes the value of clock hour 01;
- the 25-hour fall-back day has two 01:00 rows (one per UTC offset); clock hour 01 is their mean.

:attr:`DayProfile.hours_in_day` records 23, 24 or 25.

Real data has holes. A day with any missing, NaN, non-numeric or non-finite value of price, solar or wind, or with a
wrong set of hourly rows for its DST type, is *skipped* and listed in :attr:`ProfileSet.skipped` with the reason --
never silently filled. A malformed file (not a CSV, a required column missing, a timestamp that cannot be parsed or that
contradicts the other one) raises :class:`~aidc_env.errors.InputError` naming the column and the file line.

``load_profiles`` takes a packaged dataset's name (:mod:`aidc_env.datasets`, e.g. ``caiso-2023``, the full year)
or a path. Without either it loads the small bundled table of representative days (the dataset
``caiso-2023-days``, ``aidc_env/data/caiso_2023_days.csv``, made by ``scripts/make_representative_days.py``); its
sidecar ``caiso_2023_days.json`` carries the full year's renewable peak, so that the bundled table and the full
year normalise solar + wind identically.

Command line: ``python -m aidc_env.profiles [--profiles NAME|PATH] [--json]`` prints a summary.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from aidc_env import datasets
from aidc_env.errors import CliParser, InputError, require, run_cli
from aidc_env.hourly import (COL_LOCAL_START, COL_TIMESTAMP_UTC, HOURS_PER_DAY, HourlyDay, HourlyDaySet, format_summary,
                             parse_hourly_days, print_summary, read_hourly_csv, require_positive, summarise_days)
from aidc_env.limits import MAX_PRICE_USD_PER_MWH, MAX_RENEWABLE_CAPACITY_MW

COL_PRICE = "price_usd_per_mwh"
COL_SOLAR = "solar_mw"
COL_WIND = "wind_mw"
VALUE_COLUMNS = (COL_PRICE, COL_SOLAR, COL_WIND)
REQUIRED_COLUMNS = (COL_TIMESTAMP_UTC, COL_LOCAL_START, *VALUE_COLUMNS)
"""The canonical columns; a profile CSV may have more, which are ignored."""

VALUE_BOUNDS = {COL_PRICE: MAX_PRICE_USD_PER_MWH, COL_SOLAR: MAX_RENEWABLE_CAPACITY_MW,
                COL_WIND: MAX_RENEWABLE_CAPACITY_MW}
"""Largest |value| of each value column (reasons: aidc_env/limits.py); beyond it a cell is a data error."""

BUNDLED_CSV = datasets.DAYS_CSV
BUNDLED_META = datasets.DAYS_META
BUNDLED_SOURCE = "bundled"
"""The source name of the profiles loaded without a name or path (the dataset ``caiso-2023-days``)."""
META_CAPACITY_KEY = "renewable_capacity_mw"

MAX_SKIPPED_SHOWN = 50
"""Longest list of skipped days the text summary prints in full."""


# ------------------------------------------------------------------------------------- Data classes


@dataclass(frozen=True, eq=False)
class DayProfile(HourlyDay):
    """One local calendar day of hourly data, indexed by local clock hour 0..23.

    Arrays are float64, shape ``(24,)`` and read-only. Solar keeps the small negative night values of the
    data (station load); :meth:`renewable_mw` clips them.
    """

    value_columns = VALUE_COLUMNS

    date: str
    price_usd_per_mwh: np.ndarray
    solar_mw: np.ndarray
    wind_mw: np.ndarray
    hours_in_day: int = HOURS_PER_DAY

    def renewable_mw(self) -> np.ndarray:
        """Solar plus wind output, each clipped at 0 (MW), shape (24,)."""
        return np.maximum(self.solar_mw, 0.0) + np.maximum(self.wind_mw, 0.0)

    def renewable_shape(self, capacity_mw: float) -> np.ndarray:
        """Renewable capacity factor: :meth:`renewable_mw` / ``capacity_mw`` clipped to [0, 1]."""
        capacity = require_positive(capacity_mw, "capacity_mw")
        return np.clip(self.renewable_mw() / capacity, 0.0, 1.0)


@dataclass(frozen=True, eq=False)
class ProfileSet(HourlyDaySet[DayProfile]):
    """The complete days of one profile source, the days skipped (with why) and the renewable capacity."""

    day_type = DayProfile
    day_field = "day"

    renewable_capacity_mw: float
    source: str

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "renewable_capacity_mw",
                           require_positive(self.renewable_capacity_mw, "renewable_capacity_mw"))

    def _absent(self, date: str) -> str:
        extent = self._extent("has")
        if date in self.skipped:
            return f"{date} is not in the data: skipped ({self.skipped[date]}); {extent}"
        return f"{date} is not in the data ({extent})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProfileSet):
            return NotImplemented
        return (self.source, self.renewable_capacity_mw, dict(self.skipped), dict(self.days)) == \
            (other.source, other.renewable_capacity_mw, dict(other.skipped), dict(other.days))

    def __hash__(self) -> int:
        return hash((self.source, self.renewable_capacity_mw, tuple(self.days), tuple(self.skipped.items())))


# -------------------------------------------------------------------------------------------- Slots


def hourly_to_slots(hourly: np.ndarray, slots_per_day: int) -> np.ndarray:
    """Map 24 hourly values onto ``slots_per_day`` equal slots.

    If ``slots_per_day`` is a multiple of 24 each hour's value is held over its slots; if it divides 24,
    each slot is the mean of its hours; otherwise InputError("slots", ...).
    """
    require(isinstance(slots_per_day, (int, np.integer)) and not isinstance(slots_per_day, bool), "slots",
            f"slots per day must be an integer, got {slots_per_day!r}")
    slots = int(slots_per_day)
    require(slots > 0, "slots", f"slots per day must be > 0, got {slots}")
    values = np.asarray(hourly, dtype=np.float64)
    require(values.shape == (HOURS_PER_DAY,), "hourly", f"shape {values.shape}, expected ({HOURS_PER_DAY},)")
    if slots % HOURS_PER_DAY == 0:
        return np.repeat(values, slots // HOURS_PER_DAY)
    if HOURS_PER_DAY % slots == 0:
        return values.reshape(slots, HOURS_PER_DAY // slots).mean(axis=1)
    raise InputError("slots", f"{slots} slots per day: must be a multiple or a divisor of {HOURS_PER_DAY}")


# ------------------------------------------------------------------------------------------ Loading


def _peak_renewable_mw(values: Mapping[str, np.ndarray]) -> float | None:
    solar, wind = values[COL_SOLAR], values[COL_WIND]
    both = np.isfinite(solar) & np.isfinite(wind)
    return float(np.max(np.maximum(solar[both], 0.0) + np.maximum(wind[both], 0.0))) if both.any() else None


def _meta_capacity_mw(found: datasets.Dataset, meta_file: str) -> float:
    meta = found.read_meta(meta_file)
    require(META_CAPACITY_KEY in meta, "profiles", f"{meta_file}: no {META_CAPACITY_KEY}")
    return require_positive(meta[META_CAPACITY_KEY], f"{meta_file}.{META_CAPACITY_KEY}")


def parse_profiles_frame(frame: pd.DataFrame, source: str, renewable_capacity_mw: float | None = None) -> ProfileSet:
    """Build a :class:`ProfileSet` from a table read as text (all cells ``str``; see :func:`load_profiles`)."""
    days, skipped, values = parse_hourly_days(frame, source, "profiles", DayProfile, VALUE_BOUNDS)
    if renewable_capacity_mw is None:
        peak = _peak_renewable_mw(values)
        require(peak is not None and peak > 0, "renewable_capacity_mw",
                f"{source} has no positive solar + wind to normalise by; give renewable_capacity_mw explicitly")
        renewable_capacity_mw = peak
    return ProfileSet(days=days, skipped=skipped, renewable_capacity_mw=renewable_capacity_mw, source=source)


def load_profiles(path: str | os.PathLike[str] | None = None, *,
                  renewable_capacity_mw: float | None = None) -> ProfileSet:
    """Load a packaged dataset by name (:mod:`aidc_env.datasets`), a profile CSV of the canonical form (gzip too)
    by path, or the bundled representative days if ``path`` is None (source ``bundled``).

    ``renewable_capacity_mw`` (> 0) overrides the capacity that normalises solar + wind; by default it is
    the peak of max(solar, 0) + max(wind, 0) over all rows of the source with both values (for the bundled
    table: the full 2023 year's peak, from its sidecar JSON).
    """
    if renewable_capacity_mw is not None:
        renewable_capacity_mw = require_positive(renewable_capacity_mw, "renewable_capacity_mw")
    with datasets.source_file(datasets.DEFAULT_PROFILES if path is None else path, datasets.PROFILES) as (
            file, source, found):
        source = BUNDLED_SOURCE if path is None else source
        if renewable_capacity_mw is None and found is not None and found.meta is not None:
            renewable_capacity_mw = _meta_capacity_mw(found, found.meta)
        frame = read_hourly_csv(file, source, REQUIRED_COLUMNS, "profiles")
    return parse_profiles_frame(frame, source, renewable_capacity_mw)


# ------------------------------------------------------------------------------------- Command line


def summary(profiles: ProfileSet) -> dict[str, Any]:
    """A JSON-ready summary of a profile set."""
    prices = np.concatenate([d.price_usd_per_mwh for d in profiles.days.values()])
    price_stats = {"min": float(prices.min()), "mean": float(prices.mean()), "max": float(prices.max()),
                   "negative_hours": int(np.count_nonzero(prices < 0))}
    return summarise_days(profiles, {"renewable_capacity_mw": profiles.renewable_capacity_mw},
                          {"price_usd_per_mwh": price_stats})


def _format_summary(info: Mapping[str, Any]) -> str:
    price = info["price_usd_per_mwh"]
    details = [f"renewable capacity: {info['renewable_capacity_mw']:.1f} MW", f"price: min {price['min']:.2f}, mean "
               f"{price['mean']:.2f}, max {price['max']:.2f} $/MWh; {price['negative_hours']} negative hours"]
    return format_summary(info, details, MAX_SKIPPED_SHOWN)


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m aidc_env.profiles", description="Summarise a profile source: days loaded, "
                       "date range, renewable capacity, skipped days.")
    parser.add_argument("--profiles", metavar="NAME|PATH", default=None, help="a dataset name (python -m "
                        "aidc_env.datasets, e.g. caiso-2023) or a CSV of the canonical form (timestamp_utc, "
                        "local_start, price_usd_per_mwh, solar_mw, wind_mw); default: the bundled representative days")
    return print_summary(parser, argv, lambda args: summary(load_profiles(args.profiles)), _format_summary)


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
