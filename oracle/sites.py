"""The direct MILP of any instance, one site or several (Pyomo + HiGHS): the ``textbook`` method's sites model.

Per job j, segment k, site s and mode m (one the site's pool can hold, inside the job's window): x[j,k,s,m] ∈ {0, 1}
runs it; y[j,k,s] ∈ {0, 1} holds the checkpoint at s (Σ_s y = 1, Σ_m x ≤ y); z ≥ x[j,k,s,m] − x[j,k−1,s,m] is a
(re)start (a change of mode or site; before segment 0 the initial mode at the home site), losing τ_j of tokens; w ≥
x[j,k,s,m] − y[j,k−1,s] a running segment moved into, losing the transfer time. Per site and slot the rows of the
textbook model (:mod:`oracle.formulations`): load, import and renewable first where importing more would pay; per site
and block the GPUs its pool leaves after inference; per job its target. The objective is the simulator's
(:func:`aidc_env.simulator.simulate` replays every answer), less the idle-GPU value. Placements as :mod:`oracle.graph`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyomo.environ as pyo

from aidc_env.baselines import fixed_schedule
from aidc_env.errors import require
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.schedule import validate_schedule
from aidc_env.simulator import (Metrics, facility_load_mw, pool_load_mw, simulate, slot_decision_cost_usd,
                                slot_idle_value_usd)
from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_SOLVER
from oracle.data import blocks, job_coefficients, renewable_cost_usd
from oracle.formulations import TRANCHE_MARGIN, TRANCHE_ROW_RHS, linear
from oracle.graph import PLACEMENTS, with_home
from oracle.result import OracleResult, Start, answer
from oracle.solvers import make_runner

class SitesModel:
    """The sites MILP of one instance (see the module docstring)."""

    def __init__(self, inst: Instance, *, placement: str = "move", allow_pause: bool = True) -> None:
        require(placement in PLACEMENTS, "placement", f"must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
        tick = time.perf_counter()
        self.inst = inst
        self.assignment = tuple(int(a) for a in inst.home_sites) if placement == "home" else None
        self.placement = placement
        self.free_start = placement in ("stay", "free")
        self.coefs = [job_coefficients(inst, job) for job in inst.jobs]
        self.m = pyo.ConcreteModel(name="aidc_oracle_sites")
        self._variables(allow_pause)
        self._tokens()
        self._capacity_and_energy()
        self.build_seconds = time.perf_counter() - tick

    def _variables(self, allow_pause: bool) -> None:
        """x, y, z, w and the rows that tie them (one site per segment, restarts, moves)."""
        inst, m, coefs = self.inst, self.m, self.coefs
        n_sites = len(inst.sites)
        jks = [(j, k, s) for j, job in enumerate(inst.jobs) for k in range(job.segments) for s in range(n_sites)]
        windows = [inst.allowed_segments(job) for job in inst.jobs]
        placed = [self.assignment is None or self.assignment[j] == s for j in range(len(inst.jobs))
                  for s in range(n_sites)]
        jksm = [(j, k, s, c) for (j, k, s) in jks if placed[j * n_sites + s] and windows[j][k]
                for c in range(inst.jobs[j].n_modes) if coefs[j].gpus[c] <= inst.sites[s].n_gpus]
        self.jks, self.jksm = jks, jksm
        m.x = pyo.Var(jksm, domain=pyo.Binary)
        m.y = pyo.Var(jks, domain=pyo.Binary)
        m.z = pyo.Var(jksm, domain=pyo.NonNegativeReals)
        m.w = pyo.Var(jksm, domain=pyo.NonNegativeReals)
        for (j, k, s) in jks:
            if not placed[j * n_sites + s]:
                m.y[j, k, s].fix(0)
        modes_at: dict[tuple[int, int, int], list[int]] = {key: [] for key in jks}
        for (j, k, s, c) in jksm:
            modes_at[j, k, s].append(c)
        self.modes_at = modes_at
        m.one_site = pyo.Constraint(
            [(j, k) for j, job in enumerate(inst.jobs) for k in range(job.segments)],
            rule=lambda m, j, k: linear([1.0] * n_sites, [m.y[j, k, s] for s in range(n_sites)]) == 1)

        def run_rule(m, j, k, s):
            cs = modes_at[j, k, s]
            total = linear([1.0] * len(cs) + [-1.0], [m.x[j, k, s, c] for c in cs] + [m.y[j, k, s]])
            return total <= 0 if allow_pause or not cs else total == 0

        m.run_at_site = pyo.Constraint(jks, rule=run_rule)
        if self.placement == "stay":  # one site per job for the whole horizon
            m.stay = pyo.Constraint([(j, k, s) for (j, k, s) in jks if k > 0],
                                    rule=lambda m, j, k, s: m.y[j, k, s] == m.y[j, 0, s])
        home, free = inst.home_sites, self.free_start

        def previous_x(j: int, k: int, s: int, c: int) -> Any:
            if k == 0:
                here = m.y[j, 0, s] if free else float(s == home[j])
                return here if c == inst.jobs[j].initial_mode else 0.0
            return m.x[j, k - 1, s, c] if (j, k - 1, s, c) in m.x else 0.0

        def previous_y(j: int, k: int, s: int) -> Any:
            if k == 0:
                return m.y[j, 0, s] if free else float(s == home[j])
            return m.y[j, k - 1, s]

        m.restart = pyo.Constraint(jksm, rule=lambda m, j, k, s, c: m.z[j, k, s, c] >= m.x[j, k, s, c]
                                   - previous_x(j, k, s, c))
        m.moved = pyo.Constraint(jksm, rule=lambda m, j, k, s, c: m.w[j, k, s, c] >= m.x[j, k, s, c]
                                 - previous_y(j, k, s))

    def _tokens(self) -> None:
        """Per job: kept yield, less the restart loss, less the transfer loss (rate × transfer hours) ≥ target."""
        inst, m, coefs = self.inst, self.m, self.coefs
        m.tranche = pyo.ConstraintList()
        for j, job in enumerate(inst.jobs):
            if job.n_modes == 0 or job.tranche_tokens <= 0:
                continue
            scale = TRANCHE_ROW_RHS / job.tranche_tokens
            lost_move = coefs[j].tokens_per_s * SECONDS_PER_HOUR * inst.transfer_hours[j]
            cs, vs = [], []
            for (jj, k, s, c) in self.jksm:
                if jj == j:
                    cs += [coefs[j].tokens_kept[c] * scale,
                           -(coefs[j].tokens_kept[c] - coefs[j].tokens_restarted[c]) * scale, -lost_move[c] * scale]
                    vs += [m.x[j, k, s, c], m.z[j, k, s, c], m.w[j, k, s, c]]
            m.tranche.add(linear(cs, vs) >= job.tranche_tokens * (1.0 - TRANCHE_MARGIN) * scale)

    def _capacity_and_energy(self) -> None:
        """Per site and block the GPUs left by its inference; per site and slot the load and the slot's cost."""
        inst, m, coefs = self.inst, self.m, self.coefs
        views, T = inst.site_views, inst.slots
        starts, block_segment = blocks(inst)

        def block_terms(b: int, s: int, per_mode: Sequence[np.ndarray]) -> tuple[list[float], list[pyo.Var]]:
            keys = [(j, int(block_segment[b, j]), s) for j in range(len(inst.jobs))]
            return ([float(per_mode[j][c]) for (j, k, _) in keys for c in self.modes_at[j, k, s]],
                    [m.x[j, k, s, c] for (j, k, _) in keys for c in self.modes_at[j, k, s]])

        ends = list(starts[1:]) + [T]
        m.capacity = pyo.ConstraintList()
        for s, view in enumerate(views):
            left = view.n_gpus - view.inference_gpus.astype(np.int64)
            for b in range(len(starts)):
                cs, vs = block_terms(b, s, [coef.gpus for coef in coefs])
                room = int(left[starts[b]:ends[b]].min())
                if vs and sum(cs) > room:
                    m.capacity.add(linear(cs, vs) <= room)
        block_of_slot = np.searchsorted(starts, np.arange(T), side="right") - 1
        self.idle_load = [np.asarray(pool_load_mw(v, np.zeros(T, dtype=np.int64), np.zeros(T)), dtype=float)
                          for v in views]
        self.delta_load = [[facility_load_mw(v, coef.gpus, coef.it_power_kw) - facility_load_mw(v, 0, 0.0)
                            for coef in coefs] for v in views]
        st = [(s, t) for s in range(len(views)) for t in range(T)]
        per_block = [[block_terms(b, s, self.delta_load[s]) for b in range(len(starts))] for s in range(len(views))]
        m.site_load = pyo.Expression(st, rule=lambda m, s, t: linear(*per_block[s][block_of_slot[t]],
                                                                    float(self.idle_load[s][t])))
        self.renewable = [v.renewable_mw for v in views]
        self.grid_coef = [slot_decision_cost_usd(v, np.ones(T), np.zeros(T)) for v in views]
        self.curt_coef = [slot_decision_cost_usd(v, np.zeros(T), np.ones(T)) for v in views]
        m.g = pyo.Var(st, domain=pyo.NonNegativeReals)
        m.grid_floor = pyo.Constraint(st, rule=lambda m, s, t: m.g[s, t] >= m.site_load[s, t] - float(
            self.renewable[s][t]))
        negative = [(s, t) for (s, t) in st if self.grid_coef[s][t] + self.curt_coef[s][t] < 0]
        m.importing = pyo.Var(negative, domain=pyo.Binary)
        low = [self.idle_load[s] + sum(min(0.0, float(np.min(d, initial=0.0))) for d in self.delta_load[s])
               for s in range(len(views))]
        high = [self.idle_load[s] + sum(max(0.0, float(np.max(d, initial=0.0))) for d in self.delta_load[s])
                for s in range(len(views))]
        m.import_only_deficit = pyo.Constraint(negative, rule=lambda m, s, t: m.g[s, t] <= m.site_load[s, t] - float(
            self.renewable[s][t]) + max(0.0, float(self.renewable[s][t] - low[s][t])) * (1 - m.importing[s, t]))
        m.import_only_if_deficit = pyo.Constraint(negative, rule=lambda m, s, t: m.g[s, t] <= max(
            0.0, float(high[s][t] - self.renewable[s][t])) * m.importing[s, t])
        self.negative = negative
        idle_value = inst.idle_value_usd_per_gpu_hour * inst.slot_hours  # $ per GPU and slot the jobs give up
        self.constant = float(sum(renewable_cost_usd(v) - np.sum(slot_idle_value_usd(v, v.inference_gpus))
                                  for v in views))
        m.cost = pyo.Objective(expr=sum(
            float(self.grid_coef[s][t]) * m.g[s, t]
            + float(self.curt_coef[s][t]) * (float(self.renewable[s][t]) - m.site_load[s, t] + m.g[s, t])
            for (s, t) in st) + sum(idle_value * float(coefs[j].gpus[c] * coefs[j].slots_per_segment) * m.x[j, k, s, c]
                                    for (j, k, s, c) in self.jksm if idle_value) + self.constant, sense=pyo.minimize)

    # ------------------------------------------------------------------ reading and starting

    def read(self) -> tuple[list[list[int]], list[list[int]]]:
        """(schedule, sites) of the variable values loaded in the model."""
        m, inst = self.m, self.inst
        schedule, sites = [], []
        for j, job in enumerate(inst.jobs):
            row, where = [], []
            for k in range(job.segments):
                loc = max(range(len(inst.sites)), key=lambda s: pyo.value(m.y[j, k, s], exception=False) or 0.0)
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
        m, inst = self.m, self.inst
        for (j, k, s) in self.jks:
            if not m.y[j, k, s].fixed:
                yield m.y[j, k, s], float(sites[j][k] == s)
        for (j, k, s, c) in self.jksm:
            run = schedule[j][k] == c and sites[j][k] == s
            prev_c = inst.jobs[j].initial_mode if k == 0 else schedule[j][k - 1]
            prev_s = (s if self.free_start else inst.home_sites[j]) if k == 0 else sites[j][k - 1]
            yield m.x[j, k, s, c], float(run)
            yield m.z[j, k, s, c], float(run and (prev_c != c or prev_s != s))
            yield m.w[j, k, s, c], float(run and prev_s != s)
        loads = self.loads(schedule, sites)
        for s in range(len(inst.sites)):
            deficit = loads[s] - self.renewable[s]
            for t in range(inst.slots):
                yield m.g[s, t], max(0.0, float(deficit[t]))
        for (s, t) in self.negative:
            yield m.importing[s, t], float(loads[s][t] - self.renewable[s][t] > 0)

    def loads(self, schedule: Sequence[Sequence[int]], sites: Sequence[Sequence[int]]) -> np.ndarray:
        """(sites, T): the model's facility load of a (schedule, sites) pair."""
        inst = self.inst
        out = np.array(self.idle_load, dtype=float)
        for j, job in enumerate(inst.jobs):
            per = inst.slots_per_segment(job)
            choice = np.repeat(np.asarray(schedule[j], dtype=np.int64), per)
            where = np.repeat(np.asarray(sites[j], dtype=np.int64), per)
            for s in range(len(out)):
                mask = (choice != PAUSE) & (where == s)
                out[s][mask] += self.delta_load[s][j][choice[mask]]
        return out

    def replay_instance(self, sites: Sequence[Sequence[int]]) -> Instance:
        """With "stay"/"free" each job's checkpoint starts at its first site."""
        if self.free_start and self.inst.network is not None:
            return with_home(self.inst, [row[0] for row in sites])
        return self.inst

    def _start(self) -> Start | None:
        """Every job in its baseline mode at its home site, if that is feasible."""
        where = self.inst.home_sites
        schedule = fixed_schedule(self.inst)
        sites = [[where[j]] * job.segments for j, job in enumerate(self.inst.jobs)]
        return (schedule, sites) if self._replay(schedule, sites).feasible else None

    def _replay(self, schedule: Sequence[Sequence[int]], sites: Sequence[Sequence[int]]) -> Metrics:
        replay = self.replay_instance(sites)
        return simulate(replay, validate_schedule(replay, schedule, sites)).metrics

    # ------------------------------------------------------------------ solving

    def solve(self, *, time_limit_s: float = 120.0, mip_gap: float = DEFAULT_MIP_GAP, threads: int | None = None,
              tee: bool = False, warm_start: bool = True, start: Start | None = None) -> OracleResult:
        """Solve; ``start``: a (schedule, sites) MIP start (default: every job's baseline at its home site)."""
        runner = make_runner(DEFAULT_SOLVER)
        if start is None and warm_start:
            start = self._start()
        start_usd = self._replay(*start).objective_usd if start else None
        tick = time.perf_counter()
        outcome = runner.solve(self.m, time_limit_s=time_limit_s, mip_gap=mip_gap,
                               start=self.start_values(*start) if start else None, threads=threads, tee=tee, options={})
        common = dict(method="textbook", formulation="sites-textbook", start_objective_usd=start_usd,
                      build_seconds=self.build_seconds + outcome.load_seconds, proof="branch-and-bound",
                      solve_seconds=time.perf_counter() - tick)
        if not outcome.has_solution:
            status = outcome.status if outcome.status != "optimal" else "error"
            return answer(self.inst, None, None, outcome.bound, mip_gap, status=status, reason=outcome.message or (
                f"time limit of {time_limit_s:g} s reached before any schedule was found"
                if status == "time_limit" else ""), **common)
        schedule, sites = self.read()
        status = "" if outcome.status in ("optimal", "time_limit") else outcome.status
        reason = "" if outcome.status != "optimal" else "the solver ended within its own tolerances, short of the gap"
        return answer(self.replay_instance(sites), schedule, sites, outcome.bound, mip_gap,
                      check_usd=outcome.objective, status=status, reason=reason, time_limit_s=time_limit_s, **common)


def solve_sites(inst: Instance, *, time_limit_s: float = 120.0, mip_gap: float = DEFAULT_MIP_GAP,
                placement: str = "move", allow_pause: bool = True, threads: int | None = None, tee: bool = False,
                warm_start: bool = True, start: Start | None = None) -> OracleResult:
    """Solve an instance with the sites MILP; see :class:`SitesModel`."""
    model = SitesModel(inst, placement=placement, allow_pause=allow_pause)
    return model.solve(time_limit_s=time_limit_s, mip_gap=mip_gap, threads=threads, tee=tee, warm_start=warm_start,
                       start=start)
