"""Stochastic MPC: MPC's plan, unless a two-stage choice over the forecast's scenarios expects to save more.

At a re-planning point ``start`` the controller knows the state (each job's current choice and site, the tokens
made) and S equally likely scenarios of the remaining slots (:func:`aidc_env.information.outlook` with
``scenario=s``, every site's). A *first decision* -- the choices and sites of the segments from ``start`` up to the
first re-planning point at or after the next forecast issue (``stop``: when new information arrives; on a one-day
instance the whole day) -- is the same in every scenario (non-anticipative). The controller chooses among candidate
first decisions (MPC's, then those of the S scenarios' own optima) the one of least

    mean over s of [ cost_s(first decision) + min over recourse schedules of cost_s(recourse) ],

where every recourse must meet the remaining targets (tokens do not depend on prices, so each scenario's recourse is
feasible whatever the scenario); each rest is the oracle's optimum from the state the decision reaches, so each
evaluation is exact and the restriction is to the candidates. Ties go to MPC's.

**Centred scenarios and a significance threshold.** The forecast's scenarios are the point forecast plus
bootstrapped residual days of the training period; a small sample of them has a mean residual that is not zero, and
with a cost linear in the price an expected-cost choice over them optimises that biased mean. So the S scenarios are
re-centred on the point forecast slot by slot (:func:`centre_scenarios`: their mean *equals* the point forecast,
prices and renewables), and the controller keeps MPC's plan -- the point forecast's, made and re-used exactly as
:func:`agents.mpc.mpc_schedule` does -- and departs from it only when the best candidate's expected cost is more than
``threshold_usd`` below that of MPC's first decision. ``threshold_usd=inf`` is MPC decision for decision;
:data:`DEFAULT_THRESHOLD_USD` is tuned on validation days of the training period
(``python -m experiments.smpc_threshold``), never on held-out days.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agents.mpc import (Rows, Views, active_jobs, commit, current_choices, plan_tail, replanning_slots, rest_of_horizon,
                        site_views, solved_plan, sub_instance, tokens_made)
from aidc_env.errors import require
from aidc_env.information import issue_slots
from aidc_env.instance import PAUSE, Instance
from aidc_env.schedule import Schedule, validate_schedule
from aidc_env.simulator import reaches, simulate

DEFAULT_THRESHOLD_USD = 1.0
"""Expected saving ($, per first decision, over the scenarios) a candidate must show over MPC's before smpc departs
from MPC's plan (``python -m experiments.smpc_threshold`` on validation days; docs/uncertainty.md)."""

Decision = tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]
"""A first decision: per job, its choices, then its sites, of the segments in ``start:stop``."""


@dataclass(frozen=True)
class StochasticStep:
    """The two-stage choice at one re-planning point."""

    decision: Decision
    expected_cost_usd: float
    """Mean over the scenarios of the first decision's cost plus the recourse's (whole rest, $)."""
    candidates: tuple[Decision, ...]
    candidate_costs_usd: np.ndarray
    """(candidates,) expected cost of each candidate (inf: no recourse meets the targets)."""


