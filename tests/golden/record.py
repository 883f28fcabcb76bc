"""Recorded trajectories of the env on fixed action sequences: the guard of every change to the env's dynamics.

``python -m tests.golden.record`` plays, for every spec in :data:`SPECS`, seeded episodes of masked random actions
(one in ten an arbitrary action, often outside the mask) and writes ``tests/golden/<name>.json.gz``: per agent step
the action given, the mask (hex of its bits), the reward and the penalty (``float.hex``), the flags, a digest of the
observation and the slot; per episode the final schedule (and sites). ``tests/test_golden.py`` replays the recorded
actions and asks every value to be equal, bit for bit.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
INVALID_ACTION_SHARE = 0.1

SPECS: dict[str, dict[str, Any]] = {
    "joint-2048": {"action": "joint", "instances": "case:2048", "kwargs": {}, "seeds": [0, 1, 2, 3]},
    "joint-2048-k24-noise": {"action": "joint", "instances": "case:2048", "overrides": {"segments": 24},
                             "kwargs": {"forecast_noise": 0.2, "lookahead": 8}, "seeds": [5]},
    "joint-dayahead-2days": {"action": "joint", "instances": "dayahead", "kwargs": {"information": "dayahead"},
                             "seeds": [0, 1]},
    "joint-dayahead-2days-share": {"action": "joint", "instances": "dayahead-share", "kwargs": {}, "seeds": [3]},
    "per_job-fleet": {"action": "per_job", "instances": "case:fleet", "kwargs": {}, "seeds": [0, 1]},
    "per_job-fleet-job-credit": {"action": "per_job", "instances": "case:fleet",
                                 "kwargs": {"reward_credit": "job", "reward_baseline": "fixed"}, "seeds": [2]},
    "per_job-fleet-baseline": {"action": "per_job", "instances": "case:fleet", "kwargs": {"reward_baseline": "fixed"},
                               "seeds": [3]},
    "per_job-2048": {"action": "per_job", "instances": "case:2048", "kwargs": {}, "seeds": [0, 1]},
    "per_job-scaled-16": {"action": "per_job", "instances": "scaled:16:4096", "kwargs": {}, "seeds": [0]},
    "per_job-dayahead-2days": {"action": "per_job", "instances": "dayahead", "kwargs": {"information": "dayahead"},
                               "seeds": [0]},
    "sites-sites3": {"action": "sites", "instances": "case:sites3", "kwargs": {}, "seeds": [0, 1]},
    "sites-sites3-baseline": {"action": "sites", "instances": "case:sites3", "kwargs": {"reward_baseline": "fixed",
                                                                                     "mask_search_nodes": 1},
                              "seeds": [2]},
}
"""name → how to make the env: its action type, its instances, keyword arguments, seeds (one episode each)."""


def instances_of(spec: dict[str, Any]):
    """The instance(s) a spec names (a case's bundled days, or a test instance)."""
    from aidc_env.case import build_instance, build_instances

    kind = spec["instances"]
    if kind.startswith("case:"):
        return list(build_instances(kind[5:], **spec.get("overrides", {})).values())
    if kind.startswith("dayahead"):
        from tests.conftest import dayahead_instance

        return dayahead_instance(seed=0, days=2, share=0.5 if kind.endswith("share") else 0.0)
    if kind.startswith("scaled:"):
        import importlib.util

        _, jobs, gpus = kind.split(":")
        path = HERE.parents[1] / "benchmarks" / "fleet_env_scaling.py"
        module_spec = importlib.util.spec_from_file_location("fleet_env_scaling", path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        return module.scaled_fleet(build_instance("fleet"), int(jobs), int(gpus))
    raise ValueError(kind)


def digest(obs: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(obs).tobytes()).hexdigest()[:16]


def mask_hex(mask: np.ndarray) -> str:
    return np.packbits(np.asarray(mask, dtype=bool)).tobytes().hex()


def fhex(x: float) -> str:
    return float(x).hex()


INFO_KEYS = ("invalid_action", "safety_fallback", "terminal_penalty_usd", "objective_usd", "job", "slot")


def info_part(info: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key in INFO_KEYS:
        if key in info:
            value = info[key]
            out[key] = fhex(value) if isinstance(value, float) else (None if value is None else int(value))
    return out


def play(env, seed: int, actions: list[int] | None = None) -> dict[str, Any]:
    """One episode: recorded actions replayed (``actions``) or seeded masked random ones drawn."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    steps = []
    record = {"reset_obs": digest(obs), "reset_info": info_part(info), "steps": steps}
    k = 0
    done = False
    while not done:
        mask = env.unwrapped.action_masks()
        if actions is not None:
            action = actions[k]
        elif rng.random() < INVALID_ACTION_SHARE:
            action = int(rng.integers(mask.size))
        else:
            valid = np.flatnonzero(mask)
            action = int(valid[rng.integers(valid.size)])
        obs, reward, done, truncated, info = env.step(action)
        steps.append({"action": action, "mask": mask_hex(mask), "reward": fhex(reward), "done": bool(done),
                      "obs": digest(obs), "info": info_part(info)})
        k += 1
    schedule = env.unwrapped.schedule()
    record["schedule"] = schedule.mode_lists()
    if env.unwrapped.n_sites > 1:
        record["sites"] = schedule.site_lists()
    return record


def make_env(spec: dict[str, Any]):
    """The env of a spec: ``DispatchEnv`` with the spec's action type (``sites``: per job on a sites case)."""
    from aidc_env.env import DispatchEnv

    action = "joint" if spec["action"] == "joint" else "per_job"
    return DispatchEnv(case=instances_of(spec), action=action, **spec["kwargs"])


def record_all(names: list[str] | None = None) -> None:
    for name, spec in SPECS.items():
        if names and name not in names:
            continue
        env = make_env(spec)
        episodes = [play(env, seed) for seed in spec["seeds"]]
        path = HERE / f"{name}.json.gz"
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump({"spec": spec, "episodes": episodes}, f, separators=(",", ":"))
        print(name, sum(len(e["steps"]) for e in episodes), "steps")


def load(name: str) -> dict[str, Any]:
    with gzip.open(HERE / f"{name}.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)


if __name__ == "__main__":
    import sys

    record_all(sys.argv[1:] or None)
