"""The two Pyomo formulations of the day: ``fast`` (joint states) and ``textbook``; the same schedules and objective
(operating cost, the constant PPA term included).

**textbook**: per-job binaries x[j,s,m] (Σ_m x ≤ 1; no x means pause), restart indicators z ≥ x[j,s,m] − x[j,s−1,m],
per-slot GPU capacity, per-slot facility load L_t (affine in x), grid import g_t ≥ L_t − R_t, g_t ≥ 0 and, only where
importing more would pay (λ_t + c_cur < 0), a binary enforcing renewable first. Its LP relaxation is the "continuously
adjustable" load.

**fast**: per block b (the intervals between the union of the jobs' segment boundaries) a variable y[b,S] ∈ [0, 1] for
every capacity-feasible joint state S, with the exact cost of S over the block precomputed by the simulator's functions:
no grid, curtailment or negative-price variables remain. Per-job choice binaries x[j,s,c] are the marginals of y.
Restarts: "keep" variables k[j,s,m] ≤ x[j,s−1,m], k[j,s,m] ≤ x[j,s,m] (the initial mode at s = 0), tokens Σ (yield after
a restart)·x + (restart loss)·k ≥ tranche: the projection of the per-job transition-flow network, whose LP bound equals
the full joint-transition network's. The oracle solves it through a Lagrangian reduction (:mod:`oracle.reduction`).

Each builder returns a :class:`Built`: the model, how to read a schedule from it, a schedule's values as a MIP start,
the model's own objective of a schedule (a cross-check), and, for ``fast``, how to re-price it in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
from pyomo.core.expr.numeric_expr import LinearExpression

from aidc_env.billing import KW_PER_MW, TariffTerms
from aidc_env.errors import require
from aidc_env.instance import PAUSE, Instance
from aidc_env.simulator import TRANCHE_TOLERANCE, facility_load_mw, slot_decision_cost_usd
from oracle.constants import FORMULATIONS
from oracle.data import OracleData, day_segments, daily_rows, joint_objective_usd, joint_path
from oracle.grid_rows import GridRows

TRANCHE_ROW_RHS = 1e4
"""Each tranche row is scaled so that the tranche built into the model reads this many units: HiGHS's absolute MIP
feasibility tolerance (1e-6) is then 1e-10 of the tranche, below :data:`TRANCHE_MARGIN`."""
TRANCHE_MARGIN = TRANCHE_TOLERANCE / 2
"""The model asks for tokens ≥ W·(1 − margin): inside the simulator's 'met' test, and loose enough that a schedule
meeting the tranche up to float rounding (e.g. fixed continuous training) stays feasible."""


@dataclass
class Built:
    """A built Pyomo model and its accessors."""

    model: pyo.ConcreteModel
    formulation: str
    read_schedule: Callable[[], list[list[int]]]
    """The schedule of the variable values loaded in the model."""
    start_values: Callable[[Sequence[Sequence[int]]], Iterator[tuple[pyo.Var, float]]]
    """(variable, value) pairs of a complete MIP start for a schedule."""
    objective_of: Callable[[Sequence[Sequence[int]]], float] | None
    """The model's objective of a schedule, from its own coefficients (None with the grid's side: its schedules carry
    caps, and the solver's objective is checked against the replay instead)."""
    set_tranches: Callable[[Instance], None]
    """Set the tranche right-hand sides from an instance of the same structure (mutable Params)."""
    update_costs: Callable[[OracleData], None] | None = None
    """Re-price the objective in place for an instance of the same structure (None: rebuild)."""
    tranche_scales: Sequence[float] = ()
    """Multiplier of each job's token row (row units per token)."""
    read_caps: Callable[[], list[list[float]] | None] | None = None
    """textbook with caps: the cap level positions (per job and slot) of the values loaded in the model."""
    fix_before: Callable[[Sequence[Sequence[int]], Sequence[Sequence[float]] | None, int], None] | None = None
    """textbook: fix the choices of every segment that starts before a slot, and the caps of the slots before it, to a
    schedule's (what a controller has already done: :mod:`agents.calls`)."""
    joint_states: np.ndarray | None = None
    """fast: the joint states of the model's y columns (rows of ``data.joint_states[state_ids]``)."""
    state_ids: np.ndarray | None = None
    """fast: their indices in ``data.joint_states`` (all, or those without a pause)."""
    disallowed: np.ndarray | None = None
    """fast: (blocks, states) the y a grid call's limit bounds to zero (its cost is +inf: oracle.data.call_costs)."""


