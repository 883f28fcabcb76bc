"""The peak-level search: the oracle of a horizon under a tariff's demand charges.

A demand charge bills the highest import over its slots, so the month's schedules differ in their peaks, and the
MILP's LP relaxation flattens the import below any schedule's (fractional modes). This search treats the peaks
combinatorially. For peak caps P (one per charge), the schedules whose peaks stay within P use in each block only the
joint states whose import over the block's slots of every charge fits its cap. Relaxing the token targets with prices
μ ≥ 0 turns what is left into a shortest path over the blocks (:func:`oracle.kernels.grid_shortest_path`), so for a
box of caps lo ≤ P ≤ hi

    bound(box) = Σ_c charge_c(lo_c) + max_μ L(μ; the states within hi) + the constant terms

bounds every schedule whose peaks lie in the box: a charge is non-decreasing in its peak, and more states only lower
L. A schedule's peak is one of its states' block imports, so each charge's *levels* are the distinct imports of the
states over its blocks, and a box is a range of level indices per charge. Best-first branch and bound over boxes,
from the box of all levels, splits the charge of the widest charge range at its middle value; a box whose bound
reaches the incumbent less the gap is pruned (an early stop of the dual maximisation, :func:`lagrangian_prices`, at
that bound saves most of its work). A charge whose slots hold another's (the flat charge over a TOU one) bills at least
the other's lower end. Every shortest path met that meets the targets is a schedule, priced exactly with its own
peaks: the incumbents, after the starts of :func:`oracle.model.best_start`. The search proves the optimum when no box
is left. A box whose charge range is below :data:`LEAF_RTOL` of the incumbent is a leaf: its bound is the Lagrangian
bound of its caps, whose duality gap no split closes. The first leaf taken therefore fixes the bound (best first: no
box left bounds lower); the search goes on only to repair the shortest paths of :data:`LEAF_REPAIRS` leaves into
schedules (:func:`repair`), and the time limit leaves the least open bound.

It applies to one site without fleet workloads, one or two jobs on one checkpoint grid and no daily minimum
(:func:`applies`): the network of :class:`PeakNetwork` lets every block after the first change both jobs' choices. Of
the grid's side it takes grid calls, priced into the joint states' block costs (:func:`oracle.data.call_costs`: in the
blocks that hold a call's slots only the states within its limit remain, and its payment prices their import); power
caps, tiers, a training value and a call whose payment is not linear in the import are left to the MILP.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

import numpy as np

from aidc_env.billing import KW_PER_MW
from aidc_env.instance import PAUSE, Instance
from aidc_env.simulator import renewable_first
from aidc_env.tariffs import tiered_charge
from oracle.call_rows import joint_state_calls
from oracle.data import OracleData, daily_rows, oracle_data
from oracle.formulations import TRANCHE_MARGIN
from oracle.kernels import grid_shortest_path
from oracle.reduction import joint_tokens, lagrangian_prices

LEAF_REPAIRS = 12
"""Leaves whose shortest paths are repaired into schedules (:func:`repair`) before the search ends (the first fixes
the bound)."""
REPAIR_PRICE_FACTORS = (1.0, 1.003)
"""A leaf's paths are repaired at its token prices times these (dearer tokens: paths nearer the targets)."""
REPAIR_MOVES = 150
"""Most single-block changes of a repair."""
LEAF_RTOL = 1e-6
"""A box whose charges range over less than this share of the incumbent's cost is a leaf: not split further."""
DUAL_STOP_RTOL = 1e-6
"""A box's dual maximisation stops once its bound is within this share of the incumbent less the gap (pruned)."""


def applies(inst: Instance) -> bool:
    """Demand charges on one site without fleet workloads, one or two jobs on one checkpoint grid, no daily minimum, and
    of the grid's side at most grid calls whose payment is linear in the import (no power caps, tiers or training
    value)."""
    return (inst.has_demand_charges and not inst.has_sites and not inst.has_fleet_workloads and joint_state_calls(inst)
            and 1 <= len(inst.jobs) <= 2 and len({job.segments for job in inst.jobs}) == 1 and not daily_rows(inst))


