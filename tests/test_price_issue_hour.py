"""A price issued later than the renewables (``Forecast.price_issue_hour``): what is known when, and that no view or
decision before a day's price issue depends on that day's price forecast.

The CAISO day-ahead market publishes its LMP at about 13:00 of d − 1, three hours after the package issues the load,
solar and wind forecasts (10:00). With ``price_issue_hour=13`` the day's renewables are known from 10:00 and its price
from 13:00; in between, the day is priced by the outlook of the previous issue.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aidc_env.errors import InputError
from aidc_env.information import ISSUE_HOUR, Forecast, issue_slot, issue_slots, issued_days, outlook
from aidc_env.instance import Instance
from tests.test_information import SLOTS_PER_DAY, horizon_instance, with_issue_outlook
from tests.test_leakage import CAUSAL_POLICIES, dayahead_instance, dayahead_settings, started_before

LATE_HOUR = 13
"""The CAISO day-ahead market's publication hour (aidc_env.dayahead.add_price_issue_hour_argument)."""


def late(inst: Instance, hour: int = LATE_HOUR) -> Instance:
    return dataclasses.replace(inst, forecast=dataclasses.replace(inst.forecast, price_issue_hour=hour))


def test_issue_slots_hold_the_renewables_and_the_later_price_issue():
    inst = horizon_instance(days=3)
    assert issue_slots(inst) == [ISSUE_HOUR, SLOTS_PER_DAY + ISSUE_HOUR]
    assert issue_slots(late(inst)) == [ISSUE_HOUR, LATE_HOUR, SLOTS_PER_DAY + ISSUE_HOUR, SLOTS_PER_DAY + LATE_HOUR]
    assert [issue_slot(inst, d, LATE_HOUR) for d in range(3)] == [LATE_HOUR - 24, LATE_HOUR, 24 + LATE_HOUR]
    assert [issued_days(inst, t, LATE_HOUR) for t in (0, 12, 13, 36, 37)] == [1, 1, 2, 2, 3]


def test_between_the_two_issues_the_day_has_its_renewables_and_the_last_issues_price():
    """By hand on 3 days of hourly slots, with an issue outlook (row k: what is known at day k's issue)."""
    inst = late(with_issue_outlook(horizon_instance(days=3)))
    fc = inst.forecast
    rows = fc.issue_outlook_price_usd_per_mwh
    for t in (ISSUE_HOUR, LATE_HOUR - 1):  # day 1's renewables issued, its price not yet: row 0's outlook
        price, shape = outlook(inst, t, "dayahead")
        np.testing.assert_array_equal(price[: 24 - t], fc.price_usd_per_mwh[t:24])
        np.testing.assert_array_equal(price[24 - t:], rows[0, 24:])
        np.testing.assert_array_equal(shape[: 48 - t], fc.renewable_shape[t:48])  # day 1 as issued
        np.testing.assert_array_equal(shape[48 - t:], fc.renewable_shape[24:48])  # day 2 repeats day 1
    price, _ = outlook(inst, LATE_HOUR, "dayahead")  # day 1's price issued: row 1 for day 2
    np.testing.assert_array_equal(price[: 48 - LATE_HOUR], fc.price_usd_per_mwh[LATE_HOUR:48])
    np.testing.assert_array_equal(price[48 - LATE_HOUR:], rows[1, 48:])
    t = 24 + LATE_HOUR - 1
    price, shape = outlook(inst, t, "dayahead")
    np.testing.assert_array_equal(price[48 - t:], rows[1, 48:])
    np.testing.assert_array_equal(shape, fc.renewable_shape[t:])
    price, _ = outlook(inst, 24 + LATE_HOUR, "dayahead")
    np.testing.assert_array_equal(price, fc.price_usd_per_mwh[24 + LATE_HOUR:])
    # A scenario's day not yet priced repeats its last priced day, its renewables are issued.
    for s in range(fc.n_scenarios):
        price, shape = outlook(inst, LATE_HOUR - 1, "dayahead", scenario=s)
        np.testing.assert_array_equal(price[24 - 12: 48 - 12], fc.price_scenarios_usd_per_mwh[s, :24])
        np.testing.assert_array_equal(shape[: 48 - 12], fc.renewable_shape_scenarios[s, 12:48])
    # With the price issued with the renewables (the default) the same slots see day 1's price.
    price, _ = outlook(with_issue_outlook(horizon_instance(days=3)), LATE_HOUR - 1, "dayahead")
    np.testing.assert_array_equal(price[: 48 - 12], fc.price_usd_per_mwh[12:48])


