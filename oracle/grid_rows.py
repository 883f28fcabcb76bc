"""The grid's side in the textbook MILP (:mod:`oracle.formulations`): GPU power caps, grid calls, throughput tiers and
the training value (:mod:`aidc_env.grid`). Every coefficient is the simulator's.

**Caps.** A cap may change within a slot (:mod:`aidc_env.grid`), so per job, slot, running mode m and capped level
l ≥ 1 a continuous share u[j,t,m,l] ≥ 0 of the slot spent at level l, with Σ_l u[j,t,m,l] ≤ x[j,s(t),m] (level 0, no
cap, is the rest): no binary is added, and the capped load and tokens are linear in u. A share at level l changes the
slot's IT power by (f_l − 1)·(P_m − n_m·p_host) and its tokens by (φ_l − 1)·r_m·3600·Δ. A (re)started segment makes no
token in its first τ hours, ℓ_t of them in slot t, at whatever cap: the tokens lost there are φ·r_m·ℓ_t, not r_m·ℓ_t,
so p[j,t,m,l] ≤ min(u, z) gives back (1 − φ_l)·r_m·ℓ_t (it is u·z at an optimum, z being 0 or 1: more tokens never
hurt). An answer's shares are read back as each slot's level position of the same mean power, which (the levels being
concave) makes at least the same tokens.

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
from aidc_env.simulator import TRANCHE_TOLERANCE, baseline_tokens
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


class GridRows:
    """The rows and variables of the grid's side on a textbook model whose x (choices), z (restarts) and g (import)
    exist; :meth:`slot_tokens` and :meth:`load_terms` give the terms the tranche, tier and load rows add."""

    def __init__(self, m: pyo.ConcreteModel, data: OracleData) -> None:
        self.m, self.data = m, data
        inst = data.inst
        self.curve = inst.cap_curve
        self.rate = [np.asarray(coef.tokens_per_s) * SECONDS_PER_HOUR for coef in data.jobs]
        levels = range(1, self.curve.levels) if self.curve is not None else range(0)
        T = inst.slots
        self.jtml = [(j, t, c, lvl) for j, job in enumerate(inst.jobs) for t in range(T) for c in range(job.n_modes)
                     for lvl in levels]
        self.lost = {(j, t): restart_hours_in_slot(data, j, t) for j in range(len(inst.jobs)) for t in range(T)}
        self.jtml_restart = [key for key in self.jtml if self.lost[key[0], key[1]] > 0]
        m.u = pyo.Var(self.jtml, domain=pyo.UnitInterval)
        m.p = pyo.Var(self.jtml_restart, domain=pyo.UnitInterval)
        jtm = list(dict.fromkeys((j, t, c) for (j, t, c, _) in self.jtml))
        m.cap_within_mode = pyo.Constraint(jtm, rule=lambda m, j, t, c: sum(
            m.u[j, t, c, lvl] for lvl in levels) <= m.x[j, t // data.jobs[j].slots_per_segment, c])
        m.cap_restart_u = pyo.Constraint(self.jtml_restart, rule=lambda m, j, t, c, lvl: m.p[j, t, c, lvl]
                                         <= m.u[j, t, c, lvl])
        m.cap_restart_z = pyo.Constraint(self.jtml_restart, rule=lambda m, j, t, c, lvl: m.p[j, t, c, lvl]
                                         <= m.z[j, t // data.jobs[j].slots_per_segment, c])

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
                    variables.append(self.m.u[j, t, c, lvl])
        return coefs, variables

    def cap_tokens(self, j: int, t: int) -> Terms:
        """What the caps of slot t change in job j's tokens."""
        coefs, variables = [], []
        if self.curve is None:
            return coefs, variables
        dt, lost = self.data.inst.slot_hours, self.lost[j, t]
        for lvl in range(1, self.curve.levels):
            phi = self.curve.throughput_factor[lvl]
            for c in range(self.data.inst.jobs[j].n_modes):
                coefs.append((phi - 1.0) * float(self.rate[j][c]) * dt)
                variables.append(self.m.u[j, t, c, lvl])
                if lost > 0:
                    coefs.append((1.0 - phi) * float(self.rate[j][c]) * lost)
                    variables.append(self.m.p[j, t, c, lvl])
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
        """What the caps of segment s's slots change in job j's tokens."""
        per = self.data.jobs[j].slots_per_segment
        coefs, variables = [], []
        for t in range(s * per, (s + 1) * per):
            c, v = self.cap_tokens(j, t)
            coefs += c
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

    def fix_caps(self, schedule, caps, slot: int) -> None:
        """Fix the cap shares of the slots before ``slot`` to a schedule's level positions (None: no cap)."""
        per = [coef.slots_per_segment for coef in self.data.jobs]
        for (j, t, c, lvl) in self.jtml:
            if t >= slot:
                continue
            position = 0.0 if caps is None else float(caps[j][t])
            low = int(np.floor(position))
            share = (1.0 - (position - low)) if lvl == low else (position - low) if lvl == low + 1 else 0.0
            self.m.u[j, t, c, lvl].fix(share if schedule[j][t // per[j]] == c else 0.0)

    def read_caps(self) -> list[list[float]] | None:
        """Per job and slot the cap level position of the loaded shares: the position of their mean power factor
        (None: no cap anywhere)."""
        if self.curve is None:
            return None
        inst, curve = self.data.inst, self.curve
        drop = np.zeros((len(inst.jobs), inst.slots))  # Σ_l u·(1 − f_l): the power factor given up
        for (j, t, c, lvl) in self.jtml:
            share = pyo.value(self.m.u[j, t, c, lvl], exception=False) or 0.0
            if share > POSITION_TOL:
                drop[j, t] += share * (1.0 - curve.power_factor[lvl])
        caps = [[0.0 if d <= POSITION_TOL else curve.position_of_power(1.0 - d) for d in row] for row in drop]
        return caps if any(any(row) for row in caps) else None