@dataclass(frozen=True, eq=False)
class PeakNetwork:
    """An instance's joint states on a grid of the jobs' choices (a: job 0's, b: job 1's; mode i → i, pause → the
    last), with what the search needs per block. A single job has b = 0 only."""

    data: OracleData
    cost_usd: np.ndarray
    """(blocks, A, B): the exact block cost of each state (grid cost, curtailment and what a call's payment forgoes;
    +inf where no state, or where a state draws more than a call allows)."""
    kept: np.ndarray
    """(A, B, 2): tokens of a segment without a restart, per job."""
    loss: np.ndarray
    """(A, B, 2): tokens a restart loses, per job."""
    first_changed: np.ndarray
    """(A, B, 2): the state changes the job's initial choice (block 0 restarts it)."""
    import_mw: np.ndarray
    """(charges, blocks, A, B): the highest import of each state over the block's slots of each charge (0 outside)."""
    levels_mw: tuple[np.ndarray, ...]
    """Per charge: the distinct imports of its states over its blocks (0 first), ascending: the peaks it can bill."""
    covers: np.ndarray
    """(charges, charges) bool: charge c's slots hold charge d's (c's peak is at least d's; the diagonal is True)."""
    tranche_tokens: np.ndarray
    """What the targets ask, as the other formulations ask it (less their margin)."""
    constant_usd: float
    """The PPA term, the tariff's fixed charges and the calls' constant payments."""

    @property
    def charges(self) -> tuple:
        return self.data.inst.tariff_terms.demand

    def charge_usd(self, charge: int, peak_mw: float) -> float:
        term = self.charges[charge]
        return tiered_charge(peak_mw * KW_PER_MW, term.tier_max_kw, term.rate_usd_per_kw)

    def block_tokens(self, path_a: np.ndarray, path_b: np.ndarray) -> np.ndarray:
        """(blocks, 2): each block's tokens per job on a path, a restart's loss where the job's choice changed (at
        block 0: from its initial choice)."""
        moved = np.ones((path_a.size, 2), dtype=bool)
        moved[0] = self.first_changed[path_a[0], path_b[0]]
        moved[1:, 0] = path_a[1:] != path_a[:-1]
        moved[1:, 1] = path_b[1:] != path_b[:-1]
        return self.kept[path_a, path_b] - self.loss[path_a, path_b] * moved

    def schedule(self, path_a: np.ndarray, path_b: np.ndarray) -> list[list[int]]:
        """The schedule of a path (one state per block = segment)."""
        rows = []
        for j, path in enumerate((path_a, path_b)[:len(self.data.inst.jobs)]):
            n_modes = self.data.inst.jobs[j].n_modes
            rows.append([PAUSE if int(c) == n_modes else int(c) for c in path])
        return rows


def peak_network(inst: Instance, allow_pause: bool = True) -> PeakNetwork:
    """The network of an instance :func:`applies` to."""
    data = oracle_data(inst)
    states = data.joint_states
    jobs = inst.jobs
    shape = tuple(job.n_modes + 1 for job in jobs) + ((1,) if len(jobs) == 1 else ())
    digits = np.stack([np.where(states[:, j] == PAUSE, job.n_modes, states[:, j]) for j, job in enumerate(jobs)]
                      + ([np.zeros(len(states), dtype=int)] if len(jobs) == 1 else []), axis=1)
    keep = np.ones(len(states), dtype=bool) if allow_pause else np.all(states != PAUSE, axis=1)
    a, b = digits[keep, 0], digits[keep, 1]

    def on_grid(values: np.ndarray, fill: float) -> np.ndarray:  # (..., states) -> (..., A, B)
        out = np.full(values.shape[:-1] + shape, fill)
        out[..., a, b] = values[..., keep]
        return out

    tokens = joint_tokens(data, states)
    two = (lambda x: x) if len(jobs) == 2 else (lambda x: np.concatenate([x, np.zeros_like(x)], axis=1))
    kept, loss = on_grid(two(tokens.kept).T, 0.0), on_grid(two(tokens.loss).T, 0.0)
    initial = np.array([job.initial_mode for job in jobs])
    changed = on_grid(two((states != initial[None, :]).astype(float)).T, 0.0)
    _, grid, _ = renewable_first(np.broadcast_to(data.joint_load_mw[:, None], (len(states), inst.slots)),
                                 np.broadcast_to(inst.renewable_mw, (len(states), inst.slots)))
    cost = data.block_cost_usd  # grid calls priced in (oracle.data.call_costs)
    allowed = np.isfinite(cost[:, keep])
    imports, levels = [], []
    for term in inst.tariff_terms.demand:
        inside = np.zeros(inst.slots, dtype=bool)
        inside[term.slots] = True
        peak = np.maximum.reduceat(np.where(inside[None, :], grid, 0.0), data.block_starts, axis=1).T  # (blocks, S)
        imports.append(on_grid(peak, 0.0))
        levels.append(np.unique(np.append(peak[:, keep][allowed], 0.0)))
    return PeakNetwork(data=data, cost_usd=on_grid(cost, np.inf), kept=np.moveaxis(kept, 0, -1),
                       loss=np.moveaxis(loss, 0, -1), first_changed=np.moveaxis(changed, 0, -1) > 0,
                       import_mw=np.stack(imports), levels_mw=tuple(levels),
                       covers=np.array([[np.isin(d.slots, c.slots).all() for d in inst.tariff_terms.demand]
                                        for c in inst.tariff_terms.demand]),
                       tranche_tokens=np.array([job.tranche_tokens for job in jobs]
                                               + ([0.0] if len(jobs) == 1 else [])) * (1.0 - TRANCHE_MARGIN),
                       constant_usd=data.constant_usd + inst.tariff_terms.fixed_usd)


