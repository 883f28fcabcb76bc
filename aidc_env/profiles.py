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

Real data has holes. A day with any missing, NaN, non-numeric or non-finite value of price, solar or
wind, or with a wrong set of hourly rows for its DST type, is *skipped* and listed in
:attr:`ProfileSet.skipped` with the reason -- never silently filled. A malformed file (not a CSV, a
required column missing, a timestamp that cannot be parsed or that contradicts the other one) raises
:class:`~aidc_env.errors.InputError` naming the column and the file line.

``load_profiles()`` without a path loads the small bundled table of representative days
(``aidc_env/data/caiso_2023_days.csv``, made by ``scripts/make_representative_days.py``); its sidecar
``caiso_2023_days.json`` carries the full year's renewable peak, so that the bundled table and the full
year normalise solar + wind identically.

Command line: ``python -m aidc_env.profiles [--profiles PATH] [--json]`` prints a summary.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from aidc_env.errors import CliParser, InputError, require, run_cli
from aidc_env.io import dumps_json
from aidc_env.limits import MAX_PRICE_USD_PER_MWH, MAX_RENEWABLE_CAPACITY_MW

HOURS_PER_DAY = 24
"""Clock hours of the day model (DST days are mapped onto 24 clock hours)."""

SPRING_FORWARD_HOURS = HOURS_PER_DAY - 1
FALL_BACK_HOURS = HOURS_PER_DAY + 1
VALID_HOURS_IN_DAY = (SPRING_FORWARD_HOURS, HOURS_PER_DAY, FALL_BACK_HOURS)

COL_TIMESTAMP_UTC = "timestamp_utc"
COL_LOCAL_START = "local_start"
COL_PRICE = "price_usd_per_mwh"
COL_SOLAR = "solar_mw"
COL_WIND = "wind_mw"
VALUE_COLUMNS = (COL_PRICE, COL_SOLAR, COL_WIND)
REQUIRED_COLUMNS = (COL_TIMESTAMP_UTC, COL_LOCAL_START, *VALUE_COLUMNS)
"""The canonical columns; a profile CSV may have more, which are ignored."""

PACKAGE = "aidc_env"
BUNDLED_DIR = "data"
BUNDLED_CSV = "caiso_2023_days.csv"
BUNDLED_META = "caiso_2023_days.json"
BUNDLED_SOURCE = "bundled"
META_CAPACITY_KEY = "renewable_capacity_mw"

CSV_HEADER_LINES = 1
"""Lines before the first data row; file line of data row i (0-based) = i + CSV_HEADER_LINES + 1."""

MINUTES_PER_HOUR = 60
UNIX_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()

DATE_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}$")
LOCAL_START_PATTERN = (
    r"^(?P<date>\d{4}-\d{2}-\d{2})[ T](?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?"
    r"\s*(?P<offset>Z|(?P<offset_sign>[+-])(?P<offset_hours>\d{2}):?(?P<offset_minutes>\d{2}))$"
)
"""``YYYY-MM-DD HH:MM[:SS]±HHMM`` (or ``±HH:MM`` / ``Z``), the local clock with its UTC offset."""

NAN_TOKENS = frozenset({"nan", "-nan", "+nan"})
MISSING_TOKENS = frozenset({"", "na", "n/a", "#n/a", "null", "none", "<na>"})
"""Cell texts (lower-cased, stripped) read as 'missing' rather than 'non-numeric'."""

# Cell status codes of the value columns.
CELL_OK = 0
CELL_MISSING = 1
CELL_NAN = 2
CELL_NON_NUMERIC = 3
CELL_NON_FINITE = 4

MAX_SKIPPED_SHOWN = 50
"""Longest list of skipped days the text summary prints in full."""


# --------------------------------------------------------------------------------------------------
# Data classes
# --------------------------------------------------------------------------------------------------


def _is_valid_date(text: object) -> bool:
    if not isinstance(text, str) or not DATE_PATTERN.match(text):
        return False
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _frozen_hourly(values: object, name: str) -> np.ndarray:
    try:
        array = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise InputError(name, f"not numeric ({err})") from None
    require(array.shape == (HOURS_PER_DAY,), name, f"shape {array.shape}, expected ({HOURS_PER_DAY},)")
    require(bool(np.all(np.isfinite(array))), name, "contains NaN or infinite values")
    array.setflags(write=False)
    return array


