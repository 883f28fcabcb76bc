"""Policies for grid calls (docs/grid-calls.md): each learns of a call only at its notice (prices are the truth), and
each returns a schedule with its caps, scored afterwards by the simulator.

- ``mpc-notice``: the oracle's plan (without a coincident-peak charge: the system's peak is known only after the
  month) on the calls known at slot 0, re-solved at each later notice with everything before
  it fixed (the segments already started, the caps already applied): the textbook MILP of :mod:`oracle.grid_rows` with
  the past fixed (:attr:`oracle.formulations.Built.fix_before`). A call that the fixed past makes impossible to deliver
  is declined (the plan continues; the simulator reports it undelivered).
- ``call-rule``: the demonstration's rule, caps first, then pauses, most tolerant tier first: at each call, every
  slot's excess over the limit is cut by lowering the caps of the running jobs (no tier first: its target is over the
  horizon; then Flex 3, 2, 1), each no deeper than its tier allows; what is still over is cut by pausing, at
  checkpoints that start after the notice, whole segments of the most tolerant jobs whose tier allows it. Modes are
  the baseline's otherwise, until a job short of its target after the last call makes it up in its fastest mode that
  fits.
- ``fixed`` (no response) and ``hindsight`` (the oracle knowing every call) are the general policies of
  :mod:`agents.policies`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from aidc_env.baselines import fixed_schedule
from aidc_env.calls import noticed
from aidc_env.instance import PAUSE, Instance
from aidc_env.schedule import Schedule, validate_schedule
from aidc_env.simulator import baseline_tokens, reaches, simulate, slot_tokens

CAP_SEARCH_STEPS = 40
"""Bisection steps of the rule's cap position that just meets a slot's limit."""


def notice_slots(inst: Instance) -> list[int]:
    """The slots at which something new is learnt: 0, and every later notice."""
    return sorted({0} | {call.notice_slot for call in inst.grid_calls})


def mpc_notice_schedule(inst: Instance, time_limit_s: float = 120.0, mip_gap: float = 1e-4,
                        log: list[dict] | None = None) -> Schedule:
    """``mpc-notice`` (see the module docstring); ``log`` receives one entry per solve."""
    from oracle import solve
    from oracle.model import OracleModel

    def record(slot: int, view: Instance, result) -> None:
        if log is not None:
            log.append({"slot": slot, "calls_known": len(view.grid_calls), "status": result.status,
                        "seconds": result.build_seconds + result.solve_seconds, "gap": result.gap})

    truth = inst
    if inst.coincident_peak is not None:  # the system's peak is known only after the month: planned without it
        inst = dataclasses.replace(inst, coincident_peak=None)
    if notice_slots(inst) == [0]:  # nothing is learnt after slot 0: the oracle's plan (any instance it solves)
        result = solve(inst, time_limit_s=time_limit_s, mip_gap=mip_gap)
        record(0, inst, result)
        if result.schedule is None:
            raise RuntimeError(f"the oracle found no schedule on {inst.day}: {result.reason}")
        return validate_schedule(truth, result.schedule, result.sites, result.caps)
    plan: tuple[list[list[int]], list[list[float]] | None] | None = None
    for slot in notice_slots(inst):
        view = noticed(inst, slot)
        model = OracleModel(view, formulation="textbook")
        if plan is not None:
            model.built.fix_before(plan[0], plan[1], slot)
        result = model.solve(time_limit_s=time_limit_s, mip_gap=mip_gap, warm_start=plan is None)
        record(slot, view, result)
        if result.schedule is not None:
            plan = (result.schedule, result.caps)
        elif plan is None:
            raise RuntimeError(f"the oracle found no schedule at slot 0 on {inst.day}: {result.reason}")
    assert plan is not None
    return validate_schedule(truth, plan[0], None, plan[1])


def _tier_floor(inst: Instance, j: int) -> float:
    """The least share of its baseline throughput job j must keep over a call (0 without a tier: its target is over the
    horizon)."""
    loss = inst.jobs[j].max_throughput_loss
    return 0.0 if loss is None else 1.0 - loss


def _order(inst: Instance) -> list[int]:
    """Jobs, most tolerant first (no tier: the most), larger first among equals."""
    return sorted(range(len(inst.jobs)), key=lambda j: (_tier_floor(inst, j), -inst.jobs[j].baseline_rate[0]))


def rule_schedule(inst: Instance) -> Schedule:
    """``call-rule`` (see the module docstring)."""
    modes = [np.array(row, dtype=np.int64) for row in fixed_schedule(inst)]
    curve = inst.cap_curve
    caps = np.zeros((len(inst.jobs), inst.slots))
    for call in sorted(inst.grid_calls, key=lambda c: c.start_slot):
        for _ in range(len(inst.jobs) + 1):  # caps, then one more pause at a time while a slot is over
            _cap_call(inst, modes, caps, call)
            over = _excess(inst, modes, caps, call)
            if not np.any(over > 0) or not _pause_one(inst, modes, caps, call):
                break
    _catch_up(inst, modes, caps)
    rows = None if curve is None else caps.tolist()
    return validate_schedule(inst, [row.tolist() for row in modes], None, rows)


def _catch_up(inst: Instance, modes, caps: np.ndarray) -> None:
    """After the last call, a job short of its target runs its fastest mode that fits beside the others, segment by
    segment, until the target is met (the rule's make-up of the tokens the calls cost)."""
    end = max((call.end_slot for call in inst.grid_calls), default=0)
    rows = None if inst.cap_curve is None else caps
    for j, job in enumerate(inst.jobs):
        per = inst.slots_per_segment(job)
        for s in range(-(-end // per), job.segments):
            made = slot_tokens(inst, j, modes[j], np.zeros(job.segments, dtype=np.int64),
                               None if rows is None else rows[j])
            if reaches(float(np.sum(made)), job.tranche_tokens):
                break
            slots = slice(s * per, (s + 1) * per)
            others = max(int(np.max(sum(inst.jobs[i].gpus_by_choice[np.repeat(modes[i], inst.slots_per_segment(
                inst.jobs[i]))][slots] for i in range(len(inst.jobs)) if i != j), initial=0)), 0)
            room = inst.n_gpus - int(np.max(inst.inference_gpus[slots], initial=0)) - others
            fitting = [c for c in range(job.n_modes) if job.modes[c].gpus <= room]
            if fitting:
                modes[j][s] = max(fitting, key=lambda c: job.modes[c].tokens_per_s)


def _excess(inst: Instance, modes, caps: np.ndarray, call) -> np.ndarray:
    """Per slot of the call, the import over its limit (MW) of the schedule so far."""
    rows = None if inst.cap_curve is None else caps.tolist()
    flows = simulate(inst, validate_schedule(inst, [m.tolist() for m in modes], None, rows)).site_flows[call.site]
    return flows.grid_mw[call.slots] - call.limit_mw


def _cap_call(inst: Instance, modes, caps: np.ndarray, call) -> None:
    """Lower caps slot by slot, most tolerant job first, until each slot meets its limit (or every job is as deep as its
    tier allows); caps above what a slot needs are raised back."""
    curve = inst.cap_curve
    if curve is None:
        return
    order = _order(inst)
    deepest = [float(np.interp(-_tier_floor(inst, j), -curve.throughput, np.arange(curve.levels))) for j in order]
    caps[:, call.slots] = 0.0
    excess = _excess(inst, modes, caps, call)
    for k, t in enumerate(range(call.start_slot, call.end_slot)):
        for j, limit in zip(order, deepest, strict=True):
            if excess[k] <= 0:
                break
            if modes[j][t // inst.slots_per_segment(inst.jobs[j])] == PAUSE or limit <= 0:
                continue
            excess[k] = _cap_slot(inst, modes, caps, call, j, t, limit)


def _cap_slot(inst: Instance, modes, caps: np.ndarray, call, j: int, t: int, deepest: float) -> float:
    """Job j's cap in slot t: the shallowest position (≤ ``deepest``) that meets the slot's limit; the excess left."""
    k = t - call.start_slot

    def excess_at(position: float) -> float:
        caps[j, t] = position
        return float(_excess(inst, modes, caps, call)[k])

    if excess_at(deepest) > 0:
        return excess_at(deepest)
    low, high = 0.0, deepest
    for _ in range(CAP_SEARCH_STEPS):
        middle = (low + high) / 2
        if excess_at(middle) > 0:
            low = middle
        else:
            high = middle
    return excess_at(high)


def _pause_one(inst: Instance, modes, caps: np.ndarray, call) -> bool:
    """Pause one more segment over the call (most tolerant job first; a segment starting at or after the notice, within
    the call, that keeps the job's tier); False if none can."""
    for j in _order(inst):
        job = inst.jobs[j]
        per = inst.slots_per_segment(job)
        for s in range(call.start_slot // per, -(-call.end_slot // per)):
            if s * per < call.notice_slot or modes[j][s] == PAUSE or s * per < call.start_slot:
                continue
            trial = [m.copy() for m in modes]
            trial[j][s] = PAUSE
            made = slot_tokens(inst, j, trial[j], np.zeros(job.segments, dtype=np.int64),
                               caps[j] if inst.cap_curve is not None else None)
            if reaches(float(np.sum(made[call.slots])), _tier_floor(inst, j) * baseline_tokens(inst, job, call.slots)):
                modes[j][s] = PAUSE
                caps[j, s * per:(s + 1) * per] = 0.0
                return True
    return False
