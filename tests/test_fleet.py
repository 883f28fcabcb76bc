"""Workloads and the fleet: fine-tuning windows, inference, the idle-GPU value.

A hand-solvable instance with every kind of work against costs computed by hand; property tests that the
simulator refuses a fine-tuning job outside its window and flags capacity breaches (inference GPUs included)
and missed deadlines; the exchange JSON round trip (and old files without the new fields); the fleet case and
its baseline replay; bad fleet input exits 2 with one line; the day-model env refuses the fleet.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aidc_env.baselines import fixed_schedule, greedy_schedule, random_schedule
from aidc_env.case import build_instance, load_case
from aidc_env.case import main as case_main
from aidc_env.errors import EXIT_BAD_INPUT, InputError, run_cli
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance, Job
from aidc_env.modes.cli import main as modes_main
from aidc_env.simulator import main as simulate_main
from aidc_env.simulator import simulate
from aidc_env.workloads import (FINETUNING, HOURS_PER_WEEK, Inference, gpus_for_share, inference_demand_share,
                                load_inference_profile)
from tests.conftest import mode, tiny_instance, tiny_job

FLEET_TOML = Path(__file__).resolve().parents[1] / "aidc_env" / "cases" / "fleet.toml"


def inference(gpus: list[int], kw: float = 200.0) -> Inference:
    peak = max(gpus)
    return Inference(name="serve", gpus=np.array(gpus), it_kw_per_gpu=kw, peak_gpus=peak,
                     demand_share=np.array(gpus, dtype=float) / peak)


def finetuning_job(name: str = "FT", segments: int = 4, release: int = 1, deadline: int = 3,
                   tranche_tokens: float = 0.0, modes=None, restart_hours: float = 0.25) -> Job:
    job = tiny_job(name, segments=segments, modes=modes or (mode(1, 5.0, 300.0),), initial_mode=PAUSE,
                   tranche_tokens=tranche_tokens, restart_hours=restart_hours, baseline_mode=0)
    return dataclasses.replace(job, kind=FINETUNING, release_slot=release, deadline_slot=deadline)


def hand_instance() -> Instance:
    """6 GPUs, 4 one-hour slots: pre-training A (2 GPUs all day), fine-tuning B in [1, 3), inference 1-3 GPUs."""
    pretraining = tiny_job("A", segments=2, modes=(mode(2, 10.0, 800.0),), initial_mode=0,
                           tranche_tokens=10.0 * SECONDS_PER_HOUR * 4)
    ft = finetuning_job(tranche_tokens=5.0 * SECONDS_PER_HOUR * 1.75)  # 2 h minus the 0.25 h checkpoint load
    inst = tiny_instance([pretraining, ft], price=[100.0, -20.0, 50.0, 10.0], shape=[0.0, 0.5, 1.0, 0.2], n_gpus=6)
    return dataclasses.replace(inst, inference=(inference([1, 2, 3, 1]),), idle_value_usd_per_gpu_hour=2.0)


def test_hand_computed_fleet_day():
    """Rated 1.5 × 6 × 0.5 = 4.5 MW, R = (0, 2.25, 4.5, 0.9) MW. IT kW per slot: jobs + inference + idle × 100:
    t0 800 + 200 + 300, t1 800 + 300 + 400 + 100, t2 800 + 300 + 600 + 0, t3 800 + 200 + 300; L = 1.5 × IT."""
    inst = hand_instance()
    result = simulate(inst, [[0, 0], [PAUSE, 0, 0, PAUSE]])
    m, f = result.metrics, result.flows
    np.testing.assert_allclose(f.load_mw, [1.95, 2.4, 2.55, 1.95])
    np.testing.assert_allclose(f.grid_mw, [1.95, 0.15, 0.0, 1.05], atol=1e-12)
    np.testing.assert_allclose(f.curtailment_mw, [0.0, 0.0, 1.95, 0.0], atol=1e-12)
    assert f.gpus_used.tolist() == [3, 5, 6, 3] and f.inference_gpus.tolist() == [1, 2, 3, 1]
    assert m.grid_cost_usd == pytest.approx(195.0 - 3.0 + 10.5)
    assert m.curtailment_penalty_usd == pytest.approx(19.5)
    assert m.renewable_cost_usd == pytest.approx(30.0 * 7.65)
    assert m.operating_cost_usd == pytest.approx(451.5)
    assert m.idle_gpu_hours == pytest.approx(7.0) and m.idle_value_usd == pytest.approx(14.0)
    assert m.objective_usd == pytest.approx(437.5)
    assert m.inference_gpu_hours == pytest.approx(7.0) and m.inference_served
    assert m.capacity_ok and m.peak_gpus == 6
    a, b = m.jobs
    assert (a.kind, a.release_slot, a.deadline_slot) == ("pretraining", 0, 4)
    assert (b.kind, b.release_slot, b.deadline_slot) == ("finetuning", 1, 3)
    assert b.tokens == pytest.approx(31500.0) and b.restarts == 1 and b.tranche_met
    assert m.tranches_met and m.feasible


def test_hand_fleet_capacity_breach_from_inference_is_flagged():
    """The same day with B in a 2-GPU mode: slot 2 needs 2 + 2 + 3 inference = 7 > 6 GPUs."""
    inst = hand_instance()
    inst = dataclasses.replace(inst, jobs=(inst.jobs[0], dataclasses.replace(
        inst.jobs[1], modes=(mode(2, 5.0, 300.0),))))
    m = simulate(inst, [[0, 0], [PAUSE, 0, 0, PAUSE]]).metrics
    assert not m.capacity_ok and m.capacity_violation_slots == 1 and not m.feasible
    assert m.inference_served  # inference comes first: the breach is the jobs'


def test_day_instance_objective_is_the_operating_cost(reference_instance):
    m = simulate(reference_instance, fixed_schedule(reference_instance)).metrics
    assert m.objective_usd == m.operating_cost_usd and m.idle_value_usd == 0.0 and m.inference_gpu_hours == 0.0
    assert not reference_instance.has_fleet_workloads


# ------------------------------------------------------------------------- property tests


@st.composite
def random_fleet_day(draw):
    """A small pool with 1-2 pre-training and 1-2 fine-tuning jobs, inference and an idle value."""
    n_slots = draw(st.sampled_from([4, 8]))
    jobs = []
    for j in range(draw(st.integers(1, 2))):
        modes = tuple(mode(draw(st.integers(1, 3)), draw(st.floats(1, 100)), draw(st.floats(50, 2000)))
                      for _ in range(draw(st.integers(1, 3))))
        segments = draw(st.sampled_from([1, 2, 4]))
        jobs.append(tiny_job(f"P{j}", segments=segments, modes=modes, initial_mode=draw(st.integers(PAUSE, 0)),
                             tranche_tokens=draw(st.floats(0, 1e6)), restart_hours=draw(st.floats(0, 0.2))))
    for j in range(draw(st.integers(1, 2))):
        segments = draw(st.sampled_from([k for k in (2, 4, 8) if n_slots % k == 0]))
        per = n_slots // segments
        release = draw(st.integers(0, segments - 1))
        deadline = draw(st.integers(release + 1, segments))
        modes = tuple(mode(draw(st.integers(1, 2)), draw(st.floats(1, 100)), draw(st.floats(50, 500)))
                      for _ in range(draw(st.integers(1, 2))))
        jobs.append(finetuning_job(f"F{j}", segments=segments, release=release * per, deadline=deadline * per,
                                   tranche_tokens=draw(st.floats(0, 5e5)), modes=modes, restart_hours=0.1))
    price = draw(st.lists(st.floats(-50, 300), min_size=n_slots, max_size=n_slots))
    shape = draw(st.lists(st.floats(0, 1), min_size=n_slots, max_size=n_slots))
    n_gpus = draw(st.integers(2, 10))
    inst = tiny_instance(jobs, price, shape, slot_hours=24 / n_slots, n_gpus=n_gpus)
    inf = draw(st.lists(st.integers(0, n_gpus), min_size=n_slots, max_size=n_slots))
    if max(inf) == 0:
        inf[0] = 1
    inst = dataclasses.replace(inst, inference=(inference(inf, kw=draw(st.floats(0, 500))),),
                               idle_value_usd_per_gpu_hour=draw(st.floats(0, 5)))
    schedule = []
    for job in inst.jobs:
        choices = np.array(draw(st.lists(st.integers(PAUSE, job.n_modes - 1), min_size=job.segments,
                                         max_size=job.segments)))
        choices[~inst.allowed_segments(job)] = PAUSE
        schedule.append(choices.tolist())
    return inst, schedule


def _by_hand(inst: Instance, schedule: list[list[int]]) -> tuple[np.ndarray, list[float]]:
    """GPUs in use per slot (inference included) and each job's tokens, slot by slot, independently."""
    gpus = inst.inference_gpus.astype(np.int64).copy()
    tokens = []
    for job, choices in zip(inst.jobs, schedule, strict=True):
        per = inst.slots // job.segments
        made, previous = 0.0, job.initial_mode
        for s, c in enumerate(choices):
            if c != PAUSE:
                gpus[s * per:(s + 1) * per] += job.modes[c].gpus
                hours = per * inst.slot_hours - (job.restart_hours if c != previous else 0.0)
                made += job.modes[c].tokens_per_s * SECONDS_PER_HOUR * hours
            previous = c
        tokens.append(made)
    return gpus, tokens


