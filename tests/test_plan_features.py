"""The forecast plan as PPO's observation (agents/plan_features.py, ``PPOConfig.forecast_plan``).

The plan's tables against the simulator and hand values, the wrapper's layout and bounds, following the plan's
one-hot reproducing the ``forecast-plan`` rule, the teeth of the leakage check (the features do move with the
forecast and with the truth already realised), old configs, and the train/evaluate surfaces.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agents.open_loop import forecast_plan_schedule
from agents.plan_features import (ERROR_CLIP, PLAN_JOB_FEATURES, REALISED_ERROR_FEATURES, ForecastPlans, plan_table,
                                  planned_tokens_before, realised_error_table)
from agents.ppo import PPOConfig, observes_plan, wrap_env
from aidc_env.env import DispatchEnv
from aidc_env.instance import PAUSE
from aidc_env.simulator import simulate
from tests.conftest import SLOTS_PER_DAY, dayahead_instance
from tests.test_leakage import perturbed

DAYAHEAD = PPOConfig(env_kwargs={**PPOConfig().env_kwargs, "information": "dayahead"})


def wrapped(inst, config: PPOConfig = DAYAHEAD, plans: ForecastPlans | None = None):
    return wrap_env(DispatchEnv(case=inst, **config.behaviour_env_kwargs()), config, plans)


@pytest.fixture(scope="module")
def plans():
    return ForecastPlans()


def test_planned_tokens_match_the_simulator(plans):
    for seed in range(3):
        inst = dayahead_instance(seed)
        plan = plans.plan(inst)
        tokens = planned_tokens_before(inst, plan)
        result = simulate(inst, plan)
        np.testing.assert_allclose(tokens[:, -1], [m.tokens for m in result.metrics.jobs], rtol=1e-9)
        assert np.all(np.diff(tokens, axis=1) >= 0)
        assert all(m.tranche_met for m in result.metrics.jobs)


def test_plan_table_by_hand():
    """Job A: segments of 6 hourly slots; plan (mode 1, pause, mode 0, ...): choice now and next, progress."""
    inst = dayahead_instance(0)
    job = inst.jobs[0]
    plan = [[1, PAUSE, 0, 0, 0, 0, 0, 0], [0] * 8]
    table, progress = plan_table(inst, plan)
    M = job.n_modes
    assert table.shape == (inst.slots + 1, PLAN_JOB_FEATURES * 2)
    assert table[0, 0] == pytest.approx(2 / M) and table[0, 1] == 0.0  # mode 1 now, pause next
    assert table[6, 0] == 0.0 and table[6, 1] == pytest.approx(1 / M)
    assert table[inst.slots, 0] == 0.0  # past the end
    # Mode 1 is a switch from the initial mode 0: the first restart_hours make nothing.
    rate = job.modes[1].tokens_per_s * 3600
    segment = 6 * inst.slot_hours
    assert progress[0, 6] == pytest.approx(rate * (segment - job.restart_hours) / job.tranche_tokens)
    assert progress[0, 12] == progress[0, 6]  # paused
    assert table[6, 2] == pytest.approx(progress[0, 6])


def test_realised_error_table_by_hand():
    inst = dayahead_instance(2)
    scale = 40.0
    table = realised_error_table(inst, scale)
    assert table.shape == (inst.slots + 1, REALISED_ERROR_FEATURES)
    assert not table[0].any()
    error = np.clip((inst.price_usd_per_mwh - inst.forecast.price_usd_per_mwh) / scale, -ERROR_CLIP, ERROR_CLIP)
    ren = inst.renewable_ratio * (inst.renewable_shape - inst.forecast.renewable_shape)
    for t in (1, 2, 7, inst.slots):
        assert table[t, 0] == pytest.approx(error[t - 1], abs=1e-6)
        assert table[t, 1] == pytest.approx(error[t - 1], abs=1e-6)  # hourly slots: the last hour is slot t - 1
        assert table[t, 2] == pytest.approx(error[:t].mean(), abs=1e-6)
        assert table[t, 3] == pytest.approx(ren[t - 1], abs=1e-6)
        assert table[t, 4] == pytest.approx(ren[:t].mean(), abs=1e-6)


def test_following_the_plans_choice_reproduces_the_forecast_plan(plans):
    """The one-hot of the job choosing is the plan's choice: following it gives the forecast-plan schedule."""
    for seed in range(3):
        inst = dayahead_instance(seed)
        env = wrapped(inst, plans=plans)
        width = env.action_space.n
        obs, _ = env.reset(options={"day": inst.day})
        terminated = False
        while not terminated:
            assert env.observation_space.contains(obs)
            onehot = obs[-width:]
            assert onehot.sum() == 1.0
            action = int(np.argmax(onehot))
            assert env.action_masks()[action]
            obs, _, terminated, _, _ = env.step(action)
        assert env.dispatch.schedule().mode_lists() == plans.plan(inst) == forecast_plan_schedule(inst, plans.oracle()).mode_lists()


