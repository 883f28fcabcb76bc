"""The plans re-made at each forecast issue (agents/plan_features.py ``issue_plans``, ``PPOConfig.plan = "issues"``).

Followed, they are ``mpc``'s schedule; the plan observed at slot t was made at or before t, from the forecasts
issued by then (a forecast issued later does not move it; the truth never does); they are cached on disk; on a
2-day instance with hourly slots the second day's forecast is issued at slot 10 (10:00 of the first day).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agents.mpc import mpc_schedule
from agents.plan_features import ForecastPlans, issue_plan_tables, issue_plans, plan_local, plan_table
from agents.ppo import PPOConfig, make_model, make_vec_env, ppo_schedule, wrap_env
from aidc_env.env import DispatchEnv
from aidc_env.information import issue_slot
from aidc_env.instance import Instance
from tests.conftest import SLOTS_PER_DAY, dayahead_instance
from tests.test_leakage import perturbed

ISSUES = PPOConfig(env_kwargs={**PPOConfig().env_kwargs, "information": "dayahead"}, plan="issues")
SECOND_ISSUE = 10
"""Slot of the second day's forecast issue on :func:`dayahead_instance` (hourly slots, 10:00 the day before)."""


@pytest.fixture(scope="module")
def plans():
    return ForecastPlans()


def wrapped(inst: Instance, plans: ForecastPlans, config: PPOConfig = ISSUES):
    return wrap_env(DispatchEnv(case=inst, **config.behaviour_env_kwargs()), config, plans)


def later_forecast(inst: Instance, t: int, seed: int) -> Instance:
    """``inst`` with another point forecast from slot t on (the forecast of days issued after slot t)."""
    rng = np.random.default_rng(seed)
    forecast = inst.forecast
    price = forecast.price_usd_per_mwh.copy()
    shape = forecast.renewable_shape.copy()
    price[t:] = rng.uniform(-100, 900, inst.slots - t)
    shape[t:] = rng.uniform(0, 1, inst.slots - t)
    return dataclasses.replace(inst, forecast=dataclasses.replace(forecast, price_usd_per_mwh=price,
                                                                  renewable_shape=shape))


def test_the_second_issue_is_at_slot_10():
    assert issue_slot(dayahead_instance(0), 1) == SECOND_ISSUE


@pytest.mark.parametrize("seed", range(3))
def test_issue_plans_are_mpcs_plans(plans, seed):
    inst = dayahead_instance(seed, days=3)
    made = plans.issue_plans(inst)
    starts = [start for start, _ in made]
    # slot 0, then the first re-planning point (every 6 slots) after each issue (slots 10 and 34)
    assert starts[0] == 0 and set(starts) <= {0, 12, 36} and starts == sorted(starts)
    # each plan keeps the segments committed before it; the last plan is mpc's whole schedule
    assert made[-1][1] == mpc_schedule(inst, "dayahead", oracle=plans.oracle()).mode_lists()
    for (_, whole), (start, later) in zip(made[:-1], made[1:], strict=True):
        for job, a, b in zip(inst.jobs, whole, later, strict=True):
            done = start // inst.slots_per_segment(job)
            assert a[:done] == b[:done]


@pytest.mark.parametrize("seed", range(3))
def test_following_the_issue_plan_reproduces_mpc(plans, seed):
    inst = dayahead_instance(seed)
    env = wrapped(inst, plans)
    width = env.action_space.n
    obs, _ = env.reset(options={"day": inst.day})
    terminated = False
    while not terminated:
        assert env.observation_space.contains(obs)
        action = int(np.argmax(obs[-width:]))
        assert env.action_masks()[action]
        obs, _, terminated, _, _ = env.step(action)
    assert env.dispatch.schedule().mode_lists() == mpc_schedule(inst, "dayahead", oracle=plans.oracle()).mode_lists()


