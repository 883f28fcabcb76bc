"""The env's observation: its scaling and bounds, the joint action's layout, and the per-day table of its global part.

The per-job part changes every step and is filled by the action type (:mod:`aidc_env.env.joint`,
:mod:`aidc_env.env.per_job`); the global part of a site (time of day, price and renewable now, their look-ahead
window) depends only on the instance, the slot and the outlook, so it is built once per episode by
:func:`global_table`. The layouts are documented in the env's docstring and in ``docs/env.md``.

What the global part may know at slot t is read only through an :class:`~aidc_env.information.Outlook` (the view
of slots t..T−1 at the start of slot t: the truth with ``perfect``, the issued day-ahead forecasts with
``dayahead``) and :func:`aidc_env.information.realised` (the truth of slots < t).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gymnasium import spaces

from aidc_env.information import DayAhead, Outlook, Perfect, outlook_of, realised
from aidc_env.instance import Instance

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

JOB_FEATURES = ("progress", "required_rate_ratio", "gpu_share", "power_share", "mode_index", "at_checkpoint",
                "slots_to_boundary")
"""The joint action's per-job observation features, in order (see :class:`~aidc_env.env.DispatchEnv`)."""


def renewable_share_high(inst: Instance) -> float:
    """Upper bound of the observed renewable share R_t / P_rated: the renewable ratio ρ (at least 1e-6)."""
    return max(float(inst.renewable_ratio), 1e-6)


def observation_layout(job_names: Sequence[str], lookahead: int, power_share_high: float, renewable_high: float, *,
                       horizon: bool = False, last_realised: bool = False, grid_side: Sequence[str] = ()
                       ) -> tuple[list[str], spaces.Box]:
    """The name of every observation entry and the observation Box: 7 values per job, then the global values (see
    the env's docstring).

    ``horizon``: a horizon-progress entry after the time of day (instances of D > 1 days); ``last_realised``: the last
    realised price and renewable share and their validity flag after the look-ahead (``information="dayahead"``);
    ``grid_side``: the names of the grid side's entries, each in [0, 1], before the free GPU share
    (:data:`aidc_env.env.calls.CALL_FEATURES`).
    """
    price, renewable, share = (PRICE_OBS_LOW, PRICE_OBS_HIGH), (0.0, renewable_high), (0.0, 1.0)
    job = list(zip(JOB_FEATURES, [(0.0, PROGRESS_OBS_HIGH), (0.0, RATE_RATIO_OBS_HIGH), share,
                                  (0.0, power_share_high), share, share, share], strict=True))
    entries = [(f"{name}.{f}", *bounds) for name in job_names for f, bounds in job]
    entries += [("time_of_day", *share)] + [("horizon_progress", *share)] * horizon
    entries += [("price_now", *price), ("renewable_now", *renewable)]
    entries += [(f"price_ahead_{k}", *price) for k in range(1, lookahead + 1)]
    entries += [(f"renewable_ahead_{k}", *renewable) for k in range(1, lookahead + 1)]
    if last_realised:
        entries += [("price_last", *price), ("renewable_last", *renewable), ("last_known", *share)]
    entries += [(name, *share) for name in grid_side]
    names, low, high = zip(*entries, ("free_gpu_share", *share), strict=True)
    return list(names), spaces.Box(low=np.array(low, dtype=np.float32), high=np.array(high, dtype=np.float32),
                                   dtype=np.float32)


def outlook_blocks(inst: Instance, outlook: Outlook | str) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    """The views of ``outlook`` for every slot t = 0..T, grouped in blocks.

    Returns ``(t0, t1, price, renewable_mw)``: for every t0 ≤ t < t1, ``price[t:]`` and ``renewable_mw[t:]``
    (arrays of T slots, MW = ρ · P_rated · shape) are the view at slot t (the slots before t0 are 0 and never
    read). The view changes only when a forecast is issued, so the blocks start at 0 and at each of the outlook's
    issue slots. With the truth there is one block holding it (``inst.renewable_mw`` itself).
    """
    T = inst.slots
    outlook = outlook_of(outlook)
    if isinstance(outlook, Perfect):
        price, _ = outlook.view(inst, 0)
        return [(0, T + 1, price, np.asarray(inst.renewable_mw, dtype=float))]
    starts = [0] + outlook.issue_slots(inst)
    ends = starts[1:] + [T + 1]
    rated_renewable = inst.renewable_ratio * inst.rated_facility_mw
    blocks = []
    for t0, t1 in zip(starts, ends, strict=True):
        price, shape = np.zeros(T), np.zeros(T)
        price[t0:], shape[t0:] = outlook.view(inst, t0)
        blocks.append((t0, t1, price, rated_renewable * shape))
    return blocks


