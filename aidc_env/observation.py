"""The env's observation: its layout, bounds and scaling, and the per-day table of its global part.

The per-job part changes every slot and is filled by :class:`~aidc_env.env.CheckpointDispatchEnv`; the
global part (time of day, price and renewable now, their look-ahead window) depends only on the day and the
slot, so it is built once per episode by :func:`global_table`. The layout is documented in the env's
docstring and in ``docs/env.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gymnasium import spaces

from aidc_env.case import Instance

PRICE_SCALE_USD_PER_MWH = 100.0
"""Observed price = λ / 100 $/MWh, clipped to [PRICE_OBS_LOW, PRICE_OBS_HIGH]."""
PRICE_OBS_LOW = -2.0
"""Lowest observed scaled price (−$200/MWh; CAISO 2023 goes down to about −$105/MWh)."""
PRICE_OBS_HIGH = 10.0
"""Highest observed scaled price ($1,000/MWh; CAISO 2023 peaks near $1,058/MWh, so a few hours clip)."""
PROGRESS_OBS_HIGH = 4.0
"""Observed progress X_j / W_j is clipped to [0, 4]."""
RATE_RATIO_OBS_HIGH = 10.0
"""Observed required-rate ratio is clipped to [0, 10] (> 1: the tranche can no longer be met)."""
DEFAULT_LOOKAHEAD = 16
"""Look-ahead window, in slots (4 hours at 15-minute slots)."""

JOB_FEATURES = (
    "progress",
    "required_rate_ratio",
    "gpu_share",
    "power_share",
    "mode_index",
    "at_checkpoint",
    "slots_to_boundary",
)
"""The per-job observation features, in order (see :class:`~aidc_env.env.CheckpointDispatchEnv`)."""


def renewable_share_high(inst: Instance) -> float:
    """Upper bound of the observed renewable share R_t / P_rated: the renewable ratio ρ (at least 1e-6)."""
    return max(float(inst.renewable_ratio), 1e-6)


def observation_space(n_jobs: int, lookahead: int, power_share_high: float, renewable_high: float) -> spaces.Box:
    """The observation Box: 7 values per job, then the global values (see the env's docstring)."""
    L = lookahead
    job_low = [0.0] * len(JOB_FEATURES)
    job_high = [PROGRESS_OBS_HIGH, RATE_RATIO_OBS_HIGH, 1.0, power_share_high, 1.0, 1.0, 1.0]
    glob_low = [0.0, PRICE_OBS_LOW, 0.0] + [PRICE_OBS_LOW] * L + [0.0] * L + [0.0]
    glob_high = [1.0, PRICE_OBS_HIGH, renewable_high] + [PRICE_OBS_HIGH] * L + [renewable_high] * L + [1.0]
    low = np.array(job_low * n_jobs + glob_low, dtype=np.float32)
    high = np.array(job_high * n_jobs + glob_high, dtype=np.float32)
    return spaces.Box(low=low, high=high, dtype=np.float32)


def observation_names(job_names: Sequence[str], lookahead: int) -> list[str]:
    """The name of every observation entry, in order."""
    names = [f"{name}.{f}" for name in job_names for f in JOB_FEATURES]
    names += ["time_of_day", "price_now", "renewable_now"]
    names += [f"price_ahead_{k}" for k in range(1, lookahead + 1)]
    names += [f"renewable_ahead_{k}" for k in range(1, lookahead + 1)]
    names.append("free_gpu_share")
    return names


def global_table(inst: Instance, lookahead: int, forecast_noise: float, renewable_high: float,
                 rng: np.random.Generator) -> np.ndarray:
    """Per slot t = 0..T: time of day, price and renewable now, the look-ahead window of both (float32).

    With ``forecast_noise`` σ > 0 the look-ahead is the truth plus Gaussian noise of standard deviation σ·√k at
    lead k (scaled units), drawn from ``rng`` (prices first, then renewables) and clipped to the bounds.
    """
    T, L = inst.slots, lookahead
    price = np.clip(inst.price_usd_per_mwh / PRICE_SCALE_USD_PER_MWH, PRICE_OBS_LOW, PRICE_OBS_HIGH)
    rated = inst.rated_facility_mw
    ren = np.clip(inst.renewable_mw / rated if rated > 0 else np.zeros(T), 0.0, renewable_high)
    price_pad = np.concatenate([price, np.zeros(L + 1)])
    ren_pad = np.concatenate([ren, np.zeros(L + 1)])
    table = np.zeros((T + 1, 3 + 2 * L))
    table[:, 0] = np.arange(T + 1) / T
    table[:, 1] = price_pad[: T + 1]
    table[:, 2] = ren_pad[: T + 1]
    if L:
        idx = np.arange(T + 1)[:, None] + np.arange(1, L + 1)[None, :]
        ahead_p = price_pad[idx]
        ahead_r = ren_pad[idx]
        if forecast_noise > 0:
            inside = idx < T
            sd = forecast_noise * np.sqrt(np.arange(1, L + 1))[None, :]
            ahead_p = np.where(inside, ahead_p + rng.normal(size=idx.shape) * sd, 0.0)
            ahead_r = np.where(inside, ahead_r + rng.normal(size=idx.shape) * sd, 0.0)
            ahead_p = np.clip(ahead_p, PRICE_OBS_LOW, PRICE_OBS_HIGH)
            ahead_r = np.clip(ahead_r, 0.0, renewable_high)
        table[:, 3: 3 + L] = ahead_p
        table[:, 3 + L: 3 + 2 * L] = ahead_r
    return table.astype(np.float32)


__all__ = ["DEFAULT_LOOKAHEAD", "JOB_FEATURES", "PRICE_OBS_HIGH", "PRICE_OBS_LOW", "PRICE_SCALE_USD_PER_MWH",
           "PROGRESS_OBS_HIGH", "RATE_RATIO_OBS_HIGH", "global_table", "observation_names", "observation_space",
           "renewable_share_high"]
