"""The grid-calls study (docs/grid-calls.md): the Phoenix replay, a held-out year of calls, and the oracle's times.

    python -m experiments.grid_calls_study [--parts phoenix,year,timing] [--seeds N] [--days N] [--model ZIP]
                                           [--out DIR]

- ``phoenix``: the ``phoenix`` case (the field demonstration's 256 GPUs, six jobs and tiers, its 3-hour 25% event) under
  every call policy (hindsight, mpc-notice, call-rule, fixed): per slot of the event the reduction against the
  baseline, delivery, each job's performance and the demonstration's weighted performance, beside the demonstration's
  measured figures (``aidc_env/data/emerald_phoenix*``); and the figure of the cluster's power.
- ``knobs``: the Phoenix event answered by the oracle with each knob alone and together (GPU power caps, 3D-mode
  switching, pauses at checkpoints): the weighted performance and the training lost, or that no schedule delivers.
- ``year``: held-out years of seeded calls (:data:`aidc_env.call_streams.HELD_OUT_SEEDS`, ``--seeds`` of them) on the
  2048 case with power caps, each call a firm 25% reduction of the baseline's import under PG&E's BIP terms ($6/kWh
  over the firm level), on the call days of 2023 in the CAISO year: per policy the calls delivered, the objective
  against no response, the penalties and the tokens made; with ``--model``, also a PPO model trained on calls of
  other years (the env's call stream).
- ``timing``: the oracle on ``--days`` held-out days (the ``weeks`` split) of the 2048 case with caps and one such call
  over 16:00-21:00, at K = 12: seconds (median, p90, max) and the share proven optimal; and the same days and call
  without caps (the exact day oracle, which takes a call alone).

- ``headroom``: flexible interconnection on the 2048 case with caps (``--headroom-case fleet``: the fleet site by the
  decomposition, without caps or tiers): the grid curtails the site in the year's hours of
  highest CAISO demand (0.25, 0.5 and 1% of them, the shares of Norris et al., *Rethinking Load Growth*, Duke 2025),
  each day's curtailed hours one event; per event the oracle holds the site's import as low as it can (a payment of
  :data:`CURTAIL_USD_PER_MWH` on every MWh below the baseline) while meeting the day's targets, without and with Flex 2
  tiers. The firm capacity the site needs is the highest import it holds in any event; the headroom is its peak
  import without flexibility less that.

Writes ``grid_calls_study.json`` (every row), ``grid_calls_study.md`` (the tables) and ``phoenix_power.png`` into
``--out`` (default a new numbered folder runs/grid_calls_study_N), atomically.
"""

from __future__ import annotations

import csv
import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from agents.calls import mpc_notice_schedule, rule_schedule
from agents.days import held_out_starts, split_days, spread
from agents.open_loop import oracle_schedule
from aidc_env import limits
from aidc_env.baselines import fixed_schedule
from aidc_env.call_streams import HELD_OUT_SEEDS, events_by_day, generate_year
from aidc_env.case import build_instance, build_instances, load_case
from aidc_env.errors import CliParser, require, require_number, run_cli
from aidc_env.instance import Instance
from aidc_env.io import atomic_write_text, write_json
from aidc_env.profiles import load_profiles
from aidc_env.schedule import Schedule, validate_schedule
from aidc_env.schema.case import CallSpec, PowerCaps
from aidc_env.simulator import Metrics, simulate
from experiments.runs import result_folder
from oracle import solve
from oracle.rolling import RollingOracle

PARTS = ("phoenix", "knobs", "year", "timing", "headroom")
PROFILES = "caiso-2023"
STUDY_PROGRAM = "bip"
STUDY_REDUCTION_SHARE = 0.25
"""The held-out year's calls: a firm cut of a quarter of the baseline's import (the Phoenix event's depth)."""
TIMING_CALL = CallSpec(program=STUDY_PROGRAM, start_hour=16.0, hours=5.0, reduction_share=STUDY_REDUCTION_SHARE,
                       notice_hours=2.0)
"""The timing part's call: 4-9 pm (ELRP's window), 2 hours' notice."""
DEFAULT_SEEDS, DEFAULT_DAYS, DEFAULT_TIME_LIMIT_S = 5, 20, 120.0
RESULTS = ("grid_calls_study.json", "grid_calls_study.md", "phoenix_power.png")