@dataclass(frozen=True, eq=False)
class _Dual:
    """A box's Lagrangian bound over its caps, the prices that give it, and the cuts met (for its sub-boxes)."""

    value_usd: float
    mu: np.ndarray
    cuts: list


class _Box:
    """The shortest paths of one box's caps (what :func:`lagrangian_prices` asks of a search); every path that meets
    the targets is offered to the incumbent."""

    def __init__(self, search: PeakSearch, caps_mw: np.ndarray):
        net = search.net
        fits = np.all(net.import_mw <= caps_mw[:, None, None, None], axis=0)
        self.search, self.net = search, net
        self.cost = np.where(fits, net.cost_usd, np.inf)
        self.tranche = net.tranche_tokens
        finite = np.where(np.isfinite(self.cost), self.cost, -np.inf).max(axis=(1, 2))
        self.most_cost_usd = float(np.sum(np.maximum(finite, 0.0)) + net.constant_usd)
        self.cuts: list[tuple[float, np.ndarray, np.ndarray]] = []
        """(cost, tokens, peaks per charge) of every path met: the cuts a sub-box inherits when its caps hold it."""

    def lagrangian(self, mu_per_token: np.ndarray) -> tuple[float, float, np.ndarray]:
        net = self.net
        mu = np.maximum(np.asarray(mu_per_token, dtype=float), 0.0)
        weight = self.cost - net.kept @ mu
        least, path_a, path_b = grid_shortest_path(weight, (net.loss * net.first_changed) @ mu,
                                                   net.loss[:, :, 0] * mu[0], net.loss[:, :, 1] * mu[1])
        if not np.isfinite(least):  # no state fits the caps in some block
            return np.inf, np.inf, np.zeros(2)
        blocks = np.arange(path_a.size)
        tokens = net.block_tokens(path_a, path_b).sum(axis=0)
        self.last_path = (path_a, path_b)
        energy = float(self.cost[blocks, path_a, path_b].sum() + net.constant_usd)
        peaks = net.import_mw[:, blocks, path_a, path_b].max(axis=1)
        self.cuts.append((energy, tokens, peaks))
        if np.all(tokens >= self.tranche):
            self.search.offer(energy, peaks, path_a, path_b)
        return float(least + mu @ self.tranche + net.constant_usd), energy, tokens


