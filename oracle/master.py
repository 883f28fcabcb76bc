"""The master problems of the decomposition, on HiGHS (highspy): a restricted master LP and an integer master.

Columns are job paths (:class:`Column`). Rows: per job its convexity Σ λ = 1; per pool k and slot t the capacity Σ
GPUs·λ − s ≤ N_kt (s ≥ 0 an artificial slack at :data:`SLACK_USD_PER_GPU`, so that the LP is feasible from the first
columns; the integer master has none) and the cost pieces of the slot's cost f_t(L) = a·max(L − R, 0) + b·max(R − L, 0)
of the pool's load L. Where f is convex (a + b ≥ 0) h ≥ each affine piece is exact; where it is concave (negative
prices) the LP takes its convex envelope over the reachable loads (a lower bound) and the integer master the exact
minimum of the two pieces with one binary.

Per (pool, slot) of a grid call, the call's row Σ load·λ − s ≤ limit − base load (:mod:`oracle.call_rows`; s ≥ 0 an
artificial slack at :data:`CALL_SLACK_USD_PER_MW` in the LP, none in the integer master).

The objective is Σ h + Σ own costs·λ + the constant. The pricing's prices are the capacity duals (≥ 0 per GPU) and per
slot the piece duals ρ (≥ 0, Σ ρ = 1) giving a price per MW Σ ρ·β, plus the call row's dual (≥ 0 per MW).
:func:`lagrangian_bound` evaluates the Lagrangian dual at any such prices from its definition (never the LP's value),
so the bound holds whatever the solver's tolerances.
"""

from __future__ import annotations

from collections.abc import Sequence
import weakref
from dataclasses import dataclass

import highspy
import numpy as np
from pyomo.common.tee import capture_output

from oracle.graph import DecompositionData, JobGraph
from oracle.solvers import run_highs

SLACK_USD_PER_GPU = 1e4
"""Cost of an artificial GPU beyond the capacity in the restricted LP ($ per GPU per slot): far above any GPU's worth in
a slot (an A100 slot costs well under $10), so the LP uses it only while no column fits."""
CALL_SLACK_USD_PER_MW = 1e6
"""Cost of an artificial MW above a call's limit in the restricted LP ($ per MW per slot): far above what a MW of load
is worth in a slot (a MW holds ~2,000 A100s, worth well under $10 each: the same scale as :data:`SLACK_USD_PER_GPU`)."""
CHORD_MIN_SPAN_MW = 1e-9
"""Below this load range a concave slot's cost is taken as constant (its value at the low end)."""
INF = highspy.kHighsInf


@dataclass(frozen=True, eq=False)
class Column:
    """One job's path as a column of the master: its rows and values, and its own cost."""

    job: int
    path: np.ndarray
    own_usd: float
    gpus: np.ndarray
    """(pools, T) GPUs per slot."""
    load_mw: np.ndarray
    """(pools, T) facility load added per slot."""


def make_column(graph: JobGraph, j: int, path: np.ndarray) -> Column:
    states = graph.slot_states(path)
    return Column(job=j, path=np.asarray(path, dtype=np.int64), own_usd=float(np.sum(graph.own_usd_per_slot[states])),
                  gpus=graph.gpus[states].T.astype(float), load_mw=graph.load_mw[states].T.copy())


@dataclass(frozen=True)
class Pieces:
    """The affine pieces α + β·L of each (pool, slot) cost, as rows: ``slot`` is the flat index k·T + t."""

    slot: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    concave: np.ndarray
    """The piece belongs to a concave slot (the LP has the chord instead; the integer master these pieces)."""


HULL_MAX_POINTS = 200_000
"""A (pool, slot) whose reachable loads number more than this keeps the pieces of its real cost (or chord)."""
HULL_LOAD_DECIMALS = 9
"""Loads equal to this many decimals (MW) are one reachable load."""
HULL_SLACK_USD = 1e-9
"""Each envelope piece is lowered by this much, a guard against rounding (the pieces stay under the cost)."""


