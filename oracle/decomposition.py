"""The decomposition: column generation (Dantzig-Wolfe) with a proven Lagrangian bound, for any instance.

Each job's schedule is a path through its own (site, choice) graph (:mod:`oracle.graph`); the jobs meet only in the
sites' pools (GPUs per slot, and the slot's cost as a function of the site's load). :class:`Decomposition` runs these
phases, each within its share of the time limit:

1. **column generation**: the path master LP (:mod:`oracle.master`) priced by an exact label search
   (:mod:`oracle.pricing`); the Lagrangian dual at each iteration's prices is a proven lower bound;
2. **pattern master** (:mod:`oracle.patterns`, when its patterns number at most ``MAX_PATTERNS``): exact site costs per
   (site, block) pattern, a stronger bound where jobs share a site; then its LP's rounding, price-and-fix dives and
   branch and price (:mod:`oracle.pattern_search`), and the integer master over its near columns. Without it, the
   integer master over every generated column. Then best responses (each job's exact cheapest path, the others fixed);
3. **closing**: every path within the gap at the best Lagrangian prices, and the integer master over them: its optimum
   is the optimum (proof ``enumeration``) when the enumeration stays small;
4. **branch and price** on the path master (:mod:`oracle.branching`, when the pattern master did not set the bound),
   then a large-neighbourhood search with the time left;
5. **infeasibility**: inference beyond a pool, a grid call that even the lightest load breaks, or a job that cannot
   reach its target alone, is refused at once; with no schedule found, a phase-one column generation (or, on a tiny
   instance, every path) proves it.

Grid calls (:mod:`oracle.call_rows`) are rows of both masters and a limit on each pattern's load; every schedule a
phase offers passes :meth:`~oracle.graph.DecompositionData.fits`, which holds them: the incumbent delivers every
call.

The answer's objective, ``Metrics.objective_usd`` of the simulator's replay, is checked equal to the model's own.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aidc_env.baselines import fixed_schedule, greedy_schedule
from aidc_env.errors import require
from aidc_env.instance import Instance
from oracle.call_rows import undeliverable
from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_TIME_LIMIT_S
from oracle.graph import DecompositionData, decomposition_data
from oracle.master import (Column, MasterLP, Prices, integer_master, lagrangian_bound, make_column, rounding,
                           unique_columns)
from oracle.pricing import REDUCED_COST_TOL_USD, LabelSearch, exact_stage_costs, price, stage_costs
from oracle.result import MIP_ABS_GAP_USD, OracleResult, Start, answer, closed, relative_gap

COLUMNS_PER_JOB = 6
"""Paths a job may add to the path master per iteration (its cheapest, one per end state)."""
PATH_SHARE, PATTERN_SHARE = 0.25, 0.7
"""Shares of the time limit by which the path master's and the pattern master's column generations end."""
INTEGER_SHARE, INTEGER_MIN_GAP = 0.8, 1e-4
"""The integer master over every generated column: its share of the time left and its least relative gap."""
PATTERN_INTEGER_SHARE, PATTERN_KEEP_USD = 0.6, 0.5
"""The integer master after the pattern master: its share of the time left, over the paths whose reduced cost in the
pattern LP's last solution is at most ``PATTERN_KEEP_USD`` ($)."""
PATTERN_DIVE_SHARE, MAX_DIVES, DIVE_TOP, DIVE_FIX_FLOW, DIVE_SEED = 0.75, 20, 3, 0.9, 0
"""The dives: their share of the time left, how many at most (the first by most flow, the others drawn among the
``DIVE_TOP`` (job, stage)s of most flow, also fixing those with ``DIVE_FIX_FLOW`` of their flow on one state), the seed
of the draws."""
PATTERN_BRANCH_SHARE, PATTERN_BRANCH_MIN_S = 0.5, 5.0
"""The pattern master's branch and price: its share of the time left after the dives, if at least that many s."""
BRANCH_SHARE = 0.6
"""The path master's branch and price: its share of the time left (the neighbourhood search gets the rest)."""
TIME_MARGIN_SHARE = 0.9
"""The closing integer master's share of the time left (building and reading take the rest)."""
NEIGHBOURHOOD_START_USD, NEIGHBOURHOOD_COLUMNS = 1.0, 300
"""The neighbourhood search's first δ ($ above a job's exact best response) and the paths per job and round."""
MAX_ENUMERATED_LABELS, MAX_CLOSING_COLUMNS = 200_000, 20_000
"""The closing step gives up beyond this many labels of a job at a stage, or this many paths in all."""
INFEASIBILITY_GPUS = 1e-6
"""Phase one proves infeasibility when its bound on the GPU-slots beyond the pools exceeds this."""

