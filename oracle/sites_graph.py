"""The data of the sites decomposition (:mod:`oracle.sites_cg`): one pool per site, site-indexed job graphs.

The fleet oracle's graphs and pools (:mod:`oracle.fleet_graph`) are generic over pools; with several sites
(DESIGN §9 "Sites", issue 14) each site is a pool and a job's state is a (site, choice) pair, the choice a mode
or PAUSE: the site holding the job's checkpoint during the segment, where it runs if it runs. A path through
the graph is a job's (schedule row, site row); a job is at one site per stage by construction and can change
site only between two stages, i.e. at a checkpoint.

Arcs p = (s', c') → c = (s, m) make the simulator's tokens (:func:`aidc_env.simulator.job_segments`):
a running state makes rate_m × 3600 × (H − τ_j·[restarted] − transfer_j·[moved]) with restarted = (m ≠ c' or
s ≠ s') and moved = s ≠ s'; a pause makes nothing (a move into a paused segment is free: the copy happens
during the pause). The state uses GPUs and adds facility load only in its own site's pool, at that site's PUE
and idle power (:func:`aidc_env.simulator.facility_load_mw` on the site's one-site view).

Variants (the coordination study, docs/sites.md): ``placement="home"`` keeps every job at its home site (no
migration); ``"stay"`` lets each job pick one site for the whole horizon, its checkpoint already there at t = 0
(no transfer); ``"free"`` picks the sites at t = 0 the same way and lets jobs move later (paying transfers);
``"move"`` (the default) starts every job at its home site and lets it move. "stay" and "free" add a virtual
initial state (never allowed in a stage) whose arcs are those of "already at the destination, in the initial
mode"; "stay" forbids cross-site arcs by giving them :data:`NO_ARC_TOKENS` (the label search prunes them: they
can never reach the target).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aidc_env.errors import require
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.simulator import facility_load_mw, segment_productive_hours, slot_decision_cost_usd
from aidc_env.sites import SiteNetwork
from oracle.data import renewable_cost_usd
from oracle.fleet_graph import TARGET_MARGIN, FleetData, JobGraph, Pool

PLACEMENTS = ("move", "home", "stay", "free")
NO_ARC_TOKENS = -1e30
"""Tokens of a forbidden arc (a move under ``placement="stay"``): no path using it reaches a target."""


def network_of(inst: Instance) -> SiteNetwork:
    """The instance's network, or the one implicit site (every job at home, no transfer)."""
    if inst.network is not None:
        return inst.network
    return SiteNetwork(sites=inst.sites, home=(0,) * len(inst.jobs), transfer_hours=(0.0,) * len(inst.jobs))


@dataclass(frozen=True, eq=False)
class SiteJobGraph(JobGraph):
    """A job graph whose states are (site, choice) pairs; ``site_of[state]`` is the state's site (−1: the
    virtual initial state of the "stay"/"free" placements)."""

    site_of: np.ndarray = None  # type: ignore[assignment]

    def site_row(self, path: Sequence[int]) -> list[int]:
        return [int(self.site_of[s]) for s in path]

    def path_of(self, row: Sequence[int], where: Sequence[int]) -> np.ndarray:
        index = {(int(self.site_of[i]), int(c)): i for i, c in enumerate(self.choices)}
        return np.array([index[int(s), int(c)] for c, s in zip(row, where, strict=True)], dtype=np.int64)


