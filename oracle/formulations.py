"""The two Pyomo formulations of the day (DESIGN §2-§3): ``fast`` (joint states) and ``textbook``.

Both describe the same feasible schedules and the same objective (operating cost, the constant PPA
term included); a test checks that they reach the same optimum.

**textbook** -- per-job binaries x[j,s,m] (Σ_m x ≤ 1, no x = pause), restart indicators
z ≥ x[j,s,m] − x[j,s−1,m], per-slot GPU capacity, per-slot facility load L_t (affine in x),
grid import g_t ≥ L_t − R_t, g_t ≥ 0 (curtailment c_t = R_t − L_t + g_t ≥ 0 follows), and, only in
slots where importing more would pay (λ_t + c_cur < 0), a binary that enforces renewable first
(g_t = max(0, L_t − R_t)). Its LP relaxation runs fractional modes: a continuously adjustable load.

**fast** -- per block b (intervals between the union of the jobs' segment boundaries) a variable
y[b,S] for every capacity-feasible joint state S (one choice per job, pause included), with the
exact block cost of S precomputed by the simulator's functions (no grid, curtailment or
negative-price variables at all); per-job choice binaries x[j,s,c] (pause included) equal the
marginals of y; restarts through "keep" variables k[j,s,m] ≤ x[j,s−1,m], k[j,s,m] ≤ x[j,s,m]
(from the initial mode at s = 0) -- the projection of the per-job transition-flow network;
tokens Σ_s Σ_m (yield after restart)·x + (restart loss)·k ≥ tranche.

Each builder returns a :class:`Built`: the model plus how to read a schedule from it and how to set
a schedule as a MIP start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
from pyomo.core.expr.numeric_expr import LinearExpression

from aidc_env.case import PAUSE
from aidc_env.simulator import TRANCHE_TOLERANCE, facility_load_mw, slot_decision_cost_usd
from oracle.data import OracleData

TRANCHE_ROW_RHS = 1e4
"""Tranche rows are scaled so that their right-hand side is this number (the tranche = 1e4 units):
the solver's absolute feasibility tolerance then stays far below the simulator's relative
:data:`~aidc_env.simulator.TRANCHE_TOLERANCE`."""

TRANCHE_MARGIN = TRANCHE_TOLERANCE / 2
"""The model asks for tokens ≥ W·(1 − margin): strictly inside the simulator's 'met' test, and loose
enough that a schedule meeting the tranche up to float rounding (e.g. fixed continuous) stays feasible."""

INTEGRALITY_THRESHOLD = 0.5
"""A binary read from the solver counts as 1 above this value."""

FORMULATIONS = ("fast", "textbook")


@dataclass
class Built:
    """A built Pyomo model and its accessors."""

    model: pyo.ConcreteModel
    formulation: str
    read_schedule: Callable[[], list[list[int]]]
    start_values: Callable[[list[list[int]]], Iterator[tuple[pyo.Var, float]]]
    """(variable, value) pairs of a complete MIP start for a schedule."""
    objective_of: Callable[[list[list[int]]], float]
    """The model's objective evaluated on a schedule from its own coefficients (a cross-check)."""
    update_costs: Callable[[OracleData], None] | None = None
    """Re-price the objective in place for an instance with the same structure (None: rebuild)."""


def tranche_scale(tranche_tokens: float) -> float:
    """Multiplier of a job's token row (tokens → tranche units of ``1/TRANCHE_ROW_RHS``)."""
    return TRANCHE_ROW_RHS / tranche_tokens


def tranche_rhs() -> float:
    return TRANCHE_ROW_RHS * (1.0 - TRANCHE_MARGIN)


def _restarted(previous: int, choice: int) -> bool:
    return choice != PAUSE and choice != previous


def _schedule_tokens_terms(data: OracleData, schedule: list[list[int]]) -> list[float]:
    out = []
    for job, coef, choices in zip(data.inst.jobs, data.jobs, schedule, strict=True):
        previous, total = job.initial_mode, 0.0
        for c in choices:
            if c != PAUSE:
                total += coef.tokens_restarted[c] if _restarted(previous, c) else coef.tokens_kept[c]
            previous = c
        out.append(total)
    return out


# ============================================================================================ fast


