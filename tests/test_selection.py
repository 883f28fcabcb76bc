"""Model selection on validation days (agents/selection.py) and train.py's fine-tuning defaults: fast, no training."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import train
from agents.days import split_days
from agents.ppo import PPOConfig, finetunes, rate_and_entropy, warm_starts
from agents.selection import Candidate, select_best, split_validation, write_selection
from aidc_env.errors import EXIT_BAD_INPUT, InputError, run_cli

YEAR = [(dt.date(2023, 1, 1) + dt.timedelta(days=i)).isoformat() for i in range(365)]


@settings(max_examples=20, derandomize=True, deadline=None)
@given(n_days=st.integers(0, 365), every=st.integers(2, 40), shuffle=st.randoms(use_true_random=False))
def test_validation_days_are_disjoint_from_training_and_heldout_days(n_days, every, shuffle):
    days = YEAR[:n_days]
    train_split, heldout = split_days(days)
    given_days = list(train_split)
    shuffle.shuffle(given_days)  # the order given does not matter: by date
    train_days, validation = split_validation(given_days, every)
    assert not set(validation) & set(train_days)
    assert not set(validation) & set(heldout)
    assert not set(train_days) & set(heldout)
    assert sorted(train_days + validation) == sorted(train_split)
    assert validation == sorted(train_split)[every - 1::every]  # every every-th training day, by date
    assert len(train_days) >= len(validation)


def test_validation_on_the_forecast_period_holds_one_day_in_seven():
    train_split, heldout = split_days(YEAR)
    train_days, validation = split_validation(train_split, 7)
    assert len(validation) == len(train_split) // 7 and validation[0] == sorted(train_split)[6]
    assert split_validation(train_split, 0) == (sorted(train_split), [])
    with pytest.raises(InputError, match="validation-every"):
        split_validation(train_split, 1)


def cand(label: str, cost: float, met: int = 30, steps: int = 0) -> Candidate:
    return Candidate(label=label, steps=steps, path=f"{label}.zip", cost_usd=cost, tranches_met=met)


def test_selection_keeps_the_least_validation_cost():
    assert select_best([cand("warm start", 100.0), cand("a", 99.5, steps=1), cand("b", 101.0, steps=2)]) == 1
    assert select_best([cand("warm start", 98.0), cand("a", 99.5, steps=1)]) == 0
    assert select_best([cand("only", 5.0)]) == 0
    with pytest.raises(InputError):
        select_best([])


def test_selection_prefers_the_earlier_on_ties():
    assert select_best([cand("warm start", 100.0), cand("a", 100.0, steps=1), cand("b", 100.0, steps=2)]) == 0
    assert select_best([cand("warm start", 101.0), cand("a", 100.0, steps=1), cand("b", 100.0, steps=2)]) == 1


def test_selection_prefers_every_tranche_met_over_a_lower_cost():
    assert select_best([cand("warm start", 100.0, met=30), cand("a", 90.0, met=29, steps=1)]) == 0


def test_selection_history_is_strict_json(tmp_path):
    candidates = [cand("warm start", 100.0), cand("ppo_2048_steps.zip", 99.0, steps=2048)]
    path = write_selection(tmp_path, ["2023-03-20"], candidates, select_best(candidates))
    record = json.loads(path.read_text(), parse_constant=lambda token: pytest.fail(token))
    assert record["kept"] == "ppo_2048_steps.zip" and record["kept_steps"] == 2048
    assert [c["cost_usd"] for c in record["candidates"]] == [100.0, 99.0]
    assert record["validation_days"] == ["2023-03-20"]
    assert not list(tmp_path.glob("*.tmp*"))  # written atomically: no temporary left


def test_finetune_and_selection_defaults():
    defaults = PPOConfig()
    assert defaults.finetune and defaults.finetune_lr_factor == 0.1 and defaults.finetune_ent_coef == 0.0
    assert defaults.validation_every == 7
    dayahead = PPOConfig(env_kwargs={**defaults.env_kwargs, "information": "dayahead"})
    assert warm_starts(dayahead) and finetunes(dayahead)
    assert not finetunes(defaults)  # perfect information: no plan, no warm start, no fine-tuning
    assert not finetunes(PPOConfig(env_kwargs=dayahead.env_kwargs, imitation_epochs=0))
    assert not finetunes(PPOConfig(env_kwargs=dayahead.env_kwargs, finetune=False))
    args = train.parse_args([])
    assert (args.finetune, args.finetune_lr_factor, args.validation_every) == (True, 0.1, 7)


def test_finetuning_runs_at_a_tenth_of_the_rate_without_entropy():
    config = PPOConfig()
    assert rate_and_entropy(config) == (config.learning_rate, config.ent_coef)  # perfect information: as given
    config.env_kwargs = {**config.env_kwargs, "information": "dayahead"}
    rate, ent_coef = rate_and_entropy(config)
    assert rate == pytest.approx(0.1 * config.learning_rate) and ent_coef == 0.0
    config.finetune = False
    assert rate_and_entropy(config) == (config.learning_rate, config.ent_coef)


@pytest.mark.parametrize("argv, field", [
    (["--validation-every", "1"], "validation-every"), (["--validation-every", "-3"], "validation-every"),
    (["--validation-every", "x"], "--validation-every"), (["--finetune-lr-factor", "0"], "finetune-lr-factor"),
    (["--finetune-lr-factor", "2"], "finetune-lr-factor"), (["--finetune-lr-factor", "inf"], "finetune-lr-factor")])
def test_bad_selection_flags_exit_2_with_one_line(argv, field, capsys, tmp_path):
    assert run_cli(train.main, [*argv, "--out", str(tmp_path / "run")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err
    assert not (tmp_path / "run").exists()
