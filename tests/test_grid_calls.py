"""The grid's side: GPU power caps, grid calls, throughput tiers, the training value, their oracle and policies."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.calls import mpc_notice_schedule, rule_schedule
from aidc_env.baselines import fixed_schedule
from aidc_env.call_streams import HELD_OUT_SEEDS, generate_year, load_history, replay_year
from aidc_env.calls import PROGRAMS, noticed, with_calls
from aidc_env.case import build_instance, load_case
from aidc_env.errors import InputError
from aidc_env.grid import CapCurve, GridCall
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.power_caps import cap_curve, upper_hull
from aidc_env.schedule import validate_schedule
from aidc_env.schema.case import CallSpec
from aidc_env.simulator import simulate
from oracle import solve


@pytest.fixture(scope="module")
def day() -> Instance:
    return build_instance("2048")


@pytest.fixture(scope="module")
def phoenix() -> Instance:
    return build_instance("phoenix")


def test_the_bundled_curve_is_the_sweep_s_concave_hull_from_half_power():
    curve = cap_curve()
    assert curve.cap_share == (1.0, 0.75, 0.625, 0.5)  # 350 W is below the chord from 300 W to 400 W
    assert curve.throughput_factor == (1.0, 0.9026, 0.829, 0.7095)
    assert curve.power_factor == (1.0, 0.7735, 0.6508, 0.5235)
    assert curve.host_kw_per_gpu == 0.1
    power = np.array([1.0, 0.8944, 0.7735, 0.6508, 0.5235])
    throughput = np.array([1.0, 0.9512, 0.9026, 0.829, 0.7095])
    assert upper_hull(power, throughput) == [0, 2, 3, 4]


def test_a_curve_that_is_not_concave_is_refused():
    with pytest.raises(InputError, match="concave"):
        CapCurve(name="x", cap_share=(1.0, 0.9, 0.8), throughput_factor=(1.0, 0.95, 0.94),
                 power_factor=(1.0, 0.9, 0.8))


def test_caps_off_is_bit_identical(day):
    capped = dataclasses.replace(day, cap_curve=cap_curve())
    schedule = fixed_schedule(day)
    plain = simulate(day, schedule).metrics
    zero = simulate(capped, validate_schedule(capped, schedule, None, [[0] * day.slots] * 2)).metrics
    assert validate_schedule(capped, schedule, None, [[0] * day.slots] * 2).caps is None
    assert zero == plain
    assert day.to_dict() == build_instance("2048").to_dict() and "cap_curve" not in day.to_dict()


def test_a_cap_scales_the_gpu_part_of_the_power_and_the_throughput(day):
    inst = dataclasses.replace(day, cap_curve=cap_curve())
    job = inst.jobs[0]
    mode = job.modes[job.baseline_mode]
    modes = fixed_schedule(inst)
    caps = [[0.0] * inst.slots, [0.0] * inst.slots]
    caps[0][40] = 1.5  # half the slot at 75%, half at 62.5% of the rated power
    plain = simulate(inst, modes)
    capped = simulate(inst, validate_schedule(inst, modes, None, caps))
    power, throughput = (0.7735 + 0.6508) / 2, (0.9026 + 0.829) / 2
    gpu_kw = mode.it_power_kw - mode.gpus * 0.1
    assert capped.flows.it_power_kw[40] == pytest.approx(plain.flows.it_power_kw[40] - gpu_kw * (1 - power), rel=1e-12)
    lost = mode.tokens_per_s * SECONDS_PER_HOUR * inst.slot_hours * (1 - throughput)
    assert capped.metrics.jobs[0].tokens == pytest.approx(plain.metrics.jobs[0].tokens - lost, rel=1e-12)
    assert capped.metrics.jobs[1] == plain.metrics.jobs[1]


def test_payments_and_penalties_equal_a_hand_count(day):
    baseline, limits = [0.7, 0.7, 0.6, 0.6], [0.5, 0.5, 0.6, 0.6]
    call = GridCall(program="test", notice_slot=76, start_slot=80, end_slot=84, baseline_mw=baseline, limit_mw=limits,
                    payment_usd_per_mwh=2000.0, payment_usd_per_mw=50.0, penalty_usd_per_mwh=6000.0)
    inst = dataclasses.replace(day, grid_calls=(call,))
    result = simulate(inst, fixed_schedule(inst))
    grid = result.flows.grid_mw[80:84]
    assert grid == pytest.approx([0.577] * 4, abs=1e-3)  # 20:00-21:00: the plant is down, the fixed schedule imports
    payment = penalty = 0.0
    for g, b, limit in zip(grid, baseline, limits, strict=True):
        payment += 2000.0 * max(b - g, 0.0) * 0.25
        penalty += 6000.0 * max(g - limit, 0.0) * 0.25
    m = result.metrics
    (c,) = m.calls
    assert not c.delivered and c.shortfall_slots == 2  # over the limit in the first two slots: no per-MW payment
    assert (c.payment_usd, c.penalty_usd) == (pytest.approx(payment), pytest.approx(penalty))
    assert payment == pytest.approx(2000 * 0.25 * (2 * (0.7 - grid[0]) + 2 * (0.6 - grid[0])))
    assert m.objective_usd == pytest.approx(m.operating_cost_usd + penalty - payment)
    assert list(c.reduction_mw) == pytest.approx([b - g for g, b in zip(grid, baseline, strict=True)])
    met = simulate(dataclasses.replace(inst, grid_calls=(dataclasses.replace(call, limit_mw=[0.6] * 4),)),
                   fixed_schedule(inst)).metrics.calls[0]
    assert met.delivered and met.penalty_usd == 0
    assert met.payment_usd == pytest.approx(payment + 50.0 * (0.65 - 0.6))  # + the per-MW payment of 0.05 MW committed


def test_the_phoenix_case_states_the_demonstration(phoenix):
    assert phoenix.n_gpus == 256 and sum(j.baseline_rate[0] for j in phoenix.jobs) == 256
    assert [j.max_throughput_loss for j in phoenix.jobs] == [0.25, 0.5, 0.1, 0.25, 0.5, 0.5]
    (call,) = phoenix.grid_calls
    assert (call.start_slot, call.end_slot) == (66, 78)  # 16:30-19:30
    assert call.limit_mw == pytest.approx(0.75 * call.baseline_mw)


def test_the_oracle_delivers_the_phoenix_call_and_its_objective_is_the_replay(phoenix):
    result = solve(phoenix)
    assert result.method == "textbook" and result.status == "optimal"
    (call,) = result.metrics.calls
    assert call.delivered and call.tiers_met
    assert np.all(np.array(call.reduction_mw) >= 0.25 * call.baseline_mwh / 3 - 1e-6)
    replay = simulate(phoenix, validate_schedule(phoenix, result.schedule, None, result.caps)).metrics
    assert replay.objective_usd == pytest.approx(result.objective_usd, rel=1e-9)
    assert 0.87 < call.weighted_performance < 0.9  # caps only reach ~0.885 at a 25% cut (docs/grid-calls.md)


def _small(hours: float = 12.0, share: float = 0.15) -> Instance:
    """One 32-GPU job, 4 slots of 6 hours, 2 segments, a call over the third slot."""
    case = load_case("phoenix")
    case = case.with_overrides(jobs=(case.jobs[0],), slots=4, segments=2, grid_calls=(
        CallSpec(program="phoenix", start_hour=hours, hours=6.0, reduction_share=share, notice_hours=0.0),))
    return build_instance(case)


def _brute_force(inst: Instance, grid: int = 400) -> float:
    """The least objective over every mode schedule and, per slot, a fine grid of cap positions (the slots are
    independent given the modes: no tranche binds and the call covers one slot)."""
    job = inst.jobs[0]
    positions = np.linspace(0.0, inst.cap_curve.levels - 1, grid + 1)
    best = np.inf
    for row in itertools.product([*range(job.n_modes), PAUSE], repeat=job.segments):
        caps = np.zeros(inst.slots)
        for t in range(inst.slots):
            values = []
            for p in positions:
                caps[t] = p
                metrics = simulate(inst, validate_schedule(inst, [list(row)], None, [caps.tolist()])).metrics
                ok = metrics.calls_delivered and metrics.tiers_met
                values.append(metrics.objective_usd if ok else np.inf)
            caps[t] = positions[int(np.argmin(values))]
        metrics = simulate(inst, validate_schedule(inst, [list(row)], None, [caps.tolist()])).metrics
        if metrics.feasible and metrics.calls_delivered:
            best = min(best, metrics.objective_usd)
    return best


def test_an_impossible_call_is_proved_infeasible_and_says_why():
    result = solve(_small(share=0.3))  # 30% of a load whose idle GPUs draw half: caps and the tier cannot reach it
    assert result.status == "infeasible" and "delivers every call" in result.reason


def test_the_oracle_equals_brute_force_on_a_small_instance():
    inst = _small()
    result = solve(inst)
    brute = _brute_force(inst, grid=200)
    assert result.status == "optimal"
    assert result.objective_usd <= brute + 1e-6
    assert result.objective_usd >= brute - 0.01 * abs(brute)  # the grid of positions is 1/200 of the range


def test_mpc_at_notice_and_the_rule_deliver_every_call(phoenix):
    for schedule in (mpc_notice_schedule(phoenix), rule_schedule(phoenix)):
        metrics = simulate(phoenix, schedule).metrics
        assert metrics.calls_delivered and metrics.tiers_met and metrics.feasible
    fixed = simulate(phoenix, fixed_schedule(phoenix)).metrics
    assert not fixed.calls_delivered


def test_mpc_at_notice_sees_no_call_before_its_notice(day):
    case = load_case("2048").with_overrides(grid_calls=(
        CallSpec(program="bip", start_hour=16.0, hours=2.0, reduction_share=0.25, notice_hours=0.5),))
    inst = build_instance(case, day="2023-06-17", segments=6)
    assert noticed(inst, 61).grid_calls == () and noticed(inst, 62).grid_calls == inst.grid_calls
    log: list[dict] = []
    schedule = mpc_notice_schedule(inst, log=log)
    assert [entry["slot"] for entry in log] == [0, 62] and [entry["calls_known"] for entry in log] == [0, 1]
    blind = solve(dataclasses.replace(inst, grid_calls=()))
    # before the notice the plan is the oracle's without the call: the segments that started before slot 62
    assert [row[:4] for row in schedule.mode_lists()] == [row[:4] for row in blind.schedule]
    assert simulate(inst, schedule).metrics.calls_delivered


def test_the_instance_json_round_trips_with_calls_caps_and_tiers(phoenix):
    again = Instance.from_dict(json.loads(phoenix.to_json()))
    assert again.to_dict() == phoenix.to_dict()
    schedule = fixed_schedule(phoenix)
    assert simulate(again, schedule).metrics == simulate(phoenix, schedule).metrics


def test_caps_in_a_schedule_need_a_curve_and_positions_in_range(day, phoenix):
    with pytest.raises(InputError, match="no cap curve"):
        validate_schedule(day, fixed_schedule(day), None, [[1] * day.slots] * 2)
    with pytest.raises(InputError, match=r"within \[0, 3\]"):
        validate_schedule(phoenix, fixed_schedule(phoenix), None, [[3.5] * phoenix.slots] * 6)


def test_what_cannot_model_calls_refuses_them_in_one_line(phoenix):
    with pytest.raises(InputError, match="decomposition does not model"):
        solve(phoenix, method="decomposition")
    with pytest.raises(InputError, match="exact solves"):
        solve(phoenix, method="exact")
    from aidc_env.env import DispatchEnv
    with pytest.raises(InputError, match="run by the joint action"):
        DispatchEnv(case=phoenix, action="per_job")


def test_an_unknown_program_or_an_overlap_is_refused(day):
    with pytest.raises(InputError, match="unknown program"):
        with_calls(day, [CallSpec(program="nope", start_hour=1.0, hours=1.0, reduction_share=0.1)])
    spec = CallSpec(program="bip", start_hour=1.0, hours=2.0, reduction_share=0.1)
    with pytest.raises(InputError, match="overlap"):
        with_calls(day, [spec, dataclasses.replace(spec, start_hour=2.0)])
    with pytest.raises(InputError, match="no default reduction"):
        with_calls(day, [CallSpec(program="elrp", start_hour=1.0, hours=1.0)])
    assert set(PROGRAMS) == {"elrp", "bip", "ers-10", "phoenix", "flexible-interconnection"}


def test_call_streams_are_seeded_and_follow_the_history():
    history = load_history()
    assert len(history) == 96 and sum(d.start_hour is not None for d in history) == 71
    first, again = generate_year(1000), generate_year(1000)
    assert first == again and generate_year(1001) != first
    months = {d.date.month for d in history}
    for seed in list(HELD_OUT_SEEDS)[:20]:
        for event in generate_year(seed):
            assert event.date.year == 2023 and event.date.month in months
            assert 0 <= event.start_hour < 24 and event.hours > 0 and event.notice_hours >= 0.25
    counts = [len(generate_year(seed)) for seed in range(200)]
    assert max(counts) <= 19 and 3 < np.mean(counts) < 7  # the history: 4.6 call days a year, 0 to 19
    assert [e.date.isoformat() for e in replay_year(2022)][:2] == ["2023-08-17", "2023-08-31"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_call_metrics_are_the_import_against_the_limit(phoenix, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 10_000)))
    modes = [[int(rng.integers(-1, job.n_modes)) for _ in range(job.segments)] for job in phoenix.jobs]
    caps = rng.uniform(0, phoenix.cap_curve.levels - 1, size=(len(phoenix.jobs), phoenix.slots))
    result = simulate(phoenix, validate_schedule(phoenix, modes, None, caps.tolist()))
    (call,) = phoenix.grid_calls
    (c,) = result.metrics.calls
    grid = result.flows.grid_mw[call.slots]
    assert np.allclose(c.reduction_mw, call.baseline_mw - grid)
    assert c.delivered == bool(np.all(grid <= call.limit_mw + 1e-6))
    assert c.penalty_usd == 0.0 and c.payment_usd == 0.0  # the demonstration's event pays nothing
    assert all(0 <= p <= 1 + 1e-9 for p in c.performance.values())


@pytest.mark.slow
def test_python_m_oracle_reports_the_phoenix_call_per_slot(tmp_path):
    out = subprocess.run([sys.executable, "-m", "oracle", "--case", "phoenix", "--json"], capture_output=True,
                         text=True, check=True)
    answer = json.loads(out.stdout)
    (call,) = answer["metrics"]["calls"]
    assert answer["status"] == "optimal" and call["delivered"] and len(call["reduction_mw"]) == 12
    assert set(answer["caps"]) == {job.name for job in build_instance("phoenix").jobs}
    assert 0 < call["weighted_performance"] < 1


@pytest.mark.parametrize("argv, field", [(["--parts", "nope"], "parts"), (["--seeds", "0"], "seeds"),
                                         (["--time-limit", "-1"], "time-limit")])
def test_the_study_refuses_bad_input_in_one_line(argv, field, tmp_path):
    out = subprocess.run([sys.executable, "-m", "experiments.grid_calls_study", *argv, "--out", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and field in out.stderr
    assert not (tmp_path / "o").exists()


def test_curtailment_events_are_2023_s_peak_demand_hours_by_day():
    from experiments.grid_calls_study import curtailment_events

    events = {share: curtailment_events(share) for share in (0.0025, 0.005, 0.01)}
    assert [len(e) for e in events.values()] == [9, 12, 19]
    assert [sum(b - a for a, b in e.values()) for e in events.values()] == [21, 42, 85]
    assert set(events[0.0025]) <= set(events[0.01])  # the deeper share holds the shallower's days
    assert all(day[:7] in ("2023-07", "2023-08") and 15 <= a < b <= 23 for e in events.values()
               for day, (a, b) in e.items())