def unpriced_forecast_moved(inst: Instance, t: int, seed: int) -> Instance:
    """``inst`` with other price forecasts (point, scenarios, issue outlook rows) for every day whose price is not
    issued at slot t; the renewables unchanged."""
    rng = np.random.default_rng(seed)
    fc = inst.forecast
    priced = issued_days(inst, t, fc.price_issue_hour)
    start = priced * inst.slots_per_day
    price, scen = fc.price_usd_per_mwh.copy(), fc.price_scenarios_usd_per_mwh.copy()
    price[start:] = rng.uniform(-100, 900, inst.slots - start)
    scen[:, start:] = rng.uniform(-100, 900, (scen.shape[0], inst.slots - start))
    rows = None
    if fc.issue_outlook_price_usd_per_mwh is not None:
        rows = fc.issue_outlook_price_usd_per_mwh.copy()
        rows[priced:] = rng.uniform(-100, 900, rows[priced:].shape)
    return dataclasses.replace(inst, forecast=dataclasses.replace(
        fc, price_usd_per_mwh=price, price_scenarios_usd_per_mwh=scen, issue_outlook_price_usd_per_mwh=rows))


@settings(max_examples=60, deadline=None)
@given(t=st.integers(0, 72), seed=st.integers(0, 1000), hour=st.integers(ISSUE_HOUR, 23))
def test_no_view_at_slot_t_depends_on_a_price_forecast_not_issued_by_t(t, seed, hour):
    inst = horizon_instance(days=3, seed=seed)
    inst = late(with_issue_outlook(inst, seed) if seed % 2 else inst, hour)
    t = min(t, inst.slots)
    moved = unpriced_forecast_moved(inst, t, seed + 1)
    for scenario in (None, *range(inst.forecast.n_scenarios)):
        for a, b in zip(outlook(inst, t, "dayahead", scenario), outlook(moved, t, "dayahead", scenario), strict=True):
            np.testing.assert_array_equal(a, b)


def test_the_check_has_teeth_a_price_issued_at_ten_is_seen_before_thirteen():
    inst = with_issue_outlook(horizon_instance(days=3))
    t = LATE_HOUR - 1
    moved = unpriced_forecast_moved(late(inst), t, 5)
    moved = dataclasses.replace(moved, forecast=dataclasses.replace(moved.forecast, price_issue_hour=ISSUE_HOUR))
    assert not np.array_equal(outlook(inst, t, "dayahead")[0], outlook(moved, t, "dayahead")[0])


@pytest.mark.parametrize("policy", CAUSAL_POLICIES)
def test_no_decision_before_the_price_issue_depends_on_the_issued_days_price(policy):
    """Two days of hourly slots, segments of 6 slots: the segment starting at slot 12 is decided after day 1's
    renewables (10:00) and before its price (13:00), so with the price issued at 13:00 no policy's decisions of the
    segments started before slot 13 move with day 1's price forecast."""
    from agents.policies import run_policy

    inst = late(dayahead_instance(1))
    moved = unpriced_forecast_moved(inst, LATE_HOUR - 1, 11)
    assert not np.array_equal(moved.forecast.price_usd_per_mwh, inst.forecast.price_usd_per_mwh)
    before, after = (run_policy(policy, case, dayahead_settings())[0] for case in (inst, moved))
    assert started_before(inst, before, LATE_HOUR) == started_before(inst, after, LATE_HOUR)


@pytest.mark.parametrize("policy", ["mpc", "smpc"])
def test_the_check_has_teeth_with_the_price_issued_at_ten_the_same_decisions_move(policy):
    from agents.policies import run_policy

    at_ten = dayahead_instance(1)
    moved = unpriced_forecast_moved(late(at_ten), LATE_HOUR - 1, 11)
    moved = dataclasses.replace(moved, forecast=dataclasses.replace(moved.forecast, price_issue_hour=ISSUE_HOUR))
    before, after = (run_policy(policy, case, dayahead_settings())[0] for case in (at_ten, moved))
    assert started_before(at_ten, before, LATE_HOUR) != started_before(at_ten, after, LATE_HOUR)


def test_mpc_replans_at_the_first_boundary_after_each_issue():
    """On 2 days with segments of 6 slots: MPC re-solves at slot 0, then at the boundary after the renewables'
    issue (slot 12) and, with a price issued at 13:00, again at the next one (slot 18)."""
    from agents.mpc import mpc_schedule
    from oracle.rolling import RollingOracle

    for inst, expected in ((dayahead_instance(2), [0, 12]), (late(dayahead_instance(2)), [0, 12, 18])):
        slots = []
        mpc_schedule(inst, "dayahead", oracle=RollingOracle(), on_replan=lambda slot, plan: slots.append(slot))
        assert slots == expected


def test_the_price_issue_hour_round_trips_and_is_checked():
    inst = late(with_issue_outlook(horizon_instance(days=2)))
    back = Instance.from_dict(json.loads(inst.to_json()))
    assert back.forecast.price_issue_hour == LATE_HOUR
    assert "price_issue_hour" not in json.loads(horizon_instance(days=2).to_json())["forecast"]
    fc = inst.forecast
    for bad in (ISSUE_HOUR - 1, 24, 12.5, True):
        with pytest.raises(InputError, match="price_issue_hour"):
            dataclasses.replace(fc, price_issue_hour=bad)
    assert Forecast.from_dict(fc.to_dict()).price_issue_hour == LATE_HOUR
