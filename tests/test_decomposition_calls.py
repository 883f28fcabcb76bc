"""Grid calls in the decomposition (oracle/call_rows.py): hard rows on each called site's load, the payment per MWh in
the cost of a MW of import.

- random small fleets with a call: bound ≤ brute-force optimum (every schedule scored by the simulator, delivering
  the call) ≤ the decomposition's objective, equal to its replay, the call delivered;
- the 2048 case with a call (one site, no fleet workloads): the decomposition's optimum is the textbook MILP's;
- a fleet with a call: proven, delivered, replay equal; an impossible call is infeasible with its reason;
- power caps, tiers, a training value: refused in one line.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aidc_env.calls import baseline_import_mw, with_calls
from aidc_env.case import build_instance
from aidc_env.errors import InputError
from aidc_env.grid import GridCall
from aidc_env.instance import PAUSE
from aidc_env.power_caps import cap_curve
from aidc_env.schema.case import CallSpec
from aidc_env.simulator import simulate
from oracle import Decomposition, solve
from oracle.entry import route
from tests.test_fleet_oracle import TOL_USD, brute_force, small_fleet


def _with_random_call(inst, data) -> object:
    """The instance with one call on some of its slots, a payment per MWh and per MW, that the plain optimum breaks and
    a drawn feasible schedule delivers (when there is one: else a limit at the plain optimum's import): the limit lies a
    drawn share of the way from that schedule's import up to the plain optimum's; the baseline is the fixed schedule's
    import or the plain optimum's, whichever is higher."""
    inst = dataclasses.replace(inst, renewable_ratio=data.draw(st.floats(0.0, 0.3)))  # else the plant often covers it
    start = data.draw(st.integers(0, inst.slots - 1))
    end = data.draw(st.integers(start + 1, inst.slots))
    slots = slice(start, end)
    feasible = _feasible(inst)
    top = feasible[0][2][slots] if feasible else np.zeros(end - start)
    below = [imports[slots] for _, _, imports in feasible if np.any(imports[slots] < top - 1e-3)]
    low = below[data.draw(st.integers(0, len(below) - 1))] if below else top
    limit = low + data.draw(st.floats(0.0, 0.9)) * np.maximum(top - low, 0.0)
    call = GridCall(program="test", notice_slot=0, start_slot=start, end_slot=end,
                    baseline_mw=np.maximum(baseline_import_mw(inst)[0, slots], np.maximum(top, limit)),
                    limit_mw=limit, payment_usd_per_mwh=data.draw(st.sampled_from([0.0, 2000.0])),
                    payment_usd_per_mw=data.draw(st.sampled_from([0.0, 50.0])), penalty_usd_per_mwh=6000.0)
    return dataclasses.replace(inst, grid_calls=(call,))


def _feasible(inst) -> list[tuple[float, list[list[int]], np.ndarray]]:
    """Every feasible schedule that delivers every call: (objective, schedule, grid import per slot), cheapest first."""
    import itertools

    rows = []
    for job in inst.jobs:
        allowed = inst.allowed_segments(job)
        rows.append(list(itertools.product(*[list(range(job.n_modes)) + [PAUSE] if allowed[s] else [PAUSE]
                                             for s in range(job.segments)])))
    out = []
    for rows_ in itertools.product(*rows):
        schedule = [list(r) for r in rows_]
        result = simulate(inst, schedule)
        if result.metrics.feasible and result.metrics.calls_delivered:
            out.append((result.metrics.objective_usd, schedule, result.flows.grid_mw))
    return sorted(out, key=lambda item: item[0])


def _delivering_brute_force(inst) -> float | None:
    """The least objective of the feasible schedules that deliver every call (None: none)."""
    feasible = _feasible(inst)
    return feasible[0][0] if feasible else None


@settings(derandomize=True, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_fleet(), st.data())
def test_bound_below_brute_force_below_objective_with_a_call(inst, data):
    inst = _with_random_call(inst, data)
    optimum = _delivering_brute_force(inst)
    result = Decomposition(inst).solve(time_limit_s=30, mip_gap=1e-9)
    if optimum is None:
        assert result.schedule is None and result.status == "infeasible", (result.status, result.reason)
        return
    scale = TOL_USD * max(1.0, abs(optimum))
    assert result.schedule is not None, result.reason
    assert result.best_bound_usd <= optimum + scale
    assert result.objective_usd >= optimum - scale
    assert result.metrics.objective_usd == pytest.approx(result.objective_usd, rel=1e-9, abs=1e-9)
    assert result.metrics.feasible and result.metrics.calls_delivered
    if result.status == "optimal":
        assert result.objective_usd == pytest.approx(optimum, rel=1e-6, abs=1e-6)


@settings(derandomize=True, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_fleet(), st.data())
def test_every_lagrangian_bound_with_a_call_is_below_the_optimum(inst, data):
    """Each iteration's bound of the path master (the call rows dualised) and the pattern master's from its prices
    (patterns above a call's limit dropped) lie below the brute-force optimum; with no schedule, phase one's bounds
    stay ≤ 0 only if some path set meets the rows."""
    import time

    from oracle.decomposition import COLUMNS_PER_JOB
    from oracle.master import MasterLP, lagrangian_bound
    from oracle.patterns import PatternMaster, column_generation, prices_from
    from oracle.pricing import price

    inst = _with_random_call(inst, data)
    optimum = _delivering_brute_force(inst)
    dec = Decomposition(inst)
    if optimum is None or dec._infeasible_reason():
        return
    master = MasterLP(dec.data)
    dec._first_columns(master, _search(), [])
    best, best_prices = -np.inf, None
    for _ in range(50):
        prices = master.solve()
        cheapest, added = price(master, dec.searches, prices, COLUMNS_PER_JOB)
        bound = lagrangian_bound(master, prices, cheapest)
        assert bound <= optimum + TOL_USD * max(1.0, abs(optimum))
        if bound > best:
            best, best_prices = bound, prices
        if not added:
            break
    pm = PatternMaster(dec.data)
    for column in master.columns:
        pm.add(column)
    out = column_generation(pm, dec.searches, prices_from(pm, best_prices.gpu, best_prices.load),
                            time.perf_counter() + 30)
    assert best - 1e-6 <= out.bound <= optimum + TOL_USD * max(1.0, abs(optimum))


def _search():
    import time

    from oracle.decomposition import Search

    return Search(deadline=time.perf_counter() + 30, mip_gap=1e-9, threads=None)


def test_brute_force_of_a_call_differs_from_the_plain_one():
    """The generator's calls bind: a call changes some small fleet's optimum (the test above can fail)."""
    from tests.conftest import mode, tiny_instance, tiny_job

    job = tiny_job("P", segments=2, modes=(mode(2, 10.0, 800.0), mode(4, 18.0, 1800.0)), initial_mode=0,
                   tranche_tokens=10.0 * 3600 * 6)
    inst = tiny_instance([job], [100.0, 50.0, 300.0, 80.0], [0.0, 0.0, 0.0, 0.0], slot_hours=6.0, n_gpus=4)
    call = GridCall(program="test", notice_slot=0, start_slot=1, end_slot=2, baseline_mw=[3.0], limit_mw=[1.0],
                    payment_usd_per_mwh=2000.0)
    called = dataclasses.replace(inst, grid_calls=(call,))
    plain, optimum = brute_force(inst), _delivering_brute_force(called)
    result = Decomposition(called).solve(time_limit_s=30, mip_gap=1e-9)
    assert optimum != pytest.approx(plain)
    assert result.status == "optimal" and result.objective_usd == pytest.approx(optimum, rel=1e-9)
    assert result.metrics.calls_delivered


@pytest.fixture(scope="module")
def day_with_call():
    spec = CallSpec(program="elrp", start_hour=17.0, hours=2.0, reduction_share=0.3, payment_usd_per_mw=50.0)
    return with_calls(build_instance("2048"), [spec])


def test_the_decomposition_equals_the_textbook_on_the_2048_case_with_a_call(day_with_call):
    textbook = solve(day_with_call, method="textbook", mip_gap=1e-9)
    ours = solve(day_with_call, method="decomposition", mip_gap=1e-9)
    assert textbook.status == ours.status == "optimal"
    assert ours.objective_usd == pytest.approx(textbook.objective_usd, rel=1e-7)
    assert ours.metrics.objective_usd == ours.objective_usd and ours.metrics.calls_delivered
    assert ours.metrics.call_payment_usd > 0
    plain = solve(build_instance("2048"), method="decomposition", mip_gap=1e-9)
    assert ours.objective_usd != pytest.approx(plain.objective_usd)  # the call binds
    assert route(day_with_call) == "exact"  # a call alone: the exact day oracle, which proves the same optimum
    assert solve(day_with_call, mip_gap=1e-9).objective_usd == pytest.approx(textbook.objective_usd, rel=1e-7)


@pytest.fixture(scope="module")
def fleet():
    return build_instance("fleet")


def test_a_fleet_with_a_call_is_proven_and_delivers_it(fleet):
    spec = CallSpec(program="bip", start_hour=18.0, hours=2.0, reduction_share=0.05)  # proven in ~6 s
    inst = with_calls(fleet, [spec])
    assert route(inst) == "decomposition"
    result = solve(inst, time_limit_s=120)
    plain = solve(fleet, time_limit_s=120)
    assert not simulate(inst, result.schedule).metrics.calls[0].shortfall_slots
    assert not simulate(inst, plain.schedule).metrics.calls_delivered  # the call binds
    assert result.status == "optimal", result.reason
    assert result.metrics.calls_delivered and result.metrics.objective_usd == result.objective_usd
    grid = result.metrics.calls[0]
    assert grid.shortfall_slots == 0 and grid.import_mwh <= float(np.sum(inst.grid_calls[0].limit_mw)) * 0.25 + 1e-9


def test_an_impossible_call_is_infeasible_with_its_reason(fleet):
    night = int(np.argmin(fleet.renewable_mw))  # limit 0: the load under the plant, below its idle GPUs' draw
    call = GridCall(program="bip", notice_slot=0, start_slot=night, end_slot=night + 1, baseline_mw=[1.0],
                    limit_mw=[0.0], penalty_usd_per_mwh=6000.0)
    result = solve(dataclasses.replace(fleet, grid_calls=(call,)), method="decomposition")
    assert result.status == "infeasible" and result.schedule is None
    assert "cannot be delivered" in result.reason and f"slot {night}" in result.reason


@pytest.mark.parametrize("change, named", [
    (dict(cap_curve=cap_curve()), "power caps"),
    (dict(training_value_usd_per_gpu_hour=1.0), "training value"),
])
def test_caps_tiers_and_a_training_value_are_refused_in_one_line(fleet, change, named):
    inst = dataclasses.replace(fleet, **change)
    for method in ("decomposition", "auto"):
        with pytest.raises(InputError, match=named) as error:
            solve(inst, method=method)
        assert "\n" not in str(error.value)


def test_tiers_are_refused_in_one_line(fleet):
    jobs = (dataclasses.replace(fleet.jobs[0], max_throughput_loss=0.1),) + fleet.jobs[1:]
    with pytest.raises(InputError, match="decomposition does not model throughput tiers"):
        solve(dataclasses.replace(fleet, jobs=jobs), method="decomposition")
