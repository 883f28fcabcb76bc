"""What is known when: forecasts carried by instances, issue times, and views that never see the future."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aidc_env.errors import InputError
from aidc_env.information import ISSUE_HOUR, Forecast, issue_slot, issued_days, outlook, realised
from aidc_env.instance import Instance
from tests.conftest import tiny_instance, tiny_job

SLOTS_PER_DAY = 24  # tiny instances: hourly slots


def horizon_instance(days: int = 3, scenarios: int = 2, seed: int = 0) -> Instance:
    rng = np.random.default_rng(seed)
    T = days * SLOTS_PER_DAY
    base = tiny_instance([tiny_job(segments=2 * days)], list(rng.uniform(-20, 200, T)), list(rng.uniform(0, 1, T)))
    forecast = Forecast(price_usd_per_mwh=rng.uniform(0, 100, T), renewable_shape=rng.uniform(0, 1, T),
                        price_scenarios_usd_per_mwh=rng.uniform(0, 100, (scenarios, T)),
                        renewable_shape_scenarios=rng.uniform(0, 1, (scenarios, T)), source="test")
    return dataclasses.replace(base, horizon_days=days, forecast=forecast)


def test_issue_times_are_the_day_before_at_ten():
    inst = horizon_instance(days=3)
    assert [issue_slot(inst, d) for d in range(3)] == [ISSUE_HOUR - 24, ISSUE_HOUR, 24 + ISSUE_HOUR]
    assert issued_days(inst, 0) == 1
    assert issued_days(inst, ISSUE_HOUR - 1) == 1
    assert issued_days(inst, ISSUE_HOUR) == 2
    assert issued_days(inst, 24 + ISSUE_HOUR) == 3


def test_perfect_information_is_the_truth_and_dayahead_the_issued_forecast():
    inst = horizon_instance(days=3)
    price, shape = outlook(inst, 5, "perfect")
    np.testing.assert_array_equal(price, inst.price_usd_per_mwh[5:])
    np.testing.assert_array_equal(shape, inst.renewable_shape[5:])
    # Before 10:00 of day 0 only day 0 is issued: days 1 and 2 repeat day 0's forecast.
    price, shape = outlook(inst, 5, "dayahead")
    fc = inst.forecast
    np.testing.assert_array_equal(price[: 24 - 5], fc.price_usd_per_mwh[5:24])
    np.testing.assert_array_equal(price[24 - 5: 48 - 5], fc.price_usd_per_mwh[:24])
    np.testing.assert_array_equal(price[48 - 5:], fc.price_usd_per_mwh[:24])
    np.testing.assert_array_equal(shape[48 - 5:], fc.renewable_shape[:24])
    # After 10:00 of day 0, day 1 is known; day 2 repeats day 1.
    price, _ = outlook(inst, 30, "dayahead")
    np.testing.assert_array_equal(price[: 48 - 30], fc.price_usd_per_mwh[30:48])
    np.testing.assert_array_equal(price[48 - 30:], fc.price_usd_per_mwh[24:48])
    # Scenario views follow the same rule.
    price, shape = outlook(inst, 60, "dayahead", scenario=1)
    np.testing.assert_array_equal(price, fc.price_scenarios_usd_per_mwh[1, 60:])
    np.testing.assert_array_equal(shape, fc.renewable_shape_scenarios[1, 60:])


@settings(max_examples=60, deadline=None)
@given(t=st.integers(0, 72), seed=st.integers(0, 1000), days=st.integers(1, 3))
def test_no_view_at_slot_t_depends_on_the_truth_from_t_on(t, seed, days):
    inst = horizon_instance(days=days, seed=seed)
    if seed % 2:
        inst = with_issue_outlook(inst, seed)
    t = min(t, inst.slots)
    rng = np.random.default_rng(seed + 1)
    price = inst.price_usd_per_mwh.copy()
    shape = inst.renewable_shape.copy()
    price[t:] = rng.uniform(-100, 900, inst.slots - t)
    shape[t:] = rng.uniform(0, 1, inst.slots - t)
    moved = dataclasses.replace(inst, price_usd_per_mwh=price, renewable_shape=shape)
    for scenario in (None, *range(inst.forecast.n_scenarios)):
        for a, b in zip(outlook(inst, t, "dayahead", scenario), outlook(moved, t, "dayahead", scenario), strict=True):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(realised(inst, t), realised(moved, t), strict=True):
        np.testing.assert_array_equal(a, b)


def with_issue_outlook(inst: Instance, seed: int = 7) -> Instance:
    """``inst`` whose forecast carries an issue outlook: row k = issued days 0..k, then row k's own later days."""
    rng = np.random.default_rng(seed)
    fc = inst.forecast
    rows = np.tile(fc.price_usd_per_mwh, (inst.horizon_days, 1))
    for k in range(inst.horizon_days):
        rows[k, (k + 1) * SLOTS_PER_DAY:] = rng.uniform(200, 300, inst.slots - (k + 1) * SLOTS_PER_DAY)
    return dataclasses.replace(inst, forecast=dataclasses.replace(fc, issue_outlook_price_usd_per_mwh=rows))


