"""Which days train and which are held out for evaluation.

The split is fixed and documented so that train.py and evaluate.py agree without talking to each
other: of the complete days of a profile source, sorted by date, every ``HOLDOUT_EVERY``-th day
(the 7th, 14th, 21st, ...) is held out for evaluation; the others train. On the full 2023 year
(351 complete days) this holds out 50 days spread over every month, but **not over the weekdays**: with few
skipped days every 7th day falls on the same weekday, so 43 of the 50 are Saturdays (4 Mondays, 2 Fridays,
1 Tuesday), and 34 of the 35 held-out days inside the day-ahead forecast period are Saturdays. Held-out
results are therefore mostly weekend results; a split that rotates the weekday would change every published
held-out figure and is left for a session that can re-measure them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import numpy as np

from aidc_env.errors import require

HOLDOUT_EVERY = 7


HELD_OUT_WEEK_STARTS = ("2023-03-18", "2023-06-03", "2023-08-12", "2023-10-28")
"""First days of the 4 held-out weeks of docs/uncertainty.md and docs/performance.md "Weeks": held-out days of
:func:`split_days` whose seven days are all in the data, evenly spread (evaluate.py ``--horizon-days 7
--max-days 4``); nothing in the oracle was tuned on them (2023-06-12, issue 12's example, was)."""
DAYS_PER_WEEK = 7
"""A week's horizon in days (``--horizon-days 7``)."""


def week_days(starts: Sequence[str], days: int = DAYS_PER_WEEK) -> list[str]:
    """The calendar days (YYYY-MM-DD) of the ``days``-day horizons from each of ``starts``, in order, each once."""
    out: list[str] = []
    for start in starts:
        first = dt.date.fromisoformat(start)
        out.extend(str(first + dt.timedelta(days=k)) for k in range(days))
    return list(dict.fromkeys(out))


def split_days(dates: Sequence[str], holdout_every: int = HOLDOUT_EVERY) -> tuple[list[str], list[str]]:
    """(train days, held-out days) of a list of dates."""
    ordered = sorted(dates)
    held_out = [d for i, d in enumerate(ordered) if i % holdout_every == holdout_every - 1]
    train = [d for i, d in enumerate(ordered) if i % holdout_every != holdout_every - 1]
    return train, held_out


def held_out_days(dates: Sequence[str], field: str = "days") -> list[str]:
    """The held-out days of ``dates`` (:func:`split_days`); :class:`InputError` naming ``field`` if there is none (a
    source of fewer than HOLDOUT_EVERY days): the other days are training days, and evaluating on them would report
    training results as held-out ones."""
    held = split_days(dates)[1]
    require(bool(held), field, f"the profile source has {len(set(dates))} complete days, too few to hold one out "
            f"(every {HOLDOUT_EVERY}th day is; at least {HOLDOUT_EVERY} needed): give a longer source, or explicit "
            "--days to evaluate on training days knowingly")
    return held


def training_days_among(days: Sequence[str], dates: Sequence[str]) -> list[str]:
    """Those of ``days`` that are training days of the split of ``dates`` (:func:`split_days`)."""
    train = set(split_days(dates)[0])
    return [d for d in days if d in train]


def spread(days: Sequence[str], count: int) -> list[str]:
    """At most ``count`` (> 0) of ``days``, evenly spread from the first to the last (all if fewer)."""
    if len(days) <= count:
        return list(days)
    return [days[i] for i in np.unique(np.linspace(0, len(days) - 1, count).round().astype(int))]
