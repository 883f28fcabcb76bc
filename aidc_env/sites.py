"""Several data centers: each site's pool, plant and price node, and moving a job between them.

A :class:`Site` is one data center resolved on the instance's slots: its GPU pool, PUE, idle power, rated power
per GPU, renewable plant (``solar``, ``wind``, ``solar+wind`` or ``none``; rated ``plant_mw``, its capacity
factor per slot ``renewable_shape``), take-or-pay PPA price and price node (``SCE``, ``PGE`` or ``SDGE``: the
CAISO load zone whose LMP it pays, ``price_usd_per_mwh`` per slot). A :class:`SiteNetwork` holds the sites of an
instance, each job's *home* site (where its checkpoint is before t = 0) and each job's transfer time.

**Where a job is.** A sites schedule gives, per job and per checkpoint segment, a mode (or pause) *and* a site:
the site holding the job's checkpoint during that segment, where it runs if it runs. A job is at one site per
segment by construction of the format, and it can change site only between two segments, i.e. at a checkpoint.

**Migration.** A job whose site differs from the previous segment's (the home site before segment 0) *moves*:
its checkpoint is copied over the inter-site link during the first ``transfer_hours`` of the segment. If the
segment runs, the job makes no token while the checkpoint travels, then pays its restart τ_j (a new process at
the destination): productive hours = H − τ_j − transfer. If the segment is paused, the copy happens during the
pause and costs nothing (the later resume pays τ_j as usual). Transfer time = checkpoint bytes / link bandwidth,
with checkpoint bytes = parameters × :data:`CHECKPOINT_BYTES_PER_PARAMETER`.

**Power during a transfer** (a documented simplification): the destination holds the job's GPUs for the whole
segment and they draw the mode's power, exactly as during the restart τ_j of the day model (docs/model.md:
"during the restart the mode draws its full power and makes no token"); the source releases its GPUs at the
boundary (they are idle there from then on). The energy of the copy itself (network and storage) is left out:
~1 TB over a 10 Gbit/s path is a few kWh against the sites' ~1 MWh per hour.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aidc_env.errors import is_finite, require
from aidc_env.information import Forecast
from aidc_env.modes import LLAMA_MODELS

SECONDS_PER_HOUR = 3600.0
BITS_PER_BYTE = 8.0
BITS_PER_GIGABIT = 1e9

CHECKPOINT_BYTES_PER_PARAMETER = 14.0
"""Bytes a training checkpoint holds per parameter with mixed-precision Adam: bf16 weights (2) + fp32 master
weights (4) + Adam's two fp32 moments (8). Source: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
Training Trillion Parameter Models", §3.1 (mixed-precision Adam keeps 2Ψ + 2Ψ + 12Ψ bytes; the 2Ψ of fp16
gradients are not checkpointed); the same split as ``ModeParams.bytes_per_param`` (18, whose gradients are fp32)."""

DEFAULT_LINK_GBPS = 10.0
"""Default effective inter-site bandwidth for a checkpoint copy (Gbit/s): one 10 GbE path of a leased wide-area
link, a conservative figure (a dedicated 100G wavelength moves the same checkpoint ten times faster). The
sites case states its own; the coordination study sweeps it (docs/sites.md)."""


def checkpoint_bytes(model: str) -> float:
    """Checkpoint size of a model (bytes): its parameters (counted from the architecture) × 14."""
    key = model.strip().lower()
    require(key in LLAMA_MODELS, "model", f"unknown model {model!r}; known: {', '.join(LLAMA_MODELS)}")
    return LLAMA_MODELS[key].params * CHECKPOINT_BYTES_PER_PARAMETER


def transfer_hours(model: str, link_gbps: float) -> float:
    """Hours to copy a model's checkpoint over a link of ``link_gbps`` Gbit/s."""
    require(is_finite(link_gbps) and link_gbps > 0, "migration.link_gbps", f"must be a number > 0, got {link_gbps!r}")
    return checkpoint_bytes(model) * BITS_PER_BYTE / (link_gbps * BITS_PER_GIGABIT) / SECONDS_PER_HOUR


