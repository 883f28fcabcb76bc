"""The forecast plan as an observation of the PPO agent (``PPOConfig.forecast_plan``, ``information="dayahead"``).

The *forecast plan* of an instance is the oracle's schedule solved once on the day-ahead point forecast, at the
first day's issue time (:func:`agents.open_loop.forecast_plan_schedule`: what the ``forecast-plan`` rule applies
open loop, and on a one-day instance what ``mpc`` applies). It is known before the instance starts, so a policy
may read it at every slot. The agent sees it next to what it alone can see, the realised truth so far, so that it
can follow the plan and correct it when the realised prices or renewables depart from the forecast.

Features (:class:`PlanTables`, built once per instance and cached):

- per job, per slot t (``plan_table``): the plan's choice for the segment holding slot t and for the next
  segment (local choice / M_j: 0 = pause, 1 = the last Pareto mode), and the plan's progress at slot t (tokens the
  plan has made before slot t / W_j);
- per slot t (``realised_error_table``), from slots before t only: the realised price minus its day-ahead point
  forecast (divided by the episode's price scale) in the last slot, over the last hour and since the start; the
  realised renewable share of rated power minus its forecast in the last slot and since the start (0 at t = 0);
- in the wrapper (live, :class:`agents.decision_steps.DecisionSteps`): per job, actual minus planned progress,
  and for the job choosing now a one-hot of the plan's choice over the local choices.

Nothing here reads the truth of slots ≥ t at slot t: the plan reads the forecast only, the error table row t the
slots before t (checked by ``tests/test_leakage.py``).

**The plan re-made at each forecast issue** (``PPOConfig.plan = "issues"``, the default of horizons of several
days, :data:`PLANS`). On a week the forecast plan above is made once, at the first day's issue, with the later days
priced by that issue's outlook (:func:`aidc_env.information.outlook`), so it is stale after day 1. The *issue
plans* (:func:`issue_plans`) are instead the plans ``mpc`` makes: at slot 0 and at every re-planning point where a
new forecast has been issued since the current plan was made, the oracle re-solves the rest of the horizon on the
outlook known then (:func:`aidc_env.information.outlook`), from the state the previous plans reach (tokens depend
on the choices only, never on prices or renewables, so that state is a function of the forecasts issued so far). At
slot t the agent
sees the plan of the latest issue at or before t (:func:`issue_plan_tables`): its choice now and for the next
segment and its planned progress; never a choice made at a later issue. Followed, the issue plans are ``mpc``'s
schedule decision for decision (the warm start's teacher). On one day they are the forecast plan.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.open_loop import forecast_plan_schedule
from aidc_env.env.observation import PROGRESS_OBS_HIGH
from aidc_env.information import slots_per_hour
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.io import read_json_file, write_json
from aidc_env.simulator import slot_productive_hours

PLAN_TIME_LIMIT_S = 120.0
"""Time limit of each plan's oracle solve: evaluate.py's default ``--time-limit`` (so the plan is the
``forecast-plan`` row's)."""
PLAN_MIP_GAP = 1e-4
"""Relative gap of each plan's solve: evaluate.py's default ``--mip-gap`` (``oracle.constants.DEFAULT_MIP_GAP``)."""
PLAN_JOB_FEATURES = 3
"""Per job in :func:`plan_table`: planned choice now, planned choice of the next segment, planned progress."""
REALISED_ERROR_FEATURES = 5
"""Columns of :func:`realised_error_table`."""
ERROR_CLIP = 10.0
"""Price errors (in units of the episode's price scale) are clipped to [-10, 10]."""
PROGRESS_GAP_CLIP = 1.0
"""Actual minus planned progress is clipped to [-1, 1]."""
PLANS = ("forecast", "issues")
"""``PPOConfig.plan``: the plan observed (and cloned): the forecast plan made once at slot 0, or the plans re-made
at each forecast issue (:func:`issue_plans`)."""
ISSUE_PLAN_FORMAT = 2
"""Version of the issue plans' files in a :class:`ForecastPlans` ``cache_dir`` (2: keyed by the whole instance,
:func:`plan_key`)."""

IssuePlans = list[tuple[int, list[list[int]]]]
"""(slot the plan was made at, the whole horizon's schedule: committed segments before it, the plan after)."""


class ForecastPlans:
    """The forecast plan of each instance, solved once (by day) with one reused oracle.

    ``oracle``: a :class:`oracle.rolling.RollingOracle` (default: one built on first use, with
    :data:`PLAN_TIME_LIMIT_S` and :data:`PLAN_MIP_GAP`). Pickles without the oracle (subprocess envs).
    """

    def __init__(self, oracle: Any = None, plans: dict[str, list[list[int]]] | None = None,
                 cache_dir: str | Path | None = None):
        self._oracle = oracle
        self.plans: dict[str, list[list[int]]] = dict(plans or {})
        """Plans by :func:`plan_key`."""
        self.issues: dict[str, IssuePlans] = {}
        """Issue plans (:func:`issue_plans`) by :func:`plan_key`."""
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        """Where issue plans are kept on disk (by key, oracle time limit and gap), or None."""

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_oracle": None}

    def oracle(self) -> Any:
        if self._oracle is None:
            from oracle.rolling import RollingOracle

            self._oracle = RollingOracle(time_limit_s=PLAN_TIME_LIMIT_S, mip_gap=PLAN_MIP_GAP)
        return self._oracle

    def plan(self, inst: Instance) -> list[list[int]]:
        """The instance's forecast plan (solved on first request; keyed by the day and the forecast)."""
        key = plan_key(inst)
        found = self.plans.get(key)
        if found is None:
            found = self.plans[key] = forecast_plan_schedule(inst, self.oracle(), "dayahead").mode_lists()
        return found

    def issue_plans(self, inst: Instance) -> IssuePlans:
        """The instance's issue plans (solved on first request, or read from ``cache_dir``)."""
        key = plan_key(inst)
        found = self.issues.get(key)
        if found is not None:
            return found
        oracle = self.oracle()
        path = None
        if self.cache_dir is not None:
            tag = f"{key}/{oracle.time_limit_s!r}/{oracle.mip_gap!r}/{ISSUE_PLAN_FORMAT}"
            path = self.cache_dir / f"{hashlib.sha1(tag.encode()).hexdigest()[:20]}.json"
            if path.exists():
                data = read_json_file(path, "oracle-cache")
                found = [(int(start), [list(map(int, row)) for row in sched]) for start, sched in data["plans"]]
        if found is None:
            found = issue_plans(inst, oracle)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_json(path, {"key": key, "time_limit_s": oracle.time_limit_s, "mip_gap": oracle.mip_gap,
                                  "plans": [[start, sched] for start, sched in found]})
        self.issues[key] = found
        return found

    def tables(self, inst: Instance, plan: str = "forecast") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(plan table, planned progress (J, T + 1), the plan's local choice (J, T + 1)) of the observed ``plan``
        (:data:`PLANS`): :func:`plan_table` of the forecast plan, or :func:`issue_plan_tables`."""
        if plan == "issues":
            return issue_plan_tables(inst, self.issue_plans(inst))
        schedule = self.plan(inst)
        return (*plan_table(inst, schedule), plan_local(inst, schedule))

    def fill(self, instances: Iterable[Instance], plan: str = "forecast") -> ForecastPlans:
        """Solve every instance's plan now (before envs are forked)."""
        for inst in instances:
            if plan == "issues":
                self.issue_plans(inst)
            else:
                self.plan(inst)
        return self


def plan_key(inst: Instance) -> str:
    """The cache key of an instance's plan: its first day, horizon and a digest of the whole instance (its exchange
    JSON: jobs, sites, truth and point forecast), so that another case on the same day and forecast never reads this
    one's plans."""
    assert inst.forecast is not None  # the env refuses day-ahead instances without forecasts
    digest = hashlib.sha1(inst.to_json().encode()).hexdigest()
    return f"{inst.day}/{inst.horizon_days}/{digest[:16]}"


def planned_tokens_before(inst: Instance, plan: Sequence[Sequence[int]]) -> np.ndarray:
    """(J, T + 1): tokens each job's plan has made before slot t (the env's token arithmetic)."""
    T = inst.slots
    out = np.zeros((len(inst.jobs), T + 1))
    for j, (job, row) in enumerate(zip(inst.jobs, plan, strict=True)):
        sps = inst.slots_per_segment(job)
        previous = job.initial_mode
        made = np.zeros(T)
        for k, choice in enumerate(row):
            if choice == PAUSE:
                previous = PAUSE
                continue
            rate = job.modes[choice].tokens_per_s * SECONDS_PER_HOUR
            restarted = choice != previous
            for offset in range(sps):
                made[k * sps + offset] = rate * slot_productive_hours(inst, job, offset, restarted)
            previous = choice
        out[j, 1:] = np.cumsum(made)
    return out


def plan_table(inst: Instance, plan: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(table, planned progress): table (T + 1, J · 3) float32 per slot t, per job: the plan's choice for the
    segment holding t and for the next segment (local choice / M_j, 0 past the end), the plan's progress before
    t (/ W_j, clipped like the env's progress); planned progress (J, T + 1) unclipped."""
    T = inst.slots
    J = len(inst.jobs)
    tokens = planned_tokens_before(inst, plan)
    progress = np.zeros((J, T + 1))
    table = np.zeros((T + 1, J * PLAN_JOB_FEATURES), dtype=np.float32)
    for j, (job, row) in enumerate(zip(inst.jobs, plan, strict=True)):
        sps = inst.slots_per_segment(job)
        local = np.append(np.asarray(row, dtype=float) + 1, [0.0, 0.0]) / max(job.n_modes, 1)
        segment = np.arange(T + 1) // sps
        W = job.tranche_tokens
        progress[j] = tokens[j] / W if W > 0 else 1.0
        table[:, PLAN_JOB_FEATURES * j] = local[segment]
        table[:, PLAN_JOB_FEATURES * j + 1] = local[segment + 1]
        table[:, PLAN_JOB_FEATURES * j + 2] = np.minimum(progress[j], PROGRESS_OBS_HIGH)
    return table, progress


def plan_local(inst: Instance, plan: Sequence[Sequence[int]]) -> np.ndarray:
    """(J, T + 1) int64: per slot, each job's local choice in the plan (choice + 1; 0 = pause and past the end)."""
    local = np.zeros((len(inst.jobs), inst.slots + 1), dtype=np.int64)
    for j, (job, row) in enumerate(zip(inst.jobs, plan, strict=True)):
        local[j, : inst.slots] = np.repeat(np.asarray(row, dtype=np.int64) + 1, inst.slots_per_segment(job))
    return local


def issue_plans(inst: Instance, oracle: Any) -> IssuePlans:
    """The plans ``mpc`` (:func:`agents.mpc.mpc_schedule`, day-ahead information) makes on ``inst``, each as the
    whole horizon's schedule (segments committed before it was made, then the plan), with the slot it was made at.

    At slot 0 and at every re-planning point whose outlook (the forecasts issued by then,
    :func:`aidc_env.information.outlook`) is not the current plan's outlook's tail, the rest of the horizon is
    re-solved from the state the committed segments reach; otherwise the plan is kept, as ``mpc`` keeps it. Reads
    the forecasts only (tokens depend on the choices, not on the truth): what is known at each plan's slot."""
    from agents.mpc import mpc_schedule

    out: IssuePlans = []
    mpc_schedule(inst, "dayahead", oracle=oracle, on_replan=lambda start, whole: out.append((start, whole)))
    return out


def issue_plan_tables(inst: Instance, plans: IssuePlans) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(plan table, planned progress (J, T + 1), local choice (J, T + 1)) as :func:`plan_table` and
    :func:`plan_local`, row t from the latest issue plan made at or before slot t (the last row: the last plan)."""
    T = inst.slots
    J = len(inst.jobs)
    table = np.zeros((T + 1, J * PLAN_JOB_FEATURES), dtype=np.float32)
    progress = np.zeros((J, T + 1))
    local = np.zeros((J, T + 1), dtype=np.int64)
    starts = [start for start, _ in plans] + [T + 1]
    for (start, whole), stop in zip(plans, starts[1:], strict=True):
        rows, plan_progress = plan_table(inst, whole)
        table[start:stop] = rows[start:stop]
        progress[:, start:stop] = plan_progress[:, start:stop]
        local[:, start:stop] = plan_local(inst, whole)[:, start:stop]
    return table, progress, local


def realised_error_table(inst: Instance, price_scale_usd_per_mwh: float) -> np.ndarray:
    """(T + 1, 5) float32: per slot t, from the slots before t only: realised − forecast price / scale in slot
    t − 1, over the last hour and since the start; realised − forecast renewable share of the rated facility
    power in slot t − 1 and since the start. Row 0 is 0 (nothing realised yet)."""
    T = inst.slots
    forecast = inst.forecast
    assert forecast is not None  # the env refuses day-ahead instances without forecasts
    price_error = np.clip((inst.price_usd_per_mwh - forecast.price_usd_per_mwh) / price_scale_usd_per_mwh,
                          -ERROR_CLIP, ERROR_CLIP)
    share = inst.renewable_ratio  # renewable MW / rated facility MW = ratio × shape
    renewable_error = share * (inst.renewable_shape - forecast.renewable_shape)
    hour = slots_per_hour(inst)
    table = np.zeros((T + 1, REALISED_ERROR_FEATURES), dtype=np.float32)
    cum_price = np.concatenate([[0.0], np.cumsum(price_error)])
    cum_ren = np.concatenate([[0.0], np.cumsum(renewable_error)])
    t = np.arange(1, T + 1)
    first_of_hour = np.maximum(t - hour, 0)
    table[1:, 0] = price_error[t - 1]
    table[1:, 1] = (cum_price[t] - cum_price[first_of_hour]) / (t - first_of_hour)
    table[1:, 2] = cum_price[t] / t
    table[1:, 3] = renewable_error[t - 1]
    table[1:, 4] = cum_ren[t] / t
    return table


def plan_bounds(inst: Instance, n_choices: int) -> tuple[np.ndarray, np.ndarray]:
    """Observation bounds of everything the wrapper appends with the forecast plan (in its order)."""
    J = len(inst.jobs)
    ren = inst.renewable_ratio
    per_job_low = np.tile([0.0, 0.0, 0.0], J)
    per_job_high = np.tile([1.0, 1.0, PROGRESS_OBS_HIGH], J)
    error_low = np.array([-ERROR_CLIP] * 3 + [-ren] * 2)
    error_high = np.array([ERROR_CLIP] * 3 + [ren] * 2)
    low = np.concatenate([per_job_low, error_low, np.full(J, -PROGRESS_GAP_CLIP), np.zeros(n_choices)])
    high = np.concatenate([per_job_high, error_high, np.full(J, PROGRESS_GAP_CLIP), np.ones(n_choices)])
    return low, high


__all__ = ["ERROR_CLIP", "ISSUE_PLAN_FORMAT", "PLANS", "PLAN_JOB_FEATURES", "PLAN_MIP_GAP", "PLAN_TIME_LIMIT_S",
           "PROGRESS_GAP_CLIP", "REALISED_ERROR_FEATURES", "ForecastPlans", "IssuePlans", "issue_plan_tables",
           "issue_plans", "plan_bounds", "plan_key", "plan_local", "plan_table", "planned_tokens_before",
           "realised_error_table"]
