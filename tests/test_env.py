"""The Gymnasium env: API checks, determinism, vector envs, MaskablePPO, replay = simulator, mask properties."""

from __future__ import annotations

import copy
import dataclasses
import importlib.metadata
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aidc_env
from aidc_env import register_envs
from aidc_env.baselines import fixed_schedule, greedy_schedule, random_schedule
from aidc_env.case import build_instance, load_case
from aidc_env.env import ENV_ID, DispatchEnv
from aidc_env.env.observation import JOB_FEATURES, PRICE_SCALE_USD_PER_MWH
from aidc_env.errors import InputError
from aidc_env.instance import PAUSE, Instance
from aidc_env.simulator import simulate
from tests.conftest import mode, tiny_instance, tiny_job

ROOT = Path(__file__).resolve().parents[1]
SCALE = 100.0


# ------------------------------------------------------------------------------------------ helpers


@pytest.fixture(scope="module")
def env2048() -> DispatchEnv:
    return DispatchEnv(case="2048")


def masked_random_episode(env, rng: np.random.Generator, day: str | None = None, seed: int | None = None):
    """Run one episode with uniformly random masked actions; return (rewards, infos, masks-were-fallback)."""
    unwrapped = env.unwrapped
    _, info = env.reset(seed=seed, options={"day": day} if day else None)
    rewards, infos = [], []
    terminated = False
    while not terminated:
        mask = unwrapped.action_masks()
        assert mask.dtype == bool and mask.shape == (unwrapped.n_actions,) and mask.any()
        valid = np.flatnonzero(mask)
        _, reward, terminated, truncated, info = env.step(valid[rng.integers(valid.size)])
        assert not truncated
        rewards.append(reward)
        infos.append(info)
    return rewards, infos


def replay(env, schedule, day):
    unwrapped = env.unwrapped
    env.reset(seed=0, options={"day": day})
    rewards, infos = [], []
    for action in unwrapped.actions_for_schedule(schedule):
        _, reward, terminated, _, info = env.step(action)
        rewards.append(reward)
        infos.append(info)
    assert terminated
    return rewards, infos


def episode_decision_cost(rewards, infos, scale=SCALE) -> float:
    """Minus the sum of rewards times the scale, without the terminal penalty."""
    return -float(np.sum(rewards)) * scale - infos[-1]["terminal_penalty_usd"]


# ------------------------------------------------------------------------------------------ registration and API


def test_registered_on_import_and_idempotent():
    assert ENV_ID in gym.registry
    register_envs()
    register_envs()
    env = gym.make(ENV_ID)
    assert isinstance(env.unwrapped, DispatchEnv)
    env = gym.make("aidc_env:" + ENV_ID, case="2048")
    assert isinstance(env.unwrapped, DispatchEnv)
    assert aidc_env.__version__ == importlib.metadata.version("aidc-env")


