"""The bills study (docs/bills.md): what flexibility saves under each bill, month by month; the month oracle's times.

    python -m experiments.bills_study [--case 2048] [--months 1-12] [--tariffs sce-tou8] [--time-limit S]
        [--calls SEED] [--coincident-peak NAME|FILE] [--out DIR]

For each calendar month of 2023 (``caiso-2023``, a horizon of the month's days, the case's K; the data lacks 14 days, so
January, November and December are their longest run of days, :func:`month_days`) and each bill:

- ``lmp``: the real-time LMP on the grid import (every figure of the project before bills);
- each tariff of ``--tariffs`` (bundled or URDB files): its TOU energy rates, its monthly demand charges and fixed
  charges (``Instance.with_tariff``; the oracle minimises the bill itself);

the row holds fixed training's bill (:func:`aidc_env.baselines.fixed_schedule`, the inflexible reference), the
oracle's (``oracle.solve``, ``--time-limit`` seconds: its status, proven bound, gap and seconds), the saving
flexibility earns (fixed − oracle; at most fixed − bound), the part of it that is demand charge, and, under a tariff,
the bill of the LMP oracle's schedule (what following prices earns when the bill is a tariff). With ``--calls SEED``,
every bill again with the calls of a held-out year in the month (``bill+calls``; the oracle delivers them, the fixed
schedule pays their penalties). With ``--coincident-peak NAME`` (e.g. ``ercot-4cp``, :mod:`aidc_env.coincident`),
every bill again with the coincident-peak charge on the month's system peak hour (``bill+NAME``): the part of the
saving that is that charge, and the plain LMP oracle's schedule (which ignores the peak) under it. Every figure is the
simulator's replay.

Writes ``bills_study.json`` (every row), ``bills_study.md`` (the tables) and ``bills_saving.png`` into ``--out``
(default a new numbered folder runs/bills_study_N), atomically.
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime as dt
import functools
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aidc_env import limits
from aidc_env.baselines import fixed_schedule
from aidc_env.call_streams import HELD_OUT_SEEDS, generate_year
from aidc_env.calls import with_calls
from aidc_env.case import build_instance
from aidc_env.coincident import load_coincident_peak, on_days
from aidc_env.errors import CliParser, require, require_number, run_cli
from aidc_env.instance import Instance
from aidc_env.io import atomic_write_text, write_json
from aidc_env.metrics import Metrics
from aidc_env.profiles import load_profiles
from aidc_env.schedule import validate_schedule
from aidc_env.schema.case import CallSpec
from aidc_env.simulator import simulate
from aidc_env.tariffs import load_tariff
from experiments.runs import result_folder
from oracle import solve

PROFILES = "caiso-2023"
YEAR = 2023
LMP = "lmp"
DEFAULT_TARIFFS = ("sce-tou8",)
"""SCE's TOU-8 Option D: the 2048 case's site prices at the SCE node, so SCE's large-customer tariff is its bill."""
DEFAULT_TIME_LIMIT_S = 120.0
CALL_PROGRAM, CALL_REDUCTION_SHARE = "bip", 0.25
"""``--calls``: each call a firm cut of a quarter of the baseline's import (the Phoenix event's depth) under PG&E's
Base Interruptible Program terms, as in the grid-calls study."""
RESULTS = ("bills_study.json", "bills_study.md", "bills_saving.png")


def _bill(metrics: Metrics, coincident_usd: float = 0.0) -> dict[str, float]:
    """A schedule's bill from its metrics: the objective, and its energy (grid), demand (the coincident-peak charge
    included) and fixed parts, and the coincident-peak charge ($)."""
    return {"objective_usd": metrics.objective_usd, "energy_usd": metrics.grid_cost_usd,
            "demand_usd": metrics.demand_charge_usd, "fixed_usd": metrics.fixed_charge_usd,
            "coincident_usd": coincident_usd, "peak_grid_mw": metrics.peak_grid_mw, "feasible": metrics.feasible}


