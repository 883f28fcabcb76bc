"""The composition matrix: every capability composes with every other in the one env class.

Cells: {one day, a week} × {perfect, dayahead} × {2048, fleet, sites3, sites-fleet} × {per_job, joint where it
applies (the two-job day case)}, each on real data (the packaged CAISO 2023 year and its day-ahead forecasts).
For every cell:

- Gymnasium's ``check_env`` passes;
- a masked random episode keeps every rule (the mask is never empty, targets met within every pool and window),
  and its rewards sum to −(the simulator's replay of the episode's schedule: its objective, or for the joint
  action its decision cost, grid cost + curtailment penalty) − the terminal penalty;
- under ``dayahead``: no observation or mask up to slot t moves when every site's truth from t on changes.

Masks are exact: on small instances of each kind (one site, fleet workloads, two sites, two sites with fleet
workloads; one and two days), brute force over every continuation gives the completable actions; every action the
mask allows is completable (unless the rule finds no plan at all, in an episode that starts unsafe: then the mask
is the capacity mask and ``safety_fallback`` says so), and the joint safety mask, or the per-job mask with a search
budget that covers the tree, allows exactly those.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from copy import deepcopy

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from aidc_env.case import build_instances, load_case, profiles_for
from aidc_env.dayahead import dayahead_instances
from aidc_env.env import DispatchEnv
from aidc_env.forecasts import load_forecasts
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.sites import Site, SiteNetwork
from aidc_env.simulator import simulate
from tests.conftest import mode, tiny_instance, tiny_job
from tests.test_fleet import finetuning_job, inference
from tests.test_forecasts import tiny_model  # noqa: F401 (an autouse fixture: few boosting rounds, fast fits)

CASES = ("2048", "fleet", "sites3", "sites-fleet")
CELLS = [(case, action, days, information) for case in CASES
         for action in (("joint", "per_job") if case == "2048" else ("per_job",))
         for days in (1, 7) for information in ("perfect", "dayahead")]
"""20 cells: the joint action applies to the two-job one-site case only."""
TRAIN = [(dt.date(2023, 6, 1) + dt.timedelta(days=i)).isoformat() for i in range(56)]
"""The forecaster's fit days (2023-06-01..07-26, inside the day-ahead forecast period)."""
START = "2023-08-14"
"""The first day of every cell (a Monday: the week runs to 2023-08-20)."""


@functools.lru_cache(maxsize=None)
def matrix_instance(case: str, days: int, information: str) -> Instance:
    profiles = profiles_for(load_case(case), "caiso-2023")
    instances = build_instances(case, [START], profiles, horizon_days=days)
    if information == "dayahead":
        instances = dayahead_instances(instances, profiles, load_forecasts("caiso-2023-dayahead"), TRAIN, 2, seed=0)
    return instances[START]


def matrix_env(cell, **config) -> DispatchEnv:
    case, action, days, information = cell
    return DispatchEnv(case=matrix_instance(case, days, information), action=action, information=information,
                       **config)


def cell_id(cell) -> str:
    case, action, days, information = cell
    return f"{case}-{action}-{'day' if days == 1 else 'week'}-{information}"


@pytest.mark.parametrize("cell", CELLS, ids=cell_id)
def test_check_env_passes(cell):
    check_env(matrix_env(cell), skip_render_check=True)


@pytest.mark.parametrize("cell", CELLS, ids=cell_id)
def test_a_masked_random_episode_keeps_every_rule_and_its_rewards_are_the_replay(cell):
    env = matrix_env(cell, reward_scale=1.0, reward_baseline=None)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    total, done, info = 0.0, False, {}
    while not done:
        mask = env.action_masks()
        assert mask.any()
        _, reward, done, _, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert not info.get("safety_fallback", False)
        total += reward
    metrics = simulate(env.instance(), env.schedule()).metrics
    assert metrics.feasible and metrics.tranches_met and metrics.capacity_ok
    # The per-job reward is the objective; the joint action's (published with the day env) counts what decisions
    # change, the grid cost and curtailment penalty: the renewable energy is paid whatever the schedule.
    paid = metrics.decision_cost_usd if cell[1] == "joint" else metrics.objective_usd
    expected = -paid - info.get("terminal_penalty_usd", 0.0)
    assert total == pytest.approx(expected, rel=1e-9, abs=1e-6)


