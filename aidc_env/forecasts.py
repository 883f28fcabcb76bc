"""Day-ahead load, solar and wind forecasts by local calendar day (CAISO 2023).

A *forecast source* is a CSV with one row per hour::

    timestamp_utc,local_start,solar_forecast_mw,wind_forecast_mw,load_forecast_mw[,price_forecast_usd_per_mwh][,...]
    2023-06-12T07:00:00Z,2023-06-12 00:00-0700,0.0,1421.0,24514.0

It follows the conventions of :mod:`aidc_env.profiles` and is read by the same code (:mod:`aidc_env.hourly`): local
calendar days, every hour indexed by its local clock hour 0..23, the 23-hour DST day holding clock hour 01 over the
skipped 02, the 25-hour day averaging its two 01:00 rows; a day with any missing or non-numeric value or a wrong set of
rows is *skipped* (listed in :attr:`ForecastSet.skipped` with the reason); a malformed file raises
:class:`~aidc_env.errors.InputError` naming the column and the file line.

**A supplied price forecast** (optional column ``price_forecast_usd_per_mwh``, $/MWh): the price of hour h
of day d as it was known at d − 1's issue time, e.g. the day-ahead market's LMP of the site's node or the
operator's own forecaster. With ``price_source="supplied"`` (``--price-forecast supplied`` on evaluate.py and
train.py) it replaces the package's gradient-boosting forecaster (:mod:`aidc_env.price_forecast`). When the
column is present, a day with all 24 hours of it has a supplied price (:meth:`ForecastSet.supplied_price`); a day
with a missing cell keeps its load, solar and wind forecasts but has none (listed in
:attr:`ForecastSet.supplied_skipped` with the reason), so adding the column never changes the days a run on the
model sees. A cell beyond :data:`~aidc_env.limits.MAX_PRICE_USD_PER_MWH` in magnitude is a data error. Nothing
here can check *when* a supplied value was known; a column written after the fact (e.g. the realised price) is a
relaxation, not a forecast. The CAISO day-ahead market publishes its prices at about 13:00 of d − 1, three hours
after :data:`ISSUE_HOUR`: say when the supplied price is known with ``price_issue_hour``
(``--price-issue-hour 13``; :attr:`aidc_env.information.Forecast.price_issue_hour`), or runs issue it with the
other forecasts, at :data:`ISSUE_HOUR`.

**Supplied prices of other price nodes** (optional columns ``price_forecast_pge_usd_per_mwh`` and
``price_forecast_sdge_usd_per_mwh``: :data:`NODE_PRICE_FC_COLUMNS`): the same for the sites case's ``PGE`` and
``SDGE`` nodes (``price_forecast_usd_per_mwh`` is ``SCE``'s), day by day as above.
:meth:`ForecastSet.at_node` is the forecast set whose supplied price is a node's.

**Timing.** The forecasts of day d are those of the CAISO day-ahead market, published before it
closes at 10:00 local on d − 1 (:data:`ISSUE_HOUR`): a policy may use them from that time on.

**Renewable shape.** The forecast is for the SP15 zone, the actuals of the profile source are
CAISO-wide, so megawatts do not compare (the data README: the actuals' mean is 1.35× the forecast's).
The forecast shape is made comparable to :meth:`aidc_env.profiles.DayProfile.renewable_shape` by one
scale factor *fitted on training days only* (:func:`fit_renewable_scale`: ratio of the mean actual
solar + wind to the mean forecast solar + wind over the training hours; mean-preserving, so the
renewable energy a plan expects is unbiased, and the same statistic as the README's 1.35 so it can be
checked against it) and the profile set's own capacity::

    shape_fc = clip(scale · (max(solar_fc, 0) + max(wind_fc, 0)) / renewable_capacity_mw, 0, 1)

A site's plant (:mod:`aidc_env.sites`: ``solar``, ``wind``, ``solar+wind`` or ``none``) has the shape of
:func:`aidc_env.site_profiles.plant_shape` from the forecast solar and wind, each scaled by its own factor fitted
the same way (``fit_renewable_scale(..., plant="solar")``, ``"wind"``) and normalised by the same peaks as the
actuals (:class:`PlantForecast`).

**Sources.** :func:`load_forecasts` takes a packaged dataset's name (:mod:`aidc_env.datasets`:
``caiso-2023-dayahead``, these forecasts with the CAISO day-ahead market's LMP of SCE as the supplied price, and of
PG&E and SDG&E as the other nodes') or a path to a CSV (gzip too).

Command line: ``python -m aidc_env.forecasts --forecasts NAME|CSV [--json]`` summarises the coverage.
"""

