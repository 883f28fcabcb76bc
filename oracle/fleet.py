"""The fleet oracle: column generation (Dantzig-Wolfe) with a proven Lagrangian bound (DESIGN §9, issue 13).

The day oracle's exact proof enumerates joint states, Π(M_j + 1) of them: it stops at two jobs. A fleet
decomposes instead. Each job's schedule is a path through its own state graph (:mod:`oracle.fleet_graph`:
one stage per checkpoint segment, restart losses on the arcs, its window as a mask, its token target as a
resource); the jobs meet only in the pool's rows: the GPUs of each slot and the slot's cost, a function of
the pooled facility load (inference and idle GPUs included). So:

1. **restricted master LP** (:mod:`oracle.fleet_master`, HiGHS): a convex combination of known paths per
   job, subject to per-slot capacity, with the exact slot cost (its convex pieces; the convex envelope where
   negative prices make it concave);
2. **pricing** (:mod:`oracle.fleet_pricing`): with the LP's duals as prices of GPUs and MW per slot, each
   job's cheapest path that meets its target, by an exact label search; paths cheaper than the job's
   convexity dual enter the master;
3. **bound**: at every iteration the Lagrangian dual at those prices, constant + Σ_j (cheapest path of j),
   evaluated from its definition: a lower bound on every feasible schedule (the best one is kept);
4. **primal schedule**: the integer master (a MILP over the generated paths, exact costs) warm-started by
   the best schedule seen (the fixed and greedy baselines, and each LP's rounding when it fits);
5. **closing**: if the gap is still above ``mip_gap``, every path whose cost at the best bound's prices is
   within the gap of its job's cheapest is enumerated (a path of any better schedule is among them: a
   schedule costs at least the bound plus the sum of its paths' excesses) and the integer master re-solved
   over them: its optimum is then the optimum (proof ``enumeration``), if the enumeration stays below
   :data:`MAX_ENUMERATED_LABELS`;
6. **no schedule at all** (the relaxation fits but no integer combination was found): on a tiny fleet every
   path of every job is enumerated and the integer master solved over all of them: infeasible is then proved
   (status ``infeasible``), or its optimum is the optimum (proof ``enumeration``).

The answer is an :class:`~oracle.result.OracleResult` (formulation ``fleet``); its objective is
``Metrics.objective_usd`` (operating cost − idle-GPU value), asserted equal to the simulator's replay.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from aidc_env.baselines import fixed_schedule, greedy_schedule
from aidc_env.errors import require
from aidc_env.instance import Instance
from aidc_env.simulator import Metrics, simulate
from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_TIME_LIMIT_S
from oracle.fleet_graph import FleetData, fleet_data
from oracle.fleet_master import MasterLP, integer_master, lagrangian_bound, make_column
from oracle.fleet_pricing import LabelSearch, exact_stage_costs, stage_costs
from oracle.result import OBJECTIVE_ATOL_USD, OBJECTIVE_RTOL, OracleResult, closed, modes_used, relative_gap

COLUMNS_PER_JOB = 4
"""Paths a job may add to the master per iteration (its cheapest, one per end state)."""
REDUCED_COST_TOL_USD = 1e-6
"""A path enters the master when it costs at least this much less than its job's convexity dual."""
COLUMN_GENERATION_SHARE = 0.5
"""Share of the time limit the column generation may use before the integer master takes over."""
INTEGER_SHARE = 0.5
"""Share of the time left that the first integer master may use (the rest: the closing step)."""
TIME_MARGIN_SHARE = 0.9
"""The closing integer master gets this share of the time left (building it and reading it back take the rest)."""
INFEASIBILITY_GPUS = 1e-6
"""Phase one proves infeasibility when its bound on the GPU-slots beyond the pool exceeds this."""
MAX_ENUMERATED_LABELS = 200_000
"""The closing step gives up when a job's enumeration holds more labels than this at a stage."""
MAX_CLOSING_COLUMNS = 5_000
"""... or when all jobs' enumerated paths exceed this many columns (the integer master would be too big)."""


def uses_fleet_oracle(inst: Instance) -> bool:
    """Whether an instance goes to the fleet oracle: fleet workloads, or more than two jobs."""
    return inst.has_fleet_workloads or len(inst.jobs) > 2


