"""The simulator against hand-computed tiny days, and its invariants over random schedules."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aidc_env.baselines import fixed_schedule, greedy_schedule
from aidc_env.case import PAUSE
from aidc_env.errors import InputError
from aidc_env.simulator import simulate
from tests.conftest import mode, tiny_instance, tiny_job


def one_job_day():
    # N = 4 GPUs, PUE 1.5, idle 100 kW/GPU, rated 500 kW/GPU -> P_rated = 3 MW; shape [0.5, 0] -> R = [1.5, 0] MW.
    return tiny_instance([tiny_job(tranche_tokens=84_600.0)], price=[100.0, -20.0], shape=[0.5, 0.0])


def test_hand_computed_switch_day():
    inst = one_job_day()
    assert inst.renewable_mw.tolist() == pytest.approx([1.5, 0.0])
    m = simulate(inst, [[0, 1]]).metrics
    # slot 0: mode 0 (2 GPUs, 800 kW) + 2 idle GPUs * 100 kW = 1000 kW * 1.5 = 1.5 MW, all renewable.
    # slot 1: mode 1 (4 GPUs, 1800 kW) * 1.5 = 2.7 MW from the grid at -20 $/MWh -> -54 $.
    assert m.grid_cost_usd == pytest.approx(-54.00, abs=0.005)
    assert m.renewable_cost_usd == pytest.approx(45.00, abs=0.005)  # 30 $/MWh * 1.5 MWh, take-or-pay
    assert m.curtailment_penalty_usd == pytest.approx(0.0, abs=0.005)
    assert m.operating_cost_usd == pytest.approx(-9.00, abs=0.005)
    assert m.grid_energy_mwh == pytest.approx(2.7)
    assert m.curtailment_mwh == pytest.approx(0.0)
    assert m.green_share == pytest.approx(1.5 / 4.2)
    job = m.jobs[0]
    # 10 tok/s * 3600 s (kept mode) + 18 tok/s * 3600 s * (1 h - 0.25 h restart) = 36000 + 48600
    assert job.tokens == pytest.approx(84_600.0)
    assert job.completion == pytest.approx(1.0)
    assert job.tranche_met
    assert (job.switches, job.restarts, job.modes_used) == (1, 1, 2)


def test_hand_computed_pause_day_with_curtailment():
    inst = one_job_day()
    m = simulate(inst, [[PAUSE, 0]]).metrics
    # slot 0: paused, 4 idle GPUs * 100 kW * 1.5 = 0.6 MW; R = 1.5 -> 0.9 MWh curtailed, penalty 10 $/MWh.
    # slot 1: mode 0 -> 1.5 MW from the grid at -20 $/MWh.
    assert m.grid_cost_usd == pytest.approx(-30.00, abs=0.005)
    assert m.curtailment_mwh == pytest.approx(0.9)
    assert m.curtailment_penalty_usd == pytest.approx(9.00, abs=0.005)
    assert m.operating_cost_usd == pytest.approx(24.00, abs=0.005)
    assert m.green_share == pytest.approx(0.6 / 2.1)
    assert m.jobs[0].tokens == pytest.approx(10 * 3600 * 0.75)  # resumed: restart costs 15 min
    assert not m.jobs[0].tranche_met
    assert (m.jobs[0].switches, m.jobs[0].restarts) == (2, 1)


def test_two_jobs_capacity_breach_reported_not_raised():
    a = tiny_job("A", segments=2)
    b = tiny_job("B", segments=4, initial_mode=PAUSE)
    inst = tiny_instance([a, b], price=[10.0, 20.0, 30.0, 40.0], shape=[0.0, 0.2, 0.4, 0.0], slot_hours=0.5)
    m = simulate(inst, [[1, PAUSE], [PAUSE, 0, 0, PAUSE]]).metrics
    # slot 1: A mode 1 (4 GPUs) + B mode 0 (2 GPUs) = 6 > 4 GPUs.
    assert not m.capacity_ok
    assert m.capacity_violation_slots == 1
    assert m.peak_gpus == 6


def test_segment_lengths_and_restart_spanning_slots():
    # K = 1 over 4 slots of 0.25 h; restart 0.4 h spans two slots.
    job = tiny_job(segments=1, initial_mode=PAUSE, restart_hours=0.4)
    inst = tiny_instance([job], price=[0, 0, 0, 0], shape=[0, 0, 0, 0], slot_hours=0.25)
    m = simulate(inst, [[0]]).metrics
    assert m.jobs[0].tokens == pytest.approx(10 * 3600 * 0.6)


@pytest.mark.parametrize(
    "schedule, field",
    [([[0]], "schedule.A"), ([[0, 2]], "schedule.A"), ([[0, -2]], "schedule.A"), ([], "schedule"),
     ({"B": [0, 0]}, "schedule")],
)
def test_bad_schedule_names_field(schedule, field):
    with pytest.raises(InputError) as err:
        simulate(one_job_day(), schedule)
    assert err.value.field == field


def test_schedule_by_job_name():
    inst = one_job_day()
    assert simulate(inst, {"A": [0, 1]}).metrics == simulate(inst, [[0, 1]]).metrics


# ------------------------------------------------------------------------- property tests


@st.composite
def random_day(draw):
    n_slots = draw(st.sampled_from([2, 4, 8]))
    n_jobs = draw(st.integers(1, 2))
    jobs = []
    for j in range(n_jobs):
        n_modes = draw(st.integers(1, 3))
        modes = tuple(
            mode(draw(st.integers(1, 4)), draw(st.floats(1, 100)), draw(st.floats(50, 2000))) for _ in range(n_modes))
        segments = draw(st.sampled_from([k for k in (1, 2, 4, 8) if n_slots % k == 0]))
        initial = draw(st.integers(PAUSE, n_modes - 1))
        jobs.append(tiny_job(f"J{j}", segments=segments, modes=modes, initial_mode=initial,
                             tranche_tokens=draw(st.floats(0, 1e6)), restart_hours=draw(st.floats(0, 0.2))))
    price = draw(st.lists(st.floats(-50, 300), min_size=n_slots, max_size=n_slots))
    shape = draw(st.lists(st.floats(0, 1), min_size=n_slots, max_size=n_slots))
    inst = tiny_instance(jobs, price, shape, slot_hours=24 / n_slots, n_gpus=draw(st.integers(1, 8)))
    schedule = [draw(st.lists(st.integers(PAUSE, job.n_modes - 1), min_size=job.segments, max_size=job.segments))
                for job in jobs]
    return inst, schedule


@settings(max_examples=200, deadline=None)
@given(random_day())
def test_energy_balance_and_capacity_report(day):
    inst, schedule = day
    result = simulate(inst, schedule)
    f, m = result.flows, result.metrics
    np.testing.assert_allclose(f.renewable_used_mw + f.grid_mw, f.load_mw, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(f.renewable_used_mw + f.curtailment_mw, f.renewable_mw, rtol=1e-12, atol=1e-12)
    assert np.all(f.grid_mw >= 0) and np.all(f.curtailment_mw >= 0) and np.all(f.renewable_used_mw >= 0)
    assert m.capacity_ok == bool(np.all(f.gpus_used <= inst.n_gpus))
    assert 0.0 <= m.green_share <= 1.0 + 1e-12
    assert m.operating_cost_usd == pytest.approx(m.grid_cost_usd + m.renewable_cost_usd + m.curtailment_penalty_usd)
    assert m.decision_cost_usd == pytest.approx(m.grid_cost_usd + m.curtailment_penalty_usd)


@settings(max_examples=200, deadline=None)
@given(random_day(), st.data())
def test_tokens_monotone_in_work(day, data):
    """Running a paused segment (in a mode that needs no extra restart) never lowers a job's tokens."""
    inst, schedule = day
    j = data.draw(st.integers(0, len(inst.jobs) - 1))
    job = inst.jobs[j]
    paused = [s for s, a in enumerate(schedule[j]) if a == PAUSE]
    if not paused:
        return
    s = data.draw(st.sampled_from(paused))
    before = simulate(inst, schedule).metrics.jobs[j].tokens
    # Extend the previous running mode into the paused segment: no new restart is created.
    previous = schedule[j][s - 1] if s > 0 else job.initial_mode
    if previous == PAUSE:
        previous = 0
    more = [list(x) for x in schedule]
    more[j][s] = previous
    after = simulate(inst, more).metrics.jobs[j].tokens
    assert after >= before - 1e-6


