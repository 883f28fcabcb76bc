"""The env's grid side: caps in calls, the delivery mask, the call stream, and what the agent may know of a call."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aidc_env.call_streams import HELD_OUT_SEEDS, CallStream
from aidc_env.calls import with_calls
from aidc_env.case import build_instance, load_case
from aidc_env.env import DispatchEnv
from aidc_env.env.calls import CALL_FEATURES, LIMIT_MARGIN_MW
from aidc_env.errors import InputError
from aidc_env.instance import Instance
from aidc_env.schema.case import CallSpec, PowerCaps
from aidc_env.simulator import baseline_tokens, simulate, slot_tokens


@pytest.fixture(scope="module")
def capped() -> Instance:
    """The 2048 case's day with the A100 cap curve and no call."""
    return build_instance(load_case("2048").with_overrides(power_caps=PowerCaps()))


def _episode(env: DispatchEnv, seed: int, choose=None, day: str | None = None):
    """A masked episode (random valid actions unless ``choose``): (slot costs, observations, infos)."""
    obs, info = env.reset(seed=seed, options={"day": day} if day else None)
    rng = np.random.default_rng(seed)
    costs, observations, infos, done = [], [obs], [], False
    while not done:
        mask = env.action_masks()
        action = choose(mask) if choose else int(rng.choice(np.flatnonzero(mask)))
        obs, _, done, _, info = env.step(action)
        costs.append(info["slot_cost_usd"])
        observations.append(obs)
        infos.append(info)
    return costs, observations, infos


