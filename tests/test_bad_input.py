"""The bad-input corpus: every input a user can give, refused before the work with one line and exit code 2.

Each entry is (command, argv, the field the message must name). The cheap ones run in-process through each
CLI's ``main`` via :func:`aidc_env.errors.run_cli`; a handful run as real subprocesses (``SUBPROCESS``). Each
must end with exit code 2, exactly one non-empty line on stderr naming the field, no traceback, and must
leave nothing behind: the working folder (where the default outputs go) and the output paths stay as they were.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

import evaluate
import train
from aidc_env import case as case_cli
from aidc_env import forecasts as forecasts_cli
from aidc_env import profiles as profiles_cli
from aidc_env import simulator as simulate_cli
from aidc_env.case import build_instance
from aidc_env.errors import EXIT_BAD_INPUT, run_cli
from aidc_env.modes import cli as modes_cli
from experiments import studies as studies_cli
from oracle import __main__ as oracle_cli

ROOT = Path(__file__).resolve().parents[1]
MAINS = {
    "modes": modes_cli.main, "case": case_cli.main, "profiles": profiles_cli.main, "oracle": oracle_cli.main,
    "simulate": simulate_cli.main, "train": train.main, "evaluate": evaluate.main, "studies": studies_cli.main,
    "forecasts": forecasts_cli.main,
}
COMMANDS = {
    "modes": ["-m", "aidc_env.modes"], "case": ["-m", "aidc_env.case"], "profiles": ["-m", "aidc_env.profiles"],
    "oracle": ["-m", "oracle"], "simulate": ["-m", "aidc_env.simulate"], "train": [str(ROOT / "train.py")],
    "evaluate": [str(ROOT / "evaluate.py")], "studies": ["-m", "experiments.studies"],
    "forecasts": ["-m", "aidc_env.forecasts"],
}

# --------------------------------------------------------------------------------------------- fixtures

BASE_CASE: dict[str, Any] = {
    "name": "bad", "gpus": 2048, "slots": 96, "day": "2023-06-17",
    "facility": {"pue": 1.2, "idle_kw_per_gpu": 0.1, "rated_kw_per_gpu": 0.5},
    "energy": {"renewable_ratio": 1.0, "ppa_usd_per_mwh": 30.0, "curtailment_penalty_usd_per_mwh": 0.0},
    "jobs": [{"name": "LLM-A", "model": "llama-13b", "segments": 12, "restart_minutes": 10, "baseline_gpus": 512},
             {"name": "LLM-B", "model": "llama-33b", "segments": 12, "restart_minutes": 10, "baseline_gpus": 768}],
}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def to_toml(data: dict[str, Any]) -> str:
    """A minimal TOML writer for case tables (scalars, tables, arrays of tables)."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, (dict, list)) or (
        isinstance(v, list) and not any(isinstance(x, dict) for x in v))]
    for key, value in data.items():
        if isinstance(value, dict):
            lines.append(f"[{key}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in value.items()]
        elif isinstance(value, list) and any(isinstance(x, dict) for x in value):
            for item in value:
                lines.append(f"[[{key}]]")
                lines += [f"{k} = {_toml_value(v)}" for k, v in item.items()]
    return "\n".join(lines) + "\n"


def case_with(path: str, value: Any) -> dict[str, Any]:
    """BASE_CASE with one field set (``facility.pue``, ``jobs.0.segments``); ``value=DELETE`` removes it."""
    data = json.loads(json.dumps(BASE_CASE))
    *parents, last = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    if value is DELETE:
        del node[int(last) if last.isdigit() else last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return data


DELETE = object()

# (file name, case field path, bad value, field named in the message)
BAD_CASES = [
    ("gpus_zero", "gpus", 0, "gpus"), ("gpus_huge", "gpus", 10**9, "gpus"), ("gpus_float", "gpus", 12.5, "gpus"),
    ("gpus_string", "gpus", "many", "gpus"), ("gpus_missing", "gpus", DELETE, "gpus"),
    ("slots_zero", "slots", 0, "slots"), ("slots_odd", "slots", 7, "slots"), ("slots_huge", "slots", 2880, "slots"),
    ("day_bad", "day", "2023-02-30", "day"), ("day_missing", "day", DELETE, "day"),
    ("mode_pool_zero", "mode_pool_gpus", 0, "mode_pool_gpus"),
    ("unknown_top", "colour", "red", "colour"),
    ("pue_low", "facility.pue", 0.9, "pue"), ("pue_huge", "facility.pue", 1e308, "pue"),
    ("pue_nan", "facility.pue", float("nan"), "pue"), ("pue_bool", "facility.pue", True, "pue"),
    ("idle_negative", "facility.idle_kw_per_gpu", -0.1, "idle_kw_per_gpu"),
    ("rated_huge", "facility.rated_kw_per_gpu", 1e6, "rated_kw_per_gpu"),
    ("facility_unknown", "facility.fans", 3, "facility.fans"),
    ("ratio_huge", "energy.renewable_ratio", 1e308, "renewable_ratio"),
    ("ratio_inf", "energy.renewable_ratio", float("inf"), "renewable_ratio"),
    ("ratio_negative", "energy.renewable_ratio", -1.0, "renewable_ratio"),
    ("ppa_huge", "energy.ppa_usd_per_mwh", 1e300, "ppa_usd_per_mwh"),
    ("penalty_negative", "energy.curtailment_penalty_usd_per_mwh", -5.0, "curtailment_penalty_usd_per_mwh"),
    ("capacity_zero", "energy.renewable_capacity_mw", 0.0, "renewable_capacity_mw"),
    ("capacity_huge", "energy.renewable_capacity_mw", 1e300, "renewable_capacity_mw"),
    ("energy_unknown", "energy.wind_share", 0.5, "energy.wind_share"),
    ("no_jobs", "jobs", [], "jobs"),
    ("job_name_empty", "jobs.0.name", "", "jobs[0].name"),
    ("job_model_unknown", "jobs.0.model", "gpt-9", "model"),
    ("job_segments_zero", "jobs.0.segments", 0, "jobs[0].segments"),
    ("job_segments_odd", "jobs.0.segments", 7, "jobs[0].segments"),
    ("job_restart_negative", "jobs.0.restart_minutes", -1, "jobs[0].restart_minutes"),
    ("job_restart_long", "jobs.0.restart_minutes", 500, "jobs[0].restart_minutes"),
    ("job_restart_string", "jobs.0.restart_minutes", "ten", "jobs[0].restart_minutes"),
    ("job_baseline_gpus", "jobs.0.baseline_gpus", 7, "jobs[0].baseline_gpus"),
    ("job_baseline_mode", "jobs.0.baseline_mode", "tp3-pp3-dp3", "jobs[0].baseline_mode"),
    ("job_tranche_huge", "jobs.0.tranche_tokens", 1e300, "jobs[0].tranche_tokens"),
    ("job_tranche_negative", "jobs.0.tranche_tokens", -1.0, "jobs[0].tranche_tokens"),
    ("job_unknown_key", "jobs.0.priority", 1, "jobs[0].priority"),
    ("job_duplicate", "jobs.1.name", "LLM-A", "jobs"),
    ("modes_unknown", "modes.warp_speed", 9, "modes.warp_speed"),
    ("modes_efficiency", "modes.compute_efficiency", 1.5, "modes.compute_efficiency"),
    ("modes_recompute", "modes.recompute", "sometimes", "modes.recompute"),
    ("job_flex_tier", "jobs.0.flex_tier", 5, "jobs[0].flex_tier"),
    ("training_value_negative", "training_value_usd_per_gpu_hour", -1.0, "training_value_usd_per_gpu_hour"),
    ("power_caps_curve", "power_caps.curve", "h100-magic", "power_caps.curve"),
    ("power_caps_share", "power_caps.min_cap_share", 0.0, "power_caps.min_cap_share"),
    ("power_caps_unknown", "power_caps.level", 3, "power_caps.level"),
    ("call_program", "grid_calls", [{"program": "nope", "start_hour": 16.0, "hours": 2.0, "reduction_share": 0.2}],
     "grid_calls.program"),
    ("call_hour", "grid_calls", [{"program": "bip", "start_hour": 25.0, "hours": 2.0}], "grid_calls[0].start_hour"),
    ("call_reduction", "grid_calls", [{"program": "elrp", "start_hour": 16.0, "hours": 2.0}],
     "grid_calls.reduction_share"),
    ("call_overlap", "grid_calls", [{"program": "bip", "start_hour": 16.0, "hours": 2.0, "reduction_share": 0.2},
                                    {"program": "bip", "start_hour": 17.0, "hours": 2.0, "reduction_share": 0.2}],
     "grid_calls"),
]

# (file name, instance field, bad value, field named in the message)
BAD_INSTANCES = [
    ("instance_gpus_zero.json", "gpus", 0, "gpus"), ("instance_gpus_text.json", "gpus", "2048", "gpus"),
    ("instance_gpus_huge.json", "gpus", 10**9, "gpus"), ("instance_pue_huge.json", "pue", 1e308, "pue"),
    ("instance_pue_null.json", "pue", None, "pue"), ("instance_slot_hours.json", "slot_hours", -1, "slot_hours"),
    ("instance_ratio_huge.json", "renewable_ratio", 1e308, "renewable_ratio"),
    ("instance_ppa_bool.json", "ppa_usd_per_mwh", True, "ppa_usd_per_mwh"),
    ("instance_price_huge.json", "price_usd_per_mwh", [1e308] * 96, "price_usd_per_mwh"),
    ("instance_price_text.json", "price_usd_per_mwh", ["1"] * 96, "price_usd_per_mwh"),
    ("instance_price_empty.json", "price_usd_per_mwh", [], "price_usd_per_mwh"),
    ("instance_shape_high.json", "renewable_shape", [2.0] * 96, "renewable_shape"),
    ("instance_renewable_mw.json", "renewable_mw", [0.0] * 96, "renewable_mw"),
    ("instance_jobs_empty.json", "jobs", [], "jobs"), ("instance_jobs_text.json", "jobs", "LLM-A", "jobs"),
    ("instance_job_segments_zero.json", "jobs.0.segments", 0, "segments"),
    ("instance_job_segments_text.json", "jobs.0.segments", "4", "jobs[0].segments"),
    ("instance_job_restart_negative.json", "jobs.0.restart_hours", -1.0, "restart_hours"),
    ("instance_job_restart_huge.json", "jobs.0.restart_hours", 1e9, "restart_hours"),
    ("instance_job_tranche_huge.json", "jobs.0.tranche_tokens", 1e300, "tranche_tokens"),
    ("instance_job_baseline.json", "jobs.0.baseline_mode", 99, "baseline_mode"),
    ("instance_job_modes_empty.json", "jobs.0.modes", [], "jobs[0]"),
    ("instance_format.json", "format", "aidc-instance/9", "format"),
    ("instance_capacity_negative.json", "renewable_capacity_mw", -5.0, "renewable_capacity_mw"),
    ("instance_share_high.json", "min_daily_share", 2.0, "min_daily_share"),
    ("instance_forecast_huge.json", "forecast", {"price_usd_per_mwh": [1e9] * 96, "renewable_shape": [0.5] * 96},
     "forecast.price_usd_per_mwh"),
]

CSV_HEADER = "timestamp_utc,local_start,price_usd_per_mwh,solar_mw,wind_mw\n"


def csv_day(price: str = "50", solar: str = "100", wind: str = "200") -> str:
    rows = [f"2023-06-17T{h + 7:02d}:00:00Z,2023-06-17 {h:02d}:00-0700,{price if h == 3 else 50},{solar},{wind}"
            for h in range(17)]
    rows += [f"2023-06-18T{h - 17:02d}:00:00Z,2023-06-17 {h:02d}:00-0700,50,{solar},{wind}" for h in range(17, 24)]
    return CSV_HEADER + "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Input files of the corpus (written once; the commands must not add anything beside them)."""
    folder = tmp_path_factory.mktemp("inputs")
    paths: dict[str, str] = {"dir": str(folder)}

    def write(name: str, text: str | bytes) -> None:
        path = folder / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        paths[name] = str(path)

    for name, field, value, _ in BAD_CASES:
        write(f"case_{name}.toml", to_toml(case_with(field, value)))
    write("case_malformed.toml", "gpus = [\n")
    write("case_binary.toml", b"\xff\xfe\x00garbage")
    inst = build_instance("2048", segments=4).to_dict()
    write("instance.json", json.dumps(inst))
    for name, key, value, _ in BAD_INSTANCES:
        bad = json.loads(json.dumps(inst))
        bad.pop("renewable_mw")  # derived (checked when present): leave it out so that the bad field is the one named
        if key == "renewable_mw":
            bad[key] = value
        elif key.startswith("jobs.0."):
            bad["jobs"][0][key[len("jobs.0."):]] = value
        else:
            bad[key] = value
        write(name, json.dumps(bad))
    missing = dict(inst)
    del missing["slot_hours"]
    write("instance_missing.json", json.dumps(missing))
    write("instance_nan.json", json.dumps(inst).replace('"pue": 1.2', '"pue": NaN'))
    write("instance_list.json", "[1, 2, 3]")
    write("instance_broken.json", '{"format": ')
    k = [len(j["modes"]) for j in inst["jobs"]]  # a mode index of k is one too many
    write("schedule_strings.json", json.dumps([["a"] * 4, [0] * 4]))
    write("schedule_null.json", json.dumps({"LLM-A": [None] * 4, "LLM-B": [0] * 4}))
    write("schedule_bool.json", json.dumps([[True] * 4, [0] * 4]))
    write("schedule_float.json", json.dumps([[0.5] * 4, [0] * 4]))
    write("schedule_unknown_job.json", json.dumps({"LLM-A": [0] * 4, "LLM-B": [0] * 4, "LLM-Z": [0] * 4}))
    write("schedule_missing_job.json", json.dumps({"LLM-A": [0] * 4}))
    write("schedule_short.json", json.dumps([[0] * 3, [0] * 4]))
    write("schedule_mode.json", json.dumps([[k[0]] * 4, [0] * 4]))
    write("schedule_below.json", json.dumps([[-2] * 4, [0] * 4]))
    write("schedule_scalar.json", "7")
    write("schedule_nan.json", "[[NaN, 0, 0, 0], [0, 0, 0, 0]]")
    write("csv_price_huge.csv", csv_day(price="1e308"))
    write("csv_solar_huge.csv", csv_day(solar="1e300"))
    write("csv_wind_huge.csv", csv_day(wind="-1e300"))
    write("csv_no_price.csv", csv_day().replace("price_usd_per_mwh", "price"))
    write("csv_bad_time.csv", csv_day().replace("2023-06-17T10:00:00Z", "yesterday"))
    write("csv_bad_local.csv", csv_day().replace("2023-06-17 03:00-0700", "3 am"))
    write("csv_empty.csv", "")
    write("csv_header_only.csv", CSV_HEADER)
    write("csv_no_day.csv", csv_day(price="x"))
    write("model_corrupt.zip", b"PK\x03\x04 not really a zip")
    write("model_text.zip", "hello")
    with zipfile.ZipFile(folder / "model_not_a_model.zip", "w") as archive:
        archive.writestr("data", "{not json")
    paths["model_not_a_model.zip"] = str(folder / "model_not_a_model.zip")
    write("csv_latin1.csv", CSV_HEADER.encode() + "2023-06-17T07:00:00Z,caf\xe9,1,2,3\n".encode("latin-1"))
    write("existing.json", "{}")
    os.mkdir(folder / "model_dir")
    paths["model_dir"] = str(folder / "model_dir")
    return paths


def instance_file(files: dict[str, str], prefix: str) -> str:
    matches = sorted(v for k, v in files.items() if k.startswith(prefix) and k.endswith(".json"))
    assert matches, prefix
    return matches[0]


# --------------------------------------------------------------------------------------------- the corpus


def corpus(f: dict[str, str]) -> list[tuple[str, list[str], str]]:
    """(command, argv, field) for every bad input; ``f`` maps fixture names to paths."""
    inst = f["instance.json"]
    nope = "/proc/nope/x"
    entries: list[tuple[str, list[str], str]] = []
    # aidc_env.modes
    entries += [("modes", a, fld) for a, fld in [
        ([], "arguments"), (["--model", "gpt-9"], "model"), (["--model", "llama-7b", "--gpus", "0"], "gpus"),
        (["--model", "llama-7b", "--gpus", "99999999"], "gpus"), (["--model", "llama-7b", "--gpus", "x"], "--gpus"),
        (["--model", "llama-7b", "--case", "2048"], "arguments"), (["--case", f["dir"]], "case"),
        (["--case", "nosuchcase"], "case"), (["--model", "llama-7b", "--bogus"], "arguments")]]
    # aidc_env.case: every case field (through --case FILE), every override flag, --out
    entries += [("case", ["--case", f[f"case_{name}.toml"]], fld) for name, _, _, fld in BAD_CASES]
    entries += [("case", a, fld) for a, fld in [
        (["--case", f["case_malformed.toml"]], "case"), (["--case", f["case_binary.toml"]], "case"),
        (["--case", f["dir"]], "case"), (["--case", "missing.toml"], "case"), (["--case", "nosuchcase"], "case"),
        (["--day", "2023-13-01"], "day"), (["--day", "1999-01-01"], "day"), (["--gpus", "0"], "gpus"),
        (["--gpus", "1e9"], "--gpus"), (["--segments", "7"], "segments"), (["--segments", "0"], "segments"),
        (["--renewable-ratio", "1e308"], "renewable_ratio"), (["--renewable-ratio", "nan"], "renewable_ratio"),
        (["--renewable-ratio", "inf"], "renewable_ratio"), (["--renewable-ratio", "-0.5"], "renewable_ratio"),
        (["--profiles", f["dir"]], "profiles"), (["--profiles", "missing.csv"], "missing.csv"),
        (["--out", nope], "out"), (["--out", f["dir"]], "out")]]
    # aidc_env.profiles: the CSV columns
    entries += [("profiles", ["--profiles", f[name]], fld) for name, fld in [
        ("csv_price_huge.csv", "price_usd_per_mwh"), ("csv_solar_huge.csv", "solar_mw"),
        ("csv_wind_huge.csv", "wind_mw"), ("csv_no_price.csv", "price_usd_per_mwh"),
        ("csv_bad_time.csv", "timestamp_utc"), ("csv_bad_local.csv", "local_start"), ("csv_empty.csv", "profiles"),
        ("csv_header_only.csv", "profiles"), ("csv_no_day.csv", "profiles"), ("model_corrupt.zip", "profiles"),
        ("csv_latin1.csv", "profiles"), ("missing.csv", "missing.csv")]]
    entries += [("profiles", ["--bogus"], "arguments"), ("profiles", ["--profiles", f["dir"]], "profiles")]
    # aidc_env.forecasts: the day-ahead forecast CSV (the same reader as the profiles)
    entries += [("forecasts", ["--forecasts", f[name]], fld) for name, fld in [
        ("model_corrupt.zip", "forecasts"), ("csv_empty.csv", "forecasts"), ("csv_header_only.csv", "solar_forecast_mw"),
        ("dir", "forecasts"), ("missing.csv", "missing.csv")]]
    entries += [("forecasts", ["--bogus"], "arguments"), ("forecasts", [], "--forecasts")]
    # train.py: day-ahead information needs the forecasts; the information is one of two words
    entries += [("train", a, fld) for a, fld in [
        (["--information", "dayahead"], "forecasts"), (["--information", "clairvoyant"], "--information"),
        (["--information", "dayahead", "--forecasts", "missing.csv"], "missing.csv"),
        (["--price-forecast", "supplied"], "price-forecast"), (["--price-forecast", "psychic"], "--price-forecast"),
        (["--price-issue-hour", "13"], "price-issue-hour"), (["--price-issue-hour", "x"], "--price-issue-hour"),
        (["--information", "dayahead", "--forecasts", "missing.csv", "--price-issue-hour", "9"], "price-issue-hour")]]
    # oracle: flags, the case path, and every instance JSON field
    entries += [("oracle", a, fld) for a, fld in [
        (["--case", f["dir"], "--json"], "case"), (["--renewable-ratio", "1e308", "--json"], "renewable_ratio"),
        (["--gpus", "4000000", "--json"], "gpus"), (["--time-limit", "0"], "time-limit"),
        (["--time-limit", "nan"], "time-limit"), (["--time-limit", "1e300"], "time-limit"),
        (["--mip-gap", "1"], "mip-gap"), (["--mip-gap", "-0.1"], "mip-gap"), (["--threads", "0"], "threads"),
        (["--method", "magic"], "--method"), (["--mps", nope], "mps"), (["--mps", f["dir"]], "mps"),
        (["--instance", f["dir"]], "instance"), (["--instance", "missing.json"], "instance"),
        (["--instance", f["instance_broken.json"]], "instance"), (["--instance", f["instance_nan.json"]], "instance"),
        (["--instance", f["instance_list.json"]], "instance"), (["--instance", f["instance_missing.json"]], "slot_hours"),
        (["--solver", "nosuchsolver", "--segments", "4"], "solver"), (["--day", "2023-06-31"], "day"),
        (["--day", "2022-06-17"], "day"), (["--profiles", "csv_price_huge.csv"], "price_usd_per_mwh"),
        (["--segments", "5"], "segments"), (["--case", "case_ratio_huge.toml"], "renewable_ratio"),
        (["--no-such-flag"], "arguments")]]
    entries += [("oracle", ["--instance", f[name], "--json"], fld) for name, _, _, fld in BAD_INSTANCES]
    # aidc_env.simulate: the schedule JSON
    entries += [("simulate", ["--instance", inst, "--schedule", f[name]], fld) for name, fld in [
        ("schedule_strings.json", "schedule[0]"), ("schedule_null.json", "schedule.LLM-A"),
        ("schedule_bool.json", "schedule[0]"), ("schedule_float.json", "schedule[0]"),
        ("schedule_unknown_job.json", "LLM-Z"), ("schedule_missing_job.json", "LLM-B"),
        ("schedule_short.json", "schedule.LLM-A"), ("schedule_mode.json", "schedule.LLM-A"),
        ("schedule_below.json", "schedule.LLM-A"), ("schedule_scalar.json", "schedule"),
        ("schedule_nan.json", "NaN"), ("instance.json", "schedule")]]
    entries += [("simulate", a, fld) for a, fld in [
        (["--instance", inst, "--schedule", f["dir"]], "schedule"), (["--instance", inst], "--schedule"),
        (["--instance", f["instance_broken.json"], "--schedule", inst], "instance"),
        (["--instance", inst, "--schedule", "missing.json"], "schedule"),
        (["--instance", "instance_pue_huge.json", "--schedule", "schedule_short.json"], "pue"),
        (["--instance", inst, "--schedule", f["schedule_short.json"], "--flows", "--bogus"], "arguments")]]
    # train.py: every flag, and the outputs
    entries += [("train", a, fld) for a, fld in [
        (["--out", f["existing.json"]], "out"), (["--out", nope], "out"), (["--learning-rate", "-1"], "learning-rate"),
        (["--learning-rate", "nan"], "learning-rate"), (["--learning-rate", "2"], "learning-rate"),
        (["--net-arch", "a,b"], "net-arch"), (["--net-arch", ""], "net-arch"), (["--net-arch", "0"], "net-arch"),
        (["--net-arch", ",".join(["8"] * 17)], "net-arch"), (["--batch-size", "0"], "batch-size"),
        (["--n-steps", "0"], "n-steps"), (["--n-epochs", "0"], "n-epochs"), (["--gamma", "1.5"], "gamma"),
        (["--imitation-epochs", "-1"], "imitation-epochs"),
        (["--validation-every", "1"], "validation-every"), (["--validation-every", "-1"], "validation-every"),
        (["--validation-every", "2.5"], "--validation-every"), (["--finetune-lr-factor", "0"], "finetune-lr-factor"),
        (["--finetune-lr-factor", "1.5"], "finetune-lr-factor"), (["--finetune-lr-factor", "nan"], "finetune-lr-factor"),
        (["--gae-lambda", "-0.1"], "gae-lambda"), (["--ent-coef", "-1"], "ent-coef"),
        (["--clip-range", "0"], "clip-range"), (["--reward-scale-usd", "0"], "reward-scale-usd"),
        (["--lookahead", "-1"], "lookahead"), (["--timesteps", "0"], "timesteps"), (["--timesteps", "1e3"], "--timesteps"),
        (["--seed", "-1"], "seed"), (["--seed", str(2**40)], "seed"), (["--n-envs", "0"], "n-envs"),
        (["--n-envs", "100000"], "n-envs"), (["--vec-env", "threads"], "--vec-env"),
        (["--checkpoint-freq", "0"], "checkpoint-freq"), (["--gpus", "0"], "gpus"), (["--segments", "0"], "segments"),
        (["--renewable-ratio", "1e308"], "renewable-ratio"), (["--activation", "gelu"], "--activation"),
        (["--lr-schedule", "cosine"], "--lr-schedule"), (["--case", f["dir"]], "case"),
        (["--profiles", f["dir"], "--out", "dir/run"], "profiles"),
        (["--resume", "--out", "dir/run"], "resume"),
        (["--profiles", "csv_price_huge.csv", "--out", "dir/run"], "price_usd_per_mwh"),
        (["--case", "case_job_segments_odd.toml", "--out", "dir/run"], "jobs[0].segments"),
        (["--segments", "7", "--out", "dir/run"], "segments")]]
    # evaluate.py: every flag, the model and the outputs
    entries += [("evaluate", a, fld) for a, fld in [
        (["--policies", "ppo", "--model", f["model_corrupt.zip"]], "model"),
        (["--policies", "ppo", "--model", f["model_text.zip"]], "model"),
        (["--policies", "ppo", "--model", f["model_dir"]], "model"),
        (["--policies", "ppo", "--model", "missing.zip"], "model"),
        (["--policies", "ppo", "--model", f["model_not_a_model.zip"]], "model"),
        (["--policies", "fixed", "--days", "2022-01-01"], "days"), (["--policies", "ppo"], "model"),
        (["--policies", "fixed", "--out", nope], "out"), (["--policies", "fixed", "--out", f["existing.json"]], "out"),
        (["--policies", "fixed", "--json", nope], "json"), (["--policies", "fixed", "--json", f["dir"]], "json"),
        (["--policies", "magic"], "policies"), (["--policies", ","], "policies"),
        (["--policies", "fixed", "--days", "2023-02-30"], "days"), (["--policies", "fixed", "--max-days", "0"], "max-days"),
        (["--policies", "fixed", "--workers", "0"], "workers"), (["--policies", "fixed", "--workers", "9999"], "workers"),
        (["--policies", "fixed", "--time-limit", "-1"], "time-limit"), (["--policies", "fixed", "--mpc-noise", "-1"], "mpc-noise"),
        (["--policies", "fixed", "--mpc-noise", "inf"], "mpc-noise"), (["--policies", "fixed", "--seed", "-1"], "seed"),
        (["--policies", "fixed", "--gpus", "0"], "gpus"), (["--policies", "fixed", "--segments", "5"], "segments"),
        (["--policies", "fixed", "--renewable-ratio", "1e308"], "renewable_ratio"),
        (["--policies", "fixed", "--case", f["case_pue_huge.toml"]], "pue"),
        (["--policies", "fixed", "--profiles", f["csv_price_huge.csv"]], "price_usd_per_mwh"),
        (["--policies", "fixed", "--bogus"], "arguments")]]
    # experiments.studies (and evaluate --study)
    entries += [("studies", a, fld) for a, fld in [
        (["nostudy"], "study"), (["gpus", "--grid", "a,b"], "grid"), (["gpus", "--grid", "0"], "grid"),
        (["renewable", "--grid", "1e308"], "grid"), (["checkpoints", "--grid", "7"], "grid"),
        (["headline", "--grid", "1"], "grid"), (["gpus", "--workers", "0"], "workers"),
        (["gpus", "--time-limit", "0"], "time-limit"), (["gpus", "--out", nope], "out"),
        (["days", "--days", "2023-02-30"], "day"), (["headline", "--days", "2023-06-17"], "days"),
        (["headline", "--day", "1999-01-01"], "day"), (["headline", "--update-docs", "--results", nope], "results"),
        (["headline", "--case", f["dir"]], "case"), (["renewable", "--grid", "nan"], "grid"),
        (["days", "--days", "2022-01-01"], "day"), (["headline", "--profiles", "csv_wind_huge.csv"], "wind_mw"),
        (["headline", "--update-docs", "--results", "dir/results.md", "--figures", "/proc/nope"], "figures"),
        (["headline", "--update-docs", "--results", f["dir"]], "results")]]
    entries += [("evaluate", ["--study", "gpus", "--grid", "x"], "grid"),
                ("evaluate", ["--study", "nostudy"], "study")]
    return entries


SUBPROCESS = [  # a handful of the corpus as real processes: the module entry points and their exit codes
    ("oracle", ["--case", "dir", "--json"], "case"),
    ("simulate", ["--instance", "instance.json", "--schedule", "dir"], "schedule"),
    ("train", ["--case", "2048", "--out", "/proc/nope/x"], "out"),
    ("evaluate", ["--case", "2048", "--policies", "ppo", "--model", "model_corrupt.zip"], "model"),
    ("modes", ["--model", "llama-7b", "--gpus", "x"], "--gpus"),
]


def snapshot(*folders: Path) -> set[str]:
    return {str(p) for folder in folders for p in folder.rglob("*")}


def assert_refused(code: int, stderr: str, field: str) -> None:
    lines = stderr.splitlines()
    assert code == EXIT_BAD_INPUT, (code, stderr)
    assert len(lines) == 1 and lines[0].strip(), stderr
    assert "Traceback" not in stderr
    assert field in lines[0], (field, lines[0])


def test_corpus_is_large():
    assert len(CORPUS) >= 200, len(CORPUS)


class _Names(dict):
    """Fixture names standing for their paths (the corpus is listed at collection, before files exist)."""

    def __missing__(self, key: str) -> str:
        return key


CORPUS = corpus(_Names())


def resolve(arg: str, files: dict[str, str]) -> str:
    """A fixture name (or ``dir/...``) in an argv → its path."""
    if arg in files:
        return files[arg]
    if arg.startswith("dir/"):
        return files["dir"] + arg[3:]
    return arg


@pytest.mark.parametrize("command,argv,field", CORPUS, ids=[f"{c} {' '.join(a)}" for c, a, _ in CORPUS])
def test_bad_input_refused_in_process(command, argv, field, files, tmp_path, monkeypatch, capsys):
    argv = [resolve(a, files) for a in argv]
    monkeypatch.chdir(tmp_path)  # default outputs (runs/...) would land here
    before = snapshot(tmp_path, Path(files["dir"]))
    code = run_cli(MAINS[command], argv)
    captured = capsys.readouterr()
    assert_refused(code, captured.err, field)
    assert snapshot(tmp_path, Path(files["dir"])) == before, f"{command} {argv} left files behind"


@pytest.mark.parametrize("command,argv,field", SUBPROCESS)
def test_bad_input_refused_as_process(command, argv, field, files, tmp_path):
    argv = [resolve(a, files) for a in argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, *COMMANDS[command], *argv], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=120)
    assert_refused(proc.returncode, proc.stderr, field)
    assert not any(tmp_path.iterdir())
