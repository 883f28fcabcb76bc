"""Coefficients of the oracle's models, all computed by the simulator's own functions.

The oracle never re-derives a cost: every number in its models comes from :mod:`aidc_env.simulator`
(:func:`facility_load_mw`, :func:`renewable_first`, :func:`slot_decision_cost_usd`, :func:`segment_productive_hours`),
so that the MILP objective of a schedule equals ``simulate(schedule).metrics.operating_cost_usd``.

Vocabulary:

- a *choice* of job j is a mode index 0..M_j-1 or ``PAUSE`` (-1);
- a *block* is an interval of slots between two consecutive boundaries of the union of all jobs' checkpoint segments
  (with equal K for every job, the blocks are the segments);
- a *joint state* is one choice per job whose GPUs fit in the pool; its facility load is constant over a block, so its
  exact block cost (grid cost + curtailment penalty, renewable first, negative prices included) is a precomputed number.
  Grid calls (without power caps) are priced in too: +inf where a state draws more than a call allows in a slot of the
  block, and the import a call's payment forgoes (:func:`call_costs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from aidc_env.instance import SECONDS_PER_HOUR, Instance, Job
from aidc_env.joint_choices import joint_choices, joint_count
from aidc_env.profiles import HOURS_PER_DAY
from aidc_env.simulator import renewable_first, segment_productive_hours, slot_decision_cost_usd
from oracle.call_rows import FIT_TOL_MW, joint_state_calls, pool_calls

MAX_JOINT_STATES = 50_000
"""Largest number of joint choice tuples (before the capacity screen) the joint-state ("fast") formulation builds."""
DAY_HOURS_RTOL = 1e-9
"""Rounding allowed when comparing an instance's hours (slots × slot_hours) with one day's."""


def span_days(inst: Instance) -> float:
    """Days the instance spans, which choose the oracle's multi-day settings (restricted completion tables, the label
    search's first step, the reduction's first threshold, the tolerance stop): ``horizon_days`` when > 1; else its hours
    / 24 for an instance longer than a day (a rest-of-horizon sub-instance of a rolling controller,
    :func:`agents.mpc.sub_instance`, which starts mid-horizon); else 1."""
    if inst.horizon_days > 1:
        return float(inst.horizon_days)
    hours = inst.slots * inst.slot_hours
    return hours / HOURS_PER_DAY if hours > HOURS_PER_DAY * (1.0 + DAY_HOURS_RTOL) else 1.0


def daily_rows(inst: Instance) -> list[tuple[int, int]]:
    """(job, day) of every daily-minimum row: none for a day instance or a zero ``min_daily_share``."""
    if inst.horizon_days <= 1 or inst.min_daily_share <= 0:
        return []
    return [(j, d) for j, job in enumerate(inst.jobs) if job.n_modes for d in range(inst.horizon_days)]


def day_segments(inst: Instance, j: int, d: int) -> range:
    """The checkpoint segments of job j that lie in day d (days hold whole segments: K per day)."""
    per_day = inst.segments_per_day(inst.jobs[j])
    return range(d * per_day, (d + 1) * per_day)


@dataclass(frozen=True, eq=False)
class JobCoefficients:
    """One job's per-choice numbers (arrays over its modes, pause excluded)."""

    gpus: np.ndarray
    tokens_per_s: np.ndarray
    it_power_kw: np.ndarray
    tokens_kept: np.ndarray
    """Tokens of a running segment in each mode without a restart (Σ r·3600·H)."""
    tokens_restarted: np.ndarray
    """Tokens of a running segment in each mode after a resume or a switch (r·3600·(H − τ))."""
    slots_per_segment: int


@dataclass(frozen=True, eq=False)
class OracleData:
    """Everything a formulation needs, derived from one instance (no Pyomo here)."""

    inst: Instance
    jobs: tuple[JobCoefficients, ...]
    block_starts: np.ndarray
    """First slot of each block; block b spans ``block_starts[b]:block_starts[b+1]`` (last ends at T)."""
    block_segment: np.ndarray
    """(blocks, jobs): the checkpoint segment of each job that contains the block."""
    joint_states: np.ndarray | None
    """(states, jobs) int array of capacity-feasible joint choices (PAUSE = -1), or None if too many."""
    joint_load_mw: np.ndarray | None
    """Facility load of each joint state (MW), constant over a block."""
    block_cost_usd: np.ndarray | None
    """(blocks, states): exact grid cost + curtailment penalty of each joint state over each block ($)."""
    renewable_cost_usd: float
    """The take-or-pay PPA term c_ppa·Σ R_t Δ: a constant of the objective."""
    joint_state_count_uncapped: int = field(default=0)
    calls_usd: float = 0.0
    """What the grid calls priced into ``block_cost_usd`` add whatever the schedule (:func:`call_costs`; 0 without)."""

    @property
    def constant_usd(self) -> float:
        """The joint-state objective's constant: the PPA term and the calls' constant."""
        return self.renewable_cost_usd + self.calls_usd

    @property
    def n_blocks(self) -> int:
        return int(self.block_starts.size)

    @property
    def n_states(self) -> int:
        return 0 if self.joint_states is None else int(self.joint_states.shape[0])

    def block_slots(self, b: int) -> slice:
        end = self.block_starts[b + 1] if b + 1 < self.n_blocks else self.inst.slots
        return slice(int(self.block_starts[b]), int(end))

    def blocks_of_segment(self, j: int, s: int) -> np.ndarray:
        return np.flatnonzero(self.block_segment[:, j] == s)


