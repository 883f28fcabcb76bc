"""The oracle of several sites (DESIGN §9 "Sites", issue 14): a direct MILP (Pyomo + HiGHS).

Variables, per job j, segment k, site s and mode m (a mode only at a site whose pool holds it):

- x[j,k,s,m] ∈ {0, 1}: job j runs mode m at site s in segment k (no x: pause);
- y[j,k,s] ∈ {0, 1}: job j's checkpoint is at site s during segment k (Σ_s y = 1; Σ_m x[j,k,s,m] ≤ y[j,k,s]);
- z[j,k,s,m] ≥ x[j,k,s,m] − x[j,k−1,s,m] ≥ 0: a (re)start (a change of mode *or site*, pauses included; before
  segment 0 the job runs its initial mode at its home site), which loses τ_j of tokens;
- w[j,k,s,m] ≥ x[j,k,s,m] − y[j,k−1,s] ≥ 0: a running segment the job moved into (its checkpoint was elsewhere),
  which loses the transfer time of tokens (:mod:`aidc_env.sites`);
- per site and slot, the textbook build of :mod:`oracle.formulations`: facility load L (affine in x), grid
  import g ≥ L − R, g ≥ 0, and a binary that enforces renewable first only where importing more would pay.

Rows: per job, tokens ≥ its tranche (scaled as in :mod:`oracle.formulations`); per site and block, the site's
GPUs. Objective: Σ_s Σ_t the simulator's cost of a MW of grid import and of curtailment at that site and slot,
plus each site's constant PPA term. Every coefficient comes from the simulator's functions on the site's
one-site view (``Instance.site_views``); :func:`solve_sites` checks that the solver's objective equals
:func:`aidc_env.simulator.simulate`'s replay of its schedule. With one site and no migration the model
is the textbook model of :mod:`oracle.formulations`.

``fixed_sites=True`` keeps every job at its home site (no migration); ``assignment`` fixes each job to one given
site; ``stay=True`` lets the model choose each job's one site for the whole horizon, its checkpoint already there
at t = 0 (no transfer): the study's "coordinated without migration" (docs/sites.md); ``free_start=True`` chooses
the sites at t = 0 the same way but lets jobs move later (paying their transfers): the study's "with migration".
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyomo.environ as pyo

from aidc_env.baselines import fixed_schedule
from aidc_env.errors import require
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.simulator import facility_load_mw, slot_decision_cost_usd
from aidc_env.metrics import SimulationResult
from aidc_env.schedule import validate_schedule
from aidc_env.simulator import job_segments, simulate
from aidc_env.sites import SiteNetwork
from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_SOLVER
from oracle.data import blocks, job_coefficients, renewable_cost_usd
from oracle.formulations import TRANCHE_MARGIN, TRANCHE_ROW_RHS, linear
from oracle.solvers import make_runner

OBJECTIVE_RTOL = 1e-7
"""Relative tolerance between the solver's objective and the simulator's replay (HiGHS's feasibility tolerance
on the grid variables, times the prices)."""
MIP_ABS_GAP_USD = 1e-6
"""Absolute gap ($) under which a solve counts as closed whatever the relative gap."""


@dataclass
class SitesOracleResult:
    """The answer of one sites solve. Costs in $, times in seconds."""

    status: str
    """``optimal`` (gap ≤ mip_gap), ``time_limit`` (best schedule found, bound open), ``infeasible`` or ``error``."""
    objective_usd: float | None
    best_bound_usd: float | None
    gap: float | None
    build_seconds: float
    solve_seconds: float
    schedule: list[list[int]] | None
    sites: list[list[int]] | None
    """Per job, per segment: the site index."""
    result: SimulationResult | None
    """The simulator's score of the schedule (its ``metrics.operating_cost_usd`` equals ``objective_usd``)."""
    case: str = ""
    day: str = ""
    job_names: tuple[str, ...] = ()
    site_names: tuple[str, ...] = ()
    start_objective_usd: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    formulation: str = "sites-textbook"
    """``sites-textbook`` (this module's direct MILP) or ``sites-decomposition`` (:mod:`oracle.sites_cg`)."""
    proof: str = ""

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"

    def to_dict(self) -> dict[str, Any]:
        by_job = (lambda rows: None if rows is None else dict(zip(self.job_names, rows, strict=True)))
        return {
            "status": self.status, "objective_usd": self.objective_usd, "best_bound_usd": self.best_bound_usd,
            "gap": self.gap, "build_seconds": self.build_seconds, "solve_seconds": self.solve_seconds,
            "case": self.case, "day": self.day, "formulation": self.formulation, "solver": DEFAULT_SOLVER,
            "proof": self.proof, "details": self.details,
            "start_objective_usd": self.start_objective_usd, "site_names": list(self.site_names),
            "metrics": self.result.metrics.to_dict() if self.result is not None else None,
            "schedule": by_job(self.schedule),
            "sites": by_job([[self.site_names[s] for s in row] for row in self.sites] if self.sites else None),
        }


