"""Lagrangian reduction of the joint-state model: token prices, and which (block, joint state) can lie on a good
schedule.

Relaxing the tranche rows with token prices μ_j ≥ 0 turns the day into a shortest path over joint states: each block's
state costs its exact block cost minus μ·(tokens it makes), and each restart costs μ_j·(tokens it loses). For every
schedule that meets the tranches,

    cost(schedule) ≥ cost(schedule) − Σ_j μ_j·(tokens_j − W_j) = its Lagrangian length,

so a forward and a backward dynamic programme give, for every (block b, state S), a lower bound ``through[b, S]`` on the
cost of *any* feasible schedule that is in S during b. A (b, S) whose bound exceeds a threshold θ cannot be on a
schedule cheaper than θ: its variable is bounded to zero.

:meth:`oracle.model.OracleModel._solve_reduced` solves the model restricted to {through ≤ LB + δ} for a small δ. Every
schedule left out costs more than LB + δ, so min(bound of the restricted solve, LB + δ) is a valid bound for the whole
model; when the restricted optimum z is within the gap of it, z is optimal. Otherwise the last step restricts to
{through ≤ z}, which keeps every schedule better than z.

The prices: :func:`lagrangian_prices` maximises the Lagrangian dual L(μ) = min over schedules p of cost(p) + Σ_j
μ_j·(W_j − tokens_j(p)) by Kelley's cutting planes (each schedule met gives a cut z ≤ cost(p) + μ·(W − tokens(p)); a
tiny LP in highspy maximises the cuts' minimum, and the shortest path at its maximiser adds a cut) until the cuts'
maximum is within :data:`DUAL_RTOL` of the best L found. L(μ) bounds every tranche-meeting schedule for any μ ≥ 0, so
everything built on it stays valid whatever μ is returned; the dual's optimum is never below the fast formulation's LP
bound. μ is scaled as ν_j = μ_j·W_j for the LP and boxed in [0, :data:`PRICE_BOX` × the day's dearest cost]; a maximiser
on the box (the tranches may be jointly out of reach) is reported, and the oracle then takes the LP relaxation's duals,
which explain infeasibility.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import highspy
import numpy as np

from aidc_env.instance import PAUSE
from oracle.data import OracleData

if TYPE_CHECKING:
    from oracle.labeling import LabelSearch

THROUGH_TOLERANCE = 1e-9
"""Relative safety margin: a (b, S) is excluded only if its bound exceeds the threshold by more than this."""
DUAL_RTOL = 1e-9
"""Stop when the cutting-plane model's maximum is within this (relative) of the best Lagrangian bound."""
MAX_CUTS = 200
"""Most shortest paths (cuts) before the method stops with the best μ found (``OracleResult.details["dual_cuts"]``
records how many a solve took)."""
PRICE_BOX = 10.0
"""ν_j = μ_j·W_j is at most this × the day's dearest cost: beyond it a tranche is not worth meeting."""


@dataclass(frozen=True)
class JointTokens:
    """Per joint state (rows) and job (columns): tokens of a kept segment and tokens lost by a restart."""

    kept: np.ndarray
    loss: np.ndarray


def joint_tokens(data: OracleData, states: np.ndarray) -> JointTokens:
    kept = np.zeros(states.shape, dtype=float)
    loss = np.zeros(states.shape, dtype=float)
    for j, coef in enumerate(data.jobs):
        running = states[:, j] != PAUSE
        modes = states[running, j]
        kept[running, j] = coef.tokens_kept[modes]
        loss[running, j] = coef.tokens_kept[modes] - coef.tokens_restarted[modes]
    return JointTokens(kept, loss)


