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
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from agents.mpc import commit, current_choices, replanning_slots, rest_of_horizon, sub_instance, tokens_made
from aidc_env.instance import PAUSE, Instance
from aidc_env.errors import require
from aidc_env.information import outlook
from aidc_env.simulator import TRANCHE_TOLERANCE, simulate

MAX_EXHAUSTIVE_DECISIONS = 4096
"""Most joint first decisions ``exhaustive=True`` enumerates."""

Decision = tuple[tuple[int, ...], ...]
"""A first decision: per job, its choices of the segments in ``start:stop``."""


@dataclass(frozen=True)
class StochasticStep:
    """The two-stage choice at one re-planning point."""

    decision: Decision
    expected_cost_usd: float
    """Mean over the scenarios of the first decision's cost plus the optimal recourse (whole rest, $)."""
    recourse: tuple[list[list[int]], ...]
    """Per scenario: the plan of the rest from ``start`` (the decision, then that scenario's recourse)."""
    costs_usd: np.ndarray
    """(S,) each scenario's cost of its plan."""
    candidates: tuple[Decision, ...]
    candidate_costs_usd: np.ndarray
    """(candidates,) expected cost of each candidate (inf: no recourse meets the tranches)."""


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
              known: dict[int, tuple[list, float]]) -> tuple[list[list[list[int]]], np.ndarray]:
    """Per scenario: the plan (decision + optimal recourse) and its cost; inf where none meets the tranches.

    ``known``: scenarios whose own optimum starts with ``decision`` (their best recourse, not re-solved).
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
        result = oracle.solve(rest)
        if result.schedule is None or result.objective_usd is None:
            return [[] for _ in range(S)], np.full(S, np.inf)  # tokens do not depend on prices: none will do
        plans[s] = [list(row) + list(tail) for row, tail in zip(decision, result.schedule, strict=True)]
        costs[s] = head_cost + result.objective_usd
    return plans, costs


def stochastic_step(subs: list[Instance], span: int, oracle, *, point_plan: list[list[int]] | None = None,
                    exhaustive: bool = False) -> StochasticStep:
    """The two-stage choice over the scenario sub-instances ``subs`` (same state, the scenarios' prices).

    ``span``: slots of the first decision. ``point_plan``: MPC's plan (its first decision is the first
    candidate).
    """
    require(len(subs) > 0, "scenarios", "stochastic MPC needs at least one scenario in the forecast")
    optima = [oracle.solve(sub) for sub in subs]
    require(all(r.schedule is not None for r in optima), "tranche",
            f"no schedule meets the tranches from this state: {optima[0].reason}")
    known: dict[Decision, dict[int, tuple[list, float]]] = {}  # decision -> {scenario: (its optimum, cost)}
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
    for i, decision in enumerate(candidates):
        plans, costs = _evaluate(subs, span, decision, oracle, known.get(decision, {}))
        expected[i] = float(np.mean(costs))
        if np.isfinite(expected[i]) and (best is None or expected[i] < best[0]):
            best = (expected[i], decision, plans, costs)
    assert best is not None  # the per-scenario optima's first decisions are feasible
    return StochasticStep(decision=best[1], expected_cost_usd=best[0], recourse=tuple(best[2]), costs_usd=best[3],
                          candidates=candidates, candidate_costs_usd=expected)


def scenario_subs(inst: Instance, start: int, current: list[int], made: list[float],
                  information: str = "dayahead", n_scenarios: int | None = None) -> list[Instance]:
    """The rest of the horizon from ``start`` under each scenario of the forecast (as known at ``start``).

    With ``information="perfect"`` the one scenario is the truth. ``n_scenarios``: the first S only (all: None).
    """
    if information == "perfect":
        return [rest_of_horizon(inst, start, current, made, *outlook(inst, start, "perfect"))]
    require(inst.forecast is not None and inst.forecast.n_scenarios > 0, "forecasts",
            "stochastic MPC needs forecasts with scenarios")
    count = inst.forecast.n_scenarios if n_scenarios is None else min(n_scenarios, inst.forecast.n_scenarios)
    return [rest_of_horizon(inst, start, current, made, *outlook(inst, start, "dayahead", scenario=s))
            for s in range(count)]


SMPC_METHODS = ("candidates", "extensive")
"""How each two-stage choice is solved: exact evaluation of candidate first decisions (:func:`stochastic_step`),
or the extensive form (:func:`oracle.stochastic.solve_two_stage`, exact over every first decision)."""


def smpc_schedule(inst: Instance, information: str = "dayahead", *, oracle=None, method: str = "candidates",
                  n_scenarios: int | None = None, exhaustive: bool = False) -> list[list[int]]:
    """Stochastic MPC over the forecast's scenarios; returns the committed schedule (scored on the truth).

    ``method="extensive"`` falls back to the candidates when the extensive form finds no schedule in time.
    """
    from oracle.rolling import RollingOracle
    from oracle.stochastic import solve_two_stage

    require(method in SMPC_METHODS, "method", f"must be one of {', '.join(SMPC_METHODS)}")
    oracle = oracle if oracle is not None else RollingOracle()
    schedule = [[PAUSE] * job.segments for job in inst.jobs]
    points = replanning_slots(inst) + [inst.slots]
    for start, stop in zip(points[:-1], points[1:], strict=True):
        current, made = current_choices(inst, schedule, start), tokens_made(inst, schedule, start)
        subs = scenario_subs(inst, start, current, made, information, n_scenarios)
        if method == "extensive":
            result = solve_two_stage(subs, stop - start, time_limit_s=oracle.time_limit_s, mip_gap=oracle.mip_gap)
            if result.decision is not None:
                commit(inst, schedule, [list(row) for row in result.decision], start, stop)
                continue
        point = rest_of_horizon(inst, start, current, made, *outlook(inst, start, information))
        point_result = oracle.solve(point)
        step = stochastic_step(subs, stop - start, oracle,
                               point_plan=point_result.schedule, exhaustive=exhaustive)
        commit(inst, schedule, [list(row) for row in step.decision], start, stop)
    return schedule
