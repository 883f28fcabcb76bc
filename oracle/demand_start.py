"""A starting schedule under a tariff's demand charges: the level heuristic, a MIP start for the oracle.

Demand charges pay for the highest import of a month, so a cheap schedule keeps its import flat. For an import cap c
(MW) on the flat demand charge's slots and c·ρ on the TOU demand charges' slots, every checkpoint segment runs the joint
state of most tokens (each job's tokens relative to its target, summed) whose import stays within the cap in each of
its slots: a state of load L fits a segment when L ≤ min over its slots of (R_t + cap_t). Run as hard as the caps allow
in sunny hours, as flat as the targets allow at night. Bisection finds the least c whose schedule meets every target
(restart losses counted by the simulator, which scores every candidate); each ratio ρ of :data:`TOU_CAP_RATIOS` gives
one candidate, and the cheapest feasible one is returned.

A grid call's limit caps the import of its slots too, so the candidates deliver the calls. The heuristic needs the
joint states (one site, no fleet workloads, every job on the same checkpoint grid) and takes no power caps, tiers or
training value; otherwise it offers nothing. It only starts the search: the oracle's bound and proof are unchanged.
"""

from __future__ import annotations

import numpy as np

from aidc_env.instance import SECONDS_PER_HOUR, Instance
from aidc_env.simulator import simulate
from oracle.data import capacity_feasible_states

TOU_CAP_RATIOS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)
"""Caps on the TOU demand charges' slots as shares of the flat charge's cap: a TOU demand period (an afternoon or
evening peak) charges on top of the flat charge, so its import is worth holding lower."""
BISECTION_STEPS = 40
"""Bisection steps on the cap: 2^-40 of the facility's load range, below any load difference between states."""
RESTART_STEPS = 20
CAP_STEP = 1.01
"""When restarts leave a target short at the least cap, the cap grows by this factor up to :data:`RESTART_STEPS`
times."""
JOB_WEIGHT_RATIOS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0)
"""Weights of the second job against the first in a state's score (two jobs)."""
MAX_STATES = 200_000
"""Above this many joint states the heuristic is skipped (its tables would be large)."""


def _applies(inst: Instance) -> bool:
    """Demand charges, one site, no fleet workloads, every job on one checkpoint grid, and of the grid's side at most
    grid calls (their limits join the caps; caps, tiers and a training value are not modelled here)."""
    return (inst.has_demand_charges and not inst.has_sites and not inst.has_fleet_workloads
            and inst.cap_curve is None and inst.training_value_usd_per_gpu_hour <= 0
            and all(job.max_throughput_loss is None for job in inst.jobs)
            and len({job.segments for job in inst.jobs}) == 1)


def _call_limits_mw(inst: Instance) -> np.ndarray:
    """Per slot the least import a grid call allows (MW; +inf outside calls)."""
    limit = np.full(inst.slots, np.inf)
    for call in inst.grid_calls:
        limit[call.start_slot:call.end_slot] = np.minimum(limit[call.start_slot:call.end_slot], call.limit_mw)
    return limit


def level_schedules(inst: Instance) -> list[list[list[int]]]:
    """The candidates of the level heuristic (module docstring), one per ratio that meets the targets; [] when it does
    not apply."""
    if not _applies(inst):
        return []
    states, load = capacity_feasible_states(inst)
    if states.shape[0] > MAX_STATES:
        return []
    per = inst.slots_per_segment(inst.jobs[0])
    hours = per * inst.slot_hours
    tokens = np.stack([job.tokens_per_s_by_choice[states[:, j]] * SECONDS_PER_HOUR * hours
                       for j, job in enumerate(inst.jobs)], axis=1)  # (states, jobs) per segment, kept
    targets = np.array([max(job.tranche_tokens, 1.0) for job in inst.jobs])
    order = np.argsort(load, kind="stable")
    sorted_load = load[order]
    flat, tou = _charge_slots(inst)
    calls = _call_limits_mw(inst)
    out = []
    for weights in _job_weights(len(inst.jobs)):
        score = (tokens / targets * weights).sum(axis=1)[order]
        best_upto = order[_running_argmax(score)]  # per load rank: the state of most score at or below that load

        def schedule(cap: float, ratio: float, best_upto: np.ndarray = best_upto) -> tuple[np.ndarray, np.ndarray]:
            cap_t = np.minimum(np.where(tou, cap * ratio, np.where(flat, cap, np.inf)), calls)
            threshold = (inst.renewable_mw + cap_t).reshape(-1, per).min(axis=1)
            index = np.searchsorted(sorted_load, threshold, side="right") - 1
            chosen = np.where(index >= 0, best_upto[np.maximum(index, 0)], order[0])  # nothing fits: the least load
            return chosen, tokens[chosen].sum(axis=0)

        out += _least_caps(inst, states, schedule, targets, float(load.max()) + float(inst.renewable_mw.max()))
    return out


def _job_weights(n_jobs: int) -> list[np.ndarray]:
    """The weights of the jobs' shares of their targets in a state's score: equal, and for two jobs a geometric grid
    of :data:`JOB_WEIGHT_RATIOS` (the state of most total share may starve one job)."""
    if n_jobs != 2:
        return [np.ones(n_jobs)]
    return [np.array([1.0, ratio]) for ratio in JOB_WEIGHT_RATIOS]


def _least_caps(inst: Instance, states: np.ndarray, schedule, targets: np.ndarray, high: float) -> list:
    """Per ratio, the schedule of the least cap that meets every target (module docstring)."""
    out = []
    for ratio in TOU_CAP_RATIOS:
        lo, hi = 0.0, high
        if np.any(schedule(hi, ratio)[1] < targets):
            continue
        for _ in range(BISECTION_STEPS):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if np.all(schedule(mid, ratio)[1] >= targets) else (mid, hi)
        for _ in range(RESTART_STEPS):
            rows = states[schedule(hi, ratio)[0]].T.tolist()
            metrics = simulate(inst, rows).metrics
            if metrics.feasible and metrics.calls_delivered:
                out.append(rows)
                break
            hi *= CAP_STEP
    return out


def _running_argmax(values: np.ndarray) -> np.ndarray:
    """Per position i, the index of the largest of ``values[:i + 1]`` (the first one on ties)."""
    rises = np.concatenate(([True], values[1:] > np.maximum.accumulate(values)[:-1]))
    return np.maximum.accumulate(np.where(rises, np.arange(len(values)), 0))


def _charge_slots(inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the slots under a flat demand charge and under a TOU demand charge."""
    flat = np.zeros(inst.slots, dtype=bool)
    tou = np.zeros(inst.slots, dtype=bool)
    for charge in inst.tariff_terms.demand:
        (flat if charge.flat else tou)[charge.slots] = True
    return flat, tou


__all__ = ["TOU_CAP_RATIOS", "level_schedules"]
