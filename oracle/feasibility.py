"""Quick feasibility checks before the MILP, with reasons a person can act on.

Three necessary conditions, from the cheapest; each failure is a proof of infeasibility:

1. **Alone**: each job's tranche is at most what its fastest mode within the pool trains in a day (with a restart unless
   it is the mode already running).
2. **Average GPUs**: ignoring restarts and checkpoint boundaries, a job needs on average at least ``n_min`` GPUs busy
   all day to train its tranche, where ``n_min`` is the lower convex hull of its (throughput, GPUs) points (pause
   included) at the required average throughput; the pool must hold the sum of the jobs' ``n_min``.
3. **Time sharing**: a small LP over the capacity-feasible joint states: some mix of them (fractions of the day) must
   train every tranche, still ignoring restarts and boundaries.

If all three pass, the MILP decides; if it proves infeasibility, the reason names what is left: restarts and checkpoint
boundaries.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import highspy
import numpy as np
from pyomo.common.tee import capture_output

from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.simulator import TRANCHE_TOLERANCE
from aidc_env.joint_choices import joint_count
from oracle.data import MAX_JOINT_STATES, capacity_feasible_states, job_coefficients
from oracle.formulations import TRANCHE_SCALE_FLOOR

LP_INFEASIBLE_STATUSES = frozenset({highspy.HighsModelStatus.kInfeasible,
                                    highspy.HighsModelStatus.kUnboundedOrInfeasible})
"""HiGHS model statuses that prove the time-sharing LP infeasible. The LP's fractions lie in a simplex (bounded), so it
cannot be unbounded: "unbounded or infeasible" is infeasible too. Any other status (optimal, or a solver failure) proves
nothing, and the MILP decides."""


@dataclass(frozen=True)
class JobNeed:
    """What one job's tranche asks of the pool."""

    name: str
    tranche_tokens: float
    max_day_tokens: float
    """The most tokens the job can train in a day alone (its fastest mode held all day)."""
    fastest_mode: str
    min_average_gpus: float
    """Fewest GPUs busy on average that can train the tranche (no restarts, any mix of modes); inf if none."""


@dataclass(frozen=True)
class FeasibilityCheck:
    """Outcome of :func:`precheck`: ``infeasible`` is a proof; otherwise the MILP decides."""

    infeasible: bool
    reason: str
    jobs: tuple[JobNeed, ...]

    def solver_reason(self, inst: Instance) -> str:
        """The reason to give when the MILP proves infeasibility although every precheck passed."""
        restart = ", ".join(f"{job.name} {job.restart_hours * 60:g} min" for job in inst.jobs)
        segments = ", ".join(f"{job.name} K = {job.segments}" for job in inst.jobs)
        return (f"no schedule within {inst.n_gpus} GPUs trains every tranche once restarts ({restart} per resume "
                f"or switch) and checkpoint boundaries ({segments}) are counted; without them a mix of modes would "
                f"fit ({self.average_gpus_text()}). The solver proved it.")

    def average_gpus_text(self) -> str:
        return ", ".join(f"{need.name} needs >= {need.min_average_gpus:.0f} GPUs on average"
                         for need in self.jobs if need.tranche_tokens > 0) or "no tranche"


def _tokens_needed(tranche_tokens: float) -> float:
    """The tokens the simulator counts as meeting a tranche."""
    return tranche_tokens * (1.0 - TRANCHE_TOLERANCE)


def min_average_gpus(gpus: np.ndarray, tokens_per_s: np.ndarray, rate_needed: float, allow_pause: bool) -> float:
    """Fewest GPUs busy on average (time fractions of modes, pause free) that reach an average rate."""
    if rate_needed <= 0:
        return 0.0
    points = list(zip(tokens_per_s.tolist(), gpus.tolist(), strict=True))
    if allow_pause:
        points.append((0.0, 0.0))
    best = min((n for r, n in points if r >= rate_needed), default=math.inf)  # one mode all day
    for (r1, n1), (r2, n2) in itertools.product(points, repeat=2):  # a mix of two (pause included)
        if r2 >= rate_needed and r1 <= rate_needed:
            if r2 == r1:
                best = min(best, n2)
            else:
                share = (rate_needed - r1) / (r2 - r1)
                best = min(best, n1 + share * (n2 - n1))
    return best


