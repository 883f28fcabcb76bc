"""Decision rules under day-ahead information: exactness, targets, leakage, non-anticipativity."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from agents.mpc import rest_of_horizon, sub_instance
from agents.policies import PolicySettings, run_policy
from agents.smpc import centre_scenarios, scenario_subs, stochastic_step
from aidc_env.information import Forecast
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.simulator import simulate
from oracle.rolling import RollingOracle
from tests.conftest import tiny_instance, tiny_job

HOURS = 24
CAUSAL_RULES = ("mpc", "smpc", "dayahead-plan", "forecast-plan", "greedy", "fixed")
ALL_RULES = ("hindsight", *CAUSAL_RULES)
SLOW_TOKENS_PER_HOUR = 10.0 * SECONDS_PER_HOUR  # tiny_job's mode 0: 10 tokens/s
DAYAHEAD = PolicySettings(information="dayahead")
"""Shared by the tests: its oracle's built models are reused across them (as across days in an evaluation)."""


def horizon_instance(days: int = 2, segments_per_day: int = 4, scenarios: int = 2, seed: int = 0,
                     perfect: bool = False) -> Instance:
    """A tiny instance of ``days`` days with a forecast (the truth itself if ``perfect``)."""
    rng = np.random.default_rng(seed)
    T = days * HOURS
    tranche = 0.4 * SLOW_TOKENS_PER_HOUR * T  # 40% of a day in the slow mode, restarts aside
    price, shape = rng.uniform(-20, 200, T), rng.uniform(0, 1, T)
    base = tiny_instance([tiny_job(segments=segments_per_day * days, tranche_tokens=tranche)], price, shape)
    if perfect:
        forecast = Forecast(price, shape, np.tile(price, (scenarios, 1)), np.tile(shape, (scenarios, 1)),
                            persistence_price_usd_per_mwh=price)
    else:
        forecast = Forecast(price * rng.uniform(0.5, 1.5, T), rng.uniform(0, 1, T),
                            price * rng.uniform(0.3, 1.7, (scenarios, T)), rng.uniform(0, 1, (scenarios, T)),
                            persistence_price_usd_per_mwh=price * rng.uniform(0.2, 1.8, T))
    return dataclasses.replace(base, horizon_days=days, forecast=forecast)


def cost(inst: Instance, schedule) -> float:
    return simulate(inst, schedule).metrics.operating_cost_usd


def test_with_a_perfect_forecast_mpc_and_smpc_equal_the_hindsight_optimum():
    inst = horizon_instance(days=1, perfect=True)
    settings = DAYAHEAD
    best = cost(inst, run_policy("hindsight", inst, settings)[0])
    for rule in ("mpc", "smpc", "dayahead-plan", "forecast-plan"):
        assert cost(inst, run_policy(rule, inst, settings)[0]) == pytest.approx(best, rel=1e-9)
    perfect = PolicySettings(information="perfect")
    multi = horizon_instance(days=2, seed=3)
    best = cost(multi, run_policy("hindsight", multi, perfect)[0])
    for rule in ("mpc", "smpc"):
        assert cost(multi, run_policy(rule, multi, perfect)[0]) == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_every_rule_meets_every_target_on_the_truth_and_every_scenario(seed):
    inst = horizon_instance(days=2, segments_per_day=2, seed=seed)
    settings = DAYAHEAD
    for rule in ALL_RULES:
        schedule, _ = run_policy(rule, inst, settings)
        assert simulate(inst, schedule).metrics.tranches_met, rule
        for s in range(inst.forecast.n_scenarios):  # tokens do not depend on prices: any realisation
            scenario = dataclasses.replace(inst, price_usd_per_mwh=inst.forecast.price_scenarios_usd_per_mwh[s],
                                           renewable_shape=inst.forecast.renewable_shape_scenarios[s])
            assert simulate(scenario, schedule).metrics.tranches_met, (rule, s)


