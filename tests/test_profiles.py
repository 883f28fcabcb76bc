"""Tests of aidc_env.profiles: day building, DST, gaps, malformed input, slots, bundled table, full year."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aidc_env import profiles as P
from aidc_env.errors import EXIT_BAD_INPUT, InputError, run_cli
from aidc_env.profiles import HOURS_PER_DAY, DayProfile, ProfileSet, hourly_to_slots, load_profiles

REPO = Path(__file__).resolve().parents[1]
FULL_YEAR = Path(__file__).resolve().parents[2] / "shared/data/caiso/caiso_2023_hourly.csv"
BUNDLED_DATA = REPO / "aidc_env" / "data"
needs_full_year = pytest.mark.skipif(not FULL_YEAR.exists(), reason="full-year CAISO file not present")

HEADER = "timestamp_utc,local_start,price_usd_per_mwh,solar_mw,wind_mw"
PDT_H = -7  # UTC offset in hours, summer
PST_H = -8  # UTC offset in hours, winter
HOURS = np.arange(HOURS_PER_DAY)

# the full year's known gaps (aidc_env/data/README.md)
FULL_YEAR_SKIPPED = {
    *(f"2023-01-0{d}" for d in range(1, 8)),
    "2023-11-09",
    "2023-11-10",
    "2023-12-09",
    "2023-12-18",
    "2023-12-19",
    "2023-12-20",
    "2023-12-31",
}
FULL_YEAR_DAYS = 365
FULL_YEAR_PEAK_MW = 18775.0


def row(date: str, clock_hour: int, offset_h: int, price: object, solar: object, wind: object) -> str:
    local = dt.datetime.fromisoformat(date) + dt.timedelta(hours=int(clock_hour))
    utc = local - dt.timedelta(hours=offset_h)
    sign = "-" if offset_h < 0 else "+"
    return (
        f"{utc:%Y-%m-%dT%H:%M:%SZ},{local:%Y-%m-%d %H:%M}{sign}{abs(offset_h):02d}00,{price},{solar},{wind}"
    )


def normal_day(date: str, offset_h: int = PDT_H, price=None, solar=None, wind=None) -> list[str]:
    """24 rows; default values: price 10*h - 50, solar 1000*h - 3000 (negative at night), wind 500 + h."""
    price = [10.0 * h - 50 for h in HOURS] if price is None else price
    solar = [1000.0 * h - 3000 for h in HOURS] if solar is None else solar
    wind = [500.0 + h for h in HOURS] if wind is None else wind
    return [row(date, h, offset_h, price[h], solar[h], wind[h]) for h in HOURS]


def write_csv(tmp_path: Path, rows: list[str], name: str = "p.csv", header: str = HEADER) -> Path:
    path = tmp_path / name
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------------- normal days, slots


def test_normal_day_values_and_96_slots(tmp_path):
    profiles = load_profiles(write_csv(tmp_path, normal_day("2023-06-01")))
    day = profiles.day("2023-06-01")
    assert profiles.dates() == ["2023-06-01"]
    assert dict(profiles.skipped) == {}
    assert day.hours_in_day == 24
    np.testing.assert_array_equal(day.price_usd_per_mwh, 10.0 * HOURS - 50)
    np.testing.assert_array_equal(day.solar_mw, 1000.0 * HOURS - 3000)  # night negatives kept
    np.testing.assert_array_equal(day.wind_mw, 500.0 + HOURS)
    renewable = np.maximum(1000.0 * HOURS - 3000, 0) + 500.0 + HOURS
    np.testing.assert_array_equal(day.renewable_mw(), renewable)
    # default capacity: peak of max(solar,0) + max(wind,0): hour 23 -> 20000 + 523
    assert profiles.renewable_capacity_mw == 20523.0
    np.testing.assert_allclose(day.renewable_shape(10000.0), np.minimum(renewable / 10000.0, 1.0))
    assert day.renewable_shape(profiles.renewable_capacity_mw).max() == 1.0
    slots = hourly_to_slots(day.price_usd_per_mwh, 96)
    assert slots.shape == (96,)
    for hour in range(HOURS_PER_DAY):
        assert np.all(slots[4 * hour : 4 * hour + 4] == 10.0 * hour - 50)
    assert profiles.source == str(tmp_path / "p.csv")


def test_hourly_to_slots_all_resolutions():
    hourly = np.arange(HOURS_PER_DAY, dtype=float)
    np.testing.assert_array_equal(hourly_to_slots(hourly, 96), np.repeat(hourly, 4))
    np.testing.assert_array_equal(hourly_to_slots(hourly, 48), np.repeat(hourly, 2))
    np.testing.assert_array_equal(hourly_to_slots(hourly, 24), hourly)
    np.testing.assert_array_equal(hourly_to_slots(hourly, 12), np.arange(12) * 2 + 0.5)
    np.testing.assert_array_equal(hourly_to_slots(hourly, 4), np.array([2.5, 8.5, 14.5, 20.5]))
    for bad in (7, 0, -24, 5):
        with pytest.raises(InputError) as err:
            hourly_to_slots(hourly, bad)
        assert err.value.field == "slots"
    with pytest.raises(InputError) as err:
        hourly_to_slots(np.zeros(23), 96)
    assert err.value.field == "hourly"


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(-1e4, 1e4, allow_nan=False), min_size=HOURS_PER_DAY, max_size=HOURS_PER_DAY),
    st.sampled_from([1, 2, 3, 4, 6, 8, 12, 24, 48, 72, 96, 288]),
)
def test_hourly_to_slots_preserves_daily_mean(values, slots):
    hourly = np.array(values)
    out = hourly_to_slots(hourly, slots)
    assert out.shape == (slots,)
    assert np.isclose(out.mean(), hourly.mean(), rtol=1e-9, atol=1e-9)


def test_extra_columns_ignored_and_row_order_free(tmp_path):
    rows = normal_day("2023-06-01")[::-1]
    rows = [r + ",x,1" for r in rows]
    path = write_csv(tmp_path, rows, header=HEADER + ",note,demand_mw")
    day = load_profiles(path).day("2023-06-01")
    np.testing.assert_array_equal(day.price_usd_per_mwh, 10.0 * HOURS - 50)


# ---------------------------------------------------------------------------- DST


def spring_forward_rows(date: str = "2023-03-12") -> list[str]:
    """23 rows: 00:00, 01:00 at -0800, then 03:00..23:00 at -0700; price = 10*clock hour."""
    rows = [row(date, h, PST_H, 10.0 * h, 100.0 * h, 7.0) for h in (0, 1)]
    rows += [row(date, h, PDT_H, 10.0 * h, 100.0 * h, 7.0) for h in range(3, HOURS_PER_DAY)]
    return rows


def fall_back_rows(date: str = "2023-11-05") -> list[str]:
    """25 rows: 00:00, 01:00 at -0700, 01:00 again at -0800, 02:00..23:00 at -0800."""
    rows = [row(date, 0, PDT_H, 5.0, -40.0, 100.0), row(date, 1, PDT_H, 10.0, -40.0, 200.0)]
    rows += [row(date, 1, PST_H, 30.0, -50.0, 300.0)]
    rows += [row(date, h, PST_H, 10.0 * h, -50.0, 100.0) for h in range(2, HOURS_PER_DAY)]
    return rows


def test_spring_forward_day_holds_previous_hour(tmp_path):
    rows = spring_forward_rows()
    assert len(rows) == 23
    day = load_profiles(write_csv(tmp_path, rows)).day("2023-03-12")
    assert day.hours_in_day == 23
    expected = 10.0 * HOURS
    expected[2] = expected[1]  # the missing 02:00 takes 01:00's value
    np.testing.assert_array_equal(day.price_usd_per_mwh, expected)
    assert day.solar_mw[2] == 100.0
    assert day.solar_mw[3] == 300.0


def test_fall_back_day_averages_repeated_hour(tmp_path):
    rows = fall_back_rows()
    assert len(rows) == 25
    day = load_profiles(write_csv(tmp_path, rows)).day("2023-11-05")
    assert day.hours_in_day == 25
    assert day.price_usd_per_mwh[1] == 20.0  # mean of 10 and 30
    assert day.solar_mw[1] == -45.0
    assert day.wind_mw[1] == 250.0
    assert day.price_usd_per_mwh[0] == 5.0
    np.testing.assert_array_equal(day.price_usd_per_mwh[2:], 10.0 * HOURS[2:])


def test_dst_days_with_wrong_row_count_are_skipped(tmp_path):
    spring = spring_forward_rows()
    fall = fall_back_rows()
    rows = [*spring[:5], *spring[6:], *fall[:2], *fall[3:], *normal_day("2023-06-01")]
    profiles = load_profiles(write_csv(tmp_path, rows))
    assert profiles.dates() == ["2023-06-01"]
    assert profiles.skipped["2023-03-12"].startswith("22 rows, expected 23 for a 23-hour DST day")
    assert profiles.skipped["2023-11-05"].startswith("24 rows, expected 25 for a 25-hour DST day")


# ---------------------------------------------------------------------------- gaps and bad cells


def test_gaps_are_skipped_with_reasons(tmp_path):
    solar = [1000.0 * h for h in HOURS]
    gappy_solar = ["" if h < 5 else solar[h] for h in HOURS]
    gappy_wind = ["NaN" if h == 23 else 300.0 for h in HOURS]
    rows = [
        *normal_day("2023-06-01"),
        *normal_day("2023-06-02", solar=gappy_solar),
        *normal_day("2023-06-03", wind=gappy_wind),
        *[r for i, r in enumerate(normal_day("2023-06-04")) if i != 7],  # 07:00 row missing
        *normal_day("2023-06-05"),
        *normal_day("2023-06-05")[:1],  # duplicated 00:00 row
    ]
    profiles = load_profiles(write_csv(tmp_path, rows))
    assert profiles.dates() == ["2023-06-01"]
    assert dict(profiles.skipped) == {
        "2023-06-02": "solar_mw missing in 5 of 24 hours",
        "2023-06-03": "wind_mw missing (NaN) in 1 of 24 hours",
        "2023-06-04": "23 rows, expected 24 for a 24-hour day (1 hours missing)",
        "2023-06-05": "25 rows, expected 24 for a 24-hour day (1 duplicated hours)",
    }
    # the renewable peak uses every row with both values, skipped days included: 2023-06-02 23:00
    assert profiles.renewable_capacity_mw == 23000.0 + 523.0


def test_nan_and_non_numeric_price_skip_the_day(tmp_path):
    nan_price = [10.0] * HOURS_PER_DAY
    nan_price[3] = "nan"
    text_price = [10.0] * HOURS_PER_DAY
    text_price[4] = "n.a.x"
    inf_price = [10.0] * HOURS_PER_DAY
    inf_price[5] = "inf"
    rows = [
        *normal_day("2023-07-01", price=nan_price),
        *normal_day("2023-07-02", price=text_price),
        *normal_day("2023-07-03", price=inf_price),
        *normal_day("2023-07-04"),
    ]
    profiles = load_profiles(write_csv(tmp_path, rows))
    assert profiles.dates() == ["2023-07-04"]
    assert profiles.skipped["2023-07-01"] == "price_usd_per_mwh missing (NaN) in 1 of 24 hours"
    assert "non-numeric price" in profiles.skipped["2023-07-02"]
    assert profiles.skipped["2023-07-02"] == "non-numeric price_usd_per_mwh in 1 of 24 hours"
    assert profiles.skipped["2023-07-03"] == "non-finite price_usd_per_mwh in 1 of 24 hours"


def test_partial_first_day_is_skipped(tmp_path):
    rows = [*normal_day("2023-06-01")[6:], *normal_day("2023-06-02")]
    profiles = load_profiles(write_csv(tmp_path, rows))
    assert profiles.dates() == ["2023-06-02"]
    assert profiles.skipped["2023-06-01"] == "18 rows, expected 24 for a 24-hour day (6 hours missing)"


def test_no_complete_day_is_an_error(tmp_path):
    rows = normal_day("2023-06-01", price=["x"] * HOURS_PER_DAY)
    with pytest.raises(InputError) as err:
        load_profiles(write_csv(tmp_path, rows))
    assert err.value.field == "profiles"
    assert "no complete day" in err.value.message


# ---------------------------------------------------------------------------- malformed files


def test_missing_column_names_it(tmp_path):
    rows = [",".join(r.split(",")[:4]) for r in normal_day("2023-06-01")]
    path = write_csv(tmp_path, rows, header="timestamp_utc,local_start,price_usd_per_mwh,solar_mw")
    with pytest.raises(InputError) as err:
        load_profiles(path)
    assert err.value.field == "wind_mw"
    assert "required column missing" in err.value.message


def test_bad_utc_timestamp_names_column_and_line(tmp_path):
    rows = normal_day("2023-06-01")
    rows[1] = "yesterday-ish" + rows[1][rows[1].index(",") :]
    with pytest.raises(InputError) as err:
        load_profiles(write_csv(tmp_path, rows))
    assert err.value.field == "timestamp_utc"
    assert "line 3" in err.value.message


def test_bad_local_start_names_column_and_line(tmp_path):
    rows = normal_day("2023-06-01")
    fields = rows[4].split(",")
    rows[4] = ",".join([fields[0], "2023-06-01 04:00", *fields[2:]])  # no UTC offset
    with pytest.raises(InputError) as err:
        load_profiles(write_csv(tmp_path, rows))
    assert err.value.field == "local_start"
    assert "line 6" in err.value.message


def test_impossible_local_date_is_an_error(tmp_path):
    rows = normal_day("2023-06-01")
    fields = rows[0].split(",")
    rows[0] = ",".join([fields[0], "2023-02-30 00:00-0700", *fields[2:]])
    with pytest.raises(InputError) as err:
        load_profiles(write_csv(tmp_path, rows))
    assert err.value.field == "local_start"
    assert "line 2" in err.value.message


def test_local_start_contradicting_utc_is_an_error(tmp_path):
    rows = normal_day("2023-06-01")
    rows[2] = rows[2].replace("-0700", "-0800")
    with pytest.raises(InputError) as err:
        load_profiles(write_csv(tmp_path, rows))
    assert err.value.field == "local_start"
    assert "line 4" in err.value.message and "does not match timestamp_utc" in err.value.message


def test_sub_hourly_rows_are_an_error(tmp_path):
    rows = normal_day("2023-06-01")
    rows[0] = rows[0].replace("T07:00:00Z", "T07:15:00Z").replace("00:00-0700", "00:15-0700")
    with pytest.raises(InputError) as err:
        load_profiles(write_csv(tmp_path, rows))
    assert err.value.field == "local_start"
    assert "start of an hour" in err.value.message


def test_not_a_csv(tmp_path):
    binary = tmp_path / "blob.csv"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(InputError) as err:
        load_profiles(binary)
    assert err.value.field in {"profiles", "timestamp_utc"}
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError) as err:
        load_profiles(empty)
    assert err.value.field == "profiles"
    ragged = write_csv(tmp_path, [*normal_day("2023-06-01"), "a,b,c,d,e,f,g,h"], name="ragged.csv")
    with pytest.raises(InputError) as err:
        load_profiles(ragged)
    assert err.value.field == "profiles"
    header_only = write_csv(tmp_path, [], name="header.csv")
    with pytest.raises(InputError) as err:
        load_profiles(header_only)
    assert err.value.field == "profiles"
    with pytest.raises(InputError) as err:
        load_profiles(tmp_path)  # a directory
    assert err.value.field == "profiles"
    with pytest.raises(FileNotFoundError):
        load_profiles(tmp_path / "nope.csv")


# ---------------------------------------------------------------------------- ProfileSet, DayProfile


def test_day_lookup_errors(tmp_path):
    rows = [*normal_day("2023-06-01"), *normal_day("2023-06-02", price=[""] * 24), *normal_day("2023-06-03")]
    profiles = load_profiles(write_csv(tmp_path, rows))
    for bad in ("2023-02-30", "June 1st", "2023-6-1", 20230601):
        with pytest.raises(InputError) as err:
            profiles.day(bad)  # type: ignore[arg-type]
        assert err.value.field == "day"
        assert "not a valid date" in err.value.message
    with pytest.raises(InputError) as err:
        profiles.day("2024-01-01")
    assert err.value.field == "day"
    assert "not in the data" in err.value.message
    assert "has 2 days from 2023-06-01 to 2023-06-03" in err.value.message
    with pytest.raises(InputError) as err:
        profiles.day("2023-06-02")
    assert "skipped (price_usd_per_mwh missing in 24 of 24 hours)" in err.value.message


def test_explicit_capacity_wins_and_is_checked(tmp_path):
    path = write_csv(tmp_path, normal_day("2023-06-01"))
    assert load_profiles(path, renewable_capacity_mw=5000).renewable_capacity_mw == 5000.0
    for bad in (0, -1.0, float("nan"), float("inf"), "big", True):
        with pytest.raises(InputError) as err:
            load_profiles(path, renewable_capacity_mw=bad)  # type: ignore[arg-type]
        assert err.value.field == "renewable_capacity_mw"


def test_no_positive_renewables_needs_explicit_capacity(tmp_path):
    path = write_csv(tmp_path, normal_day("2023-06-01", solar=[-1.0] * 24, wind=[0.0] * 24))
    with pytest.raises(InputError) as err:
        load_profiles(path)
    assert err.value.field == "renewable_capacity_mw"
    day = load_profiles(path, renewable_capacity_mw=100.0).day("2023-06-01")
    np.testing.assert_array_equal(day.renewable_shape(100.0), np.zeros(24))


def test_results_are_immutable_and_comparable(tmp_path):
    path = write_csv(tmp_path, normal_day("2023-06-01"))
    first, second = load_profiles(path), load_profiles(path)
    assert first == second and hash(first) == hash(second)
    day = first.day("2023-06-01")
    assert day == second.day("2023-06-01") and hash(day) == hash(second.day("2023-06-01"))
    with pytest.raises(ValueError):
        day.price_usd_per_mwh[0] = 1.0
    with pytest.raises(TypeError):
        first.days["2023-06-02"] = day  # type: ignore[index]
    with pytest.raises(AttributeError):
        first.renewable_capacity_mw = 1.0  # type: ignore[misc]


def test_day_profile_validates_its_fields():
    good = np.zeros(24)
    with pytest.raises(InputError) as err:
        DayProfile("2023-06-01", np.zeros(23), good, good)
    assert err.value.field == "price_usd_per_mwh"
    with pytest.raises(InputError) as err:
        DayProfile("2023-06-01", good, good, good, hours_in_day=22)
    assert err.value.field == "hours_in_day"
    with pytest.raises(InputError):
        DayProfile("2023-06-01", good, np.full(24, np.nan), good)
    with pytest.raises(InputError) as err:
        ProfileSet(days={}, skipped={}, renewable_capacity_mw=1.0, source="x")
    assert err.value.field == "days"


# ---------------------------------------------------------------------------- CLI


def test_cli_text_json_and_errors(tmp_path, capsys):
    path = write_csv(tmp_path, [*normal_day("2023-06-01"), *normal_day("2023-06-02", wind=[""] * 24)])
    assert run_cli(P.main, ["--profiles", str(path)]) == 0
    out = capsys.readouterr().out
    assert "days loaded: 1 (2023-06-01 to 2023-06-01)" in out
    assert "2023-06-02: wind_mw missing in 24 of 24 hours" in out
    assert run_cli(P.main, ["--profiles", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["days_loaded"] == 1
    assert info["renewable_capacity_mw"] == 20523.0
    assert info["skipped"] == {"2023-06-02": "wind_mw missing in 24 of 24 hours"}
    assert run_cli(P.main, ["--profiles", str(tmp_path / "missing.csv")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing.csv" in err
    bad = write_csv(tmp_path, ["x,y,z"], name="bad.csv", header="a,b,c")
    assert run_cli(P.main, ["--profiles", str(bad)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "timestamp_utc" in err
    with pytest.raises(SystemExit) as exit_info:
        P.main(["--help"])
    assert exit_info.value.code == 0


def test_cli_bundled_summary(capsys):
    assert run_cli(P.main, ["--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["source"] == "bundled"
    assert info["days_skipped"] == 0


# ---------------------------------------------------------------------------- bundled table


def test_bundled_table_loads_offline():
    bundled = load_profiles()
    meta = json.loads((BUNDLED_DATA / "caiso_2023_days.json").read_text(encoding="utf-8"))
    assert bundled.source == "bundled"
    assert 0 < len(bundled.days) <= 24
    assert "2023-04-15" in bundled.days and "2023-05-14" in bundled.days
    assert dict(bundled.skipped) == {}
    assert bundled.renewable_capacity_mw == meta["renewable_capacity_mw"] == FULL_YEAR_PEAK_MW
    assert [d["date"] for d in meta["days"]] == bundled.dates()
    assert all(d["reason"] and d["picked_as"] for d in meta["days"])
    assert meta["csv_sha256"] == hashlib.sha256((BUNDLED_DATA / "caiso_2023_days.csv").read_bytes()).hexdigest()
    assert load_profiles(renewable_capacity_mw=1000.0).renewable_capacity_mw == 1000.0
    day = bundled.day("2023-04-15")
    assert day.price_usd_per_mwh.min() < 0  # a spring day with negative prices


def test_bundled_files_are_canonical_and_clean():
    csv_text = (BUNDLED_DATA / "caiso_2023_days.csv").read_text(encoding="utf-8")
    assert csv_text.splitlines()[0] == HEADER
    for name in ("caiso_2023_days.csv", "caiso_2023_days.json"):
        text = (BUNDLED_DATA / name).read_text(encoding="utf-8")
        assert "DLAP_SCE" not in text and "caiso_2023_hourly" not in text
    assert (BUNDLED_DATA / "README.md").exists()


# ---------------------------------------------------------------------------- full year (optional)


@pytest.fixture(scope="module")
def full_year() -> ProfileSet:
    return load_profiles(FULL_YEAR)


@needs_full_year
def test_full_year_loads_with_known_gaps(full_year):
    assert set(full_year.skipped) == FULL_YEAR_SKIPPED
    assert len(full_year.days) == FULL_YEAR_DAYS - len(FULL_YEAR_SKIPPED) == 351
    assert full_year.dates()[0] == "2023-01-08" and full_year.dates()[-1] == "2023-12-30"
    assert full_year.skipped["2023-01-07"] == "solar_mw missing in 15 of 24 hours; wind_mw missing in 15 of 24 hours"
    assert full_year.renewable_capacity_mw == FULL_YEAR_PEAK_MW
    hours = {d: p.hours_in_day for d, p in full_year.days.items() if p.hours_in_day != HOURS_PER_DAY}
    assert hours == {"2023-03-12": 23, "2023-11-05": 25}
    spring = full_year.day("2023-03-12").price_usd_per_mwh
    assert spring[2] == spring[1] == 92.461  # 01:00 held over the missing 02:00
    fall = full_year.day("2023-11-05").price_usd_per_mwh
    assert fall[1] == pytest.approx((48.29 + 48.055) / 2)  # the two 01:00 rows


@needs_full_year
def test_bundled_days_match_the_full_year(full_year):
    bundled = load_profiles()
    meta = json.loads((BUNDLED_DATA / "caiso_2023_days.json").read_text(encoding="utf-8"))
    assert meta["renewable_capacity_mw"] == full_year.renewable_capacity_mw
    for date, day in bundled.days.items():
        assert day == full_year.day(date), date


@needs_full_year
def test_full_year_loads_fast():
    import time

    start = time.perf_counter()
    load_profiles(FULL_YEAR)
    assert time.perf_counter() - start < 5.0  # ~0.2 s measured; generous for slow CI machines