def billed(inst: Instance, schedule: Any) -> dict[str, float]:
    """The bill of a schedule (rows, or (rows, sites, caps)) replayed by the simulator, with its coincident-peak
    charge (every site's meter)."""
    rows, sites, caps = schedule if isinstance(schedule, tuple) else (schedule, None, None)
    result = simulate(inst, validate_schedule(inst, rows, sites, caps))
    coincident = sum(charge.charge_usd(flows.grid_mw) for view, flows in zip(inst.site_views, result.site_flows,
                                                                             strict=True)
                     if view.tariff_terms is not None for charge in view.tariff_terms.demand if charge.coincident)
    return _bill(result.metrics, float(coincident))


def month_days(month: int, available: frozenset[str] | set[str]) -> tuple[str, int]:
    """(first day, days) of the longest run of consecutive days of a 2023 month that the data has (the whole month
    where it has every day; the first such run on ties)."""
    best, run = (None, 0), []
    for day in range(1, calendar.monthrange(YEAR, month)[1] + 2):
        date = f"{YEAR}-{month:02d}-{day:02d}" if day <= calendar.monthrange(YEAR, month)[1] else None
        if date in available:
            run.append(date)
            continue
        if len(run) > best[1]:
            best = (run[0], len(run))
        run = []
    require(best[0] is not None, "months", f"{PROFILES} has no day of {YEAR}-{month:02d}")
    return best


@functools.cache
def _available_days() -> frozenset[str]:
    """The days :data:`PROFILES` has (read once)."""
    return frozenset(load_profiles(PROFILES).dates())


def month_instance(case: str, month: int, bill: str, call_seed: int | None = None,
                   coincident: str | None = None) -> Instance:
    """The case over a calendar month of 2023 (:func:`month_days`), billed at the real-time LMP or by a tariff; with
    ``call_seed``, the calls of that held-out year that fall in the month (:func:`month_calls`); with ``coincident``,
    that coincident-peak charge on the month's system peak (:func:`aidc_env.coincident.on_days`)."""
    first, days = month_days(month, _available_days())
    inst = build_instance(case, day=first, profiles=PROFILES, horizon_days=days)
    inst = inst if bill == LMP else inst.with_tariff(load_tariff(bill))
    if coincident is not None:
        inst = dataclasses.replace(inst, coincident_peak=on_days(load_coincident_peak(coincident), first, days))
    return inst if call_seed is None else with_calls(inst, month_calls(inst, call_seed))


def month_calls(inst: Instance, seed: int) -> list[CallSpec]:
    """The calls of held-out year ``seed`` (:func:`aidc_env.call_streams.generate_year`) on the instance's days, each
    a firm cut of :data:`CALL_REDUCTION_SHARE` of the baseline's import under PG&E's BIP terms."""
    first = dt.date.fromisoformat(inst.day)
    return [event.spec(CALL_PROGRAM, day_offset=(event.date - first).days, reduction_share=CALL_REDUCTION_SHARE)
            for event in generate_year(seed) if 0 <= (event.date - first).days < inst.horizon_days]


