"""Join an hourly price series into a day-ahead forecast CSV as its supplied price forecast.

The package forecasts the next day's price itself (:mod:`aidc_env.price_forecast`) unless the forecast CSV carries
a ``price_forecast_usd_per_mwh`` column and the run asks for it (``--price-forecast supplied``). This command
writes that column from any hourly table of prices stamped in local clock time, e.g. the CAISO day-ahead market's
LMP of the site's load aggregation point::

    python -m experiments.supplied_price --forecasts FORECASTS.csv --prices DAM.csv \\
        --time-column Date --price-column price --where zone=SCE --out FORECASTS_WITH_DAM.csv

Each forecast row takes the price of its local clock hour (the date and hour of its ``local_start``). Price rows that
share a clock hour are averaged: the repeated 01:00 of the day DST ends, and the overlap of files concatenated from
several downloads. Forecast hours without a price keep an empty cell: their days keep their forecasts but have no
supplied price when read (:mod:`aidc_env.forecasts`). The forecast CSV's canonical columns are copied as they are (other
columns are left out). The output is written atomically and must not be the input. ``--forecasts`` takes a dataset name
too (:mod:`aidc_env.datasets`); the packaged ``caiso-2023-dayahead`` already carries the CAISO day-ahead market's LMP of
SCE, PG&E and SDG&E (``scripts/make_dayahead_lmp.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from aidc_env import datasets, hourly
from aidc_env.errors import CliParser, InputError, require, run_cli
from aidc_env.forecasts import COL_PRICE_FC, REQUIRED_COLUMNS
from aidc_env.io import atomic_path, check_output_file

CLOCK_HOUR_CHARS = len("YYYY-MM-DD HH")
"""The leading characters of ``local_start`` that name its local date and clock hour."""


def clock_hour_prices(prices: pd.DataFrame, time_column: str, price_column: str,
                      where: dict[str, str] | None = None, time_format: str | None = None) -> pd.Series:
    """The mean price of each local clock hour (index ``YYYY-MM-DD HH``) of a table of hourly prices.

    ``where`` keeps the rows whose named columns hold the given text (e.g. one zone of several); a row with an empty
    price is left out. InputError naming the column if a column is missing, a time does not parse, or a price is neither
    empty nor a finite number.
    """
    require(time_column != price_column, "price-column", f"is the time column {time_column!r} too")
    for column in (time_column, price_column, *(where or {})):
        require(column in prices.columns, column,
                f"not a column of the prices (columns: {', '.join(map(str, prices.columns[:10]))})")
    rows = prices
    for column, value in (where or {}).items():
        rows = rows[rows[column].astype(str).str.strip() == value]
    require(len(rows) > 0, "where", f"no price row has {', '.join(f'{k}={v}' for k, v in (where or {}).items())}")
    try:
        times = pd.to_datetime(rows[time_column].astype(str).str.strip(), format=time_format or "mixed")
    except (ValueError, TypeError) as err:
        raise InputError(time_column, f"not a local time ({' '.join(str(err).split())})") from None
    require(times.dt.tz is None, time_column, "holds UTC offsets or zones: give the local clock time of each hour")
    text = rows[price_column].astype(str).str.strip()
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
    given = (text != "").to_numpy()
    bad = given & ~np.isfinite(values)
    if bad.any():
        raise InputError(price_column, f"{int(bad.sum())} prices are not finite numbers, e.g. {text[bad].iloc[0]!r}")
    hours = times.dt.strftime("%Y-%m-%d %H").to_numpy()
    return pd.Series(values[given]).groupby(hours[given]).mean()  # an empty cell: that hour has no price


def with_supplied_price(forecasts: pd.DataFrame, prices: pd.Series) -> pd.DataFrame:
    """The forecast table (read as text) with :data:`~aidc_env.forecasts.COL_PRICE_FC` from ``prices`` (by local clock
    hour; empty where there is none). An existing column of that name is replaced."""
    keys = forecasts[hourly.COL_LOCAL_START].str.strip().str[:CLOCK_HOUR_CHARS]
    joined = keys.map(prices)
    out = forecasts.copy()
    out[COL_PRICE_FC] = joined.map(lambda v: "" if pd.isna(v) else repr(float(v)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m experiments.supplied_price", description=__doc__.split("\n")[0])
    parser.add_argument("--forecasts", required=True, metavar="NAME|CSV",
                        help="day-ahead forecast CSV (load, solar, wind) or dataset name (e.g. caiso-2023-dayahead)")
    parser.add_argument("--prices", required=True, help="CSV of hourly prices ($/MWh) stamped in local clock time")
    parser.add_argument("--time-column", required=True, help="the column of the local start of each hour")
    parser.add_argument("--price-column", required=True, help="the column of the price ($/MWh)")
    parser.add_argument("--time-format", help="strftime format of the times (default: inferred per row)")
    parser.add_argument("--where", action="append", default=[], metavar="COLUMN=VALUE",
                        help="keep only the price rows whose COLUMN holds VALUE (repeatable), e.g. zone=SCE")
    parser.add_argument("--out", required=True, help="the forecast CSV to write, with the supplied price column")
    args = parser.parse_args(argv)
    where = {}
    for condition in args.where:
        column, equals, value = condition.partition("=")
        require(bool(equals) and bool(column.strip()), "where", f"{condition!r} is not COLUMN=VALUE")
        where[column.strip()] = value.strip()
    target = Path(args.out)
    with datasets.source_file(args.forecasts, datasets.FORECASTS) as (source, label, _):
        require(not target.exists() or not target.samefile(source), "out", "must not be the --forecasts file itself")
        check_output_file(target, "out")
        frame = hourly.read_hourly_csv(source, label, REQUIRED_COLUMNS, "forecasts")
    table = hourly.read_hourly_csv(args.prices, args.prices, [args.time_column, args.price_column, *where], "prices")
    prices = clock_hour_prices(table, args.time_column, args.price_column, where, args.time_format)
    out = with_supplied_price(frame, prices)
    priced = int((out[COL_PRICE_FC] != "").sum())
    require(priced > 0, "prices", f"no hour of {args.prices} falls on an hour of {label}")
    with atomic_path(target) as tmp:
        out.to_csv(tmp, index=False)
    print(f"wrote {target}: {priced} of {len(out)} forecast hours carry a supplied price "
          f"({len(prices)} clock hours of prices, {prices.index.min()}..{prices.index.max()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
