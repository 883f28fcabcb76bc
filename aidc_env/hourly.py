"""Hourly days of a CSV source: the reading and day-building shared by profiles and forecasts.

A source is a CSV with one row per hour, keyed by ``timestamp_utc`` (ISO 8601) and ``local_start`` (the start of the
hour on the local clock *with its UTC offset*), plus its own *value columns* (for :mod:`aidc_env.profiles` price, solar
and wind; for :mod:`aidc_env.forecasts` the day-ahead solar, wind and load forecasts). Days are local calendar days,
every hour indexed by its local clock hour 0..23; a DST day keeps 24 clock hours (the 23-hour day holds clock hour 01
over the skipped 02, the 25-hour day averages its two 01:00 rows) and records its real length in ``hours_in_day``.

A day with a wrong set of rows or any missing, NaN, non-numeric or non-finite value is *skipped* with
the reason; a malformed file raises :class:`~aidc_env.errors.InputError` naming the column and the line.

The two sources are the same code parameterised by their value columns: a day record mixes in :class:`HourlyDay` (its
value columns a class attribute), a set of days derives from :class:`HourlyDaySet`; :func:`read_hourly_csv` reads the
required columns as text, :func:`parse_hourly_days` builds the days, and :func:`summarise_days`, :func:`format_summary`
and :func:`print_summary` make the command-line summaries.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import re
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import pandas as pd

from aidc_env.errors import InputError, require
from aidc_env.io import dumps_json

HOURS_PER_DAY = 24
"""Clock hours of the day model (DST days are mapped onto 24 clock hours)."""

SPRING_FORWARD_HOURS = HOURS_PER_DAY - 1
FALL_BACK_HOURS = HOURS_PER_DAY + 1
VALID_HOURS_IN_DAY = (SPRING_FORWARD_HOURS, HOURS_PER_DAY, FALL_BACK_HOURS)

COL_TIMESTAMP_UTC = "timestamp_utc"
COL_LOCAL_START = "local_start"

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

CELL_OK, CELL_MISSING, CELL_NAN, CELL_NON_NUMERIC, CELL_NON_FINITE = range(5)
"""Cell status codes of the value columns."""


# ------------------------------------------------------------------------------------------- Checks


def is_valid_date(text: object) -> bool:
    """Whether ``text`` is a real calendar date written YYYY-MM-DD."""
    if not isinstance(text, str) or not DATE_PATTERN.match(text):
        return False
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def frozen_hourly(values: object, name: str) -> np.ndarray:
    """``values`` as a read-only float64 array of shape (24,), all finite; InputError(name, ...) if not."""
    try:
        array = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise InputError(name, f"not numeric ({err})") from None
    require(array.shape == (HOURS_PER_DAY,), name, f"shape {array.shape}, expected ({HOURS_PER_DAY},)")
    require(bool(np.all(np.isfinite(array))), name, "contains NaN or infinite values")
    array.setflags(write=False)
    return array


def require_positive(value: object, name: str) -> float:
    """``value`` as a float if it is a finite number > 0 (not a bool); InputError(name, ...) if not."""
    require(isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool), name,
            f"must be a number, got {value!r}")
    number = float(value)  # type: ignore[arg-type]
    require(math.isfinite(number) and number > 0, name, f"must be a finite number > 0, got {number!r}")
    return number


# -------------------------------------------------------------------------- A day and a set of days


class HourlyDay:
    """Mixin of a frozen dataclass holding one local day: ``date``, one array per value column, ``hours_in_day``.

    The dataclass (``frozen=True, eq=False``) declares ``date: str``, a field per name of
    :attr:`value_columns` and ``hours_in_day: int = HOURS_PER_DAY``; this mixin validates them (arrays
    become read-only float64 of shape (24,)) and compares and hashes days by value.
    """

    value_columns: ClassVar[tuple[str, ...]]
    """The names of the hourly value fields (= the source's value columns), in field order."""

    date: str
    hours_in_day: int

    def __post_init__(self) -> None:
        require(is_valid_date(self.date), "date", f"{self.date!r} is not a valid YYYY-MM-DD date")
        for name in self.value_columns:
            object.__setattr__(self, name, frozen_hourly(getattr(self, name), name))
        require(self.hours_in_day in VALID_HOURS_IN_DAY, "hours_in_day",
                f"must be one of {VALID_HOURS_IN_DAY}, got {self.hours_in_day!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return self.date == other.date and self.hours_in_day == other.hours_in_day and all(
            np.array_equal(getattr(self, n), getattr(other, n)) for n in self.value_columns)

    def __hash__(self) -> int:
        return hash((self.date, self.hours_in_day, *(getattr(self, n).tobytes() for n in self.value_columns)))


DayT = TypeVar("DayT", bound=HourlyDay)


def _plain(value: Any) -> Any:
    """``value`` with every (nested) MappingProxyType as a dict: what pickles."""
    if isinstance(value, MappingProxyType):
        return {key: _plain(item) for key, item in value.items()}
    return value


@dataclass(frozen=True, eq=False)
class HourlyDaySet(Generic[DayT]):
    """Base of a frozen dataclass holding the complete days of a source and the days skipped (with why).

    A subclass adds its own fields (at least ``source: str``), names the class of its days (:attr:`day_type`) and the
    field its lookup errors name (:attr:`day_field`), and says in its own words why a date is absent (:meth:`_absent`).
    The days are checked, both mappings frozen and sorted by date, and pickled as plain dicts.
    """

    day_type: ClassVar[type]
    """The class of the days (an :class:`HourlyDay`)."""
    day_field: ClassVar[str]
    """The field named by :meth:`day`'s InputError."""

    days: Mapping[str, DayT]
    skipped: Mapping[str, str]

    def __post_init__(self) -> None:
        require(len(self.days) > 0, "days", "no complete day")
        for date, day in self.days.items():
            require(isinstance(day, self.day_type), f"days[{date}]", f"is not a {self.day_type.__name__}")
            require(day.date == date, f"days[{date}]", f"holds the day {day.date}")
        object.__setattr__(self, "days", MappingProxyType(dict(sorted(self.days.items()))))
        object.__setattr__(self, "skipped", MappingProxyType(dict(sorted(self.skipped.items()))))

    def __reduce__(self):
        # MappingProxyType fields do not pickle: rebuild from plain dicts (pickle, deepcopy, worker processes).
        return (type(self), tuple(_plain(getattr(self, f.name)) for f in fields(self)))

    def dates(self) -> list[str]:
        """The dates of the complete days, sorted."""
        return list(self.days)

    def day(self, date: str) -> DayT:
        """The day ``date`` (YYYY-MM-DD); InputError(:attr:`day_field`, ...) if not a date or not in the data."""
        require(is_valid_date(date), self.day_field, f"{date!r} is not a valid date (expected YYYY-MM-DD)")
        found = self.days.get(date)
        if found is None:
            raise InputError(self.day_field, self._absent(date))
        return found

    def _extent(self, verb: str) -> str:
        """``source <source> <verb> <n> days from <first> to <last>``."""
        source = self.source  # type: ignore[attr-defined]  # (a field of every subclass)
        dates = self.dates()
        return f"source {source} {verb} {len(dates)} days from {dates[0]} to {dates[-1]}"

    def _absent(self, date: str) -> str:
        """Why the valid date ``date`` has no day (skipped, with the reason, or not in the data)."""
        raise NotImplementedError

    def consecutive_days(self, first: str, count: int) -> list[DayT]:
        """The ``count`` consecutive days from ``first`` (a horizon).

        InputError("day", ...) if ``first`` is not in the data; InputError("horizon_days", ...) naming the
        first later day that is not (past the data, or skipped for a gap).
        """
        days = [self.day(first)]
        for offset in range(1, count):
            date = (dt.date.fromisoformat(first) + dt.timedelta(days=offset)).isoformat()
            if date not in self.days:
                last = self.dates()[-1]
                why = f"skipped ({self.skipped[date]})" if date in self.skipped else (
                    f"past the data, which ends on {last}" if date > last else "not in the data")
                raise InputError("horizon_days", f"a horizon of {count} days from {first} needs {date}: {why}")
            days.append(self.days[date])
        return days

    def horizon_starts(self, count: int) -> list[str]:
        """The days that start ``count`` consecutive complete days of this source, sorted."""
        dates = set(self.days)
        return [d for d in self.dates()
                if all((dt.date.fromisoformat(d) + dt.timedelta(days=k)).isoformat() in dates for k in range(count))]


# ------------------------------------------------------------------------------------------ Reading


def read_hourly_csv(handle: Any, source: str, required_columns: Sequence[str], field: str,
                    optional_columns: Sequence[str] = ()) -> pd.DataFrame:
    """The required columns, then those of ``optional_columns`` the file has, as stripped text; InputError
    (``field`` for the file as a whole) if not such a CSV."""
    try:
        frame = pd.read_csv(handle, dtype=str, keep_default_na=False, na_filter=False, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise InputError(field, f"{source}: empty file, not a CSV with a header") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, EOFError, OSError, zipfile.BadZipFile) as err:
        # (pandas infers compression from the suffix: a corrupt .zip or .gz raises from zipfile or gzip)
        reason = " ".join(str(err).split())
        raise InputError(field, f"{source}: not a readable CSV ({reason})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    for column in required_columns:
        require(column in frame.columns, column,
                f"required column missing in {source} (columns found: {', '.join(map(str, frame.columns[:10]))})")
    kept = [*required_columns, *(c for c in optional_columns if c in frame.columns)]
    frame = frame.loc[:, kept].fillna("")
    require(len(frame) > 0, field, f"{source}: no data rows")
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
    refuse_first(utc.isna(), COL_TIMESTAMP_UTC, lambda i: f"{utc_text.iloc[i]!r} is not a timestamp")
    utc = utc.dt.tz_localize(None)

    local_text = frame[COL_LOCAL_START]
    parts = local_text.str.extract(LOCAL_START_PATTERN)
    refuse_first(parts["date"].isna(), COL_LOCAL_START, lambda i: f"{local_text.iloc[i]!r} is not a local time with "
                 "UTC offset (expected 'YYYY-MM-DD HH:MM-0800')")
    local_clock = pd.to_datetime(parts["date"] + " " + parts["hour"] + ":" + parts["minute"], format="%Y-%m-%d %H:%M",
                                 errors="coerce")
    refuse_first(local_clock.isna(), COL_LOCAL_START, lambda i: f"{local_text.iloc[i]!r} is not a valid date and time")
    seconds = parts["second"].fillna("00")
    off_hour = (parts["minute"] != "00") | (seconds != "00") | (utc.dt.minute != 0) | (utc.dt.second != 0)
    refuse_first(off_hour, COL_LOCAL_START, lambda i: f"{local_text.iloc[i]!r} / {utc_text.iloc[i]!r} is not the start "
                 "of an hour (profiles must be hourly)")
    offset_minutes = _offset_minutes(parts)
    implied_utc = local_clock - pd.to_timedelta(offset_minutes, unit="min")
    refuse_first(implied_utc != utc, COL_LOCAL_START, lambda i: f"{local_text.iloc[i]!r} does not match "
                 f"{COL_TIMESTAMP_UTC} {utc_text.iloc[i]!r}")
    return pd.DataFrame({"utc": utc.to_numpy(), "date": parts["date"].to_numpy(),
                         "hour": parts["hour"].astype(int).to_numpy(), "offset_min": offset_minutes})


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


def refuse_first(bad: Any, column: str, message: Callable[[int], str]) -> None:
    """InputError naming ``column`` and the file line of the first row where ``bad`` holds (``message(row)``)."""
    bad = np.asarray(bad, dtype=bool)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(column, f"line {i + CSV_HEADER_LINES + 1}: {message(i)}")  # the file line of data row i


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


def parse_hourly_days(frame: pd.DataFrame, source: str, field: str, day_type: type,
                      value_bounds: Mapping[str, float] | None = None, *, allow_empty: bool = False,
                      columns: Sequence[str] | None = None
                      ) -> tuple[dict[str, Any], dict[str, str], dict[str, np.ndarray]]:
    """The complete days of a table read as text (see :func:`read_hourly_csv`), as ``day_type`` records.

    ``day_type`` is an :class:`HourlyDay` dataclass; its :attr:`~HourlyDay.value_columns` are the value
    columns read, or the table's ``columns`` (in the same order) into its value fields. ``value_bounds`` (column ->
    largest |value|) makes a cell of a column it names beyond its bound a data error.
    Returns (days by date, skipped days' reasons by date, each column's numbers over all rows with NaN where a
    cell is not usable); InputError(``field``, ...) if no day is complete (unless ``allow_empty``).
    """
    names = day_type.value_columns
    columns = names if columns is None else tuple(columns)
    require(len(columns) == len(names), "columns", f"must name {len(names)} columns, got {len(columns)}")
    times = _parse_times(frame)
    values: dict[str, np.ndarray] = {}
    statuses: dict[str, np.ndarray] = {}
    for column in columns:
        values[column], statuses[column] = _parse_values(frame[column])
        if value_bounds is not None and column in value_bounds:
            bound = value_bounds[column]
            refuse_first(np.abs(np.nan_to_num(values[column])) > bound, column,
                         lambda i: f"{values[column][i]:g} is beyond ±{bound:g}")
    utc_hours_all = times["utc"].to_numpy().astype("datetime64[h]").astype(np.int64)
    offset_all = times["offset_min"].to_numpy()
    hour_all = times["hour"].to_numpy()
    refuse_first(hour_all >= HOURS_PER_DAY, COL_LOCAL_START, lambda i: f"clock hour {hour_all[i]} is not in 0..23")
    value_matrix = np.column_stack([values[c] for c in columns])
    days: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for date, rows in sorted(times.groupby("date", sort=False).indices.items()):
        row_reason, hours_in_day = _row_reason(date, utc_hours_all[rows], offset_all[rows])
        reasons = [row_reason] if row_reason else []
        reasons += _value_reasons({c: statuses[c][rows] for c in columns}, len(rows))
        if reasons:
            skipped[date] = "; ".join(reasons)
            continue
        hourly = _clock_hour_values(hour_all[rows], value_matrix[rows])
        days[date] = day_type(date=date, hours_in_day=hours_in_day,
                              **{name: hourly[:, k] for k, name in enumerate(names)})
    if not days and not allow_empty:
        shown = "; ".join(f"{d}: {r}" for d, r in list(skipped.items())[:3])
        raise InputError(field, f"{source}: no complete day ({len(skipped)} days skipped, e.g. {shown})")
    return days, skipped, values


# ------------------------------------------------------- Summary (the command lines of the sources)


def summarise_days(days: HourlyDaySet, facts: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-ready summary of a set of days: its extent, ``facts`` about the source, its DST days,
    ``values`` (statistics of the value columns) and the days skipped with why."""
    dates = days.dates()
    return {"source": days.source, "days_loaded": len(dates), "first_day": dates[0], "last_day": dates[-1], **facts,
            "dst_days": {d: day.hours_in_day for d, day in days.days.items() if day.hours_in_day != HOURS_PER_DAY},
            **values, "days_skipped": len(days.skipped), "skipped": dict(days.skipped), "dates": dates}


def format_summary(info: Mapping[str, Any], details: Sequence[str], max_skipped_shown: int,
                   loaded_note: str = "") -> str:
    """The text of a :func:`summarise_days` summary: extent (and ``loaded_note``), the ``details`` lines,
    DST days and the skipped days (the first ``max_skipped_shown`` in full)."""
    lines = [f"source: {info['source']}",
             f"days loaded: {info['days_loaded']} ({info['first_day']} to {info['last_day']}){loaded_note}", *details,
             "DST days: " + (", ".join(f"{d} ({h} h)" for d, h in info["dst_days"].items()) or "none"),
             f"days skipped: {info['days_skipped']}"]
    skipped = list(info["skipped"].items())
    lines += [f"  {date}: {reason}" for date, reason in skipped[:max_skipped_shown]]
    if len(skipped) > max_skipped_shown:
        lines.append(f"  ... and {len(skipped) - max_skipped_shown} more (use --json)")
    return "\n".join(lines)


def print_summary(parser: argparse.ArgumentParser, argv: Sequence[str] | None,
                  summarise: Callable[[argparse.Namespace], dict[str, Any]],
                  format_text: Callable[[dict[str, Any]], str]) -> int:
    """The end of a source's command line: add ``--json`` to ``parser``, parse ``argv``, print the summary
    of the source the arguments name (``summarise``) as text (``format_text``) or JSON; returns 0."""
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    info = summarise(args)
    print(dumps_json(info, indent=2) if args.json else format_text(info))
    return 0
