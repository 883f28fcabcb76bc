"""Day-ahead forecasts: the CSV reader, the renewable shape, the price forecaster, its scenarios, leakage."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest

from aidc_env import price_forecast
from aidc_env.errors import EXIT_BAD_INPUT, InputError, run_cli
from aidc_env.forecasts import ISSUE_HOUR, DayForecast, ForecastSet, fit_renewable_scale, load_forecasts, main
from aidc_env.price_forecast import (PriceForecaster, fit_price_forecaster, known_prices, persistence_forecast,
                                     seasonal_naive_forecast)
from aidc_env.profiles import DayProfile, ProfileSet
from tests.conftest import tiny_instance, tiny_job

HEADER = "timestamp_utc,local_start,solar_forecast_mw,wind_forecast_mw,load_forecast_mw"


def _rows(first: str, last: str) -> list[list[str]]:
    """Hourly rows of the local days first..last (America/Los_Angeles), values from the UTC hour index."""
    start = pd.Timestamp(first, tz="America/Los_Angeles")
    end = (pd.Timestamp(last) + pd.Timedelta(days=1)).tz_localize("America/Los_Angeles")
    hours = pd.date_range(start.tz_convert("UTC"), end.tz_convert("UTC"), freq="h", inclusive="left")
    rows = []
    for i, t in enumerate(hours):
        local = t.tz_convert("America/Los_Angeles")
        rows.append([t.strftime("%Y-%m-%dT%H:%M:%SZ"), local.strftime("%Y-%m-%d %H:%M%z"),
                     str(float(i)), str(float(2 * i)), str(float(1000 + i))])
    return rows


def _write(tmp_path, rows, header=HEADER, name="fc.csv"):
    path = tmp_path / name
    path.write_text("\n".join([header, *(",".join(r) for r in rows)]) + "\n")
    return path


# ------------------------------------------------------------------------------------------ the reader


def test_reads_days_by_local_clock_hour(tmp_path):
    forecasts = load_forecasts(_write(tmp_path, _rows("2023-06-01", "2023-06-02")))
    assert forecasts.dates() == ["2023-06-01", "2023-06-02"]
    day = forecasts.day("2023-06-02")
    np.testing.assert_array_equal(day.solar_forecast_mw, np.arange(24, 48, dtype=float))
    np.testing.assert_array_equal(day.wind_forecast_mw, 2 * np.arange(24, 48, dtype=float))
    np.testing.assert_array_equal(day.net_load_mw(), 1000 + np.arange(24, 48) - 3 * np.arange(24, 48))
    assert day.hours_in_day == 24 and not forecasts.skipped


def test_dst_days_map_onto_24_clock_hours_like_profiles(tmp_path):
    forecasts = load_forecasts(_write(tmp_path, _rows("2023-03-12", "2023-03-12") + _rows("2023-11-05", "2023-11-05")))
    spring, fall = forecasts.day("2023-03-12"), forecasts.day("2023-11-05")
    assert (spring.hours_in_day, fall.hours_in_day) == (23, 25)
    assert spring.solar_forecast_mw[2] == spring.solar_forecast_mw[1] == 1.0  # 02:00 skipped: holds 01:00
    assert spring.solar_forecast_mw[3] == 2.0
    assert fall.solar_forecast_mw[1] == 1.5  # two 01:00 rows (values 1 and 2): their mean
    assert fall.solar_forecast_mw[2] == 3.0


def test_incomplete_days_are_skipped_with_the_reason(tmp_path):
    rows = _rows("2023-06-01", "2023-06-04")
    rows[30][4] = ""  # load of 06-02 06:00
    rows[50][2] = "n/a?"  # solar of 06-03 02:00
    del rows[5]  # a missing hour of 06-01
    forecasts = load_forecasts(_write(tmp_path, rows))
    assert forecasts.dates() == ["2023-06-04"]
    assert list(forecasts.skipped) == ["2023-06-01", "2023-06-02", "2023-06-03"]
    assert "load_forecast_mw missing in 1 of 24 hours" in forecasts.skipped["2023-06-02"]
    assert "non-numeric solar_forecast_mw" in forecasts.skipped["2023-06-03"]
    assert "23 rows, expected 24" in forecasts.skipped["2023-06-01"]


def test_day_lookup_names_the_skip_reason(tmp_path):
    rows = _rows("2023-06-01", "2023-06-02")
    rows[30][2] = ""
    forecasts = load_forecasts(_write(tmp_path, rows))
    with pytest.raises(InputError, match="2023-06-02 has no forecast: skipped .solar_forecast_mw missing"):
        forecasts.day("2023-06-02")
    with pytest.raises(InputError, match="not a valid date"):
        forecasts.day("June 1")


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (lambda rows: (rows, HEADER.replace(",wind_forecast_mw", "")), "wind_forecast_mw", "required column missing"),
        (lambda rows: ([r if i != 3 else ["yesterday", *r[1:]] for i, r in enumerate(rows)], HEADER),
         "timestamp_utc", "line 5: 'yesterday' is not a timestamp"),
        (lambda rows: ([r if i != 7 else [r[0], "2023-06-01 07:00", *r[2:]] for i, r in enumerate(rows)], HEADER),
         "local_start", "line 9"),
        (lambda rows: ([r if i != 0 else [r[0], "2023-06-01 01:00-0700", *r[2:]] for i, r in enumerate(rows)], HEADER),
         "local_start", "line 2: .* does not match timestamp_utc"),
        (lambda rows: ([], HEADER), "forecasts", "no data rows"),
    ],
)
def test_malformed_files_name_the_column_and_line(tmp_path, edit, field, message):
    rows, header = edit(_rows("2023-06-01", "2023-06-01"))
    with pytest.raises(InputError, match=message) as info:
        load_forecasts(_write(tmp_path, rows, header))
    assert info.value.field == field


def test_empty_and_uncovered_files(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="empty file") as info:
        load_forecasts(empty)
    assert info.value.field == "forecasts"
    rows = [[*r[:2], "", "", ""] for r in _rows("2023-06-01", "2023-06-01")]
    with pytest.raises(InputError, match="no complete day"):
        load_forecasts(_write(tmp_path, rows))


def test_cli_summary_and_bad_input(tmp_path, capsys):
    path = _write(tmp_path, _rows("2023-11-04", "2023-11-06"))
    assert main(["--forecasts", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["days_loaded"] == 3 and info["dst_days"] == {"2023-11-05": 25}
    assert info["issue_hour_local"] == ISSUE_HOUR
    assert main(["--forecasts", str(path)]) == 0
    assert "days loaded: 3 (2023-11-04 to 2023-11-06)" in capsys.readouterr().out
    assert run_cli(main, ["--forecasts", str(tmp_path / "absent.csv")]) == EXIT_BAD_INPUT
    bad = _write(tmp_path, _rows("2023-06-01", "2023-06-01"), HEADER.replace("load", "lode"), "bad.csv")
    assert run_cli(main, ["--forecasts", str(bad)]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err.count("\n") == 2  # one line per failure, no traceback


# --------------------------------------------------------------------------------- synthetic year


FIRST_DAY = dt.date(2023, 5, 1)
N_DAYS = 36


def _date(i: int) -> str:
    return (FIRST_DAY + dt.timedelta(days=i)).isoformat()


TINY_MODEL_ITERATIONS = 40
"""Boosting rounds in these tests (the fits stay well under a second on a busy machine)."""


@pytest.fixture(scope="module", autouse=True)
def tiny_model():
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(price_forecast.MODEL_PARAMS, "max_iter", TINY_MODEL_ITERATIONS)
        yield


@pytest.fixture(scope="module")
def synthetic():
    """Profiles and forecasts of 36 days: price driven by the forecast net load plus noise."""
    rng = np.random.default_rng(7)
    hours = np.arange(24)
    solar_shape = np.clip(np.sin((hours - 6) / 12 * np.pi), 0, None)
    profiles, forecasts = {}, {}
    for i in range(N_DAYS):
        date = _date(i)
        solar_fc = 8000 * solar_shape * rng.uniform(0.7, 1.0)
        wind_fc = rng.uniform(500, 2000, 24)
        load_fc = 25000 + 5000 * np.sin((hours - 11) / 24 * 2 * np.pi) + rng.normal(0, 300, 24)
        net = load_fc - solar_fc - wind_fc
        price = 20 + net / 500 + rng.normal(0, 5, 24)
        profiles[date] = DayProfile(date, price, 1.35 * solar_fc + rng.normal(0, 200, 24), 1.35 * wind_fc)
        forecasts[date] = DayForecast(date, solar_fc, wind_fc, load_fc)
    return (ProfileSet(profiles, {}, 15000.0, "synthetic"), ForecastSet(forecasts, {}, "synthetic"))


TRAIN = [_date(i) for i in range(N_DAYS) if i % 7 != 6]
HELD = [_date(i) for i in range(N_DAYS) if i % 7 == 6 and i >= 14]


@pytest.fixture(scope="module")
def forecaster(synthetic) -> PriceForecaster:
    return fit_price_forecaster(*synthetic, TRAIN, seed=3)


def _with_prices(profiles: ProfileSet, change) -> ProfileSet:
    days = {}
    for date, day in profiles.days.items():
        price = change(date, day.price_usd_per_mwh.copy())
        days[date] = dataclasses.replace(day, price_usd_per_mwh=price)
    return ProfileSet(days, {}, profiles.renewable_capacity_mw, profiles.source)


def test_renewable_scale_is_the_ratio_of_means_on_training_days(synthetic):
    profiles, forecasts = synthetic
    scale = fit_renewable_scale(forecasts, profiles, TRAIN)
    actual = sum(profiles.days[d].renewable_mw().sum() for d in TRAIN)
    forecast = sum(forecasts.days[d].renewable_mw().sum() for d in TRAIN)
    assert scale == pytest.approx(actual / forecast) and scale == pytest.approx(1.35, rel=0.02)
    day = forecasts.day(TRAIN[0])
    shape = day.renewable_shape(profiles.renewable_capacity_mw, scale)
    np.testing.assert_allclose(shape, np.clip(scale * day.renewable_mw() / 15000.0, 0, 1))
    assert day.renewable_shape(1.0, 1.0).max() == 1.0  # clipped
    with pytest.raises(InputError, match="renewable_scale"):
        day.renewable_shape(1.0, 0.0)


def test_persistence_uses_what_is_known_at_ten(synthetic):
    profiles, _ = synthetic
    target = _date(20)
    d1, d2 = profiles.day(_date(19)).price_usd_per_mwh, profiles.day(_date(18)).price_usd_per_mwh
    expected = np.concatenate([d1[:ISSUE_HOUR], d2[ISSUE_HOUR:]])
    np.testing.assert_array_equal(persistence_forecast(profiles, target), expected)
    np.testing.assert_array_equal(seasonal_naive_forecast(profiles, target), profiles.day(_date(13)).price_usd_per_mwh)
    gap = ProfileSet({d: p for d, p in profiles.days.items() if d != _date(19)}, {}, 15000.0, "gap")
    np.testing.assert_array_equal(persistence_forecast(gap, target), d2)  # d − 1 missing: d − 2 at every hour
    assert np.isnan(known_prices(profiles, target, 0)).all()
    with pytest.raises(InputError, match="no known price"):
        seasonal_naive_forecast(profiles, _date(3))


def test_recent_mean_is_the_mean_of_the_known_prices_at_each_hour(synthetic):
    """By hand: hours < 10 average d − 1 .. d − 7, hours ≥ 10 (d − 1 not known yet) d − 2 .. d − 7; a day missing
    from the source is left out; no known price at all is an error."""
    profiles, _ = synthetic
    target = _date(20)
    prices = {lag: profiles.day(_date(20 - lag)).price_usd_per_mwh for lag in range(1, 8)}
    expected = np.concatenate([np.mean([prices[lag][:ISSUE_HOUR] for lag in range(1, 8)], axis=0),
                               np.mean([prices[lag][ISSUE_HOUR:] for lag in range(2, 8)], axis=0)])
    np.testing.assert_allclose(price_forecast.recent_mean_forecast(profiles, target), expected, rtol=1e-12)
    gap = ProfileSet({d: p for d, p in profiles.days.items() if d != _date(17)}, {}, 15000.0, "gap")
    expected_gap = np.concatenate([np.mean([prices[lag][:ISSUE_HOUR] for lag in (1, 2, 4, 5, 6, 7)], axis=0),
                                   np.mean([prices[lag][ISSUE_HOUR:] for lag in (2, 4, 5, 6, 7)], axis=0)])
    np.testing.assert_allclose(price_forecast.recent_mean_forecast(gap, target), expected_gap, rtol=1e-12)
    with pytest.raises(InputError, match="no known price"):
        price_forecast.recent_mean_forecast(profiles, target, days=1)  # hours >= 10: nothing known of d − 1 yet


def test_later_day_outlook_blends_the_issued_forecast_with_the_recent_mean(synthetic):
    """Weight 1 is the repeat of the issued day, 0 the recent mean, in between their mix; a weight outside 0..1
    or a forecast that is not 24 hourly prices is an input error."""
    profiles, _ = synthetic
    target = _date(20)
    issued = np.linspace(20.0, 90.0, 24)
    recent = price_forecast.recent_mean_forecast(profiles, target)
    np.testing.assert_array_equal(price_forecast.later_day_outlook(profiles, target, issued, 1.0), issued)
    np.testing.assert_array_equal(price_forecast.later_day_outlook(profiles, target, issued, 0.0), recent)
    np.testing.assert_allclose(price_forecast.later_day_outlook(profiles, target, issued, 0.25),
                               0.25 * issued + 0.75 * recent, rtol=1e-12)
    np.testing.assert_allclose(price_forecast.later_day_outlook(profiles, target, issued),
                               price_forecast.LATER_DAY_REPEAT_WEIGHT * issued
                               + (1 - price_forecast.LATER_DAY_REPEAT_WEIGHT) * recent, rtol=1e-12)
    with pytest.raises(InputError, match="repeat_weight"):
        price_forecast.later_day_outlook(profiles, target, issued, 1.5)
    with pytest.raises(InputError, match="24 hourly prices"):
        price_forecast.later_day_outlook(profiles, target, issued[:23])


def test_point_forecast_ignores_prices_after_the_issue_time(synthetic, forecaster):
    """Leakage: perturb every actual price after 10:00 of d − 1: the forecast of d does not move."""
    profiles, forecasts = synthetic
    target = _date(27)
    issue = pd.Timestamp(_date(26)) + pd.Timedelta(hours=ISSUE_HOUR)

    def after_issue(date, price):
        hour_start = pd.Timestamp(date) + pd.to_timedelta(np.arange(24), unit="h")
        return np.where(hour_start >= issue, price + 500.0, price)

    def before_issue(date, price):
        return price + 50.0 * (date == _date(26)) * (np.arange(24) < ISSUE_HOUR)

    functions = [lambda p: forecaster.price(p, forecasts, target), lambda p: persistence_forecast(p, target),
                 lambda p: forecaster.scenarios(p, forecasts, target, 4, seed=1).price_usd_per_mwh,
                 lambda p: price_forecast.recent_mean_forecast(p, target)]
    for function in functions:
        base = function(profiles)
        np.testing.assert_array_equal(function(_with_prices(profiles, after_issue)), base)
        assert not np.array_equal(function(_with_prices(profiles, before_issue)), base)


def test_forecaster_beats_persistence_on_synthetic_held_out_days(synthetic, forecaster):
    profiles, forecasts = synthetic
    truth = np.concatenate([profiles.days[d].price_usd_per_mwh for d in HELD])
    model = np.concatenate([forecaster.price(profiles, forecasts, d) for d in HELD])
    naive = np.concatenate([persistence_forecast(profiles, d) for d in HELD])
    assert np.abs(model - truth).mean() < np.abs(naive - truth).mean()


def test_fit_is_deterministic_and_uses_training_days_only(synthetic, forecaster):
    profiles, forecasts = synthetic
    again = fit_price_forecaster(profiles, forecasts, TRAIN, seed=3)
    np.testing.assert_array_equal(again.price(profiles, forecasts, HELD[0]),
                                  forecaster.price(profiles, forecasts, HELD[0]))
    np.testing.assert_array_equal(again.price_residuals, forecaster.price_residuals)
    assert forecaster.residual_dates == forecaster.train_dates == tuple(TRAIN[1:])  # day 0: no price history
    assert not set(forecaster.residual_dates) & set(HELD)
    assert forecaster.price_residuals.shape == forecaster.shape_residuals.shape == (len(TRAIN) - 1, 24)
    # the residual days do not depend on the held-out days' truth
    shifted = _with_prices(profiles, lambda date, p: p + 100.0 * (date in HELD[-1:]))
    late = [d for d in TRAIN if d < HELD[-1]]  # lags of training days after HELD[-1] would see it
    np.testing.assert_array_equal(fit_price_forecaster(shifted, forecasts, late, seed=3).price_residuals,
                                  fit_price_forecaster(profiles, forecasts, late, seed=3).price_residuals)


def test_scenarios_are_seeded_bootstraps_of_training_residual_days(synthetic, forecaster):
    profiles, forecasts = synthetic
    day = HELD[0]
    first = forecaster.scenarios(profiles, forecasts, day, 6, seed=11)
    again = forecaster.scenarios(profiles, forecasts, day, 6, seed=11)
    other = forecaster.scenarios(profiles, forecasts, day, 6, seed=12)
    np.testing.assert_array_equal(first.price_usd_per_mwh, again.price_usd_per_mwh)
    np.testing.assert_array_equal(first.renewable_shape, again.renewable_shape)
    assert first.residual_days == again.residual_days != other.residual_days
    assert first.price_usd_per_mwh.shape == first.renewable_shape.shape == (6, 24)
    assert set(first.residual_days) <= set(TRAIN)
    assert first.renewable_shape.min() >= 0 and first.renewable_shape.max() <= 1
    low, high = forecaster.price_range
    assert first.price_usd_per_mwh.min() >= low and first.price_usd_per_mwh.max() <= high
    # joint draw: scenario k is the point forecast plus residual day k's price AND shape residuals
    k = forecaster.residual_dates.index(first.residual_days[0])
    point = forecaster.price(profiles, forecasts, day)
    np.testing.assert_allclose(first.price_usd_per_mwh[0], np.clip(point + forecaster.price_residuals[k], low, high))
    shape = forecaster.renewable_shape(forecasts, day)
    np.testing.assert_allclose(first.renewable_shape[0], np.clip(shape + forecaster.shape_residuals[k], 0, 1))
    with pytest.raises(InputError, match="scenarios"):
        forecaster.scenarios(profiles, forecasts, day, 0)
    bare = fit_price_forecaster(profiles, forecasts, TRAIN, seed=3, residuals=False)
    with pytest.raises(InputError, match="without residual days"):
        bare.scenarios(profiles, forecasts, day, 2)


def test_a_forecast_instance_is_a_replaced_instance():
    inst = tiny_instance([tiny_job(segments=2)], price=[10.0, 20.0], shape=[0.1, 0.2])
    planned = dataclasses.replace(inst, price_usd_per_mwh=np.array([5.0, 6.0]), renewable_shape=np.array([0.5, 1.0]))
    np.testing.assert_allclose(planned.renewable_mw, inst.renewable_ratio * inst.rated_facility_mw * np.array([0.5, 1]))
    assert not planned.price_usd_per_mwh.flags.writeable
    with pytest.raises(InputError, match="renewable_shape"):
        dataclasses.replace(inst, renewable_shape=np.array([0.5, 1.5]))


# ---------------------------------------------------------------------------------- instances with forecasts


def test_dayahead_instances_carry_each_days_issued_forecast(synthetic, forecaster):
    from aidc_env.case import build_instances
    from aidc_env.dayahead import attach_forecasts, forecast_of
    from aidc_env.information import outlook
    from aidc_env.price_forecast import LATER_DAY_REPEAT_WEIGHT, recent_mean_forecast
    from aidc_env.profiles import hourly_to_slots

    profiles, forecasts = synthetic
    instances = build_instances("2048", HELD[:2], profiles, horizon_days=2)
    with_fc = attach_forecasts(instances, forecaster, profiles, forecasts, n_scenarios=3, seed=5)
    assert set(with_fc) == set(HELD[:2])
    for first, inst in with_fc.items():
        fc = inst.forecast
        assert fc.slots == inst.slots == 192 and fc.n_scenarios == 3
        for d, date in enumerate(inst.days):
            np.testing.assert_array_equal(fc.price_usd_per_mwh[inst.day_slots(d)],
                                          hourly_to_slots(forecaster.price(profiles, forecasts, date), 96))
        # Same day, same seed: the same scenarios whichever horizon contains it; a new seed draws others.
        again = forecast_of(inst, forecaster, profiles, forecasts, n_scenarios=3, seed=5)
        np.testing.assert_array_equal(again.price_scenarios_usd_per_mwh, fc.price_scenarios_usd_per_mwh)
        other = forecast_of(inst, forecaster, profiles, forecasts, n_scenarios=3, seed=6)
        assert not np.array_equal(other.price_scenarios_usd_per_mwh, fc.price_scenarios_usd_per_mwh)
        # The truth is untouched; the view at slot 0 is the forecast of day 0, then (day 1 not issued yet) half
        # day 0's forecast, half the recent mean price known at day 0's issue time; the renewables repeat day 0's.
        np.testing.assert_array_equal(inst.price_usd_per_mwh, instances[first].price_usd_per_mwh)
        price, shape = outlook(inst, 0, "dayahead")
        np.testing.assert_array_equal(price[:96], fc.price_usd_per_mwh[:96])
        w = LATER_DAY_REPEAT_WEIGHT
        recent = hourly_to_slots(recent_mean_forecast(profiles, inst.days[0]), 96)
        np.testing.assert_allclose(price[96:], w * fc.price_usd_per_mwh[:96] + (1 - w) * recent, rtol=0, atol=1e-9)
        np.testing.assert_array_equal(shape[96:], fc.renewable_shape[:96])
        # Once day 1 is issued (10:00 of day 0), its own forecast.
        price, _ = outlook(inst, 40, "dayahead")
        np.testing.assert_array_equal(price[96 - 40:], fc.price_usd_per_mwh[96:])
        assert not np.allclose(price[96 - 40:], w * fc.price_usd_per_mwh[:96] + (1 - w) * recent)


def test_each_issue_outlook_is_made_from_what_is_known_at_its_issue(synthetic, forecaster):
    """Row k of a week's issue outlook: the forecasts issued up to day k's issue, then for every later day the blend
    of day k's forecast and the recent mean known at its issue. Perturbing every price from 10:00 of day k − 1 on
    leaves row k as it was; a day instance has no outlook."""
    from aidc_env.case import build_instances
    from aidc_env.dayahead import forecast_of
    from aidc_env.price_forecast import LATER_DAY_REPEAT_WEIGHT as w
    from aidc_env.price_forecast import recent_mean_forecast
    from aidc_env.profiles import hourly_to_slots

    profiles, forecasts = synthetic
    first = HELD[1]
    inst = build_instances("2048", [first], profiles, horizon_days=3)[first]
    rows = forecast_of(inst, forecaster, profiles, forecasts, n_scenarios=0).issue_outlook_price_usd_per_mwh
    assert rows.shape == (3, 3 * 96)
    point = forecast_of(inst, forecaster, profiles, forecasts, n_scenarios=0).price_usd_per_mwh
    for k, date in enumerate(inst.days):
        np.testing.assert_array_equal(rows[k, :(k + 1) * 96], point[:(k + 1) * 96])
        recent = hourly_to_slots(recent_mean_forecast(profiles, date), 96)
        issued = point[k * 96:(k + 1) * 96]
        for later in range(k + 1, 3):
            np.testing.assert_allclose(rows[k, later * 96:(later + 1) * 96], w * issued + (1 - w) * recent,
                                       rtol=0, atol=1e-9)
        issue = pd.Timestamp(date) - pd.Timedelta(days=1) + pd.Timedelta(hours=ISSUE_HOUR)

        def after_issue(day, price, issue=issue):
            hour_start = pd.Timestamp(day) + pd.to_timedelta(np.arange(24), unit="h")
            return np.where(hour_start >= issue, price + 500.0, price)

        moved = _with_prices(profiles, after_issue)
        moved_rows = forecast_of(inst, forecaster, moved, forecasts, n_scenarios=0).issue_outlook_price_usd_per_mwh
        np.testing.assert_array_equal(moved_rows[k], rows[k])
        if k + 1 < 3:
            assert not np.array_equal(moved_rows[k + 1], rows[k + 1])  # the next issue knows the perturbed hours
    day = build_instances("2048", [first], profiles)[first]
    assert forecast_of(day, forecaster, profiles, forecasts, n_scenarios=0).issue_outlook_price_usd_per_mwh is None


def test_days_without_forecast_or_history_are_dropped(synthetic, forecaster):
    from aidc_env.case import build_instances
    from aidc_env.dayahead import attach_forecasts

    profiles, forecasts = synthetic
    instances = build_instances("2048", [_date(0), HELD[0]], profiles)
    assert set(attach_forecasts(instances, forecaster, profiles, forecasts, n_scenarios=0)) == {HELD[0]}


def test_dayahead_instances_never_forecast_an_instance_from_a_fit_on_its_own_days(synthetic, forecaster):
    """A held-out day takes the forecaster fitted on every training day (as before, bit for bit); a horizon that
    contains training days takes one fitted on the training days outside it; ``out_of_sample=False`` fits once."""
    from aidc_env.case import build_instances
    from aidc_env.dayahead import attach_forecasts, dayahead_instances, fit_days_outside

    profiles, forecasts = synthetic
    days = build_instances("2048", HELD[:2], profiles)
    got = dayahead_instances(days, profiles, forecasts, TRAIN, n_scenarios=2, seed=3)
    want = attach_forecasts(days, forecaster, profiles, forecasts, n_scenarios=2, seed=3)
    for day in HELD[:2]:
        assert got[day].forecast.source == want[day].forecast.source
        np.testing.assert_array_equal(got[day].forecast.price_usd_per_mwh, want[day].forecast.price_usd_per_mwh)
        np.testing.assert_array_equal(got[day].forecast.price_scenarios_usd_per_mwh,
                                      want[day].forecast.price_scenarios_usd_per_mwh)

    first = HELD[1]
    week = build_instances("2048", [first], profiles, horizon_days=3)
    own = [d for d in week[first].days if d in TRAIN]
    assert len(own) == 2  # the held-out first day, then two training days
    outside = fit_days_outside(TRAIN, own)
    assert outside == [d for d in TRAIN if d not in own] and len(outside) == len(TRAIN) - 2
    alone = fit_price_forecaster(profiles, forecasts, outside, seed=3)
    assert not set(own) & set(alone.train_dates) and not set(own) & set(alone.residual_dates)
    fc = dayahead_instances(week, profiles, forecasts, TRAIN, n_scenarios=2, seed=3)[first].forecast
    expected = attach_forecasts(week, alone, profiles, forecasts, n_scenarios=2, seed=3)[first].forecast
    np.testing.assert_array_equal(fc.price_usd_per_mwh, expected.price_usd_per_mwh)
    np.testing.assert_array_equal(fc.issue_outlook_price_usd_per_mwh, expected.issue_outlook_price_usd_per_mwh)
    np.testing.assert_array_equal(fc.price_scenarios_usd_per_mwh, expected.price_scenarios_usd_per_mwh)
    assert f"fitted on {len(TRAIN) - 3} training days" in fc.source  # the first training day has no price history
    in_sample = dayahead_instances(week, profiles, forecasts, TRAIN, n_scenarios=2, seed=3,
                                   out_of_sample=False)[first].forecast
    shared = attach_forecasts(week, forecaster, profiles, forecasts, n_scenarios=2, seed=3)[first].forecast
    np.testing.assert_array_equal(in_sample.price_usd_per_mwh, shared.price_usd_per_mwh)
    assert not np.array_equal(in_sample.price_usd_per_mwh[96:], fc.price_usd_per_mwh[96:])


def test_week_days_lists_each_calendar_day_once():
    from agents.days import week_days

    assert week_days(["2023-02-26"], 4) == ["2023-02-26", "2023-02-27", "2023-02-28", "2023-03-01"]
    assert week_days(["2023-03-11", "2023-03-14"], 4) == ["2023-03-11", "2023-03-12", "2023-03-13", "2023-03-14",
                                                          "2023-03-15", "2023-03-16", "2023-03-17"]
    assert len(week_days(["2023-10-28"])) == 7 and week_days([]) == []


# ---------------------------------------------------------------------------------- a supplied price forecast


PRICED_HEADER = HEADER + ",price_forecast_usd_per_mwh"


def _priced_rows(first: str, last: str) -> list[list[str]]:
    """:func:`_rows` with a supplied price forecast: 10 + the row index / 4 (exact in binary)."""
    return [[*row, str(10.0 + i / 4)] for i, row in enumerate(_rows(first, last))]


def test_a_supplied_price_column_is_read_by_day_without_changing_the_days(tmp_path, capsys):
    """The optional column: read by local clock hour when present. A day with a missing cell in it keeps its
    forecasts but has no supplied price (with the reason); a price beyond the profiles' bound is a data error naming
    the column; the days and their load, solar and wind are those of the file without the column."""
    from aidc_env.forecasts import COL_PRICE_FC
    from aidc_env.limits import MAX_PRICE_USD_PER_MWH

    rows = _priced_rows("2023-06-01", "2023-06-04")
    rows[30][5] = ""  # the price of 06-02 06:00
    rows[80][2] = ""  # the solar of 06-04 08:00: the day itself is skipped
    priced = load_forecasts(_write(tmp_path, rows, PRICED_HEADER))
    bare = load_forecasts(_write(tmp_path, [r[:5] for r in rows], name="bare.csv"))
    assert priced.dates() == bare.dates() == ["2023-06-01", "2023-06-02", "2023-06-03"]
    assert dict(priced.skipped) == dict(bare.skipped) and set(priced.skipped) == {"2023-06-04"}
    assert all(priced.day(d) == bare.day(d) for d in priced.dates())
    assert priced.supplies_price and priced.supplied_dates() == ["2023-06-01", "2023-06-03"]
    assert not priced.has_supplied_price("2023-06-02") and priced.has_supplied_price("2023-06-03")
    assert priced.supplied_skipped == {"2023-06-02": f"{COL_PRICE_FC} missing in 1 of 24 hours"}
    np.testing.assert_array_equal(priced.supplied_price("2023-06-03"), 10.0 + np.arange(48, 72) / 4)
    assert not priced.supplied_price("2023-06-01").flags.writeable
    with pytest.raises(InputError, match=f"2023-06-02 has no supplied price forecast .{COL_PRICE_FC} missing"):
        priced.supplied_price("2023-06-02")
    with pytest.raises(InputError, match="2023-06-04 has no forecast"):
        priced.supplied_price("2023-06-04")
    assert not bare.supplies_price and not bare.has_supplied_price("2023-06-03")
    with pytest.raises(InputError, match=f"bare.csv has no {COL_PRICE_FC} column") as info:
        bare.supplied_price("2023-06-03")
    assert info.value.field == "forecasts"
    empty = load_forecasts(_write(tmp_path, [[*r[:5], ""] for r in rows], PRICED_HEADER, "empty.csv"))
    assert empty.dates() == bare.dates() and not empty.supplies_price
    # beyond the bound: the file is refused, naming the column and the line
    rows = _priced_rows("2023-06-01", "2023-06-01")
    rows[4][5] = str(2 * MAX_PRICE_USD_PER_MWH)
    with pytest.raises(InputError, match="line 6") as info:
        load_forecasts(_write(tmp_path, rows, PRICED_HEADER, "huge.csv"))
    assert info.value.field == COL_PRICE_FC
    # the summary states it
    assert main(["--forecasts", str(tmp_path / "fc.csv"), "--json"]) == 0
    price = json.loads(capsys.readouterr().out)["price_forecast_usd_per_mwh"]
    assert price == {"days": 2, "first_day": "2023-06-01", "last_day": "2023-06-03", "min": 10.0,
                     "mean": pytest.approx(np.mean(10 + np.r_[0:24, 48:72] / 4)), "max": 10 + 71 / 4}
    assert main(["--forecasts", str(tmp_path / "bare.csv")]) == 0
    assert "supplied price forecast: none" in capsys.readouterr().out


def _supplied(forecasts: ForecastSet, price_of, dates=None) -> ForecastSet:
    """``forecasts`` with the supplied price ``price_of(date)`` on each of ``dates`` (default every day)."""
    from aidc_env.forecasts import DayPriceForecast

    return ForecastSet(forecasts.days, {}, "supplied.csv", supplied_prices={
        date: DayPriceForecast(date, price_of(date)) for date in (forecasts.dates() if dates is None else dates)})


def test_a_supplied_price_replaces_the_model_and_its_errors_are_the_residual_days(synthetic, forecaster):
    """Price source ``supplied``: the point forecast is the column; nothing is fitted; the residual days are the
    actual minus the supplied price on the same training days as the model's; renewables as the model's; the
    scenarios bootstrap those residuals."""
    profiles, forecasts = synthetic
    offset = 3.0 * np.sin(np.arange(24) / 4)
    later = [_date(i) for i in range(10, N_DAYS)]  # a supplied price from day 10 on only
    supplied = _supplied(forecasts, lambda date: profiles.days[date].price_usd_per_mwh + offset, later)
    fit = fit_price_forecaster(profiles, supplied, TRAIN, seed=3, price_source="supplied")
    assert fit.model is None and fit.price_source == "supplied"
    assert fit.train_dates == forecaster.train_dates
    assert fit.residual_dates == tuple(d for d in forecaster.train_dates if d in later)
    assert fit.renewable_scale == forecaster.renewable_scale and fit.price_range == forecaster.price_range
    np.testing.assert_allclose(fit.price_residuals, np.tile(-offset, (len(fit.residual_dates), 1)), rtol=0, atol=1e-12)
    first = forecaster.residual_dates.index(fit.residual_dates[0])
    np.testing.assert_array_equal(fit.shape_residuals, forecaster.shape_residuals[first:])
    day = HELD[0]
    np.testing.assert_array_equal(fit.price(profiles, supplied, day), profiles.days[day].price_usd_per_mwh + offset)
    scenarios = fit.scenarios(profiles, supplied, day, 4, seed=1)
    np.testing.assert_allclose(scenarios.price_usd_per_mwh, np.tile(np.clip(profiles.days[day].price_usd_per_mwh,
                                                                             *fit.price_range), (4, 1)), atol=1e-12)
    # the model path ignores the column, bit for bit
    model = fit_price_forecaster(profiles, supplied, TRAIN, seed=3)
    np.testing.assert_array_equal(model.price(profiles, supplied, day), forecaster.price(profiles, forecasts, day))
    np.testing.assert_array_equal(model.price_residuals, forecaster.price_residuals)
    with pytest.raises(InputError, match="needs a price_forecast_usd_per_mwh column in synthetic") as info:
        fit_price_forecaster(profiles, forecasts, TRAIN, price_source="supplied")
    assert info.value.field == "forecasts"
    with pytest.raises(InputError, match="none of the 3 training days with forecasts and actuals has a supplied"):
        fit_price_forecaster(profiles, supplied, TRAIN[1:4], price_source="supplied")
    with pytest.raises(InputError, match="has no supplied price forecast"):
        fit.price(profiles, supplied, _date(8))
    with pytest.raises(InputError, match="'oracle' is not one of model, supplied"):
        fit_price_forecaster(profiles, supplied, TRAIN, price_source="oracle")


def test_a_supplied_true_price_is_the_dayahead_relaxation(synthetic):
    """Supplying the realised price as the forecast gives the instance :func:`aidc_env.dayahead.revealed`
    (``"dayahead"``) makes of the model's: the same price MPC reads at every slot (the later days' outlook moves by
    the same weight), the same renewables and persistence; only the scenarios differ (the supplied forecast has
    no error to bootstrap)."""
    from aidc_env.case import build_instances
    from aidc_env.dayahead import dayahead_instances, revealed
    from aidc_env.information import outlook

    profiles, forecasts = synthetic
    truth = _supplied(forecasts, lambda date: profiles.days[date].price_usd_per_mwh)
    first = HELD[1]
    week = build_instances("2048", [first], profiles, horizon_days=3)
    model = dayahead_instances(week, profiles, truth, TRAIN, n_scenarios=2, seed=3)[first]
    told = dayahead_instances(week, profiles, truth, TRAIN, n_scenarios=2, seed=3, price_source="supplied")[first]
    relaxed = revealed(model, "dayahead")
    for t in (0, 9, 40, 96, 150, 200, 287):
        price, shape = outlook(told, t)
        np.testing.assert_allclose(price, outlook(relaxed, t)[0], rtol=0, atol=1e-9, err_msg=f"t={t}")
        np.testing.assert_array_equal(shape, outlook(relaxed, t)[1])
    np.testing.assert_array_equal(told.forecast.persistence_price_usd_per_mwh,
                                  model.forecast.persistence_price_usd_per_mwh)
    np.testing.assert_array_equal(told.price_usd_per_mwh, model.price_usd_per_mwh)  # the truth itself untouched
    assert told.forecast.source.startswith("supplied price forecast (supplied.csv)")
    assert model.forecast.source.startswith("gradient-boosting")
    # an instance with a day without a supplied price is left out under the supplied price only
    gap = _supplied(forecasts, lambda date: profiles.days[date].price_usd_per_mwh,
                    [d for d in forecasts.dates() if d != HELD[0]])
    days = build_instances("2048", HELD[:2], profiles)
    assert set(dayahead_instances(days, profiles, gap, TRAIN, n_scenarios=0, price_source="supplied")) == {HELD[1]}
    assert set(dayahead_instances(days, profiles, gap, TRAIN, n_scenarios=0)) == set(HELD[:2])


def test_the_forecast_study_on_the_packaged_data_and_its_walk_forward_refusal(tmp_path, capsys):
    """The default run needs no training day before the held-out ones; the walk-forward refits do, and the weeks
    split leaves none before its first held-out day in the forecast period: refused with one line, nothing written."""
    import pandas as pd

    from experiments import forecast_study

    argv = ["--profiles", "caiso-2023", "--forecasts", "caiso-2023-dayahead", "--no-plans", "--days", "2"]
    assert run_cli(forecast_study.main, [*argv, "--walk-forward", "--out", str(tmp_path / "wf")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "walk-forward" in err[0] and "2023-03-13" in err[0]
    assert not (tmp_path / "wf").exists()
    assert run_cli(forecast_study.main, [*argv, "--out", str(tmp_path / "fs")]) == 0
    errors = pd.read_csv(tmp_path / "fs" / "errors.csv")
    assert list(errors["forecast"])[:3] == ["price: gbm", "price: persistence", "price: seasonal-naive"]
    assert not errors["forecast"].str.contains("walk-forward").any() and (errors["mae"] > 0).all()
