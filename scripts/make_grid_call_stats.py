"""Make the bundled history of real grid calls (CAISO Flex Alerts and energy emergencies) and its statistics.

    python scripts/make_grid_call_stats.py --repo GITDIR [--commit C] [--out-dir aidc_env/data]

Source: CAISO's *Grid Emergencies History Report, 1998 to present* (the ISO's public record of every Flex Alert,
Alert / Warning / Stage 1-3 emergency, EEA Watch / EEA 1-3, Restricted Maintenance Operations and Transmission
Emergency notice, with its day, region, time frame and, from about 2016, the time the notice was issued). The PDF is
read from the git directory ``GITDIR`` of the public repository grid-coordination/caiso-flex-alert, which stores
CAISO's file at ``doc/pdf/grid-emergencies-history-report-1998-to-present.pdf`` (nothing is downloaded). Its tables are
read with ``pdfplumber`` (``pip install pdfplumber``; needed only to regenerate these files, not by the package).

Kept: the notices that ask load to come down or announce a supply shortage (Flex Alert / Power Watch, Alert, Warning,
Stage 1-3, 1-hour probable load interruption, VLRP, EEA Watch, EEA 1-3) of 2005 to 2025; dropped: Restricted
Maintenance Operations and Transmission Emergencies (they ask nothing of load), and the years 1998-2004, whose tables
list days without time frames (and 2000-2001 is the energy crisis). Two of the report's table layouts are read:

* 2005-2010: one row per day, one column per notice type, a cell holds ``HHMM-HHMM`` (``#`` Southern, ``##`` Northern
  California) or ``X`` (declared, time not given);
* 2011-2025: one row per notice and day: Date, Day, Region, Time Frame, AWE Event, Reason (the notice's text, with
  "Notice issued at: ..." from about 2016).

Written, each through a temporary file and ``os.replace`` (deterministic: same commit, same bytes):

* ``grid_calls_events.csv``: one row per notice and effective local day (Pacific prevailing time);
* ``grid_calls_stats.json``: provenance, the check against CAISO's own yearly day counts, and the derived parameters
  of a call generator (days per year, months, weekdays, start hour, duration, notice, hours per year).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import pandas as pd

from aidc_env.call_streams import run_lengths

REPOSITORY = "grid-coordination/caiso-flex-alert"
PDF_PATH = "doc/pdf/grid-emergencies-history-report-1998-to-present.pdf"
PUBLISHER = ("California ISO (CAISO), public PDF on caiso.com, file "
             "grid-emergencies-history-report-1998-to-present.pdf; credit: California ISO")
FIRST_YEAR, LAST_YEAR = 2005, 2025
GENERATOR = "scripts/make_grid_call_stats.py"

EVENT_NAMES = {
    # the report's name -> (ours, level). Level: our ordinal of severity (an assumption, see the README section):
    # 0 conservation appeal, 1 day-ahead shortage watch, 2 reserves short / DR programs activated,
    # 3 emergency load management / interruptible load, 4 firm load shed imminent or in progress.
    "flex alert": ("flex_alert", 0), "power watch": ("flex_alert", 0),
    "alert": ("alert", 1), "eea watch": ("eea_watch", 1),
    "warning": ("warning", 2), "stage 1": ("stage1", 2), "eea1": ("eea1", 2), "vlrp": ("vlrp", 2),
    "stage 2": ("stage2", 3), "eea2": ("eea2", 3), "1-hour notification": ("one_hour_notice", 3),
    "stage 3": ("stage3", 4), "eea3": ("eea3", 4),
}
DROPPED = {"rmo", "restricted maintenance operations", "generation rmo", "transmission emergency"}
SUMMARY_COLUMNS = {  # CAISO's yearly day-count tables: column header -> our event name
    "Flex Alert": "flex_alert", "Alert": "alert", "Warning": "warning", "Stage 1 Emergency": "stage1",
    "Stage 2 Emergency": "stage2", "Stage 3 Emergency": "stage3",
    "1-Hour Probable Load Interruptions": "one_hour_notice", "Voluntary Load Reduction Program": "vlrp",
    "EEA Watch": "eea_watch", "EEA1": "eea1", "EEA2": "eea2", "EEA3": "eea3",
}
MONTHS = {m: i for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                      "september", "october", "november", "december"], start=1)}
EVENT_COLUMNS = ["date", "event", "level", "region", "start_local", "end_local", "duration_h", "issued_local",
                 "issued_date", "notice_h", "lead_days", "report_date", "time_frame", "page"]


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", str(repo), *args], check=True, capture_output=True).stdout


def clean(cell: object) -> str:
    return re.sub(r"\s+", " ", str(cell or "")).strip()


# --- parsing of dates and times --------------------------------------------------------------------------------------

def parse_mdy(text: str) -> dt.date | None:
    m = re.match(r"\s*(\d{1,2})/(\d{1,2})/(\d{2,4})\b", text)
    if not m:
        return None
    year = int(m.group(3))
    return dt.date(year + 2000 if year < 100 else year, int(m.group(1)), int(m.group(2)))


def hhmm(hour: int, minute: int) -> str:
    return f"{hour:02d}:{minute:02d}"


def minutes(t: str) -> int:
    hour, minute = map(int, t.split(":"))
    return hour * 60 + minute


def duration_h(start: str, end: str) -> float:
    """Hours from start to end on one day; an end of 23:59 is read as 24:00 (the report's 'to the end of the day')."""
    end_min = 24 * 60 if end == "23:59" else minutes(end)
    if end_min <= minutes(start):  # past midnight (not met among the kept notices, kept for safety)
        end_min += 24 * 60
    return round((end_min - minutes(start)) / 60.0, 4)


def parse_time_frame(text: str, report_date: dt.date | None) -> tuple[list[dt.date], list[str], dt.date | None]:
    """The dates and clock times in a Time Frame cell, in order, and its day marker '(M.D.YYYY)' if any."""
    marker = None
    m = re.search(r"\((\d{1,2})\.(\d{1,2})\.(\d{4})\)", text)
    if m:
        marker = dt.date(int(m.group(3)), int(m.group(1)), int(m.group(2)))
        text = text[:m.start()] + text[m.end():]
    dates: list[tuple[int, dt.date]] = []
    for m in re.finditer(r"\b(\d{4})-(\d{2})-(\d{2})\b", text):
        dates.append((m.start(), dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))))
    text = re.sub(r"\b\d{4}-\d{2}-\d{2}\b", lambda mm: " " * len(mm.group(0)), text)
    for m in re.finditer(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b", text):
        dates.append((m.start(), dt.date(int(m.group(3)), int(m.group(1)), int(m.group(2)))))
    text = re.sub(r"\b\d{1,2}/\d{1,2}/\d{4}\b", lambda mm: " " * len(mm.group(0)), text)
    for m in re.finditer(r"\b(" + "|".join(MONTHS) + r")\s+(\d{1,2})\b", text, flags=re.IGNORECASE):
        if report_date is None:
            raise ValueError(f"a month-day date without a year: {text!r}")
        dates.append((m.start(), dt.date(report_date.year, MONTHS[m.group(1).lower()], int(m.group(2)))))
        text = text[:m.start()] + " " * (m.end() - m.start()) + text[m.end():]
    times: list[tuple[int, str]] = []
    for m in re.finditer(r"\b(\d{1,2}):(\d{2})(?::\d{2})?\s*(AM|PM)?", text, flags=re.IGNORECASE):
        hour, minute = int(m.group(1)), int(m.group(2))
        if m.group(3):
            hour = hour % 12 + (12 if m.group(3).upper() == "PM" else 0)
        times.append((m.start(), hhmm(hour, minute)))
    if not times:
        for m in re.finditer(r"\b(\d{2})(\d{2})\s*-\s*(\d{2})(\d{2})\b", text):
            times.append((m.start(), hhmm(int(m.group(1)), int(m.group(2)))))
            times.append((m.start() + 1, hhmm(int(m.group(3)), int(m.group(4)))))
    return [d for _, d in sorted(dates)], [t for _, t in sorted(times)], marker


ISSUED = re.compile(r"Notice issued at:?\s*\[?\s*(\d{1,2}/\d{1,2}/\d{2,4})\s+(\d{1,2}):(\d{2})", re.IGNORECASE)


def issued_at(reason: str) -> dt.datetime | None:
    m = ISSUED.search(reason)
    if not m:
        return None
    day = parse_mdy(m.group(1))
    return dt.datetime.combine(day, dt.time(int(m.group(2)), int(m.group(3))))


# --- the two table layouts -------------------------------------------------------------------------------------------

def event_row(day: dt.date, name: str, region: str, start: str | None, end: str | None, issued: dt.datetime | None,
              report_date: dt.date | None, time_frame: str, page: int) -> dict:
    event, level = EVENT_NAMES[name]
    issued_date = issued.date() if issued else (report_date if report_date and report_date < day else None)
    row = {"date": day.isoformat(), "event": event, "level": level, "region": region,
           "start_local": start or "", "end_local": end or "",
           "duration_h": duration_h(start, end) if start and end else None,
           "issued_local": issued.strftime("%Y-%m-%d %H:%M") if issued else "",
           "issued_date": issued_date.isoformat() if issued_date else "",
           "notice_h": None, "lead_days": (day - issued_date).days if issued_date else None,
           "report_date": report_date.isoformat() if report_date else "", "time_frame": time_frame, "page": page}
    if issued and start:
        row["notice_h"] = round((dt.datetime.combine(day, dt.time.fromisoformat(start)) - issued).total_seconds()
                                / 3600.0, 4)
    return row


def region_name(text: str) -> str:
    t = clean(text).lower().replace(".", "")
    if t in ("iso", "caiso grid", "statewide", ""):
        return "CAISO"
    if t.startswith("so") or "southern" in t:
        return "Southern CA"
    if t.startswith("no") or "northern" in t:
        return "Northern CA"
    return clean(text)


def read_record_rows(table: list[list], page: int, problems: list[str]) -> list[dict]:
    """2011-2025: Date, Day, Region, Time Frame, AWE Event, Reason."""
    rows: list[dict] = []
    for raw in table:
        cells = [clean(c) for c in raw]
        name = cells[4].lower()
        if cells[0] == "Date" or not name or name in DROPPED:
            continue
        if name not in EVENT_NAMES:
            problems.append(f"page {page}: unknown notice type {cells[4]!r}")
            continue
        report_date = parse_mdy(cells[0])
        reason = "\n".join(str(c or "") for c in raw[5:])
        dates, times, marker = parse_time_frame(cells[3], report_date)
        if len(times) < 2:
            problems.append(f"page {page}: no time frame in {cells[3]!r}")
            continue
        start, end = times[0], times[-1]
        first = dates[0] if dates else report_date
        last = dates[-1] if dates else first
        if marker is not None:  # a multi-day notice listed once per day: the same window on each day
            days = [marker]
        elif last == first:
            days = [first]
        else:
            problems.append(f"page {page}: a multi-day window without day rows {cells[3]!r}")
            continue
        region = region_name(cells[2])
        issued = issued_at(reason)
        for day in days:
            rows.append(event_row(day, name, region, start, end, issued, report_date, cells[3], page))
    return rows


def read_matrix_rows(table: list[list], page: int, year: int, problems: list[str]) -> list[dict]:
    """2005-2010: one row per day, one column per notice type."""
    header = [clean(c).lower() for c in table[0]]
    region_col = header.index("region") if "region" in header else None
    rows: list[dict] = []
    for raw in table[1:]:
        cells = [clean(c) for c in raw]
        day = parse_mdy(cells[0]) if re.match(r"\d{1,2}/\d{1,2}/\d{2,4}$", cells[0].split(" ")[0] or "-") else None
        if day is None or day.year != year:
            continue
        for col, name in enumerate(header):
            name = "flex alert" if name == "power watch" else name
            value = cells[col] if col < len(cells) else ""
            if name not in EVENT_NAMES or not value:
                continue
            region = region_name(cells[region_col]) if region_col is not None else "CAISO"
            if value.endswith("##"):
                region = "Northern CA"
            elif value.endswith("#"):
                region = "Southern CA"
            m = re.match(r"(\d{2})(\d{2})-(\d{2})(\d{2})", value)
            if m:
                start, end = hhmm(int(m.group(1)), int(m.group(2))), hhmm(int(m.group(3)), int(m.group(4)))
            elif value.upper().startswith("X"):
                start = end = None
            else:
                problems.append(f"page {page}: unread cell {value!r} ({name}, {day})")
                continue
            rows.append(event_row(day, name, region, start, end, None, day, value, page))
    return rows


def read_report(pdf_bytes: bytes) -> tuple[pd.DataFrame, dict, list[str], str]:
    try:
        import pdfplumber
    except ImportError:  # pragma: no cover - a regeneration-only dependency
        sys.exit("this script needs pdfplumber: pip install pdfplumber")
    rows: list[dict] = []
    summary: dict[int, dict[str, int]] = defaultdict(dict)
    problems: list[str] = []
    revision = ""
    with pdfplumber.open(io.BytesIO(pdf_bytes)) as pdf:
        for number, page in enumerate(pdf.pages, start=1):
            text = page.extract_text() or ""
            m = re.search(r"Revision Date:\s*(\d{1,2}/\d{1,2}/\d{4})", text)
            if m and not revision:
                revision = parse_mdy(m.group(1)).isoformat()
            year_m = re.search(r"Record For (\d{4})", text)
            for table in page.extract_tables():
                header = [clean(c) for c in table[0]]
                if header[:1] == [""] and "Flex Alert" in header:  # a yearly summary of days per notice type
                    names = [next((v for k, v in SUMMARY_COLUMNS.items() if h.startswith(k[:30])), None)
                             for h in header]
                    for line in table[1:]:
                        cells = [clean(c) for c in line]
                        if re.fullmatch(r"\d{4}", cells[0]):
                            for name, value in zip(names, cells):
                                if name and value.isdigit():
                                    summary[int(cells[0])][name] = summary[int(cells[0])].get(name, 0) + int(value)
                elif len(header) == 6 and (header[0] == "Date" or parse_mdy(header[0])) and header[4] != "":
                    rows += read_record_rows(table, number, problems)
                elif header[:2] == ["Date", "Day"] and ("RMO" in header or "Region" in header) and year_m:
                    rows += read_matrix_rows(table, number, int(year_m.group(1)), problems)
    events = pd.DataFrame(rows, columns=EVENT_COLUMNS)
    events = events[events["date"].str[:4].astype(int).between(FIRST_YEAR, LAST_YEAR)]
    events = (events.drop_duplicates(subset=["date", "event", "region", "start_local", "end_local"])
              .sort_values(["date", "level", "event", "start_local", "end_local", "page"], kind="mergesort")
              .reset_index(drop=True))
    return events, {y: dict(sorted(v.items())) for y, v in sorted(summary.items())}, problems, revision


# --- statistics ------------------------------------------------------------------------------------------------------

def histogram(values: list, ndigits: int | None = None) -> dict[str, int]:
    counts = Counter(round(v, ndigits) if ndigits is not None else v for v in values)
    return {str(k): counts[k] for k in sorted(counts)}


def describe(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    s = pd.Series(values, dtype=float)
    return {"n": int(s.size), "mean": round(float(s.mean()), 3), "median": round(float(s.median()), 3),
            "min": round(float(s.min()), 3), "max": round(float(s.max()), 3)}


def day_windows(events: pd.DataFrame) -> pd.DataFrame:
    """One row per call day: the earliest start and latest end of that day's timed notices, and the day's notice."""
    out = []
    for day, group in events.groupby("date", sort=True):
        timed = group[group["start_local"] != ""]
        start = min(timed["start_local"]) if len(timed) else ""
        end = max(timed["end_local"].replace("23:59", "24:00")) if len(timed) else ""
        issued = group["issued_local"][group["issued_local"] != ""]
        issued_dates = group["issued_date"][group["issued_date"] != ""]
        earliest = min(issued) if len(issued) else ""
        first_day = min(issued_dates) if len(issued_dates) else ""
        if earliest and earliest[:10] != first_day:  # an earlier notice is known by its date only: no hours
            earliest = ""
        out.append({"date": day, "start_local": start, "end_local": "23:59" if end == "24:00" else end,
                    "duration_h": duration_h(start, "23:59" if end == "24:00" else end) if start else None,
                    "issued_local": earliest, "issued_date": first_day,
                    "notice_h": round((dt.datetime.fromisoformat(f"{day} {start}")
                                       - dt.datetime.fromisoformat(earliest)).total_seconds() / 3600.0, 4)
                    if earliest and start else None,
                    "lead_days": (dt.date.fromisoformat(day) - dt.date.fromisoformat(first_day)).days
                    if first_day else None,
                    "max_level": int(group["level"].max()), "events": "+".join(sorted(set(group["event"])))})
    return pd.DataFrame(out)


def family_stats(days: pd.DataFrame, years: list[int]) -> dict:
    """Generator parameters from one row per call day (date, start_local, end_local, duration_h, notice)."""
    dates = pd.to_datetime(days["date"])
    per_year = {str(y): int((dates.dt.year == y).sum()) for y in years}
    timed = days[days["start_local"] != ""]
    start_hours = [minutes(t) / 60.0 for t in timed["start_local"]]
    durations = [float(v) for v in timed["duration_h"]]
    untimed_years = set(dates[days["start_local"] == ""].dt.year)
    hours_per_year = {str(y): None if y in untimed_years else
                      round(float(timed["duration_h"][pd.to_datetime(timed["date"]).dt.year == y].sum()), 3)
                      for y in years}
    known_hours = [v for v in hours_per_year.values() if v is not None]
    notice = [float(v) for v in days["notice_h"].dropna()]
    lead = [int(v) for v in days["lead_days"].dropna()]
    counts = pd.Series(list(per_year.values()), dtype=float)
    return {
        "days": len(days),
        "days_per_year": per_year,
        "days_per_year_mean": round(float(counts.mean()), 3),
        "days_per_year_var": round(float(counts.var(ddof=1)), 3) if len(counts) > 1 else None,
        "years_with_none": int((counts == 0).sum()),
        "month_share": {str(m): round(float((dates.dt.month == m).mean()), 4) for m in range(1, 13)},
        "weekday_share_mon0": {str(d): round(float((dates.dt.day_of_week == d).mean()), 4) for d in range(7)},
        "timed_days": len(timed),
        "start_hour_hist": histogram([int(h) for h in start_hours]),
        "start_hour": describe(start_hours),
        "end_hour_hist": histogram([int(minutes(t) // 60) if t != "23:59" else 24 for t in timed["end_local"]]),
        "duration_h": describe(durations),
        "duration_h_hist_rounded": histogram([round(d) for d in durations]),
        "hours_per_year": hours_per_year,
        "hours_per_year_mean": round(sum(known_hours) / len(known_hours), 3) if known_hours else None,
        "hours_per_year_years": len(known_hours),
        "notice_h": describe(notice),
        "notice_h_hist_rounded": histogram([round(v) for v in notice]),
        "lead_days_hist": histogram(lead),
        "lead_days_known": len(lead),
        "consecutive_runs_hist": histogram(run_lengths(list(dates.dt.date))),
    }


def check_counts(events: pd.DataFrame, summary: dict) -> dict:
    ours = events.assign(year=events["date"].str[:4].astype(int)).groupby(["year", "event"])["date"].nunique()
    compared, mismatches = 0, []
    for year, names in summary.items():
        if not FIRST_YEAR <= year <= LAST_YEAR or (year == 2022 and names.get("flex_alert", 0) == 0
                                                   and "eea_watch" not in names):
            continue  # the older summary's 2022 row is all zero: 2022 moved to the newer summary
        for name, value in names.items():
            got = int(ours.get((year, name), 0))
            compared += 1
            if got != value:
                mismatches.append({"year": year, "event": name, "caiso_days": value, "our_days": got})
    return {"compared": compared, "matching": compared - len(mismatches), "mismatches": mismatches}


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the data files are read by everyone
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=GENERATOR, description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help=f"git directory of {REPOSITORY}")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--out-dir", type=Path, default=Path("aidc_env/data"))
    args = parser.parse_args(argv)

    commit = git(args.repo, "rev-parse", args.commit).decode().strip()
    blob = git(args.repo, "rev-parse", f"{commit}:{PDF_PATH}").decode().strip()
    events, summary, problems, revision = read_report(git(args.repo, "show", f"{commit}:{PDF_PATH}"))
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    years = list(range(FIRST_YEAR, LAST_YEAR + 1))
    timed_years = list(range(2011, LAST_YEAR + 1))
    flex = events[events["event"] == "flex_alert"]
    flex_days = day_windows(flex)
    emergency = events[events["level"] >= 2]
    emergency_days = day_windows(emergency)
    calls = events[(events["event"] == "flex_alert") | (events["level"] >= 2)]
    call_days = day_windows(calls)

    def in_timed(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[frame["date"].str[:4].astype(int) >= timed_years[0]]

    stats = {
        "generator": GENERATOR,
        "source": {"document": "CAISO, Grid Emergencies History Report, 1998 to present", "revision_date": revision,
                   "publisher": PUBLISHER, "repository": REPOSITORY, "commit": commit, "path": PDF_PATH,
                   "blob": blob, "timezone": "America/Los_Angeles (Pacific prevailing time, as the notices)"},
        "years": [FIRST_YEAR, LAST_YEAR],
        "levels": {"0": "flex_alert (Power Watch before 2007): public conservation appeal",
                   "1": "alert (to 2021), eea_watch (from 2022): shortage forecast, usually the day before",
                   "2": "warning, stage1, vlrp (to 2021), eea1 (from 2022): reserves short, DR programs activated",
                   "3": "stage2, one_hour_notice (to 2021), eea2 (from 2022): emergency load management",
                   "4": "stage3 (to 2021), eea3 (from 2022): firm load shed imminent or in progress"},
        "check_against_caiso_yearly_day_counts": check_counts(events, summary),
        "families": {
            "flex_alert": {"definition": "days with a Flex Alert (before 2007: Power Watch): CAISO's public appeal to "
                                         "cut consumption in a stated window",
                           f"{FIRST_YEAR}-{LAST_YEAR}": family_stats(flex_days, years),
                           f"{timed_years[0]}-{LAST_YEAR}": family_stats(in_timed(flex_days), timed_years)},
            "emergency": {"definition": "days with a notice of level >= 2 (Warning, Stage 1-3, EEA 1-3, VLRP, 1-hour "
                                        "probable load interruption): demand-response programs or interruptible "
                                        "load called; window = earliest start to latest end of the day's notices",
                          f"{FIRST_YEAR}-{LAST_YEAR}": family_stats(emergency_days, years),
                          f"{timed_years[0]}-{LAST_YEAR}": family_stats(in_timed(emergency_days), timed_years)},
            "watch": {"definition": "days with a notice of level 1 (Alert to 2021, EEA Watch from 2022): a shortage "
                                    "forecast, usually issued the afternoon before; window as stated in the notice",
                      f"{FIRST_YEAR}-{LAST_YEAR}": family_stats(day_windows(events[events["level"] == 1]), years),
                      f"{timed_years[0]}-{LAST_YEAR}": family_stats(
                          in_timed(day_windows(events[events["level"] == 1])), timed_years)},
            "any_call": {"definition": "days with a Flex Alert or a notice of level >= 2; window = earliest start to "
                                       "latest end of the day's notices of these kinds",
                         f"{FIRST_YEAR}-{LAST_YEAR}": family_stats(call_days, years),
                         f"{timed_years[0]}-{LAST_YEAR}": family_stats(in_timed(call_days), timed_years)},
        },
        "call_days": [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()}
                      for record in call_days.to_dict(orient="records")],
    }
    out = args.out_dir
    buffer = io.StringIO()
    events.to_csv(buffer, index=False, lineterminator="\n", float_format="%.4g")
    write_atomic(out / "grid_calls_events.csv", buffer.getvalue().encode())
    write_atomic(out / "grid_calls_stats.json",
                 (json.dumps(stats, indent=1, ensure_ascii=False, default=lambda v: None) + "\n").encode())
    check = stats["check_against_caiso_yearly_day_counts"]
    print(f"{len(events)} notices, {len(call_days)} call days {FIRST_YEAR}-{LAST_YEAR}; CAISO's day counts: "
          f"{check['matching']} of {check['compared']} match -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