def linear(coefs: Sequence[float], variables: Sequence[pyo.Var], constant: float = 0.0) -> LinearExpression:
    """A Pyomo linear expression built in one go (much faster than summing terms)."""
    return LinearExpression(constant=constant, linear_coefs=[float(c) for c in coefs], linear_vars=list(variables))


TRANCHE_SCALE_FLOOR = 1e-3
"""A tranche smaller than this fraction of what the job's fastest mode makes in a day is scaled as if it were that
large, to keep the row's coefficients within a range the solver handles."""

def max_day_tokens(data: OracleData, j: int) -> float:
    """What job j's fastest mode makes in a day without a restart (a scale, not a bound)."""
    coef = data.jobs[j]
    return float(np.max(coef.tokens_kept, initial=0.0)) * data.inst.jobs[j].segments


def effective_tranche(tranche_tokens: float, segment_yields: np.ndarray) -> float:
    """The tranche the model asks for: a positive tranche below the smallest yield of a running segment is raised to
    that yield. Exact, since a schedule makes either no token or at least that many; it keeps minute tranches (e.g. what
    is left of a day in MPC) clear of the solver's tolerances."""
    if tranche_tokens <= 0 or segment_yields.size == 0:
        return max(tranche_tokens, 0.0)
    return max(tranche_tokens, float(segment_yields.min()))


def tranche_scales(data: OracleData) -> list[float]:
    """Multiplier of each job's token row (tokens → row units).

    The tranche at build time reads ``TRANCHE_ROW_RHS`` units, unless it is zero or below ``TRANCHE_SCALE_FLOOR`` of the
    job's day; the scale stays fixed when :func:`Built.set_tranches` changes the tranche later.
    """
    scales = []
    for j, job in enumerate(data.inst.jobs):
        wanted = effective_tranche(job.tranche_tokens, data.jobs[j].tokens_restarted)
        reference = max(wanted, TRANCHE_SCALE_FLOOR * max_day_tokens(data, j))
        scales.append(TRANCHE_ROW_RHS / reference if reference > 0 else 1.0)
    return scales


def tranche_tokens(data: OracleData) -> np.ndarray:
    """Per job, the tokens the model's tranche row asks for (the effective tranche less the margin)."""
    return np.array([effective_tranche(job.tranche_tokens, data.jobs[j].tokens_restarted) * (1.0 - TRANCHE_MARGIN)
                     for j, job in enumerate(data.inst.jobs)])


def usable_state_ids(data: OracleData, allow_pause: bool = True) -> np.ndarray:
    """Indices in ``data.joint_states`` of the fast model's joint states (all, or those without a pause)."""
    states = data.joint_states
    return np.arange(len(states)) if allow_pause else np.flatnonzero(np.all(states != PAUSE, axis=1))


