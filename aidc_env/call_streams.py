"""Call streams: a seeded generator of a year of grid calls, its parameters taken from CAISO's grid-emergency history.

The history (``aidc_env/data/grid_calls_stats.json``, made by ``scripts/make_grid_call_stats.py`` from CAISO's *Grid
Emergencies History Report*; provenance in ``aidc_env/data/README.md``) lists every day of 2005-2025 with a Flex Alert
or a notice of level 2 or more (a warning, a stage, EEA 1-3): 96 call days, with the window of 71 of them and the
notice of 22. A generated year draws, from the history's fit years:

- the number of call days: the count of a fit year drawn at random (so quiet years and heat-wave years keep their
  weights: 0 to 19 days);
- the days, in runs of consecutive days (heat waves) whose lengths are drawn from the history's runs, each run starting
  in a month drawn with the history's monthly shares and on a day drawn uniformly in it;
- each day's window (start hour and duration, drawn together from one timed day) and notice (drawn from the days with a
  known notice, at least :data:`MIN_NOTICE_HOURS`).

:data:`HELD_OUT_SEEDS` are the seeds of held-out years: nothing is tuned or trained on them. :func:`replay_year` puts
a real year's call days on the price data's calendar instead.
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime as dt
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np

from aidc_env.errors import InputError, require
from aidc_env.schema.case import CallSpec

HISTORY_FILE = "grid_calls_stats.json"
FIT_YEARS = tuple(range(2005, 2026))
"""The history's years the generator draws from."""
HELD_OUT_SEEDS = range(1000, 1100)
"""Seeds of held-out call years (training and tuning use seeds below 1000)."""
MIN_NOTICE_HOURS = 0.25
"""A notice shorter than a 15-minute slot (the history has some calls declared as they start) is taken as one slot."""
DEFAULT_PROGRAM = "elrp"


@dataclass(frozen=True)
class CallDay:
    """One day of the history: its date, window (local hours; None: not stated) and notice (hours; None: unknown)."""

    date: dt.date
    start_hour: float | None
    hours: float | None
    notice_hours: float | None


@dataclass(frozen=True)
class CallEvent:
    """One generated (or replayed) call: its local day, start hour, hours and notice."""

    date: dt.date
    start_hour: float
    hours: float
    notice_hours: float

    def spec(self, program: str = DEFAULT_PROGRAM, day_offset: int = 0, **terms: float) -> CallSpec:
        """The call as a :class:`CallSpec` of ``program`` (``terms``: reduction_share, limit_mw, payments...), on day
        ``day_offset`` of an instance's horizon."""
        return CallSpec(program=program, start_hour=self.start_hour, hours=min(self.hours, 24.0 - self.start_hour),
                        day_offset=day_offset, notice_hours=self.notice_hours, **terms)


def _hours(text: str) -> float | None:
    if not text:
        return None
    hour, minute = text.split(":")
    return int(hour) + int(minute) / 60.0


def load_history() -> tuple[CallDay, ...]:
    """The history's call days (the ``any_call`` family: a Flex Alert or a notice of level 2 or more)."""
    with resources.files("aidc_env").joinpath("data", HISTORY_FILE).open() as handle:
        rows = json.load(handle)["call_days"]
    return tuple(CallDay(date=dt.date.fromisoformat(row["date"]), start_hour=_hours(row["start_local"]),
                         hours=row["duration_h"], notice_hours=row["notice_h"]) for row in rows)


def run_lengths(dates: Sequence[dt.date]) -> list[int]:
    """Lengths of the runs of consecutive days (each date counted once)."""
    runs, previous = [], None
    for date in sorted(set(dates)):
        if previous is not None and (date - previous).days == 1:
            runs[-1] += 1
        else:
            runs.append(1)
        previous = date
    return runs


def generate_year(seed: int, year: int = 2023, history: Sequence[CallDay] | None = None,
                  fit_years: Sequence[int] = FIT_YEARS) -> list[CallEvent]:
    """A year of calls on ``year``'s calendar (see the module docstring), sorted by date."""
    history = load_history() if history is None else history
    fit = [day for day in history if day.date.year in fit_years]
    require(bool(fit), "fit_years", f"no call day of the history in {list(fit_years)}")
    rng = np.random.default_rng(seed)
    counts = [sum(day.date.year == y for day in fit) for y in fit_years]
    months = np.bincount([day.date.month for day in fit], minlength=13)[1:].astype(float)
    runs = run_lengths([day.date for day in fit])
    timed = [day for day in fit if day.start_hour is not None and day.hours]
    notices = [max(day.notice_hours, MIN_NOTICE_HOURS) for day in fit if day.notice_hours is not None]
    wanted = int(rng.choice(counts))
    dates: set[dt.date] = set()
    for _ in range(100 * (wanted + 1)):  # draws until the count is reached (runs that overlap are drawn again)
        if len(dates) >= wanted:
            break
        length = min(int(rng.choice(runs)), wanted - len(dates))
        month = int(rng.choice(np.arange(1, 13), p=months / months.sum()))
        start = dt.date(year, month, int(rng.integers(1, calendar.monthrange(year, month)[1] + 1)))
        run = [start + dt.timedelta(days=k) for k in range(length)]
        if all(d.year == year and d not in dates for d in run):
            dates.update(run)
    events = []
    for date in sorted(dates):
        window = timed[int(rng.integers(len(timed)))]
        notice = float(rng.choice(notices)) if notices else MIN_NOTICE_HOURS
        events.append(CallEvent(date=date, start_hour=float(window.start_hour), hours=float(window.hours),
                                notice_hours=notice))
    return events