class FleetOracle:
    """The fleet oracle of one instance (see the module docstring); :meth:`solve` returns an OracleResult."""

    formulation = "fleet"

    def __init__(self, inst: Instance, *, allow_pause: bool = True) -> None:
        tick = time.perf_counter()
        self.inst = inst
        self.allow_pause = allow_pause
        self.data: FleetData = fleet_data(inst, allow_pause=allow_pause)
        self.searches = [LabelSearch(graph) for graph in self.data.graphs]
        self.build_seconds = time.perf_counter() - tick

    # ------------------------------------------------------------------ helpers

    def _base(self) -> dict[str, Any]:
        inst = self.inst
        return {"formulation": self.formulation, "solver": "highs", "case": inst.case_name, "day": inst.day,
                "job_names": tuple(job.name for job in inst.jobs)}

    def _infeasible_reason(self) -> str:
        """A quick proof of infeasibility (inference beyond the pool, a job that cannot reach its target
        alone), or empty."""
        pool = self.data.pools[0]
        short = np.flatnonzero(pool.capacity_gpus < 0)
        if short.size:
            return f"inference needs more GPUs than the pool holds in slot {int(short[0])}"
        for graph, search in zip(self.data.graphs, self.searches, strict=True):
            if not search.cheapest(np.zeros((graph.n_stages, graph.n_states))):
                return f"job {graph.name} cannot make its target within its window, even alone in the pool"
        return ""

    def _starts(self) -> list[list[np.ndarray]]:
        """Paths of the baseline schedules (fixed, greedy) whose every job meets its target in its window."""
        inst, out = self.inst, []
        for make in (fixed_schedule, greedy_schedule):
            try:
                schedule = make(inst)
            except ValueError:  # greedy finds no mode within a job's share of a small pool
                continue
            paths = self.data.paths(schedule)
            if all(_path_ok(graph, path) for graph, path in zip(self.data.graphs, paths, strict=True)):
                out.append(paths)
        return out

    # ------------------------------------------------------------------ solving

    def solve(self, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S, mip_gap: float = DEFAULT_MIP_GAP,
              warm_start: bool = True, threads: int | None = None, tee: bool = False,
              solver_options: Mapping[str, Any] | None = None) -> OracleResult:
        """Column generation, integer master, closing (see the module docstring). ``tee`` and
        ``solver_options`` are accepted for the day oracle's signature and ignored."""
        require(isinstance(time_limit_s, (int, float)) and time_limit_s > 0, "time_limit_s", "must be > 0")
        require(isinstance(mip_gap, (int, float)) and 0 <= mip_gap < 1, "mip_gap", "must be in [0, 1)")
        tick = time.perf_counter()
        deadline = tick + time_limit_s
        build_seconds, self.build_seconds = self.build_seconds, 0.0
        base = self._base()
        reason = self._infeasible_reason()
        if reason:
            return OracleResult(status="infeasible", schedule=None, objective_usd=None, best_bound_usd=None, gap=None,
                                build_seconds=build_seconds, solve_seconds=time.perf_counter() - tick, metrics=None,
                                reason=reason, **base)
        data, details = self.data, {"iterations": 0.0, "lp": 0.0, "pricing": 0.0, "mip": 0.0}
        master = MasterLP(data, threads)
        incumbent: tuple[list[np.ndarray], float] | None = None
        start_objective = None
        for paths in (self._starts() if warm_start else []):
            for j, path in enumerate(paths):
                master.add(make_column(data.graphs[j], j, path))
            if data.fits(paths):
                value = data.objective_usd(paths)
                if incumbent is None or value < incumbent[1]:
                    incumbent = (paths, value)
        start_objective = incumbent[1] if incumbent else None
        for j, (graph, search) in enumerate(zip(data.graphs, self.searches, strict=True)):
            if not any(c.job == j for c in master.columns):  # every job needs a first column
                master.add(make_column(graph, j, search.cheapest(np.zeros((graph.n_stages, graph.n_states)))[0].path))
        best_bound, best_prices, best_cheapest = -np.inf, None, None
        cg_deadline = tick + COLUMN_GENERATION_SHARE * time_limit_s
        converged = False
        while time.perf_counter() < cg_deadline:
            lp_tick = time.perf_counter()
            prices = master.solve()
            details["lp"] += time.perf_counter() - lp_tick
            price_tick = time.perf_counter()
            cheapest, added = self._price(master, prices)
            details["pricing"] += time.perf_counter() - price_tick
            details["iterations"] += 1
            bound = lagrangian_bound(master, prices, cheapest)
            if bound > best_bound:
                best_bound, best_prices, best_cheapest = bound, prices, cheapest
            rounded = _round(master, data)
            if rounded is not None and (incumbent is None or rounded[1] < incumbent[1]):
                incumbent = rounded
            if added == 0:
                converged = True
                break
            if incumbent is not None and closed(incumbent[1], best_bound, mip_gap):
                break
        details["columns"] = float(len(master.columns))
        details["converged"] = float(converged)
        proof = "column-generation"
        if not (incumbent is not None and closed(incumbent[1], best_bound, mip_gap)):
            remaining = deadline - time.perf_counter()
            mip_tick = time.perf_counter()
            run = integer_master(data, master.columns, time_limit_s=INTEGER_SHARE * remaining, mip_gap=mip_gap,
                                 start=incumbent[0] if incumbent else None, threads=threads)
            details["mip"] += time.perf_counter() - mip_tick
            if run.paths is not None and (incumbent is None or run.objective_usd < incumbent[1]):
                incumbent = (run.paths, data.objective_usd(run.paths))
        if incumbent is not None and not closed(incumbent[1], best_bound, mip_gap):
            incumbent = self._best_responses(incumbent, deadline, details)
        if incumbent is not None and not closed(incumbent[1], best_bound, mip_gap) and best_prices is not None:
            result = self._close(master, best_prices, best_cheapest, best_bound, incumbent, mip_gap, deadline,
                                 threads, details)
            if result is not None:
                incumbent, best_bound = result
                proof = "enumeration"
        solve_seconds = time.perf_counter() - tick
        if incumbent is None and converged and master.slack_gpus() > 0 and self._infeasible(deadline, threads):
            return OracleResult(status="infeasible", schedule=None, objective_usd=None, best_bound_usd=None, gap=None,
                                build_seconds=build_seconds, solve_seconds=time.perf_counter() - tick, metrics=None,
                                reason="the jobs' targets and windows need more GPUs than the pool leaves them "
                                       "(proved by the relaxation: a phase-one column generation)",
                                details=details, **base)
        if incumbent is None:  # a tiny fleet: every path of every job, and the integer master over all of them
            run = self._enumerate_all(deadline, threads, details)
            if run is not None and run.status == "infeasible":
                return OracleResult(status="infeasible", schedule=None, objective_usd=None, best_bound_usd=None,
                                    gap=None, build_seconds=build_seconds, solve_seconds=time.perf_counter() - tick,
                                    metrics=None, reason="no combination of the jobs' paths that meet their targets "
                                    "in their windows fits the pool (proved by enumerating every path)",
                                    details=details, **base)
            if run is not None and run.status == "optimal" and run.paths is not None:
                incumbent = (run.paths, data.objective_usd(run.paths))
                best_bound, proof = incumbent[1], "enumeration"
            solve_seconds = time.perf_counter() - tick
        if incumbent is None:
            return OracleResult(status="time_limit", schedule=None, objective_usd=None,
                                best_bound_usd=float(best_bound), gap=None, build_seconds=build_seconds,
                                solve_seconds=solve_seconds, metrics=None,
                                reason=f"time limit of {time_limit_s:g} s reached before any schedule was found",
                                details=details, **base)
        schedule = data.schedule(incumbent[0])
        objective = incumbent[1]
        metrics = self._verify(schedule, objective)
        bound = float(min(best_bound, objective))
        optimal = closed(objective, bound, mip_gap)
        gap = relative_gap(objective, bound)
        return OracleResult(
            status="optimal" if optimal else "time_limit", schedule=schedule, objective_usd=objective,
            best_bound_usd=bound, gap=gap, build_seconds=build_seconds, solve_seconds=solve_seconds, metrics=metrics,
            reason="" if optimal else (
                f"time limit of {time_limit_s:g} s reached with a gap of {gap:.2e}" if time.perf_counter() >= deadline
                else f"gap of {gap:.2e} left open: the closing step could not close it (more than "
                     f"{MAX_CLOSING_COLUMNS:,} paths within the gap, or its integer master did not finish; the "
                     "decomposition does not branch)"),
            modes_used=modes_used(self.inst, schedule), start_objective_usd=start_objective,
            proof=proof if optimal else "", details=details, **base)

    def _price(self, master: MasterLP, prices, own: bool = True) -> tuple[list[float], int]:
        """Each job's cheapest path at the prices (exact), and how many paths entered the master (those cheaper
        than the job's convexity dual)."""
        cheapest, added = [], 0
        for j, (graph, search) in enumerate(zip(self.data.graphs, self.searches, strict=True)):
            costs = stage_costs(graph, prices.gpu, prices.load, own=own)
            known = min(float(costs[np.arange(graph.n_stages), c.path].sum()) for c in master.columns if c.job == j)
            found = search.cheapest(costs, upper_usd=known)
            cheapest.append(min([known] + [p.cost for p in found[:1]]))
            for p in found[:COLUMNS_PER_JOB]:
                if p.cost < prices.convexity[j] - REDUCED_COST_TOL_USD:
                    added += master.add(make_column(graph, j, p.path))
        return cheapest, added

    def _infeasible(self, deadline: float, threads: int | None) -> bool:
        """Phase one: minimise the GPUs beyond the pool over the convex hulls of the jobs' paths. A positive
        Lagrangian bound of it proves that no schedule fits the pool."""
        master = MasterLP(self.data, threads, phase_one=True)
        for j, (graph, search) in enumerate(zip(self.data.graphs, self.searches, strict=True)):
            master.add(make_column(graph, j, search.cheapest(np.zeros((graph.n_stages, graph.n_states)))[0].path))
        while time.perf_counter() < deadline:
            prices = master.solve()
            cheapest, added = self._price(master, prices, own=False)
            if lagrangian_bound(master, prices, cheapest) > INFEASIBILITY_GPUS:
                return True
            if added == 0 or master.value <= INFEASIBILITY_GPUS:
                return False
        return False

    def _enumerate_all(self, deadline: float, threads: int | None, details: dict[str, float]):
        """The integer master over *every* path of every job that meets its target in its window (the closing step's
        enumeration without a cost threshold): ``infeasible`` proves that no
        schedule fits the pool, ``optimal`` is the optimum. None when it gives up (more than
        :data:`MAX_ENUMERATED_LABELS` labels or :data:`MAX_CLOSING_COLUMNS` paths: not a tiny fleet; or the
        clock)."""
        columns = []
        for j, (graph, search) in enumerate(zip(self.data.graphs, self.searches, strict=True)):
            found = search.enumerate(np.zeros((graph.n_stages, graph.n_states)), np.inf, MAX_ENUMERATED_LABELS,
                                    deadline)
            if found is None:
                return None
            columns += [make_column(graph, j, p.path) for p in found]
            if len(columns) > MAX_CLOSING_COLUMNS:
                return None
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return None
        details["enumerated_columns"] = float(len(columns))
        mip_tick = time.perf_counter()
        run = integer_master(self.data, _unique(columns), time_limit_s=TIME_MARGIN_SHARE * remaining, mip_gap=0.0,
                             threads=threads)
        details["mip"] += time.perf_counter() - mip_tick
        return run

    def _best_responses(self, incumbent: tuple[list[np.ndarray], float], deadline: float,
                        details: dict[str, float]) -> tuple[list[np.ndarray], float]:
        """Local search: each job in turn takes its best response (its exact cheapest path with the other jobs
        fixed, :func:`~oracle.fleet_pricing.exact_stage_costs`), until a round improves nothing."""
        tick = time.perf_counter()
        paths, value = list(incumbent[0]), incumbent[1]
        improved = True
        while improved and time.perf_counter() < deadline:
            improved = False
            for j, search in enumerate(self.searches):
                found = search.cheapest(exact_stage_costs(self.data, j, paths))
                if not found:
                    continue
                trial = paths[:j] + [found[0].path] + paths[j + 1:]
                trial_value = self.data.objective_usd(trial)
                if trial_value < value - REDUCED_COST_TOL_USD:
                    paths, value, improved = trial, trial_value, True
        details["local_search"] = details.get("local_search", 0.0) + time.perf_counter() - tick
        return paths, value

    def _close(self, master: MasterLP, prices, cheapest: Sequence[float], bound: float,
               incumbent: tuple[list[np.ndarray], float], mip_gap: float, deadline: float, threads: int | None,
               details: dict[str, float]) -> tuple[tuple[list[np.ndarray], float], float] | None:
        """The closing step: enumerate every path within the gap at the best bound's prices, solve the integer
        master over them. Returns (incumbent, proven bound), or None if it gave up (too many paths, time)."""
        data = self.data
        gap_usd = incumbent[1] - bound
        columns = []
        for j, (graph, search) in enumerate(zip(data.graphs, self.searches, strict=True)):
            if time.perf_counter() >= deadline:
                return None
            costs = stage_costs(graph, prices.gpu, prices.load)
            found = search.enumerate(costs, cheapest[j] + gap_usd, MAX_ENUMERATED_LABELS, deadline)
            if found is None:
                return None
            columns += [make_column(graph, j, p.path) for p in found]
            if len(columns) > MAX_CLOSING_COLUMNS:
                return None
        details["closing_columns"] = float(len(columns))
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return None
        for j, path in enumerate(incumbent[0]):  # the incumbent stays a feasible start
            columns.append(make_column(data.graphs[j], j, path))
        mip_tick = time.perf_counter()
        run = integer_master(data, _unique(columns), time_limit_s=TIME_MARGIN_SHARE * remaining, mip_gap=0.0, start=incumbent[0],
                             threads=threads)
        details["mip"] += time.perf_counter() - mip_tick
        if run.status != "optimal" or run.paths is None:
            return None
        best = (run.paths, data.objective_usd(run.paths))
        if best[1] > incumbent[1]:
            best = incumbent
        return best, best[1]

    def _verify(self, schedule: list[list[int]], objective: float) -> Metrics:
        """The simulator's metrics; AssertionError if the decomposition's objective disagrees (a bug)."""
        metrics = simulate(self.inst, schedule).metrics
        replay = metrics.objective_usd
        tolerance = OBJECTIVE_RTOL * max(abs(replay), 1.0) + OBJECTIVE_ATOL_USD
        if abs(objective - replay) > tolerance:
            raise AssertionError(f"fleet oracle objective ${objective!r} != simulator replay ${replay!r}")
        if not metrics.feasible:
            raise AssertionError("the fleet oracle's schedule is infeasible in the simulator")
        return metrics


