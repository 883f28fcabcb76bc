"""Coincident-peak charges (aidc_env.coincident): the system's monthly peaks, the charge on an instance's slots by hand,
the horizon without a peak, bit-identity without the option, the JSON round trip, the refusals, the oracle against
brute force, the env's slot costs and what it reveals before the peak, the itemised bill."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from aidc_env.baselines import fixed_schedule
from aidc_env.case import build_instance
from aidc_env.coincident import (BUNDLED, ERCOT_4CP, ERCOT_4CP_USD_PER_KW, CoincidentPeak, load_coincident_peak,
                                 monthly_peak_hours, on_days, system_peak_hours)
from aidc_env.errors import InputError
from aidc_env.instance import Instance
from aidc_env.simulator import bill_line, simulate, site_bills
from aidc_env.tariffs import load_tariff
from tests.conftest import assert_day_models_equal_brute_force, dayahead_instance

PEAK_DAY = "2023-07-25"
"""The day of CAISO's July 2023 system peak (19:00-20:00 local, 43,084 MW): the month's peak hour of ercot-4cp."""
PEAK_HOUR = 19
PER_HOUR = 4
"""Slots per hour of the 2048 case (15-minute slots)."""
RATES = (0.0,) * 6 + (12.0, 8.0) + (0.0,) * 4
"""A hand-made charge: $12/kW in July, $8/kW in August."""


def _peak_slots(day_offset: int = 0, hour: int = PEAK_HOUR) -> np.ndarray:
    return (day_offset * 24 + hour) * PER_HOUR + np.arange(PER_HOUR)


@pytest.fixture(scope="module")
def peak_day() -> Instance:
    """The 2048 case on the July peak day, one segment a day per job, at the LMP with ercot-4cp."""
    return build_instance("2048", day=PEAK_DAY, profiles="caiso-2023", segments=1, coincident_peak="ercot-4cp")


# ------------------------------------------------------------------------------------------------ the system's peaks


def test_monthly_peak_hours_of_a_hand_made_load() -> None:
    """Ties go to the earlier hour, missing hours are skipped (the highest available hour is the peak), an hour given
    twice counts once at its higher load, and intervals = 2 takes the two highest hours of each month."""
    hours = ["2023-06-01T10:00", "2023-06-01T11:00", "2023-06-02T17:00", "2023-06-03T18:00", "2023-06-03T18:00",
             "2023-07-01T01:00", "2023-07-02T14:00", "2023-07-31T23:00"]
    load = [5.0, 9.0, 9.0, 4.0, 8.5, np.nan, 3.0, 2.0]
    assert monthly_peak_hours(hours, load) == {"2023-06": ("2023-06-01T11:00",), "2023-07": ("2023-07-02T14:00",)}
    assert monthly_peak_hours(hours, load, 2) == {"2023-06": ("2023-06-01T11:00", "2023-06-02T17:00"),
                                                  "2023-07": ("2023-07-02T14:00", "2023-07-31T23:00")}
    assert monthly_peak_hours(hours, load, 3)["2023-06"] == ("2023-06-01T11:00", "2023-06-02T17:00",
                                                             "2023-06-03T18:00")  # 8.5, the higher of the two
    with pytest.raises(InputError, match="YYYY-MM-DDTHH:00"):
        monthly_peak_hours(["2023-06-01 10:00"], [1.0])


def test_the_system_peaks_are_the_whole_months() -> None:
    """CAISO 2023's summer peaks, found over every hour of each month (docs/bills.md quotes them)."""
    table = system_peak_hours()
    assert [table[f"2023-{m:02d}"] for m in (6, 7, 8, 9)] == [
        ("2023-06-30T19:00",), ("2023-07-25T19:00",), ("2023-08-16T18:00",), ("2023-09-08T19:00",)]
    week = on_days(ERCOT_4CP, "2023-07-01", 7)  # the week misses the peak: the month's peak is still the 25th
    assert week.peak_hours == ("2023-07-25T19:00",)
    assert on_days(ERCOT_4CP, "2023-05-01", 31).peak_hours == ()  # May: no charge
    assert on_days(ERCOT_4CP, "2023-05-30", 3).peak_hours == ("2023-06-30T19:00",)  # touches June