from __future__ import annotations

import os
from types import MappingProxyType
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from aidc_env import datasets, hourly
from aidc_env.errors import CliParser, InputError, require, run_cli
from aidc_env.information import ISSUE_HOUR
from aidc_env.limits import MAX_PRICE_USD_PER_MWH
from aidc_env.profiles import ProfileSet
from aidc_env.site_profiles import NO_PLANT, PLANTS, SOLAR, SOLAR_WIND, WIND, SiteProfileSet, plant_shape

COL_SOLAR_FC = "solar_forecast_mw"
COL_WIND_FC = "wind_forecast_mw"
COL_LOAD_FC = "load_forecast_mw"
FORECAST_COLUMNS = (COL_SOLAR_FC, COL_WIND_FC, COL_LOAD_FC)
REQUIRED_COLUMNS = (hourly.COL_TIMESTAMP_UTC, hourly.COL_LOCAL_START, *FORECAST_COLUMNS)
"""The canonical columns; a forecast CSV may have more, which are ignored (but :data:`COL_PRICE_FC`)."""
COL_PRICE_FC = "price_forecast_usd_per_mwh"
"""The optional column of a supplied day-ahead price forecast ($/MWh); read when present."""
COL_PRICE_FC_PGE = "price_forecast_pge_usd_per_mwh"
COL_PRICE_FC_SDGE = "price_forecast_sdge_usd_per_mwh"
NODE_PRICE_FC_COLUMNS: Mapping[str, str] = MappingProxyType({"SCE": COL_PRICE_FC, "PGE": COL_PRICE_FC_PGE,
                                                             "SDGE": COL_PRICE_FC_SDGE})
"""Price node (:data:`aidc_env.site_profiles.PRICE_NODES`) -> the optional column of its supplied price forecast."""
DEFAULT_PRICE_NODE = "SCE"
"""The node of :data:`COL_PRICE_FC`: the supplied price of the day model and of :attr:`ForecastSet.supplied_prices`."""
PRICE_FC_COLUMNS = tuple(NODE_PRICE_FC_COLUMNS.values())
PRICE_FC_BOUNDS = {column: MAX_PRICE_USD_PER_MWH for column in PRICE_FC_COLUMNS}
"""Largest |supplied price| (the profiles' bound on a price; reasons in aidc_env/limits.py)."""

MAX_SKIPPED_SHOWN = 20
"""Longest list of skipped days the text summary prints in full (the file has ~118 uncovered days)."""


@dataclass(frozen=True, eq=False)
class DayForecast(hourly.HourlyDay):
    """The day-ahead forecasts of one local calendar day, by local clock hour 0..23 (MW, read-only)."""

    value_columns = FORECAST_COLUMNS

    date: str
    solar_forecast_mw: np.ndarray
    wind_forecast_mw: np.ndarray
    load_forecast_mw: np.ndarray
    hours_in_day: int = hourly.HOURS_PER_DAY

    def renewable_mw(self) -> np.ndarray:
        """Forecast solar plus wind, each clipped at 0 (MW, SP15 zone), shape (24,)."""
        return np.maximum(self.solar_forecast_mw, 0.0) + np.maximum(self.wind_forecast_mw, 0.0)

    def net_load_mw(self) -> np.ndarray:
        """Forecast load minus forecast solar and wind (MW), shape (24,)."""
        return self.load_forecast_mw - self.solar_forecast_mw - self.wind_forecast_mw

    def renewable_shape(self, capacity_mw: float, scale: float) -> np.ndarray:
        """``scale`` · :meth:`renewable_mw` / ``capacity_mw`` clipped to [0, 1] (see the module docstring)."""
        capacity = hourly.require_positive(capacity_mw, "capacity_mw")
        factor = hourly.require_positive(scale, "renewable_scale")
        return np.clip(factor * self.renewable_mw() / capacity, 0.0, 1.0)


@dataclass(frozen=True, eq=False)
class DayPriceForecast(hourly.HourlyDay):
    """A supplied day-ahead price forecast of one local calendar day ($/MWh by local clock hour 0..23, read-only)."""

    value_columns = (COL_PRICE_FC,)

    date: str
    price_forecast_usd_per_mwh: np.ndarray
    hours_in_day: int = hourly.HOURS_PER_DAY