def job_coefficients(inst: Instance, job: Job) -> JobCoefficients:
    """Per-mode GPUs, throughput, power and token yields of a segment (kept / restarted)."""
    rate = job.tokens_per_s_by_choice[:-1]
    kept_h = float(segment_productive_hours(inst, job, False))
    restarted_h = float(segment_productive_hours(inst, job, True))
    return JobCoefficients(gpus=job.gpus_by_choice[:-1], tokens_per_s=rate, it_power_kw=job.it_power_kw_by_choice[:-1],
                           tokens_kept=rate * SECONDS_PER_HOUR * kept_h,
                           tokens_restarted=rate * SECONDS_PER_HOUR * restarted_h,
                           slots_per_segment=inst.slots_per_segment(job))


def blocks(inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    """Block start slots (union of all segment boundaries) and each job's segment per block."""
    boundaries = sorted({s * inst.slots_per_segment(job) for job in inst.jobs for s in range(job.segments)})
    starts = np.array(boundaries, dtype=np.int64)
    segment = np.stack([starts // inst.slots_per_segment(job) for job in inst.jobs], axis=1)
    return starts, segment


def capacity_feasible_states(inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    """The capacity-feasible joint choices as a (states, jobs) int array (PAUSE = -1), and their facility load.

    Built from :func:`aidc_env.joint_choices.joint_choices` (the env's own table), in the oracle's order: the
    lexicographic order of the per-job choices (modes 0..M_j-1, then PAUSE), job 0 first.
    """
    table = joint_choices(inst)
    sizes = np.array(table.sizes)
    fits = np.flatnonzero(table.fits)
    # Oracle digit of a local choice: mode i (local i + 1) -> i, pause (local 0) -> M_j.
    digits = np.where(table.local[fits] == 0, sizes - 1, table.local[fits] - 1)
    order = fits[np.argsort(np.ravel_multi_index(digits.T, table.sizes), kind="stable")]
    return table.choices[order], table.load_mw[order]


def slot_cost_of_load(inst: Instance, load_mw: np.ndarray) -> tuple[np.ndarray, float]:
    """(loads, T): the simulator's decision cost of each constant load in every slot ($), with the grid calls priced
    in where the joint states price them (:func:`call_costs`); and the calls' constant ($; 0 without)."""
    load = np.broadcast_to(np.asarray(load_mw, dtype=float)[:, None], (len(load_mw), inst.slots))
    _, grid, curtailment = renewable_first(load, np.broadcast_to(inst.renewable_mw, load.shape))
    cost = slot_decision_cost_usd(inst, grid, curtailment)
    if not inst.grid_calls or not joint_state_calls(inst):
        return cost, 0.0
    return call_costs(inst, load, grid, cost)


def call_costs(inst: Instance, load_mw: np.ndarray, grid_mw: np.ndarray, per_slot_usd: np.ndarray
               ) -> tuple[np.ndarray, float]:
    """The grid calls priced into the (loads, T) slot costs of constant loads (their import ``grid_mw``), for an
    instance without power caps and with payments linear in the import (:func:`oracle.call_rows.joint_state_calls`). A
    load over a call's limit in a slot costs +inf there (an answer delivers every call), and the payment per MWh below
    the baseline makes a MW of import in the call's slots dearer by its rate; returns the costs and the constant (the
    baseline's part and the per-MW payments, :func:`oracle.call_rows.pool_calls`)."""
    calls = pool_calls(inst)
    cost = per_slot_usd + grid_mw * calls.payment_usd_per_mw[None, :]
    return np.where(load_mw > calls.load_limit_mw[None, :] + FIT_TOL_MW, np.inf, cost), calls.constant_usd


def renewable_cost_usd(inst: Instance) -> float:
    """The take-or-pay renewable term, as the simulator computes it."""
    return float(np.sum(inst.renewable_mw) * inst.slot_hours * inst.ppa_usd_per_mwh)


def oracle_data(inst: Instance, *, joint: bool = True) -> OracleData:
    """Precompute blocks, joint states and their exact block costs (``joint=False``: skip the states)."""
    starts, segment = blocks(inst)
    states = load = cost = None
    calls_usd = 0.0
    uncapped = joint_count(inst)
    if joint and uncapped <= MAX_JOINT_STATES:
        states, load = capacity_feasible_states(inst)
        per_slot, calls_usd = slot_cost_of_load(inst, load)
        cost = np.add.reduceat(per_slot, starts, axis=1).T.copy()
    return OracleData(inst=inst, jobs=tuple(job_coefficients(inst, job) for job in inst.jobs), block_starts=starts,
                      block_segment=segment, joint_states=states, joint_load_mw=load, block_cost_usd=cost,
                      renewable_cost_usd=renewable_cost_usd(inst), joint_state_count_uncapped=uncapped,
                      calls_usd=calls_usd)


def joint_path(data: OracleData, schedule: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """The joint choice of every block of a schedule (per job, per segment: a choice)."""
    n_jobs = len(data.inst.jobs)
    return [tuple(int(schedule[j][int(data.block_segment[b, j])]) for j in range(n_jobs)) for b in range(data.n_blocks)]


def joint_objective_usd(data: OracleData, schedule: Sequence[Sequence[int]]) -> float:
    """The fast model's objective of a schedule: its blocks' exact costs plus the constant terms."""
    index = {tuple(int(v) for v in row): i for i, row in enumerate(data.joint_states)}
    return data.constant_usd + sum(float(data.block_cost_usd[b, index[joint]])
                                   for b, joint in enumerate(joint_path(data, schedule)))

