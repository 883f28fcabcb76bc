"""Make the bundled ``emerald_*`` files from the data of the Phoenix field demonstration of Emerald AI.

    python scripts/make_emerald_data.py --source GIT_DIR_OR_FOLDER [--out aidc_env/data] [--commit HASH]

Source: the public repository ``ai-emerald/emerald-ai-demo-may-2025`` (Apache-2.0), the data of Colangelo et al.,
"Turning AI Data Centers into Grid-Interactive Assets: Results from a Field Demonstration in Phoenix, Arizona"
(arXiv:2507.00909): 256 NVIDIA A100 GPUs in an Oracle cloud data centre, Salt River Project (SRP) peak event of
3 May 2025. ``--source`` is either its git directory (a bare clone is fine; files are read from ``HEAD``) or a checkout
folder. Nothing is downloaded and no code of that repository is used; only its data files are read:

* ``data/dvfs_sweep.csv``: per workload (one row per workload and GPU power cap, 100-400 W) the throughput, the total
  GPU power (W) and the power per GPU (W).
* ``data/SRP_exp_performance.csv``: per job of the SRP experiment its tier (``Flex 1/2/3``) and its performance, and
  the stated weighted performance (last row).
* ``data/Fig2_data.xlsx`` (sheet ``Performance Data``): the same jobs with the tier's minimum throughput share
  (``Flexibility``: 0.9 / 0.75 / 0.5) and the weight the paper's weighted performance uses (``Weight based on
  bucket`` = that share / the sum over the jobs); sheet ``SRP_granular`` (first cell of the power series) for the date.
  Read with a minimal stdlib .xlsx reader (no openpyxl needed).
* ``data/SRP_total_power.csv``: the cluster's measured power (W, sum over the jobs' GPUs), one value per minute,
  14:40-21:19 local time (MST, UTC-7; Arizona keeps no daylight saving time).
* ``data/SRP_0503.csv``: SRP's hourly system demand on 3 May 2025 (``SRP Actual``, GW; hour-ending 1..24).

Written (all small, deterministic, each through a temporary file and ``os.replace``):

* ``emerald_dvfs_curve.csv``: per cap level the throughput and power factors relative to the 400 W (uncapped) run of the
  same workload, median / min / max over the distinct measured workloads.
* ``emerald_dvfs_sweep_by_workload.csv``: the per-workload factors (48 rows).
* ``emerald_phoenix_jobs.csv``: the six jobs of the SRP experiment (tier, GPUs, performance, weight).
* ``emerald_phoenix_power.csv``: the cluster power per 15 minutes with the phase of the event.
* ``emerald_phoenix_srp_load.csv``: SRP's system demand per hour of the event day.
* ``emerald_phoenix.json``: provenance and the scalar results (event window, baseline, target, weighted performance).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

REPOSITORY = "ai-emerald/emerald-ai-demo-may-2025"
LICENCE = "Apache-2.0 (the repository's LICENSE)"
PAPER = ("P. Colangelo, A. K. Coskun, J. Megrue, C. Roberts, S. Sengupta, V. Sivaram, E. Tiao, A. Vijaykar, "
         "C. Williams, D. C. Wilson, Z. MacFarland, D. Dreiling, N. Morey, A. Ratnayake, B. Vairamohan, "
         "'Turning AI Data Centers into Grid-Interactive Assets: Results from a Field Demonstration in Phoenix, "
         "Arizona', arXiv:2507.00909 (2025)")

DVFS = "data/dvfs_sweep.csv"
PERFORMANCE = "data/SRP_exp_performance.csv"
POWER = "data/SRP_total_power.csv"
SRP_LOAD = "data/SRP_0503.csv"
FIG2 = "data/Fig2_data.xlsx"

RATED_GPU_W = 400.0
"""The A100 (SXM4) rated board power; the sweep's highest cap, taken as 'uncapped'."""
TIER_LOSS = {0: 0.0, 1: 0.10, 2: 0.25, 3: 0.50}
"""Tolerated throughput loss of each flex tier (the paper's tagging schema: Flex 0/1/2/3 = 0/10/25/50 %)."""
TASKS = {"pt": "pre-training", "ft": "fine-tuning", "infer": "inference"}