@dataclass(frozen=True, eq=False)
class ForecastSet(hourly.HourlyDaySet[DayForecast]):
    """The complete days of one forecast source and the days skipped (with why)."""

    day_type = DayForecast
    day_field = "forecast day"

    source: str
    supplied_prices: Mapping[str, DayPriceForecast] = field(default_factory=dict)
    """The days (among :attr:`days`) with a complete supplied price forecast (of :attr:`price_column`)."""
    supplied_skipped: Mapping[str, str] = field(default_factory=dict)
    """Days with forecasts whose supplied price is incomplete, with why (only when the column is present)."""
    price_column: str = COL_PRICE_FC
    """The column of the supplied price (:data:`NODE_PRICE_FC_COLUMNS`; another node's in :meth:`at_node`)."""
    node_prices: Mapping[str, Mapping[str, DayPriceForecast]] = field(default_factory=dict)
    """The supplied prices of the other price nodes whose column the source has (by node, then date)."""
    node_skipped: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Days with forecasts whose supplied price of another node is incomplete, with why (by node, then date)."""

    def _absent(self, date: str) -> str:
        reason = f": skipped ({self.skipped[date]})" if date in self.skipped else ""
        return f"{date} has no forecast{reason}; {self._extent('covers')}"

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.price_column in PRICE_FC_COLUMNS, "price_column",
                f"must be one of {', '.join(PRICE_FC_COLUMNS)}, got {self.price_column!r}")
        others = [node for node in NODE_PRICE_FC_COLUMNS if node != DEFAULT_PRICE_NODE]
        for node in (*self.node_prices, *self.node_skipped):
            require(node in others, f"node_prices[{node}]", f"must be a node of {', '.join(others)}")
        for where, prices in (("supplied_prices", self.supplied_prices),
                              *((f"node_prices[{n}]", p) for n, p in self.node_prices.items())):
            for date in prices:
                require(date in self.days, f"{where}[{date}]", "is a day without load, solar and wind forecasts")
        object.__setattr__(self, "supplied_prices", _frozen(self.supplied_prices))
        object.__setattr__(self, "supplied_skipped", _frozen(self.supplied_skipped))
        object.__setattr__(self, "node_prices", MappingProxyType({n: _frozen(p) for n, p in self.node_prices.items()}))
        object.__setattr__(self, "node_skipped",
                           MappingProxyType({n: _frozen(p) for n, p in self.node_skipped.items()}))

    def at_node(self, node: str) -> ForecastSet:
        """The forecast set whose supplied price is price node ``node``'s (its column of
        :data:`NODE_PRICE_FC_COLUMNS`; this set itself for ``SCE``), the load, solar and wind forecasts the same."""
        require(node in NODE_PRICE_FC_COLUMNS, "price_node",
                f"must be one of {', '.join(NODE_PRICE_FC_COLUMNS)}, got {node!r}")
        if NODE_PRICE_FC_COLUMNS[node] == self.price_column:
            return self
        require(self.price_column == COL_PRICE_FC, "forecasts", f"{self.source} is already the {self.price_column} "
                "view of its source")
        return dataclasses.replace(self, supplied_prices=self.node_prices.get(node, {}),
                                   supplied_skipped=self.node_skipped.get(node, {}),
                                   price_column=NODE_PRICE_FC_COLUMNS[node], node_prices={}, node_skipped={})

    @property
    def supplies_price(self) -> bool:
        """Whether the source has a supplied price forecast (:attr:`price_column`) on at least one day."""
        return len(self.supplied_prices) > 0

    def has_supplied_price(self, date: str) -> bool:
        """Whether day ``date`` has its forecasts and a complete supplied price forecast."""
        return date in self.supplied_prices

    def supplied_price(self, date: str) -> np.ndarray:
        """The supplied day-ahead price forecast of day ``date`` ($/MWh, shape (24,), read-only); InputError
        ("forecasts", ...) if the source has no :data:`COL_PRICE_FC` column or the day has no complete one."""
        require(self.supplies_price, "forecasts", f"{self.source} has no {self.price_column} column (a supplied "
                "price forecast); without it the price is forecast by the package's model (price source 'model')")
        self.day(date)  # InputError if the day itself has no forecast
        found = self.supplied_prices.get(date)
        if found is None:
            why = self.supplied_skipped.get(date, f"no {self.price_column} in the file")
            raise InputError("forecasts", f"{date} has no supplied price forecast ({why}) in {self.source}")
        return found.price_forecast_usd_per_mwh

    def supplied_dates(self) -> list[str]:
        """The dates with forecasts and a complete supplied price forecast, sorted."""
        return list(self.supplied_prices)


def _frozen(by_date: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(sorted(by_date.items())))


# ------------------------------------------------------------------------------------------ Loading


def parse_forecasts_frame(frame: pd.DataFrame, source: str) -> ForecastSet:
    """Build a :class:`ForecastSet` from a table read as text (all cells ``str``), with the supplied price forecast
    of each day whose :data:`COL_PRICE_FC` cells are complete when the table has that column, and likewise of the
    other nodes' columns of :data:`NODE_PRICE_FC_COLUMNS`."""
    days, skipped, _ = hourly.parse_hourly_days(frame, source, "forecasts", DayForecast)
    supplied: dict[str, tuple[dict[str, DayPriceForecast], dict[str, str]]] = {}
    for node, column in NODE_PRICE_FC_COLUMNS.items():
        if column in frame.columns:
            prices, price_skipped, _ = hourly.parse_hourly_days(frame, source, column, DayPriceForecast,
                                                                PRICE_FC_BOUNDS, allow_empty=True, columns=(column,))
            supplied[node] = ({d: p for d, p in prices.items() if d in days},
                              {d: why for d, why in price_skipped.items() if d in days})
    own, own_skipped = supplied.pop(DEFAULT_PRICE_NODE, ({}, {}))
    return ForecastSet(days=days, skipped=skipped, source=source, supplied_prices=own, supplied_skipped=own_skipped,
                       node_prices={n: p for n, (p, _) in supplied.items()},
                       node_skipped={n: why for n, (_, why) in supplied.items()})


