"""train.py on D-day instances (weeks, ``--horizon-days 7``): flags, defaults, the training set: fast, no training."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

import train
from agents.days import horizon_days_of, split_days, split_starts
from agents.ppo import PPOConfig
from agents.ppo_config import HORIZON_DEFAULTS
from agents.selection import split_horizon_starts, split_validation
from aidc_env.errors import EXIT_BAD_INPUT, InputError, run_cli

YEAR = [(dt.date(2023, 1, 1) + dt.timedelta(days=i)).isoformat() for i in range(365)]
WEEK = 7


def week_starts(dates: list[str]) -> list[str]:
    """The dates that start 7 consecutive dates of ``dates``."""
    present = set(dates)
    return [d for d in dates if all((dt.date.fromisoformat(d) + dt.timedelta(days=k)).isoformat() in present
                                    for k in range(WEEK))]


def test_one_day_defaults_are_unchanged():
    args = train.parse_args([])
    assert args.default_timesteps == PPOConfig().total_timesteps == 1_000_000
    assert args.checkpoint_freq == PPOConfig().checkpoint_freq == 100_000
    args = train.parse_args(["--horizon-days", "1"])
    assert args.default_timesteps == 1_000_000 and args.checkpoint_freq == 100_000


def test_week_defaults_and_flags():
    args = train.parse_args(["--horizon-days", "7"])
    assert args.default_timesteps == HORIZON_DEFAULTS["total_timesteps"] == 25_000
    assert args.checkpoint_freq == HORIZON_DEFAULTS["checkpoint_freq"] == 12_500
    assert (args.horizon_train_instances, args.horizon_validation_instances, args.horizon_plan_time_limit) == (
        24, 3, 30.0)
    # a flag given wins over the week defaults
    args = train.parse_args(["--horizon-days", "7", "--checkpoint-freq", "5000", "--horizon-train-instances", "4",
                             "--horizon-validation-instances", "0", "--horizon-plan-time-limit", "5"])
    assert (args.checkpoint_freq, args.horizon_train_instances, args.horizon_validation_instances,
            args.horizon_plan_time_limit) == (5000, 4, 0, 5.0)
    # the old configs (without the fields) load with the defaults
    assert PPOConfig.from_dict({"case": "2048"}).horizon_train_instances == 24


@pytest.mark.parametrize("every", [0, 2, 7])
@pytest.mark.parametrize("max_train,max_validation", [(12, 3), (1000, 1000), (1, 0)])
def test_week_training_set_lies_within_training_days(every, max_train, max_validation):
    starts = week_starts(YEAR)
    train_starts, validation, heldout = split_horizon_starts(YEAR, starts, every, max_train, max_validation,
                                                             horizon_days=WEEK)
    split_train, split_heldout = split_days(YEAR)
    assert heldout == split_starts(YEAR, starts, WEEK)[1]  # evaluate.py's held-out weeks
    for start in train_starts + validation:
        assert set(horizon_days_of(start, WEEK)) <= set(split_train)
    assert not set(train_starts) & set(validation)
    usable_train = split_starts(YEAR, starts, WEEK)[0]
    all_train, all_validation = split_validation(usable_train, every)
    assert set(train_starts) <= set(all_train) and set(validation) <= set(all_validation)
    assert len(train_starts) == min(max_train, len(all_train))
    assert len(validation) == min(max_validation, len(all_validation))
    assert train_starts == sorted(train_starts) and (len(train_starts) < 2 or train_starts[0] == all_train[0])


def test_week_training_set_keeps_only_usable_starts():
    """Starts without forecasts for all 7 days (not in ``starts``) neither train nor validate nor are held out."""
    starts = week_starts(YEAR)[60:200]
    train_starts, validation, heldout = split_horizon_starts(YEAR, starts, 7, 1000, 1000, horizon_days=WEEK)
    assert set(train_starts + validation + heldout) <= set(starts)
    assert all(dt.date.fromisoformat(d).weekday() == 0 for d in heldout)  # held-out weeks run Monday to Sunday


def test_horizon_instances_sets_the_days_of_the_config():
    """train.horizon_instances (perfect information: no forecast file) picks training starts on training days."""
    days = YEAR[:90]
    instances = {d: SimpleNamespace(days=[d]) for d in week_starts(days)}
    profiles = SimpleNamespace(dates=lambda: list(days))
    config = PPOConfig(horizon_train_instances=5, horizon_validation_instances=2,
                       train_days=split_days(days)[0], heldout_days=split_days(days)[1])
    chosen = train.horizon_instances(config, instances, profiles)
    assert list(chosen) == config.train_days and len(config.train_days) == 5
    assert config.validation_days == []  # validation only with day-ahead information
    assert not set(config.train_days) & set(split_days(days)[1])
    assert config.heldout_days == [d for d in split_days(days)[1] if d in instances]


def test_week_forecasts_are_fitted_on_training_days_and_out_of_sample(monkeypatch):
    """With day-ahead information the training weeks' forecasts come from dayahead_instances out of sample (each
    week's own days left out of its fit, as evaluate.py fits a held-out week's) and from training days only."""
    from agents.days import week_days

    days = [d for d in YEAR if "2023-03-01" <= d <= "2023-06-30"]
    weeks = {d: SimpleNamespace(days=week_days([d])) for d in week_starts(days)}
    calls = []

    def fake_dayahead(chosen, profiles, forecasts, fit_days, seed=0, **kwargs):
        calls.append((sorted(chosen), list(fit_days), kwargs))
        return dict(chosen)

    monkeypatch.setattr(train, "dayahead_instances", fake_dayahead)
    monkeypatch.setattr(train, "load_forecasts", lambda path: SimpleNamespace(dates=lambda: list(days)))
    config = PPOConfig(forecasts="fc.csv", horizon_train_instances=6, horizon_validation_instances=2,
                       train_days=split_days(days)[0])
    config.env_kwargs["information"] = "dayahead"
    chosen = train.horizon_instances(config, weeks, SimpleNamespace(dates=lambda: list(days)))
    [(firsts, fit_days, kwargs)] = calls
    assert firsts == sorted(chosen) and len(config.train_days) == 6 and len(config.validation_days) == 2
    assert kwargs.get("out_of_sample", True)  # the default: each week's own days leave its fit
    assert fit_days == split_days(days)[0]


def test_horizon_instances_refuses_no_training_start():
    days = YEAR[:90]
    heldout = split_days(days)[1]
    instances = {d: SimpleNamespace(days=[d]) for d in heldout}  # only held-out starts
    config = PPOConfig(train_days=split_days(days)[0])
    with pytest.raises(InputError, match="horizon-days"):
        train.horizon_instances(config, instances, SimpleNamespace(dates=lambda: list(days)))


@pytest.mark.parametrize("argv,field", [
    (["--horizon-days", "7", "--horizon-train-instances", "0"], "horizon-train-instances"),
    (["--horizon-days", "7", "--horizon-validation-instances", "-1"], "horizon-validation-instances"),
    (["--horizon-days", "7", "--horizon-plan-time-limit", "0"], "horizon-plan-time-limit"),
    (["--horizon-days", "7", "--horizon-plan-time-limit", "nan"], "horizon-plan-time-limit"),
    (["--horizon-days", "0"], "horizon_days"),
])
def test_bad_horizon_flags_exit_2_with_one_line(argv, field, capsys, tmp_path):
    assert run_cli(train.main, [*argv, "--out", str(tmp_path / "run")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err, err


def test_week_default_observes_the_issue_plans_and_the_day_default_the_forecast_plan():
    assert HORIZON_DEFAULTS["plan"] == "issues"
    assert train.parse_args(["--horizon-days", "7"]).plan == "issues"
    assert train.parse_args([]).plan == train.parse_args(["--horizon-days", "1"]).plan == "forecast" == PPOConfig().plan
    assert train.parse_args(["--horizon-days", "7", "--plan", "forecast"]).plan == "forecast"


def test_bad_plan_flag_exits_2_with_one_line(capsys, tmp_path):
    assert run_cli(train.main, ["--horizon-days", "7", "--plan", "later", "--out", str(tmp_path / "run")]) \
        == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "plan" in err, err


def test_week_forecasts_on_a_supplied_price_train_on_weeks_that_have_it(monkeypatch):
    """With ``price_forecast="supplied"`` only the weeks whose every day has a supplied price are chosen, and their
    forecasts are asked of dayahead_instances with the supplied price."""
    from agents.days import week_days

    days = [d for d in YEAR if "2023-03-01" <= d <= "2023-08-31"]
    priced = [d for d in days if d >= "2023-06-01"]
    weeks = {d: SimpleNamespace(days=week_days([d])) for d in week_starts(days)}
    calls = []

    def fake_dayahead(chosen, profiles, forecasts, fit_days, seed=0, **kwargs):
        calls.append((sorted(chosen), kwargs))
        return dict(chosen)

    monkeypatch.setattr(train, "dayahead_instances", fake_dayahead)
    monkeypatch.setattr(train, "load_forecasts", lambda path: SimpleNamespace(dates=lambda: list(days),
                                                                              supplied_dates=lambda: list(priced)))
    for source, first, hour in (("supplied", "2023-06-01", 13), ("model", "2023-03-01", 10)):
        config = PPOConfig(forecasts="fc.csv", price_forecast=source, price_issue_hour=hour, horizon_train_instances=40,
                           horizon_validation_instances=2, train_days=split_days(days)[0])
        config.env_kwargs["information"] = "dayahead"
        chosen = train.horizon_instances(config, weeks, SimpleNamespace(dates=lambda: list(days)))
        firsts, kwargs = calls[-1]
        assert kwargs["price_source"] == source and kwargs["price_issue_hour"] == hour
        assert min(chosen) >= first and all(set(weeks[d].days) <= set(priced) for d in chosen) == (source == "supplied")
