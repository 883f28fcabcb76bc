"""Utility tariffs as data, and the monthly bill of a load profile under one.

Large loads do not pay the real-time LMP: they pay a utility tariff. A :class:`Tariff` holds one in the form of the
OpenEI Utility Rate Database (URDB, API v8 JSON; a URDB rate page's JSON download has the same fields): time-of-use
(TOU) energy charges (``energyratestructure`` with ``energyweekdayschedule`` / ``energyweekendschedule``: per month
and hour of day, the period), TOU demand charges (``demandratestructure`` with ``demandweekdayschedule`` /
``demandweekendschedule``), flat (monthly) demand charges (``flatdemandstructure`` with ``flatdemandmonths``) and
fixed charges (``fixedchargefirstmeter`` with ``fixedchargeunits``, or the older ``fixedmonthlycharge``). A rate is
``rate + adj`` (the document's adjustment added, as URDB means it). :func:`load_tariff` takes a bundled name
(:data:`BUNDLED`, provenance in ``aidc_env/data/README.md``) or a JSON file: a URDB API response (``{"items": [one]}``)
or a single item. A bad document is an :class:`~aidc_env.errors.InputError` naming the field.

**The bill** (:func:`bill`) of a grid load (kW per slot, local wall-clock time of America/Los_Angeles from midnight of
``start``, a whole number of days, possibly spanning months) is itemised per calendar month:

- *energy*: per TOU period, the kWh in the period × its rate. **Tiers** (monthly kWh, unit ``kWh``) are supported
  as NREL SAM bills them: the month's total kWh decides the tier, and each period's kWh is spread over the tiers in
  proportion to its share of the month (``max`` of each tier is its upper bound in kWh a month; the last tier is
  open). Daily or demand-scaled tiers (``kWh daily``, ``kWh/kW``, ``kWh/kW daily``) are refused.
- *TOU demand*: per demand period, the month's highest 15-minute demand within the period × its rate (tiered by
  ``max`` in kW); *flat demand*: the month's highest 15-minute demand × the month's rate. Demand is the mean kW over
  each 15-minute interval (a slot longer than 15 minutes is taken as flat within it). Demand charges are not
  prorated: a profile covering part of a month pays the full rate on that part's peak.
- *fixed*: ``$/day`` × the days of the month in the profile; ``$/month`` (and ``$/year`` / 12) prorated by the share
  of the month's days in the profile (a full month pays it whole). A monthly minimum charge (``mincharge``,
  ``$/month`` or ``$/day``, prorated alike) tops the month up to it.

**Calendar.** Months are calendar months of the local date; Saturday and Sunday take the weekend schedules. URDB has
no holiday calendar, so a holiday is billed as the weekday it falls on unless ``holidays`` lists it (then it takes
the weekend schedule, as most California large-customer tariffs bill holidays off-peak). Every day has 24 wall-clock
hours (as URDB schedules and SAM's 8760-hour year assume): on the two daylight-saving change days the profile is
read as 24 clock hours.

**Refused** with one line (so that no charge is silently dropped): demand ratchets (``lookbackpercent`` /
``lookbackrange``), coincident-peak charges (``coincidentratestructure``), an annual minimum charge, a demand window
other than 15 minutes, demand units other than kW. **Not billed, and listed** in :attr:`Tariff.left_out`: sell
(export) rates (the load only imports), reactive-power (kVAR) charges and additional-meter charges.

Command line: ``python -m aidc_env.tariffs --list`` and ``python -m aidc_env.tariffs --tariff NAME|FILE``.
"""

from __future__ import annotations

import calendar
import datetime as dt
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aidc_env.errors import CliParser, InputError, is_finite, require, run_cli
from aidc_env.io import read_json_file

