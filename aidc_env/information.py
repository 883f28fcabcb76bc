"""What is known when: day-ahead forecasts aligned with an instance, and views.

The truth of an instance (its price λ_t and renewable shape cf_t) is revealed slot by slot: at the start
of slot t, the values of slots 0..t−1 are known, those of t..T−1 are not. The forecast of day d is
issued the day before at :data:`ISSUE_HOUR` (10:00, when the day-ahead market closes), so at slot t the
forecasts of every day whose issue time has passed are known, and nothing else. A forecast's price may be issued
later than its renewables (:attr:`Forecast.price_issue_hour`, e.g. 13:00 for a supplied day-ahead market price,
published after the market closes): until then the day's price is the outlook of a day not issued yet.

An instance may carry a :class:`Forecast` (``Instance.forecast``): per slot, each day's forecast as
issued the day before, and S equally likely scenarios of the same days. Policies and the env read the
future only through :func:`outlook` (and the past through :func:`realised`):

- ``information="perfect"``: the truth (hindsight; the oracle's view);
- ``information="dayahead"``: the forecast of every day already issued at slot t; the price of days whose
  forecast is not issued yet is the forecast's *issue outlook* (:attr:`Forecast.issue_outlook_price_usd_per_mwh`:
  what was known at the last issue, e.g. a blend of its forecast and the recent mean price), and without one, as
  their renewables always, the last issued day's forecast repeated (persistence of the forecast, the simplest rule
  an operator would use for days beyond the market).

The simulator never reads the forecast: costs are always paid on the truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from aidc_env.errors import require
from aidc_env.profiles import HOURS_PER_DAY
from aidc_env.schema import ForecastDocument, validate

ISSUE_HOUR = 10
"""Local clock hour of day d − 1 at which day d's forecast is issued (CAISO's day-ahead market closes at 10:00)."""
LAST_ISSUE_HOUR = 23
"""Latest local clock hour of day d − 1 at which a forecast of day d may be issued (a later one is intraday)."""
INFORMATION = ("perfect", "dayahead")
"""Information settings: the truth (hindsight), or day-ahead forecasts revealed as they are issued."""


@dataclass(frozen=True, eq=False)
class Forecast:
    """Day-ahead forecasts aligned with an instance's T slots (each day's as issued the day before)."""

    price_usd_per_mwh: np.ndarray
    """(T,) point forecast of λ_t ($/MWh)."""
    renewable_shape: np.ndarray
    """(T,) point forecast of cf_t, in [0, 1]."""
    price_scenarios_usd_per_mwh: np.ndarray
    """(S, T) equally likely price scenarios (S may be 0)."""
    renewable_shape_scenarios: np.ndarray
    """(S, T) renewable-shape scenarios, drawn jointly with the prices (same residual day)."""
    source: str = ""
    """How the forecast was made (e.g. the forecaster and its training days)."""
    persistence_price_usd_per_mwh: np.ndarray | None = None
    """(T,) optional persistence price forecast: each day's latest prices known at its issue time (10:00 of
    d − 1: yesterday's prices before 10:00, the day before's after; :func:`aidc_env.price_forecast.
    persistence_forecast`). The naive price an operator has without a forecaster (the ``dayahead-plan`` rule)."""
    issue_outlook_price_usd_per_mwh: np.ndarray | None = None
    """(D, T) optional, one row per day of the horizon: row k is the price of every slot as known at day k's
    issue time (10:00 of day k − 1): the issued forecasts of days 0..k and, for the later days, whose forecast
    is not issued yet, an outlook made from what is known then (:func:`aidc_env.dayahead.forecast_of`: the
    mean price of the last days at each clock hour). :func:`outlook` reads the later days from the row of the
    last issue. None: later days repeat the last issued day's forecast."""
    price_issue_hour: int = ISSUE_HOUR
    """Local clock hour of d − 1 from which day d's price forecast (point, scenarios and issue outlook row) is known,
    :data:`ISSUE_HOUR` .. :data:`LAST_ISSUE_HOUR`; the renewables are always issued at :data:`ISSUE_HOUR`. Later
    than :data:`ISSUE_HOUR` for a price published after the forecasts it was made with (the CAISO day-ahead market
    publishes its LMP at about 13:00); until then the day's price is the outlook of the previous issue."""

    def __post_init__(self) -> None:
        arrays = {name: np.array(value, dtype=float) for name in FORECAST_ARRAYS
                  if (value := getattr(self, name)) is not None}
        validate(ForecastDocument, {**{name: arr.tolist() for name, arr in arrays.items()}, "source": self.source,
                                    "price_issue_hour": self.price_issue_hour}, document="forecast", where="forecast",
                 limits=False)
        require(ISSUE_HOUR <= self.price_issue_hour <= LAST_ISSUE_HOUR, "forecast.price_issue_hour",
                f"must be an hour within {ISSUE_HOUR}..{LAST_ISSUE_HOUR}, got {self.price_issue_hour!r}")
        for name in ("price_scenarios_usd_per_mwh", "renewable_shape_scenarios"):
            arrays[name] = arrays[name].reshape(-1, arrays["price_usd_per_mwh"].size)
        for name, arr in arrays.items():
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def slots(self) -> int:
        return int(self.price_usd_per_mwh.size)

    @property
    def n_scenarios(self) -> int:
        return int(self.price_scenarios_usd_per_mwh.shape[0])

    def to_dict(self) -> dict:
        """The forecast's JSON (:class:`aidc_env.schema.ForecastDocument`, its keys in order; the optional arrays and
        the default issue hour only when given)."""
        values = {name: getattr(self, name) for name in ForecastDocument.model_fields}
        return {name: value.tolist() if isinstance(value, np.ndarray) else value for name, value in values.items()
                if value is not None and (name != "price_issue_hour" or value != ISSUE_HOUR)}

    @classmethod
    def from_dict(cls, data: Any, where: str = "forecast") -> Forecast:
        """Read the forecast of an instance's JSON (:class:`aidc_env.schema.ForecastDocument`); InputError naming the
        first bad field after ``where``."""
        return cls.from_document(validate(ForecastDocument, data, document=where, where=where, limits=False))

    @classmethod
    def from_document(cls, doc: ForecastDocument) -> Forecast:
        """The forecast of a validated document."""
        return cls(**{name: value for name, value in doc if value is not None})


