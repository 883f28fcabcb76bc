"""experiments.supplied_price: an hourly price table joined into a forecast CSV as its supplied price forecast."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aidc_env.errors import EXIT_BAD_INPUT, run_cli
from aidc_env.forecasts import load_forecasts
from experiments.supplied_price import main
from tests.test_forecasts import _rows, _write


def _prices(tmp_path, rows, name="dam.csv"):
    path = tmp_path / name
    pd.DataFrame(rows, columns=["Date", "price", "zone"]).to_csv(path, index=False)
    return path


def _hours(first: str, days: int, zone: str, value) -> list[tuple[str, float, str]]:
    """Rows of local clock hours 0..23 of ``days`` days, stamped as the CAISO day-ahead file stamps them."""
    stamps = pd.date_range(first, periods=24 * days, freq="h")
    return [(t.strftime("%-m/%-d/%Y %-I:%M:%S %p"), value(t), zone) for t in stamps]


def test_each_forecast_hour_takes_its_clock_hours_price(tmp_path, capsys):
    """By local clock hour; one zone of several; a repeated clock hour averaged; a day without every price has no
    supplied price when read; the load, solar and wind columns untouched."""
    forecasts = _write(tmp_path, _rows("2023-11-04", "2023-11-06"))
    rows = _hours("2023-11-04", 2, "SCE", lambda t: 10.0 * t.day + t.hour) + _hours("2023-11-04", 2, "PGAE",
                                                                                     lambda t: -1.0)
    rows.append(("11/5/2023 1:00:00 AM", 60.0, "SCE"))  # the day DST ends: 01:00 twice
    rows.append(("11/5/2023 2:00:00 AM", "", "SCE"))  # an empty price: left out, not averaged in
    out = tmp_path / "with_price.csv"
    argv = ["--forecasts", str(forecasts), "--prices", str(_prices(tmp_path, rows)), "--time-column", "Date",
            "--price-column", "price", "--where", "zone=SCE", "--out", str(out)]
    assert run_cli(main, argv) == 0
    assert "49 of 73 forecast hours carry a supplied price" in capsys.readouterr().out  # 24 + 25 rows (01:00 twice)
    priced = load_forecasts(out)
    assert priced.dates() == ["2023-11-04", "2023-11-05", "2023-11-06"]
    assert priced.supplied_dates() == ["2023-11-04", "2023-11-05"]
    assert priced.supplied_skipped["2023-11-06"] == "price_forecast_usd_per_mwh missing in 24 of 24 hours"
    np.testing.assert_array_equal(priced.supplied_price("2023-11-04"), 40.0 + np.arange(24))
    fall = priced.supplied_price("2023-11-05")
    assert fall[1] == (51.0 + 60.0) / 2 and fall[0] == 50.0 and fall[2] == 52.0 and fall[23] == 73.0
    bare = load_forecasts(forecasts)
    for date in priced.dates():
        np.testing.assert_array_equal(priced.day(date).load_forecast_mw, bare.day(date).load_forecast_mw)


@pytest.mark.parametrize(("edit", "field"), [
    (["--where", "zone"], "where"),
    (["--where", "zone=NOPE"], "where"),
    (["--price-column", "prix"], "prix"),
    (["--time-column", "price"], "price-column"),
    (["--time-column", "zone"], "zone"),
    (["--prices", "missing.csv"], "missing.csv"),
    (["--out", "SAME"], "out"),
    (["--price-column", "zone"], "zone"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, edit, field):
    forecasts = _write(tmp_path, _rows("2023-06-01", "2023-06-01"))
    prices = _prices(tmp_path, _hours("2023-06-01", 1, "SCE", lambda t: 1.0))
    argv = {"--forecasts": str(forecasts), "--prices": str(prices), "--time-column": "Date",
            "--price-column": "price", "--out": str(tmp_path / "out.csv")}
    flags = [a for k, v in argv.items() for a in (k, v)]
    edit = [str(forecasts) if a == "SAME" else str(tmp_path / a) if a == "missing.csv" else a for a in edit]
    assert run_cli(main, flags + edit) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err, err
    assert not (tmp_path / "out.csv").exists()


def test_prices_on_no_forecast_hour_are_refused(tmp_path, capsys):
    forecasts = _write(tmp_path, _rows("2023-06-01", "2023-06-01"))
    prices = _prices(tmp_path, _hours("2024-06-01", 1, "SCE", lambda t: 1.0))
    assert run_cli(main, ["--forecasts", str(forecasts), "--prices", str(prices), "--time-column", "Date",
                          "--price-column", "price", "--out", str(tmp_path / "out.csv")]) == EXIT_BAD_INPUT
    assert "no hour of" in capsys.readouterr().err
