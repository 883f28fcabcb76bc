"""The answer of an oracle solve (:class:`OracleResult`), shared by every method (the exact day oracle of
:mod:`oracle.model`, the decomposition of :mod:`oracle.decomposition`, the sites MILP of :mod:`oracle.sites`), with
the tolerances of its checks, how a gap is measured, and :func:`answer`, which replays a schedule in the simulator
and builds the result around it."""

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
    """The answer of one oracle solve. Costs in $, times in seconds."""

    status: str
    """``optimal`` (gap ≤ mip_gap), ``infeasible`` (see ``reason``), ``time_limit`` (best schedule found, if
    any) or ``error``."""
    schedule: list[list[int]] | None
    """Per job, per checkpoint segment: a mode index, or -1 (PAUSE)."""
    objective_usd: float | None
    """The objective of ``schedule``: its operating cost (the constant PPA terms included) less the idle-GPU value,
    as the solver reports it (the exact method) or as the simulator replays it (the others; the two are checked
    equal)."""
    best_bound_usd: float | None
    gap: float | None
    """(objective − bound) / |objective|."""
    build_seconds: float
    """Building the model (or updating it) and handing it to the solver, for this solve."""
    solve_seconds: float
    """Finding the MIP start and solving (for ``fast``: LP relaxation, bounds and restricted solves)."""
    metrics: Metrics | None
    """The simulator's metrics of ``schedule``."""
    reason: str = ""
    """Why there is no proven optimum (infeasible, time limit, error); empty when optimal."""
    formulation: str = "fast"
    """The model solved: ``fast`` or ``textbook`` (the day's, :mod:`oracle.formulations`), ``sites-textbook`` (the
    sites MILP, :mod:`oracle.sites`) or ``decomposition`` (:mod:`oracle.decomposition`)."""
    method: str = "exact"
    """The method of :func:`oracle.solve` that answered: ``exact``, ``decomposition`` or ``textbook``."""
    sites: list[list[int]] | None = None
    """Per job, per checkpoint segment: the site holding its checkpoint (an index into ``site_names``); None for an
    instance of one site (every job at home)."""
    site_names: tuple[str, ...] = ()
    """The sites' names (several sites only)."""
    solver: str = DEFAULT_SOLVER
    case: str = ""
    day: str = ""
    job_names: tuple[str, ...] = ()
    modes_used: dict[str, list[str]] = field(default_factory=dict)
    """Per job, the labels of the modes the schedule runs (in order of first use)."""
    start_objective_usd: float | None = None
    """Operating cost of the MIP start handed to the solver (None: no start)."""
    proof: str = ""
    """How optimality was proved: ``label-setting`` (:mod:`oracle.labeling`), ``branch-and-bound`` (the
    solver on the fast or a textbook model), ``textbook`` (the textbook MILP raced as the guard, :mod:`oracle.race`),
    or the decomposition's (:mod:`oracle.decomposition`): ``column-generation``, ``pattern-column-generation``,
    ``enumeration``, ``branch-and-price``, ``pattern-branch-and-price`` or ``reduced-cost-fixing``; empty when not
    optimal."""
    details: dict[str, float] = field(default_factory=dict)
    """Where the time went and how big the search grew (for benchmarks; not part of ``to_dict``): seconds of
    ``dual`` (Lagrangian prices), ``lp`` (LP relaxation), ``tables`` (network and completion tables),
    ``labels`` (label searches), ``pyomo`` (building the Pyomo model, when it was needed), ``bnb`` (branch
    and bound, the model's hand-over included); ``dual_cuts``; ``searches`` and ``max_labels`` of the label
    search; ``beam_usd``, the beam search's schedule when the label search gave up; ``race_start`` (seconds
    into the solve at which the textbook race started) and ``textbook`` (its child's solve seconds, when it
    ended, whichever path won)."""

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"

    def schedule_by_job(self) -> dict[str, list[int]] | None:
        if self.schedule is None:
            return None
        return {name: list(row) for name, row in zip(self.job_names, self.schedule, strict=True)}

    def sites_by_job(self) -> dict[str, list[str]] | None:
        if self.sites is None:
            return None
        return {name: [self.site_names[s] for s in row] for name, row in zip(self.job_names, self.sites, strict=True)}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; ``schedule`` is {job name: [choice per segment]}, ``sites`` {job name: [site name per segment]}
        or None (one site): the schedule file format of :mod:`aidc_env.schedule`."""
        return {
            "status": self.status,
            "objective_usd": self.objective_usd,
            "best_bound_usd": self.best_bound_usd,
            "gap": self.gap,
            "build_seconds": self.build_seconds,
            "solve_seconds": self.solve_seconds,
            "reason": self.reason,
            "case": self.case,
            "day": self.day,
            "method": self.method,
            "formulation": self.formulation,
            "solver": self.solver,
            "start_objective_usd": self.start_objective_usd,
            "proof": self.proof,
            "metrics": self.metrics.to_dict() if self.metrics is not None else None,
            "schedule": self.schedule_by_job(),
            "sites": self.sites_by_job(),
            "modes_used": self.modes_used,
        }


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


def replay(inst: Instance, schedule: Sequence[Sequence[int]], sites: Sequence[Sequence[int]] | None,
           objectives: Sequence[float | None], who: str) -> Metrics:
    """The simulator's metrics of a schedule; AssertionError if one of ``objectives`` (the model's own, the
    solver's) disagrees with its objective or the schedule breaks the model (a bug)."""
    metrics = simulate(inst, validate_schedule(inst, schedule, sites)).metrics
    tolerance = OBJECTIVE_RTOL * max(abs(metrics.objective_usd), 1.0) + OBJECTIVE_ATOL_USD
    for value in objectives:
        if value is not None and abs(value - metrics.objective_usd) > tolerance:
            raise AssertionError(f"{who} objective ${value!r} != simulator replay ${metrics.objective_usd!r}")
    if not metrics.feasible:
        raise AssertionError(f"the {who}'s schedule is infeasible in the simulator (capacity ok: "
                             f"{metrics.capacity_ok}, tranches met: {metrics.tranches_met})")
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
