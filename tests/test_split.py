"""The held-out split (agents/days.py): whole ISO weeks, every weekday equally, the same for days and weeks."""

from __future__ import annotations

import collections
import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.days import (DAYS_PER_WEEK, HOLDOUT_WEEK_EVERY, HOLDOUT_WEEK_OFFSET, horizon_days_of, split_days,
                         split_starts)

YEAR = [(dt.date(2023, 1, 1) + dt.timedelta(days=i)).isoformat() for i in range(365)]


def test_the_weeks_split_of_2023_holds_out_whole_weeks_every_weekday_equally():
    train, held = split_days(YEAR)
    assert sorted(train + held) == YEAR and not set(train) & set(held)
    weeks = collections.Counter(dt.date.fromisoformat(d).isocalendar().week for d in held)
    assert sorted(weeks) == list(range(HOLDOUT_WEEK_OFFSET, 53, HOLDOUT_WEEK_EVERY))  # 3, 7, ..., 51: 13 weeks
    assert set(weeks.values()) == {DAYS_PER_WEEK}
    weekdays = collections.Counter(dt.date.fromisoformat(d).weekday() for d in held)
    assert set(weekdays.values()) == {13}
    assert held[0] == "2023-01-16"  # a Monday


def test_the_old_split_is_still_selectable():
    train, held = split_days(YEAR, "every-7th-day")
    assert held == YEAR[6::7] and len(train) == 365 - 52


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(0, 364), min_size=1, max_size=365), st.integers(1, 7))
def test_no_held_out_day_inside_a_training_instance_and_held_out_instances_never_overlap(kept, horizon):
    dates = [YEAR[i] for i in sorted(kept)]
    train_days, held_days = split_days(dates)
    starts = [d for d in dates if set(horizon_days_of(d, horizon)) <= set(dates)]
    train, held = split_starts(dates, starts, horizon)
    for start in train:
        assert set(horizon_days_of(start, horizon)) <= set(train_days)
    covered = [day for start in held for day in horizon_days_of(start, horizon)]
    assert len(covered) == len(set(covered)) and set(covered) <= set(held_days)
    if horizon == 1:  # the day split is the week split seen day by day
        assert held == held_days and train == train_days
    if horizon == DAYS_PER_WEEK:  # a held-out week is a whole ISO week
        assert all(dt.date.fromisoformat(s).weekday() == 0 for s in held)


def test_a_model_is_evaluated_on_its_own_split(tmp_path, capsys):
    """train.py records its split; evaluate.py refuses a model of another split (its held-out days would include the
    model's training days) with one line naming the flag."""
    import evaluate
    import train
    from aidc_env.errors import run_cli

    out = tmp_path / "run"
    assert train.main(["--case", "2048", "--split", "every-7th-day", "--timesteps", "64", "--n-steps", "32",
                       "--batch-size", "32", "--n-envs", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    code = run_cli(evaluate.main, ["--case", "2048", "--model", str(out), "--policies", "fixed,ppo", "--no-plots",
                                   "--out", str(tmp_path / "eval")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "split" in err[0], err
    assert evaluate.main(["--case", "2048", "--model", str(out), "--policies", "fixed,ppo", "--split", "every-7th-day",
                          "--no-plots", "--out", str(tmp_path / "eval2")]) == 0
