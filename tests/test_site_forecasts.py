"""Day-ahead forecasts carried per site, on the real CAISO 2023 data: each site's price forecast is its node's
(the model fitted on the node's prices, or the node's own day-ahead LMP), its shape forecast its plant's; the SCE
site's forecast is the one-site forecast; a sites instance with forecasts round-trips through its JSON, passes
Gymnasium's checker in the per-job env with day-ahead information, and nothing observed at slot t moves with the
truth from t on."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

from aidc_env.case import build_instances
from aidc_env.dayahead import attach_forecasts, dayahead_instances, forecastable, revealed
from aidc_env.env import DispatchEnv
from aidc_env.errors import InputError
from aidc_env.forecasts import COL_PRICE_FC_PGE, COL_PRICE_FC_SDGE, PlantForecast, fit_renewable_scale, load_forecasts
from aidc_env.instance import Instance, load_instance
from aidc_env.price_forecast import fit_price_forecaster, fit_site_forecasters
from aidc_env.profiles import hourly_to_slots, load_profiles
from aidc_env.site_profiles import SOLAR_WIND, load_site_profiles
from tests.test_forecasts import PRICED_HEADER, _priced_rows, _write
from tests.test_forecasts import tiny_model  # noqa: F401 (an autouse fixture: few boosting rounds, fast fits)
from tests.test_sites_env import TWO_SITES, perturbed, trace

TRAIN = [(dt.date(2023, 6, 1) + dt.timedelta(days=i)).isoformat() for i in range(60)]
"""Training days: 2023-06-01..2023-07-30 (the forecast days with a day-ahead LMP start on 2023-06-01)."""
DAYS = ("2023-08-15", "2023-09-12")
WEEK_START = "2023-10-10"
"""The first day of a two-day sites3 horizon (its issue outlook rows are checked too)."""
SCENARIOS = 3


@pytest.fixture(scope="module")
def data():
    return load_site_profiles("caiso-2023"), load_profiles("caiso-2023"), load_forecasts("caiso-2023-dayahead")


def sites3(site_profiles) -> dict[str, Instance]:
    """sites3 on the one-day DAYS and a two-day horizon from WEEK_START."""
    return {**build_instances("sites3", DAYS, site_profiles),
            **build_instances("sites3", [WEEK_START], site_profiles, horizon_days=2)}


@pytest.fixture(scope="module")
def forecast(data):
    """(sites3 instances, 2048 instances on the same days), both with the model's day-ahead forecasts."""
    site_profiles, profiles, forecasts = data
    one = {**build_instances("2048", DAYS, profiles), **build_instances("2048", [WEEK_START], profiles,
                                                                         horizon_days=2)}
    return (dayahead_instances(sites3(site_profiles), site_profiles, forecasts, TRAIN, SCENARIOS, seed=0),
            dayahead_instances(one, profiles, forecasts, TRAIN, SCENARIOS, seed=0))


def test_the_sce_site_is_the_one_site_forecast_of_the_same_day_and_fit_days(forecast):
    sites, one = forecast
    assert set(sites) == set(one) == {*DAYS, WEEK_START}
    for day, inst in sites.items():
        assert inst.forecast is None and [s.price_node for s in inst.sites] == ["SCE", "PGE", "SDGE"]
        sce, alone = inst.sites[0].forecast, one[day].forecast
        for name in ("price_usd_per_mwh", "persistence_price_usd_per_mwh", "price_scenarios_usd_per_mwh"):
            np.testing.assert_array_equal(getattr(sce, name), getattr(alone, name), err_msg=f"{day} {name}")
        assert sce.n_scenarios == SCENARIOS
    rows = sites[WEEK_START].sites[0].forecast.issue_outlook_price_usd_per_mwh
    np.testing.assert_array_equal(rows, one[WEEK_START].forecast.issue_outlook_price_usd_per_mwh)
    assert rows.shape == (2, 192)
    # the other nodes have forecasts of their own prices, from their own fits
    prices = [float(s.forecast.price_usd_per_mwh.mean()) for s in sites[DAYS[0]].sites]
    truth = [float(s.price_usd_per_mwh.mean()) for s in sites[DAYS[0]].sites]
    assert prices == pytest.approx([36.83, 59.96, 62.00], abs=0.05)
    assert truth == pytest.approx([144.42, 189.33, 122.86], abs=0.01)
    assert sites[DAYS[0]].sites[1].forecast.source.startswith("site north-wind, PGE price: gradient-boosting price "
                                                             "forecast fitted on 60 training days")


