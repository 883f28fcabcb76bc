"""The per-job env on several sites: Gymnasium's checker; over random masked episodes a job is never at two sites,
moves only at a checkpoint and pays its transfer, no site's pool is exceeded, every target is met and the episode
total is the simulator's; every allowed choice keeps the episode completable and, with a large search budget, the
mask is exactly the completable choices (brute force); nothing observed depends on truth beyond the look-ahead
(masks on no truth at all); the warm start's action sequence of an oracle schedule replays to its cost."""

from __future__ import annotations

import dataclasses
import itertools
from copy import deepcopy
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.ppo import agent_env
from agents.ppo_config import PPOConfig
from agents.teacher import teacher_action
from aidc_env import register_envs
from aidc_env.case import build_instance
from aidc_env.env import DispatchEnv
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.schedule import validate_schedule
from aidc_env.simulator import TRANCHE_TOLERANCE
from oracle import solve
from tests.conftest import simulate_at, site_array

TWO_SITES = """
name = "tiny-sites"
gpus = 256
slots = 24
day = "2023-06-17"
[energy]
ppa_usd_per_mwh = 30.0
[migration]
link_gbps = 0.5
[[sites]]
name = "a"
gpus = 256
price_node = "SCE"
plant = "solar"
renewable_ratio = 0.5
[[sites]]
name = "b"
gpus = 128
price_node = "PGE"
plant = "wind"
renewable_ratio = 1.0
[[jobs]]
name = "J1"
model = "llama-7b"
segments = 4
restart_minutes = 10
baseline_gpus = 128
baseline_hours = 14
site = "a"
[[jobs]]
name = "J2"
model = "llama-7b"
segments = 4
restart_minutes = 10
baseline_gpus = 128
baseline_hours = 10
site = "b"
"""


@pytest.fixture(scope="module")
def two_sites(tmp_path_factory) -> Instance:
    path = Path(tmp_path_factory.mktemp("sites")) / "tiny.toml"
    path.write_text(TWO_SITES)
    return build_instance(path)


def sites_env_of(case, **kwargs) -> DispatchEnv:
    return DispatchEnv(case=case, action="per_job", **kwargs)


def test_check_env_and_the_action_space_is_linear_in_sites_and_modes(two_sites):
    register_envs()
    env = gym.make("aidc_env/SitesDispatch-v0", case="sites3").unwrapped
    check_env(env, skip_render_check=True)
    inst = env.instance(env.days[0])
    assert env.action_space.n == 3 * (max(job.n_modes for job in inst.jobs) + 1) == 63
    assert len(env.observation_names()) == env.observation_space.shape[0]
    small = sites_env_of(two_sites, lookahead=2)
    check_env(small, skip_render_check=True)


