"""Decision rules that plan once: the oracle (on the truth: hindsight), the day-ahead plan, greedy on a view.

The causal rules read prices and renewables only through :func:`aidc_env.information.outlook` /
:func:`~aidc_env.information.realised`; every schedule is scored afterwards by the simulator on the truth.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from aidc_env.baselines import greedy_schedule
from aidc_env.instance import Instance
from aidc_env.information import outlook, realised


def viewed(inst: Instance, information: str, t: int = 0, scenario: int | None = None) -> Instance:
    """The instance as known at the start of slot ``t``: the realised truth before t, the outlook from t."""
    past_price, past_shape = realised(inst, t)
    price, shape = outlook(inst, t, information, scenario)
    return dataclasses.replace(inst, price_usd_per_mwh=np.concatenate([past_price, price]),
                               renewable_shape=np.concatenate([past_shape, shape]))


def oracle_schedule(inst: Instance, oracle):
    """(schedule, result) of the oracle on ``inst`` as given (``oracle``: a :class:`oracle.rolling.RollingOracle`).

    On the truth this is ``hindsight``, the perfect-information bound (not a causal policy).
    """
    result = oracle.solve(inst)
    if result.schedule is None:
        raise RuntimeError(f"oracle found no schedule on {inst.day}: {result.status} {result.reason}")
    return [list(row) for row in result.schedule], result


def dayahead_plan_schedule(inst: Instance, oracle, information: str = "dayahead") -> list[list[int]]:
    """Open loop: the oracle's plan made once, at the first day's issue time, on the point forecast.

    At the first day's issue time only that day's forecast is issued; later days repeat it (the rule of
    :func:`~aidc_env.information.outlook`), exactly the view at slot 0. Never revised.
    """
    return oracle_schedule(viewed(inst, information, 0), oracle)[0]


def greedy_view_schedule(inst: Instance, information: str = "dayahead") -> list[list[int]]:
    """The greedy threshold rule applied once, on the view at slot 0 (the truth with ``perfect``)."""
    return greedy_schedule(viewed(inst, information, 0))
