"""Make the bundled tables of representative CAISO 2023 days (one site, and the sites case's three nodes) from the
full-year hourly file.

    python scripts/make_representative_days.py [--source PATH] [--out aidc_env/data] [--include 2023-04-15,...]

Reads the full year (default: the packaged ``aidc_env/data/caiso_2023_hourly.csv.gz``, the dataset ``caiso-2023``; its
provenance in ``aidc_env/data/README.md``), picks at most 24 complete days deterministically and writes, in ``--out``:

- ``caiso_2023_days.csv``: the source rows of those days, in the canonical columns only (timestamp_utc, local_start,
  price_usd_per_mwh, solar_mw, wind_mw), cell text copied verbatim;
- ``caiso_2023_days.json``: the full year's renewable peak (``renewable_capacity_mw``, used by
  ``aidc_env.profiles.load_profiles()`` so that bundled and full-year runs normalise alike), the picked days with why
  each was picked, the selection rule and the generator's name;
- ``README.md``: its section (from the heading ``# Bundled profile data: ...`` to the next ``# `` heading): provenance,
  the selection rule and the table of days; the rest of the file is left as it is;
- ``caiso_2023_site_days.csv``: the same days with the columns the sites case reads (:mod:`aidc_env.site_profiles`:
  the SCE, PG&E and SDG&E prices, solar and wind apart), and ``caiso_2023_site_days.json``, the full year's solar and
  wind peaks, which normalise each plant's shape so that bundled and full-year runs agree.

The selection rule (:func:`select_days`) is stated in the README section it writes. The script checks its own output:
the written table loads with no skipped day and gives exactly the full year's profiles of the picked days.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from aidc_env import profiles as P
from aidc_env.errors import InputError, require, run_cli
from aidc_env.io import atomic_path, atomic_write_text, dumps_json
from aidc_env.site_profiles import BUNDLED_SITE_CSV, BUNDLED_SITE_META, SITE_COLUMNS, load_site_profiles

REPO_ROOT = Path(__file__).resolve().parents[1]
GENERATOR = "scripts/make_representative_days.py"
README_HEADING = "# Bundled profile data: representative CAISO 2023 days"
DEFAULT_SOURCE = REPO_ROOT / "aidc_env" / "data" / "caiso_2023_hourly.csv.gz"
DEFAULT_OUT = REPO_ROOT / "aidc_env" / "data"
DEFAULT_INCLUDE = ("2023-04-15", "2023-05-14", "2023-06-17")
YEAR = "2023"
MAX_DAYS = 24
DAYS_PER_MONTH = 2
MIDDAY_HOURS = range(10, 15)
"""Local clock hours 10:00-14:59, for the midday renewable figure reported per day."""
FORBIDDEN_DATA_STRINGS = ("DLAP_SCE", "caiso_2023_hourly")
"""Strings that must not appear in the bundled data files (a repository hook flags them)."""
ROLE_INCLUDED = "included"
ROLE_NEGATIVE_HOURS = "negative-price hours"
ROLE_LOWEST_PRICE = "lowest price"
ROLE_TYPICAL = "typical"
ROLE_HIGH_FLEX = "high-flexibility"
FORCED_ROLES = (ROLE_INCLUDED, ROLE_NEGATIVE_HOURS, ROLE_LOWEST_PRICE)
PRICE_DECIMALS = 3
POWER_DECIMALS = 1
DISTANCE_DECIMALS = 3


@dataclass(frozen=True)
class DayStats:
    """Daily figures of one complete day, used for the selection and reported in the JSON."""

    date: str
    month: int
    hours_in_day: int
    mean_price_usd_per_mwh: float
    min_price_usd_per_mwh: float
    max_price_usd_per_mwh: float
    price_spread_usd_per_mwh: float
    negative_price_hours: int
    mean_renewable_mw: float
    midday_renewable_mw: float


@dataclass(frozen=True)
class Pick:
    date: str
    role: str
    reason: str


def day_stats(day: P.DayProfile) -> DayStats:
    price = day.price_usd_per_mwh
    renewable = day.renewable_mw()
    return DayStats(date=day.date, month=int(day.date[5:7]), hours_in_day=day.hours_in_day,
                    mean_price_usd_per_mwh=round(float(price.mean()), PRICE_DECIMALS),
                    min_price_usd_per_mwh=round(float(price.min()), PRICE_DECIMALS),
                    max_price_usd_per_mwh=round(float(price.max()), PRICE_DECIMALS),
                    price_spread_usd_per_mwh=round(float(price.max() - price.min()), PRICE_DECIMALS),
                    negative_price_hours=int(np.count_nonzero(price < 0)),
                    mean_renewable_mw=round(float(renewable.mean()), POWER_DECIMALS),
                    midday_renewable_mw=round(float(renewable[list(MIDDAY_HOURS)].mean()), POWER_DECIMALS))


def _is_date(text: str) -> bool:
    try:
        return dt.date.fromisoformat(text).isoformat() == text
    except ValueError:
        return False


def _year_std(values: Sequence[float]) -> float:
    std = float(np.std(values))
    return std if std > 0 else 1.0


def select_days(stats: Mapping[str, DayStats], include: Sequence[str]) -> list[Pick]:
    """The picks, in the order of the selection rule (every tie broken by the earlier date; each month has
    :data:`DAYS_PER_MONTH` places): the ``include`` days; the day with the most negative-price hours, then the day with
    the lowest hourly price, among months without a pick; per month with a place left, its typical day (closest to the
    month's medians of daily mean renewable output and daily price spread, in units of the year's standard deviations),
    then its day of largest price spread."""
    require(len(include) <= MAX_DAYS, "include", f"{len(include)} days, at most {MAX_DAYS}")
    picks: list[Pick] = []
    places = {month: DAYS_PER_MONTH for month in sorted({s.month for s in stats.values()})}

    def add(date: str, role: str, reason: str) -> None:
        picks.append(Pick(date, role, reason))
        places[stats[date].month] -= 1

    def picked(date: str) -> bool:
        return any(p.date == date for p in picks)

    for date in include:
        require(_is_date(date), "include", f"{date!r} is not a valid YYYY-MM-DD date")
        require(date in stats, "include", f"{date} is not a complete day of the source")
        if not picked(date):
            add(date, ROLE_INCLUDED, "asked for (--include)")

    def free_month_candidates() -> list[DayStats]:
        months_with_picks = {stats[p.date].month for p in picks}
        return [s for d, s in sorted(stats.items()) if not picked(d) and s.month not in months_with_picks
                and s.min_price_usd_per_mwh < 0]

    candidates = free_month_candidates()
    if candidates:
        best = min(candidates, key=lambda s: (-s.negative_price_hours, s.min_price_usd_per_mwh, s.date))
        add(best.date, ROLE_NEGATIVE_HOURS,
            f"most negative-price hours ({best.negative_price_hours}) among months without a pick")
    candidates = free_month_candidates()
    if candidates:
        best = min(candidates, key=lambda s: (s.min_price_usd_per_mwh, s.date))
        add(best.date, ROLE_LOWEST_PRICE,
            f"lowest hourly price ({best.min_price_usd_per_mwh} $/MWh) among months without a pick")

    renewable_scale = _year_std([s.mean_renewable_mw for s in stats.values()])
    spread_scale = _year_std([s.price_spread_usd_per_mwh for s in stats.values()])
    for month in places:
        if places[month] <= 0:
            continue
        in_month = [s for d, s in sorted(stats.items()) if s.month == month]
        median_renewable = float(np.median([s.mean_renewable_mw for s in in_month]))
        median_spread = float(np.median([s.price_spread_usd_per_mwh for s in in_month]))

        def distance(s: DayStats) -> float:
            return (abs(s.mean_renewable_mw - median_renewable) / renewable_scale
                    + abs(s.price_spread_usd_per_mwh - median_spread) / spread_scale)

        options = [s for s in in_month if not picked(s.date)]
        if options:
            best = min(options, key=lambda s: (distance(s), s.date))
            add(best.date, ROLE_TYPICAL, f"closest to the month's medians (mean renewable {median_renewable:.0f} MW, "
                f"price spread {median_spread:.2f} $/MWh); distance {distance(best):.{DISTANCE_DECIMALS}f}")
    for month in places:
        if places[month] <= 0:
            continue
        options = [s for d, s in sorted(stats.items()) if s.month == month and not picked(d)]
        if options:
            best = min(options, key=lambda s: (-s.price_spread_usd_per_mwh, s.date))
            add(best.date, ROLE_HIGH_FLEX,
                f"largest price spread of the month ({best.price_spread_usd_per_mwh:.2f} $/MWh)")

    while len(picks) > MAX_DAYS:  # only if the --include days crowd a month
        last_optional = max(i for i, p in enumerate(picks) if p.role not in FORCED_ROLES)
        del picks[last_optional]
    return picks


def with_section(text: str, section: str) -> str:
    """``text`` (a README) with its :data:`README_HEADING` section replaced by ``section`` (appended if absent)."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.rstrip("\n") == README_HEADING]
    if not starts:
        return text + ("\n" if text and not text.endswith("\n\n") else "") + section
    end = next((i for i in range(starts[0] + 1, len(lines)) if lines[i].startswith("# ")), len(lines))
    rest = "".join(lines[end:])
    return "".join(lines[:starts[0]]) + section + ("\n" + rest if rest else "")