Paths = list[np.ndarray]


@dataclass
class Search:
    """The state of one solve: the incumbent, the best bound and what proved it, the Lagrangian prices the closing step
    enumerates at, the clock and the counters."""

    deadline: float
    mip_gap: float
    threads: int | None
    details: dict[str, Any] = field(default_factory=dict)
    incumbent: tuple[Paths, float] | None = None
    bound: float = -np.inf
    proof: str = "column-generation"
    prices: Prices | None = None
    """The path master's prices of its best Lagrangian dual."""
    closing: tuple[list[np.ndarray], list[float], float] | None = None
    """Per job its stage costs and least path cost at the best Lagrangian prices, and that dual's value."""
    from_patterns: bool = False
    """The pattern master set the bound (the path master's branch and price is then not run)."""

    @property
    def open(self) -> bool:
        return self.incumbent is None or not closed(self.incumbent[1], self.bound, self.mip_gap)

    def offer(self, paths: Paths | None, value: float | None = None, data: DecompositionData | None = None) -> None:
        """Keep a schedule (its value, or the data's objective of it) if it fits and beats the incumbent."""
        if paths is None or (data is not None and not data.fits(paths)):
            return
        value = data.objective_usd(paths) if value is None else value
        if self.incumbent is None or value < self.incumbent[1]:
            self.incumbent = (list(paths), value)

    def raise_bound(self, bound: float, proof: str) -> None:
        if bound > self.bound:
            self.bound, self.proof = bound, proof

    def left(self) -> float:
        return self.deadline - time.perf_counter()


