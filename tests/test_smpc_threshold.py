"""smpc's centred scenarios and significance threshold (docs/uncertainty.md)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from agents.days import split_days
from agents.mpc import mpc_schedule
from agents.policies import PolicySettings, run_policy
from agents.smpc import centre_scenarios, scenario_subs, smpc_schedule
from aidc_env.errors import run_cli
from aidc_env.information import Forecast, outlook
from experiments import smpc_threshold
from experiments.smpc_threshold import validation_split
from tests.test_policies_uncertainty import DAYAHEAD, horizon_instance


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(1, 6), st.integers(1, 12), st.data())
def test_centred_scenarios_have_the_point_forecast_as_mean_and_stay_within_bounds(s, n, data):
    unit = st.floats(0, 1, allow_nan=False)
    point = data.draw(arrays(float, n, elements=unit))
    scen = data.draw(arrays(float, (s, n), elements=unit))
    out = centre_scenarios(point, scen, 0.0, 1.0)
    np.testing.assert_allclose(out.mean(axis=0), point, atol=1e-12)
    assert out.min() >= -1e-12 and out.max() <= 1 + 1e-12
    free = centre_scenarios(point, scen)  # no bounds: the deviations are kept whole
    np.testing.assert_allclose(free - point, scen - scen.mean(axis=0), atol=1e-12)


@pytest.mark.parametrize("start", [0, 12, 30])
def test_smpc_scenarios_are_centred_on_the_point_forecast_known_at_the_slot(start):
    inst = horizon_instance(days=2, scenarios=3, seed=4)
    subs = scenario_subs(inst, start, [inst.jobs[0].initial_mode], [0.0], [0], "dayahead", 3)
    price, shape = outlook(inst, start, "dayahead")
    np.testing.assert_allclose(np.mean([sub.price_usd_per_mwh for sub in subs], axis=0), price, atol=1e-9)
    np.testing.assert_allclose(np.mean([sub.renewable_shape for sub in subs], axis=0), shape, atol=1e-9)
    assert all(sub.renewable_shape.min() >= 0 and sub.renewable_shape.max() <= 1 for sub in subs)
    raw = np.stack([outlook(inst, start, "dayahead", scenario=s)[0] for s in range(3)])
    assert not np.allclose(raw.mean(axis=0), price)  # centring did something


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_an_infinite_threshold_smpc_is_mpc_decision_for_decision(seed):
    inst = horizon_instance(days=2, segments_per_day=4, seed=seed)
    oracle = DAYAHEAD.oracle()
    log: list[dict] = []
    assert smpc_schedule(inst, oracle=oracle, threshold_usd=math.inf, log=log) == mpc_schedule(inst, oracle=oracle)
    assert log == []  # no two-stage choice computed at all


@pytest.mark.parametrize("seed", [0, 3])
def test_with_one_scenario_equal_to_the_point_forecast_smpc_is_mpc(seed):
    inst = horizon_instance(days=2, segments_per_day=4, seed=seed)
    f = inst.forecast
    one = dataclasses.replace(inst, forecast=Forecast(f.price_usd_per_mwh, f.renewable_shape,
                                                      f.price_usd_per_mwh[None, :], f.renewable_shape[None, :],
                                                      persistence_price_usd_per_mwh=f.persistence_price_usd_per_mwh))
    oracle = DAYAHEAD.oracle()
    log: list[dict] = []
    assert smpc_schedule(one, oracle=oracle, log=log) == mpc_schedule(one, oracle=oracle)
    assert log and not any(e["departed"] for e in log)
    # centred, any single scenario collapses onto the point forecast: smpc is mpc again
    first = dataclasses.replace(inst, forecast=dataclasses.replace(
        f, price_scenarios_usd_per_mwh=f.price_scenarios_usd_per_mwh[:1],
        renewable_shape_scenarios=f.renewable_shape_scenarios[:1]))
    assert smpc_schedule(first, oracle=oracle) == mpc_schedule(first, oracle=oracle)


def test_smpc_departs_only_for_an_expected_saving_above_the_threshold():
    inst = horizon_instance(days=2, segments_per_day=4, seed=2)
    settings_ = PolicySettings(information="dayahead", smpc_threshold_usd=0.0)
    log: list[dict] = []
    smpc_schedule(inst, oracle=DAYAHEAD.oracle(), threshold_usd=0.0, log=log)
    for e in log:
        assert e["departed"] == (e["best_expected_usd"] < e["mpc_expected_usd"])
        assert e["best_expected_usd"] <= e["mpc_expected_usd"] + 1e-6
    schedule, info = run_policy("smpc", inst, settings_)
    assert info["replanning_points"] == len(log) and info["departures"] == sum(e["departed"] for e in log)


@pytest.mark.parametrize("t", [7, 30])
def test_smpc_with_a_zero_threshold_does_not_read_the_truth_from_slot_t_on(t):
    """The departing path (threshold 0) is causal too (the default settings are checked in test_leakage.py)."""
    inst = horizon_instance(days=2, segments_per_day=2, seed=5)
    rng = np.random.default_rng(t)
    price, shape = inst.price_usd_per_mwh.copy(), inst.renewable_shape.copy()
    price[t:] = rng.uniform(-100, 900, inst.slots - t)
    shape[t:] = rng.uniform(0, 1, inst.slots - t)
    moved = dataclasses.replace(inst, price_usd_per_mwh=price, renewable_shape=shape)
    settings_ = PolicySettings(information="dayahead", smpc_threshold_usd=0.0)
    before, after = run_policy("smpc", inst, settings_)[0], run_policy("smpc", moved, settings_)[0]
    started = -(-t // inst.slots_per_segment(inst.jobs[0]))
    assert before.mode_lists()[0][:started] == after.mode_lists()[0][:started]


def test_validation_days_are_training_days_and_left_out_of_the_fit():
    dates = [f"2023-{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 29)]
    forecast_dates = dates[60:]
    fit, validation = validation_split(dates, forecast_dates, 12)
    train, held = split_days(dates)
    assert len(validation) == 12 and set(validation) <= set(train) & set(forecast_dates)
    assert not set(validation) & set(fit) and not set(held) & (set(fit) | set(validation))
    assert set(fit) | set(validation) == set(train)


def test_validation_weeks_lie_within_training_days_and_none_of_their_days_is_fitted():
    dates = [f"2023-{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 29)]  # gaps at month ends
    forecast_dates = dates[60:300]
    starts = [d for d in dates if all(f"{d[:8]}{int(d[8:]) + k:02d}" in dates for k in range(7))]
    fit, validation = validation_split(dates, forecast_dates, 5, starts=starts, horizon_days=7)
    train, held = split_days(dates)
    assert len(validation) == 5 and set(validation) <= set(train) & set(starts)
    weeks = [[f"{d[:8]}{int(d[8:]) + k:02d}" for k in range(7)] for d in validation]
    for week in weeks:
        assert set(week) <= set(forecast_dates)  # forecasts for every day
        assert not set(week) & set(fit)  # out of sample for the forecaster
        assert set(week) <= set(train)  # clear of the held-out weeks
    assert set(fit) == set(train) - {day for week in weeks for day in week}
    assert not set(held) & set(fit)
    # D = 1 without starts is the day split unchanged.
    assert validation_split(dates, forecast_dates, 12) == validation_split(dates, forecast_dates, 12, horizon_days=1)


def test_scenario_calibration_compares_the_bootstrapped_residuals_with_the_issued_forecasts_error():
    """By hand: residuals |±3|, |6| → 4; the issued forecast 10 $/MWh on both days, the truth 12 then 5 → 3.5."""
    from aidc_env.profiles import DayProfile, ProfileSet

    class Issued:
        price_residuals = np.array([[3.0] * 24, [-3.0] * 24, [6.0] * 24])

        def price(self, profiles, forecasts, date):
            return np.full(24, 10.0)

    days = {d: DayProfile(d, np.full(24, p), np.zeros(24), np.zeros(24))
            for d, p in (("2023-05-01", 12.0), ("2023-05-02", 5.0))}
    calibration = smpc_threshold.scenario_calibration(Issued(), ProfileSet(days, {}, 1.0, "hand"), None, list(days))
    assert calibration == {"scenario_residual_mae_usd_per_mwh": 4.0, "issued_forecast_mae_usd_per_mwh": 3.5}


@pytest.mark.parametrize(("argv", "field"), [(["--horizon-days", "0"], "horizon-days"),
                                             (["--horizon-days", "2.5"], "horizon-days"),
                                             (["--thresholds", "1,x"], "thresholds")])
def test_bad_tuning_input_exits_2_with_one_line(argv, field, tmp_path, capsys):
    code = run_cli(smpc_threshold.main, ["--profiles", "p.csv", "--forecasts", "f.csv",
                                         "--json", str(tmp_path / "t.json"), *argv])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1 and field in err[0], err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("t", [7, 30])
def test_smpc_deciding_per_issue_meets_the_targets_and_does_not_read_the_truth_from_t(t):
    """One first decision up to the next forecast issue (slot 10 of day 1 here)."""
    inst = horizon_instance(days=2, segments_per_day=4, seed=6, scenarios=3)
    log: list[dict] = []
    schedule = smpc_schedule(inst, oracle=DAYAHEAD.oracle(), threshold_usd=0.0, log=log)
    assert [e["slot"] for e in log] == [0, 12]  # issues at slots -14 and 10: stages 0..12 and 12..48
    assert simulate_met(inst, schedule)
    rng = np.random.default_rng(t)
    price = inst.price_usd_per_mwh.copy()
    price[t:] = rng.uniform(-100, 900, inst.slots - t)
    moved = dataclasses.replace(inst, price_usd_per_mwh=price)
    after = smpc_schedule(moved, oracle=DAYAHEAD.oracle(), threshold_usd=0.0)
    started = -(-t // inst.slots_per_segment(inst.jobs[0]))
    assert schedule.mode_lists()[0][:started] == after.mode_lists()[0][:started]
    assert (smpc_schedule(inst, oracle=DAYAHEAD.oracle(), threshold_usd=math.inf)
            == mpc_schedule(inst, oracle=DAYAHEAD.oracle()))


def simulate_met(inst, schedule) -> bool:
    from aidc_env.simulator import simulate

    return simulate(inst, schedule).metrics.tranches_met
