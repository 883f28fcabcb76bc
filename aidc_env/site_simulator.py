"""The simulator of several sites (DESIGN §9 "Sites"): per-site load, capacity and cost, jobs that move at checkpoints.

:func:`simulate_sites` scores a sites schedule -- per job and segment a choice (mode or ``PAUSE``, as
:func:`aidc_env.simulator.simulate` reads it) and a site (:func:`aidc_env.sites.validate_sites`) -- with the
simulator's own functions applied to each site's one-site view (``Instance.site_views``): the facility load of
the GPUs and power of the jobs at that site (:func:`~aidc_env.simulator.facility_load_mw`, idle GPUs of that
site's pool at that site's idle power), renewable first against that site's plant, that site's price
(:func:`~aidc_env.simulator.energy_accounting`). Totals are the sums over the sites; ``sites`` holds each site's
energy figures and its own capacity check.

Tokens: a running segment makes tokens for its productive hours, H − τ_j after a (re)start − the transfer time
after a move (:mod:`aidc_env.sites`). A (re)start is a change of (mode, site) from the previous segment (from
(initial mode, home site) before segment 0), pauses included, exactly the day model's rule with the site added.
With one site (an instance without a network) every number equals :func:`~aidc_env.simulator.simulate`'s, bit
for bit (a test).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from aidc_env.errors import CliParser, require
from aidc_env.instance import PAUSE, Instance, Job, load_instance
from aidc_env.io import dumps_json, read_json_file
from aidc_env.simulator import (
    DayMetrics,
    EnergyMetrics,
    JobMetrics,
    Metrics,
    _day_segments,
    _reaches,
    _tokens,
    energy_accounting,
    energy_totals,
    facility_load_mw,
    format_metrics,
    read_schedule,
    segment_productive_hours,
    slot_choices,
    switches,
    validate_schedule,
)
from aidc_env.simulator import main as simulator_main
from aidc_env.sites import SiteNetwork, moves, validate_sites

_ADDITIVE = ("operating_cost_usd", "grid_cost_usd", "renewable_cost_usd", "curtailment_penalty_usd",
             "decision_cost_usd", "load_energy_mwh", "grid_energy_mwh", "renewable_available_mwh",
             "renewable_used_mwh", "curtailment_mwh")


@dataclass(frozen=True)
class SiteMetrics(EnergyMetrics):
    """One site's energy figures (its price, plant and pool) and its own capacity check."""

    name: str
    peak_gpus: int
    capacity_ok: bool
    capacity_violation_slots: int
    gpu_hours: float
    """GPU-hours of the jobs at this site (transfers included: the destination holds the GPUs)."""


@dataclass(frozen=True)
class JobMoves:
    """Where a job ran and what moving cost it."""

    name: str
    sites: tuple[str, ...]
    """The site of each segment (name)."""
    moves: int
    """Segments whose site differs from the previous one's (the home site before segment 0)."""
    transfer_hours_lost: float
    """Hours of running segments spent copying the checkpoint in (no tokens)."""


@dataclass(frozen=True)
class SitesResult:
    """The score of a sites schedule: totals (``metrics``), per site, per job moves, the schedule and sites."""

    metrics: Metrics
    sites: tuple[SiteMetrics, ...]
    moves: tuple[JobMoves, ...]
    schedule: tuple[np.ndarray, ...]
    site_schedule: tuple[np.ndarray, ...]
    load_mw: np.ndarray
    """(sites, T): each site's facility load."""
    gpus_used: np.ndarray
    """(sites, T): each site's GPUs in use."""

    def to_dict(self) -> dict[str, Any]:
        return {"metrics": self.metrics.to_dict(), "sites": {s.name: asdict(s) for s in self.sites},
                "moves": {m.name: asdict(m) for m in self.moves},
                "schedule": [row.tolist() for row in self.schedule],
                "site_schedule": [row.tolist() for row in self.site_schedule]}