def reachable_loads(data: DecompositionData, k: int, t: int) -> np.ndarray | None:
    """The facility loads pool k can carry in slot t: its base load plus one allowed state's load per job, the GPUs
    within the pool's capacity (None: more than :data:`HULL_MAX_POINTS`). Every schedule's load is one."""
    pool = data.pools[k]
    cap = int(pool.capacity_gpus[t])
    gpus, load = np.zeros(1, dtype=np.int64), np.zeros(1)
    for graph in data.graphs:
        stage = min(int(np.searchsorted(graph.stage_slots, t, side="right")) - 1, graph.n_stages - 1)
        states = np.flatnonzero(graph.allowed[stage])
        if states.size == 0:
            continue
        pairs = np.unique(np.stack([graph.gpus[states, k].astype(float), graph.load_mw[states, k]]), axis=1)
        g = (gpus[:, None] + pairs[0].astype(np.int64)[None, :]).ravel()
        ld = (load[:, None] + pairs[1][None, :]).ravel()
        fit = g <= cap
        g, ld = g[fit], ld[fit]
        key = np.round(ld, HULL_LOAD_DECIMALS)
        order = np.lexsort((g, key))  # per load, the fewest GPUs first
        first = np.ones(order.size, dtype=bool)
        first[1:] = key[order][1:] != key[order][:-1]
        gpus, load = g[order][first], ld[order][first]
        if load.size > HULL_MAX_POINTS:
            return None
    return pool.base_load_mw[t] + load


def hull_pieces(load: np.ndarray, a: float, b: float, renewable: float) -> list[tuple[float, float]]:
    """The lower convex hull of the slot cost f(L) = a·max(L − R, 0) + b·max(R − L, 0) over the loads ``load``, as
    affine pieces (α, β): max over pieces ≤ f at every one of those loads (equal at the hull's vertices). Where f is
    convex this is f with a chord across the kink R between the reachable loads either side of it; where it is concave
    (a negative price), the chord between the least and the most reachable load."""
    xs = np.unique(np.round(load, HULL_LOAD_DECIMALS))
    # f is affine on each side of R, so the hull's vertices are among the least and the most load and the loads
    # next to R on either side (any other load lies on f between two of them: on or above their segment)
    below, above = xs[xs <= renewable], xs[xs >= renewable]
    xs = np.unique(np.concatenate([xs[:1], xs[-1:], below[-1:], above[:1]]))
    fs = a * np.maximum(xs - renewable, 0.0) + b * np.maximum(renewable - xs, 0.0)
    hull: list[int] = []
    for i in range(xs.size):  # Andrew's monotone chain, lower part (collinear points dropped)
        while len(hull) >= 2:
            o, p = hull[-2], hull[-1]
            if (xs[p] - xs[o]) * (fs[i] - fs[o]) - (fs[p] - fs[o]) * (xs[i] - xs[o]) <= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    if len(hull) == 1:
        return [(float(fs[hull[0]]) - HULL_SLACK_USD, 0.0)]
    out = []
    for p, q in zip(hull[:-1], hull[1:], strict=True):
        beta = float((fs[q] - fs[p]) / (xs[q] - xs[p]))
        out.append((float(fs[p] - beta * xs[p]) - HULL_SLACK_USD, beta))
    return out


_PIECES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cost_pieces(data: DecompositionData) -> tuple[Pieces, Pieces]:
    """(the LP's pieces: exact where convex, the chord where concave, or with ``data.slot_hull`` the convex envelope
    over the reachable loads (:func:`hull_pieces`); the integer master's exact pieces). Computed once per data (the
    masters of a branch and price share them)."""
    if data not in _PIECES:
        _PIECES[data] = _cost_pieces(data)
    return _PIECES[data]


