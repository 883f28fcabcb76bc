"""A tariff as the objective (aidc_env.billing): its terms on an instance, the simulator's bill, the oracle's demand
rows against brute force, the JSON round trip, the routes and the refusals."""

from __future__ import annotations

import copy
import itertools
import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oracle
from aidc_env.billing import tariff_terms
from aidc_env.case import build_instance
from aidc_env.errors import InputError
from aidc_env.information import outlook
from aidc_env.instance import PAUSE, Instance
from aidc_env.simulator import simulate, site_bills
from aidc_env.tariffs import BUNDLED, Tariff, load_tariff
from oracle.entry import route
from tests.conftest import assert_day_models_equal_brute_force

DAY = "2023-07-05"
"""A Wednesday of July: E-19's summer peak and part-peak demand periods apply."""


@pytest.fixture(scope="module")
def e19() -> Tariff:
    return load_tariff("pge-e19")


@pytest.fixture(scope="module")
def small(e19: Tariff) -> Instance:
    """The 2048 case on a July day, one checkpoint segment a day per job, billed by E-19."""
    return build_instance("2048", day=DAY, profiles="caiso-2023", segments=1).with_tariff(e19)


def schedules(inst: Instance):
    """Every schedule of a one-segment instance (each job: a mode or a pause)."""
    per_job = [list(range(job.n_modes)) + [PAUSE] for job in inst.jobs]
    for choice in itertools.product(*per_job):
        yield [[c] for c in choice]


def _document(**changes) -> dict:
    doc = copy.deepcopy(dict(load_tariff("pge-e19").document))
    doc.update(changes)
    return doc


# ------------------------------------------------------------------------------ the terms are the bill


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_terms_on_a_month_equal_the_bill(name: str) -> None:
    """Energy at the terms' rates + demand + fixed charges = aidc_env.tariffs.bill's total, for a month of fixed
    training and for the same month with the jobs paused in the evening."""
    inst = build_instance("2048", day="2023-08-01", profiles="caiso-2023", horizon_days=31,
                          segments=1).with_tariff(load_tariff(name))
    for pause_every in (0, 3):
        rows = [[PAUSE if pause_every and s % pause_every == 0 else job.baseline_mode for s in range(job.segments)]
                for job in inst.jobs]
        result = simulate(inst, rows)
        m = result.metrics
        (bill,) = site_bills(inst, result, inst.tariff).values()
        assert m.grid_cost_usd + m.demand_charge_usd + m.fixed_charge_usd == pytest.approx(bill.total_usd, rel=1e-12)
        assert m.demand_charge_usd == pytest.approx(bill.demand_usd, rel=1e-12)
        assert m.fixed_charge_usd == pytest.approx(bill.fixed_usd, rel=1e-12)
        assert m.operating_cost_usd == pytest.approx(m.grid_cost_usd + m.renewable_cost_usd + m.curtailment_penalty_usd
                                                     + m.demand_charge_usd + m.fixed_charge_usd, rel=1e-12)
        assert sum(d.operating_cost_usd for d in m.days) == pytest.approx(
            m.operating_cost_usd - m.demand_charge_usd - m.fixed_charge_usd, rel=1e-12)  # a month's charges: no day's


