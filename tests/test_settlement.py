"""The two-settlement bill (aidc_env/settlement.py) and the day-ahead commitments (agents/commitment.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agents.commitment import (POLICIES, commitment_slot, dayahead_price, make_commitment, scenario_spread,
                               settle_policy)
from aidc_env.baselines import fixed_schedule
from aidc_env.errors import InputError, run_cli
from aidc_env.information import ISSUE_HOUR, Forecast
from aidc_env.settlement import committed_import_mw, settle, two_settlement_bill
from aidc_env.simulator import simulate
from tests.conftest import tiny_instance, tiny_job

SLOTS_PER_DAY = 24  # tiny instances: hourly slots
TINY_DAYS = 2
SEGMENTS_PER_DAY = 4  # 6-hour checkpoint segments
TINY_TRANCHE = 0.6 * 10.0 * 3600 * 24 * TINY_DAYS
"""60% of what the tiny job's small mode (10 tokens/s) makes running the whole horizon: the plans must choose."""
SCENARIO_SPREAD_USD = 30.0
"""Standard deviation of the tiny scenarios' RT price around the DA price ($/MWh): spreads of either sign."""
LATER_RISE_USD = 300.0
"""How far the no-future test moves the forecasts issued after a commitment ($/MWh): far enough to move any plan."""


def tiny_horizon(seed: int = 0, scenarios: int = 3) -> object:
    """A 2-day hourly tiny instance (one job) with a supplied-price forecast, scenarios and issue outlook rows."""
    rng = np.random.default_rng(seed)
    T = TINY_DAYS * SLOTS_PER_DAY
    job = tiny_job(segments=SEGMENTS_PER_DAY * TINY_DAYS, tranche_tokens=TINY_TRANCHE)
    base = tiny_instance([job], list(rng.uniform(-20, 200, T)), list(rng.uniform(0, 1, T)),
                         curtailment_penalty_usd_per_mwh=0.0)
    dayahead = rng.uniform(-10, 120, T)
    forecast = Forecast(price_usd_per_mwh=dayahead, renewable_shape=rng.uniform(0, 1, T),
                        price_scenarios_usd_per_mwh=dayahead + rng.normal(0, SCENARIO_SPREAD_USD, (scenarios, T)),
                        renewable_shape_scenarios=rng.uniform(0, 1, (scenarios, T)),
                        issue_outlook_price_usd_per_mwh=rng.uniform(0, 100, (TINY_DAYS, T)),
                        source="supplied price forecast (test)")
    return dataclasses.replace(base, horizon_days=TINY_DAYS, forecast=forecast)


# ------------------------------------------------------------------------------------------ the bill


def test_two_slots_by_hand():
    # g = (2, 1) MW, q = (1, 3) MW, half-hour slots; λDA = (10, 20), λRT = (30, −5) $/MWh.
    bill = settle([2.0, 1.0], [1.0, 3.0], [10.0, 20.0], [30.0, -5.0], 0.5, slots=True)
    assert bill.dayahead_usd == pytest.approx((10 * 1 + 20 * 3) * 0.5)  # 35
    assert bill.realtime_usd == pytest.approx((30 * (2 - 1) + -5 * (1 - 3)) * 0.5)  # 20: the second slot sold back
    assert bill.total_usd == pytest.approx(55.0)
    assert bill.realtime_only_usd == pytest.approx((30 * 2 + -5 * 1) * 0.5)  # 27.5
    assert bill.spread_usd == pytest.approx(((10 - 30) * 1 + (20 + 5) * 3) * 0.5)  # 27.5
    assert (bill.committed_mwh, bill.grid_mwh, bill.deviation_mwh) == pytest.approx((2.0, 1.5, 1.5))
    np.testing.assert_array_equal(bill.committed_mw, [1.0, 3.0])
    data = bill.to_dict()
    assert data["total_usd"] == pytest.approx(55.0) and data["grid_mw"] == [2.0, 1.0]
    assert "grid_mw" not in settle([2.0], [1.0], [10.0], [30.0], 1.0).to_dict()