def _network(inst: Instance) -> SiteNetwork:
    if inst.network is not None:
        return inst.network
    return SiteNetwork(sites=inst.sites, home=(0,) * len(inst.jobs), transfer_hours=(0.0,) * len(inst.jobs))


class SitesModel:
    """The sites MILP of one instance (see the module docstring)."""

    def __init__(self, inst: Instance, *, fixed_sites: bool = False, assignment: Sequence[int] | None = None,
                 stay: bool = False, free_start: bool = False, allow_pause: bool = True) -> None:
        require(not inst.has_fleet_workloads, "case", "the sites oracle runs pre-training jobs only")
        tick = time.perf_counter()
        self.inst = inst
        net = self.network = _network(inst)
        if fixed_sites:
            assignment = net.home
        self.assignment = None if assignment is None else tuple(int(a) for a in assignment)
        self.stay = stay
        self.free_start = free_start = free_start or stay
        views = inst.site_views
        n_sites, T = len(net.sites), inst.slots
        coefs = [job_coefficients(inst, job) for job in inst.jobs]
        self.coefs = coefs
        m = self.m = pyo.ConcreteModel(name="aidc_oracle_sites")

        def allowed(j: int, s: int) -> bool:
            return self.assignment is None or self.assignment[j] == s

        jks = [(j, k, s) for j, job in enumerate(inst.jobs) for k in range(job.segments) for s in range(n_sites)]
        jksm = [(j, k, s, c) for (j, k, s) in jks if allowed(j, s)
                for c in range(inst.jobs[j].n_modes) if coefs[j].gpus[c] <= net.sites[s].n_gpus]
        self.jks, self.jksm = jks, jksm
        m.x = pyo.Var(jksm, domain=pyo.Binary)
        m.y = pyo.Var(jks, domain=pyo.Binary)
        m.z = pyo.Var(jksm, domain=pyo.NonNegativeReals)
        m.w = pyo.Var(jksm, domain=pyo.NonNegativeReals)
        for (j, k, s) in jks:
            if not allowed(j, s):
                m.y[j, k, s].fix(0)
        modes_at = {key: [] for key in jks}
        for (j, k, s, c) in jksm:
            modes_at[j, k, s].append(c)
        self.modes_at = modes_at
        m.one_site = pyo.Constraint(
            [(j, k) for j, job in enumerate(inst.jobs) for k in range(job.segments)],
            rule=lambda m, j, k: linear([1.0] * n_sites, [m.y[j, k, s] for s in range(n_sites)]) == 1)

        def run_rule(m, j, k, s):
            cs = modes_at[j, k, s]
            total = linear([1.0] * len(cs) + [-1.0], [m.x[j, k, s, c] for c in cs] + [m.y[j, k, s]])
            if allow_pause or not cs:
                return total <= 0
            return total == 0

        m.run_at_site = pyo.Constraint(jks, rule=run_rule)

        if stay:  # one site per job for the whole horizon, chosen freely: its checkpoint is already there at t = 0
            m.stay = pyo.Constraint([(j, k, s) for (j, k, s) in jks if k > 0],
                                    rule=lambda m, j, k, s: m.y[j, k, s] == m.y[j, 0, s])

        def previous_x(j: int, k: int, s: int, c: int) -> Any:
            if k == 0 and free_start:
                return m.y[j, 0, s] if c == inst.jobs[j].initial_mode else 0.0
            if k == 0:
                return 1.0 if (s == net.home[j] and c == inst.jobs[j].initial_mode) else 0.0
            return m.x[j, k - 1, s, c] if (j, k - 1, s, c) in m.x else 0.0

        def previous_y(j: int, k: int, s: int) -> Any:
            if k == 0:
                return m.y[j, 0, s] if free_start else (1.0 if s == net.home[j] else 0.0)
            return m.y[j, k - 1, s]

        m.restart = pyo.Constraint(jksm, rule=lambda m, j, k, s, c: m.z[j, k, s, c] >= m.x[j, k, s, c]
                                   - previous_x(j, k, s, c))
        m.moved = pyo.Constraint(jksm, rule=lambda m, j, k, s, c: m.w[j, k, s, c] >= m.x[j, k, s, c]
                                 - previous_y(j, k, s))

        # Tokens: kept yield, less the restart loss, less the transfer loss (rate × transfer hours).
        self.scales = []
        m.tranche = pyo.ConstraintList()
        for j, job in enumerate(inst.jobs):
            if job.n_modes == 0 or job.tranche_tokens <= 0:
                self.scales.append(1.0)
                continue
            scale = TRANCHE_ROW_RHS / job.tranche_tokens
            self.scales.append(scale)
            lost_move = coefs[j].tokens_per_s * SECONDS_PER_HOUR * net.transfer_hours[j]
            cs, vs = [], []
            for (jj, k, s, c) in jksm:
                if jj != j:
                    continue
                cs += [coefs[j].tokens_kept[c] * scale,
                       -(coefs[j].tokens_kept[c] - coefs[j].tokens_restarted[c]) * scale, -lost_move[c] * scale]
                vs += [m.x[j, k, s, c], m.z[j, k, s, c], m.w[j, k, s, c]]
            m.tranche.add(linear(cs, vs) >= job.tranche_tokens * (1.0 - TRANCHE_MARGIN) * scale)

        # Capacity per site and block (the union of the jobs' segment boundaries).
        starts, block_segment = blocks(inst)

        def block_terms(b: int, s: int, per_mode: Sequence[np.ndarray]) -> tuple[list[float], list[pyo.Var]]:
            cs, vs = [], []
            for j in range(len(inst.jobs)):
                k = int(block_segment[b, j])
                for c in modes_at.get((j, k, s), []):
                    cs.append(float(per_mode[j][c]))
                    vs.append(m.x[j, k, s, c])
            return cs, vs

        m.capacity = pyo.ConstraintList()
        for s in range(n_sites):
            for b in range(len(starts)):
                cs, vs = block_terms(b, s, [coef.gpus for coef in coefs])
                if vs and sum(cs) > net.sites[s].n_gpus:
                    m.capacity.add(linear(cs, vs) <= net.sites[s].n_gpus)

        # Per site and slot: the facility load, affine in x, and the grid/curtailment cost (textbook build).
        block_of_slot = np.searchsorted(starts, np.arange(T), side="right") - 1
        self.idle_load = [float(facility_load_mw(v, 0, 0.0)) for v in views]
        self.delta_load = [[facility_load_mw(v, coef.gpus, coef.it_power_kw) - self.idle_load[s] for coef in coefs]
                           for s, v in enumerate(views)]
        st = [(s, t) for s in range(n_sites) for t in range(T)]
        m.g = pyo.Var(st, domain=pyo.NonNegativeReals)
        load_expr = {}
        for s in range(n_sites):
            per_block = [block_terms(b, s, self.delta_load[s]) for b in range(len(starts))]
            for t in range(T):
                load_expr[s, t] = linear(*per_block[block_of_slot[t]], self.idle_load[s])
        m.site_load = pyo.Expression(st, rule=lambda m, s, t: load_expr[s, t])
        renewable = [v.renewable_mw for v in views]
        self.grid_coef = [slot_decision_cost_usd(v, np.ones(T), np.zeros(T)) for v in views]
        self.curt_coef = [slot_decision_cost_usd(v, np.zeros(T), np.ones(T)) for v in views]
        m.grid_floor = pyo.Constraint(st, rule=lambda m, s, t: m.g[s, t] >= m.site_load[s, t] - float(renewable[s][t]))
        negative = [(s, t) for (s, t) in st if self.grid_coef[s][t] + self.curt_coef[s][t] < 0]
        m.importing = pyo.Var(negative, domain=pyo.Binary)
        low = [self.idle_load[s] + sum(min(0.0, float(np.min(d, initial=0.0))) for d in self.delta_load[s])
               for s in range(n_sites)]
        high = [self.idle_load[s] + sum(max(0.0, float(np.max(d, initial=0.0))) for d in self.delta_load[s])
                for s in range(n_sites)]
        m.import_only_deficit = pyo.Constraint(negative, rule=lambda m, s, t: m.g[s, t] <= m.site_load[s, t] - float(
            renewable[s][t]) + max(0.0, float(renewable[s][t]) - low[s]) * (1 - m.importing[s, t]))
        m.import_only_if_deficit = pyo.Constraint(negative, rule=lambda m, s, t: m.g[s, t] <= max(
            0.0, high[s] - float(renewable[s][t])) * m.importing[s, t])
        self.negative = negative
        self.renewable = renewable
        self.constant = float(sum(renewable_cost_usd(v) for v in views))
        m.cost = pyo.Objective(expr=sum(
            float(self.grid_coef[s][t]) * m.g[s, t]
            + float(self.curt_coef[s][t]) * (float(renewable[s][t]) - m.site_load[s, t] + m.g[s, t]) for (s, t) in st)
            + self.constant, sense=pyo.minimize)
        self.build_seconds = time.perf_counter() - tick

    # ------------------------------------------------------------------ reading and starting

    def read(self) -> tuple[list[list[int]], list[list[int]]]:
        """(schedule, sites) of the variable values loaded in the model."""
        m, inst, net = self.m, self.inst, self.network
        schedule, sites = [], []
        for j, job in enumerate(inst.jobs):
            row, where = [], []
            for k in range(job.segments):
                loc = max(range(len(net.sites)), key=lambda s: pyo.value(m.y[j, k, s], exception=False) or 0.0)
                values = {c: pyo.value(m.x[j, k, loc, c], exception=False) or 0.0 for c in self.modes_at[j, k, loc]}
                values[PAUSE] = 1.0 - sum(values.values())
                row.append(int(max(values, key=values.get)))
                where.append(int(loc))
            schedule.append(row)
            sites.append(where)
        return schedule, sites

    def start_values(self, schedule: Sequence[Sequence[int]], sites: Sequence[Sequence[int]]
                     ) -> Iterator[tuple[pyo.Var, float]]:
        """A complete MIP start of a (schedule, sites) pair."""
        m, inst, net = self.m, self.inst, self.network
        for (j, k, s) in self.jks:
            if not m.y[j, k, s].fixed:
                yield m.y[j, k, s], float(sites[j][k] == s)
        for (j, k, s, c) in self.jksm:
            run = schedule[j][k] == c and sites[j][k] == s
            prev_c = inst.jobs[j].initial_mode if k == 0 else schedule[j][k - 1]
            prev_s = net.home[j] if k == 0 else sites[j][k - 1]
            yield m.x[j, k, s, c], float(run)
            if self.free_start and k == 0:
                prev_s = s
            yield m.z[j, k, s, c], float(run and (prev_c != c or prev_s != s))
            yield m.w[j, k, s, c], float(run and prev_s != s)
        loads = self.loads(schedule, sites)
        for s in range(len(net.sites)):
            deficit = loads[s] - self.renewable[s]
            for t in range(inst.slots):
                yield m.g[s, t], max(0.0, float(deficit[t]))
        for (s, t) in self.negative:
            yield m.importing[s, t], float(loads[s][t] - self.renewable[s][t] > 0)

    def loads(self, schedule: Sequence[Sequence[int]], sites: Sequence[Sequence[int]]) -> np.ndarray:
        """(sites, T): the model's facility load of a (schedule, sites) pair."""
        inst = self.inst
        out = np.array([np.full(inst.slots, idle) for idle in self.idle_load])
        for j, job in enumerate(inst.jobs):
            per = inst.slots_per_segment(job)
            choice = np.repeat(np.asarray(schedule[j], dtype=np.int64), per)
            where = np.repeat(np.asarray(sites[j], dtype=np.int64), per)
            for s in range(len(out)):
                mask = (choice != PAUSE) & (where == s)
                out[s][mask] += self.delta_load[s][j][choice[mask]]
        return out

    def objective_of(self, schedule: Sequence[Sequence[int]], sites: Sequence[Sequence[int]]) -> float:
        """The model's own objective of a (schedule, sites) pair (a cross-check with the simulator)."""
        total = self.constant
        for s, load in enumerate(self.loads(schedule, sites)):
            grid = np.maximum(0.0, load - self.renewable[s])
            total += float(np.sum(self.grid_coef[s] * grid + self.curt_coef[s] * (self.renewable[s] - load + grid)))
        return total

    def _start(self) -> tuple[list[list[int]], list[list[int]]] | None:
        """Every job in its baseline mode at its home site (or its assigned site), if that is feasible."""
        net = self.network
        where = self.assignment or net.home
        schedule = fixed_schedule(self.inst)
        sites = [[where[j]] * job.segments for j, job in enumerate(self.inst.jobs)]
        result = simulate(self.inst, validate_schedule(self.inst, schedule, sites))
        return (schedule, sites) if result.metrics.feasible else None

    # ------------------------------------------------------------------ solving

    def solve(self, *, time_limit_s: float = 120.0, mip_gap: float = DEFAULT_MIP_GAP, threads: int | None = None,
              tee: bool = False, warm_start: bool = True,
              start: tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]] | None = None) -> SitesOracleResult:
        """Solve; ``start``: a (schedule, sites) MIP start (default: every job's baseline at its home site)."""
        runner = make_runner(DEFAULT_SOLVER)
        if start is None and warm_start:
            start = self._start()
        start_usd = self.objective_of(*start) if start else None
        tick = time.perf_counter()
        outcome = runner.solve(self.m, time_limit_s=time_limit_s, mip_gap=mip_gap,
                               start=self.start_values(*start) if start else None, threads=threads, tee=tee,
                               options={})
        seconds = time.perf_counter() - tick
        common = dict(build_seconds=self.build_seconds, solve_seconds=seconds, case=self.inst.case_name,
                      day=self.inst.day, job_names=tuple(job.name for job in self.inst.jobs),
                      site_names=self.network.names, start_objective_usd=start_usd)
        if not outcome.has_solution:
            return SitesOracleResult(status=outcome.status if outcome.status != "optimal" else "error",
                                     objective_usd=None, best_bound_usd=outcome.bound, gap=None, schedule=None,
                                     sites=None, result=None, **common)
        schedule, sites = self.read()
        replay_inst = self.inst
        if self.free_start and self.inst.network is not None:  # each job's checkpoint starts at its chosen site
            replay_inst = with_home(self.inst, [row[0] for row in sites])
        result = simulate(replay_inst, validate_schedule(replay_inst, schedule, sites))
        replay = result.metrics.operating_cost_usd
        tolerance = OBJECTIVE_RTOL * max(abs(replay), 1.0)
        own = self.objective_of(schedule, sites)
        if abs(own - replay) > tolerance or abs(outcome.objective - replay) > tolerance:
            raise AssertionError(f"sites model ${own!r} / solver ${outcome.objective!r} != simulator ${replay!r}")
        if not result.metrics.feasible:
            raise AssertionError("the sites solver's schedule breaks the model (capacity or tranches)")
        bound = outcome.bound
        gap = None if bound is None or not math.isfinite(bound) else max(0.0, replay - bound) / max(abs(replay), 1e-9)
        closed = gap is not None and (gap <= mip_gap or replay - bound <= MIP_ABS_GAP_USD)
        status = "optimal" if closed else ("time_limit" if outcome.status in ("optimal", "time_limit") else
                                           outcome.status)
        return SitesOracleResult(status=status, objective_usd=replay, best_bound_usd=bound, gap=gap,
                                 schedule=schedule, sites=sites, result=result, **common)


