"""Which days train and which are held out for evaluation.

The split is fixed and documented so that train.py and evaluate.py agree without talking to each
other: of the complete days of a profile source, sorted by date, every ``HOLDOUT_EVERY``-th day
(the 7th, 14th, 21st, ...) is held out for evaluation; the others train. On the full 2023 year
(351 complete days) this holds out 50 days spread over every month and every weekday.
"""

from __future__ import annotations

from collections.abc import Sequence

HOLDOUT_EVERY = 7


def split_days(dates: Sequence[str], holdout_every: int = HOLDOUT_EVERY) -> tuple[list[str], list[str]]:
    """(train days, held-out days) of a list of dates."""
    ordered = sorted(dates)
    held_out = [d for i, d in enumerate(ordered) if i % holdout_every == holdout_every - 1]
    train = [d for i, d in enumerate(ordered) if i % holdout_every != holdout_every - 1]
    return train, held_out
