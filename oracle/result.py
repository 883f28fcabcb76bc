"""The answer of an oracle solve (:class:`OracleResult`), shared by every method (the exact day oracle of
:mod:`oracle.model`, the decomposition of :mod:`oracle.decomposition`), with the tolerances of its checks, how a gap is
measured, and :func:`answer`, which replays a schedule in the simulator and builds the result around it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aidc_env.instance import PAUSE, Instance
from aidc_env.schedule import validate_schedule
from aidc_env.simulator import Metrics, simulate
from oracle.constants import DEFAULT_SOLVER

OBJECTIVE_RTOL = 1e-6
"""The solver's objective and the simulator's replay of its schedule must agree to this relative tolerance."""
OBJECTIVE_ATOL_USD = 1e-6
"""Absolute floor of that check ($), for days whose cost is near zero."""
MIP_ABS_GAP_USD = 1e-6
"""Absolute gap ($) that also proves optimality (HiGHS's default ``mip_abs_gap``), for near-zero costs."""
Start = tuple[Sequence[Sequence[int]], Sequence[Sequence[int]] | None]
"""A (schedule, sites) pair to start a solve from (sites None: every job at its home site)."""

@dataclass
class OracleResult:
    """The answer of one oracle solve. Costs in $, times in seconds.

    ``status``: ``optimal`` (gap ≤ mip_gap), ``infeasible``, ``time_limit`` (the best schedule found, if any) or
    ``error``, and ``reason`` when not optimal. ``schedule``: per job and checkpoint segment a mode index or -1
    (PAUSE); ``sites``: per job and segment the site holding its checkpoint (an index into ``site_names``; None with
    one site). ``objective_usd``: its operating cost (the constant PPA terms included) less the idle-GPU value, checked
    equal to the simulator's replay (``metrics``); ``gap`` = (objective − bound) / |objective|. ``build_seconds``:
    building or updating the model and handing it to the solver; ``solve_seconds``: the MIP start and the solve.
    ``formulation``: ``fast``, ``textbook`` or ``decomposition``; ``method``: the
    :func:`oracle.solve` method that answered. ``modes_used``: per job the labels of the modes its schedule runs.
    ``start_objective_usd``: the MIP start's objective (None: no start).
    """

    status: str
    schedule: list[list[int]] | None
    objective_usd: float | None
    best_bound_usd: float | None
    gap: float | None
    build_seconds: float
    solve_seconds: float
    metrics: Metrics | None
    reason: str = ""
    formulation: str = "fast"
    method: str = "exact"
    sites: list[list[int]] | None = None
    site_names: tuple[str, ...] = ()
    caps: list[list[int]] | None = None
    """Per job and slot a power-cap level of the instance's cap curve (None: no cap anywhere)."""
    solver: str = DEFAULT_SOLVER
    case: str = ""
    day: str = ""
    job_names: tuple[str, ...] = ()
    modes_used: dict[str, list[str]] = field(default_factory=dict)
    start_objective_usd: float | None = None
    proof: str = ""
    """How optimality was proved (empty when not optimal): ``label-setting`` (:mod:`oracle.labeling`),
    ``branch-and-bound``, ``textbook`` (the raced textbook MILP, :mod:`oracle.race`), or the decomposition's
    ``column-generation``, ``pattern-column-generation``, ``enumeration``, ``branch-and-price`` or
    ``pattern-branch-and-price``."""
    details: dict[str, float] = field(default_factory=dict)
    """Where the time went and how big the search grew (for benchmarks; not in ``to_dict``): seconds of ``dual``,
    ``lp``, ``tables``, ``labels``, ``pyomo``, ``bnb`` (branch and bound) and ``textbook`` (the raced child's);
    ``dual_cuts``, ``searches``, ``max_labels``, ``beam_usd`` (the beam search's schedule), ``race_start``; the
    decomposition's counters."""

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"

    def schedule_by_job(self) -> dict[str, list[int]] | None:
        return None if self.schedule is None else dict(zip(self.job_names, map(list, self.schedule), strict=True))

    def sites_by_job(self) -> dict[str, list[str]] | None:
        return None if self.sites is None else {
            name: [self.site_names[s] for s in row] for name, row in zip(self.job_names, self.sites, strict=True)}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; ``schedule`` is {job name: [choice per segment]}, ``sites`` {job name: [site name per segment]}
        or None (one site): the schedule file format of :mod:`aidc_env.schedule`."""
        out = {name: getattr(self, name) for name in (
            "status", "objective_usd", "best_bound_usd", "gap", "build_seconds", "solve_seconds", "reason", "case",
            "day", "method", "formulation", "solver", "start_objective_usd", "proof")}
        caps = None if self.caps is None else dict(zip(self.job_names, self.caps, strict=True))
        return {**out, "metrics": self.metrics.to_dict() if self.metrics is not None else None,
                "schedule": self.schedule_by_job(), "sites": self.sites_by_job(), "modes_used": self.modes_used,
                **({} if caps is None else {"caps": caps})}


def closed(objective: float | None, bound: float | None, mip_gap: float) -> bool:
    """Whether a bound proves an objective optimal: within the relative gap, or the absolute one."""
    if objective is None or bound is None or not math.isfinite(bound):
        return False
    return objective - bound <= max(mip_gap * abs(objective), MIP_ABS_GAP_USD)


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    if objective is None or bound is None or not math.isfinite(bound):
        return None
    if objective == bound:
        return 0.0
    return max(0.0, objective - bound) / abs(objective) if objective != 0 else math.inf


def modes_used(inst: Instance, schedule: Sequence[Sequence[int]]) -> dict[str, list[str]]:
    out = {}
    for job, row in zip(inst.jobs, schedule, strict=True):
        seen = dict.fromkeys(c for c in row if c != PAUSE)
        out[job.name] = [job.modes[c].label for c in seen]
    return out


def require_at_least(model_usd: float, replay_usd: float, who: str) -> None:
    """AssertionError (a bug) if a model values a schedule below its replay: a model may over-count a schedule found
    before its proof (slack in its continuous variables), never under-count it."""
    if model_usd < replay_usd - (OBJECTIVE_RTOL * max(abs(replay_usd), 1.0) + OBJECTIVE_ATOL_USD):
        raise AssertionError(f"{who} objective ${model_usd!r} < simulator replay ${replay_usd!r}")


def replay(inst: Instance, schedule: Sequence[Sequence[int]], sites: Sequence[Sequence[int]] | None,
           objectives: Sequence[float | None], who: str, caps: Sequence[Sequence[int]] | None = None) -> Metrics:
    """The simulator's metrics of a schedule (and its caps); AssertionError if one of ``objectives`` (the model's own,
    the solver's) disagrees with its objective or the schedule breaks the model (a bug: a target or tier missed, a call
    not delivered)."""
    metrics = simulate(inst, validate_schedule(inst, schedule, sites, caps)).metrics
    tolerance = OBJECTIVE_RTOL * max(abs(metrics.objective_usd), 1.0) + OBJECTIVE_ATOL_USD
    for value in objectives:
        if value is not None and abs(value - metrics.objective_usd) > tolerance:
            raise AssertionError(f"{who} objective ${value!r} != simulator replay ${metrics.objective_usd!r}")
    if not metrics.feasible or not metrics.calls_delivered:
        raise AssertionError(f"the {who}'s schedule is infeasible in the simulator (capacity ok: "
                             f"{metrics.capacity_ok}, tranches met: {metrics.tranches_met}, tiers met: "
                             f"{metrics.tiers_met}, calls delivered: {metrics.calls_delivered})")
    return metrics


def answer(inst: Instance, schedule: Sequence[Sequence[int]] | None, sites: Sequence[Sequence[int]] | None,
           bound: float | None, mip_gap: float, *, objective_usd: float | None = None, check_usd: float | None = None,
           status: str = "", reason: str = "", time_limit_s: float | None = None, proof: str = "",
           **fields: Any) -> OracleResult:
    """The result of a schedule (None: none found, ``status`` says why) with its proven ``bound``: replayed by the
    simulator (its objective is the result's, checked against the model's ``objective_usd`` and the solver's
    ``check_usd``), optimal when the bound closes the gap; else ``status`` (default ``time_limit``) with ``reason``
    (default: the time limit and the gap). ``fields``: the other fields of :class:`OracleResult`."""
    several = len(inst.sites) > 1
    names = tuple(site.name for site in inst.sites) if several else ()
    common = dict(case=inst.case_name, day=inst.day, job_names=tuple(job.name for job in inst.jobs), site_names=names)
    bound = float(bound) if bound is not None and math.isfinite(bound) else None
    if schedule is None:
        return OracleResult(status=status or "time_limit", schedule=None, objective_usd=None, best_bound_usd=bound,
                            gap=None, metrics=None, reason=reason, **common, **fields)
    schedule = [[int(c) for c in row] for row in schedule]
    metrics = replay(inst, schedule, sites, (objective_usd, check_usd), fields.get("formulation", "oracle"))
    objective = metrics.objective_usd
    bound = None if bound is None else min(bound, objective)
    gap = relative_gap(objective, bound)
    optimal = closed(objective, bound, mip_gap)
    if not optimal and not reason:
        reason = "no lower bound was proved" if gap is None else (
            f"time limit of {time_limit_s:g} s reached with a gap of {gap:.2e}" if time_limit_s is not None
            else f"a gap of {gap:.2e} left open")
    return OracleResult(status="optimal" if optimal else (status or "time_limit"), schedule=schedule,
                        objective_usd=objective, best_bound_usd=bound, gap=gap, metrics=metrics,
                        reason="" if optimal else reason, modes_used=modes_used(inst, schedule),
                        sites=[[int(s) for s in row] for row in sites] if several and sites is not None else None,
                        proof=proof if optimal else "", **common, **fields)
