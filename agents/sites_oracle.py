"""The sites oracle's schedules of many days, solved once and cached on disk (for the sites PPO's warm start and
its evaluation; issue 14 item 5).

:func:`solve_days` solves every day not yet in the cache -- first each site exactly on its own with its home jobs
(the day oracle, :func:`home_optimum`: no migration), then :func:`oracle.solve` (the sites MILP) started from that
schedule (each job's checkpoint at its home site at t = 0, as the env starts), keeping the better -- in worker processes, and writes each answer atomically to
``<folder>/<case>_<day>_<time limit>s.json`` (schedule, sites, the simulator's cost, the solver's bound and gap,
seconds). The direct MILP does not close its gap on sites3 at K = 12 (docs/sites.md: ~2 % after 120 s; started from
the fixed schedule on 2 loaded cores it often returns the start after 30 s, hence the per-site start), so the
schedules are incumbents after ``time_limit_s``: good schedules, not proven optima; the bound and gap are recorded.
A cached answer is reused only if its instance fingerprint (the case, the day, every price, plant shape and job)
and, for the decomposition, the oracle's revision (:data:`oracle.constants.SITES_ORACLE_REVISION`) match.
"""

from __future__ import annotations

import dataclasses
import hashlib
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aidc_env.errors import require
from aidc_env.instance import Instance
from aidc_env.io import dumps_json, read_json_file, write_json
from oracle.constants import SITES_ORACLE_REVISION

DEFAULT_TRAIN_TIME_LIMIT_S = 30.0
"""Seconds per training day's solve (after the per-site start, ~1 s): measured on training day 2023-02-05 at
load 2-4, the decomposition's incumbent after 10 / 20 / 40 s was $921.64 / $921.64 / $881.23 (gap 10.3 / 7.4 /
2.3 %; the per-site start $1,066.97): 30 s is what 63 training days on 2 shared cores afford
(docs/sites.md "Env and PPO")."""

METHODS = ("decomposition", "per-site-milp")
"""How a day is solved: ``"decomposition"`` (the issue's sites oracle, :func:`oracle.solve`'s decomposition, with
migration, started from the per-site optimum; the default) or ``"per-site-milp"`` (the per-site optimum without
migration, then the direct sites MILP (:func:`oracle.solve`'s textbook method) from it, the better kept: the reference
before the decomposition existed)."""
DEFAULT_METHOD = "decomposition"


@dataclass(frozen=True)
class OracleDay:
    """One cached sites-oracle answer."""

    day: str
    status: str
    objective_usd: float | None
    gap: float | None
    seconds: float
    schedule: list[list[int]] | None
    sites: list[list[int]] | None


def fingerprint(inst: Instance) -> str:
    """A hash of everything the oracle reads from an instance (case, day, sites, jobs, prices, shapes)."""
    return hashlib.sha256(dumps_json(inst.to_dict(), indent=None).encode()).hexdigest()[:16]


METHOD_TAGS = {"per-site-milp": "home-optimum+sites-milp", "decomposition": "home-optimum+sites-decomposition"}
"""The solve recorded in each cache file (a file of another method is solved again); "per-site-milp" keeps the tag
its files were written with."""


def revision(method: str) -> int | None:
    """The oracle revision a cached answer of ``method`` must carry: :data:`oracle.constants.SITES_ORACLE_REVISION`
    for the decomposition (an answer of an earlier revision, or of none, is solved again); none for the direct
    MILP's files."""
    return SITES_ORACLE_REVISION if method == "decomposition" else None


def cache_path(folder: Path, inst: Instance, time_limit_s: float, method: str = DEFAULT_METHOD) -> Path:
    """``<case>_<day>_<time limit>s.json`` for "per-site-milp" (the files written before the decomposition),
    ``<case>_<day>_decomposition_<time limit>s.json`` for the decomposition."""
    tag = "" if method == "per-site-milp" else f"_{method}"
    return Path(folder) / f"{inst.case_name}_{inst.day}{tag}_{time_limit_s:g}s.json"