@pytest.mark.parametrize("t", [7, 30])
def test_no_rule_reads_the_truth_from_slot_t_on(t):
    inst = horizon_instance(days=2, segments_per_day=2, seed=5)
    rng = np.random.default_rng(t)
    price, shape = inst.price_usd_per_mwh.copy(), inst.renewable_shape.copy()
    price[t:] = rng.uniform(-100, 900, inst.slots - t)
    shape[t:] = rng.uniform(0, 1, inst.slots - t)
    moved = dataclasses.replace(inst, price_usd_per_mwh=price, renewable_shape=shape)
    for rule in CAUSAL_RULES:
        before, after = run_policy(rule, inst, DAYAHEAD)[0].modes, run_policy(rule, moved, DAYAHEAD)[0].modes
        for job, a, b in zip(inst.jobs, before, after, strict=True):
            started = -(-t // inst.slots_per_segment(job))  # segments starting before t
            assert list(a[:started]) == list(b[:started]), rule


def two_scenario_day(seed: int) -> Instance:
    """One job, 4 hourly segments, two price scenarios far apart: the first decision must hedge."""
    rng = np.random.default_rng(seed)
    T = 4
    job = tiny_job(segments=T, tranche_tokens=2 * SLOW_TOKENS_PER_HOUR, restart_hours=0.25)
    truth = rng.uniform(0, 100, T)
    base = tiny_instance([job], truth, np.zeros(T), n_gpus=4)
    scenarios = np.stack([rng.uniform(-50, 150, T), rng.uniform(-50, 150, T)])
    return dataclasses.replace(base, forecast=Forecast(truth, np.zeros(T), scenarios, np.zeros((2, T))))


def brute_force_first_stage(inst: Instance) -> dict[int, float]:
    """Expected cost of each first choice with the best recourse in each scenario, by enumeration."""
    job = inst.jobs[0]
    choices = list(range(job.n_modes)) + [PAUSE]
    values = {}
    for first in choices:
        per_scenario = []
        f = inst.forecast  # smpc's scenarios: centred on the point forecast
        prices = centre_scenarios(f.price_usd_per_mwh, f.price_scenarios_usd_per_mwh)
        shapes = centre_scenarios(f.renewable_shape, f.renewable_shape_scenarios, 0.0, 1.0)
        for s in range(f.n_scenarios):
            scenario = dataclasses.replace(inst, price_usd_per_mwh=prices[s], renewable_shape=shapes[s])
            best = np.inf
            for rest in itertools.product(choices, repeat=job.segments - 1):
                metrics = simulate(scenario, [[first, *rest]]).metrics
                if metrics.tranches_met and metrics.capacity_ok:
                    best = min(best, metrics.operating_cost_usd)
            per_scenario.append(best)
        values[first] = float(np.mean(per_scenario))
    return values


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_smpc_first_stage_is_the_brute_force_stochastic_optimum_among_its_candidates(seed):
    inst = two_scenario_day(seed)
    oracle = RollingOracle(mip_gap=1e-9)
    state = ([inst.jobs[0].initial_mode], [0.0])
    subs = scenario_subs(inst, 0, *state, [0])
    point = rest_of_horizon(inst, 0, *state, ([inst.forecast.price_usd_per_mwh], [inst.forecast.renewable_shape]))
    result = oracle.solve(point)
    point_plan = (result.schedule, [[0] * inst.jobs[0].segments])
    brute = brute_force_first_stage(inst)
    step = stochastic_step(subs, 1, oracle, point_plan)
    # Every candidate is costed exactly (the brute force's expected cost of its first choice), MPC's first.
    for decision, expected in zip(step.candidates, step.candidate_costs_usd, strict=True):
        assert expected == pytest.approx(brute[decision[0][0][0]], rel=1e-9)
    assert step.candidates[0][0][0][0] == point_plan[0][0][0]
    assert step.expected_cost_usd == pytest.approx(min(step.candidate_costs_usd), rel=1e-12)
    assert step.expected_cost_usd >= min(brute.values()) - 1e-9
    # Each scenario's own optimum is a candidate: the choice is never dearer than the best of them.
    for sub in subs:
        own = oracle.solve(sub).schedule[0][0]
        assert step.expected_cost_usd <= brute[own] + 1e-9


def test_sub_instances_of_a_horizon_carry_the_forecast_slice():
    inst = horizon_instance(days=2)
    sub = sub_instance(inst, 12, 36, [0], [100.0], ([inst.price_usd_per_mwh[12:36]], [inst.renewable_shape[12:36]]))
    assert sub.slots == 24 and sub.horizon_days == 1 and sub.jobs[0].segments == 4
    assert sub.jobs[0].tranche_tokens == pytest.approx(inst.jobs[0].tranche_tokens - 100.0)
    np.testing.assert_array_equal(sub.forecast.price_scenarios_usd_per_mwh,
                                  inst.forecast.price_scenarios_usd_per_mwh[:, 12:36])


def test_the_dayahead_plan_plans_on_the_persistence_price_and_the_forecast_plan_on_the_forecasters():
    from agents.open_loop import viewed, with_persistence_price

    inst = horizon_instance(days=1, seed=11)
    oracle = DAYAHEAD.oracle()
    on_persistence = oracle.solve(viewed(with_persistence_price(inst), "dayahead", 0)).schedule
    on_forecast = oracle.solve(viewed(inst, "dayahead", 0)).schedule
    assert run_policy("dayahead-plan", inst, DAYAHEAD)[0].mode_lists() == [list(r) for r in on_persistence]
    assert run_policy("forecast-plan", inst, DAYAHEAD)[0].mode_lists() == [list(r) for r in on_forecast]
    assert run_policy("forecast-plan", inst, DAYAHEAD)[0].mode_lists() == \
        run_policy("mpc", inst, DAYAHEAD)[0].mode_lists()  # one day


def test_the_dayahead_plan_needs_the_persistence_price():
    from aidc_env.errors import InputError

    inst = horizon_instance(days=1)
    bare = dataclasses.replace(inst, forecast=dataclasses.replace(inst.forecast, persistence_price_usd_per_mwh=None))
    with pytest.raises(InputError, match="persistence"):
        run_policy("dayahead-plan", bare, DAYAHEAD)


def test_the_forecast_keeps_its_persistence_price_through_json():
    inst = horizon_instance(days=2)
    again = Forecast.from_dict(inst.forecast.to_dict())
    np.testing.assert_array_equal(again.persistence_price_usd_per_mwh, inst.forecast.persistence_price_usd_per_mwh)
    bare = dataclasses.replace(inst.forecast, persistence_price_usd_per_mwh=None)
    assert "persistence_price_usd_per_mwh" not in bare.to_dict()
    assert Forecast.from_dict(bare.to_dict()).persistence_price_usd_per_mwh is None


