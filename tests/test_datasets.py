"""aidc_env.datasets: the packaged data by name, wherever a profile or forecast source is read."""

from __future__ import annotations

import fnmatch
import gzip
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from aidc_env import datasets, hourly
from aidc_env import forecasts as F
from aidc_env import profiles as P
from aidc_env.case import build_instance, build_instances
from aidc_env.dayahead import dayahead_instances
from aidc_env.errors import EXIT_BAD_INPUT, InputError, run_cli
from aidc_env.forecasts import COL_PRICE_FC, load_forecasts, parse_forecasts_frame
from aidc_env.profiles import hourly_to_slots, load_profiles
from aidc_env.site_profiles import load_site_profiles

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "aidc_env" / "data"
SHARED = ROOT.parent / "shared" / "data" / "caiso"
SHARED_YEAR = SHARED / "caiso_2023_hourly.csv"
SHARED_DAYAHEAD = SHARED / "caiso_2023_dayahead_forecast_hourly.csv"
MAX_PACKAGED_BYTES = 2_000_000
LMP_COLUMNS = (COL_PRICE_FC, "price_forecast_pge_usd_per_mwh", "price_forecast_sdge_usd_per_mwh")
LOADERS = {datasets.PROFILES: load_profiles, datasets.FORECASTS: load_forecasts}


def _bare_forecasts(name: str = "caiso-2023-dayahead") -> F.ForecastSet:
    """The packaged forecasts read without their day-ahead LMP columns (what the source CSV holds)."""
    with datasets.DATASETS[name].local_path() as path:
        frame = hourly.read_hourly_csv(path, name, F.REQUIRED_COLUMNS, "forecasts")
    return parse_forecasts_frame(frame, name)


@pytest.mark.parametrize("name", list(datasets.DATASETS))
def test_each_name_loads_its_packaged_file_with_the_stated_coverage(name):
    found = datasets.resolve(name, datasets.DATASETS[name].kind)
    assert isinstance(found, datasets.Dataset) and found.name == name
    assert 0 < found.size_bytes() < MAX_PACKAGED_BYTES
    loaded = LOADERS[found.kind](name)
    assert loaded.source == name
    coverage = found.coverage
    assert (len(loaded.days), loaded.dates()[0], loaded.dates()[-1], len(loaded.skipped)) == (
        coverage.days, coverage.first_day, coverage.last_day, coverage.skipped)
    if found.kind == datasets.FORECASTS:
        priced = loaded.supplied_dates()
        assert (len(priced), priced[0], priced[-1]) == (
            coverage.price_days, coverage.price_first_day, coverage.price_last_day)
    if found.site_file is not None:
        sites = load_site_profiles(name)
        assert sites.source == name and sites.dates() == loaded.dates()


def test_the_bundled_days_by_name_are_the_default():
    named, default = load_profiles("caiso-2023-days"), load_profiles()
    assert default.source == P.BUNDLED_SOURCE and named.source == "caiso-2023-days"
    assert dict(named.days) == dict(default.days)
    year = load_profiles("caiso-2023")
    assert named.renewable_capacity_mw == default.renewable_capacity_mw == year.renewable_capacity_mw
    sites, bundled_sites = load_site_profiles("caiso-2023-days"), load_site_profiles()
    assert dict(sites.days) == dict(bundled_sites.days)
    assert (sites.solar_peak_mw, sites.wind_peak_mw) == (bundled_sites.solar_peak_mw, bundled_sites.wind_peak_mw)
    for date, day in named.days.items():
        assert day == year.day(date), date


@pytest.mark.skipif(not SHARED_YEAR.is_file() or not SHARED_DAYAHEAD.is_file(),
                    reason="the project's source CSVs are not beside the repository")
def test_the_packaged_files_equal_the_source_csvs():
    assert gzip.decompress((DATA / datasets.YEAR_CSV).read_bytes()) == SHARED_YEAR.read_bytes()
    packaged, shared = load_profiles("caiso-2023"), load_profiles(SHARED_YEAR)
    assert dict(packaged.days) == dict(shared.days) and dict(packaged.skipped) == dict(shared.skipped)
    assert packaged.renewable_capacity_mw == shared.renewable_capacity_mw
    assert dict(load_site_profiles("caiso-2023").days) == dict(load_site_profiles(SHARED_YEAR).days)
    lines = gzip.decompress((DATA / datasets.DAYAHEAD_CSV).read_bytes()).decode().split("\n")
    n_lmp = len(LMP_COLUMNS)
    assert lines[0].split(",")[-n_lmp:] == list(LMP_COLUMNS)
    assert "\n".join(line.rsplit(",", n_lmp)[0] if line else line for line in lines) == SHARED_DAYAHEAD.read_text()
    with_lmp, source = load_forecasts("caiso-2023-dayahead"), load_forecasts(SHARED_DAYAHEAD)
    assert dict(with_lmp.days) == dict(source.days) and dict(with_lmp.skipped) == dict(source.skipped)


def test_paths_work_as_before_gzip_included(tmp_path, monkeypatch):
    by_path = load_profiles(DATA / datasets.YEAR_CSV)
    assert by_path.source == str(DATA / datasets.YEAR_CSV)
    assert dict(by_path.days) == dict(load_profiles("caiso-2023").days)
    assert load_forecasts(DATA / datasets.DAYAHEAD_CSV).supplied_dates() == load_forecasts(
        "caiso-2023-dayahead").supplied_dates()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mydays").write_bytes((DATA / datasets.DAYS_CSV).read_bytes())  # a bare word that is a file
    assert load_profiles("mydays").source == "mydays"
    (tmp_path / "caiso-2023").write_bytes((DATA / datasets.DAYS_CSV).read_bytes())
    assert load_profiles("caiso-2023").source == "caiso-2023" and len(load_profiles("caiso-2023").days) == 351
    assert len(load_profiles("./caiso-2023").days) == 24  # a name wins; ./ reads the file
    with pytest.raises(FileNotFoundError):
        load_profiles("missing.csv")


