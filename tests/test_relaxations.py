"""Information relaxations of the price forecast (:func:`aidc_env.dayahead.revealed`, the ``mpc-true-*`` rows):
each replaces exactly its part of the forecast by the truth, and with every price and renewable true MPC is the
hindsight optimum."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import evaluate
from agents.policies import RELAXATIONS, PolicySettings, run_policy
from aidc_env.dayahead import REVEALED_PRICES, revealed
from aidc_env.errors import InputError
from aidc_env.information import Forecast, issued_days, outlook
from aidc_env.instance import Instance
from aidc_env.price_forecast import LATER_DAY_REPEAT_WEIGHT
from aidc_env.simulator import simulate
from tests.test_policies_uncertainty import DAYAHEAD, HOURS, cost, horizon_instance

DAYS = 3


def with_issue_outlook(inst: Instance, seed: int = 0) -> Instance:
    """``inst`` whose forecast carries an issue outlook as :func:`aidc_env.dayahead.forecast_of` builds it: row k
    holds the issued days 0..k, then a later-day outlook of its own repeated over the days not issued yet."""
    rng = np.random.default_rng(seed)
    point, days = inst.forecast.price_usd_per_mwh, inst.horizon_days
    later = rng.uniform(0, 150, (days, HOURS))
    rows = np.stack([np.concatenate([point[:(k + 1) * HOURS]] + [later[k]] * (days - k - 1)) for k in range(days)])
    return dataclasses.replace(inst, forecast=dataclasses.replace(inst.forecast, issue_outlook_price_usd_per_mwh=rows))


def expected_price(inst: Instance, prices: str, t: int) -> np.ndarray:
    """By hand: the price of slots t.. that MPC reads at slot t under the relaxation ``prices``."""
    truth, point = inst.price_usd_per_mwh, inst.forecast.price_usd_per_mwh
    rows = inst.forecast.issue_outlook_price_usd_per_mwh
    k = issued_days(inst, t) - 1  # the last issued day
    days = [slice(j * HOURS, (j + 1) * HOURS) for j in range(inst.horizon_days)]
    revised = truth.copy()  # both relaxations reveal the issued days' prices
    issued = revised[:(k + 1) * HOURS]
    error = revised[days[k]] - point[days[k]]
    if prices == "all":
        later = truth[(k + 1) * HOURS:]
    elif rows is not None:  # the outlook moves by the weight of the issued day in it
        later = rows[k, (k + 1) * HOURS:] + LATER_DAY_REPEAT_WEIGHT * np.tile(error, inst.horizon_days - k - 1)
    else:  # later days repeat the last issued day, as revised
        later = np.tile(revised[days[k]], inst.horizon_days - k - 1)
    return np.concatenate([issued, later])[t:]


@pytest.mark.parametrize("issue_outlook", [True, False])
@pytest.mark.parametrize("prices", REVEALED_PRICES)
def test_each_relaxation_reveals_exactly_its_part_of_the_price(prices, issue_outlook):
    inst = horizon_instance(days=DAYS, seed=2)
    inst = with_issue_outlook(inst) if issue_outlook else inst
    relaxed = revealed(inst, prices)
    for t in (0, 9, 10, 33, 34, 47, 60, DAYS * HOURS - 1):
        price, shape = outlook(relaxed, t)
        np.testing.assert_allclose(price, expected_price(inst, prices, t), rtol=0, atol=1e-9, err_msg=f"t={t}")
        np.testing.assert_array_equal(shape, outlook(inst, t)[1])  # renewables stay as forecast
    for name in ("price_scenarios_usd_per_mwh", "renewable_shape_scenarios", "persistence_price_usd_per_mwh"):
        np.testing.assert_array_equal(getattr(relaxed.forecast, name), getattr(inst.forecast, name))
    np.testing.assert_array_equal(relaxed.price_usd_per_mwh, inst.price_usd_per_mwh)  # the truth is untouched
    assert "revealed" in relaxed.forecast.source


@pytest.mark.parametrize("seed", [1, 5])  # seeds where the forecast error costs mpc something
def test_with_true_prices_and_true_renewables_mpc_is_the_hindsight_optimum(seed):
    inst = with_issue_outlook(horizon_instance(days=DAYS, segments_per_day=2, seed=seed), seed)
    # Renewables the same each day, forecast exactly: the later days' repeat of the last issued day is the truth.
    shape = np.tile(np.random.default_rng(seed).uniform(0, 1, HOURS), DAYS)
    forecast = dataclasses.replace(inst.forecast, renewable_shape=shape)
    inst = dataclasses.replace(inst, renewable_shape=shape, forecast=forecast)
    best = cost(inst, run_policy("hindsight", inst, DAYAHEAD)[0])
    schedule, _ = run_policy("mpc-true-price", inst, DAYAHEAD)
    assert cost(inst, schedule) == pytest.approx(best, rel=1e-9)
    assert cost(inst, run_policy("mpc", inst, DAYAHEAD)[0]) > best + 1e-6  # the forecast's error costs something
    assert simulate(inst, schedule).metrics.tranches_met


def test_bad_input_is_refused_with_its_field():
    inst = horizon_instance(days=2)
    with pytest.raises(InputError, match="prices"):
        revealed(inst, "psychic")
    with pytest.raises(InputError, match="forecasts"):
        revealed(dataclasses.replace(inst, forecast=None), "all")
    for name in RELAXATIONS:
        with pytest.raises(InputError, match="policies"):
            run_policy(name, inst, PolicySettings(information="perfect"))


def test_a_policy_refusing_every_instance_is_one_input_error_not_a_traceback(monkeypatch):
    inst = horizon_instance(days=1)

    def refuse(name, inst, settings):
        raise InputError("policies", f"{name} refuses")

    monkeypatch.setattr(evaluate, "run_policy", refuse)
    with pytest.raises(InputError, match="mpc-true-price refused every instance"):
        evaluate.run_all({"d": inst}, ["mpc-true-price"], PolicySettings(information="perfect"), 1)


def test_forecast_is_unchanged_by_a_relaxation():
    inst = with_issue_outlook(horizon_instance(days=DAYS, seed=1))
    before = inst.forecast.to_dict()
    for prices in REVEALED_PRICES:
        revealed(inst, prices)
    assert inst.forecast.to_dict() == before and isinstance(inst.forecast, Forecast)