def test_the_ercot_rate_is_the_tcrf_over_four_peaks() -> None:
    assert ERCOT_4CP_USD_PER_KW == pytest.approx(3.516757 * 12 / 4)
    assert [r > 0 for r in ERCOT_4CP.rate_usd_per_kw] == [m in (6, 7, 8, 9) for m in range(1, 13)]
    assert BUNDLED["ercot-4cp"] is ERCOT_4CP and load_coincident_peak("ercot-4cp") is ERCOT_4CP


# ------------------------------------------------------------------------------------------------ the charge by hand


def test_the_charge_is_the_rate_times_the_peak_hours_import(peak_day: Instance) -> None:
    """Fixed training on the peak day: the demand charge is $10.55/kW times the mean import (kW) of 19:00-20:00, and
    the objective is the LMP objective plus it."""
    plain = build_instance("2048", day=PEAK_DAY, profiles="caiso-2023", segments=1)
    result = simulate(peak_day, fixed_schedule(peak_day))
    grid_kw = result.flows.grid_mw * 1000
    expected = ERCOT_4CP_USD_PER_KW * float(np.mean(grid_kw[_peak_slots()]))
    assert expected > 1000  # fixed training imports about a megawatt at 19:00
    assert result.metrics.demand_charge_usd == pytest.approx(expected, rel=1e-12)
    before = simulate(plain, fixed_schedule(plain)).metrics
    assert result.metrics.objective_usd == pytest.approx(before.objective_usd + expected, rel=1e-12)
    assert result.metrics.grid_cost_usd == before.grid_cost_usd
    charges = peak_day.tariff_terms.demand
    assert [int(c.slots[0]) for c in charges] == _peak_slots().tolist() and all(c.coincident for c in charges)


def test_several_intervals_and_months_by_hand() -> None:
    """Two peak hours a month (each half the month's rate) on a horizon of July 30 - August 1: both of July's and
    the first of August's in it, the second of August's not."""
    peak = CoincidentPeak(name="hand", rate_usd_per_kw=RATES, intervals_per_month=2,
                          peak_hours=("2023-07-30T15:00", "2023-07-31T20:00", "2023-08-01T00:00", "2023-08-20T12:00"))
    inst = dataclasses.replace(build_instance("2048", day="2023-07-30", profiles="caiso-2023", horizon_days=3),
                               coincident_peak=peak)
    grid_kw = simulate(inst, fixed_schedule(inst)).flows.grid_mw * 1000
    expected = (12.0 / 2 * grid_kw[_peak_slots(0, 15)].mean() + 12.0 / 2 * grid_kw[_peak_slots(1, 20)].mean()
                + 8.0 / 2 * grid_kw[_peak_slots(2, 0)].mean())  # 08-20 is outside the horizon: nothing
    assert inst.tariff_terms.demand_usd(grid_kw / 1000) == pytest.approx(expected, rel=1e-12)
    assert len(inst.tariff_terms.demand) == 3 * PER_HOUR


def test_a_horizon_without_the_peak_pays_nothing_and_is_the_lmp_instance() -> None:
    """July 1-7 misses July's peak (the 25th): no charge, and every figure is the instance's without the option."""
    plain = build_instance("2048", day="2023-07-01", profiles="caiso-2023", horizon_days=7)
    option = build_instance("2048", day="2023-07-01", profiles="caiso-2023", horizon_days=7,
                            coincident_peak="ercot-4cp")
    assert option.tariff_terms is None and not option.has_demand_charges
    rows = fixed_schedule(plain)
    assert simulate(option, rows).metrics.to_dict() == simulate(plain, rows).metrics.to_dict()


