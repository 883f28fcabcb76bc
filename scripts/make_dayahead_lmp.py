"""Make the packaged day-ahead table: the CAISO day-ahead forecasts with the day-ahead market's LMP of three zones.

    python scripts/make_dayahead_lmp.py --repo GITDIR [--commit C]
        [--forecasts CAISO/caiso_2023_dayahead_forecast_hourly.csv]
        [--out aidc_env/data/caiso_2023_dayahead_hourly.csv.gz]

``GITDIR`` is a git directory of the public repository nmadev/CAISO-EnergyStorage (e.g. a bare clone); its file
``src/data/CAISO_DAP.csv`` (columns ``Date,price,zone``: the CAISO day-ahead LMP in $/MWh of the load zones PGAE, SCE,
SDGE and VEA, hourly, stamped with the local start of the hour as ``6/1/2023 12:00:00 AM``, from 2023-06-01) is read at
commit ``C`` (default HEAD) with ``git show``; nothing else of that repository is used.

Each row of the forecast CSV keeps its text byte for byte and gains the day-ahead LMP of its local clock hour
(:func:`experiments.supplied_price.clock_hour_prices`; empty where there is none) of the zones in :data:`ZONE_COLUMNS`:
SCE's is the supplied price forecast :mod:`aidc_env.forecasts` reads (``--price-forecast supplied``). The output is gzip
(no name, time 0: the same input gives the same bytes); the script checks that it loads with exactly the forecast days
(and skipped days) of its input.
"""

from __future__ import annotations

import argparse
import gzip
import io
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from aidc_env import hourly
from aidc_env.errors import InputError, require, run_cli
from aidc_env.forecasts import COL_PRICE_FC, REQUIRED_COLUMNS, parse_forecasts_frame
from aidc_env.io import atomic_write_bytes
from experiments.supplied_price import clock_hour_prices, with_supplied_price

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FORECASTS = REPO_ROOT.parent / "shared" / "data" / "caiso" / "caiso_2023_dayahead_forecast_hourly.csv"
DEFAULT_OUT = REPO_ROOT / "aidc_env" / "data" / "caiso_2023_dayahead_hourly.csv.gz"
REPOSITORY = "nmadev/CAISO-EnergyStorage"
DAP_PATH = "src/data/CAISO_DAP.csv"
DAP_TIME, DAP_PRICE, DAP_ZONE = "Date", "price", "zone"
DAP_TIME_FORMAT = "%m/%d/%Y %I:%M:%S %p"
ZONE_COLUMNS = {"SCE": COL_PRICE_FC, "PGAE": "price_forecast_pge_usd_per_mwh",
                "SDGE": "price_forecast_sdge_usd_per_mwh"}
"""The day-ahead file's zone -> the column written (SCE first: the supplied price forecast)."""


def git_show(repo: Path, commit: str, path: str) -> bytes:
    """The bytes of ``path`` at ``commit`` in the git directory ``repo``; InputError naming repo if git fails."""
    try:
        return subprocess.run(["git", "--git-dir", str(repo), "show", f"{commit}:{path}"], check=True,
                              capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", b"") or b""
        raise InputError("repo", f"cannot read {commit}:{path} from {repo} "
                         f"({' '.join(detail.decode(errors='replace').split()) or err})") from None


def resolved_commit(repo: Path, commit: str) -> str:
    """The full hash of ``commit`` in ``repo``; InputError naming commit if it is none."""
    try:
        out = subprocess.run(["git", "--git-dir", str(repo), "rev-parse", "--verify", f"{commit}^{{commit}}"],
                             check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        raise InputError("commit", f"{commit!r} is not a commit of {repo}") from None
    return out.strip()


def lmp_columns(forecasts: pd.DataFrame, dap: pd.DataFrame) -> dict[str, pd.Series]:
    """Per written column, the text of each forecast row's day-ahead LMP ("" where there is none)."""
    columns = {}
    for zone, column in ZONE_COLUMNS.items():
        prices = clock_hour_prices(dap, DAP_TIME, DAP_PRICE, {DAP_ZONE: zone}, DAP_TIME_FORMAT)
        columns[column] = with_supplied_price(forecasts, prices)[COL_PRICE_FC]
    return columns


def joined_text(raw: str, columns: dict[str, pd.Series]) -> str:
    """The forecast CSV's text with ``columns`` appended to every line (its own text unchanged)."""
    lines = raw.split("\n")
    require(lines[-1] == "" and "\r" not in raw, "forecasts", "expected a CSV with LF line ends and a final one")
    header, rows = lines[0], lines[1:-1]
    require(all(len(c) == len(rows) for c in columns.values()), "forecasts",
            "a cell holds a line break: the rows cannot be extended line by line")
    require(not set(columns).intersection(header.split(",")), "forecasts",
            f"already has a day-ahead LMP column ({', '.join(columns)}): give the forecast CSV without them")
    cells = list(zip(*(c.tolist() for c in columns.values())))
    out = [",".join([header, *columns])] + [",".join([row, *extra]) for row, extra in zip(rows, cells)]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/make_dayahead_lmp.py", description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help=f"git directory of {REPOSITORY}")
    parser.add_argument("--commit", default="HEAD", help="commit of the repository to read (default: HEAD)")
    parser.add_argument("--forecasts", type=Path, default=DEFAULT_FORECASTS,
                        help="the CAISO day-ahead forecast CSV (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the gzip CSV to write (default: %(default)s)")
    args = parser.parse_args(argv)
    commit = resolved_commit(args.repo, args.commit)
    dap = pd.read_csv(io.BytesIO(git_show(args.repo, commit, DAP_PATH)), dtype=str, keep_default_na=False,
                      na_filter=False)
    raw = args.forecasts.read_bytes().decode("utf-8")
    frame = hourly.read_hourly_csv(io.StringIO(raw), str(args.forecasts), REQUIRED_COLUMNS, "forecasts")
    columns = lmp_columns(frame, dap)
    text = joined_text(raw, columns)
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=buffer, mtime=0) as handle:
        handle.write(text.encode("utf-8"))
    atomic_write_bytes(args.out, buffer.getvalue())

    # self-check: the written table gives the input's forecast days, and the SCE price as its supplied price
    before = parse_forecasts_frame(frame, "check")
    after = parse_forecasts_frame(hourly.read_hourly_csv(args.out, "check", REQUIRED_COLUMNS, "forecasts",
                                                         (COL_PRICE_FC,)), "check")
    require(dict(after.days) == dict(before.days) and dict(after.skipped) == dict(before.skipped), "out",
            "the written table's forecast days differ from the input's")
    priced = after.supplied_dates()
    print(f"read {REPOSITORY} {DAP_PATH} at {commit}")
    for column, values in columns.items():
        hours = int((values != "").sum())
        print(f"  {column}: {hours} of {len(values)} hours")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes): {len(after.days)} forecast days, "
          f"{len(priced)} with a complete supplied price ({priced[0]} to {priced[-1]})")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