def _require_capacity(capacity_mw: object, name: str = "renewable_capacity_mw") -> float:
    require(
        isinstance(capacity_mw, (int, float, np.integer, np.floating)) and not isinstance(capacity_mw, bool),
        name,
        f"must be a number, got {capacity_mw!r}",
    )
    value = float(capacity_mw)  # type: ignore[arg-type]
    require(math.isfinite(value) and value > 0, name, f"must be a finite number > 0, got {value!r}")
    return value


@dataclass(frozen=True, eq=False)
class DayProfile:
    """One local calendar day of hourly data, indexed by local clock hour 0..23.

    Arrays are float64, shape ``(24,)`` and read-only. Solar keeps the small negative night values of the
    data (station load); :meth:`renewable_mw` clips them.
    """

    date: str
    price_usd_per_mwh: np.ndarray
    solar_mw: np.ndarray
    wind_mw: np.ndarray
    hours_in_day: int = HOURS_PER_DAY

    def __post_init__(self) -> None:
        require(_is_valid_date(self.date), "date", f"{self.date!r} is not a valid YYYY-MM-DD date")
        for name in VALUE_COLUMNS:
            object.__setattr__(self, name, _frozen_hourly(getattr(self, name), name))
        require(
            self.hours_in_day in VALID_HOURS_IN_DAY,
            "hours_in_day",
            f"must be one of {VALID_HOURS_IN_DAY}, got {self.hours_in_day!r}",
        )

    def renewable_mw(self) -> np.ndarray:
        """Solar plus wind output, each clipped at 0 (MW), shape (24,)."""
        return np.maximum(self.solar_mw, 0.0) + np.maximum(self.wind_mw, 0.0)

    def renewable_shape(self, capacity_mw: float) -> np.ndarray:
        """Renewable capacity factor: :meth:`renewable_mw` / ``capacity_mw`` clipped to [0, 1]."""
        capacity = _require_capacity(capacity_mw, "capacity_mw")
        return np.clip(self.renewable_mw() / capacity, 0.0, 1.0)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DayProfile):
            return NotImplemented
        return (
            self.date == other.date
            and self.hours_in_day == other.hours_in_day
            and all(np.array_equal(getattr(self, n), getattr(other, n)) for n in VALUE_COLUMNS)
        )

    def __hash__(self) -> int:
        return hash((self.date, self.hours_in_day, *(getattr(self, n).tobytes() for n in VALUE_COLUMNS)))