def replay_year(real_year: int, onto_year: int = 2023, history: Sequence[CallDay] | None = None,
                default_notice_hours: float = 24.0) -> list[CallEvent]:
    """A real year's timed call days on ``onto_year``'s calendar (same month and day; notice unknown: the default)."""
    history = load_history() if history is None else history
    events = []
    for day in history:
        if day.date.year != real_year or day.start_hour is None or not day.hours:
            continue
        if not (day.date.month == 2 and day.date.day == 29):  # no 29 February on a common year's calendar
            date = day.date.replace(year=onto_year)
            notice = default_notice_hours if day.notice_hours is None else max(day.notice_hours, MIN_NOTICE_HOURS)
            events.append(CallEvent(date=date, start_hour=day.start_hour, hours=day.hours, notice_hours=notice))
    return events


TRAINING_SEEDS = range(0, 200)
"""The call years a :class:`CallStream` draws from by default (below :data:`HELD_OUT_SEEDS`)."""
DEFAULT_CALL_PROBABILITY = 0.5
"""A stream's chance that an episode whose month has calls carries one."""


@dataclass(frozen=True)
class CallStream:
    """Calls for training episodes (the env's ``call_stream``): the events of the generated years ``seeds`` pooled by
    month; an episode on a day of a month with events carries, with ``probability``, one of that month's events (its
    window and notice) as a call of ``program`` asking for ``reduction_share`` of the baseline. Seeds of
    :data:`HELD_OUT_SEEDS` are refused: held-out years are for evaluation only."""

    program: str = "bip"
    reduction_share: float = 0.25
    seeds: tuple[int, int] = (TRAINING_SEEDS.start, TRAINING_SEEDS.stop)
    """[first, last + 1) of the years pooled."""
    probability: float = DEFAULT_CALL_PROBABILITY

    def __post_init__(self) -> None:
        from aidc_env.calls import program

        program(self.program)
        require(isinstance(self.reduction_share, (int, float)) and 0 < self.reduction_share <= 1,
                "call_stream.reduction_share", f"must be a number in (0, 1], got {self.reduction_share!r}")
        require(isinstance(self.probability, (int, float)) and 0 <= self.probability <= 1, "call_stream.probability",
                f"must be a number in [0, 1], got {self.probability!r}")
        seeds = tuple(self.seeds) if isinstance(self.seeds, (list, tuple)) else ()
        require(len(seeds) == 2 and all(isinstance(v, int) and v >= 0 for v in seeds) and seeds[0] < seeds[1],
                "call_stream.seeds", f"must be [first, last + 1) with 0 <= first < last + 1, got {self.seeds!r}")
        require(seeds[1] <= HELD_OUT_SEEDS.start or seeds[0] >= HELD_OUT_SEEDS.stop, "call_stream.seeds",
                f"{HELD_OUT_SEEDS.start}-{HELD_OUT_SEEDS.stop - 1} are the held-out years: train on other seeds")
        object.__setattr__(self, "seeds", seeds)

    @classmethod
    def of(cls, value: CallStream | dict | str | None) -> CallStream | None:
        """A stream from itself, its dict (``to_dict``) or ``"PROGRAM:SHARE"`` (e.g. ``"bip:0.25"``); None stays."""
        if value is None or isinstance(value, CallStream):
            return value
        if isinstance(value, str):
            name, _, share = value.partition(":")
            try:
                reduction_share = float(share) if share else cls.reduction_share
            except ValueError:
                raise InputError("call_stream", f"expected PROGRAM:SHARE (e.g. bip:0.25), got {value!r}") from None
            return cls(program=name, reduction_share=reduction_share)
        require(isinstance(value, dict) and set(value) <= {f.name for f in dataclasses.fields(cls)}, "call_stream",
                f"must be PROGRAM:SHARE or a mapping of {', '.join(f.name for f in dataclasses.fields(cls))}")
        return cls(**value)

    def to_dict(self) -> dict:
        return {"program": self.program, "reduction_share": self.reduction_share, "seeds": list(self.seeds),
                "probability": self.probability}

    def events_of_month(self, month: int) -> tuple[CallEvent, ...]:
        return _pooled_events(self.seeds)[month]

    def draw(self, day: str, rng: np.random.Generator) -> tuple[CallSpec, ...]:
        """The calls of an episode on ``day`` (none, or one event of its month)."""
        events = self.events_of_month(dt.date.fromisoformat(day).month)
        if not events or rng.random() >= self.probability:
            return ()
        event = events[int(rng.integers(len(events)))]
        return (event.spec(self.program, reduction_share=self.reduction_share),)


@functools.cache
def _pooled_events(seeds: tuple[int, int]) -> dict[int, tuple[CallEvent, ...]]:
    """The events of the years ``seeds`` by month (1..12)."""
    history = load_history()
    by_month: dict[int, list[CallEvent]] = {m: [] for m in range(1, 13)}
    for seed in range(*seeds):
        for event in generate_year(seed, history=history):
            by_month[event.date.month].append(event)
    return {m: tuple(events) for m, events in by_month.items()}


def events_by_day(events: Sequence[CallEvent]) -> dict[str, list[CallEvent]]:
    """The events of each day (ISO date)."""
    out: dict[str, list[CallEvent]] = {}
    for event in events:
        out.setdefault(event.date.isoformat(), []).append(event)
    return out
