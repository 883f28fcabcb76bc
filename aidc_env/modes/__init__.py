"""3D-parallel execution modes of LLaMA pre-training jobs on A100-80GB nodes.

A *mode* is one (tensor-parallel ``tp``, pipeline-parallel ``pp``, data-parallel ``dp``, ``micro_batch``) layout of a
job. Its GPU count is ``tp*pp*dp``; its throughput (tokens/s of the whole job) and its IT power (kW of its GPUs plus
their host share, PUE excluded) come from the analytic models below (:mod:`~aidc_env.modes.estimate`).
:func:`generate_modes` enumerates the layouts, screens them for memory, divisibility and GPU capacity, and keeps the
Pareto set on (fewer GPUs, more tokens/s, less energy per token).

Models (every constant is a named field of :class:`ModeParams` or :class:`ModelSpec`):

* **Memory** (per GPU, worst pipeline stage): model states = ``bytes/param`` x the stage's share of parameters
  (optionally ZeRO-1 sharding of the fp32 optimizer part over ``dp``); activations after Korthikanti et al. 2022
  ("Reducing Activation Recomputation in Large Transformer Models", Table 2): ``s*b*h*(34 + 5*a*s/h)`` bytes per layer,
  ``/tp`` with sequence parallelism, ``34*s*b*h`` with selective recomputation, ``2*s*b*h`` (the layer input) with full
  recomputation; the first stage of a 1F1B pipeline keeps ``min(pp, m)`` micro-batches in flight.
* **Throughput** (Megatron-LM style, Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM"): per micro-batch and stage, compute at a fraction of the A100 dense BF16 peak, plus the
  tensor-parallel collectives over NVLink inside a node, plus the pipeline point-to-point sends; the 1F1B schedule takes
  ``(m + pp - 1)`` micro-batch slots, i.e. a bubble of ``(pp-1)/m``; then the data-parallel gradient all-reduce
  (hierarchical: NVLink inside a node, InfiniBand between nodes), partly overlapped with the backward pass. The compute
  efficiency is calibrated so that LLaMA-65B at (tp=8, pp=8, dp=32) on 2048 GPUs gives the LLaMA paper's 380
  tokens/s/GPU (:func:`calibration_tokens_per_s_per_gpu`, :func:`calibrate_compute_efficiency`).
* **Power** per GPU: idle power plus ``(TDP - idle)`` times the fraction of the iteration spent computing, plus a weight
  times the fraction spent in exposed communication; bubbles draw idle power. A constant host share per GPU (CPUs,
  memory, NICs, switches, fans) is added. PUE is not applied here (the facility model does it).

The package holds one concept per module: :mod:`~aidc_env.modes.architectures` (the LLaMA models),
:mod:`~aidc_env.modes.params` (every assumption), :mod:`~aidc_env.modes.mode` (a mode and its estimate),
:mod:`~aidc_env.modes.estimate` (memory, throughput, power, calibration), :mod:`~aidc_env.modes.enumeration` (screening
and Pareto pruning), :mod:`~aidc_env.modes.capacity` (the GPU threshold of two jobs) and :mod:`~aidc_env.modes.cli`
(``python -m aidc_env.modes --help``).
"""

from __future__ import annotations

from aidc_env.modes.architectures import LLAMA_MODELS, ModelSpec, get_model
from aidc_env.modes.capacity import best_mode_within, min_hours_two_jobs
from aidc_env.modes.common import HOURS_PER_DAY, SECONDS_PER_HOUR
from aidc_env.modes.enumeration import dominates, generate_modes, pareto_front
from aidc_env.modes.estimate import (CALIBRATION_TOKENS_PER_S_PER_GPU, calibrate_compute_efficiency,
                                     calibration_tokens_per_s_per_gpu, estimate_mode, memory_gib)
from aidc_env.modes.mode import Mode, ModeEstimate, ModeSet
from aidc_env.modes.params import RECOMPUTE_CHOICES, ModeParams

__all__ = ["CALIBRATION_TOKENS_PER_S_PER_GPU", "HOURS_PER_DAY", "LLAMA_MODELS", "RECOMPUTE_CHOICES", "SECONDS_PER_HOUR",
           "Mode", "ModeEstimate", "ModeParams", "ModeSet", "ModelSpec", "best_mode_within",
           "calibrate_compute_efficiency", "calibration_tokens_per_s_per_gpu", "dominates", "estimate_mode",
           "generate_modes", "get_model", "memory_gib", "min_hours_two_jobs", "pareto_front"]