def _oracle(inst: Instance, time_limit_s: float) -> tuple[Schedule, dict[str, Any]]:
    schedule, result = oracle_schedule(inst, RollingOracle(time_limit_s=time_limit_s))
    return schedule, {"status": result.status, "gap": result.gap,
                      "seconds": result.build_seconds + result.solve_seconds}


POLICIES: dict[str, Callable[[Instance, float], tuple[Schedule, dict[str, Any]]]] = {
    "hindsight": _oracle,
    "mpc-notice": lambda inst, limit: (mpc_notice_schedule(inst, time_limit_s=limit), {}),
    "call-rule": lambda inst, limit: (rule_schedule(inst), {}),
    "fixed": lambda inst, limit: (validate_schedule(inst, fixed_schedule(inst)), {}),
}
"""The call policies (:mod:`agents.calls`); ``fixed`` does not respond."""


def _row(metrics: Metrics) -> dict[str, Any]:
    return {"objective_usd": metrics.objective_usd, "operating_cost_usd": metrics.operating_cost_usd,
            "penalty_usd": metrics.call_penalty_usd, "payment_usd": metrics.call_payment_usd,
            "training_lost_usd": metrics.training_lost_usd, "tranches_met": metrics.tranches_met,
            "tiers_met": metrics.tiers_met, "calls": [dataclasses.asdict(c) for c in metrics.calls],
            "tokens": {job.name: job.tokens for job in metrics.jobs}}


def phoenix(time_limit_s: float, log: Callable[[str], None]) -> dict[str, Any]:
    """The Phoenix replay (see the module docstring)."""
    inst = build_instance("phoenix")
    rows = {}
    for name, policy in POLICIES.items():
        tick = time.perf_counter()
        schedule, info = policy(inst, time_limit_s)
        result = simulate(inst, schedule)
        rows[name] = {**_row(result.metrics), **info, "wall_seconds": time.perf_counter() - tick,
                      "load_kw": (result.flows.load_mw * 1000).tolist()}
        log(f"phoenix {name}: weighted performance {result.metrics.calls[0].weighted_performance:.3f}")
    return {"slot_hours": inst.slot_hours, "call": inst.grid_calls[0].to_dict(), "policies": rows,
            "demonstration": demonstration()}


def demonstration() -> dict[str, Any]:
    """The demonstration's measured jobs and power (the bundled ``emerald_phoenix_*`` files)."""
    data = resources.files("aidc_env").joinpath("data")
    with data.joinpath("emerald_phoenix_jobs.csv").open() as handle:
        jobs = list(csv.DictReader(handle))
    with data.joinpath("emerald_phoenix_power.csv").open() as handle:
        power = list(csv.DictReader(handle))
    weights = np.array([float(j["weight"]) for j in jobs])
    performance = np.array([float(j["performance"]) for j in jobs])
    return {"jobs": jobs, "weighted_performance": float(weights @ performance / weights.sum()),
            "event_power_kw": [float(p["power_kw"]) for p in power if p["in_event"] == "1"],
            "power": power}


KNOBS = {"caps + modes + pauses": ("caps", "modes", "pauses"), "caps + pauses": ("caps", "pauses"),
         "caps + modes": ("caps", "modes"), "caps": ("caps",), "modes + pauses": ("modes", "pauses"),
         "pauses": ("pauses",), "modes": ("modes",)}
"""The knobs' combinations of the ``knobs`` part."""


def with_knobs(inst: Instance, knobs: Sequence[str]) -> Instance:
    """The instance with only ``knobs``: without "caps" no cap curve; without "modes" each job keeps its baseline mode
    only (pausing is the solver's ``allow_pause``)."""
    jobs = inst.jobs if "modes" in knobs else tuple(dataclasses.replace(
        job, modes=(job.modes[job.baseline_mode],), baseline_mode=0, initial_mode=0) for job in inst.jobs)
    return dataclasses.replace(inst, jobs=jobs, cap_curve=inst.cap_curve if "caps" in knobs else None)


def knobs(time_limit_s: float, log: Callable[[str], None]) -> dict[str, Any]:
    """The knobs part (see the module docstring)."""
    base = build_instance("phoenix")
    rows = {}
    for name, used in KNOBS.items():
        result = solve(with_knobs(base, used), time_limit_s=time_limit_s, allow_pause="pauses" in used)
        metrics = result.metrics
        rows[name] = {"status": result.status, "reason": result.reason,
                      **({} if metrics is None else {"weighted_performance": metrics.calls[0].weighted_performance,
                                                     "training_lost_usd": metrics.training_lost_usd,
                                                     "objective_usd": metrics.objective_usd})}
        log(f"knobs {name}: {result.status}")
    return rows