def test_later_days_take_the_outlook_of_the_last_issue():
    inst = with_issue_outlook(horizon_instance(days=3))
    fc = inst.forecast
    rows = fc.issue_outlook_price_usd_per_mwh
    # Before 10:00 of day 0: day 0 issued, days 1 and 2 from row 0; renewables still repeat day 0.
    price, shape = outlook(inst, 5, "dayahead")
    np.testing.assert_array_equal(price[: 24 - 5], fc.price_usd_per_mwh[5:24])
    np.testing.assert_array_equal(price[24 - 5:], rows[0, 24:])
    np.testing.assert_array_equal(shape[48 - 5:], fc.renewable_shape[:24])
    # After 10:00 of day 0: day 1 issued, day 2 from row 1; after 10:00 of day 1 everything is issued.
    price, _ = outlook(inst, 30, "dayahead")
    np.testing.assert_array_equal(price[: 48 - 30], fc.price_usd_per_mwh[30:48])
    np.testing.assert_array_equal(price[48 - 30:], rows[1, 48:])
    price, _ = outlook(inst, 50, "dayahead")
    np.testing.assert_array_equal(price, fc.price_usd_per_mwh[50:])
    # A scenario's issued days are its own; its later days repeat its last issued day (smpc re-centres them on the
    # point outlook; docs/uncertainty.md, "Stochastic MPC").
    for s in range(fc.n_scenarios):
        price, shape = outlook(inst, 5, "dayahead", scenario=s)
        np.testing.assert_array_equal(price[: 24 - 5], fc.price_scenarios_usd_per_mwh[s, 5:24])
        np.testing.assert_array_equal(price[24 - 5: 48 - 5], fc.price_scenarios_usd_per_mwh[s, :24])
        np.testing.assert_array_equal(price[48 - 5:], fc.price_scenarios_usd_per_mwh[s, :24])
        np.testing.assert_array_equal(shape[48 - 5:], fc.renewable_shape_scenarios[s, :24])
        price, _ = outlook(inst, 30, "dayahead", scenario=s)
        np.testing.assert_array_equal(price[: 48 - 30], fc.price_scenarios_usd_per_mwh[s, 30:48])
        np.testing.assert_array_equal(price[48 - 30:], fc.price_scenarios_usd_per_mwh[s, 24:48])
    # One row per day of the instance, or the view is refused.
    two_rows = dataclasses.replace(fc, issue_outlook_price_usd_per_mwh=rows[:2])
    with pytest.raises(InputError, match="issue_outlook"):
        outlook(dataclasses.replace(inst, forecast=two_rows), 5, "dayahead")
    with pytest.raises(InputError, match="issue_outlook"):
        dataclasses.replace(fc, issue_outlook_price_usd_per_mwh=rows[:, :10])
    with pytest.raises(InputError, match="issue_outlook"):
        dataclasses.replace(fc, issue_outlook_price_usd_per_mwh=np.where(rows > 250, np.inf, rows))


def test_forecast_round_trips_through_the_instance_json():
    inst = with_issue_outlook(horizon_instance(days=2))
    back = Instance.from_dict(json.loads(inst.to_json()))
    assert back.forecast is not None
    np.testing.assert_array_equal(back.forecast.price_scenarios_usd_per_mwh, inst.forecast.price_scenarios_usd_per_mwh)
    np.testing.assert_array_equal(back.forecast.issue_outlook_price_usd_per_mwh,
                                  inst.forecast.issue_outlook_price_usd_per_mwh)
    assert "issue_outlook_price_usd_per_mwh" not in json.loads(horizon_instance(days=2).to_json())["forecast"]
    assert "forecast" not in json.loads(dataclasses.replace(inst, forecast=None).to_json())


def test_bad_forecasts_are_refused():
    inst = horizon_instance(days=2)
    with pytest.raises(InputError, match="forecast"):
        dataclasses.replace(inst, forecast=Forecast(np.zeros(3), np.zeros(3), [], []))
    with pytest.raises(InputError, match="renewable_shape"):
        Forecast(np.zeros(3), np.full(3, 1.5), [], [])
    with pytest.raises(InputError, match="price_usd_per_mwh"):
        Forecast(np.array([0.0, np.nan]), np.zeros(2), [], [])
    with pytest.raises(InputError, match="forecasts"):
        outlook(dataclasses.replace(inst, forecast=None), 0, "dayahead")
    with pytest.raises(InputError, match="information"):
        outlook(inst, 0, "clairvoyant")
