"""Two-stage stochastic oracle: the extensive form over S scenarios with a shared first stage.

Given S sub-instances of the same structure (the same state, each priced with one scenario, equally
likely) and the first ``span`` slots (a boundary of every job), the extensive form holds S copies of the
fast joint-state model (:func:`oracle.formulations.build`, every block cost from the simulator's functions
via :func:`oracle.data.oracle_data`), each with its own tranche rows (tokens do not depend on prices, so
every scenario's schedule must meet them), minimises the mean of their costs, and ties the per-job
choices of the segments in the first ``span`` slots across copies (non-anticipativity). Solved by HiGHS
through the persistent runner, branch and bound (no Lagrangian reduction). Each scenario's schedule is
checked against the simulator.

Measured (2048 case, 2023-03-20, first re-planning point, S = 2, a loaded machine): not closed within
300 s (incumbent 0.65 % above the candidate evaluation of :mod:`agents.smpc`, which took 20 s); so
stochastic MPC uses the candidates by default and this exact form on small instances and as a check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo

from aidc_env.instance import Instance
from aidc_env.errors import require
from aidc_env.simulator import simulate
from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_TIME_LIMIT_S
from oracle.data import oracle_data
from oracle.formulations import build
from oracle.model import OBJECTIVE_ATOL_USD, OBJECTIVE_RTOL
from oracle.solvers import HighsRunner

@dataclass(frozen=True)
class StochasticResult:
    """The extensive form's answer. Costs in $ (each scenario's constant PPA term included)."""

    status: str
    """``optimal``, ``infeasible``, ``time_limit`` or ``error`` (HiGHS's, see :class:`oracle.solvers.RunOutcome`)."""
    decision: tuple[tuple[int, ...], ...] | None
    """Per job, the shared choices of the segments in the first ``span`` slots."""
    schedules: tuple[list[list[int]], ...]
    """Per scenario, its whole schedule (the shared decision, then its recourse)."""
    costs_usd: np.ndarray
    """(S,) the simulator's cost of each scenario's schedule on that scenario."""
    expected_cost_usd: float | None
    best_bound_usd: float | None
    build_seconds: float
    solve_seconds: float


def solve_two_stage(subs: list[Instance], span: int, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                    mip_gap: float = DEFAULT_MIP_GAP) -> StochasticResult:
    """The two-stage optimum over equally likely scenario sub-instances ``subs`` (see the module docstring)."""
    require(len(subs) > 0, "scenarios", "needs at least one scenario")
    first = subs[0]
    keys = {(s.slots, tuple((j.segments, j.initial_mode, j.tranche_tokens) for j in s.jobs)) for s in subs}
    require(len(keys) == 1, "scenarios", "must share slots, jobs, initial modes and tranches")
    require(all(span % first.slots_per_segment(job) == 0 for job in first.jobs) and 0 < span <= first.slots,
            "span", "must end on a boundary of every job")
    tick = time.perf_counter()
    model = pyo.ConcreteModel(name="aidc_two_stage")
    builts = []
    for s, sub in enumerate(subs):
        built = build(oracle_data(sub), "fast")
        built.model.cost.deactivate()
        model.add_component(f"scenario{s}", built.model)
        builts.append(built)
    shared = [(j, seg, c) for (j, seg, c) in builts[0].model.x if seg < span // first.slots_per_segment(first.jobs[j])]
    model.nonanticipative = pyo.Constraint(range(1, len(subs)), shared, rule=lambda m, s, j, seg, c: (
        builts[s].model.x[j, seg, c] == builts[0].model.x[j, seg, c]))
    model.cost = pyo.Objective(expr=sum(b.model.cost.expr for b in builts) / len(subs), sense=pyo.minimize)
    build_seconds = time.perf_counter() - tick
    run = HighsRunner().solve(model, time_limit_s=time_limit_s, mip_gap=mip_gap, start=None, threads=None, tee=False,
                              options={})
    if not run.has_solution:
        return StochasticResult(run.status, None, (), np.full(len(subs), np.inf), None, run.bound,
                                build_seconds + run.load_seconds, run.solve_seconds)
    schedules = tuple(b.read_schedule() for b in builts)
    costs = np.array([simulate(sub, plan).metrics.operating_cost_usd for sub, plan in zip(subs, schedules,
                                                                                            strict=True)])
    expected = float(np.mean(costs))
    if abs(expected - run.objective) > OBJECTIVE_RTOL * max(abs(expected), 1.0) + OBJECTIVE_ATOL_USD:
        raise AssertionError(f"extensive form ${run.objective!r} != simulator replay ${expected!r}")
    for sub, plan in zip(subs, schedules, strict=True):
        if not simulate(sub, plan).metrics.tranches_met:
            raise AssertionError("a scenario's schedule misses a tranche")
    decision = tuple(tuple(row[: span // first.slots_per_segment(job)]) for job, row in zip(first.jobs, schedules[0],
                                                                                              strict=True))
    return StochasticResult(run.status, decision, schedules, costs, expected, run.bound,
                            build_seconds + run.load_seconds, run.solve_seconds)


__all__ = ["StochasticResult", "solve_two_stage"]
