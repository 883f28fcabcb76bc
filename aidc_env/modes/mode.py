"""A mode (one 3D-parallel layout of a job), the full estimate behind it, and a job's set of modes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aidc_env.errors import InputError, require
from aidc_env.modes.common import SECONDS_PER_HOUR, TOKENS_PER_MILLION, is_int, is_number

_MODE_INT_FIELDS = ("tp", "pp", "dp", "micro_batch", "gpus")
_MODE_FLOAT_FIELDS = ("tokens_per_s", "it_power_kw")
_MODE_DERIVED_KEYS = ("label", "kwh_per_million_tokens", "tokens_per_s_per_gpu")


@dataclass(frozen=True)
class Mode:
    """One 3D-parallel layout of a job, with its throughput and IT power (no PUE)."""

    tp: int
    pp: int
    dp: int
    micro_batch: int
    gpus: int  # tp*pp*dp
    tokens_per_s: float  # whole job
    it_power_kw: float  # IT power of the mode's GPUs + host share (no PUE)

    def __post_init__(self) -> None:
        for name in _MODE_INT_FIELDS:
            value = getattr(self, name)
            require(is_int(value) and value > 0, f"mode.{name}", f"must be a positive integer, got {value!r}")
        require(self.gpus == self.tp * self.pp * self.dp, "mode.gpus",
                f"must equal tp*pp*dp = {self.tp * self.pp * self.dp}, got {self.gpus}")
        for name in _MODE_FLOAT_FIELDS:
            value = getattr(self, name)
            require(is_number(value) and math.isfinite(value) and value > 0, f"mode.{name}",
                    f"must be a positive finite number, got {value!r}")

    @property
    def label(self) -> str:
        base = f"tp{self.tp}-pp{self.pp}-dp{self.dp}"
        return base if self.micro_batch == 1 else f"{base}-mb{self.micro_batch}"

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    @property
    def kwh_per_million_tokens(self) -> float:
        return self.it_power_kw / (self.tokens_per_s * SECONDS_PER_HOUR) * TOKENS_PER_MILLION

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {name: getattr(self, name) for name in _MODE_INT_FIELDS + _MODE_FLOAT_FIELDS}
        data["label"] = self.label
        data["kwh_per_million_tokens"] = self.kwh_per_million_tokens
        data["tokens_per_s_per_gpu"] = self.tokens_per_s_per_gpu
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, field_prefix: str = "mode") -> Mode:
        """Build a mode from :meth:`to_dict` output (derived keys are ignored). Missing, unknown or bad fields raise
        :class:`InputError` naming ``<field_prefix>.<key>``."""
        require(isinstance(data, Mapping), field_prefix, f"must be a table, got {type(data).__name__}")
        allowed = set(_MODE_INT_FIELDS + _MODE_FLOAT_FIELDS + _MODE_DERIVED_KEYS)
        for key in data:
            require(key in allowed, f"{field_prefix}.{key}", "unknown mode field")
        kwargs: dict[str, Any] = {}
        for name in _MODE_INT_FIELDS + _MODE_FLOAT_FIELDS:
            require(name in data, f"{field_prefix}.{name}", "missing")
            kwargs[name] = data[name]
        try:
            return cls(**kwargs)
        except InputError as err:
            raise InputError(err.field.replace("mode", field_prefix, 1), err.message) from None


@dataclass(frozen=True)
class ModeEstimate:
    """Everything the models compute for one layout (for reports and tests)."""

    model: str
    tp: int
    pp: int
    dp: int
    micro_batch: int
    gpus: int
    n_microbatches: int
    memory_gib: float  # worst pipeline stage, per GPU
    memory_limit_gib: float
    iteration_s: float
    bubble_fraction: float  # (pp-1)/m of the pipeline schedule
    compute_fraction: float  # share of the iteration each GPU computes
    comm_fraction: float  # share in exposed communication (TP, PP, DP)
    tokens_per_s: float
    gpu_power_kw: float  # per GPU, without host share
    it_power_kw: float  # whole mode, GPUs + host share

    @property
    def fits_memory(self) -> bool:
        return self.memory_gib <= self.memory_limit_gib

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    def to_mode(self) -> Mode:
        return Mode(self.tp, self.pp, self.dp, self.micro_batch, self.gpus, self.tokens_per_s, self.it_power_kw)


@dataclass(frozen=True)
class ModeSet:
    """The screened modes of one job and their Pareto set."""

    model: str
    feasible: tuple[Mode, ...]  # sorted by gpus, tp, pp, dp, micro_batch
    pareto: tuple[Mode, ...]  # sorted by gpus ascending, then tokens_per_s ascending

    def to_dict(self, name: str | None = None) -> dict[str, Any]:
        return {"name": self.model if name is None else name, "model": self.model, "feasible_count": len(self.feasible),
                "pareto_count": len(self.pareto), "pareto": [mode.to_dict() for mode in self.pareto]}
