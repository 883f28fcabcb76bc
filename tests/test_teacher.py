"""The per-job action's training path: the oracle as a teacher (its cached schedules, followed in the agent's env),
the per-job reward credit, and train.py's per-job defaults -- on the fleet and on several sites alike.

- a teacher schedule replays, in the agent's env, to that schedule (so its objective equals the oracle's and
  ``simulate()``'s); a cached schedule is read back without a solve and an incumbent of a shorter time limit is
  solved again;
- a running choice the mask refuses is replaced by a running one (never by a pause);
- the per-job reward credit telescopes: over random masked episodes its rewards sum to −objective;
- a case that takes the per-job action takes :data:`agents.ppo_config.PER_JOB_DEFAULTS` in train.py, the 2048 case
  keeps PPOConfig's; bad flags exit 2 with one line.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import train
from agents import teacher
from agents.ppo import agent_env
from agents.ppo_config import PER_JOB_DEFAULTS, SITES_DEFAULTS, PPOConfig, defaults_for_case, ppo_overrides
from agents.teacher import follow, teacher_action, teacher_demonstrations, teacher_schedules
from aidc_env.baselines import fixed_schedule, greedy_schedule
from aidc_env.case import build_instance, build_instances, load_case
from aidc_env.env import DispatchEnv
from aidc_env.errors import run_cli
from aidc_env.schedule import Schedule, validate_schedule
from aidc_env.simulator import simulate
from tests.test_fleet_env import small_fleet
from tests.test_sites import TINY_SITES


@pytest.fixture(scope="module")
def fleet_day():
    """The fleet case on its own day, with two pre-training and two fine-tuning jobs (a fast oracle solve), in a
    pool of 4,096 GPUs beside its inference (peak 3,072 × 1/4)."""
    inst = next(iter(build_instances(load_case("fleet")).values()))
    jobs = tuple(inst.jobs[i] for i in (0, 1, 8, 9))
    assert [job.is_finetuning for job in jobs] == [False, False, True, True]
    inference = tuple(dataclasses.replace(s, gpus=np.ceil(s.gpus / 4).astype(np.int64), peak_gpus=s.peak_gpus // 4)
                      for s in inst.inference)
    return dataclasses.replace(inst, jobs=jobs, n_gpus=4096, inference=inference)


@pytest.fixture(scope="module")
def tiny_sites(tmp_path_factory):
    """One job on two sites (tests/test_sites.py's tiny instance, 14 h baseline)."""
    path = Path(tmp_path_factory.mktemp("teacher")) / "tiny2.toml"
    path.write_text(TINY_SITES.format(segments=3, hours=14.0, link=0.5))
    return build_instance(path)


def test_cache_solves_again_an_incumbent_found_with_less_time(fleet_day, tmp_path, monkeypatch):
    """A cached answer is reused when it was proven optimal or solved with at least the time limit asked; an
    incumbent cached at a shorter limit is solved again, and the new answer replaces it."""
    inst = fleet_day
    schedule = validate_schedule(inst, fixed_schedule(inst))
    asked, answers = [], ["time_limit", "optimal", "optimal"]

    def fake_solve(instance, time_limit_s):
        asked.append(time_limit_s)
        return SimpleNamespace(status=answers[len(asked) - 1], metrics=None, gap=None, schedule=schedule.modes,
                               sites=schedule.sites)

    monkeypatch.setattr("oracle.entry.solve", fake_solve)
    expected = {inst.day: schedule}
    assert teacher_schedules([inst], tmp_path, time_limit_s=10.0) == expected
    assert teacher_schedules([inst], tmp_path, time_limit_s=10.0) == expected  # the same limit: reused
    assert teacher_schedules([inst], tmp_path, time_limit_s=5.0) == expected  # solved with more time: reused
    assert asked == [10.0]
    assert teacher_schedules([inst], tmp_path, time_limit_s=30.0) == expected  # an incumbent of 10 s: solved again
    assert asked == [10.0, 30.0]
    assert teacher_schedules([inst], tmp_path, time_limit_s=300.0) == expected  # proven optimal: reused
    assert asked == [10.0, 30.0]
    current = {"version": teacher.CACHE_VERSION, "oracle_revision": teacher.DECOMPOSITION_REVISION}
    assert teacher.reusable({**current, "status": "optimal"}, 1.0)
    assert not teacher.reusable({**current, "status": "time_limit"}, 1.0)
    assert not teacher.reusable({**current, "version": -1, "status": "optimal"}, 1.0)
    assert not teacher.reusable({**current, "oracle_revision": -1, "status": "optimal"}, 1.0)
    # another instance (a changed price) has its own file: solved again
    other = dataclasses.replace(inst, price_usd_per_mwh=inst.price_usd_per_mwh + 1.0)
    assert teacher.instance_key(other) != teacher.instance_key(inst)
    teacher_schedules([other], tmp_path, time_limit_s=300.0)
    assert asked == [10.0, 30.0, 300.0]


@pytest.mark.parametrize("which", ["fleet", "sites"])
def test_teacher_schedule_replays_in_the_agent_env_and_is_cached(which, fleet_day, tiny_sites, tmp_path,
                                                                monkeypatch):
    inst = fleet_day if which == "fleet" else tiny_sites
    schedules = teacher_schedules([inst], tmp_path, time_limit_s=60.0)
    schedule = schedules[inst.day]
    objective = simulate(inst, schedule).metrics.objective_usd
    config = PPOConfig(env="per_job", env_kwargs={**PPOConfig().env_kwargs, "reward_scale": 1.0})
    env = agent_env(dataclasses.replace(config, reward_baseline="none"), [inst])
    demos, refused = follow(env, inst.day, schedule)
    assert refused == 0
    assert env.unwrapped.schedule().mode_lists() == schedule.mode_lists()
    assert env.unwrapped.objective_usd == pytest.approx(objective, rel=1e-9)
    assert len(demos.actions) == len(demos.masks) == len(demos.observations) == len(demos.returns) > 0
    assert all(m[a] for m, a in zip(demos.masks, demos.actions, strict=True))
    # Read back from the cache: no second solve.
    monkeypatch.setattr("oracle.entry.solve", lambda *a, **k: pytest.fail("solved again despite the cache"))
    assert teacher_schedules([inst], tmp_path, time_limit_s=60.0) == schedules
    # Through the training wrapper of the per-job defaults (per-job credit, reward = saving vs fixed).
    trained = PPOConfig(case=which, **PER_JOB_DEFAULTS)
    wrapped, refused = teacher_demonstrations(trained, [inst], schedules)
    assert refused == 0 and np.array_equal(wrapped.actions, demos.actions)
    fixed = simulate(inst, fixed_schedule(inst)).metrics.objective_usd
    assert wrapped.returns[0] == pytest.approx((fixed - objective) / trained.reward_scale_usd, rel=1e-5, abs=1e-6)


def test_follow_replays_the_baselines(fleet_day):
    config = PPOConfig(case="fleet", **PER_JOB_DEFAULTS)
    for make in (fixed_schedule, greedy_schedule):
        schedule = validate_schedule(fleet_day, make(fleet_day))
        env = agent_env(config, [fleet_day])
        _, refused = follow(env, fleet_day.day, schedule)
        assert refused == 0 and env.unwrapped.schedule().mode_lists() == schedule.mode_lists()


def test_a_refused_running_choice_is_replaced_by_a_running_one_not_a_pause(tiny_sites):
    """A running choice the mask refuses becomes the nearest running mode at the schedule's site, else at the job's
    site -- never the lowest valid action (a pause)."""
    inst = tiny_sites
    job = inst.jobs[0]
    big = max(range(job.n_modes), key=lambda c: job.modes[c].gpus)
    assert job.modes[big].gpus > inst.sites[1].n_gpus  # the schedule's mode does not fit site b
    env = agent_env(PPOConfig(env="per_job", env_kwargs={"lookahead": 0, "pause_when_done": False}), [inst])
    raw = env.unwrapped
    env.reset(options={"day": inst.day})
    schedule = Schedule(np.full((1, job.segments), big), np.ones((1, job.segments), dtype=np.int64))
    done, steps = False, 0
    while not done:
        action, ok = teacher_action(env, schedule)
        site, choice = divmod(action, raw.n_choices)
        assert env.action_masks()[action] and choice > 0, (site, choice)
        if steps == 0:
            assert not ok
        _, _, done, _, _ = env.step(action)
        steps += 1
    assert simulate(inst, raw.schedule()).metrics.feasible


def test_teacher_needs_the_per_job_action(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(teacher, "TEACHER_TIME_LIMIT_S", 1.0)
    code = run_cli(train.main, ["--case", "2048", "--imitation", "oracle", "--env", "joint", "--timesteps", "16",
                                "--oracle-time-limit", "1", "--out", str(tmp_path / "run")])
    assert code == 2
    assert "imitation" in capsys.readouterr().err


def _random_episode(env, seed: int) -> float:
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    total, done = 0.0, env.unwrapped.slot >= env.unwrapped.n_slots
    while not done:
        mask = env.action_masks()
        _, reward, done, _, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        total += reward
    return total


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(inst=small_fleet(), seed=st.integers(0, 1000), baseline=st.sampled_from([None, "fixed"]))
def test_job_credit_sums_to_the_episode_objective(inst, seed, baseline):
    env = DispatchEnv(action="per_job", case=inst, reward_credit="job", reward_baseline=baseline, reward_scale=1.0)
    total = _random_episode(env, seed)
    metrics = simulate(inst, env.schedule()).metrics
    penalty = env.dynamics._last_info.get("terminal_penalty_usd", 0.0) if env.dynamics._last_info else 0.0
    expected = -metrics.objective_usd - penalty
    if baseline == "fixed":
        expected += simulate(inst, fixed_schedule(inst)).metrics.objective_usd
    assert total == pytest.approx(expected, rel=1e-9, abs=1e-6)
    # The decision credit of the same episode pays the same total.
    same = DispatchEnv(action="per_job", case=inst, reward_credit="decision", reward_baseline=baseline,
                       reward_scale=1.0)
    assert _random_episode(same, seed) == pytest.approx(total, rel=1e-9, abs=1e-6)


def test_job_credit_on_the_fleet_case_pays_each_choice(fleet_day):
    """Per-job credit pays (almost) every agent step; the decision credit only the step that closes a slot."""
    rewards = {}
    for credit in ("decision", "job"):
        env = DispatchEnv(action="per_job", case=fleet_day, reward_credit=credit, reward_baseline="fixed",
                          reward_scale=1.0)
        rng = np.random.default_rng(0)
        env.reset(seed=0)
        got, done = [], False
        while not done:
            _, reward, done, _, _ = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
            got.append(reward)
        rewards[credit] = np.array(got)
    assert rewards["job"].sum() == pytest.approx(rewards["decision"].sum(), rel=1e-9)
    assert np.count_nonzero(rewards["job"]) > np.count_nonzero(rewards["decision"])


@pytest.mark.parametrize("case", ["fleet", "sites3", "sites-fleet"])
def test_per_job_defaults_in_one_place_and_taken_by_train(case):
    """The per-job defaults, and with several sites the sites' on top, are the config's and train.py's defaults."""
    expected = {**PER_JOB_DEFAULTS, **(SITES_DEFAULTS if case.startswith("sites") else {})}
    assert ppo_overrides(load_case(case)) == expected
    config = defaults_for_case(load_case(case))
    for key, value in expected.items():
        assert getattr(config, key) == value, key
    assert defaults_for_case(load_case("2048")) == PPOConfig() and ppo_overrides(load_case("2048")) == {}
    args = train.parse_args(["--case", case])
    for key, value in expected.items():
        assert getattr(args, "default_timesteps" if key == "total_timesteps" else key) == value, key
    args = train.parse_args(["--case", case, "--learning-rate", "1e-4", "--reward-credit", "decision"])
    assert args.learning_rate == 1e-4 and args.reward_credit == "decision"  # a flag wins
    args = train.parse_args(["--case", "2048"])
    defaults = PPOConfig()
    assert (args.learning_rate, args.ent_coef, args.reward_credit, args.imitation, args.default_timesteps) == (
        defaults.learning_rate, defaults.ent_coef, defaults.reward_credit, defaults.imitation,
        defaults.total_timesteps)


@pytest.mark.parametrize("argv,field", [
    (["--imitation-days", "0"], "imitation-days"),
    (["--imitation-epochs", "-1"], "imitation-epochs"),
    (["--reward-credit", "slot"], "reward-credit"),
    (["--imitation", "teacher"], "imitation"),
    (["--oracle-time-limit", "0"], "oracle-time-limit"),
    (["--oracle-workers", "0"], "oracle-workers"),
])
def test_bad_per_job_flags_exit_2(argv, field, tmp_path, capsys):
    with pytest.raises(SystemExit) as err:  # argparse's choices exit 2 themselves
        code = run_cli(train.main, ["--case", "fleet", "--out", str(tmp_path / "run"), *argv])
        raise SystemExit(code)
    assert err.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and field in lines[0]
    assert not (tmp_path / "run").exists()


def test_fleet_study_variants_and_bad_flags(capsys):
    from experiments import fleet_study

    inst = next(iter(build_instances(load_case("fleet")).values()))
    rows = fleet_study.variants(inst)
    jobs = [(v, i) for s, v, i in rows if s == "jobs"]
    assert [len(i.jobs) for _, i in jobs] == list(fleet_study.JOB_COUNTS)
    twelve = dict(jobs)[12.0]
    assert twelve.n_gpus == inst.n_gpus and np.array_equal(twelve.inference_gpus, inst.inference_gpus)
    shares = [(v, i) for s, v, i in rows if s == "inference_share"]
    assert [i.inference_gpus.max() for _, i in shares] == [int(np.ceil(f * inst.inference_gpus.max()))
                                                          for f in fleet_study.INFERENCE_FACTORS]
    assert [i.idle_value_usd_per_gpu_hour for s, _, i in rows if s == "idle_value"] == list(fleet_study.IDLE_VALUES)
    for s, _, i in rows:  # every variant's fixed schedule fits: the saving is against a feasible schedule
        assert simulate(i, fixed_schedule(i)).metrics.feasible, s
    for argv in (["--days", "0"], ["--time-limit", "0"]):
        assert run_cli(fleet_study.main, argv) == 2
        assert len([line for line in capsys.readouterr().err.splitlines() if line.strip()]) == 1


def test_evaluate_compares_operating_costs_when_the_objective_is_negative():
    """With the idle-GPU value a fleet day's objective is negative, so its ratio to the oracle is left out (null);
    the operating costs' ratio is reported instead, equal to the simulator's figures."""
    import evaluate

    inst = next(iter(build_instances(load_case("fleet")).values()))
    reference = simulate(inst, greedy_schedule(inst))  # a stand-in for the oracle's answer: any schedule works
    fixed = simulate(inst, fixed_schedule(inst))
    assert reference.metrics.objective_usd < 0 < reference.metrics.operating_cost_usd
    per_day, summary = evaluate.summarise({"oracle": {inst.day: (reference, {})}, "fixed": {inst.day: (fixed, {})}})
    row = per_day[per_day["policy"] == "fixed"].iloc[0]
    assert np.isnan(row["cost_ratio_to_oracle"])
    expected = fixed.metrics.operating_cost_usd / reference.metrics.operating_cost_usd
    assert row["operating_cost_ratio_to_oracle"] == pytest.approx(expected, rel=1e-12)
    assert summary["policies"]["fixed"]["mean"]["cost_ratio_to_oracle"] is None
    assert summary["policies"]["fixed"]["mean"]["operating_cost_ratio_to_oracle"] == pytest.approx(expected)
    assert summary["policies"]["oracle"]["mean"]["operating_cost_ratio_to_oracle"] == pytest.approx(1.0)