@settings(max_examples=150, deadline=None)
@given(random_fleet_day())
def test_capacity_deadlines_and_idle_value_flagged(day):
    """Capacity counts inference GPUs; a target missed by the deadline is flagged; the idle credit is exact."""
    inst, schedule = day
    result = simulate(inst, schedule)
    m, f = result.metrics, result.flows
    gpus, tokens = _by_hand(inst, schedule)
    assert f.gpus_used.tolist() == gpus.tolist()
    assert m.capacity_ok == bool(np.all(gpus <= inst.n_gpus))
    assert m.capacity_violation_slots == int(np.sum(gpus > inst.n_gpus))
    for job, jm, made in zip(inst.jobs, m.jobs, tokens, strict=True):
        assert jm.tokens == pytest.approx(made, rel=1e-9, abs=1e-6)
        if made < job.tranche_tokens * (1 - 1e-6):
            assert not jm.tranche_met and not m.tranches_met and not m.feasible
    idle = np.maximum(inst.n_gpus - gpus, 0)
    assert m.idle_value_usd == pytest.approx(inst.idle_value_usd_per_gpu_hour * idle.sum() * inst.slot_hours)
    assert m.objective_usd == pytest.approx(m.operating_cost_usd - m.idle_value_usd)
    assert m.feasible == (m.capacity_ok and m.tranches_met and m.inference_served)
    it_kw = f.it_power_kw
    np.testing.assert_allclose(f.load_mw, inst.pue * (it_kw + idle * inst.idle_kw_per_gpu) / 1000.0, rtol=1e-12)