def test_fixed_baseline_completes_exactly_on_reference(reference_instance):
    m = simulate(reference_instance, fixed_schedule(reference_instance)).metrics
    assert [job.completion for job in m.jobs] == [1.0, 1.0]
    assert m.capacity_ok and m.tranches_met
    assert all(job.restarts == 0 and job.modes_used == 1 for job in m.jobs)


def test_greedy_completes_and_beats_fixed_on_reference(reference_instance):
    fixed = simulate(reference_instance, fixed_schedule(reference_instance)).metrics
    greedy = simulate(reference_instance, greedy_schedule(reference_instance)).metrics
    assert greedy.tranches_met and greedy.capacity_ok
    assert greedy.operating_cost_usd < fixed.operating_cost_usd


def test_simulate_cli_round_trip(tmp_path, reference_instance):
    inst_path = tmp_path / "inst.json"
    inst_path.write_text(reference_instance.to_json())
    sched_path = tmp_path / "sched.json"
    sched_path.write_text(json.dumps({"schedule": fixed_schedule(reference_instance)}))
    out = subprocess.run([sys.executable, "-m", "aidc_env.simulate", "--instance", str(inst_path), "--schedule",
                          str(sched_path), "--json"], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    expected = simulate(reference_instance, fixed_schedule(reference_instance)).metrics
    assert data["metrics"]["operating_cost_usd"] == pytest.approx(expected.operating_cost_usd, rel=1e-12)


def test_simulate_cli_bad_schedule_exit_2(tmp_path, reference_instance):
    inst_path = tmp_path / "inst.json"
    inst_path.write_text(reference_instance.to_json())
    sched_path = tmp_path / "sched.json"
    sched_path.write_text("[[0, 1]]")
    out = subprocess.run([sys.executable, "-m", "aidc_env.simulate", "--instance", str(inst_path), "--schedule",
                          str(sched_path)], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "schedule" in out.stderr and "Traceback" not in out.stderr