def build_fast(data: OracleData, *, joint_binary: bool = False, counts: bool = False) -> Built:
    """The joint-state formulation (see the module docstring).

    ``joint_binary``: declare y binary too (by default only the per-job choices x are binary; y is
    then integral automatically, since a joint distribution with one-hot marginals is one-hot).
    """
    inst = data.inst
    if data.joint_states is None:
        raise ValueError("the fast formulation needs the joint states (too many: use 'textbook')")
    states = data.joint_states
    n_jobs = len(inst.jobs)
    m = pyo.ConcreteModel(name="aidc_oracle_fast")

    # ---- index sets
    m.B = pyo.RangeSet(0, data.n_blocks - 1)
    m.S = pyo.RangeSet(0, data.n_states - 1)
    jsc = [(j, s, c) for j, job in enumerate(inst.jobs) for s in range(job.segments)
           for c in list(range(job.n_modes)) + [PAUSE]]
    keep_index = [(j, s, c) for j, job in enumerate(inst.jobs) for s in range(job.segments)
                  for c in range(job.n_modes) if s > 0 or c == job.initial_mode]

    m.y = pyo.Var(m.B, m.S, domain=pyo.Binary if joint_binary else pyo.UnitInterval)
    m.x = pyo.Var(jsc, domain=pyo.Binary)
    m.k = pyo.Var(keep_index, domain=pyo.UnitInterval)

    # ---- one joint state per block
    m.one = pyo.Constraint(m.B, rule=lambda m, b: sum(m.y[b, i] for i in m.S) == 1)

    # ---- per-job choices are the marginals of the joint state
    states_with = {(j, c): np.flatnonzero(states[:, j] == c).tolist()
                   for j, job in enumerate(inst.jobs) for c in list(range(job.n_modes)) + [PAUSE]}
    link_index = [(b, j, c) for b in range(data.n_blocks) for j, job in enumerate(inst.jobs)
                  for c in list(range(job.n_modes)) + [PAUSE]]

    def link_rule(m, b, j, c):
        members = states_with[j, c]
        s = int(data.block_segment[b, j])
        if not members:
            return m.x[j, s, c] == 0
        return sum(m.y[b, i] for i in members) == m.x[j, s, c]

    m.link = pyo.Constraint(link_index, rule=link_rule)

    # ---- restarts: keep k ≤ previous choice and ≤ current choice
    keep_prev = [(j, s, c) for (j, s, c) in keep_index if s > 0]
    m.keep_prev = pyo.Constraint(keep_prev, rule=lambda m, j, s, c: m.k[j, s, c] <= m.x[j, s - 1, c])
    m.keep_now = pyo.Constraint(keep_index, rule=lambda m, j, s, c: m.k[j, s, c] <= m.x[j, s, c])

    # ---- tranches
    m.tranche_rhs = pyo.Param(range(n_jobs), mutable=True, initialize=lambda m, j: tranche_rhs())

    def tranche_rule(m, j):
        job, coef = inst.jobs[j], data.jobs[j]
        if job.tranche_tokens <= 0:
            return pyo.Constraint.Skip
        scale = tranche_scale(job.tranche_tokens)
        terms = [float(coef.tokens_restarted[c] * scale) * m.x[j, s, c]
                 for s in range(job.segments) for c in range(job.n_modes)]
        terms += [float((coef.tokens_kept[c] - coef.tokens_restarted[c]) * scale) * m.k[j, s, c]
                  for (jj, s, c) in keep_index if jj == j]
        return sum(terms) >= m.tranche_rhs[j]

    m.tranche = pyo.Constraint(range(n_jobs), rule=tranche_rule)

    if counts:
        jm = [(j, c) for j, job in enumerate(inst.jobs) for c in range(job.n_modes)]
        m.n_segments = pyo.Var(jm, domain=pyo.NonNegativeIntegers)
        m.n_segments_def = pyo.Constraint(jm, rule=lambda m, j, c: m.n_segments[j, c] == sum(
            m.x[j, s, c] for s in range(inst.jobs[j].segments)))
        m.n_restarts = pyo.Var(range(n_jobs), domain=pyo.NonNegativeIntegers)
        m.n_restarts_def = pyo.Constraint(range(n_jobs), rule=lambda m, j: m.n_restarts[j] == sum(
            m.x[j, s, c] for s in range(inst.jobs[j].segments) for c in range(inst.jobs[j].n_modes))
            - sum(m.k[jj, s, c] for (jj, s, c) in keep_index if jj == j))

    # ---- objective: exact block costs of the joint states + the constant PPA term
    def objective_expr(d: OracleData):
        cost = d.block_cost_usd
        return sum(float(cost[b, i]) * m.y[b, i] for b in range(d.n_blocks) for i in range(d.n_states)) \
            + d.renewable_cost_usd

    m.cost = pyo.Objective(expr=objective_expr(data), sense=pyo.minimize)

    state_index = {tuple(int(v) for v in row): i for i, row in enumerate(states)}

    def read_schedule() -> list[list[int]]:
        out = []
        for j, job in enumerate(inst.jobs):
            choices = []
            for s in range(job.segments):
                values = {c: pyo.value(m.x[j, s, c], exception=False) or 0.0
                          for c in list(range(job.n_modes)) + [PAUSE]}
                choices.append(int(max(values, key=values.get)))
            out.append(choices)
        return out

    def start_values(schedule: list[list[int]]) -> Iterator[tuple[pyo.Var, float]]:
        for (j, s, c) in jsc:
            yield m.x[j, s, c], float(schedule[j][s] == c)
        for (j, s, c) in keep_index:
            previous = inst.jobs[j].initial_mode if s == 0 else schedule[j][s - 1]
            yield m.k[j, s, c], float(schedule[j][s] == c and previous == c)
        for b in range(data.n_blocks):
            joint = tuple(schedule[j][int(data.block_segment[b, j])] for j in range(n_jobs))
            chosen = state_index.get(joint)
            for i in range(data.n_states):
                yield m.y[b, i], float(i == chosen)
        if counts:
            for j, job in enumerate(inst.jobs):
                for c in range(job.n_modes):
                    yield m.n_segments[j, c], float(sum(1 for v in schedule[j] if v == c))
                previous = [job.initial_mode] + list(schedule[j][:-1])
                yield m.n_restarts[j], float(sum(1 for p, v in zip(previous, schedule[j]) if v != PAUSE and v != p))

    def objective_of(schedule: list[list[int]]) -> float:
        total = data_ref[0].renewable_cost_usd
        for b in range(data.n_blocks):
            joint = tuple(schedule[j][int(data.block_segment[b, j])] for j in range(n_jobs))
            total += float(data_ref[0].block_cost_usd[b, state_index[joint]])
        return total

    data_ref = [data]

    def update_costs(new: OracleData) -> None:
        m.del_component(m.cost)
        m.cost = pyo.Objective(expr=objective_expr(new), sense=pyo.minimize)
        data_ref[0] = new

    return Built(model=m, formulation="fast", read_schedule=read_schedule, start_values=start_values,
                 objective_of=objective_of, update_costs=update_costs)



