"""Utility tariffs (aidc_env/tariffs.py): the bill against NREL SAM's utility-rate model, hand-counted bills,
refusals of bad documents and inputs, and properties of the bill.

The independent check runs PySAM's ``Utilityrate5`` (the same ssc code as NREL SAM and REopt's rate tools) on one
year of 15-minute load (35,040 values) for each bundled tariff and compares each month's charges to the cent. SAM's
year starts on a Monday and has no 29 February, so the profile is billed from 2018-01-01 (a Monday; no leap day).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from importlib import resources

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aidc_env.errors import InputError, run_cli
from aidc_env.tariffs import BUNDLED, TARIFF_DIR, Tariff, bill, load_tariff, main

SAM_YEAR_START = dt.date(2018, 1, 1)
"""A Monday starting a non-leap year: SAM's calendar (ssc ``util::weekday``: the first hour of the year is Monday)."""
SLOTS_PER_YEAR = 35040
SLOTS_PER_DAY = 96
CENT = 0.005
"""Equal to the cent: the two bills round to the same cent (half a cent either way)."""
SCE = "sce-tou8"


def document(name: str) -> dict:
    """A bundled tariff's URDB item, as stored."""
    text = resources.files("aidc_env").joinpath(*TARIFF_DIR, BUNDLED[name]).read_text(encoding="utf-8")
    doc = json.loads(text)
    return doc["items"][0] if "items" in doc else doc