def with_home(inst: Instance, home: Sequence[int]) -> Instance:
    """The instance with each job's checkpoint at ``home`` (site indices) before t = 0."""
    assert inst.network is not None
    return dataclasses.replace(inst, network=dataclasses.replace(inst.network, home=tuple(int(h) for h in home)))


def solve_sites(inst: Instance, *, time_limit_s: float = 120.0, mip_gap: float = DEFAULT_MIP_GAP,
                fixed_sites: bool = False, assignment: Sequence[int] | None = None, stay: bool = False,
                free_start: bool = False, threads: int | None = None, tee: bool = False, warm_start: bool = True,
                start: tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]] | None = None) -> SitesOracleResult:
    """Solve a sites instance (or a one-site one) with the sites MILP; see :class:`SitesModel`."""
    model = SitesModel(inst, fixed_sites=fixed_sites, assignment=assignment, stay=stay, free_start=free_start)
    return model.solve(time_limit_s=time_limit_s, mip_gap=mip_gap, threads=threads, tee=tee, warm_start=warm_start,
                       start=start)


def tokens_check(inst: Instance, schedule: Sequence[Sequence[int]], sites: Sequence[Sequence[int]]) -> list[float]:
    """Per job, the productive hours of a (schedule, sites) pair as the simulator counts them (for tests)."""
    return [float(job_segments(inst, j, np.asarray(schedule[j]), np.asarray(sites[j]))[3].sum())
            for j in range(len(inst.jobs))]