TIMEZONE = "America/Los_Angeles"
"""The local time of every bundled tariff and of the project's CAISO data: months, days and hours are read in it."""
DEMAND_INTERVAL_HOURS = 0.25
"""Demand is metered as the mean kW over 15-minute intervals (PG&E, SCE and SDG&E large-customer tariffs; URDB's
default ``demandwindow``)."""
DEMAND_WINDOW_MINUTES = 15
MONTHS, HOURS = 12, 24
"""A URDB schedule: one row per month (January first), one column per hour of the day (0-23)."""
WEEKEND_DAYS = (5, 6)
"""``datetime.date.weekday()`` of Saturday and Sunday."""
FIXED_UNITS = ("$/month", "$/day", "$/year")
"""The units URDB gives a fixed or minimum charge in (``fixedchargeunits``, ``minchargeunits``)."""
ENERGY_TIER_UNIT = "kwh"
"""The one energy tier unit billed: kWh a month. URDB's others (``kWh daily``, ``kWh/kW``, ``kWh/kW daily``) are
refused."""
DEMAND_UNIT = "kw"
REFUSED = {"lookbackpercent": "demand ratchets (billing demand from past months) are not supported",
           "lookbackrange": "demand ratchets (billing demand from past months) are not supported",
           "coincidentratestructure": "coincident-peak demand charges are not supported",
           "annualmincharge": "annual minimum charges are not supported (a bill is monthly)"}
"""Fields that, when set (non-zero, non-empty), make a document refused: the feature they carry is not billed."""
LEFT_OUT = {"demandreactivepowercharge": "reactive-power charge ($/kVAR): the load is real power only",
            "demandReactPwrCharge": "reactive-power charge ($/kVAR): the load is real power only",
            "fixedchargeeaaddl": "fixed charge of each additional meter: one meter is billed"}
"""Fields that, when set, are not billed: listed in :attr:`Tariff.left_out`."""

BUNDLED = {"pge-e19": "tariff_pge_e19_secondary.json", "sce-tou8": "tariff_sce_tou8_d_secondary.json",
           "sdge-al-tou": "tariff_sdge_al_tou_secondary.json"}
"""Bundled tariffs by name: their URDB JSON in ``aidc_env/data`` (``tariff_*.json``; provenance:
``aidc_env/data/README.md``)."""
TARIFF_DIR = ("data",)


# ------------------------------------------------------------------------------------------------ the tariff


