"""The grid's side of an instance: GPU power caps and grid calls (docs/grid-calls.md).

- :class:`CapCurve`: the levels a GPU power cap may take and, per level, the share of a mode's throughput and of its GPU
  power that remain (level 0 is no cap: both 1). A cap is chosen per job and per slot and needs no checkpoint; it scales
  the running mode's tokens/s and the GPU part of its IT power (the host's share per GPU, ``host_kw_per_gpu``, is not
  capped; nor is the idle draw of unused GPUs). A cap may change *within* a slot: a schedule gives per job and slot a
  level position x ∈ [0, levels − 1], the slot shared between levels ⌊x⌋ and ⌈x⌉ in proportion (x = 2.25: three
  quarters of the slot at level 2, a quarter at level 3), so its throughput and power factors are the linear
  interpolation of the levels'. Energy is metered per slot, so the slot's load is the mean. The levels must be the
  upper concave hull of (power, throughput) (a level below the chord of its neighbours is beaten by sharing the slot
  between them, and is dropped by :func:`aidc_env.power_caps.cap_curve`): sharing adjacent levels is then the best use
  of any mean power.
- :class:`GridCall`: a firm reduction the grid asks for, over the slots ``[start_slot, end_slot)`` of one site, known
  from ``notice_slot`` on: the site's grid import may not exceed ``limit_mw`` in each slot of the call. The baseline it
  is measured against (``baseline_mw``, per slot) is stated with the call; the program pays ``payment_usd_per_mwh`` for
  every MWh of import below the baseline and ``payment_usd_per_mw`` per MW of committed reduction (mean baseline −
  limit) of a call delivered in every slot, and charges ``penalty_usd_per_mwh`` for every MWh above the limit.

A job's throughput tier (``Job.max_throughput_loss``) bounds the share of its baseline throughput it may lose over the
slots of each call. The simulator (:mod:`aidc_env.simulator`) scores all of it; :mod:`aidc_env.calls` makes calls
(presets of programs, the baseline rule, the seeded generator).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aidc_env.errors import is_finite, require

FLEX_TIER_LOSS = (0.0, 0.1, 0.25, 0.5)
"""Throughput a job of Flex tier 0, 1, 2, 3 may lose over a call (the Phoenix field demonstration, arXiv 2507.00909)."""
CAP_TOLERANCE_MW = 1e-6
"""Import above a call's limit by less than this (MW: one watt, a solver's tolerance) is not a shortfall."""


@dataclass(frozen=True, eq=False)
class CapCurve:
    """GPU power-cap levels, uncapped first: per level its share of the GPU's rated power (``cap_share``), and the share
    of a mode's throughput and of its IT power that remain under it."""

    name: str
    cap_share: tuple[float, ...]
    throughput_factor: tuple[float, ...]
    power_factor: tuple[float, ...]
    host_kw_per_gpu: float = 0.0
    """IT power per running GPU that a cap does not touch (CPUs, memory, network: the mode generator's host share)."""
    source: str = ""

    def __post_init__(self) -> None:
        n = len(self.cap_share)
        require(n >= 1 and len(self.throughput_factor) == n and len(self.power_factor) == n, "cap_curve",
                "cap_share, throughput_factor and power_factor need one entry per level")
        for name in ("cap_share", "throughput_factor", "power_factor"):
            values = getattr(self, name)
            require(all(is_finite(v) and 0 < v <= 1 for v in values), f"cap_curve.{name}",
                    f"must be numbers in (0, 1], got {list(values)}")
            require(values[0] == 1.0, f"cap_curve.{name}", "level 0 is no cap: its entry must be 1")
            object.__setattr__(self, name, tuple(float(v) for v in values))
        require(all(a > b for a, b in zip(self.cap_share, self.cap_share[1:])), "cap_curve.cap_share",
                "levels must go from no cap down (strictly decreasing)")
        power, throughput = np.array(self.power_factor), np.array(self.throughput_factor)
        require(bool(np.all(np.diff(power) < 0) and np.all(np.diff(throughput) < 0)), "cap_curve.power_factor",
                "power and throughput factors must fall from level to level")
        slopes = np.diff(throughput) / np.diff(power)  # from each level to the next, lower one
        require(bool(np.all(np.diff(slopes) >= -1e-12)), "cap_curve.throughput_factor",
                "throughput against power must be concave (each lower level loses throughput faster per unit of "
                "power); drop the levels below the chord of their neighbours")
        require(is_finite(self.host_kw_per_gpu) and self.host_kw_per_gpu >= 0, "cap_curve.host_kw_per_gpu",
                f"must be a number >= 0, got {self.host_kw_per_gpu!r}")
        object.__setattr__(self, "throughput", np.array(self.throughput_factor))
        object.__setattr__(self, "power", np.array(self.power_factor))

    throughput: np.ndarray = field(init=False, repr=False)
    power: np.ndarray = field(init=False, repr=False)

    @property
    def levels(self) -> int:
        return len(self.cap_share)

    def throughput_at(self, position: np.ndarray | float) -> np.ndarray:
        """Throughput factor at level position(s) (interpolated between levels; an integer position reads its level)."""
        return np.interp(position, np.arange(self.levels), self.throughput)

    def power_at(self, position: np.ndarray | float) -> np.ndarray:
        return np.interp(position, np.arange(self.levels), self.power)

    def it_power_kw(self, it_kw: np.ndarray | float, gpus: np.ndarray | int, position: np.ndarray | float
                    ) -> np.ndarray:
        """IT power at level position(s) of a mode drawing ``it_kw`` on ``gpus`` GPUs uncapped: the GPU part scaled by
        the power factor, the host part kept (position 0: ``it_kw`` exactly)."""
        factor = self.power_at(position)
        return np.asarray(it_kw) * factor + np.asarray(gpus) * self.host_kw_per_gpu * (1.0 - factor)

    def position_of_power(self, factor: float) -> float:
        """The level position whose power factor is ``factor`` (clipped to the levels' range)."""
        return float(np.interp(-factor, -self.power, np.arange(self.levels)))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "cap_share": list(self.cap_share), "throughput_factor": list(self.throughput_factor),
                "power_factor": list(self.power_factor), "host_kw_per_gpu": self.host_kw_per_gpu, "source": self.source}