def year_load(seed: int = 7) -> np.ndarray:
    """A data-center-like year of 15-minute grid load (kW): a 20 MW base, a daily swing (cooling, afternoon peak), a
    summer bump, training-job steps lasting hours, and noise; seeded."""
    rng = np.random.default_rng(seed)
    t = np.arange(SLOTS_PER_YEAR) / 4.0  # hours
    daily = 2500 * np.sin(2 * np.pi * (t - 9) / 24)
    summer = 3000 * np.exp(-(((t / 24) - 200) / 45) ** 2)
    steps = np.repeat(rng.choice([-4000.0, 0.0, 3000.0], size=SLOTS_PER_YEAR // 16, p=[0.2, 0.6, 0.2]), 16)
    return np.clip(20000 + daily + summer + steps + rng.normal(0, 600, SLOTS_PER_YEAR), 0, None)


def sam_bill(item: dict, load_kw: np.ndarray) -> dict[str, np.ndarray]:
    """PySAM's monthly charges ($, January first) of ``load_kw`` (15-minute kW, one year) under a URDB item."""
    import PySAM.Utilityrate5 as utilityrate5  # the dev extra installs it: a missing PySAM fails, never skips
    from PySAM.UtilityRateTools import URDBv8_to_ElectricityRates

    model = utilityrate5.new()
    model.ElectricityRates.assign(URDBv8_to_ElectricityRates(copy.deepcopy(item)))
    model.ElectricityRates.rate_escalation = [0.0]
    model.Lifetime.assign({"analysis_period": 1, "inflation_rate": 0.0, "system_use_lifetime_output": 0})
    model.SystemOutput.assign({"gen": [0.0] * len(load_kw), "degradation": [0.0]})
    model.Load.assign({"load": load_kw.tolist(), "load_escalation": [0.0]})
    model.execute(0)
    out = model.Outputs
    return {"energy": np.array(out.year1_monthly_ec_charge_without_system),
            "flat": np.array(out.year1_monthly_dc_fixed_without_system),
            "tou": np.array(out.year1_monthly_dc_tou_without_system),
            "fixed": np.array(out.year1_monthly_fixed_without_system),
            "minimum": np.array(out.year1_monthly_minimum_without_system),
            "total": np.array(out.utility_bill_wo_sys_ym[1])}


def ours(item: dict, load_kw: np.ndarray) -> dict[str, np.ndarray]:
    months = bill(Tariff.from_urdb(item), load_kw, SAM_YEAR_START).months
    assert [m.month for m in months] == list(range(1, 13))
    return {"energy": np.array([m.energy_total_usd for m in months]),
            "flat": np.array([m.flat_demand_usd for m in months]),
            "tou": np.array([sum(m.demand_usd) for m in months]), "fixed": np.array([m.fixed_usd for m in months]),
            "minimum": np.array([m.minimum_usd for m in months]), "total": np.array([m.total_usd for m in months]),
            "days": np.array([m.days for m in months])}


def tiered(item: dict) -> dict:
    """A variant of a tariff with two monthly kWh tiers on every energy period (the second 20% dearer, from 8 GWh a
    month) and two kW tiers on every demand charge (the second 10% cheaper above 20 MW)."""
    item = copy.deepcopy(item)
    item["energyratestructure"] = [[dict(tiers[0], max=8e6), dict(tiers[0], rate=tiers[0]["rate"] * 1.2)]
                                   for tiers in item["energyratestructure"]]
    for key in ("demandratestructure", "flatdemandstructure"):
        item[key] = [[dict(tiers[0], max=20000.0), dict(tiers[0], rate=tiers[0]["rate"] * 0.9)]
                     for tiers in item[key]]
    return item


# ------------------------------------------------------------------------------------------------ against PySAM


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_every_month_equals_pysam_to_the_cent(name):
    item, load = document(name), year_load()
    sam, mine = sam_bill(item, load), ours(item, load)
    for part in ("energy", "flat", "tou", "minimum"):
        assert np.max(np.abs(mine[part] - sam[part])) < CENT, part
    if load_tariff(name).fixed_unit == "$/month":
        assert np.max(np.abs(mine["total"] - sam["total"])) < CENT
        assert np.max(np.abs(mine["fixed"] - sam["fixed"])) < CENT
    else:  # $/day: the bill counts the month's days, SAM (and URDB's converter) 365/12 days in every month
        rate = item["fixedchargefirstmeter"]
        assert np.allclose(mine["fixed"], rate * mine["days"]) and np.allclose(sam["fixed"], rate * 365 / 12)
        assert np.max(np.abs((mine["total"] - mine["fixed"]) - (sam["total"] - sam["fixed"]))) < CENT
    assert mine["total"].min() > 1e6  # a 20 MW load: millions a month, so the cent is a strict test


def test_tiers_and_a_minimum_charge_equal_pysam_to_the_cent():
    """kWh tiers crossed mid-month and kW tiers crossed by the peak, then a minimum charge above a tiny load's bill."""
    item, load = tiered(document(SCE)), year_load(seed=11)
    sam, mine = sam_bill(item, load), ours(item, load)
    assert np.max(np.abs(mine["total"] - sam["total"])) < CENT
    assert load_tariff(SCE).energy_rate.shape[1] == 1 and Tariff.from_urdb(item).energy_rate.shape[1] == 2
    small = dict(document(SCE), mincharge=20000.0, minchargeunits="$/month")
    tiny = np.full(SLOTS_PER_YEAR, 10.0)
    sam, mine = sam_bill(small, tiny), ours(small, tiny)
    assert mine["minimum"].min() > 0 and np.max(np.abs(mine["total"] - sam["total"])) < CENT
    assert np.allclose(mine["total"], 20000.0)


# ------------------------------------------------------------------------------------------------ hand-counted


def sce_rate(period: int) -> float:
    tier = document(SCE)["energyratestructure"][period][0]
    return tier["rate"] + tier["adj"]


def test_flat_load_on_a_summer_weekday_by_hand():
    """SCE TOU-8, Wednesday 2024-07-10, 1000 kW all day: 19 h at the summer off-peak rate (period 3), 16:00-21:00 at
    the on-peak rate (period 5); on-peak demand $29.54/kW and facilities $25.36/kW on 1000 kW; 1/31 of $447.44."""
    b = bill(load_tariff(SCE), np.full(SLOTS_PER_DAY, 1000.0), dt.date(2024, 7, 10))
    (month,) = b.months
    assert (month.year, month.month, month.days, month.days_in_month) == (2024, 7, 1, 31)
    assert month.energy_kwh[3] == pytest.approx(19000.0) and month.energy_kwh[5] == pytest.approx(5000.0)
    assert month.energy_total_usd == pytest.approx(19000 * sce_rate(3) + 5000 * sce_rate(5))
    assert month.demand_peak_kw == pytest.approx((1000.0, 0.0, 1000.0))
    assert month.demand_usd == pytest.approx((0.0, 0.0, 29540.0))
    assert month.flat_demand_usd == pytest.approx(25360.0)
    assert month.fixed_usd == pytest.approx(447.44 / 31)
    assert b.total_usd == pytest.approx(19000 * 0.11343 + 5000 * 0.15186 + 29540 + 25360 + 447.44 / 31)


@pytest.mark.parametrize("hour, on_peak_kw", [(17, 3000.0), (3, 1000.0)])
def test_one_peak_slot(hour, on_peak_kw):
    """One 15-minute slot at 3000 kW on a 1000 kW day: the facilities charge always sees it, the on-peak demand
    charge only when it falls 16:00-21:00; its extra 500 kWh is billed at its hour's rate."""
    load = np.full(SLOTS_PER_DAY, 1000.0)
    load[hour * 4 + 1] = 3000.0
    (month,) = bill(load_tariff(SCE), load, dt.date(2024, 7, 10)).months
    assert month.peak_kw == 3000.0 and month.flat_demand_usd == pytest.approx(3000 * 25.36)
    assert month.demand_usd[2] == pytest.approx(on_peak_kw * 29.54)
    extra = 500 * sce_rate(5 if 16 <= hour < 21 else 3)
    assert month.energy_total_usd == pytest.approx(19000 * sce_rate(3) + 5000 * sce_rate(5) + extra)


@pytest.mark.parametrize("day, holidays", [(dt.date(2024, 7, 13), ()), (dt.date(2024, 7, 4), (dt.date(2024, 7, 4),))])
def test_a_weekend_day_and_a_listed_holiday(day, holidays):
    """Saturday (or 4 July, listed as a holiday): the weekend schedule's 16:00-21:00 period 4, no on-peak demand
    charge (summer weekends have none), the facilities charge still."""
    (month,) = bill(load_tariff(SCE), np.full(SLOTS_PER_DAY, 1000.0), day, holidays=holidays).months
    assert month.energy_total_usd == pytest.approx(19000 * sce_rate(3) + 5000 * sce_rate(4))
    assert sum(month.demand_usd) == 0.0 and month.flat_demand_usd == pytest.approx(25360.0)


def test_a_profile_across_months_and_a_daily_fixed_charge():
    """PG&E E-19, 2024-01-31 and 2024-02-01: two months, each one day of $19.71253/day; the maximum-demand charge
    ($19.53/kW) and the winter part-peak one ($0.13/kW, weekdays 8:00-21:00) on each month's own peak."""
    load = np.concatenate((np.full(SLOTS_PER_DAY, 600.0), np.full(SLOTS_PER_DAY, 800.0)))
    b = bill(load_tariff("pge-e19"), load, pd.Timestamp("2024-01-31"))
    assert [(m.month, m.days, m.days_in_month) for m in b.months] == [(1, 1, 31), (2, 1, 29)]
    assert [m.fixed_usd for m in b.months] == pytest.approx([19.71253, 19.71253])
    assert [m.peak_kw for m in b.months] == [600.0, 800.0]
    assert [m.demand_usd[1] for m in b.months] == pytest.approx([600 * 0.13, 800 * 0.13])
    assert [m.flat_demand_usd for m in b.months] == pytest.approx([600 * 19.53, 800 * 19.53])
    assert b.to_frame()["total_usd"].sum() == pytest.approx(b.total_usd)


def test_demand_is_the_mean_over_15_minutes_whatever_the_slot():
    """5-minute slots: one 5-minute spike of 4000 kW on 1000 kW is a 2000 kW 15-minute demand; hourly slots of a
    flat load bill as its 15-minute slots do."""
    load = np.full(SLOTS_PER_DAY * 3, 1000.0)
    load[17 * 12] = 4000.0
    (month,) = bill(load_tariff(SCE), load, dt.date(2024, 7, 10), slot_hours=1 / 12).months
    assert month.peak_kw == pytest.approx(2000.0) and month.demand_usd[2] == pytest.approx(2000 * 29.54)
    hourly = bill(load_tariff(SCE), np.full(24, 1000.0), dt.date(2024, 7, 10), slot_hours=1.0)
    quarter = bill(load_tariff(SCE), np.full(SLOTS_PER_DAY, 1000.0), dt.date(2024, 7, 10))
    assert hourly.total_usd == pytest.approx(quarter.total_usd)


# ------------------------------------------------------------------------------------------------ refusals


def broken(**changes) -> dict:
    item = copy.deepcopy(document(SCE))
    for key, value in changes.items():
        if value is None:
            item.pop(key, None)
        else:
            item[key] = value
    return item


@pytest.mark.parametrize("doc, field", [
    ([1, 2], "tariff"),
    ({"items": []}, "items"),
    ({"items": [document(SCE), document("pge-e19")]}, "items"),
    (broken(energyratestructure=None), "energyratestructure"),
    (broken(energyweekdayschedule=[[0] * 24] * 11), "energyweekdayschedule"),
    (broken(energyweekendschedule=[[0] * 24] * 11 + [[0] * 23 + [9]]), "energyweekendschedule[11][23]"),
    (broken(energyratestructure=[[{"rate": "cheap"}]] * 6), "energyratestructure[0][0]"),
    (broken(energyratestructure=[[{"rate": 0.1, "unit": "kWh daily"}]] * 6), "energyratestructure[0][0].unit"),
    (broken(energyratestructure=[[{"rate": 0.1}, {"rate": 0.2}]] * 6), "energyratestructure[0][0].max"),
    (broken(lookbackpercent=0.8), "lookbackpercent"),
    (broken(coincidentratestructure=[[{"rate": 5}]]), "coincidentratestructure"),
    (broken(demandwindow=30), "demandwindow"),
    (broken(flatdemandunit="kVA"), "flatdemandunit"),
    (broken(flatdemandstructure=None), "flatdemandmonths"),
    (broken(flatdemandmonths=[0] * 11 + [3]), "flatdemandmonths[11]"),
    (broken(fixedchargeunits="$/week"), "fixedchargeunits"),
    (broken(mincharge=100.0, minchargeunits="$/year"), "minchargeunits"),
])
def test_a_bad_document_is_refused_naming_the_field(doc, field):
    with pytest.raises(InputError) as err:
        Tariff.from_urdb(doc)
    assert err.value.field == field


@pytest.mark.parametrize("kwargs, field", [
    ({"load_kw": np.full(95, 1.0)}, "load_kw"),
    ({"load_kw": np.full(96, -1.0)}, "load_kw"),
    ({"load_kw": [[1.0] * 96]}, "load_kw"),
    ({"start": "2024-07-10"}, "start"),
    ({"start": pd.Timestamp("2024-07-10 06:00")}, "start"),
    ({"slot_hours": 0.3}, "slot_hours"),
    ({"slot_hours": 2.0}, "slot_hours"),
])
def test_a_bad_profile_is_refused_naming_the_field(kwargs, field):
    args = {"load_kw": np.full(96, 1.0), "start": dt.date(2024, 7, 10), **kwargs}
    with pytest.raises(InputError) as err:
        bill(load_tariff(SCE), **args)
    assert err.value.field == field


def test_what_the_bill_leaves_out_is_listed():
    assert any("reactive" in item for item in load_tariff(SCE).left_out)
    assert load_tariff("pge-e19").left_out == ()


def test_cli_lists_shows_and_refuses_with_one_line(tmp_path, capsys):
    assert run_cli(main, ["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in BUNDLED)
    assert run_cli(main, ["--tariff", "sdge-al-tou"]) == 0
    shown = capsys.readouterr().out
    assert "AL-TOU" in shown and "45.61000 $/kW" in shown  # rate + adj of the summer on-peak demand charge
    response = tmp_path / "response.json"
    response.write_text(json.dumps({"items": [document("pge-e19")]}))
    assert run_cli(main, ["--tariff", str(response)]) == 0 and "19.7125 $/day" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(broken(demandwindow=60)))
    for argv in (["--tariff", str(bad)], ["--tariff", "nope"], [], ["--tariff", str(tmp_path / "missing.json")]):
        assert run_cli(main, argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err


# ------------------------------------------------------------------------------------------------ properties


profiles = st.lists(st.floats(0, 5000, allow_nan=False), min_size=SLOTS_PER_DAY * 2, max_size=SLOTS_PER_DAY * 2)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(load=profiles, extra=profiles, name=st.sampled_from(sorted(BUNDLED)),
       start=st.dates(dt.date(2023, 1, 1), dt.date(2025, 12, 30)))
def test_the_bill_is_monotone_in_the_load(load, extra, name, start):
    tariff = load_tariff(name)
    low, high = bill(tariff, np.array(load), start), bill(tariff, np.array(load) + np.array(extra), start)
    for a, b in zip(low.months, high.months, strict=True):
        assert b.energy_total_usd >= a.energy_total_usd - 1e-9 and b.demand_total_usd >= a.demand_total_usd - 1e-9
        assert b.total_usd >= a.total_usd - 1e-9


@settings(max_examples=30, deadline=None)
@given(load=profiles, scale=st.floats(0.1, 10), name=st.sampled_from(sorted(BUNDLED)),
       start=st.dates(dt.date(2023, 1, 1), dt.date(2025, 12, 30)))
def test_charges_scale_with_the_load_and_demand_with_the_peak(load, scale, name, start):
    """Untiered rates: energy and demand charges are linear in the load, the fixed charge does not move; a flat
    demand charge is the month's peak × its rate."""
    tariff = load_tariff(name)
    base, scaled = bill(tariff, np.array(load), start), bill(tariff, np.array(load) * scale, start)
    for a, b in zip(base.months, scaled.months, strict=True):
        assert b.energy_total_usd == pytest.approx(a.energy_total_usd * scale, rel=1e-9, abs=1e-6)
        assert b.demand_total_usd == pytest.approx(a.demand_total_usd * scale, rel=1e-9, abs=1e-6)
        assert b.peak_kw == pytest.approx(a.peak_kw * scale) and b.fixed_usd == a.fixed_usd
        flat = tariff.flat_rate[tariff.flat_months[a.month - 1], 0]
        assert a.flat_demand_usd == pytest.approx(a.peak_kw * flat)


def test_the_simulator_prints_each_site_bill_of_a_schedule(tmp_path, capsys):
    """``python -m aidc_env.simulate --tariff``: the bill of the schedule's grid import, equal to ``bill`` of the
    simulator's flows (kW = MW × 1000), beside unchanged metrics; a bad tariff ends in exit 2 and one line."""
    from aidc_env import simulator
    from aidc_env.baselines import fixed_schedule
    from aidc_env.case import build_instance
    from aidc_env.errors import EXIT_BAD_INPUT, run_cli

    inst = build_instance("2048")
    (tmp_path / "i.json").write_text(inst.to_json())
    (tmp_path / "s.json").write_text(json.dumps([list(map(int, row)) for row in fixed_schedule(inst)]))
    argv = ["--instance", str(tmp_path / "i.json"), "--schedule", str(tmp_path / "s.json"), "--json"]
    assert run_cli(simulator.main, [*argv, "--tariff", "sce-tou8"]) == 0
    out = json.loads(capsys.readouterr().out)
    result = simulator.simulate(inst, fixed_schedule(inst))
    expected = bill(load_tariff("sce-tou8"), result.flows.grid_mw * 1000.0, dt.date.fromisoformat(inst.day))
    site = inst.sites[0].name
    assert out["bills"][site]["total_usd"] == pytest.approx(expected.total_usd, rel=1e-12)
    assert out["metrics"]["objective_usd"] == pytest.approx(result.metrics.objective_usd, rel=1e-12)
    assert expected.demand_usd > 0 and len(out["bills"][site]["months"]) == 1
    assert run_cli(simulator.main, [*argv, "--tariff", "no-such-tariff"]) == EXIT_BAD_INPUT
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