def test_without_the_option_nothing_changes() -> None:
    """No option: no key in the instance's or case's JSON, no terms; with a tariff its terms are the tariff's alone."""
    plain = build_instance("2048", day=PEAK_DAY, profiles="caiso-2023")
    assert plain.coincident_peak is None and plain.tariff_terms is None
    assert "coincident_peak" not in json.loads(plain.to_json())
    billed = plain.with_tariff(load_tariff("sce-tou8"))
    assert not any(c.coincident for c in billed.tariff_terms.demand)
    both = build_instance("2048", day=PEAK_DAY, profiles="caiso-2023", tariff="sce-tou8", coincident_peak="ercot-4cp")
    rows = fixed_schedule(billed)
    extra = both.tariff_terms.demand_usd(simulate(both, rows).flows.grid_mw) - billed.tariff_terms.demand_usd(
        simulate(billed, rows).flows.grid_mw)
    assert extra == pytest.approx(simulate(both, rows).metrics.demand_charge_usd
                                  - simulate(billed, rows).metrics.demand_charge_usd, rel=1e-12)
    assert extra > 0 and both.tariff_terms.fixed_usd == billed.tariff_terms.fixed_usd


# ------------------------------------------------------------------------------------------------ the exchange format


def test_json_round_trip_keeps_the_objective(peak_day: Instance) -> None:
    doc = json.loads(peak_day.to_json())
    assert doc["coincident_peak"]["peak_hours"] == ["2023-07-25T19:00"]
    back = Instance.from_dict(doc)
    assert back.coincident_peak == peak_day.coincident_peak
    rows = fixed_schedule(peak_day)
    assert simulate(back, rows).metrics.objective_usd == simulate(peak_day, rows).metrics.objective_usd


@pytest.mark.parametrize(("changes", "field"), [
    ({"rate_usd_per_kw": [1.0] * 11}, "rate_usd_per_kw"),
    ({"rate_usd_per_kw": [-1.0] + [0.0] * 11}, "rate_usd_per_kw"),
    ({"rate_usd_per_kw": "ten"}, "rate_usd_per_kw"),
    ({"intervals_per_month": 0}, "intervals_per_month"),
    ({"intervals_per_month": 1.5}, "intervals_per_month"),
    ({"peak_hours": ["2023-05-10T19:00"]}, "peak_hours"),  # May: a month without a charge
    ({"peak_hours": ["2023-07-25 19:00"]}, "peak_hours"),
    ({"peak_hours": ["2023-07-32T19:00"]}, "peak_hours"),
    ({"peak_hours": ["2023-07-25T19:00", "2023-07-26T19:00"]}, "peak_hours"),  # two in a month of one interval
    ({"name": ""}, "name"),
    ({"colour": "red"}, "colour"),
])
def test_bad_documents_are_refused_naming_the_key(changes: dict, field: str) -> None:
    doc = {**ERCOT_4CP.to_dict(), **changes}
    with pytest.raises(InputError) as err:
        CoincidentPeak.from_dict(doc)
    assert err.value.field == f"coincident_peak.{field}" and "\n" not in str(err.value)


def test_a_file_with_its_own_peaks(tmp_path) -> None:
    """A user's file: read strictly; its peak hours are the system's, and a month it bills must have one."""
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"name": "mine", "rate_usd_per_kw": list(RATES), "peak_hours": ["2023-07-03T16:00"]}))
    peak = load_coincident_peak(str(path))
    assert peak.source == str(path) and peak.intervals_per_month == 1
    inst = build_instance("2048", day="2023-07-03", profiles="caiso-2023", coincident_peak=str(path))
    assert [int(c.slots[0]) for c in inst.tariff_terms.demand] == _peak_slots(0, 16).tolist()
    with pytest.raises(InputError, match="2023-08"):
        build_instance("2048", day="2023-08-03", profiles="caiso-2023", coincident_peak=str(path))
    path.write_text('{"name": "mine", "rate_usd_per_kw": [1, 2], }')
    with pytest.raises(InputError, match="not valid JSON"):
        load_coincident_peak(str(path))
    with pytest.raises(InputError, match="bundled: ercot-4cp"):
        load_coincident_peak("ercot-5cp")


