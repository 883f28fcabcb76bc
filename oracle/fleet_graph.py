"""The data of the fleet oracle (:mod:`oracle.fleet`): resource pools and one state graph per job.

The fleet oracle is a Dantzig-Wolfe decomposition (DESIGN §9): each job's schedule is a path through its
own *state graph*, and a master problem couples the jobs through the *pools* they share. Both are generic
so that sites (issue 14) reuse them: a fleet has one pool and a job's states are its choices (a mode or
pause); with several sites a state is a (site, choice) pair and each site is a pool.

- :class:`Pool`: per slot, the GPUs left to the jobs (N − inference), the load with no job running
  (inference and every other GPU idle), the renewable output and the simulator's cost of a MW of grid
  import and of curtailment; the exact slot cost of a load L is ``slot_cost_usd`` (renewable first);
- :class:`JobGraph`: stages (the job's checkpoint segments, with their slots), states, the states allowed
  in each stage (windows), the initial state, the tokens an arc p → c makes in a stage (restart losses
  included), the token target, and per state the GPUs and facility load it adds to each pool and a cost
  per slot that does not depend on the shared load (the idle-GPU value it gives up).

Every number comes from :mod:`aidc_env.simulator` (:func:`facility_load_mw`, :func:`pool_load_mw`,
:func:`slot_idle_value_usd`, :func:`renewable_first`, :func:`slot_decision_cost_usd`,
:func:`segment_productive_hours`), never re-derived: :func:`schedule_objective_usd` of a schedule equals
``simulate(schedule).metrics.objective_usd`` (the oracle asserts it for every answer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aidc_env.errors import InputError
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance, Job
from aidc_env.simulator import (
    TRANCHE_TOLERANCE,
    facility_load_mw,
    pool_load_mw,
    renewable_first,
    segment_productive_hours,
    slot_decision_cost_usd,
    slot_idle_value_usd,
)

TARGET_MARGIN = TRANCHE_TOLERANCE / 2
"""A path must make tokens ≥ target·(1 − margin): inside the simulator's 'met' test (as the day oracle's
``TRANCHE_MARGIN``), so that float rounding never turns a found schedule into a missed target."""


@dataclass(frozen=True, eq=False)
class Pool:
    """A pool of GPUs with its own facility load, renewable plant and prices (arrays over the T slots)."""

    name: str
    capacity_gpus: np.ndarray
    """GPUs the jobs may use in each slot (the pool less the inference GPUs)."""
    base_load_mw: np.ndarray
    """Facility load with no job running: inference, and every other GPU idle (MW)."""
    renewable_mw: np.ndarray
    grid_usd_per_mw: np.ndarray
    """The simulator's decision cost of 1 MW of grid import held over a slot ($)."""
    curtailment_usd_per_mw: np.ndarray
    """The same for 1 MW of curtailment ($)."""
    load_low_mw: np.ndarray
    load_high_mw: np.ndarray
    """The lowest and highest facility load any schedule can reach in each slot (for the convex envelope of
    the slot cost where it is concave: negative prices)."""
    inst: Instance

    @property
    def slots(self) -> int:
        return int(self.capacity_gpus.size)

    def slot_cost_usd(self, load_mw: np.ndarray) -> np.ndarray:
        """The simulator's decision cost of each slot at the given facility loads (renewable first)."""
        _, grid, curtailment = renewable_first(np.asarray(load_mw, dtype=float), self.renewable_mw)
        return slot_decision_cost_usd(self.inst, grid, curtailment)

    @property
    def convex(self) -> np.ndarray:
        """Bool per slot: the slot cost is convex in the load (grid cost + curtailment penalty ≥ 0 per MW)."""
        return self.grid_usd_per_mw + self.curtailment_usd_per_mw >= 0


