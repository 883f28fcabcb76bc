"""Enumeration of a job's layouts, their screens, and Pareto pruning into its modes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aidc_env.errors import require
from aidc_env.modes.architectures import ModelSpec, get_model
from aidc_env.modes.common import is_int
from aidc_env.modes.estimate import estimate_mode
from aidc_env.modes.mode import Mode, ModeSet
from aidc_env.modes.params import ModeParams


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _objectives(modes: Sequence[Mode]) -> np.ndarray:
    """(n, 3) array of the minimised objectives: GPUs, -tokens/s, kWh per million tokens."""
    rows = [(md.gpus, -md.tokens_per_s, md.kwh_per_million_tokens) for md in modes]
    return np.array(rows, dtype=float).reshape(-1, 3)


def dominates(a: Mode, b: Mode) -> bool:
    """True if ``a`` is no worse than ``b`` on (fewer GPUs, more tokens/s, less energy per token) and strictly better on
    at least one."""
    oa, ob = _objectives([a])[0], _objectives([b])[0]
    return bool(np.all(oa <= ob) and np.any(oa < ob))


def pareto_front(modes: Sequence[Mode]) -> tuple[Mode, ...]:
    """Non-dominated modes on (fewer GPUs, higher tokens/s, lower kWh per token); of modes equal on all three, the first
    one (in input order) is kept. Sorted by gpus, then tokens_per_s."""
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

    Screens: ``tp`` in ``params.tp_degrees`` dividing the heads (and KV heads); ``pp`` dividing the layers; ``dp *
    micro_batch`` dividing the global batch (so dp is a power of two for the default 2048); ``m >=
    min_microbatches_per_stage * pp``; memory within the usable GPU memory; ``min_gpus <= tp*pp*dp <= max_gpus`` and a
    multiple of ``gpu_granularity``.
    """
    spec = get_model(model)
    require(is_int(max_gpus) and max_gpus > 0, "max_gpus", f"must be a positive integer, got {max_gpus!r}")
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