def _readme(meta: Mapping[str, object], stats: Mapping[str, DayStats], picks: Sequence[Pick]) -> str:
    rows = ["| date | picked as | h | mean price $/MWh | min | max | neg. h | mean renewable MW | midday MW |",
            "|---|---|---|---|---|---|---|---|---|"]
    for pick in sorted(picks, key=lambda p: p.date):
        s = stats[pick.date]
        rows.append(f"| {s.date} | {pick.role} | {s.hours_in_day} | {s.mean_price_usd_per_mwh:.2f} | "
                    f"{s.min_price_usd_per_mwh:.2f} | {s.max_price_usd_per_mwh:.2f} | {s.negative_price_hours} | "
                    f"{s.mean_renewable_mw:.0f} | {s.midday_renewable_mw:.0f} |")
    table = "\n".join(rows)
    return f"""{README_HEADING}

`caiso_2023_days.csv` (dataset `caiso-2023-days`) holds {len(picks)} representative local (America/Los_Angeles)
days of 2023, one row per hour: the default profiles. `aidc_env.profiles.load_profiles()` (no path) loads it.
Do not edit these files by hand: they are written by `{GENERATOR}`.

## Provenance

The rows are copied verbatim (canonical columns only) from the full-year file `caiso_2023_hourly.csv.gz`
(dataset `caiso-2023`, above):

| column | meaning |
|---|---|
| timestamp_utc | start of the hour, UTC |
| local_start | start of the hour on the local clock with its UTC offset (DST days have 23 or 25 rows) |
| price_usd_per_mwh | CAISO real-time LMP at DLAP_SCE-APND (SCE load zone, closest proxy to the SP15 hub), hourly mean, $/MWh; can be negative |
| solar_mw, wind_mw | CAISO balancing-area solar and wind net generation (EIA-930, `CISO`), MW, after curtailment; night solar slightly negative (station load) |

Public CAISO OASIS real-time LMP (`PRC_RTM_LAP`) and EIA-930 data, as collected in the public repositories
xluo06/GreenH2 (`Supporting_Code/LMP/LMP_data.parquet`) and Cagataykacademy/caiso-nuclear-bess-dispatch
(`data/caiso_preprocessed_v2_2023.csv`), joined and reformatted upstream (see `caiso-2023` above).

## Renewable capacity

`caiso_2023_days.json` stores `renewable_capacity_mw` = **{meta['renewable_capacity_mw']} MW**, the peak of
max(solar, 0) + max(wind, 0) over all {meta['source_hours_with_renewables']} hours of the full year that
have both values. The loader normalises solar + wind by it for the bundled table, so that bundled and
full-year runs give the renewable ratio the same meaning. (An explicit `renewable_capacity_mw` wins.)

## How it was generated

    python {GENERATOR} --out aidc_env/data --include {','.join(meta['selection']['include'])}

Only complete days are eligible ({meta['source_complete_days']} of the year; days with gaps are skipped by
the loader). Selection rule, deterministic, ties broken by the earlier date; each month has
{DAYS_PER_MONTH} places and the table has at most {MAX_DAYS} days:

1. the `--include` days (default {', '.join(DEFAULT_INCLUDE)}: three late-spring days, the last of them the case's reference
   day), each taking a place in its month;
2. negative prices: the day with the most negative-price hours, then the day with the lowest hourly price,
   each among months that have no day picked yet;
3. per month, while it has a place: the *typical* day, closest to the month's medians of daily mean
   renewable output and daily price spread (max − min), distances in units of the year's standard
   deviation of each figure;
4. per month, while it has a place: the *high-flexibility* day, with the largest daily price spread.

The script checks that the written table loads without skipping a day and reproduces the full year's
profiles of those days exactly. `caiso_2023_days.json` lists every day with why it was picked and its
daily figures, and the SHA-256 of the CSV.

## Days

"h" is the number of hours of the local day (23/25 on DST days); "neg. h" the hours with a negative price;
"midday" the mean renewable output 10:00–15:00.

{table}
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=GENERATOR,
                                     description="Write the bundled table of representative CAISO 2023 days.")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="full-year CSV (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    parser.add_argument("--include", default=",".join(DEFAULT_INCLUDE), help="comma-separated dates that must be in "
                        "the table (default: %(default)s)")
    args = parser.parse_args(argv)
    include = [d.strip() for d in args.include.split(",") if d.strip()]

    full = P.load_profiles(args.source)
    stats = {d: day_stats(day) for d, day in full.days.items() if d.startswith(YEAR)}
    require(len(stats) > 0, "source", f"{args.source} has no complete day of {YEAR}")
    picks = select_days(stats, include)
    dates = sorted(p.date for p in picks)

    frame = pd.read_csv(args.source, dtype=str, keep_default_na=False, na_filter=False)
    frame = frame.loc[:, list(P.REQUIRED_COLUMNS)]
    local_dates = frame[P.COL_LOCAL_START].str.strip().str[: len("YYYY-MM-DD")]
    table = frame[local_dates.isin(dates)]

    require(args.out.is_dir() or not args.out.exists(), "out", f"{args.out} is not a directory")
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / P.BUNDLED_CSV
    with atomic_path(csv_path) as temp:
        table.to_csv(temp, index=False, lineterminator="\n")

    # self-check: the table reproduces the full year's days exactly
    bundled = P.load_profiles(csv_path, renewable_capacity_mw=full.renewable_capacity_mw)
    require(not bundled.skipped, "out", f"written table skips days: {dict(bundled.skipped)}")
    require(bundled.dates() == dates, "out", "written table does not hold the picked days")
    for date in dates:
        require(bundled.day(date) == full.day(date), "out", f"{date} differs from the full year")

    hours_with_both = int((pd.to_numeric(frame[P.COL_SOLAR], errors="coerce").notna()
                           & pd.to_numeric(frame[P.COL_WIND], errors="coerce").notna()).sum())
    meta = {
        "description": "Representative CAISO 2023 days bundled with aidc_env (see README.md for provenance)",
        "generator": GENERATOR, "csv": P.BUNDLED_CSV, "csv_sha256": hashlib.sha256(csv_path.read_bytes()).hexdigest(),
        P.META_CAPACITY_KEY: full.renewable_capacity_mw,
        "renewable_capacity_basis": "peak of max(solar_mw, 0) + max(wind_mw, 0) over all hours of the full "
        "2023 year that have both values",
        "source_hours": len(frame), "source_hours_with_renewables": hours_with_both,
        "source_complete_days": len(stats), "source_skipped_days": dict(full.skipped),
        "selection": {"max_days": MAX_DAYS, "days_per_month": DAYS_PER_MONTH, "include": include, "rule": [
            "include days first, each taking a place in its month",
            "negative prices: most negative-price hours, then lowest hourly price, among months without a pick",
            "typical: closest to the month's medians of daily mean renewable and daily price spread "
            "(year standard deviations as units)",
            "high-flexibility: largest daily price spread of the month",
            "ties broken by the earlier date"]},
        "days": [{"date": p.date, "picked_as": p.role, "reason": p.reason, **asdict(stats[p.date])}
                 for p in sorted(picks, key=lambda p: p.date)],
    }
    meta_path = args.out / P.BUNDLED_META
    atomic_write_text(meta_path, dumps_json(meta, indent=2) + "\n")
    readme = args.out / "README.md"
    existing = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    atomic_write_text(readme, with_section(existing, _readme(meta, stats, picks)))

    for path in (csv_path, meta_path):
        text = path.read_text(encoding="utf-8")
        for forbidden in FORBIDDEN_DATA_STRINGS:
            if forbidden in text:
                raise InputError("out", f"{path.name} contains {forbidden!r}")
    write_site_days(args.source, args.out, dates)
    print(f"wrote {len(dates)} days ({len(table)} rows) to {csv_path} and {args.out / BUNDLED_SITE_CSV}; renewable "
          f"capacity {full.renewable_capacity_mw} MW; metadata {meta_path}")
    return 0


def write_site_days(source: Path, out: Path, days: Sequence[str]) -> None:
    """The sites case's table of ``days`` (cell text copied verbatim) and its sidecar of the full year's peaks; checks
    that the bundled loader reads every day as the full year gives it."""
    frame = pd.read_csv(source, dtype=str, keep_default_na=False)
    rows = frame[frame.local_start.str[:10].isin(days)].loc[:, list(SITE_COLUMNS)]
    require(len(rows) >= len(days) * 23, "source", f"{source} lacks some of the {len(days)} bundled days")
    csv_text = rows.to_csv(index=False, lineterminator="\n")
    full = load_site_profiles(source)
    atomic_write_text(out / BUNDLED_SITE_CSV, csv_text)
    meta = {
        "description": "The bundled representative CAISO 2023 days with the three load-zone prices and solar and "
                       "wind apart, for the sites case (aidc_env/site_profiles.py)",
        "generator": GENERATOR, "csv": BUNDLED_SITE_CSV, "csv_sha256": hashlib.sha256(csv_text.encode()).hexdigest(),
        "solar_peak_mw": full.solar_peak_mw, "wind_peak_mw": full.wind_peak_mw,
        "peak_basis": "max of each column (clipped at 0) over every complete day of the full 2023 year",
        "days": list(days),
    }
    atomic_write_text(out / BUNDLED_SITE_META, dumps_json(meta, indent=1))
    check = load_site_profiles()
    require(check.dates() == list(days) and not check.skipped, "out", "the site table does not load all its days")
    for day in days:
        require(all(np.array_equal(getattr(check.day(day), c), getattr(full.day(day), c))
                    for c in SITE_COLUMNS[2:]), "out", f"{day} differs from the source")


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
