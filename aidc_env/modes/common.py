"""Unit conversions, facts of a training step and value checks shared by the mode modules."""

from __future__ import annotations

from typing import Any

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


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
