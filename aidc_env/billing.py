"""A utility tariff laid on an instance's slots: the terms of the bill that the objective charges.

With a tariff (``Instance.tariff``; :mod:`aidc_env.tariffs` reads it), every site's grid import is billed by it instead
of at the real-time LMP. :func:`tariff_terms` turns the tariff and the instance's calendar (first day, slots) into
:class:`TariffTerms`:

- the **energy rate** of every slot ($/MWh: the TOU period's $/kWh × 1000). It becomes the instance's
  ``price_usd_per_mwh`` (:meth:`Instance.with_tariff <aidc_env.instance.Instance.with_tariff>`), so the simulator, the
  env, every policy and both oracles price a slot's import at it unchanged; the real-time LMP is then not paid;
- the **demand charges** (:class:`DemandCharge`): one per calendar month and TOU demand period with a rate, and one per
  month for the flat demand charge; each bills, tiered, the highest import (kW) over its slots. The demand interval is
  15 minutes and a slot is at least that long, so a slot's import is its interval's demand;
- the **fixed charges** of the horizon's days ($, prorated per month as :func:`aidc_env.tariffs.bill` does).

A coincident-peak charge (:mod:`aidc_env.coincident`, ``Instance.coincident_peak``) joins the terms as demand
charges of one slot each (:func:`with_demand_charges`), with a tariff or without one (then the energy is the real-time
LMP, the instance's prices, and there is no fixed charge).

The terms are the bill: for a schedule's import, energy + demand + fixed charges equal
:func:`aidc_env.tariffs.bill`'s total (a test asserts it). Each site is billed on its own meter under the same tariff.
A month's demand charge is paid in full on the part of the month a horizon covers: a horizon of a calendar month bills
what the utility bills.

**Refused** in the objective with one line (the bill itself, :func:`aidc_env.tariffs.bill`, handles them): monthly kWh
tiers of the energy charge (the month's total would set every slot's rate), demand tiers whose rate falls (the charge
would not be convex in the peak), a minimum charge, slots shorter than the 15-minute demand interval or not dividing the
hour.
"""

from __future__ import annotations

import calendar
import datetime as dt
from dataclasses import dataclass

import numpy as np

from aidc_env.errors import InputError, require
from aidc_env.tariffs import (DEMAND_INTERVAL_HOURS, HOURS, MONTHS, Tariff, calendar_days, fraction_charge,
                              tiered_charge)

KW_PER_MW = 1000.0


@dataclass(frozen=True, eq=False)
class DemandCharge:
    """One demand charge of a horizon: the tiered $/kW on the highest import over its slots."""

    label: str
    """The month and period it bills, e.g. ``2023-07 TOU demand period 3`` or ``2023-07 flat demand``."""
    slots: np.ndarray
    """The horizon's slots whose import sets its demand (int, ascending)."""
    tier_max_kw: np.ndarray
    """Upper bound of each tier, kW (+inf for the last)."""
    rate_usd_per_kw: np.ndarray
    """$/kW of each tier (non-decreasing: the charge is convex in the peak)."""
    flat: bool = False
    """The month's flat demand charge (every slot), else a TOU demand period's."""
    coincident: bool = False
    """A coincident-peak charge (:mod:`aidc_env.coincident`): one slot of the system's peak, billed apart from the
    tariff's demand charges."""

    def peak_kw(self, grid_mw: np.ndarray) -> float:
        """The highest import over its slots, kW."""
        return float(np.max(grid_mw[self.slots])) * KW_PER_MW

    def charge_usd(self, grid_mw: np.ndarray) -> float:
        """The charge of a per-slot import (MW)."""
        return tiered_charge(self.peak_kw(grid_mw), self.tier_max_kw, self.rate_usd_per_kw)


@dataclass(frozen=True, eq=False)
class TariffTerms:
    """A tariff on a horizon's slots (one site's meter): per-slot energy rate, demand charges, fixed charges."""

    energy_usd_per_mwh: np.ndarray
    demand: tuple[DemandCharge, ...]
    fixed_usd: float
    """Fixed charges of the horizon's days."""

    def demand_usd(self, grid_mw: np.ndarray) -> float:
        """All demand charges of a per-slot import (MW)."""
        return float(sum(charge.charge_usd(grid_mw) for charge in self.demand))