def first_decision(sub: Instance, plan: tuple[Rows, Rows], span: int) -> Decision:
    """The segments of ``plan`` (modes, sites) in the first ``span`` slots of ``sub``."""
    cut = [span // sub.slots_per_segment(job) for job in sub.jobs]
    return (tuple(tuple(int(c) for c in row[:k]) for row, k in zip(plan[0], cut, strict=True)),
            tuple(tuple(int(c) for c in row[:k]) for row, k in zip(plan[1], cut, strict=True)))


def _evaluate(subs: list[Instance], span: int, decision: Decision, oracle, known: dict[int, float]) -> np.ndarray:
    """Per scenario sub-instance, the cost of the decision followed by the scenario's optimal rest (inf: none).
    ``known``: the scenarios whose own optimum starts with the decision, and its cost (not solved again)."""
    costs = np.full(len(subs), np.inf)
    for s, sub in enumerate(subs):
        if s in known:
            costs[s] = known[s]
            continue
        views = ([p.price_usd_per_mwh[:span] for p in sub.site_views], [p.renewable_shape[:span]
                                                                          for p in sub.site_views])
        head = sub_instance(sub, 0, span, [job.initial_mode for job in sub.jobs],
                            [job.tranche_tokens for job in sub.jobs], views, list(sub.home_sites))
        first = simulate(head, validate_schedule(head, [list(r) for r in decision[0]], [list(r) for r in decision[1]]))
        if not first.metrics.capacity_ok:
            return costs
        made = [m.tokens for m in first.metrics.jobs]
        if span == sub.slots:
            if all(reaches(made[j], job.tranche_tokens) for j, job in enumerate(sub.jobs)):
                costs[s] = first.metrics.objective_usd
            continue
        rest_views = ([p.price_usd_per_mwh[span:] for p in sub.site_views],
                      [p.renewable_shape[span:] for p in sub.site_views])
        rest = rest_of_horizon(sub, span, [row[-1] for row in decision[0]], made, rest_views,
                               [row[-1] for row in decision[1]])
        result = oracle.solve(rest)
        if result.schedule is None or result.objective_usd is None:
            return np.full(len(subs), np.inf)  # tokens do not depend on prices: none will do
        costs[s] = first.metrics.objective_usd + result.objective_usd
    return costs


def stochastic_step(subs: list[Instance], span: int, oracle, point_plan: tuple[Rows, Rows]) -> StochasticStep:
    """The two-stage choice over the scenario sub-instances ``subs`` (same state, the scenarios' prices): the
    candidate of least expected cost, MPC's first decision (of ``point_plan``) first."""
    require(len(subs) > 0, "scenarios", "stochastic MPC needs at least one scenario in the forecast")
    results = [oracle.solve(sub) for sub in subs]
    require(all(r.schedule is not None for r in results), "tranche",
            f"no schedule meets the targets from this state: {results[0].reason}")
    known: dict[Decision, dict[int, float]] = {}  # decision -> {scenario: its optimum's cost}
    ordered = [first_decision(subs[0], point_plan, span)]
    for s, (sub, result) in enumerate(zip(subs, results, strict=True)):
        own = first_decision(sub, solved_plan(result, sub, None), span)
        known.setdefault(own, {})[s] = result.objective_usd  # a scenario's optimum is its own best recourse
        ordered.append(own)
    candidates = tuple(dict.fromkeys(ordered))
    expected = np.array([float(np.mean(_evaluate(subs, span, decision, oracle, known.get(decision, {}))))
                         for decision in candidates])
    best = int(np.argmin(expected))  # the first of equal costs: MPC's on a tie
    return StochasticStep(decision=candidates[best], expected_cost_usd=float(expected[best]), candidates=candidates,
                          candidate_costs_usd=expected)


def centre_scenarios(point: np.ndarray, scenarios: np.ndarray, low: float = -np.inf,
                     high: float = np.inf) -> np.ndarray:
    """``scenarios`` (S, n) moved so that their mean over S equals ``point`` (n,) in every slot, within bounds.

    Each slot's deviations from the scenarios' mean are added to the point forecast; where that would leave
    ``[low, high]`` the slot's deviations are shrunk by one factor (largest in [0, 1] that fits), which keeps the mean
    equal to the point forecast. A point outside the bounds is returned as is (no spread).
    """
    scenarios = np.asarray(scenarios, dtype=float)
    point = np.asarray(point, dtype=float)
    dev = scenarios - scenarios.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(dev > 0, (high - point) / dev, np.inf)
        down = np.where(dev < 0, (low - point) / dev, np.inf)
    factor = np.clip(np.minimum(up.min(axis=0), down.min(axis=0)), 0.0, 1.0)
    factor[(point < low) | (point > high)] = 0.0
    inside = (point >= low) & (point <= high)  # rounding of point + factor * dev may step out by an ulp
    return np.where(inside, np.clip(point + factor * dev, low, high), point + factor * dev)


def scenario_subs(inst: Instance, start: int, current: list[int], made: list[float], sites: list[int],
                  information: str = "dayahead", n_scenarios: int | None = None) -> list[Instance]:
    """The rest of the horizon from ``start`` under each of the forecast's first ``n_scenarios`` scenarios (all:
    None), re-centred on the point forecast (:func:`centre_scenarios`; renewables within [0, 1]), every site's; with
    ``information="perfect"`` the one scenario is the truth."""
    if information == "perfect":
        return [rest_of_horizon(inst, start, current, made, site_views(inst, start, "perfect"), sites)]
    counts = [view.forecast.n_scenarios if view.forecast is not None else 0 for view in inst.site_views]
    require(min(counts) > 0, "forecasts", "stochastic MPC needs forecasts with scenarios")
    count = min(counts) if n_scenarios is None else min(n_scenarios, min(counts))
    point = site_views(inst, start, information)
    per_scenario = [site_views(inst, start, information, scenario=s) for s in range(count)]
    prices = [centre_scenarios(point[0][k], np.stack([v[0][k] for v in per_scenario])) for k in range(len(point[0]))]
    shapes = [centre_scenarios(point[1][k], np.stack([v[1][k] for v in per_scenario]), 0.0, 1.0)
              for k in range(len(point[1]))]
    return [rest_of_horizon(inst, start, current, made, ([p[s] for p in prices], [r[s] for r in shapes]), sites)
            for s in range(count)]


def smpc_schedule(inst: Instance, information: str = "dayahead", *, oracle=None, n_scenarios: int | None = None,
                  threshold_usd: float = DEFAULT_THRESHOLD_USD, log: list[dict] | None = None) -> Schedule:
    """Stochastic MPC over the forecast's scenarios; returns the committed schedule (scored on the truth).

    MPC's plan (the point forecast's, re-solved only when something new is known, as in :func:`agents.mpc.mpc_schedule`)
    is applied unless the two-stage choice expects to save more than ``threshold_usd`` over the stage (module
    docstring); ``threshold_usd=inf`` never computes the two-stage choice. ``log`` receives one dict per stage (slot,
    expected costs of MPC's first decision and of the best candidate, whether smpc departed).
    """
    from oracle.rolling import RollingOracle

    require(threshold_usd >= 0, "smpc-threshold", f"must be >= 0, got {threshold_usd!r}")
    oracle = oracle if oracle is not None else RollingOracle()
    schedule = [[PAUSE] * job.segments for job in inst.jobs]
    sites = [[home] * job.segments for job, home in zip(inst.jobs, inst.home_sites, strict=True)]
    points = replanning_slots(inst) + [inst.slots]
    issues = issue_slots(inst)
    plan: tuple[Rows, Rows] | None = None  # MPC's plan of the rest (active jobs), made on ``known``
    known: Views | None = None
    jobs: list[int] = []
    start = 0
    while start < inst.slots:
        issue = min([i for i in issues if i > start] + [inst.slots])
        stop = min(p for p in points if p >= issue)
        current, made = current_choices(inst, schedule, start), tokens_made(inst, schedule, start, sites)
        where = current_choices(inst, sites, start, inst.home_sites)
        view = site_views(inst, start, information)
        now = active_jobs(inst, start)
        unchanged = (plan is not None and known is not None and now == jobs
                     and all(np.array_equal(old[-new.size:], new) for old, new in zip(known[0], view[0], strict=True))
                     and all(np.array_equal(old[-new.size:], new) for old, new in zip(known[1], view[1], strict=True)))
        if not unchanged:  # as MPC: re-solve on the point forecast only when something new is known
            jobs = now
            point = rest_of_horizon(inst, start, current, made, view, where)
            plan = solved_plan(oracle.solve(point), point, plan)
            known = view
        assert plan is not None
        decision = plan
        if np.isfinite(threshold_usd):
            subs = scenario_subs(inst, start, current, made, where, information, n_scenarios)
            step = stochastic_step(subs, stop - start, oracle, plan)
            mpc_expected = float(step.candidate_costs_usd[0])
            depart = step.expected_cost_usd < mpc_expected - threshold_usd
            if log is not None:
                log.append({"slot": start, "mpc_expected_usd": mpc_expected,
                            "best_expected_usd": step.expected_cost_usd, "departed": bool(depart)})
            if depart:
                decision = ([list(row) for row in step.decision[0]], [list(row) for row in step.decision[1]])
        commit(inst, schedule, decision[0], start, stop, jobs)
        commit(inst, sites, decision[1], start, stop, jobs)
        if decision is plan:
            plan = (plan_tail(inst, plan[0], start, stop, jobs), plan_tail(inst, plan[1], start, stop, jobs))
        else:
            plan = None  # the state left MPC's plan: MPC re-plans from it at the next point
        start = stop
    return validate_schedule(inst, schedule, sites)


__all__ = ["DEFAULT_THRESHOLD_USD", "Decision", "StochasticStep", "centre_scenarios", "first_decision",
           "scenario_subs", "smpc_schedule", "stochastic_step"]