def through_bounds(data: OracleData, states: np.ndarray, state_cost: np.ndarray, mu_per_token: np.ndarray,
                   tranche_tokens: np.ndarray) -> np.ndarray:
    """(blocks, states): a lower bound on the cost of every feasible schedule that is in S during block b.

    ``state_cost``: (blocks, states) exact block costs (+inf where a state may not be); ``mu_per_token``: μ_j ≥ 0 in $
    per token; ``tranche_tokens``: the W_j the model enforces. The constant terms are included.
    """
    inst = data.inst
    n_blocks, n_states = state_cost.shape
    mu = np.maximum(np.asarray(mu_per_token, dtype=float), 0.0)
    tokens = joint_tokens(data, states)
    # Kept-segment tokens are spread over the segment's blocks in proportion to their slots.
    block_slots = np.diff(np.append(data.block_starts, inst.slots))
    fraction = np.stack([block_slots / coef.slots_per_segment for coef in data.jobs], axis=1)  # (blocks, jobs)
    weight = state_cost - (fraction * mu[None, :]) @ tokens.kept.T  # (blocks, states)
    changed = [states[:, j][:, None] != states[:, j][None, :] for j in range(states.shape[1])]
    restart_price = sum(np.where(changed[j], mu[j] * tokens.loss[None, :, j], 0.0) for j in range(len(changed)))
    frozen = np.zeros((n_states, n_states), dtype=bool)  # a job off its boundary may not change

    def transition(b: int) -> np.ndarray:
        boundary = data.block_segment[b] != data.block_segment[b - 1]
        if bool(np.all(boundary)):
            return restart_price
        locked = frozen.copy()
        for j in np.flatnonzero(~boundary):
            locked |= changed[j]
        restarts = sum(np.where(changed[j], mu[j] * tokens.loss[None, :, j], 0.0) for j in np.flatnonzero(boundary))
        return np.where(locked, np.inf, restarts)

    initial = np.array([job.initial_mode for job in inst.jobs])
    first = weight[0] + np.where(states != initial[None, :], tokens.loss, 0.0) @ mu
    forward = np.empty((n_blocks, n_states))
    forward[0] = first
    for b in range(1, n_blocks):
        forward[b] = weight[b] + np.min(forward[b - 1][:, None] + transition(b), axis=0)
    backward = np.zeros((n_blocks, n_states))
    for b in range(n_blocks - 2, -1, -1):
        backward[b] = np.min(transition(b + 1) + (weight[b + 1] + backward[b + 1])[None, :], axis=1)
    return forward + backward + data.constant_usd + float(mu @ tranche_tokens)


def excluded(through: np.ndarray, threshold: float) -> np.ndarray:
    """Mask of (b, S) that cannot be on a schedule costing at most ``threshold``."""
    return through > threshold + THROUGH_TOLERANCE * max(1.0, abs(threshold))


@dataclass(frozen=True)
class DualOutcome:
    mu_per_token: np.ndarray
    bound_usd: float
    """L(μ): a lower bound on every tranche-meeting schedule."""
    cuts: int
    on_box: bool
    """The maximiser sits on the price box: the tranches may be out of reach together (use the LP)."""


def lagrangian_prices(search: LabelSearch, mu_start: np.ndarray | None = None, stop_at_usd: float = np.inf,
                      known_cuts: Sequence[tuple[float, np.ndarray]] = ()) -> DualOutcome:
    """Maximise the Lagrangian bound over μ ≥ 0 (see the module docstring), from ``mu_start`` (default 0) and the
    ``known_cuts`` (cost, tokens) of schedules known to be in the search; stop as soon as a bound reaches
    ``stop_at_usd``. ``search`` needs ``tranche``, ``most_cost_usd`` and ``lagrangian(μ)``."""
    need = search.tranche
    n_jobs = need.size
    priced = need > 0
    box = PRICE_BOX * max(1.0, search.most_cost_usd)
    scale = np.where(priced, need, 1.0)  # ν = μ·W

    lp = highspy.Highs()
    lp.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    # columns: ν_0..ν_{n-1}, z; maximise z
    for j in range(n_jobs):
        lp.addVar(0.0, box if priced[j] else 0.0)
    lp.addVar(-inf, inf)
    lp.changeColCost(n_jobs, -1.0)  # HiGHS minimises: min −z

    def add_cut(cost: float, tokens: np.ndarray) -> None:  # z − Σ ν_j·(1 − tokens_j / W_j) ≤ cost
        slope = np.where(priced, 1.0 - tokens / scale, 0.0)
        lp.addRow(-inf, cost, n_jobs + 1, np.arange(n_jobs + 1, dtype=np.int32), np.append(-slope, 1.0).astype(float))

    for cost, tokens in known_cuts:
        add_cut(cost, tokens)

    nu = np.zeros(n_jobs) if mu_start is None else np.where(priced, np.clip(mu_start * scale, 0.0, box), 0.0)
    best: tuple[float, np.ndarray] | None = None
    cuts = 0
    while cuts < MAX_CUTS:
        mu = nu / scale
        value, cost, tokens = search.lagrangian(mu)
        cuts += 1
        if best is None or value > best[0]:
            best = (value, mu)
        if best[0] >= stop_at_usd:
            break
        add_cut(cost, tokens)
        lp.run()
        if lp.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            break
        solution = np.asarray(lp.getSolution().col_value, dtype=float)
        nu, top = solution[:n_jobs], float(solution[n_jobs])
        if top - best[0] <= DUAL_RTOL * max(1.0, abs(best[0])):
            break
    assert best is not None
    on_box = bool(np.any(best[1] * scale >= box * (1.0 - 1e-9)))
    return DualOutcome(best[1], best[0], cuts, on_box)