FORECAST_ARRAYS = ("price_usd_per_mwh", "renewable_shape", "price_scenarios_usd_per_mwh", "renewable_shape_scenarios",
                   "persistence_price_usd_per_mwh", "issue_outlook_price_usd_per_mwh")
"""The per-slot arrays of a :class:`Forecast` (the scenarios and the issue outlook: one row per scenario or day)."""


def slots_per_hour(inst) -> int:
    return int(round(1.0 / inst.slot_hours))


def issue_slot(inst, d: int, hour: int = ISSUE_HOUR) -> int:
    """Slot on the instance's axis at which day ``d``'s forecast is issued (negative: before the start), issued at
    ``hour`` local of d − 1."""
    return d * inst.slots_per_day - (HOURS_PER_DAY - hour) * slots_per_hour(inst)


def issued_days(inst, t: int, hour: int = ISSUE_HOUR) -> int:
    """How many days of the horizon (from the first) have their forecast issued (at ``hour`` of the day before) at
    the start of slot t."""
    return sum(1 for d in range(inst.horizon_days) if issue_slot(inst, d, hour) <= t)


def price_issue_hour(inst) -> int:
    """The hour of d − 1 at which the instance's price forecast of day d is issued (:data:`ISSUE_HOUR` without a
    forecast)."""
    forecast = getattr(inst, "forecast", None)
    return ISSUE_HOUR if forecast is None else forecast.price_issue_hour


