"""Gymnasium environment for several sites: one job's site and mode per agent step (DESIGN §9 "Sites", issue 14).

``gymnasium.make("aidc_env/SitesDispatch-v0", case="sites3")`` (registered on ``import aidc_env``). The action
grows linearly with the sites and the modes: Discrete(S × (max modes + 1)), a site and a local choice (pause or a
mode) of the job deciding now. Every cost comes from the simulator's functions on each site's one-site view, so
that the episode's total equals ``simulate(instance, validate_schedule(instance, env.schedule(), env.sites())).metrics.operating_cost_usd``.
See ``docs/sites.md`` ("Env and PPO").
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from aidc_env.case import Case, build_instances
from aidc_env.env import (
    JobQueueMasks,
    DEFAULT_REWARD_SCALE_USD,
    DEFAULT_TERMINAL_PENALTY_FACTOR,
    check_day,
    episode_days,
    masked_action,
    penalty_usd_per_token,
    reset_day,
)
from aidc_env.errors import is_finite, require
from aidc_env.fleet_plan import FleetPlan
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.observation import (
    DEFAULT_LOOKAHEAD,
    PRICE_OBS_HIGH,
    PRICE_OBS_LOW,
    PROGRESS_OBS_HIGH,
    RATE_RATIO_OBS_HIGH,
    global_table,
    renewable_share_high,
)
from aidc_env.simulator import TRANCHE_TOLERANCE, facility_load_mw, renewable_first, slot_decision_cost_usd
from aidc_env.sites import SiteNetwork

SITES_ENV_ID = "aidc_env/SitesDispatch-v0"
"""Gymnasium id of :class:`SitesDispatchEnv`."""

SITES_JOB_FEATURES = ("progress", "required_rate_ratio", "gpu_share", "mode_index", "segment_left", "deciding")
"""Per-job observation features before the job's site one-hot, in order (see :class:`SitesDispatchEnv`)."""
SITES_CHOICE_FEATURES = ("gpu_share", "coverage", "move")
"""Per-action features of the job deciding now, in order."""
MAX_HOLD_ASSIGNMENTS = 4096
"""The most assignments of the other jobs to hold sites the mask enumerates (S^(J-1); 27 on sites3): beyond it
every job is held where it is (the reservation rule of issue 13 per site)."""
DEFAULT_MASK_SEARCH_NODES = 1
"""States the mask's search visits per choice the reservation rule refuses (0: the rule alone). At 1 a refused
choice is allowed when, after it, the next decision has a choice the rule allows (its plan then completes the
episode): on the decomposition oracle's schedules of 63 training and 50 held-out days of sites3 this refuses 1 of
2,790 and 0 of the held-out choices (the rule alone: 25 and 28; 2026-12-02). Each node costs one evaluation of the
rule, so a larger budget is slower where many choices are refused (masked-random play); docs/sites.md "Env and
PPO"."""
SITES_INFORMATION = ("perfect",)
"""What the sites env can show: the truth of the look-ahead window (sites instances carry no day-ahead forecasts)."""


def network_of(inst: Instance) -> SiteNetwork:
    """The instance's network, or the one implicit site (every job at home 0, no transfer)."""
    if inst.network is not None:
        return inst.network
    return SiteNetwork(sites=inst.sites, home=(0,) * len(inst.jobs), transfer_hours=(0.0,) * len(inst.jobs))


def encode(site: int, choice: int, n_choices: int) -> int:
    """Action of (site index, local choice: 0 pause, i mode i − 1)."""
    return site * n_choices + choice


def decode(action: int, n_choices: int) -> tuple[int, int]:
    """(site index, local choice) of an action."""
    return divmod(int(action), n_choices)