def load_forecasts(path: str | os.PathLike[str]) -> ForecastSet:
    """Load a packaged dataset by name (:mod:`aidc_env.datasets`) or a day-ahead forecast CSV by path (schema in
    the module docstring)."""
    with datasets.source_file(path, datasets.FORECASTS) as (file, source, _):
        frame = hourly.read_hourly_csv(file, source, REQUIRED_COLUMNS, "forecasts", PRICE_FC_COLUMNS)
    return parse_forecasts_frame(frame, source)


# ------------------------------------------------------------------------------ The renewable shape


def common_dates(forecasts: ForecastSet, profiles: ProfileSet, dates: Iterable[str] | None = None) -> list[str]:
    """The dates (of ``dates``, default all) complete in both the forecasts and the profiles, sorted."""
    both = set(forecasts.days) & set(profiles.days)
    return sorted(both if dates is None else both.intersection(dates))


def fit_renewable_scale(forecasts: ForecastSet, profiles: ProfileSet | SiteProfileSet, train_dates: Iterable[str],
                        plant: str = SOLAR_WIND) -> float:
    """Mean actual solar + wind over mean forecast solar + wind, over the training days of both sources; with
    ``plant="solar"`` or ``"wind"``, the same of that output alone (each clipped at 0)."""
    require(plant in _PLANT_OUTPUTS, "plant", f"must be one of {', '.join(_PLANT_OUTPUTS)}, got {plant!r}")
    dates = common_dates(forecasts, profiles, train_dates)
    require(len(dates) > 0, "train_dates", "no training day has both forecasts and actuals")
    actual_mw, forecast_mw = _PLANT_OUTPUTS[plant]
    actual = sum(float(actual_mw(profiles.days[d]).sum()) for d in dates)
    forecast = sum(float(forecast_mw(forecasts.days[d]).sum()) for d in dates)
    require(forecast > 0, "forecasts", f"forecast {plant.replace('+', ' + ')} is zero on every training day")
    return actual / forecast


_PLANT_OUTPUTS: Mapping[str, tuple[Callable[[Any], np.ndarray], Callable[[DayForecast], np.ndarray]]] = {
    SOLAR_WIND: (lambda day: day.renewable_mw(), DayForecast.renewable_mw),
    SOLAR: (lambda day: np.maximum(day.solar_mw, 0.0), lambda day: np.maximum(day.solar_forecast_mw, 0.0)),
    WIND: (lambda day: np.maximum(day.wind_mw, 0.0), lambda day: np.maximum(day.wind_forecast_mw, 0.0)),
}
"""Per output a scale is fitted for: its actual and its forecast MW of a day (clipped at 0)."""