def perturbed(inst: Instance, t: int, seed: int) -> Instance:
    """``inst`` with other true prices and plant shapes at every site from slot t on (forecasts untouched)."""
    rng = np.random.default_rng(seed)

    def moved(price: np.ndarray, shape: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        price, shape = price.copy(), shape.copy()
        price[t:] = rng.uniform(-50, 300, price.size - t)
        shape[t:] = rng.uniform(0, 1, shape.size - t)
        return price, shape

    if inst.network is None:
        price, shape = moved(inst.price_usd_per_mwh, inst.renewable_shape)
        return dataclasses.replace(inst, price_usd_per_mwh=price, renewable_shape=shape)
    sites = []
    for site in inst.network.sites:
        price, shape = moved(site.price_usd_per_mwh, site.renewable_shape)
        sites.append(dataclasses.replace(site, price_usd_per_mwh=price, renewable_shape=shape))
    return dataclasses.replace(inst, network=dataclasses.replace(inst.network, sites=tuple(sites)),
                               price_usd_per_mwh=sites[0].price_usd_per_mwh, renewable_shape=sites[0].renewable_shape)


def trace(env: DispatchEnv, until: int, seed: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(slot, observation, mask) of every agent step up to slot ``until`` of a seeded masked-random episode."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=0)
    out, done = [], False
    while not done and env.slot <= until:
        mask = env.action_masks()
        out.append((env.slot, obs, mask))
        obs, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
    return out


@pytest.mark.parametrize("cell", [c for c in CELLS if c[3] == "dayahead"], ids=cell_id)
def test_under_dayahead_nothing_up_to_t_reads_the_truth_from_t(cell):
    case, action, days, information = cell
    inst = matrix_instance(case, days, information)
    for k, t in enumerate((inst.slots_per_day // 3, inst.slots_per_day + inst.slots_per_day // 2)):
        t = min(t, inst.slots - 1)
        moved = perturbed(inst, t, seed=k)
        base = trace(DispatchEnv(case=inst, action=action, information=information), t, seed=k)
        later = trace(DispatchEnv(case=moved, action=action, information=information), t, seed=k)
        assert len(base) == len(later) > 0
        for (s0, o0, m0), (s1, o1, m1) in zip(base, later, strict=True):
            assert s0 == s1 and np.array_equal(o0, o1) and np.array_equal(m0, m1)
    # The check has teeth: under perfect information the observation at slot t moves with the truth of slot t.
    t = inst.slots_per_day // 2
    seen = [trace(DispatchEnv(case=i, action=action, information="perfect"), t, seed=0)[-1][1]
            for i in (inst, perturbed(inst, t, seed=9))]
    assert not np.array_equal(*seen)


# ----------------------------------------------------------------- masks against brute force (small instances)

KINDS = ("day", "fleet", "sites", "sites-fleet")
SLOTS_PER_DAY = 4
"""Six-hour slots."""
SEGMENTS = 2
"""Segments per job over the horizon (one or two days): a tree brute force covers."""


def _site(name: str, gpus: int, price, shape) -> Site:
    return Site(name=name, n_gpus=gpus, pue=1.5, idle_kw_per_gpu=100.0, rated_kw_per_gpu=500.0, plant="solar",
                renewable_ratio=1.0, ppa_usd_per_mwh=30.0, curtailment_penalty_usd_per_mwh=10.0, price_node="SCE",
                price_usd_per_mwh=np.asarray(price, dtype=float), renewable_shape=np.asarray(shape, dtype=float))


@st.composite
def small_instance(draw, kind: str, days: int) -> Instance:
    """Two jobs of two segments each: pre-training only (``day``, ``sites``) or one pre-training and one
    fine-tuning job with a window beside inference and an idle-GPU value (``fleet``, ``sites-fleet``); two sites
    (4 and 2 GPUs, a 3 h checkpoint transfer) for ``sites*``."""
    T = SLOTS_PER_DAY * days
    hours = 24.0 / SLOTS_PER_DAY
    price = draw(st.lists(st.floats(-50, 300), min_size=T, max_size=T))
    shape = draw(st.lists(st.floats(0, 1), min_size=T, max_size=T))
    share = [draw(st.floats(0.2, 0.6)) for _ in range(2)]
    a = (mode(2, 10.0, 800.0), mode(4, 18.0, 1800.0))
    jobs = [tiny_job("A", segments=SEGMENTS, modes=a, initial_mode=draw(st.sampled_from([PAUSE, 0])),
                     tranche_tokens=share[0] * 18.0 * SECONDS_PER_HOUR * hours * T, restart_hours=1.0)]
    fleet = kind in ("fleet", "sites-fleet")
    if fleet:
        release = draw(st.integers(0, SEGMENTS - 1))
        deadline = draw(st.integers(release + 1, SEGMENTS))
        b = (mode(1, 5.0, 300.0), mode(2, 9.0, 600.0))
        per = T // SEGMENTS
        made = 9.0 * SECONDS_PER_HOUR * (deadline - release) * per * hours
        jobs.append(finetuning_job("B", segments=SEGMENTS, release=per * release, deadline=per * deadline,
                                   tranche_tokens=share[1] * made, modes=b, restart_hours=1.0))
    else:
        b = (mode(1, 4.0, 300.0), mode(2, 7.0, 700.0))
        jobs.append(tiny_job("B", segments=SEGMENTS, modes=b, initial_mode=0,
                             tranche_tokens=share[1] * 7.0 * SECONDS_PER_HOUR * hours * T, restart_hours=1.0))
    inst = dataclasses.replace(tiny_instance(jobs, price, shape, slot_hours=hours, n_gpus=5), horizon_days=days)
    if fleet:
        served = draw(st.lists(st.integers(0, 1), min_size=T, max_size=T))
        served[0] = 1
        inst = dataclasses.replace(inst, inference=(inference(served),),
                                   idle_value_usd_per_gpu_hour=draw(st.floats(0, 3)))
    if kind.startswith("sites"):
        other = draw(st.lists(st.floats(-50, 300), min_size=T, max_size=T))
        network = SiteNetwork(sites=(_site("a", 4, price, shape), _site("b", 2, other, shape)), home=(0, 1),
                              transfer_hours=(3.0, 3.0))
        inst = dataclasses.replace(inst, n_gpus=4, network=network)
        if fleet:
            inst = dataclasses.replace(inst, inference=(dataclasses.replace(inst.inference[0], site=1),))
    return inst


def _unmasked(env: DispatchEnv) -> DispatchEnv:
    """A copy of ``env`` without the completion rule (its mask: the actions within capacity)."""
    copy = deepcopy(env)
    copy.safety_mask = False
    copy.dynamics._mask = None
    return copy


def _key(env: DispatchEnv) -> tuple:
    """Everything a continuation depends on: the slot, who decides, tokens made, and the choices and sites of the
    current and previous segments (the instances' jobs share their segment length)."""
    k = env.slot // env.instance().slots_per_segment(env.instance().jobs[0])
    schedule = env.schedule()
    rows = tuple(tuple(int(x) for x in row[max(k - 1, 0):k + 1]) for row in (*schedule.modes, *schedule.sites))
    return env.slot, env.deciding_job, tuple(np.round(env.tokens(), 6)), rows


def completable(env: DispatchEnv, memo: dict) -> bool:
    """Brute force, independent of the env's rules: some continuation within every pool meets every target."""
    if env.slot >= env.n_slots:
        metrics = simulate(env.instance(), env.schedule()).metrics
        return metrics.feasible
    key = _key(env)
    if key not in memo:
        memo[key] = any(completable(_after(env, a), memo) for a in np.flatnonzero(_unmasked(env).action_masks()))
    return memo[key]


def _after(env: DispatchEnv, action: int) -> DispatchEnv:
    branch = _unmasked(env)
    branch.step(int(action))
    return branch


@pytest.mark.parametrize("days", [1, 2])
@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_masks_against_brute_force_completability(kind, days, data):
    inst = data.draw(small_instance(kind, days))
    actions = ("joint", "per_job") if kind == "day" else ("per_job",)
    for action in actions:
        exact_config = {} if action == "joint" else {"mask_search_nodes": 100_000}
        env, deep = DispatchEnv(case=inst, action=action), DispatchEnv(case=inst, action=action, **exact_config)
        if not completable(_unmasked(env.reset(seed=0) and env), {}):
            return  # no schedule meets the targets: nothing to check
        deep.reset(seed=0)
        rng = np.random.default_rng(days)
        memo: dict = {}
        done = False
        while not done:
            within = np.flatnonzero(_unmasked(env).action_masks())
            exact = np.zeros(env.action_space.n, dtype=bool)
            exact[within] = [completable(_after(env, a), memo) for a in within]
            mask = env.action_masks()
            if env.safety_fallback:  # the rule finds no plan (an episode that starts unsafe): the capacity mask
                assert np.array_equal(np.flatnonzero(mask), within)
            else:
                assert not np.any(mask & ~exact), (action, env.slot)  # every allowed action is completable
            assert np.array_equal(deep.action_masks(), exact), (action, env.slot)
            choice = int(rng.choice(np.flatnonzero(mask)))
            _, _, done, _, _ = env.step(choice)
            deep.step(choice)
        assert simulate(inst, env.schedule()).metrics.feasible


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
@pytest.mark.parametrize("case", CASES)
def test_the_agents_wrapper_on_every_case_under_dayahead(case):
    """The training wrapper (train.py's env) on every case's day-ahead instance: the checker passes and a masked
    episode through it plays the instance to the end with every target met."""
    from agents.ppo import agent_env
    from agents.ppo_config import PPOConfig

    inst = matrix_instance(case, 1, "dayahead")
    config = PPOConfig(env_kwargs={**PPOConfig().env_kwargs, "information": "dayahead"}, forecast_plan=False)
    env = agent_env(config, [inst])
    check_env(env, skip_render_check=True)
    rng = np.random.default_rng(1)
    env.reset(seed=1)
    done = False
    while not done:
        _, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
    assert simulate(inst, env.unwrapped.schedule()).metrics.feasible


def with_synthetic_forecasts(inst: Instance, seed: int) -> Instance:
    """``inst`` with a day-ahead forecast at every site: the truth with noise, two scenarios, a persistence price."""
    from aidc_env.information import Forecast

    rng = np.random.default_rng(seed)
    forecasts = []
    for view in inst.site_views:
        price, shape = view.price_usd_per_mwh, view.renewable_shape
        noisy = price + rng.normal(0, 20, price.size)
        forecasts.append(Forecast(price_usd_per_mwh=noisy, renewable_shape=shape,
                                  price_scenarios_usd_per_mwh=noisy + rng.normal(0, 10, (2, price.size)),
                                  renewable_shape_scenarios=np.clip(shape + rng.normal(0, 0.1, (2, shape.size)), 0, 1),
                                  persistence_price_usd_per_mwh=np.roll(price, 1)))
    return inst.with_forecasts(tuple(forecasts))


@pytest.mark.parametrize("days", [1, 2])
@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=1, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_policy_runs_on_every_kind_under_dayahead(kind, days, data):
    """Every policy of evaluate.py (an untrained PPO model of the instance's action type included) returns a
    schedule within every pool that meets every target (but the baselines'), with one site or two, pre-training only or with fleet workloads, on a day or
    two, under day-ahead information."""
    from agents.policies import POLICY_NAMES, PolicySettings, run_policy
    from agents.ppo import make_model, make_vec_env
    from agents.ppo_config import PPOConfig

    inst = with_synthetic_forecasts(data.draw(small_instance(kind, days)), days)
    env = DispatchEnv(case=inst, action="per_job" if kind != "day" else "joint")
    assume(completable(_unmasked(env.reset(seed=0) and env), {}))
    config = PPOConfig(env_kwargs={**PPOConfig().env_kwargs, "information": "dayahead"}, forecast_plan=False,
                       n_envs=1, n_steps=16, batch_size=16, net_arch=[8])
    vec = make_vec_env(config, [inst])
    settings_ = PolicySettings(information="dayahead", time_limit_s=10, smpc_scenarios=2)
    settings_._model = make_model(config, vec)
    vec.close()
    for name in POLICY_NAMES:
        schedule, _ = run_policy(name, inst, settings_)
        metrics = simulate(inst, schedule).metrics
        assert metrics.capacity_ok, name
        # fixed, greedy and call-rule (fixed without calls) keep the baseline modes (a paused job stays paused);
        # the env's masks guarantee the targets for random and ppo when the episode starts safe
        if name not in ("fixed", "greedy", "call-rule") and (name not in ("random", "ppo") or env.starts_safe):
            assert metrics.tranches_met, name
