"""The wholesale two-settlement bill of a large load: a day-ahead purchase, then the real-time deviation.

Every cost of the simulator is the real-time (RT) LMP times the grid import. A load that buys in the wholesale market
(CAISO's, like any US ISO's) pays **two settlements**: on day d − 1, before the day-ahead (DA) market closes, it buys a
quantity q_t (MW, per slot) at the DA LMP; on day d its metered import g_t deviates from q_t, and the deviation is
settled at the RT LMP (a negative deviation is sold back at that price)::

    bill = Σ_t [λDA_t q_t + λRT_t (g_t − q_t)] Δ
         = Σ_t λRT_t g_t Δ  +  Σ_t (λDA_t − λRT_t) q_t Δ

The first term is the RT-only bill (the simulator's ``Metrics.grid_cost_usd``: :attr:`TwoSettlementBill.
realtime_only_usd`), the second what the commitment changes (:attr:`TwoSettlementBill.spread_usd`: negative when
the DA purchase was cheaper than buying the same energy in real time). q = 0 is today's bill exactly. Deviations
carry no penalty of their own here: the market's uplift and imbalance-offset allocations are left out.

**A physical load's purchase.** The purchase of a load without virtual bids is the import of a plan it commits to:
q = max(L_A − R̂, 0) per slot, A a feasible schedule (the *commitment plan*) and R̂ the renewables forecast when it
commits. :func:`committed_import_mw` computes it with the simulator on the instance with the forecast renewables, so
the physics (facility load, renewable first, no export) is the simulator's, never a copy. The policies that choose A
live in :mod:`agents.commitment`.

Scope: one site (several sites would settle per node; refused), and an instance without a tariff (a tariff's energy
rates are not an LMP; refused). The rest of the simulator's objective (renewable PPA, curtailment penalty, idle value,
grid calls) is unchanged by the settlement: an objective under two settlements is ``Metrics.objective_usd`` +
:attr:`TwoSettlementBill.spread_usd`. Money in $, energy in MWh, power in MW, prices in $/MWh.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from aidc_env.errors import require
from aidc_env.instance import Instance
from aidc_env.io import finite_or_none
from aidc_env.limits import MAX_PRICE_USD_PER_MWH
from aidc_env.metrics import SimulationResult
from aidc_env.schedule import Schedule
from aidc_env.simulator import simulate

SLOT_ARRAYS = ("committed_mw", "grid_mw", "dayahead_price_usd_per_mwh", "realtime_price_usd_per_mwh")
"""The optional per-slot arrays of a :class:`TwoSettlementBill`."""


@dataclass(frozen=True, eq=False)
class TwoSettlementBill:
    """The two-settlement bill of one site over a horizon ($, MWh); per-slot arrays when asked for."""

    dayahead_usd: float
    """Σ λDA q Δ: the day-ahead purchase ($)."""
    realtime_usd: float
    """Σ λRT (g − q) Δ: the deviation settled in real time ($; negative when more was sold back than bought)."""
    total_usd: float
    """dayahead_usd + realtime_usd: the grid bill under two settlements ($)."""
    realtime_only_usd: float
    """Σ λRT g Δ: the same import settled in real time only (q = 0; the simulator's grid cost, $)."""
    spread_usd: float
    """Σ (λDA − λRT) q Δ = total_usd − realtime_only_usd: what the commitment changed ($; negative saves)."""
    committed_mwh: float
    """Σ q Δ: energy bought day-ahead (MWh)."""
    grid_mwh: float
    """Σ g Δ: energy imported (MWh)."""
    deviation_mwh: float
    """Σ |g − q| Δ: energy settled in real time, either way (MWh)."""
    committed_mw: np.ndarray | None = None
    """(T,) q: the day-ahead purchase per slot (MW), when asked for."""
    grid_mw: np.ndarray | None = None
    """(T,) g: the grid import per slot (MW)."""
    dayahead_price_usd_per_mwh: np.ndarray | None = None
    """(T,) λDA ($/MWh)."""
    realtime_price_usd_per_mwh: np.ndarray | None = None
    """(T,) λRT ($/MWh)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: the totals, and the per-slot arrays that are present (as lists; NaN/inf would be null)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return finite_or_none({k: v for k, v in out.items() if v is not None})


def _series(values: Any, slots: int, field: str, *, low: float = -MAX_PRICE_USD_PER_MWH,
            high: float = MAX_PRICE_USD_PER_MWH) -> np.ndarray:
    """``values`` as a read-only (slots,) float array; one-line InputError naming ``field`` unless it has that length
    and every value is finite within [low, high]."""
    try:
        arr = np.array(values, dtype=float)
    except (TypeError, ValueError):
        arr = np.array([np.nan])
    require(arr.ndim == 1 and arr.size == slots, field, f"must be {slots} values (one per slot), got shape {arr.shape}")
    require(bool(np.all(np.isfinite(arr))), field, "must be finite numbers (no NaN or infinity)")
    require(bool(np.all((arr >= low) & (arr <= high))), field, f"must lie within [{low:g}, {high:g}]")
    arr.setflags(write=False)
    return arr


def settle(grid_mw: Any, committed_mw: Any, dayahead_price_usd_per_mwh: Any, realtime_price_usd_per_mwh: Any,
           slot_hours: float, *, slots: bool = False) -> TwoSettlementBill:
    """The two-settlement bill of an import g (MW per slot) against a DA purchase q (MW per slot, ≥ 0), at the DA and
    RT prices ($/MWh), slots of ``slot_hours`` hours; ``slots``: keep the per-slot arrays. InputError on bad input."""
    require(isinstance(slot_hours, (int, float)) and not isinstance(slot_hours, bool) and np.isfinite(slot_hours)
            and slot_hours > 0, "slot_hours", f"must be a positive number of hours, got {slot_hours!r}")
    n = int(np.size(grid_mw))
    g = _series(grid_mw, n, "grid_mw", low=0.0)
    q = _series(committed_mw, n, "committed_mw", low=0.0)
    da = _series(dayahead_price_usd_per_mwh, n, "dayahead_price_usd_per_mwh")
    rt = _series(realtime_price_usd_per_mwh, n, "realtime_price_usd_per_mwh")
    dt = float(slot_hours)
    dayahead, realtime = float(np.sum(da * q) * dt), float(np.sum(rt * (g - q)) * dt)
    kept = {"committed_mw": q, "grid_mw": g, "dayahead_price_usd_per_mwh": da,
            "realtime_price_usd_per_mwh": rt} if slots else {}
    return TwoSettlementBill(
        dayahead_usd=dayahead, realtime_usd=realtime, total_usd=dayahead + realtime,
        realtime_only_usd=float(np.sum(rt * g) * dt), spread_usd=float(np.sum((da - rt) * q) * dt),
        committed_mwh=float(np.sum(q) * dt), grid_mwh=float(np.sum(g) * dt),
        deviation_mwh=float(np.sum(np.abs(g - q)) * dt), **kept)


def require_wholesale(inst: Instance, who: str) -> None:
    """InputError unless ``inst`` is one site buying at its LMP (no tariff): what a two-settlement bill settles."""
    require(len(inst.site_views) == 1, "sites", f"{who} settles one site; this instance has {len(inst.site_views)} "
            "(settle each site's view, Instance.site_views, at its own node)")
    require(getattr(inst, "tariff", None) is None, "tariff", f"{who} settles at the wholesale LMP; this instance "
            "buys under a tariff, whose energy rates are not an LMP")
    require(getattr(inst, "coincident_peak", None) is None, "coincident_peak", f"{who} settles the energy at the "
            "wholesale LMP; a coincident-peak charge (on the system's peak, known only after the month) is not settled")


def two_settlement_bill(inst: Instance, result: SimulationResult, committed_mw: Any, dayahead_price_usd_per_mwh: Any,
                        *, slots: bool = False) -> TwoSettlementBill:
    """The two-settlement bill of a simulated schedule (``result``, on the truth of ``inst``): its grid import at the
    RT price of the instance against the DA purchase ``committed_mw`` (T,) at ``dayahead_price_usd_per_mwh`` (T,)."""
    require_wholesale(inst, "two_settlement_bill")
    require(isinstance(result, SimulationResult), "result", "must be a SimulationResult (aidc_env.simulator.simulate)")
    grid = result.site_flows[0].grid_mw
    require(grid.size == inst.slots, "result", f"has {grid.size} slots, the instance {inst.slots}")
    _series(committed_mw, inst.slots, "committed_mw", low=0.0)
    _series(dayahead_price_usd_per_mwh, inst.slots, "dayahead_price_usd_per_mwh")
    return settle(grid, committed_mw, dayahead_price_usd_per_mwh, inst.price_usd_per_mwh, inst.slot_hours, slots=slots)


def committed_import_mw(inst: Instance, schedule: Schedule | Any, renewable_shape: Any) -> np.ndarray:
    """q = max(L_A − R̂, 0) per slot (MW, (T,)): the grid import of the plan ``schedule`` on ``inst`` with the
    renewable shape ``renewable_shape`` (T,) in [0, 1] (the forecast known when committing) instead of the truth;
    computed by :func:`aidc_env.simulator.simulate` (the plan's load, renewable first, no export)."""
    require_wholesale(inst, "committed_import_mw")
    shape = _series(renewable_shape, inst.slots, "renewable_shape", low=0.0, high=1.0)
    planned = dataclasses.replace(inst, renewable_shape=shape)
    return np.array(simulate(planned, schedule).site_flows[0].grid_mw, dtype=float)


__all__ = ["SLOT_ARRAYS", "TwoSettlementBill", "committed_import_mw", "require_wholesale", "settle",
           "two_settlement_bill"]