@dataclass(frozen=True, eq=False)
class GridCall:
    """One call of a program (see the module docstring). Slots are on the instance's time axis; ``baseline_mw`` and
    ``limit_mw`` hold one value per slot of the call."""

    program: str
    notice_slot: int
    start_slot: int
    end_slot: int
    baseline_mw: np.ndarray
    limit_mw: np.ndarray
    payment_usd_per_mwh: float = 0.0
    payment_usd_per_mw: float = 0.0
    penalty_usd_per_mwh: float = 0.0
    site: int = 0
    baseline_rule: str = ""
    """How ``baseline_mw`` was set (for the record), e.g. the load of the baseline schedule."""

    def __post_init__(self) -> None:
        require(0 <= self.notice_slot <= self.start_slot < self.end_slot, "grid_calls",
                f"need 0 <= notice_slot <= start_slot < end_slot, got {self.notice_slot}, {self.start_slot}, "
                f"{self.end_slot}")
        n = self.end_slot - self.start_slot
        for name in ("baseline_mw", "limit_mw"):
            arr = np.array(getattr(self, name), dtype=float)
            require(arr.shape == (n,) and bool(np.all(np.isfinite(arr) & (arr >= 0))), f"grid_calls.{name}",
                    f"must be {n} numbers >= 0 (one per slot of the call)")
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        for name in ("payment_usd_per_mwh", "payment_usd_per_mw", "penalty_usd_per_mwh"):
            value = getattr(self, name)
            require(is_finite(value) and value >= 0, f"grid_calls.{name}", f"must be a number >= 0, got {value!r}")

    @property
    def slots(self) -> slice:
        return slice(self.start_slot, self.end_slot)

    @property
    def committed_mw(self) -> float:
        """The reduction the call asks for: mean of baseline − limit over its slots (MW)."""
        return float(np.mean(self.baseline_mw - self.limit_mw))

    def to_dict(self) -> dict[str, Any]:
        return {"program": self.program, "notice_slot": self.notice_slot, "start_slot": self.start_slot,
                "end_slot": self.end_slot, "baseline_mw": self.baseline_mw.tolist(), "limit_mw": self.limit_mw.tolist(),
                "payment_usd_per_mwh": self.payment_usd_per_mwh, "payment_usd_per_mw": self.payment_usd_per_mw,
                "penalty_usd_per_mwh": self.penalty_usd_per_mwh, "site": self.site,
                "baseline_rule": self.baseline_rule}


def check_calls(calls: Sequence[GridCall], slots: int, sites: int) -> None:
    """Calls lie within the horizon, at a site of the instance, and no two of a site overlap."""
    for i, call in enumerate(calls):
        require(isinstance(call, GridCall), f"grid_calls[{i}]", "must be a GridCall")
        require(call.end_slot <= slots, f"grid_calls[{i}].end_slot", f"must be <= {slots} (the horizon's slots)")
        require(0 <= call.site < sites, f"grid_calls[{i}].site", f"must be a site index < {sites}")
    for s in range(sites):
        spans = sorted((c.start_slot, c.end_slot) for c in calls if c.site == s)
        require(all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "grid_calls",
                "two calls of one site overlap")


def slot_limits_mw(calls: Sequence[GridCall], slots: int, site: int = 0) -> np.ndarray:
    """The most grid import each slot allows at ``site`` (MW): a call's limit, ∞ elsewhere."""
    limit = np.full(slots, np.inf)
    for call in calls:
        if call.site == site:
            limit[call.slots] = np.minimum(limit[call.slots], call.limit_mw)
    return limit