def test_issue_plan_tables_by_hand():
    """Rows before the second plan's slot come from the first plan, the rest (and the last row) from the second."""
    inst = dayahead_instance(0)
    first = [[0] * 8, [1] * 8]
    second = [[0, 0, 2, 2, 2, 2, 2, 2], [1, 1, 0, 0, 0, 0, 0, 0]]
    table, progress, local = issue_plan_tables(inst, [(0, first), (12, second)])
    for rows, whole in ((slice(0, 12), first), (slice(12, inst.slots + 1), second)):
        expected, expected_progress = plan_table(inst, whole)
        np.testing.assert_array_equal(table[rows], expected[rows])
        np.testing.assert_array_equal(progress[:, rows], expected_progress[:, rows])
        np.testing.assert_array_equal(local[:, rows], plan_local(inst, whole)[:, rows])
    # slot 11 (the segment 6..11) sees the first plan's next segment, not the second's choice made at slot 12
    assert table[11, 1] == pytest.approx((first[0][2] + 1) / inst.jobs[0].n_modes)
    assert table[11, 1] != table[12, 0]


@pytest.mark.parametrize("t", [3, 9, SECOND_ISSUE, 30, 40])
def test_issue_plan_features_up_to_t_ignore_the_forecasts_issued_after_t_and_the_truth(plans, t):
    """On 3 days (issues at slots 10 and 34): the forecast of the first day not yet issued at slot t and the truth
    from t never move the rows ≤ t of the plan table, the planned progress and the plan's choices."""
    inst = dayahead_instance(t % 3, days=3)
    unknown_from = SLOTS_PER_DAY * (1 + sum(t >= issue_slot(inst, d) for d in (1, 2)))  # first day not issued
    moved = perturbed(later_forecast(inst, unknown_from, seed=t), t, seed=t) if unknown_from < inst.slots \
        else perturbed(inst, t, seed=t)
    (table, progress, local), (table2, progress2, local2) = plans.tables(inst, "issues"), plans.tables(moved, "issues")
    np.testing.assert_array_equal(table[: t + 1], table2[: t + 1])
    np.testing.assert_array_equal(progress[:, : t + 1], progress2[:, : t + 1])
    np.testing.assert_array_equal(local[:, : t + 1], local2[:, : t + 1])


def test_issue_plans_do_move_with_the_next_days_forecast(plans):
    """The check's teeth: day 2's forecast changes the plan from its issue on (seed 0), and only from there."""
    inst = dayahead_instance(0)
    moved = later_forecast(inst, SLOTS_PER_DAY, seed=1)
    a, b = plans.issue_plans(inst), plans.issue_plans(moved)
    assert a[0] == b[0]  # made at slot 0, before day 2's forecast is issued
    assert a[-1][1] != b[-1][1]


def test_wrapper_observations_up_to_t_ignore_the_truth_from_t(plans):
    for t in (5, 14, 30, 41):
        inst = dayahead_instance(t % 3)
        moved = perturbed(inst, t, seed=t)
        traces = []
        for case in (inst, moved):
            env = wrapped(case, plans)
            rng = np.random.default_rng(t)
            obs, _ = env.reset(options={"day": case.day})
            seen = [obs]
            while env.dispatch.slot <= t:
                valid = np.flatnonzero(env.action_masks())
                obs, _, terminated, _, _ = env.step(int(valid[rng.integers(valid.size)]))
                if terminated:
                    break
                if env.dispatch.slot <= t:
                    seen.append(obs)
            traces.append(seen)
        assert len(traces[0]) == len(traces[1])
        for x, y in zip(*traces, strict=True):
            np.testing.assert_array_equal(x, y)


