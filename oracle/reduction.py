"""Lagrangian reduction of the joint-state model: which (block, joint state) can lie on a good schedule.

Relaxing the tranche rows with token prices μ_j ≥ 0 (the LP duals) turns the day into a shortest path
over joint states: each block's state costs its exact block cost minus μ·(tokens it makes), and each
restart costs μ_j·(tokens it loses). For every schedule that meets the tranches,

    cost(schedule) ≥ cost(schedule) − Σ_j μ_j·(tokens_j − W_j) = its Lagrangian length,

so a forward and a backward dynamic programme give, for every (block b, state S), a lower bound
``through[b, S]`` on the cost of *any* feasible schedule that is in S during b. A (b, S) whose bound
exceeds a threshold θ cannot be on a schedule cheaper than θ: its variable is bounded to zero.

:func:`solve_reduced` uses this exactly: it solves the model restricted to {through ≤ LB + δ} for a small
δ. Every schedule left out costs more than LB + δ, so min(bound of the restricted solve, LB + δ) is a
valid bound for the whole model; when the restricted optimum z is within the gap of it, z is optimal
(within the gap) for the whole model. Otherwise the last step restricts to {through ≤ z}, which keeps
every schedule better than z. The restricted models are much smaller (typically >90 % of the joint-state
variables go), and the solver proves optimality on them faster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aidc_env.instance import PAUSE
from oracle.data import OracleData

THROUGH_TOLERANCE = 1e-9
"""Relative safety margin: a (b, S) is excluded only if its bound exceeds the threshold by more than this."""


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

    ``state_cost``: (blocks, states) exact block costs; ``mu_per_token``: μ_j ≥ 0 in $ per token;
    ``tranche_tokens``: the W_j the model enforces. The constant PPA term is included.
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
    return forward + backward + data.renewable_cost_usd + float(mu @ tranche_tokens)


def excluded(through: np.ndarray, threshold: float) -> np.ndarray:
    """Mask of (b, S) that cannot be on a schedule costing at most ``threshold``."""
    return through > threshold + THROUGH_TOLERANCE * max(1.0, abs(threshold))
