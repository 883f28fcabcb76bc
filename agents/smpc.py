"""Stochastic MPC: at every re-planning point, a two-stage choice over the forecast's S scenarios.

At a re-planning point ``start`` (next point ``stop``) the controller knows the state (each job's current
choice, the tokens made) and S equally likely scenarios of the remaining slots
(:func:`aidc_env.information.outlook` with ``scenario=s``). It chooses one *first decision* -- the joint
choices of the segments in ``start:stop``, the same in every scenario (non-anticipative) -- minimising

    mean over s of [ cost_s(first decision) + min over recourse schedules of cost_s(recourse) ],

where every recourse schedule must meet the remaining tranches (tokens do not depend on prices, so each
scenario's recourse is feasible whatever the scenario). It is solved by exact evaluation of candidate first
decisions: the distinct first decisions of the S per-scenario optima and of the point-forecast plan (MPC's),
or every joint first decision (``exhaustive=True``, small instances). For each candidate and scenario the
rest is the oracle's optimum with that first decision fixed (the state it reaches as the initial state),
so each evaluation is exact; the restriction is to the candidates. Ties go to the earlier candidate
(MPC's first). Costs of first decisions come from the simulator, rests from the oracle (itself checked
against the simulator). Deterministic: no randomness beyond the forecast's scenarios.

``method="extensive"`` solves each choice exactly over every first decision instead, with the two-stage
extensive form (:mod:`oracle.stochastic`); measured far slower on the 2048 case (see there), so the
candidates are the default.

**Centred scenarios and a significance threshold** (the defaults; docs/uncertainty.md). The forecast's
scenarios are the point forecast plus bootstrapped residual days of the training period; a small sample of
them has a mean residual that is not zero, and with a cost linear in the price an expected-cost choice over
them optimises that biased mean. So (``centre=True``) the S scenarios used are re-centred on the point
forecast slot by slot (:func:`centre_scenarios`: their mean *equals* the point forecast, prices and
renewables), and (``threshold_usd``) the controller keeps MPC's plan -- the point forecast's, made and
re-used exactly as :func:`agents.mpc.mpc_schedule` does -- and departs from it only when the best
candidate's expected cost is more than ``threshold_usd`` below that of MPC's first decision (both over the
same scenarios, each with its optimal recourse). By default (``stages="issues"``) a first decision spans
the segments up to the next forecast issue, when new information arrives (on a one-day instance: the
whole day, chosen among MPC's plan and the scenarios' optima by expected cost); ``stages="points"`` takes
one per re-planning point, with a recourse that assumes its scenario known from the next point on. ``threshold_usd=inf`` is MPC decision for
decision; :data:`DEFAULT_THRESHOLD_USD` was tuned on validation days of the training period
(``python -m experiments.smpc_threshold``), never on held-out days.

**Costing candidates out of sample** (``evaluation_scenarios`` E > 0, opt-in). A scenario's own optimum is
costed, by default, over a sample that contains that scenario, where its first decision is the best there is;
MPC's first decision has no such advantage, so the expected saving of a departure is biased upwards (the
optimiser's curse). With E > 0 the S scenarios only propose candidates and E further scenarios of the forecast
cost them. Measured on validation weeks and held-out weeks (docs/uncertainty.md, "Costing smpc's candidates out
of sample"): it did not make smpc cheaper than MPC on weeks, so it is not the default.

**Two more opt-ins** (docs/uncertainty.md, "smpc's recourse on what will be known"): ``recourse="informed"``
costs a candidate's rest as planned on what the controller will know at the next issue (:func:`informed_views`)
and paid on the scenario, instead of the scenario's own optimum; ``unanimous=True`` departs only where the chosen
candidate costs no more than MPC's first decision in every costing scenario. Neither made smpc's week VSS positive
on held-out weeks, so neither is the default.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from agents.mpc import (commit, current_choices, plan_tail, replanning_slots, rest_of_horizon, solved_plan,
                        sub_instance, tokens_made)
from aidc_env.instance import PAUSE, Instance
from aidc_env.errors import require
from aidc_env.information import ISSUE_HOUR, issue_slots, issued_days, outlook, price_issue_hour
from aidc_env.price_forecast import LATER_DAY_REPEAT_WEIGHT
from aidc_env.simulator import TRANCHE_TOLERANCE, simulate

MAX_EXHAUSTIVE_DECISIONS = 4096
"""Most joint first decisions ``exhaustive=True`` enumerates."""
DEFAULT_STAGES = "issues"
"""What one first decision spans by default (:data:`SMPC_STAGES`): up to the next forecast issue, the only
time new information arrives under day-ahead information (docs/uncertainty.md: the per-point two-stage
choice lost on validation and held-out days)."""
DEFAULT_THRESHOLD_USD = 1.0
"""Expected saving ($, per first decision, over the scenarios) a candidate must show over MPC's before smpc
departs from MPC's plan. Source: tuned on 12 validation days of the training period (2023-03-13..2023-11-14,
the forecaster refitted on the 289 other training days, S = 3) by ``python -m experiments.smpc_threshold
--thresholds 0,0.5,1,2 --smpc-stages issues`` (/work/runs/smpc/tune_issues.json): VSS +4.43 $ at 0, 0.5 and 1
(one departure, on one day), 0 at 2; the largest VSS, ties to the larger threshold. With ``stages="points"``
the same tuning gave VSS -125.62, -56.82, -57.52, -45.26 $ (best: 2; /work/runs/smpc/tune.json)."""

DEFAULT_RECOURSE = "clairvoyant"
"""How smpc costs a candidate's rest in a scenario by default (:data:`SMPC_RECOURSE`)."""