def job_tokens_hours(inst: Instance, network_home: int, transfer_h: float, job: Job, choices: np.ndarray,
                     sites: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(restarted, moved into a running segment, productive hours) per segment of one job."""
    running = choices != PAUSE
    previous_choice = np.concatenate(([job.initial_mode], choices[:-1]))
    previous_site = np.concatenate(([network_home], sites[:-1]))
    restarted = running & ((choices != previous_choice) | (sites != previous_site))
    moved = running & moves(network_home, sites)
    productive = segment_productive_hours(inst, job, restarted)
    if moved.any():
        productive = productive - transfer_h * moved
    return restarted, moved, np.where(running, productive, 0.0)


def simulate_sites(inst: Instance, schedule: Sequence[Sequence[int]] | Mapping[str, Sequence[int]],
                   sites: Sequence[Sequence[int | str]] | Mapping[str, Sequence[int | str]] | None = None
                   ) -> SitesResult:
    """Score a sites schedule exactly; ``sites`` None keeps every job at its home site. Breaches are reported."""
    choices = validate_schedule(inst, schedule)
    network = inst.network if inst.network is not None else SiteNetwork(
        sites=inst.sites, home=(0,) * len(inst.jobs), transfer_hours=(0.0,) * len(inst.jobs))
    names = [job.name for job in inst.jobs]
    where = validate_sites(network, names, [job.segments for job in inst.jobs], sites)
    n_sites, T, D = len(network.sites), inst.slots, inst.horizon_days
    gpus = np.zeros((n_sites, T), dtype=np.int64)
    it_kw = np.zeros((n_sites, T))
    job_metrics, job_moves = [], []
    for j, (job, arr, at) in enumerate(zip(inst.jobs, choices, where, strict=True)):
        per_slot = slot_choices(inst, job, arr)
        site_slot = np.repeat(at, inst.slots_per_segment(job))
        running_slot = per_slot != PAUSE
        for s in range(n_sites):
            mask = running_slot & (site_slot == s)
            gpus[s] += np.where(mask, job.gpus_by_choice[per_slot], 0)
            it_kw[s] += np.where(mask, job.it_power_kw_by_choice[per_slot], 0.0)
        restarted, moved, productive_h = job_tokens_hours(inst, network.home[j], network.transfer_hours[j], job, arr,
                                                          at)
        running = arr != PAUSE
        tokens = _tokens(job, arr, running, productive_h)
        by_day = (tokens,) if D == 1 else tuple(
            _tokens(job, arr[d], running[d], productive_h[d]) for d in _day_segments(inst, job))
        daily_min = inst.daily_min_tokens(job)
        minimums_met = all(_reaches(x, daily_min) for x in by_day)
        job_metrics.append(JobMetrics(
            name=job.name, tokens=tokens, tranche_tokens=job.tranche_tokens,
            completion=tokens / job.tranche_tokens if job.tranche_tokens > 0 else 1.0,
            tranche_met=_reaches(tokens, job.tranche_tokens) and minimums_met,
            modes_used=int(np.unique(arr[running]).size), switches=int(switches(job, arr).sum()),
            restarts=int(restarted.sum()), running_hours=float(running.sum() * inst.segment_hours(job)),
            gpu_hours=float(np.sum(job.gpus_by_choice[per_slot]) * inst.slot_hours),
            it_energy_mwh=float(np.sum(job.it_power_kw_by_choice[per_slot]) * inst.slot_hours / 1000.0),
            tokens_by_day=by_day, daily_min_tokens=daily_min, daily_minimums_met=minimums_met, kind=job.kind,
            release_slot=0, deadline_slot=T))
        job_moves.append(JobMoves(name=job.name, sites=tuple(network.sites[s].name for s in at),
                                  moves=int(moves(network.home[j], at).sum()),
                                  transfer_hours_lost=float(network.transfer_hours[j] * moved.sum())))
    site_metrics, loads, energies, flows_all = [], [], [], []
    for s, view in enumerate(inst.site_views):
        load = facility_load_mw(view, gpus[s], it_kw[s])
        energy, flows = energy_accounting(view, load)
        over = gpus[s] > view.n_gpus
        site_metrics.append(SiteMetrics(**energy, name=network.sites[s].name, peak_gpus=int(gpus[s].max()),
                                        capacity_ok=not bool(over.any()), capacity_violation_slots=int(over.sum()),
                                        gpu_hours=float(gpus[s].sum() * inst.slot_hours)))
        loads.append(load)
        energies.append(energy)
        flows_all.append(flows)
    load_all = np.array(loads)
    totals = _sum_energy(energies, load_all, np.array([f[1] for f in flows_all]), inst.slot_hours)
    days = []
    for d, day in enumerate(inst.days):
        slots = inst.day_slots(d)
        per_site = [energy_totals(view, loads[s], flows_all[s], slots) for s, view in enumerate(inst.site_views)]
        tokens_today = {m.name: m.tokens_by_day[d] for m in job_metrics}
        days.append(DayMetrics(
            day=day, **_sum_energy(per_site, load_all[:, slots], np.array([f[1][slots] for f in flows_all]),
                                   inst.slot_hours),
            tokens=tokens_today,
            daily_minimums_met=all(_reaches(tokens_today[job.name], inst.daily_min_tokens(job)) for job in inst.jobs)))
    capacity_ok = all(m.capacity_ok for m in site_metrics)
    tranches_met = all(m.tranche_met for m in job_metrics)
    metrics = Metrics(
        **totals, peak_gpus=int(gpus.sum(axis=0).max()), capacity_ok=capacity_ok,
        capacity_violation_slots=int(sum(m.capacity_violation_slots for m in site_metrics)),
        tranches_met=tranches_met, completion=min(m.completion for m in job_metrics), jobs=tuple(job_metrics),
        days=tuple(days), idle_gpu_hours=float(sum(np.maximum(v.n_gpus - gpus[s], 0).sum()
                                                   for s, v in enumerate(inst.site_views)) * inst.slot_hours),
        objective_usd=totals["operating_cost_usd"], feasible=capacity_ok and tranches_met)
    return SitesResult(metrics=metrics, sites=tuple(site_metrics), moves=tuple(job_moves), schedule=choices,
                       site_schedule=where, load_mw=load_all, gpus_used=gpus)


def _sum_energy(per_site: Sequence[dict[str, float]], load_mw: np.ndarray, grid_mw: np.ndarray,
                slot_hours: float) -> dict[str, float]:
    """The energy figures of several sites together: sums, the green share of the sums, the peaks of the sums.
    With one site, that site's figures unchanged."""
    if len(per_site) == 1:
        return dict(per_site[0])
    out = {key: float(sum(e[key] for e in per_site)) for key in _ADDITIVE}
    out["green_share"] = out["renewable_used_mwh"] / out["load_energy_mwh"] if out["load_energy_mwh"] > 0 else 0.0
    out["peak_load_mw"] = float(load_mw.sum(axis=0).max())
    out["peak_grid_mw"] = float(grid_mw.sum(axis=0).max())
    return out


def format_sites(result: SitesResult) -> str:
    """Text lines of the per-site figures and the jobs' moves (after ``format_metrics`` of the totals)."""
    lines = []
    for m in result.sites:
        lines.append(f"  site {m.name}: operating cost ${m.operating_cost_usd:,.2f}, load {m.load_energy_mwh:.3f} MWh, "
                     f"renewable used {m.renewable_used_mwh:.3f} of {m.renewable_available_mwh:.3f} MWh, peak "
                     f"{m.peak_gpus} GPUs ({'within' if m.capacity_ok else 'OVER'} capacity)")
    for mv in result.moves:
        lines.append(f"  {mv.name}: {mv.moves} moves, {mv.transfer_hours_lost:.3f} h transferring; sites "
                     f"{' '.join(mv.sites)}")
    return "\n".join(lines)


def read_sites(path: str, inst: Instance) -> Any:
    """The ``sites`` entry of a schedule JSON (an oracle output or ``{"schedule": ..., "sites": ...}``); None if
    absent (every job at its home site)."""
    data = read_json_file(path, "schedule")
    if not isinstance(data, Mapping) or "sites" not in data:
        return None
    sites = data["sites"]
    require(isinstance(sites, (list, Mapping)), "sites", "must be a list per job or an object job name -> list")
    require(inst.has_sites or sites is None, "sites", "the instance has one site: give no sites entry")
    return sites


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m aidc_env.simulate``: the one-site simulator's command line, and the sites one for an instance with
    several sites (the schedule file then may hold ``"sites"``: per job, a site index or name per segment)."""
    parser = CliParser(prog="python -m aidc_env.simulate", description="Score any schedule of an instance with the "
                       "simulator. The schedule gives, per job and per checkpoint segment, a mode index or -1 for "
                       "pause; for an instance with several sites, the file's 'sites' gives each segment's site.")
    parser.add_argument("--instance", required=True, help="instance JSON (python -m aidc_env.case --json)")
    parser.add_argument("--schedule", required=True, help='schedule JSON: [[...], ...], {"LLM-A": [...], ...}, or an '
                        'oracle output; {"schedule": ..., "sites": ...} for sites')
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    parser.add_argument("--flows", action="store_true", help="with --json, include the per-slot flows")
    args = parser.parse_args(argv)
    inst = load_instance(args.instance)
    if not inst.has_sites:
        return simulator_main(argv)
    result = simulate_sites(inst, read_schedule(args.schedule, inst), read_sites(args.schedule, inst))
    if args.json:
        out = result.to_dict()
        if args.flows:
            out["flows"] = {"load_mw": result.load_mw.tolist(), "gpus_used": result.gpus_used.tolist()}
        print(dumps_json(out, indent=1))
    else:
        print(format_metrics(result.metrics) + "\n" + format_sites(result))
    return 0