CURTAILMENT_SHARES = (0.0025, 0.005, 0.01)
"""Shares of the year's hours curtailed (Norris et al. 2025: 76 / 98 / 126 GW of new load fit at these shares)."""
CURTAIL_USD_PER_MWH = 100_000.0
"""The headroom part's weight on each MWh of import in a curtailed hour: far above any price, so the oracle cuts the
import as deep as the targets and tiers allow first, and minimises cost second."""
HEADROOM_WITHOUT_CAPS = ("fleet",)
"""Cases whose headroom is solved by the decomposition (fine-tuning, inference, idle value), which models calls but
not caps or tiers."""
HEADROOM_TIER = 2
"""The Flex tier of the headroom part's second row (25% of throughput may be lost over each event)."""


def curtailment_events(share: float) -> dict[str, tuple[int, int]]:
    """Per day, the (first, last + 1) local hour of its hours among the ``share`` of 2023's highest CAISO demand."""
    import pandas as pd

    from aidc_env.datasets import source_file

    with source_file(PROFILES, "profiles") as (path, _, _):
        table = pd.read_csv(path, usecols=["local_start", "demand_mw"]).dropna()
    top = table.nlargest(round(len(table) * share), "demand_mw")
    hours = top["local_start"].str[11:13].astype(int)
    spans = hours.groupby(top["local_start"].str[:10]).agg(["min", "max"])
    return {day: (int(row["min"]), int(row["max"]) + 1) for day, row in spans.iterrows()}


def headroom(time_limit_s: float, log: Callable[[str], None], shares: Sequence[float] = CURTAILMENT_SHARES,
             case_name: str = "2048") -> dict[str, Any]:
    """The headroom part (see the module docstring); ``case_name`` "fleet": by the decomposition, which models calls
    but not caps or tiers, so without caps and with the targets row only."""
    from aidc_env.grid import FLEX_TIER_LOSS

    fleet = case_name in HEADROOM_WITHOUT_CAPS
    base = load_case(case_name) if fleet else load_case(case_name).with_overrides(power_caps=PowerCaps())
    tiered = base.with_overrides(jobs=tuple(dataclasses.replace(j, flex_tier=HEADROOM_TIER) for j in base.jobs))
    profiles = load_profiles(PROFILES)
    peak = max(float(simulate(inst, fixed_schedule(inst)).flows.grid_mw.max())
               for inst in build_instances(case_name, profiles=profiles).values())
    rows, free_cost = [], {}
    variants = (("targets", base),) if fleet else (("targets", base), (f"Flex {HEADROOM_TIER}", tiered))
    for share in shares:
        for label, case in variants:
            for day, (first, last) in curtailment_events(share).items():
                spec = CallSpec(program="flexible-interconnection", start_hour=float(first), hours=float(last - first),
                                reduction_share=0.0, payment_usd_per_mwh=CURTAIL_USD_PER_MWH)
                inst = build_instance(case.with_overrides(grid_calls=(spec,)), day=day, profiles=profiles)
                result = solve(inst, time_limit_s=time_limit_s)
                if day not in free_cost:  # the day without curtailment (tiers bind only over a call)
                    free = solve(build_instance(base, day=day, profiles=profiles), time_limit_s=time_limit_s)
                    free_cost[day] = free.metrics.operating_cost_usd
                row = {"share": share, "tiers": label, "day": day, "hours": last - first, "status": result.status}
                if result.metrics is not None:
                    call = result.metrics.calls[0]
                    row |= {"firm_mw": float(np.max(inst.grid_calls[0].baseline_mw - np.array(call.reduction_mw))),
                            "curtailed_mwh": call.reduction_mwh,
                            "extra_cost_usd": result.metrics.operating_cost_usd - free_cost[day],
                            "training_lost_usd": result.metrics.training_lost_usd, "targets_met":
                            result.metrics.tranches_met}
                rows.append(row)
                log(f"headroom {share:.2%} {label} {day}: {result.status}, firm {row.get('firm_mw', np.nan):.3f} MW")
    return {"case": case_name, "caps": not fleet, "peak_import_mw": peak, "tier_loss": FLEX_TIER_LOSS[HEADROOM_TIER],
            "rows": rows}