@dataclass(frozen=True, eq=False)
class Site:
    """One data center resolved on an instance's slots (see the module docstring). Units as in the instance."""

    name: str
    n_gpus: int
    pue: float
    idle_kw_per_gpu: float
    rated_kw_per_gpu: float
    plant: str
    """``solar``, ``wind``, ``solar+wind`` or ``none`` (:data:`aidc_env.site_profiles.PLANTS`)."""
    renewable_ratio: float
    """Plant size relative to the site's rated facility power (ρ, as in the day model; 0 without a plant)."""
    ppa_usd_per_mwh: float
    curtailment_penalty_usd_per_mwh: float
    price_node: str
    """``SCE``, ``PGE`` or ``SDGE`` (:data:`aidc_env.site_profiles.PRICE_NODES`)."""
    price_usd_per_mwh: np.ndarray
    renewable_shape: np.ndarray
    """The plant's capacity factor per slot in [0, 1]."""
    forecast: Forecast | None = None
    """Day-ahead forecasts of the site's price and plant shape on the same slots (:mod:`aidc_env.information`,
    :func:`aidc_env.dayahead.dayahead_instances`); None: truth only."""

    def __post_init__(self) -> None:
        price = np.array(self.price_usd_per_mwh, dtype=float)
        shape = np.array(self.renewable_shape, dtype=float)
        require(self.forecast is None or self.forecast.slots == price.size, f"sites.{self.name}.forecast",
                f"must be a Forecast of {price.size} slots")
        for name, arr in (("price_usd_per_mwh", price), ("renewable_shape", shape)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def rated_facility_mw(self) -> float:
        return self.pue * self.n_gpus * self.rated_kw_per_gpu / 1000.0

    @property
    def plant_mw(self) -> float:
        """Rated power of the site's renewable plant (MW)."""
        return self.renewable_ratio * self.rated_facility_mw

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "gpus": self.n_gpus, "pue": self.pue, "idle_kw_per_gpu": self.idle_kw_per_gpu,
                "rated_kw_per_gpu": self.rated_kw_per_gpu, "plant": self.plant, "renewable_ratio": self.renewable_ratio,
                "plant_mw": self.plant_mw, "ppa_usd_per_mwh": self.ppa_usd_per_mwh,
                "curtailment_penalty_usd_per_mwh": self.curtailment_penalty_usd_per_mwh, "price_node": self.price_node,
                "price_usd_per_mwh": self.price_usd_per_mwh.tolist(), "renewable_shape": self.renewable_shape.tolist(),
                **({"forecast": self.forecast.to_dict()} if self.forecast is not None else {})}


@dataclass(frozen=True, eq=False)
class SiteNetwork:
    """The sites of an instance, each job's home site and transfer time, and the link that gives the latter."""

    sites: tuple[Site, ...]
    home: tuple[int, ...]
    """Per job (instance order): the index of the site holding its checkpoint before t = 0."""
    transfer_hours: tuple[float, ...]
    """Per job: hours to copy its checkpoint to another site (no tokens meanwhile, see the module docstring)."""
    link_gbps: float = DEFAULT_LINK_GBPS
    """The inter-site bandwidth the transfer times were computed from (for the record)."""
    index: Mapping[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "home", tuple(int(h) for h in self.home))
        object.__setattr__(self, "transfer_hours", tuple(float(h) for h in self.transfer_hours))
        object.__setattr__(self, "index", {site.name: i for i, site in enumerate(self.sites)})

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.sites)

    def to_dict(self) -> dict[str, Any]:
        return {"sites": [s.to_dict() for s in self.sites], "home": list(self.home),
                "transfer_hours": list(self.transfer_hours), "link_gbps": self.link_gbps}
