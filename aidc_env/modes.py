"""3D-parallel execution modes of LLaMA pre-training jobs on A100-80GB nodes.

A *mode* is one (tensor-parallel ``tp``, pipeline-parallel ``pp``, data-parallel ``dp``,
``micro_batch``) layout of a job. Its GPU count is ``tp*pp*dp``; its throughput (tokens/s of the
whole job) and its IT power (kW of its GPUs plus their host share, PUE excluded) come from the
analytic models below. :func:`generate_modes` enumerates the layouts, screens them for memory,
divisibility and GPU capacity, and keeps the Pareto set on (fewer GPUs, more tokens/s, less energy
per token).

Models (every constant is a named field of :class:`ModeParams` or :class:`ModelSpec`):

* **Memory** (per GPU, worst pipeline stage): model states = ``bytes/param`` x the stage's share of
  parameters (optionally ZeRO-1 sharding of the fp32 optimizer part over ``dp``); activations after
  Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
  Table 2): ``s*b*h*(34 + 5*a*s/h)`` bytes per layer, ``/tp`` with sequence parallelism, ``34*s*b*h``
  with selective recomputation, ``2*s*b*h`` (the layer input) with full recomputation; the first
  stage of a 1F1B pipeline keeps ``min(pp, m)`` micro-batches in flight.
* **Throughput** (Megatron-LM style, Narayanan et al. 2021, "Efficient Large-Scale Language Model
  Training on GPU Clusters Using Megatron-LM"): per micro-batch and stage, compute at a fraction of
  the A100 dense BF16 peak, plus the tensor-parallel collectives over NVLink inside a node, plus the
  pipeline point-to-point sends; the 1F1B schedule takes ``(m + pp - 1)`` micro-batch slots, i.e. a
  bubble of ``(pp-1)/m``; then the data-parallel gradient all-reduce (hierarchical: NVLink inside a
  node, InfiniBand between nodes), partly overlapped with the backward pass. The compute efficiency
  is calibrated so that LLaMA-65B at (tp=8, pp=8, dp=32) on 2048 GPUs gives the LLaMA paper's
  380 tokens/s/GPU (:func:`calibration_tokens_per_s_per_gpu`, :func:`calibrate_compute_efficiency`).
* **Power** per GPU: idle power plus ``(TDP - idle)`` times the fraction of the iteration spent
  computing, plus a weight times the fraction spent in exposed communication; bubbles draw idle
  power. A constant host share per GPU (CPUs, memory, NICs, switches, fans) is added. PUE is not
  applied here (the facility model does it).

Run ``python -m aidc_env.modes --help`` for the command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from aidc_env.errors import CliParser, InputError, require, require_number, run_cli
from aidc_env.io import dumps_json
from aidc_env.limits import MAX_GPUS

# --- unit conversions (exact, not assumptions) -------------------------------------------------
BYTES_PER_GIB = 2**30
BYTES_PER_GB = 1e9
FLOPS_PER_TFLOP = 1e12
SECONDS_PER_HOUR = 3600.0
HOURS_PER_DAY = 24.0
TOKENS_PER_MILLION = 1e6
BYTES_PER_BF16 = 2  # bf16 activations / gradients / weights
BYTES_PER_FP32 = 4  # fp32 logits for the cross-entropy
FLOPS_PER_MAC = 2  # one multiply-accumulate = 2 floating-point operations

# --- structure of a training step (facts of the algorithms, not tunable assumptions) -------------
#: Backward pass = 2 x forward FLOPs (input and weight gradients; Narayanan et al. 2021 §5.1).
BACKWARD_FLOPS_PER_FORWARD = 2.0
#: Megatron tensor parallelism: 2 all-reduces (or all-gather + reduce-scatter with sequence
#: parallelism) per transformer layer in each forward pass and 2 in the backward pass
#: (Shoeybi et al. 2019, Fig. 4; Korthikanti et al. 2022 §4.2.2).
TP_COLLECTIVES_PER_LAYER_PER_PASS = 2
#: Pipeline point-to-point transfers per micro-batch and stage: activation forward, gradient back.
PP_TRANSFERS_PER_MICROBATCH = 2

# --- reference points -------------------------------------------------------------------------
#: LLaMA paper (Touvron et al. 2023, §2.4 "Efficient implementation"): "when training a 65B-parameter
#: model, our code processes around 380 tokens/sec/GPU on 2048 A100 GPU with 80GB of RAM".
CALIBRATION_MODEL = "llama-65b"
CALIBRATION_LAYOUT = (8, 8, 32)  # (tp, pp, dp) = 2048 GPUs; the layout is our assumption
CALIBRATION_MICRO_BATCH = 1
CALIBRATION_TOKENS_PER_S_PER_GPU = 380.0

# Bisection bounds of the calibrated compute efficiency (fractions of peak) and its tolerance.
_CALIBRATION_EFFICIENCY_BOUNDS = (1e-3, 1.0)
_CALIBRATION_TOLERANCE = 1e-6


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ================================================================================================
# Models
# ================================================================================================


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of a decoder-only LLaMA model (pre-norm, RMSNorm, SwiGLU, RoPE, untied head).

    ``nominal_params_b`` is the size the paper quotes (billions); :attr:`params` is counted from the
    architecture and agrees with it to within about 1%.
    """

    name: str
    n_layers: int
    hidden_size: int
    n_heads: int
    ffn_hidden_size: int
    vocab_size: int
    nominal_params_b: float
    n_kv_heads: int | None = None  # grouped-query attention (Llama 2 70B); None = n_heads
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("n_layers", "hidden_size", "n_heads", "ffn_hidden_size", "vocab_size"):
            value = getattr(self, name)
            require(_is_int(value) and value > 0, f"model.{name}", f"must be a positive integer, got {value!r}")
        require(self.hidden_size % self.n_heads == 0, "model.n_heads", "must divide hidden_size")
        if self.n_kv_heads is not None:
            require(
                _is_int(self.n_kv_heads) and self.n_kv_heads > 0 and self.n_heads % self.n_kv_heads == 0,
                "model.n_kv_heads",
                "must be a positive divisor of n_heads",
            )

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.n_heads

    @property
    def params_per_layer(self) -> int:
        """Weights of one block: Q, O (h x h), K, V (h x kv_dim), SwiGLU (3 x h x ffn), 2 RMSNorms."""
        h = self.hidden_size
        kv_dim = self.kv_heads * self.head_dim
        attention = 2 * h * h + 2 * h * kv_dim
        mlp = 3 * h * self.ffn_hidden_size
        norms = 2 * h
        return attention + mlp + norms

    @property
    def embedding_params(self) -> int:
        """Input embedding table (the output head has the same size; LLaMA does not tie them)."""
        return self.vocab_size * self.hidden_size

    @property
    def params(self) -> int:
        """All weights: blocks + input embedding + final RMSNorm + output head."""
        return self.n_layers * self.params_per_layer + 2 * self.embedding_params + self.hidden_size

    def forward_flops_per_token(self, seq_len_tokens: int) -> float:
        """Forward FLOPs per token: 2 x matmul weights + attention scores and values (Megatron count,
        full s x s, no causal saving: 2 x 2 x s x h per layer) + the output head."""
        matmul_weights = self.n_layers * (self.params_per_layer - 2 * self.hidden_size)
        attention = self.n_layers * 2 * FLOPS_PER_MAC * seq_len_tokens * self.hidden_size
        head = FLOPS_PER_MAC * self.embedding_params
        return FLOPS_PER_MAC * matmul_weights + attention + head