@pytest.mark.parametrize("value", ["no-such-charge", "{bad}.json"])
def test_cli_refuses_a_bad_charge_in_one_line(value: str, tmp_path) -> None:
    if value.endswith(".json"):
        (tmp_path / value).write_text("{bad")
        value = str(tmp_path / value)
    out = subprocess.run([sys.executable, "-m", "aidc_env.case", "--coincident-peak", value, "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "coincident_peak" in out.stderr


def test_the_bills_study_refuses_a_bad_charge_in_one_line(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "experiments.bills_study", "--months", "7", "--coincident-peak", "nope",
                          "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "coincident_peak" in out.stderr
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------------ the oracle


def test_oracle_equals_brute_force(peak_day: Instance) -> None:
    """Both formulations prove the optimum that enumerating every schedule finds (one segment a day: the day's
    target leaves no room to move, the optimum pays the charge); its objective is the simulator's replay."""
    assert_day_models_equal_brute_force(peak_day)


def test_the_itemised_bill(peak_day: Instance) -> None:
    """At the LMP: the bill is the grid cost plus a line for the peak hour, the rate times its mean import; under a
    tariff: the tariff's bill plus the same line, its total the metrics' grid + demand + fixed charges."""
    for inst in (peak_day, peak_day.with_tariff(load_tariff("sce-tou8"))):
        result = simulate(inst, fixed_schedule(inst))
        m = result.metrics
        (bill,) = site_bills(inst, result, inst.tariff).values()
        (line,) = bill.coincident
        assert line.label == "2023-07 coincident peak 2023-07-25 19:00"
        assert line.demand_kw == pytest.approx(result.flows.grid_mw[_peak_slots()].mean() * 1000, rel=1e-12)
        assert line.rate_usd_per_kw == pytest.approx(ERCOT_4CP_USD_PER_KW)
        assert bill.total_usd == pytest.approx(m.grid_cost_usd + m.demand_charge_usd + m.fixed_charge_usd, rel=1e-12)
        assert bill.coincident_usd == pytest.approx(m.demand_charge_usd - bill.demand_usd, rel=1e-12)
        text = bill_line("2048", bill)
        assert "coincident peak $" in text and text.splitlines()[1].startswith("  2023-07 coincident peak")
        assert bill.to_dict()["coincident_peak"][0]["usd"] == pytest.approx(line.usd)


def test_simulate_cli_prints_the_coincident_line(peak_day: Instance, tmp_path) -> None:
    (tmp_path / "i.json").write_text(peak_day.to_json())
    (tmp_path / "s.json").write_text(json.dumps(fixed_schedule(peak_day)))
    out = subprocess.run([sys.executable, "-m", "aidc_env.simulate", "--instance", str(tmp_path / "i.json"),
                          "--schedule", str(tmp_path / "s.json"), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    (bill,) = json.loads(out.stdout)["bills"].values()
    assert bill["bill"] == "real-time LMP + ercot-4cp" and len(bill["coincident_peak"]) == 1


# ------------------------------------------------------------------------------------------------ the env


def test_env_slot_costs_sum_to_the_objective() -> None:
    """Random masked actions over two days holding July's peak: the slot costs sum to the simulator's objective (less
    the take-or-pay renewable cost), the coincident-peak charge included."""
    from aidc_env.env import DispatchEnv

    inst = build_instance("2048", day="2023-07-24", profiles="caiso-2023", horizon_days=2, coincident_peak="ercot-4cp")
    env = DispatchEnv(case=inst)
    env.reset(seed=3)
    rng, costs, done = np.random.default_rng(3), [], False
    while not done:
        _, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(env.unwrapped.action_masks()))))
        costs.append(info["slot_cost_usd"])
    metrics = simulate(inst, env.unwrapped.schedule()).metrics
    assert metrics.demand_charge_usd > 0
    assert sum(costs) == pytest.approx(metrics.objective_usd - metrics.renewable_cost_usd, rel=1e-9, abs=1e-6)


def _trace(inst: Instance, slots: int, seed: int) -> tuple[list[np.ndarray], list[np.ndarray], list[str], list]:
    """Observations and masks before each of the first ``slots`` slots (seeded masked-random actions), the
    observation's names, and the slot costs."""
    from aidc_env.env import DispatchEnv

    env = DispatchEnv(case=inst, information="dayahead")
    obs, _ = env.reset(seed=0)
    rng, observations, masks, costs = np.random.default_rng(seed), [], [], []
    for _ in range(slots):
        mask = env.action_masks()
        observations.append(obs)
        masks.append(mask)
        obs, _, _, _, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        costs.append(info["slot_cost_usd"])
    return observations, masks, env.observation_names(), costs


@pytest.mark.parametrize("tariff", [None, "pge-e19"])
def test_env_reveals_nothing_of_the_peak_before_its_slot(tariff: str | None) -> None:
    """Day-ahead information, two hourly days with the peak at 19:00 of the second: the observations and masks up to
    the peak slot are those without the option (the demand entries, present with the option alone, are 0), and the
    peak slot's cost is the only one that differs."""
    slot = 24 + 19
    base = dayahead_instance(0)
    shape = base.renewable_shape.copy()
    shape[slot] = 0.0  # no renewable at the peak: the site imports there
    base = dataclasses.replace(base, day="2023-07-24", renewable_shape=shape)
    base = base.with_tariff(load_tariff(tariff)) if tariff else base
    peak = CoincidentPeak(name="hand", rate_usd_per_kw=RATES, peak_hours=("2023-07-25T19:00",))
    option = dataclasses.replace(base, coincident_peak=peak)
    (obs_a, masks_a, names_a, costs_a), (obs_b, masks_b, names_b, costs_b) = (
        _trace(inst, slot + 1, seed=5) for inst in (base, option))
    kept = [names_b.index(name) for name in names_a]
    if tariff is None:
        demand = [names_b.index(name) for name in ("peak_flat", "peak_tou")]
        assert len(names_b) == len(names_a) + 2 and not np.any(np.array(obs_b)[:, demand])
    for a, b, mask_a, mask_b in zip(obs_a, obs_b, masks_a, masks_b, strict=True):
        np.testing.assert_array_equal(a, b[kept])
        np.testing.assert_array_equal(mask_a, mask_b)
    assert costs_a[:slot] == costs_b[:slot] and costs_b[slot] > costs_a[slot]


def test_outlooks_and_mpc_do_not_know_the_peak(peak_day: Instance) -> None:
    """A day-ahead view drops the charge (a perfect one keeps it: the truth); MPC refuses it in one line."""
    from agents.mpc import site_views, sub_instance
    from agents.open_loop import viewed

    inst = dataclasses.replace(dayahead_instance(0), day="2023-07-24",
                               coincident_peak=CoincidentPeak(name="hand", rate_usd_per_kw=RATES,
                                                              peak_hours=("2023-07-25T19:00",)))
    assert viewed(inst, "dayahead").coincident_peak is None
    assert viewed(inst, "perfect").coincident_peak == inst.coincident_peak
    with pytest.raises(InputError, match="coincident-peak charge the system's peak, known only after the month"):
        sub_instance(peak_day, 0, peak_day.slots, [0, 0], [0.0, 0.0], site_views(peak_day, 0, "perfect"))
