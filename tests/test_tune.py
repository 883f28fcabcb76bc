"""agents.tune: a search that resumes from its storage (also after a crash mid-trial), and writes a best config
that train.py --config reads. Tiny trials (64 steps, 1 validation day): seconds each."""

from __future__ import annotations

import json
import sys

import optuna
import pytest

import train
from agents import tune
from aidc_env.errors import run_cli

TINY = ["--steps", "64", "--n-envs", "2", "--val-days", "1", "--reports", "1"]


def finished(storage: str) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name="ppo-2048", storage=storage)
    return [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]


def test_search_resumes_and_writes_a_config_train_reads(tmp_path, capsys):
    out = tmp_path / "tune"
    storage = f"sqlite:///{out / 'study.db'}"
    assert tune.main(["--trials", "2", *TINY, "--out", str(out)]) == 0
    assert len(finished(storage)) == 2
    # The same storage again: one more trial, with settings of its own (the sampler moves on).
    assert tune.main(["--trials", "3", *TINY, "--out", str(out)]) == 0
    trials = finished(storage)
    assert [t.number for t in trials] == [0, 1, 2]
    assert trials[2].params not in (trials[0].params, trials[1].params)
    best = json.loads((out / "best_config.json").read_text())
    assert best["trials_finished"] == 3 and best["score"] == min(t.value for t in trials if t.value is not None)
    args = train.parse_args(["--config", str(out / "best_config.json")])
    assert args.learning_rate == best["config"]["learning_rate"] and args.net_arch == best["config"]["net_arch"]
    assert train.parse_args(["--config", str(out / "best_config.json"), "--n-steps", "7"]).n_steps == 7  # flag wins
    assert "trial 2: complete" in capsys.readouterr().out


def test_a_trial_left_running_by_a_crash_is_failed_and_tried_again(tmp_path):
    out = tmp_path / "tune"
    out.mkdir()
    storage = f"sqlite:///{out / 'study.db'}"
    crashed = optuna.create_study(storage=storage, study_name="ppo-2048", direction="minimize")
    killed = crashed.ask()
    settings = tune.suggest(killed)  # as a search killed (kill -9) mid-trial leaves it: RUNNING, never told
    assert tune.main(["--trials", "1", *TINY, "--out", str(out)]) == 0
    trials = optuna.load_study(study_name="ppo-2048", storage=storage).trials
    assert trials[0].state == optuna.trial.TrialState.FAIL
    assert trials[1].state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    assert tune.settings_of(trials[1]) == settings


def test_bad_input_is_one_line(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"config": {"learning_rate": 1e-3, "warp_drive": 9}}))
    assert run_cli(train.main, ["--config", str(bad)]) == 2
    assert capsys.readouterr().err.startswith("error: config: unknown settings warp_drive")
    bad.write_text(json.dumps({"config": {"activation": "sigmoid"}}))
    assert run_cli(train.main, ["--config", str(bad)]) == 2
    assert "activation" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)
    assert run_cli(tune.main, ["--trials", "1", "--backend", "ray", "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'pip install -e ".[ray]"' in err


@pytest.mark.parametrize("argv", [["--trials", "0"], ["--trials", "1", "--steps", "0"],
                                  ["--trials", "1", "--ray-address", "auto"]])
def test_flags_are_checked(argv, tmp_path, capsys):
    assert run_cli(tune.main, [*argv, "--out", str(tmp_path / "t")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