DEFAULT_EVALUATION_SCENARIOS = 0
"""Scenarios, beyond the S that propose candidates, on which smpc costs them by default (0: the same S, in
sample; :func:`stochastic_step`'s ``evaluation_subs``)."""

Decision = tuple[tuple[int, ...], ...]
"""A first decision: per job, its choices of the segments in ``start:stop``."""


@dataclass(frozen=True)
class StochasticStep:
    """The two-stage choice at one re-planning point."""

    decision: Decision
    expected_cost_usd: float
    """Mean over the scenarios of the first decision's cost plus the recourse's (whole rest, $)."""
    recourse: tuple[list[list[int]], ...]
    """Per scenario: the plan of the rest from ``start`` (the decision, then that scenario's recourse)."""
    costs_usd: np.ndarray
    """(S,) each scenario's cost of its plan."""
    candidates: tuple[Decision, ...]
    candidate_costs_usd: np.ndarray
    """(candidates,) expected cost of each candidate (inf: no recourse meets the tranches)."""
    candidate_scenario_costs_usd: np.ndarray
    """(candidates, S) each candidate's cost in each costing scenario (the rows' means are the expected costs)."""


def first_decision(sub: Instance, plan: list[list[int]], span: int) -> Decision:
    return tuple(tuple(int(c) for c in row[: span // sub.slots_per_segment(job)])
                 for job, row in zip(sub.jobs, plan, strict=True))


def all_decisions(sub: Instance, span: int) -> list[Decision]:
    """Every joint first decision (any mode or pause per segment; capacity is checked when it is costed)."""
    per_job = []
    for job in sub.jobs:
        choices = list(range(job.n_modes)) + [PAUSE]
        per_job.append(list(itertools.product(choices, repeat=span // sub.slots_per_segment(job))))
    count = int(np.prod([len(p) for p in per_job]))
    require(count <= MAX_EXHAUSTIVE_DECISIONS, "exhaustive", f"{count} first decisions exceed "
            f"{MAX_EXHAUSTIVE_DECISIONS}; use the candidates")
    return list(itertools.product(*per_job))


def _evaluate(subs: list[Instance], span: int, decision: Decision, oracle,
              known: dict[int, tuple[list, float]],
              views: list[tuple[np.ndarray, np.ndarray]] | None = None) -> tuple[list[list[list[int]]], np.ndarray]:
    """Per scenario: the plan (decision + recourse) and its cost; inf where none meets the tranches.

    ``known``: scenarios whose own optimum starts with ``decision`` (their best recourse, not re-solved).
    ``views``: per scenario, the (price, renewable shape) of the slots from ``span`` on that the recourse is
    planned on (:func:`informed_views`); its plan is then paid on the scenario. None: the recourse is the
    scenario's own optimum (it plans on the scenario).
    """
    S = len(subs)
    heads = [sub_instance(sub, 0, span, [job.initial_mode for job in sub.jobs],
                          [job.tranche_tokens for job in sub.jobs], sub.price_usd_per_mwh[:span],
                          sub.renewable_shape[:span]) for sub in subs]
    first = simulate(heads[0], decision).metrics
    plans: list[list[list[int]]] = [[] for _ in range(S)]
    costs = np.full(S, np.inf)
    if not first.capacity_ok:
        return plans, costs
    made = [m.tokens for m in first.jobs]
    last = [row[-1] for row in decision]
    for s, (sub, head) in enumerate(zip(subs, heads, strict=True)):
        if s in known:
            plans[s], costs[s] = known[s]
            continue
        head_cost = simulate(head, decision).metrics.operating_cost_usd
        if span == sub.slots:
            if all(made[j] >= job.tranche_tokens * (1 - TRANCHE_TOLERANCE) for j, job in enumerate(sub.jobs)):
                plans[s], costs[s] = [list(row) for row in decision], head_cost
            continue
        rest = rest_of_horizon(sub, span, last, made, sub.price_usd_per_mwh[span:], sub.renewable_shape[span:])
        planned = rest if views is None else rest_of_horizon(sub, span, last, made, *views[s])
        result = oracle.solve(planned)
        if result.schedule is None or result.objective_usd is None:
            return [[] for _ in range(S)], np.full(S, np.inf)  # tokens do not depend on prices: none will do
        plans[s] = [list(row) + list(tail) for row, tail in zip(decision, result.schedule, strict=True)]
        costs[s] = head_cost + (result.objective_usd if views is None
                                else simulate(rest, result.schedule).metrics.operating_cost_usd)
    return plans, costs


def stochastic_step(subs: list[Instance], span: int, oracle, *, point_plan: list[list[int]] | None = None,
                    exhaustive: bool = False, evaluation_subs: list[Instance] | None = None,
                    views: list[tuple[np.ndarray, np.ndarray]] | None = None) -> StochasticStep:
    """The two-stage choice over the scenario sub-instances ``subs`` (same state, the scenarios' prices).

    ``span``: slots of the first decision. ``point_plan``: MPC's plan (its first decision is the first
    candidate). ``evaluation_subs``: other scenarios (same state) on which the candidates are costed instead of
    ``subs``, which then only propose them: a scenario's own optimum is the best first decision *for that
    scenario*, so costed over a sample that contains it, it looks better than it is (the optimiser's curse),
    and MPC's first decision has no such advantage. The returned recourse and costs are then the evaluation
    scenarios'. ``views``: per costing scenario (``evaluation_subs`` if given, else ``subs``), what its recourse
    plans on (:func:`informed_views`; None: the scenario itself, the optimal recourse).
    """
    require(len(subs) > 0, "scenarios", "stochastic MPC needs at least one scenario in the forecast")
    require(evaluation_subs is None or len(evaluation_subs) > 0, "evaluation-scenarios",
            "an independent evaluation needs at least one scenario")
    optima = [oracle.solve(sub) for sub in subs]
    require(all(r.schedule is not None for r in optima), "tranche",
            f"no schedule meets the tranches from this state: {optima[0].reason}")
    known: dict[Decision, dict[int, tuple[list, float]]] = {}  # decision -> {scenario: (its optimum, cost)}
    judges = subs if evaluation_subs is None else evaluation_subs
    require(views is None or len(views) == len(judges), "views", "needs one view per costing scenario")
    if evaluation_subs is None and views is None:  # a scenario's optimum is its own best recourse
        for s, r in enumerate(optima):
            known.setdefault(first_decision(subs[s], r.schedule, span), {})[s] = (
                [list(row) for row in r.schedule], r.objective_usd)
    ordered = [first_decision(subs[0], point_plan, span)] if point_plan is not None else []
    ordered += [first_decision(subs[s], r.schedule, span) for s, r in enumerate(optima)]
    if exhaustive:
        ordered += all_decisions(subs[0], span)
    candidates = tuple(dict.fromkeys(ordered))
    best: tuple[float, Decision, list, np.ndarray] | None = None
    expected = np.full(len(candidates), np.inf)
    per_scenario = np.full((len(candidates), len(judges)), np.inf)
    for i, decision in enumerate(candidates):
        plans, costs = _evaluate(judges, span, decision, oracle, known.get(decision, {}), views)
        expected[i], per_scenario[i] = float(np.mean(costs)), costs
        if np.isfinite(expected[i]) and (best is None or expected[i] < best[0]):
            best = (expected[i], decision, plans, costs)
    assert best is not None  # the per-scenario optima's first decisions are feasible
    return StochasticStep(decision=best[1], expected_cost_usd=best[0], recourse=tuple(best[2]), costs_usd=best[3],
                          candidates=candidates, candidate_costs_usd=expected,
                          candidate_scenario_costs_usd=per_scenario)


def centre_scenarios(point: np.ndarray, scenarios: np.ndarray, low: float = -np.inf,
                     high: float = np.inf) -> np.ndarray:
    """``scenarios`` (S, n) moved so that their mean over S equals ``point`` (n,) in every slot, within bounds.

    Each slot's deviations from the scenarios' mean are added to the point forecast; where that would leave
    ``[low, high]`` the slot's deviations are shrunk by one factor (largest in [0, 1] that fits), which keeps
    the mean equal to the point forecast. A point outside the bounds is returned as is (no spread).
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


def scenario_subs(inst: Instance, start: int, current: list[int], made: list[float],
                  information: str = "dayahead", n_scenarios: int | None = None,
                  centre: bool = False, first_scenario: int = 0) -> list[Instance]:
    """The rest of the horizon from ``start`` under each scenario of the forecast (as known at ``start``).

    With ``information="perfect"`` the one scenario is the truth. ``n_scenarios``: the S scenarios from
    ``first_scenario`` on only (all from there: None). ``centre``: the S scenarios re-centred on the point
    forecast (:func:`centre_scenarios`; renewables within [0, 1]): their mean is the point forecast's outlook.
    """
    if information == "perfect":
        return [rest_of_horizon(inst, start, current, made, *outlook(inst, start, "perfect"))]
    require(inst.forecast is not None and inst.forecast.n_scenarios > first_scenario, "forecasts",
            f"stochastic MPC needs forecasts with more than {first_scenario} scenarios")
    left = inst.forecast.n_scenarios - first_scenario
    count = left if n_scenarios is None else min(n_scenarios, left)
    views = [outlook(inst, start, "dayahead", scenario=s) for s in range(first_scenario, first_scenario + count)]
    if centre:
        price, shape = outlook(inst, start, "dayahead")
        prices = centre_scenarios(price, np.stack([v[0] for v in views]))
        shapes = centre_scenarios(shape, np.stack([v[1] for v in views]), 0.0, 1.0)
        views = list(zip(prices, shapes, strict=True))
    return [rest_of_horizon(inst, start, current, made, p, r) for p, r in views]


def informed_views(inst: Instance, start: int, span: int, point: tuple[np.ndarray, np.ndarray],
                   subs: list[Instance]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per scenario sub-instance (the rest from ``start``): what the controller will plan on at ``start + span``.

    Under day-ahead information the next issue (inside the last segment of a stage ``start:start + span`` of
    ``stages="issues"``) reveals one more day's forecast and nothing else. In a scenario the controller then
    knows: the days already issued at ``start`` as now (their point forecast, ``point``: the outlook at ``start``;
    their truth is not revealed ahead of time), the newly issued day as the scenario has it (its forecast taken
    as the scenario's day), and for the days after it the issue outlook re-made from that day: the point outlook
    moved by :data:`~aidc_env.price_forecast.LATER_DAY_REPEAT_WEIGHT` of the scenario's deviation from it (the
    blend of the last issued day and the recent mean, with the recent mean as it is at ``start``; weight 1, the
    scenario's later days, for a forecast without an issue outlook, whose later days repeat the last issued day),
    and the scenario's renewables (later days repeat the last issued day's). Returns per scenario the
    (price, renewable shape) of the sub's slots from ``span`` on.
    """
    issued = issued_days(inst, start)
    require(issued < inst.horizon_days, "recourse", "no forecast is issued after this stage: it has no recourse")
    spd = inst.slots_per_day
    lo, hi = issued * spd - start, (issued + 1) * spd - start
    require(lo >= span, "recourse", "the stage must end before the newly issued day starts")
    weight = 1.0 if inst.forecast is None or inst.forecast.issue_outlook_price_usd_per_mwh is None \
        else LATER_DAY_REPEAT_WEIGHT
    views = []
    for sub in subs:
        price, shape = point[0].copy(), point[1].copy()
        price[lo:hi] = sub.price_usd_per_mwh[lo:hi]
        price[hi:] += weight * (sub.price_usd_per_mwh[hi:] - point[0][hi:])
        shape[lo:] = sub.renewable_shape[lo:]
        views.append((price[span:], shape[span:]))
    return views


SMPC_RECOURSE = ("clairvoyant", "informed")
"""How smpc costs a candidate's rest in each scenario (``recourse`` of :func:`smpc_schedule`): ``clairvoyant``, the
scenario's own optimum (a rest that knows the scenario in full from the next stage on), or ``informed``, the rest
planned on what the controller will know at the next issue (:func:`informed_views`) and paid on the scenario."""

SMPC_STAGES = ("issues", "points")
"""What one first decision spans (:func:`smpc_schedule`)."""

SMPC_METHODS = ("candidates", "extensive")
"""How each two-stage choice is solved: exact evaluation of candidate first decisions (:func:`stochastic_step`),
or the extensive form (:func:`oracle.stochastic.solve_two_stage`, exact over every first decision)."""


def smpc_schedule(inst: Instance, information: str = "dayahead", *, oracle=None, method: str = "candidates",
                  n_scenarios: int | None = None, exhaustive: bool = False,
                  threshold_usd: float = DEFAULT_THRESHOLD_USD, centre: bool = True,
                  stages: str = DEFAULT_STAGES, log: list[dict] | None = None,
                  evaluation_scenarios: int = DEFAULT_EVALUATION_SCENARIOS,
                  recourse: str = DEFAULT_RECOURSE, unanimous: bool = False) -> list[list[int]]:
    """Stochastic MPC over the forecast's scenarios; returns the committed schedule (scored on the truth).

    MPC's plan (the point forecast's, re-solved only when something new is known, as in
    :func:`agents.mpc.mpc_schedule`) is applied unless the two-stage choice expects to save more than
    ``threshold_usd`` at this re-planning point (module docstring); ``threshold_usd=inf`` never computes the
    two-stage choice. ``centre``: scenarios re-centred on the point forecast. ``log``: receives one dict per
    re-planning point (slot, expected costs of MPC's first decision and of the best candidate, whether smpc
    departed). ``stages``: the first decision spans the segments up to the next re-planning point
    (``"points"``), or up to the first re-planning point at or after the next forecast issue (``"issues"``:
    the recourse starts when new information does; on a one-day instance the whole day is one decision,
    chosen among MPC's plan and the scenarios' optima by expected cost, without recourse). ``method="extensive"`` (threshold and log not applied) falls back to the candidates when the
    extensive form finds no schedule in time. ``evaluation_scenarios`` E > 0: the S scenarios (``n_scenarios``)
    propose the candidates and the next E of the forecast's scenarios, disjoint from them, cost them (the
    threshold then compares expected costs over those E; ignored with ``information="perfect"``, whose one
    scenario is the truth). ``recourse`` (:data:`SMPC_RECOURSE`; ``informed`` needs ``stages="issues"`` and the
    candidates): how each candidate's rest is costed in a scenario; a stage without a later issue (the last
    day's, or a one-day instance's) has no recourse, so ``informed`` changes nothing there. ``unanimous``: depart
    only where the chosen candidate costs no more than MPC's first decision in every costing scenario (each log
    entry holds the per-scenario savings, ``scenario_savings_usd``).
    """
    from oracle.rolling import RollingOracle
    from oracle.stochastic import solve_two_stage

    require(method in SMPC_METHODS, "method", f"must be one of {', '.join(SMPC_METHODS)}")
    require(threshold_usd >= 0, "smpc-threshold", f"must be >= 0, got {threshold_usd!r}")
    require(stages in SMPC_STAGES, "stages", f"must be one of {', '.join(SMPC_STAGES)}")
    require(evaluation_scenarios >= 0, "smpc-evaluation-scenarios", f"must be >= 0, got {evaluation_scenarios!r}")
    require(recourse in SMPC_RECOURSE, "smpc-recourse", f"must be one of {', '.join(SMPC_RECOURSE)}")
    require(recourse == "clairvoyant" or (stages == "issues" and method == "candidates"), "smpc-recourse",
            "informed recourse needs --smpc-stages issues and the candidates method")
    require(recourse == "clairvoyant" or information == "perfect" or price_issue_hour(inst) == ISSUE_HOUR,
            "smpc-recourse", "informed recourse needs the price issued with the renewables (a price issue hour of "
            f"{ISSUE_HOUR}, not {price_issue_hour(inst)})")
    proposing = None
    if evaluation_scenarios > 0 and information != "perfect":
        require(n_scenarios is not None, "smpc-evaluation-scenarios",
                "needs the number of proposing scenarios (n_scenarios) to know where the evaluation ones start")
        require(inst.forecast is not None and n_scenarios + evaluation_scenarios <= inst.forecast.n_scenarios,
                "smpc-evaluation-scenarios", f"{n_scenarios} proposing + {evaluation_scenarios} evaluation scenarios "
                f"exceed the forecast's {inst.forecast.n_scenarios if inst.forecast is not None else 0}")
        proposing = n_scenarios
    oracle = oracle if oracle is not None else RollingOracle()
    schedule = [[PAUSE] * job.segments for job in inst.jobs]
    points = replanning_slots(inst) + [inst.slots]
    plan: list[list[int]] | None = None  # MPC's plan of the rest, made on ``known``
    committed_to = 0
    known: tuple[np.ndarray, np.ndarray] | None = None
    issues = issue_slots(inst)  # the renewables' and, when later, the price's
    for start, stop in zip(points[:-1], points[1:], strict=True):
        if stages == "issues" and start < committed_to:
            continue  # inside a stage already decided
        if stages == "issues":
            issue = min([i for i in issues if i > start] + [inst.slots])
            stop = min(p for p in points if p >= issue)
        committed_to = stop
        current, made = current_choices(inst, schedule, start), tokens_made(inst, schedule, start)
        if method == "extensive":
            subs = scenario_subs(inst, start, current, made, information, n_scenarios, centre)
            result = solve_two_stage(subs, stop - start, time_limit_s=oracle.time_limit_s, mip_gap=oracle.mip_gap)
            if result.decision is not None:
                commit(inst, schedule, [list(row) for row in result.decision], start, stop)
                plan = None
                continue
        price, shape = outlook(inst, start, information)
        unchanged = (plan is not None and known is not None and np.array_equal(known[0][-price.size:], price)
                     and np.array_equal(known[1][-shape.size:], shape))
        if not unchanged:  # as MPC: re-solve on the point forecast only when something new is known
            point = rest_of_horizon(inst, start, current, made, price, shape)
            plan = solved_plan(oracle.solve(point), point, plan)
            known = (price, shape)
        assert plan is not None
        decision: list[list[int]] = plan
        if method == "extensive" or np.isfinite(threshold_usd):
            subs = scenario_subs(inst, start, current, made, information, n_scenarios, centre)
            judges = (None if proposing is None else
                      scenario_subs(inst, start, current, made, information, evaluation_scenarios, centre, proposing))
            views = None
            if recourse == "informed" and information != "perfect" and stop < inst.slots:
                views = informed_views(inst, start, stop - start, (price, shape), subs if judges is None else judges)
            step = stochastic_step(subs, stop - start, oracle, point_plan=plan, exhaustive=exhaustive,
                                   evaluation_subs=judges, views=views)
            mpc_expected = float(step.candidate_costs_usd[0])
            best = step.candidates.index(step.decision)
            savings = step.candidate_scenario_costs_usd[0] - step.candidate_scenario_costs_usd[best]
            depart = (step.expected_cost_usd < mpc_expected - threshold_usd
                      and (not unanimous or bool(np.all(savings >= 0))))
            if log is not None:
                log.append({"slot": start, "mpc_expected_usd": mpc_expected,
                            "best_expected_usd": step.expected_cost_usd, "departed": bool(depart),
                            "scenario_savings_usd": [float(v) for v in savings]})
            if depart:
                decision = [list(row) for row in step.decision]
        commit(inst, schedule, decision, start, stop)
        if decision is plan:
            plan = plan_tail(inst, plan, start, stop)
        else:
            plan = None  # the state left MPC's plan: MPC re-plans from it at the next point
    return schedule
