"""Horizon instances: D consecutive days on one time axis.

D = 1 is the day instance unchanged; a D-day instance is its days end to end with job state carried across
midnight; the simulator reports per-day metrics that add up to the horizon's, and the target check asks the
horizon target and every day's minimum share.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aidc_env.case import build_instance, build_instances, instance_from_args
from aidc_env.case import main as case_main
from aidc_env.errors import InputError, run_cli
from aidc_env.instance import PAUSE, Instance, load_instance
from aidc_env.profiles import DayProfile, ProfileSet
from aidc_env.simulator import main as simulate_main
from aidc_env.simulator import simulate
from tests.conftest import tiny_instance, tiny_job

ADDITIVE = ("operating_cost_usd", "grid_cost_usd", "renewable_cost_usd", "curtailment_penalty_usd",
            "decision_cost_usd", "load_energy_mwh", "grid_energy_mwh", "renewable_available_mwh",
            "renewable_used_mwh", "curtailment_mwh")
"""Metrics that are sums over slots: the horizon's equals the sum of its days'."""
PEAKS = ("peak_load_mw", "peak_grid_mw")
"""Metrics that are maxima over slots: the horizon's equals the largest of its days'."""
SUM_RTOL = 1e-12
"""Sums in a different order (one pass over T slots vs D passes) agree to rounding."""
NEW_JSON_KEYS = {"horizon_days", "days", "day_start_slots", "min_daily_share"}

SYNTHETIC_FIRST_DAY = dt.date(2023, 6, 10)
SYNTHETIC_DAYS = 5
SYNTHETIC_CAPACITY_MW = 20_000.0


def _synthetic_profiles(seed: int = 3) -> ProfileSet:
    """Five consecutive days of made-up hourly data with a skipped sixth day (a gap) and a seventh after it."""
    rng = np.random.default_rng(seed)
    hours = np.arange(24)
    days = {}
    for d in [*range(SYNTHETIC_DAYS), SYNTHETIC_DAYS + 1]:
        date = (SYNTHETIC_FIRST_DAY + dt.timedelta(days=d)).isoformat()
        solar = np.maximum(0.0, 14_000 * np.sin((hours - 6) / 12 * np.pi)) * rng.uniform(0.5, 1.0)
        price = 40 + 30 * np.cos((hours - 19) / 24 * 2 * np.pi) + rng.normal(0, 8, 24) - 0.004 * solar
        days[date] = DayProfile(date, price, solar, rng.uniform(500, 4000, 24))
    gap = (SYNTHETIC_FIRST_DAY + dt.timedelta(days=SYNTHETIC_DAYS)).isoformat()
    return ProfileSet(days=days, skipped={gap: "price missing in 3 of 24 hours"},
                      renewable_capacity_mw=SYNTHETIC_CAPACITY_MW, source="synthetic")


@pytest.fixture(scope="module")
def synthetic() -> ProfileSet:
    return _synthetic_profiles()


@pytest.fixture(scope="module")
def week3(synthetic) -> Instance:
    return build_instance("2048", day=SYNTHETIC_FIRST_DAY.isoformat(), profiles=synthetic, horizon_days=3)


def _fixed(inst: Instance) -> list[list[int]]:
    return [[job.baseline_mode] * job.segments for job in inst.jobs]


def _assert_instances_equal(a: Instance, b: Instance) -> None:
    for f in dataclasses.fields(Instance):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        elif f.name == "jobs":
            assert [job.to_dict() for job in x] == [job.to_dict() for job in y]
        else:
            assert x == y, f.name


# ------------------------------------------------------------------------------------------ instances


def test_one_day_horizon_is_the_day_instance():
    today = build_instance("2048")
    one = build_instance("2048", horizon_days=1, min_daily_share=0.0)
    _assert_instances_equal(today, one)
    assert today.horizon_days == 1 and today.days == (today.day,) and today.day_start_slots == (0,)
    assert today.min_daily_share == 0.0 and today.slots_per_day == today.slots == 96
    assert today.segments_per_day(today.jobs[0]) == today.jobs[0].segments
    # The JSON gains only the new keys, at their defaults; a file without them still loads as this instance.
    data = today.to_dict()
    assert {k: data[k] for k in NEW_JSON_KEYS} == {"horizon_days": 1, "days": [today.day], "day_start_slots": [0],
                                                   "min_daily_share": 0.0}
    old = {k: v for k, v in data.items() if k not in NEW_JSON_KEYS}
    _assert_instances_equal(Instance.from_dict(old), today)


def test_min_daily_share_does_not_change_a_day(reference_instance):
    shared = build_instance("2048", min_daily_share=1.0)
    schedule = _fixed(reference_instance)
    for sched in (schedule, [[PAUSE] * job.segments for job in reference_instance.jobs]):
        a, b = simulate(shared, sched).metrics, simulate(reference_instance, sched).metrics
        assert [job.daily_min_tokens for job in a.jobs] == [job.tranche_tokens for job in a.jobs]
        assert [job.tranche_met for job in a.jobs] == [job.tranche_met for job in b.jobs]
        # Only the daily-minimum fields differ (with s = 1 a day's minimum is its tranche).
        same = tuple(dataclasses.replace(job, daily_min_tokens=0.0, daily_minimums_met=True) for job in a.jobs)
        days = tuple(dataclasses.replace(day, daily_minimums_met=True) for day in a.days)
        assert dataclasses.replace(a, jobs=same, days=days) == b


def test_horizon_arrays_are_the_days_end_to_end(synthetic, week3):
    first = SYNTHETIC_FIRST_DAY.isoformat()
    singles = build_instances("2048", [d for d in week3.days], synthetic)
    assert week3.days == tuple((SYNTHETIC_FIRST_DAY + dt.timedelta(days=d)).isoformat() for d in range(3))
    assert week3.day == first and week3.horizon_days == 3 and week3.slots == 3 * 96
    assert week3.day_start_slots == (0, 96, 192)
    for name in ("price_usd_per_mwh", "renewable_shape", "renewable_mw"):
        assert np.array_equal(getattr(week3, name), np.concatenate([getattr(singles[d], name) for d in week3.days]))
    for job, day_job in zip(week3.jobs, singles[first].jobs, strict=True):
        assert job.segments == 3 * day_job.segments
        assert job.tranche_tokens == 3 * day_job.tranche_tokens
        assert week3.slots_per_segment(job) == singles[first].slots_per_segment(day_job)
        assert [m.to_dict() for m in job.modes] == [m.to_dict() for m in day_job.modes]
        assert (job.baseline_mode, job.initial_mode, job.restart_hours) == (
            day_job.baseline_mode, day_job.initial_mode, day_job.restart_hours)


def test_build_instances_of_horizons(synthetic):
    starts = synthetic.horizon_starts(3)
    assert starts == ["2023-06-10", "2023-06-11", "2023-06-12"]  # the gap on 06-15 ends the run of days
    built = build_instances("2048", profiles=synthetic, horizon_days=3, min_daily_share=0.5)
    assert list(built) == starts
    assert all(inst.horizon_days == 3 and inst.min_daily_share == 0.5 for inst in built.values())
    assert list(build_instances("2048", horizon_days=2)) == ["2023-04-15"]  # the bundled table's only pair


# ------------------------------------------------------------------------------------------ simulator


@pytest.mark.parametrize("horizon", ["synthetic", "bundled"])
def test_fixed_schedule_costs_the_sum_of_its_days(horizon, synthetic):
    if horizon == "synthetic":
        profiles, first, days = synthetic, SYNTHETIC_FIRST_DAY.isoformat(), 3
    else:
        profiles, first, days = None, "2023-04-15", 2
    inst = build_instance("2048", day=first, profiles=profiles, horizon_days=days, min_daily_share=1.0)
    m = simulate(inst, _fixed(inst)).metrics
    singles = build_instances("2048", list(inst.days), profiles)
    per_day = [simulate(d, _fixed(d)).metrics for d in singles.values()]
    for name in ADDITIVE:
        assert getattr(m, name) == pytest.approx(sum(getattr(x, name) for x in per_day), rel=SUM_RTOL), name
    assert m.renewable_cost_usd > 0  # the take-or-pay term is in the sum
    for day_metrics, single in zip(m.days, per_day, strict=True):
        for name in ADDITIVE + PEAKS + ("green_share",):
            assert getattr(day_metrics, name) == pytest.approx(getattr(single, name), rel=SUM_RTOL), name
        for job in single.jobs:
            assert day_metrics.tokens[job.name] == pytest.approx(job.tokens, rel=SUM_RTOL)
    assert m.tranches_met and all(day.daily_minimums_met for day in m.days)
    assert all(job.restarts == 0 and job.completion == pytest.approx(1.0) for job in m.jobs)


def test_a_mode_held_across_midnight_pays_no_restart(synthetic):
    inst = build_instance("2048", day=SYNTHETIC_FIRST_DAY.isoformat(), profiles=synthetic, horizon_days=2)
    job = inst.jobs[0]
    other = next(c for c in range(job.n_modes) if c != job.initial_mode and job.gpus_by_choice[c] <= 512)
    k = inst.segments_per_day(job)
    held = [[other] * job.segments, [PAUSE] * inst.jobs[1].segments]
    m = simulate(inst, held).metrics.jobs[0]
    assert m.restarts == 1 and m.switches == 1  # only the first segment (from the initial mode)
    segment_tokens = job.tokens_per_s_by_choice[other] * 3600 * inst.segment_hours(job)
    assert m.tokens_by_day[1] == pytest.approx(k * segment_tokens, rel=1e-12)  # day 2 loses nothing
    assert m.tokens_by_day[0] == pytest.approx(k * segment_tokens - job.tokens_per_s_by_choice[other] * 3600
                                               * job.restart_hours, rel=1e-12)
    # Switching exactly at midnight pays the restart there (a day boundary is a checkpoint boundary like any).
    switched = [[other] * k + [job.initial_mode] * k, held[1]]
    assert simulate(inst, switched).metrics.jobs[0].restarts == 2
    # Day 2 on its own would start from the initial mode and pay for the switch: the horizon carries the state.
    day2 = build_instance("2048", day=inst.days[1], profiles=synthetic)
    alone = simulate(day2, [[other] * k, [PAUSE] * day2.jobs[1].segments]).metrics.jobs[0]
    assert alone.restarts == 1 and alone.tokens < m.tokens_by_day[1]


def _front_loaded(share: float) -> tuple[Instance, list[list[int]]]:
    """Two days of two 1-hour slots; the tranche is made in full on day 1 and nothing on day 2."""
    job = tiny_job(segments=4, tranche_tokens=2 * 10.0 * 3600, restart_hours=0.0)
    inst = dataclasses.replace(tiny_instance([job], [10.0, 20.0, 30.0, 40.0], [0.1, 0.2, 0.3, 0.4]),
                               horizon_days=2, min_daily_share=share)
    return inst, [[0, 0, PAUSE, PAUSE]]


@pytest.mark.parametrize(("share", "met"), [(0.0, True), (0.5, False), (1.0, False)])
def test_min_daily_share_rejects_a_front_loaded_schedule(share, met):
    inst, schedule = _front_loaded(share)
    m = simulate(inst, schedule).metrics
    job = m.jobs[0]
    assert job.completion == pytest.approx(1.0) and job.tokens_by_day == (job.tokens, 0.0)
    assert job.daily_min_tokens == pytest.approx(share * job.tranche_tokens / 2)
    assert job.tranche_met is met and m.tranches_met is met and job.daily_minimums_met is met
    assert [d.daily_minimums_met for d in m.days] == [True, met]


def test_min_daily_share_one_is_a_daily_tranche_every_day():
    inst, _ = _front_loaded(1.0)
    assert simulate(inst, [[0, PAUSE, PAUSE, 0]]).metrics.tranches_met  # one daily tranche on each day
    assert not simulate(inst, [[PAUSE, PAUSE, 0, 0]]).metrics.tranches_met  # both on day 2: day 1 falls short


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_property_horizon_metrics_are_sums_of_days(data):
    inst = _property_instance()
    schedule = [data.draw(st.lists(st.integers(PAUSE, job.n_modes - 1), min_size=job.segments,
                                   max_size=job.segments)) for job in inst.jobs]
    m = simulate(inst, schedule).metrics
    assert [d.day for d in m.days] == list(inst.days)
    for name in ADDITIVE:
        assert getattr(m, name) == pytest.approx(sum(getattr(d, name) for d in m.days), rel=SUM_RTOL, abs=1e-9)
    for name in PEAKS:
        assert getattr(m, name) == max(getattr(d, name) for d in m.days)
    for j, job in enumerate(m.jobs):
        assert len(job.tokens_by_day) == inst.horizon_days
        assert job.tokens == pytest.approx(sum(job.tokens_by_day), rel=SUM_RTOL, abs=1e-6)
        assert job.tokens_by_day == tuple(d.tokens[job.name] for d in m.days)
        horizon_met = job.tokens >= job.tranche_tokens * (1 - 1e-9)
        daily_met = all(x >= job.daily_min_tokens * (1 - 1e-9) for x in job.tokens_by_day)
        assert job.tranche_met == (horizon_met and daily_met)
        # Restarts are counted on the one time axis: the sum over days of the day-local changes, plus midnights.
        choices = np.asarray(schedule[j])
        previous = np.concatenate(([inst.jobs[j].initial_mode], choices[:-1]))
        assert job.restarts == int(np.sum((choices != PAUSE) & (choices != previous)))
    assert m.tranches_met == all(job.tranche_met for job in m.jobs)
    assert all(d.daily_minimums_met == all(d.tokens[job.name] >= job.daily_min_tokens * (1 - 1e-9)
                                           for job in m.jobs) for d in m.days)


@functools.cache
def _property_instance() -> Instance:
    """Three days at K = 4 per day (12 segments per job) with a daily minimum share of 0.3."""
    return build_instance("2048", day=SYNTHETIC_FIRST_DAY.isoformat(), profiles=_synthetic_profiles(),
                          horizon_days=3, segments=4, min_daily_share=0.3)


# ------------------------------------------------------------------------------------------ JSON and CLIs


def test_json_round_trip_of_a_horizon(week3):
    data = json.loads(week3.to_json())
    assert data["horizon_days"] == 3 and data["days"] == list(week3.days)
    assert data["day_start_slots"] == [0, 96, 192] and data["min_daily_share"] == 0.0
    back = Instance.from_dict(data)
    _assert_instances_equal(back, week3)
    assert back.to_dict() == week3.to_dict()
    with pytest.raises(InputError) as err:
        Instance.from_dict({**data, "days": data["days"][:2]})
    assert err.value.field == "days"
    with pytest.raises(InputError) as err:
        Instance.from_dict({**data, "day_start_slots": [0, 100, 200]})
    assert err.value.field == "day_start_slots"
    with pytest.raises(InputError) as err:
        Instance.from_dict({**data, "horizon_days": 5})  # 5 days do not split 288 slots into whole days
    assert err.value.field == "horizon_days"


def test_case_cli_prints_a_horizon_instance(capsys):
    assert run_cli(case_main, ["--case", "2048", "--day", "2023-04-15", "--horizon-days", "2",
                               "--min-daily-share", "0.5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["horizon_days"] == 2 and data["days"] == ["2023-04-15", "2023-04-16"]
    assert data["slots"] == 192 and data["min_daily_share"] == 0.5
    assert [job["segments"] for job in data["jobs"]] == [24, 24]


def test_simulate_cli_scores_a_horizon(tmp_path, capsys):
    inst = build_instance("2048", day="2023-04-15", horizon_days=2)
    (tmp_path / "i.json").write_text(inst.to_json())
    (tmp_path / "s.json").write_text(json.dumps(_fixed(inst)))
    assert load_instance(tmp_path / "i.json").horizon_days == 2
    assert run_cli(simulate_main, ["--instance", str(tmp_path / "i.json"), "--schedule", str(tmp_path / "s.json"),
                                   "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["day"] for d in out["metrics"]["days"]] == ["2023-04-15", "2023-04-16"]
    assert out["metrics"]["tranches_met"] is True
    assert run_cli(simulate_main, ["--instance", str(tmp_path / "i.json"), "--schedule", str(tmp_path / "s.json")]) == 0
    assert "2023-04-16: operating cost" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(("overrides", "field"), [
    ({"horizon_days": 0}, "horizon_days"),
    ({"horizon_days": -2}, "horizon_days"),
    ({"horizon_days": 1.5}, "horizon_days"),
    ({"min_daily_share": -0.1}, "min_daily_share"),
    ({"min_daily_share": 1.5}, "min_daily_share"),
    ({"min_daily_share": math.nan}, "min_daily_share"),
])
def test_bad_horizon_values_name_the_field(overrides, field):
    with pytest.raises(InputError) as err:
        build_instance("2048", **overrides)
    assert err.value.field == field


def test_a_horizon_past_the_data_names_the_missing_day(synthetic):
    with pytest.raises(InputError) as err:
        build_instance("2048", day="2023-12-14", horizon_days=2)  # the bundled table's last day
    assert err.value.field == "horizon_days" and "2023-12-15" in err.value.message and "past the data" in err.value.message
    with pytest.raises(InputError) as err:
        build_instance("2048", day="2023-06-13", profiles=synthetic, horizon_days=3)
    assert err.value.field == "horizon_days" and "2023-06-15" in err.value.message and "skipped" in err.value.message
    with pytest.raises(InputError) as err:
        build_instance("2048", day="2023-06-09", profiles=synthetic, horizon_days=3)
    assert err.value.field == "day"
    with pytest.raises(InputError) as err:
        build_instances("2048", ["2023-06-12"], synthetic, horizon_days=4)
    assert err.value.field == "horizon_days"


def test_bad_horizon_on_the_command_line_exits_2(capsys):
    for argv, field in ((["--horizon-days", "0"], "horizon_days"), (["--min-daily-share", "2"], "min_daily_share"),
                        (["--day", "2023-12-14", "--horizon-days", "3"], "horizon_days")):
        assert run_cli(case_main, argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {field}:")


def test_instance_from_args_without_horizon_flags():
    """CLIs with their own parsers (no horizon flags) still build day instances."""
    import argparse

    args = argparse.Namespace(case="2048", day=None, profiles=None, gpus=None, segments=None, renewable_ratio=None)
    assert instance_from_args(args).horizon_days == 1


def test_instance_checks_of_a_horizon():
    job = tiny_job(segments=3)
    with pytest.raises(InputError) as err:  # 3 segments cannot split into 2 days
        dataclasses.replace(tiny_instance([job], [1.0] * 6, [0.0] * 6), horizon_days=2)
    assert err.value.field == "jobs[0].segments"
    with pytest.raises(InputError) as err:
        dataclasses.replace(tiny_instance([tiny_job()], [1.0] * 4, [0.0] * 4), min_daily_share=2.0)
    assert err.value.field == "min_daily_share"
