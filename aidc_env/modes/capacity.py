"""Capacity checks of modes on a GPU pool (the reference case's GPU threshold)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from aidc_env.errors import require
from aidc_env.modes.common import SECONDS_PER_HOUR, is_int, is_number
from aidc_env.modes.mode import Mode


def best_mode_within(modes: Sequence[Mode], gpus: int) -> Mode | None:
    """The highest-throughput mode using at most ``gpus`` GPUs (None if none fits)."""
    return max((md for md in modes if md.gpus <= gpus), key=lambda md: (md.tokens_per_s, -md.gpus), default=None)


def min_hours_two_jobs(modes_a: Sequence[Mode], modes_b: Sequence[Mode], tokens_a: float, tokens_b: float,
                       n_gpus: int) -> float:
    """Least wall-clock hours in which two jobs finish ``tokens_a`` and ``tokens_b`` on ``n_gpus``.

    Time-sharing relaxation: the day may be cut into any durations of joint states (a mode or a pause per job, GPUs
    summing to at most ``n_gpus``), ignoring checkpoint boundaries and restart losses, so this is a lower bound on the
    makespan of any real schedule. It is the linear program min sum(theta) s.t. sum_s theta_s r_s >= (tokens_a,
    tokens_b), theta >= 0, whose basic optimum uses one joint state or two with both tranches met exactly; all of them
    are tried. Returns ``math.inf`` when no capacity-feasible state makes progress on a needed job.
    """
    require(is_int(n_gpus) and n_gpus > 0, "n_gpus", f"must be a positive integer, got {n_gpus!r}")
    for name, tokens in (("tokens_a", tokens_a), ("tokens_b", tokens_b)):
        require(is_number(tokens) and math.isfinite(tokens) and tokens >= 0, name,
                f"must be a finite number >= 0, got {tokens!r}")
    need = np.array([tokens_a, tokens_b], dtype=float)
    if not need.any():
        return 0.0
    rows = [(a.tokens_per_s, 0.0) for a in modes_a if a.gpus <= n_gpus]
    rows += [(0.0, b.tokens_per_s) for b in modes_b if b.gpus <= n_gpus]
    rows += [(a.tokens_per_s, b.tokens_per_s) for a in modes_a for b in modes_b if a.gpus + b.gpus <= n_gpus]
    if not rows:
        return math.inf
    # Only the upper-right frontier of the joint rates matters for covering the tranches.
    rows.sort(key=lambda r: (-r[0], -r[1]))
    frontier: list[tuple[float, float]] = []
    for row in rows:
        if not frontier or row[1] > frontier[-1][1]:
            frontier.append(row)
    rates = np.array(frontier, dtype=float)  # (states, 2) tokens/s per job
    with np.errstate(divide="ignore", invalid="ignore"):
        per_job = np.where(need > 0, need / rates, 0.0)  # inf where a needed job gets no rate
        best_s = float(np.min(np.max(per_job, axis=1)))
        pa, pb = rates[:, 0][:, None], rates[:, 1][:, None]
        qa, qb = rates[:, 0][None, :], rates[:, 1][None, :]
        det = pa * qb - qa * pb
        t1 = (need[0] * qb - qa * need[1]) / det
        t2 = (pa * need[1] - need[0] * pb) / det
        ok = (det != 0) & (t1 >= 0) & (t2 >= 0)
        if ok.any():
            best_s = min(best_s, float(np.min((t1 + t2)[ok])))
    return best_s / SECONDS_PER_HOUR
