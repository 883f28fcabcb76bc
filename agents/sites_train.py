"""PPO on several sites (issue 14 item 5): the agent's view of :class:`aidc_env.env.DispatchEnv` (``action="per_job"``), a
behaviour-cloning warm start on the sites oracle's schedules of the training days, and the schedules of the
policies that evaluate.py compares on held-out days.

- :class:`SitesSteps` appends each site's hourly table of the 24 hours from the current slot
  (:func:`agents.decision_steps.day_forecast_table` of the site's view: day-scaled price, renewable share,
  validity, price scale) to the env's observation; the reward is the env's saving versus the fixed schedule.
- :func:`oracle_demonstrations` converts each training day's oracle schedule (:mod:`agents.sites_oracle`) into
  the env's per-job action sequence and plays it (an action the mask refuses -- the reservation rule is
  sufficient, not necessary -- is replaced by the valid action of the same site with the nearest GPUs);
  :func:`agents.imitation.pretrain` fits the fresh policy and critic to it; PPO then fine-tunes at a low
  learning rate with no entropy bonus (:data:`SITES_DEFAULTS`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from agents.decision_steps import HOURS_AHEAD, SCALED_PRICE_CLIP, day_forecast_table
from agents.imitation import Demonstrations
from agents.ppo_config import PPOConfig
from agents.sites_oracle import OracleDay
from aidc_env.baselines import fixed_schedule, greedy_schedule
from aidc_env.instance import PAUSE, Instance
from aidc_env.env import DispatchEnv

SITES_DEFAULTS: dict[str, Any] = {
    "learning_rate": 3e-5,
    "lr_schedule": "constant",
    "ent_coef": 0.0,
    "gae_lambda": 1.0,
    "n_steps": 512,
    "imitation_epochs": 60,
    "total_timesteps": 900_000,
    "lookahead": 0,
}
"""train.py's defaults for a sites case (flags override them): a warm start by behaviour cloning of the sites oracle's
schedules (the decomposition with migration, :data:`agents.sites_oracle.DEFAULT_METHOD`, on
:data:`ORACLE_TRAIN_DAYS` training days; 60 epochs, :mod:`agents.imitation`), then PPO fine-tuning at 3e-5
(constant) with no entropy bonus, whole-episode Monte Carlo advantages (GAE λ = 1, 512 steps per env and update; an
episode is ~43 agent steps): the fleet's recipe (issue 13, :data:`agents.ppo_config.FLEET_DEFAULTS`), so that PPO
refines the cloned policy rather than unlearning it, for 900,000 agent steps (300,000 until 2026-12-02: with the
teacher solved by the current oracle, seed 0's held-out mean ratio to the oracle went 1.060, 1.059, 1.052, 1.047,
1.041, 1.042, 1.039, 1.038, 1.039 at its checkpoints of 0.1-0.9 M steps; train.py 16.6 min wall with the teacher
cached, load 2-3). The sites env has one reward credit (per closed decision point). Cloning 60 epochs, not 200
(2026-12-02, 125 teacher days, 50 held-out days, seed 0): the clone then matches 87.8 % of its training decisions
instead of 100 %, and PPO fine-tunes it to mean 1.038 / p90 1.066 x the oracle instead of 1.049 / 1.078 (against the
reference of then). Measured: docs/sites.md "Env and PPO"."""

SITES_ENV_KWARGS: dict[str, Any] = {"pause_when_done": False}
"""train.py's env settings for a sites case (recorded in the run's config, so evaluate.py replays a model in the env
it was trained in): a job whose target is met keeps choosing (running at a negative price is cheaper than pausing),
as the oracle may. With the env's default forced pause, the oracle's held-out schedules replayed through the masks
cost up to 1.046 x the oracle (1.000 without it), and PPO with train.py's other defaults measured mean 1.053 / max
1.155 against 1.050 / 1.115 without it (50 held-out days; docs/sites.md "Env and PPO")."""

ORACLE_TRAIN_DAYS = 125
"""Training days whose oracle schedules are cloned (evenly spread over the training split, :func:`agents.days.spread`).
125 = 2 x 63 - 1, so the spread holds the 63 days of the earlier default (the fleet's count, issue 13: 63 days
captured 92 % of the fleet oracle's saving, 21 days 68 %) and their cached answers are reused: spread(days, 2k - 1)
takes every k-spread index plus the midpoints. At 30 s a day (the decomposition does not converge sooner on sites3
at K = 12) the first 63 took 17.6 min with 2 workers at load 5-17, the 62 added 16 min at load 4-7 (2026-12-02);
with 63 days the clone matched 99.8 % of its training decisions but not the held-out days well enough
(docs/sites.md "Env and PPO")."""


# ---------------------------------------------------------------------------------------------- the agent's view


class SitesSteps(gym.Wrapper):
    """The sites env with each site's hourly table appended to its observation; ``action_masks()`` is the env's."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        base: spaces.Box = env.observation_space  # type: ignore[assignment]
        n_sites = self.sites_env.n_sites
        width = 3 * HOURS_AHEAD + 1
        ren_high = self.sites_env.dynamics._ren_high
        low = np.tile(np.concatenate([np.full(HOURS_AHEAD, -SCALED_PRICE_CLIP), np.zeros(2 * HOURS_AHEAD), [0.0]]),
                      n_sites)
        high = np.tile(np.concatenate([np.full(HOURS_AHEAD, SCALED_PRICE_CLIP), np.full(HOURS_AHEAD, ren_high),
                                       np.ones(HOURS_AHEAD), [SCALED_PRICE_CLIP]]), n_sites)
        self._width = width * n_sites
        self.observation_space = spaces.Box(low=np.concatenate([base.low, low]).astype(np.float32),
                                            high=np.concatenate([base.high, high]).astype(np.float32),
                                            dtype=np.float32)
        self._tables: dict[str, np.ndarray] = {}
        self._table = np.zeros((0, 0), dtype=np.float32)

    @property
    def sites_env(self) -> DispatchEnv:
        return self.env.unwrapped  # type: ignore[return-value]

    def action_masks(self) -> np.ndarray:
        return self.sites_env.action_masks()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        inst = self.sites_env.instance()
        table = self._tables.get(inst.day)
        if table is None:
            table = self._tables[inst.day] = np.concatenate(
                [day_forecast_table(view, "perfect") for view in inst.site_views], axis=1)
        self._table = table
        return self._observation(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._observation(obs), reward, terminated, truncated, info

    def _observation(self, obs: np.ndarray) -> np.ndarray:
        high = self.observation_space.high[obs.size:]
        return np.concatenate([obs, np.minimum(self._table[self.sites_env.slot], high)]).astype(np.float32)


def sites_env(config: PPOConfig, instances: Sequence[Instance]) -> SitesSteps:
    """The env the sites agent acts in (the reward: saving versus fixed, in ``reward_scale_usd`` units)."""
    kwargs = config.behaviour_env_kwargs()
    env = DispatchEnv(case=list(instances), days=[inst.day for inst in instances], action="per_job",
                           mask_search_nodes=1, lookahead=int(kwargs.get("lookahead", 0)), reward_scale=config.reward_scale_usd,
                           reward_baseline="fixed", safety_mask=bool(kwargs.get("safety_mask", True)),
                           pause_when_done=bool(kwargs.get("pause_when_done", True)))
    return SitesSteps(env)


def make_sites_vec_env(config: PPOConfig, instances: Sequence[Instance]):
    """``n_envs`` training envs on the instances (env i seeded with seed + i)."""
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    instances = list(instances)

    def thunk() -> gym.Env:
        import torch

        torch.set_num_threads(1)
        return Monitor(sites_env(config, instances))

    thunks = [thunk for _ in range(config.n_envs)]
    vec = (SubprocVecEnv(thunks, start_method="fork") if config.vec_env == "subproc" and config.n_envs > 1
           else DummyVecEnv(thunks))
    vec.seed(config.seed)
    return vec


# ---------------------------------------------------------------------------------------------- demonstrations


def oracle_actions(env: DispatchEnv, schedule: Sequence[Sequence[int]], sites: Sequence[Sequence[int]]
                   ) -> tuple[int, bool]:
    """The action of the job deciding now that follows (schedule, sites), and whether the mask allows it.

    A paused segment's site only says where the checkpoint waits, and a move into a pause is free: a pause is
    played at the site of the job's next running segment (the checkpoint travels during the pause, as the
    cheapest schedule does), else at the schedule's site, else where the job is -- the first the mask allows
    (allowed = True). A running choice the mask refuses (the reservation rule is sufficient, not necessary) is
    replaced by the valid running action with the nearest GPUs at the schedule's site, else at the job's current
    site (the move dropped), else anywhere (allowed = False). (Before 2026-12-02 the last resort was the lowest
    valid action, a pause at the first site: replaying the decomposition's schedules of 63 training days through
    the masks then cost median 1.031, p90 1.398, max 3.12 x the oracle.)
    """
    j = env.deciding_job
    assert j is not None
    k = env.slot // env.template.slots_per_segment(env.template.jobs[j])
    s, c = int(sites[j][k]), int(schedule[j][k]) + 1
    mask = env.action_masks()
    if c == 0:
        later = [int(sites[j][i]) for i in range(k + 1, len(schedule[j])) if schedule[j][i] != PAUSE]
        for site in [*later[:1], s, env.dynamics._site[j]]:
            if mask[site * env.n_choices]:
                return site * env.n_choices, True
    action = s * env.n_choices + c
    if mask[action]:
        return action, True
    valid = np.flatnonzero(mask)
    want = int(env.dynamics._gpus_loc[j][c])
    for site in dict.fromkeys([s, env.dynamics._site[j]]):  # the schedule's site, else where the job is (no move)
        here = [int(a) for a in valid if a // env.n_choices == site]
        if c > 0:
            here = [a for a in here if a % env.n_choices > 0] or here  # a running choice stays a running one
        if here:
            return min(here, key=lambda a: abs(int(env.dynamics._gpus_loc[j][a % env.n_choices]) - want)), False
    return min((int(a) for a in valid), key=lambda a: abs(int(env.dynamics._gpus_loc[j][a % env.n_choices]) - want)), False


def oracle_demonstrations(config: PPOConfig, instances: Sequence[Instance], answers: Mapping[str, OracleDay]
                          ) -> tuple[Demonstrations, float]:
    """Play each day's oracle schedule in the training env; every decision recorded (observation, mask, action,
    return to go). Returns the demonstrations and the share of actions the masks allowed as the oracle chose."""
    days = [inst for inst in instances if answers.get(inst.day) and answers[inst.day].schedule is not None]
    env = sites_env(config, days)
    raw = env.sites_env
    observations, masks, actions, returns = [], [], [], []
    followed = total = 0
    for inst in days:
        answer = answers[inst.day]
        obs, _ = env.reset(options={"day": inst.day})
        rewards: list[float] = []
        done = raw.slot >= raw.n_slots
        while not done:
            action, ok = oracle_actions(raw, answer.schedule, answer.sites)  # type: ignore[arg-type]
            followed += ok
            total += 1
            observations.append(obs)
            masks.append(env.action_masks())
            actions.append(action)
            obs, reward, terminated, truncated, _ = env.step(action)
            rewards.append(float(reward))
            done = terminated or truncated
        returns += np.cumsum(rewards[::-1])[::-1].tolist()
    demos = Demonstrations(np.asarray(observations, dtype=np.float32), np.asarray(masks, dtype=bool),
                           np.asarray(actions, dtype=np.int64), np.asarray(returns, dtype=np.float32))
    return demos, (followed / total if total else 0.0)


# ---------------------------------------------------------------------------------------------- policies


def ppo_sites_schedule(model, config: PPOConfig, inst: Instance) -> tuple[list[list[int]], list[list[int]]]:
    """A trained model's (schedule, sites) on one instance: deterministic, masked."""
    env = sites_env(config, [inst])
    expected = model.observation_space.shape
    if env.observation_space.shape != expected or env.action_space.n != model.action_space.n:
        raise ValueError(f"the model was trained on observations {expected} and {model.action_space.n} actions; "
                         f"the instance of {inst.day} gives {env.observation_space.shape} and {env.action_space.n}")
    obs, _ = env.reset(options={"day": inst.day})
    raw = env.sites_env
    done = raw.slot >= raw.n_slots
    while not done:
        action, _ = model.predict(obs, deterministic=True, action_masks=env.action_masks())
        obs, _, terminated, truncated, _ = env.step(int(action))
        done = terminated or truncated
    schedule = raw.schedule()
    return schedule.mode_lists(), schedule.site_lists()


def home_sites(inst: Instance) -> list[list[int]]:
    """Every job at its home site in every segment."""
    return [[inst.home_sites[j]] * job.segments for j, job in enumerate(inst.jobs)]


def fixed_sites_schedule(inst: Instance) -> tuple[list[list[int]], list[list[int]]]:
    """Every job in its baseline mode at its home site (the reward's baseline)."""
    return fixed_schedule(inst), home_sites(inst)


def greedy_sites_schedule(inst: Instance) -> tuple[list[list[int]], list[list[int]]]:
    """The day model's greedy rule at each site for the jobs at home there (no migration): per site, the greedy
    schedule of the site's one-site view with only its home jobs."""
    schedule: list[list[int]] = [[PAUSE] * job.segments for job in inst.jobs]
    for s, view in enumerate(inst.site_views):
        members = [j for j in range(len(inst.jobs)) if inst.home_sites[j] == s]
        if not members:
            continue
        sub = dataclasses.replace(view, jobs=tuple(inst.jobs[j] for j in members))
        for j, row in zip(members, greedy_schedule(sub), strict=True):
            schedule[j] = list(row)
    return schedule, home_sites(inst)


__all__ = ["ORACLE_TRAIN_DAYS", "SITES_DEFAULTS", "SITES_ENV_KWARGS", "SitesSteps", "fixed_sites_schedule",
           "greedy_sites_schedule", "home_sites", "make_sites_vec_env", "oracle_actions", "oracle_demonstrations", "ppo_sites_schedule",
           "sites_env"]