@dataclass(frozen=True, eq=False)
class ProfileSet:
    """The complete days of one profile source, the days skipped (with why) and the renewable capacity."""

    days: Mapping[str, DayProfile]
    skipped: Mapping[str, str]
    renewable_capacity_mw: float
    source: str

    def __post_init__(self) -> None:
        require(len(self.days) > 0, "days", "no complete day")
        for date, day in self.days.items():
            require(isinstance(day, DayProfile), f"days[{date}]", "is not a DayProfile")
            require(day.date == date, f"days[{date}]", f"holds the day {day.date}")
        object.__setattr__(self, "days", MappingProxyType(dict(sorted(self.days.items()))))
        object.__setattr__(self, "skipped", MappingProxyType(dict(sorted(self.skipped.items()))))
        object.__setattr__(self, "renewable_capacity_mw", _require_capacity(self.renewable_capacity_mw))

    def __reduce__(self):
        # MappingProxyType fields do not pickle: rebuild from plain dicts (pickle, deepcopy, worker processes).
        return (ProfileSet, (dict(self.days), dict(self.skipped), self.renewable_capacity_mw, self.source))

    def dates(self) -> list[str]:
        """The dates of the complete days, sorted."""
        return list(self.days)

    def day(self, date: str) -> DayProfile:
        """The day ``date`` (YYYY-MM-DD); InputError("day", ...) if it is not a date or not in the data."""
        if not _is_valid_date(date):
            raise InputError("day", f"{date!r} is not a valid date (expected YYYY-MM-DD)")
        profile = self.days.get(date)
        if profile is not None:
            return profile
        dates = self.dates()
        extent = f"source {self.source} has {len(dates)} days from {dates[0]} to {dates[-1]}"
        if date in self.skipped:
            raise InputError("day", f"{date} is not in the data: skipped ({self.skipped[date]}); {extent}")
        raise InputError("day", f"{date} is not in the data ({extent})")

    def consecutive_days(self, first: str, count: int) -> list[DayProfile]:
        """The ``count`` consecutive days from ``first`` (a horizon).

        InputError("day", ...) if ``first`` is not in the data; InputError("horizon_days", ...) naming the
        first later day that is not (past the data, or skipped for a gap).
        """
        days = [self.day(first)]
        for offset in range(1, count):
            date = (dt.date.fromisoformat(first) + dt.timedelta(days=offset)).isoformat()
            if date not in self.days:
                why = f"skipped ({self.skipped[date]})" if date in self.skipped else (
                    f"past the data, which ends on {self.dates()[-1]}" if date > self.dates()[-1] else "not in the data")
                raise InputError("horizon_days", f"a horizon of {count} days from {first} needs {date}: {why}")
            days.append(self.days[date])
        return days

    def horizon_starts(self, count: int) -> list[str]:
        """The days that start ``count`` consecutive complete days of this source, sorted."""
        dates = set(self.days)
        return [d for d in self.dates()
                if all((dt.date.fromisoformat(d) + dt.timedelta(days=k)).isoformat() in dates for k in range(count))]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProfileSet):
            return NotImplemented
        return (
            self.source == other.source
            and self.renewable_capacity_mw == other.renewable_capacity_mw
            and dict(self.skipped) == dict(other.skipped)
            and dict(self.days) == dict(other.days)
        )

    def __hash__(self) -> int:
        return hash((self.source, self.renewable_capacity_mw, tuple(self.days), tuple(self.skipped.items())))


# --------------------------------------------------------------------------------------------------
# Slots
# --------------------------------------------------------------------------------------------------