def _add_token_rows(m: pyo.ConcreteModel, data: OracleData, scales: Sequence[float],
                    segment_terms: Callable[[int, int], tuple[list[float], list[pyo.Var]]]
                    ) -> Callable[[Instance], None]:
    """The token rows of a formulation: per job, its tranche over the horizon (``m.tranche``), and per job and day, its
    daily minimum (``m.daily``, only with D > 1 and ``min_daily_share`` > 0). ``segment_terms(j, s)`` gives the tokens
    of job j's segment s as (coefficients, variables). Rows are scaled by the job's tranche scale; right-hand sides are
    mutable Params, set by the returned ``set_tranches``."""
    inst = data.inst
    n_jobs = len(inst.jobs)

    def scaled(j: int, segments: Sequence[int]) -> LinearExpression:
        coefs, variables = [], []
        for s in segments:
            c, v = segment_terms(j, s)
            coefs += [x * scales[j] for x in c]
            variables += v
        return linear(coefs, variables)

    m.tranche_rhs = pyo.Param(range(n_jobs), mutable=True, initialize=0.0)
    m.tranche = pyo.Constraint(range(n_jobs), rule=lambda m, j: pyo.Constraint.Skip if inst.jobs[j].n_modes == 0
                               else scaled(j, range(inst.jobs[j].segments)) >= m.tranche_rhs[j])
    days = daily_rows(inst)
    m.daily_rhs = pyo.Param(days, mutable=True, initialize=0.0)
    m.daily = pyo.Constraint(days, rule=lambda m, j, d: scaled(j, day_segments(inst, j, d)) >= m.daily_rhs[j, d])

    def set_tranches(new: Instance) -> None:
        for j, job in enumerate(new.jobs):
            wanted = effective_tranche(job.tranche_tokens, data.jobs[j].tokens_restarted)
            m.tranche_rhs[j] = wanted * (1.0 - TRANCHE_MARGIN) * scales[j]
        for j, d in days:
            wanted = effective_tranche(new.daily_min_tokens(new.jobs[j]), data.jobs[j].tokens_restarted)
            m.daily_rhs[j, d] = wanted * (1.0 - TRANCHE_MARGIN) * scales[j]

    set_tranches(inst)
    return set_tranches


def _choices(inst: Instance, j: int, allow_pause: bool) -> list[int]:
    return list(range(inst.jobs[j].n_modes)) + ([PAUSE] if allow_pause else [])


def _restarted(previous: int, choice: int) -> bool:
    return choice != PAUSE and choice != previous


# ============================================================================================ fast


