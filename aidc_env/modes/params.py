"""Every assumption of the mode generator (:class:`ModeParams`), with its source and validation."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aidc_env.errors import InputError, require
from aidc_env.modes.common import is_int, is_number

RECOMPUTE_CHOICES = ("none", "selective", "full")


@dataclass(frozen=True)
class ModeParams:
    """Every assumption of the mode generator, with its source. Override from a TOML table with :meth:`from_dict`. The
    defaults land within 15% of the seed's mode counts (docs/modes.md)."""

    # --- training job (LLaMA paper §2.3 and Table 2: context 2048, batch 4M tokens) ---------------
    seq_len_tokens: int = 2048
    global_batch_seqs: int = 2048  # 2048 sequences x 2048 tokens = 4M tokens per step
    micro_batch_sizes: tuple[int, ...] = (1,)  # the seed's recipe: micro-batch 1

    # --- layouts ---------------------------------------------------------------------------------
    tp_degrees: tuple[int, ...] = (1, 2, 4, 8)  # tensor parallelism stays inside an 8-GPU node
    min_gpus: int = 128  # the seed's recipe: at least 128 GPUs (16 nodes) per mode
    gpu_granularity: int = 8  # whole nodes only (a DGX A100 has 8 GPUs)
    min_microbatches_per_stage: int = 1  # m >= this x pp (1F1B needs m >= pp to fill the pipe)

    # --- hardware: NVIDIA DGX A100 / A100 SXM4 80GB datasheets ------------------------------------
    gpus_per_node: int = 8
    gpu_memory_gib: float = 80.0  # 80 GB HBM2e = 81920 MiB
    usable_memory_fraction: float = 1.0  # the seed's recipe: the full 80 GB
    peak_tflops_per_gpu: float = 312.0  # dense BF16 tensor-core peak
    nvlink_bus_bw_gb_per_s: float = 230.0  # NCCL all-reduce bus bandwidth inside a DGX A100
    # (NVLink3 600 GB/s bidirectional per GPU; nccl-tests reach ~230 GB/s bus bandwidth)
    internode_bw_gb_per_s_per_gpu: float = 22.0  # one 200 Gb/s HDR InfiniBand HCA per GPU = 25 GB/s
    # line rate; ~22 GB/s achieved by NCCL (assumption, ~90% of line rate)

    # --- memory (Megatron-LM distributed-optimizer docs; Korthikanti et al. 2022) ----------------
    bytes_per_param: float = 18.0  # bf16 weights 2 + fp32 grads 4 + fp32 master 4 + Adam m, v 8
    sharded_bytes_per_param: float = 12.0  # the part ZeRO-1 shards over dp (fp32 master + Adam)
    zero1_sharding: bool = False  # the seed's recipe: unsharded
    recompute: str = "selective"  # LLaMA §2.4: saves the expensive activations (outputs of linear
    # layers) and recomputes the rest = Korthikanti's selective recomputation. The seed's recipe
    # uses "full"; see docs/modes.md for why the default differs (calibration stays physical).
    sequence_parallel: bool = True  # LLaMA §2.4 uses model and sequence parallelism (Korthikanti)
    memory_efficient_attention: bool = True  # LLaMA §2.4: xformers causal attention, no s x s scores
    activation_bytes_per_sbh: float = 34.0  # Korthikanti et al. 2022 eq. (1): 34 s b h per layer
    tp_split_activation_bytes_per_sbh: float = 24.0  # of those, split by TP without sequence
    # parallelism (Korthikanti et al. 2022 eq. (2): s b h (10 + 24/t + 5 a s / (h t)))
    attention_score_bytes_per_as2b: float = 5.0  # ... + 5 a s^2 b per layer (softmax, dropout)
    memory_reserved_gib: float = 0.0  # CUDA context / fragmentation reserve (recipe: none)

    # --- throughput (Narayanan et al. 2021; calibrated on the LLaMA paper's 380 tok/s/GPU) --------
    compute_efficiency: float = 0.677  # achieved fraction of peak in compute phases; calibrated
    # by calibrate_compute_efficiency() so that llama-65b at (8, 8, 32) gives 380 tokens/s/GPU
    grad_bytes_per_param: float = 2.0  # gradients all-reduced in bf16
    dp_overlap_fraction: float = 0.5  # share of the DP all-reduce hidden behind the backward pass
    # (LLaMA §2.4 overlaps all_reduce with computation "as much as possible"; assumption)

    # --- power (A100 SXM4 datasheet; host share: the case's rated 0.5 kW/GPU minus the TDP) ------
    gpu_tdp_kw: float = 0.4
    gpu_idle_kw: float = 0.06  # A100 SXM4 idle draw ~50-60 W (nvidia-smi; assumption)
    comm_power_fraction: float = 0.5  # share of (TDP - idle) drawn during exposed communication
    host_power_kw_per_gpu: float = 0.1  # CPUs, DRAM, NICs, NVSwitches, fans per GPU (assumption)

    def __post_init__(self) -> None:
        # Normalise sequences given as lists (e.g. from TOML) into tuples, then validate.
        for name in ("micro_batch_sizes", "tp_degrees"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        self._validate()

    def _validate(self) -> None:
        prefix = "mode_params"

        def pos_int(name: str) -> None:
            value = getattr(self, name)
            require(is_int(value) and value > 0, f"{prefix}.{name}", f"must be a positive integer, got {value!r}")

        def number(name: str, low: float, high: float = math.inf, low_open: bool = False) -> None:
            value = getattr(self, name)
            above = value > low if low_open else value >= low
            ok = is_number(value) and math.isfinite(value) and above and value <= high
            bound = f"{'>' if low_open else '>='} {low}" + ("" if high == math.inf else f" and <= {high}")
            require(ok, f"{prefix}.{name}", f"must be a finite number {bound}, got {value!r}")

        def flag(name: str) -> None:
            value = getattr(self, name)
            require(isinstance(value, bool), f"{prefix}.{name}", f"must be true or false, got {value!r}")

        def int_tuple(name: str) -> None:
            value = getattr(self, name)
            ok = isinstance(value, tuple) and len(value) > 0 and all(is_int(v) and v > 0 for v in value)
            require(ok, f"{prefix}.{name}", f"must be a non-empty list of positive integers, got {value!r}")
            require(len(set(value)) == len(value), f"{prefix}.{name}", "must not repeat values")

        for name in ("seq_len_tokens", "global_batch_seqs", "min_gpus", "gpu_granularity",
                     "min_microbatches_per_stage", "gpus_per_node"):
            pos_int(name)
        int_tuple("micro_batch_sizes")
        int_tuple("tp_degrees")
        require(max(self.tp_degrees) <= self.gpus_per_node, f"{prefix}.tp_degrees",
                f"tensor parallelism must stay inside a node of {self.gpus_per_node} GPUs")
        for name in ("gpu_memory_gib", "peak_tflops_per_gpu", "nvlink_bus_bw_gb_per_s", "internode_bw_gb_per_s_per_gpu",
                     "bytes_per_param", "activation_bytes_per_sbh", "gpu_tdp_kw"):
            number(name, 0.0, low_open=True)
        number("usable_memory_fraction", 0.0, 1.0, low_open=True)
        number("compute_efficiency", 0.0, 1.0, low_open=True)
        number("dp_overlap_fraction", 0.0, 1.0)
        number("comm_power_fraction", 0.0, 1.0)
        for name in ("sharded_bytes_per_param", "attention_score_bytes_per_as2b", "memory_reserved_gib",
                     "grad_bytes_per_param", "gpu_idle_kw", "host_power_kw_per_gpu"):
            number(name, 0.0)
        number("tp_split_activation_bytes_per_sbh", 0.0, self.activation_bytes_per_sbh)
        require(self.sharded_bytes_per_param <= self.bytes_per_param, f"{prefix}.sharded_bytes_per_param",
                "must not exceed bytes_per_param")
        require(self.gpu_idle_kw <= self.gpu_tdp_kw, f"{prefix}.gpu_idle_kw", "must not exceed gpu_tdp_kw")
        require(self.memory_reserved_gib < self.gpu_memory_gib * self.usable_memory_fraction,
                f"{prefix}.memory_reserved_gib", "must leave some usable GPU memory")
        for name in ("zero1_sharding", "sequence_parallel", "memory_efficient_attention"):
            flag(name)
        require(self.recompute in RECOMPUTE_CHOICES, f"{prefix}.recompute",
                f"must be one of {', '.join(RECOMPUTE_CHOICES)}, got {self.recompute!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, field_prefix: str = "mode_params") -> ModeParams:
        """Defaults overridden by ``data`` (e.g. a TOML table). Unknown keys or bad values raise :class:`InputError`
        naming ``<field_prefix>.<key>``."""
        require(isinstance(data, Mapping), field_prefix, f"must be a table, got {type(data).__name__}")
        known = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            require(key in known, f"{field_prefix}.{key}", f"unknown parameter; known: {', '.join(known)}")
            if isinstance(value, list):
                value = tuple(value)
            kwargs[key] = value
        try:
            return cls(**kwargs)
        except InputError as err:
            raise InputError(err.field.replace("mode_params", field_prefix, 1), err.message) from None

    def to_dict(self) -> dict[str, Any]:
        """JSON/TOML-safe dict of every parameter (tuples become lists)."""
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in dataclasses.fields(self)}
