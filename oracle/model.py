"""The day oracle: build the MILP of a day once, solve it, re-solve it for other days, prices or tranches.

:func:`oracle.solve` is the one-call entry point; :class:`OracleModel` keeps the built model for sweeps::

    oracle = OracleModel(build_instance("2048"))          # build once (joint states, costs, Pyomo model)
    first = oracle.solve(time_limit_s=60)                  # -> OracleResult
    oracle.update(build_instance("2048", renewable_ratio=1.5))   # same structure: re-priced in place
    second = oracle.solve()                                 # HiGHS gets only the new objective

Every result is checked against the simulator: the model's objective of its schedule must equal
``simulate(schedule).metrics.operating_cost_usd`` to :data:`~oracle.result.OBJECTIVE_RTOL` (else AssertionError).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aidc_env.baselines import fixed_schedule, greedy_schedule
from aidc_env.errors import InputError, require
from aidc_env.instance import PAUSE, Instance, require_one_site
from aidc_env.simulator import Metrics, simulate
from oracle import labeling
from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_SOLVER, DEFAULT_TIME_LIMIT_S, FORMULATIONS, STATUSES
from oracle.data import MAX_JOINT_STATES, OracleData, joint_objective_usd, oracle_data, span_days
from oracle.demand_start import level_schedules
from oracle.decomposition import Decomposition
from oracle.feasibility import FeasibilityCheck, precheck
from oracle.formulations import Built, build, tranche_tokens, usable_state_ids
from oracle.peak_search import PeakSearch, peak_network
from oracle.peak_search import applies as peak_search_applies
from oracle.race import PROOF as TEXTBOOK_PROOF
from oracle.race import RACE_AFTER_S, TextbookRace, threshold_s
from oracle.reduction import excluded, lagrangian_prices, through_bounds
from oracle.result import OracleResult, answer, closed, modes_used, relative_gap, replay, require_at_least
from oracle.solvers import MIN_SOLVE_SECONDS, HighsRunner, PyomoRunner, RunOutcome, make_runner

REDUCTION_DELTA0, REDUCTION_DELTA0_HORIZON = 1e-3, 2.5e-4
"""First threshold of the Lagrangian reduction, LB·(1 + this), on a day and on a horizon of several days (whose gap
between the Lagrangian bound and the optimum is smaller relative to the cost; ``benchmarks/oracle_days.py --horizon-days
7`` measures it)."""
REDUCTION_DELTA_GROWTH = 4.0
"""Growth of δ when the restricted model holds no schedule."""
TARGET_MARGIN = 1e-9
"""The tolerance stop aims its last search this much (relative to the gap) above incumbent·(1 − mip_gap), so that float
rounding cannot leave the proven gap a hair above mip_gap."""
GRID_SIDE_HIGHS_OPTIONS = {"mip_allow_restart": False}
"""HiGHS options of the textbook MILP with the grid's side: a restart after root reduced-cost fixing repeats the root's
cut rounds, which cost more there than the smaller model saves (the 2048 case with caps and a call at K = 12: 0.6-0.9×
the seconds, ``experiments/grid_calls_study.py --parts timing``). The proof is unchanged."""
LABELING_TIME_SHARE = 0.5
"""Share of the time limit the label-setting proof may use before branch and bound takes over
(``benchmarks/oracle_speed.py`` gives each phase's seconds)."""

Incumbent = tuple[list[list[int]], float]
"""A schedule and its objective ($)."""
Answer = tuple[RunOutcome, list | None, str]
"""A solve's outcome, its schedule (None: none) and its proof."""
MIN_TIME_LIMIT_S = 1.0
"""The MILP after the peak-level search gets at least this long (s), to load its start."""
PEAK_SEARCH_SHARE = 0.5
"""Under demand charges the peak-level search may take this share of the time limit; the MILP, started from its
incumbent, takes the rest (the search usually ends sooner, at its leaves)."""
PEAK_PROOF = "peak-level search"
"""How a result was proved when the peak-level search's bound (:mod:`oracle.peak_search`) closes its gap."""


def structure_key(inst: Instance) -> tuple:
    """What the built model depends on beyond its objective and tranche right-hand sides."""
    jobs = tuple((job.segments, job.restart_hours, job.initial_mode,
                  tuple((m.gpus, m.tokens_per_s) for m in job.modes)) for job in inst.jobs)
    return inst.n_gpus, inst.slots, inst.slot_hours, inst.horizon_days, inst.min_daily_share > 0, jobs


def best_start(inst: Instance, allow_pause: bool = True) -> Incumbent | None:
    """The cheapest feasible MIP start among holding the initial modes, fixed continuous, the greedy rule and, under
    demand charges, the level heuristic (:mod:`oracle.demand_start`); None if none is feasible."""
    candidates = [[[job.initial_mode] * job.segments for job in inst.jobs]]
    if all(job.baseline_mode != PAUSE for job in inst.jobs):
        candidates.append(fixed_schedule(inst))
        with contextlib.suppress(ValueError):  # the rule has no mode within a job's share of a small pool
            candidates.append(greedy_schedule(inst))
    candidates += level_schedules(inst)  # under demand charges: flat imports
    best = None
    for schedule in candidates:
        if not allow_pause and any(c == PAUSE for row in schedule for c in row):
            continue
        metrics = simulate(inst, schedule).metrics
        if metrics.feasible and metrics.calls_delivered and (best is None or metrics.objective_usd < best[1]):
            best = (schedule, metrics.objective_usd)
    return best


@dataclass
class _Run:
    """One reduced solve's clock, its ``details`` and the raced textbook MILP (None: no race)."""

    tick: float
    deadline: float
    details: dict[str, float]
    race: TextbookRace | None

    @property
    def stop(self):
        """What the searches ask to stop early: whether the raced textbook MILP proved the day."""
        return self.race.proved if self.race is not None else None

    def elapsed(self) -> float:
        """Seconds of this solve so far, less the Pyomo build (counted as build seconds)."""
        return time.perf_counter() - self.tick - self.details.get("pyomo", 0.0)

    def race_won(self, proven: float) -> Answer | None:
        """The raced textbook MILP's proven optimum, if it has one (its bound raised by ``proven``)."""
        answer = self.race.poll() if self.race is not None else None
        if answer is not None and answer["seconds"] is not None:
            self.details["textbook"] = answer["seconds"]
        if answer is None or answer["status"] != "optimal":
            return None
        objective = answer["objective_usd"]
        bound = answer["best_bound_usd"] if answer["best_bound_usd"] is not None else -math.inf
        bound = min(objective, max(bound, proven))
        return RunOutcome("optimal", True, objective, bound, 0.0, self.elapsed()), answer["schedule"], TEXTBOOK_PROOF


class OracleModel:
    """A day's MILP, built once and solvable many times.

    Options: ``formulation`` (:data:`~oracle.constants.FORMULATIONS`), ``solver`` (HiGHS, or any Pyomo solver),
    ``allow_pause``; for the fast formulation on HiGHS, ``reduce`` (solve through the Lagrangian reduction),
    ``labeling`` (try the exact label-setting proof first), ``max_labels`` (the label search's budget) and
    ``race_after_s`` (CPU seconds after which the textbook MILP races the solve, :mod:`oracle.race`; None: never).

    An instance with fleet workloads, or with more than two jobs in the fast formulation, goes to the decomposition
    (:attr:`decomposition`; ``formulation`` then reads ``"decomposition"`` and there is no Pyomo model).

    ``update(instance)`` takes an instance of the same structure (GPU pool, slots, jobs' modes, K, restart times and
    initial modes) with any prices, renewables, PPA price, curtailment penalty or tranches: the objective and the
    tranche right-hand sides are reset in place, and the persistent HiGHS model receives only those changes. Any other
    instance is rebuilt.
    """

    def __init__(self, inst: Instance, *, formulation: str = "fast", solver: str = DEFAULT_SOLVER,
                 allow_pause: bool = True, reduce: bool = True, labeling: bool = True,
                 max_labels: int = labeling.MAX_LABELS, race_after_s: float | None = RACE_AFTER_S) -> None:
        require(formulation in FORMULATIONS, "formulation", f"must be one of {', '.join(FORMULATIONS)}")
        require(isinstance(max_labels, int) and max_labels > 0, "max_labels", "must be a positive integer")
        require(race_after_s is None or (isinstance(race_after_s, (int, float)) and race_after_s >= 0),
                "race_after_s", "must be None or ≥ 0")
        self.max_labels, self.race_after_s = max_labels, race_after_s
        self.requested = self.formulation = formulation  # requested: the formulation asked for
        self.reduce, self.labeling, self.allow_pause = reduce, labeling, allow_pause
        self._runner: HighsRunner | PyomoRunner = make_runner(solver)
        self.solver = solver
        self._build(inst)

    # ------------------------------------------------------------------ building

    def _build(self, inst: Instance) -> None:
        """Precompute the data; the Pyomo model is built on first use (:attr:`built`): the label search and the
        Lagrangian prices need only the data, and most days are proven without branch and bound."""
        require_one_site(inst, "the day oracle (OracleModel; oracle.solve solves sites)")
        tick = time.perf_counter()
        self.inst = inst
        self.decomposition: Decomposition | None = None
        if inst.has_fleet_workloads or (len(inst.jobs) > 2 and self.requested == "fast"):
            self.decomposition = Decomposition(inst, allow_pause=self.allow_pause)
            self.formulation = "decomposition"
            self._built, self._check = None, None
            self._pending_build_seconds = 0.0  # the decomposition counts its own build
            return
        self.formulation = self.requested
        self.data: OracleData = oracle_data(inst, joint=self.formulation == "fast")
        if self.formulation == "fast" and self.data.joint_states is None:
            raise InputError("formulation", f"{self.data.joint_state_count_uncapped} joint states exceed the fast "
                                            f"formulation's limit of {MAX_JOINT_STATES}; use formulation='textbook'")
        self._built: Built | None = None
        self._check: FeasibilityCheck | None = None
        self._pending_build_seconds = time.perf_counter() - tick

    @property
    def built(self) -> Built:
        """The Pyomo model and its accessors, built now if not yet (its seconds count as build seconds)."""
        if self.decomposition is not None:
            raise InputError("method", "the decomposition (column generation) has no single Pyomo model")
        if self._built is None:
            tick = time.perf_counter()
            self._built = build(self.data, self.formulation, allow_pause=self.allow_pause)
            self._pending_build_seconds += time.perf_counter() - tick
        return self._built

    def update(self, inst: Instance) -> None:
        """Point the model at another instance (in place if the structure is the same, else rebuilt)."""
        same = structure_key(inst) == structure_key(self.inst) and self.formulation == "fast" and \
            self.decomposition is None and not inst.has_fleet_workloads and inst.tariff_terms is None and \
            self.inst.tariff_terms is None and not inst.grid_calls and not self.inst.grid_calls
        if not same:
            spent = self._pending_build_seconds
            self._build(inst)
            self._pending_build_seconds += spent
            return
        tick = time.perf_counter()
        self.inst = inst
        self.data = oracle_data(inst, joint=True)
        if self._built is not None:
            self._built.update_costs(self.data)
            self._built.set_tranches(inst)
        self._check = None
        self._pending_build_seconds += time.perf_counter() - tick

    @property
    def model(self):
        """The Pyomo model (``pyomo.environ.ConcreteModel``), built on first use."""
        return self.built.model

    def write(self, path: str | Path, format: str = "mps") -> Path:
        """Write the model (default MPS) for other solvers; returns the path."""
        path = Path(path)
        self.built.model.write(str(path), format=format, io_options={"symbolic_solver_labels": True})
        return path

    def precheck(self) -> FeasibilityCheck:
        if self._check is None:
            self._check = precheck(self.inst, allow_pause=self.allow_pause)
            cost = self.data.block_cost_usd if self.formulation == "fast" else None
            if not self._check.infeasible and cost is not None:  # a grid call no joint state can deliver
                cost = cost[:, usable_state_ids(self.data, self.allow_pause)]
                blocked = np.flatnonzero(~np.isfinite(cost).any(axis=1))
                if blocked.size:
                    where = self.data.block_slots(int(blocked[0]))
                    self._check = dataclasses.replace(self._check, infeasible=True, reason=(
                        f"a grid call cannot be delivered: in slots {where.start}-{where.stop - 1} every schedule "
                        "(each job in any mode or paused) draws more than the renewable output plus the call's limit"))
        return self._check

    # ------------------------------------------------------------------ solving

    def solve(self, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S, mip_gap: float = DEFAULT_MIP_GAP,
              warm_start: bool = True, threads: int | None = None, tee: bool = False) -> OracleResult:
        """Solve the current instance; see :class:`OracleResult`."""
        require(isinstance(time_limit_s, (int, float)) and time_limit_s > 0, "time_limit_s", "must be > 0")
        require(isinstance(mip_gap, (int, float)) and 0 <= mip_gap < 1, "mip_gap", "must be in [0, 1)")
        require(threads is None or (isinstance(threads, int) and threads > 0), "threads", "must be > 0")
        if self.decomposition is not None:
            result = self.decomposition.solve(time_limit_s=time_limit_s, mip_gap=mip_gap, warm_start=warm_start,
                                              threads=threads)
            result.build_seconds += self._pending_build_seconds
            self._pending_build_seconds = 0.0
            return result
        inst = self.inst
        base = {"formulation": self.formulation, "solver": self.solver, "case": inst.case_name, "day": inst.day,
                "job_names": tuple(job.name for job in inst.jobs)}
        check = self.precheck()
        if check.infeasible:
            build_seconds, self._pending_build_seconds = self._pending_build_seconds, 0.0
            return OracleResult(status="infeasible", schedule=None, objective_usd=None, best_bound_usd=None,
                                gap=None, build_seconds=build_seconds, solve_seconds=0.0, metrics=None,
                                reason=check.reason, **base)
        tick = time.perf_counter()
        start = best_start(inst, self.allow_pause) if warm_start else None
        start_seconds = time.perf_counter() - tick
        options = dict(GRID_SIDE_HIGHS_OPTIONS) if inst.has_grid_side and isinstance(self._runner, HighsRunner) else {}
        settings = {"time_limit_s": float(time_limit_s), "mip_gap": float(mip_gap), "threads": threads, "tee": tee,
                    "options": options}
        proof = "branch-and-bound"
        details: dict[str, float] = {}
        peak_bound, first_usd = -math.inf, None if start is None else start[1]
        if warm_start and peak_search_applies(inst):  # demand charges: the peak-level search first
            search = PeakSearch(peak_network(inst, self.allow_pause), start)
            peak_bound = search.run(mip_gap, tick + PEAK_SEARCH_SHARE * time_limit_s)
            details.update(peak_search_seconds=time.perf_counter() - tick - start_seconds, peak_boxes=search.boxes,
                           peak_leaves=search.leaves)
            start = None if search.best_schedule is None else (search.best_schedule, search.best_usd)
            left_s = tick + time_limit_s - time.perf_counter()
            if start is not None and (closed(start[1], peak_bound, mip_gap) or left_s <= 0):
                build_seconds, self._pending_build_seconds = self._pending_build_seconds, 0.0
                return answer(inst, start[0], None, peak_bound, mip_gap, objective_usd=start[1],
                              time_limit_s=time_limit_s, proof=PEAK_PROOF, build_seconds=build_seconds,
                              solve_seconds=time.perf_counter() - tick, start_objective_usd=first_usd, details=details,
                              formulation=self.formulation, solver=self.solver)
            start_seconds = time.perf_counter() - tick  # the search is part of the start
        # The reduction's bounds and label search price slots apart: demand charges couple a month's slots.
        if (self.reduce and self.formulation == "fast" and isinstance(self._runner, HighsRunner)
                and not inst.has_demand_charges):
            race = None if self.race_after_s is None else TextbookRace(
                inst, time_limit_s=time_limit_s, mip_gap=mip_gap, allow_pause=self.allow_pause, threads=threads,
                after_s=threshold_s(self.race_after_s, self.data.n_blocks))
            with race or contextlib.nullcontext():
                run, schedule, proof = self._solve_reduced(start, **settings, details=details, race=race)
            if race is not None and race.started_s is not None:
                details["race_start"] = race.started_s
        else:
            model = self.built.model  # built now if not yet: its seconds count against the time limit
            settings["time_limit_s"] = max(tick + time_limit_s - time.perf_counter(),
                                           MIN_TIME_LIMIT_S if math.isfinite(peak_bound) else MIN_SOLVE_SECONDS)
            run = self._runner.solve(model, start=self.built.start_values(start[0]) if start else None,
                                     **settings)
            schedule = self.built.read_schedule() if run.has_solution else None
        if schedule is None and math.isfinite(peak_bound) and start is not None:  # the MILP returned nothing in time
            schedule, run = start[0], dataclasses.replace(run, objective=start[1], has_solution=True)
        built = self._built  # the fast path may prove a day without building the Pyomo model
        caps = built.read_caps() if schedule is not None and built is not None and built.read_caps else None
        build_seconds, self._pending_build_seconds = self._pending_build_seconds + run.load_seconds, 0.0
        # A schedule found before the proof may leave continuous variables above their floor (an import or a peak
        # piece with slack): its true cost, the replay's, is then below the solver's value, and is what is reported.
        proven = run.status == "optimal"
        metrics = self._verify(schedule, run.objective if proven else None, caps) if schedule is not None else None
        objective = run.objective
        if metrics is not None and not proven and run.objective is not None:
            require_at_least(run.objective, metrics.objective_usd, self.formulation)
            objective = metrics.objective_usd
        bound = run.bound if math.isinf(peak_bound) else max(peak_bound, -math.inf if run.bound is None else run.bound)
        status, gap = run.status, relative_gap(objective, bound)
        if status == "time_limit" and closed(objective, bound, mip_gap):  # the peak-level search's bound closes it
            status, proof = "optimal", PEAK_PROOF
        reason = check.solver_reason(inst) if status == "infeasible" else run.message if status == "error" else ""
        if status == "infeasible" and inst.has_grid_side:
            reason = ("no schedule meets every target and tier while it delivers every call (within the pool, restarts "
                      "and checkpoint boundaries counted); the solver proved it")
        if status == "time_limit":
            found = "before any schedule was found" if not run.has_solution else (
                "before any lower bound was proved" if gap is None else f"with a gap of {gap:.2e}")
            reason = f"time limit of {time_limit_s:g} s reached {found}"
        return OracleResult(status=status, schedule=schedule, objective_usd=objective if run.has_solution else None,
                            best_bound_usd=bound, gap=gap if run.has_solution else None,
                            build_seconds=build_seconds, solve_seconds=start_seconds + run.solve_seconds,
                            metrics=metrics, reason=reason, modes_used=modes_used(inst, schedule) if schedule else {},
                            start_objective_usd=first_usd, caps=caps,
                            proof=proof if status == "optimal" else "", details=details, **base)

    def _solve_reduced(self, start: Incumbent | None, *, time_limit_s: float, mip_gap: float, threads: int | None,
                       tee: bool, options: dict[str, Any], details: dict[str, float],
                       race: TextbookRace | None = None) -> Answer:
        """Solve the fast model through the Lagrangian reduction (:mod:`oracle.reduction`):

        1. token prices μ and a lower bound LB: the Lagrangian dual by cutting planes (:mod:`oracle.reduction`) when the
           label search applies, else (or when the dual's maximiser sits on its price box) the LP relaxation's tranche
           duals (:meth:`_lp_prices`);
        2. with ``labeling``: the exact label-setting search (:meth:`_label_setting`), which returns the optimum (the
           Pyomo model is then never built) or a better lower bound;
        3. a bound ``through[b, S]`` for every (block, joint state) by forward/backward shortest paths;
        4. branch and bound with every (b, S) above θ = LB + δ bounded to zero, δ growing until the gap closes
           (:meth:`_restricted_solves`).

        The guard (``race``, :mod:`oracle.race`): the textbook MILP in a child process; the searches stop as soon as it
        proves the day, and its answer is returned (proof ``textbook``).
        """
        tick = time.perf_counter()
        run = _Run(tick, tick + time_limit_s, details, race)
        data = self.data
        state_ids = usable_state_ids(data, self.allow_pause)
        states, cost = data.joint_states[state_ids], data.block_cost_usd[:, state_ids]
        tranche = tranche_tokens(data)
        search = mu = None
        if self.labeling and labeling.supported(data):
            search = labeling.LabelSearch(data, states, cost, None, tranche)
            details["tables"] = time.perf_counter() - run.tick
            dual = lagrangian_prices(search)
            details["dual"] = time.perf_counter() - run.tick - details["tables"]
            details["dual_cuts"] = dual.cuts
            if not dual.on_box:
                mu = dual.mu_per_token
        if mu is None:
            mu, answer = self._lp_prices(start, run, time_limit_s=time_limit_s, mip_gap=mip_gap, threads=threads,
                                         tee=tee, options=options)
            if answer is not None:
                return answer
        if search is not None:
            table_tick = time.perf_counter()
            search.price(mu)
            details["tables"] = details.get("tables", 0.0) + time.perf_counter() - table_tick
            through = search.through  # the Lagrangian shortest paths, computed once for both uses
            lower = search.lower_bound_usd  # raised by the completion bounds
        else:
            through = through_bounds(data, states, cost, mu, tranche)
            lower = float(through.min())
        reachable = float(through[np.isfinite(through)].max(initial=lower))
        proven, incumbent = lower, start  # a lower bound on the whole model, raised by every restricted solve
        if search is not None:
            answer, incumbent, proven = self._label_setting(search, lower, start, run, time_limit_s, mip_gap)
            if answer is not None:
                return answer
        out, incumbent, proven, settled, load_seconds = self._restricted_solves(
            through, lower, proven, reachable, incumbent, run, mip_gap=mip_gap, threads=threads, tee=tee,
            options=options)
        settled = settled or (incumbent is not None and closed(incumbent[1], proven, mip_gap))
        if race is not None and not settled:
            if race.started_s is not None and out.status == "time_limit":
                race.wait()  # out of time here: the raced textbook MILP may still prove the day by the deadline
                # (not after an error: a Ctrl-C stops HiGHS with one, and must not wait for the race)
            won = run.race_won(proven)
            if won is not None:
                return won
        seconds = run.elapsed() - load_seconds
        if incumbent is None:
            status = "infeasible" if out.status == "infeasible" else out.status
            return RunOutcome(status, False, None, proven, load_seconds, seconds, out.message), None, ""
        status = "optimal" if settled or closed(incumbent[1], proven, mip_gap) else (
            "error" if out.status == "error" else "time_limit")
        return RunOutcome(status, True, incumbent[1], proven, load_seconds, seconds, out.message), incumbent[0], \
            "branch-and-bound"

    def _lp_prices(self, start: Incumbent | None, run: _Run, *, time_limit_s: float, mip_gap: float,
                   threads: int | None, tee: bool, options: dict[str, Any]) -> tuple[np.ndarray | None, Answer | None]:
        """Token prices from the LP relaxation's tranche duals (through the Pyomo model): (μ, None); or, when the LP is
        infeasible or does not finish, (None, the answer: infeasible, or the whole model by branch and bound)."""
        runner, details = self._runner, run.details
        lp_tick = time.perf_counter()
        built = self._pyomo(details)
        m = built.model
        rows = [m.tranche[j] if j in m.tranche else None for j in range(len(self.inst.jobs))]
        status, _, duals = runner.relaxation(m, list(m.x.values()), rows, time_limit_s=time_limit_s,
                                             threads=threads, tee=tee)
        details["lp"] = time.perf_counter() - lp_tick - details.get("pyomo", 0.0)
        if status == "infeasible":
            return None, (RunOutcome(status=status, has_solution=False, objective=None, bound=None, load_seconds=0.0,
                                     solve_seconds=run.elapsed()), None, "")
        if status != "optimal":  # out of time (or trouble) in the LP: solve the whole model with what is left
            out = runner.solve(m, time_limit_s=max(run.deadline - time.perf_counter(), MIN_SOLVE_SECONDS),
                               mip_gap=mip_gap, start=built.start_values(start[0]) if start else None,
                               threads=threads, tee=tee, options=options, interrupt=run.stop)
            won = run.race_won(out.bound if out.bound is not None else -math.inf)
            if won is not None:
                return None, won
            out.solve_seconds = run.elapsed() - out.load_seconds
            return None, (out, built.read_schedule() if out.has_solution else None, "branch-and-bound")
        return np.abs(np.asarray(duals, dtype=float)) * np.asarray(built.tranche_scales, dtype=float), None

    def _label_setting(self, search: labeling.LabelSearch, lower: float, start: Incumbent | None, run: _Run,
                       time_limit_s: float, mip_gap: float) -> tuple[Answer | None, Incumbent | None, float]:
        """Step 2 of :meth:`_solve_reduced`: the exact label-setting search for at most :data:`LABELING_TIME_SHARE` of
        the time limit and, when it gives up, a beam search for an incumbent. Returns (the answer when it proved the day
        or the raced textbook MILP won, else None; the incumbent; the proven bound)."""
        data, details, race = self.data, run.details, run.race
        incumbent = start
        label_tick = time.perf_counter()
        budget = min(run.deadline, run.tick + LABELING_TIME_SHARE * time_limit_s)
        target = None
        if start is not None and span_days(self.inst) > 1:  # the tolerance stop (labeling.prove)
            target = start[1] - mip_gap * abs(start[1]) * (1.0 - TARGET_MARGIN)
        found, proven = labeling.prove(search, lower, start[1] if start else None, deadline=budget,
                                       max_labels=self.max_labels, stop=run.stop, target_usd=target,
                                       horizon_days=span_days(self.inst))
        details["searches"] = len(search.log)
        details["max_labels"] = max((entry[2] for entry in search.log), default=0)
        proven = max(proven, lower)
        if found.status == "optimal" and found.objective_usd is not None:
            details["labels"] = time.perf_counter() - label_tick
            objective = joint_objective_usd(data, found.schedule)
            return (RunOutcome("optimal", True, objective, objective, 0.0, run.elapsed()), found.schedule,
                    "label-setting"), incumbent, proven
        won = run.race_won(max(proven, lower))
        if won is not None:
            details["labels"] = time.perf_counter() - label_tick
            return won, incumbent, proven
        if race is not None and found.status == "budget":
            race.start()  # the label search gave up: race the textbook MILP now (if not yet)
        if found.status == "budget" and time.perf_counter() < run.deadline:
            # A beam search (a heuristic, seconds) gives a schedule close to the optimum: as the incumbent it caps
            # the reduction's threshold, so branch and bound runs on a far smaller model.
            beam = search.run(search.most_cost_usd, deadline=run.deadline, beam=labeling.BEAM_WIDTH, stop=run.stop)
            if beam.schedule is not None and (incumbent is None or beam.objective_usd < incumbent[1]):
                incumbent = (beam.schedule, joint_objective_usd(data, beam.schedule))
                details["beam_usd"] = incumbent[1]
        details["labels"] = time.perf_counter() - label_tick
        if incumbent is not None and closed(incumbent[1], proven, mip_gap):
            return (RunOutcome("optimal", True, incumbent[1], proven, 0.0, run.elapsed()), incumbent[0],
                    "label-setting"), incumbent, proven
        return None, incumbent, proven

    def _restricted_solves(self, through: np.ndarray, lower: float, proven: float, reachable: float,
                           incumbent: Incumbent | None, run: _Run, *, mip_gap: float, threads: int | None, tee: bool,
                           options: dict[str, Any]) -> tuple[RunOutcome, Incumbent | None, float, bool, float]:
        """Step 4 of :meth:`_solve_reduced`: branch and bound on the fast model with every (block, state) whose
        ``through`` bound exceeds θ = LB + δ bounded to zero; δ grows ×:data:`REDUCTION_DELTA_GROWTH` until the gap
        closes, θ never beyond the incumbent's cost (at which every better schedule is inside). Returns (the last run,
        the incumbent, the proven bound, whether the last solve settled the optimum, the load seconds)."""
        runner, race = self._runner, run.race
        built = self._pyomo(run.details)
        m = built.model
        load_seconds = 0.0
        bnb_tick = time.perf_counter()
        first = REDUCTION_DELTA0_HORIZON if span_days(self.inst) > 1 else REDUCTION_DELTA0
        delta = first * max(1.0, abs(lower)) + (proven - lower)
        bounded: set = set()
        out = RunOutcome("time_limit", False, None, None, 0.0, 0.0)
        settled = False
        try:
            while True:
                threshold = lower + delta
                if incumbent is not None:
                    threshold = min(threshold, incumbent[1])
                excluded_now = excluded(through, threshold)
                bounded = self._restrict(excluded_now, bounded)
                inside = incumbent is not None and self._inside(incumbent[0], excluded_now)
                remaining = run.deadline - time.perf_counter()
                if remaining <= 0:
                    out = RunOutcome("time_limit", False, None, None, 0.0, 0.0)
                    break
                out = runner.solve(m, time_limit_s=remaining, mip_gap=mip_gap,
                                   start=built.start_values(incumbent[0]) if inside else None,
                                   threads=threads, tee=tee, options=options, interrupt=run.stop)
                load_seconds += out.load_seconds
                if race is not None and race.proved():
                    break
                if out.has_solution and (incumbent is None or out.objective < incumbent[1]):
                    incumbent = (built.read_schedule(), out.objective)
                # Every schedule left out costs more than the threshold.
                if out.status == "infeasible":
                    proven = max(proven, threshold)
                elif out.bound is not None:
                    proven = max(proven, min(out.bound, threshold))
                if incumbent is not None and closed(incumbent[1], proven, mip_gap):
                    break
                if out.status in ("time_limit", "error"):
                    break
                if incumbent is not None and threshold >= incumbent[1]:
                    settled = out.status == "optimal"  # every better schedule was inside, and the solver closed it
                    break
                if out.status == "infeasible" and threshold >= reachable:
                    break  # nothing was left out: the whole model is infeasible
                delta *= REDUCTION_DELTA_GROWTH
        finally:
            self._restrict(np.zeros_like(through, dtype=bool), bounded)
            run.details["bnb"] = time.perf_counter() - bnb_tick
        return out, incumbent, proven, settled, load_seconds

    def _pyomo(self, details: dict[str, float]) -> Built:
        """The Pyomo model, built now if not yet; the seconds spent go to ``details["pyomo"]``."""
        before = self._pending_build_seconds
        built = self.built
        details["pyomo"] = details.get("pyomo", 0.0) + self._pending_build_seconds - before
        return built

    def _restrict(self, out: np.ndarray, bounded: set) -> set:
        """Bound y[b, S] (and per-job choices left without a state) to 0 where ``out``; free the others."""
        m, data, states = self.built.model, self.data, self.built.joint_states
        out = out | self.built.disallowed  # a grid call's limit bounds these for good
        now = set()
        for b, i in zip(*np.nonzero(out), strict=True):
            now.add(("y", int(b), int(i)))
        for (j, s, c) in m.x:
            blocks = data.blocks_of_segment(j, s)
            members = np.flatnonzero(states[:, j] == c)
            if members.size and bool(np.all(out[np.ix_(blocks, members)])):
                now.add(("x", j, s, c))
        for key in bounded - now:
            (m.y[key[1:]] if key[0] == "y" else m.x[key[1:]]).setub(1)
        for key in now - bounded:
            (m.y[key[1:]] if key[0] == "y" else m.x[key[1:]]).setub(0)
        return now

    def _inside(self, schedule: list[list[int]], out: np.ndarray) -> bool:
        """Whether a schedule avoids every excluded (block, state)."""
        index = {tuple(int(v) for v in row): i for i, row in enumerate(self.built.joint_states)}
        for b in range(self.data.n_blocks):
            joint = tuple(int(schedule[j][int(self.data.block_segment[b, j])]) for j in range(len(schedule)))
            if joint not in index or out[b, index[joint]]:
                return False
        return True

    def _verify(self, schedule: list[list[int]], objective: float | None,
                caps: list[list[int]] | None = None) -> Metrics:
        """The simulator's metrics of the schedule (and its caps); AssertionError if the model's own objective of it or
        the solver's disagrees, or the schedule breaks the model (a bug)."""
        if self.formulation == "fast" and self._built is None:  # proven by the label search: the model's costs
            own = joint_objective_usd(self.data, schedule)
        else:
            own = self.built.objective_of(schedule) if self.built.objective_of is not None else None
        return replay(self.inst, schedule, None, (own, objective), self.formulation, caps)


__all__ = ["DEFAULT_MIP_GAP", "DEFAULT_TIME_LIMIT_S", "OracleModel", "OracleResult", "STATUSES", "best_start",
           "modes_used"]