def _linear(coefs, variables, constant: float = 0.0):
    """A Pyomo linear expression built in one go (much faster than summing terms)."""
    return LinearExpression(constant=constant, linear_coefs=list(coefs), linear_vars=list(variables))


@dataclass
class RestartNetwork:
    """Arcs of the joint-transition network between consecutive blocks (see :func:`restart_network`)."""

    tails: list[int]
    heads: list[int]
    loss_job: list[int]
    """Job that restarts on the arc (-1: none)."""
    loss_choice: list[int]
    """The mode it restarts into (PAUSE: none)."""
    keys: dict[tuple, int]
    n_nodes: int
    source: int
    state_node: np.ndarray
    """(blocks, states): node id of each joint state in each block."""


def restart_network(data: OracleData) -> RestartNetwork:
    """The day as a path over joint states, with each job's transition as its own stage.

    Between block b−1 and block b, job 0 moves first, then job 1, and so on; a job whose segment
    boundary it is may keep its choice (a "stay" arc, no restart) or go through a hub (one per
    combination of the other jobs' choices) into any choice, paying its restart on the hub's exit arc
    (none into PAUSE). Intermediate tuples need not fit in the pool; the tuples at the end of the
    last stage are the capacity-feasible joint states of block b. Every path is one schedule and
    every schedule one path, so the LP relaxation is the convex hull of joint paths (plus the tranche
    rows): restarts can no longer be dodged by recombining the jobs' fractional choices.
    """
    inst = data.inst
    states = data.joint_states
    n_jobs = len(inst.jobs)
    feasible = {tuple(int(v) for v in row): i for i, row in enumerate(states)}
    choices = [list(range(job.n_modes)) + [PAUSE] for job in inst.jobs]
    tails: list[int] = []
    heads: list[int] = []
    loss_job: list[int] = []
    loss_choice: list[int] = []
    keys: dict[tuple, int] = {}
    counter = [0]

    def new_node() -> int:
        counter[0] += 1
        return counter[0] - 1

    def arc(key: tuple, tail: int, head: int, job: int = -1, choice: int = PAUSE) -> None:
        keys[key] = len(tails)
        tails.append(tail)
        heads.append(head)
        loss_job.append(job)
        loss_choice.append(choice)

    source = new_node()
    state_node = np.array([[new_node() for _ in range(data.n_states)] for _ in range(data.n_blocks)], dtype=np.int64)
    initial = tuple(job.initial_mode for job in inst.jobs)
    for b in range(data.n_blocks):
        current = {initial: source} if b == 0 else {tuple(int(v) for v in row): int(state_node[b - 1, i])
                                                     for i, row in enumerate(states)}
        for j in range(n_jobs):
            last = j == n_jobs - 1
            boundary = b == 0 or data.block_segment[b, j] != data.block_segment[b - 1, j]
            following: dict[tuple, int] = {}

            def target(tup: tuple) -> int | None:
                if last:
                    i = feasible.get(tup)
                    return None if i is None else int(state_node[b, i])
                if tup not in following:
                    following[tup] = new_node()
                return following[tup]

            hubs: dict[tuple, int] = {}
            for tup, node in current.items():
                head = target(tup)
                if head is not None:
                    arc(("stay", b, j, tup), node, head)
                if boundary:
                    rest = tup[:j] + tup[j + 1:]
                    if rest not in hubs:
                        hubs[rest] = new_node()
                    arc(("tohub", b, j, tup), node, hubs[rest])
            for rest, hub in hubs.items():
                for c in choices[j]:
                    tup = rest[:j] + (c,) + rest[j:]
                    head = target(tup)
                    if head is not None:
                        arc(("fromhub", b, j, tup), hub, head, j if c != PAUSE else -1, c)
            if last:
                break
            current = following
    return RestartNetwork(tails=tails, heads=heads, loss_job=loss_job, loss_choice=loss_choice, keys=keys,
                          n_nodes=counter[0], source=source, state_node=state_node)


