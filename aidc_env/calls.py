"""Grid calls on instances: the programs' presets, the baseline rule, and calls stated in a case.

A call is stated by a :class:`CallSpec` (a case's ``[[grid_calls]]`` table, or a generated event of
:mod:`aidc_env.call_streams`): its program, day of the horizon, local start hour, hours, notice and the reduction asked
for (a share of the baseline, or a limit on the meter in MW); a program's preset fills in what the spec leaves out.
:func:`with_calls` resolves specs on an instance into :class:`~aidc_env.grid.GridCall` s.

**The baseline** (stated in every call's ``baseline_rule``): the grid import the site would draw in each slot of the
call if every job ran its baseline mode uncapped all day (:func:`aidc_env.baselines.fixed_schedule`, the schedule the
data center runs without flexibility), computed by the simulator. It is known before the day, as a program's customer
baseline is, and it does not depend on the schedule being scored: a schedule cannot inflate its own baseline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aidc_env.errors import require
from aidc_env.grid import GridCall
from aidc_env.instance import Instance
from aidc_env.schema.case import CallSpec

BASELINE_RULE = "grid import of the baseline schedule (every job in its baseline mode, uncapped)"


@dataclass(frozen=True)
class Program:
    """A grid program's terms: payment per MWh reduced below the baseline and per MW committed per call, penalty per MWh
    above the limit, notice, the default reduction, and their source."""

    name: str
    payment_usd_per_mwh: float
    payment_usd_per_mw: float
    penalty_usd_per_mwh: float
    notice_hours: float
    reduction_share: float | None
    """The default reduction asked for, as a share of the baseline (None: a call must state its own)."""
    source: str


PROGRAMS = {program.name: program for program in (
    Program("elrp", payment_usd_per_mwh=2000.0, payment_usd_per_mw=0.0, penalty_usd_per_mwh=0.0, notice_hours=24.0,
            reduction_share=None,
            source="CAISO Emergency Load Reduction Program (CPUC D.21-03-056): $2/kWh of incremental reduction, "
            "4-9 pm May-October, events of 1-5 hours, at most 60 hours a year, no penalty; called a day ahead"),
    Program("bip", payment_usd_per_mwh=0.0, payment_usd_per_mw=0.0, penalty_usd_per_mwh=6000.0, notice_hours=0.5,
            reduction_share=None,
            source="PG&E Schedule E-BIP, 30-minute option: load held at the firm service level on 30 minutes' "
            "notice; $6/kWh excess energy charge above it (the monthly capacity incentive is outside a day)"),
    Program("ers-10", payment_usd_per_mwh=0.0, payment_usd_per_mw=0.0, penalty_usd_per_mwh=0.0, notice_hours=10 / 60,
            reduction_share=None,
            source="ERCOT Emergency Response Service, 10-minute ramp (paid for availability, outside a day)"),
    Program("phoenix", payment_usd_per_mwh=0.0, payment_usd_per_mw=0.0, penalty_usd_per_mwh=0.0, notice_hours=2.0,
            reduction_share=0.25,
            source="the Phoenix field demonstration (arXiv 2507.00909): a 25% cut of the cluster's power for 3 hours "
            "in a peak event (aidc_env/data/README.md)"),
    Program("flexible-interconnection", payment_usd_per_mwh=0.0, payment_usd_per_mw=0.0, penalty_usd_per_mwh=0.0,
            notice_hours=1.0, reduction_share=None,
            source="a flexible interconnection: the connection caps the meter in the hours the grid operator "
            "curtails (Norris et al., Rethinking Load Growth, Duke Nicholas Institute, 2025)"),
)}
"""The presets (``program = "<name>"`` in a case's ``[[grid_calls]]``)."""


def program(name: str) -> Program:
    require(name in PROGRAMS, "grid_calls.program", f"unknown program {name!r}; presets: {', '.join(PROGRAMS)}")
    return PROGRAMS[name]


def baseline_import_mw(inst: Instance) -> np.ndarray:
    """(sites, T): each site's grid import under the baseline schedule (see the module docstring)."""
    from aidc_env.baselines import fixed_schedule
    from aidc_env.simulator import simulate

    plain = dataclasses.replace(inst, grid_calls=(), training_value_usd_per_gpu_hour=0.0)
    return np.array([f.grid_mw for f in simulate(plain, fixed_schedule(plain)).site_flows])


def resolve_call(inst: Instance, spec: CallSpec, baseline: np.ndarray) -> GridCall:
    """A spec on an instance's time axis (``baseline``: :func:`baseline_import_mw`)."""
    preset = program(spec.program)
    names = [site.name for site in inst.sites]
    require(spec.site is None or spec.site in names, "grid_calls.site", f"unknown site {spec.site!r}; the sites: "
            f"{', '.join(names)}")
    site = names.index(spec.site) if spec.site is not None else 0
    require(spec.day_offset < inst.horizon_days, "grid_calls.day_offset",
            f"must be a day of the horizon (< {inst.horizon_days}), got {spec.day_offset}")
    per_hour = 1.0 / inst.slot_hours
    start = spec.day_offset * inst.slots_per_day + round(spec.start_hour * per_hour)
    end = min(start + max(round(spec.hours * per_hour), 1), inst.slots)
    notice = preset.notice_hours if spec.notice_hours is None else spec.notice_hours
    share = preset.reduction_share if spec.reduction_share is None else spec.reduction_share
    base = baseline[site, start:end]
    require(share is not None or spec.limit_mw is not None, "grid_calls.reduction_share",
            f"program {spec.program!r} has no default reduction: give reduction_share or limit_mw")
    limit = np.full(end - start, spec.limit_mw) if spec.limit_mw is not None else (1.0 - share) * base
    return GridCall(program=spec.program, notice_slot=max(start - round(notice * per_hour), 0), start_slot=start,
                    end_slot=end, baseline_mw=base, limit_mw=limit,
                    payment_usd_per_mwh=_or(spec.payment_usd_per_mwh, preset.payment_usd_per_mwh),
                    payment_usd_per_mw=_or(spec.payment_usd_per_mw, preset.payment_usd_per_mw),
                    penalty_usd_per_mwh=_or(spec.penalty_usd_per_mwh, preset.penalty_usd_per_mwh), site=site,
                    baseline_rule=BASELINE_RULE)


def _or(value: float | None, default: float) -> float:
    return default if value is None else float(value)


def with_calls(inst: Instance, specs: Sequence[CallSpec]) -> Instance:
    """The instance with the calls of ``specs`` (added to any it has), resolved against its baseline."""
    if not specs:
        return inst
    baseline = baseline_import_mw(inst)
    calls = tuple(resolve_call(inst, spec, baseline) for spec in specs)
    return dataclasses.replace(inst, grid_calls=inst.grid_calls + calls)


def noticed(inst: Instance, t: int) -> Instance:
    """The instance with the calls noticed by the start of slot ``t`` (``notice_slot <= t``)."""
    known = tuple(call for call in inst.grid_calls if call.notice_slot <= t)
    return inst if len(known) == len(inst.grid_calls) else dataclasses.replace(inst, grid_calls=known)