@dataclass(frozen=True, eq=False)
class JobGraph:
    """One job's schedules as paths through a layered graph: one layer (stage) per checkpoint segment."""

    name: str
    stage_slots: np.ndarray
    """(stages + 1,) slot boundaries: stage s spans slots ``stage_slots[s]:stage_slots[s + 1]``."""
    choices: np.ndarray
    """(states,) the schedule entry of each state (a mode index or PAUSE)."""
    allowed: np.ndarray
    """(stages, states) bool: the state may be used in the stage (a window's mask)."""
    initial_state: int
    arc_tokens: np.ndarray
    """(states, states): tokens made in a stage in state c entered from state p (a restart loses τ)."""
    target_tokens: float
    """Tokens a path must make (the target less :data:`TARGET_MARGIN`; 0: none)."""
    gpus: np.ndarray
    """(states, pools) GPUs the state uses in each pool."""
    load_mw: np.ndarray
    """(states, pools) facility load the state adds to each pool (MW; running GPUs less their idle draw)."""
    own_usd_per_slot: np.ndarray
    """(states,) cost per slot that does not go through a pool's load: the idle-GPU value given up ($)."""

    @property
    def n_stages(self) -> int:
        return int(self.stage_slots.size - 1)

    @property
    def n_states(self) -> int:
        return int(self.choices.size)

    @property
    def slots_per_stage(self) -> np.ndarray:
        return np.diff(self.stage_slots)

    def slot_states(self, path: Sequence[int] | np.ndarray) -> np.ndarray:
        """The state of every slot of a path (one state per stage)."""
        return np.repeat(np.asarray(path, dtype=np.int64), self.slots_per_stage)

    def path_tokens(self, path: Sequence[int]) -> float:
        previous = np.concatenate(([self.initial_state], np.asarray(path[:-1], dtype=np.int64)))
        return float(np.sum(self.arc_tokens[previous, np.asarray(path, dtype=np.int64)]))

    def path_of_schedule(self, row: Sequence[int]) -> np.ndarray:
        """The path of a schedule row (one choice per segment)."""
        index = {int(c): i for i, c in enumerate(self.choices)}
        return np.array([index[int(c)] for c in row], dtype=np.int64)

    def schedule_row(self, path: Sequence[int]) -> list[int]:
        return [int(self.choices[s]) for s in path]


def fleet_pool(inst: Instance, graphs_load: Sequence[np.ndarray], graphs_gpus: Sequence[np.ndarray]) -> Pool:
    """The one pool of a fleet instance; ``graphs_load``, ``graphs_gpus``: per job, the load and GPUs of each
    state (for the range of loads: each job's extremes, the highest also capped by the GPUs the pool leaves
    the jobs times the most load a GPU adds)."""
    T = inst.slots
    zero_gpus, zero_kw = np.zeros(T, dtype=np.int64), np.zeros(T)
    base = pool_load_mw(inst, zero_gpus, zero_kw)
    capacity = np.maximum(inst.n_gpus - inst.inference_gpus.astype(np.int64), 0)
    per_gpu = max((float(np.max(load[gpus > 0] / gpus[gpus > 0], initial=0.0))
                   for load, gpus in zip(graphs_load, graphs_gpus, strict=True)), default=0.0)
    low = base + sum(float(min(0.0, load.min(initial=0.0))) for load in graphs_load)
    most = sum(float(max(0.0, load.max(initial=0.0))) for load in graphs_load)
    high = base + np.minimum(most, max(per_gpu, 0.0) * capacity)
    return Pool(
        name="pool",
        capacity_gpus=inst.n_gpus - inst.inference_gpus.astype(np.int64),
        base_load_mw=base,
        renewable_mw=inst.renewable_mw,
        grid_usd_per_mw=slot_decision_cost_usd(inst, np.ones(T), np.zeros(T)),
        curtailment_usd_per_mw=slot_decision_cost_usd(inst, np.zeros(T), np.ones(T)),
        load_low_mw=low,
        load_high_mw=high,
        inst=inst,
    )


def job_graph(inst: Instance, job: Job, *, allow_pause: bool = True) -> JobGraph:
    """A fleet job's state graph: states are its modes then PAUSE; one stage per checkpoint segment."""
    choices = np.array(list(range(job.n_modes)) + [PAUSE], dtype=np.int64)
    n = choices.size
    per = inst.slots_per_segment(job)
    rate = job.tokens_per_s_by_choice[choices]
    kept = rate * SECONDS_PER_HOUR * float(segment_productive_hours(inst, job, False))
    restarted = rate * SECONDS_PER_HOUR * float(segment_productive_hours(inst, job, True))
    arc = np.tile(restarted, (n, 1))
    arc[np.arange(n), np.arange(n)] = kept  # holding a mode keeps it running: no checkpoint load
    gpus = job.gpus_by_choice[choices].astype(np.int64)
    allowed = np.repeat(inst.allowed_segments(job)[:, None], n, axis=1)
    # A state that needs more GPUs than the pool leaves the jobs in some slot of a stage never fits there.
    left = np.minimum.reduceat(inst.n_gpus - inst.inference_gpus.astype(np.int64), np.arange(job.segments) * per)
    allowed &= gpus[None, :] <= left[:, None]
    allowed[:, choices == PAUSE] = True
    if not allow_pause:
        allowed[:, choices == PAUSE] = False
    power = job.it_power_kw_by_choice[choices]
    load = facility_load_mw(inst, gpus, power) - facility_load_mw(inst, 0, 0.0)
    own = slot_idle_value_usd(inst, 0) - slot_idle_value_usd(inst, gpus)
    initial = int(np.flatnonzero(choices == job.initial_mode)[0])
    target = job.tranche_tokens * (1.0 - TARGET_MARGIN) if job.tranche_tokens > 0 else 0.0
    return JobGraph(name=job.name, stage_slots=np.arange(job.segments + 1) * per, choices=choices, allowed=allowed,
                    initial_state=initial, arc_tokens=arc, target_tokens=float(target), gpus=gpus[:, None],
                    load_mw=np.asarray(load, dtype=float)[:, None], own_usd_per_slot=np.asarray(own, dtype=float))


