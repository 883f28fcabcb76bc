"""Nothing a user would hate to lose is lost: atomic writes, strict JSON, resumable training and Ctrl-C.

- atomic writes leave the old file (never half a new one) when the writer fails;
- every --json output and written JSON file parses with NaN/Infinity tokens refused;
- ``train.py --resume`` skips a truncated newest checkpoint with one warning line;
- Ctrl-C (SIGINT) during train.py saves a resumable checkpoint and the model and exits 130; the resumed run ends
  at the uninterrupted run's step count with model weights of the same size;
- Ctrl-C during evaluate.py and the studies keeps the finished days on disk and exits 130;
- the studies rewrite docs only with --update-docs, and only a section over the same days.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import evaluate
import train
from aidc_env import case as case_cli
from aidc_env import profiles as profiles_cli
from aidc_env import simulator as simulate_cli
from aidc_env.baselines import fixed_schedule
from aidc_env.case import build_instance
from aidc_env.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, run_cli
from aidc_env.io import atomic_path, atomic_write_text, dumps_json, write_json
from aidc_env.modes import cli as modes_cli
from experiments import studies
from experiments.runs import SECTION_START, day_set_key
from oracle import __main__ as oracle_cli

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--n-envs", "2", "--n-steps", "32", "--batch-size", "32", "--n-epochs", "1", "--net-arch", "16", "--seed", "1"]


def strict(text: str):
    """json.loads refusing NaN / Infinity / -Infinity tokens."""

    def refuse(token: str):
        raise AssertionError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------------------------------ atomic writes


def test_atomic_write_replaces_whole_file_and_keeps_the_old_one_on_failure(tmp_path):
    target = tmp_path / "results.csv"
    atomic_write_text(target, "old\n")
    with pytest.raises(RuntimeError), atomic_path(target) as temp:
        temp.write_text("half a new fi")
        raise RuntimeError("disk full")
    assert target.read_text() == "old\n"
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as temp:
        temp.write_text("half")
        raise KeyboardInterrupt
    assert target.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n" and oct(target.stat().st_mode & 0o777) != oct(0o600)


def test_strict_json_maps_non_finite_numbers_to_null(tmp_path):
    data = {"nan": math.nan, "inf": [math.inf, -np.inf], "np": np.float64(1.5), "arr": np.array([1.0, np.nan]),
            "int": np.int64(3), "flag": np.bool_(True)}
    assert strict(dumps_json(data)) == {"nan": None, "inf": [None, None], "np": 1.5, "arr": [1.0, None], "int": 3,
                                        "flag": True}
    assert strict(write_json(tmp_path / "x.json", data).read_text())["nan"] is None


# ------------------------------------------------------------------------------------------ strict JSON outputs


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("json")
    inst = build_instance("2048", segments=4)
    (folder / "instance.json").write_text(inst.to_json())
    (folder / "schedule.json").write_text(json.dumps(fixed_schedule(inst)))
    return folder


@pytest.mark.parametrize("main,argv", [
    (case_cli.main, ["--json", "--segments", "4"]),
    (modes_cli.main, ["--case", "2048", "--json"]),
    (profiles_cli.main, ["--json"]),
    (simulate_cli.main, ["--instance", "{dir}/instance.json", "--schedule", "{dir}/schedule.json", "--json", "--flows"]),
    (oracle_cli.main, ["--instance", "{dir}/instance.json", "--json"]),
    (oracle_cli.main, ["--segments", "4", "--gpus", "768", "--json"]),  # infeasible: nulls and a status
], ids=["case", "modes", "profiles", "simulate", "oracle", "oracle-infeasible"])
def test_every_json_output_is_strict(main, argv, inputs, capsys):
    assert run_cli(main, [a.replace("{dir}", str(inputs)) for a in argv]) == 0
    data = strict(capsys.readouterr().out)
    assert data


def test_case_out_file_is_strict(tmp_path):
    assert run_cli(case_cli.main, ["--out", str(tmp_path / "i.json"), "--segments", "4"]) == 0
    assert strict((tmp_path / "i.json").read_text())["format"] == "aidc-instance/1"


def test_evaluate_writes_strict_json_and_keeps_finished_days_on_ctrl_c(tmp_path, monkeypatch, capsys):
    out = tmp_path / "eval"
    argv = ["--policies", "fixed,greedy", "--days", "all", "--max-days", "4", "--no-plots", "--out", str(out)]
    assert run_cli(evaluate.main, [*argv, "--json", str(tmp_path / "summary.json")]) == 0
    summary = strict((tmp_path / "summary.json").read_text())
    assert strict((out / "summary.json").read_text()) == summary and len(summary["days"]) == 4
    # cost_ratio_to_oracle is NaN without the oracle: null in JSON.
    assert summary["policies"]["fixed"]["mean"]["cost_ratio_to_oracle"] is None

    calls = []
    real = evaluate.run_policy

    def interrupted_after_three(name, inst, settings):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(inst.day)
        return real(name, inst, settings)

    monkeypatch.setattr(evaluate, "run_policy", interrupted_after_three)
    again = tmp_path / "again"
    capsys.readouterr()
    assert run_cli(evaluate.main, [*argv[:-1], str(again)]) == EXIT_INTERRUPTED
    err = capsys.readouterr().err.strip().splitlines()  # the progress bar, then one line
    assert err[-1].startswith("interrupted: 3 finished") and sum(line.startswith("interrupted") for line in err) == 1
    kept = pd.read_csv(again / "per_day.csv")
    assert len(kept) == 3 and list(kept["day"]) == calls
    assert not (again / "summary.json").exists()


# ------------------------------------------------------------------------------------------ studies and docs


def test_study_ctrl_c_keeps_solved_rows(tmp_path, monkeypatch, capsys):
    def two_rows_then_ctrl_c(points, time_limit_s):
        for point in points[:2]:
            yield {**point.label, "status": "optimal", "operating_cost_usd": 1.0}
        raise KeyboardInterrupt

    monkeypatch.setattr(studies, "iter_solve_chunk", two_rows_then_ctrl_c)
    out = tmp_path / "out"
    code = run_cli(studies.main, ["gpus", "--grid", "1280,1536,2048", "--workers", "1", "--out", str(out)])
    assert code == EXIT_INTERRUPTED
    err = capsys.readouterr().err.strip().splitlines()  # the progress bar, then one line
    assert "2 solved rows kept" in err[-1] and sum(line.startswith("interrupted") for line in err) == 1
    assert list(pd.read_csv(out / "gpus.partial.csv")["gpus"]) == [1280, 1536]


def test_committed_days_section_records_its_351_days():
    text = (ROOT / "docs" / "results.md").read_text()
    keys = {m.group("name"): m.group("days") for m in SECTION_START.finditer(text)}
    assert keys["days"].startswith("351:")
    assert keys["headline"] == day_set_key(["2023-06-17"])


def test_update_docs_refuses_a_section_over_other_days(tmp_path, capsys):
    results = tmp_path / "docs" / "results.md"
    results.parent.mkdir()
    shutil.copy(ROOT / "docs" / "results.md", results)
    before = results.read_bytes()
    out = tmp_path / "out"
    code = run_cli(studies.main, ["days", "--days", "2023-01-18", "2023-06-17", "--update-docs", "--results",
                                  str(results), "--out", str(out), "--workers", "1"])
    assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "update-docs" in err[0] and "351 days" in err[0] and "2 days" in err[0]
    assert results.read_bytes() == before and not out.exists() and sorted(os.listdir(results.parent)) == ["results.md"]


def test_update_docs_replaces_a_matching_section_only(tmp_path):
    results = tmp_path / "results.md"
    studies.update_docs_section(results, "days", "first", ["2023-01-02", "2023-01-01"])
    studies.update_docs_section(results, "days", "second", ["2023-01-01", "2023-01-02"])  # same set, any order
    assert "second" in results.read_text() and "first" not in results.read_text()
    with pytest.raises(studies.InputError):
        studies.update_docs_section(results, "days", "third", ["2023-01-01"])
    assert "second" in results.read_text()


# ------------------------------------------------------------------------------------------ training


def test_resume_skips_a_truncated_newest_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    assert train.main([*TINY, "--timesteps", "128", "--checkpoint-freq", "32", "--out", str(out)]) == 0
    newest = out / "checkpoints" / "ppo_128_steps.zip"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])  # a full disk, a killed copy...
    capsys.readouterr()
    assert run_cli(train.main, ["--out", str(out), "--resume"]) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "ppo_128_steps.zip" in warnings[0]
    assert "resuming from" in captured.out and "ppo_64_steps.zip at step 64" in captured.out
    assert zipfile.is_zipfile(newest)
    record = strict((out / "config.json").read_text())
    assert record["status"] == "done" and record["num_timesteps"] == 128


def test_ctrl_c_saves_a_resumable_run_that_ends_like_an_uninterrupted_one(tmp_path):
    steps = ["--timesteps", "512", "--checkpoint-freq", "64"]
    out = tmp_path / "interrupted"
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *TINY, *steps, "--out", str(out)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal
    deadline = time.monotonic() + 120
    while not (out / "checkpoints" / "ppo_64_steps.zip").exists() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED, stderr
    said = [line for line in stderr.splitlines() if line.startswith("interrupted at step")]
    assert len(said) == 1 and "--resume" in said[0] and "Traceback" not in stderr
    record = strict((out / "config.json").read_text())
    assert record["status"] == "interrupted" and (out / "model.zip").is_file()
    stopped = record["num_timesteps"]
    assert stopped % 64 == 0 and stopped < 512  # the last update's step count (a rollout is 2 x 32 steps)
    assert zipfile.is_zipfile(out / "checkpoints" / f"ppo_{stopped}_steps.zip")

    assert train.main(["--out", str(out), "--resume"]) == 0
    whole = tmp_path / "whole"
    assert train.main([*TINY, *steps, "--out", str(whole)]) == 0
    assert strict((out / "config.json").read_text())["num_timesteps"] == 512
    sizes = {}
    for run in (out, whole):
        with zipfile.ZipFile(run / "model.zip") as archive:
            sizes[run] = {info.filename: info.file_size for info in archive.infolist()}
    # The weights and the optimizer state have the same size; "data" (JSON) differs by a few bytes only: the
    # resumed run's _num_timesteps_at_start, its re-pickled learning-rate closure and the action space's RNG state.
    for name in ("policy.pth", "policy.optimizer.pth", "pytorch_variables.pth"):
        assert sizes[out][name] == sizes[whole][name]
    assert abs(sizes[out]["data"] - sizes[whole]["data"]) < 0.01 * sizes[whole]["data"]