def test_a_wind_sites_shape_forecast_tracks_the_wind_better_than_the_combined_one(forecast):
    """The wind plant's forecast (CAISO day-ahead wind × the wind scale, over the wind peak) against the wind
    site's actual shape, and the one-site forecast of solar + wind against the same."""
    sites, one = forecast
    mae, corr = {}, {}
    for day in DAYS:
        wind = sites[day].sites[1]
        assert wind.plant == "wind"
        for name, shape in (("wind", wind.forecast.renewable_shape), ("combined", one[day].forecast.renewable_shape)):
            mae[day, name] = float(np.abs(shape - wind.renewable_shape).mean())
            corr[day, name] = float(np.corrcoef(shape, wind.renewable_shape)[0, 1])
    assert [mae[d, "wind"] for d in DAYS] == pytest.approx([0.0388, 0.0937], abs=1e-4)
    assert [mae[d, "combined"] for d in DAYS] == pytest.approx([0.3068, 0.3852], abs=1e-4)
    assert [corr[d, "wind"] for d in DAYS] == pytest.approx([0.936, 0.759], abs=1e-3)
    assert [corr[d, "combined"] for d in DAYS] == pytest.approx([-0.598, -0.744], abs=1e-3)
    assert not sites[DAYS[0]].sites[2].forecast.renewable_shape.any()  # no plant: no renewables, forecast or not


def test_the_plant_scales_are_fitted_apart_and_preserve_the_training_mean(data):
    site_profiles, _, forecasts = data
    fitted = fit_site_forecasters(site_profiles, forecasts, TRAIN, residuals=False, nodes=["SCE"])
    assert (fitted.solar_scale, fitted.wind_scale) == pytest.approx((1.338, 1.558), abs=1e-3)
    assert fitted.solar_scale == fit_renewable_scale(forecasts, site_profiles, TRAIN, "solar")
    plant = PlantForecast(SOLAR_WIND, fitted.solar_scale, fitted.wind_scale, site_profiles.solar_peak_mw,
                          site_profiles.wind_peak_mw)
    actual = np.mean([site_profiles.shape(site_profiles.days[d], SOLAR_WIND) for d in TRAIN])
    predicted = np.mean([plant.shape(forecasts.days[d]) for d in TRAIN])
    assert predicted == pytest.approx(actual, rel=1e-9)  # no forecast hour reaches the peaks: nothing is clipped
    assert actual == pytest.approx(0.4178, abs=1e-4)


def test_the_supplied_price_of_each_site_is_its_nodes_own_lmp_column(data):
    site_profiles, _, forecasts = data
    got = dayahead_instances(sites3(site_profiles), site_profiles, forecasts, TRAIN, SCENARIOS, seed=0,
                             price_source="supplied")
    assert set(got) == {*DAYS, WEEK_START}
    for day in DAYS:
        means = []
        for site in got[day].sites:
            column = forecasts.at_node(site.price_node)
            np.testing.assert_array_equal(site.forecast.price_usd_per_mwh,
                                          hourly_to_slots(column.supplied_price(day), 96))
            means.append(float(site.forecast.price_usd_per_mwh.mean()))
            assert site.forecast.source.startswith(f"site {site.name}, {site.price_node} price: supplied price")
        assert len(set(means)) == 3
    assert forecasts.at_node("PGE").price_column == COL_PRICE_FC_PGE
    assert forecasts.at_node("PGE").supplied_price(DAYS[0])[:2] == pytest.approx([80.51286, 73.82406])


def test_each_nodes_price_column_is_read_day_by_day_and_refused_by_its_own_name(tmp_path):
    """A node's column as the SCE one (tests/test_forecasts.py): a day with a missing cell has no supplied price of
    that node (its reason names the column), the other nodes keep theirs, a value beyond the bound names it."""
    header = PRICED_HEADER + f",{COL_PRICE_FC_PGE}"
    rows = [[*row, str(20.0 + i)] for i, row in enumerate(_priced_rows("2023-06-01", "2023-06-02"))]
    rows[30][6] = ""  # PG&E's price of 06-02 06:00
    forecasts = load_forecasts(_write(tmp_path, rows, header))
    pge = forecasts.at_node("PGE")
    assert forecasts.supplied_dates() == ["2023-06-01", "2023-06-02"] and pge.supplied_dates() == ["2023-06-01"]
    assert pge.supplied_skipped == {"2023-06-02": f"{COL_PRICE_FC_PGE} missing in 1 of 24 hours"}
    np.testing.assert_array_equal(pge.supplied_price("2023-06-01"), 20.0 + np.arange(24))
    with pytest.raises(InputError, match=f"has no {COL_PRICE_FC_SDGE} column"):
        forecasts.at_node("SDGE").supplied_price("2023-06-01")
    rows[4][6] = "1e9"
    with pytest.raises(InputError, match="line 6") as info:
        load_forecasts(_write(tmp_path, rows, header, "huge.csv"))
    assert info.value.field == COL_PRICE_FC_PGE