class PeakSearch:
    """Best-first branch and bound over boxes of peak levels (module docstring)."""

    def __init__(self, net: PeakNetwork, incumbent: tuple[list[list[int]], float] | None):
        self.net = net
        self.best_usd = np.inf if incumbent is None else incumbent[1]
        self.best_schedule = None if incumbent is None else incumbent[0]
        self.boxes = self.paths = self.pushed = self.leaves = 0

    def offer(self, energy_usd: float, peaks_mw: np.ndarray, path_a: np.ndarray, path_b: np.ndarray) -> None:
        """A path that meets the targets: an incumbent if its energy and its own peaks' charges cost less."""
        net = self.net
        self.paths += 1
        cost = energy_usd + sum(net.charge_usd(c, float(peak)) for c, peak in enumerate(peaks_mw))
        if cost < self.best_usd:
            self.best_usd, self.best_schedule = cost, net.schedule(path_a, path_b)

    def _charges(self, index: tuple[int, ...]) -> float:
        """The charges at the least peaks of a box's lower ends: a charge whose slots hold another's peaks at least
        as high as the other's."""
        low = np.array([levels[i] for levels, i in zip(self.net.levels_mw, index, strict=True)])
        low = np.max(np.where(self.net.covers, low[None, :], 0.0), axis=1, initial=0.0)
        return sum(self.net.charge_usd(c, float(peak)) for c, peak in enumerate(low))

    def _dual(self, hi: tuple[int, ...], mu: np.ndarray | None, cuts: list, stop_at_usd: float) -> _Dual:
        """max_μ L of the states within the caps ``hi`` (stopping early at ``stop_at_usd``), from the parent's prices
        and the parent's cuts that the caps hold: often the parent's prices alone reach the stop."""
        caps = np.array([levels[i] for levels, i in zip(self.net.levels_mw, hi, strict=True)])
        box = _Box(self, caps)
        box.cuts = [cut for cut in cuts if np.all(cut[2] <= caps)]
        if mu is not None:
            value, _, _ = box.lagrangian(mu)
            if value >= stop_at_usd:
                return _Dual(value, mu, box.cuts)
        dual = lagrangian_prices(box, mu_start=mu, stop_at_usd=stop_at_usd,
                                 known_cuts=[(cost, tokens) for cost, tokens, _ in box.cuts])
        return _Dual(dual.bound_usd, dual.mu_per_token, box.cuts)

    def run(self, mip_gap: float, deadline: float) -> float:
        """Search until no box is left or the deadline; the proven bound: the least bound of the boxes left, at most the
        incumbent less the gap (what pruned the others)."""
        levels = self.net.levels_mw
        root_lo, root_hi = tuple(0 for _ in levels), tuple(len(v) - 1 for v in levels)
        root = self._dual(root_hi, None, [], np.inf)
        heap = [(self._charges(root_lo) + root.value_usd, 0, root_lo, root_hi, root)]
        leaves: list[float] = []
        while heap and time.perf_counter() < deadline:
            target = self._target(mip_gap)
            bound, _, lo, hi, dual = heapq.heappop(heap)
            if bound >= target:
                continue
            self.boxes += 1
            widths = [self.net.charge_usd(c, levels[c][hi[c]]) - self.net.charge_usd(c, levels[c][lo[c]])
                      for c in range(len(levels))]
            c = int(np.argmax(widths))
            if hi[c] == lo[c] or widths[c] <= LEAF_RTOL * abs(self.best_usd):
                # Best first: no box left bounds lower, and no split raises a leaf's bound; the next few leaves only
                # seek schedules, by repairing their shortest paths.
                leaves.append(bound)
                self._repair_leaf(hi, dual)
                if len(leaves) >= LEAF_REPAIRS:
                    break
                continue
            middle = 0.5 * (levels[c][lo[c]] + levels[c][hi[c]])
            split = int(np.clip(np.searchsorted(levels[c], middle, side="right") - 1, lo[c], hi[c] - 1))
            upper = lo[:c] + (split + 1,) + lo[c + 1:]  # the same caps: the same dual, a dearer charge
            self._push(heap, self._charges(upper) + dual.value_usd, upper, hi, dual, mip_gap)
            lower = hi[:c] + (split,) + hi[c + 1:]
            base = self._charges(lo)
            child = self._dual(lower, dual.mu, dual.cuts, self._target(mip_gap) - base)
            self._push(heap, base + child.value_usd, lo, lower, child, mip_gap)
        self.leaves = len(leaves)
        return min([b for b, *_ in heap] + leaves + [self._target(mip_gap)])

    def _repair_leaf(self, hi: tuple[int, ...], dual: _Dual) -> None:
        """Offer the repaired shortest paths of a leaf's caps at its prices (times :data:`REPAIR_PRICE_FACTORS`)."""
        box = _Box(self, np.array([levels[i] for levels, i in zip(self.net.levels_mw, hi, strict=True)]))
        for factor in REPAIR_PRICE_FACTORS:
            if np.isfinite(box.lagrangian(dual.mu * factor)[0]):
                fixed = repair(self.net, box.cost, *box.last_path)
                if fixed is not None:
                    self.offer(*fixed)

    def _push(self, heap: list, bound: float, lo: tuple[int, ...], hi: tuple[int, ...], dual: _Dual,
              mip_gap: float) -> None:
        if bound < self._target(mip_gap):
            self.pushed += 1
            heapq.heappush(heap, (bound, self.pushed, lo, hi, dual))

    def _target(self, mip_gap: float) -> float:
        """Boxes bounded at or above this cannot hold a schedule worth the search."""
        best = self.best_usd
        return best - max(mip_gap * abs(best), 0.0) * (1.0 - DUAL_STOP_RTOL) if np.isfinite(best) else np.inf




