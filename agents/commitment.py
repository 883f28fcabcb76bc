"""Day-ahead commitment policies: what a wholesale load buys on d − 1, and how it then runs in real time.

Under two settlements (:mod:`aidc_env.settlement`) a load buys q_t day-ahead at λDA_t and settles its deviation
g_t − q_t at λRT_t. A physical load's purchase is the import of a plan it commits to, q = max(L_A − R̂, 0), A a
feasible schedule (the *commitment plan*) and R̂ the renewable forecast known when committing. The bill is linear in q
and in g, so for a commitment plan A and a dispatched schedule B::

    bill = Σ (λDA − λRT) q_A Δ  +  Σ λRT g_B Δ   (+ the rest of the simulator's objective, unchanged)

and the commitment and the real-time dispatch separate: B is chosen on the RT price alone (whatever A), A on the
spread alone (whatever B). Policies (:data:`POLICIES`), each returning q, B and the bill (:func:`settle_policy`):

- ``rt-only``: q = 0, today's bill (the reference);
- ``deterministic``: A is the oracle's plan on the DA price and the point renewable forecast, B by MPC on the truth
  (:func:`agents.mpc.mpc_schedule`, day-ahead information). Under the point forecast the RT price *is* expected to be
  the DA price, so every q has the same expected bill; buying the plan one expects to run is the tie-break that
  hedges (the RT exposure is the deviation only);
- ``stochastic``: the purchase may be anything from nothing to the plan's import in each slot,
  q_t ∈ [0, max(L_A − R̂, 0)], and minimises the expected bill over the forecast's S RT price scenarios. The bill is
  linear in q, so each slot buys all of the plan's import where real time is expected dearer (the expected spread
  s_t = λDA − mean_s λRT_s < 0) and nothing elsewhere; as the recourse B does not depend on A, A is the oracle on
  min(s, 0) with the point renewables; the same MPC dispatch. Buying nothing is one choice, so its expected bill is at
  most rt-only's. The renewable scenarios do not enter: for a fixed q the expected bill depends on them only through
  the recourse, which q does not change;
- ``hindsight``: the same on the true spread λDA − λRT with the true renewables, B the oracle on the truth
  (:func:`agents.open_loop.oracle_schedule`): the perfect-information bound of every policy here (not a policy; see
  the caveat below).

**When each commitment is made.** Day d's purchase is made at 10:00 of d − 1 (:data:`aidc_env.information.
ISSUE_HOUR`, when CAISO's day-ahead market closes: :func:`aidc_env.information.issue_slot`; the first day's before the
instance starts). A is rolled day by day: at day d's commitment time the oracle re-plans the rest of the horizon from
the state A itself reaches at the start of day d (its choices and tokens, set by the commitments of days < d, all
made earlier; tokens depend on choices only, never on prices) on the outlook known then, and day d of that plan is
committed. The outlook at day d's commitment time is :func:`aidc_env.information.outlook` at that slot: the
renewable forecasts of days ≤ d, later days repeating day d's; the DA price of days ≤ d and, for later days, the
forecast's issue outlook (:attr:`~aidc_env.information.Forecast.issue_outlook_price_usd_per_mwh`, made at day d's
issue). The stochastic spread of days ≤ d is λDA − mean_s λRT_s of the scenarios issued with them; later days repeat
day d's spread (nothing later is issued). No commitment reads the instance's truth (its RT price or renewables):
``tests/test_settlement.py`` changes the truth of day d, and the forecasts of days after d, and finds day d's q
unchanged.

**The DA price is treated as known when committing (price-taker).** CAISO publishes the DA LMP at about 13:00,
after bids close at 10:00 (:attr:`~aidc_env.information.Forecast.price_issue_hour` 13 for the supplied LMP). A
price-taking load bidding a demand curve gets, slot by slot, the quantity it would choose at the cleared price; a
plan couples the slots (the tranche), which hourly curves cannot express exactly, so planning on the cleared price is
an optimistic idealisation of the bid, stated rather than hidden. The scenarios, built around the DA price, are
treated the same way. MPC's dispatch keeps its own information (the price from ``price_issue_hour`` on).

**λDA.** :func:`dayahead_price` reads the forecast's point price, which is the CAISO DA market LMP of the site's zone
only for a forecast built with ``price_source="supplied"`` from ``caiso-2023-dayahead`` (:mod:`aidc_env.forecasts`:
``price_forecast_usd_per_mwh``, SCE's, the node of the profiles' RT price); with the default ``model`` source it is
the package's gradient-boosting forecast, not a market price, and is refused.

**Scenarios.** The forecast's (``Forecast.price_scenarios_usd_per_mwh``): with the supplied price, the DA LMP plus the
RT − DA residual of a training day drawn by a seeded bootstrap (:meth:`aidc_env.price_forecast.PriceForecaster.
scenarios`, seed per date: :func:`aidc_env.dayahead.scenario_seed`), clipped to the training prices' range; the
residual days are training days outside the instance (never the evaluated days). They are not re-centred (as smpc
does): their mean residual is precisely the expected RT − DA spread the stochastic commitment acts on. Without
scenarios the stochastic commitment is refused with how to build them (:func:`aidc_env.dayahead.dayahead_instances`
with ``n_scenarios`` ≥ 1).

**Argued with the design.** (1) The stochastic commitment is arbitrage bounded by physics: without a deviation
penalty, A buys day-ahead wherever real time is expected dearer and as little as it may elsewhere, whatever it will
run; its value rests on the sampled mean spread of S residual days, a noisy estimate (S = 10). (2) Rolling A from
its own state keeps q one feasible plan's import (so hindsight bounds it up to the renewables, below), independent of
the dispatch (the same q settles any B); re-anchoring A on the dispatch's state would track g more closely (a better
hedge) but stitch pieces of different plans. (3) Hindsight bounds commitments made against the true renewables; a
policy's q is made against the forecast R̂, which can in principle beat it, so the bound is checked, not assumed.
(4) The commitment plan is the oracle's on the view's price, whose objective also holds the PPA, curtailment
penalty, idle value and calls terms; with none of them (the 2048 case) it is exactly Σ price · q Δ + constant.
(5) A plan must meet its targets, so its import cannot be cut to nothing: where the DA price is dearer than real time
on average (SCE in Jun–Nov 2023, by $5.7/MWh over the 165 days with both prices), buying the plan's whole import
(``deterministic``) pays that premium on most of its energy; the stochastic and hindsight purchases buy only where
real time is (expected) dearer.

One site, no tariff (:func:`aidc_env.settlement.require_wholesale`). Power caps are not carried by the commitment
plan (as in MPC's re-plans).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.mpc import (active_jobs, commit, current_choices, mpc_schedule, plan_tail, rest_of_horizon, solved_plan,
                        tokens_made)
from agents.open_loop import oracle_schedule
from aidc_env.baselines import fixed_schedule
from aidc_env.errors import InputError, is_integer, require
from aidc_env.information import ISSUE_HOUR, issue_slot, outlook
from aidc_env.instance import PAUSE, Instance
from aidc_env.metrics import SimulationResult
from aidc_env.schedule import Schedule, validate_schedule
from aidc_env.settlement import TwoSettlementBill, committed_import_mw, require_wholesale, two_settlement_bill
from aidc_env.simulator import simulate

POLICIES = ("rt-only", "deterministic", "stochastic", "hindsight")
"""The commitment policies (module docstring)."""
DISPATCHES = ("fixed", "mpc", "oracle", "ppo")
"""Real-time dispatches: the fixed baseline, MPC on day-ahead information, the oracle on the truth (hindsight), a
trained PPO model (day-ahead information)."""
DEFAULT_DISPATCH = {"rt-only": "mpc", "deterministic": "mpc", "stochastic": "mpc", "hindsight": "oracle"}
"""Each policy's dispatch unless told: MPC, and the oracle on the truth for hindsight."""
SUPPLIED_SOURCE = "supplied price forecast"
"""How :func:`aidc_env.dayahead.forecast_of` names a forecast whose point price is the CSV's supplied column (the DA
LMP of ``caiso-2023-dayahead``), as opposed to the package's gradient-boosting model."""