def site_job_graph(inst: Instance, j: int, placement: str = "move", allow_pause: bool = True) -> SiteJobGraph:
    """Job j's (site, choice) graph (see the module docstring)."""
    require(placement in PLACEMENTS, "placement", f"must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
    net, views, job = network_of(inst), inst.site_views, inst.jobs[j]
    n_sites = len(net.sites)
    base = np.array(list(range(job.n_modes)) + [PAUSE], dtype=np.int64)
    M = base.size
    virtual = placement in ("stay", "free")
    n = n_sites * M + int(virtual)
    choices = np.concatenate([np.tile(base, n_sites), [job.initial_mode] if virtual else []]).astype(np.int64)
    site_of = np.concatenate([np.repeat(np.arange(n_sites), M), [-1] if virtual else []]).astype(np.int64)
    running = choices != PAUSE
    rate = job.tokens_per_s_by_choice[choices] * SECONDS_PER_HOUR
    hours = float(segment_productive_hours(inst, job, False))
    tau = hours - float(segment_productive_hours(inst, job, True))
    transfer = net.transfer_hours[j]
    prev_c, next_c = choices[:, None], choices[None, :]
    prev_s, next_s = site_of[:, None], site_of[None, :]
    same_site = (prev_s == next_s) | (prev_s < 0)  # the virtual state is "already at the destination"
    restarted = (prev_c != next_c) | ~same_site
    productive = hours - tau * restarted - transfer * ~same_site
    arc = np.where(running[None, :], rate[None, :] * productive, 0.0)
    if placement == "stay":
        arc = np.where(same_site, arc, NO_ARC_TOKENS)
    arc[:, site_of < 0] = NO_ARC_TOKENS  # nothing enters the virtual state
    gpus = np.zeros((n, n_sites), dtype=np.int64)
    load = np.zeros((n, n_sites))
    per = inst.slots_per_segment(job)
    allowed = np.repeat(inst.allowed_segments(job)[:, None], n, axis=1)
    for s, view in enumerate(views):
        mine = site_of == s
        g = job.gpus_by_choice[choices[mine]].astype(np.int64)
        gpus[mine, s] = g
        load[mine, s] = facility_load_mw(view, g, job.it_power_kw_by_choice[choices[mine]]) \
            - facility_load_mw(view, 0, 0.0)
        allowed[:, mine] &= (g <= view.n_gpus)[None, :]
        if placement == "home" and s != net.home[j]:
            allowed[:, mine] = False
    if not allow_pause:
        allowed[:, ~running] = False
    allowed[:, site_of < 0] = False
    if virtual:
        initial = n - 1
    else:
        initial = int(np.flatnonzero((site_of == net.home[j]) & (choices == job.initial_mode))[0])
    target = job.tranche_tokens * (1.0 - TARGET_MARGIN) if job.tranche_tokens > 0 else 0.0
    return SiteJobGraph(name=job.name, stage_slots=np.arange(job.segments + 1) * per, choices=choices,
                        allowed=allowed, initial_state=initial, arc_tokens=arc, target_tokens=float(target),
                        gpus=gpus, load_mw=load, own_usd_per_slot=np.zeros(n), site_of=site_of)


def site_pool(view: Instance, loads: Sequence[np.ndarray], gpus: Sequence[np.ndarray]) -> Pool:
    """One site's pool (its one-site view); ``loads``, ``gpus``: per job, the load and GPUs of each state here."""
    T = view.slots
    base = np.asarray(facility_load_mw(view, np.zeros(T, dtype=np.int64), np.zeros(T)), dtype=float)
    capacity = np.full(T, view.n_gpus, dtype=np.int64)
    per_gpu = max((float(np.max(ld[g > 0] / g[g > 0], initial=0.0)) for ld, g in zip(loads, gpus, strict=True)),
                  default=0.0)
    low = base + sum(float(min(0.0, ld.min(initial=0.0))) for ld in loads)
    most = sum(float(max(0.0, ld.max(initial=0.0))) for ld in loads)
    high = base + np.minimum(most, max(per_gpu, 0.0) * capacity)
    return Pool(name=view.case_name or "site", capacity_gpus=capacity, base_load_mw=base,
                renewable_mw=view.renewable_mw,
                grid_usd_per_mw=slot_decision_cost_usd(view, np.ones(T), np.zeros(T)),
                curtailment_usd_per_mw=slot_decision_cost_usd(view, np.zeros(T), np.ones(T)),
                load_low_mw=low, load_high_mw=high, inst=view)


@dataclass(frozen=True, eq=False)
class SitesData(FleetData):
    """A sites instance as the decomposition sees it: one pool per site, one (site, choice) graph per job."""

    placement: str = "move"

    def site_rows(self, paths: Sequence[Sequence[int]]) -> list[list[int]]:
        return [graph.site_row(path) for graph, path in zip(self.graphs, paths, strict=True)]

    def paths_of(self, schedule: Sequence[Sequence[int]], sites: Sequence[Sequence[int]]) -> list[np.ndarray]:
        return [graph.path_of(row, where) for graph, row, where in zip(self.graphs, schedule, sites, strict=True)]

    def tokens_ok(self, paths: Sequence[Sequence[int]]) -> bool:
        return all(bool(np.all(g.allowed[np.arange(g.n_stages), p])) and g.path_tokens(p) >= g.target_tokens
                   for g, p in zip(self.graphs, paths, strict=True))


def sites_data(inst: Instance, placement: str = "move", allow_pause: bool = True) -> SitesData:
    """The pools and graphs of a sites instance (or of a one-site one: one pool)."""
    require(not inst.has_fleet_workloads, "case", "the sites oracle runs pre-training jobs only")
    require(inst.horizon_days == 1 or inst.min_daily_share == 0, "min_daily_share",
            "the sites decomposition does not model daily minimums over several days: set it to 0")
    graphs = tuple(site_job_graph(inst, j, placement, allow_pause) for j in range(len(inst.jobs)))
    pools = tuple(site_pool(view, [g.load_mw[:, s] for g in graphs], [g.gpus[:, s] for g in graphs])
                  for s, view in enumerate(inst.site_views))
    constant = float(sum(renewable_cost_usd(view) for view in inst.site_views))
    return SitesData(inst=inst, pools=pools, graphs=graphs, constant_usd=constant, placement=placement,
                     slot_hull=True)