def _cost_pieces(data: DecompositionData) -> tuple[Pieces, Pieces]:
    lp, exact = [], []
    T = data.inst.slots
    for k, pool in enumerate(data.pools):
        a, b, R = pool.grid_usd_per_mw, pool.curtailment_usd_per_mw, pool.renewable_mw
        low, high = pool.load_low_mw, pool.load_high_mw
        f_low, f_high = pool.slot_cost_usd(low), pool.slot_cost_usd(high)
        cache: dict[tuple[int, ...], np.ndarray | None] = {}  # (capacity, each job's stage) -> added loads
        for t in range(T):
            two = [(k * T + t, -a[t] * R[t], a[t]), (k * T + t, b[t] * R[t], -b[t])]
            exact += [(*p, not pool.convex[t]) for p in two]
            loads = None
            if data.slot_hull:
                key = (int(pool.capacity_gpus[t]),
                       *(int(np.searchsorted(g.stage_slots, t, side="right")) for g in data.graphs))
                if key not in cache:  # the loads added to the base are the same over the stages' slots
                    found = reachable_loads(data, k, t)
                    cache[key] = None if found is None else found - pool.base_load_mw[t]
                loads = cache[key]
            if loads is not None:
                lp += [(k * T + t, alpha, beta, not pool.convex[t])
                       for alpha, beta in hull_pieces(pool.base_load_mw[t] + loads, a[t], b[t], R[t])]
            elif pool.convex[t]:
                lp += [(*p, False) for p in two]
            else:
                span = high[t] - low[t]
                beta = (f_high[t] - f_low[t]) / span if span > CHORD_MIN_SPAN_MW else 0.0
                lp.append((k * T + t, f_low[t] - beta * low[t], beta, True))

    def stack(rows: list) -> Pieces:
        arr = np.array(rows, dtype=float).reshape(-1, 4)
        return Pieces(arr[:, 0].astype(np.int64), arr[:, 1], arr[:, 2], arr[:, 3].astype(bool))

    return stack(lp), stack(exact)


class _Rows:
    """Row layout shared by both masters: convexity (J), capacity (K·T), the cost pieces, then the call rows (one per
    (pool, slot) of a grid call: ``called`` their flat indices k·T + t, ``call_rhs`` the load the jobs may add, MW)."""

    def __init__(self, data: DecompositionData, pieces: Pieces) -> None:
        self.n_jobs = len(data.graphs)
        self.n_slots = len(data.pools) * data.inst.slots
        self.pieces = pieces
        self.capacity = np.concatenate([pool.capacity_gpus for pool in data.pools]).astype(float)
        self.base_load = np.concatenate([pool.base_load_mw for pool in data.pools])
        limit = np.concatenate([pool.load_limit_mw for pool in data.pools])
        self.called = np.flatnonzero(np.isfinite(limit))
        self.call_rhs = limit[self.called] - self.base_load[self.called]
        self.cap0 = self.n_jobs
        self.piece0 = self.n_jobs + self.n_slots
        self.call0 = self.piece0 + pieces.slot.size

    def add_to(self, h: highspy.Highs) -> None:
        J, S, P, C = self.n_jobs, self.n_slots, self.pieces, self.called.size
        lower = np.concatenate([np.ones(J), np.full(S, -INF), P.alpha + P.beta * self.base_load[P.slot],
                                np.full(C, -INF)])
        upper = np.concatenate([np.ones(J), self.capacity, np.full(P.slot.size, INF), self.call_rhs])
        h.addRows(lower.size, lower, upper, 0, np.zeros(lower.size, dtype=np.int32), np.array([], dtype=np.int32),
                  np.array([], dtype=float))

    def column_entries(self, column: Column) -> tuple[np.ndarray, np.ndarray]:
        gpus, load = column.gpus.ravel(), column.load_mw.ravel()
        used = np.flatnonzero(gpus)
        piece_values = -self.pieces.beta * load[self.pieces.slot]
        pieces = np.flatnonzero(piece_values)
        call_values = load[self.called]
        calls = np.flatnonzero(call_values)
        index = np.concatenate(([column.job], self.cap0 + used, self.piece0 + pieces, self.call0 + calls))
        return index.astype(np.int32), np.concatenate(([1.0], gpus[used], piece_values[pieces], call_values[calls]))

    def add_h_columns(self, h: highspy.Highs, cost: float = 1.0) -> None:
        """h (one free column per pool-slot, cost 1) in its piece rows."""
        P = self.pieces
        order = np.argsort(P.slot, kind="stable")
        starts = np.searchsorted(P.slot[order], np.arange(self.n_slots)).astype(np.int32)
        h.addCols(self.n_slots, np.full(self.n_slots, cost), np.full(self.n_slots, -INF), np.full(self.n_slots, INF),
                  P.slot.size, starts, (self.piece0 + order).astype(np.int32), np.ones(P.slot.size))


