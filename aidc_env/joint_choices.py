"""Joint choices of all jobs in one slot: their GPUs, IT power and facility load (built once per instance).

A job's *local choice* is 0 = pause or i = its Pareto mode i − 1; a *joint choice* is one local choice per job. Joint
choices are numbered in mixed radix with job 0 the most significant digit (``numpy.ravel_multi_index`` order over the
sizes M_j + 1): this is the env's ``Discrete`` action index. The env's action tables and the oracle's joint states
(:mod:`oracle.data`) both come from :func:`joint_choices`, and the facility load of each joint choice from the
simulator's :func:`~aidc_env.simulator.facility_load_mw`, so that the two never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aidc_env.instance import Instance
from aidc_env.simulator import facility_load_mw


@dataclass(frozen=True, eq=False)
class JointChoices:
    """Every joint choice of an instance's jobs (row a = the mixed-radix digits of a)."""

    sizes: tuple[int, ...]
    """Local choices per job: M_j + 1 (pause included)."""
    local: np.ndarray
    """(A, J) int64 local choices: 0 = pause, i = mode i − 1."""
    gpus: np.ndarray
    """(A,) int64 GPUs of each joint choice (Σ_j n)."""
    it_power_kw: np.ndarray
    """(A,) IT power of each joint choice (Σ_j P, kW)."""
    load_mw: np.ndarray
    """(A,) facility load of each joint choice (the simulator's :func:`facility_load_mw`, MW)."""
    fits: np.ndarray
    """(A,) bool: the GPUs fit the pool (Σ_j n ≤ N)."""

    @property
    def n_choices(self) -> int:
        return int(self.local.shape[0])

    @property
    def choices(self) -> np.ndarray:
        """(A, J) per-job choices: ``PAUSE`` (−1) or a mode index."""
        return self.local - 1


def joint_count(inst: Instance) -> int:
    """Number of joint choices Π_j (M_j + 1), pause included, before any capacity screen."""
    return int(np.prod([job.n_modes + 1 for job in inst.jobs], dtype=float))


def joint_choices(inst: Instance) -> JointChoices:
    """All joint choices of ``inst``'s jobs with their GPUs, IT power and facility load."""
    jobs = inst.jobs
    sizes = tuple(job.n_modes + 1 for job in jobs)
    local = np.indices(sizes).reshape(len(jobs), -1).T.astype(np.int64)
    gpus = np.zeros(local.shape[0], dtype=np.int64)
    power = np.zeros(local.shape[0])
    for j, job in enumerate(jobs):  # accumulated in job order, exactly as the simulator does
        gpus += job.gpus_by_choice[local[:, j] - 1]
        power += job.it_power_kw_by_choice[local[:, j] - 1]
    return JointChoices(sizes=sizes, local=local, gpus=gpus, it_power_kw=power,
                        load_mw=facility_load_mw(inst, gpus, power), fits=gpus <= inst.n_gpus)


__all__ = ["JointChoices", "joint_choices", "joint_count"]