@dataclass(frozen=True, eq=False)
class Tariff:
    """One URDB tariff, parsed. Rates include the document's ``adj``; a period with fewer tiers than the widest is
    padded with empty tiers (bound +inf, rate 0). Every array is read-only."""

    name: str
    utility: str
    source: str
    """Where the document came from (bundled file or path) and its URDB label."""
    energy_rate: np.ndarray
    """$/kWh, shape (energy periods, tiers)."""
    energy_tier_max: np.ndarray
    """Upper bound of each energy tier, kWh a month (+inf for the last), shape as :attr:`energy_rate`."""
    energy_weekday: np.ndarray
    """Energy period per month and hour, shape (12, 24), int."""
    energy_weekend: np.ndarray
    demand_rate: np.ndarray
    """TOU demand $/kW, shape (demand periods, tiers); (0, 1) without TOU demand charges."""
    demand_tier_max: np.ndarray
    """Upper bound of each TOU demand tier, kW (+inf for the last)."""
    demand_weekday: np.ndarray
    """TOU demand period per month and hour, shape (12, 24) (zeros without TOU demand charges)."""
    demand_weekend: np.ndarray
    flat_rate: np.ndarray
    """Flat demand $/kW, shape (flat periods, tiers); (0, 1) without flat demand charges."""
    flat_tier_max: np.ndarray
    flat_months: np.ndarray
    """Flat demand period of each month, shape (12,); -1 for a month without flat demand charge."""
    fixed_charge: float = 0.0
    """$ per :attr:`fixed_unit`, first meter."""
    fixed_unit: str = "$/month"
    min_charge: float = 0.0
    """Monthly minimum bill, $ per :attr:`min_unit`."""
    min_unit: str = "$/month"
    left_out: tuple[str, ...] = field(default=())
    """Charges the document holds that the bill does not include (export credits, reactive power, ...)."""
    document: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The URDB item it was read from (what an instance's JSON stores: :meth:`from_urdb` reads it back)."""

    @property
    def energy_periods(self) -> int:
        return int(self.energy_rate.shape[0])

    @property
    def demand_periods(self) -> int:
        return int(self.demand_rate.shape[0])

    @classmethod
    def from_urdb(cls, document: Mapping[str, Any], source: str = "URDB document") -> Tariff:
        """Parse a URDB v8 item, or an API response ``{"items": [item]}`` holding exactly one."""
        return _parse(_one_item(document), source)


def _one_item(document: Any) -> Mapping[str, Any]:
    require(isinstance(document, Mapping), "tariff", f"must be a JSON object, got {type(document).__name__}")
    if "items" not in document:
        return document
    items = document["items"]
    require(isinstance(items, list) and len(items) >= 1, "items", "must be a non-empty list of tariffs")
    names = [str(item.get("name", "?")) if isinstance(item, Mapping) else "?" for item in items]
    require(len(items) == 1, "items", f"holds {len(items)} tariffs ({'; '.join(names[:5])}): give a file with one")
    require(isinstance(items[0], Mapping), "items[0]", "must be a JSON object")
    return items[0]


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def _structure(doc: Mapping[str, Any], key: str, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """A URDB rate structure (a list of periods, each a list of tiers ``{rate, adj, max, unit}``) as (rates, tier
    bounds), each shaped (periods, tiers); empty (0, 1) when the document lacks it."""
    periods = doc.get(key)
    if periods is None or periods == []:
        return _readonly(np.zeros((0, 1))), _readonly(np.full((0, 1), np.inf))
    require(isinstance(periods, list) and all(isinstance(p, list) and p for p in periods), key,
            "must be a list of periods, each a non-empty list of tiers")
    width = max(len(p) for p in periods)
    rates, bounds = np.zeros((len(periods), width)), np.full((len(periods), width), np.inf)
    for i, tiers in enumerate(periods):
        for j, tier in enumerate(tiers):
            where = f"{key}[{i}][{j}]"
            require(isinstance(tier, Mapping), where, "must be an object {rate, adj, max, unit}")
            rate, adj = tier.get("rate", 0.0), tier.get("adj", 0.0)
            require(is_finite(rate) and is_finite(adj), where, f"rate and adj must be finite numbers, got "
                    f"{rate!r} and {adj!r}")
            given = tier.get("unit")
            require(given is None or (isinstance(given, str) and given.strip().lower() == unit), f"{where}.unit",
                    f"{given!r} is not supported: only {unit!r} tiers are billed")
            rates[i, j] = float(rate) + float(adj)
            if j < len(tiers) - 1:  # the last tier is open, whatever its max says
                bound = tier.get("max")
                require(is_finite(bound) and bound > 0, f"{where}.max", f"a tier below the last must have a "
                        f"positive max, got {bound!r}")
                require(j == 0 or bound > bounds[i, j - 1], f"{where}.max", "tier bounds must increase")
                bounds[i, j] = float(bound)
    return _readonly(rates), _readonly(bounds)


def _schedule(doc: Mapping[str, Any], key: str, periods: int) -> np.ndarray:
    """A URDB 12 × 24 schedule of period indices, each below ``periods``."""
    rows = doc.get(key)
    require(isinstance(rows, list) and len(rows) == MONTHS and all(isinstance(r, list) and len(r) == HOURS
                                                                    for r in rows),
            key, f"must be {MONTHS} rows (months) of {HOURS} period indices (hours)")
    for m, row in enumerate(rows):
        for h, value in enumerate(row):
            require(isinstance(value, int) and not isinstance(value, bool) and 0 <= value < periods,
                    f"{key}[{m}][{h}]", f"must be a period index 0-{periods - 1}, got {value!r}")
    return _readonly(np.array(rows, dtype=np.int64))


def _charge(doc: Mapping[str, Any], amount_key: str, unit_key: str) -> tuple[float, str]:
    amount, unit = doc.get(amount_key, 0.0) or 0.0, doc.get(unit_key) or "$/month"
    require(is_finite(amount) and amount >= 0, amount_key, f"must be a finite number >= 0, got {amount!r}")
    require(unit in FIXED_UNITS, unit_key, f"must be one of {', '.join(FIXED_UNITS)}, got {unit!r}")
    return float(amount), str(unit)


def _check_supported(doc: Mapping[str, Any]) -> tuple[str, ...]:
    """Refuse the features the bill cannot carry; the names of the charges it leaves out."""
    for key, why in REFUSED.items():
        require(not doc.get(key), key, why)
    window = doc.get("demandwindow")
    require(window in (None, DEMAND_WINDOW_MINUTES), "demandwindow",
            f"a demand window of {window!r} minutes is not supported (only {DEMAND_WINDOW_MINUTES})")
    for key in ("demandrateunit", "flatdemandunit", "demandunits", "flatDemandUnits", "demandRateUnits"):
        unit = doc.get(key)
        require(unit is None or str(unit).strip().lower() == DEMAND_UNIT, key,
                f"demand in {unit!r} is not supported (only kW)")
    left = [f"{key}: {why}" for key, why in LEFT_OUT.items() if doc.get(key)]
    periods = doc.get("energyratestructure")
    tiers = [t for p in periods if isinstance(p, list) for t in p] if isinstance(periods, list) else []
    if any(isinstance(t, Mapping) and t.get("sell") for t in tiers):
        left.append("energyratestructure sell: export credits (the load only imports)")
    return tuple(left)


def _parse(doc: Mapping[str, Any], source: str) -> Tariff:
    left_out = _check_supported(doc)
    require(doc.get("energyratestructure"), "energyratestructure", "is missing: a tariff needs energy rates")
    energy_rate, energy_max = _structure(doc, "energyratestructure", ENERGY_TIER_UNIT)
    demand_rate, demand_max = _structure(doc, "demandratestructure", DEMAND_UNIT)
    flat_rate, flat_max = _structure(doc, "flatdemandstructure", DEMAND_UNIT)
    if demand_rate.shape[0]:
        demand_weekday = _schedule(doc, "demandweekdayschedule", demand_rate.shape[0])
        demand_weekend = _schedule(doc, "demandweekendschedule", demand_rate.shape[0])
    else:
        demand_weekday = demand_weekend = _readonly(np.zeros((MONTHS, HOURS), dtype=np.int64))
    months = doc.get("flatdemandmonths")
    require((months is None) == (flat_rate.shape[0] == 0), "flatdemandmonths",
            "flatdemandmonths and flatdemandstructure must come together")
    if months is None:
        flat_months = _readonly(np.full(MONTHS, -1, dtype=np.int64))
    else:
        require(isinstance(months, list) and len(months) == MONTHS, "flatdemandmonths",
                f"must be {MONTHS} period indices (January first)")
        for m, value in enumerate(months):
            require(isinstance(value, int) and not isinstance(value, bool) and 0 <= value < flat_rate.shape[0],
                    f"flatdemandmonths[{m}]", f"must be a period index 0-{flat_rate.shape[0] - 1}, got {value!r}")
        flat_months = _readonly(np.array(months, dtype=np.int64))
    amount_key = "fixedchargefirstmeter" if "fixedchargefirstmeter" in doc else "fixedmonthlycharge"
    fixed, fixed_unit = _charge(doc, amount_key, "fixedchargeunits" if amount_key == "fixedchargefirstmeter" else "")
    min_key = "mincharge" if "mincharge" in doc else "minmonthlycharge"
    minimum, min_unit = _charge(doc, min_key, "minchargeunits" if min_key == "mincharge" else "")
    require(min_unit != "$/year", "minchargeunits", "annual minimum charges are not supported (a bill is monthly)")
    name, utility = doc.get("name", "unnamed tariff"), doc.get("utility", "unknown utility")
    label = f" (URDB {doc['label']})" if doc.get("label") else ""
    return Tariff(name=str(name), utility=str(utility), source=f"{source}{label}", energy_rate=energy_rate,
                  energy_tier_max=energy_max,
                  energy_weekday=_schedule(doc, "energyweekdayschedule", energy_rate.shape[0]),
                  energy_weekend=_schedule(doc, "energyweekendschedule", energy_rate.shape[0]),
                  demand_rate=demand_rate, demand_tier_max=demand_max, demand_weekday=demand_weekday,
                  demand_weekend=demand_weekend, flat_rate=flat_rate, flat_tier_max=flat_max,
                  flat_months=flat_months, fixed_charge=fixed, fixed_unit=fixed_unit, min_charge=minimum,
                  min_unit=min_unit, left_out=left_out, document=json.loads(json.dumps(doc)))


def load_tariff(name_or_path: str | Path) -> Tariff:
    """A bundled tariff by name (:data:`BUNDLED`) or a URDB JSON file (an API response or a single item)."""
    if isinstance(name_or_path, str) and name_or_path in BUNDLED:
        file = resources.files("aidc_env").joinpath(*TARIFF_DIR, BUNDLED[name_or_path])
        return Tariff.from_urdb(json.loads(file.read_text(encoding="utf-8")),
                                source=f"aidc_env/{'/'.join(TARIFF_DIR)}/{BUNDLED[name_or_path]}")
    path = Path(name_or_path)
    require(path.suffix != "" or path.exists(), "tariff",
            f"unknown tariff {str(name_or_path)!r}; bundled: {', '.join(BUNDLED)} (or a URDB JSON file)")
    return Tariff.from_urdb(read_json_file(path, "tariff"), source=str(path))


# ------------------------------------------------------------------------------------------------ the bill


@dataclass(frozen=True)
class MonthBill:
    """The bill of one calendar month (or the part of it the profile covers), in $ unless named otherwise."""

    year: int
    month: int
    days: int
    """Days of the month in the profile."""
    days_in_month: int
    energy_kwh: tuple[float, ...]
    """kWh per energy period."""
    energy_usd: tuple[float, ...]
    """Energy charge per energy period (its tiers summed)."""
    peak_kw: float
    """The month's highest 15-minute demand, kW."""
    demand_peak_kw: tuple[float, ...]
    """Highest 15-minute demand within each TOU demand period, kW (0 for a period absent from the month)."""
    demand_usd: tuple[float, ...]
    """TOU demand charge per demand period."""
    flat_demand_usd: float
    fixed_usd: float
    minimum_usd: float
    """What the monthly minimum charge adds (0 when the bill is above it)."""

    @property
    def energy_total_usd(self) -> float:
        return float(sum(self.energy_usd))

    @property
    def demand_total_usd(self) -> float:
        """TOU and flat demand charges."""
        return float(sum(self.demand_usd)) + self.flat_demand_usd

    @property
    def total_usd(self) -> float:
        return self.energy_total_usd + self.demand_total_usd + self.fixed_usd + self.minimum_usd


@dataclass(frozen=True)
class Bill:
    """The bill of a load profile under one tariff: one :class:`MonthBill` per calendar month it touches."""

    tariff: str
    start: dt.date
    months: tuple[MonthBill, ...]

    @property
    def total_usd(self) -> float:
        return float(sum(m.total_usd for m in self.months))

    @property
    def energy_usd(self) -> float:
        return float(sum(m.energy_total_usd for m in self.months))

    @property
    def demand_usd(self) -> float:
        return float(sum(m.demand_total_usd for m in self.months))

    @property
    def fixed_usd(self) -> float:
        return float(sum(m.fixed_usd + m.minimum_usd for m in self.months))

    def to_dict(self) -> dict[str, Any]:
        """The bill as JSON: its totals and every month's items."""
        return {"tariff": self.tariff, "start": self.start.isoformat(), "total_usd": self.total_usd,
                "energy_usd": self.energy_usd, "demand_usd": self.demand_usd, "fixed_usd": self.fixed_usd,
                "months": [{**asdict(m), "total_usd": m.total_usd} for m in self.months]}

    def to_frame(self) -> pd.DataFrame:
        """One row per month: kWh, peak kW, energy / demand / fixed / minimum charges and the total ($)."""
        return pd.DataFrame([{"year": m.year, "month": m.month, "days": m.days, "kwh": float(sum(m.energy_kwh)),
                              "peak_kw": m.peak_kw, "energy_usd": m.energy_total_usd,
                              "tou_demand_usd": float(sum(m.demand_usd)), "flat_demand_usd": m.flat_demand_usd,
                              "fixed_usd": m.fixed_usd, "minimum_usd": m.minimum_usd, "total_usd": m.total_usd}
                             for m in self.months])


def tiered_charge(amount: float, bounds: np.ndarray, rates: np.ndarray) -> float:
    """The charge of ``amount`` (kW) over tiers with upper ``bounds`` and ``rates``."""
    lower = np.concatenate(([0.0], bounds[:-1]))
    return float(np.sum(rates * np.clip(amount - lower, 0.0, bounds - lower)))


def _energy_charges(kwh: np.ndarray, tariff: Tariff) -> np.ndarray:
    """Charge per period of a month's kWh per period: the month's total decides the tier, each period's kWh is spread
    over the tiers in proportion to its share of the total (NREL SAM's rule for monthly kWh tiers)."""
    total = float(kwh.sum())
    if total <= 0:
        return np.zeros(len(kwh))
    bounds = tariff.energy_tier_max
    lower = np.concatenate((np.zeros((len(kwh), 1)), bounds[:, :-1]), axis=1)
    in_tier = np.minimum(total, bounds) - np.minimum(total, lower)  # the month's kWh in each tier, per period's bounds
    return np.sum(tariff.energy_rate * in_tier * (kwh / total)[:, None], axis=1)


def fraction_charge(amount: float, unit: str, days: int, days_in_month: int) -> float:
    """A fixed or minimum charge for ``days`` of a month: $/day × days, $/month (or $/year / 12) prorated by days."""
    if unit == "$/day":
        return amount * days
    monthly = amount / MONTHS if unit == "$/year" else amount
    return monthly * days / days_in_month


def _check_profile(load_kw: Any, start: Any, slot_hours: float) -> tuple[np.ndarray, dt.date, int]:
    """The load as floats, the first local date, and slots per hour."""
    require(is_finite(slot_hours) and 0 < slot_hours <= 1, "slot_hours", f"must be in (0, 1] hours, got "
            f"{slot_hours!r}")
    per_hour = round(1 / slot_hours)
    require(abs(per_hour * slot_hours - 1) < 1e-9 and (per_hour % 4 == 0 or 4 % per_hour == 0), "slot_hours",
            f"{slot_hours!r} h does not divide the hour into whole slots that tile 15-minute demand intervals")
    try:
        load = np.asarray(load_kw, dtype=float)
    except (TypeError, ValueError):
        raise InputError("load_kw", "must be a sequence of numbers (kW per slot)") from None
    per_day = HOURS * per_hour
    require(load.ndim == 1 and load.size > 0 and load.size % per_day == 0, "load_kw",
            f"must be whole days of {per_day} slots of {slot_hours:g} h, got shape {load.shape}")
    require(bool(np.all(np.isfinite(load))) and bool(np.all(load >= 0)), "load_kw",
            "must be finite and >= 0 kW (grid import)")
    if isinstance(start, dt.datetime):  # pandas Timestamps too
        stamp = pd.Timestamp(start)
        if stamp.tzinfo is not None:
            stamp = stamp.tz_convert(TIMEZONE)
        require(stamp == stamp.normalize(), "start", f"must be a local midnight, got {stamp}")
        first = stamp.date()
    else:
        require(isinstance(start, dt.date), "start", f"must be a datetime.date or pandas Timestamp, got {start!r}")
        first = start
    return load, first, per_hour


def calendar_days(first: dt.date, n_days: int, holidays: Iterable[dt.date] = ()) -> tuple[np.ndarray, np.ndarray]:
    """Per local day from ``first``: whether it takes the weekend schedules (Saturday, Sunday or one of ``holidays``),
    and its month as ``year × 12 + month − 1`` (the key of its monthly charges)."""
    days = pd.date_range(first, periods=n_days, freq="D")
    try:
        off = {pd.Timestamp(day).date() for day in holidays}
    except (TypeError, ValueError):
        raise InputError("holidays", "must be dates") from None
    weekend = np.array([d.weekday() in WEEKEND_DAYS or d.date() in off for d in days], dtype=bool)
    return weekend, (days.year * MONTHS + days.month - 1).to_numpy()


def bill(tariff: Tariff, load_kw: Sequence[float] | np.ndarray, start: dt.date | pd.Timestamp,
         slot_hours: float = DEMAND_INTERVAL_HOURS, holidays: Iterable[dt.date] = ()) -> Bill:
    """The bill of a grid load (kW per slot of ``slot_hours``, local wall-clock time from midnight of ``start``, whole
    days), itemised per calendar month (module docstring: the rules). ``holidays``: dates billed on the weekend
    schedules."""
    load, first, per_hour = _check_profile(load_kw, start, slot_hours)
    per_day = HOURS * per_hour
    weekend, month_of_day = calendar_days(first, load.size // per_day, holidays)
    hour = np.arange(per_day) // per_hour
    kwh = (load * slot_hours).reshape(len(weekend), per_day)
    per_interval = max(per_hour // 4, 1)  # slots per 15-minute demand interval (1 when a slot is longer)
    demand = load.reshape(-1, per_interval).mean(axis=1).reshape(len(weekend), -1)
    demand_hour = hour[::per_interval]
    months = []
    for key in dict.fromkeys(month_of_day.tolist()):
        rows = month_of_day == key
        year, month = divmod(int(key), MONTHS)
        m = month  # 0-11: the schedules' row
        sched_e = np.where(weekend[rows, None], tariff.energy_weekend[m][hour], tariff.energy_weekday[m][hour])
        period_kwh = np.bincount(sched_e.ravel(), weights=kwh[rows].ravel(), minlength=tariff.energy_periods)
        energy_usd = _energy_charges(period_kwh, tariff)
        month_demand = demand[rows]
        peak = float(month_demand.max())
        demand_peaks = np.zeros(tariff.demand_periods)
        if tariff.demand_periods:
            sched_d = np.where(weekend[rows, None], tariff.demand_weekend[m][demand_hour],
                               tariff.demand_weekday[m][demand_hour])
            np.maximum.at(demand_peaks, sched_d.ravel(), month_demand.ravel())
        demand_usd = [tiered_charge(p, tariff.demand_tier_max[i], tariff.demand_rate[i])
                      for i, p in enumerate(demand_peaks)]
        flat = int(tariff.flat_months[m])
        flat_usd = tiered_charge(peak, tariff.flat_tier_max[flat], tariff.flat_rate[flat]) if flat >= 0 else 0.0
        n_days, in_month = int(rows.sum()), calendar.monthrange(year, month + 1)[1]
        fixed = fraction_charge(tariff.fixed_charge, tariff.fixed_unit, n_days, in_month)
        minimum = fraction_charge(tariff.min_charge, tariff.min_unit, n_days, in_month)
        subtotal = float(energy_usd.sum()) + float(sum(demand_usd)) + flat_usd + fixed
        months.append(MonthBill(year=year, month=month + 1, days=n_days, days_in_month=in_month,
                                energy_kwh=tuple(float(x) for x in period_kwh),
                                energy_usd=tuple(float(x) for x in energy_usd), peak_kw=peak,
                                demand_peak_kw=tuple(float(x) for x in demand_peaks),
                                demand_usd=tuple(float(x) for x in demand_usd), flat_demand_usd=flat_usd,
                                fixed_usd=fixed, minimum_usd=max(minimum - subtotal, 0.0)))
    return Bill(tariff=tariff.name, start=first, months=tuple(months))


# ------------------------------------------------------------------------------------------------ command line


def _rate_text(rates: np.ndarray, bounds: np.ndarray, unit: str, tier_unit: str) -> str:
    tiers = [(r, b) for r, b in zip(rates, bounds, strict=True)]
    while len(tiers) > 1 and tiers[-1][1] == np.inf and tiers[-2][1] == np.inf:  # padding
        tiers.pop()
    if len(tiers) == 1:
        return f"{tiers[0][0]:.5f} {unit}"
    return "; ".join(f"{r:.5f} {unit} up to {b:g} {tier_unit}" if np.isfinite(b) else f"{r:.5f} {unit} above"
                     for r, b in tiers)


def _schedule_text(weekday: np.ndarray, weekend: np.ndarray) -> list[str]:
    """The schedules as one line per month: weekday and weekend periods by hour (one character each)."""
    lines = ["    month  weekday hours 0-23          weekend hours 0-23"]
    for m in range(MONTHS):
        wd = "".join(str(p) if p < 10 else chr(ord("a") + p - 10) for p in weekday[m])
        we = "".join(str(p) if p < 10 else chr(ord("a") + p - 10) for p in weekend[m])
        lines.append(f"    {calendar.month_abbr[m + 1]:5}  {wd}  {we}")
    return lines


def describe(tariff: Tariff) -> str:
    """The tariff's periods and rates, as the CLI prints them."""
    lines = [f"{tariff.name}", f"  utility: {tariff.utility}", f"  source: {tariff.source}",
             f"  fixed charge: {tariff.fixed_charge:g} {tariff.fixed_unit}"]
    if tariff.min_charge:
        lines.append(f"  minimum charge: {tariff.min_charge:g} {tariff.min_unit}")
    lines.append(f"  energy periods ({tariff.energy_periods}):")
    lines += [f"    {p}: {_rate_text(tariff.energy_rate[p], tariff.energy_tier_max[p], '$/kWh', 'kWh/month')}"
              for p in range(tariff.energy_periods)]
    lines += _schedule_text(tariff.energy_weekday, tariff.energy_weekend)
    if tariff.demand_periods:
        lines.append(f"  TOU demand periods ({tariff.demand_periods}, month's highest 15-min kW in the period):")
        lines += [f"    {p}: {_rate_text(tariff.demand_rate[p], tariff.demand_tier_max[p], '$/kW', 'kW')}"
                  for p in range(tariff.demand_periods)]
        lines += _schedule_text(tariff.demand_weekday, tariff.demand_weekend)
    if (tariff.flat_months >= 0).any():
        lines.append("  flat demand (month's highest 15-min kW):")
        for m in range(MONTHS):
            p = int(tariff.flat_months[m])
            text = _rate_text(tariff.flat_rate[p], tariff.flat_tier_max[p], "$/kW", "kW") if p >= 0 else "none"
            lines.append(f"    {calendar.month_abbr[m + 1]}: {text}")
    lines += [f"  not billed: {item}" for item in tariff.left_out]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m aidc_env.tariffs",
                       description="Show a utility tariff (URDB JSON): its TOU periods, rates, demand and fixed "
                       "charges.")
    parser.add_argument("--tariff", help=f"a bundled name ({', '.join(BUNDLED)}) or a URDB JSON file")
    parser.add_argument("--list", action="store_true", help="list the bundled tariffs")
    args = parser.parse_args(argv)
    require(bool(args.tariff) or args.list, "arguments", "give --tariff NAME|FILE or --list")
    if args.list:
        for name in BUNDLED:
            tariff = load_tariff(name)
            print(f"{name:12} {tariff.utility}: {tariff.name}")
    if args.tariff:
        print(describe(load_tariff(args.tariff)))
    return 0


__all__ = ["BUNDLED", "Bill", "MonthBill", "Tariff", "bill", "describe", "load_tariff"]

if __name__ == "__main__":
    sys.exit(run_cli(main))