_LLAMA1 = ("Touvron et al. 2023, LLaMA: Open and Efficient Foundation Language Models, Table 2 "
           "(ffn and vocab from the released configs)")
_LLAMA2 = ("Touvron et al. 2023, Llama 2: Open Foundation and Fine-Tuned Chat Models, Table 1 and §2.2 "
           "(ffn, vocab, KV heads from the released config)")

#: Read-only registry of the models, lowercase keys. LLM-A of the reference case is ``llama-13b``,
#: LLM-B is ``llama-33b``.
LLAMA_MODELS: Mapping[str, ModelSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            ModelSpec("llama-7b", 32, 4096, 32, 11008, 32000, 6.7, source=_LLAMA1),
            ModelSpec("llama-13b", 40, 5120, 40, 13824, 32000, 13.0, source=_LLAMA1),
            ModelSpec("llama-33b", 60, 6656, 52, 17920, 32000, 32.5, source=_LLAMA1),
            ModelSpec("llama-65b", 80, 8192, 64, 22016, 32000, 65.2, source=_LLAMA1),
            ModelSpec("llama2-70b", 80, 8192, 64, 28672, 32000, 70.0, n_kv_heads=8, source=_LLAMA2),
        )
    }
)


def get_model(model: str | ModelSpec) -> ModelSpec:
    """Look a model up by name (case-insensitive) or pass a :class:`ModelSpec` through."""
    if isinstance(model, ModelSpec):
        return model
    require(isinstance(model, str), "model", f"must be a model name, got {model!r}")
    key = model.strip().lower()
    require(key in LLAMA_MODELS, "model", f"unknown model {model!r}; known: {', '.join(LLAMA_MODELS)}")
    return LLAMA_MODELS[key]