def _headroom_table(record: dict[str, Any]) -> list[str]:
    peak = record["peak_import_mw"]
    proven = sum(r["status"] == "optimal" for r in record["rows"])
    out = [f"Site: {record.get('case', '2048')}{' with caps' if record.get('caps', True) else ', no caps'}; peak "
           f"import without flexibility: {peak:.3f} MW; {proven} of {len(record['rows'])} events proven.", "",
           "| curtailed hours | events | tiers | firm capacity needed (MW) | headroom (MW) | headroom (% of peak) | "
           "extra operating cost per MWh curtailed ($) |", "|---|---|---|---|---|---|---|"]
    for share in dict.fromkeys(r["share"] for r in record["rows"]):
        for tiers in dict.fromkeys(r["tiers"] for r in record["rows"]):
            rows = [r for r in record["rows"] if r["share"] == share and r["tiers"] == tiers]
            if not rows or any("firm_mw" not in r for r in rows):
                out.append(f"| {share:.2%} | {len(rows)} | {tiers} | no schedule on some day | - | - | - |")
                continue
            firm = max(r["firm_mw"] for r in rows)
            curtailed = sum(r["curtailed_mwh"] for r in rows)
            cost = sum(r["extra_cost_usd"] for r in rows) / curtailed if curtailed > 0 else 0.0
            out.append(f"| {share:.2%} ({sum(r['hours'] for r in rows)} h) | {len(rows)} | {tiers} | {firm:.3f} | "
                       f"{peak - firm:.3f} | {(peak - firm) / peak:.0%} | {cost:,.2f} |")
    return out + [""]


def held_out_year(seeds: int, time_limit_s: float, log: Callable[[str], None],
                  model_path: str | None = None) -> dict[str, Any]:
    """Held-out years of calls on the 2048 case with caps (see the module docstring); with ``model_path``, also the
    trained PPO model (``train.py --power-caps a100-dvfs --call-stream bip:0.25``) in the env."""
    case = load_case("2048").with_overrides(power_caps=PowerCaps())
    profiles = load_profiles(PROFILES)
    known = set(profiles.dates())
    policies = dict(POLICIES)
    if model_path is not None:
        from agents.ppo import load_model, ppo_schedule

        model = load_model(model_path)
        policies["ppo"] = lambda inst, limit: (ppo_schedule(model, inst), {})
    held_out_days = set(split_days(profiles.dates())[1])
    rows = []
    for seed in list(HELD_OUT_SEEDS)[:seeds]:
        for day, events in events_by_day(generate_year(seed)).items():
            if day not in known:
                continue
            specs = tuple(e.spec(STUDY_PROGRAM, reduction_share=STUDY_REDUCTION_SHARE) for e in events)
            inst = build_instance(case.with_overrides(grid_calls=specs), day=day, profiles=profiles)
            entry = {"seed": seed, "day": day, "held_out_day": day in held_out_days,
                     "calls": [dataclasses.asdict(e) | {"date": day} for e in events]}
            for name, policy in policies.items():
                tick = time.perf_counter()
                try:
                    schedule, info = policy(inst, time_limit_s)
                except RuntimeError as err:  # no schedule delivers the call
                    entry[name] = {"error": str(err)}
                    continue
                entry[name] = {**_row(simulate(inst, schedule).metrics), **info,
                               "wall_seconds": time.perf_counter() - tick}
            rows.append(entry)
            log(f"year seed {seed} {day}: " + ", ".join(
                f"{name} ${entry[name].get('objective_usd', float('nan')):,.0f}" for name in policies))
    return {"program": STUDY_PROGRAM, "reduction_share": STUDY_REDUCTION_SHARE, "seeds": seeds, "days": rows,
            "policies": list(policies), "model": model_path}


def timing(days: int, time_limit_s: float, log: Callable[[str], None]) -> dict[str, Any]:
    """The oracle's seconds on held-out days with a call, with caps and without (see the module docstring)."""
    case = load_case("2048").with_overrides(grid_calls=(TIMING_CALL,))
    profiles = load_profiles(PROFILES)
    chosen = spread(held_out_starts(profiles.dates()), days)
    rows = []
    for caps in (True, False):
        built = build_instances(case.with_overrides(power_caps=PowerCaps()) if caps else case, chosen, profiles)
        for day, inst in built.items():
            result = solve(inst, time_limit_s=time_limit_s)
            rows.append({"day": day, "caps": caps, "method": result.method, "status": result.status,
                         "gap": result.gap, "seconds": result.build_seconds + result.solve_seconds,
                         "objective_usd": result.objective_usd,
                         "max_price_usd_per_mwh": float(inst.price_usd_per_mwh.max())})
            log(f"timing {day} {'caps' if caps else 'no caps'}: {result.status} {rows[-1]['seconds']:.1f} s")
    return {"segments": case.jobs[0].segments, "call": dataclasses.asdict(TIMING_CALL), "rows": rows}