class SitesDispatchEnv(JobQueueMasks, gym.Env):
    """
    ## Description

    Pre-training jobs on several data centers (sites), each with its own GPU pool, facility, renewable plant and
    price node (:mod:`aidc_env.sites`). A job runs at one site at a time; at a checkpoint boundary it may pause,
    resume, change mode or *move* to another site. A move into a running segment makes no token for the job's
    transfer time and then pays its restart τ_j; a move into a paused segment is free (the copy happens during
    the pause). At each decision point (a slot where some job is at a boundary) the jobs at a boundary decide
    **one after the other, one per agent step, in job order**; the others keep their choice. When every job of
    the slot has decided, the env simulates the slots up to the next decision point with the simulator's
    functions, per site, and pays their cost. A job whose target is met (``pause_when_done``) pauses where it is
    without an agent step.

    ## Action Space

    ``Discrete(S · C)`` with S sites and C = max_j M_j + 1: action a = s · C + c is "site s, local choice c"
    (0 = pause with the checkpoint at site s, i = Pareto mode i − 1 at site s); 63 on sites3 (3 × 21).
    :meth:`action_masks` returns the exact mask:

    - **capacity**, per site: the mode's GPUs fit site s's pool in every slot of the segment, beside the GPUs of
      the choices already committed there (jobs mid-segment and jobs that decided earlier this slot); a job can
      only be at one site in a segment (one action), and can change site only here, at its checkpoint;
    - with ``safety_mask`` (default), the **reservation rule** of :mod:`aidc_env.fleet_plan` with holds at any
      site: after the choice, every job holds, from the end of its committed segment to the horizon's end, the
      fewest-GPU mode that still makes its target *at some site* σ_j (at its own site kept, or after τ_j; at
      another site after a move, τ_j + its transfer time lost), and some assignment of the jobs to hold sites
      fits, beside the committed choices, every site's pool in every future slot (:data:`MAX_HOLD_ASSIGNMENTS`
      assignments at most, else each job is held where it is). Sufficient: if the episode starts safe,
      following the mask meets every target and the mask is never empty (the job deciding next can take the mode
      its plan holds at its plan's site; after a move the plan holds it there).
    - a choice the rule refuses is allowed when a depth-first search from the state after it reaches, within
      ``mask_search_nodes`` states (:data:`DEFAULT_MASK_SEARCH_NODES`), a decision with a choice the rule allows
      (the rule's plan then completes the episode; the search tries the choices whose plans are the fewest GPUs
      short first and skips those after which the job could not make its target even alone). Still sufficient;
      exact when the search would find every completion (measured: the oracle's choices all pass but one in
      2,790). If no choice passes (only after an unsafe start), the capacity mask is used and
      ``info["safety_fallback"]`` is set.

    An action outside the mask never raises: the env keeps the job's current site and choice if valid, else takes
    the lowest valid action, and sets ``info["invalid_action"]``.

    ## Observation Space

    ``Box(float32)``: per job, in job order, (6 + S) values: progress (tokens by the end of its committed segment
    / W_j, [0, 4]); required rate ratio ((W_j − X_j)⁺ / seconds left / fastest tokens/s, [0, 10]); GPU share (its
    GPUs / its site's pool); mode index (local choice / M_j); segment left (slots left in its committed segment /
    slots per segment); deciding (1 for the job deciding now); its site (one-hot). Then, per site, the global
    values of :func:`aidc_env.observation.global_table` on the site's view (time of day, price and renewable share
    now and ``lookahead`` slots ahead) and the site's free GPU share at slot t; then per action (3 values): its
    GPUs / the site's pool, its coverage (tokens/s × hours left / missing tokens, [0, 10]; 10 when nothing is
    missing, 0 for a pause) and whether it moves the job. Nothing observed at slot t depends on the truth of
    slots after t + ``lookahead``; the masks do not depend on prices or renewables at all.

    ## Rewards

    When a decision point closes, −(Σ over the slots simulated and the sites of the cost: grid cost + curtailment
    penalty + renewable take-or-pay cost, in $) / ``reward_scale``; other steps pay 0. With ``reward_baseline=
    "fixed"`` the cost of the fixed schedule (every job in its baseline mode at its home site) of the same slots
    is added back. At the last step, minus ``terminal_penalty_factor`` × the most a token could save per missing
    token (reachable only with ``safety_mask=False``). :attr:`objective_usd` equals the simulator's
    ``operating_cost_usd`` of ``env.schedule()`` at ``env.sites()``.

    ## Starting State

    Slot 0 of a day drawn from ``days`` (or ``reset(options={"day": ...})``), each job in its initial mode at its
    home site, no tokens; the first agent step is the first job at slot 0.

    ## Episode End

    ``terminated`` when the last slot is simulated (48 agent steps on sites3: 4 jobs × 12 checkpoints, fewer when
    jobs finish early). Never truncated.

    ## Arguments

    - ``case``: an :class:`~aidc_env.instance.Instance` or instances of one case on several days, or a case name
      (``"sites3"``), TOML path or :class:`~aidc_env.case.Case` (built once for ``profiles``' days).
    - ``overrides``, ``profiles``, ``days``, ``lookahead``, ``reward_scale``, ``safety_mask``, ``pause_when_done``,
      ``terminal_penalty_factor``, ``render_mode``: as in :class:`~aidc_env.fleet_env.FleetDispatchEnv`.
    - ``mask_search_nodes``: the search's budget per refused choice (0: the reservation rule alone).
    - ``information``: ``"perfect"`` only (the truth of the look-ahead window: sites instances carry no forecasts).
    - ``reward_baseline``: None (default) or ``"fixed"``.

    Pre-training jobs only (the sites model has no inference, fine-tuning or idle-GPU value).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, case: str | Path | Case | Instance | Sequence[Instance] = "sites3",
                 overrides: Mapping[str, Any] | None = None, profiles: str | Path | None = None,
                 days: Sequence[str] | None = None, lookahead: int = DEFAULT_LOOKAHEAD, information: str = "perfect",
                 reward_scale: float = DEFAULT_REWARD_SCALE_USD, reward_baseline: str | None = None,
                 safety_mask: bool = True, pause_when_done: bool = True,
                 terminal_penalty_factor: float = DEFAULT_TERMINAL_PENALTY_FACTOR, render_mode: str | None = None,
                 mask_search_nodes: int = DEFAULT_MASK_SEARCH_NODES, **ignored: Any):
        super().__init__()
        require(isinstance(lookahead, (int, np.integer)) and not isinstance(lookahead, bool) and lookahead >= 0,
                "lookahead", f"must be an integer >= 0, got {lookahead!r}")
        require(information in SITES_INFORMATION, "information", "the sites env shows the truth of its look-ahead "
                f"only ('perfect'): sites instances carry no day-ahead forecasts, got {information!r}")
        require(is_finite(reward_scale) and reward_scale > 0, "reward_scale", "must be a number > 0")
        require(is_finite(terminal_penalty_factor) and terminal_penalty_factor >= 0, "terminal_penalty_factor",
                "must be a number >= 0")
        require(isinstance(mask_search_nodes, (int, np.integer)) and not isinstance(mask_search_nodes, bool)
                and mask_search_nodes >= 0, "mask_search_nodes", f"must be an integer >= 0, got {mask_search_nodes!r}")
        self.mask_search_nodes = int(mask_search_nodes)
        require(reward_baseline in (None, "fixed"), "reward_baseline", f"must be None or 'fixed', got "
                f"{reward_baseline!r}")
        require(not ignored.get("forecast_noise"), "forecast_noise", "the sites env has no forecast noise")
        self.render_mode = render_mode
        self.lookahead = int(lookahead)
        self.information = str(information)
        self.reward_scale = float(reward_scale)
        self.reward_baseline = reward_baseline
        self.safety_mask = bool(safety_mask)
        self.pause_when_done = bool(pause_when_done)
        self.terminal_penalty_factor = float(terminal_penalty_factor)
        self._instances = _instances(case, overrides, profiles)
        template = next(iter(self._instances.values()))
        self.days = episode_days(self._instances, days)
        self._template = template
        self._setup_tables(template)
        self._day_cache: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}
        self._inst: Instance | None = None
        self._t = self.n_slots

    # ------------------------------------------------------------------ tables (the same for every day)

    def _setup_tables(self, inst: Instance) -> None:
        jobs = inst.jobs
        net = network_of(inst)
        self.n_jobs = J = len(jobs)
        self.n_sites = S = len(net.sites)
        self.n_slots = T = inst.slots
        self._dt = inst.slot_hours
        self._site_gpus = np.array([s.n_gpus for s in net.sites], dtype=np.int64)
        self._home = list(net.home)
        self._transfer = list(net.transfer_hours)
        self.n_choices = C = max(job.n_modes for job in jobs) + 1
        self.n_actions = A = S * C
        self._sizes = [job.n_modes + 1 for job in jobs]
        local = [np.arange(n) - 1 for n in self._sizes]
        self._gpus_loc = [job.gpus_by_choice[c].astype(np.int64) for job, c in zip(jobs, local, strict=True)]
        self._kw_loc = [job.it_power_kw_by_choice[c].astype(float) for job, c in zip(jobs, local, strict=True)]
        rate3600 = [job.tokens_per_s_by_choice[c] * SECONDS_PER_HOUR for job, c in zip(jobs, local, strict=True)]
        self._sps = [inst.slots_per_segment(job) for job in jobs]
        seg_h = [inst.segment_hours(job) for job in jobs]
        self._seg_keep = [r * h for r, h in zip(rate3600, seg_h, strict=True)]
        self._seg_restart = [r * (h - job.restart_hours) for r, h, job in zip(rate3600, seg_h, jobs, strict=True)]
        self._seg_move = [r * (h - job.restart_hours - tr) for r, h, job, tr
                          in zip(rate3600, seg_h, jobs, self._transfer, strict=True)]
        for arr in (*self._seg_keep, *self._seg_restart, *self._seg_move):
            arr[0] = 0.0  # pause makes nothing
        self._target = [job.tranche_tokens for job in jobs]
        self._max_rate3600 = [float(r.max()) for r in rate3600]
        self._rate_pad = np.zeros((J, C))
        for j in range(J):
            self._rate_pad[j, :self._sizes[j]] = rate3600[j]
        self._plan = FleetPlan(n_gpus=int(self._site_gpus.max()), slot_hours=self._dt, gpus_loc=self._gpus_loc,
                               rate3600_loc=rate3600, release=[0] * J, deadline=[T] * J,
                               restart_hours=[job.restart_hours for job in jobs], tranche_tokens=self._target)
        # The same holds after a move: a job held at another site than its committed segment's loses its
        # transfer time on top of the restart (a move into a running segment).
        self._move_plan = FleetPlan(n_gpus=int(self._site_gpus.max()), slot_hours=self._dt, gpus_loc=self._gpus_loc,
                                    rate3600_loc=rate3600, release=[0] * J, deadline=[T] * J,
                                    restart_hours=[job.restart_hours + tr for job, tr
                                                   in zip(jobs, self._transfer, strict=True)],
                                    tranche_tokens=self._target)
        self._site_plans = S ** max(J - 1, 0) <= MAX_HOLD_ASSIGNMENTS
        boundaries = sorted({s for sps in self._sps for s in range(0, T, sps)}) + [T]
        self._next_boundary = dict(zip(boundaries[:-1], boundaries[1:], strict=True))
        # Per action: its site's pool share (static part of the choice features).
        self._choice_gpu_share = np.zeros((J, S, C), dtype=np.float32)
        for j in range(J):
            for s in range(S):
                self._choice_gpu_share[j, s, :self._sizes[j]] = np.minimum(self._gpus_loc[j] / self._site_gpus[s], 1.0)
        views = inst.site_views
        self._ren_high = max(renewable_share_high(v) for v in views)
        n_global = sum(global_table(v, self.lookahead, 0.0, self._ren_high, np.random.default_rng(0),
                                    "perfect").shape[1] for v in views)
        self._n_job_feats = len(SITES_JOB_FEATURES) + S
        job_high = [PROGRESS_OBS_HIGH, RATE_RATIO_OBS_HIGH, 1.0, 1.0, 1.0, 1.0] + [1.0] * S
        glob_low = np.full(n_global, PRICE_OBS_LOW)
        glob_high = np.full(n_global, max(PRICE_OBS_HIGH, self._ren_high))
        low = np.concatenate([np.zeros(self._n_job_feats * J), glob_low, np.zeros(S), np.zeros(3 * A)])
        high = np.concatenate([job_high * J, glob_high, np.ones(S), np.tile([1.0, RATE_RATIO_OBS_HIGH, 1.0], A)])
        self.observation_space = spaces.Box(low=low.astype(np.float32), high=high.astype(np.float32), dtype=np.float32)
        self.action_space = spaces.Discrete(A)
        self._n_global = n_global

    def instance(self, day: str | None = None) -> Instance:
        """The instance of ``day`` (default: the current episode's)."""
        if day is None:
            require(self._inst is not None, "day", "no episode yet: call reset() or give a day")
            return self._inst  # type: ignore[return-value]
        return self._instances[check_day(self._instances, day)]

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        inst = self.instance(reset_day(self, self.days, options))
        self._inst = inst
        J, S, T = self.n_jobs, self.n_sites, self.n_slots
        self._t = 0
        self._site = list(self._home)
        self._cur = [job.initial_mode + 1 for job in inst.jobs]
        self._end = [0] * J
        self._tokens = [0.0] * J
        self._schedule = [[PAUSE] * job.segments for job in inst.jobs]
        self._sites = [[h] * job.segments for job, h in zip(inst.jobs, self._home, strict=True)]
        self._committed = np.zeros((S, T), dtype=np.int64)
        cached = self._day_cache.get(inst.day)
        if cached is None:
            views = inst.site_views
            table = np.concatenate([global_table(v, self.lookahead, 0.0, self._ren_high, self.np_random, "perfect")
                                    for v in views], axis=1)
            penalty = np.max([penalty_usd_per_token(v, self.terminal_penalty_factor) for v in views], axis=0)
            base = self._fixed_costs(inst) if self.reward_baseline == "fixed" else None
            cached = self._day_cache[inst.day] = (table, penalty, base)
        self._global_obs, self._penalty_per_token, self._baseline = cached
        self.objective_usd = 0.0
        self._fallback = False
        self._mask: np.ndarray | None = None
        self._queue: list[int] = []
        self._k = 0
        self._start_safe = self._plan_assignment() is not None
        paid, base = self._advance(decided=False)
        self._pending_reward = self._reward(paid, base)
        return self._observation(), {"day": inst.day, "slot": self._t, "job": self.deciding_job,
                                     "objective_usd": paid}

    def _reward(self, paid: float, base: float) -> float:
        reward = -paid / self.reward_scale
        if self._baseline is not None:
            reward += base / self.reward_scale
        return reward

    def step(self, action):
        inst = self._inst
        if inst is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._t >= self.n_slots:
            raise gym.error.ResetNeeded("the episode is over: call reset()")
        mask = self._mask if self._mask is not None else self._compute_mask()
        j = self._queue[self._k]
        keep = encode(self._site[j], self._cur[j], self.n_choices)
        a, invalid = masked_action(action, mask, keep)
        fallback = self._fallback
        slot = self._t
        s, c = decode(a, self.n_choices)
        moved = s != self._site[j]
        self._decide(j, s, c)
        self._k += 1
        self._mask = None
        closed = self._k >= len(self._queue)
        paid, base = self._advance(decided=True) if closed else (0.0, 0.0)
        reward = (self._reward(paid, base) if closed else 0.0) + self._pending_reward
        self._pending_reward = 0.0
        terminated = self._t >= self.n_slots
        penalty = 0.0
        if terminated:
            penalty = float(np.sum(self.shortfall_tokens() * self._penalty_per_token))
            reward -= penalty / self.reward_scale
        info = {"day": inst.day, "slot": slot, "job": j, "site": s, "choice": c - 1, "moved": moved,
                "objective_usd": paid, "invalid_action": invalid, "safety_fallback": fallback,
                "terminal_penalty_usd": penalty}
        return self._observation(), reward, terminated, False, info

    def render(self):
        if self.render_mode != "ansi" or self._inst is None:
            return None
        jobs = " ".join(f"{job.name}={c - 1}@{s}" for job, c, s in zip(self._inst.jobs, self._cur, self._site,
                                                                          strict=True))
        return f"{self._inst.day} slot {self._t}/{self.n_slots} job {self.deciding_job}: {jobs}"

    # ------------------------------------------------------------------ public state

    def schedule(self) -> list[list[int]]:
        """Per job, per segment: a mode index or ``PAUSE``."""
        return [list(row) for row in self._schedule]

    def sites(self) -> list[list[int]]:
        """Per job, per segment: the site index (where its checkpoint is)."""
        return [list(row) for row in self._sites]

    def tokens(self) -> np.ndarray:
        return np.array(self._tokens)

    def shortfall_tokens(self) -> np.ndarray:
        tokens, target = np.array(self._tokens), np.array(self._target)
        return np.where(tokens >= target * (1 - TRANCHE_TOLERANCE), 0.0, np.maximum(target - tokens, 0.0))

    def committed_gpus(self) -> np.ndarray:
        """(sites, slots): GPUs of the committed choices."""
        return self._committed.copy()

    def reserved_gpus(self) -> np.ndarray:
        """(sites, slots): GPUs of the committed choices and the held modes of a plan of every job that fits every
        site (the first found; each job held where it is when no plan fits)."""
        t = min(self._t, self.n_slots)
        holds = self._hold_options(self._state())
        where = self._plan_assignment()
        if where is None:
            where = list(self._site)
        reserved = self._committed.copy()
        for i, s in enumerate(where):
            reserved[s, max(self._end[i], t):] += holds[i][s]
        return reserved

    def action_of(self, job: int, site: int, choice: int) -> int:
        """The action of ``job`` taking ``choice`` (a mode index or ``PAUSE``) at ``site``."""
        return encode(site, int(choice) + 1, self.n_choices)

    # ------------------------------------------------------------------ mechanics

    def _decide(self, j: int, s: int, c: int) -> None:
        """Commit site s and local choice c of job j for its segment from the current slot."""
        t = self._t
        prev_s, prev_c = self._site[j], self._cur[j]
        if s != prev_s:
            made = self._seg_move[j][c]
        elif c != prev_c:
            made = self._seg_restart[j][c]
        else:
            made = self._seg_keep[j][c]
        self._tokens[j] += float(made)
        k = t // self._sps[j]
        self._schedule[j][k] = c - 1
        self._sites[j][k] = s
        self._site[j], self._cur[j] = s, c
        end = t + self._sps[j]
        self._end[j] = end
        g = int(self._gpus_loc[j][c])
        if g:
            self._committed[s, t:end] += g

    def _forced(self, j: int) -> bool:
        return self.pause_when_done and self._tokens[j] >= self._target[j] * (1 - TRANCHE_TOLERANCE)

    def _advance(self, decided: bool) -> tuple[float, float]:
        """Simulate slot blocks from slot t until a decision point asks the agent or the episode ends; returns the
        cost paid and the fixed schedule's cost of the same slots."""
        paid = base = 0.0
        T = self.n_slots
        while True:
            t = self._t
            if decided:
                nxt = self._next_boundary[t]
                paid += float(self._simulate_slots(t, nxt).sum())
                if self._baseline is not None:
                    base += float(self._baseline[t:nxt].sum())
                self._t = t = nxt
                if t >= T:
                    self._queue = []
                    break
            queue = []
            for j in range(self.n_jobs):
                if t % self._sps[j] == 0:
                    if self._forced(j):
                        self._decide(j, self._site[j], 0)
                    else:
                        queue.append(j)
            self._queue = queue
            self._k = 0
            if queue:
                break
            decided = True
        self._mask = None
        self.objective_usd += paid
        return paid, base

    def _simulate_slots(self, t0: int, t1: int) -> np.ndarray:
        """The cost of slots [t0, t1) with every job's committed site and choice, per slot: the simulator's
        functions on each site's view (facility load, renewable first, price, take-or-pay)."""
        inst = self._inst
        sl = slice(t0, t1)
        n = t1 - t0
        total = np.zeros(n)
        gpus = np.zeros(self.n_sites, dtype=np.int64)
        kw = np.zeros(self.n_sites)
        for j in range(self.n_jobs):
            c = self._cur[j]
            gpus[self._site[j]] += self._gpus_loc[j][c]
            kw[self._site[j]] += self._kw_loc[j][c]
        for s, view in enumerate(inst.site_views):
            load = facility_load_mw(view, np.full(n, gpus[s]), np.full(n, kw[s]))
            renewable = view.renewable_mw[sl]
            _, grid, curtailment = renewable_first(load, renewable)
            total += slot_decision_cost_usd(view, grid, curtailment, sl) + renewable * view.slot_hours * view.ppa_usd_per_mwh
        return total

    def _fixed_costs(self, inst: Instance) -> np.ndarray:
        """Per-slot cost of the fixed schedule (baseline modes at the home sites): the simulator's replay."""
        from aidc_env.baselines import fixed_schedule
        from aidc_env.simulator import simulate

        result = simulate(inst, fixed_schedule(inst))
        total = np.zeros(inst.slots)
        for s, view in enumerate(inst.site_views):
            renewable = view.renewable_mw
            _, grid, curtailment = renewable_first(result.site_flows[s].load_mw, renewable)
            total += slot_decision_cost_usd(view, grid, curtailment) + renewable * view.slot_hours * view.ppa_usd_per_mwh
        return total

    def _state(self) -> _PlanState:
        """The env's state as the mask reads it."""
        return _PlanState(self._t, tuple(self._queue[self._k:]), list(self._site), list(self._cur), list(self._end),
                          list(self._tokens), self._committed)

    def _hold_options(self, st: _PlanState) -> list[list[int]]:
        """Per job, per site σ: the GPUs of the fewest-GPU mode that makes its missing tokens when held at σ from
        the end of its committed segment to the horizon's end (at its own site: kept without a restart when its
        committed choice makes it, else after τ_j; elsewhere: after a move, τ_j + its transfer time)."""
        out = []
        for i in range(self.n_jobs):
            need = self._plan.target_safe[i] - st.tokens[i]
            e, here = st.end[i], st.site[i]
            away = self._move_plan.held_gpus_paused(i, e, need)
            row = [away] * self.n_sites
            row[here] = int(self._plan.held_gpus_of(i, e, need, st.cur[i]))
            out.append(row)
        return out

    def _intervals(self, st: _PlanState, starts: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The slot intervals from the state's slot to the horizon's end cut at ``starts`` (first slots of the
        intervals, and per site and interval the free GPUs beside the committed choices)."""
        t, T = st.t, self.n_slots
        first = np.array(sorted({t, *(int(x) for x in starts if t <= x < T)}), dtype=np.int64)
        stops = np.append(first[1:], T)
        room = np.stack([self._site_gpus - st.committed[:, a:b].max(axis=1) for a, b in zip(first, stops,
                                                                                             strict=True)], axis=1)
        return first, room

    def _other_loads(self, st: _PlanState, jobs: Sequence[int], holds: list[list[int]], first: np.ndarray,
                     room: np.ndarray) -> np.ndarray:
        """(plans, sites, intervals): the GPUs the holds of ``jobs`` take, one row per assignment of the jobs to
        hold sites (every assignment, or each job where it is when there are more than MAX_HOLD_ASSIGNMENTS) that
        fits beside the committed choices."""
        S, Q = self.n_sites, first.size
        loads = np.zeros((1, S, Q), dtype=np.int64)
        eye = np.eye(S, dtype=np.int64)
        for i in jobs:
            active = (first >= st.end[i]).astype(np.int64)
            h = np.asarray(holds[i], dtype=np.int64)
            if not self._site_plans:
                h = np.where(np.arange(S) == st.site[i], h, self._site_gpus.max() + 1)
            contrib = h[:, None, None] * eye[:, :, None] * active[None, None, :]  # (hold site, site, interval)
            # A hold larger than its site's pool is no plan, even one starting at the horizon's end (a target missed).
            contrib[h > self._site_gpus] = room.max() + 1
            loads = (loads[:, None] + contrib[None]).reshape(-1, S, Q)
            loads = loads[(loads <= room[None]).all(axis=(1, 2))]
        return loads

    def _plan_assignment(self) -> list[int] | None:
        """A hold site per job such that the committed choices and the holds fit every site in every slot from
        now on (None: no such plan)."""
        if self._t >= self.n_slots:
            return list(self._site)
        st = self._state()
        holds = self._hold_options(st)
        first, room = self._intervals(st, self._end)
        S = self.n_sites
        for where in itertools.product(range(S), repeat=self.n_jobs):
            if not self._site_plans and list(where) != self._site:
                continue
            load = np.zeros_like(room)
            for i, s in enumerate(where):
                load[s] += holds[i][s] * (first >= self._end[i])
            if np.all(load <= room) and all(holds[i][s] <= self._site_gpus[s] for i, s in enumerate(where)):
                return list(where)
        return None

    def _made(self, st: _PlanState, j: int, s: int) -> np.ndarray:
        """Tokens job j makes in its segment from the state's slot with each local choice at site s."""
        if s != st.site[j]:
            return self._seg_move[j]
        made = self._seg_restart[j].copy()
        made[st.cur[j]] = self._seg_keep[j][st.cur[j]]
        return made

    def _rule(self, st: _PlanState, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For job j deciding in state st, per (site, local choice): whether the capacity allows it, whether the
        reservation rule (holds at any site) allows it, and how many GPUs short its best plan is (0 when allowed);
        also (site, choice, hold site) the job's own holds."""
        t = st.t
        S = self.n_sites
        n = self._sizes[j]
        end = t + self._sps[j]
        g = self._gpus_loc[j]
        cap = g[None, :] <= (self._site_gpus - st.committed[:, t:end].max(axis=1))[:, None]
        base = self._plan.target_safe[j] - st.tokens[j]
        hold = np.empty((S, n, S), dtype=np.int64)  # job j's hold at σ after taking local choice c at site s
        for s in range(S):
            need = base - self._made(st, j, s)
            hold[s] = self._move_plan.held_gpus(j, end, need, False)[:, None]
            hold[s, :, s] = self._plan.held_gpus(j, end, need, True)
        holds = self._hold_options(st)
        others = [i for i in range(self.n_jobs) if i != j]
        first, room = self._intervals(st, [end, *(st.end[i] for i in others)])
        loads = self._other_loads(st, others, holds, first, room)  # (plans, S, Q)
        free = room[None] - loads  # (plans, site, q): what the other jobs' plans leave, never negative
        now = first < end
        # Job j's segment takes site s before its end, its hold site σ after (a hold starting at the horizon's end
        # must still fit σ's pool: 0 GPUs, or no mode makes the target).
        free_now = free[:, :, now].min(axis=2)  # (plans, s)
        free_after = free[:, :, ~now].min(axis=2) if (~now).any() else np.broadcast_to(self._site_gpus, free_now.shape)
        short_now = np.maximum(g[None, None, :] - free_now[:, :, None], 0)  # (plans, s, c)
        short_after = np.maximum(hold[None] - free_after[:, None, None, :], 0)  # (plans, s, c, σ)
        short = short_now[..., None] + short_after
        best = short.min(axis=(0, 3)) if short.size else np.full((S, n), self._site_gpus.max() + 1)
        return cap, best == 0, best, hold

    def _child(self, st: _PlanState, j: int, s: int, c: int) -> _PlanState:
        """The state after job j (the first of the state's queue) takes local choice c at site s: the next job of
        the slot decides, or the next decision point (done jobs paused where they are, as the env does)."""
        t = st.t
        end = t + self._sps[j]
        tokens, site, cur, ends = list(st.tokens), list(st.site), list(st.cur), list(st.end)
        tokens[j] += float(self._made(st, j, s)[c])
        site[j], cur[j], ends[j] = s, c, end
        committed = st.committed
        g = int(self._gpus_loc[j][c])
        if g:
            committed = committed.copy()
            committed[s, t:end] += g
        queue = st.queue[1:]
        while not queue:
            t = self._next_boundary[t]
            if t >= self.n_slots:
                break
            queue = []
            for i in range(self.n_jobs):
                if t % self._sps[i] == 0:
                    if self.pause_when_done and tokens[i] >= self._target[i] * (1 - TRANCHE_TOLERANCE):
                        cur[i], ends[i] = 0, t + self._sps[i]
                    else:
                        queue.append(i)
            queue = tuple(queue)
        return _PlanState(t, tuple(queue), site, cur, ends, tokens, committed)

    def _completable(self, st: _PlanState, budget: list[int]) -> bool:
        """Whether some continuation from st meets every target within every pool: found by a depth-first search
        that stops at a state the reservation rule allows (then the rule's plan completes it); False when the
        search's node budget runs out (the mask stays sufficient)."""
        if st.t >= self.n_slots:
            return all(x >= w * (1 - TRANCHE_TOLERANCE) for x, w in zip(st.tokens, self._target, strict=True))
        budget[0] -= 1
        if budget[0] < 0:
            return False
        j = st.queue[0]
        cap, safe, short, hold = self._rule(st, j)
        if safe.any():
            return True
        alone = (hold <= self._site_gpus[None, None, :]).any(axis=2)  # the job could still finish on its own
        order = np.argsort(np.where(cap & alone, short, np.iinfo(np.int64).max), axis=None, kind="stable")
        for flat in order:
            s, c = divmod(int(flat), short.shape[1])
            if not (cap[s, c] and alone[s, c]):
                break
            if self._completable(self._child(st, j, s, c), budget):
                return True
            if budget[0] < 0:
                return False
        return False

    def _compute_mask(self) -> np.ndarray:
        """The mask of the job deciding now: per-site capacity, then the reservation rule (holds at any site),
        then, for a choice the rule refuses, a bounded search for a continuation that completes the episode."""
        st = self._state()
        j = st.queue[0]
        S, C = self.n_sites, self.n_choices
        n = self._sizes[j]
        mask = np.zeros((S, C), dtype=bool)
        self._fallback = False
        if self.safety_mask:
            cap, safe, _, hold = self._rule(st, j)
            alone = (hold <= self._site_gpus[None, None, :]).any(axis=2)
            if self.mask_search_nodes > 0:
                for s, c in zip(*np.nonzero(cap & alone & ~safe), strict=True):
                    if self._completable(self._child(st, j, int(s), int(c)), [self.mask_search_nodes]):
                        safe[s, c] = True
            if safe.any():
                mask[:, :n] = safe
                self._mask = mask.reshape(-1)
                return self._mask
            self._fallback = True
        else:
            t = st.t
            cap = self._gpus_loc[j][None, :] <= (self._site_gpus
                                                 - st.committed[:, t:t + self._sps[j]].max(axis=1))[:, None]
        mask[:, :n] = cap
        self._mask = mask.reshape(-1)
        return self._mask

    # ------------------------------------------------------------------ observation

    def _observation(self) -> np.ndarray:
        t, T = self._t, self.n_slots
        J, S, C = self.n_jobs, self.n_sites, self.n_choices
        feats = np.zeros((J, self._n_job_feats))
        deciding = self.deciding_job
        for j in range(J):
            W, X = self._target[j], self._tokens[j]
            feats[j, 0] = min(X / W, PROGRESS_OBS_HIGH) if W > 0 else 1.0
            missing = W - X
            seconds = (T - self._end[j]) * self._dt * SECONDS_PER_HOUR
            rate = self._max_rate3600[j] / SECONDS_PER_HOUR
            if missing <= W * TRANCHE_TOLERANCE:
                feats[j, 1] = 0.0
            elif seconds > 0 and rate > 0:
                feats[j, 1] = min(missing / (seconds * rate), RATE_RATIO_OBS_HIGH)
            else:
                feats[j, 1] = RATE_RATIO_OBS_HIGH
            c, s = self._cur[j], self._site[j]
            feats[j, 2] = min(self._gpus_loc[j][c] / self._site_gpus[s], 1.0)
            feats[j, 3] = c / max(self._sizes[j] - 1, 1)
            feats[j, 4] = min(max((self._end[j] - t) / self._sps[j], 0.0), 1.0)
            feats[j, 5] = 1.0 if j == deciding else 0.0
            feats[j, 6 + s] = 1.0
        free = np.ones(S)
        choice = np.zeros((S, C, 3))
        if t < T:
            free = np.maximum(self._site_gpus - self._committed[:, t], 0) / self._site_gpus
        if deciding is not None:
            j = deciding
            choice[:, :, 0] = self._choice_gpu_share[j]
            W = self._target[j]
            missing = W - self._tokens[j]
            n = self._sizes[j]
            if missing <= W * TRANCHE_TOLERANCE:
                choice[:, 1:n, 1] = RATE_RATIO_OBS_HIGH
            else:
                hours = (T - t) * self._dt
                choice[:, :, 1] = np.minimum(self._rate_pad[j] * (hours / missing), RATE_RATIO_OBS_HIGH)[None, :]
            choice[:, :n, 2] = 1.0
            choice[self._site[j], :, 2] = 0.0
        obs = np.concatenate([feats.ravel(), self._global_obs[min(t, T)], free, choice.ravel()])
        return obs.astype(np.float32)


@dataclasses.dataclass(frozen=True)
class _PlanState:
    """What the mask reads of an env state: the slot, the jobs still to decide in it (the first decides now), per
    job its site, local choice, end of its committed segment and tokens, and the committed GPUs (sites, slots)."""

    t: int
    queue: tuple[int, ...]
    site: list[int]
    cur: list[int]
    end: list[int]
    tokens: list[float]
    committed: np.ndarray


def _instances(case: Any, overrides: Mapping[str, Any] | None, profiles: Any) -> dict[str, Instance]:
    """The env's instances by day: the given instance(s), or a case's (built once)."""
    if isinstance(case, Instance) or (isinstance(case, Sequence) and not isinstance(case, str) and len(case) > 0
                                      and all(isinstance(c, Instance) for c in case)):
        require(not overrides, "overrides", "cannot be combined with instances")
        require(profiles is None, "profiles", "cannot be combined with instances")
        instances = [case] if isinstance(case, Instance) else list(case)
    else:
        require(isinstance(case, (str, Path, Case)), "case",
                f"must be a case name, a TOML path, a Case or Instance(s), got {type(case).__name__}")
        instances = list(build_instances(case, profiles=profiles, **dict(overrides or {})).values())
    reference = instances[0]
    require(not reference.has_fleet_workloads, "case", f"{SITES_ENV_ID} runs pre-training jobs only (case "
            f"{reference.case_name!r} has fine-tuning, inference or an idle-GPU value)")
    require(any(job.tranche_tokens > 0 and job.n_modes > 0 for job in reference.jobs), "case",
            "no job has a target to make: the sites env would have no decision")
    by_day: dict[str, Instance] = {}
    shape = (len(reference.site_views), tuple(job.n_modes for job in reference.jobs),
             tuple(job.segments for job in reference.jobs), reference.slots)
    for inst in instances:
        require(inst.day not in by_day, "case", f"two instances for the day {inst.day}")
        require((len(inst.site_views), tuple(job.n_modes for job in inst.jobs), tuple(job.segments for job in inst.jobs),
                 inst.slots) == shape, "case", f"the instance of {inst.day} differs from the first in sites or jobs")
        by_day[inst.day] = inst
    return by_day


__all__ = ["SITES_CHOICE_FEATURES", "SITES_ENV_ID", "SITES_INFORMATION", "SITES_JOB_FEATURES", "SitesDispatchEnv",
           "decode", "encode", "network_of"]