# ================================================================================================
# Parameters
# ================================================================================================

RECOMPUTE_CHOICES = ("none", "selective", "full")


@dataclass(frozen=True)
class ModeParams:
    """Every assumption of the mode generator, with its source. Override from a TOML table with
    :meth:`from_dict`. The defaults land within 15% of the seed's mode counts (docs/modes.md)."""

    # --- training job (LLaMA paper §2.3 and Table 2: context 2048, batch 4M tokens) ---------------
    seq_len_tokens: int = 2048
    global_batch_seqs: int = 2048  # 2048 sequences x 2048 tokens = 4M tokens per step
    micro_batch_sizes: tuple[int, ...] = (1,)  # DESIGN §5 recipe: micro-batch 1

    # --- layouts ---------------------------------------------------------------------------------
    tp_degrees: tuple[int, ...] = (1, 2, 4, 8)  # tensor parallelism stays inside an 8-GPU node
    min_gpus: int = 128  # DESIGN §5 recipe: at least 128 GPUs (16 nodes) per mode
    gpu_granularity: int = 8  # whole nodes only (a DGX A100 has 8 GPUs)
    min_microbatches_per_stage: int = 1  # m >= this x pp (1F1B needs m >= pp to fill the pipe)

    # --- hardware: NVIDIA DGX A100 / A100 SXM4 80GB datasheets ------------------------------------
    gpus_per_node: int = 8
    gpu_memory_gib: float = 80.0  # 80 GB HBM2e = 81920 MiB
    usable_memory_fraction: float = 1.0  # DESIGN §5 recipe: the full 80 GB
    peak_tflops_per_gpu: float = 312.0  # dense BF16 tensor-core peak
    nvlink_bus_bw_gb_per_s: float = 230.0  # NCCL all-reduce bus bandwidth inside a DGX A100
    # (NVLink3 600 GB/s bidirectional per GPU; nccl-tests reach ~230 GB/s bus bandwidth)
    internode_bw_gb_per_s_per_gpu: float = 22.0  # one 200 Gb/s HDR InfiniBand HCA per GPU = 25 GB/s
    # line rate; ~22 GB/s achieved by NCCL (assumption, ~90% of line rate)

    # --- memory (Megatron-LM distributed-optimizer docs; Korthikanti et al. 2022) ----------------
    bytes_per_param: float = 18.0  # bf16 weights 2 + fp32 grads 4 + fp32 master 4 + Adam m, v 8
    sharded_bytes_per_param: float = 12.0  # the part ZeRO-1 shards over dp (fp32 master + Adam)
    zero1_sharding: bool = False  # DESIGN §5 recipe: unsharded
    recompute: str = "selective"  # LLaMA §2.4: saves the expensive activations (outputs of linear
    # layers) and recomputes the rest = Korthikanti's selective recomputation. The DESIGN §5 recipe
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
            require(_is_int(value) and value > 0, f"{prefix}.{name}", f"must be a positive integer, got {value!r}")

        def number(name: str, low: float, high: float = math.inf, low_open: bool = False) -> None:
            value = getattr(self, name)
            above = value > low if low_open else value >= low
            ok = _is_number(value) and math.isfinite(value) and above and value <= high
            bound = f"{'>' if low_open else '>='} {low}" + ("" if high == math.inf else f" and <= {high}")
            require(ok, f"{prefix}.{name}", f"must be a finite number {bound}, got {value!r}")

        def flag(name: str) -> None:
            value = getattr(self, name)
            require(isinstance(value, bool), f"{prefix}.{name}", f"must be true or false, got {value!r}")

        def int_tuple(name: str) -> None:
            value = getattr(self, name)
            ok = isinstance(value, tuple) and len(value) > 0 and all(_is_int(v) and v > 0 for v in value)
            require(ok, f"{prefix}.{name}", f"must be a non-empty list of positive integers, got {value!r}")
            require(len(set(value)) == len(value), f"{prefix}.{name}", "must not repeat values")

        for name in ("seq_len_tokens", "global_batch_seqs", "min_gpus", "gpu_granularity",
                     "min_microbatches_per_stage", "gpus_per_node"):
            pos_int(name)
        int_tuple("micro_batch_sizes")
        int_tuple("tp_degrees")
        require(max(self.tp_degrees) <= self.gpus_per_node, f"{prefix}.tp_degrees",
                f"tensor parallelism must stay inside a node of {self.gpus_per_node} GPUs")
        for name in ("gpu_memory_gib", "peak_tflops_per_gpu", "nvlink_bus_bw_gb_per_s",
                     "internode_bw_gb_per_s_per_gpu", "bytes_per_param", "activation_bytes_per_sbh",
                     "gpu_tdp_kw"):
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
        """Defaults overridden by ``data`` (e.g. a TOML table). Unknown keys or bad values raise
        :class:`InputError` naming ``<field_prefix>.<key>``."""
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