def repair(net: PeakNetwork, cost_usd: np.ndarray, path_a: np.ndarray, path_b: np.ndarray
           ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray] | None:
    """A schedule near a path: while a target is short, the single-block change of least cost per share of the
    shortfall it makes up; then, while one saves, the single-block change that saves most and keeps every target
    (restart losses at both ends of the block counted). ``cost_usd`` (blocks, A, B): the states' block costs, +inf
    where not allowed. Returns (energy with the constant terms, peaks per charge, path a, path b) or None."""
    n_blocks, n_a, n_b = cost_usd.shape
    cost = cost_usd.reshape(n_blocks, -1)
    kept, loss = net.kept.reshape(-1, 2), net.loss.reshape(-1, 2)
    first = kept - loss * net.first_changed.reshape(-1, 2)
    digit_a, digit_b = np.divmod(np.arange(kept.shape[0]), n_b)
    states = np.flatnonzero(np.isfinite(cost).any(axis=0))  # the candidates: allowed somewhere
    path = path_a * n_b + path_b
    need = net.tranche_tokens
    share = np.where(need > 0, need, 1.0)  # a target's tokens (1 for an absent second job's zero)

    def made_in(k: int, state: np.ndarray | int, before: int | np.ndarray) -> np.ndarray:
        """Block k's tokens in ``state`` after ``before`` (the initial choices at k = 0)."""
        if k == 0:
            return first[state]
        moved = np.stack([digit_a[before] != digit_a[state], digit_b[before] != digit_b[state]], axis=-1)
        return kept[state] - loss[state] * moved

    made = net.block_tokens(path_a, path_b)
    change = np.empty((n_blocks, states.size, 2))  # the tokens a change of block k to each state adds
    extra = np.empty((n_blocks, states.size))  # and the cost it adds

    def refresh(k: int) -> None:
        gained = made_in(k, states, path[k - 1] if k else 0) - made[k]
        if k + 1 < n_blocks:
            gained = gained + made_in(k + 1, path[k + 1], states) - made[k + 1]
        change[k] = gained
        extra[k] = cost[k, states] - cost[k, path[k]]

    for k in range(n_blocks):
        refresh(k)
    for _ in range(REPAIR_MOVES):
        tokens = made.sum(axis=0)
        after = tokens + change
        if np.any(tokens < need):
            progress = np.sum((np.minimum(after, need) - np.minimum(tokens, need)) / share, axis=-1)
            score = np.where(progress > 0, extra / np.maximum(progress, 1e-300), np.inf)
        else:
            score = np.where(np.all(after >= need, axis=-1) & (extra < 0), extra, np.inf)
        best = int(np.argmin(score))
        if not np.isfinite(score.flat[best]):
            break
        k, path[best // states.size] = best // states.size, states[best % states.size]
        made[k] = made_in(k, path[k], path[k - 1] if k else 0)
        if k + 1 < n_blocks:
            made[k + 1] = made_in(k + 1, path[k + 1], path[k])
        for row in range(max(k - 1, 0), min(k + 2, n_blocks)):
            refresh(row)
    if np.any(made.sum(axis=0) < need):
        return None
    rows = np.arange(n_blocks)
    energy = float(cost[rows, path].sum() + net.constant_usd)
    peaks = net.import_mw.reshape(len(net.levels_mw), n_blocks, -1)[:, rows, path].max(axis=1)
    return energy, peaks, path // n_b, path % n_b
