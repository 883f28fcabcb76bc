"""The oracle: build the MILP of a day once, solve it, re-solve it for other days, prices or tranches.

:func:`solve` is the one-call entry point; :class:`OracleModel` keeps the built model for sweeps::

    oracle = OracleModel(build_instance("2048"))          # build once (joint states, costs, Pyomo model)
    first = oracle.solve(time_limit_s=60)                  # -> OracleResult
    oracle.update(build_instance("2048", renewable_ratio=1.5))   # same structure: re-price in place
    second = oracle.solve()                                 # HiGHS gets only the new objective

Every result is checked against the simulator: the objective the solver reports must equal
``simulate(schedule).metrics.operating_cost_usd`` to :data:`OBJECTIVE_RTOL` (else AssertionError: a bug).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from aidc_env.case import PAUSE, Case, Instance, build_instance
from aidc_env.errors import InputError, require
from aidc_env.profiles import ProfileSet
from aidc_env.simulator import Metrics, simulate
from oracle.data import MAX_JOINT_STATES, OracleData, oracle_data
from oracle.feasibility import FeasibilityCheck, precheck
from oracle.formulations import FORMULATIONS, Built, build
from oracle.solvers import DEFAULT_SOLVER, HighsRunner, PyomoRunner, RunOutcome, make_runner

DEFAULT_TIME_LIMIT_S = 600.0
DEFAULT_MIP_GAP = 1e-4
OBJECTIVE_RTOL = 1e-6
"""The solver's objective and the simulator's replay of its schedule must agree to this relative tolerance."""
OBJECTIVE_ATOL_USD = 1e-6
"""Absolute floor of that check ($), for days whose cost is near zero."""
STATUSES = ("optimal", "infeasible", "time_limit", "error")


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
            "metrics": self.metrics.to_dict() if self.metrics is not None else None,
            "schedule": self.schedule_by_job(),
            "modes_used": self.modes_used,
        }


def _structure_key(inst: Instance) -> tuple:
    """What the built model depends on beyond its objective and tranche right-hand sides."""
    jobs = tuple((job.segments, job.restart_hours, job.initial_mode,
                  tuple((m.gpus, m.tokens_per_s) for m in job.modes)) for job in inst.jobs)
    return inst.n_gpus, inst.slots, inst.slot_hours, jobs


def _gap(objective: float | None, bound: float | None) -> float | None:
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


def start_candidates(inst: Instance) -> list[list[list[int]]]:
    """Schedules tried as a MIP start: fixed continuous, the greedy rule, holding the initial modes."""
    from agents.baselines import fixed_schedule, greedy_schedule

    candidates = [[[job.initial_mode] * job.segments for job in inst.jobs]]
    if all(job.baseline_mode != PAUSE for job in inst.jobs):
        candidates.append(fixed_schedule(inst))
        try:
            candidates.append(greedy_schedule(inst))
        except ValueError:  # the rule has no mode within a job's share of a small pool
            pass
    return candidates


def best_start(inst: Instance, allow_pause: bool = True) -> tuple[list[list[int]], float] | None:
    """The cheapest feasible schedule among :func:`start_candidates` (None if none is feasible)."""
    best = None
    for schedule in start_candidates(inst):
        if not allow_pause and any(c == PAUSE for row in schedule for c in row):
            continue
        metrics = simulate(inst, schedule).metrics
        if metrics.capacity_ok and metrics.tranches_met and (best is None or metrics.operating_cost_usd < best[1]):
            best = (schedule, metrics.operating_cost_usd)
    return best


class OracleModel:
    """A day's MILP, built once and solvable many times.

    ``update(instance)`` takes an instance of the same structure (GPU pool, slots, jobs' modes, K,
    restart times and initial modes) with any prices, renewable profile or ratio, PPA price,
    curtailment penalty or tranches: the objective is re-priced and the tranche right-hand sides reset
    in place, and the persistent HiGHS model receives only those changes. Any other instance is
    rebuilt from scratch (transparently).
    """

    def __init__(self, inst: Instance, *, formulation: str = "fast", solver: str = DEFAULT_SOLVER,
                 allow_pause: bool = True) -> None:
        require(formulation in FORMULATIONS, "formulation", f"must be one of {', '.join(FORMULATIONS)}")
        self.formulation = formulation
        self.allow_pause = allow_pause
        self._runner: HighsRunner | PyomoRunner = make_runner(solver)
        self.solver = solver
        self._build(inst)

    # ------------------------------------------------------------------ building

    def _build(self, inst: Instance) -> None:
        tick = time.perf_counter()
        self.inst = inst
        self.data: OracleData = oracle_data(inst, joint=self.formulation == "fast")
        if self.formulation == "fast" and self.data.joint_states is None:
            raise InputError("formulation", f"{self.data.joint_state_count_uncapped} joint states exceed the fast "
                                            f"formulation's limit of {MAX_JOINT_STATES}; use formulation='textbook'")
        self.built: Built = build(self.data, self.formulation, allow_pause=self.allow_pause)
        self._check: FeasibilityCheck | None = None
        self._pending_build_seconds = time.perf_counter() - tick

    def update(self, inst: Instance) -> None:
        """Point the model at another instance (in place if the structure is the same, else rebuilt)."""
        if _structure_key(inst) != _structure_key(self.inst) or self.built.update_costs is None:
            spent = self._pending_build_seconds
            self._build(inst)
            self._pending_build_seconds += spent
            return
        tick = time.perf_counter()
        self.inst = inst
        self.data = oracle_data(inst, joint=True)
        self.built.update_costs(self.data)
        self.built.set_tranches(inst)
        self._check = None
        self._pending_build_seconds += time.perf_counter() - tick

    @property
    def model(self):
        """The Pyomo model (``pyomo.environ.ConcreteModel``)."""
        return self.built.model

    def write(self, path: str | Path, format: str = "mps") -> Path:
        """Write the model (default MPS) for other solvers; returns the path."""
        path = Path(path)
        self.built.model.write(str(path), format=format, io_options={"symbolic_solver_labels": True})
        return path

    def precheck(self) -> FeasibilityCheck:
        if self._check is None:
            self._check = precheck(self.inst, allow_pause=self.allow_pause)
        return self._check

    # ------------------------------------------------------------------ solving

    def solve(self, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S, mip_gap: float = DEFAULT_MIP_GAP,
              warm_start: bool = True, threads: int | None = None, tee: bool = False,
              solver_options: Mapping[str, Any] | None = None) -> OracleResult:
        """Solve the current instance; see :class:`OracleResult`."""
        require(isinstance(time_limit_s, (int, float)) and time_limit_s > 0, "time_limit_s", "must be > 0")
        require(isinstance(mip_gap, (int, float)) and 0 <= mip_gap < 1, "mip_gap", "must be in [0, 1)")
        require(threads is None or (isinstance(threads, int) and threads > 0), "threads", "must be > 0")
        inst = self.inst
        build_seconds, self._pending_build_seconds = self._pending_build_seconds, 0.0
        base = {"formulation": self.formulation, "solver": self.solver, "case": inst.case_name, "day": inst.day,
                "job_names": tuple(job.name for job in inst.jobs)}
        check = self.precheck()
        if check.infeasible:
            return OracleResult(status="infeasible", schedule=None, objective_usd=None, best_bound_usd=None,
                                gap=None, build_seconds=build_seconds, solve_seconds=0.0, metrics=None,
                                reason=check.reason, **base)
        start = best_start(inst, self.allow_pause) if warm_start else None
        run: RunOutcome = self._runner.solve(
            self.built.model, time_limit_s=float(time_limit_s), mip_gap=float(mip_gap),
            start=self.built.start_values(start[0]) if start else None, threads=threads, tee=tee,
            options=dict(solver_options or {}))
        build_seconds += run.load_seconds
        schedule = metrics = None
        if run.has_solution:
            schedule = self.built.read_schedule()
            metrics = self._verify(schedule, run.objective)
        status = run.status
        if status == "infeasible":
            reason = check.solver_reason(inst)
        elif status == "time_limit":
            gap = _gap(run.objective, run.bound)
            found = "before any schedule was found" if not run.has_solution else (
                "before any lower bound was proved" if gap is None else f"with a gap of {gap:.2e}")
            reason = f"time limit of {time_limit_s:g} s reached {found}"
        elif status == "error":
            reason = run.message
        else:
            reason = ""
        return OracleResult(status=status, schedule=schedule, objective_usd=run.objective if run.has_solution else None,
                            best_bound_usd=run.bound, gap=_gap(run.objective, run.bound) if run.has_solution else None,
                            build_seconds=build_seconds, solve_seconds=run.solve_seconds, metrics=metrics,
                            reason=reason, modes_used=modes_used(inst, schedule) if schedule else {},
                            start_objective_usd=start[1] if start else None, **base)

    def _verify(self, schedule: list[list[int]], objective: float | None) -> Metrics:
        """The simulator's metrics of the schedule; AssertionError if the model disagrees (a bug)."""
        metrics = simulate(self.inst, schedule).metrics
        replay = metrics.operating_cost_usd
        tolerance = OBJECTIVE_RTOL * max(abs(replay), 1.0) + OBJECTIVE_ATOL_USD
        own = self.built.objective_of(schedule)
        if abs(own - replay) > tolerance:
            raise AssertionError(f"model coefficients give ${own!r} for the schedule, the simulator ${replay!r}")
        if objective is not None and abs(objective - replay) > tolerance:
            raise AssertionError(f"solver objective ${objective!r} != simulator replay ${replay!r}")
        if not (metrics.capacity_ok and metrics.tranches_met):
            raise AssertionError(f"the solver's schedule breaks the model (capacity ok: {metrics.capacity_ok}, "
                                 f"tranches met: {metrics.tranches_met})")
        return metrics