def month_rows(case: str, month: int, bills: Sequence[str], time_limit_s: float, log: Callable[[str], None],
               call_seed: int | None = None, coincident: str | None = None,
               lmp_schedule: tuple | None = None) -> tuple[list[dict[str, Any]], tuple | None]:
    """One row per bill of a month (module docstring), and the LMP oracle's schedule (rows, sites, caps), which is
    billed under every tariff (``lmp_schedule`` given: that one, under every bill). With ``call_seed``: the same bills
    with the month's calls of that held-out year (no rows in a month without calls); with ``coincident``: with that
    coincident-peak charge."""
    rows = []
    for bill in bills:
        inst = month_instance(case, month, bill, call_seed, coincident)
        if call_seed is not None and not inst.grid_calls:
            continue
        fixed = billed(inst, fixed_schedule(inst))
        tick = time.perf_counter()
        result = solve(inst, time_limit_s=time_limit_s)
        seconds = time.perf_counter() - tick
        label = bill + ("+calls" if call_seed is not None else "") + (f"+{coincident}" if coincident else "")
        found = result.schedule is not None
        row = {"case": case, "month": month, "first_day": inst.day, "days": inst.horizon_days, "bill": label,
               "calls": len(inst.grid_calls),
               "calls_delivered": result.metrics.calls_delivered if result.metrics is not None else None,
               "status": result.status, "gap": result.gap,
               "seconds": seconds, "method": result.method, "bound_usd": result.best_bound_usd,
               "fixed": fixed, "oracle": billed(inst, (result.schedule, result.sites, result.caps)) if found else None}
        if found:
            row["saving_usd"] = fixed["objective_usd"] - row["oracle"]["objective_usd"]
            row["saving_at_most_usd"] = (fixed["objective_usd"] - result.best_bound_usd
                                         if result.best_bound_usd is not None else None)
            row["demand_saving_usd"] = fixed["demand_usd"] - row["oracle"]["demand_usd"]
            row["coincident_saving_usd"] = fixed["coincident_usd"] - row["oracle"]["coincident_usd"]
        if call_seed is not None:
            row["call_payment_usd"] = result.metrics and result.metrics.call_payment_usd
        if bill == LMP and lmp_schedule is None:
            lmp_schedule = (result.schedule, result.sites, result.caps) if found else None
        elif lmp_schedule is not None:
            row["lmp_schedule"] = billed(inst, lmp_schedule)
        rows.append(row)
        log(f"{case} {YEAR}-{month:02d} {row['bill']}: {result.status} in {seconds:.1f} s (gap "
            f"{'-' if result.gap is None else f'{result.gap:.2%}'}), saving "
            f"${row.get('saving_usd', float('nan')):,.0f}")
    return rows, lmp_schedule


# ------------------------------------------------------------------------------------------------ tables


def _money(x: float | None) -> str:
    return "–" if x is None else f"${x:,.0f}"