@settings(max_examples=150, deadline=None)
@given(random_fleet_day(), st.data())
def test_finetuning_outside_its_window_is_refused(day, data):
    inst, schedule = day
    fts = [j for j, job in enumerate(inst.jobs) if job.is_finetuning and not inst.allowed_segments(job).all()]
    if not fts:
        return
    j = data.draw(st.sampled_from(fts))
    s = data.draw(st.sampled_from(np.flatnonzero(~inst.allowed_segments(inst.jobs[j])).tolist()))
    bad = [list(row) for row in schedule]
    bad[j][s] = 0
    with pytest.raises(InputError, match=f"schedule.{inst.jobs[j].name}: runs in segment {s} outside its window"):
        simulate(inst, bad)


@settings(max_examples=50, deadline=None)
@given(random_fleet_day(), st.integers(0, 2**32 - 1))
def test_random_baseline_respects_windows(day, seed):
    inst, _ = day
    simulate(inst, random_schedule(inst, np.random.default_rng(seed)))  # refused if it ran outside a window


# ------------------------------------------------------------------------- exchange format


def test_fleet_instance_json_round_trip(fleet_instance):
    again = Instance.from_dict(json.loads(fleet_instance.to_json()))
    assert again.to_json() == fleet_instance.to_json()
    schedule = fixed_schedule(fleet_instance)
    assert simulate(again, schedule).metrics == simulate(fleet_instance, schedule).metrics


def test_old_json_without_workload_fields_loads(reference_instance):
    data = reference_instance.to_dict()
    for key in ("inference", "idle_value_usd_per_gpu_hour"):
        del data[key]
    for job in data["jobs"]:
        for key in ("kind", "release_slot", "deadline_slot"):
            del job[key]
    again = Instance.from_dict(data)
    assert again.to_json() == reference_instance.to_json()


