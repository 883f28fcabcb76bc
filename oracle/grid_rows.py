"""The grid's side in the textbook MILP (:mod:`oracle.formulations`): GPU power caps, grid calls, throughput tiers and
the training value (:mod:`aidc_env.grid`). Every coefficient is the simulator's.

**Caps.** A cap may change within a slot (:mod:`aidc_env.grid`), so per job, slot, running mode m and capped level
l ≥ 1 a continuous share u[j,t,m,l] ≥ 0 of the slot spent at level l, with Σ_l u[j,t,m,l] ≤ x[j,s(t),m] (level 0, no
cap, is the rest): no binary is added, and the capped load and tokens are linear in u. A share at level l changes the
slot's IT power by (f_l − 1)·(P_m − n_m·p_host) and its tokens by (φ_l − 1)·r_m·3600·Δ. A (re)started segment makes no
token in its first τ hours, ℓ_t of them in slot t, at whatever cap: the tokens lost there are φ·r_m·ℓ_t, not r_m·ℓ_t,
so p[j,t,m,l] ≤ u with Σ_l p[j,t,m,l] ≤ z gives back (1 − φ_l)·r_m·ℓ_t (it is u·z at an optimum, z being 0 or 1:
more tokens never hurt; one row Σ_l p ≤ z is tighter than p ≤ z per level, and exact as Σ_l u ≤ 1). An answer's
shares are read back as each slot's level position of the same mean power, which (the levels being concave) makes at
least the same tokens.

**Slot groups.** Slots alike in everything a cap meets (each job's segment and restart hours, price, curtailment
penalty, renewable, call and limit, day) share one set of shares u (and p): a share is then that of each slot of the
group. Exact: a slot's cost is convex in its load (:func:`slot_groups` leaves alone the slots where importing more
pays, whose renewable-first binary is not), tokens and rows are linear, so averaging any answer's shares over a group
costs no more and keeps every row. Hourly prices and K = 12 leave 3 groups of the 8 slots of a segment; the past a
controller fixes (:meth:`GridRows.fix_caps`) must be alike over each group (:meth:`GridRows.expresses`).

**Calls.** Each slot of a call holds the grid import at or below its limit (g_t ≤ limit_t; the import variable is at
least L_t − R_t, so this bounds the load), and the payment per MWh below the baseline adds its rate to g_t's cost (the
baseline's part and the per-MW payment are constants: an answer delivers every call).

**Tiers.** Per call and job with a tier, the job's tokens over the call's slots ≥ (1 − its loss share) × its baseline
mode's. **Training value.** The value of a job's tokens short of its baseline's over the horizon.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyomo.environ as pyo

from aidc_env.grid import CAP_TOLERANCE_MW, slot_limits_mw
from aidc_env.instance import SECONDS_PER_HOUR
from aidc_env.simulator import TRANCHE_TOLERANCE, baseline_tokens, slot_decision_cost_usd
from oracle.data import OracleData

Terms = tuple[list[float], list[pyo.Var]]
TIER_ROW_RHS = 1e4
"""A tier row reads its baseline tokens as this many units (as the tranche rows: the solver's absolute feasibility
tolerance is then far inside the simulator's test)."""
POSITION_TOL = 1e-9
"""Shares of a slot below this are a solver's rounding, read as none."""
LIMIT_MARGIN_MW = CAP_TOLERANCE_MW / 2
"""A call's limit less this is the model's: a solver's tolerance (1e-6) never shows as a shortfall in the simulator."""


def restart_hours_in_slot(data: OracleData, j: int, t: int) -> float:
    """ℓ_t: the hours of slot t lost to a (re)start of its segment (τ_j counted from the segment's first slot)."""
    inst = data.inst
    offset = t % data.jobs[j].slots_per_segment
    return float(min(inst.slot_hours, max(0.0, inst.jobs[j].restart_hours - offset * inst.slot_hours)))


def slot_groups(data: OracleData, group: bool = True) -> list[int]:
    """Per slot the index of its group (see the module docstring): slots alike in each job's segment and restart hours,
    the cost of a MW of import and of curtailment, the renewable, the call, its limit and the day; a slot where
    importing more would pay (the model's renewable-first binary: a cost not convex in the load) is alone, and so is
    every slot without ``group``."""
    inst, T = data.inst, data.inst.slots
    grid_coef = slot_decision_cost_usd(inst, np.ones(T), np.zeros(T))  # call payments only raise it
    curt_coef = slot_decision_cost_usd(inst, np.zeros(T), np.ones(T))
    limit = slot_limits_mw(inst.grid_calls, T)
    call = np.full(T, -1)
    for k, c in enumerate(inst.grid_calls):
        call[c.slots] = k
    keys: dict[tuple, int] = {}
    out = []
    for t in range(T):
        if not group or grid_coef[t] + curt_coef[t] < 0:
            key: tuple = ("alone", t)
        else:
            key = (tuple(t // coef.slots_per_segment for coef in data.jobs),
                   tuple(restart_hours_in_slot(data, j, t) for j in range(len(inst.jobs))), float(grid_coef[t]),
                   float(curt_coef[t]), float(inst.renewable_mw[t]), float(limit[t]), int(call[t]),
                   t // inst.slots_per_day)
        out.append(keys.setdefault(key, len(keys)))
    return out


def merged(coefs: list[float], variables: list[pyo.Var]) -> Terms:
    """The terms with each variable once (its coefficients summed), in the order of first appearance."""
    total: dict[int, list] = {}
    for c, v in zip(coefs, variables, strict=True):
        entry = total.setdefault(id(v), [0.0, v])
        entry[0] += c
    return [e[0] for e in total.values()], [e[1] for e in total.values()]


class GridRows:
    """The rows and variables of the grid's side on a textbook model whose x (choices), z (restarts) and g (import)
    exist; :meth:`slot_tokens` and :meth:`load_terms` give the terms the tranche, tier and load rows add."""

    def __init__(self, m: pyo.ConcreteModel, data: OracleData, group: bool = True) -> None:
        self.m, self.data = m, data
        inst = data.inst
        self.curve = inst.cap_curve
        self.rate = [np.asarray(coef.tokens_per_s) * SECONDS_PER_HOUR for coef in data.jobs]
        levels = range(1, self.curve.levels) if self.curve is not None else range(0)
        T = inst.slots
        self.group = slot_groups(data, group)
        """Per slot the index of its group (the u and p of its caps)."""
        self.members: list[list[int]] = [[] for _ in range(max(self.group, default=-1) + 1)]
        for t, k in enumerate(self.group):
            self.members[k].append(t)
        self.jtml = [(j, k, c, lvl) for j, job in enumerate(inst.jobs) for k in range(len(self.members))
                     for c in range(job.n_modes) for lvl in levels]
        """(job, group, mode, level) of the shares u."""
        self.lost = {(j, t): restart_hours_in_slot(data, j, t) for j in range(len(inst.jobs)) for t in range(T)}
        self.jtml_restart = [key for key in self.jtml if self.lost[key[0], self.members[key[1]][0]] > 0]
        m.u = pyo.Var(self.jtml, domain=pyo.UnitInterval)
        m.p = pyo.Var(self.jtml_restart, domain=pyo.UnitInterval)
        jtm = list(dict.fromkeys((j, k, c) for (j, k, c, _) in self.jtml))
        m.cap_within_mode = pyo.Constraint(jtm, rule=lambda m, j, k, c: sum(
            m.u[j, k, c, lvl] for lvl in levels) <= m.x[j, self.segment(j, k), c])
        m.cap_restart_u = pyo.Constraint(self.jtml_restart, rule=lambda m, j, k, c, lvl: m.p[j, k, c, lvl]
                                         <= m.u[j, k, c, lvl])
        jtm_restart = list(dict.fromkeys((j, k, c) for (j, k, c, _) in self.jtml_restart))
        m.cap_restart_z = pyo.Constraint(jtm_restart, rule=lambda m, j, k, c: sum(
            m.p[j, k, c, lvl] for lvl in levels) <= m.z[j, self.segment(j, k), c])

    def segment(self, j: int, k: int) -> int:
        """Job j's segment of the slots of group k."""
        return self.members[k][0] // self.data.jobs[j].slots_per_segment

    # ------------------------------------------------------------------ terms

    def load_terms(self, t: int) -> Terms:
        """What the caps of slot t change in the facility load (MW)."""
        inst, coefs, variables = self.data.inst, [], []
        if self.curve is None:
            return coefs, variables
        for j, job in enumerate(inst.jobs):
            gpu_kw = np.asarray(self.data.jobs[j].it_power_kw) - np.asarray(self.data.jobs[j].gpus) * \
                self.curve.host_kw_per_gpu
            for lvl in range(1, self.curve.levels):
                for c in range(job.n_modes):
                    coefs.append(inst.pue * (self.curve.power_factor[lvl] - 1.0) * float(gpu_kw[c]) / 1000.0)
                    variables.append(self.m.u[j, self.group[t], c, lvl])
        return coefs, variables

    def cap_tokens(self, j: int, t: int) -> Terms:
        """What the caps of slot t change in job j's tokens."""
        coefs, variables = [], []
        if self.curve is None:
            return coefs, variables
        dt, lost, k = self.data.inst.slot_hours, self.lost[j, t], self.group[t]
        for lvl in range(1, self.curve.levels):
            phi = self.curve.throughput_factor[lvl]
            for c in range(self.data.inst.jobs[j].n_modes):
                coefs.append((phi - 1.0) * float(self.rate[j][c]) * dt)
                variables.append(self.m.u[j, k, c, lvl])
                if lost > 0:
                    coefs.append((1.0 - phi) * float(self.rate[j][c]) * lost)
                    variables.append(self.m.p[j, k, c, lvl])
        return coefs, variables

    def slot_tokens(self, j: int, t: int) -> Terms:
        """Job j's tokens in slot t: r_m·3600·(Δ·x − ℓ_t·z) over its modes, and the caps' change."""
        s = t // self.data.jobs[j].slots_per_segment
        dt, lost = self.data.inst.slot_hours, self.lost[j, t]
        coefs, variables = [], []
        for c in range(self.data.inst.jobs[j].n_modes):
            coefs.append(float(self.rate[j][c]) * dt)
            variables.append(self.m.x[j, s, c])
            if lost > 0:
                coefs.append(-float(self.rate[j][c]) * lost)
                variables.append(self.m.z[j, s, c])
        extra = self.cap_tokens(j, t)
        return coefs + extra[0], variables + extra[1]

    def segment_cap_tokens(self, j: int, s: int) -> Terms:
        """What the caps of segment s's slots change in job j's tokens (a group's terms once, times its slots)."""
        per = self.data.jobs[j].slots_per_segment
        return self.slots_cap_tokens(j, range(s * per, (s + 1) * per))

    def slots_cap_tokens(self, j: int, slots: range) -> Terms:
        """What the caps of some slots change in job j's tokens, each group's variables once."""
        count: dict[int, int] = {}
        for t in slots:
            count[self.group[t]] = count.get(self.group[t], 0) + 1
        coefs, variables = [], []
        for k, n in count.items():
            c, v = self.cap_tokens(j, self.members[k][0])
            coefs += [n * x for x in c]
            variables += v
        return coefs, variables

    # ------------------------------------------------------------------ rows and objective

    def add_calls(self, grid_coef: np.ndarray) -> tuple[np.ndarray, float]:
        """The call rows (g_t ≤ limit_t); returns the cost per MW of import with the payments added, and the constant
        (the baseline's part of the payments, the per-MW payments)."""
        inst, m = self.data.inst, self.m
        grid_coef = np.array(grid_coef, dtype=float)
        limit = slot_limits_mw(inst.grid_calls, inst.slots)
        constant = 0.0
        for call in inst.grid_calls:
            grid_coef[call.slots] += call.payment_usd_per_mwh * inst.slot_hours
            constant -= call.payment_usd_per_mwh * float(np.sum(call.baseline_mw)) * inst.slot_hours
            constant -= call.payment_usd_per_mw * max(call.committed_mw, 0.0)
        called = [t for t in range(inst.slots) if np.isfinite(limit[t])]
        m.call_limit = pyo.Constraint(called, rule=lambda m, t: m.g[t] <= max(float(limit[t]) - LIMIT_MARGIN_MW, 0.0))
        return grid_coef, constant

    def add_tiers(self, linear: Callable[..., object]) -> None:
        """Per call and job with a tier: its tokens over the call ≥ its floor (rows scaled to the baseline's tokens)."""
        inst, rows = self.data.inst, []
        for k, call in enumerate(inst.grid_calls):
            for j, job in enumerate(inst.jobs):
                reference = baseline_tokens(inst, job, call.slots)
                if job.max_throughput_loss is not None and reference > 0 and job.n_modes:
                    rows.append((k, j, reference))

        def rule(m, k, j, reference):
            call = inst.grid_calls[k]
            coefs, variables = [], []
            for t in range(call.start_slot, call.end_slot):
                c, v = self.slot_tokens(j, t)
                coefs += c
                variables += v
            coefs, variables = merged(coefs, variables)
            floor = 1.0 - inst.jobs[j].max_throughput_loss
            scale = TIER_ROW_RHS / reference
            return linear([x * scale for x in coefs], variables) >= floor * TIER_ROW_RHS * (1.0 - TRANCHE_TOLERANCE / 2)

        self.m.tier = pyo.Constraint(rows, rule=rule)

    def training_lost(self, segment_terms: Callable[[int, int], Terms]) -> tuple[list[float], list[pyo.Var], float]:
        """The training value of the tokens short of the baseline's: (coefficients, variables, constant)."""
        inst, coefs, variables, constant = self.data.inst, [], [], 0.0
        for j, job in enumerate(inst.jobs):
            value = inst.token_value_usd(job)
            if value <= 0 or not job.n_modes:
                continue
            constant += value * baseline_tokens(inst, job, slice(None))
            for s in range(job.segments):
                c, v = segment_terms(j, s)
                coefs += [-value * x for x in c]
                variables += v
        return coefs, variables, constant

    def expresses(self, caps, slot: int) -> bool:
        """Whether the model can hold a past fixed before ``slot`` with these caps (None: no cap): no group straddles
        the slot, and the caps are alike over each group before it (any past, without caps to fix)."""
        if not self.jtml:
            return True
        for members in self.members:
            before = [t for t in members if t < slot]
            if before and len(before) < len(members):
                return False
            if before and caps is not None and any(len({float(caps[j][t]) for t in before}) > 1
                                                   for j in range(len(self.data.jobs))):
                return False
        return True

    def fix_caps(self, schedule, caps, slot: int) -> None:
        """Fix the cap shares of the slots before ``slot`` to a schedule's level positions (None: no cap); the past must
        be one the groups express (:meth:`expresses`)."""
        for (j, k, c, lvl) in self.jtml:
            t = self.members[k][0]
            if t >= slot:
                continue
            position = 0.0 if caps is None else float(caps[j][t])
            low = int(np.floor(position))
            share = (1.0 - (position - low)) if lvl == low else (position - low) if lvl == low + 1 else 0.0
            self.m.u[j, k, c, lvl].fix(share if schedule[j][self.segment(j, k)] == c else 0.0)

    def read_caps(self) -> list[list[float]] | None:
        """Per job and slot the cap level position of the loaded shares: the position of their mean power factor
        (None: no cap anywhere)."""
        if self.curve is None:
            return None
        inst, curve = self.data.inst, self.curve
        drop = np.zeros((len(inst.jobs), inst.slots))  # Σ_l u·(1 − f_l): the power factor given up
        for (j, k, c, lvl) in self.jtml:
            share = pyo.value(self.m.u[j, k, c, lvl], exception=False) or 0.0
            if share > POSITION_TOL:
                drop[j, self.members[k]] += share * (1.0 - curve.power_factor[lvl])
        caps = [[0.0 if d <= POSITION_TOL else curve.position_of_power(1.0 - d) for d in row] for row in drop]
        return caps if any(any(row) for row in caps) else None
