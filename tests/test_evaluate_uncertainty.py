"""evaluate.py under day-ahead information: the comparisons, the flags, the model's information,
and the persistence price the instances carry for the ``dayahead-plan`` rule."""

from __future__ import annotations

import numpy as np
import pytest

import evaluate
from aidc_env.errors import EXIT_BAD_INPUT, InputError, run_cli
from tests.test_forecasts import HELD, forecaster, synthetic, tiny_model  # noqa: F401 (fixtures)

COSTS = {
    "hindsight": {"d1": 100.0, "d2": 200.0},
    "fixed": {"d1": 150.0, "d2": 250.0},
    "mpc": {"d1": 110.0, "d2": 230.0},
    "smpc": {"d1": 105.0},
}


def test_comparisons_over_totals_and_common_days():
    out = evaluate.comparisons(COSTS)
    mpc = out["policies"]["mpc"]
    assert mpc["total_cost_usd"] == 340.0 and mpc["days_compared"] == 2
    assert mpc["cost_relative_to_hindsight"] == pytest.approx(340 / 300)
    assert mpc["saving_captured"] == pytest.approx((400 - 340) / (400 - 300))
    assert mpc["evpi_usd"] == {"total": 40.0, "days": {"d1": 10.0, "d2": 30.0}}
    assert out["policies"]["hindsight"]["saving_captured"] == 1.0
    assert out["policies"]["fixed"]["saving_captured"] == 0.0
    smpc = out["policies"]["smpc"]  # one day only: every comparison is over that day
    assert smpc["days_compared"] == 1 and smpc["saving_captured"] == pytest.approx((150 - 105) / (150 - 100))
    assert out["vss_usd"] == {"total": 5.0, "days_compared": 1, "days": {"d1": 5.0}} == smpc["vss_usd"]


def test_comparisons_without_a_saving_to_capture_are_null_not_nan():
    out = evaluate.comparisons({"hindsight": {"d": 10.0}, "fixed": {"d": 10.0}, "greedy": {"d": 12.0}})
    assert out["policies"]["greedy"]["saving_captured"] is None
    assert "vss_usd" not in out