def time_columns(inst: Instance) -> int:
    """The global table's columns that depend on the slot only: time of day, and the horizon progress when D > 1."""
    return 1 + (inst.horizon_days > 1)


def global_table(inst: Instance, lookahead: int, outlook: Outlook | str, renewable_high: float,
                 rng: np.random.Generator) -> np.ndarray:
    """Per slot t = 0..T: the global observation entries of a site but the free GPU share (float32).

    Time of day (t − 24h · day) / slots per day; with D > 1 the horizon progress t / T (:func:`time_columns`);
    price and renewable now and the look-ahead window of both, as ``outlook`` sees them at slot t (0 past the end of
    the horizon); with :class:`~aidc_env.information.DayAhead` the last realised price and renewable share (slot
    t − 1, :func:`~aidc_env.information.realised`) and a flag that they exist (0 at t = 0, where the instance holds
    no earlier slot: the values are then 0).

    With :class:`~aidc_env.information.Perfect` noise σ > 0 the look-ahead is the truth plus Gaussian noise of
    standard deviation σ·√k at lead k (scaled units), drawn from ``rng`` (prices first, then renewables) and clipped
    to the bounds.
    """
    T, L, D, spd = inst.slots, lookahead, inst.horizon_days, inst.slots_per_day
    outlook = outlook_of(outlook)
    dayahead = isinstance(outlook, DayAhead)
    forecast_noise = getattr(outlook, "noise", 0.0)
    rated = inst.rated_facility_mw
    table = np.zeros((T + 1, 3 + 2 * L + (D > 1) + 3 * dayahead))
    slots = np.arange(T + 1)
    table[:, 0] = (slots - np.minimum(slots // spd, D - 1) * spd) / spd  # the last day runs to T
    if D > 1:
        table[:, 1] = slots / T
    col = time_columns(inst)
    for t0, t1, price_usd, renewable_mw in outlook_blocks(inst, outlook):
        price = np.clip(price_usd / PRICE_SCALE_USD_PER_MWH, PRICE_OBS_LOW, PRICE_OBS_HIGH)
        ren = np.clip(renewable_mw / rated if rated > 0 else np.zeros(T), 0.0, renewable_high)
        price_pad = np.concatenate([price, np.zeros(L + 1)])
        ren_pad = np.concatenate([ren, np.zeros(L + 1)])
        rows = slots[t0:t1]
        table[t0:t1, col] = price_pad[rows]
        table[t0:t1, col + 1] = ren_pad[rows]
        if L:
            idx = rows[:, None] + np.arange(1, L + 1)[None, :]
            ahead_p, ahead_r = price_pad[idx], ren_pad[idx]
            if forecast_noise > 0:
                inside = idx < T
                sd = forecast_noise * np.sqrt(np.arange(1, L + 1))[None, :]
                ahead_p = np.clip(np.where(inside, ahead_p + rng.normal(size=idx.shape) * sd, 0.0), PRICE_OBS_LOW,
                                  PRICE_OBS_HIGH)
                ahead_r = np.clip(np.where(inside, ahead_r + rng.normal(size=idx.shape) * sd, 0.0), 0.0, renewable_high)
            table[t0:t1, col + 2: col + 2 + L] = ahead_p
            table[t0:t1, col + 2 + L: col + 2 + 2 * L] = ahead_r
    if dayahead:
        past_price, past_shape = realised(inst, T)
        last = col + 2 + 2 * L
        table[1:, last] = np.clip(past_price / PRICE_SCALE_USD_PER_MWH, PRICE_OBS_LOW, PRICE_OBS_HIGH)
        table[1:, last + 1] = np.clip(inst.renewable_ratio * past_shape, 0.0, renewable_high)
        table[1:, last + 2] = 1.0
    return table.astype(np.float32)


def sites_global_table(inst: Instance, lookahead: int, outlook: Outlook, renewable_high: float,
                       rng: np.random.Generator) -> np.ndarray:
    """Per slot t = 0..T: the time columns once, then each site's :func:`global_table` without them (one site: its
    table as is)."""
    tables = [global_table(view, lookahead, outlook, renewable_high, rng) for view in inst.site_views]
    if len(tables) == 1:
        return tables[0]
    return np.concatenate([tables[0]] + [t[:, time_columns(inst):] for t in tables[1:]], axis=1)


__all__ = ["DEFAULT_LOOKAHEAD", "JOB_FEATURES", "PRICE_OBS_HIGH", "PRICE_OBS_LOW", "PRICE_SCALE_USD_PER_MWH",
           "PROGRESS_OBS_HIGH", "RATE_RATIO_OBS_HIGH", "global_table", "observation_layout", "outlook_blocks",
           "renewable_share_high", "sites_global_table", "time_columns"]
