"""Cases and instances (aidc_env/case.py): overrides, validation, DST days and the exchange JSON round trip."""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from importlib import resources

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aidc_env import limits
from aidc_env.case import build_instance, case_from_dict, load_case, main
from aidc_env.errors import InputError, run_cli
from aidc_env.information import Forecast
from aidc_env.instance import INSTANCE_FORMAT, PAUSE, SECONDS_PER_HOUR, Instance, load_instance
from aidc_env.profiles import HOURS_PER_DAY, load_profiles
from tests.conftest import SHARED_YEAR_CSV, mode, tiny_instance, tiny_job
from tests.test_profiles import fall_back_rows, normal_day, spring_forward_rows, write_csv

SLOTS = 96
SLOTS_PER_HOUR = SLOTS // int(HOURS_PER_DAY)
DST_DAYS = ("2023-03-12", "2023-11-05")


@pytest.fixture(scope="module")
def bundled():
    return load_profiles(None)


@pytest.fixture(scope="module")
def reference(bundled):
    return build_instance("2048", profiles=bundled)


def changed(table: dict, changes: dict) -> dict:
    """``table`` with ``changes`` applied in place (a value None deletes the key)."""
    for key, value in changes.items():
        if value is None:
            del table[key]
        else:
            table[key] = value
    return table


def case_table(**changes) -> dict:
    """The bundled 2048 case file as a table, with top-level changes."""
    return changed(tomllib.loads((resources.files("aidc_env") / "cases" / "2048.toml").read_text()), changes)


def with_job(index: int, **changes) -> dict:
    """The case table with changes to one job."""
    table = case_table()
    changed(table["jobs"][index], changes)
    return table


def assert_same_instance(a: Instance, b: Instance) -> None:
    for f in dataclasses.fields(Instance):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        elif f.name == "jobs":
            assert len(x) == len(y)
            for job_a, job_b in zip(x, y, strict=True):
                for g in dataclasses.fields(job_a):
                    u, v = getattr(job_a, g.name), getattr(job_b, g.name)
                    assert np.array_equal(u, v) if isinstance(u, np.ndarray) else u == v, (job_a.name, g.name)
        else:
            assert x == y, f.name


# ------------------------------------------------------------------------------------ overrides


def test_gpus_override_keeps_the_tranches_and_drops_the_modes_that_do_not_fit(reference, bundled):
    small = build_instance("2048", profiles=bundled, gpus=640)
    assert small.n_gpus == 640
    assert small.rated_facility_mw == pytest.approx(1.2 * 640 * 0.5 / 1000)
    for job, base in zip(small.jobs, reference.jobs, strict=True):
        assert job.tranche_tokens == base.tranche_tokens  # tranches are set on the case file's own pool
        assert job.modes == tuple(m for m in base.modes if m.gpus <= 640)
    # LLM-B's baseline (768 GPUs) no longer fits: no baseline mode, nothing running before the day.
    assert small.jobs[1].baseline_mode == PAUSE and small.jobs[1].initial_mode == PAUSE
    assert small.jobs[0].modes[small.jobs[0].baseline_mode].gpus == 512


def test_reference_tranches_are_the_baselines_day(reference):
    for job, gpus in zip(reference.jobs, (512, 768), strict=True):
        base = job.modes[job.baseline_mode]
        assert base.gpus == gpus and job.initial_mode == job.baseline_mode
        assert job.tranche_tokens == base.tokens_per_s * SECONDS_PER_HOUR * HOURS_PER_DAY
        assert job.restart_hours == pytest.approx(10 / 60)


