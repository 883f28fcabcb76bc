"""Memory, throughput and power of one layout (the analytic models of the package docstring), and the calibration of the
compute efficiency on the LLaMA paper's reported throughput."""

from __future__ import annotations

import dataclasses

from aidc_env.errors import require
from aidc_env.modes.architectures import ModelSpec, get_model
from aidc_env.modes.common import (BACKWARD_FLOPS_PER_FORWARD, BYTES_PER_BF16, BYTES_PER_FP32, BYTES_PER_GB,
                                   BYTES_PER_GIB, FLOPS_PER_MAC, FLOPS_PER_TFLOP, PP_TRANSFERS_PER_MICROBATCH,
                                   TP_COLLECTIVES_PER_LAYER_PER_PASS, is_int)
from aidc_env.modes.mode import ModeEstimate
from aidc_env.modes.params import ModeParams

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


def _ring_allreduce_s(n_ranks: int, n_bytes: float, bw_bytes_per_s: float) -> float:
    """Bandwidth term of a ring all-reduce (reduce-scatter + all-gather): 2(n-1)/n x bytes / bw."""
    return 0.0 if n_ranks <= 1 or n_bytes <= 0 else 2.0 * (n_ranks - 1) / n_ranks * n_bytes / bw_bytes_per_s


def memory_gib(spec: ModelSpec, tp: int, pp: int, dp: int, micro_batch: int, params: ModeParams) -> float:
    """Peak memory per GPU (GiB) of the worst pipeline stage.

    Model states: ``bytes_per_param`` per parameter of the stage (ZeRO-1: the sharded part / dp). The first stage holds
    the input embedding, the last the output head (both split over tp). Activations (Korthikanti et al. 2022): stored
    per layer and micro-batch, ``/tp`` under sequence parallelism (otherwise only the parallel part, ``10 + 24/tp``,
    shrinks); the first stage keeps ``min(pp, m)`` micro-batches in flight over its ``L/pp`` layers. Full recomputation
    stores the layer inputs (``2sbh``) and needs one layer's full activations as working memory. The last stage also
    holds the fp32 logits of one micro-batch (vocab-parallel over tp).
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
        require(is_int(value) and value > 0, name, f"must be a positive integer, got {value!r}")
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
        comm_fraction=comm_fraction, tokens_per_s=tokens_per_s, gpu_power_kw=gpu_power_kw, it_power_kw=it_power_kw)


# ===================================================================================== Calibration


def calibration_tokens_per_s_per_gpu(params: ModeParams = ModeParams()) -> float:
    """Tokens/s/GPU of LLaMA-65B at (tp=8, pp=8, dp=32), micro-batch 1, under ``params``. The LLaMA paper reports about
    380 on 2048 A100-80GB."""
    tp, pp, dp = CALIBRATION_LAYOUT
    return estimate_mode(CALIBRATION_MODEL, tp, pp, dp, CALIBRATION_MICRO_BATCH, params).tokens_per_s_per_gpu


def calibrate_compute_efficiency(params: ModeParams = ModeParams(),
                                 target_tokens_per_s_per_gpu: float = CALIBRATION_TOKENS_PER_S_PER_GPU) -> float:
    """The ``compute_efficiency`` for which :func:`calibration_tokens_per_s_per_gpu` hits the target (bisection;
    throughput increases with the efficiency). Raises InputError if out of (0, 1]."""
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