View = tuple[np.ndarray, np.ndarray]
"""(price, renewable shape) of the slots from a day's start to the end of the horizon."""


@dataclass(frozen=True, eq=False)
class Commitment:
    """A day-ahead purchase: q per slot and the plan it is the import of."""

    policy: str
    committed_mw: np.ndarray
    """(T,) q ≥ 0 (MW): the commitment plan's import against the renewables known when committing."""
    plan: Schedule | None
    """A (None for ``rt-only``)."""
    solves: int = 0
    """Oracle solves that made A."""
    seconds: float = 0.0
    """Wall time of making the commitment (s)."""


@dataclass(frozen=True, eq=False)
class Settled:
    """A policy's commitment, its real-time dispatch B on the truth, and the two-settlement bill."""

    policy: str
    dispatch: str
    commitment: Commitment
    schedule: Schedule
    result: SimulationResult
    bill: TwoSettlementBill

    @property
    def objective_usd(self) -> float:
        """The simulator's objective with its grid cost settled in two: ``objective_usd`` + the spread ($)."""
        return self.result.metrics.objective_usd + self.bill.spread_usd

    def row(self) -> dict[str, Any]:
        """A JSON-ready summary (the bill's totals, the objective, whether B met its targets)."""
        bill = {k: v for k, v in self.bill.to_dict().items() if not isinstance(v, list)}
        return {"policy": self.policy, "dispatch": self.dispatch, **bill, "objective_usd": self.objective_usd,
                "tranches_met": bool(self.result.metrics.tranches_met), "commitment_solves": self.commitment.solves,
                "commitment_seconds": self.commitment.seconds}