def with_demand_charges(terms: TariffTerms | None, energy_usd_per_mwh: np.ndarray,
                        charges: tuple[DemandCharge, ...]) -> TariffTerms:
    """``terms`` with ``charges`` added to its demand charges (e.g. coincident-peak charges,
    :mod:`aidc_env.coincident`); without a tariff's terms (None), the terms of energy at ``energy_usd_per_mwh`` (the
    real-time LMP) and the ``charges`` alone, no fixed charge."""
    if terms is None:
        return TariffTerms(energy_usd_per_mwh=energy_usd_per_mwh, demand=tuple(charges), fixed_usd=0.0)
    return TariffTerms(energy_usd_per_mwh=terms.energy_usd_per_mwh, demand=terms.demand + tuple(charges),
                       fixed_usd=terms.fixed_usd)


def _check_objective(tariff: Tariff) -> None:
    """Refuse what the objective does not model (module docstring)."""
    require(bool(np.all(np.isinf(tariff.energy_tier_max[:, 0]))), "tariff", f"{tariff.name}: monthly kWh tiers of "
            "the energy charge are billed (python -m aidc_env.tariffs) but not an objective: the month's total would "
            "set every slot's rate")
    for kind, rates in (("TOU demand", tariff.demand_rate), ("flat demand", tariff.flat_rate)):
        require(bool(np.all(np.diff(rates, axis=1) >= 0)), "tariff", f"{tariff.name}: a {kind} rate falls with the "
                "tier: the charge is not convex in the peak, which the objective needs")
    require(tariff.min_charge <= 0, "tariff", f"{tariff.name}: a minimum charge is billed but not an objective")


def tariff_terms(tariff: Tariff, first_day: str, slots: int, slot_hours: float) -> TariffTerms:
    """The terms of ``tariff`` on ``slots`` slots of ``slot_hours`` from local midnight of ``first_day`` (YYYY-MM-DD;
    whole days)."""
    _check_objective(tariff)
    try:
        first = dt.date.fromisoformat(first_day)
    except (TypeError, ValueError):
        raise InputError("day", f"a tariff bills calendar days: the first day must be YYYY-MM-DD, got "
                         f"{first_day!r}") from None
    per_hour = round(1 / slot_hours) if slot_hours <= 1 else 0
    require(slot_hours >= DEMAND_INTERVAL_HOURS and per_hour >= 1 and abs(per_hour * slot_hours - 1) < 1e-9,
            "slot_hours", f"a tariff needs slots of 15, 20, 30 or 60 minutes (a whole number per hour, none shorter "
            f"than the demand interval), got {slot_hours:g} h")
    per_day = HOURS * per_hour
    require(slots % per_day == 0, "slots", f"a tariff bills whole days of {per_day} slots, got {slots}")
    n_days = slots // per_day
    weekend, month_key = calendar_days(first, n_days)
    hour = np.arange(per_day) // per_hour
    month = np.repeat(month_key % MONTHS, per_day)
    slot_hour = np.tile(hour, n_days)
    slot_weekend = np.repeat(weekend, per_day)
    energy_period = np.where(slot_weekend, tariff.energy_weekend[month, slot_hour],
                             tariff.energy_weekday[month, slot_hour])
    energy = tariff.energy_rate[energy_period, 0] * KW_PER_MW
    demand_period = np.where(slot_weekend, tariff.demand_weekend[month, slot_hour],
                             tariff.demand_weekday[month, slot_hour])
    slot_month = np.repeat(month_key, per_day)
    charges, fixed = [], 0.0
    for key in dict.fromkeys(month_key.tolist()):
        year, m = divmod(int(key), MONTHS)
        in_month = slot_month == key
        tag = f"{year}-{m + 1:02d}"
        for p in range(tariff.demand_periods):
            where = np.flatnonzero(in_month & (demand_period == p))
            if where.size and np.any(tariff.demand_rate[p] > 0):
                charges.append(DemandCharge(f"{tag} TOU demand period {p}", where, tariff.demand_tier_max[p],
                                            tariff.demand_rate[p]))
        flat = int(tariff.flat_months[m])
        if flat >= 0 and np.any(tariff.flat_rate[flat] > 0):
            charges.append(DemandCharge(f"{tag} flat demand", np.flatnonzero(in_month), tariff.flat_tier_max[flat],
                                        tariff.flat_rate[flat], flat=True))
        fixed += fraction_charge(tariff.fixed_charge, tariff.fixed_unit, int(np.sum(month_key == key)),
                                 calendar.monthrange(year, m + 1)[1])
    for charge in charges:
        for arr in (charge.slots, charge.tier_max_kw, charge.rate_usd_per_kw):
            arr.setflags(write=False)
    energy.setflags(write=False)
    return TariffTerms(energy_usd_per_mwh=energy, demand=tuple(charges), fixed_usd=float(fixed))


__all__ = ["KW_PER_MW", "DemandCharge", "TariffTerms", "tariff_terms", "with_demand_charges"]