def test_wrapper_layout_and_check_env(plans):
    from stable_baselines3.common.env_checker import check_env

    inst = dayahead_instance(1)
    with_plan = wrapped(inst, plans=plans)
    without = wrapped(inst, dataclasses.replace(DAYAHEAD, forecast_plan=False))
    J = len(inst.jobs)
    added = PLAN_JOB_FEATURES * J + REALISED_ERROR_FEATURES + J + with_plan.action_space.n
    assert with_plan.observation_space.shape[0] == without.observation_space.shape[0] + added
    check_env(with_plan, warn=True)
    # With perfect information nothing is added (the plan on the truth is the hindsight oracle's).
    perfect = PPOConfig()
    assert not observes_plan(perfect) and observes_plan(DAYAHEAD)
    assert (wrapped(inst, perfect).observation_space.shape
            == wrapped(inst, dataclasses.replace(perfect, forecast_plan=False)).observation_space.shape)


def test_plan_features_move_with_the_forecast_and_the_realised_truth(plans):
    """The leakage check's teeth: the features read the forecast, and the truth once it is realised."""
    inst = dayahead_instance(0)
    t = 2 * SLOTS_PER_DAY - 1
    forecast = dataclasses.replace(inst.forecast, price_usd_per_mwh=inst.forecast.price_usd_per_mwh[::-1].copy())
    other_forecast = dataclasses.replace(inst, day="2023-01-02", forecast=forecast)
    assert ForecastPlans().plan(other_forecast) != plans.plan(inst)
    moved = perturbed(inst, 3, seed=1)
    env_a, env_b = wrapped(inst, plans=ForecastPlans()), wrapped(moved, plans=ForecastPlans())
    env_a.reset(options={"day": inst.day})
    env_b.reset(options={"day": inst.day})
    a, b = env_a._plan[1], env_b._plan[1]
    np.testing.assert_array_equal(a[:4], b[:4])
    assert not np.array_equal(a[4: t], b[4: t])


def test_the_plan_is_observed_by_default_and_kept_through_the_saved_config():
    assert PPOConfig().forecast_plan is True
    assert PPOConfig.from_dict(PPOConfig().to_dict()).forecast_plan is True
    assert PPOConfig.from_dict(PPOConfig(forecast_plan=False).to_dict()).forecast_plan is False


def test_train_forecast_plan_flag():
    import train

    assert train.parse_args([]).forecast_plan is PPOConfig().forecast_plan
    assert train.parse_args(["--no-forecast-plan"]).forecast_plan is False


def test_plans_pickle_without_their_oracle(plans):
    import pickle

    inst = dayahead_instance(0)
    plans.plan(inst)
    copy = pickle.loads(pickle.dumps(plans))
    assert copy.plans == plans.plans and copy._oracle is None


def test_warm_start_on_the_plan_follows_it(plans):
    """Behaviour cloning of the plan: the demonstrations are the plan, and the fitted policy then follows it."""
    from agents.imitation import plan_demonstrations, pretrain
    from agents.ppo import make_model, make_vec_env, ppo_schedule

    instances = [dataclasses.replace(dayahead_instance(seed), day=f"2023-04-{10 + seed}") for seed in range(3)]
    config = dataclasses.replace(DAYAHEAD, n_envs=1, n_steps=16, batch_size=16, net_arch=[32, 32], seed=1)
    vec = make_vec_env(config, instances, plans)
    model = make_model(config, vec)
    vec.close()
    demos = plan_demonstrations(config, instances, plans)
    assert len(demos.actions) == len(demos.observations) == len(demos.returns) > 0
    assert demos.masks[np.arange(len(demos.actions)), demos.actions].all()
    fit = pretrain(model, demos, epochs=200, seed=1)
    assert fit["matches_plan"] == 1.0 and fit["decisions"] == len(demos.actions)
    for inst in instances:
        assert ppo_schedule(model, inst, plans).mode_lists() == plans.plan(inst)


def test_train_imitation_epochs_flag():
    import train

    assert train.parse_args([]).imitation_epochs == PPOConfig().imitation_epochs
    assert train.parse_args(["--imitation-epochs", "0"]).imitation_epochs == 0
