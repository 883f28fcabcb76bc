"""Hourly profiles of the sites case: three CAISO load-zone prices, and solar and wind apart.

The sites case (``aidc_env/cases/sites3.toml``) needs what the day model's profile source merges or leaves out:
the real-time LMP at each of the three load zones (SCE, PG&E, SDG&E) and the solar and wind outputs as two
separate plants' shapes. A *site profile source* is a CSV of the same canonical form as
:mod:`aidc_env.profiles` (local days, DST rules, skipped incomplete days: the same :mod:`aidc_env.hourly`
reader) with the columns :data:`SITE_COLUMNS`: the packaged dataset ``caiso-2023`` (:mod:`aidc_env.datasets`) has them
all; the bundled days (no path, or the name ``caiso-2023-days``) are the same days as the day model's bundled table.

A plant's shape is its column clipped at 0 and divided by the column's peak over the source (for the bundled
table, the full year's peaks from its sidecar JSON, so that bundled and full-year runs normalise alike);
``solar+wind`` is solar + wind normalised by the sum of the two peaks (:func:`plant_shape`, which the
plants' day-ahead forecasts share). :meth:`SiteProfileSet.at_node` is one price node's days as a
:class:`~aidc_env.profiles.ProfileSet`: what the day-ahead price forecaster of a site reads.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from aidc_env import datasets
from aidc_env.errors import InputError, require
from aidc_env.hourly import COL_LOCAL_START, COL_TIMESTAMP_UTC, HOURS_PER_DAY, HourlyDay, HourlyDaySet, \
    parse_hourly_days, read_hourly_csv, require_positive
from aidc_env.limits import MAX_PRICE_USD_PER_MWH, MAX_RENEWABLE_CAPACITY_MW
from aidc_env.profiles import COL_PRICE, COL_SOLAR, COL_WIND, DayProfile, ProfileSet

COL_PRICE_PGE = "price_pge_usd_per_mwh"
COL_PRICE_SDGE = "price_sdge_usd_per_mwh"
PRICE_NODES: Mapping[str, str] = MappingProxyType({"SCE": COL_PRICE, "PGE": COL_PRICE_PGE, "SDGE": COL_PRICE_SDGE})
"""Price node of a site -> its column: the CAISO real-time LMP at DLAP SCE, PG&E and SDG&E (see the data README)."""
SITE_VALUE_COLUMNS = (COL_PRICE, COL_PRICE_PGE, COL_PRICE_SDGE, COL_SOLAR, COL_WIND)
SITE_COLUMNS = (COL_TIMESTAMP_UTC, COL_LOCAL_START, *SITE_VALUE_COLUMNS)
SOLAR, WIND, SOLAR_WIND, NO_PLANT = "solar", "wind", "solar+wind", "none"
PLANTS = (SOLAR, WIND, SOLAR_WIND, NO_PLANT)
"""A site's renewable plant: its shape is the CAISO solar, wind or solar + wind output, or no plant."""

BUNDLED_SITE_CSV = datasets.SITE_DAYS_CSV
BUNDLED_SITE_META = datasets.SITE_DAYS_META
BUNDLED_SITE_SOURCE = "bundled-sites"
_BOUNDS = {COL_PRICE: MAX_PRICE_USD_PER_MWH, COL_PRICE_PGE: MAX_PRICE_USD_PER_MWH,
           COL_PRICE_SDGE: MAX_PRICE_USD_PER_MWH, COL_SOLAR: MAX_RENEWABLE_CAPACITY_MW,
           COL_WIND: MAX_RENEWABLE_CAPACITY_MW}


@dataclass(frozen=True, eq=False)
class SiteDay(HourlyDay):
    """One local day of the three nodes' prices and the solar and wind outputs (hourly, by clock hour)."""

    value_columns = SITE_VALUE_COLUMNS

    date: str
    price_usd_per_mwh: np.ndarray
    price_pge_usd_per_mwh: np.ndarray
    price_sdge_usd_per_mwh: np.ndarray
    solar_mw: np.ndarray
    wind_mw: np.ndarray
    hours_in_day: int = HOURS_PER_DAY

    def price(self, node: str) -> np.ndarray:
        """The hourly LMP of a price node (:data:`PRICE_NODES`)."""
        require(node in PRICE_NODES, "price_node", f"must be one of {', '.join(PRICE_NODES)}, got {node!r}")
        return getattr(self, PRICE_NODES[node])


