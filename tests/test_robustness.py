"""Outputs that do not damage what they write to, inputs that end with one line, and Ctrl-C that ends a run at once.

- writers write through to what is not a regular file (a device, a FIFO, a symlink's target) and replace regular
  files atomically;
- Ctrl-C during a HiGHS solve or the label search ends the run with exit code 130 within 2 s, one line on stderr.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from aidc_env import case as case_cli
from aidc_env.errors import EXIT_INTERRUPTED, run_cli
from aidc_env.io import atomic_path, atomic_write_text, check_output_file, write_json

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

# ------------------------------------------------------------------------------------------ writes through


def test_a_symlink_to_a_file_stays_a_symlink_and_its_target_gets_the_content(tmp_path):
    real = tmp_path / "data" / "results.csv"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "results.csv"
    link.symlink_to(real)
    atomic_write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"
    with atomic_path(link) as temp:  # what SB3's model.save, savefig and to_csv go through
        pd.DataFrame({"a": [1]}).to_csv(temp, index=False)
    assert link.is_symlink() and real.read_text() == "a\n1\n"
    write_json(link, {"x": 1})
    assert link.is_symlink() and json.loads(real.read_text()) == {"x": 1}
    assert sorted(p.name for p in real.parent.iterdir()) == ["results.csv"]  # no temporary file left


def test_a_fifo_is_written_through_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    check_output_file(fifo, "out")
    write_json(fifo, {"a": 1})
    reader.join(10)
    assert json.loads(got[0]) == {"a": 1} and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    link = tmp_path / "to_pipe.json"  # a symlink to a FIFO: written through, the link kept
    link.symlink_to(fifo)
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    atomic_write_text(link, "through\n")
    reader.join(10)
    assert got[1] == b"through\n" and link.is_symlink() and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe.json", "to_pipe.json"]


def test_dev_null_is_written_through_and_stays_a_device(tmp_path):
    null = Path(os.devnull)
    assert stat.S_ISCHR(os.stat(null).st_mode)
    atomic_write_text(null, "x")
    with atomic_path(null) as temp:
        temp.write_bytes(b"y")
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    link = tmp_path / "out.json"
    link.symlink_to(null)
    write_json(link, {"a": 1})
    assert link.is_symlink() and stat.S_ISCHR(os.lstat(null).st_mode)
    assert run_cli(case_cli.main, ["--out", str(null), "--segments", "4"]) == 0  # --out /dev/null is accepted
    assert stat.S_ISCHR(os.lstat(null).st_mode)


# ------------------------------------------------------------------------------------------ names in paths

CASE_2048 = (ROOT / "aidc_env" / "cases" / "2048.toml").read_text()
CSV = (ROOT / "aidc_env" / "data" / "caiso_2023_days.csv").read_text()


def case_file(folder: Path, replace: str, by: str, name: str = "case.toml") -> Path:
    """The 2048 case with one line replaced, as a TOML file in ``folder``."""
    assert replace in CASE_2048
    path = folder / name
    path.write_text(CASE_2048.replace(replace, by, 1))
    return path


def refused(capsys, code: int, field: str) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and field in lines[0] and "Traceback" not in lines[0], (code, lines)
    return lines[0]


@pytest.mark.parametrize("name", ["/../../x", "..", "../escape", "a/b", ".hidden", "", "x" * 101, "tab\tname"])
def test_a_case_name_that_would_leave_runs_is_refused_at_load(name, tmp_path, monkeypatch, capsys):
    import train

    monkeypatch.chdir(tmp_path)
    hostile = case_file(tmp_path, 'name = "2048"', f"name = {json.dumps(name)}")
    assert refused(capsys, run_cli(case_cli.main, ["--case", str(hostile)]), "name").startswith("error: name:")
    assert refused(capsys, run_cli(train.main, ["--case", str(hostile), "--timesteps", "8"]), "name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case.toml"]  # no runs/ folder, nothing outside it


def test_a_case_file_without_a_name_is_named_after_its_file_made_safe(tmp_path):
    path = case_file(tmp_path, 'name = "2048"', "", name="my case.toml")
    assert case_cli.load_case(str(path)).name == "my_case"


# ------------------------------------------------------------------------------------------ a folder per run


def test_evaluate_gives_each_run_its_own_numbered_folder(tmp_path, monkeypatch, capsys):
    import evaluate

    monkeypatch.chdir(tmp_path)
    argv = ["--policies", "fixed", "--days", "reference", "--no-plots"]
    (tmp_path / "runs" / "eval" / "2048_7x").mkdir(parents=True)  # not a number: not counted
    for _ in range(2):
        assert run_cli(evaluate.main, argv) == 0
    made = sorted(p.name for p in (tmp_path / "runs" / "eval").iterdir())
    assert made == ["2048_1", "2048_2", "2048_7x"]
    assert all((tmp_path / "runs" / "eval" / name / "summary.json").is_file() for name in made[:2])
    capsys.readouterr()
    # an --out holding an earlier run's results is refused, as train.py refuses an existing run
    first = tmp_path / "runs" / "eval" / "2048_1"
    before = {p.name: p.read_bytes() for p in first.iterdir()}
    assert "already holds a run's results" in refused(capsys, run_cli(evaluate.main, [*argv, "--out", str(first)]),
                                                      "out")
    assert {p.name: p.read_bytes() for p in first.iterdir()} == before
    assert run_cli(evaluate.main, [*argv, "--out", str(tmp_path / "runs" / "eval" / "2048_7x")]) == 0  # empty: fine


@pytest.mark.parametrize("module,argv,result", [
    ("experiments.studies", ["gpus", "--grid", "1280"], "gpus.csv"),
    ("experiments.studies", ["days", "--days", "2023-06-17"], "days_modes.png"),
    ("experiments.fleet_study", ["--days", "1"], "fleet_study.json"),
    ("experiments.sites_study", ["--days", "1"], "figures/sites_study.png"),
    ("experiments.forecast_study", ["--profiles", "p.csv", "--forecasts", "f.csv"], "plans.part0.csv"),
])
def test_the_experiments_refuse_an_out_holding_an_earlier_run(module, argv, result, tmp_path, monkeypatch, capsys):
    import importlib

    main = importlib.import_module(module).main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.csv").write_text(CSV)
    (tmp_path / "f.csv").write_text("x\n")
    out = tmp_path / "earlier"
    (out / result).parent.mkdir(parents=True, exist_ok=True)
    (out / result).write_text("an earlier run's\n")
    if module.endswith("forecast_study"):  # it reads its inputs before it checks --out
        monkeypatch.setattr(importlib.import_module(module), "load_forecasts", lambda path: None)
        monkeypatch.setattr(importlib.import_module(module), "common_dates", lambda f, p, days: list(days))
    assert "already holds a run's results" in refused(capsys, run_cli(main, [*argv, "--out", str(out)]), "out")
    assert (out / result).read_text() == "an earlier run's\n"


def test_result_folder_numbers_runs_and_replace_allows_an_earlier_run(tmp_path):
    from experiments.runs import result_file, result_folder

    assert result_folder(None, tmp_path / "runs", "gpus", ["gpus.csv"]) == tmp_path / "runs" / "gpus_1"
    for name in ("gpus_1", "gpus_12", "gpus_x", "other_40"):
        (tmp_path / "runs" / name).mkdir(parents=True)
    assert result_folder(None, tmp_path / "runs", "gpus", ["gpus.csv"]) == tmp_path / "runs" / "gpus_13"
    (tmp_path / "runs" / "gpus_1" / "gpus.csv").write_text("old")
    with pytest.raises(ValueError, match="already holds"):
        result_folder(tmp_path / "runs" / "gpus_1", tmp_path, "gpus", ["gpus.csv"])
    assert result_folder(tmp_path / "runs" / "gpus_1", tmp_path, "gpus", ["gpus.csv"], replace=True).is_dir()
    assert result_folder(tmp_path / "runs" / "gpus_1", tmp_path, "gpus", ["days.csv"]).is_dir()  # another study's
    (tmp_path / "t.json").write_text("{}")
    with pytest.raises(ValueError, match="already holds"):
        result_file(tmp_path / "t.json", "json")
    assert result_file(tmp_path / "new.json", "json") and result_file(os.devnull, "json")
    assert not (tmp_path / "new.json").exists()


# ------------------------------------------------------------------------------------------ a model's own instances

TINY = ["--n-envs", "2", "--n-steps", "32", "--batch-size", "32", "--n-epochs", "1", "--net-arch", "16", "--seed", "1"]


@pytest.fixture(scope="module")
def model_k12(tmp_path_factory) -> Path:
    import train

    out = tmp_path_factory.mktemp("model") / "run"
    assert train.main([*TINY, "--timesteps", "64", "--segments", "12", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("flags,differs", [
    (["--segments", "24"], "jobs[0].segments 12 -> 24"),
    (["--gpus", "1536"], "n_gpus 2048 -> 1536"),
    (["--case", "{dir}/case.toml"], "pue 1.2 -> 1.3"),
])
def test_evaluate_refuses_a_model_trained_on_other_instances(flags, differs, model_k12, tmp_path, capsys):
    import evaluate

    case_file(tmp_path, "pue = 1.2", "pue = 1.3")
    flags = [f.replace("{dir}", str(tmp_path)) for f in flags]
    code = run_cli(evaluate.main, ["--policies", "ppo", "--model", str(model_k12), "--days", "reference", "--no-plots",
                                   "--out", str(tmp_path / "eval"), *flags])
    line = refused(capsys, code, "model")
    assert differs in line and "trained -> given" in line
    assert not (tmp_path / "eval").exists()


def test_evaluate_runs_a_model_on_its_own_instances(model_k12, tmp_path):
    import evaluate

    assert run_cli(evaluate.main, ["--policies", "ppo", "--model", str(model_k12), "--days", "reference",
                                   "--no-plots", "--segments", "12", "--out", str(tmp_path / "eval")]) == 0


# ------------------------------------------------------------------------------------------ held-out days


@pytest.fixture()
def six_days(tmp_path) -> Path:
    """A profile source of 6 complete training days: it holds no held-out week (agents/days.py)."""
    from agents.days import split_days

    lines = CSV.splitlines(keepends=True)
    train = set(split_days(sorted({line.split(",")[1][:10] for line in lines[1:]}))[0])
    rows = [line for line in lines[1:] if line.split(",")[1][:10] in train]
    days = sorted({row.split(",")[1][:10] for row in rows})[:6]
    path = tmp_path / "six_days.csv"
    path.write_text(lines[0] + "".join(row for row in rows if row.split(",")[1][:10] in days))
    return path


def test_evaluate_refuses_a_source_too_short_to_hold_a_day_out(six_days, tmp_path, capsys):
    import evaluate

    out = tmp_path / "eval"
    code = run_cli(evaluate.main, ["--policies", "fixed", "--profiles", str(six_days), "--no-plots", "--out", str(out)])
    assert "holds no held-out instance" in refused(capsys, code, "days")
    assert not out.exists()
    # explicit days are evaluated, with one line saying they are training days
    assert run_cli(evaluate.main, ["--policies", "fixed", "--profiles", str(six_days), "--days", "all", "--no-plots",
                                   "--out", str(out)]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == ["note: 6 of the 6 days are training days of the split, not held out (2023-01-31, 2023-02-02, "
                     "2023-02-11, ...)"]


def test_the_studies_of_held_out_days_refuse_a_source_too_short(six_days):
    from experiments import fleet_study

    with pytest.raises(ValueError, match="holds no held-out instance"):
        fleet_study.run(six_days, 1, 1.0)


# ------------------------------------------------------------------------------------------ storage URLs


@pytest.mark.parametrize("url,says", [
    ("notaurl", "not a database URL"), ("://", "not a database URL"), ("journal:x", "not a database URL"),
    ("http://[::1", "not a database URL"), ("sqlite://", "in-memory"), ("sqlite:///:memory:", "in-memory"),
    ("sqlite:////proc/nope/study.db", "unable to open database file"), ("redis://localhost", "storage"),
])
def test_a_malformed_storage_url_ends_with_one_line(url, says, tmp_path, monkeypatch, capsys):
    from agents import tune

    monkeypatch.chdir(tmp_path)
    code = run_cli(tune.main, ["--storage", url, "--trials", "1", "--steps", "8"])
    assert says in refused(capsys, code, "storage")
    assert not any(tmp_path.iterdir())  # no runs/tune-2048 left behind


# ------------------------------------------------------------------------------------------ duplicate jobs


def test_two_jobs_of_one_name_are_refused_in_a_case_and_an_instance(tmp_path, capsys):
    from aidc_env.case import build_instance
    from oracle import __main__ as oracle_cli

    case = case_file(tmp_path, 'name = "LLM-B"', 'name = "LLM-A"')
    assert "two jobs named 'LLM-A'" in refused(capsys, run_cli(case_cli.main, ["--case", str(case)]), "jobs")
    inst = build_instance("2048", segments=4).to_dict()
    inst["jobs"][1]["name"] = inst["jobs"][0]["name"]
    path = tmp_path / "instance.json"
    path.write_text(json.dumps(inst))
    line = refused(capsys, run_cli(oracle_cli.main, ["--instance", str(path), "--json"]), "jobs")
    assert f"two jobs named {inst['jobs'][0]['name']!r}" in line


# ------------------------------------------------------------------------------------------ huge numbers

HUGE = 10**400
"""An integer no machine type holds, beyond even a float."""


def _mains():
    import evaluate
    import train
    from aidc_env import simulator as simulate_cli
    from aidc_env.modes import cli as modes_cli
    from oracle import __main__ as oracle_cli

    return {"case": case_cli.main, "oracle": oracle_cli.main, "simulate": simulate_cli.main, "train": train.main,
            "evaluate": evaluate.main, "modes": modes_cli.main}


@pytest.fixture(scope="module")
def instance_files(tmp_path_factory) -> Path:
    from aidc_env.baselines import fixed_schedule
    from aidc_env.case import build_instance

    folder = tmp_path_factory.mktemp("huge")
    inst = build_instance("2048", segments=4)
    data = inst.to_dict()
    (folder / "instance.json").write_text(inst.to_json())
    for name, key, value in (("gpus", "gpus", 10**23), ("gpus_huge", "gpus", HUGE)):
        bad = dict(data)
        bad[key] = value
        (folder / f"instance_{name}.json").write_text(json.dumps(bad))
    schedule = [list(row) for row in fixed_schedule(inst)]
    for name, value in (("2e70", 2**70), ("minus", -2**70), ("huge", HUGE)):
        schedule[0][0] = value
        (folder / f"schedule_{name}.json").write_text(json.dumps(schedule))
    (folder / "config.json").write_text(json.dumps({"config": {"n_steps": 10**23}}))
    (folder / "config_net.json").write_text(json.dumps({"config": {"net_arch": [2**64, 64]}}))
    return folder


@pytest.mark.parametrize("command,argv,field", [
    ("case", ["--case", "{case:gpus = 2048:gpus = 100000000000000000000000}"], "gpus"),
    ("case", ["--case", f"{{case:gpus = 2048:gpus = {HUGE}}}"], "gpus"),
    ("case", ["--case", f"{{case:segments = 12:segments = {HUGE}}}"], "jobs[0].segments"),
    ("case", ["--case", f"{{case:baseline_gpus = 512:baseline_gpus = 512\nmax_gpus = {2**64}}}"], "jobs[0].max_gpus"),
    ("oracle", ["--instance", "{dir}/instance_gpus.json", "--json"], "instance"),
    ("oracle", ["--instance", "{dir}/instance_gpus_huge.json", "--json"], "instance"),
    ("simulate", ["--instance", "{dir}/instance.json", "--schedule", "{dir}/schedule_2e70.json"], "schedule"),
    ("simulate", ["--instance", "{dir}/instance.json", "--schedule", "{dir}/schedule_minus.json"], "schedule"),
    ("simulate", ["--instance", "{dir}/instance.json", "--schedule", "{dir}/schedule_huge.json"], "schedule"),
    ("train", ["--config", "{dir}/config.json", "--out", "{tmp}/run"], "config"),
    ("train", ["--config", "{dir}/config_net.json", "--out", "{tmp}/run"], "config"),
    ("oracle", ["--gpus", str(HUGE), "--json"], "gpus"),
    ("oracle", ["--threads", str(-HUGE), "--json"], "threads"),
    ("train", ["--timesteps", str(HUGE), "--out", "{tmp}/run"], "timesteps"),
    ("train", ["--seed", str(2**70), "--out", "{tmp}/run"], "seed"),
    ("evaluate", ["--policies", "fixed", "--max-days", str(HUGE), "--out", "{tmp}/eval"], "max-days"),
    ("modes", ["--model", "llama-7b", "--gpus", str(HUGE)], "gpus"),
    ("modes", ["--model", "llama-7b", "--gpus", "1e30"], "--gpus"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None)
def test_integers_beyond_any_machine_type_end_with_one_line(command, argv, field, instance_files, tmp_path, capsys):
    def resolve(arg: str) -> str:
        if arg.startswith("{case:"):
            _, old, new = arg[1:-1].split(":")
            return str(case_file(tmp_path, old, new.replace("\\n", "\n")))
        return arg.replace("{dir}", str(instance_files)).replace("{tmp}", str(tmp_path))

    line = refused(capsys, run_cli(_mains()[command], [resolve(a) for a in argv]), field)
    assert len(line) < 400
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["case.toml"])


# ------------------------------------------------------------------------------------------ pathological JSON

PATHOLOGICAL_JSON = {
    "deep_arrays": b"[" * 100_000 + b"]" * 100_000,
    "deep_objects": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "huge_float": b'{"gpus": 1e400}',
    "huge_negative": b"[-1e400]",
    "nan": b'{"pue": NaN}',
    "infinity": b"[Infinity, -Infinity]",
    "duplicate_keys": b'{"gpus": 2048, "gpus": 1}',
    "nested_duplicate": b'[{"jobs": [{"name": "A", "name": "B"}]}]',
    "not_utf8": b'{"case": "caf\xe9"}',
    "empty": b"",
    "blank": b" \n\t ",
    "long_integer": b"[" + b"9" * 5000 + b"]",
    "bom": b"\xef\xbb\xbf{}",
}


@pytest.mark.parametrize("name", list(PATHOLOGICAL_JSON))
def test_pathological_json_ends_with_one_line_in_every_reader(name, instance_files, tmp_path, capsys):
    from aidc_env.io import loads_json, read_json_file

    path = tmp_path / f"{name}.json"
    path.write_bytes(PATHOLOGICAL_JSON[name])
    with pytest.raises(ValueError) as caught:
        read_json_file(path, "instance")
    assert str(caught.value).startswith("instance: ") and "\n" not in str(caught.value)
    if name != "not_utf8":
        with pytest.raises(ValueError):
            loads_json(PATHOLOGICAL_JSON[name].decode("utf-8"), "x")
    mains = _mains()
    inst = str(instance_files / "instance.json")
    for command, argv, field in (("oracle", ["--instance", str(path), "--json"], "instance"),
                                 ("simulate", ["--instance", inst, "--schedule", str(path)], "schedule"),
                                 ("train", ["--config", str(path), "--out", str(tmp_path / "run")], "config")):
        refused(capsys, run_cli(mains[command], argv), field)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_a_case_nested_too_deeply_ends_with_one_line(tmp_path, capsys):
    path = case_file(tmp_path, 'day = "2023-06-17"', 'day = "2023-06-17"\nx = ' + "[" * 50_000 + "]" * 50_000)
    assert "nested too deeply" in refused(capsys, run_cli(case_cli.main, ["--case", str(path)]), "case")


# ------------------------------------------------------------------------------------------ Ctrl-C

SIGINT_EXIT_S = 2.0
"""A run must have ended this long after the SIGINT."""
START_DEADLINE_S = 180.0
"""How long a run may take to reach the moment of the signal (a loaded machine starts Python slowly)."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def default_sigint() -> None:
    """In the child before it runs: SIGINT's default disposition, as a terminal's Ctrl-C meets it. A shell that
    starts the test run in the background ignores SIGINT, the child would inherit that, and Python then installs no
    KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_after_cpu(argv: list[str], cpu_s: float, cwd: Path) -> tuple[int, float, str, str]:
    """Start ``argv``, send SIGINT once it has spent ``cpu_s`` CPU seconds (past its imports: the same on a loaded
    machine), and wait at most SIGINT_EXIT_S for it; (exit code, seconds after the signal, stdout, stderr)."""
    proc = subprocess.Popen([sys.executable, *argv], cwd=cwd, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while proc.poll() is None and cpu_seconds(proc.pid) < cpu_s:
            assert time.monotonic() < deadline, "the run did not get going"
            time.sleep(0.02)
        assert proc.poll() is None, f"the run ended before the signal: {proc.communicate()}"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=SIGINT_EXIT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {SIGINT_EXIT_S} s after SIGINT")
        elapsed = time.monotonic() - sent
        out, err = proc.communicate()
        return proc.returncode, elapsed, out, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_ctrl_c_during_a_highs_solve_exits_130_at_once(tmp_path):
    # The textbook MILP of K = 96 is not proved within minutes: after ~2 CPU s of imports and build, HiGHS solves.
    code, elapsed, out, err = interrupt_after_cpu(
        ["-m", "oracle", "--case", "2048", "--segments", "96", "--method", "textbook", "--time-limit", "60",
         "--json"], 4.5, tmp_path)
    assert code == EXIT_INTERRUPTED, (code, err)
    assert elapsed < SIGINT_EXIT_S
    assert err.strip().splitlines() == ["interrupted (Ctrl-C)"], err
    assert "Traceback" not in err + out and not any(tmp_path.iterdir())


def test_ctrl_c_during_an_evaluation_by_the_oracle_exits_130_at_once(tmp_path):
    # The oracle's label search of K = 96 takes ~5 CPU s, after ~1.6 CPU s of imports and days.
    out_dir = tmp_path / "eval"
    code, elapsed, _, err = interrupt_after_cpu(
        [str(ROOT / "evaluate.py"), "--policies", "oracle", "--days", "reference", "--segments", "96", "--workers",
         "1", "--no-plots", "--out", str(out_dir)], 3.5, tmp_path)
    assert code == EXIT_INTERRUPTED, (code, err)
    assert elapsed < SIGINT_EXIT_S
    lines = err.strip().splitlines()  # the progress bar, then one line
    assert lines[-1] == "interrupted before any policy-day finished" and "Traceback" not in err, err
    assert not out_dir.exists() or not any(out_dir.iterdir())