@dataclass(frozen=True, eq=False)
class FleetData:
    """A fleet instance as the decomposition sees it: its pools, one graph per job, the constant term."""

    inst: Instance
    pools: tuple[Pool, ...]
    graphs: tuple[JobGraph, ...]
    constant_usd: float
    """What no decision changes: the take-or-pay PPA term less the idle value of the whole pool with no job."""
    slot_hull: bool = False
    """The master LP prices each (pool, slot) cost by its convex envelope over the loads the jobs' states can
    sum to (:func:`oracle.fleet_master.hull_pieces`), not over every real load: the sites decomposition's."""

    def pool_loads(self, paths: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """(pools, T) GPUs and facility load of a set of paths (one per job)."""
        gpus = np.zeros((len(self.pools), self.inst.slots), dtype=np.int64)
        load = np.array([pool.base_load_mw for pool in self.pools], dtype=float)
        for graph, path in zip(self.graphs, paths, strict=True):
            states = graph.slot_states(path)
            gpus += graph.gpus[states].T
            load += graph.load_mw[states].T
        return gpus, load

    def objective_usd(self, paths: Sequence[Sequence[int]]) -> float:
        """The exact objective of a set of paths (operating cost − idle value), from the model's coefficients."""
        _, load = self.pool_loads(paths)
        energy = sum(float(np.sum(pool.slot_cost_usd(load[k]))) for k, pool in enumerate(self.pools))
        own = sum(float(np.sum(graph.own_usd_per_slot[graph.slot_states(path)]))
                  for graph, path in zip(self.graphs, paths, strict=True))
        return self.constant_usd + energy + own

    def fits(self, paths: Sequence[Sequence[int]]) -> bool:
        gpus, _ = self.pool_loads(paths)
        return bool(np.all(gpus <= np.array([pool.capacity_gpus for pool in self.pools])))

    def schedule(self, paths: Sequence[Sequence[int]]) -> list[list[int]]:
        return [graph.schedule_row(path) for graph, path in zip(self.graphs, paths, strict=True)]

    def paths(self, schedule: Sequence[Sequence[int]]) -> list[np.ndarray]:
        return [graph.path_of_schedule(row) for graph, row in zip(self.graphs, schedule, strict=True)]


def fleet_data(inst: Instance, *, allow_pause: bool = True) -> FleetData:
    """The pools and graphs of an instance (one pool). Daily minimums over a multi-day horizon are refused."""
    if inst.horizon_days > 1 and inst.min_daily_share > 0:
        raise InputError("min_daily_share", "the fleet oracle does not model daily minimums yet: set it to 0 or "
                                            "solve each day")
    graphs = tuple(job_graph(inst, job, allow_pause=allow_pause) for job in inst.jobs)
    pool = fleet_pool(inst, [graph.load_mw[:, 0] for graph in graphs], [graph.gpus[:, 0] for graph in graphs])
    ppa = float(np.sum(inst.renewable_mw) * inst.slot_hours * inst.ppa_usd_per_mwh)
    idle = float(np.sum(slot_idle_value_usd(inst, inst.inference_gpus)))
    return FleetData(inst=inst, pools=(pool,), graphs=graphs, constant_usd=ppa - idle)


def schedule_objective_usd(data: FleetData, schedule: Sequence[Sequence[int]]) -> float:
    """The decomposition's own objective of a schedule (per job, per segment: a choice)."""
    return data.objective_usd(data.paths(schedule))