@pytest.mark.parametrize("segments, expected", [(24, (24, 24)), ([6, 8], (6, 8)), (1, (1, 1))])
def test_segments_override(bundled, segments, expected):
    inst = build_instance("2048", profiles=bundled, segments=segments)
    assert tuple(job.segments for job in inst.jobs) == expected
    assert [inst.slots_per_segment(job) for job in inst.jobs] == [SLOTS // k for k in expected]


def test_renewable_ratio_override_scales_the_renewable_power(reference, bundled):
    half = build_instance("2048", profiles=bundled, renewable_ratio=0.5)
    assert half.renewable_ratio == 0.5
    np.testing.assert_array_equal(half.renewable_shape, reference.renewable_shape)
    np.testing.assert_allclose(half.renewable_mw, 0.5 * reference.renewable_mw, rtol=1e-15)
    none = build_instance("2048", profiles=bundled, renewable_ratio=0.0)
    assert not none.renewable_mw.any()


def test_day_override_reads_that_days_profile(reference, bundled):
    inst = build_instance("2048", "2023-01-18", profiles=bundled)
    assert inst.day == "2023-01-18" and reference.day == "2023-06-17"
    expected = np.repeat(bundled.day("2023-01-18").price_usd_per_mwh, SLOTS_PER_HOUR)
    np.testing.assert_array_equal(inst.price_usd_per_mwh, expected)


def test_any_case_field_can_be_overridden():
    case = load_case("2048").with_overrides(pue=1.5, ppa_usd_per_mwh=40.0)
    assert (case.pue, case.ppa_usd_per_mwh) == (1.5, 40.0)
    assert case.mode_pool_gpus == 2048  # the case file's own pool is remembered once anything changes


@pytest.mark.parametrize("overrides, field", [
    ({"colour": "red"}, "colour"),
    ({"gpu": 1024}, "gpu"),
    ({"zeta": 1, "alpha": 2}, "alpha,zeta"),
])
def test_unknown_override_is_refused_by_name(bundled, overrides, field):
    with pytest.raises(InputError) as err:
        build_instance("2048", profiles=bundled, **overrides)
    assert err.value.field == field and "unknown case field" in err.value.message


def test_jobs_and_segments_overrides_together_keep_both():
    case = load_case("2048")
    jobs = tuple(dataclasses.replace(job, restart_minutes=5.0) for job in case.jobs)
    both = case.with_overrides(jobs=jobs, segments=24)
    assert [(job.restart_minutes, job.segments) for job in both.jobs] == [(5.0, 24)] * len(jobs)


def test_segments_override_of_the_wrong_length_is_refused():
    with pytest.raises(InputError) as err:
        load_case("2048").with_overrides(segments=[12, 12, 12])
    assert err.value.field == "segments" and "2 values" in err.value.message


# ------------------------------------------------------------------------------------ validation


@pytest.mark.parametrize("overrides, field", [
    ({"gpus": 0}, "gpus"),
    ({"gpus": -8}, "gpus"),
    ({"gpus": 1.5}, "gpus"),
    ({"gpus": True}, "gpus"),
    ({"slots": 7}, "slots"),
    ({"slots": 0}, "slots"),
    ({"pue": 0.9}, "facility.pue"),
    ({"pue": math.nan}, "facility.pue"),
    ({"idle_kw_per_gpu": -0.1}, "facility.idle_kw_per_gpu"),
    ({"rated_kw_per_gpu": math.inf}, "facility.rated_kw_per_gpu"),
    ({"renewable_ratio": -1.0}, "energy.renewable_ratio"),
    ({"renewable_ratio": math.nan}, "energy.renewable_ratio"),
    ({"ppa_usd_per_mwh": -30.0}, "energy.ppa_usd_per_mwh"),
    ({"curtailment_penalty_usd_per_mwh": -math.inf}, "energy.curtailment_penalty_usd_per_mwh"),
    ({"renewable_capacity_mw": 0.0}, "energy.renewable_capacity_mw"),
    ({"mode_pool_gpus": 0}, "mode_pool_gpus"),
    ({"day": "2023-02-30"}, "day"),
    ({"day": "17/06/2023"}, "day"),
    ({"segments": 7}, "jobs[0].segments"),
    ({"segments": 0}, "jobs[0].segments"),
    ({"segments": [12, 5]}, "jobs[1].segments"),
])
def test_each_bad_case_field_is_named(overrides, field):
    with pytest.raises(InputError) as err:
        load_case("2048").with_overrides(**overrides)
    assert err.value.field == field


def test_a_restart_must_be_shorter_than_a_segment():
    quarter_hours = load_case("2048").with_overrides(segments=96)  # 15-minute segments: 10-minute restarts fit
    with pytest.raises(InputError) as err:
        quarter_hours.with_overrides(jobs=tuple(dataclasses.replace(j, restart_minutes=15.0)
                                                for j in quarter_hours.jobs))
    assert err.value.field == "jobs[0].restart_minutes" and "shorter than a segment (15 min)" in err.value.message


@pytest.mark.parametrize("table, field", [
    (case_table(colour="red"), "colour"),
    (case_table(gpus=None), "gpus"),
    (case_table(day=None), "day"),
    (case_table(facility={"pue": 1.2, "cooling": 1}), "facility.cooling"),
    (case_table(energy={"renewable_ratio": "lots"}), "energy.renewable_ratio"),
    (case_table(energy={"renewable_ratio": True}), "energy.renewable_ratio"),
    (case_table(jobs=[]), "jobs"),
    (case_table(jobs=["LLM-A"]), "jobs[0]"),
    (case_table(modes={"warp_speed": 9}), "modes.warp_speed"),
    (case_table(modes={"compute_efficiency": 1.5}), "modes.compute_efficiency"),
    (with_job(1, priority=1), "jobs[1].priority"),
    (with_job(0, restart_minutes=120), "jobs[0].restart_minutes"),
    (with_job(0, restart_minutes=-1), "jobs[0].restart_minutes"),
    (with_job(0, baseline_gpus=None), "jobs[0].baseline_gpus"),
    (with_job(0, baseline_gpus=0), "jobs[0].baseline_gpus"),
    (with_job(1, tranche_tokens=-1.0), "jobs[1].tranche_tokens"),
    (with_job(1, tranche_tokens=math.inf), "jobs[1].tranche_tokens"),
    (with_job(1, name="LLM-A"), "jobs"),
    (with_job(0, name=""), "jobs[0].name"),
])
def test_each_bad_case_file_field_is_named(table, field):
    with pytest.raises(InputError) as err:
        case_from_dict(table)
    assert err.value.field == field


@pytest.mark.parametrize("job, field, words", [
    ({"baseline_gpus": 500}, "jobs[0].baseline_gpus", "no Pareto mode of llama-13b uses 500 GPUs"),
    ({"baseline_gpus": None, "baseline_mode": "tp9-pp9-dp9"}, "jobs[0].baseline_mode", "is not a Pareto mode"),
    ({"model": "llama-1t"}, "jobs[0].model", "unknown model 'llama-1t'"),
])
def test_bad_job_resolution_is_named(bundled, job, field, words):
    with pytest.raises(InputError) as err:
        build_instance(case_from_dict(with_job(0, **job)), profiles=bundled)
    assert err.value.field == field and words in err.value.message


@pytest.mark.parametrize("name, words", [("4096", "unknown case '4096'"), ("nope.toml", "no case file nope.toml")])
def test_unknown_case_is_refused(name, words):
    with pytest.raises(InputError) as err:
        load_case(name)
    assert err.value.field == "case" and words in err.value.message


@pytest.mark.parametrize("load, name, text, field, words", [
    (load_case, "bad.toml", "gpus = [\n", "case", "malformed TOML"),
    (load_instance, "broken.json", '{"gpus": 2048,', "instance", "not valid JSON"),
])
def test_malformed_file_is_refused(tmp_path, load, name, text, field, words):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load(path)
    assert err.value.field == field and words in err.value.message


# ------------------------------------------------------------------------------------ DST days


@pytest.fixture(scope="module")
def dst_csv(tmp_path_factory):
    """A CSV with both 2023 DST days (23 and 25 hourly rows) and a normal day."""
    rows = [*spring_forward_rows(), *fall_back_rows(), *normal_day("2023-06-01")]
    return write_csv(tmp_path_factory.mktemp("dst"), rows)


@pytest.mark.parametrize("day, hours", [("2023-03-12", 23), ("2023-11-05", 25)])
def test_dst_days_give_96_slots(dst_csv, day, hours):
    profiles = load_profiles(dst_csv)
    assert profiles.day(day).hours_in_day == hours
    inst = build_instance("2048", day, profiles=profiles)
    assert inst.slots == SLOTS and inst.price_usd_per_mwh.shape == inst.renewable_mw.shape == (SLOTS,)
    np.testing.assert_array_equal(inst.price_usd_per_mwh,
                                  np.repeat(profiles.day(day).price_usd_per_mwh, SLOTS_PER_HOUR))
    if hours == 23:  # the missing 02:00 holds 01:00's values
        np.testing.assert_array_equal(inst.price_usd_per_mwh[8:12], inst.price_usd_per_mwh[4:8])
    else:  # 01:00 is the mean of its two rows (10 and 30 $/MWh)
        np.testing.assert_array_equal(inst.price_usd_per_mwh[4:8], np.full(4, 20.0))


@pytest.mark.skipif(not SHARED_YEAR_CSV.exists(), reason="the shared 2023 CAISO year is not beside the repository")
def test_dst_days_of_the_real_year_give_96_slots():
    profiles = load_profiles(SHARED_YEAR_CSV)
    instances = {day: build_instance("2048", day, profiles=profiles) for day in DST_DAYS}
    for day, hours in zip(DST_DAYS, (23, 25), strict=True):
        assert profiles.day(day).hours_in_day == hours
        inst = instances[day]
        assert inst.slots == SLOTS and np.all(np.isfinite(inst.price_usd_per_mwh))
        assert np.all((inst.renewable_shape >= 0) & (inst.renewable_shape <= 1))
        np.testing.assert_array_equal(inst.price_usd_per_mwh,
                                      np.repeat(profiles.day(day).price_usd_per_mwh, SLOTS_PER_HOUR))


# ------------------------------------------------------------------------------------ exchange JSON


def no_constant(token: str):
    raise AssertionError(f"non-standard JSON token {token}")


def round_trip(inst: Instance) -> Instance:
    return Instance.from_dict(json.loads(inst.to_json(), parse_constant=no_constant))


def test_exchange_json_round_trip(reference):
    back = round_trip(reference)
    assert_same_instance(reference, back)
    assert back.to_json() == reference.to_json()


def test_an_instance_without_the_optional_keys_round_trips(reference):
    data = json.loads(reference.to_json())
    for key in ("format", "renewable_capacity_mw", "renewable_mw", "days", "day_start_slots"):
        data.pop(key)
    inst = Instance.from_dict(data)
    assert inst.renewable_capacity_mw is None
    text = inst.to_json()
    assert json.loads(text, parse_constant=no_constant)["format"] == INSTANCE_FORMAT
    assert_same_instance(round_trip(inst), inst)
    assert round_trip(inst).to_json() == text


def test_exchange_json_file_round_trip_through_the_cli(tmp_path, capsys, reference):
    out = tmp_path / "instance.json"
    assert run_cli(main, ["--case", "2048", "--json", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed) == json.loads(out.read_text())
    assert_same_instance(load_instance(out), reference)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    gpus=st.sampled_from([640, 1024, 1280, 1536, 2048, 3072]),
    segments=st.sampled_from([1, 2, 4, 6, 8, 12, 24, 48]),
    renewable_ratio=st.floats(0.0, 4.0, allow_nan=False, allow_infinity=False),
    day_index=st.integers(0, 23),
)
def test_property_round_trip_over_overrides(bundled, gpus, segments, renewable_ratio, day_index):
    day = bundled.dates()[day_index]
    inst = build_instance("2048", day, profiles=bundled, gpus=gpus, segments=segments,
                          renewable_ratio=renewable_ratio)
    assert (inst.n_gpus, inst.renewable_ratio, inst.day) == (gpus, renewable_ratio, day)
    assert all(job.segments == segments for job in inst.jobs)
    assert_same_instance(inst, round_trip(inst))


@pytest.mark.parametrize("change, field", [
    (lambda d: d.pop("gpus"), "gpus"),
    (lambda d: d.update(gpus=2048.5), "gpus"),
    (lambda d: d.update(pue="1.2"), "pue"),
    (lambda d: d.update(jobs=[]), "jobs"),
    (lambda d: d.update(price_usd_per_mwh=[1.0, "x"]), "price_usd_per_mwh[1]"),
    (lambda d: d.update(price_usd_per_mwh=d["price_usd_per_mwh"][:95]), "renewable_shape"),
    (lambda d: d.update(renewable_shape=[1.5] * SLOTS), "renewable_shape[0]"),
    (lambda d: d.update(renewable_mw=[0.0] * SLOTS), "renewable_mw"),
    (lambda d: d["jobs"][0].pop("modes"), "jobs[0].modes"),
    (lambda d: d["jobs"][1].update(baseline_mode=99), "jobs[1].baseline_mode"),
    (lambda d: d["jobs"][1].update(tranche_tokens=-1.0), "jobs[1].tranche_tokens"),
    (lambda d: d["jobs"][0].update(segments=7), "jobs[0].segments"),
    (lambda d: d["jobs"][1].update(restart_hours=3.0), "jobs[1].restart_hours"),
    (lambda d: d["jobs"][1]["modes"][2].update(gpus="many"), "jobs[1].modes[2].gpus"),
    (lambda d: d["jobs"][0]["modes"][1].pop("tokens_per_s"), "jobs[0].modes[1].tokens_per_s"),
    (lambda d: d["jobs"][0]["modes"][0].update(colour=1), "jobs[0].modes[0].colour"),
    (lambda d: d.update(format="aidc-instance/2"), "format"),
    (lambda d: d.update(format=None), "format"),
    (lambda d: d.update(renewable_capacity_mw=-1.0), "renewable_capacity_mw"),
])
def test_bad_instance_json_field_is_named(reference, change, field):
    data = json.loads(reference.to_json())
    change(data)
    with pytest.raises(InputError) as err:
        Instance.from_dict(data)
    assert err.value.field == field


# ------------------------------------------------------------------------------------ bounds of a horizon


def within_bounds(slots: int, segments: int) -> Instance:
    """A tiny instance whose every number is within :mod:`aidc_env.limits` (so only the tested one is not)."""
    job = tiny_job(segments=segments, modes=(mode(1, 10.0, 0.5),))
    return tiny_instance([job], [10.0] * slots, [0.5] * slots, idle_kw_per_gpu=0.1, rated_kw_per_gpu=0.5)


def test_a_horizon_longer_than_the_stated_maximum_is_refused():
    with pytest.raises(InputError) as err:
        load_case("2048").with_overrides(horizon_days=limits.MAX_HORIZON_DAYS + 1)
    assert err.value.field == "horizon_days" and f"<= {limits.MAX_HORIZON_DAYS}" in err.value.message


def test_an_instance_json_longer_than_the_stated_maximum_is_refused(tmp_path):
    days = limits.MAX_HORIZON_DAYS + 1
    long = dataclasses.replace(within_bounds(days, days), horizon_days=days)
    path = tmp_path / "long.json"
    path.write_text(long.to_json())
    with pytest.raises(InputError) as err:
        load_instance(path)
    assert err.value.field == "horizon_days" and f"<= {limits.MAX_HORIZON_DAYS}" in err.value.message


@pytest.mark.parametrize("price, scenarios, field", [
    ([10.0, -2e5], [], "forecast.price_usd_per_mwh[1]"),
    ([10.0, 20.0], [[10.0, 1e6]], "forecast.price_scenarios_usd_per_mwh[0][1]"),
])
def test_a_forecast_price_beyond_the_price_bound_is_refused(tmp_path, price, scenarios, field):
    inst = within_bounds(2, 2)
    forecast = Forecast(np.array(price), np.full(2, 0.5), np.array(scenarios), np.full((len(scenarios), 2), 0.5))
    path = tmp_path / "forecast.json"
    path.write_text(dataclasses.replace(inst, forecast=forecast).to_json())
    with pytest.raises(InputError) as err:
        load_instance(path)
    assert err.value.field == field and f"<= {limits.MAX_PRICE_USD_PER_MWH:g}" in err.value.message