def build_network(data: OracleData) -> Built:
    """The joint-state formulation with restarts on the joint-transition network (the kept "fast")."""
    inst = data.inst
    if data.joint_states is None:
        raise ValueError("the fast formulation needs the joint states (too many: use 'textbook')")
    states = data.joint_states
    n_jobs = len(inst.jobs)
    net = restart_network(data)
    m = pyo.ConcreteModel(name="aidc_oracle_fast")
    m.B = pyo.RangeSet(0, data.n_blocks - 1)
    m.S = pyo.RangeSet(0, data.n_states - 1)
    m.A = pyo.RangeSet(0, len(net.tails) - 1)
    jsc = [(j, s, c) for j, job in enumerate(inst.jobs) for s in range(job.segments)
           for c in list(range(job.n_modes)) + [PAUSE]]
    m.y = pyo.Var(m.B, m.S, domain=pyo.UnitInterval)
    m.f = pyo.Var(m.A, domain=pyo.UnitInterval)
    m.x = pyo.Var(jsc, domain=pyo.Binary)

    # ---- flow conservation: the source sends one unit; a state node's inflow and outflow are y.
    into: list[list[int]] = [[] for _ in range(net.n_nodes)]
    out_of: list[list[int]] = [[] for _ in range(net.n_nodes)]
    for a, (t, h) in enumerate(zip(net.tails, net.heads, strict=True)):
        out_of[t].append(a)
        into[h].append(a)
    state_of_node = {int(node): (b, i) for (b, i), node in np.ndenumerate(net.state_node)}
    f = m.f
    rows = []
    for node in range(net.n_nodes):
        if node == net.source:
            rows.append((_linear([1.0] * len(out_of[node]), [f[a] for a in out_of[node]]), 1.0))
        elif node in state_of_node:
            b, i = state_of_node[node]
            rows.append((_linear([1.0] * len(into[node]) + [-1.0], [f[a] for a in into[node]] + [m.y[b, i]]), 0.0))
            if b + 1 < data.n_blocks:
                rows.append((_linear([1.0] * len(out_of[node]) + [-1.0], [f[a] for a in out_of[node]] + [m.y[b, i]]),
                             0.0))
        else:
            rows.append((_linear([1.0] * len(into[node]) + [-1.0] * len(out_of[node]),
                                 [f[a] for a in into[node]] + [f[a] for a in out_of[node]]), 0.0))
    m.flow = pyo.Constraint(range(len(rows)), rule=lambda m, r: rows[r][0] == rows[r][1])

    # ---- per-job choices are the marginals of the joint state at each segment's first block
    states_with = {(j, c): np.flatnonzero(states[:, j] == c).tolist()
                   for j, job in enumerate(inst.jobs) for c in list(range(job.n_modes)) + [PAUSE]}
    first_block = {(j, s): int(data.blocks_of_segment(j, s)[0])
                   for j, job in enumerate(inst.jobs) for s in range(job.segments)}

    def link_rule(m, j, s, c):
        members = states_with[j, c]
        b = first_block[j, s]
        return _linear([1.0] * len(members) + [-1.0], [m.y[b, i] for i in members] + [m.x[j, s, c]]) == 0

    m.link = pyo.Constraint(jsc, rule=link_rule)

    # ---- tranches: kept-segment tokens of the choices minus the restart losses on the network
    m.tranche_rhs = pyo.Param(range(n_jobs), mutable=True, initialize=lambda m, j: tranche_rhs())
    loss_arcs = [[a for a in range(len(net.tails)) if net.loss_job[a] == j] for j in range(n_jobs)]

    def tranche_rule(m, j):
        job, coef = inst.jobs[j], data.jobs[j]
        if job.tranche_tokens <= 0:
            return pyo.Constraint.Skip
        scale = tranche_scale(job.tranche_tokens)
        coefs = [float(coef.tokens_kept[c] * scale) for s in range(job.segments) for c in range(job.n_modes)]
        variables = [m.x[j, s, c] for s in range(job.segments) for c in range(job.n_modes)]
        for a in loss_arcs[j]:
            c = net.loss_choice[a]
            coefs.append(-float((coef.tokens_kept[c] - coef.tokens_restarted[c]) * scale))
            variables.append(m.f[a])
        return _linear(coefs, variables) >= m.tranche_rhs[j]

    m.tranche = pyo.Constraint(range(n_jobs), rule=tranche_rule)

    def objective_expr(d: OracleData):
        cost = d.block_cost_usd
        return _linear([float(v) for v in cost.ravel()],
                       [m.y[b, i] for b in range(d.n_blocks) for i in range(d.n_states)], d.renewable_cost_usd)

    m.cost = pyo.Objective(expr=objective_expr(data), sense=pyo.minimize)
    data_ref = [data]
    state_index = {tuple(int(v) for v in row): i for i, row in enumerate(states)}

    def read_schedule() -> list[list[int]]:
        out = []
        for j, job in enumerate(inst.jobs):
            choices = []
            for s in range(job.segments):
                values = {c: pyo.value(m.x[j, s, c], exception=False) or 0.0
                          for c in list(range(job.n_modes)) + [PAUSE]}
                choices.append(int(max(values, key=values.get)))
            out.append(choices)
        return out

    def joint_path(schedule: list[list[int]]) -> list[tuple]:
        return [tuple(int(schedule[j][int(data.block_segment[b, j])]) for j in range(n_jobs))
                for b in range(data.n_blocks)]

    def start_values(schedule: list[list[int]]) -> Iterator[tuple[pyo.Var, float]]:
        path = joint_path(schedule)
        used: set[int] = set()
        previous = tuple(job.initial_mode for job in inst.jobs)
        for b, joint in enumerate(path):
            u = previous
            for j in range(n_jobs):
                v = u[:j] + (joint[j],) + u[j + 1:]
                if v == u:
                    used.add(net.keys["stay", b, j, u])
                else:
                    used.add(net.keys["tohub", b, j, u])
                    used.add(net.keys["fromhub", b, j, v])
                u = v
            previous = joint
        for a in range(len(net.tails)):
            yield m.f[a], float(a in used)
        chosen = {(b, state_index[joint]) for b, joint in enumerate(path)}
        for b in range(data.n_blocks):
            for i in range(data.n_states):
                yield m.y[b, i], float((b, i) in chosen)
        for (j, s, c) in jsc:
            yield m.x[j, s, c], float(schedule[j][s] == c)

    def objective_of(schedule: list[list[int]]) -> float:
        d = data_ref[0]
        return d.renewable_cost_usd + sum(float(d.block_cost_usd[b, state_index[joint]])
                                          for b, joint in enumerate(joint_path(schedule)))

    def update_costs(new: OracleData) -> None:
        m.del_component(m.cost)
        m.cost = pyo.Objective(expr=objective_expr(new), sense=pyo.minimize)
        data_ref[0] = new

    return Built(model=m, formulation="fast", read_schedule=read_schedule, start_values=start_values,
                 objective_of=objective_of, update_costs=update_costs)


