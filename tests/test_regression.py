"""Regression pins of the day model: refactors must leave these numbers bit-identical.

Pinned on commit da92147 (before the single-data-path refactor): the reference day's oracle objective and
schedule, the fixed and greedy schedules' costs, and a seeded masked-random env episode (its day, return,
observation checksum and schedule).
"""

from __future__ import annotations

import numpy as np

from aidc_env.baselines import fixed_schedule, greedy_schedule
from aidc_env.case import build_instance
from aidc_env.env import DispatchEnv
from aidc_env.simulator import simulate
from oracle import solve

REFERENCE_ORACLE_USD = 529.8088802758355
REFERENCE_ORACLE_SCHEDULE = [[0, 0, 0, 8, 8, 8, 8, 8, 8, -1, -1, -1], [3, 15, 15, 15, 15, 15, 15, 15, 15, 15, -1, -1]]
REFERENCE_FIXED_USD = 653.734107531027
REFERENCE_GREEDY_USD = 622.5146813516499
EPISODE_SEED = 7
EPISODE_DAY = "2023-12-12"
EPISODE_RETURN = -11.608337442182965
EPISODE_OBS_SUM = 2009.38720205531
EPISODE_SCHEDULE = [[10, 6, 6, 9, 5, 7, 8, 1, 0, 2, 0, 5], [3, 0, 13, 8, 9, 15, 11, 16, 11, 17, 17, 17]]


def test_reference_day_costs_are_unchanged():
    inst = build_instance("2048")
    assert simulate(inst, fixed_schedule(inst)).metrics.operating_cost_usd == REFERENCE_FIXED_USD
    assert simulate(inst, greedy_schedule(inst)).metrics.operating_cost_usd == REFERENCE_GREEDY_USD
    result = solve(inst)
    assert result.status == "optimal"
    assert abs(result.objective_usd - REFERENCE_ORACLE_USD) <= 1e-9 * REFERENCE_ORACLE_USD
    assert [list(row) for row in result.schedule] == REFERENCE_ORACLE_SCHEDULE


def test_seeded_env_episode_is_unchanged():
    env = DispatchEnv(case="2048")
    obs, _ = env.reset(seed=EPISODE_SEED)
    rng = np.random.default_rng(EPISODE_SEED)
    total, obs_sum, terminated, info = 0.0, float(obs.sum()), False, {}
    while not terminated:
        valid = np.flatnonzero(env.action_masks())
        obs, reward, terminated, _, info = env.step(int(valid[rng.integers(valid.size)]))
        total += reward
        obs_sum += float(obs.astype(np.float64).sum())
    assert info["day"] == EPISODE_DAY
    assert total == EPISODE_RETURN
    assert obs_sum == EPISODE_OBS_SUM
    assert env.schedule().mode_lists() == EPISODE_SCHEDULE