def play(env: DispatchEnv, seed: int) -> list[dict]:
    """A masked-random episode; the infos of its steps."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    infos, done = [], env.slot >= env.n_slots
    while not done:
        mask = env.action_masks()
        assert mask.any()
        _, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        infos.append(info)
    return infos


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000))
def test_random_masked_episodes_keep_every_rule(two_sites, seed):
    env = sites_env_of(two_sites)
    infos = play(env, seed)
    inst = two_sites
    schedule, sites = env.schedule().mode_lists(), env.schedule().site_lists()
    result = simulate_at(inst, schedule, sites)
    # The episode total is the simulator's cost of the schedule it produced.
    assert env.objective_usd == pytest.approx(result.metrics.objective_usd, rel=1e-9, abs=1e-9)
    # Every target met, every site's pool kept in every slot.
    assert result.metrics.tranches_met and result.metrics.capacity_ok
    assert np.all(site_array(result, 'gpus_used') <= np.array([s.n_gpus for s in inst.sites])[:, None])
    assert np.array_equal(site_array(result, 'gpus_used'), env.committed_gpus())
    for j, job in enumerate(inst.jobs):
        per = inst.slots_per_segment(job)
        # A job is at one site in every slot: its GPUs are counted at one site only.
        slot_sites = np.repeat(sites[j], per)
        gpus = job.gpus_by_choice[np.repeat(schedule[j], per)]
        for s in range(len(inst.sites)):
            assert np.all(site_array(result, 'gpus_used')[s] >= np.where(slot_sites == s, gpus, 0))
        # It decides (and so moves) only at its checkpoint boundaries.
        for info in infos:
            if info["job"] == j:
                assert info["slot"] % per == 0
        # A move into a running segment pays transfer + restart; the env counted the same tokens.
        H, tau, transfer = inst.segment_hours(job), job.restart_hours, inst.network.transfer_hours[j]
        running_moves = sum(1 for c, s, ps in zip(schedule[j], sites[j], [inst.network.home[j], *sites[j][:-1]],
                                                  strict=True) if c != PAUSE and s != ps)
        assert result.metrics.jobs[j].transfer_hours_lost == pytest.approx(running_moves * transfer)
        tokens = sum((H - (tau if (c != pc or s != ps) else 0.0) - (transfer if s != ps else 0.0))
                     * job.tokens_per_s_by_choice[c] * SECONDS_PER_HOUR
                     for c, s, pc, ps in zip(schedule[j], sites[j], [job.initial_mode, *schedule[j][:-1]],
                                             [inst.network.home[j], *sites[j][:-1]], strict=True) if c != PAUSE)
        assert result.metrics.jobs[j].tokens == pytest.approx(tokens, rel=1e-12)
        assert env.tokens()[j] == pytest.approx(tokens, rel=1e-9)


def test_a_move_into_a_pause_is_allowed_when_the_job_can_move_back(two_sites):
    env = sites_env_of(two_sites)
    env.reset(seed=0)
    assert env.deciding_job == 0
    # J1 paused at b cannot run there beside J2 (b holds 128), but it can move back to a after the pause and
    # still make its target (τ + transfer lost): allowed (holding every job where it is would refuse it).
    assert env.action_masks()[env.action_of(0, 0, PAUSE)]
    assert env.action_masks()[env.action_of(0, 1, PAUSE)]
    env.step(env.action_of(0, 1, PAUSE))
    assert env.schedule().site_lists()[0][0] == 1 and env.tokens()[0] == 0.0
    assert env.starts_safe and not env.safety_fallback


def capacity_actions(env: DispatchEnv) -> list[int]:
    """The actions whose GPUs fit their site beside the committed choices (the mask without the completion rule)."""
    free = deepcopy(env)
    free.safety_mask = False
    free.dynamics._mask = None
    return np.flatnonzero(free.action_masks()).tolist()


def branch_after(env: DispatchEnv, action: int) -> DispatchEnv:
    """A copy of the env that takes ``action`` (any action within capacity: the copy has no completion rule)."""
    branch = deepcopy(env)
    branch.safety_mask = False
    branch.dynamics._mask = None
    _, _, _, _, info = branch.step(action)
    assert not info["invalid_action"]
    return branch


def completable(env: DispatchEnv, memo: dict) -> bool:
    """Brute force, independent of the env's rule and search: some continuation of the state within every pool (any
    site and choice per decision) meets every target."""
    d = env.dynamics
    if d.slot >= d.n_slots:
        return all(x >= job.tranche_tokens * (1 - TRANCHE_TOLERANCE)
                   for x, job in zip(d.tokens(), env.template.jobs, strict=True))
    key = (d.slot, d._k, tuple(d._queue), tuple(d._site), tuple(d._cur), tuple(d._end), tuple(d.tokens()),
           d._committed[:, d.slot:].tobytes())
    if key not in memo:
        memo[key] = any(completable(branch_after(env, action), memo) for action in capacity_actions(env))
    return memo[key]


def completable_actions(env: DispatchEnv, memo: dict) -> np.ndarray:
    exact = np.zeros(env.n_actions, dtype=bool)
    for action in capacity_actions(env):
        exact[action] = completable(branch_after(env, action), memo)
    return exact


@settings(max_examples=6, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000))
def test_every_allowed_choice_is_completable_and_a_deep_search_allows_exactly_those(two_sites, seed):
    # On the two-site instance, over a masked-random episode: every choice the rule allows is completable (brute
    # force over all continuations); with a search budget that covers the whole tree the mask is exactly them.
    rule, deep = sites_env_of(two_sites), sites_env_of(two_sites, mask_search_nodes=10_000)
    rng = np.random.default_rng(seed)
    rule.reset(seed=seed)
    deep.reset(seed=seed)
    memo: dict = {}
    done = False
    while not done:
        exact = completable_actions(rule, memo)
        mask = rule.action_masks()
        assert not np.any(mask & ~exact)
        assert np.array_equal(deep.action_masks(), exact)
        action = int(rng.choice(np.flatnonzero(mask)))
        _, _, done, _, info = rule.step(action)
        deep.step(action)
        assert not info["safety_fallback"]


def test_the_rule_alone_refuses_few_completable_choices_that_the_search_allows(two_sites):
    refused = allowed = 0
    for seed in range(30):
        rule = sites_env_of(two_sites)
        searched = sites_env_of(two_sites, mask_search_nodes=1)
        rng = np.random.default_rng(seed)
        rule.reset(seed=seed)
        searched.reset(seed=seed)
        done = False
        while not done:
            a, b = rule.action_masks(), searched.action_masks()
            assert not np.any(a & ~b)
            refused += int(np.sum(b & ~a))
            allowed += int(a.sum())
            action = int(rng.choice(np.flatnonzero(a)))
            _, _, done, _, _ = rule.step(action)
            searched.step(action)
    assert refused <= 0.05 * allowed


@settings(max_examples=2, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000))
def test_every_allowed_sites3_choice_keeps_the_episode_completable(seed):
    # sites3 (4 jobs, 3 sites): at random states of a masked-random episode, each allowed choice followed by
    # masked-random play meets every target within every pool, and the mask is never empty.
    env = sites_env_of("sites3")
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    done = False
    while not done:
        mask = env.action_masks()
        if rng.random() < 0.15:
            for action in rng.choice(np.flatnonzero(mask), size=min(3, int(mask.sum())), replace=False):
                copy = deepcopy(env)
                _, _, end, _, _ = copy.step(int(action))
                while not end:
                    m = copy.action_masks()
                    assert m.any() and not copy.safety_fallback
                    _, _, end, _, _ = copy.step(int(rng.choice(np.flatnonzero(m))))
                result = simulate_at(copy.instance(), copy.schedule().mode_lists(), copy.schedule().site_lists())
                assert result.metrics.tranches_met and result.metrics.capacity_ok
        _, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(mask))))


def rule_by_enumeration(env: DispatchEnv) -> np.ndarray:
    """The several-site rule by its definition: an action (s, c) of the deciding job j is allowed when, for some
    assignment of every other job's hold to a site within every pool from slot t on, its segment fits s beside them and
    its hold after it fits some site's pool until its deadline; else (no such action) the actions within capacity."""
    d, t, j = env.dynamics, env.slot, env.deciding_job
    pools, committed = d._pools, d.committed_gpus()
    S, C = committed.shape[0], d.n_choices
    end, stop = t + d._sps[j], d._deadline[j]
    gpus = d._gpus_loc[j]
    base = d._plan.target_safe[j] - d._tokens[j]
    allowed = np.zeros(env.n_actions, dtype=bool)
    capacity = allowed.copy()
    for s, c in itertools.product(range(S), range(gpus.size)):
        capacity[s * C + c] = np.all(committed[s, t:end] + gpus[c] <= pools[s])
    others = [i for i in range(env.n_jobs) if i != j]
    for sites in itertools.product(range(S), repeat=len(others)):
        reserved = committed.copy()
        for i, sigma in zip(others, sites, strict=True):
            held, held_away, site, start = d._state[:, i]
            reserved[sigma, start:d._deadline[i]] += held if sigma == site else held_away
        if np.any(reserved[:, t:] > pools[:, None]):
            continue
        for s, c in itertools.product(range(S), range(gpus.size)):
            moved = s != d._site[j]
            made = d._made[j][2 if moved else 0 if c == d._cur[j] else 1, c]
            holds = [d._plan.held_gpus(j, end, base - made, c) if sigma == s else
                     d._move_plan.held_gpus_paused(j, end, base - made) for sigma in range(S)]
            allowed[s * C + c] |= bool(np.all(reserved[s, t:end] + gpus[c] <= pools[s]) and any(
                holds[sigma] <= pools[sigma] and np.all(reserved[sigma, end:stop] + holds[sigma] <= pools[sigma])
                for sigma in range(S)))  # a hold of more than the pool (its target missed) never fits
    return allowed if allowed.any() else capacity