# ------------------------------------------------------------------------------------------ what is known


def dayahead_price(inst: Instance) -> np.ndarray:
    """λDA (T,) ($/MWh): the point price of the instance's forecast, refused unless it is a supplied price (the DA LMP
    of ``caiso-2023-dayahead`` with ``price_source="supplied"``; see the module docstring)."""
    forecast = _forecast(inst)
    require(SUPPLIED_SOURCE in forecast.source, "forecasts", "the day-ahead price of a two-settlement bill is the "
            "forecast's supplied price (build the instances with price_source='supplied' from caiso-2023-dayahead); "
            "this forecast's price is the package's model, not a market price")
    return np.array(forecast.price_usd_per_mwh, dtype=float)


def _forecast(inst: Instance):
    require_wholesale(inst, "a day-ahead commitment")
    require(inst.forecast is not None, "forecasts", "a day-ahead commitment needs an instance with forecasts "
            "(aidc_env.dayahead.dayahead_instances)")
    return inst.forecast


def commitment_slot(inst: Instance, d: int) -> int:
    """The slot (on the instance's axis; negative before its start) at which day d's purchase is made: 10:00 of
    d − 1."""
    return issue_slot(inst, d, ISSUE_HOUR)


def point_view(inst: Instance, d: int, dayahead: np.ndarray) -> View:
    """(price, renewable shape) from day d's start as known at day d's commitment time: the DA price ``dayahead`` of
    days ≤ d (treated as known), later days the forecast's issue outlook; renewables as forecast
    (:func:`aidc_env.information.outlook` with every price issued at :data:`ISSUE_HOUR`)."""
    forecast = _forecast(inst)
    known = dataclasses.replace(forecast, price_usd_per_mwh=dayahead, price_issue_hour=ISSUE_HOUR)
    t = max(commitment_slot(inst, d), 0)
    price, shape = outlook(dataclasses.replace(inst, forecast=known), t, "dayahead")
    start = d * inst.slots_per_day - t
    return price[start:], shape[start:]