def tables(record: dict[str, Any]) -> str:
    """The study's Markdown tables."""
    out = []
    if "phoenix" in record:
        out += _phoenix_tables(record["phoenix"])
    if "knobs" in record:
        out += ["| knobs | delivers | weighted performance | training lost ($) |", "|---|---|---|---|"]
        for name, row in record["knobs"].items():
            if "weighted_performance" in row:
                out.append(f"| {name} | yes | {row['weighted_performance']:.3f} | {row['training_lost_usd']:,.2f} |")
            else:
                out.append(f"| {name} | no ({row['status']}) | - | - |")
        out.append("")
    if "year" in record:
        out += _year_table(record["year"])
    if "headroom" in record:
        out += _headroom_table(record["headroom"])
    if "timing" in record:
        out += ["| caps | method | days | proven optimal | median s | p90 s | max s |", "|---|---|---|---|---|---|---|"]
        for caps in (True, False):
            rows = [r for r in record["timing"]["rows"] if r["caps"] == caps]
            if rows:
                seconds = np.array([r["seconds"] for r in rows])
                proven = sum(r["status"] == "optimal" for r in rows)
                out.append(f"| {'yes' if caps else 'no'} | {rows[0]['method']} | {seconds.size} | "
                           f"{proven} | {np.median(seconds):.2f} | {np.percentile(seconds, 90):.2f} | "
                           f"{seconds.max():.2f} |")
        out.append("")
    return "\n".join(out)


def _phoenix_tables(ph: dict[str, Any]) -> list[str]:
    call, demo = ph["call"], ph["demonstration"]
    baseline = np.array(call["baseline_mw"]) * 1000
    names = list(ph["policies"])
    out = ["| policy | delivered | reduction (min over slots) | weighted performance | " +
           " | ".join(j for j in ph["policies"]["hindsight"]["calls"][0]["performance"]) + " |",
           "|---|---|---|---|" + "---|" * len(ph["policies"]["hindsight"]["calls"][0]["performance"])]
    for name in names:
        c = ph["policies"][name]["calls"][0]
        share = np.min(np.array(c["reduction_mw"]) * 1000 / baseline)
        out.append(f"| {name} | {'yes' if c['delivered'] else 'no'} | {share:.1%} | {c['weighted_performance']:.3f} | "
                   + " | ".join(f"{p:.3f}" for p in c["performance"].values()) + " |")
    demo_perf = [float(j["performance"]) for j in demo["jobs"]]
    event = np.array(demo["event_power_kw"])
    out.append(f"| demonstration (measured) | yes | {1 - event.max() / 93.256:.1%} | "
               f"{demo['weighted_performance']:.3f} | " + " | ".join(f"{p:.3f}" for p in demo_perf) + " |")
    out += ["", "| slot | baseline kW | limit kW | " + " | ".join(f"{n} kW" for n in names) + " |",
            "|---|---|---|" + "---|" * len(names)]
    start = call["start_slot"]
    for k, base in enumerate(baseline):
        hour = (start + k) * ph["slot_hours"]
        cells = " | ".join(f"{ph['policies'][n]['load_kw'][start + k]:.2f}" for n in names)
        out.append(f"| {int(hour):02d}:{int(round(hour % 1 * 60)):02d} | {base:.2f} | "
                   f"{call['limit_mw'][k] * 1000:.2f} | {cells} |")
    return out + [""]


def _year_table(year: dict[str, Any]) -> list[str]:
    out = ["| policy | call days | calls delivered | saving against no response ($, total) | on held-out days ($) | "
           "penalties ($) | days with every target met |", "|---|---|---|---|---|---|---|"]
    days = year["days"]
    for name in year.get("policies", POLICIES):
        ok = [d for d in days if "objective_usd" in d[name]]
        delivered = sum(c["delivered"] for d in ok for c in d[name]["calls"])
        calls = sum(len(d[name]["calls"]) for d in ok)
        saving = [d["fixed"]["objective_usd"] - d[name]["objective_usd"] for d in ok]
        held = sum(x for x, d in zip(saving, ok, strict=True) if d.get("held_out_day"))
        out.append(f"| {name} | {len(ok)} of {len(days)} | {delivered} of {calls} | {sum(saving):,.0f} | {held:,.0f} | "
                   f"{sum(d[name]['penalty_usd'] for d in ok):,.0f} | {sum(d[name]['tranches_met'] for d in ok)} |")
    n_held = sum(d.get("held_out_day", False) for d in days)
    return out + ["", f"{n_held} of the {len(days)} call days are held-out days of the weeks split.", ""]