def _quiet(threads: int | None) -> highspy.Highs:
    """A silent HiGHS (its first instance in a process prints a banner on the file descriptor: captured)."""
    with capture_output(capture_fd=True):
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    if threads:
        # HiGHS keeps one global thread scheduler per process, sized by its first run: a later instance asking for
        # another count ends "Not Set" without solving unless it is resized (the oracle's solves run one at a time).
        h.resetGlobalScheduler(True)
        h.setOptionValue("threads", int(threads))
    return h


@dataclass(frozen=True)
class Prices:
    """Lagrangian prices of the shared rows: ``gpu`` and ``load``, (pools, T) $ per GPU (in [0, SLACK_USD_PER_GPU]) and
    per MW (the call rows' included); ``weights``, per LP piece row ρ ≥ 0 with Σ ρ = 1 over each slot's pieces;
    ``convexity``, per job the LP's convexity dual (a path enters when it costs less); ``call``, per call row its price
    ($ per MW, in [0, CALL_SLACK_USD_PER_MW])."""

    gpu: np.ndarray
    load: np.ndarray
    weights: np.ndarray
    convexity: np.ndarray
    call: np.ndarray


class MasterLP:
    """The restricted master LP; columns are added as the pricing finds them."""

    def __init__(self, data: DecompositionData, threads: int | None = None, *, phase_one: bool = False) -> None:
        self.data = data
        self.phase_one = phase_one  # minimise the GPUs beyond the pools and MW beyond the calls (infeasibility)
        self.slack_usd = 1.0 if phase_one else SLACK_USD_PER_GPU
        self.call_slack_usd = 1.0 if phase_one else CALL_SLACK_USD_PER_MW
        self.pieces, self.exact_pieces = cost_pieces(data)
        self.rows = _Rows(data, self.pieces)
        self.h = _quiet(threads)
        self.rows.add_to(self.h)
        self.rows.add_h_columns(self.h, cost=0.0 if phase_one else 1.0)
        S = self.rows.n_slots
        self.h.addCols(S, np.full(S, self.slack_usd), np.zeros(S), np.full(S, INF), S,
                       np.arange(S, dtype=np.int32), (self.rows.cap0 + np.arange(S)).astype(np.int32), -np.ones(S))
        C = self.rows.called.size
        self.h.addCols(C, np.full(C, self.call_slack_usd), np.zeros(C), np.full(C, INF), C,
                       np.arange(C, dtype=np.int32), (self.rows.call0 + np.arange(C)).astype(np.int32), -np.ones(C))
        self.first_column = 2 * S + C
        self.columns: list[Column] = []
        self.keys: set[tuple[int, bytes]] = set()
        self.value = np.nan

    def add(self, column: Column) -> bool:
        key = (column.job, column.path.tobytes())
        if key in self.keys:
            return False
        self.keys.add(key)
        index, values = self.rows.column_entries(column)
        self.h.addCol(0.0 if self.phase_one else column.own_usd, 0.0, INF, index.size, index, values)
        self.columns.append(column)
        return True

    def solve(self) -> Prices:
        self.value, dual = run_lp(self.h, "restricted master")
        rows, P = self.rows, self.pieces
        gpu = np.clip(-dual[rows.cap0:rows.cap0 + rows.n_slots], 0.0, self.slack_usd)
        rho = np.maximum(dual[rows.piece0:rows.piece0 + P.slot.size], 0.0)
        total = np.bincount(P.slot, weights=rho, minlength=rows.n_slots)
        count = np.bincount(P.slot, minlength=rows.n_slots)
        rho = np.where(total[P.slot] > 0, rho / np.where(total[P.slot] > 0, total[P.slot], 1.0), 1.0 / count[P.slot])
        load = np.bincount(P.slot, weights=rho * P.beta, minlength=rows.n_slots) * (not self.phase_one)
        call = np.clip(-dual[rows.call0:rows.call0 + rows.called.size], 0.0, self.call_slack_usd)
        load[rows.called] += call
        K, T = len(self.data.pools), self.data.inst.slots
        return Prices(gpu=gpu.reshape(K, T), load=load.reshape(K, T), weights=rho, convexity=dual[:rows.n_jobs].copy(),
                      call=call)

    def slack_gpus(self) -> float:
        """GPUs beyond the pool the LP's solution uses (summed over slots)."""
        x = np.asarray(self.h.getSolution().col_value, dtype=float)
        return float(x[self.rows.n_slots:2 * self.rows.n_slots].sum())

    def slack_mw(self) -> float:
        """MW above the calls' limits the LP's solution uses (summed over the call rows)."""
        x = np.asarray(self.h.getSolution().col_value, dtype=float)
        return float(x[2 * self.rows.n_slots:self.first_column].sum())

    def fractional(self) -> list[tuple[Column, float]]:
        x = np.asarray(self.h.getSolution().col_value, dtype=float)[self.first_column:]
        return [(c, float(v)) for c, v in zip(self.columns, x, strict=True) if v > 1e-9]


