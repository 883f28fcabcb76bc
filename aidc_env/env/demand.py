"""A tariff's demand charges in the joint action's episode: paid as the month's peaks rise.

A demand charge bills the highest import over its slots (:mod:`aidc_env.billing`), which no single slot owns. The env
pays it incrementally: in each slot, for every charge the slot belongs to, the tiered charge of the new peak less that
of the old one when the import raises it. The increments telescope to the charges, so an episode's slot costs still
sum to the simulator's objective; the tariff's fixed charges are paid in the first slot. The running peaks make the
state Markov; the observation holds two of them (:data:`DEMAND_FEATURES`), each as a share of the facility's rated
load: the flat charge's, and the highest of the TOU charges the slot belongs to (0 in a slot outside every TOU
demand period).

A coincident-peak charge (:mod:`aidc_env.coincident`) is one-slot charges on the system's peak hour: paid in its slot
(rate × import), and never observed before it (its running peak is 0 until its slot is paid, and no later slot
belongs to it), since the system's peak is known only after the month. An episode of an instance with the option but
no peak in its horizon has no charges and the same entries (all 0).
"""

from __future__ import annotations

from aidc_env.billing import KW_PER_MW
from aidc_env.instance import Instance
from aidc_env.tariffs import tiered_charge

DEMAND_FEATURES = ("peak_flat", "peak_tou")
"""The observation's demand entries (shares of the rated facility load, in [0, 1])."""


class DemandCharges:
    """The running peaks of an instance's demand charges (one site: the joint action's)."""

    def __init__(self) -> None:
        self._tables: dict[str, tuple] = {}  # per day: what reset derives from the instance's tariff terms

    def reset(self, inst: Instance) -> None:
        tables = self._tables.get(inst.day)
        if tables is None:
            tables = self._tables[inst.day] = _tables(inst)
        (self._charges, self._fixed_usd, self._rated_mw, self._flat_rate, self._at, self._flat_at,
         self._tou_at) = tables
        self._peaks = [0.0] * len(self._charges)

    def slot_usd(self, t: int, grid_mw: float) -> float:
        """What slot t pays: the charges' increases (and the fixed charges at t = 0)."""
        paid = self._fixed_usd if t == 0 else 0.0
        for k in self._at[t]:
            old = self._peaks[k]
            if grid_mw > old:
                rate = self._flat_rate[k]
                if rate is not None:
                    paid += rate * (grid_mw - old)
                else:
                    charge = self._charges[k]
                    paid += (tiered_charge(grid_mw * KW_PER_MW, charge.tier_max_kw, charge.rate_usd_per_kw)
                             - tiered_charge(old * KW_PER_MW, charge.tier_max_kw, charge.rate_usd_per_kw))
                self._peaks[k] = grid_mw
        return paid

    def features(self, t: int) -> tuple[float, float]:
        """:data:`DEMAND_FEATURES` at slot t."""
        k = self._flat_at[t]
        flat = self._peaks[k] if k >= 0 else 0.0
        tou = max((self._peaks[k] for k in self._tou_at[t]), default=0.0)
        return min(flat / self._rated_mw, 1.0), min(tou / self._rated_mw, 1.0)


def _tables(inst: Instance) -> tuple:
    """The charges, fixed charges, rated load, each charge's $/MW if it has one tier (the step's fast path; None if
    tiered), and per slot its charges, its flat charge (-1: none) and its TOU charges."""
    terms = inst.tariff_terms  # None: a coincident-peak option without a peak in the horizon, nothing to pay
    charges = terms.demand if terms is not None else ()
    flat_rate = [float(c.rate_usd_per_kw[0]) * KW_PER_MW if c.rate_usd_per_kw.size == 1 else None for c in charges]
    at: list[list[int]] = [[] for _ in range(inst.slots)]
    for k, charge in enumerate(charges):
        for t in charge.slots:
            at[int(t)].append(k)
    fixed_usd = terms.fixed_usd if terms is not None else 0.0
    return (charges, fixed_usd, inst.rated_facility_mw, flat_rate, [tuple(ks) for ks in at],
            [next((k for k in ks if charges[k].flat), -1) for ks in at],
            [tuple(k for k in ks if not charges[k].flat) for ks in at])


__all__ = ["DEMAND_FEATURES", "DemandCharges"]
