"""Coincident-peak charges (ERCOT's 4CP style): a transmission charge on the import during the *system's* peak.

ERCOT allocates transmission costs by the **four coincident peaks** (4CP; 16 TAC §25.192(b)(1)): in each of June,
July, August and September, the customer's demand in the 15-minute interval of ERCOT's monthly system peak; the annual
transmission charge is the average of the four times an annual $/kW rate, i.e. per summer month rate / 4 $/kW on that
interval's demand. A :class:`CoincidentPeak` holds such a charge: its $/kW per calendar month (zero in a month
without one), how many peak intervals a month bills (1 for 4CP; the month's rate is split evenly over them), its
source, and the system's peak hours.

**The system's peaks.** :func:`monthly_peak_hours` finds, per calendar month, the hour(s) of highest system load over
the *whole* month: a month's peak is a fact of the month, not of a horizon within it. The system load is CAISO's 2023
demand (:data:`SYSTEM_LOAD`, column ``demand_mw``): the project's data, a stand-in for ERCOT's (the rate is ERCOT's,
the system CAISO's). It is hourly and has missing hours, so a month's peak is its highest *available* hour, and the
charge is on the peak hour's mean import (ERCOT meters a 15-minute interval).

**Into the bill.** :meth:`CoincidentPeak.charges` lays the peaks on an instance's slots as demand charges
(:class:`~aidc_env.billing.DemandCharge`, ``coincident=True``) of one slot each: every slot of a peak hour within the
horizon is billed at rate / (intervals × slots per hour) $/kW, so the month's charge is the rate times the hour's mean
import; a peak outside the horizon bills nothing. A charge over one slot is linear in that slot's import: the
simulator, the env's incremental demand charges, the oracle's peak rows and the level heuristic take it as any demand
charge. :func:`on_days` sets the peak hours of the months a horizon touches when an instance is built (case →
instance); nothing below the instance reads the system load. :class:`PeakBill` itemises it apart from a tariff's bill.

**Information.** The system's peak is known only after the month. The oracle (hindsight) knows it; the env reveals
nothing of it before its slot; outlooks do not carry it and MPC refuses it (``agents/mpc.py``).

**Data.** :data:`BUNDLED` holds ``ercot-4cp`` (provenance: ``aidc_env/data/README.md``). A user's charge is a strict
JSON file (read by :func:`aidc_env.io.read_json_file`; a bad one is refused in one line)::

    {"name": "my-4cp", "rate_usd_per_kw": [0, 0, 0, 0, 0, 10, 10, 10, 10, 0, 0, 0], "intervals_per_month": 1,
     "source": "where the rate comes from", "peak_hours": ["2023-07-25T19:00"]}

``rate_usd_per_kw``: $/kW per calendar month, January first. ``intervals_per_month`` (default 1), ``source`` and
``peak_hours`` are optional. Without ``peak_hours`` the peaks are found in the system load; with them (local hours
``YYYY-MM-DDTHH:00``, e.g. the published ones) they are the system's peaks, and each month the charge bills within a
horizon must have one. The instance's JSON (``coincident_peak``) is this document with the horizon's peak hours.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from aidc_env import datasets
from aidc_env.billing import KW_PER_MW, DemandCharge, TariffTerms
from aidc_env.errors import InputError, is_finite, is_integer, number_text, require
from aidc_env.hourly import COL_LOCAL_START, HOURS_PER_DAY, read_hourly_csv
from aidc_env.io import read_json_file
from aidc_env.tariffs import MONTHS, Bill

FIELD = "coincident_peak"
"""The name of the option (case field, instance key, ``--coincident-peak``) that errors name."""
SYSTEM_LOAD = "caiso-2023"
"""The dataset whose ``demand_mw`` column is the system load (CAISO's demand, EIA-930, hourly)."""
SYSTEM_LOAD_COLUMN = "demand_mw"
HOUR_PATTERN = re.compile(r"^\d{4}-(0[1-9]|1[0-2])-\d{2}T([01]\d|2[0-3]):00$")
"""A local hour ``YYYY-MM-DDTHH:00`` (the hour that starts then, on the local clock of the instance's days)."""
MAX_RATE_USD_PER_KW = 1000.0
"""Largest $/kW of a month's coincident-peak charge: ERCOT's 4CP is about $10.6/kW a summer month
(:data:`ERCOT_4CP_USD_PER_KW`); 1000 is ~100x."""
MAX_INTERVALS_PER_MONTH = 31 * HOURS_PER_DAY
"""Peak intervals a month bills: at most every hour of the longest month."""
KEYS = ("name", "rate_usd_per_kw", "intervals_per_month", "source", "peak_hours")
"""The keys of the JSON document, in order (``name`` and ``rate_usd_per_kw`` required)."""

# ------------------------------------------------------------------------------------------------ ERCOT 4CP

ONCOR_TCRF_USD_PER_4CP_KW_MONTH = 3.516757
"""Oncor's Transmission Cost Recovery Factor (Rider TCRF) for Secondary Service > 10 kW with an IDR meter, $ per 4CP
kW a month, effective March 2014 (Oncor Electric Delivery, Tariff for Retail Delivery Service, Rider TCRF; as reported
by Rapid Power Management, "Oncor's Transmission Cost Recovery Factor Increase", 2014): billed every month of the
year on the customer's average demand in the previous summer's four ERCOT coincident peaks."""
TCRF_MONTHS_BILLED = 12
"""The TCRF is billed in every month of the year on the 4CP average."""
ERCOT_4CP_MONTHS = (6, 7, 8, 9)
"""June-September: the months of ERCOT's coincident peaks (16 TAC §25.192(b)(1))."""
ERCOT_4CP_USD_PER_KW = ONCOR_TCRF_USD_PER_4CP_KW_MONTH * TCRF_MONTHS_BILLED / len(ERCOT_4CP_MONTHS)
"""$/kW on a summer month's coincident demand: a year of the TCRF on the average of four peaks is 12 × TCRF / 4 on
each (about $10.55/kW)."""


# ------------------------------------------------------------------------------------------------ the charge


@dataclass(frozen=True)
class CoincidentPeak:
    """A coincident-peak charge: $/kW per calendar month on the import in the system's monthly peak interval(s)."""

    name: str
    rate_usd_per_kw: tuple[float, ...]
    """$/kW of each calendar month's charge, January first (12 values; 0: no charge that month)."""
    intervals_per_month: int = 1
    """Peak intervals (hours) a month bills; the month's rate is split evenly over them (1 for 4CP)."""
    source: str = ""
    """Where the rate (and the system load) come from."""
    peak_hours: tuple[str, ...] = ()
    """The system's peak hours (local ``YYYY-MM-DDTHH:00``, ascending), at most ``intervals_per_month`` a month and only
    in months with a charge: those of the months a horizon touches (:func:`on_days`), or a file's own."""

    def __post_init__(self) -> None:
        require(isinstance(self.name, str) and bool(self.name.strip()), f"{FIELD}.name", "must be a non-empty text")
        require(isinstance(self.source, str), f"{FIELD}.source", "must be a text")
        rates = self.rate_usd_per_kw
        count = f"{len(rates)} values" if isinstance(rates, (list, tuple)) else type(rates).__name__
        require(isinstance(rates, (list, tuple)) and len(rates) == MONTHS and all(
            is_finite(r) and 0 <= r <= MAX_RATE_USD_PER_KW for r in rates), f"{FIELD}.rate_usd_per_kw",
            f"must be {MONTHS} numbers in [0, {MAX_RATE_USD_PER_KW:g}] $/kW (one per month, January first), got "
            f"{count}")
        n = self.intervals_per_month
        require(is_integer(n) and 1 <= n <= MAX_INTERVALS_PER_MONTH, f"{FIELD}.intervals_per_month",
                f"must be an integer in [1, {MAX_INTERVALS_PER_MONTH}], got "
                f"{number_text(n) if is_integer(n) else type(n).__name__}")
        hours = self.peak_hours
        require(isinstance(hours, (list, tuple)) and all(isinstance(h, str) and HOUR_PATTERN.match(h) and _real(h)
                                                         for h in hours), f"{FIELD}.peak_hours",
                "must be local hours YYYY-MM-DDTHH:00 (real dates)")
        require(len(set(hours)) == len(hours), f"{FIELD}.peak_hours", "holds an hour twice")
        months, counts = np.unique([h[:7] for h in hours], return_counts=True)
        for month, count in zip(months.tolist(), counts.tolist(), strict=True):
            require(count <= n, f"{FIELD}.peak_hours", f"{count} hours in {month}, more than intervals_per_month = {n}")
            require(rates[int(month[5:7]) - 1] > 0, f"{FIELD}.peak_hours", f"{month}: a month without a charge")
        object.__setattr__(self, "rate_usd_per_kw", tuple(float(r) for r in rates))
        object.__setattr__(self, "intervals_per_month", int(n))
        object.__setattr__(self, "peak_hours", tuple(sorted(hours)))

    def months_billed(self, first_day: str, days: int) -> list[str]:
        """The months (``YYYY-MM``) with a charge that the ``days`` days from ``first_day`` touch."""
        keys = pd.date_range(_date(first_day), periods=days, freq="D").strftime("%Y-%m").unique()
        return [key for key in keys if self.rate_usd_per_kw[int(key[5:7]) - 1] > 0]

    def charges(self, first_day: str, slots: int, slots_per_day: int) -> tuple[DemandCharge, ...]:
        """The charges on ``slots`` slots (``slots_per_day`` a day, local days from ``first_day``): per peak hour within
        them, a one-slot demand charge per slot of the hour at rate / (intervals × slots per hour) (one at rate /
        intervals when a slot spans several hours)."""
        if not self.peak_hours:
            return ()
        first = _date(first_day)
        require(slots_per_day % HOURS_PER_DAY == 0 or HOURS_PER_DAY % slots_per_day == 0, "slots", f"a coincident-peak "
                f"charge needs slots that tile the hours: {slots_per_day} slots a day do not")
        per_hour = max(slots_per_day // HOURS_PER_DAY, 1)
        hours_per_slot = max(HOURS_PER_DAY // slots_per_day, 1)
        day = np.array([(dt.date.fromisoformat(h[:10]) - first).days for h in self.peak_hours])
        clock = np.array([int(h[11:13]) for h in self.peak_hours])
        start = day * slots_per_day + clock // hours_per_slot * per_hour  # the hour's first slot
        out = []
        for hour, slot in zip(self.peak_hours, start.tolist(), strict=True):
            if not 0 <= slot < slots:
                continue
            rate = self.rate_usd_per_kw[int(hour[5:7]) - 1] / (self.intervals_per_month * per_hour)
            for s in range(slot, slot + per_hour):
                charge = DemandCharge(label=peak_label(hour), slots=np.array([s]), tier_max_kw=np.array([np.inf]),
                                      rate_usd_per_kw=np.array([rate]), coincident=True)
                for arr in (charge.slots, charge.tier_max_kw, charge.rate_usd_per_kw):
                    arr.setflags(write=False)
                out.append(charge)
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (module docstring)."""
        return {"name": self.name, "rate_usd_per_kw": list(self.rate_usd_per_kw),
                "intervals_per_month": self.intervals_per_month, "source": self.source,
                "peak_hours": list(self.peak_hours)}

    @classmethod
    def from_dict(cls, data: Any) -> CoincidentPeak:
        """Read the JSON document (module docstring); InputError naming the first bad key."""
        require(isinstance(data, Mapping), FIELD, "must be a JSON object (name, rate_usd_per_kw, ...)")
        unknown = sorted(set(data) - set(KEYS))
        require(not unknown, f"{FIELD}.{unknown[0] if unknown else ''}", f"unknown key; known: {', '.join(KEYS)}")
        for key in ("name", "rate_usd_per_kw"):
            require(key in data, f"{FIELD}.{key}", "is required")
        return cls(**{key: tuple(value) if isinstance(value, list) else value for key, value in data.items()})


def peak_label(hour: str) -> str:
    """The label of a peak hour's charges, e.g. ``2023-07 coincident peak 2023-07-25 19:00``."""
    return f"{hour[:7]} coincident peak {hour[:10]} {hour[11:]}"


def _real(hour: str) -> bool:
    """A real calendar date (``HOUR_PATTERN`` has checked the form, the month and the hour)."""
    try:
        dt.date.fromisoformat(hour[:10])
    except ValueError:
        return False
    return True


def _date(day: str) -> dt.date:
    try:
        return dt.date.fromisoformat(day)
    except (TypeError, ValueError):
        raise InputError("day", f"a coincident-peak charge bills calendar days: the first day must be YYYY-MM-DD, "
                         f"got {day!r}") from None


ERCOT_4CP = CoincidentPeak(
    name="ercot-4cp",
    rate_usd_per_kw=tuple(ERCOT_4CP_USD_PER_KW if month in ERCOT_4CP_MONTHS else 0.0 for month in range(1, 13)),
    source=f"ERCOT 4CP (16 TAC 25.192(b)(1)) at Oncor's Rider TCRF, {ONCOR_TCRF_USD_PER_4CP_KW_MONTH} $/4CP kW a month "
           f"(Secondary > 10 kW, IDR, March 2014) x {TCRF_MONTHS_BILLED} / {len(ERCOT_4CP_MONTHS)}; the system peak "
           f"of {SYSTEM_LOAD} demand_mw (CAISO, hourly)")
BUNDLED: Mapping[str, CoincidentPeak] = MappingProxyType({ERCOT_4CP.name: ERCOT_4CP})
"""The bundled charges by name."""


def load_coincident_peak(name_or_path: str | Path | CoincidentPeak) -> CoincidentPeak:
    """A bundled charge by name (:data:`BUNDLED`) or a JSON file (module docstring)."""
    if isinstance(name_or_path, CoincidentPeak):
        return name_or_path
    if isinstance(name_or_path, str) and name_or_path in BUNDLED:
        return BUNDLED[name_or_path]
    path = Path(name_or_path)
    require(path.suffix != "" or path.exists(), FIELD, f"unknown coincident-peak charge {str(name_or_path)!r}; "
            f"bundled: {', '.join(BUNDLED)} (or a JSON file)")
    doc = read_json_file(path, FIELD)
    peak = CoincidentPeak.from_dict(doc)
    return peak if peak.source else dataclasses.replace(peak, source=str(path))


# ------------------------------------------------------------------------------------------------ the system peaks


def monthly_peak_hours(hours: Sequence[str], load_mw: Any, intervals: int = 1) -> dict[str, tuple[str, ...]]:
    """Per calendar month (``YYYY-MM``), the ``intervals`` local hours (``YYYY-MM-DDTHH:00``, ascending) of highest
    system load over the whole month. A missing load (NaN) is skipped, so a month's peak is its highest available
    hour; an hour given twice (the clock hour repeated when daylight saving ends) counts once, at its higher load; on
    ties the earlier hour wins."""
    frame = pd.DataFrame({"hour": np.asarray(hours, dtype=str), "load": np.asarray(load_mw, dtype=float)})
    require(bool(frame["hour"].str.match(HOUR_PATTERN).all()), "hours", "must be local hours YYYY-MM-DDTHH:00")
    require(is_integer(intervals) and intervals >= 1, "intervals", f"must be an integer >= 1, got {intervals!r}")
    frame = frame.dropna(subset=["load"]).groupby("hour", as_index=False)["load"].max()
    frame["month"] = frame["hour"].str[:7]
    top = frame.sort_values(["month", "load", "hour"], ascending=[True, False, True]).groupby("month").head(intervals)
    return {month: tuple(sorted(group["hour"])) for month, group in top.groupby("month")}


@functools.cache
def _system_load() -> tuple[np.ndarray, np.ndarray]:
    """The system load (:data:`SYSTEM_LOAD`): local hours and MW (NaN where missing), read once."""
    with datasets.source_file(SYSTEM_LOAD, datasets.PROFILES) as (file, source, _):
        frame = read_hourly_csv(file, source, (COL_LOCAL_START, SYSTEM_LOAD_COLUMN), FIELD)
    local = frame[COL_LOCAL_START]
    hours = local.str[:10] + "T" + local.str[11:13] + ":00"
    return hours.to_numpy(dtype=str), pd.to_numeric(frame[SYSTEM_LOAD_COLUMN], errors="coerce").to_numpy(dtype=float)


@functools.cache
def system_peak_hours(intervals: int = 1) -> Mapping[str, tuple[str, ...]]:
    """Per month of the system load (:data:`SYSTEM_LOAD`), its ``intervals`` peak hours (:func:`monthly_peak_hours`)."""
    return MappingProxyType(monthly_peak_hours(*_system_load(), intervals))


def on_days(peak: CoincidentPeak, first_day: str, days: int) -> CoincidentPeak:
    """``peak`` with the system's peak hours of the months it bills that ``days`` days from ``first_day`` touch: from
    the system load, or a file's own peak hours (then each such month must have one)."""
    months = peak.months_billed(first_day, days)
    if peak.peak_hours:
        given = {hour[:7] for hour in peak.peak_hours}
        missing = [month for month in months if month not in given]
        require(not missing, f"{FIELD}.peak_hours", f"{peak.name}: no system peak hour in {missing[:1]}, a month "
                "the charge bills within the horizon")
        return peak
    table = system_peak_hours(peak.intervals_per_month)
    missing = [month for month in months if month not in table]
    require(not missing, FIELD, f"{peak.name}: the system load ({SYSTEM_LOAD} {SYSTEM_LOAD_COLUMN}) has no hour in "
            f"{missing[:1]}, a month the charge bills within the horizon")
    return dataclasses.replace(peak, peak_hours=tuple(hour for month in months for hour in table[month]))


# ------------------------------------------------------------------------------------------------ the bill


@dataclass(frozen=True)
class CoincidentLine:
    """One peak hour's charge on a meter's bill."""

    label: str
    """e.g. ``2023-07 coincident peak 2023-07-25 19:00``."""
    demand_kw: float
    """The meter's mean import over the peak hour (kW)."""
    rate_usd_per_kw: float
    """The month's $/kW on the hour (its rate / intervals)."""
    usd: float


def coincident_lines(terms: TariffTerms | None, grid_mw: np.ndarray) -> tuple[CoincidentLine, ...]:
    """The coincident-peak charges of ``terms`` on a per-slot import (MW), one line per peak hour."""
    charges = [charge for charge in (terms.demand if terms is not None else ()) if charge.coincident]
    lines = []
    for label in dict.fromkeys(charge.label for charge in charges):
        mine = [charge for charge in charges if charge.label == label]
        rate = float(sum(float(charge.rate_usd_per_kw[0]) for charge in mine))
        usd = float(sum(charge.charge_usd(grid_mw) for charge in mine))
        kw = float(sum(float(charge.rate_usd_per_kw[0]) * float(grid_mw[charge.slots[0]]) for charge in mine)) / rate
        lines.append(CoincidentLine(label=label, demand_kw=kw * KW_PER_MW, rate_usd_per_kw=rate, usd=usd))
    return tuple(lines)


@dataclass(frozen=True)
class PeakBill:
    """A meter's bill with its coincident-peak charges as lines of their own: a tariff's bill (:class:`Bill`), or,
    without one, the energy at the real-time LMP, plus the coincident-peak lines."""

    name: str
    """The bill, e.g. ``sce-tou8 + ercot-4cp`` or ``real-time LMP + ercot-4cp``."""
    start: dt.date
    tariff_bill: Bill | None
    lmp_energy_usd: float
    """Without a tariff, the import at the real-time LMP ($; 0 under a tariff, whose bill holds the energy)."""
    coincident: tuple[CoincidentLine, ...]

    @property
    def tariff(self) -> str:
        return self.name

    @property
    def coincident_usd(self) -> float:
        return float(sum(line.usd for line in self.coincident))

    @property
    def energy_usd(self) -> float:
        return self.tariff_bill.energy_usd if self.tariff_bill is not None else self.lmp_energy_usd

    @property
    def demand_usd(self) -> float:
        """The tariff's demand charges (the coincident-peak charges apart)."""
        return self.tariff_bill.demand_usd if self.tariff_bill is not None else 0.0

    @property
    def fixed_usd(self) -> float:
        return self.tariff_bill.fixed_usd if self.tariff_bill is not None else 0.0

    @property
    def total_usd(self) -> float:
        base = self.tariff_bill.total_usd if self.tariff_bill is not None else self.lmp_energy_usd
        return base + self.coincident_usd

    def to_dict(self) -> dict[str, Any]:
        """The bill as JSON: the tariff's bill (if any) with the coincident-peak lines and the totals."""
        base = self.tariff_bill.to_dict() if self.tariff_bill is not None else {
            "tariff": None, "start": self.start.isoformat(), "energy_usd": self.lmp_energy_usd, "demand_usd": 0.0,
            "fixed_usd": 0.0}
        return {**base, "bill": self.name, "total_usd": self.total_usd, "coincident_peak_usd": self.coincident_usd,
                "coincident_peak": [dataclasses.asdict(line) for line in self.coincident]}

    def lines(self) -> list[str]:
        """One text line per peak hour."""
        return [f"  {line.label}: {line.demand_kw:,.1f} kW x ${line.rate_usd_per_kw:,.4f}/kW = ${line.usd:,.2f}"
                for line in self.coincident]


__all__ = ["BUNDLED", "ERCOT_4CP", "ERCOT_4CP_USD_PER_KW", "SYSTEM_LOAD", "CoincidentLine", "CoincidentPeak",
           "PeakBill", "coincident_lines", "load_coincident_peak", "monthly_peak_hours", "on_days", "peak_label",
           "system_peak_hours"]