def tables(rows: Sequence[dict[str, Any]]) -> str:
    """The study's markdown: the saving by bill and month, and the oracle's times."""
    lines = ["| case | month | days | bill | fixed | oracle | saving | saving at most | of it demand | of it "
             "coincident peak | LMP schedule | oracle s | gap |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        saving = r.get("saving_usd")

        def share(key: str, part: str, r: dict = r, saving: float | None = saving) -> str:
            value = r.get(key)
            return f"{value / saving:.0%}" if saving and value is not None and r["fixed"].get(part, 0) > 0 else "–"

        gap = "–" if r["gap"] is None else f"{r['gap']:.2%}"
        lines.append(f"| {r['case']} | {r['month']:02d} | {r['days']} | {r['bill']} | "
                     f"{_money(r['fixed']['objective_usd'])} | "
                     f"{_money(r['oracle'] and r['oracle']['objective_usd'])} | {_money(saving)} | "
                     f"{_money(r.get('saving_at_most_usd'))} | {share('demand_saving_usd', 'demand_usd')} | "
                     f"{share('coincident_saving_usd', 'coincident_usd')} | "
                     f"{_money(r.get('lmp_schedule', {}).get('objective_usd'))} | {r['seconds']:.1f} | {gap} |")
    lines += ["", "| case | bill | months | proven | seconds median | p90 | max | gap median | gap max |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for case in dict.fromkeys(r["case"] for r in rows):
        for bill in dict.fromkeys(r["bill"] for r in rows):
            group = [r for r in rows if r["case"] == case and r["bill"] == bill]
            if not group:
                continue
            seconds = np.array([r["seconds"] for r in group])
            gaps = np.array([r["gap"] if r["gap"] is not None else np.nan for r in group])
            proven = sum(r["status"] == "optimal" for r in group)
            gap_text = ("–", "–") if np.all(np.isnan(gaps)) else (f"{np.nanmedian(gaps):.2%}", f"{np.nanmax(gaps):.2%}")
            lines.append(f"| {case} | {bill} | {len(group)} | {proven} | {np.median(seconds):.1f} | "
                         f"{np.percentile(seconds, 90):.1f} | {seconds.max():.1f} | {gap_text[0]} | {gap_text[1]} |")
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """The saving per month, one bar group per bill (and its upper end where the oracle is not proven)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.plots import save_figure

    bills = list(dict.fromkeys(r["bill"] for r in rows))
    months = sorted({r["month"] for r in rows})
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(len(bills), 1)
    for i, bill in enumerate(bills):
        by_month = {r["month"]: r for r in rows if r["bill"] == bill}
        x = np.array(months) + (i - (len(bills) - 1) / 2) * width
        saving = [by_month[m].get("saving_usd") or 0.0 for m in months]
        upper = [(by_month[m].get("saving_at_most_usd") or 0.0) - s for m, s in zip(months, saving, strict=True)]
        ax.bar(x, saving, width, label=bill, yerr=[np.zeros(len(months)), np.maximum(upper, 0.0)], capsize=2)
    ax.set_xticks(months, [calendar.month_abbr[m] for m in months])
    ax.set_ylabel("saving against fixed training ($ a month)")
    ax.legend()
    save_figure(fig, path)


def _months(text: str) -> list[int]:
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-"))
            months = list(range(lo, hi + 1))
        else:
            months = [int(x) for x in text.split(",") if x]
    except ValueError:
        months = []
    require(bool(months) and all(1 <= m <= 12 for m in months), "months", f"must be months 1-12 (e.g. 1-12 or 1,7), "
            f"got {text!r}")
    return months


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(description="The bills study: the saving flexibility earns under each bill, month by month, and "
                       "the month oracle's times (docs/bills.md).")
    parser.add_argument("--case", default="2048", help="bundled case or TOML file (default: %(default)s)")
    parser.add_argument("--months", default="1-12", help="months of 2023: a range or a list (default: %(default)s)")
    parser.add_argument("--tariffs", default=",".join(DEFAULT_TARIFFS),
                        help="tariffs beside the real-time LMP, bundled names or URDB files (default: %(default)s)")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S, help="seconds per oracle solve")
    parser.add_argument("--calls", type=int, metavar="SEED", help="also every bill with the calls of this held-out "
                        f"year ({HELD_OUT_SEEDS.start}-{HELD_OUT_SEEDS.stop - 1}) in each month")
    parser.add_argument("--coincident-peak", metavar="NAME|FILE", help="also every bill with this coincident-peak "
                        "charge (e.g. ercot-4cp: ERCOT 4CP on the month's CAISO system peak; or a JSON file)")
    parser.add_argument("--out", help="output folder (default runs/bills_study_N, the next free N)")
    args = parser.parse_args(argv)
    months = _months(args.months)
    tariffs = [t for t in args.tariffs.split(",") if t]
    for tariff in tariffs:
        load_tariff(tariff)  # a bad name is refused before any work
    require_number(args.time_limit, "time-limit", 0.0, limits.MAX_TIME_LIMIT_S, low_open=True)
    require(args.calls is None or args.calls in HELD_OUT_SEEDS, "calls",
            f"must be a held-out call year {HELD_OUT_SEEDS.start}-{HELD_OUT_SEEDS.stop - 1}, got {args.calls}")
    if args.coincident_peak is not None:
        load_coincident_peak(args.coincident_peak)  # a bad name or file is refused before any work
    month_instance(args.case, months[0], LMP)  # a bad case is refused before any work
    out = result_folder(args.out, "runs", "bills_study", RESULTS)
    log = lambda s: print(s, flush=True)  # noqa: E731
    rows: list[dict[str, Any]] = []
    for month in months:
        plain, lmp_schedule = month_rows(args.case, month, [LMP, *tariffs], args.time_limit, log)
        rows += plain
        if args.calls is not None:
            rows += month_rows(args.case, month, [LMP, *tariffs], args.time_limit, log, args.calls)[0]
        if args.coincident_peak is not None:
            rows += month_rows(args.case, month, [LMP, *tariffs], args.time_limit, log, coincident=args.coincident_peak,
                               lmp_schedule=lmp_schedule)[0]
        write_json(out / "bills_study.json", {"rows": rows})  # what is done is kept
    atomic_write_text(out / "bills_study.md", tables(rows))
    plot(rows, out / "bills_saving.png")
    print(tables(rows))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