def scenario_spread(inst: Instance, dayahead: np.ndarray, n_scenarios: int | None = None) -> np.ndarray:
    """(T,) λDA − mean_s λRT_s over the forecast's first ``n_scenarios`` price scenarios (None: all) ($/MWh)."""
    forecast = _forecast(inst)
    available = forecast.n_scenarios
    require(available > 0, "scenarios", "the forecast carries no price scenarios: build the instances with "
            "aidc_env.dayahead.dayahead_instances(n_scenarios=S >= 1) (a seeded bootstrap of the forecaster's "
            "residual training days)")
    n = available if n_scenarios is None else n_scenarios
    require(is_integer(n) and 1 <= n <= available, "scenarios", f"must be an integer within 1..{available}, got {n!r}")
    return dayahead - forecast.price_scenarios_usd_per_mwh[:n].mean(axis=0)


def spread_view(inst: Instance, d: int, spread: np.ndarray) -> View:
    """(expected spread, renewable shape) from day d's start as known at day d's commitment time: the spread of day d
    (issued with its DA price), repeated over the later days (not issued yet); renewables as :func:`point_view`."""
    spd = inst.slots_per_day
    day = spread[d * spd:(d + 1) * spd]
    _, shape = point_view(inst, d, _forecast(inst).price_usd_per_mwh)
    return np.tile(day, inst.horizon_days - d), shape


# ------------------------------------------------------------------------------------------ commitment plans


def rolling_plan(inst: Instance, view: Callable[[int], View], oracle) -> tuple[Schedule, int]:
    """(A, solves): the commitment plan rolled day by day. For each day d, the rest of the horizon from the state A
    reaches at day d's start, priced with ``view(d)`` (what is known at day d's commitment time), solved by
    ``oracle`` (a :class:`oracle.rolling.RollingOracle`); day d of that plan is committed."""
    rows = [[PAUSE] * job.segments for job in inst.jobs]
    spd = inst.slots_per_day
    plan, jobs = None, None
    for d in range(inst.horizon_days):
        start, stop = d * spd, (d + 1) * spd
        price, shape = view(d)
        now = active_jobs(inst, start)
        sub = rest_of_horizon(inst, start, current_choices(inst, rows, start), tokens_made(inst, rows, start),
                              ([price], [shape]))
        plan = solved_plan(oracle.solve(sub), sub, plan if now == jobs else None)
        jobs = now
        commit(inst, rows, plan[0], start, stop, jobs)
        plan = (plan_tail(inst, plan[0], start, stop, jobs), plan_tail(inst, plan[1], start, stop, jobs))
    return validate_schedule(inst, rows), inst.horizon_days


def _oracle(oracle):
    if oracle is not None:
        return oracle
    from oracle.rolling import RollingOracle  # the oracle imports the env's packages; agents stay importable

    return RollingOracle()


def make_commitment(inst: Instance, policy: str, *, oracle=None, n_scenarios: int | None = None,
                    dayahead_price_usd_per_mwh: np.ndarray | None = None) -> Commitment:
    """The day-ahead purchase of ``policy`` (:data:`POLICIES`) on an instance with forecasts.

    ``dayahead_price_usd_per_mwh``: λDA (T,) (default :func:`dayahead_price`); ``n_scenarios``: the stochastic
    commitment's first S scenarios (default all); ``oracle``: a :class:`oracle.rolling.RollingOracle` to reuse.
    """
    require(policy in POLICIES, "policy", f"must be one of {', '.join(POLICIES)}, got {policy!r}")
    tick = time.perf_counter()
    forecast = _forecast(inst)
    if policy == "rt-only":
        return Commitment(policy, np.zeros(inst.slots), None)
    dayahead = dayahead_price(inst) if dayahead_price_usd_per_mwh is None else np.array(
        dayahead_price_usd_per_mwh, dtype=float)
    require(dayahead.shape == (inst.slots,) and bool(np.all(np.isfinite(dayahead))), "dayahead_price_usd_per_mwh",
            f"must be {inst.slots} finite values")
    oracle = _oracle(oracle)
    if policy == "hindsight":  # the truth's spread and renewables: a bound, not a policy
        spread = dayahead - inst.price_usd_per_mwh
        plan, _ = oracle_schedule(dataclasses.replace(inst, price_usd_per_mwh=np.minimum(spread, 0.0)), oracle)
        q, solves = committed_import_mw(inst, plan, inst.renewable_shape) * (spread < 0), 1
    elif policy == "deterministic":
        plan, solves = rolling_plan(inst, lambda d: point_view(inst, d, dayahead), oracle)
        q = committed_import_mw(inst, plan, forecast.renewable_shape)  # each day's as issued at its commitment time
    else:  # the plan's import bought where real time is expected dearer, nothing elsewhere
        spread = scenario_spread(inst, dayahead, n_scenarios)
        plan, solves = rolling_plan(inst, lambda d: spread_view(inst, d, np.minimum(spread, 0.0)), oracle)
        q = committed_import_mw(inst, plan, forecast.renewable_shape) * (spread < 0)
    return Commitment(policy, q, plan, solves, time.perf_counter() - tick)


