"""The answer of an oracle solve (:class:`OracleResult`), shared by the day oracle (:mod:`oracle.model`) and the
fleet oracle (:mod:`oracle.fleet`), with the tolerances of its checks and how a gap is measured."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aidc_env.instance import PAUSE, Instance
from aidc_env.simulator import Metrics
from oracle.constants import DEFAULT_SOLVER

OBJECTIVE_RTOL = 1e-6
"""The solver's objective and the simulator's replay of its schedule must agree to this relative tolerance."""
OBJECTIVE_ATOL_USD = 1e-6
"""Absolute floor of that check ($), for days whose cost is near zero."""
MIP_ABS_GAP_USD = 1e-6
"""Absolute gap ($) that also proves optimality (HiGHS's default ``mip_abs_gap``), for near-zero costs."""

@dataclass
class OracleResult:
    """The answer of one oracle solve. Costs in $, times in seconds."""

    status: str
    """``optimal`` (gap ≤ mip_gap), ``infeasible`` (see ``reason``), ``time_limit`` (best schedule found, if
    any) or ``error``."""
    schedule: list[list[int]] | None
    """Per job, per checkpoint segment: a mode index, or -1 (PAUSE)."""
    objective_usd: float | None
    """Operating cost of ``schedule`` as the solver reports it (the constant PPA term included)."""
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
    solver on the fast model), ``textbook`` (the textbook MILP raced as the guard, :mod:`oracle.race`),
    ``column-generation`` or ``enumeration`` (the fleet oracle), or empty when not optimal."""
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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; ``schedule`` is {job name: [choice per segment]}."""
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
            "formulation": self.formulation,
            "solver": self.solver,
            "start_objective_usd": self.start_objective_usd,
            "proof": self.proof,
            "metrics": self.metrics.to_dict() if self.metrics is not None else None,
            "schedule": self.schedule_by_job(),
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
