"""The oracle as a teacher: its schedules of training days, solved once and cached on disk, followed in the agent's env.

The warm start of the per-job action (``PPOConfig.imitation = "oracle"``, :mod:`agents.imitation`): every training
day's oracle schedule (:func:`oracle.solve`, the decomposition for a fleet or several sites) becomes the env's action
sequence (:func:`teacher_action`), played in the training wrapper so that the observations and rewards are PPO's
(:func:`teacher_demonstrations`). An action the mask refuses -- the reservation rule is sufficient, not necessary --
is replaced by the nearest valid one (and counted).

A cached answer (one JSON per instance, ``<cache>/<day>-<fingerprint>.json``) serves a request when it was proven
optimal or solved with at least the requested time limit; its fingerprint is the instance's exchange JSON, so any
change of the case, the day's data or the jobs solves it again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agents.imitation import Demonstrations, concatenate, record_episode
from agents.ppo import agent_env
from agents.ppo_config import PPOConfig
from aidc_env.errors import require
from aidc_env.instance import PAUSE, Instance
from aidc_env.io import read_json_file, write_json
from aidc_env.parallel import Backend, open_pool
from aidc_env.schedule import Schedule, validate_schedule
from aidc_env.simulator import simulate
from oracle.constants import DECOMPOSITION_REVISION

TEACHER_TIME_LIMIT_S = 60.0
"""Seconds per training day's oracle solve; a day whose solve returns no feasible schedule is left out."""
CACHE_VERSION = 2
"""Bumped when the cached files' meaning changes (they are then solved again)."""


def instance_key(inst: Instance) -> str:
    """A short fingerprint of an instance (its exchange JSON): a cached schedule belongs to exactly this instance."""
    return hashlib.sha256(inst.to_json().encode()).hexdigest()[:16]


def reusable(record: Any, time_limit_s: float) -> bool:
    """Whether a cached answer serves a request at ``time_limit_s``: its format is :data:`CACHE_VERSION`, the
    oracle's :data:`oracle.constants.DECOMPOSITION_REVISION` solved it, and it was proven optimal or solved with at
    least that time limit."""
    if not (isinstance(record, dict) and record.get("version") == CACHE_VERSION
            and record.get("oracle_revision") == DECOMPOSITION_REVISION):
        return False
    solved_with = record.get("time_limit_s")
    return record.get("status") == "optimal" or (isinstance(solved_with, (int, float)) and solved_with >= time_limit_s)


def _solve(inst: Instance, time_limit_s: float) -> dict[str, Any]:
    from oracle import solve

    result = solve(inst, time_limit_s=time_limit_s)
    return {"version": CACHE_VERSION, "oracle_revision": DECOMPOSITION_REVISION, "day": inst.day,
            "status": result.status, "time_limit_s": time_limit_s,
            "objective_usd": result.metrics.objective_usd if result.metrics is not None else None,
            "gap": result.gap, **(validate_schedule(inst, result.schedule, result.sites).to_dict(inst)
                                  if result.schedule is not None else {})}


def teacher_schedules(instances: Sequence[Instance], cache: str | Path, time_limit_s: float = TEACHER_TIME_LIMIT_S,
                      workers: int = 1) -> dict[str, Schedule]:
    """The oracle's schedule of every instance (by day): read from ``cache`` when :func:`reusable`, else solved (in
    ``workers`` processes) and written there atomically. Days without a feasible schedule are left out."""
    folder = Path(cache)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {inst.day: folder / f"{inst.day}-{instance_key(inst)}.json" for inst in instances}
    records = {day: read_json_file(path, "oracle-cache") if path.is_file() else None for day, path in paths.items()}
    todo = [inst for inst in instances if not reusable(records[inst.day], time_limit_s)]
    with open_pool(Backend(workers=max(1, workers))) as pool:
        for inst, record in zip(todo, pool.map(_solve, [(inst, time_limit_s) for inst in todo]), strict=True):
            write_json(paths[inst.day], record)
            records[inst.day] = record
            print(f"oracle teacher {inst.day}: {record['status']}, ${record['objective_usd']}", flush=True)
    out = {}
    for inst in instances:
        record = records[inst.day]
        if record.get("schedule"):
            schedule = validate_schedule(inst, record["schedule"], record.get("sites"))
            if simulate(inst, schedule).metrics.feasible:
                out[inst.day] = schedule
    return out


def teacher_action(env: gym.Env, schedule: Schedule) -> tuple[int, bool]:
    """The action of the job deciding now that follows ``schedule``, and whether the mask allows it.

    A paused segment's site only says where the checkpoint waits, and a move into a pause is free: a pause is played
    at the site of the job's next running segment (the checkpoint travels during the pause, as the cheapest schedule
    does), else at the schedule's site, else where the job is -- the first the mask allows. A running choice the
    mask refuses is replaced by the valid running action with the nearest GPUs at the schedule's site, else at the
    job's current site, else anywhere (followed = False)."""
    raw = env.unwrapped
    j = raw.deciding_job
    require(j is not None, "schedule", "the episode is over")
    inst = raw.instance()
    job, C = inst.jobs[j], raw.n_choices
    k = raw.slot // inst.slots_per_segment(job)
    s, c = int(schedule.sites[j][k]), int(schedule.modes[j][k]) + 1
    here = int(raw.schedule().sites[j][k - 1]) if k > 0 else inst.home_sites[j]
    mask = env.action_masks()
    if c == 0:
        later = [int(schedule.sites[j][i]) for i in range(k + 1, job.segments) if schedule.modes[j][i] != PAUSE]
        for site in [*later[:1], s, here]:
            if mask[site * C]:
                return site * C, True
    if mask[s * C + c]:
        return s * C + c, True
    valid = np.flatnonzero(mask)
    want = int(job.gpus_by_choice[c - 1])

    def nearest(actions: list[int]) -> int:
        return min(actions, key=lambda a: abs(int(job.gpus_by_choice[a % C - 1]) - want))

    for site in dict.fromkeys([s, here]):  # the schedule's site, else where the job is (no move)
        there = [int(a) for a in valid if a // C == site]
        if c > 0:
            there = [a for a in there if a % C > 0] or there  # a running choice stays a running one
        if there:
            return nearest(there), False
    return nearest([int(a) for a in valid]), False


def follow(env: gym.Env, day: str, schedule: Schedule) -> tuple[Demonstrations, int]:
    """Follow ``schedule`` on ``day`` in a (wrapped) per-job env; every decision, and how many the mask refused."""
    return record_episode(env, day, lambda env, obs: teacher_action(env, schedule))


def teacher_demonstrations(config: PPOConfig, instances: Sequence[Instance],
                           schedules: dict[str, Schedule]) -> tuple[Demonstrations, int]:
    """The oracle's schedules followed in the training env of ``config``: every decision of every day with a
    schedule, and the number of choices the mask refused."""
    days = [inst for inst in instances if inst.day in schedules]
    require(len(days) > 0, "imitation", "no training day has an oracle schedule to clone")
    env = agent_env(config, days)
    require(env.unwrapped.action_type == "per_job", "imitation", "the oracle's schedules are cloned into the "
            "per-job action: use --env per_job (or a case with fleet workloads or several sites)")
    followed = [follow(env, inst.day, schedules[inst.day]) for inst in days]
    return concatenate([demos for demos, _ in followed]), sum(refused for _, refused in followed)


__all__ = ["CACHE_VERSION", "TEACHER_TIME_LIMIT_S", "follow", "instance_key", "reusable", "teacher_action",
           "teacher_demonstrations", "teacher_schedules"]