def home_optimum(inst: Instance, time_limit_s: float) -> tuple[list[list[int]], list[list[int]], float]:
    """Every job kept at its home site, each site solved exactly on its own by the day oracle (its one-site view
    with the jobs at home there): (schedule, sites, seconds). The study's "(a) own" (docs/sites.md)."""
    import time

    from oracle import solve

    tick = time.perf_counter()
    net = inst.network
    home = net.home if net is not None else (0,) * len(inst.jobs)
    schedule: list[list[int]] = [[-1] * job.segments for job in inst.jobs]
    for s, view in enumerate(inst.site_views):
        members = [j for j in range(len(inst.jobs)) if home[j] == s]
        if not members:
            continue
        sub = dataclasses.replace(view, jobs=tuple(inst.jobs[j] for j in members))
        res = solve(sub, time_limit_s=time_limit_s)
        require(res.schedule is not None, "oracle", f"no schedule for site {s} on {inst.day} ({res.status})")
        for j, row in zip(members, res.schedule, strict=True):
            schedule[j] = list(row)
    sites = [[home[j]] * job.segments for j, job in enumerate(inst.jobs)]
    return schedule, sites, time.perf_counter() - tick


def _solve(inst: Instance, time_limit_s: float, method: str = DEFAULT_METHOD) -> dict[str, Any]:
    from aidc_env.schedule import validate_schedule
    from aidc_env.simulator import simulate

    schedule, sites, home_seconds = home_optimum(inst, time_limit_s)
    home_usd = simulate(inst, validate_schedule(inst, schedule, sites)).metrics.operating_cost_usd
    from oracle import solve

    res = solve(inst, method="decomposition" if method == "decomposition" else "textbook", time_limit_s=time_limit_s,
                threads=None if method == "decomposition" else 1, start=(schedule, sites))
    better = res.schedule is not None and res.objective_usd is not None and res.objective_usd <= home_usd
    return {"day": inst.day, "status": res.status if better else f"home_optimum (sites MILP: {res.status})",
            "objective_usd": res.objective_usd if better else home_usd,
            "gap": res.gap, "best_bound_usd": res.best_bound_usd, "home_optimum_usd": home_usd,
            "seconds": home_seconds + res.build_seconds + res.solve_seconds,
            "schedule": res.schedule if better else schedule, "sites": res.sites if better else sites,
            "time_limit_s": time_limit_s, "fingerprint": fingerprint(inst), "method": METHOD_TAGS[method],
            "oracle_revision": revision(method)}


def _read(path: Path, inst: Instance, method: str = DEFAULT_METHOD) -> OracleDay | None:
    if not path.is_file():
        return None
    data = read_json_file(path, "oracle cache")
    if (not isinstance(data, dict) or data.get("fingerprint") != fingerprint(inst)
            or data.get("method") != METHOD_TAGS[method] or data.get("oracle_revision") != revision(method)):
        return None
    return OracleDay(day=data["day"], status=data["status"], objective_usd=data["objective_usd"], gap=data["gap"],
                     seconds=data["seconds"], schedule=data["schedule"], sites=data["sites"])


def solve_days(instances: Sequence[Instance], folder: str | Path, time_limit_s: float = DEFAULT_TRAIN_TIME_LIMIT_S,
               workers: int = 1, progress: bool = True, method: str = DEFAULT_METHOD) -> dict[str, OracleDay]:
    """Every instance's oracle answer (day -> :class:`OracleDay`) by ``method`` (:data:`METHODS`), solving only the
    days not cached yet."""
    require(method in METHODS, "oracle-method", f"must be one of {', '.join(METHODS)}, got {method!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, OracleDay] = {}
    todo = []
    for inst in instances:
        cached = _read(cache_path(folder, inst, time_limit_s, method), inst, method)
        if cached is not None:
            out[inst.day] = cached
        else:
            todo.append(inst)
    if todo:
        by_day = {inst.day: inst for inst in todo}
        # spawned, not forked: a worker forked from a process whose HiGHS threads already run can hang (measured: a
        # test after other HiGHS solves in the same pytest process spun for 17 min)
        with ProcessPoolExecutor(max_workers=max(1, workers), mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_solve, inst, time_limit_s, method) for inst in todo]
            for n, future in enumerate(futures, 1):
                data = future.result()
                path = cache_path(folder, by_day[data["day"]], time_limit_s, method)
                write_json(path, data)
                out[data["day"]] = _read(path, by_day[data["day"]], method)
                if progress:
                    print(f"sites oracle {n}/{len(todo)}: {data['day']} {data['status']} ${data['objective_usd']} "
                          f"gap {data['gap']} in {data['seconds']:.0f} s", flush=True)
    return {inst.day: out[inst.day] for inst in instances}


__all__ = ["DEFAULT_METHOD", "DEFAULT_TRAIN_TIME_LIMIT_S", "METHODS", "METHOD_TAGS", "OracleDay", "cache_path", "fingerprint", "revision",
           "solve_days"]
