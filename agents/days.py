"""Which days train and which are held out for evaluation.

The split is fixed so that train.py and evaluate.py agree without talking to each other. The default, ``weeks``,
holds out whole ISO weeks (Monday to Sunday): every :data:`HOLDOUT_WEEK_EVERY`-th week of the year (ISO week
numbers 3, 7, 11, ..., 51). So every weekday is held out equally often, the held-out weeks are spread over the
year (one in four, 13 of 2023's 52), the same split serves day and week evaluation (a held-out week is seven
held-out days), and no training week contains a held-out day: a training instance of D days lies wholly within
training days. On the full 2023 year (351 complete days) it holds out 88 days; 63 of them, and 9 whole held-out
weeks, lie inside the day-ahead forecast period (2023-03-13..11-14).

``every-7th-day`` is the earlier split, kept for comparison: of the complete days sorted by date, the 7th, 14th,
... is held out. On 2023 it holds out 50 days, 43 of them Saturdays.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import numpy as np

from aidc_env.errors import require

DAYS_PER_WEEK = 7
"""A week's horizon in days (``--horizon-days 7``)."""
HOLDOUT_WEEK_EVERY = 4
"""The ``weeks`` split holds out one ISO week in this many."""
HOLDOUT_WEEK_OFFSET = 3
"""ISO week numbers ≡ this (mod :data:`HOLDOUT_WEEK_EVERY`) are held out: weeks 3, 7, ..., 51 (the first held-out
week of 2023 starts on 2023-01-16)."""
HOLDOUT_EVERY = 7
"""The ``every-7th-day`` split holds out every 7th complete day."""
SPLITS = ("weeks", "every-7th-day")
DEFAULT_SPLIT = "weeks"


def split_days(dates: Sequence[str], split: str = DEFAULT_SPLIT) -> tuple[list[str], list[str]]:
    """(train days, held-out days) of a list of dates (YYYY-MM-DD), each sorted."""
    require(split in SPLITS, "split", f"must be one of {', '.join(SPLITS)}, got {split!r}")
    ordered = sorted(dates)
    if split == "weeks":
        held = [dt.date.fromisoformat(d).isocalendar().week % HOLDOUT_WEEK_EVERY == HOLDOUT_WEEK_OFFSET
                for d in ordered]
    else:
        held = [i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1 for i in range(len(ordered))]
    return ([d for d, h in zip(ordered, held, strict=True) if not h],
            [d for d, h in zip(ordered, held, strict=True) if h])


def horizon_days_of(start: str, days: int) -> list[str]:
    """The ``days`` calendar days (YYYY-MM-DD) from ``start``."""
    first = dt.date.fromisoformat(start)
    return [str(first + dt.timedelta(days=k)) for k in range(days)]


def week_days(starts: Sequence[str], days: int = DAYS_PER_WEEK) -> list[str]:
    """The calendar days of the ``days``-day horizons from each of ``starts``, in order, each once."""
    return list(dict.fromkeys(d for start in starts for d in horizon_days_of(start, days)))


def split_starts(dates: Sequence[str], starts: Sequence[str], horizon_days: int = 1,
                 split: str = DEFAULT_SPLIT) -> tuple[list[str], list[str]]:
    """(training starts, held-out starts) of D-day instances, given every complete day (``dates``) and the first days
    of the usable instances (``starts``).

    A training instance lies wholly within training days. Held-out instances lie wholly within held-out days: with
    ``weeks`` they tile each held-out week from its Monday (D = 7: the week itself; D = 1: every day); with
    ``every-7th-day`` they are the instances that start on a held-out day (the earlier rule).
    """
    train_days, held_days = (set(part) for part in split_days(dates, split))
    usable = sorted(set(starts))
    train = [s for s in usable if set(horizon_days_of(s, horizon_days)) <= train_days]
    if split == "weeks":
        held = [s for s in usable if set(horizon_days_of(s, horizon_days)) <= held_days
                and dt.date.fromisoformat(s).weekday() % horizon_days == 0
                and dt.date.fromisoformat(s).weekday() + horizon_days <= DAYS_PER_WEEK]
    else:
        held = [s for s in usable if s in held_days]
    return train, held


def held_out_starts(dates: Sequence[str], starts: Sequence[str] | None = None, horizon_days: int = 1,
                    field: str = "days", split: str = DEFAULT_SPLIT) -> list[str]:
    """The held-out instances of :func:`split_starts` (``starts``: default every date); :class:`InputError` naming
    ``field`` if there is none (a source that holds no held-out week): the other days are training days, and
    evaluating on them would report training results as held-out ones."""
    held = split_starts(dates, dates if starts is None else starts, horizon_days, split)[1]
    require(bool(held), field, f"the profile source ({len(set(dates))} complete days) holds no held-out instance of "
            f"{horizon_days} day(s) (one ISO week in {HOLDOUT_WEEK_EVERY} is held out: agents/days.py): give a longer "
            "source, or explicit --days to evaluate on training days knowingly")
    return held


def training_days_among(days: Sequence[str], dates: Sequence[str], split: str = DEFAULT_SPLIT) -> list[str]:
    """Those of ``days`` that are training days of the split of ``dates`` (:func:`split_days`)."""
    train = set(split_days(dates, split)[0])
    return [d for d in days if d in train]


def spread(days: Sequence[str], count: int) -> list[str]:
    """At most ``count`` (> 0) of ``days``, evenly spread from the first to the last (all if fewer)."""
    if len(days) <= count:
        return list(days)
    return [days[i] for i in np.unique(np.linspace(0, len(days) - 1, count).round().astype(int))]
