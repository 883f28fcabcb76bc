"""The sites oracle by decomposition (issue 14): column generation over site-indexed job paths.

The direct MILP of :mod:`oracle.sites` has the textbook LP bound (~2.5 % under the optimum on sites3). This
oracle reuses the fleet oracle's Dantzig-Wolfe machinery (:mod:`oracle.fleet_master`, :mod:`oracle.fleet_pricing`)
on the sites graphs of :mod:`oracle.sites_graph`: a job's column is a path of (site, choice) states (moves only at
checkpoints, paying transfer + restart), the master has per-site capacity rows and per-site/per-slot cost pieces
(the exact convex slot cost of each site), and a job's convexity row.

1. **column generation**: restricted master LP, exact label-search pricing; at every iteration the Lagrangian
   dual at the LP's prices is a proven lower bound (the best one is kept);
1b. **pattern master** (:mod:`oracle.sites_patterns`, on by default): from the path master's columns and best
   prices, a master whose site costs are exact per (site, block) pattern of the jobs' states, linked to the path
   columns; its Lagrangian bound is far stronger (case day: $765.38 against $762.96; the direct MILP's bound after
   1,500 s was $764.35). The path master's LP slot cost is also its convex envelope over the reachable loads
   (:func:`oracle.fleet_master.hull_pieces`);
2. **primal**: the baseline at home, each LP's rounding; with the pattern master, price-and-fix dives on its LP
   (:func:`oracle.sites_patterns.stage_dive`, by (job, stage), repeated with seeded draws; case day $766.90 →
   $766.20), whose best schedule starts the integer master over the near columns and the dives' paths; without
   it, the integer master over every generated column (exact costs); then best responses (each job's exact
   cheapest path with the others fixed); optionally the path master's dive (price and fix) first;
3. **closing**: as the fleet oracle, every path within the gap at the best bound's prices is enumerated and the
   integer master solved over them: its optimum is then proven (proof ``enumeration``); optionally
   (``restricted``) reduced-cost fixing at those prices and the direct MILP over the nodes left
   (:mod:`oracle.sites_branch`, proof ``reduced-cost-fixing``);
4. **branch and price** (on by default): with the pattern master, after the dives, best-first over (job, stage,
   state) rules on the pattern master (:func:`oracle.sites_patterns.branch_bound`, ``PATTERN_BRANCH_SHARE`` of the
   time left; case day $765.3758 → $765.4512 after one split); without it, :mod:`oracle.sites_bp` over (job,
   segment, site) decisions from the column generation's columns. Its least open bound, when higher, is the bound
   (proof ``pattern-branch-and-price`` / ``branch-and-price`` if it closes the gap); then the large-neighbourhood
   search for the rest.

Measured on sites3 (docs/sites.md): the column generation's bound is the strongest part (0.3 % above the direct
MILP's best bound after 120 s); neither the dive nor the restricted MILP beat the integer master + best
responses, so both are off by default.

The answer is a :class:`~oracle.sites.SitesOracleResult` (formulation ``sites-decomposition``); its objective
is asserted equal to :func:`aidc_env.simulator.simulate`'s replay of the schedule and sites.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from aidc_env.baselines import fixed_schedule
from aidc_env.errors import require
from aidc_env.instance import Instance
from aidc_env.metrics import SimulationResult
from aidc_env.schedule import validate_schedule
from aidc_env.simulator import simulate
from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_TIME_LIMIT_S
from oracle.fleet_master import Column, MasterLP, integer_master, lagrangian_bound, make_column
from oracle.fleet_pricing import exact_stage_costs, stage_costs
from oracle.result import MIP_ABS_GAP_USD, OBJECTIVE_ATOL_USD, OBJECTIVE_RTOL, closed, relative_gap
from oracle.sites import SitesOracleResult, with_home
from oracle.sites_bp import BranchAndPrice
from oracle.sites_branch import fixings, restricted_milp
from oracle.sites_graph import SitesData, network_of, sites_data
from oracle.sites_patterns import (INTEGRAL_FLOW, BranchNode, LinkPrices, PatternMaster, branch_bound,
                                   column_generation, lp_rounding, pattern_dive, prices_from, release, stage_dive)
from oracle.sites_pricing import SiteLabelSearch

COLUMNS_PER_JOB = 6
"""Paths a job may add to the master per iteration (its cheapest, one per end state)."""
REDUCED_COST_TOL_USD = 1e-6
"""A path enters the master when it costs at least this much less than its job's convexity dual."""
COLUMN_GENERATION_SHARE = 0.6
"""Share of the time limit the column generation may use before the primal phase takes over."""
INTEGER_SHARE = 0.8
"""Share of the time left that the integer master over all generated columns may use. Its LP bound is the column
generation's, so it never proves and runs to its limit; capping it at 15 % of the limit (2026-12-02) made its
schedule much worse under load ($793.96 instead of $770.08 on the case day at load 13): not capped."""
PATH_SHARE = 0.25
"""With the pattern master on, the path master's column generation stops at this share of the time limit if it has
not converged (its columns and best prices only start the pattern master)."""
PATTERN_SHARE = 0.7
"""Share of the time limit by which the pattern master's column generation (:mod:`oracle.sites_patterns`) must end
(it starts from the path master's columns and best prices)."""
PATTERN_INTEGER_SHARE = 0.6
"""After the pattern master, share of the time left that the integer master (:func:`oracle.fleet_master.
integer_master`, exact costs) over its near columns may use; the closing step and the neighbourhood search get the
rest."""
PATTERN_KEEP_USD = 0.5
"""... its near columns: the paths whose reduced cost in the pattern LP's last solution is at most this ($; a
heuristic restriction, the closing step is what proves). Case day, load 13: 623 of 1,554 columns, $767.80 in 40 s
(767.51 after best responses). The integer *pattern* master (:func:`oracle.sites_patterns.integer_patterns`) is
restricted to the generated patterns and found nothing better than the baseline there: not used."""
PATTERN_DIVE_SHARE = 0.75
"""After the pattern master, share of the time left that the pattern dive (:func:`oracle.sites_patterns.
pattern_dive`, price and fix on the pattern LP) may use; its schedule then starts the integer master."""
MAX_DIVES = 20
"""At most this many stage dives (the first by most flow, the others drawn among the ``DIVE_TOP`` fixings of most
flow, each from the released pattern LP)."""
DIVE_TOP = 3
DIVE_FIX_FLOW = 0.9
"""The diversified dives also fix every (job, stage) with at least this LP flow on one state (faster dives)."""
DIVE_SEED = 0
"""Seed of the diversified dives' draws (the oracle stays deterministic for a given timing)."""
PATTERN_BRANCH_SHARE = 0.5
"""After the dives, share of the time left that the branch and price on the pattern master (:func:`oracle.
sites_patterns.branch_bound`) may use to raise the bound; the integer master then gets its share of the rest.
Case day (load 7): the root's $765.3758 → $765.4512 after its first split (2 nodes), $765.53 after 8."""
PATTERN_BRANCH_MIN_S = 5.0
"""... and runs only when that share is at least this many seconds (a node takes ~2-12 s on the case day, by load;
with a 4-s limit the integer master's time matters more: the CLI test at K = 4 found its move 1 time in 3 with the
branch, 3 in 3 without, load 4)."""
BRANCH_SHARE = 0.6
"""Share of the time left after the closing step that the branch and price (:mod:`oracle.sites_bp`) may use to
raise the bound; the neighbourhood search gets the rest."""
INTEGER_MIN_GAP = 1e-4
"""The integer master over the generated columns looks for a good schedule, not a proof (the closing step
proves): it stops at this relative gap at least."""
TIME_MARGIN_SHARE = 0.9
"""The closing integer master gets this share of the time left (building and reading take the rest)."""
NEIGHBOURHOOD_START_USD = 1.0
"""First δ ($) of the large-neighbourhood search (paths within δ of a job's exact best response)."""
NEIGHBOURHOOD_COLUMNS = 300
"""Paths per job and round the neighbourhood search adds (the cheapest first)."""
DIVE_ITERATIONS = 8
"""Column generation rounds of the dive between two fixings."""
MAX_ENUMERATED_LABELS = 200_000
"""The closing step gives up when a job's enumeration holds more labels than this at a stage."""
MAX_CLOSING_COLUMNS = 20_000
"""... or when all jobs' enumerated paths exceed this many columns."""

