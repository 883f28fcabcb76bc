"""Leakage: nothing a policy sees or decides at slot t depends on the truth of slots ≥ t.

For random t, the truth (price and renewable shape) of slots t..T−1 of a day-ahead instance is replaced by
other values; the observations, masks and decisions of slots 0..t must not move. Checked for the env (a fixed
action sequence and a seeded masked-random policy), for the PPO wrapper (observations and masks) and for an
untrained MaskablePPO model's deterministic decisions (``ppo_schedule`` / ``rollout_schedule``), both with the
forecast plan and the realised forecast error in the observation (``PPOConfig.forecast_plan``), and for every
decision rule through ``run_policy`` (mpc, smpc, dayahead-plan, forecast-plan, greedy, fixed, ppo).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.ppo import PPOConfig, make_model, make_vec_env, ppo_schedule, rollout_schedule, wrap_env
from aidc_env.env import DispatchEnv
from aidc_env.instance import Instance
from aidc_env.schedule import Schedule
from tests.conftest import DAYS, SLOTS_PER_DAY, dayahead_instance


def perturbed(inst: Instance, t: int, seed: int) -> Instance:
    """``inst`` with other truth (price and renewable shape) from slot t on; the forecast is unchanged."""
    rng = np.random.default_rng(seed)
    price = inst.price_usd_per_mwh.copy()
    shape = inst.renewable_shape.copy()
    price[t:] = rng.uniform(-100, 900, inst.slots - t)
    shape[t:] = rng.uniform(0, 1, inst.slots - t)
    return dataclasses.replace(inst, price_usd_per_mwh=price, renewable_shape=shape)


def env_trace(env, inst: Instance, t: int, choose) -> tuple[list[np.ndarray], list[np.ndarray], list[int]]:
    """Observations, masks and actions of slots 0..t (``choose(slot, mask) -> action``)."""
    obs, _ = env.reset(seed=0, options={"day": inst.day})
    observations, masks, actions = [obs], [], []
    for slot in range(t + 1):
        mask = env.action_masks()
        action = choose(slot, mask)
        masks.append(mask)
        actions.append(action)
        obs, *_ = env.step(action)
        if slot < t:
            observations.append(obs)
    return observations, masks, actions


def assert_same(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def masked_random(seed: int):
    rng = np.random.default_rng(seed)

    def choose(slot: int, mask: np.ndarray) -> int:
        valid = np.flatnonzero(mask)
        return int(valid[rng.integers(valid.size)])

    return choose


@settings(max_examples=25, deadline=None)
@given(t=st.integers(0, DAYS * SLOTS_PER_DAY - 1), seed=st.integers(0, 10_000), share=st.sampled_from([0.0, 1.0]),
       lookahead=st.sampled_from([0, 4]))
def test_env_observations_masks_and_decisions_up_to_t_ignore_the_truth_from_t(t, seed, share, lookahead):
    inst = dayahead_instance(seed % 7, share=share)
    moved = perturbed(inst, t, seed)
    runs = []
    for case in (inst, moved):
        env = DispatchEnv(case=case, information="dayahead", lookahead=lookahead)
        fixed = np.random.default_rng(seed).integers(0, env.n_actions, t + 1)
        runs.append((env_trace(env, case, t, lambda slot, mask: int(fixed[slot])),
                     env_trace(env, case, t, masked_random(seed))))
    for a, b in zip(*runs, strict=True):
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)


def test_perfect_information_does_see_the_future():
    """The check has teeth: with perfect information the observation at t moves with the truth of slot t."""
    inst = dayahead_instance(1)
    t = 30
    obs = []
    for case in (inst, perturbed(inst, t, 3)):
        env = DispatchEnv(case=case, information="perfect")
        obs.append(env_trace(env, case, t, masked_random(0))[0][-1])
    assert not np.array_equal(*obs)


@settings(max_examples=15, deadline=None)
@given(t=st.integers(0, DAYS * SLOTS_PER_DAY - 1), seed=st.integers(0, 10_000))
def test_ppo_wrapper_observations_and_masks_up_to_t_ignore_the_truth_from_t(t, seed):
    inst = dayahead_instance(seed % 5)
    moved = perturbed(inst, t, seed)
    config = PPOConfig()
    traces = []
    for case in (inst, moved):
        env = wrap_env(DispatchEnv(case=case, information="dayahead", **{
            k: v for k, v in config.behaviour_env_kwargs().items() if k != "information"}), config)
        assert env.forecast_plan  # the forecast plan and the realised forecast error are observed (default)
        rng = np.random.default_rng(seed)
        obs, _ = env.reset(options={"day": case.day})
        seen, masks = [obs], []
        while env.dispatch.slot <= t:
            mask = env.action_masks()
            masks.append(mask)
            valid = np.flatnonzero(mask)
            obs, _, terminated, _, _ = env.step(int(valid[rng.integers(valid.size)]))
            if terminated:
                break
            if env.dispatch.slot <= t:
                seen.append(obs)
        traces.append((seen, masks))
    for a, b in zip(*traces, strict=True):
        assert_same(a, b)


@functools.lru_cache(maxsize=1)
def untrained_model():
    """A small untrained MaskablePPO over day-ahead instances (its deterministic choices are a fixed function)."""
    config = PPOConfig(n_envs=1, n_steps=16, batch_size=16, net_arch=[16, 16], seed=3,
                       env_kwargs={**PPOConfig().env_kwargs, "information": "dayahead"})
    vec = make_vec_env(config, [dayahead_instance(0)])
    model = make_model(config, vec)
    vec.close()
    return model


def decisions_up_to(inst: Instance, schedule: Schedule, t: int) -> list[list[int]]:
    """The choices of the segments that start at slots ≤ t."""
    return [row[: t // (inst.slots // len(row)) + 1] for row in schedule.mode_lists()]


@settings(max_examples=12, deadline=None)
@given(t=st.integers(0, DAYS * SLOTS_PER_DAY - 1), seed=st.integers(0, 10_000))
def test_untrained_maskable_ppo_decisions_up_to_t_ignore_the_truth_from_t(t, seed):
    model = untrained_model()
    inst = dayahead_instance(seed % 5)
    moved = perturbed(inst, t, seed)
    a, b = ppo_schedule(model, inst), ppo_schedule(model, moved)
    assert decisions_up_to(inst, a, t) == decisions_up_to(inst, b, t)

    # rollout_schedule drives the raw env (no wrapper): an untrained maskable policy of the env's observations.
    kwargs = {**PPOConfig().behaviour_env_kwargs(), "information": "dayahead"}
    env = DispatchEnv(case=inst, **kwargs)
    policy = raw_policy(tuple(env.observation_space.shape), int(env.action_space.n))

    def choose(obs: np.ndarray, mask: np.ndarray) -> int:
        action, _ = policy.predict(obs, deterministic=True, action_masks=mask)
        return int(action)

    a, b = rollout_schedule(inst, choose, **kwargs), rollout_schedule(moved, choose, **kwargs)
    assert decisions_up_to(inst, a, t) == decisions_up_to(inst, b, t)


@functools.lru_cache(maxsize=1)
def raw_policy(shape: tuple[int, ...], n_actions: int):
    """An untrained MaskablePPO policy network (seeded) over the raw env's observations and joint actions."""
    import torch
    from gymnasium import spaces
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

    torch.manual_seed(3)
    obs_space = spaces.Box(-np.inf, np.inf, shape=shape, dtype=np.float32)
    return MaskableActorCriticPolicy(obs_space, spaces.Discrete(n_actions), lambda _: 3e-4, net_arch=[16, 16])