EVENT_DATE = "2025-05-03"
"""The SRP event day. SRP_total_power.csv stamps its minutes 2025-05-04, but the same series in Fig2_data.xlsx
(sheet SRP_granular) is stamped 2025-05-03, as are SRP_0503.csv and the paper; the script checks the xlsx."""
UTC_OFFSET = "-0700"
EVENT_START = "16:30"
EVENT_END = "19:30"
"""The 3-hour event window, local time. Not stated in the repository: read off the measured power, which leaves its
pre-event level at 16:10, settles at the reduced level by about 16:26, holds it until 19:32 and climbs back from 19:33.
The 3-hour window inside that hold, on round half hours, is 16:30-19:30."""
BASELINE_END = "16:10"
"""The baseline is the mean of every minute before the ramp-down (14:40-16:09)."""
TARGET_REDUCTION = 0.25
SLOT_MINUTES = 15
SAME_CURVE_TOL = 1e-3
"""Two workloads whose throughput and power factors agree within this at every cap are one measurement."""


# ----------------------------------------------------------------------------------------------------------- reading
class Source:
    """Reads files of the repository from a git directory (at HEAD) or from a checkout folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if (path / "HEAD").is_file() and (path / "objects").is_dir():
            self.git_dir: Path | None = path
        elif (path / ".git").exists():
            self.git_dir = path / ".git"
        else:
            self.git_dir = None
        self.is_bare = self.git_dir == path

    def read(self, rel: str) -> bytes:
        if self.is_bare:
            return subprocess.run(["git", "--git-dir", str(self.path), "show", f"HEAD:{rel}"], check=True,
                                  capture_output=True).stdout
        return (self.path / rel).read_bytes()

    def commit(self) -> str:
        if self.git_dir is None:
            return "unknown"
        return subprocess.run(["git", "--git-dir", str(self.git_dir), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()

    def csv(self, rel: str) -> pd.DataFrame:
        return pd.read_csv(io.BytesIO(self.read(rel)))


_NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
       "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
       "rel": "http://schemas.openxmlformats.org/package/2006/relationships"}


def xlsx_sheet(data: bytes, sheet: str, max_rows: int | None = None) -> list[list[object]]:
    """The cell values of one sheet (strings and floats; formulas give their cached value), row by row."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        shared: list[str] = []
        if "xl/sharedStrings.xml" in z.namelist():
            for si in ET.fromstring(z.read("xl/sharedStrings.xml")).findall("m:si", _NS):
                shared.append("".join(t.text or "" for t in si.iter(f"{{{_NS['m']}}}t")))
        book = ET.fromstring(z.read("xl/workbook.xml"))
        rid = next(s.get(f"{{{_NS['r']}}}id") for s in book.find("m:sheets", _NS) if s.get("name") == sheet)
        rels = ET.fromstring(z.read("xl/_rels/workbook.xml.rels"))
        target = next(r.get("Target") for r in rels.findall("rel:Relationship", _NS) if r.get("Id") == rid)
        target = target.lstrip("/")
        root = ET.fromstring(z.read(target if target.startswith("xl/") else f"xl/{target}"))
    rows: list[list[object]] = []
    for row in root.iter(f"{{{_NS['m']}}}row"):
        if max_rows is not None and len(rows) >= max_rows:
            break
        cells: dict[int, object] = {}
        for c in row.findall("m:c", _NS):
            col = 0
            for ch in re.match(r"[A-Z]+", c.get("r")).group(0):
                col = col * 26 + ord(ch) - 64
            kind, v = c.get("t"), c.find("m:v", _NS)
            if kind == "s" and v is not None:
                cells[col - 1] = shared[int(v.text)]
            elif kind == "inlineStr":
                cells[col - 1] = "".join(t.text or "" for t in c.iter(f"{{{_NS['m']}}}t"))
            elif v is not None:
                cells[col - 1] = v.text if kind == "str" else float(v.text)
        rows.append([cells.get(i) for i in range(max(cells) + 1)] if cells else [])
    return rows