# ================================================================================================
# Modes
# ================================================================================================

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
            require(_is_int(value) and value > 0, f"mode.{name}", f"must be a positive integer, got {value!r}")
        require(self.gpus == self.tp * self.pp * self.dp, "mode.gpus",
                f"must equal tp*pp*dp = {self.tp * self.pp * self.dp}, got {self.gpus}")
        for name in _MODE_FLOAT_FIELDS:
            value = getattr(self, name)
            require(_is_number(value) and math.isfinite(value) and value > 0, f"mode.{name}",
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
        """Build a mode from :meth:`to_dict` output (derived keys are ignored). Missing, unknown or
        bad fields raise :class:`InputError` naming ``<field_prefix>.<key>``."""
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
        return {
            "name": self.model if name is None else name,
            "model": self.model,
            "feasible_count": len(self.feasible),
            "pareto_count": len(self.pareto),
            "pareto": [mode.to_dict() for mode in self.pareto],
        }


# ================================================================================================
# The models
# ================================================================================================


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _ring_allreduce_s(n_ranks: int, n_bytes: float, bw_bytes_per_s: float) -> float:
    """Bandwidth term of a ring all-reduce (reduce-scatter + all-gather): 2(n-1)/n x bytes / bw."""
    if n_ranks <= 1 or n_bytes <= 0:
        return 0.0
    return 2.0 * (n_ranks - 1) / n_ranks * n_bytes / bw_bytes_per_s


def memory_gib(spec: ModelSpec, tp: int, pp: int, dp: int, micro_batch: int, params: ModeParams) -> float:
    """Peak memory per GPU (GiB) of the worst pipeline stage.

    Model states: ``bytes_per_param`` per parameter of the stage (ZeRO-1: the sharded part / dp).
    The first stage holds the input embedding, the last the output head (both split over tp).
    Activations (Korthikanti et al. 2022): stored per layer and micro-batch, ``/tp`` under
    sequence parallelism (otherwise only the parallel part, ``10 + 24/tp``, shrinks); the first
    stage keeps ``min(pp, m)`` micro-batches in flight over its ``L/pp`` layers. Full recomputation
    stores the layer inputs (``2sbh``) and needs one layer's full activations as working memory.
    The last stage also holds the fp32 logits of one micro-batch (vocab-parallel over tp).
    """
    s, b, h = params.seq_len_tokens, micro_batch, spec.hidden_size
    layers_per_stage = spec.n_layers // pp
    m = params.global_batch_seqs // (dp * micro_batch)

    per_param = params.bytes_per_param
    if params.zero1_sharding:
        per_param = params.bytes_per_param - params.sharded_bytes_per_param + params.sharded_bytes_per_param / dp
    block_params = layers_per_stage * spec.params_per_layer / tp
    embed_params = spec.embedding_params / tp

    sbh = s * b * h
    score_bytes = 0.0
    if not params.memory_efficient_attention:
        score_bytes = params.attention_score_bytes_per_as2b * spec.n_heads * s * s * b
    coeff = params.activation_bytes_per_sbh
    if params.sequence_parallel:
        full_layer = (coeff * sbh + score_bytes) / tp
    else:
        # Korthikanti eq. (2): sbh (10 + 24/t + 5as/(ht)): only the TP-parallel regions shrink.
        split = params.tp_split_activation_bytes_per_sbh
        full_layer = (coeff - split) * sbh + (split * sbh + score_bytes) / tp
    if params.recompute == "full":
        stored_layer = BYTES_PER_BF16 * sbh / (tp if params.sequence_parallel else 1)
        working = full_layer
    elif params.recompute == "selective":
        stored_layer = full_layer - score_bytes / tp
        working = score_bytes / tp
    else:
        stored_layer = full_layer
        working = 0.0
    in_flight_first = min(pp, m)
    logits = BYTES_PER_FP32 * s * b * spec.vocab_size / tp

    first = per_param * (block_params + embed_params) + in_flight_first * layers_per_stage * stored_layer + working
    last = (per_param * (block_params + embed_params + spec.hidden_size / tp)
            + layers_per_stage * stored_layer + working + logits)
    if pp == 1:
        single = per_param * (block_params + 2 * embed_params + spec.hidden_size / tp)
        worst = single + min(1, m) * layers_per_stage * stored_layer + working + logits
    else:
        worst = max(first, last)
    return worst / BYTES_PER_GIB


def estimate_mode(model: str | ModelSpec, tp: int, pp: int, dp: int, micro_batch: int = 1,
                  params: ModeParams = ModeParams()) -> ModeEstimate:
    """Memory, throughput and power of one layout (no screening; see :func:`generate_modes`)."""
    spec = get_model(model)
    for name, value in (("tp", tp), ("pp", pp), ("dp", dp), ("micro_batch", micro_batch)):
        require(_is_int(value) and value > 0, name, f"must be a positive integer, got {value!r}")
    require(spec.n_heads % tp == 0 and spec.kv_heads % tp == 0, "tp",
            f"must divide the {spec.n_heads} heads ({spec.kv_heads} KV heads) of {spec.name}")
    require(tp <= params.gpus_per_node, "tp", f"must stay inside a node of {params.gpus_per_node} GPUs")
    require(spec.n_layers % pp == 0, "pp", f"must divide the {spec.n_layers} layers of {spec.name}")
    require(params.global_batch_seqs % (dp * micro_batch) == 0, "dp",
            f"dp x micro_batch must divide the global batch of {params.global_batch_seqs} sequences")

    s, b, h = params.seq_len_tokens, micro_batch, spec.hidden_size
    gpus = tp * pp * dp
    m = params.global_batch_seqs // (dp * micro_batch)
    layers_per_stage = spec.n_layers // pp

    # Compute of one micro-batch on the slowest stage (the last one also runs the output head).
    # Forward + backward, plus a second forward of each layer under full recomputation, or of the
    # attention core (QK^T, softmax, AV) under selective recomputation (Korthikanti et al. 2022 §5).
    train_passes = 1.0 + BACKWARD_FLOPS_PER_FORWARD
    layer_fwd_flops = (spec.forward_flops_per_token(s) - FLOPS_PER_MAC * spec.embedding_params) / spec.n_layers
    attention_fwd_flops = 2 * FLOPS_PER_MAC * s * h
    recompute_flops = {"none": 0.0, "selective": attention_fwd_flops, "full": layer_fwd_flops}[params.recompute]
    layer_flops = train_passes * layer_fwd_flops + recompute_flops
    head_flops = train_passes * FLOPS_PER_MAC * spec.embedding_params
    stage_flops = s * b * (layers_per_stage * layer_flops + head_flops) / tp
    rate = params.peak_tflops_per_gpu * FLOPS_PER_TFLOP * params.compute_efficiency
    t_compute = stage_flops / rate

    # Tensor-parallel collectives (Megatron: 2 in forward, 2 in backward per layer, +2 when the
    # forward is recomputed); with sequence parallelism all-gather + reduce-scatter move the same bytes.
    nvlink = params.nvlink_bus_bw_gb_per_s * BYTES_PER_GB
    infiniband = params.internode_bw_gb_per_s_per_gpu * BYTES_PER_GB
    forward_passes = 2 if params.recompute == "full" else 1
    collectives_per_layer = TP_COLLECTIVES_PER_LAYER_PER_PASS * (forward_passes + 1)
    activation_msg = BYTES_PER_BF16 * s * b * h
    t_tp = layers_per_stage * collectives_per_layer * _ring_allreduce_s(tp, activation_msg, nvlink)

    # Pipeline sends (forward activation + backward gradient); between nodes once tp*dp fills a node
    # (Megatron rank order: tp fastest, then dp, then pp). Scatter-gather shrinks them by tp.
    if pp > 1:
        link = infiniband if tp * dp >= params.gpus_per_node else nvlink
        p2p_msg = activation_msg / (tp if params.sequence_parallel else 1)
        t_pp = PP_TRANSFERS_PER_MICROBATCH * p2p_msg / link
    else:
        t_pp = 0.0

    t_slot = t_compute + t_tp + t_pp
    t_pipeline = (m + pp - 1) * t_slot

    # Data-parallel gradient all-reduce, hierarchical: k ranks of a dp group share a node.
    stage_params = (layers_per_stage * spec.params_per_layer + spec.embedding_params) / tp
    grad_bytes = params.grad_bytes_per_param * stage_params
    ranks_per_node = max(1, min(dp, params.gpus_per_node // tp))
    t_dp = _ring_allreduce_s(ranks_per_node, grad_bytes, nvlink)
    t_dp += _ring_allreduce_s(dp // ranks_per_node, grad_bytes / ranks_per_node, infiniband)
    t_dp_exposed = (1.0 - params.dp_overlap_fraction) * t_dp

    iteration_s = t_pipeline + t_dp_exposed
    tokens_per_s = params.global_batch_seqs * s / iteration_s

    compute_fraction = m * t_compute / iteration_s
    comm_fraction = (m * (t_tp + t_pp) + t_dp_exposed) / iteration_s
    busy = compute_fraction + params.comm_power_fraction * comm_fraction
    gpu_power_kw = params.gpu_idle_kw + (params.gpu_tdp_kw - params.gpu_idle_kw) * busy
    it_power_kw = gpus * (gpu_power_kw + params.host_power_kw_per_gpu)

    return ModeEstimate(
        model=spec.name, tp=tp, pp=pp, dp=dp, micro_batch=micro_batch, gpus=gpus, n_microbatches=m,
        memory_gib=memory_gib(spec, tp, pp, dp, micro_batch, params),
        memory_limit_gib=params.gpu_memory_gib * params.usable_memory_fraction - params.memory_reserved_gib,
        iteration_s=iteration_s, bubble_fraction=(pp - 1) / m, compute_fraction=compute_fraction,
        comm_fraction=comm_fraction, tokens_per_s=tokens_per_s, gpu_power_kw=gpu_power_kw,
        it_power_kw=it_power_kw,
    )


# ================================================================================================
# Calibration
# ================================================================================================


def calibration_tokens_per_s_per_gpu(params: ModeParams = ModeParams()) -> float:
    """Tokens/s/GPU of LLaMA-65B at (tp=8, pp=8, dp=32), micro-batch 1, under ``params``.
    The LLaMA paper reports about 380 on 2048 A100-80GB."""
    tp, pp, dp = CALIBRATION_LAYOUT
    return estimate_mode(CALIBRATION_MODEL, tp, pp, dp, CALIBRATION_MICRO_BATCH, params).tokens_per_s_per_gpu


def calibrate_compute_efficiency(params: ModeParams = ModeParams(),
                                 target_tokens_per_s_per_gpu: float = CALIBRATION_TOKENS_PER_S_PER_GPU) -> float:
    """The ``compute_efficiency`` for which :func:`calibration_tokens_per_s_per_gpu` hits the target
    (bisection; throughput increases with the efficiency). Raises InputError if out of (0, 1]."""
    low, high = _CALIBRATION_EFFICIENCY_BOUNDS

    def rate(eff: float) -> float:
        return calibration_tokens_per_s_per_gpu(dataclasses.replace(params, compute_efficiency=eff))

    require(rate(high) >= target_tokens_per_s_per_gpu, "compute_efficiency",
            f"{target_tokens_per_s_per_gpu} tokens/s/GPU is out of reach even at peak")
    while high - low > _CALIBRATION_TOLERANCE:
        mid = 0.5 * (low + high)
        if rate(mid) < target_tokens_per_s_per_gpu:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


# ================================================================================================
# Generation and Pareto pruning
# ================================================================================================


def _objectives(modes: Sequence[Mode]) -> np.ndarray:
    """(n, 3) array of the minimised objectives: GPUs, -tokens/s, kWh per million tokens."""
    rows = [(md.gpus, -md.tokens_per_s, md.kwh_per_million_tokens) for md in modes]
    return np.array(rows, dtype=float).reshape(-1, 3)


def dominates(a: Mode, b: Mode) -> bool:
    """True if ``a`` is no worse than ``b`` on (fewer GPUs, more tokens/s, less energy per token)
    and strictly better on at least one."""
    oa, ob = _objectives([a])[0], _objectives([b])[0]
    return bool(np.all(oa <= ob) and np.any(oa < ob))


def pareto_front(modes: Sequence[Mode]) -> tuple[Mode, ...]:
    """Non-dominated modes on (fewer GPUs, higher tokens/s, lower kWh per token); of modes equal on
    all three, the first one (in input order) is kept. Sorted by gpus, then tokens_per_s."""
    if not modes:
        return ()
    obj = _objectives(modes)
    no_worse = np.all(obj[:, None, :] <= obj[None, :, :], axis=2)  # [j, i]: j no worse than i
    better = np.any(obj[:, None, :] < obj[None, :, :], axis=2)
    dominated = np.any(no_worse & better, axis=0)
    equal = no_worse & no_worse.T
    earlier_equal = np.any(np.tril(equal, k=-1), axis=1)  # an equal mode comes earlier in the input
    kept = [md for md, drop, dup in zip(modes, dominated, earlier_equal, strict=True) if not (drop or dup)]
    return tuple(sorted(kept, key=lambda md: (md.gpus, md.tokens_per_s)))


def generate_modes(model: str | ModelSpec, max_gpus: int, params: ModeParams = ModeParams()) -> ModeSet:
    """Enumerate, screen and Pareto-prune the modes of one job on a pool of ``max_gpus`` GPUs.

    Screens: ``tp`` in ``params.tp_degrees`` dividing the heads (and KV heads); ``pp`` dividing the
    layers; ``dp * micro_batch`` dividing the global batch (so dp is a power of two for the
    default 2048); ``m >= min_microbatches_per_stage * pp``; memory within the usable GPU memory;
    ``min_gpus <= tp*pp*dp <= max_gpus`` and a multiple of ``gpu_granularity``.
    """
    spec = get_model(model)
    require(_is_int(max_gpus) and max_gpus > 0, "max_gpus", f"must be a positive integer, got {max_gpus!r}")
    require(isinstance(params, ModeParams), "params", "must be a ModeParams")

    feasible: list[Mode] = []
    tps = [t for t in sorted(params.tp_degrees) if spec.n_heads % t == 0 and spec.kv_heads % t == 0]
    for tp in tps:
        for pp in _divisors(spec.n_layers):
            for mb in sorted(params.micro_batch_sizes):
                if params.global_batch_seqs % mb:
                    continue
                for dp in _divisors(params.global_batch_seqs // mb):
                    gpus = tp * pp * dp
                    if gpus > max_gpus or gpus < params.min_gpus or gpus % params.gpu_granularity:
                        continue
                    m = params.global_batch_seqs // (dp * mb)
                    if m < params.min_microbatches_per_stage * pp:
                        continue
                    estimate = estimate_mode(spec, tp, pp, dp, mb, params)
                    if estimate.fits_memory:
                        feasible.append(estimate.to_mode())
    feasible.sort(key=lambda md: (md.gpus, md.tp, md.pp, md.dp, md.micro_batch))
    return ModeSet(model=spec.name, feasible=tuple(feasible), pareto=pareto_front(feasible))


# ================================================================================================
# Capacity checks (the reference case's GPU threshold)
# ================================================================================================


def best_mode_within(modes: Sequence[Mode], gpus: int) -> Mode | None:
    """The highest-throughput mode using at most ``gpus`` GPUs (None if none fits)."""
    fitting = [md for md in modes if md.gpus <= gpus]
    return max(fitting, key=lambda md: (md.tokens_per_s, -md.gpus), default=None)


def min_hours_two_jobs(modes_a: Sequence[Mode], modes_b: Sequence[Mode], tokens_a: float, tokens_b: float,
                       n_gpus: int) -> float:
    """Least wall-clock hours in which two jobs finish ``tokens_a`` and ``tokens_b`` on ``n_gpus``.

    Time-sharing relaxation: the day may be cut into any durations of joint states (a mode or a
    pause per job, GPUs summing to at most ``n_gpus``), ignoring checkpoint boundaries and restart
    losses, so this is a lower bound on the makespan of any real schedule. It is the linear program
    min sum(theta) s.t. sum_s theta_s r_s >= (tokens_a, tokens_b), theta >= 0, whose basic optimum
    uses one joint state or two with both tranches met exactly; all of them are tried.
    Returns ``math.inf`` when no capacity-feasible state makes progress on a needed job.
    """
    require(_is_int(n_gpus) and n_gpus > 0, "n_gpus", f"must be a positive integer, got {n_gpus!r}")
    for name, tokens in (("tokens_a", tokens_a), ("tokens_b", tokens_b)):
        require(_is_number(tokens) and math.isfinite(tokens) and tokens >= 0, name,
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


# ================================================================================================
# Command line
# ================================================================================================


def _format_table(title: str, mode_set: ModeSet) -> str:
    header = (f"{'label':<20}{'tp':>4}{'pp':>4}{'dp':>6}{'mb':>4}{'GPUs':>7}{'tokens/s':>12}"
              f"{'tok/s/GPU':>11}{'IT kW':>9}{'kWh/Mtok':>10}")
    lines = [f"{title}: {len(mode_set.feasible)} feasible, {len(mode_set.pareto)} Pareto", header]
    for md in mode_set.pareto:
        lines.append(f"{md.label:<20}{md.tp:>4}{md.pp:>4}{md.dp:>6}{md.micro_batch:>4}{md.gpus:>7}"
                     f"{md.tokens_per_s:>12.0f}{md.tokens_per_s_per_gpu:>11.1f}{md.it_power_kw:>9.1f}"
                     f"{md.kwh_per_million_tokens:>10.3f}")
    return "\n".join(lines)


DEFAULT_CLI_GPUS = 2048  # pool of --model runs: the reference case's 2048 GPUs


def _build_parser() -> CliParser:
    parser = CliParser(
        prog="python -m aidc_env.modes",
        description="Generate the screened and Pareto-pruned 3D-parallel (tp, pp, dp, micro-batch) modes "
                    "of LLaMA pre-training jobs on A100-80GB nodes: GPUs, tokens/s and IT power (kW, no PUE).",
        epilog="Examples:\n  python -m aidc_env.modes --model llama-13b --gpus 2048\n"
               "  python -m aidc_env.modes --case 2048 --json\n"
               f"Models: {', '.join(LLAMA_MODELS)}.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="one model by name (e.g. llama-13b); default pool 2048 GPUs")
    source.add_argument("--case", help="a bundled case name or a case TOML path: every job of the case, "
                                       "with the case's mode parameters and GPU pool")
    parser.add_argument("--gpus", type=int, default=None,
                        help="GPU pool size (default: 2048 with --model, the case's n_gpus with --case)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    if args.gpus is not None:
        require_number(args.gpus, "gpus", 1, MAX_GPUS, integer=True)

    jobs: list[tuple[str, ModeSet]] = []
    if args.model is not None:
        n_gpus = DEFAULT_CLI_GPUS if args.gpus is None else args.gpus
        mode_set = generate_modes(args.model, n_gpus)
        jobs.append((mode_set.model, mode_set))
    else:
        from aidc_env.case import load_case  # lazy: case.py imports this module

        case = load_case(args.case)
        n_gpus = case.n_gpus if args.gpus is None else args.gpus
        for job in case.jobs:
            jobs.append((job.name, generate_modes(job.model, n_gpus, case.mode_params)))

    if args.json:
        print(dumps_json({"gpus": n_gpus, "jobs": [ms.to_dict(name) for name, ms in jobs]}, indent=2))
    else:
        print(f"GPU pool: {n_gpus}")
        for name, ms in jobs:
            title = name if name == ms.model else f"{name} ({ms.model})"
            print(_format_table(title, ms))
            print()
    return 0


if __name__ == "__main__":
    # Run the canonical module's main: under ``python -m`` this file is also imported as
    # aidc_env.modes (by the package), and the case's ModeParams are instances of that copy.
    from aidc_env.modes import main as _canonical_main

    raise SystemExit(run_cli(_canonical_main))