def test_identity_and_rt_only_on_the_reference_day(reference_instance):
    inst = reference_instance
    result = simulate(inst, fixed_schedule(inst))
    rng = np.random.default_rng(0)
    q = rng.uniform(0, 1.5, inst.slots)
    da = inst.price_usd_per_mwh + rng.normal(0, 10, inst.slots)
    bill = two_settlement_bill(inst, result, q, da)
    g, rt, dt = result.flows.grid_mw, inst.price_usd_per_mwh, inst.slot_hours
    assert bill.total_usd == pytest.approx(np.sum(rt * g) * dt + np.sum((da - rt) * q) * dt, rel=1e-12)
    assert bill.total_usd == pytest.approx(bill.realtime_only_usd + bill.spread_usd, rel=1e-12)
    none = two_settlement_bill(inst, result, np.zeros(inst.slots), da)
    assert none.total_usd == result.metrics.grid_cost_usd  # exactly: q = 0 is today's bill
    assert none.dayahead_usd == 0.0 and none.deviation_mwh == pytest.approx(result.metrics.grid_energy_mwh)


def test_committed_import_is_the_simulators_import(reference_instance):
    inst = reference_instance
    schedule = fixed_schedule(inst)
    result = simulate(inst, schedule)
    np.testing.assert_array_equal(committed_import_mw(inst, schedule, inst.renewable_shape), result.flows.grid_mw)
    np.testing.assert_allclose(committed_import_mw(inst, schedule, np.zeros(inst.slots)), result.flows.load_mw)


@pytest.mark.parametrize(("args", "field"), [
    (([1.0, 2.0], [1.0], [1.0, 1.0], [1.0, 1.0], 1.0), "committed_mw"),
    (([1.0, 2.0], [1.0, -0.5], [1.0, 1.0], [1.0, 1.0], 1.0), "committed_mw"),
    (([1.0, 2.0], [1.0, 1.0], [1.0, np.nan], [1.0, 1.0], 1.0), "dayahead_price_usd_per_mwh"),
    (([1.0, 2.0], [1.0, 1.0], [1.0, 1.0], [np.inf, 1.0], 1.0), "realtime_price_usd_per_mwh"),
    (([1.0, -2.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0], 1.0), "grid_mw"),
    (([1.0, 2.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0], 0.0), "slot_hours"),
    (([1.0, 2.0], ["a", 1.0], [1.0, 1.0], [1.0, 1.0], 1.0), "committed_mw"),
])
def test_bad_inputs_are_refused_in_one_line(args, field):
    with pytest.raises(InputError) as err:
        settle(*args)
    assert err.value.field == field and "\n" not in str(err.value)


def test_sites_tariffs_and_bad_arrays_are_refused(reference_instance):
    from aidc_env.case import build_instance
    from aidc_env.tariffs import load_tariff

    inst = reference_instance
    result = simulate(inst, fixed_schedule(inst))
    with pytest.raises(InputError, match="committed_mw"):
        two_settlement_bill(inst, result, np.zeros(inst.slots - 1), inst.price_usd_per_mwh)
    with pytest.raises(InputError, match="renewable_shape"):
        committed_import_mw(inst, fixed_schedule(inst), np.full(inst.slots, 1.5))
    sites = build_instance("sites3")
    with pytest.raises(InputError) as err:
        two_settlement_bill(sites, simulate(sites, fixed_schedule(sites)), np.zeros(sites.slots),
                            sites.price_usd_per_mwh)
    assert err.value.field == "sites"
    tariffed = inst.with_tariff(load_tariff("sce-tou8"))
    with pytest.raises(InputError) as err:
        committed_import_mw(tariffed, fixed_schedule(tariffed), tariffed.renewable_shape)
    assert err.value.field == "tariff"


# ------------------------------------------------------------------------------------------ commitments


def test_commitment_never_reads_the_truth_nor_later_forecasts():
    inst = tiny_horizon()
    spd = inst.slots_per_day
    assert [commitment_slot(inst, d) for d in range(TINY_DAYS)] == [ISSUE_HOUR - 24, ISSUE_HOUR]
    rng = np.random.default_rng(1)
    for policy in ("deterministic", "stochastic"):
        q = make_commitment(inst, policy).committed_mw
        assert q.min() >= 0 and q.max() > 0
        truth = dataclasses.replace(inst, price_usd_per_mwh=rng.uniform(-50, 500, inst.slots),
                                    renewable_shape=rng.uniform(0, 1, inst.slots))
        np.testing.assert_array_equal(make_commitment(truth, policy).committed_mw, q)  # the truth is never read
        for d in range(TINY_DAYS - 1):  # change every forecast issued after day d's commitment time
            later = slice((d + 1) * spd, None)
            f = inst.forecast
            price, shape = f.price_usd_per_mwh.copy(), f.renewable_shape.copy()
            scen, rows = f.price_scenarios_usd_per_mwh.copy(), f.issue_outlook_price_usd_per_mwh.copy()
            # Later days made dear (DA) and their RT expected far below DA: a plan that saw them would move work.
            price[later], shape[later] = price[later] + LATER_RISE_USD, 1 - shape[later]
            scen[:, later], rows[d + 1:] = scen[:, later] - LATER_RISE_USD, rows[d + 1:] + LATER_RISE_USD
            changed = dataclasses.replace(inst, forecast=dataclasses.replace(
                f, price_usd_per_mwh=price, renewable_shape=shape, price_scenarios_usd_per_mwh=scen,
                issue_outlook_price_usd_per_mwh=rows))
            moved = make_commitment(changed, policy).committed_mw
            np.testing.assert_array_equal(moved[:(d + 1) * spd], q[:(d + 1) * spd])
            assert not np.array_equal(moved, q)  # the test has teeth: the later days' purchase follows their forecast


