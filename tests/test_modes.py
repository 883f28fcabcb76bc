"""Tests of the 3D-parallel mode generator (aidc_env/modes/): numbers, screens, Pareto, CLI."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aidc_env.errors import InputError, run_cli
from aidc_env.modes import (CALIBRATION_TOKENS_PER_S_PER_GPU, HOURS_PER_DAY, LLAMA_MODELS, SECONDS_PER_HOUR, Mode,
                            ModelSpec, ModeParams, ModeSet, best_mode_within, calibrate_compute_efficiency,
                            calibration_tokens_per_s_per_gpu, dominates, estimate_mode, generate_modes,
                            min_hours_two_jobs)
from aidc_env.modes.cli import main

REPO = Path(__file__).resolve().parents[1]
POOL_GPUS = 2048
SEED_COUNTS = {"llama-13b": (135, 12), "llama-33b": (111, 21)}  # the research's: feasible -> Pareto
COUNT_TOLERANCE = 0.15
CALIBRATION_TOLERANCE = 0.05
BASELINE_GPUS = {"llama-13b": 512, "llama-33b": 768}  # reference case: 512 + 768 = 1280 GPUs
RATED_KW_PER_GPU = 0.5  # the reference case's rated power per GPU (before PUE)
SECONDS_PER_DAY = HOURS_PER_DAY * SECONDS_PER_HOUR


@pytest.fixture(scope="module")
def reference_sets() -> dict[str, ModeSet]:
    return {model: generate_modes(model, POOL_GPUS) for model in SEED_COUNTS}


def baseline_mode(mode_set: ModeSet, gpus: int) -> Mode:
    candidates = [md for md in mode_set.pareto if md.gpus == gpus]
    assert candidates, f"{mode_set.model} has no Pareto mode with {gpus} GPUs"
    return max(candidates, key=lambda md: md.tokens_per_s)


# ------------------------------------------------------------------------------------------------
# Models and calibration
# ------------------------------------------------------------------------------------------------


def test_model_registry_matches_papers():
    expected = {  # layers, hidden, heads (LLaMA Table 2; Llama 2 70B config)
        "llama-7b": (32, 4096, 32),
        "llama-13b": (40, 5120, 40),
        "llama-33b": (60, 6656, 52),
        "llama-65b": (80, 8192, 64),
        "llama2-70b": (80, 8192, 64),
    }
    for name, (layers, hidden, heads) in expected.items():
        spec = LLAMA_MODELS[name]
        assert (spec.n_layers, spec.hidden_size, spec.n_heads) == (layers, hidden, heads)
        # The parameter count from the architecture agrees with the paper's nominal size.
        assert spec.params / 1e9 == pytest.approx(spec.nominal_params_b, rel=0.02)
    with pytest.raises(TypeError):
        LLAMA_MODELS["x"] = LLAMA_MODELS["llama-7b"]  # type: ignore[index]


def test_calibration_llama65b_380_tokens_per_s_per_gpu():
    rate = calibration_tokens_per_s_per_gpu()
    assert rate == pytest.approx(CALIBRATION_TOKENS_PER_S_PER_GPU, rel=CALIBRATION_TOLERANCE)
    # The same number through the public path: the (8, 8, 32) mode of LLaMA-65B on 2048 GPUs.
    modes = generate_modes("llama-65b", POOL_GPUS).feasible
    anchor = next(md for md in modes if (md.tp, md.pp, md.dp) == (8, 8, 32))
    assert anchor.gpus == POOL_GPUS
    assert anchor.tokens_per_s_per_gpu == pytest.approx(rate)
    # The default efficiency is the calibrated one (not a free knob), and it is physical (< peak).
    eff = calibrate_compute_efficiency()
    assert ModeParams().compute_efficiency == pytest.approx(eff, abs=5e-3)
    assert 0.4 < eff < 0.85


def test_calibration_follows_other_assumptions():
    slower_network = ModeParams(internode_bw_gb_per_s_per_gpu=11.0)
    eff = calibrate_compute_efficiency(slower_network)
    assert eff > ModeParams().compute_efficiency
    recalibrated = dataclasses.replace(slower_network, compute_efficiency=eff)
    assert calibration_tokens_per_s_per_gpu(recalibrated) == pytest.approx(CALIBRATION_TOKENS_PER_S_PER_GPU, rel=1e-4)


# ------------------------------------------------------------------------------------------------
# Counts and the reference case's modes
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(SEED_COUNTS))
def test_counts_within_15_percent_of_seed(reference_sets, model):
    feasible_target, pareto_target = SEED_COUNTS[model]
    mode_set = reference_sets[model]
    assert abs(len(mode_set.feasible) - feasible_target) <= COUNT_TOLERANCE * feasible_target
    assert abs(len(mode_set.pareto) - pareto_target) <= COUNT_TOLERANCE * pareto_target


def test_exact_counts_are_stable(reference_sets):
    """Regression guard: the documented counts (docs/modes.md)."""
    assert [(len(reference_sets[m].feasible), len(reference_sets[m].pareto)) for m in ("llama-13b", "llama-33b")] == [
        (128, 13),
        (98, 20),
    ]


def test_pareto_contains_baselines_and_spread(reference_sets):
    for model, gpus in BASELINE_GPUS.items():
        baseline_mode(reference_sets[model], gpus)
        counts = sorted({md.gpus for md in reference_sets[model].pareto})
        assert counts[0] <= 160 and counts[-1] == POOL_GPUS
        assert len(counts) >= 9  # a ladder a scheduler can ramp along


def test_mode_power_within_rated_power_per_gpu(reference_sets):
    for mode_set in reference_sets.values():
        for md in mode_set.feasible:
            assert md.it_power_kw / md.gpus <= RATED_KW_PER_GPU + 1e-12
            assert md.it_power_kw / md.gpus > ModeParams().gpu_idle_kw + ModeParams().host_power_kw_per_gpu


def test_throughput_per_gpu_does_not_rise_much_at_smaller_counts(reference_sets):
    """Strong scaling: fewer GPUs may run a little more efficiently, but by far less than the
    1280/1152 ratio that would let 1152 GPUs do what the 1280-GPU baseline does."""
    for model, gpus in BASELINE_GPUS.items():
        base = baseline_mode(reference_sets[model], gpus)
        best = max(md.tokens_per_s_per_gpu for md in reference_sets[model].pareto)
        assert best / base.tokens_per_s_per_gpu < 1280 / 1152


def test_gpu_threshold_1152_infeasible_1280_feasible(reference_sets):
    a, b = reference_sets["llama-13b"], reference_sets["llama-33b"]
    base_a, base_b = baseline_mode(a, 512), baseline_mode(b, 768)
    tranche_a, tranche_b = base_a.tokens_per_s * SECONDS_PER_DAY, base_b.tokens_per_s * SECONDS_PER_DAY

    # Concurrent pairs: no pair of modes with <= 1152 GPUs runs both tranches within the day.
    for md_a in a.pareto:
        for md_b in b.pareto:
            if md_a.gpus + md_b.gpus <= 1152:
                assert md_a.tokens_per_s < base_a.tokens_per_s or md_b.tokens_per_s < base_b.tokens_per_s
    # Tokens per day of the best mode within k GPUs never exceeds the tranche below the baseline size.
    for mode_set, base, tranche in ((a, base_a, tranche_a), (b, base_b, tranche_b)):
        best_below = best_mode_within(mode_set.pareto, base.gpus - 1)
        assert best_below is not None and best_below.tokens_per_s * SECONDS_PER_DAY < tranche

    # Time-sharing of any joint states (a lower bound on any schedule's makespan).
    for n_gpus in range(768, 1280, 8):
        assert min_hours_two_jobs(a.pareto, b.pareto, tranche_a, tranche_b, n_gpus) > HOURS_PER_DAY, n_gpus
    assert min_hours_two_jobs(a.pareto, b.pareto, tranche_a, tranche_b, 1280) == pytest.approx(HOURS_PER_DAY)
    # The Pareto pruning loses nothing: the feasible sets give the same bound at 1152.
    full = min_hours_two_jobs(a.feasible, b.feasible, tranche_a, tranche_b, 1152)
    assert full == pytest.approx(min_hours_two_jobs(a.pareto, b.pareto, tranche_a, tranche_b, 1152))


def test_min_hours_two_jobs_small_cases():
    one = Mode(1, 1, 8, 1, 8, 10.0, 1.0)
    two = Mode(1, 1, 16, 1, 16, 16.0, 2.0)
    # 16 GPUs: both at 8 GPUs concurrently (10, 10 tokens/s) for 100 tokens each = 10 s.
    assert min_hours_two_jobs([one, two], [one, two], 100.0, 100.0, 16) * SECONDS_PER_HOUR == pytest.approx(10.0)
    # 8 GPUs: one job at a time, 10 s each.
    assert min_hours_two_jobs([one, two], [one, two], 100.0, 100.0, 8) * SECONDS_PER_HOUR == pytest.approx(20.0)
    assert min_hours_two_jobs([two], [two], 100.0, 0.0, 8) == math.inf
    assert min_hours_two_jobs([one], [one], 0.0, 0.0, 8) == 0.0


# ------------------------------------------------------------------------------------------------
# Screens and Pareto properties
# ------------------------------------------------------------------------------------------------


def check_mode_set(mode_set: ModeSet, max_gpus: int, params: ModeParams) -> None:
    spec = LLAMA_MODELS[mode_set.model]
    limit_gib = params.gpu_memory_gib * params.usable_memory_fraction - params.memory_reserved_gib
    for md in mode_set.feasible:
        assert md.gpus == md.tp * md.pp * md.dp <= max_gpus
        assert md.gpus >= params.min_gpus and md.gpus % params.gpu_granularity == 0
        assert spec.n_heads % md.tp == 0 and spec.n_layers % md.pp == 0 and md.tp in params.tp_degrees
        assert params.global_batch_seqs % (md.dp * md.micro_batch) == 0
        assert params.global_batch_seqs // (md.dp * md.micro_batch) >= md.pp * params.min_microbatches_per_stage
        assert estimate_mode(spec, md.tp, md.pp, md.dp, md.micro_batch, params).memory_gib <= limit_gib
        # Independent lower bound: the average stage's (unsharded part of the) model states fit.
        unsharded = params.bytes_per_param - (params.sharded_bytes_per_param if params.zero1_sharding else 0.0)
        assert unsharded * spec.params / (md.tp * md.pp) / 2**30 <= limit_gib
    pareto = mode_set.pareto
    assert set(pareto) <= set(mode_set.feasible)
    assert list(pareto) == sorted(pareto, key=lambda md: (md.gpus, md.tokens_per_s))
    for i, p in enumerate(pareto):
        for j, q in enumerate(pareto):
            assert not dominates(q, p)
            if i != j:
                assert (q.gpus, q.tokens_per_s, q.kwh_per_million_tokens) != (p.gpus, p.tokens_per_s, p.kwh_per_million_tokens)
    for md in mode_set.feasible:
        assert any(
            p == md or dominates(p, md)
            or (p.gpus, p.tokens_per_s, p.kwh_per_million_tokens) == (md.gpus, md.tokens_per_s, md.kwh_per_million_tokens)
            for p in pareto
        )
    assert bool(pareto) == bool(mode_set.feasible)


def test_reference_sets_pass_all_screens(reference_sets):
    for mode_set in reference_sets.values():
        check_mode_set(mode_set, POOL_GPUS, ModeParams())


param_overrides = st.fixed_dictionaries(
    {},
    optional={
        "compute_efficiency": st.floats(0.2, 0.95),
        "dp_overlap_fraction": st.floats(0.0, 1.0),
        "comm_power_fraction": st.floats(0.0, 1.0),
        "gpu_idle_kw": st.floats(0.0, 0.2),
        "internode_bw_gb_per_s_per_gpu": st.floats(5.0, 50.0),
        "nvlink_bus_bw_gb_per_s": st.floats(50.0, 300.0),
        "usable_memory_fraction": st.floats(0.5, 1.0),
        "bytes_per_param": st.sampled_from([16.0, 18.0, 20.0]),
        "recompute": st.sampled_from(["none", "selective", "full"]),
        "zero1_sharding": st.booleans(),
        "sequence_parallel": st.booleans(),
        "memory_efficient_attention": st.booleans(),
        "micro_batch_sizes": st.sampled_from([(1,), (1, 2), (1, 2, 4), (2,)]),
        "min_gpus": st.sampled_from([8, 64, 128, 256]),
    },
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(sorted(LLAMA_MODELS)), overrides=param_overrides, max_gpus=st.integers(1, 4096))
def test_property_screens_and_pareto(model, overrides, max_gpus):
    params = ModeParams.from_dict(overrides)
    mode_set = generate_modes(model, max_gpus, params)
    check_mode_set(mode_set, max_gpus, params)
    # Monotonicity: a bigger pool never loses a feasible mode.
    bigger = generate_modes(model, max_gpus + params.gpu_granularity * 16, params)
    assert set(mode_set.feasible) <= set(bigger.feasible)
    # Pruning commutes with shrinking the pool (a dominating mode never has more GPUs).
    assert mode_set.pareto == tuple(md for md in bigger.pareto if md.gpus <= max_gpus)


def test_feasible_count_monotone_in_pool(reference_sets):
    for model in SEED_COUNTS:
        counts = [len(generate_modes(model, n).feasible) for n in range(64, POOL_GPUS + 1, 64)]
        assert counts == sorted(counts)
        assert counts[-1] == len(reference_sets[model].feasible)
    assert generate_modes("llama-13b", 64).feasible == ()


def test_memory_screen_rejects_what_cannot_fit():
    spec = LLAMA_MODELS["llama-33b"]
    # 18 bytes x 32.5e9 parameters = 545 GiB of model states: tp*pp must be at least 8.
    for md in generate_modes(spec, POOL_GPUS).feasible:
        assert md.tp * md.pp >= 8
    assert estimate_mode(spec, 1, 1, 128).memory_gib > 500
    assert not estimate_mode(spec, 1, 1, 128).fits_memory
    # More usable memory never removes a mode; ZeRO-1 sharding only adds modes.
    small = generate_modes(spec, POOL_GPUS, ModeParams(usable_memory_fraction=0.8)).feasible
    assert set(small) <= set(generate_modes(spec, POOL_GPUS).feasible)
    sharded = generate_modes(spec, POOL_GPUS, ModeParams(zero1_sharding=True)).feasible
    assert {(m.tp, m.pp, m.dp) for m in generate_modes(spec, POOL_GPUS).feasible} <= {(m.tp, m.pp, m.dp) for m in sharded}


def test_deterministic_and_fast():
    import time

    start = time.perf_counter()
    first = generate_modes("llama-33b", POOL_GPUS)
    elapsed = time.perf_counter() - start
    assert first == generate_modes("llama-33b", POOL_GPUS)
    assert elapsed < 0.2


def test_bubble_and_power_behave():
    # More micro-batches in flight (smaller dp) shrink the pipeline bubble (pp-1)/m.
    wide = estimate_mode("llama-13b", 2, 4, 64)
    narrow = estimate_mode("llama-13b", 2, 4, 16)
    assert wide.bubble_fraction == pytest.approx(3 / 32) and narrow.bubble_fraction == pytest.approx(3 / 128)
    assert narrow.tokens_per_s_per_gpu > wide.tokens_per_s_per_gpu
    # Power is between all-idle and all-TDP (+ host share).
    p = ModeParams()
    for est in (wide, narrow):
        assert p.gpu_idle_kw < est.gpu_power_kw < p.gpu_tdp_kw
        assert est.it_power_kw == pytest.approx(est.gpus * (est.gpu_power_kw + p.host_power_kw_per_gpu))
    # Full recomputation costs throughput relative to selective.
    full = estimate_mode("llama-13b", 2, 4, 64, params=ModeParams(recompute="full"))
    assert full.tokens_per_s < wide.tokens_per_s


# ------------------------------------------------------------------------------------------------
# Data classes
# ------------------------------------------------------------------------------------------------


def test_mode_dict_round_trip_and_validation(reference_sets):
    md = baseline_mode(reference_sets["llama-13b"], 512)
    data = md.to_dict()
    json.dumps(data)
    assert data["label"] == md.label == f"tp{md.tp}-pp{md.pp}-dp{md.dp}"
    assert Mode.from_dict(data) == md
    assert md.kwh_per_million_tokens == pytest.approx(md.it_power_kw / (md.tokens_per_s * 3600) * 1e6)
    with pytest.raises(InputError) as err:
        Mode.from_dict({**data, "gpus": 3})
    assert err.value.field == "mode.gpus"
    with pytest.raises(InputError) as err:
        Mode.from_dict({k: v for k, v in data.items() if k != "tokens_per_s"}, field_prefix="jobs[0].modes[2]")
    assert err.value.field == "jobs[0].modes[2].tokens_per_s"
    with pytest.raises(InputError):
        Mode.from_dict({**data, "speed": 1})
    with pytest.raises(InputError):
        Mode.from_dict({**data, "it_power_kw": float("nan")})
    with pytest.raises(InputError):
        Mode.from_dict({**data, "tp": True})


def test_mode_params_from_dict():
    params = ModeParams.from_dict({"recompute": "full", "micro_batch_sizes": [1, 2], "gpu_idle_kw": 0})
    assert params.recompute == "full" and params.micro_batch_sizes == (1, 2) and params.gpu_idle_kw == 0
    assert ModeParams.from_dict(params.to_dict()) == params
    json.dumps(params.to_dict())
    assert ModeParams.from_dict({}) == ModeParams()
    bad = [
        ({"warp_drive": 1}, "mode_params.warp_drive"),
        ({"recompute": "sometimes"}, "mode_params.recompute"),
        ({"compute_efficiency": 1.5}, "mode_params.compute_efficiency"),
        ({"min_gpus": 0}, "mode_params.min_gpus"),
        ({"min_gpus": 12.5}, "mode_params.min_gpus"),
        ({"zero1_sharding": "yes"}, "mode_params.zero1_sharding"),
        ({"tp_degrees": [1, 16]}, "mode_params.tp_degrees"),
        ({"gpu_memory_gib": float("inf")}, "mode_params.gpu_memory_gib"),
    ]
    for data, field in bad:
        with pytest.raises(InputError) as err:
            ModeParams.from_dict(data)
        assert err.value.field == field, data
    with pytest.raises(InputError) as err:
        ModeParams.from_dict({"recompute": 3}, field_prefix="modes")
    assert err.value.field == "modes.recompute"


def test_generate_modes_bad_input():
    with pytest.raises(InputError) as err:
        generate_modes("gpt-5", POOL_GPUS)
    assert err.value.field == "model"
    with pytest.raises(InputError) as err:
        generate_modes("llama-13b", 0)
    assert err.value.field == "max_gpus"
    assert generate_modes("LLaMA-13B", POOL_GPUS).model == "llama-13b"
    custom = ModelSpec("tiny", 4, 512, 8, 1376, 32000, 0.04)
    assert generate_modes(custom, 256, ModeParams(min_gpus=8)).feasible


# ------------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------------


def test_cli_json_shape(capsys):
    assert run_cli(main, ["--model", "llama-13b", "--gpus", "2048", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["jobs"]) == 1
    job = data["jobs"][0]
    assert job["name"] == job["model"] == "llama-13b"
    assert job["feasible_count"] == 128 and job["pareto_count"] == len(job["pareto"]) == 13
    for entry in job["pareto"]:
        assert {"tp", "pp", "dp", "micro_batch", "gpus", "tokens_per_s", "it_power_kw"} <= set(entry)
        Mode.from_dict(entry)


def test_cli_table(capsys):
    assert run_cli(main, ["--model", "llama-33b"]) == 0
    out = capsys.readouterr().out
    assert "98 feasible, 20 Pareto" in out and "tp4-pp3-dp64" in out


@pytest.mark.parametrize("argv", [["--model", "gpt-5"], ["--model", "llama-13b", "--gpus", "0"],
                                  ["--model", "llama-13b", "--gpus", "-8"]])
def test_cli_bad_input_exit_2(capsys, argv):
    assert run_cli(main, argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:")


def test_cli_subprocess_bad_model_exit_2():
    proc = subprocess.run([sys.executable, "-m", "aidc_env.modes", "--model", "nope"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown model 'nope'" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_case_json(capsys):
    assert run_cli(main, ["--case", "2048", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    names = [job["name"] for job in data["jobs"]]
    assert names == ["LLM-A", "LLM-B"]
    assert [job["model"] for job in data["jobs"]] == ["llama-13b", "llama-33b"]
    assert [job["pareto_count"] for job in data["jobs"]] == [13, 20]
    assert run_cli(main, ["--case", "2048", "--gpus", "1152", "--json"]) == 0
    small = json.loads(capsys.readouterr().out)
    assert all(entry["gpus"] <= 1152 for job in small["jobs"] for entry in job["pareto"])