@pytest.mark.parametrize("case", ["sites3", "sites-fleet"])
def test_the_compiled_rule_is_its_definition_over_every_hold_assignment(case):
    # The rule's kernel enumerates the assignments depth first, cutting branches by bounds: its mask is the
    # enumeration's at every step of masked-random episodes (some actions outside the mask).
    env = sites_env_of(case)
    rng = np.random.default_rng(0)
    for seed in (0, 1):
        env.reset(seed=seed)
        done = False
        while not done:
            mask = env.action_masks()
            np.testing.assert_array_equal(mask, rule_by_enumeration(env))
            action = rng.integers(mask.size) if rng.random() < 0.1 else rng.choice(np.flatnonzero(mask))
            _, _, done, _, _ = env.step(int(action))


def test_bad_mask_search_nodes_is_refused(two_sites):
    for bad in (-1, 1.5, True):
        with pytest.raises(Exception, match="mask_search_nodes"):
            sites_env_of(two_sites, mask_search_nodes=bad)


def perturbed(inst: Instance, t: int, seed: int) -> Instance:
    """``inst`` with other prices and plant shapes at every site from slot t on."""
    rng = np.random.default_rng(seed)
    sites = []
    for site in inst.network.sites:
        price = site.price_usd_per_mwh.copy()
        shape = site.renewable_shape.copy()
        price[t:] = rng.uniform(-50, 300, price.size - t)
        shape[t:] = rng.uniform(0, 1, shape.size - t)
        sites.append(dataclasses.replace(site, price_usd_per_mwh=price, renewable_shape=shape))
    network = dataclasses.replace(inst.network, sites=tuple(sites))
    return dataclasses.replace(inst, network=network, price_usd_per_mwh=sites[0].price_usd_per_mwh,
                               renewable_shape=sites[0].renewable_shape)