def rounding(fractional: Sequence[tuple[Column, float]], n_jobs: int) -> list[np.ndarray] | None:
    """An LP solution's rounding: per job its column of largest weight (None if some job has none)."""
    best: dict[int, tuple[float, np.ndarray]] = {}
    for column, weight in fractional:
        if column.job not in best or weight > best[column.job][0]:
            best[column.job] = (weight, column.path)
    return [best[j][1] for j in range(n_jobs)] if len(best) == n_jobs else None


def unique_columns(columns: Sequence[Column]) -> list[Column]:
    """The columns, each (job, path) once (the first kept)."""
    seen, out = set(), []
    for column in columns:
        key = (column.job, column.path.tobytes())
        if key not in seen:
            seen.add(key)
            out.append(column)
    return out


def run_lp(h: highspy.Highs, what: str) -> tuple[float, np.ndarray]:
    """Solve an LP: (its value, its row duals); RuntimeError naming ``what`` unless it is optimal."""
    h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"the {what} LP ended {h.modelStatusToString(status)}")
    return float(h.getInfo().objective_function_value), np.asarray(h.getSolution().row_dual, dtype=float)


def lagrangian_constant(master: MasterLP, prices: Prices) -> float:
    """The part of the Lagrangian dual that no path changes: Σ ρ·(α + β·L0) − Σ price·capacity − Σ call price·(limit
    − L0) + constant."""
    rows, P = master.rows, master.pieces
    shared = -float(np.sum(prices.gpu.ravel() * rows.capacity)) - float(np.sum(prices.call * rows.call_rhs))
    if master.phase_one:
        return shared
    pieces = float(np.sum(prices.weights * (P.alpha + P.beta * rows.base_load[P.slot])))
    return master.data.constant_usd + pieces + shared


def lagrangian_bound(master: MasterLP, prices: Prices, cheapest_usd: Sequence[float]) -> float:
    """The Lagrangian dual at ``prices``: a lower bound on every schedule (``cheapest_usd``: per job, the exact least
    cost of a path meeting its target at these prices)."""
    return lagrangian_constant(master, prices) + float(np.sum(cheapest_usd))