def test_a_day_whose_node_has_no_supplied_price_is_left_out_as_for_one_site(data):
    site_profiles, _, forecasts = data
    dropped = DAYS[1]
    pge = {d: p for d, p in forecasts.node_prices["PGE"].items() if d != dropped}
    gap = dataclasses.replace(forecasts, node_prices={**forecasts.node_prices, "PGE": pge})
    days = build_instances("sites3", [*DAYS, "2023-05-20"], site_profiles)  # no day-ahead LMP before June
    assert not gap.at_node("PGE").has_supplied_price(dropped) and gap.has_supplied_price(dropped)
    assert set(dayahead_instances(days, site_profiles, gap, TRAIN, 0, price_source="supplied")) == {DAYS[0]}
    assert set(dayahead_instances(days, site_profiles, gap, TRAIN, 0)) == {*DAYS, "2023-05-20"}
    assert [forecastable(days[d], gap, site_profiles, "supplied") for d in days] == [True, False, False]


def test_a_sites_instance_with_forecasts_round_trips_through_its_json(forecast, tmp_path):
    inst = forecast[0][WEEK_START]
    path = Path(tmp_path) / "inst.json"
    path.write_text(inst.to_json())
    back = load_instance(path)
    assert back.to_json() == inst.to_json()
    for site, again in zip(inst.sites, back.sites, strict=True):
        for name in ("price_usd_per_mwh", "renewable_shape", "price_scenarios_usd_per_mwh",
                     "issue_outlook_price_usd_per_mwh"):
            np.testing.assert_array_equal(getattr(site.forecast, name), getattr(again.forecast, name))
    bare = inst.with_forecasts((None,) * 3)
    assert all("forecast" not in s for s in bare.to_dict()["network"]["sites"])  # files without forecasts unchanged
    with pytest.raises(InputError, match="forecast"):
        dataclasses.replace(inst, forecast=inst.sites[0].forecast)


def test_revealed_replaces_every_sites_issued_price_by_its_truth(forecast):
    inst = forecast[0][DAYS[0]]
    told = revealed(inst, "dayahead")
    for site, view in zip(told.sites, inst.site_views, strict=True):
        np.testing.assert_allclose(site.forecast.price_usd_per_mwh, view.price_usd_per_mwh, rtol=0, atol=1e-9)
        assert "revealed: dayahead" in site.forecast.source
    np.testing.assert_array_equal(told.sites[1].forecast.renewable_shape, inst.sites[1].forecast.renewable_shape)


def test_the_per_job_env_with_dayahead_information_passes_the_checker(forecast):
    instances = list(forecast[0].values())[:2]
    env = DispatchEnv(case=instances, action="per_job", information="dayahead")
    check_env(env, skip_render_check=True)
    with pytest.raises(InputError, match="forecasts"):
        DispatchEnv(case=instances[0].with_forecasts((None,) * 3), action="per_job", information="dayahead")


def test_forecasting_a_sites_instance_needs_the_site_profiles_and_their_forecasters(data, forecast):
    site_profiles, profiles, forecasts = data
    sites, one = forecast
    with pytest.raises(InputError, match="profiles"):
        forecastable(sites[DAYS[0]], forecasts, profiles)
    with pytest.raises(InputError, match="profiles"):
        forecastable(one[DAYS[0]], forecasts, site_profiles)
    with pytest.raises(InputError, match="forecaster"):
        attach_forecasts({DAYS[0]: sites[DAYS[0]]}, fit_price_forecaster(profiles, forecasts, TRAIN, residuals=False),
                         site_profiles, forecasts)
    with pytest.raises(InputError, match="price_node"):
        forecasts.at_node("CAISO")


@pytest.fixture(scope="module")
def two_day_sites(data, tmp_path_factory) -> Instance:
    """The tests' two-site case (hourly slots) over two days of real data, with day-ahead forecasts: the second
    day's forecast is issued at slot 10, inside the horizon."""
    site_profiles, _, forecasts = data
    path = Path(tmp_path_factory.mktemp("sites")) / "tiny.toml"
    path.write_text(TWO_SITES)
    days = build_instances(path, ["2023-08-15"], site_profiles, horizon_days=2)
    return dayahead_instances(days, site_profiles, forecasts, TRAIN, 2, seed=0)["2023-08-15"]


@settings(max_examples=8, deadline=None, derandomize=True)
@given(t=st.integers(0, 47), seed=st.integers(0, 1000))
def test_observations_and_masks_up_to_t_ignore_every_sites_truth_from_t(two_day_sites, t, seed):
    moved = perturbed(two_day_sites, t, seed + 1)
    base, later = (trace(inst, 3, seed, until=t, information="dayahead") for inst in (two_day_sites, moved))
    assert len(base) == len(later) > 0
    for (s0, o0, m0), (s1, o1, m1) in zip(base, later, strict=True):
        assert s0 == s1 and np.array_equal(o0, o1) and np.array_equal(m0, m1)


def test_with_perfect_information_the_same_check_sees_the_truth(two_day_sites):
    """The check has teeth: with perfect information the observation at slot t moves with the truth of slot t."""
    t = 20
    moved = perturbed(two_day_sites, t, 3)
    base, later = (trace(inst, 3, 0, until=t, information="perfect") for inst in (two_day_sites, moved))
    assert not np.array_equal(base[-1][1], later[-1][1])