@dataclass(frozen=True, eq=False)
class SiteProfileSet(HourlyDaySet[SiteDay]):
    """The complete days of a site profile source and the peaks that normalise the plants' shapes."""

    day_type = SiteDay
    day_field = "day"

    solar_peak_mw: float
    wind_peak_mw: float
    source: str

    def _absent(self, date: str) -> str:
        if date in self.skipped:
            return f"{date} is not in the data: skipped ({self.skipped[date]}); {self._extent('has')}"
        return f"{date} is not in the data ({self._extent('has')})"

    def shape(self, day: SiteDay, plant: str) -> np.ndarray:
        """Hourly capacity factor in [0, 1] of a plant on a day (zeros for no plant)."""
        return plant_shape(plant, day.solar_mw, day.wind_mw, self.solar_peak_mw, self.wind_peak_mw)

    def at_node(self, node: str) -> ProfileSet:
        """The days as a :class:`~aidc_env.profiles.ProfileSet` whose price is price node ``node``'s LMP (solar and
        wind as they are; renewable capacity: the sum of the solar and wind peaks, the ``solar+wind`` plant's): what
        the day-ahead price forecaster reads for a site of that node."""
        require(node in PRICE_NODES, "price_node", f"must be one of {', '.join(PRICE_NODES)}, got {node!r}")
        return _node_profiles(self, node)


def plant_shape(plant: str, solar_mw: np.ndarray, wind_mw: np.ndarray, solar_peak_mw: float,
                wind_peak_mw: float) -> np.ndarray:
    """Capacity factor in [0, 1] of a plant (:data:`PLANTS`) from solar and wind outputs (MW, clipped at 0): each
    over its peak, ``solar+wind`` over the sum of the peaks; zeros for no plant."""
    require(plant in PLANTS, "plant", f"must be one of {', '.join(PLANTS)}, got {plant!r}")
    solar, wind = np.maximum(solar_mw, 0.0), np.maximum(wind_mw, 0.0)
    if plant == SOLAR:
        return np.clip(solar / solar_peak_mw, 0.0, 1.0)
    if plant == WIND:
        return np.clip(wind / wind_peak_mw, 0.0, 1.0)
    if plant == SOLAR_WIND:
        return np.clip((solar + wind) / (solar_peak_mw + wind_peak_mw), 0.0, 1.0)
    return np.zeros(np.shape(solar))


@functools.lru_cache(maxsize=16)
def _node_profiles(profiles: SiteProfileSet, node: str) -> ProfileSet:
    days = {date: DayProfile(date=date, price_usd_per_mwh=day.price(node), solar_mw=day.solar_mw, wind_mw=day.wind_mw,
                             hours_in_day=day.hours_in_day) for date, day in profiles.days.items()}
    return ProfileSet(days=days, skipped=profiles.skipped, renewable_capacity_mw=profiles.solar_peak_mw
                      + profiles.wind_peak_mw, source=f"{profiles.source} ({node})")


def load_site_profiles(path: str | os.PathLike[str] | None = None) -> SiteProfileSet:
    """A packaged dataset by name (:mod:`aidc_env.datasets`), a site profile CSV by path (see the module
    docstring), or the bundled days if ``path`` is None (source ``bundled-sites``)."""
    with datasets.source_file(datasets.DEFAULT_PROFILES if path is None else path, datasets.PROFILES, site=True) as (
            file, source, found):
        source = BUNDLED_SITE_SOURCE if path is None else source
        frame = read_hourly_csv(file, source, SITE_COLUMNS, "profiles")
    days, skipped, _ = parse_hourly_days(frame, source, "profiles", SiteDay, _BOUNDS)
    if found is not None and found.site_meta is not None:
        meta = found.read_meta(found.site_meta)
        return SiteProfileSet(days=days, skipped=skipped, solar_peak_mw=float(meta["solar_peak_mw"]),
                              wind_peak_mw=float(meta["wind_peak_mw"]), source=source)
    return _with_peaks(days, skipped, source)


def _with_peaks(days: Mapping[str, SiteDay], skipped: Mapping[str, str], source: str) -> SiteProfileSet:
    """The site profile set whose plants are normalised by the solar and wind peaks over its complete days."""
    peaks = []
    for column in (COL_SOLAR, COL_WIND):
        values = np.concatenate([getattr(d, column) for d in days.values()])
        peak = float(np.max(np.maximum(values, 0.0)))
        if peak <= 0:
            raise InputError("profiles", f"{source}: {column} has no positive value to normalise a plant by")
        peaks.append(require_positive(peak, column))
    return SiteProfileSet(days=days, skipped=skipped, solar_peak_mw=peaks[0], wind_peak_mw=peaks[1], source=source)