def test_untrained_model_on_issue_plans_ignores_the_truth_from_t(plans):
    config = dataclasses.replace(ISSUES, n_envs=1, n_steps=16, batch_size=16, net_arch=[16, 16], seed=3)
    vec = make_vec_env(config, [dayahead_instance(0)], plans)
    model = make_model(config, vec)
    vec.close()
    for t in (5, 14, 30):
        inst = dayahead_instance(t % 3)
        moved = perturbed(inst, t, seed=t)
        a, b = ppo_schedule(model, inst, plans).mode_lists(), ppo_schedule(model, moved, plans).mode_lists()
        per = [inst.slots_per_segment(job) for job in inst.jobs]
        assert [row[: t // p + 1] for row, p in zip(a, per, strict=True)] == [
            row[: t // p + 1] for row, p in zip(b, per, strict=True)]


def test_issue_plans_are_cached_on_disk(tmp_path):
    inst = dayahead_instance(1)
    first = ForecastPlans(cache_dir=tmp_path)
    made = first.issue_plans(inst)
    assert len(list(tmp_path.glob("*.json"))) == 1 and first.oracle().seconds
    again = ForecastPlans(cache_dir=tmp_path)
    assert again.issue_plans(inst) == made and again.oracle().seconds == []  # read, not solved
    # another forecast is another file
    again.issue_plans(later_forecast(inst, SLOTS_PER_DAY, seed=2))
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_one_day_issue_plan_is_the_forecast_plan(plans):
    inst = dataclasses.replace(dayahead_instance(0, days=1))
    made = plans.issue_plans(inst)
    assert [start for start, _ in made] == [0] and made[0][1] == plans.plan(inst)
    assert issue_plans(inst, plans.oracle())[0][1] == plans.plan(inst)


def test_configs_saved_before_the_field_observe_the_forecast_plan():
    assert PPOConfig.from_dict({"case": "2048"}).plan == "forecast" == PPOConfig().plan
    with pytest.raises(ValueError, match="plan"):
        wrapped(dayahead_instance(0), ForecastPlans(), dataclasses.replace(ISSUES, plan="later"))


def test_the_forecast_plan_tables_are_unchanged(plans):
    """Day mode (``plan="forecast"``, the day default) observes exactly what it did: the plan table and, per slot,
    the plan's choice + 1 repeated over each segment (the wrapper's former inline computation)."""
    for seed in range(2):
        inst = dayahead_instance(seed, days=1)
        plan = plans.plan(inst)
        table, progress, local = plans.tables(inst)
        expected_table, expected_progress = plan_table(inst, plan)
        np.testing.assert_array_equal(table, expected_table)
        np.testing.assert_array_equal(progress, expected_progress)
        expected_local = np.zeros((len(inst.jobs), inst.slots + 1), dtype=np.int64)
        for j, (job, row) in enumerate(zip(inst.jobs, plan, strict=True)):
            expected_local[j, : inst.slots] = np.repeat(np.asarray(row, dtype=np.int64) + 1, inst.slots_per_segment(job))
        np.testing.assert_array_equal(local, expected_local)
        assert local.dtype == expected_local.dtype and table.dtype == expected_table.dtype


def test_another_case_on_the_same_day_and_forecast_gets_its_own_plans(tmp_path):
    """The cache key covers the whole instance: job B's target halved (same day, same forecast) is another file
    and another plan, never the first case's plan read back (until 2026-12-02 the key was the forecast only)."""
    inst = dayahead_instance(1)
    other = dataclasses.replace(inst, jobs=(inst.jobs[0], dataclasses.replace(
        inst.jobs[1], tranche_tokens=inst.jobs[1].tranche_tokens / 2)))
    assert other.forecast is inst.forecast and other.day == inst.day
    first = ForecastPlans(cache_dir=tmp_path)
    made = first.issue_plans(inst)
    again = ForecastPlans(cache_dir=tmp_path)
    theirs = again.issue_plans(other)
    assert again.oracle().seconds  # solved, not read
    assert len(list(tmp_path.glob("*.json"))) == 2
    assert theirs != made  # a smaller target is planned with less running
    assert again.issue_plans(inst) == made and len(list(tmp_path.glob("*.json"))) == 2