def plot(ph: dict[str, Any], path: Path) -> None:
    """The cluster's power over the event's afternoon: each policy's, the limit, and the demonstration's measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.plots import save_figure

    hours = np.arange(len(ph["policies"]["hindsight"]["load_kw"])) * ph["slot_hours"]
    fig, ax = plt.subplots(figsize=(8, 4))
    for (name, row), style in zip(ph["policies"].items(), ("-", "--", ":", "-."), strict=False):
        ax.step(hours, row["load_kw"], where="post", label=name, linestyle=style, linewidth=1.5)
    call = ph["call"]
    span = np.arange(call["start_slot"], call["end_slot"] + 1) * ph["slot_hours"]
    ax.step(span, [*np.array(call["limit_mw"]) * 1000, call["limit_mw"][-1] * 1000], where="post", color="k",
            linestyle="--", label="limit (25% below the baseline)")
    measured = [float(p["power_kw"]) for p in ph["demonstration"]["power"]]
    start = [p["local_start"][11:16] for p in ph["demonstration"]["power"]]
    first = int(start[0][:2]) + int(start[0][3:]) / 60
    ax.step(first + np.arange(len(measured)) * 0.25, measured, where="post", color="grey", label="demonstration")
    ax.set(xlim=(12, 22), xlabel="hour", ylabel="GPU power (kW)", title="Phoenix event: power per 15 minutes")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def _shares(text: str) -> list[float]:
    """The ``--shares`` list: numbers in (0, 1)."""
    try:
        shares = [float(x) for x in text.split(",") if x]
    except ValueError:
        shares = []
    require(bool(shares) and all(0 < x < 1 for x in shares), "shares", f"must be numbers in (0, 1), got {text!r}")
    return shares


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(description="The grid-calls study: the Phoenix replay, held-out years of calls and the oracle's "
                       "times with calls and caps (docs/grid-calls.md).")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="held-out call years (default: %(default)s)")
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS, help="held-out days of the timing part")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S, help="seconds per oracle solve")
    parser.add_argument("--shares", default=",".join(map(str, CURTAILMENT_SHARES)),
                        help="headroom: shares of the year's hours curtailed (default: %(default)s)")
    parser.add_argument("--headroom-case", choices=("2048", *HEADROOM_WITHOUT_CAPS), default="2048",
                        help="headroom: the site (fleet: without caps or tiers; default: %(default)s)")
    parser.add_argument("--model", help="year: a PPO model trained on calls (train.py --power-caps a100-dvfs "
                        "--call-stream bip:0.25), scored beside the other policies")
    parser.add_argument("--out", help="output folder (default runs/grid_calls_study_N, the next free N)")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    require(bool(parts) and all(p in PARTS for p in parts), "parts", f"must be among {', '.join(PARTS)}")
    require_number(args.seeds, "seeds", 1, len(HELD_OUT_SEEDS), integer=True)
    require_number(args.days, "days", 1, limits.MAX_DAYS, integer=True)
    require_number(args.time_limit, "time-limit", 0.0, limits.MAX_TIME_LIMIT_S, low_open=True)
    shares = _shares(args.shares)
    out = result_folder(args.out, "runs", "grid_calls_study", RESULTS)
    log = lambda s: print(s, flush=True)  # noqa: E731
    record: dict[str, Any] = {}
    if "phoenix" in parts:
        record["phoenix"] = phoenix(args.time_limit, log)
        plot(record["phoenix"], out / "phoenix_power.png")
    if "knobs" in parts:
        record["knobs"] = knobs(args.time_limit, log)
    if "year" in parts:
        record["year"] = held_out_year(args.seeds, args.time_limit, log, args.model)
    if "timing" in parts:
        record["timing"] = timing(args.days, args.time_limit, log)
    if "headroom" in parts:
        record["headroom"] = headroom(args.time_limit, log, shares, args.headroom_case)
    write_json(out / "grid_calls_study.json", record)
    atomic_write_text(out / "grid_calls_study.md", tables(record))
    print(tables(record))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