def test_dayahead_needs_forecasts_and_refuses_synthetic_noise():
    from aidc_env.errors import InputError

    inst = dataclasses.replace(dayahead_instance(0), forecast=None)
    with pytest.raises(InputError, match="forecasts"):
        DispatchEnv(case=inst, information="dayahead")
    with pytest.raises(InputError, match="forecast_noise"):
        DispatchEnv(case=dayahead_instance(0), information="dayahead", forecast_noise=0.1)
    with pytest.raises(InputError, match="information"):
        DispatchEnv(case=dayahead_instance(0), information="oracle")


def test_wrapper_window_slides_across_midnight_and_reads_the_issued_forecast():
    from agents.steps import HOURS_AHEAD, day_forecast_table, day_price_scale
    from aidc_env.information import outlook

    inst = dayahead_instance(3, days=3)
    table = day_forecast_table(inst, "dayahead")
    scale = day_price_scale(inst, "dayahead")
    assert scale == pytest.approx(np.mean(np.abs(inst.forecast.price_usd_per_mwh[:SLOTS_PER_DAY])))
    for t in (0, 9, 10, 20, 30, 47, 60):
        price, shape = outlook(inst, t, "dayahead")
        n = min(HOURS_AHEAD, inst.slots - t)  # hourly slots: one slot per hour of the window
        np.testing.assert_allclose(table[t, :n], np.clip(price[:n] / scale, -10, 10), rtol=1e-6)
        np.testing.assert_allclose(table[t, HOURS_AHEAD: HOURS_AHEAD + n], inst.renewable_ratio * shape[:n],
                                   rtol=1e-6, atol=1e-7)
        assert table[t, 2 * HOURS_AHEAD: 3 * HOURS_AHEAD].sum() == n  # valid past midnight, not past the end


CAUSAL_POLICIES = ("mpc", "smpc", "dayahead-plan", "forecast-plan", "greedy", "fixed", "ppo")


@functools.lru_cache(maxsize=1)
def dayahead_settings():
    """Day-ahead settings shared by the run_policy checks (the oracle's models and the untrained model reused)."""
    from agents.policies import PolicySettings

    settings_ = PolicySettings(information="dayahead", smpc_scenarios=2)
    settings_._model = untrained_model()
    return settings_


def started_before(inst: Instance, schedule: Schedule, t: int) -> list[list[int]]:
    """The choices of the segments that start before slot t."""
    return [row[: -(-t // inst.slots_per_segment(job))]
            for job, row in zip(inst.jobs, schedule.mode_lists(), strict=True)]


@pytest.mark.parametrize(("policy", "t"), [(p, t) for p in CAUSAL_POLICIES
                                             for t in ((5, 30) if p == "smpc" else (5, 14, 30, 41))])
def test_every_policy_through_run_policy_ignores_the_truth_from_t(policy, t):
    """Slot 5 falls before the second day's forecast is issued (10:00 of the first day: slot 10), 14, 30 and 41
    after it; smpc (the slowest) on one of each."""
    from agents.policies import run_policy

    inst = dayahead_instance(t % 3)
    moved = perturbed(inst, t, seed=t)
    before, after = (run_policy(policy, case, dayahead_settings())[0] for case in (inst, moved))
    assert started_before(inst, before, t) == started_before(inst, after, t)


def test_the_hindsight_bound_does_read_the_future():
    """The check has teeth: the hindsight oracle's early decisions move with the late truth."""
    from agents.policies import run_policy

    inst = dayahead_instance(0)
    moved = dataclasses.replace(inst, price_usd_per_mwh=np.where(np.arange(inst.slots) < 12, inst.price_usd_per_mwh,
                                                                   -inst.price_usd_per_mwh - 500.0))
    before, after = (run_policy("hindsight", case, dayahead_settings())[0] for case in (inst, moved))
    assert started_before(inst, before, 12) != started_before(inst, after, 12)