@pytest.mark.parametrize(("argv", "field"), [
    (["--information", "dayahead"], "forecasts"),
    (["--information", "dayahead", "--forecasts", "f.csv", "--smpc-scenarios", "0"], "smpc-scenarios"),
    (["--smpc-scenarios", "11"], "smpc-scenarios"),
    (["--smpc-threshold", "-1"], "smpc-threshold"),
    (["--smpc-scenarios", "8", "--smpc-evaluation-scenarios", "3"], "smpc-evaluation-scenarios"),
    (["--smpc-evaluation-scenarios", "-1"], "smpc-evaluation-scenarios"),
    (["--smpc-threshold", "nan"], "smpc-threshold"),
    (["--smpc-recourse", "informed", "--smpc-stages", "points"], "smpc-recourse"),
    (["--smpc-recourse", "psychic"], "smpc-recourse"),
    (["--information", "hindsight"], "information"),
    (["--policies", "mpc,mpc-true-price"], "policies"),
    (["--price-forecast", "supplied"], "price-forecast"),
    (["--price-forecast", "psychic", "--forecasts", "f.csv"], "--price-forecast"),
    (["--price-issue-hour", "13"], "price-issue-hour"),
    (["--price-issue-hour", "9", "--forecasts", "f.csv"], "price-issue-hour"),
    (["--price-issue-hour", "24", "--forecasts", "f.csv"], "price-issue-hour"),
    (["--price-issue-hour", "1.5", "--forecasts", "f.csv"], "--price-issue-hour"),
])
def test_bad_flags_exit_2_with_one_line(argv, field, tmp_path, capsys):
    assert run_cli(evaluate.main, [*argv, "--out", str(tmp_path / "out"), "--no-plots"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err


class FakeModel:
    def __init__(self, information: str):
        self.aidc_config = {"env_kwargs": {"information": information}}


class Args:
    case = "2048"
    split = "weeks"
    gpus = segments = renewable_ratio = horizon_days = min_daily_share = None  # the model's own case

    def __init__(self, information: str, forecasts: str | None):
        self.information, self.forecasts = information, forecasts


@pytest.mark.parametrize(("trained", "information", "forecasts", "field"), [
    ("dayahead", "perfect", None, "forecasts"),
    ("dayahead", "dayahead", None, "forecasts"),
    ("perfect", "dayahead", "f.csv", "model"),
])
def test_a_model_is_refused_information_it_was_not_trained_with(monkeypatch, trained, information, forecasts, field):
    import agents.ppo

    monkeypatch.setattr(agents.ppo, "load_model", lambda path: FakeModel(trained))
    with pytest.raises(InputError, match=field):
        evaluate.check_model("model.zip", Args(information, forecasts), inst=None)


def test_a_model_evaluated_on_another_price_forecast_is_noted(monkeypatch, capsys):
    import agents.ppo

    model = FakeModel("dayahead")
    model.aidc_config["price_forecast"] = "supplied"
    monkeypatch.setattr(agents.ppo, "load_model", lambda path: model)
    monkeypatch.setattr(agents.ppo, "ppo_schedule", lambda model, inst: None)
    args = Args("dayahead", "f.csv")
    args.price_forecast = "model"
    evaluate.check_model("model.zip", args, inst=None)
    assert "trained on the supplied price forecast and is evaluated on the model one" in capsys.readouterr().err
    args.price_forecast = "supplied"
    evaluate.check_model("model.zip", args, inst=None)
    assert capsys.readouterr().err == ""
    args.price_issue_hour = 13  # a config saved without the hour means 10:00
    evaluate.check_model("model.zip", args, inst=None)
    assert "trained on a price issued at 10:00 and is evaluated on one issued at 13:00" in capsys.readouterr().err
    model.aidc_config["price_issue_hour"] = 13
    evaluate.check_model("model.zip", args, inst=None)
    assert capsys.readouterr().err == ""


def test_model_may_be_the_run_folder_or_the_zip(tmp_path):
    assert evaluate.resolve_model_path(str(tmp_path), "2048") == str(tmp_path / "model.zip")
    assert evaluate.resolve_model_path(str(tmp_path / "m.zip"), "2048") == str(tmp_path / "m.zip")
    assert evaluate.resolve_model_path(None, "2048").endswith("ppo-2048/model.zip")


def test_instances_carry_each_days_persistence_price(synthetic, forecaster):  # noqa: F811
    from aidc_env.case import build_instances
    from aidc_env.dayahead import attach_forecasts
    from aidc_env.price_forecast import persistence_forecast
    from aidc_env.profiles import hourly_to_slots

    profiles, forecasts = synthetic
    with_fc = attach_forecasts(build_instances("2048", HELD[:1], profiles, horizon_days=2), forecaster, profiles,
                               forecasts, n_scenarios=0)
    inst = with_fc[HELD[0]]
    for d, date in enumerate(inst.days):
        np.testing.assert_array_equal(inst.forecast.persistence_price_usd_per_mwh[inst.day_slots(d)],
                                      hourly_to_slots(persistence_forecast(profiles, date), inst.slots_per_day))
    assert not np.array_equal(inst.forecast.persistence_price_usd_per_mwh, inst.forecast.price_usd_per_mwh)


def test_instances_carry_the_price_issue_hour(synthetic, forecaster):  # noqa: F811
    from aidc_env.case import build_instances
    from aidc_env.dayahead import attach_forecasts
    from aidc_env.information import issue_slots

    profiles, forecasts = synthetic
    built = build_instances("2048", HELD[:1], profiles, horizon_days=2)
    at_ten, at_one = (attach_forecasts(built, forecaster, profiles, forecasts, n_scenarios=2,
                                       **({"price_issue_hour": 13} if late else {}))[HELD[0]] for late in (False, True))
    assert (at_ten.forecast.price_issue_hour, at_one.forecast.price_issue_hour) == (10, 13)
    assert "price issued at 13:00" in at_one.forecast.source and "price issued" not in at_ten.forecast.source
    for name in ("price_usd_per_mwh", "renewable_shape", "price_scenarios_usd_per_mwh",
                 "issue_outlook_price_usd_per_mwh", "persistence_price_usd_per_mwh"):
        np.testing.assert_array_equal(getattr(at_ten.forecast, name), getattr(at_one.forecast, name))
    spd = at_ten.slots_per_day
    assert issue_slots(at_ten) == [spd * 10 // 24] and issue_slots(at_one) == [spd * 10 // 24, spd * 13 // 24]


def test_a_supplied_price_needs_the_column_on_some_day(tmp_path, capsys):
    from tests.test_forecasts import _rows, _write

    bare = _write(tmp_path, _rows("2023-06-01", "2023-06-02"))
    argv = ["--information", "dayahead", "--forecasts", str(bare), "--price-forecast", "supplied",
            "--policies", "mpc", "--out", str(tmp_path / "out"), "--no-plots"]
    assert run_cli(evaluate.main, argv) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "has no day with a supplied price forecast" in err, err
