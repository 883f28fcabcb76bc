"""The data of the decomposition (:mod:`oracle.decomposition`): one pool per site, one state graph per job.

A job's state is a (site, choice) pair, the choice a mode or PAUSE: the site holding its checkpoint during a segment,
where it runs if it runs. A path is a job's (schedule row, site row): one state per stage (checkpoint segment), a move
only between stages.

- :class:`Pool`: per slot, the GPUs left to the jobs (the pool less its inference), the load with no job running, the
  renewable output, the simulator's cost of a MW of import and of curtailment, and its grid calls' load limits
  (:mod:`oracle.call_rows`: a call's payment per MWh adds to the cost of a MW of import);
- :class:`JobGraph`: the states allowed in each stage (a fine-tuning window, or a state needing more GPUs than its site
  leaves, is masked), the tokens of each arc (held: the whole segment; else the hours after a (re)start, less the
  transfer time after a move; a pause makes nothing), the target, and per state its GPUs and load at its site and its
  own cost per slot (the idle-GPU value it gives up).

Placements (docs/sites.md): ``move`` (from the home site, moves at checkpoints), ``home``, ``stay`` (one site per job
for the horizon) and ``free`` (chosen sites at t = 0, moves later); the last two add a virtual initial state, and
``stay`` gives cross-site arcs :data:`NO_ARC_TOKENS`. Every number comes from :mod:`aidc_env.simulator` on each site's
one-site view: :meth:`DecompositionData.objective_usd` of a schedule equals the simulator's objective.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aidc_env.errors import require
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.simulator import (TRANCHE_TOLERANCE, facility_load_mw, pool_load_mw, renewable_first,
                                segment_productive_hours, slot_decision_cost_usd, slot_idle_value_usd)
from oracle.call_rows import FIT_TOL_MW, pool_calls, refusal
from oracle.constants import PLACEMENTS
from oracle.data import renewable_cost_usd

NO_ARC_TOKENS = -1e30
"""Tokens of a forbidden arc (a move under ``placement="stay"``)."""
TARGET_MARGIN = TRANCHE_TOLERANCE / 2
"""A path must make tokens ≥ target·(1 − margin): inside the simulator's 'met' test (as the day oracle's
``TRANCHE_MARGIN``), so that float rounding never turns a found schedule into a missed target."""


@dataclass(frozen=True, eq=False)
class Pool:
    """One site's pool (arrays over the T slots): the GPUs the jobs may use (the pool less the inference GPUs), the
    facility load with no job running (inference, every other GPU idle; MW), the renewable output, the simulator's
    decision cost of 1 MW of grid import (a call's payment per MWh included: ``call_usd_per_mw``) and of curtailment
    held over a slot ($), the lowest and highest load any schedule can reach (for the convex envelope of the slot cost
    where it is concave: negative prices), and the most load the grid calls allow (MW; ∞ outside calls)."""

    name: str
    capacity_gpus: np.ndarray
    base_load_mw: np.ndarray
    renewable_mw: np.ndarray
    grid_usd_per_mw: np.ndarray
    curtailment_usd_per_mw: np.ndarray
    load_low_mw: np.ndarray
    load_high_mw: np.ndarray
    inst: Instance
    """The site's one-site view."""
    load_limit_mw: np.ndarray
    call_usd_per_mw: np.ndarray
    """The calls' payment per MW of import held over a slot ($, in ``grid_usd_per_mw``; 0 outside calls)."""

    def slot_cost_usd(self, load_mw: np.ndarray) -> np.ndarray:
        """The simulator's decision cost of each slot at the given facility loads (renewable first), less the calls'
        payments for the import below the baseline (their constant part aside: :mod:`oracle.call_rows`)."""
        _, grid, curtailment = renewable_first(np.asarray(load_mw, dtype=float), self.renewable_mw)
        cost = slot_decision_cost_usd(self.inst, grid, curtailment)
        return cost + self.call_usd_per_mw * grid if self.inst.grid_calls else cost

    @property
    def convex(self) -> np.ndarray:
        """Bool per slot: the slot cost is convex in the load (grid cost + curtailment penalty ≥ 0 per MW)."""
        return self.grid_usd_per_mw + self.curtailment_usd_per_mw >= 0


@dataclass(frozen=True, eq=False)
class JobGraph:
    """One job's schedules as paths through a layered graph, one layer (stage) per checkpoint segment, over states
    (a mode index or PAUSE at a site): ``stage_slots`` (stages + 1,) the slot boundaries; ``choices`` and ``site_of``
    (states,) each state's schedule entry and site (−1: the virtual initial state of the "stay" and "free"
    placements); ``allowed`` (stages, states); ``arc_tokens`` (states, states) the tokens made in a stage in state c
    entered from p; ``target_tokens`` (the target less :data:`TARGET_MARGIN`; 0: none); ``gpus`` and ``load_mw``
    (states, pools) what each state uses and adds to each pool (running GPUs less their idle draw); and
    ``own_usd_per_slot`` (states,), the cost that does not go through a pool's load (the idle-GPU value given up)."""

    name: str
    stage_slots: np.ndarray
    choices: np.ndarray
    site_of: np.ndarray
    allowed: np.ndarray
    initial_state: int
    arc_tokens: np.ndarray
    target_tokens: float
    gpus: np.ndarray
    load_mw: np.ndarray
    own_usd_per_slot: np.ndarray

    @property
    def n_stages(self) -> int:
        return int(self.stage_slots.size - 1)

    @property
    def n_states(self) -> int:
        return int(self.choices.size)

    def slot_states(self, path: Sequence[int] | np.ndarray) -> np.ndarray:
        """The state of every slot of a path (one state per stage)."""
        return np.repeat(np.asarray(path, dtype=np.int64), np.diff(self.stage_slots))

    def path_tokens(self, path: Sequence[int]) -> float:
        previous = np.concatenate(([self.initial_state], np.asarray(path[:-1], dtype=np.int64)))
        return float(np.sum(self.arc_tokens[previous, np.asarray(path, dtype=np.int64)]))

    def path_ok(self, path: np.ndarray) -> bool:
        """The path uses allowed states only and meets the target."""
        return bool(np.all(self.allowed[np.arange(self.n_stages), path])) and \
            self.path_tokens(path) >= self.target_tokens

    def path_of(self, row: Sequence[int], where: Sequence[int]) -> np.ndarray:
        """The path of a schedule row and its site row (KeyError: a (site, choice) the graph has no state of)."""
        index = {(int(self.site_of[i]), int(c)): i for i, c in enumerate(self.choices)}
        return np.array([index[int(s), int(c)] for c, s in zip(row, where, strict=True)], dtype=np.int64)


def job_graph(inst: Instance, j: int, placement: str = "move", allow_pause: bool = True) -> JobGraph:
    """Job j's (site, choice) graph (see the module docstring)."""
    views, job = inst.site_views, inst.jobs[j]
    n_sites = len(views)
    base = np.array(list(range(job.n_modes)) + [PAUSE], dtype=np.int64)
    virtual = placement in ("stay", "free")
    n = n_sites * base.size + int(virtual)
    choices = np.concatenate([np.tile(base, n_sites), [job.initial_mode] if virtual else []]).astype(np.int64)
    site_of = np.concatenate([np.repeat(np.arange(n_sites), base.size), [-1] if virtual else []]).astype(np.int64)
    running = choices != PAUSE
    rate = job.tokens_per_s_by_choice[choices] * SECONDS_PER_HOUR
    kept = float(segment_productive_hours(inst, job, False))
    restarted_hours = float(segment_productive_hours(inst, job, True))
    same_site = (site_of[:, None] == site_of[None, :]) | (site_of[:, None] < 0)  # virtual: already there
    held = (choices[:, None] == choices[None, :]) & same_site
    hours = np.where(held, kept, np.where(same_site, restarted_hours, restarted_hours - inst.transfer_hours[j]))
    arc = np.where(running[None, :], rate[None, :] * hours, 0.0)
    if placement == "stay":
        arc = np.where(same_site, arc, NO_ARC_TOKENS)
    arc[:, site_of < 0] = NO_ARC_TOKENS  # nothing enters the virtual state
    per = inst.slots_per_segment(job)
    window = inst.allowed_segments(job)
    allowed = np.repeat(window[:, None], n, axis=1)
    gpus, load = np.zeros((n, n_sites), dtype=np.int64), np.zeros((n, n_sites))
    for s, view in enumerate(views):
        mine = site_of == s
        g = job.gpus_by_choice[choices[mine]].astype(np.int64)
        gpus[mine, s] = g
        load[mine, s] = facility_load_mw(view, g, job.it_power_kw_by_choice[choices[mine]]) \
            - facility_load_mw(view, 0, 0.0)
        # a state that needs more GPUs than the site leaves the jobs in some slot of a stage never fits there
        left = np.minimum.reduceat(view.n_gpus - view.inference_gpus.astype(np.int64), np.arange(job.segments) * per)
        allowed[:, mine] &= g[None, :] <= left[:, None]
        allowed[:, mine & ~running] = allow_pause | ~window[:, None]  # outside its window a job pauses
        if placement == "home" and s != inst.home_sites[j]:
            allowed[:, mine] = False
    allowed[:, site_of < 0] = False
    if virtual:
        initial = n - 1
    else:
        initial = int(np.flatnonzero((site_of == inst.home_sites[j]) & (choices == job.initial_mode))[0])
    own = np.where(site_of >= 0, inst.idle_value_usd_per_gpu_hour * inst.slot_hours * gpus.sum(axis=1), 0.0)
    target = job.tranche_tokens * (1.0 - TARGET_MARGIN) if job.tranche_tokens > 0 else 0.0
    return JobGraph(name=job.name, stage_slots=np.arange(job.segments + 1) * per, choices=choices, site_of=site_of,
                    allowed=allowed, initial_state=initial, arc_tokens=arc, target_tokens=float(target), gpus=gpus,
                    load_mw=load, own_usd_per_slot=own)


def site_pool(view: Instance, loads: Sequence[np.ndarray], gpus: Sequence[np.ndarray]) -> Pool:
    """One site's pool (its one-site view); ``loads``, ``gpus``: per job, the load and GPUs of each state here (for the
    range of loads: each job's extremes, the highest also capped by the GPUs the pool leaves the jobs times the most
    load a GPU adds)."""
    T = view.slots
    base = np.asarray(pool_load_mw(view, np.zeros(T, dtype=np.int64), np.zeros(T)), dtype=float)
    capacity = np.maximum(view.n_gpus - view.inference_gpus.astype(np.int64), 0)
    per_gpu = max((float(np.max(ld[g > 0] / g[g > 0], initial=0.0)) for ld, g in zip(loads, gpus, strict=True)),
                  default=0.0)
    low = base + sum(float(min(0.0, ld.min(initial=0.0))) for ld in loads)
    high = base + np.minimum(sum(float(max(0.0, ld.max(initial=0.0))) for ld in loads), max(per_gpu, 0.0) * capacity)
    calls = pool_calls(view)
    return Pool(name=view.case_name or "site", capacity_gpus=view.n_gpus - view.inference_gpus.astype(np.int64),
                base_load_mw=base, renewable_mw=view.renewable_mw,
                grid_usd_per_mw=slot_decision_cost_usd(view, np.ones(T), np.zeros(T)) + calls.payment_usd_per_mw,
                curtailment_usd_per_mw=slot_decision_cost_usd(view, np.zeros(T), np.ones(T)),
                load_low_mw=low, load_high_mw=high, inst=view, load_limit_mw=calls.load_limit_mw,
                call_usd_per_mw=calls.payment_usd_per_mw)


@dataclass(frozen=True, eq=False)
class DecompositionData:
    """An instance as the decomposition sees it: one pool per site, one graph per job, the constant term."""

    inst: Instance
    pools: tuple[Pool, ...]
    graphs: tuple[JobGraph, ...]
    constant_usd: float
    """What no decision changes: the take-or-pay PPA terms less the idle value of the pools with no job running and the
    calls' constant payments (:mod:`oracle.call_rows`)."""
    placement: str = "move"
    slot_hull: bool = False
    """The master LP prices each (pool, slot) cost by its convex envelope over the loads the jobs' states can sum to
    (:func:`oracle.master.hull_pieces`), not over every real load."""

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
        """The paths' GPUs fit every pool in every slot, and their loads every call's row (:mod:`oracle.call_rows`)."""
        gpus, load = self.pool_loads(paths)
        return bool(np.all(gpus <= np.array([pool.capacity_gpus for pool in self.pools]))) and all(
            bool(np.all(load[k] <= pool.load_limit_mw + FIT_TOL_MW)) for k, pool in enumerate(self.pools))

    def least_added_mw(self) -> list[np.ndarray]:
        """Per pool, (T,): the least load the jobs can add in each slot (each at its lightest allowed state)."""
        out = [np.zeros(self.inst.slots) for _ in self.pools]
        for graph in self.graphs:
            for k in range(len(self.pools)):
                low = np.where(graph.allowed, graph.load_mw[:, k][None, :], np.inf).min(axis=1)
                out[k] += np.repeat(np.where(np.isfinite(low), low, 0.0), np.diff(graph.stage_slots))
        return out

    def tokens_ok(self, paths: Sequence[np.ndarray]) -> bool:
        return all(graph.path_ok(path) for graph, path in zip(self.graphs, paths, strict=True))

    def schedule(self, paths: Sequence[Sequence[int]]) -> list[list[int]]:
        return [[int(graph.choices[s]) for s in path] for graph, path in zip(self.graphs, paths, strict=True)]

    def site_rows(self, paths: Sequence[Sequence[int]]) -> list[list[int]]:
        return [[int(graph.site_of[s]) for s in path] for graph, path in zip(self.graphs, paths, strict=True)]

    def paths_of(self, schedule: Sequence[Sequence[int]], sites: Sequence[Sequence[int]] | None = None
                 ) -> list[np.ndarray]:
        """The paths of a schedule and its sites (None: every job at its home site)."""
        if sites is None:
            sites = [[home] * len(row) for home, row in zip(self.inst.home_sites, schedule, strict=True)]
        return [graph.path_of(row, where) for graph, row, where in zip(self.graphs, schedule, sites, strict=True)]

    def replay_instance(self, paths: Sequence[np.ndarray]) -> Instance:
        """The instance the simulator replays: with "stay"/"free" each job's checkpoint starts at its first site."""
        if self.placement in ("stay", "free") and self.inst.network is not None:
            return with_home(self.inst, [row[0] for row in self.site_rows(paths)])
        return self.inst


def with_home(inst: Instance, home: Sequence[int]) -> Instance:
    """The sites instance with each job's checkpoint at ``home`` (site indices) before t = 0."""
    assert inst.network is not None
    return dataclasses.replace(inst, network=dataclasses.replace(inst.network, home=tuple(int(h) for h in home)))


def decomposition_data(inst: Instance, placement: str = "move", allow_pause: bool = True) -> DecompositionData:
    """The pools and graphs of an instance (with several sites ``slot_hull`` on). Daily minimums over a multi-day
    horizon are refused."""
    require(placement in PLACEMENTS, "placement", f"must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
    reason = refusal(inst)
    require(not reason, "method", reason)
    require(inst.horizon_days == 1 or inst.min_daily_share == 0, "min_daily_share",
            "the decomposition does not model daily minimums over several days: set it to 0 or solve each day")
    graphs = tuple(job_graph(inst, j, placement, allow_pause) for j in range(len(inst.jobs)))
    views = inst.site_views
    pools = tuple(site_pool(view, [g.load_mw[:, s] for g in graphs], [g.gpus[:, s] for g in graphs])
                  for s, view in enumerate(views))
    constant = sum(renewable_cost_usd(view) - float(np.sum(slot_idle_value_usd(view, view.inference_gpus)))
                   + pool_calls(view).constant_usd for view in views)
    return DecompositionData(inst=inst, pools=pools, graphs=graphs, constant_usd=float(constant), placement=placement,
                             slot_hull=len(views) > 1)