@dataclass(frozen=True)
class PlantForecast:
    """The day-ahead capacity factor of a site's plant: the forecast solar and wind, each × its scale (actual over
    forecast, fitted on training days), through :func:`~aidc_env.site_profiles.plant_shape` with the peaks that
    normalise the actuals (:class:`~aidc_env.site_profiles.SiteProfileSet`), so that forecast and actual compare."""

    plant: str
    solar_scale: float
    wind_scale: float
    solar_peak_mw: float
    wind_peak_mw: float

    def __post_init__(self) -> None:
        require(self.plant in PLANTS, "plant", f"must be one of {', '.join(PLANTS)}, got {self.plant!r}")
        for name in ("solar_scale", "wind_scale", "solar_peak_mw", "wind_peak_mw"):
            hourly.require_positive(getattr(self, name), name)

    def shape(self, day: DayForecast) -> np.ndarray:
        """The plant's forecast capacity factor of a day, shape (24,)."""
        return plant_shape(self.plant, self.solar_scale * day.solar_forecast_mw,
                           self.wind_scale * day.wind_forecast_mw, self.solar_peak_mw, self.wind_peak_mw)

    def text(self) -> str:
        """How the shape is made, for a forecast's source."""
        scales = {SOLAR: f"solar x {self.solar_scale:.3f}", WIND: f"wind x {self.wind_scale:.3f}"}
        parts = {SOLAR: [SOLAR], WIND: [WIND], SOLAR_WIND: [SOLAR, WIND], NO_PLANT: []}[self.plant]
        return (f"{self.plant} plant: CAISO day-ahead " + " and ".join(scales[p] for p in parts) + " forecast"
                if parts else "no plant")


# ------------------------------------------------------------------------------------- Command line


def summary(forecasts: ForecastSet) -> dict[str, Any]:
    """A JSON-ready summary of a forecast set."""
    renewable = np.concatenate([d.renewable_mw() for d in forecasts.days.values()])
    load = np.concatenate([d.load_forecast_mw for d in forecasts.days.values()])
    dates = forecasts.supplied_dates()
    price = np.concatenate([forecasts.supplied_price(date) for date in dates]) if dates else None
    return hourly.summarise_days(forecasts, {"issue_hour_local": ISSUE_HOUR}, {
        "renewable_forecast_mw": {"mean": float(renewable.mean()), "max": float(renewable.max())},
        "load_forecast_mw": {"min": float(load.min()), "mean": float(load.mean()), "max": float(load.max())},
        "price_forecast_usd_per_mwh": None if price is None else {
            "days": len(dates), "first_day": dates[0], "last_day": dates[-1],
            "min": float(price.min()), "mean": float(price.mean()), "max": float(price.max())}})


def _format_summary(info: Mapping[str, Any]) -> str:
    renewable, load = info["renewable_forecast_mw"], info["load_forecast_mw"]
    details = [f"solar + wind forecast: mean {renewable['mean']:.0f}, max {renewable['max']:.0f} MW",
               f"load forecast: min {load['min']:.0f}, mean {load['mean']:.0f}, max {load['max']:.0f} MW"]
    price = info["price_forecast_usd_per_mwh"]
    details.append("supplied price forecast: " + ("none (the package's model forecasts the price)" if price is None
                   else f"{price['days']} days ({price['first_day']} to {price['last_day']}), min {price['min']:.2f}, "
                        f"mean {price['mean']:.2f}, max {price['max']:.2f} $/MWh"))
    issued = f", issued at {info['issue_hour_local']:02d}:00 local the day before"
    return hourly.format_summary(info, details, MAX_SKIPPED_SHOWN, issued)


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m aidc_env.forecasts",
                       description="Summarise a day-ahead forecast source: days covered, DST days, skipped days.")
    parser.add_argument("--forecasts", metavar="NAME|CSV", required=True,
                        help="a dataset name (python -m aidc_env.datasets, e.g. caiso-2023-dayahead) or a CSV with "
                             "timestamp_utc, local_start, solar_forecast_mw, wind_forecast_mw, load_forecast_mw and "
                             "optionally price_forecast_usd_per_mwh")
    return hourly.print_summary(parser, argv, lambda args: summary(load_forecasts(args.forecasts)), _format_summary)


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