# ------------------------------------------------------------------------------------------------------- derivation
def dvfs_tables(sweep: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Per-workload factors and the per-cap curve (median / min / max over distinct measurements)."""
    sweep = sweep.rename(columns={"Workload": "workload", "GPU power cap": "cap_w", "throughput": "throughput",
                                  "total GPU power": "total_gpu_w", "power per GPU": "power_per_gpu_w"})
    sweep["cap_w"] = sweep["cap_w"].astype(int)
    rows = []
    gpus: dict[str, int] = {}
    uncapped_kw: dict[str, float] = {}
    for name, g in sweep.groupby("workload", sort=True):
        g = g.sort_values("cap_w")
        ref = g[g["cap_w"] == int(RATED_GPU_W)]
        if len(ref) != 1:
            raise SystemExit(f"{name}: no single {RATED_GPU_W:.0f} W row")
        n_gpu = (g["total_gpu_w"] / g["power_per_gpu_w"]).round().unique()
        if len(n_gpu) != 1:
            raise SystemExit(f"{name}: GPU count not constant over caps: {n_gpu}")
        gpus[name] = int(n_gpu[0])
        uncapped_kw[name] = float(ref["total_gpu_w"].iloc[0]) / 1000.0
        thr = g["throughput"] / float(ref["throughput"].iloc[0])
        if not np.allclose(thr, g["normalized throughput"], atol=1e-9):
            raise SystemExit(f"{name}: 'normalized throughput' is not throughput / throughput at 400 W")
        for (_, r), t in zip(g.iterrows(), thr):
            rows.append({"workload": name, "gpus": gpus[name], "cap_w": int(r["cap_w"]),
                         "throughput_factor": round(float(t), 4),
                         "power_factor": round(float(r["power_per_gpu_w"] / ref["power_per_gpu_w"].iloc[0]), 4),
                         "power_per_gpu_w": round(float(r["power_per_gpu_w"]), 1)})
    by_wl = pd.DataFrame(rows)
    # Workloads whose factor curves coincide are one measurement scaled to several job sizes (the sweep's three
    # infer_llama_8b rows: 16, 32 and 48 GPUs, identical per-GPU power and throughput per GPU); count them once.
    sig = by_wl.pivot(index="workload", columns="cap_w", values=["throughput_factor", "power_factor"])
    dup: dict[str, str] = {}
    for w in sig.index:  # sorted; the first of a group stands for it (infer_llama_8b, the 16-GPU run)
        dup[w] = next((r for r in dict.fromkeys(dup.values())
                       if (sig.loc[w] - sig.loc[r]).abs().max() <= SAME_CURVE_TOL), w)
    distinct = sig.loc[sorted(set(dup.values()))]
    by_wl["measurement"] = by_wl["workload"].map(dup)
    curve = []
    for cap in sorted(by_wl["cap_w"].unique()):
        t = distinct[("throughput_factor", cap)]
        p = distinct[("power_factor", cap)]
        curve.append({"cap_w": int(cap), "cap_fraction": round(cap / RATED_GPU_W, 4),
                      "throughput_factor": round(float(np.median(t)), 4), "throughput_factor_min": float(t.min()),
                      "throughput_factor_max": float(t.max()),
                      "power_factor": round(float(np.median(p)), 4), "power_factor_min": float(p.min()),
                      "power_factor_max": float(p.max()),
                      "n_workloads": len(distinct), "n_sweep_rows": int((by_wl["cap_w"] == cap).sum())})
    return by_wl, pd.DataFrame(curve), {"gpus": gpus, "uncapped_kw": uncapped_kw, "same_measurement_as": dup}


def strip_run(job: str) -> str:
    """``pt_mpt_7b_fast-qryepi9o`` -> ``pt_mpt_7b_fast`` (the run id after the last dash)."""
    return job.rsplit("-", 1)[0] if "-" in job else job


def jobs_table(perf: pd.DataFrame, fig2: list[list[object]], gpus: dict[str, int]) -> tuple[pd.DataFrame, dict]:
    perf = perf.copy()
    perf["Model"] = perf["Model"].astype(str).str.strip()
    stated = perf[perf["Model"] == "Weighted Performance"]
    perf = perf[perf["Model"] != "Weighted Performance"]
    # Fig2_data.xlsx, sheet "Performance Data": header row, then one row per job, then the weighted performance.
    header_i = next(i for i, r in enumerate(fig2) if r and r[0] == "Model")
    head = [str(h).strip() for h in fig2[header_i]]
    xl = {}
    xl_weighted = None
    for r in fig2[header_i + 1:]:
        if not r or r[0] is None:
            continue
        rec = dict(zip(head, r))
        name = str(rec["Model"]).strip()
        if name == "Weighted Performance":
            xl_weighted = float(rec["Performance"])
        else:
            xl[name] = rec
    rows = []
    for _, r in perf.iterrows():
        name = r["Model"]
        tier = int(str(r["Flexibility"]).split()[-1])
        wl = strip_run(name)
        prefix, rest = wl.split("_", 1)
        m = re.match(r"([a-z]+_\d+b)_?(.*)$", rest)  # llama_8b_p3 -> llama_8b + p3
        model, variant = m.group(1), m.group(2)
        size = re.fullmatch(r"(\d+)g", variant)  # infer_llama_8b_48g: the name states the job's GPUs
        if size and int(size.group(1)) != gpus[wl]:
            raise SystemExit(f"{name}: name says {variant}, the sweep {gpus[wl]} GPUs")
        x = xl[name]
        if int(str(x["Flex Bucket"]).split()[-1]) != tier or abs(float(x["Performance"]) - r["Performance"]) > 1e-9:
            raise SystemExit(f"{name}: Fig2_data.xlsx and SRP_exp_performance.csv disagree")
        share = 1.0 - TIER_LOSS[tier]
        if abs(float(x["Flexibility"]) - share) > 1e-9:
            raise SystemExit(f"{name}: xlsx 'Flexibility' {x['Flexibility']} != 1 - tolerated loss {share}")
        rows.append({"job": name, "workload": wl, "task": TASKS[prefix], "model": model, "variant": variant,
                     "gpus": gpus[wl], "flex_tier": tier, "max_throughput_loss": TIER_LOSS[tier],
                     "min_throughput_share": share, "performance": float(r["Performance"]),
                     "weight": round(float(x["Weight based on bucket"]), 9)})
    jobs = pd.DataFrame(rows)
    w_rule = jobs["min_throughput_share"] / jobs["min_throughput_share"].sum()
    if not np.allclose(w_rule, jobs["weight"], atol=1e-8):
        raise SystemExit("xlsx weights are not min_throughput_share / its sum")
    jobs["meets_tier_floor"] = (jobs["performance"] >= jobs["min_throughput_share"]).astype(int)
    w = jobs["min_throughput_share"]
    summary = {
        "weighted_performance_recomputed": float((jobs["performance"] * w).sum() / w.sum()),
        "weighted_performance_stated_in_csv": float(stated["Performance"].iloc[0]),
        "weighted_performance_stated_in_xlsx": xl_weighted,
        "performance_equal_weights": float(jobs["performance"].mean()),
        "performance_gpu_weights": float((jobs["performance"] * jobs["gpus"]).sum() / jobs["gpus"].sum()),
        "total_gpus": int(jobs["gpus"].sum()),
    }
    return jobs, summary


def power_tables(power: pd.DataFrame, xlsx_first_stamp: str) -> tuple[pd.DataFrame, dict]:
    stamps = power["timestamp"].astype(str)
    if not xlsx_first_stamp.startswith(EVENT_DATE):
        raise SystemExit(f"Fig2_data.xlsx dates the series {xlsx_first_stamp!r}, expected {EVENT_DATE}")
    if not stamps.str.endswith("-07:00").all():
        raise SystemExit("expected every timestamp at UTC-07:00")
    clock = pd.to_datetime(stamps.str.slice(11, 16), format="%H:%M")
    if not (clock.diff().dropna() == pd.Timedelta(minutes=1)).all():
        raise SystemExit("expected one row per minute without gaps")
    kw = power["total"].astype(float).to_numpy() / 1000.0
    hhmm = clock.dt.strftime("%H:%M").to_numpy()
    base = kw[hhmm < BASELINE_END]
    baseline = float(base.mean())
    ev = (hhmm >= EVENT_START) & (hhmm < EVENT_END)
    # Transitions found in the data (a check on the constants above).
    low = kw < 0.85 * baseline
    first_low = hhmm[np.argmax(low)]
    last_low = hhmm[len(low) - 1 - np.argmax(low[::-1])]
    if not (BASELINE_END <= first_low <= EVENT_START and EVENT_END <= last_low):
        raise SystemExit(f"reduced power from {first_low} to {last_low} does not bracket the event window")
    minute = pd.DataFrame({"clock": clock, "kw": kw})
    minute["slot"] = minute["clock"].dt.floor(f"{SLOT_MINUTES}min")
    slots = minute.groupby("slot").agg(power_kw=("kw", "mean"), min_kw=("kw", "min"), max_kw=("kw", "max"),
                                       n_minutes=("kw", "size")).reset_index()
    slots = slots[slots["n_minutes"] == SLOT_MINUTES].reset_index(drop=True)  # whole slots only
    start = slots["slot"].dt.strftime("%H:%M")
    end = (slots["slot"] + pd.Timedelta(minutes=SLOT_MINUTES)).dt.strftime("%H:%M")
    phase = np.where(end <= BASELINE_END, "baseline",
                     np.where(end <= EVENT_START, "ramp_down",
                              np.where(end <= EVENT_END, "event",
                                       np.where(start < "19:45", "ramp_up", "after"))))
    # A slot straddling BASELINE_END (16:00-16:15) holds 10 baseline minutes and 5 ramp minutes: call it ramp_down.
    phase = np.where((start < BASELINE_END) & (end > BASELINE_END), "ramp_down", phase)
    out = pd.DataFrame({"local_start": f"{EVENT_DATE} " + start + UTC_OFFSET,
                        "local_end": f"{EVENT_DATE} " + end + UTC_OFFSET,
                        "power_kw": slots["power_kw"].round(2), "min_kw": slots["min_kw"].round(2),
                        "max_kw": slots["max_kw"].round(2), "phase": phase,
                        "in_event": ((start >= EVENT_START) & (end <= EVENT_END)).astype(int),
                        "share_of_baseline": (slots["power_kw"] / baseline).round(4)})
    event_mean = float(kw[ev].mean())
    summary = {
        "event_date": EVENT_DATE,
        "timezone": "MST (UTC-7, Arizona; no daylight saving time)",
        "event_local_start": EVENT_START, "event_local_end": EVENT_END,
        "event_window_basis": "inferred from the measured power (not stated in the repository)",
        "data_local_first_minute": hhmm[0], "data_local_last_minute": hhmm[-1],
        "date_in_SRP_total_power_csv": stamps.iloc[0][:10],
        "date_in_Fig2_data_xlsx": xlsx_first_stamp[:10],
        "first_minute_below_85pct_of_baseline": first_low, "last_minute_below_85pct_of_baseline": last_low,
        "baseline_window": f"{hhmm[0]}-{BASELINE_END} (every minute before the ramp-down)",
        "baseline_kw": round(baseline, 3),
        "baseline_minute_min_kw": round(float(base.min()), 3), "baseline_minute_max_kw": round(float(base.max()), 3),
        "target_reduction": TARGET_REDUCTION,
        "target_kw": round((1 - TARGET_REDUCTION) * baseline, 3),
        "event_mean_kw": round(event_mean, 3),
        "event_max_minute_kw": round(float(kw[ev].max()), 3),
        "event_min_minute_kw": round(float(kw[ev].min()), 3),
        "event_mean_reduction": round(1 - event_mean / baseline, 4),
        "event_minutes_above_target": int((kw[ev] > (1 - TARGET_REDUCTION) * baseline).sum()),
        "event_minutes": int(ev.sum()),
        "after_mean_kw_from_19_45": round(float(kw[hhmm >= "19:45"].mean()), 3),
    }
    return out, summary


def srp_load_table(load: pd.DataFrame) -> pd.DataFrame:
    load = load.copy()
    he = load["hour"].astype(int)
    start = [f"{d} {h - 1:02d}:00{UTC_OFFSET}" for d, h in zip(load["date"], he)]
    return pd.DataFrame({"local_start": start, "hour_ending": he, "srp_demand_gw": load["SRP Actual"].astype(float)})


# ------------------------------------------------------------------------------------------------------------ output
def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_csv(path: Path, df: pd.DataFrame) -> None:
    write_atomic(path, df.to_csv(index=False, lineterminator="\n", float_format="%.10g"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, required=True,
                    help=f"git directory (bare is fine) or checkout of {REPOSITORY}")
    ap.add_argument("--out", type=Path, default=Path("aidc_env/data"))
    ap.add_argument("--commit", help="the source's commit, recorded when --source is a folder without git metadata")
    args = ap.parse_args(argv)
    src = Source(args.source)
    commit = src.commit()
    if commit == "unknown" and args.commit:
        commit = args.commit

    by_wl, curve, info = dvfs_tables(src.csv(DVFS))
    fig2 = src.read(FIG2)
    jobs, perf_summary = jobs_table(src.csv(PERFORMANCE), xlsx_sheet(fig2, "Performance Data"), info["gpus"])
    granular = xlsx_sheet(fig2, "SRP_granular", max_rows=4)
    first_stamp = next(str(r[0]) for r in granular if r and str(r[0]).startswith("20"))
    power, power_summary = power_tables(src.csv(POWER), first_stamp)
    load = srp_load_table(src.csv(SRP_LOAD))

    out = args.out
    files = {"emerald_dvfs_curve.csv": curve, "emerald_dvfs_sweep_by_workload.csv": by_wl,
             "emerald_phoenix_jobs.csv": jobs, "emerald_phoenix_power.csv": power,
             "emerald_phoenix_srp_load.csv": load}
    for name, df in files.items():
        write_csv(out / name, df)
    meta = {
        "description": "Phoenix field demonstration (SRP event of 3 May 2025) bundled with aidc_env; see README.md",
        "generator": "scripts/make_emerald_data.py",
        "source_repository": f"github.com/{REPOSITORY}", "source_commit": commit, "licence": LICENCE,
        "paper": PAPER,
        "source_files": [DVFS, PERFORMANCE, FIG2, POWER, SRP_LOAD],
        "files": sorted(files),
        "gpu_rated_w": RATED_GPU_W,
        "dvfs_same_measurement_as": {k: v for k, v in info["same_measurement_as"].items() if k != v},
        "tier_max_throughput_loss": {f"Flex {k}": v for k, v in TIER_LOSS.items()},
        "weights": "min_throughput_share / sum over the jobs (Fig2_data.xlsx 'Weight based on bucket')",
        **{k: (round(v, 9) if isinstance(v, float) else v) for k, v in perf_summary.items()},
        "jobs_uncapped_gpu_power_kw_from_sweep": round(sum(info["uncapped_kw"][w] for w in jobs["workload"]), 3),
        **power_summary,
    }
    write_atomic(out / "emerald_phoenix.json", json.dumps(meta, indent=2) + "\n")

    pd.set_option("display.width", 200)
    print(f"source commit {commit}")
    print(curve.to_string(index=False))
    print(jobs.to_string(index=False))
    print(json.dumps(meta, indent=2))
    print(power.to_string(index=False))
    for name in [*files, "emerald_phoenix.json"]:
        print(f"{name}: {(out / name).stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
