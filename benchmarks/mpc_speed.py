"""Seconds per MPC re-solve (every re-planning point re-solved) on held-out days of a profile source.

MPC re-solves the rest of the horizon at every re-planning point with :class:`oracle.rolling.RollingOracle`
(one built model per structure, re-priced in place). Here every point is re-solved (``reuse_plans=False``)
on the truth (``information="perfect"``: the solve time does not depend on where the prices come from),
over the held-out days (:func:`agents.days.split_days`) between ``--first`` and ``--last``, in order, with
one shared oracle (as in an evaluation). Goal (issue 12): median ≤ 1 s. Prints the distribution as JSON.

    python benchmarks/mpc_speed.py --profiles CSV [--case 2048] [--days 7] [--first 2023-03-14] [--last 2023-11-15]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.days import split_days  # noqa: E402
from agents.mpc import mpc_schedule  # noqa: E402
from aidc_env.case import build_instance  # noqa: E402
from aidc_env.errors import run_cli  # noqa: E402
from aidc_env.profiles import load_profiles  # noqa: E402
from aidc_env.simulator import simulate  # noqa: E402
from oracle.rolling import RollingOracle  # noqa: E402

GOAL_MEDIAN_S = 1.0
FORECAST_PERIOD = ("2023-03-14", "2023-11-15")
"""Days covered by the CAISO day-ahead forecasts (aidc_env/data/README.md), first day needing a
forecast issued the day before."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", required=True, help="dataset name or profile CSV (e.g. caiso-2023)")
    parser.add_argument("--case", default="2048", help="bundled case name or TOML file (default: 2048)")
    parser.add_argument("--days", type=int, default=7, help="how many held-out days (default: 7)")
    parser.add_argument("--first", default=FORECAST_PERIOD[0], help="first day considered (YYYY-MM-DD)")
    parser.add_argument("--last", default=FORECAST_PERIOD[1], help="last day considered (YYYY-MM-DD)")
    args = parser.parse_args(argv)
    profiles = load_profiles(args.profiles)
    _, held_out = split_days([d for d in profiles.days if args.first <= d <= args.last])
    oracle = RollingOracle()
    per_day = []
    for day in held_out[: args.days]:
        inst = build_instance(args.case, day=day, profiles=profiles)
        first, tick = len(oracle.seconds), time.perf_counter()
        schedule = mpc_schedule(inst, "perfect", oracle=oracle, reuse_plans=False)
        per_day.append({"day": day, "seconds": time.perf_counter() - tick, "re_solves": len(oracle.seconds) - first,
                        "cost_usd": simulate(inst, schedule).metrics.operating_cost_usd})
    seconds = np.array(oracle.seconds)
    summary = {"re_solves": int(seconds.size), "builds": oracle.builds,
               "median_s": float(np.median(seconds)), "p10_s": float(np.percentile(seconds, 10)),
               "p90_s": float(np.percentile(seconds, 90)), "max_s": float(seconds.max()),
               "goal_median_s": GOAL_MEDIAN_S, "days": per_day}
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