def build_fast(data: OracleData, *, allow_pause: bool = True) -> Built:
    """The joint-state formulation (see the module docstring)."""
    inst = data.inst
    if data.joint_states is None:
        raise ValueError("the fast formulation needs the joint states (too many here: use 'textbook')")
    n_jobs = len(inst.jobs)
    state_ids = usable_state_ids(data, allow_pause)
    states = data.joint_states[state_ids]
    m = pyo.ConcreteModel(name="aidc_oracle_fast")

    choices = [_choices(inst, j, allow_pause) for j in range(n_jobs)]
    jsc = [(j, s, c) for j, job in enumerate(inst.jobs) for s in range(job.segments) for c in choices[j]]
    keep_index = [(j, s, c) for j, job in enumerate(inst.jobs) for s in range(job.segments)
                  for c in range(job.n_modes) if s > 0 or c == job.initial_mode]
    m.y = pyo.Var(range(data.n_blocks), range(len(states)), domain=pyo.UnitInterval)
    disallowed = ~np.isfinite(data.block_cost_usd[:, state_ids])  # a grid call's limit (oracle.data.call_costs)
    for b, i in zip(*np.nonzero(disallowed), strict=True):
        m.y[int(b), int(i)].setub(0)
    m.x = pyo.Var(jsc, domain=pyo.Binary)
    m.k = pyo.Var(keep_index, domain=pyo.UnitInterval)

    # One joint state per block.
    m.one = pyo.Constraint(range(data.n_blocks), rule=lambda m, b: linear(
        [1.0] * len(states), [m.y[b, i] for i in range(len(states))]) == 1)

    # Per-job choices are the marginals of the joint state in each block of their segment.
    members = {(j, c): np.flatnonzero(states[:, j] == c).tolist() for j in range(n_jobs) for c in choices[j]}
    link_index = [(b, j, c) for b in range(data.n_blocks) for j in range(n_jobs) for c in choices[j]]

    def link_rule(m, b, j, c):
        xv = m.x[j, int(data.block_segment[b, j]), c]
        ids = members[j, c]
        return linear([1.0] * len(ids) + [-1.0], [m.y[b, i] for i in ids] + [xv]) == 0

    m.link = pyo.Constraint(link_index, rule=link_rule)

    # Restarts: k[j,s,m] = 1 only if the job keeps mode m from segment s−1 (or from its initial mode).
    m.keep_prev = pyo.Constraint([i for i in keep_index if i[1] > 0],
                                 rule=lambda m, j, s, c: m.k[j, s, c] <= m.x[j, s - 1, c])
    m.keep_now = pyo.Constraint(keep_index, rule=lambda m, j, s, c: m.k[j, s, c] <= m.x[j, s, c])

    # Tranches and daily minimums (rows scaled; right-hand sides are mutable for re-solves).
    scales = tranche_scales(data)
    kept_modes = {(j, s): [c for c in range(job.n_modes) if (j, s, c) in m.k]
                  for j, job in enumerate(inst.jobs) for s in range(job.segments)}

    def segment_terms(j: int, s: int) -> tuple[list[float], list[pyo.Var]]:
        """Tokens of segment s: the restarted yield of its mode, plus the restart loss back when it kept it."""
        coef = data.jobs[j]
        modes, kept = range(inst.jobs[j].n_modes), kept_modes[j, s]
        return ([float(coef.tokens_restarted[c]) for c in modes]
                + [float(coef.tokens_kept[c] - coef.tokens_restarted[c]) for c in kept],
                [m.x[j, s, c] for c in modes] + [m.k[j, s, c] for c in kept])

    set_tranches = _add_token_rows(m, data, scales, segment_terms)

    # Objective: exact block costs of the joint states + the constant terms (the PPA's, the calls').
    def objective_expr(d: OracleData) -> LinearExpression:
        cost = d.block_cost_usd[:, state_ids]
        return linear(np.where(disallowed, 0.0, cost).ravel(),
                      [m.y[b, i] for b in range(d.n_blocks) for i in range(len(states))], d.constant_usd)

    terms = inst.tariff_terms
    charges = _add_fast_demand_rows(m, data, state_ids) if terms is not None else 0.0
    fixed = terms.fixed_usd if terms is not None else 0.0
    m.cost = pyo.Objective(expr=objective_expr(data) + charges + fixed, sense=pyo.minimize)
    current = {"data": data}
    state_index = {tuple(int(v) for v in row): i for i, row in enumerate(states)}

    def read_schedule() -> list[list[int]]:
        return _read_choices(m, inst, choices, pause_is_rest=False)

    def start_values(schedule: Sequence[Sequence[int]]) -> Iterator[tuple[pyo.Var, float]]:
        for (j, s, c) in jsc:
            yield m.x[j, s, c], float(schedule[j][s] == c)
        for (j, s, c) in keep_index:
            previous = inst.jobs[j].initial_mode if s == 0 else schedule[j][s - 1]
            yield m.k[j, s, c], float(schedule[j][s] == c and previous == c)
        for b, joint in enumerate(joint_path(data, schedule)):
            chosen = state_index.get(joint)
            for i in range(len(states)):
                yield m.y[b, i], float(i == chosen)
        if terms is not None:
            yield from demand_start_values(m, terms, joint_grid_mw(data, schedule))

    def objective_of(schedule: Sequence[Sequence[int]]) -> float:
        extra = 0.0 if terms is None else terms.demand_usd(joint_grid_mw(current["data"], schedule)) + fixed
        return joint_objective_usd(current["data"], schedule) + extra

    def update_costs(new: OracleData) -> None:
        require(new.inst.tariff_terms is None, "tariff", "a model under a tariff is rebuilt, not re-priced")
        require(not new.inst.grid_calls and not bool(disallowed.any()), "grid_calls",
                "a model with grid calls is rebuilt, not re-priced")
        m.del_component(m.cost)
        m.cost = pyo.Objective(expr=objective_expr(new), sense=pyo.minimize)
        current["data"] = new

    return Built(model=m, formulation="fast", read_schedule=read_schedule, start_values=start_values,
                 objective_of=objective_of, set_tranches=set_tranches, update_costs=update_costs,
                 tranche_scales=scales, joint_states=states, state_ids=state_ids, disallowed=disallowed)


