"""The fleet env's scaling: µs per agent step against CartPole-v1 timed in the same run, and memory, as the jobs (2-16)
and the pool (2,048-32,768 GPUs) grow.

Instances (:func:`scaled_fleet`): the fleet case's day with its first J jobs (beyond 12 the first ones again, renamed),
a pool of N GPUs, the inference GPUs and every target scaled by N / 16,384 (targets also by 12 / J beyond 12 jobs).
Steps are timed in rounds alternating with CartPole-v1 (:func:`benchmarks.env_speed.time_fleet`, the median of the
rounds' ratios). Memory: the env's numpy tables and state, and the peak Python allocation while building it
(``tracemalloc``), in MB.

    python benchmarks/fleet_env_scaling.py [--jobs 2 4 8 12 16] [--gpus 2048 8192 16384 32768] [--steps 2000]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aidc_env.case import build_instance  # noqa: E402
from aidc_env.env import DispatchEnv  # noqa: E402
from aidc_env.instance import Instance  # noqa: E402
from aidc_env.io import dumps_json  # noqa: E402
from aidc_env.workloads import Inference  # noqa: E402

def _env_speed():
    """``benchmarks/env_speed.py`` (its :func:`time_fleet`, alternating rounds with CartPole), loaded by path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("env_speed", Path(__file__).with_name("env_speed.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


_SPEED = _env_speed()
FLEET_GOAL_RATIO = _SPEED.FLEET_GOAL_RATIO
time_fleet = _SPEED.time_fleet

FLEET_CASE_GPUS = 16_384
FLEET_CASE_JOBS = 12


def scaled_fleet(base: Instance, n_jobs: int, n_gpus: int) -> Instance:
    """The fleet case's day with ``n_jobs`` jobs on ``n_gpus`` GPUs (see the module docstring)."""
    share = n_gpus / FLEET_CASE_GPUS
    per_job = min(1.0, FLEET_CASE_JOBS / n_jobs)
    jobs = []
    for k in range(n_jobs):
        first = base.jobs[k % len(base.jobs)]
        job = first if k < len(base.jobs) else dataclasses.replace(first, name=f"{first.name}-2")
        jobs.append(dataclasses.replace(job, tranche_tokens=job.tranche_tokens * share * per_job))
    inference = tuple(dataclasses.replace(s, gpus=np.ceil(s.gpus * share).astype(np.int64),
                                          peak_gpus=int(np.ceil(s.peak_gpus * share))) for s in base.inference
                      if isinstance(s, Inference))
    return dataclasses.replace(base, jobs=tuple(jobs), n_gpus=n_gpus, inference=inference)


def measure(inst: Instance, steps: int, seed: int) -> dict[str, float]:
    tracemalloc.start()
    DispatchEnv(case=inst, action="per_job").reset(seed=seed)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    timed = time_fleet(steps, seed, inst, rounds=4)
    return {"jobs": len(inst.jobs), "gpus": inst.n_gpus, "actions": timed["actions"],
            "us_per_agent_step": timed["us_per_step"], "cartpole_us_per_step": timed["cartpole_us_per_step"],
            "ratio": timed["ratio"], "tables_mb": timed["memory_mb"], "build_peak_mb": peak / 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[2, 4, 8, 12, 16])
    parser.add_argument("--gpus", type=int, nargs="+", default=[2048, 8192, 16384, 32768])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    base = build_instance("fleet")
    rows = [measure(scaled_fleet(base, j, n), args.steps, args.seed) for j in args.jobs for n in args.gpus]
    result = {"rows": rows, "goal_ratio": FLEET_GOAL_RATIO, "load_average": list(os.getloadavg())}
    if args.json:
        print(dumps_json(result, indent=1))
        return 0
    print("| jobs | GPUs | actions | µs / agent step | CartPole µs | ratio | tables MB | build peak MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['jobs']} | {r['gpus']:,} | {r['actions']} | {r['us_per_agent_step']:.0f} | "
              f"{r['cartpole_us_per_step']:.0f} | {r['ratio']:.2f} | {r['tables_mb']:.3f} | {r['build_peak_mb']:.2f} |")
    print(f"load average {result['load_average'][0]:.2f} (goal at 12 jobs: <= {FLEET_GOAL_RATIO:g} x CartPole)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