def test_energy_rates_follow_the_calendar(e19: Tariff) -> None:
    """E-19 in July: weekday 16:00-21:00 is the peak period (0.16484 $/kWh), a Saturday is off-peak all day."""
    terms = tariff_terms(e19, "2023-07-07", 2 * 96, 0.25)  # Friday, Saturday
    friday, saturday = terms.energy_usd_per_mwh[:96], terms.energy_usd_per_mwh[96:]
    assert friday[17 * 4] == pytest.approx(164.84)
    assert friday[3 * 4] == pytest.approx(e19.energy_rate[2, 0] * 1000)
    assert np.all(saturday == saturday[0])
    labels = [c.label for c in terms.demand]
    assert labels == ["2023-07 TOU demand period 2", "2023-07 TOU demand period 3", "2023-07 flat demand"]
    assert terms.fixed_usd == pytest.approx(2 * e19.fixed_charge)  # $/day


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_demand_charge_is_the_highest_import_priced(data, small: Instance) -> None:
    """For any schedule, the demand charges are each charge's rate times the highest import (kW) over its slots."""
    rows = data.draw(st.sampled_from(list(schedules(small))))
    result = simulate(small, rows)
    grid_kw = result.flows.grid_mw * 1000
    expected = sum(float(c.rate_usd_per_kw[0]) * float(grid_kw[c.slots].max()) for c in small.tariff_terms.demand)
    assert result.metrics.demand_charge_usd == pytest.approx(expected, rel=1e-12, abs=1e-9)


# ------------------------------------------------------------------------------ the oracle


def test_oracle_with_demand_charges_equals_brute_force(small: Instance) -> None:
    """Both formulations prove the optimum that enumerating every schedule finds, and their objective is the
    simulator's replay (checked inside the oracle too)."""
    assert_day_models_equal_brute_force(small)


def test_demand_charges_change_the_optimum(e19: Tariff) -> None:
    """The oracle under E-19 flattens the import: its peak is at most the LMP optimum's, and its bill at most the LMP
    optimum's bill under the same tariff."""
    lmp = build_instance("2048", day=DAY, profiles="caiso-2023", segments=4)
    billed = lmp.with_tariff(e19)
    by_lmp = oracle.solve(lmp, mip_gap=0.0)
    by_bill = oracle.solve(billed, mip_gap=0.0)
    assert by_bill.status == "optimal" and by_lmp.status == "optimal"
    replay = simulate(billed, by_lmp.schedule).metrics
    assert by_bill.objective_usd <= replay.objective_usd + 1e-6
    assert by_bill.metrics.peak_grid_mw <= replay.peak_grid_mw + 1e-9


def test_routes() -> None:
    """auto: the textbook MILP for demand charges (exact solves them too); the decomposition refuses them."""
    inst = build_instance("2048", day=DAY, profiles="caiso-2023").with_tariff(load_tariff("sce-tou8"))
    assert route(inst) == "textbook" and route(inst, "exact") == "exact"
    with pytest.raises(InputError, match="demand charges"):
        route(inst, "decomposition")


# ------------------------------------------------------------------------------ the instance


def test_json_round_trip_keeps_the_bill(small: Instance) -> None:
    back = Instance.from_dict(json.loads(small.to_json()))
    assert back.tariff is not None and back.tariff.name == small.tariff.name
    rows = [[job.baseline_mode] for job in small.jobs]
    assert simulate(back, rows).metrics.objective_usd == simulate(small, rows).metrics.objective_usd
    assert "tariff" not in json.loads(build_instance("2048").to_json())  # the day model's JSON unchanged


def test_prices_must_be_the_tariffs(small: Instance) -> None:
    import dataclasses

    with pytest.raises(InputError, match="energy rates"):
        dataclasses.replace(small, price_usd_per_mwh=small.price_usd_per_mwh + 1.0)


def test_outlook_knows_the_rates(small: Instance) -> None:
    """A tariff's rates are known in advance: every outlook sees them, not a forecast of the LMP."""
    price, _ = outlook(small, 10, "perfect")
    assert np.array_equal(price, small.price_usd_per_mwh[10:])


@pytest.mark.parametrize(("changes", "message"), [
    ({"energyratestructure": [[{"rate": 0.1, "max": 1000}, {"rate": 0.2}]] * 5}, "kWh tiers"),
    ({"flatdemandstructure": [[{"rate": 20, "max": 100}, {"rate": 10}]] * 2}, "not convex"),
    ({"mincharge": 100.0, "minchargeunits": "$/month"}, "minimum charge"),
])
def test_objective_refusals(changes: dict, message: str) -> None:
    tariff = Tariff.from_urdb(_document(**changes))
    with pytest.raises(InputError, match=message):
        build_instance("2048", day=DAY, profiles="caiso-2023").with_tariff(tariff)