def _path_ok(graph, path: np.ndarray) -> bool:
    """A path is a column when it uses allowed states only and meets its target."""
    return bool(np.all(graph.allowed[np.arange(graph.n_stages), path])) and \
        graph.path_tokens(path) >= graph.target_tokens


def _round(master: MasterLP, data: FleetData) -> tuple[list[np.ndarray], float] | None:
    """The LP's rounding: per job its column of largest weight, if the schedule fits the pool."""
    best: dict[int, tuple[float, np.ndarray]] = {}
    for column, weight in master.fractional():
        if column.job not in best or weight > best[column.job][0]:
            best[column.job] = (weight, column.path)
    if len(best) < len(data.graphs):
        return None
    paths = [best[j][1] for j in range(len(data.graphs))]
    return (paths, data.objective_usd(paths)) if data.fits(paths) else None


def _unique(columns: Sequence) -> list:
    seen, out = set(), []
    for column in columns:
        key = (column.job, column.path.tobytes())
        if key not in seen:
            seen.add(key)
            out.append(column)
    return out


def solve_fleet(inst: Instance, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S, mip_gap: float = DEFAULT_MIP_GAP,
                allow_pause: bool = True, warm_start: bool = True, threads: int | None = None) -> OracleResult:
    """One call: the fleet oracle of an instance."""
    return FleetOracle(inst, allow_pause=allow_pause).solve(time_limit_s=time_limit_s, mip_gap=mip_gap,
                                                            warm_start=warm_start, threads=threads)


__all__ = ["FleetOracle", "solve_fleet", "uses_fleet_oracle"]