def test_policies_on_a_tiny_horizon_and_the_hindsight_bound():
    inst = tiny_horizon(seed=2)
    settled = {p: settle_policy(inst, p, "oracle") for p in POLICIES}
    rt = settled["rt-only"].bill
    assert rt.total_usd == rt.realtime_only_usd and rt.committed_mwh == 0.0
    for s in settled.values():  # the same dispatch: the same RT-only bill, the commitment adds its spread
        assert s.bill.realtime_only_usd == pytest.approx(rt.realtime_only_usd)
        assert s.bill.total_usd == pytest.approx(rt.total_usd + s.bill.spread_usd)
        assert s.objective_usd == pytest.approx(s.result.metrics.objective_usd + s.bill.spread_usd)
        assert s.result.metrics.tranches_met
    # Hindsight bounds every commitment plan's spread when the plan's import is taken against the true renewables.
    da, dt = dayahead_price(inst), inst.slot_hours
    bound = settled["hindsight"].bill.spread_usd
    for policy in ("deterministic", "stochastic"):
        plan = settled[policy].commitment.plan
        true_q = committed_import_mw(inst, plan, inst.renewable_shape)
        assert np.sum((da - inst.price_usd_per_mwh) * true_q) * dt >= bound - 1e-6 * abs(bound)
    assert settled["rt-only"].row()["policy"] == "rt-only"


def test_what_a_commitment_needs_is_checked():
    inst = tiny_horizon()
    with pytest.raises(InputError, match="policy"):
        make_commitment(inst, "virtual")
    with pytest.raises(InputError) as err:
        dayahead_price(dataclasses.replace(inst, forecast=dataclasses.replace(inst.forecast, source="gbm")))
    assert err.value.field == "forecasts"
    with pytest.raises(InputError, match="forecasts"):
        make_commitment(dataclasses.replace(inst, forecast=None), "deterministic")
    bare = dataclasses.replace(inst, forecast=dataclasses.replace(
        inst.forecast, price_scenarios_usd_per_mwh=np.empty((0, inst.slots)),
        renewable_shape_scenarios=np.empty((0, inst.slots))))
    with pytest.raises(InputError, match="no price scenarios"):
        make_commitment(bare, "stochastic")
    with pytest.raises(InputError) as err:
        scenario_spread(inst, dayahead_price(inst), 4)
    assert err.value.field == "scenarios"


def test_the_packaged_dayahead_price_is_the_caiso_lmp():
    from agents.days import split_days
    from aidc_env.case import build_instances
    from aidc_env.dayahead import dayahead_instances
    from aidc_env.forecasts import load_forecasts
    from aidc_env.profiles import hourly_to_slots, load_profiles
    from experiments.settlement_study import check_dayahead_lmp

    profiles, forecasts = load_profiles("caiso-2023"), load_forecasts("caiso-2023-dayahead")
    day = "2023-06-05"
    inst = dayahead_instances(build_instances("2048", [day], profiles, segments=4), profiles, forecasts,
                              split_days(profiles.dates())[0], 2, price_source="supplied", price_issue_hour=13)[day]
    np.testing.assert_array_equal(dayahead_price(inst), hourly_to_slots(forecasts.supplied_price(day), inst.slots))
    check_dayahead_lmp(inst, forecasts)


@pytest.mark.parametrize("argv", [["--weeks", "0"], ["--scenarios", "1000"], ["--time-limit", "-1"], ["--bogus"]])
def test_the_study_refuses_bad_input_in_one_line(argv, capsys):
    from experiments.settlement_study import main

    assert run_cli(main, argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