def issue_slots(inst) -> list[int]:
    """Every slot at which a forecast (the renewables' or the price's) is issued, sorted, from 1 to T − 1: the slots
    where the day-ahead outlook changes."""
    hours = {ISSUE_HOUR, price_issue_hour(inst)}
    slots = {issue_slot(inst, d, h) for d in range(inst.horizon_days) for h in hours}
    return sorted(s for s in slots if 0 < s < inst.slots)


def _forward(inst, t: int, values: np.ndarray, issued: int, later: np.ndarray | None = None) -> np.ndarray:
    """``values`` (T,) for slots t..T−1, days past the last issued one taken from ``later`` (T,), the last
    issue's outlook, or without it repeating the last issued day's values."""
    spd = inst.slots_per_day
    out = np.array(values[t:], dtype=float)
    last = issued - 1
    if later is not None:
        start = max(issued * spd, t)
        out[start - t:] = later[start:]
        return out
    for d in range(issued, inst.horizon_days):
        lo, hi = d * spd, (d + 1) * spd
        start = max(lo, t)
        if start >= hi:
            continue
        out[start - t: hi - t] = values[last * spd + (start - lo): last * spd + spd]
    return out


@dataclass(frozen=True)
class Outlook:
    """What a policy may know of prices and renewables: one strategy behind one interface (:meth:`view`), read by the
    env's observation, MPC's re-plans, the plans and the PPO wrapper. Each site of an instance has its own price node
    and plant, so a view is taken of a site's one-site view (``Instance.site_views``), with that site's forecast.

    The two kinds: :class:`Perfect` (the truth: hindsight) and :class:`DayAhead` (the forecasts issued by then).
    """

    name: ClassVar[str] = ""
    needs_forecast: ClassVar[bool] = False

    def view(self, inst, t: int, scenario: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(price, renewable shape) of slots t..T−1 as known at the start of slot t (``scenario``: the forecast's
        scenario s instead of its point forecast)."""
        raise NotImplementedError

    def issue_slots(self, inst) -> list[int]:
        """The slots 1..T−1 where the view of the later slots changes (none for the truth)."""
        return []

    def check(self, inst, where: str = "forecasts") -> None:
        """InputError unless ``inst`` (and each of its sites) carries what this outlook reads."""
        if self.needs_forecast:
            for view in inst.site_views:
                require(view.forecast is not None, where, f"day-ahead information needs instances with forecasts; "
                        f"the instance of {inst.day} has none (give --forecasts)")

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Perfect(Outlook):
    """The truth (hindsight; the oracle's view). ``noise`` σ > 0: the env's look-ahead is the truth plus Gaussian noise
    of standard deviation σ·√k at lead k (scaled units), drawn per episode (a sensitivity tool, not information)."""

    noise: float = 0.0
    name: ClassVar[str] = "perfect"

    def __post_init__(self) -> None:
        require(isinstance(self.noise, (int, float)) and not isinstance(self.noise, bool) and np.isfinite(self.noise)
                and self.noise >= 0, "forecast_noise", f"must be a number >= 0, got {self.noise!r}")

    def view(self, inst, t: int, scenario: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        require(0 <= t <= inst.slots, "slot", f"must be within 0..{inst.slots}")
        return inst.price_usd_per_mwh[t:].copy(), inst.renewable_shape[t:].copy()


@dataclass(frozen=True)
class DayAhead(Outlook):
    """The forecast of every day already issued at slot t (see the module docstring), and the realised past."""

    name: ClassVar[str] = "dayahead"
    needs_forecast: ClassVar[bool] = True

    def view(self, inst, t: int, scenario: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        return _dayahead_view(inst, t, scenario)

    def issue_slots(self, inst) -> list[int]:
        return issue_slots(inst)


PERFECT = Perfect()
DAYAHEAD = DayAhead()


def outlook_of(spec: Any) -> Outlook:
    """An :class:`Outlook` from its name (``"perfect"``, ``"dayahead"``), a mapping (``{"kind": "perfect", "noise":
    0.2}``) or an Outlook (returned as is); one InputError line otherwise."""
    if isinstance(spec, Outlook):
        return spec
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - {"kind", "noise"})
        require(not unknown, "outlook", f"unknown key(s) {', '.join(map(str, unknown))} (known: kind, noise)")
        kind, noise = spec.get("kind", "perfect"), spec.get("noise", 0.0)
        require(kind == "perfect" or not noise, "forecast_noise",
                "is synthetic noise on the truth (information='perfect' only); 'dayahead' observes the forecasts")
        return Perfect(noise) if kind == "perfect" else outlook_of(kind)
    require(spec in INFORMATION, "information", f"must be one of {', '.join(INFORMATION)}, got {spec!r}")
    return PERFECT if spec == "perfect" else DAYAHEAD


def outlook(inst, t: int, information: Any = "dayahead", scenario: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(price, renewable shape) of slots t..T−1 as known at the start of slot t under ``information`` (an
    :class:`Outlook` or its name); ``scenario``: with ``dayahead``, scenario s of the forecast."""
    return outlook_of(information).view(inst, t, scenario)


def _dayahead_view(inst, t: int, scenario: int | None) -> tuple[np.ndarray, np.ndarray]:
    require(0 <= t <= inst.slots, "slot", f"must be within 0..{inst.slots}")
    forecast: Forecast | None = getattr(inst, "forecast", None)
    require(forecast is not None, "forecasts", "day-ahead information needs an instance with forecasts "
            "(give --forecasts)")
    require(forecast.slots == inst.slots, "forecast", f"has {forecast.slots} slots, the instance {inst.slots}")
    if scenario is None:
        price, shape = forecast.price_usd_per_mwh, forecast.renewable_shape
        later = forecast.issue_outlook_price_usd_per_mwh
    else:
        require(0 <= scenario < forecast.n_scenarios, "scenario", f"must be within 0..{forecast.n_scenarios - 1}")
        price, shape = forecast.price_scenarios_usd_per_mwh[scenario], forecast.renewable_shape_scenarios[scenario]
        # A scenario's later days repeat its last issued day (smpc re-centres them on the point outlook): of three
        # rules measured, the cheapest for smpc on training weeks (docs/uncertainty.md, "Stochastic MPC").
        later = None
    issued = issued_days(inst, t)  # >= 1: the first day's forecast is issued before the instance starts
    priced = issued_days(inst, t, forecast.price_issue_hour)  # <= issued, >= 1 (issued before 24:00 of d − 1)
    if later is not None:
        require(later.shape[0] == inst.horizon_days, "forecast.issue_outlook_price_usd_per_mwh",
                f"has {later.shape[0]} rows, the instance {inst.horizon_days} days")
        later = later[priced - 1]
    if getattr(inst, "tariff", None) is not None:  # a tariff's rates are known: only renewables are forecast
        return inst.price_usd_per_mwh[t:].copy(), _forward(inst, t, shape, issued)
    return _forward(inst, t, price, priced, later), _forward(inst, t, shape, issued)


def realised(inst, t: int) -> tuple[np.ndarray, np.ndarray]:
    """(price, renewable shape) of slots 0..t−1: the truth revealed before slot t."""
    require(0 <= t <= inst.slots, "slot", f"must be within 0..{inst.slots}")
    return inst.price_usd_per_mwh[:t].copy(), inst.renewable_shape[:t].copy()


__all__ = ["DAYAHEAD", "INFORMATION", "ISSUE_HOUR", "LAST_ISSUE_HOUR", "PERFECT", "DayAhead", "Forecast", "Outlook",
           "Perfect", "issue_slot", "issue_slots", "issued_days", "outlook", "outlook_of", "price_issue_hour",
           "realised"]
