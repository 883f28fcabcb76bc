"""Running a built model with a solver: HiGHS (persistent, with a MIP start) or any Pyomo solver.

The default, ``"highs"``, is Pyomo's persistent HiGHS interface of ``pyomo.contrib.solver`` (highspy, no external
binary). The model is loaded into HiGHS once; later solves send only what changed (a new objective, new tranche
right-hand sides). A MIP start is handed to HiGHS through highspy's ``setSolution`` (the interface has no warm-start
option of its own).

Any other name goes to Pyomo's ``SolverFactory`` (``cbc``, ``glpk``, ``gurobi``, ``cplex``, ``appsi_highs``, ...), with
the time limit and gap passed under each solver's own option names where known (:data:`TIME_LIMIT_OPTION`,
:data:`GAP_OPTION`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyomo.environ as pyo
from pyomo.contrib.solver.common.factory import SolverFactory as ContribSolverFactory
from pyomo.contrib.solver.common.results import TerminationCondition as ContribTermination
from pyomo.opt import TerminationCondition as LegacyTermination

from aidc_env.errors import InputError
from oracle.constants import DEFAULT_SOLVER

MIN_SOLVE_SECONDS = 0.01
"""Time given to a solve when its time limit is already spent, loading the model included (it returns the MIP start,
if any)."""
TIME_LIMIT_OPTION = {"cbc": "seconds", "glpk": "tmlim", "gurobi": "TimeLimit", "gurobi_direct": "TimeLimit",
                     "gurobi_persistent": "TimeLimit", "cplex": "timelimit", "cplex_direct": "timelimit",
                     "scip": "limits/time", "appsi_highs": "time_limit", "xpress": "maxtime"}
"""Option name of the time limit (seconds) of classic Pyomo solvers."""
GAP_OPTION = {"cbc": "ratioGap", "glpk": "mipgap", "gurobi": "MIPGap", "gurobi_direct": "MIPGap",
              "gurobi_persistent": "MIPGap", "cplex": "mipgap", "cplex_direct": "mipgap", "scip": "limits/gap",
              "appsi_highs": "mip_rel_gap", "xpress": "miprelstop"}
"""Option name of the relative MIP gap of classic Pyomo solvers."""
RELAXATION_LP_METHOD = "ipm"
"""HiGHS method of the LP relaxation: interior point with crossover (any dual solution gives valid token prices)."""
PYOMO_HIGHS_LOGGER = "pyomo.contrib.solver.solvers.highs"
"""Logger of Pyomo's HiGHS interface."""
_AUTO_UPDATE_FLAGS = ("check_for_new_or_removed_constraints", "check_for_new_or_removed_vars",
                      "check_for_new_or_removed_params", "check_for_new_objective", "update_constraints", "update_vars",
                      "update_parameters", "update_named_expressions", "update_objective")


@dataclass
class RunOutcome:
    """What a solver run returned (the solution, if any, is loaded into the model's variables)."""

    status: str
    """``optimal``, ``infeasible``, ``time_limit``, ``error`` or ``interrupted`` (by the caller's check)."""
    has_solution: bool
    objective: float | None
    bound: float | None
    load_seconds: float
    """Time to hand the model (or its changes) to the solver."""
    solve_seconds: float
    message: str = ""
    start_accepted: bool | None = None


StartValues = Iterable[tuple[pyo.Var, float]]

INTERRUPT_GRACE_S = 1.0
"""Seconds a HiGHS solve gets to stop at its next interrupt check after Ctrl-C before the KeyboardInterrupt is raised
anyway (the solve's thread is then left to end with the process)."""
WAIT_POLL_S = 0.1
"""How often the waiting thread wakes while HiGHS solves (a Ctrl-C is seen within this)."""


def run_highs(highs: Any) -> Any:
    """``highs.run()`` that Ctrl-C stops within about a second, wherever HiGHS is.

    Python's signal handler runs only in the main thread and only between bytecodes: while HiGHS solves in C++ in the
    main thread, a Ctrl-C waits for the solve to end (up to its time limit), or is raised inside one of HiGHS's Python
    callbacks and lost there. Here HiGHS solves in a thread of its own (it releases the GIL) while this thread waits; a
    KeyboardInterrupt raised here asks HiGHS to stop at its next simplex, IPM or MIP interrupt check (highspy's
    ``cancelSolve``), waits up to :data:`INTERRUPT_GRACE_S` for it, and is raised again.
    """
    highs.HandleUserInterrupt = True  # subscribes highspy's check of cancelSolve to the interrupt callbacks
    thread = highs.startSolve()
    try:
        while True:
            done, status = highs.wait(WAIT_POLL_S)
            if done:
                return status
    except KeyboardInterrupt:
        highs.cancelSolve()
        thread.join(INTERRUPT_GRACE_S)
        raise


def interruptible(highs: Any) -> Any:
    """``highs`` (a ``highspy.Highs``) whose ``run()`` is :func:`run_highs` (for code that calls ``run()`` itself, as
    Pyomo's interface does); returns it."""
    if threading.current_thread() is threading.main_thread():  # only the main thread sees Ctrl-C
        highs.run = lambda: run_highs(highs)
    return highs