def trace(inst: Instance, lookahead: int, actions_seed: int, until: int | None = None, **config):
    """Observations, masks and slots of an episode with a seeded masked-random action sequence (``config``: more of
    the env's configuration)."""
    env = sites_env_of(inst, lookahead=lookahead, **config)
    rng = np.random.default_rng(actions_seed)
    obs, _ = env.reset(seed=0)
    out, done = [], env.slot >= env.n_slots
    while not done and (until is None or env.slot <= until):
        mask = env.action_masks()
        out.append((env.slot, obs, mask))
        obs, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
    return out


@settings(max_examples=8, deadline=None, derandomize=True)
@given(t=st.integers(0, 23), seed=st.integers(0, 1000))
def test_no_truth_beyond_the_lookahead_leaks_and_masks_read_no_truth(two_sites, t, seed):
    L = 3
    base = trace(two_sites, L, seed, until=t)
    later = trace(perturbed(two_sites, min(t + L + 1, two_sites.slots), seed + 1), L, seed, until=t)
    assert len(base) == len(later)
    for (s0, o0, m0), (s1, o1, m1) in zip(base, later, strict=True):
        assert s0 == s1 and np.array_equal(o0, o1) and np.array_equal(m0, m1)
    everything = trace(perturbed(two_sites, 0, seed + 2), L, seed)
    full = trace(two_sites, L, seed)
    assert len(everything) == len(full)
    assert all(np.array_equal(a[2], b[2]) for a, b in zip(everything, full, strict=True))


def test_the_teacher_sequence_of_an_oracle_schedule_replays_to_its_cost(two_sites):
    solved = solve(two_sites, method="decomposition", time_limit_s=30, mip_gap=1e-9)
    assert solved.status == "optimal"
    env = agent_env(PPOConfig(env="per_job", env_kwargs={"lookahead": 0, "pause_when_done": False}), [two_sites])
    raw = env.unwrapped
    env.reset(options={"day": two_sites.day})
    target = validate_schedule(two_sites, solved.schedule, solved.sites)
    done, allowed = False, []
    while not done:
        action, ok = teacher_action(env, target)
        allowed.append(ok)
        j = raw.deciding_job
        k = raw.slot // two_sites.slots_per_segment(two_sites.jobs[j])
        site, choice = divmod(action, raw.n_choices)
        assert choice == solved.schedule[j][k] + 1  # a pause may wait where the job runs next (a free move)
        assert choice == 0 or site == solved.sites[j][k]
        _, _, done, _, _ = env.step(action)
    assert all(allowed)
    assert raw.schedule().mode_lists() == solved.schedule
    replay = simulate_at(two_sites, raw.schedule().mode_lists(), raw.schedule().site_lists()).metrics.operating_cost_usd
    assert raw.objective_usd == pytest.approx(replay, rel=1e-9)  # no idle value: the objective is the cost
    assert raw.objective_usd == pytest.approx(solved.objective_usd, rel=1e-9)
