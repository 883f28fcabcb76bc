"""The fleet env: one job's choice per agent step, an exact mask, totals equal to the simulator's.

Property tests over random masked episodes of small random fleets (pre-training, fine-tuning with windows,
inference, an idle value): capacity (inference included) never exceeded, no fine-tuning job outside its window,
inference always served, every target and deadline met when the episode starts safe, and the env's total equal
to ``simulate(schedule).metrics.objective_usd``. The mask is checked against a brute force (every held-mode
plan of every job enumerated); every unmasked action keeps the episode completable. Leakage: observations up to
slot t do not depend on the truth after what the information allows. The fleet and 2048 cases on the per-job env.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aidc_env.baselines import fixed_schedule
from aidc_env.case import build_instance
from aidc_env.env import FLEET_ENV_ID, DispatchEnv
from aidc_env.env.safety import SAFETY_TOLERANCE
from aidc_env.errors import InputError
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.simulator import TRANCHE_TOLERANCE, simulate
from tests.conftest import dayahead_instance, mode, tiny_instance, tiny_job
from tests.test_fleet import finetuning_job, inference
from tests.test_leakage import perturbed


@st.composite
def small_fleet(draw):
    """1-3 pre-training and 0-2 fine-tuning jobs on 4-12 GPUs, inference and an idle value, 8 or 12 slots."""
    n_slots = draw(st.sampled_from([8, 12]))
    dt = 24 / n_slots
    n_gpus = draw(st.integers(4, 12))
    jobs = []
    for j in range(draw(st.integers(1, 3))):
        modes = tuple(mode(draw(st.integers(1, 4)), draw(st.floats(1, 50)), draw(st.floats(50, 2000)))
                      for _ in range(draw(st.integers(1, 3))))
        segments = draw(st.sampled_from([k for k in (2, 4, n_slots) if n_slots % k == 0]))
        best = max(m.tokens_per_s for m in modes) * SECONDS_PER_HOUR * 24
        jobs.append(tiny_job(f"P{j}", segments=segments, modes=modes, initial_mode=draw(st.integers(PAUSE, 0)),
                             tranche_tokens=draw(st.floats(0.05, 0.9)) * best, restart_hours=draw(st.floats(0, 0.5))))
    for j in range(draw(st.integers(0, 2))):
        segments = draw(st.sampled_from([k for k in (4, n_slots) if n_slots % k == 0]))
        per = n_slots // segments
        release = draw(st.integers(0, segments - 1))
        deadline = draw(st.integers(release + 1, segments))
        modes = tuple(mode(draw(st.integers(1, 2)), draw(st.floats(1, 50)), draw(st.floats(50, 500)))
                      for _ in range(draw(st.integers(1, 2))))
        best = max(m.tokens_per_s for m in modes) * SECONDS_PER_HOUR * (deadline - release) * per * dt
        jobs.append(finetuning_job(f"F{j}", segments=segments, release=release * per, deadline=deadline * per,
                                   tranche_tokens=draw(st.floats(0.05, 0.8)) * best, modes=modes,
                                   restart_hours=0.25))
    price = draw(st.lists(st.floats(-50, 300), min_size=n_slots, max_size=n_slots))
    shape = draw(st.lists(st.floats(0, 1), min_size=n_slots, max_size=n_slots))
    inst = tiny_instance(jobs, price, shape, slot_hours=dt, n_gpus=n_gpus)
    served = draw(st.lists(st.integers(0, n_gpus // 3), min_size=n_slots, max_size=n_slots))
    served[0] = max(served[0], 1)
    return dataclasses.replace(inst, inference=(inference(served, kw=draw(st.floats(0, 500))),),
                               idle_value_usd_per_gpu_hour=draw(st.floats(0, 5)))


# ------------------------------------------------------------------------- brute force of the mask


def _tokens_by_hand(inst: Instance, j: int, choices: list[int]) -> float:
    job = inst.jobs[j]
    hours = inst.segment_hours(job)
    made, previous = 0.0, job.initial_mode
    for c in choices:
        if c != PAUSE:
            made += job.modes[c].tokens_per_s * SECONDS_PER_HOUR * (hours - (job.restart_hours if c != previous else 0))
        previous = c
    return made


def _decided(inst: Instance, schedule: list[list[int]], t: int, deciding: int) -> list[list[int]]:
    """Per job, the choices of the segments decided so far (slot t: forced jobs, then the queue in job order)."""
    out = []
    for i, job in enumerate(inst.jobs):
        sps = inst.slots_per_segment(job)
        before = schedule[i][:t // sps + (t % sps != 0)]
        if t % sps == 0:
            allowed = inst.allowed_segments(job)[t // sps]
            done = _tokens_by_hand(inst, i, before) >= job.tranche_tokens * (1 - TRANCHE_TOLERANCE)
            if not allowed or done or i < deciding:
                before = schedule[i][:t // sps + 1]
        out.append(before)
    return out


def _hold_options(inst: Instance, j: int, choices: list[int], deciding: bool) -> list[tuple[int, ...]]:
    """GPUs per slot (from the end of the decided segments to the horizon) of every held mode that meets the
    job's target by its deadline (pause if nothing is missing). A job past its deadline is out of the plan (pause),
    unless it is the one deciding (then its choice must meet the target)."""
    job = inst.jobs[j]
    sps = inst.slots_per_segment(job)
    end = len(choices) * sps
    release, deadline = inst.job_window(job)
    start = max(end, release)
    made = _tokens_by_hand(inst, j, choices)
    target = job.tranche_tokens * (1 - SAFETY_TOLERANCE)
    if made >= target or (start >= deadline and not deciding):
        return [(0,) * (inst.slots - end)]
    last = choices[-1] if choices else job.initial_mode
    options = []
    for m, md in enumerate(job.modes):
        hours = max(deadline - start, 0) * inst.slot_hours
        restart = not (m == last and start == end)
        if start < deadline and made + md.tokens_per_s * SECONDS_PER_HOUR * (hours - job.restart_hours * restart) \
                >= target:
            options.append(tuple(md.gpus if start <= s < deadline else 0 for s in range(end, inst.slots)))
    return options


def brute_mask(env: DispatchEnv) -> np.ndarray:
    """The mask by its definition: capacity beside committed choices, then some held-mode plan of every job fits."""
    inst, t, j = env.instance(), env.slot, env.deciding_job
    decided = _decided(inst, env.schedule().mode_lists(), t, j)
    N = inst.n_gpus
    job = inst.jobs[j]
    sps = inst.slots_per_segment(job)

    def committed(s: int, skip: int | None = None) -> int:
        total = int(inst.inference_gpus[s])
        for i, choices in enumerate(decided):
            k = s // inst.slots_per_segment(inst.jobs[i])
            if i != skip and k < len(choices) and choices[k] != PAUSE:
                total += inst.jobs[i].modes[choices[k]].gpus
        return total

    plain = np.zeros(env.n_actions, dtype=bool)
    safe = np.zeros(env.n_actions, dtype=bool)
    for a in range(job.n_modes + 1):
        gpus = job.gpus_by_choice[a - 1]
        plain[a] = all(committed(s, j) + gpus <= N for s in range(t, t + sps))
        trial = [list(c) for c in decided]
        trial[j] = trial[j] + [a - 1]
        holds = [_hold_options(inst, i, trial[i], i == j) for i in range(len(inst.jobs))]
        base = [committed(s, j) + gpus * (s < t + sps) for s in range(inst.slots)]
        for combo in itertools.product(*holds):
            ok = True
            for s in range(t, inst.slots):
                extra = sum(h[s - (inst.slots - len(h))] for h in combo if s >= inst.slots - len(h))
                if base[s] + extra > N:
                    ok = False
                    break
            if ok:
                safe[a] = plain[a]
                break
    return safe if safe.any() else plain


def _episode(env: DispatchEnv, choose, day: str | None = None, check=None):
    obs, _ = env.reset(seed=0, options={"day": day} if day else None)
    total, done, infos = 0.0, False, []
    while not done:
        mask = env.action_masks()
        if check is not None:
            check(env, mask)
        obs, reward, done, _, info = env.step(choose(mask))
        assert env.observation_space.contains(obs)
        total += reward
        infos.append(info)
    return total * env.reward_scale, infos


def _random_choice(seed: int):
    rng = np.random.default_rng(seed)
    return lambda mask: int(rng.choice(np.flatnonzero(mask)))


# ------------------------------------------------------------------------- properties


@settings(derandomize=True, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_fleet(), st.integers(0, 2**16))
def test_random_masked_episodes_keep_every_rule(inst, seed):
    env = DispatchEnv(action="per_job", case=inst, lookahead=2)
    total, infos = _episode(env, _random_choice(seed))
    result = simulate(inst, env.schedule())  # refuses a fine-tuning job outside its window
    m = result.metrics
    assert m.capacity_ok and m.inference_served
    assert np.all(result.flows.gpus_used <= inst.n_gpus)
    assert not any(info["invalid_action"] for info in infos)
    penalty = infos[-1]["terminal_penalty_usd"]  # > 0 only if a target is missed (an unsafe start)
    assert -total == pytest.approx(m.objective_usd + penalty, rel=1e-9, abs=1e-6)
    assert (penalty == 0) == m.tranches_met
    assert env.objective_usd == pytest.approx(m.objective_usd, rel=1e-9, abs=1e-6)
    if env.starts_safe:
        assert m.tranches_met and m.feasible
        assert not any(info["safety_fallback"] for info in infos)
        for job in m.jobs:  # a fine-tuning target is met by its deadline (it cannot run after it)
            assert job.tranche_met


@settings(derandomize=True, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_fleet(), st.integers(0, 2**16))
def test_mask_is_exactly_its_definition(inst, seed):
    env = DispatchEnv(action="per_job", case=inst)

    def check(env, mask):
        np.testing.assert_array_equal(mask, brute_mask(env))

    _episode(env, _random_choice(seed), check=check)


@settings(derandomize=True, max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_fleet(), st.integers(0, 2**16), st.integers(0, 40))
def test_every_unmasked_action_keeps_the_episode_completable(inst, seed, at):
    env = DispatchEnv(action="per_job", case=inst)
    env.reset(seed=0)
    if not env.starts_safe:
        return
    choose = _random_choice(seed)
    for _ in range(at):
        _, _, done, _, _ = env.step(choose(env.action_masks()))
        if done:
            return
    for a in np.flatnonzero(env.action_masks()):
        branch = copy.deepcopy(env)
        done = False
        _, _, done, _, _ = branch.step(int(a))
        while not done:  # the most GPU-hungry valid choice at every later step: the hardest continuation
            mask = branch.action_masks()
            _, _, done, _, _ = branch.step(int(np.flatnonzero(mask)[-1]))
        assert simulate(inst, branch.schedule()).metrics.feasible


@settings(derandomize=True, max_examples=20, deadline=None)
@given(st.integers(0, 47), st.integers(0, 10_000), st.sampled_from([0, 3]))
def test_observations_up_to_t_ignore_the_truth_after_t(t, seed, lookahead):
    """Day-ahead information: nothing observed at slots <= t moves when the truth of slots >= t does; with
    perfect information, nothing moves when the truth beyond the look-ahead does."""
    base = dayahead_instance(seed % 7)
    for information, moved_from in (("dayahead", t), ("perfect", min(t + lookahead + 1, base.slots - 1))):
        traces = []
        for inst in (base, perturbed(base, moved_from, seed)):
            env = DispatchEnv(action="per_job", case=inst, information=information, lookahead=lookahead)
            obs, _ = env.reset(seed=0)
            choose = _random_choice(seed)
            trace = []
            while env.slot <= t and env.deciding_job is not None:
                mask = env.action_masks()
                trace.append((env.slot, obs.copy(), mask))
                obs, *_ = env.step(choose(mask))
            traces.append(trace)
        assert len(traces[0]) == len(traces[1])
        for (s1, o1, m1), (s2, o2, m2) in zip(*traces, strict=True):
            assert s1 == s2
            np.testing.assert_array_equal(o1, o2)
            np.testing.assert_array_equal(m1, m2)


# ------------------------------------------------------------------------- the cases


@pytest.fixture(scope="module")
def fleet() -> Instance:
    return build_instance("fleet")


def _replay(schedule: list[list[int]], env: DispatchEnv):
    """A policy that plays ``schedule``: the choice of the deciding job's current segment."""
    def choose(mask):
        j, t = env.deciding_job, env.slot
        c = schedule[j][t // env.instance().slots_per_segment(env.instance().jobs[j])] + 1
        assert mask[c], (j, t, c)
        return c
    return choose


@pytest.mark.parametrize("case", ["fleet", "2048"])
def test_fixed_schedule_replays_to_the_simulators_objective(case):
    inst = build_instance(case)
    env = DispatchEnv(action="per_job", case=inst)
    fixed = fixed_schedule(inst)
    total, infos = _episode(env, _replay(fixed, env))
    assert env.schedule().mode_lists() == fixed
    expected = simulate(inst, fixed).metrics.objective_usd
    assert -total == pytest.approx(expected, rel=1e-12)
    if case == "fleet":
        assert expected == pytest.approx(-61_190.51, abs=0.01)  # docs/fleet.md
        assert len(infos) < 200 and env.n_actions == max(job.n_modes for job in inst.jobs) + 1


def test_gymnasium_checks_registration_and_maskable_ppo(fleet):
    from gymnasium.utils.env_checker import check_env
    from sb3_contrib.common.maskable.utils import get_action_masks

    from agents.ppo import PPOConfig, make_model, make_vec_env, ppo_schedule

    for case in (fleet, build_instance("2048")):
        check_env(DispatchEnv(action="per_job", case=case), skip_render_check=True)
    env = gym.make(FLEET_ENV_ID, case=fleet)
    assert isinstance(env.unwrapped, DispatchEnv)
    config = PPOConfig(case="fleet", n_envs=2, n_steps=32, batch_size=32, n_epochs=1, net_arch=[16])
    vec = make_vec_env(config, [fleet])
    vec.reset()
    masks = get_action_masks(vec)
    assert masks.shape == (2, env.unwrapped.n_actions) and masks.any(axis=1).all()
    model = make_model(config, vec)
    model.learn(64)
    vec.close()
    metrics = simulate(fleet, ppo_schedule(model, fleet)).metrics
    assert metrics.feasible


def test_2048_case_on_either_env(reference_instance):
    """The per-job env accepts the two-job case (an option in train.py: --env fleet); the joint env refuses the
    fleet with one line naming the fleet env."""
    from agents.ppo import PPOConfig, action_type

    env = DispatchEnv(action="per_job", case=reference_instance)
    total, infos = _episode(env, _random_choice(1))
    assert len(infos) == 24  # 12 boundaries x 2 jobs
    assert -total == pytest.approx(simulate(reference_instance, env.schedule()).metrics.objective_usd, rel=1e-9)
    assert action_type(PPOConfig(), [reference_instance]) == "joint"
    assert action_type(PPOConfig(env="per_job"), [reference_instance]) == "per_job"
    assert action_type(PPOConfig(), [build_instance("fleet")]) == "per_job"
    assert action_type(PPOConfig(), [build_instance("sites3")]) == "per_job"


def test_invalid_actions_and_bad_arguments(fleet):
    env = DispatchEnv(action="per_job", case=fleet)
    with pytest.raises(gym.error.ResetNeeded):
        env.step(0)
    env.reset(seed=0)
    mask = env.action_masks()
    bad = int(np.flatnonzero(~mask)[0]) if (~mask).any() else env.n_actions
    _, _, _, _, info = env.step(bad)
    assert info["invalid_action"]
    for kwargs, name in (({"reward_baseline": "greedy"}, "reward_baseline"), ({"lookahead": -1}, "lookahead"),
                         ({"reward_scale": 0}, "reward_scale")):
        with pytest.raises(InputError, match=name):
            DispatchEnv(action="per_job", case=fleet, **kwargs)
    with pytest.raises(InputError, match="min_daily_share"):
        DispatchEnv(action="per_job", case=dataclasses.replace(dayahead_instance(0), min_daily_share=0.5))


def test_reward_baseline_pays_the_saving_against_fixed(fleet):
    env = DispatchEnv(action="per_job", case=fleet, reward_baseline="fixed")
    total, _ = _episode(env, _replay(fixed_schedule(fleet), env))
    assert total == pytest.approx(0.0, abs=1e-6)