@pytest.mark.parametrize(("load", "source", "names"), [
    (load_profiles, "caiso-2024", "caiso-2023, caiso-2023-days"),
    (load_profiles, "caiso-2023-dayahead", "caiso-2023, caiso-2023-days"),
    (load_site_profiles, "caiso_2023", "caiso-2023, caiso-2023-days"),
    (load_forecasts, "caiso-2023", "caiso-2023-dayahead"),
    (load_forecasts, "dayahead", "caiso-2023-dayahead"),
])
def test_an_unknown_or_wrong_kind_name_is_one_input_error_listing_the_names(load, source, names):
    with pytest.raises(InputError) as err:
        load(source)
    assert err.value.field in datasets.KINDS and repr(source)[1:-1] in err.value.message and names in err.value.message


def test_build_instances_and_the_sites_case_take_a_name():
    inst = build_instance("2048", day="2023-12-30", profiles="caiso-2023")  # a day only the full year has
    assert inst.days == ("2023-12-30",)
    assert list(build_instances("2048", days=["2023-01-08", "2023-07-04"], profiles="caiso-2023")) == [
        "2023-01-08", "2023-07-04"]
    sites = build_instance("sites3", day="2023-07-04", profiles="caiso-2023")  # reads the three zones' prices
    year = load_site_profiles("caiso-2023").day("2023-07-04")
    assert len({site.price_node for site in sites.sites}) > 1
    for site in sites.sites:
        np.testing.assert_array_equal(site.price_usd_per_mwh, hourly_to_slots(year.price(site.price_node), sites.slots))


def test_model_forecaster_instances_are_the_same_with_or_without_the_lmp_columns():
    """Runs on the package's own price model see the same instances whether or not the forecast table carries the
    day-ahead LMP: a supplied price never changes the days or the forecasts of the model path."""
    profiles, with_lmp, bare = load_profiles("caiso-2023"), load_forecasts("caiso-2023-dayahead"), _bare_forecasts()
    assert with_lmp.supplies_price and not bare.supplies_price
    assert dict(with_lmp.days) == dict(bare.days) and dict(with_lmp.skipped) == dict(bare.skipped)
    train = [d for d in with_lmp.dates() if "2023-06-20" <= d <= "2023-07-10"]
    instances = build_instances("2048", days=["2023-07-20", "2023-07-21"], profiles=profiles)
    a = dayahead_instances(instances, profiles, with_lmp, train, n_scenarios=2, seed=0)
    b = dayahead_instances(instances, profiles, bare, train, n_scenarios=2, seed=0)
    assert list(a) == list(b) == list(instances)
    assert all(a[d].to_dict() == b[d].to_dict() for d in a)


def test_the_supplied_price_is_the_sce_dayahead_lmp_and_an_incomplete_day_keeps_its_forecasts():
    forecasts = load_forecasts("caiso-2023-dayahead")
    assert "2023-05-31" in forecasts.days and "2023-05-31" in forecasts.supplied_skipped
    assert not forecasts.has_supplied_price("2023-05-31")
    fall_back = forecasts.supplied_price("2023-11-05")  # DST ends: the LMP file's one 01:00 row serves both
    assert fall_back[0] == 66.67327 and fall_back[1] == 64.55812
    assert forecasts.supplied_price("2023-11-06")[0] == pytest.approx((63.98524 + 64.8704) / 2)


def test_forecasts_cli_reports_the_supplied_price_coverage(capsys):
    assert run_cli(F.main, ["--forecasts", "caiso-2023-dayahead"]) == 0
    out = capsys.readouterr().out
    assert "source: caiso-2023-dayahead" in out
    assert "supplied price forecast: 167 days (2023-06-01 to 2023-11-14)" in out


def test_cli_bad_name_is_exit_2_with_one_line(capsys):
    from aidc_env import case as C

    for main, argv in ((P.main, ["--profiles", "caiso-2024"]), (F.main, ["--forecasts", "caiso-2023"]),
                       (C.main, ["--profiles", "nope", "--json"])):
        assert run_cli(main, argv) == EXIT_BAD_INPUT
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "caiso-2023" in err, err


def test_datasets_cli_text_and_json(capsys):
    assert run_cli(datasets.main, []) == 0
    text = capsys.readouterr().out
    assert all(name in text for name in datasets.DATASETS) and "coverage: 351 complete days" in text
    assert datasets.DAP_COMMIT in text
    assert run_cli(datasets.main, ["--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in info] == list(datasets.DATASETS)
    assert {d["kind"] for d in info} == set(datasets.KINDS)
    assert all(d["bytes"] == (DATA / Path(d["file"]).name).stat().st_size for d in info)
    assert run_cli(datasets.main, ["--nope"]) == EXIT_BAD_INPUT


def test_profiles_cli_runs_from_a_folder_outside_the_repository(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "aidc_env.profiles", "--profiles", "caiso-2023"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "source: caiso-2023" in done.stdout and "days loaded: 351 (2023-01-08 to 2023-12-30)" in done.stdout


def test_every_packaged_data_file_is_package_data():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["aidc_env"]
    for file in DATA.iterdir():
        relative = f"data/{file.name}"
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in globs), relative
    for found in datasets.DATASETS.values():
        for name in (found.file, found.meta, found.site_file, found.site_meta):
            assert name is None or (DATA / name).is_file(), name