@dataclass
class IntegerOutcome:
    status: str
    """``optimal``, ``time_limit``, ``infeasible`` or ``error``."""
    paths: list[np.ndarray] | None
    """One path per job (None: no schedule found)."""


def integer_master(data: DecompositionData, columns: Sequence[Column], *, time_limit_s: float, mip_gap: float,
                   start: Sequence[np.ndarray] | None = None, threads: int | None = None) -> IntegerOutcome:
    """One column per job among ``columns``, exact costs (a binary per concave slot), capacity and calls held."""
    _, pieces = cost_pieces(data)
    rows = _Rows(data, pieces)
    h = _quiet(threads)
    h.setOptionValue("time_limit", float(max(time_limit_s, 0.01)))
    h.setOptionValue("mip_rel_gap", float(mip_gap))
    rows.add_to(h)
    rows.add_h_columns(h)
    # A concave slot's h ≥ min(piece 1, piece 2): piece i holds unless the slot's binary releases it by M_i.
    concave_slots = np.unique(pieces.slot[pieces.concave])
    big_m = np.zeros(pieces.slot.size)
    T = data.inst.slots
    for flat in concave_slots.tolist():
        pool, t = data.pools[flat // T], flat % T
        which = np.flatnonzero(pieces.slot == flat)
        ends = np.array([pool.load_low_mw[t], pool.load_high_mw[t]])
        values = pieces.alpha[which][:, None] + pieces.beta[which][:, None] * ends[None, :]
        big_m[which] = np.maximum(values - values.min(axis=0), 0.0).max(axis=1) + 1.0
    first = rows.n_slots  # after the h columns (no capacity slack here)
    for column in columns:
        index, values = rows.column_entries(column)
        h.addCol(column.own_usd, 0.0, 1.0, index.size, index, values)
    binaries = []
    for flat in concave_slots:
        which = np.flatnonzero(pieces.slot == flat)
        # z = 1 releases piece 0, z = 0 releases piece 1: rows h − βΔL·λ + M0·z ≥ …, h … − M1·z ≥ … − M1.
        index = (rows.piece0 + which).astype(np.int32)
        values = np.array([big_m[which[0]], -big_m[which[1]]])
        h.addCol(0.0, 0.0, 1.0, 2, index, values)
        binaries.append(h.getNumCol() - 1)
        h.changeRowBounds(int(rows.piece0 + which[1]), float(
            pieces.alpha[which[1]] + pieces.beta[which[1]] * rows.base_load[flat] - big_m[which[1]]), INF)
    integer = list(range(first, first + len(columns))) + binaries
    if integer:
        h.changeColsIntegrality(len(integer), np.array(integer, dtype=np.int32),
                                np.array([highspy.HighsVarType.kInteger] * len(integer)))
    if start is not None:
        chosen = {(j, p.tobytes()) for j, p in enumerate(start)}
        value = np.zeros(h.getNumCol())
        for i, column in enumerate(columns):
            value[first + i] = float((column.job, column.path.tobytes()) in chosen)
        sol = highspy.HighsSolution()
        sol.col_value = value.tolist()
        sol.value_valid = True
        h.setSolution(sol)
    run_highs(h)  # a MIP with a time limit: Ctrl-C stops it (oracle/solvers.py)
    status = h.getModelStatus()
    info = h.getInfo()
    name = {highspy.HighsModelStatus.kOptimal: "optimal", highspy.HighsModelStatus.kInfeasible: "infeasible",
            highspy.HighsModelStatus.kTimeLimit: "time_limit"}.get(status, "error")
    if info.primal_solution_status != 2:  # no feasible solution
        return IntegerOutcome(name, None)
    x = np.asarray(h.getSolution().col_value, dtype=float)[first:first + len(columns)]
    paths: list[np.ndarray | None] = [None] * len(data.graphs)
    for column, v in zip(columns, x, strict=True):
        if v > 0.5:
            paths[column.job] = column.path
    assert all(p is not None for p in paths)
    return IntegerOutcome(name, [p for p in paths if p is not None])