Paths = list[np.ndarray]


class SitesDecomposition:
    """The decomposition oracle of one sites instance (see the module docstring)."""

    formulation = "sites-decomposition"

    def __init__(self, inst: Instance, *, placement: str = "move", allow_pause: bool = True) -> None:
        tick = time.perf_counter()
        self.inst = inst
        self.placement = placement
        self.data: SitesData = sites_data(inst, placement, allow_pause)
        self.searches = [SiteLabelSearch(graph) for graph in self.data.graphs]
        self.build_seconds = time.perf_counter() - tick

    # ------------------------------------------------------------------ helpers

    def replay_instance(self, paths: Sequence[np.ndarray]) -> Instance:
        """The instance the simulator replays: with "stay"/"free" each job's checkpoint starts at its first site."""
        if self.placement in ("stay", "free") and self.inst.network is not None:
            return with_home(self.inst, [row[0] for row in self.data.site_rows(paths)])
        return self.inst

    def _candidate(self, schedule: Sequence[Sequence[int]], sites: Sequence[Sequence[int]]) -> Paths | None:
        try:
            paths = self.data.paths_of(schedule, sites)
        except KeyError:
            return None
        return paths if self.data.tokens_ok(paths) else None

    def _starts(self, start: tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]] | None) -> list[Paths]:
        """The baseline at each job's home site, and a given (schedule, sites) start, when they are paths."""
        net = network_of(self.inst)
        out = []
        home = [[net.home[j]] * job.segments for j, job in enumerate(self.inst.jobs)]
        for schedule, sites in ((fixed_schedule(self.inst), home), *((start,) if start is not None else ())):
            paths = self._candidate(schedule, sites)
            if paths is not None:
                out.append(paths)
        return out

    def _price(self, master: MasterLP, prices) -> tuple[list[float], int]:
        cheapest, added = [], 0
        for j, (graph, search) in enumerate(zip(self.data.graphs, self.searches, strict=True)):
            costs = stage_costs(graph, prices.gpu, prices.load)
            known = min(float(costs[np.arange(graph.n_stages), c.path].sum()) for c in master.columns if c.job == j)
            found = search.cheapest(costs, upper_usd=known)
            cheapest.append(min([known] + [p.cost for p in found[:1]]))
            for p in found[:COLUMNS_PER_JOB]:
                if p.cost < prices.convexity[j] - REDUCED_COST_TOL_USD:
                    added += master.add(make_column(graph, j, p.path))
        return cheapest, added

    def dive(self, columns: Sequence[Column], deadline: float, threads: int | None,
             details: dict[str, Any]) -> tuple[Paths, float] | None:
        """A diving heuristic (price and fix): re-optimise the master LP with column generation, fix the job whose
        column has the largest weight to that column, repeat until every job is fixed; None if the fixed columns
        leave no room (capacity slack) or the clock runs out."""
        data = self.data
        master = MasterLP(data, threads)
        for column in columns:
            master.add(column)
        fixed: dict[int, int] = {}  # job -> index of its fixed column in master.columns
        capacity = np.array([pool.capacity_gpus for pool in data.pools], dtype=float)
        used = np.zeros_like(capacity)
        while len(fixed) < len(data.graphs):
            if len(fixed) == len(data.graphs) - 1:  # the last job: its exact best response to the fixed ones
                last = next(j for j in range(len(data.graphs)) if j not in fixed)
                others = [master.columns[fixed[j]].path if j in fixed else
                          np.full(data.graphs[j].n_stages, data.graphs[j].initial_state) for j in range(len(data.graphs))]
                found = self.searches[last].cheapest(exact_stage_costs(data, last, others))
                if not found:
                    details["dive"] = "the last job has no path that fits"
                    return None
                master.add(make_column(data.graphs[last], last, found[0].path))
                fixed[last] = next(i for i, c in enumerate(master.columns)
                                   if c.job == last and np.array_equal(c.path, found[0].path))
                break
            if time.perf_counter() >= deadline:
                details["dive"] = "time"
                return None
            for _ in range(DIVE_ITERATIONS):
                prices = master.solve()
                added = 0
                for j, (graph, search) in enumerate(zip(data.graphs, self.searches, strict=True)):
                    if j in fixed:
                        continue
                    costs = stage_costs(graph, prices.gpu, prices.load)
                    for p in search.cheapest(costs)[:COLUMNS_PER_JOB]:
                        if p.cost < prices.convexity[j] - REDUCED_COST_TOL_USD:
                            added += master.add(make_column(graph, j, p.path))
                if not added or time.perf_counter() >= deadline:
                    break
            weights = np.asarray(master.h.getSolution().col_value, dtype=float)[master.first_column:]
            best_j, best_i, best_w = -1, -1, -1.0
            for i, (column, w) in enumerate(zip(master.columns, weights, strict=True)):
                if column.job not in fixed and w > best_w and np.all(used + column.gpus <= capacity):
                    best_j, best_i, best_w = column.job, i, w
            if best_j < 0:
                details["dive"] = f"no column fits after fixing {len(fixed)} jobs"
                return None
            fixed[best_j] = best_i
            used = used + master.columns[best_i].gpus
            for i, column in enumerate(master.columns):
                if column.job == best_j and i != best_i:
                    master.h.changeColBounds(master.first_column + i, 0.0, 0.0)
        paths = [master.columns[fixed[j]].path for j in range(len(data.graphs))]
        details["dive_columns"] = len(master.columns)
        if not data.fits(paths):
            details["dive"] = "does not fit"
            return None
        self.dive_columns = master.columns
        return paths, data.objective_usd(paths)

    def neighbourhood(self, columns: Sequence[Column], incumbent: tuple[Paths, float], deadline: float,
                      threads: int | None, details: dict[str, Any], stop_usd: float = -np.inf
                      ) -> tuple[Paths, float]:
        """Large-neighbourhood search for the time the closing step left: per job, every path within δ of its
        exact best response to the incumbent's other jobs joins the columns, the integer master (exact costs)
        recombines them from the incumbent, best responses polish; δ doubles after a round that improves nothing."""
        data = self.data
        pool = list(columns)
        delta = NEIGHBOURHOOD_START_USD
        rounds = 0
        while time.perf_counter() < deadline - 1.0 and incumbent[1] > stop_usd:
            rounds += 1
            for j, search in enumerate(self.searches):
                costs = exact_stage_costs(data, j, incumbent[0])
                found = search.cheapest(costs)
                if not found:
                    continue
                near = search.enumerate(costs, found[0].cost + delta, MAX_ENUMERATED_LABELS, deadline)
                for p in (near or found)[:NEIGHBOURHOOD_COLUMNS]:
                    pool.append(make_column(data.graphs[j], j, p.path))
            pool = _unique(pool)
            run = integer_master(data, pool, time_limit_s=max(0.5, INTEGER_SHARE * (deadline - time.perf_counter())),
                                 mip_gap=max(1e-6, INTEGER_MIN_GAP / 10), start=incumbent[0], threads=threads)
            improved = False
            if run.paths is not None:
                value = data.objective_usd(run.paths)
                candidate = self.best_responses(run.paths, value, deadline)
                if candidate[1] < incumbent[1] - REDUCED_COST_TOL_USD:
                    incumbent, improved = candidate, True
            if not improved:
                delta *= 2
        details["neighbourhood_rounds"] = rounds
        details["neighbourhood_columns"] = len(pool)
        return incumbent

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

    # ------------------------------------------------------------------ solving

    def solve(self, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S, mip_gap: float = DEFAULT_MIP_GAP,
              threads: int | None = None, dive: bool = False, restricted: bool = False, neighbourhood: bool = True,
              branch: bool = True, patterns: bool = True, dives: str = "stage",
              start: tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]] | None = None) -> SitesOracleResult:
        """Column generation, integer master, local search, closing (module docstring). ``dive``: also run the
        diving heuristic after the column generation (measured worse than the integer master on sites3: off);
        ``restricted``: then reduced-cost fixing and the direct MILP (:mod:`oracle.sites_branch`; on sites3 it fixed
        260 of 1,452 mode binaries and its bound stayed under the column generation's: off); ``dives``: the dives
        on the pattern LP, "stage" (repeated :func:`~oracle.sites_patterns.stage_dive`), "job" (one
        :func:`~oracle.sites_patterns.pattern_dive`) or "off"."""
        require(isinstance(time_limit_s, (int, float)) and time_limit_s > 0, "time_limit_s", "must be > 0")
        require(isinstance(mip_gap, (int, float)) and 0 <= mip_gap < 1, "mip_gap", "must be in [0, 1)")
        require(dives in ("stage", "job", "off"), "dives", "must be 'stage', 'job' or 'off'")
        tick = time.perf_counter()
        deadline = tick + time_limit_s
        data = self.data
        details: dict[str, Any] = {"iterations": 0, "lp_s": 0.0, "pricing_s": 0.0, "mip_s": 0.0, "placement":
                                   self.placement}
        master = MasterLP(data, threads)
        incumbent: tuple[Paths, float] | None = None
        for paths in self._starts(start):
            for j, path in enumerate(paths):
                master.add(make_column(data.graphs[j], j, path))
            if data.fits(paths):
                value = data.objective_usd(paths)
                if incumbent is None or value < incumbent[1]:
                    incumbent = (paths, value)
        start_objective = incumbent[1] if incumbent else None
        for j, (graph, search) in enumerate(zip(data.graphs, self.searches, strict=True)):
            if not any(c.job == j for c in master.columns):
                found = search.cheapest(np.zeros((graph.n_stages, graph.n_states)))
                if not found:
                    return self._answer(None, None, tick, details, start_objective, time_limit_s, mip_gap,
                                        status="infeasible")
                master.add(make_column(graph, j, found[0].path))
        best_bound, best_prices, best_cheapest = -np.inf, None, None
        cg_deadline = tick + (PATH_SHARE if patterns else COLUMN_GENERATION_SHARE) * time_limit_s
        converged = False
        while details["iterations"] == 0 or time.perf_counter() < cg_deadline:  # one iteration at least: a bound
            t0 = time.perf_counter()
            prices = master.solve()
            details["lp_s"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            cheapest, added = self._price(master, prices)
            details["pricing_s"] += time.perf_counter() - t0
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
        details["columns"] = len(master.columns)
        details["converged"] = converged
        details["lp_value_usd"] = float(master.value)
        details["cg_s"] = time.perf_counter() - tick
        proof = "column-generation"
        pattern_costs, pattern_master = None, None
        if patterns and best_prices is not None and not (incumbent is not None and
                                                         closed(incumbent[1], best_bound, mip_gap)):
            t0 = time.perf_counter()
            found = self._patterns(master, best_prices, tick + PATTERN_SHARE * time_limit_s, threads, start, details)
            details["pattern_s"] = time.perf_counter() - t0
            if found is not None:
                pattern_bound, pattern_costs, pattern_cheapest, pattern_master, pattern_prices = found
                for column in pattern_master.columns:
                    master.add(column)
                if pattern_bound > best_bound:
                    best_bound, proof = pattern_bound, "pattern-column-generation"
                else:
                    pattern_costs = None
        lagrangian_usd = best_bound  # the Lagrangian dual at the closing's prices (a tree's bound is not one)
        if dive and not (incumbent is not None and closed(incumbent[1], best_bound, mip_gap)):
            t0 = time.perf_counter()
            dived = self.dive(master.columns, deadline, threads, details)
            details["dive_s"] = time.perf_counter() - t0
            if dived is not None:
                details["dive_usd"] = dived[1]
                dived = self.best_responses(dived[0], dived[1], deadline)
                details["dive_local_usd"] = dived[1]
                if incumbent is None or dived[1] < incumbent[1]:
                    incumbent = dived
                for column in self.dive_columns[len(master.columns):]:
                    master.add(column)
        if pattern_master is not None and not (incumbent is not None and closed(incumbent[1], best_bound, mip_gap)):
            t0 = time.perf_counter()
            rounded = lp_rounding(pattern_master)
            if rounded is not None and data.fits(rounded):
                rounded = self.best_responses(rounded, data.objective_usd(rounded), deadline)
                details["pattern_rounding_usd"] = rounded[1]
                if incumbent is None or rounded[1] < incumbent[1]:
                    incumbent = rounded
            reduced = np.asarray(pattern_master.h.getSolution().col_dual, dtype=float)
            near = [c for c, i in zip(pattern_master.columns, pattern_master.path_index, strict=True)
                    if reduced[i] <= PATTERN_KEEP_USD]
            if dives != "off":
                t1 = time.perf_counter()
                n_before = len(pattern_master.columns)
                dive_end = t1 + PATTERN_DIVE_SHARE * (deadline - t1)
                rng = np.random.default_rng(DIVE_SEED)
                runs: list[dict[str, Any]] = []
                while time.perf_counter() < dive_end and len(runs) < MAX_DIVES and not (
                        incumbent is not None and closed(incumbent[1], best_bound, mip_gap)):
                    if dives == "job":
                        dived, dive_info = pattern_dive(pattern_master, self.searches, dive_end)
                    else:
                        if runs:
                            release(pattern_master)
                        dived, dive_info = stage_dive(pattern_master, self.searches, dive_end,
                                                      rng if runs else None, DIVE_TOP,
                                                      DIVE_FIX_FLOW if runs else INTEGRAL_FLOW)
                    runs.append({k: v for k, v in dive_info.items()})
                    if dived is not None:
                        value = data.objective_usd(dived)
                        dived = self.best_responses(dived, value, deadline)
                        runs[-1].update(usd=value, local_usd=dived[1])
                        if incumbent is None or dived[1] < incumbent[1]:
                            incumbent = dived
                    if dives == "job":
                        break
                details.update(pattern_dives=runs, pattern_dive_s=time.perf_counter() - t1)
                near += pattern_master.columns[n_before:]
            if branch and not (incumbent is not None and closed(incumbent[1], best_bound, mip_gap)) \
                    and PATTERN_BRANCH_SHARE * (deadline - time.perf_counter()) >= PATTERN_BRANCH_MIN_S:
                t1 = time.perf_counter()
                n_before = len(pattern_master.columns)
                release(pattern_master)
                upper = incumbent[1] if incumbent is not None else np.inf
                tree: dict[str, Any] = {}
                tree_bound, schedules = branch_bound(
                    pattern_master, self.searches, BranchNode((), pattern_bound, pattern_prices), upper,
                    t1 + PATTERN_BRANCH_SHARE * (deadline - t1), tree,
                    stop_usd=upper - max(mip_gap * abs(upper), MIP_ABS_GAP_USD))
                for paths in schedules:
                    if data.fits(paths):
                        found_paths = self.best_responses(paths, data.objective_usd(paths), deadline)
                        if incumbent is None or found_paths[1] < incumbent[1]:
                            incumbent = found_paths
                if tree_bound > best_bound:
                    best_bound, proof = tree_bound, "pattern-branch-and-price"
                near += pattern_master.columns[n_before:]
                details.update(pattern_branch_nodes=tree["nodes"], pattern_branch_bound_usd=tree_bound,
                               pattern_branch_s=time.perf_counter() - t1)
            if dives != "off" and incumbent is not None:
                near = _unique(near + [make_column(data.graphs[j], j, p) for j, p in enumerate(incumbent[0])])
            details["integer_columns"] = len(near)
            if not (incumbent is not None and closed(incumbent[1], best_bound, mip_gap)):
                run = integer_master(data, near, time_limit_s=PATTERN_INTEGER_SHARE * (deadline - time.perf_counter()),
                                     mip_gap=max(mip_gap, INTEGER_MIN_GAP), threads=threads,
                                     start=incumbent[0] if incumbent is not None and dives != "off" else None)
                if run.paths is not None:
                    value = data.objective_usd(run.paths)
                    details["integer_master_usd"] = value
                    if incumbent is None or value < incumbent[1]:
                        incumbent = (run.paths, value)
            details["mip_s"] += time.perf_counter() - t0
        elif not (incumbent is not None and closed(incumbent[1], best_bound, mip_gap)):
            t0 = time.perf_counter()
            run = integer_master(data, master.columns, time_limit_s=INTEGER_SHARE * (deadline - time.perf_counter()),
                                 mip_gap=max(mip_gap, INTEGER_MIN_GAP), start=incumbent[0] if incumbent else None,
                                 threads=threads)
            details["mip_s"] += time.perf_counter() - t0
            if run.paths is not None and (incumbent is None or data.objective_usd(run.paths) < incumbent[1]):
                incumbent = (run.paths, data.objective_usd(run.paths))
            details["integer_master_usd"] = run.objective_usd
        if incumbent is not None and not closed(incumbent[1], best_bound, mip_gap):
            incumbent = self.best_responses(incumbent[0], incumbent[1], deadline)
            details["after_local_search_usd"] = incumbent[1]
        if incumbent is not None and not closed(incumbent[1], best_bound, mip_gap) and best_prices is not None:
            if pattern_costs is not None:
                costs, cheapest = pattern_costs, pattern_cheapest
            else:
                costs = [stage_costs(g, best_prices.gpu, best_prices.load) for g in data.graphs]
                cheapest = best_cheapest
            # the gap at the Lagrangian dual of those prices, not at a tree's bound: the enumeration's proof needs it
            closing = self._close(costs, cheapest, lagrangian_usd, incumbent, deadline, threads, details)
            if closing is not None:
                incumbent, best_bound = closing
                proof = "enumeration"
        if branch and pattern_costs is None and incumbent is not None and not closed(incumbent[1], best_bound, mip_gap):
            t0 = time.perf_counter()
            tree = BranchAndPrice(data, self.searches, master.columns, threads)
            end = t0 + BRANCH_SHARE * (deadline - t0) if neighbourhood else deadline
            incumbent, tree_bound = tree.run(best_bound, incumbent, end, mip_gap, details)
            details["branch_s"] = time.perf_counter() - t0
            details["branch_bound_usd"] = tree_bound
            if tree_bound > best_bound:
                best_bound, proof = tree_bound, "branch-and-price"
            for column in tree.pool[len(master.columns):]:
                master.add(column)
        if neighbourhood and incumbent is not None and not closed(incumbent[1], best_bound, mip_gap):
            t0 = time.perf_counter()
            incumbent = self.neighbourhood(master.columns, incumbent, deadline, threads, details,
                                           stop_usd=best_bound + mip_gap * abs(best_bound))
            details["neighbourhood_s"] = time.perf_counter() - t0
            details["after_neighbourhood_usd"] = incumbent[1]
        if restricted and incumbent is not None and not closed(incumbent[1], best_bound, mip_gap) \
                and best_prices is not None and deadline - time.perf_counter() > 1.0:
            incumbent, best_bound, proof = self._restricted(best_prices, best_cheapest, best_bound, incumbent,
                                                            deadline, mip_gap, threads, details, proof)
        return self._answer(incumbent, best_bound, tick, details, start_objective, time_limit_s, mip_gap,
                            proof=proof)

    def _restricted(self, prices, cheapest: Sequence[float], bound: float, incumbent: tuple[Paths, float],
                    deadline: float, mip_gap: float, threads: int | None, details: dict[str, Any], proof: str
                    ) -> tuple[tuple[Paths, float], float, str]:
        """Reduced-cost fixing at the best bound's prices, then the direct MILP over what is left
        (:mod:`oracle.sites_branch`). Returns (incumbent, bound, proof)."""
        data = self.data
        t0 = time.perf_counter()
        costs = [stage_costs(g, prices.gpu, prices.load) for g in data.graphs]
        keep = fixings(data.graphs, self.searches, costs, cheapest, incumbent[1] - bound)
        details["kept_nodes"] = int(sum(int(k.sum()) for k in keep))
        details["nodes"] = int(sum(int(g.allowed.sum()) for g in data.graphs))
        start = (data.schedule(incumbent[0]), data.site_rows(incumbent[0]))
        result, counts = restricted_milp(self.inst, self.placement, data.graphs, keep, start,
                                         TIME_MARGIN_SHARE * (deadline - time.perf_counter()), mip_gap, threads)
        details.update(counts)
        details["restricted_milp_s"] = time.perf_counter() - t0
        if result.schedule is not None:
            paths = data.paths_of(result.schedule, result.sites)
            value = data.objective_usd(paths)
            if value < incumbent[1]:
                incumbent = (paths, value)
        if result.best_bound_usd is not None and np.isfinite(result.best_bound_usd):
            details["restricted_bound_usd"] = float(result.best_bound_usd)
            proven = min(incumbent[1], float(result.best_bound_usd))
            if proven > bound:
                bound, proof = proven, "reduced-cost-fixing"
        return incumbent, bound, proof

    def _patterns(self, master: MasterLP, prices, deadline: float, threads: int | None,
                  start: tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]] | None, details: dict[str, Any]
                  ) -> tuple[float, list[np.ndarray], list[float], PatternMaster, LinkPrices] | None:
        """The pattern master (:mod:`oracle.sites_patterns`) from the column generation's columns and prices:
        (its bound, each job's stage costs and least path cost at the bound's prices, the master), or None
        (no start fits, too many patterns, or the clock)."""
        data = self.data
        fitting = [paths for paths in self._starts(start) if data.fits(paths)]
        if not fitting or time.perf_counter() >= deadline:
            details["patterns"] = "no start fits" if not fitting else "no time"
            return None
        try:
            pm = PatternMaster(data, threads)
        except ValueError as error:
            details["patterns"] = str(error)
            return None
        for column in master.columns:
            pm.add(column)
        for paths in fitting:
            pm.add_patterns_of(paths)
        out = column_generation(pm, self.searches, prices_from(pm, prices.gpu, prices.load), deadline)
        details.update(pattern_iterations=out.iterations, pattern_converged=out.converged,
                       pattern_bound_usd=out.bound, pattern_lp_usd=out.lp_value, pattern_columns=len(pm.columns),
                       patterns_added=pm.n_patterns)
        costs = [pm.path_costs(j, out.prices) for j in range(len(data.graphs))]
        return out.bound, costs, out.cheapest, pm, out.prices

    def _close(self, costs: Sequence[np.ndarray], cheapest: Sequence[float], bound: float,
               incumbent: tuple[Paths, float], deadline: float, threads: int | None, details: dict[str, Any]
               ) -> tuple[tuple[Paths, float], float] | None:
        """Every path within the gap at the best bound's prices (``costs``: per job, its stage costs there;
        ``cheapest``: its least path cost), and the integer master over them: its optimum is the optimum (a
        schedule costs at least the bound plus its paths' excesses). None: gave up."""
        data = self.data
        gap_usd = incumbent[1] - bound
        columns: list[Column] = []
        for j, (graph, search) in enumerate(zip(data.graphs, self.searches, strict=True)):
            if time.perf_counter() >= deadline:
                return None
            found = search.enumerate(costs[j], cheapest[j] + gap_usd, MAX_ENUMERATED_LABELS, deadline)
            if found is None:
                details["closing"] = f"gave up at job {graph.name} (labels or time)"
                return None
            columns += [make_column(graph, j, p.path) for p in found]
            if len(columns) > MAX_CLOSING_COLUMNS:
                details["closing"] = f"more than {MAX_CLOSING_COLUMNS} paths within the gap"
                return None
        details["closing_columns"] = len(columns)
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return None
        for j, path in enumerate(incumbent[0]):
            columns.append(make_column(data.graphs[j], j, path))
        t0 = time.perf_counter()
        run = integer_master(data, _unique(columns), time_limit_s=TIME_MARGIN_SHARE * remaining, mip_gap=0.0,
                             start=incumbent[0], threads=threads)
        details["mip_s"] += time.perf_counter() - t0
        if run.status != "optimal" or run.paths is None:
            details["closing"] = f"integer master {run.status}"
            return None
        best = (run.paths, data.objective_usd(run.paths))
        if best[1] > incumbent[1]:
            best = incumbent
        return best, best[1]

    def _answer(self, incumbent: tuple[Paths, float] | None, bound: float | None, tick: float,
                details: dict[str, Any], start_objective: float | None, time_limit_s: float, mip_gap: float,
                status: str = "", proof: str = "") -> SitesOracleResult:
        inst, net = self.inst, network_of(self.inst)
        common = dict(build_seconds=self.build_seconds, solve_seconds=time.perf_counter() - tick,
                      case=inst.case_name, day=inst.day, job_names=tuple(job.name for job in inst.jobs),
                      site_names=net.names, start_objective_usd=start_objective, details=details,
                      formulation=self.formulation)
        if incumbent is None:
            return SitesOracleResult(status=status or "time_limit", objective_usd=None,
                                     best_bound_usd=None if bound is None or not np.isfinite(bound) else float(bound),
                                     gap=None, schedule=None, sites=None, result=None, **common)
        paths, objective = incumbent
        schedule, sites = self.data.schedule(paths), self.data.site_rows(paths)
        result = self.verify(paths, objective)
        objective = result.metrics.operating_cost_usd  # the simulator's replay (equal to the model's, checked)
        bound = float(min(bound, objective)) if bound is not None and np.isfinite(bound) else None
        optimal = closed(objective, bound, mip_gap)
        return SitesOracleResult(status="optimal" if optimal else "time_limit", objective_usd=objective,
                                 best_bound_usd=bound, gap=relative_gap(objective, bound), schedule=schedule,
                                 sites=sites, result=result, proof=proof if optimal else "", **common)

    def verify(self, paths: Sequence[np.ndarray], objective: float) -> SimulationResult:
        """The simulator's replay; AssertionError if the decomposition's objective disagrees (a bug)."""
        inst = self.replay_instance(paths)
        result = simulate(inst, validate_schedule(inst, self.data.schedule(paths), self.data.site_rows(paths)))
        replay = result.metrics.operating_cost_usd
        if abs(objective - replay) > OBJECTIVE_RTOL * max(abs(replay), 1.0) + OBJECTIVE_ATOL_USD:
            raise AssertionError(f"sites decomposition objective ${objective!r} != simulator replay ${replay!r}")
        if not result.metrics.feasible:
            raise AssertionError("the sites decomposition's schedule is infeasible in the simulator")
        return result


def _round(master: MasterLP, data: SitesData) -> tuple[Paths, float] | None:
    best: dict[int, tuple[float, np.ndarray]] = {}
    for column, weight in master.fractional():
        if column.job not in best or weight > best[column.job][0]:
            best[column.job] = (weight, column.path)
    if len(best) < len(data.graphs):
        return None
    paths = [best[j][1] for j in range(len(data.graphs))]
    return (paths, data.objective_usd(paths)) if data.fits(paths) else None


def _unique(columns: Sequence[Column]) -> list[Column]:
    seen, out = set(), []
    for column in columns:
        key = (column.job, column.path.tobytes())
        if key not in seen:
            seen.add(key)
            out.append(column)
    return out


def solve_sites_cg(inst: Instance, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S, mip_gap: float = DEFAULT_MIP_GAP,
                   placement: str = "move", threads: int | None = None,
                   start: tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]] | None = None) -> SitesOracleResult:
    """One call: the sites decomposition oracle of an instance."""
    return SitesDecomposition(inst, placement=placement).solve(time_limit_s=time_limit_s, mip_gap=mip_gap,
                                                               threads=threads, start=start)