calls = st.builds(CallSpec, program=st.sampled_from(["bip", "elrp"]), start_hour=st.integers(0, 22).map(float),
                  hours=st.sampled_from([0.5, 1.0, 3.0, 5.0, 9.0]),
                  notice_hours=st.sampled_from([0.25, 0.5, 2.0, 24.0]),
                  reduction_share=st.sampled_from([0.1, 0.25, 0.4, 0.6]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=calls, seed=st.integers(0, 10_000))
def test_a_masked_policy_never_under_delivers_an_accepted_call(capped, spec, seed):
    """Random masked actions: every accepted call is delivered in every slot (simulator's replay), and the episode's
    slot costs sum to the simulator's objective of the schedule (less the take-or-pay renewable cost)."""
    inst = with_calls(capped, [spec])
    env = DispatchEnv(case=inst)
    costs, _, infos = _episode(env, seed)
    metrics = simulate(inst, env.schedule()).metrics
    accepted = infos[-1]["calls_accepted"]
    for call, ok in zip(metrics.calls, accepted, strict=True):
        assert ok is not None
        if ok:
            assert call.delivered, (spec, seed)
    assert sum(costs) == pytest.approx(metrics.objective_usd - metrics.renewable_cost_usd, rel=1e-9, abs=1e-6)


def test_a_call_noticed_a_day_ahead_is_always_accepted_and_delivered(capped):
    spec = CallSpec(program="elrp", start_hour=16.0, hours=5.0, notice_hours=24.0, reduction_share=0.6)
    inst = with_calls(capped, [spec])
    env = DispatchEnv(case=inst)
    for seed in range(5):
        _, _, infos = _episode(env, seed)
        assert infos[-1]["calls_accepted"] == [True]
        assert simulate(inst, env.schedule()).metrics.calls_delivered


def test_an_undeliverable_call_is_declined_scored_and_penalised(capped):
    """A limit of 0 MW at 5 am (the idle GPUs draw more than the plant gives) cannot be met: declined at its notice,
    the episode goes on, and the penalty is paid on the import over the limit (the env's costs still equal the
    simulator's)."""
    spec = CallSpec(program="bip", start_hour=5.0, hours=1.0, notice_hours=0.5, limit_mw=0.0)
    inst = with_calls(capped, [spec])
    env = DispatchEnv(case=inst)
    costs, _, infos = _episode(env, 0)
    assert infos[-1]["calls_accepted"] == [False]
    metrics = simulate(inst, env.schedule()).metrics
    assert not metrics.calls_delivered and metrics.call_penalty_usd > 0
    assert sum(costs) == pytest.approx(metrics.objective_usd - metrics.renewable_cost_usd, rel=1e-9)


def test_the_caps_cut_the_import_to_the_limit_and_no_deeper(capped):
    """Keeping the baseline modes through a 25% call: the caps hold the import at the limit less the margin in every
    slot of the call (cutting less would be short, more would lose throughput for nothing); none outside it."""
    spec = CallSpec(program="bip", start_hour=20.0, hours=2.0, notice_hours=0.25, reduction_share=0.25)
    assert capped.renewable_mw[80:88].max() < 0.5  # evening: the import is positive, the caps bind
    inst = with_calls(capped, [spec])
    env = DispatchEnv(case=inst, safety_mask=False)
    keep = env.encode([job.baseline_mode for job in inst.jobs])
    _, _, infos = _episode(env, 0, choose=lambda mask: keep if mask[keep] else int(np.flatnonzero(mask)[0]))
    call = inst.grid_calls[0]
    for t, info in enumerate(infos):
        if call.start_slot <= t < call.end_slot:
            limit = call.limit_mw[t - call.start_slot]
            assert info["grid_mw"] == pytest.approx(max(limit - LIMIT_MARGIN_MW, 0.0), abs=1e-9)
            assert 0 < max(info["cap_positions"]) < inst.cap_curve.levels - 1
        else:
            assert info["cap_positions"] == [0.0] * len(inst.jobs)
    schedule = env.schedule()
    assert schedule.caps is not None
    assert simulate(inst, schedule).metrics.calls_delivered


def test_nothing_observed_before_a_notice_depends_on_the_call(capped):
    """The same actions on the day with and without a call: the observations agree up to the notice slot, and the
    call's entries appear from it on."""
    spec = CallSpec(program="bip", start_hour=18.0, hours=3.0, notice_hours=2.0, reduction_share=0.25)
    with_call = with_calls(capped, [spec])
    notice = with_call.grid_calls[0].notice_slot
    env_a, env_b = DispatchEnv(case=with_call), DispatchEnv(case=capped)
    keep = env_a.encode([job.baseline_mode for job in capped.jobs])
    _, obs_a, _ = _episode(env_a, 0, choose=lambda mask: keep if mask[keep] else int(np.flatnonzero(mask)[0]))
    _, obs_b, _ = _episode(env_b, 0, choose=lambda mask: keep if mask[keep] else int(np.flatnonzero(mask)[0]))
    names = env_a.observation_names()
    known = names.index("call_known")
    for t in range(notice):
        np.testing.assert_array_equal(obs_a[t], obs_b[t])
    assert obs_a[notice][known] == 1.0 and obs_b[notice][known] == 0.0
    assert names[-1 - len(CALL_FEATURES): -1] == list(CALL_FEATURES)


@pytest.fixture(scope="module")
def phoenix_env() -> DispatchEnv:
    return DispatchEnv(case=build_instance("phoenix"))


@pytest.mark.parametrize("seed", range(3))
def test_phoenix_masked_policies_deliver_the_call_and_hold_every_tier(phoenix_env, seed):
    """The field demonstration's six tiered jobs: random masked actions (cap levels included) deliver the accepted
    25% call in every slot and keep every job's tier (the env lifts a cap its tier does not allow), and the episode's
    costs sum to the simulator's objective."""
    inst = phoenix_env.instance(phoenix_env.days[0])
    costs, _, infos = _episode(phoenix_env, seed)
    metrics = simulate(inst, phoenix_env.schedule()).metrics
    assert infos[-1]["calls_accepted"] == [True]
    call = metrics.calls[0]
    assert call.delivered and call.tiers_met
    assert min(call.performance[job.name] / (1 - job.max_throughput_loss) for job in inst.jobs) >= 1 - 1e-9
    assert sum(costs) == pytest.approx(metrics.objective_usd - metrics.renewable_cost_usd, rel=1e-9)


def test_phoenix_the_deepest_level_is_lifted_to_each_tier(phoenix_env):
    """Asking the deepest cap for every job through the call: each job is capped only as deep as its tier allows, so
    that every slot of the call makes at least its tier's share of the baseline's tokens (a Flex 1 job 90%), and some
    caps are lifted above the deepest level."""
    inst = phoenix_env.instance(phoenix_env.days[0])
    deepest = inst.cap_curve.levels - 1

    def choose(mask):
        actions = np.flatnonzero(mask)
        deep = actions[actions % phoenix_env.n_levels == deepest]
        return int(deep[0] if deep.size else actions[0])

    _, _, infos = _episode(phoenix_env, 0, choose=choose)
    schedule = phoenix_env.schedule()
    call = inst.grid_calls[0]
    for j, job in enumerate(inst.jobs):
        made = slot_tokens(inst, j, schedule.modes[j], schedule.sites[j], schedule.caps[j])[call.slots]
        floor = (1 - job.max_throughput_loss) * baseline_tokens(inst, job, slice(0, 1))
        assert np.all(made >= floor * (1 - 1e-12)), job.name
    lifted = [x for info in infos[call.start_slot: call.end_slot] for x in info["cap_positions"] if 0 < x < deepest]
    assert lifted
    metrics = simulate(inst, schedule).metrics
    assert metrics.calls[0].tiers_met and metrics.calls_delivered


def test_the_call_stream_env_passes_check_env_and_draws_calls_in_season(capped):
    env = DispatchEnv(case=capped, call_stream="bip:0.25")
    check_env(env, skip_render_check=True)
    stream = CallStream(probability=1.0)
    rng = np.random.default_rng(0)
    assert stream.draw("2023-07-12", rng) and stream.draw("2023-07-12", rng)[0].reduction_share == 0.25
    assert not stream.events_of_month(3)  # the history has no call in March: never a call then
    assert stream.draw("2023-03-12", rng) == ()


def test_the_call_stream_refuses_held_out_years_and_bad_specs(capped):
    with pytest.raises(InputError, match="held-out years"):
        CallStream(seeds=(HELD_OUT_SEEDS.start, HELD_OUT_SEEDS.start + 5))
    for bad, match in (("nope:0.25", "unknown program"), ("bip:x", "PROGRAM:SHARE"), ("bip:1.5", r"\(0, 1\]"),
                       ({"seeds": [5, 5]}, "first"), ({"probabilty": 1}, "mapping")):
        with pytest.raises(InputError, match=match):
            CallStream.of(bad)
    with pytest.raises(InputError, match="needs power caps"):
        DispatchEnv(case=build_instance("2048"), call_stream="bip:0.25")


def test_without_the_grid_side_the_observation_and_costs_are_unchanged(capped):
    """The day case: no grid entries in the observation; the capped case adds exactly the call entries."""
    plain = DispatchEnv(case=build_instance("2048"))
    grid = DispatchEnv(case=capped)
    assert grid.observation_space.shape[0] == plain.observation_space.shape[0] + len(CALL_FEATURES)
    assert "call_known" not in plain.observation_names()


def test_train_refuses_a_bad_call_stream_or_curve_in_one_line(tmp_path):
    for args, match in ((["--call-stream", "bip:2"], "call_stream"), (["--power-caps", "h100"], "power-caps")):
        proc = subprocess.run([sys.executable, "train.py", "--case", "2048", "--timesteps", "10", "--out",
                               str(tmp_path / "x"), *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and match in proc.stderr


def test_a_capped_case_with_a_training_value_pays_it_per_slot(capped):
    """With a training value the slot costs carry the value of the tokens lost against the baseline, and still sum to
    the simulator's objective."""
    inst = with_calls(dataclasses.replace(capped, training_value_usd_per_gpu_hour=2.0),
                      [CallSpec(program="elrp", start_hour=16.0, hours=3.0, notice_hours=24.0, reduction_share=0.3)])
    env = DispatchEnv(case=inst)
    costs, _, _ = _episode(env, 3)
    metrics = simulate(inst, env.schedule()).metrics
    assert metrics.training_lost_usd != 0
    assert sum(costs) == pytest.approx(metrics.objective_usd - metrics.renewable_cost_usd, rel=1e-9)


def test_the_cap_level_is_the_action_last_digit_and_keeps_every_target(capped):
    """With a cap curve the action is (joint choice, cap level): the level caps every running job for the segment, the
    completion rule counts its throughput, and random masked episodes with no call meet every target."""
    env = DispatchEnv(case=capped)
    levels = capped.cap_curve.levels
    plain = DispatchEnv(case=build_instance("2048"))
    assert env.action_space.n == plain.action_space.n * levels
    action = env.encode([0, 1], cap_level=2)
    assert action % levels == 2 and env.decode(action) == [0, 1]
    deep = False
    for seed in range(4):
        costs, _, infos = _episode(env, seed)
        deep |= any(info["cap_level"] == levels - 1 for info in infos)
        metrics = simulate(capped, env.schedule()).metrics
        assert metrics.tranches_met and not any(info["safety_fallback"] for info in infos)
        assert sum(costs) == pytest.approx(metrics.objective_usd - metrics.renewable_cost_usd, rel=1e-9)
    assert deep


def test_the_agent_wrapper_asks_the_cap_level_as_one_more_sub_step(capped):
    from agents.ppo import agent_env
    from agents.ppo_config import PPOConfig

    env = agent_env(PPOConfig(), [capped])
    assert env.action_space.n == max(job.n_modes + 1 for job in capped.jobs)
    obs, _ = env.reset(options={"day": capped.day})
    rng, done = np.random.default_rng(0), False
    while not done:
        obs, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
    schedule = env.unwrapped.schedule()
    assert schedule.caps is not None and simulate(capped, schedule).metrics.tranches_met
