"""Grid calls in the decomposition (:mod:`oracle.decomposition`): what a call adds to a site's pool, and what the
decomposition refuses of the grid's side (:mod:`aidc_env.grid`).

**The row.** A call on site s over the slots [start, end) holds the site's grid import g_t = max(L_t − R_t, 0) at or
below its limit: a bound on the facility load, L_t ≤ R_t + limit_t. The load is the pool's base load (inference,
every other GPU idle) plus what the jobs' states add (:attr:`oracle.master.Column.load_mw`), so each (pool, slot) of a
call is one linear row of the masters over the columns (:mod:`oracle.master`), one bound on a pattern's load
(:mod:`oracle.patterns`), one test of :meth:`~oracle.graph.DecompositionData.fits` that every schedule a heuristic
offers passes. The calls are hard: every answer delivers every call, so no penalty is ever paid.

**The payment.** A delivered call pays rate·(b_t − g_t)·Δ per slot (b the baseline), exact as a linear term when its
import, at most its limit, is also at most its baseline: a call that pays per MWh with a limit above its baseline in
some slot is refused. The rate·Δ adds to the cost of a MW of import in the call's slots (the pool's
``grid_usd_per_mw``, as the textbook folds it into its ``grid_coef``); the baseline's part and the per-MW payment of a
delivered call are constants.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aidc_env.grid import CAP_TOLERANCE_MW
from aidc_env.instance import Instance

FIT_TOL_MW = CAP_TOLERANCE_MW / 10
"""A schedule fits a call's row when its load exceeds the row by at most this (MW: HiGHS's primal feasibility
tolerance, so that an integer master's answer on its row fits; a tenth of the simulator's tolerance, so that the call is
still delivered). The rows themselves have none: the masters' schedules deliver the limit exactly, as the simulator
asks (the textbook's rows keep a margin below it instead, a schedule's load being continuous there). Patterns within
it are kept too: the pattern master's bound then covers every schedule that fits."""


@dataclass(frozen=True)
class PoolCalls:
    """The calls of one site's pool: per slot the most facility load a call allows (MW; ∞ outside calls) and the payment
    per MW of import held over the slot ($: rate × Δ; 0 outside calls), and the constant of the payments ($: minus the
    baseline's part and the per-MW payments of the delivered calls)."""

    load_limit_mw: np.ndarray
    payment_usd_per_mw: np.ndarray
    constant_usd: float


def pool_calls(view: Instance) -> PoolCalls:
    """The calls of a one-site view (its ``grid_calls``, all at site 0)."""
    T, dt = view.slots, view.slot_hours
    limit = np.full(T, np.inf)
    payment = np.zeros(T)
    constant = 0.0
    for call in view.grid_calls:
        slots = call.slots
        limit[slots] = np.minimum(limit[slots], view.renewable_mw[slots] + call.limit_mw)
        payment[slots] += call.payment_usd_per_mwh * dt
        constant -= call.payment_usd_per_mwh * float(np.sum(call.baseline_mw)) * dt
        constant -= call.payment_usd_per_mw * max(call.committed_mw, 0.0)
    return PoolCalls(load_limit_mw=limit, payment_usd_per_mw=payment, constant_usd=float(constant))


def joint_state_calls(inst: Instance) -> bool:
    """Of the grid's side the instance has at most grid calls whose payment is linear in the import (no power caps,
    tiers or training value): what the joint states' block costs (:func:`oracle.data.call_costs`) price exactly."""
    return (inst.cap_curve is None and inst.training_value_usd_per_gpu_hour <= 0
            and all(job.max_throughput_loss is None for job in inst.jobs) and not nonlinear_payment(inst, ""))


def refusal(inst: Instance) -> str:
    """Why the decomposition cannot solve an instance's grid side ("" when it can: no grid side, or grid calls only)."""
    parts = [what for what, present in (
        ("power caps", inst.cap_curve is not None),
        ("throughput tiers", any(job.max_throughput_loss is not None for job in inst.jobs)),
        ("a training value", inst.training_value_usd_per_gpu_hour > 0),
        ("a tariff's demand charges or a coincident-peak charge", inst.has_demand_charges)) if present]
    if parts:
        return (f"the decomposition does not model {', '.join(parts)} yet (grid calls it does): use 'textbook' or "
                "'auto' (one site without fine-tuning, inference or idle-GPU value)")
    return nonlinear_payment(inst, "the decomposition")


def nonlinear_payment(inst: Instance, who: str) -> str:
    """Why ``who`` cannot price an instance's calls ("" when it can): a call that pays per MWh below a baseline that
    lies under its limit in some slot (its payment, rate·max(b − g, 0), is then not linear in the import g)."""
    for k, call in enumerate(inst.grid_calls):
        if call.payment_usd_per_mwh > 0 and bool(np.any(call.limit_mw > call.baseline_mw)):
            return (f"{who} does not model grid call {k} ({call.program}): it pays per MWh below a "
                    "baseline that lies under its limit in some slot (the payment is then not linear in the import)")
    return ""


def undeliverable(names: list[str], base_load_mw: list[np.ndarray], least_added_mw: list[np.ndarray],
                  load_limit_mw: list[np.ndarray]) -> str:
    """A quick proof that some call cannot be delivered: in one of its slots, a pool's base load plus the least load
    every job can add there (each job at its lightest allowed state) exceeds the row ("" when none is found). Per pool:
    its name and (T,) arrays (MW)."""
    for name, base, least, limit in zip(names, base_load_mw, least_added_mw, load_limit_mw, strict=True):
        over = np.flatnonzero(base + least > limit + FIT_TOL_MW)
        if over.size:
            t = int(over[0])
            return (f"a grid call at {name} cannot be delivered: in slot {t} the least load the site can draw "
                    f"({base[t] + least[t]:.6g} MW: inference, idle GPUs, every job at its lightest) exceeds its "
                    f"renewable output plus the call's limit ({limit[t]:.6g} MW)")
    return ""