# ============================================================================================ textbook


def build_textbook(data: OracleData, *, allow_pause: bool = True, group_slots: bool = True) -> Built:
    """The textbook formulation (see the module docstring); ``group_slots``: the caps of alike slots share their
    variables (:func:`oracle.grid_rows.slot_groups`; a past that :attr:`Built.fix_before` fixes unlike over a group
    rebuilds the model without)."""
    inst, T = data.inst, data.inst.slots
    m = pyo.ConcreteModel(name="aidc_oracle_textbook")
    jsm = [(j, s, c) for j, job in enumerate(inst.jobs) for s in range(job.segments) for c in range(job.n_modes)]
    m.x = pyo.Var(jsm, domain=pyo.Binary)
    m.z = pyo.Var(jsm, domain=pyo.NonNegativeReals)
    m.g = pyo.Var(range(T), domain=pyo.NonNegativeReals)

    def one_mode(m, j, s):
        job = inst.jobs[j]
        if job.n_modes == 0:
            return pyo.Constraint.Skip if allow_pause else pyo.Constraint.Infeasible
        total = linear([1.0] * job.n_modes, [m.x[j, s, c] for c in range(job.n_modes)])
        return total <= 1 if allow_pause else total == 1

    m.one_mode = pyo.Constraint([(j, s) for j, job in enumerate(inst.jobs) for s in range(job.segments)], rule=one_mode)

    def restart_rule(m, j, s, c):
        if s == 0:
            return m.z[j, s, c] >= m.x[j, s, c] - (1.0 if c == inst.jobs[j].initial_mode else 0.0)
        return m.z[j, s, c] >= m.x[j, s, c] - m.x[j, s - 1, c]

    m.restart = pyo.Constraint(jsm, rule=restart_rule)
    scales = tranche_scales(data)

    def segment_terms(j: int, s: int) -> tuple[list[float], list[pyo.Var]]:
        """Tokens of segment s: the kept yield of its mode, less the restart loss when it restarted."""
        coef = data.jobs[j]
        coefs, variables = [], []
        for c in range(inst.jobs[j].n_modes):
            coefs += [float(coef.tokens_kept[c]), -float(coef.tokens_kept[c] - coef.tokens_restarted[c])]
            variables += [m.x[j, s, c], m.z[j, s, c]]
        return coefs, variables

    grid = GridRows(m, data, group_slots) if inst.has_grid_side else None
    if grid is not None:  # the caps' tokens join each segment's
        plain_terms = segment_terms

        def segment_terms(j: int, s: int) -> tuple[list[float], list[pyo.Var]]:
            coefs, variables = plain_terms(j, s)
            extra = grid.segment_cap_tokens(j, s)
            return coefs + extra[0], variables + extra[1]

    set_tranches = _add_token_rows(m, data, scales, segment_terms)
    idle_load, delta_load, grid_coef, curt_coef, negative = _add_slot_rows(m, data, grid, segment_terms)
    renewable = inst.renewable_mw

    def slot_loads(schedule: Sequence[Sequence[int]]) -> np.ndarray:
        load = np.full(T, idle_load)
        for j, row in enumerate(schedule):
            per_slot = np.repeat(np.asarray(row, dtype=np.int64), data.jobs[j].slots_per_segment)
            running = per_slot != PAUSE
            load[running] += delta_load[j][per_slot[running]]
        return load

    def start_values(schedule: Sequence[Sequence[int]]) -> Iterator[tuple[pyo.Var, float]]:
        for (j, s, c) in jsm:
            previous = inst.jobs[j].initial_mode if s == 0 else schedule[j][s - 1]
            yield m.x[j, s, c], float(schedule[j][s] == c)
            yield m.z[j, s, c], float(schedule[j][s] == c and previous != c)
        deficit = slot_loads(schedule) - renewable
        for t in range(T):
            yield m.g[t], max(0.0, float(deficit[t]))
        for t in negative:
            yield m.importing[t], float(deficit[t] > 0)
        yield from demand_start_values(m, inst.tariff_terms, np.maximum(0.0, deficit))

    def objective_of(schedule: Sequence[Sequence[int]]) -> float:
        load = slot_loads(schedule)
        grid = np.maximum(0.0, load - renewable)
        terms = inst.tariff_terms
        charges = 0.0 if terms is None else terms.demand_usd(grid) + terms.fixed_usd
        return data.renewable_cost_usd + charges + float(np.sum(grid_coef * grid + curt_coef * (renewable - load
                                                                                               + grid)))

    def fix_before(schedule: Sequence[Sequence[int]], caps: Sequence[Sequence[float]] | None, slot: int) -> None:
        if grid is not None and not grid.expresses(caps, slot):  # the same model with a variable per slot
            vars(built).update(vars(build_textbook(data, allow_pause=allow_pause, group_slots=False)))
            built.fix_before(schedule, caps, slot)
            return
        for j, job in enumerate(inst.jobs):
            started = -(-slot // data.jobs[j].slots_per_segment)  # segments that start before the slot
            for s in range(min(started, job.segments)):
                for c in range(job.n_modes):
                    m.x[j, s, c].fix(float(schedule[j][s] == c))
        if grid is not None:
            grid.fix_caps(schedule, caps, slot)

    modes = [list(range(job.n_modes)) for job in inst.jobs]
    built = Built(model=m, formulation="textbook", read_schedule=lambda: _read_choices(m, inst, modes, True),
                  fix_before=fix_before,
                  start_values=start_values, objective_of=None if grid is not None else objective_of,
                  set_tranches=set_tranches, update_costs=None, tranche_scales=scales,
                  read_caps=grid.read_caps if grid is not None else None)
    return built


def _add_slot_rows(m: pyo.ConcreteModel, data: OracleData, grid: GridRows | None = None,
                   segment_terms: Callable[[int, int], tuple[list[float], list[pyo.Var]]] | None = None
                   ) -> tuple[float, list[np.ndarray], np.ndarray, np.ndarray, list[int]]:
    """The textbook model's per-slot rows and objective: GPU capacity, facility load, grid import (renewable first where
    importing more would pay) and the cost; with the grid's side (``grid``), the caps' load, the call rows and
    payments, the tiers and the training lost. Returns (idle load, each job's load per mode above it, $ per MW of import
    and of curtailment per slot, the slots with a renewable-first binary)."""
    inst, T = data.inst, data.inst.slots

    def slot_terms(t: int, per_mode: Sequence[np.ndarray]) -> tuple[list[float], list[pyo.Var]]:
        coefs, variables = [], []
        for j, job in enumerate(inst.jobs):
            for c in range(job.n_modes):
                coefs.append(float(per_mode[j][c]))
                variables.append(m.x[j, t // data.jobs[j].slots_per_segment, c])
        return coefs, variables

    def capacity_rule(m, t):
        coefs, variables = slot_terms(t, [coef.gpus for coef in data.jobs])
        return pyo.Constraint.Skip if not variables else linear(coefs, variables) <= inst.n_gpus

    m.capacity = pyo.Constraint(range(T), rule=capacity_rule)
    # The facility load is affine in the choices: L_t = L(0, 0) + Σ (L(n_m, P_m) − L(0, 0))·x.
    idle_load = float(facility_load_mw(inst, 0, 0.0))
    delta_load = [facility_load_mw(inst, coef.gpus, coef.it_power_kw) - idle_load for coef in data.jobs]
    if grid is None:
        m.facility_load = pyo.Expression(range(T), rule=lambda m, t: linear(*slot_terms(t, delta_load), idle_load))
    else:
        def capped_load(m, t):
            coefs, variables = slot_terms(t, delta_load)
            extra = grid.load_terms(t)
            return linear(coefs + extra[0], variables + extra[1], idle_load)

        m.facility_load = pyo.Expression(range(T), rule=capped_load)
    renewable = inst.renewable_mw
    m.grid_floor = pyo.Constraint(range(T), rule=lambda m, t: m.g[t] >= m.facility_load[t] - float(renewable[t]))
    # The simulator's cost of one MW of grid import and of curtailment in each slot.
    grid_coef = slot_decision_cost_usd(inst, np.ones(T), np.zeros(T))
    curt_coef = slot_decision_cost_usd(inst, np.zeros(T), np.ones(T))
    constant = data.renewable_cost_usd
    lost = None
    if grid is not None:
        grid_coef, paid = grid.add_calls(grid_coef)
        grid.add_tiers(linear)
        lost = grid.training_lost(segment_terms)
        constant += paid + lost[2]
    low_load = idle_load + sum(min(0.0, float(d.min(initial=0.0))) for d in delta_load)
    high_load = idle_load + sum(max(0.0, float(d.max(initial=0.0))) for d in delta_load)
    negative = [t for t in range(T) if grid_coef[t] + curt_coef[t] < 0]
    m.importing = pyo.Var(negative, domain=pyo.Binary)
    m.import_only_deficit = pyo.Constraint(negative, rule=lambda m, t: m.g[t] <= m.facility_load[t] - float(
        renewable[t]) + max(0.0, float(renewable[t]) - low_load) * (1 - m.importing[t]))
    m.import_only_if_deficit = pyo.Constraint(negative, rule=lambda m, t: m.g[t] <= max(
        0.0, high_load - float(renewable[t])) * m.importing[t])
    # Cost = Σ grid_coef·g + curt_coef·c with c = R − L + g, plus the constant PPA term.
    energy = sum(float(grid_coef[t]) * m.g[t] + float(curt_coef[t]) * (float(renewable[t]) - m.facility_load[t]
                                                                         + m.g[t]) for t in range(T))
    if lost is not None:
        energy = energy + linear(lost[0], lost[1])
    if inst.tariff_terms is not None:
        energy = energy + _add_demand_rows(m, inst.tariff_terms)
        constant += inst.tariff_terms.fixed_usd
    m.cost = pyo.Objective(expr=energy + constant, sense=pyo.minimize)
    return idle_load, delta_load, grid_coef, curt_coef, negative


def _add_fast_demand_rows(m: pyo.ConcreteModel, data: OracleData, state_ids: np.ndarray) -> LinearExpression | float:
    """The fast model's demand charges: the pieces of :func:`_add_demand_rows`, one row per (charge, block) instead of
    per slot: a joint state's load is constant over a block, so its import is highest in the slot of the block (within
    the charge) with the least renewable, and Σ_i p[k,i] ≥ Σ_S y[b,S]·max(L_S − min R, 0) is the slots' rows exactly
    (in the LP relaxation too: each term falls as R rises)."""
    terms, renewable = data.inst.tariff_terms, data.inst.renewable_mw
    load = data.joint_load_mw[state_ids]
    rows: dict[tuple[int, int], tuple[list[float], list[int]]] = {}
    for k, charge in enumerate(terms.demand):
        in_charge = np.zeros(data.inst.slots, dtype=bool)
        in_charge[charge.slots] = True
        for b in range(data.n_blocks):
            where = data.block_slots(b)
            if in_charge[where].any():
                grid = np.maximum(load - float(renewable[where][in_charge[where]].min()), 0.0)
                ids = np.flatnonzero(grid > 0)
                if ids.size:
                    rows[k, b] = (grid[ids].tolist(), ids.tolist())
    return _add_demand_rows(m, terms, rows)


def joint_grid_mw(data: OracleData, schedule: Sequence[Sequence[int]]) -> np.ndarray:
    """A schedule's grid import per slot (MW), from the fast model's joint states and loads."""
    index = {tuple(int(v) for v in row): i for i, row in enumerate(data.joint_states)}
    load = np.empty(data.inst.slots)
    for b, joint in enumerate(joint_path(data, schedule)):
        load[data.block_slots(b)] = data.joint_load_mw[index[joint]]
    return np.maximum(load - data.inst.renewable_mw, 0.0)


def _add_demand_rows(m: pyo.ConcreteModel, terms: TariffTerms,
                     fast_rows: dict[tuple[int, int], tuple[list[float], list[int]]] | None = None
                     ) -> LinearExpression | float:
    """A tariff's demand charges (:mod:`aidc_env.billing`): per charge k and tier i a peak piece p[k,i] (MW, at most
    the tier's width), Σ_i p[k,i] ≥ g_t for every slot t of the charge (``fast_rows``: the fast model's rows instead),
    cost Σ rate·1000·p. Rates rise with the tier (convex), so the pieces fill in tier order and the cost is the tiered
    charge of the highest import."""
    if not terms.demand:
        return 0.0
    pieces = [(k, i) for k, charge in enumerate(terms.demand) for i in range(charge.rate_usd_per_kw.size)]

    def width(m, k, i):
        bounds = terms.demand[k].tier_max_kw
        upper = float(bounds[i] - (bounds[i - 1] if i else 0.0)) / KW_PER_MW
        return (0.0, upper if np.isfinite(upper) else None)

    m.peak = pyo.Var(pieces, domain=pyo.NonNegativeReals, bounds=width)
    tiers = {k: range(charge.rate_usd_per_kw.size) for k, charge in enumerate(terms.demand)}

    def peak(k: int) -> LinearExpression:
        return linear([1.0] * len(tiers[k]), [m.peak[k, i] for i in tiers[k]])

    if fast_rows is None:  # textbook: one row per slot of each charge
        rows = [(k, int(t)) for k, charge in enumerate(terms.demand) for t in charge.slots]
        m.peak_floor = pyo.Constraint(rows, rule=lambda m, k, t: peak(k) >= m.g[t])
    else:  # fast: one row per (charge, block) over the joint states
        m.peak_floor = pyo.Constraint(list(fast_rows), rule=lambda m, k, b: peak(k) >= linear(
            fast_rows[k, b][0], [m.y[b, i] for i in fast_rows[k, b][1]]))
    return linear([float(terms.demand[k].rate_usd_per_kw[i]) * KW_PER_MW for k, i in pieces],
                  [m.peak[k, i] for k, i in pieces])


def demand_start_values(m: pyo.ConcreteModel, terms: TariffTerms | None,
                        grid_mw: np.ndarray) -> Iterator[tuple[pyo.Var, float]]:
    """The peak pieces of :func:`_add_demand_rows` for a schedule's import (MW per slot): its tiers filled in order."""
    for k, charge in enumerate(terms.demand if terms is not None else ()):
        peak = charge.peak_kw(grid_mw) / KW_PER_MW
        lower = 0.0
        for i, bound in enumerate(charge.tier_max_kw / KW_PER_MW):
            yield m.peak[k, i], float(min(max(peak - lower, 0.0), bound - lower))
            lower = float(bound)


def _read_choices(m: pyo.ConcreteModel, inst: Instance, choices: Sequence[Sequence[int]],
                  pause_is_rest: bool) -> list[list[int]]:
    """The schedule of the values loaded in ``m.x[j, s, c]`` over each job's ``choices``: per segment the choice of
    largest value (``pause_is_rest``: PAUSE has no variable and takes 1 − Σ x)."""
    out = []
    for j, job in enumerate(inst.jobs):
        row = []
        for s in range(job.segments):
            values = {c: pyo.value(m.x[j, s, c], exception=False) or 0.0 for c in choices[j]}
            if pause_is_rest:
                values[PAUSE] = 1.0 - sum(values.values())
            row.append(int(max(values, key=values.get)))
        out.append(row)
    return out


def build(data: OracleData, formulation: str, *, allow_pause: bool = True) -> Built:
    """Build one of :data:`FORMULATIONS`."""
    if formulation == "fast":
        return build_fast(data, allow_pause=allow_pause)
    if formulation == "textbook":
        return build_textbook(data, allow_pause=allow_pause)
    raise ValueError(f"unknown formulation {formulation!r} (known: {', '.join(FORMULATIONS)})")