def precheck(inst: Instance, *, allow_pause: bool = True) -> FeasibilityCheck:
    """Necessary conditions for the tranches (see the module docstring)."""
    day_hours = inst.slots * inst.slot_hours
    needs = []
    for job in inst.jobs:
        coef = job_coefficients(inst, job)
        if job.n_modes:
            day = np.array([coef.tokens_kept[c] * job.segments if c == job.initial_mode
                            else coef.tokens_restarted[c] + coef.tokens_kept[c] * (job.segments - 1)
                            for c in range(job.n_modes)])
            fastest = int(np.argmax(day))
            max_day, label = float(day[fastest]), job.modes[fastest].label
        else:
            max_day, label = 0.0, "none"
        rate = _tokens_needed(job.tranche_tokens) / (day_hours * SECONDS_PER_HOUR)
        needs.append(JobNeed(job.name, job.tranche_tokens, max_day, label,
                             min_average_gpus(coef.gpus, coef.tokens_per_s, rate, allow_pause)))
    needs_t = tuple(needs)

    def infeasible(reason: str) -> FeasibilityCheck:
        return FeasibilityCheck(True, reason, needs_t)

    for job, need in zip(inst.jobs, needs, strict=True):
        if job.n_modes == 0 and (job.tranche_tokens > 0 or not allow_pause):
            return infeasible(f"{job.name} has no 3D mode of {job.model} that fits in {inst.n_gpus} GPUs")
        if need.max_day_tokens < _tokens_needed(job.tranche_tokens):
            return infeasible(f"{job.name}'s tranche of {job.tranche_tokens:.3g} tokens exceeds what it can train in a "
                              f"day on {inst.n_gpus} GPUs: at most {need.max_day_tokens:.3g} tokens, with its fastest "
                              f"mode {need.fastest_mode} all day")
    if not allow_pause:
        smallest = [int(job.gpus_by_choice[:-1].min()) for job in inst.jobs]
        if sum(smallest) > inst.n_gpus:
            return infeasible(f"without pausing, the jobs' smallest modes need {sum(smallest)} GPUs together "
                              f"({' + '.join(map(str, smallest))}), but the pool has {inst.n_gpus}")
    total = sum(need.min_average_gpus for need in needs)
    if total > inst.n_gpus:
        parts = ", ".join(f"{need.name} >= {need.min_average_gpus:.0f} for {need.tranche_tokens:.3g} tokens"
                          for need in needs if need.tranche_tokens > 0)
        return infeasible(f"the daily tranches need on average at least {total:.0f} GPUs busy all day ({parts}, each "
                          f"at its most GPU-efficient mix of modes), but the pool has only {inst.n_gpus} GPUs")
    check = FeasibilityCheck(False, "", needs_t)
    if (joint_count(inst) <= MAX_JOINT_STATES and any(job.tranche_tokens > 0 for job in inst.jobs)
            and not _time_sharing_feasible(inst, allow_pause, day_hours)):
        return infeasible(f"no mix of joint modes within {inst.n_gpus} GPUs trains every tranche in a day, even "
                          f"ignoring restarts and checkpoint boundaries ({check.average_gpus_text()})")
    return check


def _time_sharing_feasible(inst: Instance, allow_pause: bool, day_hours: float) -> bool:
    """LP: fractions f_S ≥ 0 of capacity-feasible joint states, Σ f = 1, every tranche trained."""
    states = capacity_feasible_states(inst)[0]
    if not allow_pause:
        states = states[np.all(states != PAUSE, axis=1)]
    if states.shape[0] == 0:
        return False
    day_seconds = day_hours * SECONDS_PER_HOUR
    rows, rhs = [], []
    for j, job in enumerate(inst.jobs):
        if job.tranche_tokens > 0:
            # Scaled (like the MILP's rows): −Σ f·r·D / ref ≤ −W (1 − tol) / ref.
            rate = job.tokens_per_s_by_choice[states[:, j]]
            reference = max(job.tranche_tokens, TRANCHE_SCALE_FLOOR * float(rate.max(initial=0.0)) * day_seconds)
            rows.append(-rate * day_seconds / reference)
            rhs.append(-_tokens_needed(job.tranche_tokens) / reference)
    return _lp_feasible(np.array(rows), np.array(rhs))


def _lp_feasible(a_ub: np.ndarray, b_ub: np.ndarray) -> bool:
    """Whether some f ≥ 0 with Σ f = 1 has ``a_ub @ f ≤ b_ub`` (HiGHS through highspy; False only if proven)."""
    n_rows, n_cols = a_ub.shape[0] + 1, a_ub.shape[1]
    matrix = np.vstack([a_ub, np.ones((1, n_cols))])  # the inequality rows, then Σ f = 1
    col, row = np.nonzero(matrix.T)  # column-wise (CSC) order of the nonzeros
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n_cols, n_rows
    lp.col_cost_ = np.zeros(n_cols)
    lp.col_lower_ = np.zeros(n_cols)
    lp.col_upper_ = np.full(n_cols, highspy.kHighsInf)
    lp.row_lower_ = np.append(np.full(n_rows - 1, -highspy.kHighsInf), 1.0)
    lp.row_upper_ = np.append(b_ub, 1.0)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.concatenate([[0], np.cumsum(np.bincount(col, minlength=n_cols))]).astype(np.int32)
    lp.a_matrix_.index_ = row.astype(np.int32)
    lp.a_matrix_.value_ = matrix.T[col, row]
    with capture_output(capture_fd=True):  # highspy prints its banner on the first Highs() of a process
        highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.passModel(lp)
    highs.run()
    return highs.getModelStatus() not in LP_INFEASIBLE_STATUSES