def solve(
    case_or_instance: Instance | Case | str | Path,
    day: str | None = None,
    *,
    profiles: ProfileSet | str | Path | None = None,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    mip_gap: float = DEFAULT_MIP_GAP,
    solver: str = DEFAULT_SOLVER,
    warm_start: bool = True,
    formulation: str = "fast",
    allow_pause: bool = True,
    threads: int | None = None,
    tee: bool = False,
    **overrides: Any,
) -> OracleResult:
    """Solve one day exactly.

    ``case_or_instance``: an :class:`~aidc_env.case.Instance` (used as is), or a case (name, TOML path
    or :class:`~aidc_env.case.Case`) resolved with ``day``, ``profiles`` and ``overrides`` (``gpus``,
    ``segments``, ``renewable_ratio``, any case field) through :func:`~aidc_env.case.build_instance`.
    ``allow_pause=False`` forbids pausing (every job runs some mode in every segment).
    """
    if isinstance(case_or_instance, Instance):
        given = {k for k, v in overrides.items() if v is not None}
        require(day is None and profiles is None and not given, "overrides",
                "day, profiles and overrides apply to a case, not to an Instance")
        inst = case_or_instance
    else:
        inst = build_instance(case_or_instance, day=day, profiles=profiles, **overrides)
    model = OracleModel(inst, formulation=formulation, solver=solver, allow_pause=allow_pause)
    return model.solve(time_limit_s=time_limit_s, mip_gap=mip_gap, warm_start=warm_start, threads=threads, tee=tee)


__all__ = [
    "DEFAULT_MIP_GAP",
    "DEFAULT_TIME_LIMIT_S",
    "OracleModel",
    "OracleResult",
    "STATUSES",
    "best_start",
    "modes_used",
    "solve",
]