def test_hand_instance_json_round_trip():
    inst = hand_instance()
    again = Instance.from_dict(json.loads(inst.to_json()))
    assert again.jobs[1].kind == FINETUNING and again.job_window(again.jobs[1]) == (1, 3)
    assert again.inference_gpus.tolist() == [1, 2, 3, 1] and again.idle_value_usd_per_gpu_hour == 2.0
    schedule = [[0, 0], [PAUSE, 0, 0, PAUSE]]
    assert simulate(again, schedule).metrics == simulate(inst, schedule).metrics


@pytest.mark.parametrize("change, field", [
    (lambda d: d["jobs"][1].update(kind="serving"), "jobs[1].kind"),
    (lambda d: d["jobs"][1].update(release_slot=3, deadline_slot=3), "jobs[1].release_slot"),
    (lambda d: d["jobs"][0].update(deadline_slot=2), "jobs[0].kind"),
    (lambda d: d["inference"][0].update(gpus=[1, 2]), "inference[0].demand_share"),
    (lambda d: d["inference"][0].update(gpus=[1, -2, 3, 1]), "inference[0].gpus[1]"),
    (lambda d: d.update(idle_value_usd_per_gpu_hour=-1.0), "idle_value_usd_per_gpu_hour"),
])
def test_bad_workload_json_names_field(change, field):
    data = json.loads(hand_instance().to_json())
    change(data)
    with pytest.raises(InputError) as err:
        Instance.from_dict(data)
    assert err.value.field == field


# ------------------------------------------------------------------------- the inference profile


def test_bundled_profile_is_a_normalised_week():
    share = load_inference_profile()
    assert share.shape == (HOURS_PER_WEEK,) and share.max() == 1.0 and 0 < share.min() < 0.5


def test_profile_is_read_in_local_time():
    weekly = np.arange(HOURS_PER_WEEK) / (HOURS_PER_WEEK - 1)
    monday = inference_demand_share(weekly, "2023-06-12", 1, 24, 0)
    assert monday.tolist() == weekly[:24].tolist()
    pdt = inference_demand_share(weekly, "2023-06-12", 1, 96, -7)  # local 00:00 Monday = 07:00 UTC
    assert pdt[0] == weekly[7] and pdt.size == 96 and pdt[95] == weekly[30]
    sunday = inference_demand_share(weekly, "2023-06-18", 1, 24, -7)  # local 17:00 Sunday = 00:00 UTC Monday
    assert sunday[17] == weekly[0] and sunday[16] == weekly[HOURS_PER_WEEK - 1]
    assert gpus_for_share(np.array([0.0, 0.5, 1.0, 0.3334]), 3).tolist() == [0, 2, 3, 2]


# ------------------------------------------------------------------------- the fleet case


@pytest.fixture(scope="module")
def fleet_instance() -> Instance:
    return build_instance("fleet")


def test_fleet_case_jobs(fleet_instance):
    inst = fleet_instance
    assert inst.n_gpus == 16384 and len(inst.jobs) == 12
    kinds = [job.kind for job in inst.jobs]
    assert kinds.count("pretraining") == 8 and kinds.count("finetuning") == 4
    assert {job.model for job in inst.jobs if not job.is_finetuning} == {
        "llama-7b", "llama-13b", "llama-33b", "llama-65b", "llama2-70b"}
    for job in inst.jobs:
        assert job.baseline_mode != PAUSE and job.tranche_tokens > 0
        if job.is_finetuning:
            assert max(m.gpus for m in job.modes) <= 512 and job.initial_mode == PAUSE
    assert inst.inference[0].peak_gpus == 3072 and inst.inference_gpus.max() == 3072
    assert inst.idle_value_usd_per_gpu_hour > 0 and inst.has_fleet_workloads


def test_fleet_baseline_replays_feasible(fleet_instance):
    m = simulate(fleet_instance, fixed_schedule(fleet_instance)).metrics
    assert m.capacity_ok and m.tranches_met and m.inference_served and m.feasible
    assert all(job.tranche_met for job in m.jobs)
    assert m.inference_gpu_hours == pytest.approx(fleet_instance.inference_gpus.sum() * 0.25)
    greedy = simulate(fleet_instance, greedy_schedule(fleet_instance)).metrics
    assert greedy.feasible and greedy.objective_usd <= m.objective_usd