class Decomposition:
    """The decomposition of one instance (see the module docstring); :meth:`solve` returns an OracleResult."""

    def __init__(self, inst: Instance, *, placement: str = "move", allow_pause: bool = True) -> None:
        tick = time.perf_counter()
        self.inst = inst
        self.placement = placement
        self.data: DecompositionData = decomposition_data(inst, placement, allow_pause)
        self.searches = [LabelSearch(graph) for graph in self.data.graphs]
        self.build_seconds = time.perf_counter() - tick

    def _zero(self, j: int) -> np.ndarray:
        graph = self.data.graphs[j]
        return np.zeros((graph.n_stages, graph.n_states))

    def _infeasible_reason(self) -> str:
        """A quick proof of infeasibility (inference beyond a pool, a call even the lightest load breaks, a job that
        cannot reach its target alone)."""
        pools = self.data.pools
        for pool in pools:
            short = np.flatnonzero(pool.capacity_gpus < 0)
            if short.size:
                return f"inference needs more GPUs than the pool of {pool.name} holds in slot {int(short[0])}"
        if self.inst.grid_calls:
            reason = undeliverable([pool.name for pool in pools], [pool.base_load_mw for pool in pools],
                                   self.data.least_added_mw(), [pool.load_limit_mw for pool in pools])
            if reason:
                return reason
        for j, search in enumerate(self.searches):
            if not search.cheapest(self._zero(j)):
                return f"job {search.graph.name} cannot make its target within its window, even alone in the pool"
        return ""

    def _starts(self, start: Start | None, baselines: bool = True) -> list[Paths]:
        """The baselines at home (fixed; greedy too with one site) and a given (schedule, sites) start, when their every
        job meets its target in its window."""
        makers = () if not baselines else (fixed_schedule, greedy_schedule) if len(self.data.pools) == 1 else (
            fixed_schedule,)
        out = []
        candidates = [(make, None) for make in makers] + ([(lambda _: start[0], start[1])] if start else [])
        for make, sites in candidates:
            try:
                paths = self.data.paths_of(make(self.inst), sites)
            except (ValueError, KeyError):  # greedy finds no mode in a small pool; a start outside the graph
                continue
            if self.data.tokens_ok(paths):
                out.append(paths)
        return out

    # ------------------------------------------------------------------ solving

    def solve(self, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S, mip_gap: float = DEFAULT_MIP_GAP,
              warm_start: bool = True, threads: int | None = None, start: Start | None = None) -> OracleResult:
        """The phases of the module docstring; ``start``: a (schedule, sites) pair to start from (None sites: home)."""
        require(isinstance(time_limit_s, (int, float)) and time_limit_s > 0, "time_limit_s", "must be > 0")
        require(isinstance(mip_gap, (int, float)) and 0 <= mip_gap < 1, "mip_gap", "must be in [0, 1)")
        tick = time.perf_counter()
        run = Search(deadline=tick + time_limit_s, mip_gap=mip_gap, threads=threads,
                     details={"iterations": 0, "lp_s": 0.0, "pricing_s": 0.0, "mip_s": 0.0})
        reason = self._infeasible_reason()
        if reason:
            return self._result(run, tick, time_limit_s, status="infeasible", reason=reason)
        master = MasterLP(self.data, threads)
        fitting = self._first_columns(master, run, self._starts(start, warm_start))
        start_usd = run.incumbent[1] if run.incumbent else None
        converged = self._column_generation(master, run, tick + PATH_SHARE * time_limit_s)
        pattern = None
        if run.prices is not None and run.open:
            pattern = self._patterns(master, run, fitting, tick + PATTERN_SHARE * time_limit_s)
        if pattern is not None and run.open:
            self._pattern_primal(pattern, run)
        elif run.open:
            self._integer_master(master.columns, run, INTEGER_SHARE, max(mip_gap, INTEGER_MIN_GAP))
        if run.incumbent is not None and run.open:
            run.incumbent = self.best_responses(*run.incumbent, run.deadline)
        if run.incumbent is not None and run.open and run.closing is not None:
            self._close(run)
        if not run.from_patterns and run.incumbent is not None and run.open:
            self._path_branch(master, run)
        if run.incumbent is not None and run.open:
            self.neighbourhood(master.columns, run)
        if run.incumbent is None:
            return self._unsolved(master, run, tick, time_limit_s, converged)
        return self._result(run, tick, time_limit_s, start_objective_usd=start_usd)

    def _first_columns(self, master: MasterLP, run: Search, starts: list[Paths]) -> list[Paths]:
        """The starts' paths as columns (the fitting ones as incumbents), and a first column for every job; returns the
        fitting starts."""
        fitting = []
        for paths in starts:
            for j, path in enumerate(paths):
                master.add(make_column(self.data.graphs[j], j, path))
            if self.data.fits(paths):
                fitting.append(paths)
                run.offer(paths, data=self.data)
        for j, (graph, search) in enumerate(zip(self.data.graphs, self.searches, strict=True)):
            if not any(c.job == j for c in master.columns):
                master.add(make_column(graph, j, search.cheapest(self._zero(j))[0].path))
        return fitting

    def _column_generation(self, master: MasterLP, run: Search, until: float) -> bool:
        """The path master's column generation (one iteration at least: a bound); whether it converged."""
        details = run.details
        while details["iterations"] == 0 or time.perf_counter() < until:
            t0 = time.perf_counter()
            prices = master.solve()
            details["lp_s"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            cheapest, added = price(master, self.searches, prices, COLUMNS_PER_JOB)
            details["pricing_s"] += time.perf_counter() - t0
            details["iterations"] += 1
            bound = lagrangian_bound(master, prices, cheapest)
            if bound > run.bound:
                run.raise_bound(bound, "column-generation")
                run.prices = prices
                run.closing = ([stage_costs(g, prices.gpu, prices.load) for g in self.data.graphs], cheapest, bound)
            run.offer(rounding(master.fractional(), len(self.data.graphs)), data=self.data)
            if added == 0:
                details.update(columns=len(master.columns), converged=True, lp_value_usd=float(master.value))
                return True
            if not run.open:
                break
        details.update(columns=len(master.columns), converged=False, lp_value_usd=float(master.value))
        return False

    def _integer_master(self, columns: Sequence[Column], run: Search, share: float, mip_gap: float) -> None:
        """The integer master over ``columns`` (exact costs) from the incumbent, for ``share`` of the time left."""
        t0 = time.perf_counter()
        out = integer_master(self.data, columns, time_limit_s=share * run.left(), mip_gap=mip_gap,
                             threads=run.threads, start=run.incumbent[0] if run.incumbent else None)
        run.details["mip_s"] += time.perf_counter() - t0
        if out.paths is not None:
            run.details["integer_master_usd"] = self.data.objective_usd(out.paths)
            run.offer(out.paths, data=self.data)

    def best_responses(self, paths: Paths, value: float, deadline: float) -> tuple[Paths, float]:
        """Local search: each job in turn takes its exact best response with the others fixed."""
        paths = list(paths)
        improved = True
        while improved and time.perf_counter() < deadline:
            improved = False
            for j, search in enumerate(self.searches):
                found = search.cheapest(exact_stage_costs(self.data, j, paths))
                if not found:
                    continue
                trial = paths[:j] + [found[0].path] + paths[j + 1:]
                if not self.data.fits(trial):
                    continue
                trial_value = self.data.objective_usd(trial)
                if trial_value < value - REDUCED_COST_TOL_USD:
                    paths, value, improved = trial, trial_value, True
        return paths, value

    def _patterns(self, master: MasterLP, run: Search, fitting: list[Paths], until: float):
        """The pattern master (:mod:`oracle.patterns`) from the path master's columns and best prices, its bound kept
        when stronger; the master and its outcome, or None (no start fits, too many patterns, the clock)."""
        from oracle.patterns import PatternMaster, column_generation, prices_from

        t0 = time.perf_counter()
        if not fitting and run.incumbent is not None:  # no start fits (a grid call): the incumbent seeds the patterns
            fitting = [run.incumbent[0]]
        if not fitting or time.perf_counter() >= until:
            run.details["patterns"] = "no start fits" if not fitting else "no time"
            return None
        try:
            pm = PatternMaster(self.data, run.threads)
        except ValueError as error:
            run.details["patterns"] = str(error)
            return None
        for column in master.columns:
            pm.add(column)
        for paths in fitting:
            pm.add_patterns_of(paths)
        out = column_generation(pm, self.searches, prices_from(pm, run.prices.gpu, run.prices.load), until)
        run.details.update(pattern_iterations=out.iterations, pattern_converged=out.converged,
                           pattern_bound_usd=out.bound, pattern_columns=len(pm.columns), patterns_added=pm.n_patterns,
                           pattern_s=time.perf_counter() - t0)
        for column in pm.columns:
            master.add(column)
        if out.bound > run.bound:
            run.raise_bound(out.bound, "pattern-column-generation")
            run.closing = ([pm.path_costs(j, out.prices) for j in range(len(self.data.graphs))], out.cheapest,
                           out.bound)
            run.from_patterns = True
        return pm, out

    def _pattern_primal(self, pattern, run: Search) -> None:
        """Schedules from the pattern master: its LP's rounding, the dives, its branch and price (which may raise the
        bound), then the integer master over its near columns and the dives' paths."""
        from oracle.pattern_search import BranchNode, branch_bound, release, stage_dive

        pm, out = pattern
        data, t0 = self.data, time.perf_counter()
        rounded = rounding(pm.fractional(), len(data.graphs))
        if rounded is not None and data.fits(rounded):
            run.offer(*self.best_responses(rounded, data.objective_usd(rounded), run.deadline))
        reduced = np.asarray(pm.h.getSolution().col_dual, dtype=float)
        near = [c for c, i in zip(pm.columns, pm.path_index, strict=True) if reduced[i] <= PATTERN_KEEP_USD]
        n_before, dive_end = len(pm.columns), t0 + PATTERN_DIVE_SHARE * run.left()
        rng, runs = np.random.default_rng(DIVE_SEED), []
        while time.perf_counter() < dive_end and len(runs) < MAX_DIVES and run.open:
            if runs:
                release(pm)
            dived, info = stage_dive(pm, self.searches, dive_end, rng if runs else None, DIVE_TOP,
                                     DIVE_FIX_FLOW if runs else 1.0 - 1e-7)
            runs.append(dict(info))
            if dived is not None:
                value = data.objective_usd(dived)
                best = self.best_responses(dived, value, run.deadline)
                runs[-1].update(usd=value, local_usd=best[1])
                run.offer(*best)
        run.details.update(pattern_dives=runs, pattern_dive_s=time.perf_counter() - t0)
        share = PATTERN_BRANCH_SHARE * run.left()
        if run.open and share >= PATTERN_BRANCH_MIN_S:
            release(pm)
            upper = run.incumbent[1] if run.incumbent is not None else np.inf
            tree: dict[str, Any] = {}
            bound, schedules = branch_bound(pm, self.searches, BranchNode((), out.bound, out.prices), upper,
                                            time.perf_counter() + share, tree,
                                            stop_usd=upper - max(run.mip_gap * abs(upper), MIP_ABS_GAP_USD))
            for paths in schedules:
                if data.fits(paths):
                    run.offer(*self.best_responses(paths, data.objective_usd(paths), run.deadline))
            run.raise_bound(bound, "pattern-branch-and-price")
            run.details.update(pattern_branch_nodes=tree["nodes"], pattern_branch_bound_usd=bound)
        near += pm.columns[n_before:]
        if run.incumbent is not None:
            near = unique_columns(near + [make_column(data.graphs[j], j, p) for j, p in enumerate(run.incumbent[0])])
        run.details["integer_columns"] = len(near)
        if run.open:
            self._integer_master(near, run, PATTERN_INTEGER_SHARE, max(run.mip_gap, INTEGER_MIN_GAP))
        run.details["pattern_primal_s"] = time.perf_counter() - t0

    def _enumerated(self, run: Search, costs: Sequence[np.ndarray], thresholds: Sequence[float],
                    start: Paths | None = None):
        """The integer master (gap 0) over every path of each job that costs at most its threshold at ``costs`` (and the
        ``start``'s paths); None when the paths are too many (:data:`MAX_CLOSING_COLUMNS`,
        :data:`MAX_ENUMERATED_LABELS`) or the clock runs out."""
        columns: list[Column] = []
        for j, (graph, search) in enumerate(zip(self.data.graphs, self.searches, strict=True)):
            found = search.enumerate(costs[j], thresholds[j], MAX_ENUMERATED_LABELS, run.deadline)
            if found is None or len(columns) + len(found) > MAX_CLOSING_COLUMNS:
                run.details["enumeration"] = f"gave up at job {graph.name} (too many paths, or the clock)"
                return None
            columns += [make_column(graph, j, p.path) for p in found]
        run.details["enumerated_columns"] = len(columns)
        if run.left() <= 0:
            return None
        columns += [make_column(self.data.graphs[j], j, path) for j, path in enumerate(start or [])]
        t0 = time.perf_counter()
        out = integer_master(self.data, unique_columns(columns), time_limit_s=TIME_MARGIN_SHARE * run.left(),
                             mip_gap=0.0, start=start, threads=run.threads)
        run.details["mip_s"] += time.perf_counter() - t0
        return out

    def _close(self, run: Search) -> None:
        """Every path within the gap at the best Lagrangian prices, and the integer master over them: its optimum is the
        optimum (a schedule costs at least the bound plus its paths' excesses). Gives up when too many."""
        costs, cheapest, lagrangian = run.closing
        out = self._enumerated(run, costs, [c + run.incumbent[1] - lagrangian for c in cheapest], run.incumbent[0])
        if out is None or out.status != "optimal" or out.paths is None or not self.data.fits(out.paths):
            return
        run.offer(out.paths, data=self.data)
        run.raise_bound(run.incumbent[1], "enumeration")

    def _path_branch(self, master: MasterLP, run: Search) -> None:
        """The path master's branch and price (:mod:`oracle.branching`) from the column generation's bound."""
        from oracle.branching import BranchAndPrice

        t0 = time.perf_counter()
        tree = BranchAndPrice(self.data, self.searches, master.columns, run.threads)
        run.incumbent, bound = tree.run(run.bound, run.incumbent, t0 + BRANCH_SHARE * run.left(), run.mip_gap,
                                        run.details)
        run.raise_bound(bound, "branch-and-price")
        run.details.update(branch_s=time.perf_counter() - t0, branch_bound_usd=bound)
        for column in tree.pool[len(master.columns):]:
            master.add(column)

    def neighbourhood(self, columns: Sequence[Column], run: Search) -> None:
        """Large-neighbourhood search for the time left: per job, every path within δ of its exact best response to the
        incumbent's other jobs joins the columns, the integer master recombines them from the incumbent, best responses
        polish; δ doubles after a round that improves nothing."""
        data, pool, delta, rounds = self.data, list(columns), NEIGHBOURHOOD_START_USD, 0
        stop_usd = run.bound + run.mip_gap * abs(run.bound)
        while run.left() > 1.0 and run.incumbent[1] > stop_usd:
            rounds += 1
            for j, search in enumerate(self.searches):
                costs = exact_stage_costs(data, j, run.incumbent[0])
                found = search.cheapest(costs)
                if found:
                    near = search.enumerate(costs, found[0].cost + delta, MAX_ENUMERATED_LABELS, run.deadline)
                    pool += [make_column(data.graphs[j], j, p.path) for p in (near or found)[:NEIGHBOURHOOD_COLUMNS]]
            pool = unique_columns(pool)
            out = integer_master(data, pool, time_limit_s=max(0.5, INTEGER_SHARE * run.left()),
                                 mip_gap=max(1e-6, INTEGER_MIN_GAP / 10), start=run.incumbent[0], threads=run.threads)
            before = run.incumbent[1]
            if out.paths is not None and data.fits(out.paths):
                run.offer(*self.best_responses(out.paths, data.objective_usd(out.paths), run.deadline))
            if run.incumbent[1] >= before - REDUCED_COST_TOL_USD:
                delta *= 2
        run.details.update(neighbourhood_rounds=rounds, neighbourhood_columns=len(pool))

    # ------------------------------------------------------------------ infeasibility and the answer

    def _unsolved(self, master: MasterLP, run: Search, tick: float, time_limit_s: float,
                  converged: bool) -> OracleResult:
        """No schedule found: prove infeasibility (phase one, or every path of a tiny instance), or say why not."""
        if converged and master.slack_gpus() + master.slack_mw() > 0 and self._phase_one(run):
            calls = " or more load than the grid calls allow" if self.inst.grid_calls else ""
            return self._result(run, tick, time_limit_s, status="infeasible", reason=(
                f"the jobs' targets and windows need more GPUs than the pools leave them{calls} (proved by the "
                "relaxation: a phase-one column generation)"))
        n = len(self.data.graphs)
        out = self._enumerated(run, [self._zero(j) for j in range(n)], [np.inf] * n)
        if out is not None and out.status == "infeasible":
            return self._result(run, tick, time_limit_s, status="infeasible", reason=(
                "no combination of the jobs' paths that meet their targets in their windows fits the pools and the "
                "grid calls (proved by enumerating every path)"))
        if out is not None and out.status == "optimal" and out.paths is not None and self.data.fits(out.paths):
            run.offer(out.paths, data=self.data)
            run.raise_bound(run.incumbent[1], "enumeration")
            return self._result(run, tick, time_limit_s)
        return self._result(run, tick, time_limit_s,
                            reason=f"time limit of {time_limit_s:g} s reached before any schedule was found")

    def _phase_one(self, run: Search) -> bool:
        """Minimise the GPUs beyond the pools and the MW beyond the calls over the convex hulls of the jobs' paths: a
        positive Lagrangian bound proves that no schedule fits."""
        master = MasterLP(self.data, run.threads, phase_one=True)
        for j, (graph, search) in enumerate(zip(self.data.graphs, self.searches, strict=True)):
            master.add(make_column(graph, j, search.cheapest(self._zero(j))[0].path))
        while run.left() > 0:
            prices = master.solve()
            cheapest, added = price(master, self.searches, prices, COLUMNS_PER_JOB, own=False)
            if lagrangian_bound(master, prices, cheapest) > INFEASIBILITY_GPUS:
                return True
            if added == 0 or master.value <= INFEASIBILITY_GPUS:
                return False
        return False

    def _result(self, run: Search, tick: float, time_limit_s: float, status: str = "", reason: str = "",
                start_objective_usd: float | None = None) -> OracleResult:
        common = dict(method="decomposition", formulation="decomposition", build_seconds=self.build_seconds,
                      solve_seconds=time.perf_counter() - tick, details=run.details,
                      start_objective_usd=start_objective_usd)
        self.build_seconds = 0.0  # counted once
        if run.incumbent is None:
            return answer(self.inst, None, None, run.bound if status != "infeasible" else None, run.mip_gap,
                          status=status, reason=reason, **common)
        paths, value = run.incumbent
        if not reason and run.open:
            gap = relative_gap(value, run.bound)
            reason = (f"time limit of {time_limit_s:g} s reached with a gap of {gap:.2e}" if run.left() <= 0 else
                      f"gap of {gap:.2e} left open: the closing step could not close it (too many paths within the "
                      "gap, or its integer master did not finish) and the branch and price ended without closing it")
        return answer(self.data.replay_instance(paths), self.data.schedule(paths), self.data.site_rows(paths),
                      run.bound, run.mip_gap, objective_usd=value, reason=reason, proof=run.proof, **common)