# ============================================================================================ textbook


def build_textbook(data: OracleData) -> Built:
    """The textbook formulation (see the module docstring)."""
    inst = data.inst
    T = inst.slots
    m = pyo.ConcreteModel(name="aidc_oracle_textbook")
    jsm = [(j, s, c) for j, job in enumerate(inst.jobs) for s in range(job.segments) for c in range(job.n_modes)]
    m.x = pyo.Var(jsm, domain=pyo.Binary)
    m.z = pyo.Var(jsm, domain=pyo.NonNegativeReals)
    m.T = pyo.RangeSet(0, T - 1)
    m.g = pyo.Var(m.T, domain=pyo.NonNegativeReals)

    m.one_mode = pyo.Constraint(
        [(j, s) for j, job in enumerate(inst.jobs) for s in range(job.segments)],
        rule=lambda m, j, s: sum(m.x[j, s, c] for c in range(inst.jobs[j].n_modes)) <= 1)

    def restart_rule(m, j, s, c):
        job = inst.jobs[j]
        previous = (1.0 if c == job.initial_mode else 0.0) if s == 0 else m.x[j, s - 1, c]
        return m.z[j, s, c] >= m.x[j, s, c] - previous

    m.restart = pyo.Constraint(jsm, rule=restart_rule)

    m.tranche_rhs = pyo.Param(range(len(inst.jobs)), mutable=True, initialize=lambda m, j: tranche_rhs())

    def tranche_rule(m, j):
        job, coef = inst.jobs[j], data.jobs[j]
        if job.tranche_tokens <= 0:
            return pyo.Constraint.Skip
        scale = tranche_scale(job.tranche_tokens)
        return sum(float(coef.tokens_kept[c] * scale) * m.x[j, s, c]
                   - float((coef.tokens_kept[c] - coef.tokens_restarted[c]) * scale) * m.z[j, s, c]
                   for s in range(job.segments) for c in range(job.n_modes)) >= m.tranche_rhs[j]

    m.tranche = pyo.Constraint(range(len(inst.jobs)), rule=tranche_rule)

    def segment_of(j: int, t: int) -> int:
        return t // data.jobs[j].slots_per_segment

    m.capacity = pyo.Constraint(m.T, rule=lambda m, t: sum(
        int(data.jobs[j].gpus[c]) * m.x[j, segment_of(j, t), c]
        for j, job in enumerate(inst.jobs) for c in range(job.n_modes)) <= inst.n_gpus)

    # Facility load is affine in the choices: L_t = L_idle + Σ (L(n_m, P_m) − L_idle) x.
    idle_load = float(facility_load_mw(inst, 0, 0.0))
    delta_load = [facility_load_mw(inst, coef.gpus, coef.it_power_kw) - idle_load for coef in data.jobs]

    def load(m, t):
        return idle_load + sum(float(delta_load[j][c]) * m.x[j, segment_of(j, t), c]
                               for j, job in enumerate(inst.jobs) for c in range(job.n_modes))

    m.facility_load = pyo.Expression(m.T, rule=load)
    renewable = inst.renewable_mw
    m.grid_floor = pyo.Constraint(m.T, rule=lambda m, t: m.g[t] >= m.facility_load[t] - float(renewable[t]))

    # Per unit of grid import and of curtailment, the simulator's slot cost.
    grid_coef = slot_decision_cost_usd(inst, np.ones(T), np.zeros(T))
    curt_coef = slot_decision_cost_usd(inst, np.zeros(T), np.ones(T))
    # Load bounds over all capacity-unconstrained choices, for the big-M constants.
    low_load = idle_load + sum(min(0.0, float(d.min())) for d in delta_load if d.size)
    high_load = idle_load + sum(max(0.0, float(d.max())) for d in delta_load if d.size)
    negative = [t for t in range(T) if grid_coef[t] + curt_coef[t] < 0 and renewable[t] > 0]
    m.NEG = pyo.Set(initialize=negative)
    m.importing = pyo.Var(m.NEG, domain=pyo.Binary)
    m.import_only_deficit = pyo.Constraint(m.NEG, rule=lambda m, t: m.g[t] <= m.facility_load[t] - float(renewable[t])
                                           + max(0.0, float(renewable[t]) - low_load) * (1 - m.importing[t]))
    m.import_only_if_deficit = pyo.Constraint(m.NEG, rule=lambda m, t: m.g[t]
                                              <= max(0.0, high_load - float(renewable[t])) * m.importing[t])

    # cost = Σ grid_coef·g + curt_coef·c with c = R − L + g.
    m.cost = pyo.Objective(
        expr=sum(float(grid_coef[t]) * m.g[t] + float(curt_coef[t]) * (float(renewable[t]) - m.facility_load[t] + m.g[t])
                 for t in range(T)) + data.renewable_cost_usd,
        sense=pyo.minimize)

    def read_schedule() -> list[list[int]]:
        out = []
        for j, job in enumerate(inst.jobs):
            choices = []
            for s in range(job.segments):
                values = [pyo.value(m.x[j, s, c], exception=False) or 0.0 for c in range(job.n_modes)]
                best = int(np.argmax(values)) if values else PAUSE
                choices.append(best if values and values[best] > INTEGRALITY_THRESHOLD else PAUSE)
            out.append(choices)
        return out

    def start_values(schedule: list[list[int]]) -> Iterator[tuple[pyo.Var, float]]:
        for (j, s, c) in jsm:
            previous = inst.jobs[j].initial_mode if s == 0 else schedule[j][s - 1]
            yield m.x[j, s, c], float(schedule[j][s] == c)
            yield m.z[j, s, c], float(schedule[j][s] == c and previous != c)
        load_t = np.full(T, idle_load)
        for j, choices in enumerate(schedule):
            per_slot = np.repeat(np.asarray(choices), data.jobs[j].slots_per_segment)
            running = per_slot != PAUSE
            load_t[running] += delta_load[j][per_slot[running]]
        for t in range(T):
            deficit = load_t[t] - renewable[t]
            yield m.g[t], max(0.0, float(deficit))
            if t in m.NEG:
                yield m.importing[t], float(deficit > 0)

    def objective_of(schedule: list[list[int]]) -> float:
        total = data.renewable_cost_usd
        values = {id(v): val for v, val in start_values(schedule)}
        for t in range(T):
            g = values[id(m.g[t])]
            load_t = idle_load + sum(float(delta_load[j][c]) * values[id(m.x[j, segment_of(j, t), c])]
                                     for j, job in enumerate(inst.jobs) for c in range(job.n_modes))
            total += float(grid_coef[t]) * g + float(curt_coef[t]) * (float(renewable[t]) - load_t + g)
        return total

    return Built(model=m, formulation="textbook", read_schedule=read_schedule, start_values=start_values,
                 objective_of=objective_of, update_costs=None)


def build(data: OracleData, formulation: str, **options) -> Built:
    if formulation == "fast":
        return build_network(data)
    if formulation == "keep":
        return build_fast(data, **options)
    if formulation == "textbook":
        return build_textbook(data)
    raise ValueError(f"unknown formulation {formulation!r} (known: {', '.join(FORMULATIONS)})")