def test_fleet_over_two_days_keeps_finetuning_targets():
    inst = build_instance("fleet", day="2023-04-15", horizon_days=2)
    one_day = build_instance("fleet", day="2023-04-15")
    for job, day_job in zip(inst.jobs, one_day.jobs, strict=True):
        factor = 1 if job.is_finetuning else 2
        assert job.tranche_tokens == factor * day_job.tranche_tokens
        assert inst.job_window(job)[0] == one_day.job_window(day_job)[0]
    assert simulate(inst, fixed_schedule(inst)).metrics.feasible


def test_fleet_clis(tmp_path, capsys):
    assert run_cli(modes_main, ["--case", "fleet", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["jobs"]
    assert len(listed) == 12 and [j["kind"] for j in listed].count("finetuning") == 4
    assert all(max(m["gpus"] for m in j["pareto"]) <= 256 for j in listed if j["kind"] == "finetuning")
    inst_path, schedule_path = tmp_path / "fleet.json", tmp_path / "fixed.json"
    assert run_cli(case_main, ["--case", "fleet", "--out", str(inst_path)]) == 0
    capsys.readouterr()
    inst = Instance.from_dict(json.loads(inst_path.read_text()))
    schedule_path.write_text(json.dumps(fixed_schedule(inst)))
    assert run_cli(simulate_main, ["--instance", str(inst_path), "--schedule", str(schedule_path), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["feasible"] and metrics["inference_served"] and metrics["objective_usd"] < 0


def test_the_joint_action_refuses_the_fleet(fleet_instance):
    """The joint action refuses fleet workloads with one line pointing to the per-job action."""
    from aidc_env.env import DispatchEnv
    with pytest.raises(InputError, match="per_job"):
        DispatchEnv(case=fleet_instance)


# ------------------------------------------------------------------------- bad fleet input


def _fleet_with(tmp_path: Path, old: str, new: str) -> str:
    text = FLEET_TOML.read_text()
    assert old in text
    path = tmp_path / "bad_fleet.toml"
    path.write_text(text.replace(old, new, 1))
    return str(path)


@pytest.mark.parametrize("old, new, field", [
    ('kind = "finetuning"', 'kind = "serving"', "jobs[8].kind"),
    ("max_gpus = 256", "max_gpus = 1024", "jobs[8].max_gpus"),
    ("max_gpus = 256", "max_gpus = 64", "jobs[8].max_gpus"),
    ("deadline_hour = 12", "deadline_hour = 12.5", "jobs[8].deadline_hour"),
    ("release_hour = 6", "release_hour = 20", "jobs[9].deadline_hour"),
    ("baseline_hours = 8", "baseline_hours = 13", "jobs[8].baseline_hours"),
    ("deadline_hour = 12\n", "\n", "jobs[8].deadline_hour"),
    ("peak_gpus = 3072", "peak_gpus = 20000", "inference[0].peak_gpus"),
    ("it_kw_per_gpu = 0.35\n", "it_kw_per_gpu = -0.35\n", "inference[0].it_kw_per_gpu"),
    ("utc_offset_hours = -7", "utc_offset_hours = -7.5", "inference[0].utc_offset_hours"),
    ('source = "Azure', 'colour = "blue"\nsource = "Azure', "inference[0].colour"),
    ("idle_value_usd_per_gpu_hour = 1.0", "idle_value_usd_per_gpu_hour = -1.0", "idle_value_usd_per_gpu_hour"),
    ('name = "PT-70B"', 'name = "PT-70B"\ndeadline_hour = 12', "jobs[7].deadline_hour"),
])
def test_bad_fleet_toml_exits_2_with_one_line(tmp_path, capsys, old, new, field):
    path = _fleet_with(tmp_path, old, new)
    assert run_cli(case_main, ["--case", path]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {field}")


def test_bad_profile_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "profile.csv"
    bad.write_text("hour_of_week,demand_share\n0,0.5\n")
    path = _fleet_with(tmp_path, "utc_offset_hours = -7", f'utc_offset_hours = -7\nprofile = "{bad}"')
    assert load_case(path).inference[0].profile == str(bad)
    assert run_cli(case_main, ["--case", path]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err.startswith("error: inference.profile")


def test_docs_job_table_is_the_case(capsys):
    assert run_cli(case_main, ["--case", "fleet", "--jobs-table"]) == 0
    table = capsys.readouterr().out.strip()
    doc = (Path(__file__).resolve().parents[1] / "docs" / "fleet.md").read_text()
    between = doc.split("<!-- jobs-table:begin -->\n", 1)[1].split("\n<!-- jobs-table:end -->", 1)[0]
    assert between == table