class HighsRunner:
    """Persistent HiGHS: load once, re-solve after in-place changes, MIP start via highspy."""

    name = DEFAULT_SOLVER

    def __init__(self) -> None:
        self._opt: Any = None
        self._model: pyo.ConcreteModel | None = None

    def _set_auto_updates(self, enabled: bool) -> None:
        for flag in _AUTO_UPDATE_FLAGS:
            setattr(self._opt.config.auto_updates, flag, enabled)

    def load(self, model: pyo.ConcreteModel) -> float:
        """Hand the model (first time) or its changes (later) to HiGHS; returns the seconds taken."""
        tick = time.perf_counter()
        if self._opt is None or self._model is not model:
            self._opt = ContribSolverFactory(DEFAULT_SOLVER)
            self._set_auto_updates(True)
            self._opt.set_instance(model)
            interruptible(self._opt._solver_model)
            self._model = model
        else:
            self._set_auto_updates(True)
            self._opt.update()
        # Changes are sent above; the solve itself must not re-send anything (it would drop the MIP start).
        self._set_auto_updates(False)
        return time.perf_counter() - tick

    def relaxation(self, model: pyo.ConcreteModel, binaries: Sequence[pyo.Var], rows: Sequence[Any], *,
                   time_limit_s: float, threads: int | None, tee: bool) -> tuple[str, float | None, list[float]]:
        """Solve the LP relaxation (``binaries`` made continuous); (status, objective, duals of ``rows``)."""
        for var in binaries:
            var.domain = pyo.UnitInterval
        try:
            self.load(model)
            results = self._opt.solve(model, time_limit=time_limit_s, threads=threads, tee=tee, load_solutions=False,
                                      raise_exception_on_nonoptimal_result=False,
                                      solver_options={"solver": RELAXATION_LP_METHOD})
            condition = results.termination_condition
            if condition != ContribTermination.convergenceCriteriaSatisfied:
                status = {ContribTermination.provenInfeasible: "infeasible",
                          ContribTermination.infeasibleOrUnbounded: "infeasible",
                          ContribTermination.maxTimeLimit: "time_limit"}.get(condition, "error")
                return status, None, []
            row_dual = self._opt._solver_model.getSolution().row_dual
            index = self._opt._pyomo_con_to_solver_con_map
            return "optimal", results.incumbent_objective, [float(row_dual[index[row]]) if row in index else 0.0
                                                            for row in rows]
        finally:
            for var in binaries:
                var.domain = pyo.Binary

    def _run(self, model, time_limit_s, mip_gap, threads, tee, options):
        results = self._opt.solve(model, time_limit=time_limit_s, rel_gap=mip_gap, threads=threads, tee=tee,
                                  load_solutions=False, raise_exception_on_nonoptimal_result=False,
                                  solver_options={"solver": "choose", **options})
        if results.incumbent_objective is not None:
            results.solution_loader.load_vars()
        return results

    def solve(self, model: pyo.ConcreteModel, *, time_limit_s: float, mip_gap: float, start: StartValues | None,
              threads: int | None, tee: bool, options: dict[str, Any],
              interrupt: Callable[[], bool] | None = None) -> RunOutcome:
        """Solve the MILP; ``interrupt`` is asked at HiGHS's MIP interrupt checks and stops the solve when it answers
        True (status ``interrupted``: another path proved the day)."""
        load_seconds = self.load(model)
        time_limit_s = max(time_limit_s - load_seconds, MIN_SOLVE_SECONDS)  # the limit holds loading the model too
        opt = self._opt
        highs = opt._solver_model  # the highspy.Highs object; the interface exposes no MIP start
        if interrupt is None:
            return self._solve(model, highs, load_seconds, time_limit_s, mip_gap, start, threads, tee, options)

        fired: list[str] = []

        def check(event: Any) -> None:
            # An exception must not escape into HiGHS (it would be lost): stop HiGHS and raise it once the solve has
            # returned. (Ctrl-C itself reaches run_highs's waiting thread, not this one.)
            try:
                if fired or interrupt():
                    fired.append("interrupt")
                    event.interrupt()
            except KeyboardInterrupt:
                fired.append("ctrl-c")
                event.interrupt()

        # Pyomo maps HiGHS's kInterrupt to "unknown" with a warning: quiet it, the status is set below.
        log = logging.getLogger(PYOMO_HIGHS_LOGGER)
        level = log.level
        log.setLevel(logging.ERROR)
        highs.cbMipInterrupt += check
        try:
            run = self._solve(model, highs, load_seconds, time_limit_s, mip_gap, start, threads, tee, options)
        finally:
            highs.cbMipInterrupt -= check
            log.setLevel(level)
        if "ctrl-c" in fired:
            raise KeyboardInterrupt
        if fired and run.status != "optimal":
            run.status, run.message = "interrupted", ""
        return run

    def _solve(self, model, highs, load_seconds, time_limit_s, mip_gap, start, threads, tee, options) -> RunOutcome:
        opt = self._opt
        start_accepted = None
        if start is not None:
            columns = opt._pyomo_var_to_solver_var_map
            index, value = [], []
            for var, val in start:
                column = columns.get(id(var))
                if column is not None:
                    index.append(column)
                    value.append(val)
            status = highs.setSolution(len(index), np.array(index, dtype=np.int32), np.array(value, dtype=float))
            start_accepted = str(status).endswith("kOk")
        tick = time.perf_counter()
        results = self._run(model, time_limit_s, mip_gap, threads, tee, options)
        if start is not None and not _solution_matches_objective(model, results):
            # HiGHS can finish at the root with a MIP start that presolve rewrote: it then reports the reduced
            # objective with the original start as the solution. Solve again without the start.
            highs.clearSolver()
            results = self._run(model, time_limit_s, mip_gap, threads, tee, options)
            start_accepted = False
        solve_seconds = time.perf_counter() - tick
        condition = results.termination_condition
        has_solution = results.incumbent_objective is not None
        if condition == ContribTermination.convergenceCriteriaSatisfied:
            status = "optimal"
        elif condition in (ContribTermination.provenInfeasible, ContribTermination.infeasibleOrUnbounded):
            status = "infeasible"
        elif condition == ContribTermination.maxTimeLimit:
            status = "time_limit"
        else:
            status = "error"
        return RunOutcome(status=status, has_solution=has_solution, objective=results.incumbent_objective,
                          bound=results.objective_bound, load_seconds=load_seconds, solve_seconds=solve_seconds,
                          message="" if status != "error" else f"HiGHS stopped with {condition.name}",
                          start_accepted=start_accepted)