# ------------------------------------------------------------------------------------------ dispatch and bill


def dispatch_schedule(inst: Instance, name: str, *, oracle=None, model: Any = None) -> Schedule:
    """B: the real-time dispatch ``name`` (:data:`DISPATCHES`) on the instance's truth. ``model``: a trained PPO model
    (:func:`agents.ppo.load_model`) for ``ppo``, one trained with day-ahead information."""
    require(name in DISPATCHES, "dispatch", f"must be one of {', '.join(DISPATCHES)}, got {name!r}")
    if name == "fixed":
        return validate_schedule(inst, fixed_schedule(inst))
    if name == "mpc":
        return mpc_schedule(inst, "dayahead", oracle=_oracle(oracle))
    if name == "oracle":
        return oracle_schedule(inst, _oracle(oracle))[0]
    from agents.plan_features import ForecastPlans  # torch loads only for PPO
    from agents.ppo import model_config, ppo_schedule

    require(model is not None, "model", "the ppo dispatch needs a trained model (agents.ppo.load_model)")
    require(model_config(model).information == "dayahead", "model", "the ppo dispatch needs a model trained with "
            "day-ahead information (one trained on the truth would see it)")
    try:
        return validate_schedule(inst, ppo_schedule(model, inst, ForecastPlans(_oracle(oracle))))
    except InputError:
        raise
    except ValueError as err:  # a model of another case, overrides or horizon (its observation differs)
        raise InputError("model", str(err)) from None


def settle_policy(inst: Instance, policy: str, dispatch: str | None = None, *, schedule: Schedule | None = None,
                  commitment: Commitment | None = None, oracle=None, model: Any = None, n_scenarios: int | None = None,
                  dayahead_price_usd_per_mwh: np.ndarray | None = None) -> Settled:
    """``policy``'s purchase (or ``commitment``, made before), the dispatch B (``dispatch``, default
    :data:`DEFAULT_DISPATCH`; or ``schedule``, B made before by that dispatch) simulated on the truth, and the bill."""
    require(policy in POLICIES, "policy", f"must be one of {', '.join(POLICIES)}, got {policy!r}")
    dispatch = DEFAULT_DISPATCH[policy] if dispatch is None else dispatch
    require(commitment is None or commitment.policy == policy, "commitment",
            f"is {commitment.policy if commitment else ''}'s, not {policy}'s")
    dayahead = dayahead_price(inst) if dayahead_price_usd_per_mwh is None else np.array(
        dayahead_price_usd_per_mwh, dtype=float)
    if commitment is None:
        commitment = make_commitment(inst, policy, oracle=oracle, n_scenarios=n_scenarios,
                                     dayahead_price_usd_per_mwh=dayahead)
    if schedule is None:
        schedule = dispatch_schedule(inst, dispatch, oracle=oracle, model=model)
    result = simulate(inst, schedule)
    bill = two_settlement_bill(inst, result, commitment.committed_mw, dayahead)
    return Settled(policy, dispatch, commitment, schedule, result, bill)


__all__ = ["DEFAULT_DISPATCH", "DISPATCHES", "POLICIES", "Commitment", "Settled", "commitment_slot", "dayahead_price",
           "dispatch_schedule", "make_commitment", "point_view", "rolling_plan", "scenario_spread", "settle_policy",
           "spread_view"]