def test_slot_and_day_refusals(e19: Tariff) -> None:
    with pytest.raises(InputError, match="15, 20, 30 or 60 minutes"):
        tariff_terms(e19, DAY, 192, 0.125)
    with pytest.raises(InputError, match="YYYY-MM-DD"):
        tariff_terms(e19, "reference", 96, 0.25)


def test_cli_bad_tariff_exits_2() -> None:
    out = subprocess.run([sys.executable, "-m", "oracle", "--tariff", "no-such-tariff", "--json"], capture_output=True,
                         text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "no-such-tariff" in out.stderr


def test_cli_month_under_a_tariff_itemises_the_bill() -> None:
    """python -m oracle --tariff: the demand charges in the metrics, the itemised bill beside them."""
    out = subprocess.run([sys.executable, "-m", "oracle", "--case", "2048", "--profiles", "caiso-2023", "--day", DAY,
                          "--segments", "2", "--tariff", "sdge-al-tou", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    metrics, (bill,) = answer["metrics"], answer["bills"].values()
    assert answer["status"] == "optimal" and metrics["demand_charge_usd"] > 0
    assert bill["total_usd"] == pytest.approx(metrics["grid_cost_usd"] + metrics["demand_charge_usd"]
                                              + metrics["fixed_charge_usd"], rel=1e-9)


def test_level_heuristic_starts_flat_and_feasible(e19: Tariff) -> None:
    """Under demand charges the oracle's start includes the level heuristic: feasible, and on a July week its bill is
    below fixed training's (a flatter import)."""
    from aidc_env.baselines import fixed_schedule
    from oracle.demand_start import level_schedules
    from oracle.model import best_start

    inst = build_instance("2048", day="2023-07-03", profiles="caiso-2023", horizon_days=7).with_tariff(e19)
    candidates = level_schedules(inst)
    assert candidates
    fixed = simulate(inst, fixed_schedule(inst)).metrics
    scored = [simulate(inst, rows).metrics for rows in candidates]
    assert all(m.feasible for m in scored)
    best = min(scored, key=lambda m: m.objective_usd)
    assert best.objective_usd < fixed.objective_usd and best.peak_grid_mw < fixed.peak_grid_mw
    assert best_start(inst)[1] <= best.objective_usd
    assert level_schedules(build_instance("2048", day="2023-07-03", profiles="caiso-2023")) == []  # no tariff


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), tariff=st.sampled_from(sorted(BUNDLED)))
def test_env_pays_demand_charges_as_the_peaks_rise(seed: int, tariff: str) -> None:
    """Random masked actions on a two-day July horizon: the slot costs sum to the simulator's objective (less the
    take-or-pay renewable cost), demand and fixed charges included; the peaks observed never fall; check_env passes."""
    from gymnasium.utils.env_checker import check_env

    from aidc_env.env import DispatchEnv

    inst = build_instance("2048", day=DAY, profiles="caiso-2023", horizon_days=2).with_tariff(load_tariff(tariff))
    env = DispatchEnv(case=inst)
    obs, _ = env.reset(seed=seed)
    names = env.unwrapped.observation_names()
    flat = names.index("peak_flat")
    rng, costs, peaks, done = np.random.default_rng(seed), [], [obs[flat]], False
    while not done:
        action = int(rng.choice(np.flatnonzero(env.unwrapped.action_masks())))
        obs, _, done, _, info = env.step(action)
        costs.append(info["slot_cost_usd"])
        peaks.append(obs[flat])
    metrics = simulate(inst, env.unwrapped.schedule()).metrics
    assert metrics.demand_charge_usd > 0
    assert sum(costs) == pytest.approx(metrics.objective_usd - metrics.renewable_cost_usd, rel=1e-9, abs=1e-6)
    assert np.all(np.diff(peaks) >= 0)
    check_env(DispatchEnv(case=inst), skip_render_check=True)


def test_per_job_action_refuses_demand_charges_in_one_line(small: Instance) -> None:
    from aidc_env.env import DispatchEnv

    with pytest.raises(InputError, match="demand charges"):
        DispatchEnv(case=small, action="per_job")


@pytest.mark.parametrize(("argv", "field"), [(["--months", "13"], "months"), (["--tariffs", "nope"], "tariff"),
                                              (["--time-limit", "0"], "time-limit")])
def test_the_bills_study_refuses_bad_input_in_one_line(argv, field, tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "experiments.bills_study", *argv, "--out", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and field in out.stderr
    assert not (tmp_path / "o").exists()


def test_mpc_bills_energy_rates_and_refuses_demand_charges(small: Instance) -> None:
    """A re-plan's sub-instance keeps a tariff's energy rates as its prices; demand charges are refused in one line."""
    from agents.mpc import site_views, sub_instance

    doc = _document()
    for key in ("demandratestructure", "demandweekdayschedule", "demandweekendschedule", "flatdemandstructure",
                "flatdemandmonths"):
        doc.pop(key, None)
    energy_only = build_instance("2048", day=DAY, profiles="caiso-2023").with_tariff(Tariff.from_urdb(doc))
    assert not energy_only.has_demand_charges
    sub = sub_instance(energy_only, 24, 96, [0, 0], [0.0, 0.0], site_views(energy_only, 24, "perfect"))
    assert sub.tariff is None and np.array_equal(sub.price_usd_per_mwh, energy_only.price_usd_per_mwh[24:])
    with pytest.raises(InputError, match="demand charges"):
        sub_instance(small, 0, small.slots, [0, 0], [0.0, 0.0], site_views(small, 0, "perfect"))


def test_env_increments_telescope_to_a_tiered_charge() -> None:
    """With kW tiers (rates rising), the increments paid as the peak rises sum to the tiered charge of the peak."""
    from aidc_env.env.demand import DemandCharges
    from aidc_env.tariffs import tiered_charge

    tiered = Tariff.from_urdb(_document(flatdemandstructure=[[{"rate": 10.0, "max": 300.0}, {"rate": 25.0}]] * 2))
    inst = build_instance("2048", day=DAY, profiles="caiso-2023").with_tariff(tiered)
    charges = DemandCharges()
    charges.reset(inst)
    rng = np.random.default_rng(0)
    grid = rng.uniform(0.0, 0.9, inst.slots)
    paid = sum(charges.slot_usd(t, float(g)) for t, g in enumerate(grid))
    expected = inst.tariff_terms.fixed_usd + inst.tariff_terms.demand_usd(grid)
    assert paid == pytest.approx(expected, rel=1e-12)
    flat = next(c for c in inst.tariff_terms.demand if c.flat)
    assert flat.charge_usd(grid) == pytest.approx(tiered_charge(grid.max() * 1000, np.array([300.0, np.inf]),
                                                                np.array([10.0, 25.0])))


def test_level_heuristic_delivers_grid_calls(e19: Tariff) -> None:
    """With a grid call, the level heuristic caps the call's slots at its limit: every candidate delivers it."""
    from aidc_env.calls import with_calls
    from aidc_env.schema.case import CallSpec
    from oracle.demand_start import level_schedules

    inst = build_instance("2048", day="2023-07-03", profiles="caiso-2023", horizon_days=3).with_tariff(e19)
    called = with_calls(inst, [CallSpec(program="bip", start_hour=16.0, hours=4.0, reduction_share=0.25,
                                        day_offset=1)])
    candidates = level_schedules(called)
    assert candidates
    assert all(simulate(called, rows).metrics.calls_delivered for rows in candidates)