def test_reachable_from_a_fresh_interpreter():
    code = ("import gymnasium as gym; e = gym.make('aidc_env:aidc_env/CheckpointDispatch-v0'); "
            "o, _ = e.reset(seed=1); print(o.shape[0])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) == gym.make(ENV_ID).observation_space.shape[0]


@pytest.mark.parametrize("kwargs", [{}, {"safety_mask": False, "forecast_noise": 0.2, "lookahead": 4},
                                    {"overrides": {"segments": [12, 24]}}])
def test_gymnasium_check_env(kwargs):
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any checker warning fails the test
        check_env(gym.make(ENV_ID, **kwargs).unwrapped)


def test_gymnasium_check_env_tiny_instance():
    from gymnasium.utils.env_checker import check_env

    inst = tiny_instance([tiny_job("A", segments=2, tranche_tokens=30_000.0), tiny_job("B", segments=4)],
                         price=[50.0, -20.0, 80.0, 10.0], shape=[0.2, 0.9, 0.5, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(ENV_ID, case=inst).unwrapped)


def test_sb3_check_env():
    from stable_baselines3.common.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(DispatchEnv(case="2048"), warn=True)
        check_env(DispatchEnv(case="2048", forecast_noise=0.1, safety_mask=False), warn=True)


def test_spaces_and_observation_layout(env2048):
    env = env2048
    inst = env.instance("2023-04-15")
    n_jobs, lookahead = len(inst.jobs), env.lookahead
    assert env.action_space == gym.spaces.Discrete(int(np.prod([j.n_modes + 1 for j in inst.jobs])))
    names = env.observation_names()
    assert len(names) == env.observation_space.shape[0] == len(JOB_FEATURES) * n_jobs + 4 + 2 * lookahead
    obs, info = env.reset(seed=0, options={"day": "2023-04-15"})
    assert obs.dtype == np.float32 and env.observation_space.contains(obs)
    assert info["day"] == "2023-04-15"
    value = dict(zip(names, obs.tolist(), strict=True))
    baseline_gpus = 0
    for job in inst.jobs:
        assert value[f"{job.name}.progress"] == 0.0
        assert value[f"{job.name}.at_checkpoint"] == 1.0
        assert value[f"{job.name}.slots_to_boundary"] == 1.0
        gpus = job.gpus_by_choice[job.initial_mode]
        baseline_gpus += gpus
        assert value[f"{job.name}.gpu_share"] == pytest.approx(gpus / inst.n_gpus)
        assert value[f"{job.name}.mode_index"] == pytest.approx((job.initial_mode + 1) / job.n_modes)
        # Fixed training needs its baseline rate: required rate / fastest rate.
        fastest = job.tokens_per_s_by_choice.max()
        assert value[f"{job.name}.required_rate_ratio"] == pytest.approx(
            job.tranche_tokens / 86_400 / fastest, rel=1e-6)
    assert value["time_of_day"] == 0.0
    price = inst.price_usd_per_mwh / PRICE_SCALE_USD_PER_MWH
    share = inst.renewable_mw / inst.rated_facility_mw
    assert value["price_now"] == pytest.approx(price[0], rel=1e-6)
    assert value["renewable_now"] == pytest.approx(share[0], rel=1e-6)
    for k in range(1, lookahead + 1):
        assert value[f"price_ahead_{k}"] == pytest.approx(price[k], rel=1e-6)
        assert value[f"renewable_ahead_{k}"] == pytest.approx(share[k], rel=1e-6, abs=1e-7)
    assert value["free_gpu_share"] == pytest.approx(1 - baseline_gpus / inst.n_gpus)
    # Step to the last slot: look-ahead past the end of the day reads 0; the terminal obs is in the box.
    rng = np.random.default_rng(0)
    rewards, infos = masked_random_episode(env, rng, day="2023-04-15")
    assert len(rewards) == inst.slots
    for key in ("slot_cost_usd", "load_mw", "grid_mw", "renewable_used_mw", "curtailment_mw", "job_modes",
                "job_progress", "invalid_action", "day"):
        assert key in infos[0]


def test_encode_decode_round_trip(env2048):
    env = env2048
    for action in (0, 1, env.n_actions // 2, env.n_actions - 1):
        assert env.encode(env.decode(action)) == action
    assert env.decode(0) == [PAUSE] * env.n_jobs
    sizes = [job.n_modes + 1 for job in env.instance("2023-04-15").jobs]
    assert env.encode([0, 0]) == 1 * sizes[1] + 1  # job 0 is the most significant digit


# ------------------------------------------------------------------------------------------ masks and actions


def test_mask_rules_on_boundaries_and_invalid_fallback():
    inst = build_instance("2048", segments=[12, 24])
    env = DispatchEnv(case=inst)
    env.reset(seed=0)
    keep = env.encode([job.initial_mode for job in inst.jobs])
    mask = env.action_masks()
    assert mask[keep]  # keeping the initial modes is safe and free
    # Capacity: no masked joint action uses more GPUs than the pool.
    gpus = np.array([sum(job.gpus_by_choice[c] for job, c in zip(inst.jobs, env.decode(a), strict=True))
                     for a in range(env.n_actions)])
    assert gpus[mask].max() <= inst.n_gpus
    assert not mask[gpus > inst.n_gpus].any()
    # Invalid actions: out of range, wrong type, masked out -> keep, flagged, never raising.
    over = int(np.flatnonzero(gpus > inst.n_gpus)[0])
    for bad in (-1, env.n_actions, over, 2.5):
        env.reset(seed=0)
        _, _, _, _, info = env.step(bad)
        assert info["invalid_action"]
        assert info["job_modes"] == [job.initial_mode for job in inst.jobs]
    # Off the boundary of LLM-A (every 8 slots) but on LLM-B's (every 4): only B may change.
    env.reset(seed=0)
    env.step(keep)
    for _ in range(3):
        mask = env.action_masks()
        assert mask.sum() == 1 and mask[keep]
        env.step(keep)
    mask = env.action_masks()  # slot 4: LLM-B's boundary only
    choices = np.array([env.decode(a) for a in np.flatnonzero(mask)])
    assert (choices[:, 0] == inst.jobs[0].initial_mode).all()
    assert len(set(choices[:, 1])) > 1
    # A masked action that changes LLM-A off its boundary is invalid.
    other = env.encode([PAUSE, inst.jobs[1].initial_mode])
    _, _, _, _, info = env.step(other)
    assert info["invalid_action"] and info["job_modes"][0] == inst.jobs[0].initial_mode


def test_finished_job_may_only_pause():
    # One job, 4 segments of 1 h; the tranche is met after two segments of mode 1 (18 tok/s).
    job = tiny_job("A", segments=4, initial_mode=1, tranche_tokens=2 * 18 * 3600.0)
    inst = tiny_instance([job], price=[10.0] * 4, shape=[0.0] * 4)
    env = DispatchEnv(case=inst)
    env.reset(seed=0)
    run = env.encode([1])
    env.step(run)
    env.step(run)
    mask = env.action_masks()
    assert np.flatnonzero(mask).tolist() == [env.encode([PAUSE])]
    _, _, _, _, info = env.step(run)  # not allowed: falls back to the only valid choice (keep is masked)
    assert info["invalid_action"] and info["job_modes"] == [PAUSE]
    free = DispatchEnv(case=inst, pause_when_done=False)
    free.reset(seed=0)
    free.step(run)
    free.step(run)
    assert free.action_masks()[run]


def test_unknown_day_is_an_input_error(env2048):
    with pytest.raises(InputError, match="not a day"):
        env2048.reset(options={"day": "1999-01-01"})
    with pytest.raises(InputError, match="not a valid date"):
        env2048.reset(options={"day": "2023-02-30"})
    with pytest.raises(InputError):
        DispatchEnv(case="2048", days=["2023-04-15", "1999-01-01"])


def test_days_are_drawn_from_the_configured_set_and_cached():
    days = ["2023-04-15", "2023-07-25"]
    env = DispatchEnv(case="2048", days=days)
    seen = {env.reset(seed=s)[1]["day"] for s in range(20)}
    assert seen == set(days)
    assert env.instance("2023-07-25") is env.instance("2023-07-25")
    # Another day of the source is still reachable through options, built like build_instance does.
    other = env.instance("2023-10-28")
    reference = build_instance("2048", day="2023-10-28")
    assert other.to_json() == reference.to_json()


# ------------------------------------------------------------------------------------------ determinism and copies


def run_seeded(env, seed: int, steps: int):
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    trace = [(obs, info)]
    for _ in range(steps):
        mask = env.unwrapped.action_masks()
        action = int(rng.choice(np.flatnonzero(mask))) if rng.random() < 0.8 else int(rng.integers(env.action_space.n))
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((obs, reward, terminated, truncated, info))
        if terminated:
            obs, info = env.reset()
            trace.append((obs, info))
    return trace


def assert_same_trace(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert len(x) == len(y)
        for u, v in zip(x, y, strict=True):
            if isinstance(u, np.ndarray):
                assert np.array_equal(u, v)
            else:
                assert u == v


def test_same_seed_same_trajectory():
    kwargs = {"forecast_noise": 0.3}
    a = run_seeded(gym.make(ENV_ID, **kwargs), 7, 250)
    b = run_seeded(gym.make(ENV_ID, **kwargs), 7, 250)
    assert_same_trace(a, b)
    c = run_seeded(gym.make(ENV_ID, **kwargs), 8, 250)
    assert not all(np.array_equal(x[0], y[0]) for x, y in zip(a, c, strict=False))


def test_forecast_noise_only_touches_the_look_ahead():
    names = DispatchEnv(case="2048").observation_names()
    exact, _ = DispatchEnv(case="2048").reset(seed=3, options={"day": "2023-04-15"})
    noisy, _ = DispatchEnv(case="2048", forecast_noise=0.2).reset(seed=3, options={"day": "2023-04-15"})
    ahead = np.array(["_ahead_" in n for n in names])
    assert np.array_equal(exact[~ahead], noisy[~ahead])
    assert not np.array_equal(exact[ahead], noisy[ahead])


def test_pickle_and_deepcopy_mid_episode():
    env = gym.make(ENV_ID, forecast_noise=0.1)
    env.reset(seed=11)
    rng = np.random.default_rng(0)
    for _ in range(13):
        env.step(int(rng.choice(np.flatnonzero(env.unwrapped.action_masks()))))
    clones = [copy.deepcopy(env), pickle.loads(pickle.dumps(env))]
    actions = [int(rng.choice(np.flatnonzero(env.unwrapped.action_masks())))]
    for _ in range(40):
        actions.append(int(rng.integers(env.action_space.n)))
    reference = [env.step(a) for a in actions]
    for clone in clones:
        got = [clone.step(a) for a in actions]
        assert_same_trace(reference, got)


# ------------------------------------------------------------------------------------------ vector envs and PPO


def test_gymnasium_sync_and_async_vector_envs():
    for cls in (gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv):
        envs = cls([lambda: gym.make("aidc_env:" + ENV_ID) for _ in range(2)])
        try:
            envs.reset(seed=[1, 2])
            rng = np.random.default_rng(0)
            for _ in range(200):
                masks = envs.call("action_masks")
                actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
                _, rewards, terminated, truncated, infos = envs.step(actions)
                # (the step after the day's end is the vector env's autoreset: reset infos, no flag)
                assert not np.any(infos.get("invalid_action", False))
                assert np.all(np.isfinite(rewards))
        finally:
            envs.close()


@pytest.mark.parametrize("vec", ["dummy", "subproc"])
def test_maskable_ppo_learns_a_few_hundred_steps(vec, tmp_path):
    import torch
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.evaluation import evaluate_policy
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: threads only contend (learning took 5 s instead of 0.3 s)
    vec_cls = DummyVecEnv if vec == "dummy" else SubprocVecEnv
    # fork: workers start in 0.1 s instead of re-importing torch (a fresh interpreter is tested above).
    vec_kwargs = {} if vec == "dummy" else {"start_method": "fork"}
    envs = make_vec_env("aidc_env:" + ENV_ID, n_envs=2, seed=0, vec_env_cls=vec_cls, vec_env_kwargs=vec_kwargs,
                        env_kwargs={"render_mode": None})  # make_vec_env asks for rgb_array by default
    from stable_baselines3.common.callbacks import BaseCallback

    class CountInvalid(BaseCallback):
        invalid = 0

        def _on_step(self) -> bool:
            self.invalid += sum(bool(info.get("invalid_action", False)) for info in self.locals["infos"])
            return True

    counter = CountInvalid()
    try:
        model = MaskablePPO("MlpPolicy", envs, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
        model.learn(total_timesteps=256, callback=counter)
        assert model.num_timesteps >= 256
        assert counter.invalid == 0  # the policy samples within action_masks()
        model.save(tmp_path / "model")
        mean, _ = evaluate_policy(model, envs, n_eval_episodes=2, warn=False)
        assert np.isfinite(mean)
    finally:
        envs.close()
        torch.set_num_threads(threads)


# ------------------------------------------------------------------------------------------ one source of truth


@pytest.mark.parametrize("day", ["2023-04-15", "2023-07-25", "2023-01-18"])
def test_replay_of_baselines_gives_the_simulator_cost(day):
    permissive = DispatchEnv(case="2048", safety_mask=False, pause_when_done=False)
    default = DispatchEnv(case="2048")
    inst = permissive.instance(day)
    randoms = [("random", random_schedule(inst, np.random.default_rng(seed))) for seed in range(3)]
    for name, schedule in [("fixed", fixed_schedule(inst)), ("greedy", greedy_schedule(inst)), *randoms]:
        expected = simulate(inst, schedule).metrics
        envs = [permissive, default] if name == "fixed" else [permissive]
        for env in envs:
            rewards, infos = replay(env, schedule, day)
            assert not any(i["invalid_action"] for i in infos), name
            assert env.schedule().mode_lists() == schedule
            assert (infos[-1]["terminal_penalty_usd"] == 0.0) == expected.tranches_met
            cost = episode_decision_cost(rewards, infos)
            assert cost == pytest.approx(expected.decision_cost_usd, rel=1e-9, abs=1e-9), name
            flows = simulate(inst, schedule).flows
            assert [i["slot_cost_usd"] for i in infos] == flows.decision_cost_usd.tolist()
            assert [i["load_mw"] for i in infos] == flows.load_mw.tolist()
            assert [i["grid_mw"] for i in infos] == flows.grid_mw.tolist()
            assert [i["curtailment_mw"] for i in infos] == flows.curtailment_mw.tolist()
            assert infos[-1]["job_progress"] == pytest.approx([j.completion for j in expected.jobs], rel=1e-12)


def test_replay_of_the_oracle_schedule():
    from oracle import solve

    permissive = DispatchEnv(case="2048", safety_mask=False, pause_when_done=False)
    inst = permissive.instance(load_case("2048").day)
    result = solve(inst, time_limit_s=30)
    assert result.schedule is not None, f"{result.status}: {result.reason}"
    schedule = [list(row) for row in result.schedule]
    expected = simulate(inst, schedule).metrics
    assert expected.tranches_met
    default = DispatchEnv(case="2048")
    for env in (permissive, default):
        rewards, infos = replay(env, schedule, inst.day)
        if env is default and any(i["invalid_action"] for i in infos):
            continue  # the safety test is sufficient, not necessary: it may reject an optimal plan
        assert not any(i["invalid_action"] for i in infos)
        assert env.schedule().mode_lists() == schedule
        assert infos[-1]["terminal_penalty_usd"] == 0.0
        assert episode_decision_cost(rewards, infos) == pytest.approx(expected.decision_cost_usd, rel=1e-9, abs=1e-9)
        assert [i["slot_cost_usd"] for i in infos] == simulate(inst, schedule).flows.decision_cost_usd.tolist()


def test_terminal_penalty_makes_missing_a_tranche_never_pay():
    env = DispatchEnv(case="2048", safety_mask=False)
    inst = env.instance("2023-04-15")
    paused = [[PAUSE] * job.segments for job in inst.jobs]
    rewards_pause, infos_pause = replay(env, paused, inst.day)
    shortfall = np.array([job.tranche_tokens for job in inst.jobs])
    penalty = float(np.sum(shortfall * env.penalty_usd_per_token(inst)))
    assert infos_pause[-1]["terminal_penalty_usd"] == pytest.approx(penalty, rel=1e-12)
    rewards_fixed, _ = replay(env, fixed_schedule(inst), inst.day)
    assert sum(rewards_fixed) > sum(rewards_pause)
    # Without the penalty, pausing all day would be cheaper (the penalty is what makes it lose).
    assert episode_decision_cost(rewards_pause, infos_pause) < -sum(rewards_fixed) * SCALE


# ------------------------------------------------------------------------------------------ safety mask


def test_safety_mask_completes_every_tranche_on_the_2048_case():
    rng = np.random.default_rng(0)
    for overrides in ({}, {"segments": [12, 48]}, {"gpus": 1280}):
        env = DispatchEnv(case="2048", overrides=overrides)
        days = env.days if not overrides else env.days[::4]
        for day in days:
            inst = env.instance(day)
            assert simulate(inst, fixed_schedule(inst)).metrics.tranches_met
            env.reset(seed=0, options={"day": day})
            assert not env.safety_fallback
            rewards, infos = masked_random_episode(env, rng, day=day)
            metrics = simulate(inst, env.schedule()).metrics
            assert metrics.tranches_met and metrics.capacity_ok, (overrides, day)
            assert not any(i["invalid_action"] or i["safety_fallback"] for i in infos)
            assert infos[-1]["terminal_penalty_usd"] == 0.0
            cost = episode_decision_cost(rewards, infos)
            assert cost == pytest.approx(metrics.decision_cost_usd, rel=1e-9, abs=1e-9)


def test_infeasible_pool_falls_back_to_the_plain_mask():
    env = DispatchEnv(case="2048", overrides={"gpus": 1024})
    env.reset(seed=0, options={"day": "2023-04-15"})
    assert env.safety_fallback  # 1024 GPUs cannot finish both tranches (the seed's threshold)
    rewards, infos = masked_random_episode(env, np.random.default_rng(0), day="2023-04-15")
    assert not any(i["invalid_action"] for i in infos)
    assert max(i["gpus_used"] for i in infos) <= 1024
    assert infos[-1]["terminal_penalty_usd"] > 0


# ------------------------------------------------------------------------------------------ property test


def random_job(rng: np.random.Generator, name: str, slots_per_day: int, slot_hours: float, n_gpus: int,
               days: int = 1, tranche_high: float = 1.1):
    """A random job: 1-3 modes, K segments a day (K divides the day's slots), a tranche of 0, 0-0.5 or
    0.5-``tranche_high`` × its fastest mode's tokens over the ``days``."""
    segments = int(rng.choice([k for k in range(1, slots_per_day + 1) if slots_per_day % k == 0]))
    segment_hours = slot_hours * slots_per_day / segments
    modes = [mode(int(rng.integers(1, n_gpus + 1)), float(rng.uniform(1, 20)), float(rng.uniform(50, 600)))
             for _ in range(int(rng.integers(1, 4)))]
    fastest = max(m.tokens_per_s for m in modes) * 3600 * slots_per_day * days * slot_hours
    tranche = float(rng.choice([0.0, rng.uniform(0, 0.5), rng.uniform(0.5, tranche_high)])) * fastest
    return tiny_job(name, segments=segments * days, modes=modes, initial_mode=int(rng.integers(-1, len(modes))),
                    tranche_tokens=tranche, restart_hours=float(rng.uniform(0, 0.95)) * segment_hours)


def random_tiny_instance(rng: np.random.Generator) -> Instance:
    slots = int(rng.choice([2, 4, 6, 8]))
    slot_hours = float(rng.choice([0.5, 1.0]))
    n_gpus = int(rng.integers(2, 9))
    jobs = [random_job(rng, f"J{j}", slots, slot_hours, n_gpus) for j in range(int(rng.integers(1, 4)))]
    return tiny_instance(jobs, price=rng.uniform(-50, 200, slots).tolist(), shape=rng.uniform(0, 1, slots).tolist(),
                         n_gpus=n_gpus, slot_hours=slot_hours,
                         curtailment_penalty_usd_per_mwh=float(rng.uniform(0, 20)))


def check_masked_episodes(inst: Instance, rng: np.random.Generator, episodes: int, safety: bool,
                          pause_when_done: bool) -> int:
    env = DispatchEnv(case=inst, safety_mask=safety, pause_when_done=pause_when_done)
    for _ in range(episodes):
        env.reset(seed=int(rng.integers(2**31)))
        safe_start = safety and not env.safety_fallback
        previous = [job.initial_mode for job in inst.jobs]
        rewards, infos = [], []
        for t in range(inst.slots):
            mask = env.action_masks()
            assert mask.any()
            valid = np.flatnonzero(mask)
            progress_before = env.tokens() >= np.array([job.tranche_tokens for job in inst.jobs]) * (1 - 1e-9)
            _, reward, terminated, _, info = env.step(int(valid[rng.integers(valid.size)]))
            assert not info["invalid_action"]
            assert info["gpus_used"] <= inst.n_gpus
            for j, job in enumerate(inst.jobs):
                boundary = t % (inst.slots // job.segments) == 0
                if not boundary:
                    assert info["job_modes"][j] == previous[j]  # no change off a checkpoint boundary
                elif pause_when_done and progress_before[j]:
                    assert info["job_modes"][j] == PAUSE
            previous = info["job_modes"]
            rewards.append(reward)
            infos.append(info)
        assert terminated
        result = simulate(inst, env.schedule())
        assert result.metrics.capacity_ok
        assert env.tokens() == pytest.approx([j.tokens for j in result.metrics.jobs], rel=1e-12, abs=1e-9)
        assert episode_decision_cost(rewards, infos) == pytest.approx(result.metrics.decision_cost_usd, rel=1e-9,
                                                                      abs=1e-9)
        assert [i["slot_cost_usd"] for i in infos] == result.flows.decision_cost_usd.tolist()
        if safe_start:
            assert result.metrics.tranches_met, env.schedule()
        if result.metrics.tranches_met:
            assert infos[-1]["terminal_penalty_usd"] == 0.0
        else:
            assert infos[-1]["terminal_penalty_usd"] > 0 or all(np.isclose(env.penalty_usd_per_token(inst), 0))
    return episodes


def test_property_1000_random_masked_episodes_on_tiny_cases():
    rng = np.random.default_rng(20230415)
    episodes = 0
    completed_fixed = 0
    for case_index in range(250):
        inst = random_tiny_instance(rng)
        fixed = simulate(inst, [[job.initial_mode] * job.segments for job in inst.jobs]).metrics
        completed_fixed += fixed.tranches_met and fixed.capacity_ok
        safety = case_index % 4 != 3
        pause_when_done = case_index % 5 != 4
        episodes += check_masked_episodes(inst, rng, 4, safety, pause_when_done)
    assert episodes >= 1000
    assert completed_fixed >= 25  # enough days that start safe for the completion guarantee to be exercised


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), safety=st.booleans())
def test_property_hypothesis_tiny_cases(seed, safety):
    rng = np.random.default_rng(seed)
    check_masked_episodes(random_tiny_instance(rng), rng, 3, safety, True)


# ------------------------------------------------------------------------------------------ one data path


def test_env_from_instances_equals_env_from_case_and_profiles():
    from aidc_env.case import build_instances

    for overrides in ({}, {"gpus": 1536, "segments": [12, 24]}):
        instances = build_instances("2048", **overrides)
        from_instances = DispatchEnv(case=list(instances.values()), forecast_noise=0.1)
        from_case = gym.make(ENV_ID, case="2048", overrides=overrides, forecast_noise=0.1)
        assert from_instances.days == from_case.unwrapped.days == list(instances)
        assert from_instances.observation_space == from_case.observation_space
        assert_same_trace(run_seeded(from_instances, 5, 300), run_seeded(from_case, 5, 300))


def test_case_convenience_builds_the_instances_once(monkeypatch):
    import aidc_env.env.core as env_module

    calls = []
    real = env_module.build_instances

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(env_module, "build_instances", counting)
    env = gym.make(ENV_ID, case="2048", days=["2023-04-15", "2023-07-25"])
    for seed in range(6):
        env.reset(seed=seed)
    env.reset(options={"day": "2023-10-28"})  # another day of the source: already built
    assert len(calls) == 1


def test_env_from_instances_never_reads_a_case_or_profiles(monkeypatch):
    import aidc_env.case
    import aidc_env.env.core as env_module
    import aidc_env.profiles
    from aidc_env.case import build_instances

    instances = list(build_instances("2048").values())

    def forbidden(*args, **kwargs):
        raise AssertionError("the env read a case or profiles although it was given instances")

    for module, name in ((aidc_env.case, "load_case"), (aidc_env.case, "load_profiles"),
                         (aidc_env.case, "build_instances"), (aidc_env.profiles, "load_profiles"),
                         (env_module, "build_instances")):
        monkeypatch.setattr(module, name, forbidden)
    env = DispatchEnv(case=instances)
    env.reset(seed=0)
    assert env.instance() is instances[env.days.index(env.instance().day)]


def test_instances_pickle_small_and_unchanged():
    from aidc_env.case import build_instances

    instances = list(build_instances("2048").values())
    data = pickle.dumps(instances)
    assert len(data) < 20_000 * len(instances)  # about 2.5 kB a day: the jobs' modes are pickled once
    copies = pickle.loads(data)
    assert [c.to_json() for c in copies] == [i.to_json() for i in instances]
    assert_same_trace(run_seeded(DispatchEnv(case=copies), 3, 120),
                      run_seeded(DispatchEnv(case=instances), 3, 120))


def test_instances_of_different_structure_are_refused():
    inst = build_instance("2048")
    other = build_instance("2048", day="2023-07-25", gpus=1536)
    with pytest.raises(InputError, match="differs from the first"):
        DispatchEnv(case=[inst, other])
    with pytest.raises(InputError, match="two instances"):
        DispatchEnv(case=[inst, inst])
    with pytest.raises(InputError, match="profiles"):
        DispatchEnv(case="2048", profiles={"2023-04-15": None})


def test_env_and_oracle_share_the_joint_choice_table():
    """The env's joint actions and the oracle's joint states are one table (aidc_env.joint), the oracle's in its
    own (itertools) order: same states, same loads as a brute-force enumeration."""
    import itertools

    from aidc_env.joint_choices import joint_choices
    from aidc_env.simulator import facility_load_mw
    from oracle.data import oracle_data

    rng = np.random.default_rng(3)
    for inst in [build_instance("2048"), build_instance("2048", gpus=1280)] + [random_tiny_instance(rng)
                                                                                for _ in range(30)]:
        table = joint_choices(inst)
        env = DispatchEnv(case=inst)
        assert env.n_actions == table.n_choices
        for a in range(0, table.n_choices, max(1, table.n_choices // 50)):
            assert env.decode(a) == table.choices[a].tolist() and env.encode(table.choices[a]) == a
        brute = [combo for combo in itertools.product(*[list(range(job.n_modes)) + [PAUSE] for job in inst.jobs])
                 if sum(int(job.gpus_by_choice[c]) for job, c in zip(inst.jobs, combo, strict=True)) <= inst.n_gpus]
        data = oracle_data(inst)
        assert data.joint_states.tolist() == [list(c) for c in brute]
        for state, load in zip(data.joint_states, data.joint_load_mw, strict=True):
            gpus = sum(int(job.gpus_by_choice[c]) for job, c in zip(inst.jobs, state, strict=True))
            power = sum(float(job.it_power_kw_by_choice[c]) for job, c in zip(inst.jobs, state, strict=True))
            assert load == pytest.approx(float(facility_load_mw(inst, gpus, power)), rel=1e-12)
        assert set(map(tuple, data.joint_states.tolist())) == set(map(tuple, table.choices[table.fits].tolist()))


# ------------------------------------------------------------------------------------------ horizons


def random_horizon_instance(rng: np.random.Generator, days: int, share: float) -> Instance:
    """A tiny instance of ``days`` days (2-8 slots a day), 1-2 jobs whose segments split into days."""
    per_day = int(rng.choice([2, 4, 6, 8]))
    slots = per_day * days
    slot_hours = float(rng.choice([0.5, 1.0]))
    n_gpus = int(rng.integers(2, 9))
    jobs = [random_job(rng, f"J{j}", per_day, slot_hours, n_gpus, days, tranche_high=1.0)
            for j in range(int(rng.integers(1, 3)))]
    inst = tiny_instance(jobs, price=rng.uniform(-50, 200, slots).tolist(), shape=rng.uniform(0, 1, slots).tolist(),
                         n_gpus=n_gpus, slot_hours=slot_hours)
    return dataclasses.replace(inst, horizon_days=days, min_daily_share=share)


def check_horizon_episode(inst: Instance, rng: np.random.Generator) -> bool:
    """One masked-random episode; returns whether it started safe (then every target must be met)."""
    env = DispatchEnv(case=inst)
    env.reset(seed=int(rng.integers(2**31)))
    safe_start = not env.safety_fallback
    rewards, infos = [], []
    terminated = False
    while not terminated:
        valid = np.flatnonzero(env.action_masks())
        _, reward, terminated, _, info = env.step(int(valid[rng.integers(valid.size)]))
        assert not info["invalid_action"]
        rewards.append(reward)
        infos.append(info)
    result = simulate(inst, env.schedule())
    assert result.metrics.capacity_ok
    assert [i["slot_cost_usd"] for i in infos] == result.flows.decision_cost_usd.tolist()
    assert episode_decision_cost(rewards, infos) == pytest.approx(result.metrics.decision_cost_usd, rel=1e-9,
                                                                  abs=1e-9)
    if safe_start:
        assert result.metrics.tranches_met, (env.schedule(), [j.tokens_by_day for j in result.metrics.jobs])
        assert all(day.daily_minimums_met for day in result.metrics.days)
        assert infos[-1]["terminal_penalty_usd"] == 0.0
    return safe_start


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), days=st.integers(2, 3), share=st.sampled_from([0.0, 0.5, 1.0]))
def test_property_masked_horizon_episodes_meet_every_target(seed, days, share):
    rng = np.random.default_rng(seed)
    inst = random_horizon_instance(rng, days, share)
    for _ in range(3):
        check_horizon_episode(inst, rng)


def test_horizon_episodes_start_safe_often_enough():
    """The property above exercises the guarantee: most fixed schedules start safe."""
    rng = np.random.default_rng(12)
    safe = sum(check_horizon_episode(random_horizon_instance(rng, int(rng.integers(2, 4)), share), rng)
               for share in (0.0, 0.5, 1.0) for _ in range(15))
    assert safe >= 15


def test_horizon_time_features_and_layout():
    rng = np.random.default_rng(5)
    inst = random_horizon_instance(rng, 3, 0.5)
    env = DispatchEnv(case=inst, lookahead=2)
    names = env.observation_names()
    assert names[7 * env.n_jobs: 7 * env.n_jobs + 3] == ["time_of_day", "horizon_progress", "price_now"]
    obs, _ = env.reset(seed=0)
    spd = inst.slots_per_day
    for t in range(inst.slots):
        assert obs[names.index("time_of_day")] == pytest.approx((t % spd) / spd)
        assert obs[names.index("horizon_progress")] == pytest.approx(t / inst.slots)
        assert env.observation_space.contains(obs)
        obs, *_ = env.step(int(np.flatnonzero(env.action_masks())[0]))
    # A day instance keeps today's layout (no horizon entry).
    day = DispatchEnv(case=dataclasses.replace(inst, horizon_days=1, min_daily_share=0.0))
    assert "horizon_progress" not in day.observation_names()


def test_horizon_terminal_penalty_covers_daily_shortfalls():
    job = tiny_job(segments=2, modes=(mode(2, 10.0, 800.0),), tranche_tokens=10.0 * 3600 * 4, restart_hours=0.0)
    inst = dataclasses.replace(tiny_instance([job], [50.0] * 4, [0.0] * 4), horizon_days=2, min_daily_share=1.0)
    env = DispatchEnv(case=inst, safety_mask=False, pause_when_done=False)
    env.reset(seed=0)
    # Day 0 paused, day 1 runs: half the horizon's tokens and day 0's whole minimum missing.
    for action in env.actions_for_schedule([[PAUSE, 0]]):
        *_, info = env.step(action)
    per_token = env.penalty_usd_per_token(inst)[0]
    assert env.daily_shortfall_tokens()[0] == pytest.approx(10.0 * 3600 * 2)
    assert info["terminal_penalty_usd"] == pytest.approx(per_token * (10.0 * 3600 * 2) * 2)
    assert not simulate(inst, env.schedule()).metrics.tranches_met


# ------------------------------------------------------------------------------------------ information


def test_dayahead_observation_is_the_outlook_and_the_last_realised_values():
    from aidc_env.information import outlook
    from tests.conftest import dayahead_instance

    inst = dayahead_instance(4, days=3)
    L = 3
    env = DispatchEnv(case=inst, information="dayahead", lookahead=L)
    names = env.observation_names()
    assert names[-4:] == ["price_last", "renewable_last", "last_known", "free_gpu_share"]
    assert len(names) == env.observation_space.shape[0]
    perfect = DispatchEnv(case=inst, lookahead=L)
    assert perfect.observation_names() == [n for n in names if n not in ("price_last", "renewable_last",
                                                                         "last_known")]
    obs, _ = env.reset(seed=0)
    rho = inst.renewable_ratio
    for t in range(inst.slots):
        price, shape = outlook(inst, t, "dayahead")
        view = np.concatenate([price, np.zeros(L + 1)])[: L + 1] / PRICE_SCALE_USD_PER_MWH
        ren = np.concatenate([rho * shape, np.zeros(L + 1)])[: L + 1]
        got = dict(zip(names, obs.tolist(), strict=True))
        assert got["price_now"] == pytest.approx(view[0], rel=1e-6)
        assert got["renewable_now"] == pytest.approx(ren[0], rel=1e-6, abs=1e-7)
        assert [got[f"price_ahead_{k}"] for k in range(1, L + 1)] == pytest.approx(view[1:], rel=1e-6)
        assert [got[f"renewable_ahead_{k}"] for k in range(1, L + 1)] == pytest.approx(ren[1:], rel=1e-6, abs=1e-7)
        if t == 0:
            assert (got["price_last"], got["renewable_last"], got["last_known"]) == (0.0, 0.0, 0.0)
        else:
            assert got["price_last"] == pytest.approx(inst.price_usd_per_mwh[t - 1] / PRICE_SCALE_USD_PER_MWH,
                                                      rel=1e-6)
            assert got["renewable_last"] == pytest.approx(rho * inst.renewable_shape[t - 1], rel=1e-6, abs=1e-7)
            assert got["last_known"] == 1.0
        assert env.observation_space.contains(obs)
        obs, *_ = env.step(int(np.flatnonzero(env.action_masks())[0]))


def test_dayahead_rewards_are_paid_on_the_truth():
    from tests.conftest import dayahead_instance

    inst = dayahead_instance(2)
    env = DispatchEnv(case=inst, information="dayahead")
    env.reset(seed=1)
    rewards, infos = [], []
    rng = np.random.default_rng(1)
    for _ in range(inst.slots):
        valid = np.flatnonzero(env.action_masks())
        _, reward, _, _, info = env.step(int(valid[rng.integers(valid.size)]))
        rewards.append(reward)
        infos.append(info)
    result = simulate(inst, env.schedule())
    assert [i["slot_cost_usd"] for i in infos] == result.flows.decision_cost_usd.tolist()
    assert result.metrics.tranches_met


@pytest.mark.parametrize("information", ["perfect", "dayahead"])
def test_gymnasium_check_env_dayahead_and_horizon(information):
    from gymnasium.utils.env_checker import check_env

    from tests.conftest import dayahead_instance

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(DispatchEnv(case=dayahead_instance(0, share=0.5), information=information, lookahead=2),
                  skip_render_check=True)
        env = gym.make(ENV_ID, case=dayahead_instance(1), information=information)
        check_env(env.unwrapped, skip_render_check=True)
    assert env.unwrapped.information == information