class PyomoRunner:
    """Any other solver of Pyomo's ``SolverFactory`` (cbc, glpk, gurobi, cplex, scip, appsi_highs, ...)."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name not in pyo.SolverFactory:
            raise InputError("solver", f"unknown solver {name!r} (try highs, appsi_highs, cbc, glpk, gurobi, cplex, "
                                       "scip)")
        logging.getLogger("pyomo.solvers").setLevel(logging.ERROR)
        self._opt = pyo.SolverFactory(name)
        if not self._opt.available(exception_flag=False):
            raise InputError("solver", f"{name} is not available (not installed or not on the PATH)")

    def solve(self, model: pyo.ConcreteModel, *, time_limit_s: float, mip_gap: float, start: StartValues | None,
              threads: int | None, tee: bool, options: dict[str, Any]) -> RunOutcome:
        opt = self._opt
        if self.name in TIME_LIMIT_OPTION:
            opt.options[TIME_LIMIT_OPTION[self.name]] = time_limit_s
        if self.name in GAP_OPTION:
            opt.options[GAP_OPTION[self.name]] = mip_gap
        if threads is not None and self.name in ("cbc", "gurobi", "cplex", "appsi_highs"):
            opt.options["threads"] = threads
        opt.options.update(options)
        kwargs: dict[str, Any] = {"tee": tee, "load_solutions": False}
        warm = start is not None and getattr(opt, "warm_start_capable", lambda: False)()
        if warm:
            for var, value in start:
                var.set_value(value, skip_validation=True)
            kwargs["warmstart"] = True
        tick = time.perf_counter()
        results = opt.solve(model, **kwargs)
        seconds = time.perf_counter() - tick
        condition = results.solver.termination_condition
        has_solution = len(results.solution) > 0
        if has_solution:
            model.solutions.load_from(results)
        status = {LegacyTermination.optimal: "optimal", LegacyTermination.infeasible: "infeasible",
                  LegacyTermination.infeasibleOrUnbounded: "infeasible",
                  LegacyTermination.maxTimeLimit: "time_limit"}.get(condition, "error")
        bound = results.problem.lower_bound
        bound = float(bound) if bound is not None and math.isfinite(float(bound)) else None
        objective = float(pyo.value(model.cost)) if has_solution else None
        return RunOutcome(status, has_solution, objective, bound, 0.0, seconds,
                          "" if status != "error" else f"{self.name} stopped with {condition}",
                          start_accepted=warm if start is not None else None)


SOLUTION_CHECK_RTOL = 1e-7
"""Relative tolerance between the solver's objective and the objective of the solution it returns."""


def _solution_matches_objective(model: pyo.ConcreteModel, results: Any) -> bool:
    if results.incumbent_objective is None:
        return True
    value = float(pyo.value(model.cost))
    return abs(value - results.incumbent_objective) <= SOLUTION_CHECK_RTOL * max(1.0, abs(value))


def make_runner(name: str) -> HighsRunner | PyomoRunner:
    """The runner of a solver name (:class:`InputError` if unknown or unavailable)."""
    if not isinstance(name, str) or not name:
        raise InputError("solver", "must be a solver name")
    return HighsRunner() if name == DEFAULT_SOLVER else PyomoRunner(name)