def hourly_to_slots(hourly: np.ndarray, slots_per_day: int) -> np.ndarray:
    """Map 24 hourly values onto ``slots_per_day`` equal slots.

    If ``slots_per_day`` is a multiple of 24 each hour's value is held over its slots; if it divides 24,
    each slot is the mean of its hours; otherwise InputError("slots", ...).
    """
    require(
        isinstance(slots_per_day, (int, np.integer)) and not isinstance(slots_per_day, bool),
        "slots",
        f"slots per day must be an integer, got {slots_per_day!r}",
    )
    slots = int(slots_per_day)
    require(slots > 0, "slots", f"slots per day must be > 0, got {slots}")
    values = np.asarray(hourly, dtype=np.float64)
    require(values.shape == (HOURS_PER_DAY,), "hourly", f"shape {values.shape}, expected ({HOURS_PER_DAY},)")
    if slots % HOURS_PER_DAY == 0:
        return np.repeat(values, slots // HOURS_PER_DAY)
    if HOURS_PER_DAY % slots == 0:
        return values.reshape(slots, HOURS_PER_DAY // slots).mean(axis=1)
    raise InputError("slots", f"{slots} slots per day: must be a multiple or a divisor of {HOURS_PER_DAY}")


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def _line(row_index: int) -> int:
    return int(row_index) + CSV_HEADER_LINES + 1


def _read_csv(handle: Any, source: str) -> pd.DataFrame:
    """The required columns as stripped text; InputError if the file is not a CSV of the canonical form."""
    try:
        frame = pd.read_csv(
            handle,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            skipinitialspace=True,
        )
    except pd.errors.EmptyDataError:
        raise InputError("profiles", f"{source}: empty file, not a CSV with a header") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, EOFError, OSError, zipfile.BadZipFile) as err:
        # (pandas infers compression from the suffix: a corrupt .zip or .gz raises from zipfile or gzip)
        reason = " ".join(str(err).split())
        raise InputError("profiles", f"{source}: not a readable CSV ({reason})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    for column in REQUIRED_COLUMNS:
        require(
            column in frame.columns,
            column,
            f"required column missing in {source} (columns found: {', '.join(map(str, frame.columns[:10]))})",
        )
    frame = frame.loc[:, list(REQUIRED_COLUMNS)].fillna("")
    require(len(frame) > 0, "profiles", f"{source}: no data rows")
    return frame.apply(lambda col: col.str.strip())


def _offset_minutes(parts: pd.DataFrame) -> np.ndarray:
    """UTC offsets in minutes from the regex groups of :data:`LOCAL_START_PATTERN` ('Z' is 0)."""
    sign = np.where((parts["offset_sign"] == "-").to_numpy(), -1, 1)
    hours = parts["offset_hours"].fillna("0").astype(int).to_numpy()
    minutes = parts["offset_minutes"].fillna("0").astype(int).to_numpy()
    return sign * (hours * MINUTES_PER_HOUR + minutes)


def _parse_times(frame: pd.DataFrame) -> pd.DataFrame:
    """Per row: UTC instant (naive UTC), local date, local clock hour, UTC offset. Raises on malformed rows."""
    utc_text = frame[COL_TIMESTAMP_UTC]
    utc = pd.to_datetime(utc_text, utc=True, format="ISO8601", errors="coerce")
    bad = utc.isna().to_numpy()
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(COL_TIMESTAMP_UTC, f"line {_line(i)}: {utc_text.iloc[i]!r} is not a timestamp")
    utc = utc.dt.tz_localize(None)

    local_text = frame[COL_LOCAL_START]
    parts = local_text.str.extract(LOCAL_START_PATTERN)
    bad = parts["date"].isna().to_numpy()
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            COL_LOCAL_START,
            f"line {_line(i)}: {local_text.iloc[i]!r} is not a local time with UTC offset "
            "(expected 'YYYY-MM-DD HH:MM-0800')",
        )
    local_clock = pd.to_datetime(
        parts["date"] + " " + parts["hour"] + ":" + parts["minute"], format="%Y-%m-%d %H:%M", errors="coerce"
    )
    bad = local_clock.isna().to_numpy()
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(COL_LOCAL_START, f"line {_line(i)}: {local_text.iloc[i]!r} is not a valid date and time")
    seconds = parts["second"].fillna("00")
    off_hour = (parts["minute"] != "00") | (seconds != "00") | (utc.dt.minute != 0) | (utc.dt.second != 0)
    if off_hour.to_numpy().any():
        i = int(np.argmax(off_hour.to_numpy()))
        raise InputError(
            COL_LOCAL_START,
            f"line {_line(i)}: {local_text.iloc[i]!r} / {utc_text.iloc[i]!r} is not the start of an hour "
            "(profiles must be hourly)",
        )
    offset_minutes = _offset_minutes(parts)
    implied_utc = local_clock - pd.to_timedelta(offset_minutes, unit="min")
    mismatch = (implied_utc != utc).to_numpy()
    if mismatch.any():
        i = int(np.argmax(mismatch))
        raise InputError(
            COL_LOCAL_START,
            f"line {_line(i)}: {local_text.iloc[i]!r} does not match {COL_TIMESTAMP_UTC} {utc_text.iloc[i]!r}",
        )
    return pd.DataFrame(
        {
            "utc": utc.to_numpy(),
            "date": parts["date"].to_numpy(),
            "hour": parts["hour"].astype(int).to_numpy(),
            "offset_min": offset_minutes,
        }
    )


def _parse_values(text: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Numbers (NaN where not usable) and a status code per cell."""
    numbers = np.array(pd.to_numeric(text, errors="coerce"), dtype=np.float64)
    status = np.full(len(text), CELL_OK, dtype=np.int8)
    not_number = np.isnan(numbers)
    if not_number.any():
        lower = text[not_number].str.lower()
        codes = np.full(len(lower), CELL_NON_NUMERIC, dtype=np.int8)
        codes[lower.isin(MISSING_TOKENS).to_numpy()] = CELL_MISSING
        codes[lower.isin(NAN_TOKENS).to_numpy()] = CELL_NAN
        status[not_number] = codes
    status[np.isinf(numbers)] = CELL_NON_FINITE
    numbers[status != CELL_OK] = np.nan
    return numbers, status


VALUE_BOUNDS = {COL_PRICE: MAX_PRICE_USD_PER_MWH, COL_SOLAR: MAX_RENEWABLE_CAPACITY_MW,
                COL_WIND: MAX_RENEWABLE_CAPACITY_MW}
"""Largest |value| of each value column (reasons: aidc_env/limits.py); beyond it a cell is a data error."""


def _check_value_bounds(column: str, numbers: np.ndarray) -> None:
    """InputError naming the column and line of the first cell beyond :data:`VALUE_BOUNDS`."""
    beyond = np.abs(np.nan_to_num(numbers)) > VALUE_BOUNDS[column]
    if beyond.any():
        i = int(np.argmax(beyond))
        raise InputError(column, f"line {_line(i)}: {numbers[i]:g} is beyond ±{VALUE_BOUNDS[column]:g}")


def _value_reasons(statuses: Mapping[str, np.ndarray], n_rows: int) -> list[str]:
    reasons = []
    for column, status in statuses.items():
        counts = {code: int(np.count_nonzero(status == code)) for code in (CELL_MISSING, CELL_NAN)}
        missing = counts[CELL_MISSING] + counts[CELL_NAN]
        if missing:
            nan_note = " (NaN)" if counts[CELL_NAN] == missing else ""
            reasons.append(f"{column} missing{nan_note} in {missing} of {n_rows} hours")
        non_numeric = int(np.count_nonzero(status == CELL_NON_NUMERIC))
        if non_numeric:
            reasons.append(f"non-numeric {column} in {non_numeric} of {n_rows} hours")
        non_finite = int(np.count_nonzero(status == CELL_NON_FINITE))
        if non_finite:
            reasons.append(f"non-finite {column} in {non_finite} of {n_rows} hours")
    return reasons


def _row_reason(date: str, utc_hours: np.ndarray, offset_min: np.ndarray) -> tuple[str | None, int]:
    """Check that a day's rows are exactly its local hours. Returns (reason or None, hours in the day).

    ``utc_hours`` are the rows' UTC instants in whole hours since the epoch. The day runs from local
    midnight at the first row's UTC offset to local midnight at the last row's offset: 24 hours, or 23/25
    on the days the offset changes by one hour.
    """
    order = np.argsort(utc_hours, kind="stable")
    utc_sorted = utc_hours[order]
    first_offset = int(offset_min[order[0]])
    last_offset = int(offset_min[order[-1]])
    hours_in_day = HOURS_PER_DAY - (last_offset - first_offset) // MINUTES_PER_HOUR
    if hours_in_day not in VALID_HOURS_IN_DAY or (last_offset - first_offset) % MINUTES_PER_HOUR:
        return f"UTC offset changes by {last_offset - first_offset} min within the day", HOURS_PER_DAY
    midnight_hours = dt.date.fromisoformat(date).toordinal() - UNIX_EPOCH_ORDINAL
    start = midnight_hours * HOURS_PER_DAY - first_offset // MINUTES_PER_HOUR
    expected = start + np.arange(hours_in_day)
    if utc_sorted.shape == expected.shape and np.array_equal(utc_sorted, expected):
        return None, hours_in_day
    details = []
    n_missing = len(np.setdiff1d(expected, utc_sorted))
    if n_missing:
        details.append(f"{n_missing} hours missing")
    n_duplicated = len(utc_sorted) - len(np.unique(utc_sorted))
    if n_duplicated:
        details.append(f"{n_duplicated} duplicated hours")
    n_extra = len(np.setdiff1d(utc_sorted, expected))
    if n_extra:
        details.append(f"{n_extra} rows off the local day")
    kind = {SPRING_FORWARD_HOURS: "23-hour DST", FALL_BACK_HOURS: "25-hour DST"}.get(hours_in_day, "24-hour")
    detail = f" ({', '.join(details)})" if details else ""
    return f"{len(utc_sorted)} rows, expected {hours_in_day} for a {kind} day{detail}", hours_in_day


def _clock_hour_values(hours: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Rows (n, k) of values -> (24, k) by clock hour.

    A repeated clock hour (fall back) is the mean of its rows; a skipped clock hour (spring forward) takes
    the previous clock hour's value (the first hour of the day, if ever skipped, takes the next one's).
    """
    counts = np.bincount(hours, minlength=HOURS_PER_DAY)
    if len(hours) == HOURS_PER_DAY and np.all(counts == 1):
        by_hour = np.empty_like(values)
        by_hour[hours] = values
        return by_hour
    sums = np.zeros((HOURS_PER_DAY, values.shape[1]))
    np.add.at(sums, hours, values)
    by_hour = np.full_like(sums, np.nan)
    present = counts > 0
    by_hour[present] = sums[present] / counts[present, None]
    first_present = int(np.argmax(present))
    by_hour[:first_present] = by_hour[first_present]
    for hour in range(first_present + 1, HOURS_PER_DAY):
        if not present[hour]:
            by_hour[hour] = by_hour[hour - 1]
    return by_hour


def _build_days(
    times: pd.DataFrame, values: Mapping[str, np.ndarray], statuses: Mapping[str, np.ndarray]
) -> tuple[dict[str, DayProfile], dict[str, str]]:
    days: dict[str, DayProfile] = {}
    skipped: dict[str, str] = {}
    utc_hours_all = times["utc"].to_numpy().astype("datetime64[h]").astype(np.int64)
    offset_all = times["offset_min"].to_numpy()
    hour_all = times["hour"].to_numpy()
    bad_hour = hour_all >= HOURS_PER_DAY
    if bad_hour.any():
        i = int(np.argmax(bad_hour))
        raise InputError(COL_LOCAL_START, f"line {_line(i)}: clock hour {hour_all[i]} is not in 0..23")
    value_matrix = np.column_stack([values[c] for c in VALUE_COLUMNS])
    for date, rows in sorted(times.groupby("date", sort=False).indices.items()):
        reasons = []
        row_reason, hours_in_day = _row_reason(date, utc_hours_all[rows], offset_all[rows])
        if row_reason:
            reasons.append(row_reason)
        reasons += _value_reasons({c: statuses[c][rows] for c in VALUE_COLUMNS}, len(rows))
        if reasons:
            skipped[date] = "; ".join(reasons)
            continue
        hourly = _clock_hour_values(hour_all[rows], value_matrix[rows])
        days[date] = DayProfile(
            date, hourly[:, 0], hourly[:, 1], hourly[:, 2], hours_in_day=hours_in_day
        )
    return days, skipped


def _peak_renewable_mw(values: Mapping[str, np.ndarray]) -> float | None:
    solar, wind = values[COL_SOLAR], values[COL_WIND]
    both = np.isfinite(solar) & np.isfinite(wind)
    if not both.any():
        return None
    return float(np.max(np.maximum(solar[both], 0.0) + np.maximum(wind[both], 0.0)))


def _bundled_capacity_mw() -> float:
    meta_file = resources.files(PACKAGE).joinpath(BUNDLED_DIR, BUNDLED_META)
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise InputError("profiles", f"bundled metadata {BUNDLED_META} unreadable ({err})") from None
    require(isinstance(meta, dict) and META_CAPACITY_KEY in meta, "profiles", f"{BUNDLED_META}: no {META_CAPACITY_KEY}")
    return _require_capacity(meta[META_CAPACITY_KEY], f"{BUNDLED_META}.{META_CAPACITY_KEY}")


def parse_profiles_frame(
    frame: pd.DataFrame, source: str, renewable_capacity_mw: float | None = None
) -> ProfileSet:
    """Build a :class:`ProfileSet` from a table read as text (all cells ``str``; see :func:`load_profiles`)."""
    times = _parse_times(frame)
    values: dict[str, np.ndarray] = {}
    statuses: dict[str, np.ndarray] = {}
    for column in VALUE_COLUMNS:
        values[column], statuses[column] = _parse_values(frame[column])
        _check_value_bounds(column, values[column])
    days, skipped = _build_days(times, values, statuses)
    if not days:
        shown = "; ".join(f"{d}: {r}" for d, r in list(skipped.items())[:3])
        raise InputError("profiles", f"{source}: no complete day ({len(skipped)} days skipped, e.g. {shown})")
    if renewable_capacity_mw is None:
        peak = _peak_renewable_mw(values)
        require(
            peak is not None and peak > 0,
            "renewable_capacity_mw",
            f"{source} has no positive solar + wind to normalise by; give renewable_capacity_mw explicitly",
        )
        renewable_capacity_mw = peak
    return ProfileSet(days=days, skipped=skipped, renewable_capacity_mw=renewable_capacity_mw, source=source)


def load_profiles(
    path: str | os.PathLike[str] | None = None, *, renewable_capacity_mw: float | None = None
) -> ProfileSet:
    """Load a profile CSV of the canonical form, or the bundled representative days if ``path`` is None.

    ``renewable_capacity_mw`` (> 0) overrides the capacity that normalises solar + wind; by default it is
    the peak of max(solar, 0) + max(wind, 0) over all rows of the source with both values (for the bundled
    table: the full 2023 year's peak, from its sidecar JSON).
    """
    if renewable_capacity_mw is not None:
        renewable_capacity_mw = _require_capacity(renewable_capacity_mw)
    if path is None:
        capacity = renewable_capacity_mw if renewable_capacity_mw is not None else _bundled_capacity_mw()
        csv_file = resources.files(PACKAGE).joinpath(BUNDLED_DIR, BUNDLED_CSV)
        with csv_file.open("r", encoding="utf-8") as handle:
            frame = _read_csv(handle, BUNDLED_SOURCE)
        return parse_profiles_frame(frame, BUNDLED_SOURCE, capacity)
    file = Path(path)
    source = str(file)
    if not file.exists():
        raise FileNotFoundError(2, "No such file", source)
    require(file.is_file(), "profiles", f"{source} is not a file")
    frame = _read_csv(file, source)
    return parse_profiles_frame(frame, source, renewable_capacity_mw)


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def summary(profiles: ProfileSet) -> dict[str, Any]:
    """A JSON-ready summary of a profile set."""
    dates = profiles.dates()
    prices = np.concatenate([d.price_usd_per_mwh for d in profiles.days.values()])
    return {
        "source": profiles.source,
        "days_loaded": len(dates),
        "first_day": dates[0],
        "last_day": dates[-1],
        "renewable_capacity_mw": profiles.renewable_capacity_mw,
        "dst_days": {d: p.hours_in_day for d, p in profiles.days.items() if p.hours_in_day != HOURS_PER_DAY},
        "price_usd_per_mwh": {
            "min": float(prices.min()),
            "mean": float(prices.mean()),
            "max": float(prices.max()),
            "negative_hours": int(np.count_nonzero(prices < 0)),
        },
        "days_skipped": len(profiles.skipped),
        "skipped": dict(profiles.skipped),
        "dates": dates,
    }


def _format_summary(info: Mapping[str, Any]) -> str:
    price = info["price_usd_per_mwh"]
    lines = [
        f"source: {info['source']}",
        f"days loaded: {info['days_loaded']} ({info['first_day']} to {info['last_day']})",
        f"renewable capacity: {info['renewable_capacity_mw']:.1f} MW",
        f"price: min {price['min']:.2f}, mean {price['mean']:.2f}, max {price['max']:.2f} $/MWh; "
        f"{price['negative_hours']} negative hours",
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
        prog="python -m aidc_env.profiles",
        description="Summarise a profile source: days loaded, date range, renewable capacity, skipped days.",
    )
    parser.add_argument(
        "--profiles",
        metavar="PATH",
        default=None,
        help="CSV of the canonical form (timestamp_utc, local_start, price_usd_per_mwh, solar_mw, wind_mw); "
        "default: the bundled representative days",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    info = summary(load_profiles(args.profiles))
    print(dumps_json(info, indent=2) if args.json else _format_summary(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
