"""The fleet env stays bit-identical to its frozen reference (``tests/fleet_env_reference.py``) while it is sped up.

Random episodes (a mix of masked and arbitrary, possibly invalid, actions; several seeds) run side by side on
:class:`~aidc_env.fleet_env.FleetDispatchEnv` and on the frozen copy, on the fleet case, on the 2048 case, on
scaled fleets of ``benchmarks/fleet_env_scaling.py`` (12 and 16 jobs), on a two-day day-ahead instance and on
small random fleets; every observation, mask, reward, flag, info, the public state and the final schedule must
be *exactly* equal (bytes for arrays, ``==`` for floats).
"""

from __future__ import annotations

import copy
import importlib.util
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aidc_env.case import build_instance
from aidc_env.fleet_env import FleetDispatchEnv
from aidc_env.instance import Instance
from tests.fleet_env_reference import ReferenceFleetDispatchEnv
from tests.test_fleet_env import small_fleet
from tests.test_leakage import dayahead_instance

INVALID_ACTION_SHARE = 0.1
"""Share of agent steps given an arbitrary action (often outside the mask) instead of a masked one."""


def _benchmark_scaled_fleet(n_jobs: int, n_gpus: int) -> Instance:
    """The scaled fleet of ``benchmarks/fleet_env_scaling.py`` (loaded by path: benchmarks is no package)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "fleet_env_scaling.py"
    spec = importlib.util.spec_from_file_location("fleet_env_scaling", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.scaled_fleet(build_instance("fleet"), n_jobs, n_gpus)


def _same(a, b, what: str) -> None:
    """Exact equality of two step outputs (arrays by dtype, shape and bytes; dicts key by key)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, what
        assert a.tobytes() == b.tobytes(), what
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), what
        for key in a:
            _same(a[key], b[key], f"{what}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), what
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{what}[{k}]")
    else:
        assert type(a) is type(b) and a == b, (what, a, b)


def _state(env) -> dict:
    """The env's public state after a step."""
    return {"slot": env.slot, "deciding_job": env.deciding_job, "safety_fallback": env.safety_fallback,
            "starts_safe": env.starts_safe, "schedule": env.schedule(), "tokens": env.tokens(),
            "shortfall": env.shortfall_tokens(), "reserved": env.reserved_gpus(), "objective": env.objective_usd}


def _compare_episodes(case, seeds, episodes: int = 1, **kwargs) -> int:
    """Run ``episodes`` episodes per seed on both envs with the same actions; returns the agent steps compared."""
    new, ref = FleetDispatchEnv(case=case, **kwargs), ReferenceFleetDispatchEnv(case=case, **kwargs)
    steps = 0
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for episode in range(episodes):
            reset_seed = seed if episode == 0 else None
            _same(new.reset(seed=reset_seed), ref.reset(seed=reset_seed), "reset")
            _same(_state(new), _state(ref), "state after reset")
            done = False
            while not done:
                mask = new.action_masks()
                _same(mask, ref.action_masks(), f"mask at step {steps}")
                if rng.random() < INVALID_ACTION_SHARE:
                    action = int(rng.integers(new.n_actions))
                else:
                    action = int(rng.choice(np.flatnonzero(mask)))
                out = new.step(action)
                _same(out, ref.step(action), f"step {steps} (seed {seed}, action {action})")
                _same(_state(new), _state(ref), f"state after step {steps}")
                done = out[2] or out[3]
                steps += 1
            _same(new.action_masks(), ref.action_masks(), "mask after the end")
    return steps


@pytest.fixture(scope="module")
def fleet() -> Instance:
    return build_instance("fleet")


def test_fleet_case_is_identical(fleet):
    assert _compare_episodes(fleet, seeds=[0, 1, 2]) > 3 * 100


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda env: pickle.loads(pickle.dumps(env))])
def test_copies_mid_episode_are_identical(fleet, clone):
    """A deep copy or a pickled copy of the env, mid-episode, goes on exactly as the original would."""
    new, ref = FleetDispatchEnv(case=fleet), ReferenceFleetDispatchEnv(case=fleet)
    rng = np.random.default_rng(5)
    for env in (new, ref):
        env.reset(seed=5)
    for _ in range(40):
        action = int(rng.choice(np.flatnonzero(new.action_masks())))
        new.step(action)
        ref.step(action)
    new = clone(new)
    done = False
    while not done:
        mask = new.action_masks()
        _same(mask, ref.action_masks(), "mask of the copy")
        action = int(rng.choice(np.flatnonzero(mask)))
        out = new.step(action)
        _same(out, ref.step(action), "step of the copy")
        done = out[2]


@pytest.mark.parametrize("kwargs", [{"reward_credit": "job", "reward_baseline": "fixed"},
                                    {"reward_credit": "job"}, {"reward_baseline": "fixed", "lookahead": 0},
                                    {"safety_mask": False, "pause_when_done": False}])
def test_fleet_case_options_are_identical(fleet, kwargs):
    _compare_episodes(fleet, seeds=[3], **kwargs)


def test_2048_case_is_identical(reference_instance):
    assert _compare_episodes(reference_instance, seeds=[0, 1, 2], episodes=2) == 3 * 2 * 24


@pytest.mark.parametrize("n_jobs,n_gpus", [(12, 2048), (12, 32768), (16, 8192)])
def test_scaled_fleets_are_identical(n_jobs, n_gpus):
    _compare_episodes(_benchmark_scaled_fleet(n_jobs, n_gpus), seeds=[n_gpus % 7])


def test_dayahead_two_days_is_identical():
    inst = dayahead_instance(3, days=2)
    _compare_episodes(inst, seeds=[0, 1], information="dayahead", lookahead=3)
    _compare_episodes(inst, seeds=[2], forecast_noise=0.2, reward_credit="job")


@settings(derandomize=True, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_fleet(), st.integers(0, 2**16), st.booleans())
def test_small_fleets_are_identical(inst, seed, job_credit):
    _compare_episodes(inst, seeds=[seed], episodes=2, lookahead=2,
                      reward_credit="job" if job_credit else "decision")
