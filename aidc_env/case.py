"""Cases (TOML files), and building instances from a case and a profile source.

A :class:`Case` is what a case file says: the GPU pool, the facility, the energy contract and the
jobs (model, checkpoint segments, restart time, baseline mode, tranche). The file's form and the rules between its
fields are declared by :class:`aidc_env.schema.CaseDocument`; :func:`build_instance` resolves a case on one day of a
profile source -- or on ``horizon_days`` consecutive days -- into an :class:`~aidc_env.instance.Instance` (see
:mod:`aidc_env.instance` for the horizon and the exchange format): every parameter, each job's Pareto modes and the
price, renewable shape and renewable availability per slot. ``python -m aidc_env.case --case 2048 --json`` prints
one.

Units: power in kW (per GPU, per mode) or MW (facility), energy in MWh, prices in $/MWh,
time in hours unless the name says otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from aidc_env.calls import with_calls
from aidc_env.coincident import load_coincident_peak, on_days
from aidc_env.errors import CliParser, InputError, is_integer, require, run_cli
from aidc_env.grid import FLEX_TIER_LOSS
from aidc_env.instance import DEFAULT_MIN_DAILY_SHARE, MINUTES_PER_HOUR, PAUSE, SECONDS_PER_HOUR, Instance, Job
from aidc_env.io import atomic_write_text, check_output_file, read_input_text, safe_name
from aidc_env.modes import Mode, ModeParams, generate_modes
from aidc_env.power_caps import CURVES, cap_curve
from aidc_env.tariffs import load_tariff
from aidc_env.profiles import HOURS_PER_DAY, ProfileSet, hourly_to_slots, load_profiles
from aidc_env.schema import CaseDocument, Energy, Facility, InferenceSpec, JobSpec, SiteSpec, validate
from aidc_env.schema.case import CallSpec, PowerCaps
from aidc_env.site_profiles import SiteProfileSet, load_site_profiles
from aidc_env.sites import DEFAULT_LINK_GBPS, Site, SiteNetwork, transfer_hours
from aidc_env.workloads import (BUNDLED_INFERENCE_PROFILE, FINETUNING, Inference, gpus_for_share,
                                inference_demand_share, load_inference_profile)


@dataclass(frozen=True)
class Case:
    """A case file, parsed and validated (see ``aidc_env/cases/2048.toml``); its fields are the file's, the tables
    ``[facility]``, ``[energy]`` and ``[migration]`` flattened (:meth:`to_document` gives the file's form back)."""

    name: str
    n_gpus: int
    jobs: tuple[JobSpec, ...]
    day: str
    """Reference day (YYYY-MM-DD) used when no day is given."""
    slots: int = 96
    """Slots per day."""
    horizon_days: int = 1
    """Consecutive days D an instance spans (one flat time axis of D × ``slots`` slots)."""
    min_daily_share: float = DEFAULT_MIN_DAILY_SHARE
    """Each day must make at least this share of tranche / D tokens of every job (0..1; 1 = a daily
    tranche every day)."""
    pue: float = 1.2
    idle_kw_per_gpu: float = 0.1
    rated_kw_per_gpu: float = 0.5
    renewable_ratio: float = 1.0
    ppa_usd_per_mwh: float = 30.0
    curtailment_penalty_usd_per_mwh: float = 0.0
    renewable_capacity_mw: float | None = None
    """Capacity that normalises solar + wind into a shape; None: the profile source's own."""
    mode_pool_gpus: int | None = None
    """GPU pool that defines the baseline modes and tranches; None: ``n_gpus`` of the case file."""
    mode_params: ModeParams = field(default_factory=ModeParams)
    description: str = ""
    source: str = ""
    inference: tuple[InferenceSpec, ...] = ()
    """Inference services (``[[inference]]``): GPUs per slot from a demand profile, taken from the pool first."""
    idle_value_usd_per_gpu_hour: float = 0.0
    """Value of an idle GPU-hour ($), credited in the objective (``Metrics.objective_usd``)."""
    sites: tuple[SiteSpec, ...] = ()
    """Several data centers (``[[sites]]``, :mod:`aidc_env.sites`); empty: one site, the case's own fields."""
    link_gbps: float = DEFAULT_LINK_GBPS
    """``[migration] link_gbps``: the inter-site bandwidth that sets each job's checkpoint transfer time."""
    training_value_usd_per_gpu_hour: float = 0.0
    """Value of a GPU-hour of pre-training at a job's baseline throughput; tokens short of it are training lost."""
    power_caps: PowerCaps | None = None
    """``[power_caps]``: the GPU power-cap curve schedules may use (:mod:`aidc_env.power_caps`); None: no caps."""
    grid_calls: tuple[CallSpec, ...] = ()
    """``[[grid_calls]]``: calls on every instance of the case (:mod:`aidc_env.calls`)."""
    tariff: str | None = None
    """The utility tariff billing the grid import (a bundled name or a URDB JSON file, :mod:`aidc_env.billing`);
    None: the real-time LMP."""
    coincident_peak: str | None = None
    """A coincident-peak charge on the grid import in the system's monthly peak (a bundled name, e.g. ``ercot-4cp``,
    or a JSON file, :mod:`aidc_env.coincident`), with the tariff or the real-time LMP; None: none."""

    @property
    def slot_hours(self) -> float:
        return HOURS_PER_DAY / self.slots

    def with_overrides(self, *, gpus: int | None = None, segments: int | Sequence[int] | None = None,
                       renewable_ratio: float | None = None, day: str | None = None, **fields: Any) -> Case:
        """A copy with overrides (checked as the case file would be); ``segments`` sets K for every job (or one value
        per job)."""
        for name, value in (("n_gpus", gpus), ("renewable_ratio", renewable_ratio), ("day", day)):
            fields[name] = value if value is not None else fields.get(name)
        changes = {k: v.item() if isinstance(v, np.generic) else v for k, v in fields.items() if v is not None}
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        require(not unknown, ",".join(sorted(unknown)), "unknown case field")
        if isinstance(changes.get("power_caps"), Mapping):  # the [power_caps] table as a mapping
            require(set(changes["power_caps"]) <= set(PowerCaps.model_fields), "power_caps",
                    f"unknown key; known: {', '.join(PowerCaps.model_fields)}")
            changes["power_caps"] = PowerCaps(**changes["power_caps"])
        if self.mode_pool_gpus is None:
            changes.setdefault("mode_pool_gpus", self.n_gpus)
        if segments is not None:
            jobs = changes.get("jobs", self.jobs)  # a jobs override given with segments keeps both
            per_job = [segments] * len(jobs) if is_integer(segments) else list(segments)
            require(len(per_job) == len(jobs), "segments", f"expected {len(jobs)} values")
            changes["jobs"] = tuple(dataclasses.replace(job, segments=int(k) if is_integer(k) else k)
                                    for job, k in zip(jobs, per_job, strict=True))
        case = dataclasses.replace(self, **changes)
        case.validate()
        return case

    def validate(self) -> None:
        """Raise :class:`InputError` naming the first bad field (its path in the case file's form)."""
        validate(CaseDocument, self.to_document(), document="case")

    def to_document(self) -> dict[str, Any]:
        """The case in the form of its file (a TOML table), as :class:`~aidc_env.schema.CaseDocument` reads it."""
        def table(keys: Any) -> dict[str, Any]:
            return {key: getattr(self, key) for key in keys}

        return {**table(("name", "description", "slots", "day", "horizon_days", "min_daily_share", "mode_pool_gpus",
                         "idle_value_usd_per_gpu_hour", "training_value_usd_per_gpu_hour")), "gpus": self.n_gpus,
                **({} if self.power_caps is None else {"power_caps": dict(self.power_caps)}),
                **({} if self.tariff is None else {"tariff": self.tariff}),
                **({} if self.coincident_peak is None else {"coincident_peak": self.coincident_peak}),
                "facility": table(Facility.model_fields), "energy": table(Energy.model_fields),
                "migration": {"link_gbps": self.link_gbps}, "modes": self.mode_params.to_dict(),
                **{name: [dataclasses.asdict(spec) for spec in getattr(self, name)]
                   for name in ("jobs", "inference", "sites", "grid_calls")}}


# --------------------------------------------------------------------------------------------- loading


def bundled_cases() -> list[str]:
    """Names of the cases shipped with the package."""
    folder = resources.files("aidc_env") / "cases"
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_case(name_or_path: str | Path | Case) -> Case:
    """A bundled case by name (``"2048"``) or a TOML file path; validated."""
    if isinstance(name_or_path, Case):
        return name_or_path
    text_source = str(name_or_path)
    path = Path(text_source)
    if path.suffix == ".toml" or path.exists():
        require(path.exists(), "case", f"no case file {text_source}")
        text = read_input_text(path, "case")
    else:
        resource = resources.files("aidc_env") / "cases" / f"{text_source}.toml"
        if not resource.is_file():
            raise InputError("case", f"unknown case {text_source!r}; bundled cases: {', '.join(bundled_cases())}")
        text = resource.read_text()
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as err:  # ValueError: an integer of more than 4300 digits
        raise InputError("case", f"malformed TOML in {text_source}: {err}") from None
    except RecursionError:
        raise InputError("case", f"malformed TOML in {text_source}: nested too deeply") from None
    return case_from_dict(data, source=text_source)


def case_from_dict(data: Mapping[str, Any], source: str = "") -> Case:
    """Parse a case table (as read from TOML), validated by :class:`~aidc_env.schema.CaseDocument`."""
    doc = validate(CaseDocument, data, document="case")
    return Case(name=doc.name if doc.name is not None else safe_name(Path(source).stem) if source else "case",
                description=doc.description, n_gpus=doc.gpus, slots=doc.slots, day=doc.day,
                horizon_days=doc.horizon_days, min_daily_share=doc.min_daily_share, jobs=tuple(doc.jobs),
                mode_pool_gpus=doc.mode_pool_gpus, mode_params=doc.modes, source=source, inference=tuple(doc.inference),
                idle_value_usd_per_gpu_hour=doc.idle_value_usd_per_gpu_hour, sites=tuple(doc.sites),
                link_gbps=DEFAULT_LINK_GBPS if doc.migration.link_gbps is None else doc.migration.link_gbps,
                training_value_usd_per_gpu_hour=doc.training_value_usd_per_gpu_hour, power_caps=doc.power_caps,
                grid_calls=tuple(doc.grid_calls), tariff=doc.tariff, coincident_peak=doc.coincident_peak,
                **dict(doc.facility), **dict(doc.energy))


CASE_LABELS = ("name", "description", "source")
"""Fields of a case that name or describe it and shape none of its instances."""


def case_differences(first: Case, second: Case) -> list[str]:
    """What differs between the instances of two cases, one ``field first -> second`` text each (per job field for
    the jobs); empty if they build the same instances (names and descriptions aside)."""
    def text(value: Any) -> str:
        return f"{value:g}" if isinstance(value, float) else str(value)

    found = []
    if len(first.jobs) != len(second.jobs):
        found.append(f"jobs {len(first.jobs)} -> {len(second.jobs)}")
    else:
        for j, (a, b) in enumerate(zip(first.jobs, second.jobs, strict=True)):
            found += [f"jobs[{j}].{f.name} {text(getattr(a, f.name))} -> {text(getattr(b, f.name))}"
                      for f in dataclasses.fields(JobSpec) if getattr(a, f.name) != getattr(b, f.name)]
    for f in dataclasses.fields(Case):
        if f.name not in CASE_LABELS and f.name != "jobs" and getattr(first, f.name) != getattr(second, f.name):
            a, b = getattr(first, f.name), getattr(second, f.name)
            found.append(f"{f.name} {text(a)} -> {text(b)}" if not isinstance(a, tuple) else f"{f.name} differ")
    return found


def require_one_site_case(case: Case, who: str) -> None:
    """Refuse, with one :class:`InputError` line, a sites case in a command that models one site (``who``)."""
    require(not case.sites, "case", f"{who} models one site (case {case.name!r} has several: use the "
            "sites env aidc_env/SitesDispatch-v0, python -m oracle and python -m aidc_env.simulate)")


def _pick_baseline(job: JobSpec, modes: Sequence[Mode], where: str) -> int:
    if job.baseline_mode is not None:
        for i, mode in enumerate(modes):
            if mode.label == job.baseline_mode:
                return i
        raise InputError(f"{where}.baseline_mode", f"{job.baseline_mode!r} is not a Pareto mode of {job.model}")
    candidates = [i for i, m in enumerate(modes) if m.gpus == job.baseline_gpus]
    require(bool(candidates), f"{where}.baseline_gpus", f"no Pareto mode of {job.model} uses {job.baseline_gpus} GPUs "
            f"(available: {sorted({m.gpus for m in modes})})")
    return max(candidates, key=lambda i: modes[i].tokens_per_s)


def resolve_jobs(case: Case) -> tuple[Job, ...]:
    """Each job's Pareto modes within the case's pool, baseline mode and tranche.

    Baselines and tranches are defined on the case file's own pool (``mode_pool_gpus``), so that a
    GPU-pool sweep keeps the same daily tranches while the modes a smaller pool can host shrink.
    """
    reference_pool = case.mode_pool_gpus or case.n_gpus
    jobs = []
    for j, spec in enumerate(case.jobs):
        where = f"jobs[{j}]"
        try:
            reference_modes = generate_modes(spec.model, max(reference_pool, case.n_gpus), case.mode_params).pareto
        except InputError as err:
            raise InputError(f"{where}.{err.field}", err.message) from None  # e.g. jobs[0].model: unknown model
        require(len(reference_modes) > 0, f"{where}.model", f"{spec.model} has no feasible mode")
        if spec.max_gpus is not None:
            reference_modes = tuple(m for m in reference_modes if m.gpus <= spec.max_gpus)
            require(len(reference_modes) > 0, f"{where}.max_gpus",
                    f"{spec.model} has no mode within {spec.max_gpus} GPUs")
        reference_pareto = [m for m in reference_modes if m.gpus <= reference_pool] or list(reference_modes)
        baseline = reference_pareto[_pick_baseline(spec, reference_pareto, where)]
        hours = HOURS_PER_DAY if spec.baseline_hours is None else spec.baseline_hours
        tranche = spec.tranche_tokens
        if tranche is None:
            tranche = baseline.tokens_per_s * SECONDS_PER_HOUR * hours
        modes = tuple(m for m in reference_modes if m.gpus <= case.n_gpus)
        baseline_index = modes.index(baseline) if baseline in modes else PAUSE
        segment_hours = HOURS_PER_DAY / spec.segments
        finetuning = spec.kind == FINETUNING
        jobs.append(Job(
            name=spec.name, model=spec.model, segments=spec.segments, modes=modes, baseline_mode=baseline_index,
            restart_hours=min(spec.restart_minutes / MINUTES_PER_HOUR, segment_hours),
            initial_mode=PAUSE if finetuning else baseline_index,  # a fine-tuning job starts at its release
            tranche_tokens=float(tranche), kind=spec.kind,
            release_slot=round(spec.release_hour / case.slot_hours) if finetuning else 0,
            deadline_slot=round(spec.deadline_hour / case.slot_hours) if finetuning else None,
            max_throughput_loss=None if spec.flex_tier is None else FLEX_TIER_LOSS[spec.flex_tier]))
    return tuple(jobs)


def build_instance(case: str | Path | Case, day: str | None = None, profiles: ProfileSet | str | Path | None = None, *,
                   horizon_days: int | None = None, min_daily_share: float | None = None, **overrides: Any) -> Instance:
    """Resolve a case on a day (default: the case's reference day) of a profile source.

    ``profiles``: a loaded :class:`ProfileSet`, a dataset name (:mod:`aidc_env.datasets`, e.g. ``"caiso-2023"``),
    a CSV path, or None for the bundled table.
    ``horizon_days``: D consecutive days from ``day`` (default: the case's, 1); the profile source must
    hold all of them (InputError naming the first missing day otherwise). ``min_daily_share``: each day's
    minimum share of tranche / D (default: the case's, 0).
    ``overrides``: ``gpus``, ``segments``, ``renewable_ratio`` or any :class:`Case` field.
    """
    case = _resolved_case(case, day=day, horizon_days=horizon_days, min_daily_share=min_daily_share, **overrides)
    profiles = profiles_for(case, profiles)
    return _instance_on_days(case, case.day, profiles, horizon_jobs(resolve_jobs(case), case.horizon_days))


def build_instances(case: str | Path | Case, days: Sequence[str] | None = None,
                    profiles: ProfileSet | str | Path | None = None, *, horizon_days: int | None = None,
                    min_daily_share: float | None = None, **overrides: Any) -> dict[str, Instance]:
    """One instance per start day; modes are resolved once.

    ``days``: the first day of each instance (default: every day of the profile source that starts
    ``horizon_days`` consecutive complete days; with D = 1, every day). Horizons may overlap.
    """
    case = _resolved_case(case, horizon_days=horizon_days, min_daily_share=min_daily_share, **overrides)
    profiles = profiles_for(case, profiles)
    jobs = horizon_jobs(resolve_jobs(case), case.horizon_days)
    starts = days or profiles.horizon_starts(case.horizon_days)
    return {day: _instance_on_days(case, day, profiles, jobs) for day in starts}


def _resolved_case(case: str | Path | Case, **overrides: Any) -> Case:
    case = load_case(case)
    if any(v is not None for v in overrides.values()):
        case = case.with_overrides(**overrides)
    return case


def horizon_jobs(jobs: tuple[Job, ...], horizon_days: int) -> tuple[Job, ...]:
    """Jobs resolved for a day, stretched over D days: D × the segments and D × the tranche (a fine-tuning
    job keeps its one target and its window, in slots from the start of the horizon)."""
    if horizon_days == 1:
        return jobs
    return tuple(dataclasses.replace(job, segments=job.segments * horizon_days,
                                     tranche_tokens=job.tranche_tokens * (1 if job.is_finetuning else horizon_days))
                 for job in jobs)


def profiles_for(case: Case, profiles: ProfileSet | SiteProfileSet | str | Path | None) -> ProfileSet | SiteProfileSet:
    """The profile source of a case: a :class:`SiteProfileSet` (three price nodes, solar and wind apart) for a
    sites case, else a :class:`ProfileSet`; a loaded set of the wrong kind is refused (one line)."""
    if case.sites:
        if isinstance(profiles, SiteProfileSet):
            return profiles
        require(not isinstance(profiles, ProfileSet), "profiles", "a sites case needs the three price nodes and solar "
                "and wind apart: pass the dataset name or CSV path (or nothing for the bundled days), not a loaded "
                "ProfileSet")
        return load_site_profiles(profiles)
    if isinstance(profiles, ProfileSet):
        return profiles
    require(not isinstance(profiles, SiteProfileSet), "profiles", "a one-site case reads a ProfileSet, not sites'")
    return load_profiles(profiles, renewable_capacity_mw=case.renewable_capacity_mw)


def _site_network(case: Case, jobs: tuple[Job, ...], days: Sequence[Any], profiles: SiteProfileSet) -> SiteNetwork:
    """The case's sites resolved on the days: each site's price node and plant shape per slot."""
    sites = []
    for spec in case.sites:
        def default(name: str, spec: SiteSpec = spec) -> float:
            value = getattr(spec, name)
            return float(getattr(case, name) if value is None else value)

        sites.append(Site(
            name=spec.name, n_gpus=spec.gpus, pue=default("pue"), idle_kw_per_gpu=default("idle_kw_per_gpu"),
            rated_kw_per_gpu=default("rated_kw_per_gpu"), plant=spec.plant, renewable_ratio=float(spec.renewable_ratio),
            ppa_usd_per_mwh=default("ppa_usd_per_mwh"),
            curtailment_penalty_usd_per_mwh=default("curtailment_penalty_usd_per_mwh"), price_node=spec.price_node,
            price_usd_per_mwh=np.concatenate([hourly_to_slots(d.price(spec.price_node), case.slots) for d in days]),
            renewable_shape=np.concatenate([hourly_to_slots(profiles.shape(d, spec.plant), case.slots) for d in days])))
    index = {spec.name: i for i, spec in enumerate(case.sites)}
    home = tuple(index[spec.site] if spec.site is not None else 0 for spec in case.jobs)
    return SiteNetwork(sites=tuple(sites), home=home, link_gbps=float(case.link_gbps),
                       transfer_hours=tuple(transfer_hours(job.model, case.link_gbps) for job in jobs))


def _sites_instance_on_days(case: Case, first_day: str, profiles: SiteProfileSet, jobs: tuple[Job, ...]) -> Instance:
    """A sites instance: the network, and the first site's fields at the top level (see ``Instance.network``)."""
    days = profiles.consecutive_days(first_day, case.horizon_days)
    network = _site_network(case, jobs, days, profiles)
    first = network.sites[0]
    index = {site.name: s for s, site in enumerate(network.sites)}
    inference = tuple(_inference_load(service, first_day, len(days), case.slots, index.get(service.site, 0))
                      for service in case.inference)
    return Instance(case_name=case.name, day=first_day, n_gpus=first.n_gpus, slot_hours=case.slot_hours, pue=first.pue,
                    idle_kw_per_gpu=first.idle_kw_per_gpu, rated_kw_per_gpu=first.rated_kw_per_gpu,
                    renewable_ratio=first.renewable_ratio, ppa_usd_per_mwh=first.ppa_usd_per_mwh,
                    curtailment_penalty_usd_per_mwh=first.curtailment_penalty_usd_per_mwh, renewable_capacity_mw=None,
                    jobs=jobs, price_usd_per_mwh=first.price_usd_per_mwh, renewable_shape=first.renewable_shape,
                    horizon_days=len(days), min_daily_share=case.min_daily_share, network=network, inference=inference,
                    idle_value_usd_per_gpu_hour=float(case.idle_value_usd_per_gpu_hour))


def _inference_load(spec: InferenceSpec, first_day: str, days: int, slots_per_day: int, site: int = 0) -> Inference:
    """An inference service's load over ``days`` local days from ``first_day``, ``slots_per_day`` slots a day, served
    by site index ``site``."""
    share = inference_demand_share(load_inference_profile(spec.profile), first_day, days, slots_per_day,
                                   spec.utc_offset_hours)
    return Inference(name=spec.name, gpus=gpus_for_share(share, spec.peak_gpus), it_kw_per_gpu=spec.it_kw_per_gpu,
                     peak_gpus=spec.peak_gpus, demand_share=share,
                     source=spec.source or f"profile {spec.profile or BUNDLED_INFERENCE_PROFILE}", site=site)


def _instance_on_days(case: Case, first_day: str, profiles: ProfileSet | SiteProfileSet,
                      jobs: tuple[Job, ...]) -> Instance:
    if isinstance(profiles, SiteProfileSet):
        return _grid_side(case, _sites_instance_on_days(case, first_day, profiles, jobs))
    capacity = case.renewable_capacity_mw or profiles.renewable_capacity_mw
    day_profiles = profiles.consecutive_days(first_day, case.horizon_days)
    return _grid_side(case, Instance(
        case_name=case.name, day=first_day, n_gpus=case.n_gpus, slot_hours=case.slot_hours, pue=case.pue,
        idle_kw_per_gpu=case.idle_kw_per_gpu, rated_kw_per_gpu=case.rated_kw_per_gpu,
        renewable_ratio=case.renewable_ratio, ppa_usd_per_mwh=case.ppa_usd_per_mwh,
        curtailment_penalty_usd_per_mwh=case.curtailment_penalty_usd_per_mwh, renewable_capacity_mw=capacity,
        jobs=jobs, horizon_days=len(day_profiles), min_daily_share=case.min_daily_share,
        price_usd_per_mwh=np.concatenate([hourly_to_slots(p.price_usd_per_mwh, case.slots) for p in day_profiles]),
        renewable_shape=np.concatenate([hourly_to_slots(p.renewable_shape(capacity), case.slots)
                                        for p in day_profiles]),
        inference=tuple(_inference_load(service, first_day, len(day_profiles), case.slots)
                        for service in case.inference),
        idle_value_usd_per_gpu_hour=float(case.idle_value_usd_per_gpu_hour)))


def _grid_side(case: Case, inst: Instance) -> Instance:
    """The case's tariff, coincident-peak charge, power caps, training value and grid calls on an instance (the
    instance itself without them). The tariff comes first: it sets the prices a call's baseline schedule is planned
    on. The coincident-peak charge takes the system's peaks of the horizon's months here (:func:`on_days`)."""
    if case.tariff is not None:
        inst = inst.with_tariff(load_tariff(case.tariff))
    if case.coincident_peak is not None:
        peak = on_days(load_coincident_peak(case.coincident_peak), inst.day, inst.horizon_days)
        inst = dataclasses.replace(inst, coincident_peak=peak)
    if case.power_caps is None and not case.grid_calls and case.training_value_usd_per_gpu_hour <= 0:
        return inst
    curve = None if case.power_caps is None else cap_curve(
        case.power_caps.curve, case.power_caps.min_cap_share, case.mode_params.host_power_kw_per_gpu)
    inst = dataclasses.replace(inst, cap_curve=curve,
                               training_value_usd_per_gpu_hour=float(case.training_value_usd_per_gpu_hour))
    return with_calls(inst, case.grid_calls)


# --------------------------------------------------------------------------------------------- CLI


OVERRIDE_ARGUMENTS = ("gpus", "segments", "renewable_ratio", "horizon_days", "min_daily_share")
"""The case-override options of every CLI (``--gpus``, ``--segments``, ``--renewable-ratio``, ``--horizon-days``,
``--min-daily-share``), as Case overrides."""


def add_case_arguments(parser: argparse.ArgumentParser, *, day: bool = True, default_case: str = "2048") -> None:
    """The case options shared by every CLI: case, day (unless ``day=False``), overrides, profiles."""
    parser.add_argument("--case", default=default_case, help="bundled case name or a TOML file (default: %(default)s)")
    if day:
        parser.add_argument("--day", help="day YYYY-MM-DD (default: the case's reference day)")
    parser.add_argument("--gpus", type=int, help="override the GPU pool size N")
    parser.add_argument("--segments", type=int, help="override the checkpoint segments K of every job")
    parser.add_argument("--renewable-ratio", type=float, help="override the renewable-to-AIDC ratio rho")
    parser.add_argument("--profiles", metavar="NAME|PATH", help="dataset name (python -m aidc_env.datasets, e.g. "
                        "caiso-2023) or canonical CAISO-style hourly CSV (default: the bundled days)")
    parser.add_argument("--horizon-days", type=int,
                        help="consecutive days D from --day in one instance (default: the case's, 1)")
    parser.add_argument("--min-daily-share", type=float, help="each day of a horizon makes at least this share (0..1) "
                        "of tranche / D tokens of every job; 1 = a daily tranche every day (default: the case's, 0)")
    parser.add_argument("--power-caps", metavar="CURVE", help="offer GPU power caps on this curve (e.g. a100-dvfs; "
                        "default: the case's [power_caps], if any)")
    parser.add_argument("--tariff", metavar="NAME|FILE", help="bill the grid import by a utility tariff instead of the "
                        "real-time LMP: a bundled name (python -m aidc_env.tariffs --list) or a URDB JSON file; its "
                        "demand charges join the objective (default: the case's tariff, if any)")
    parser.add_argument("--coincident-peak", metavar="NAME|FILE", help="also a coincident-peak transmission charge on "
                        "the import in the system's monthly peak hour: a bundled name (ercot-4cp: ERCOT 4CP on CAISO "
                        "2023 demand) or a JSON file, with the tariff or the real-time LMP (default: the case's, if "
                        "any)")


def case_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The case overrides given on the command line (the options of :func:`add_case_arguments`), None left out."""
    overrides = {name: getattr(args, name) for name in OVERRIDE_ARGUMENTS if getattr(args, name, None) is not None}
    if getattr(args, "power_caps", None) is not None:
        require(args.power_caps in CURVES, "power-caps",
                f"unknown curve {args.power_caps!r}; known: {', '.join(CURVES)}")
        overrides["power_caps"] = {"curve": args.power_caps}  # JSON, as a run's config stores its overrides
    if getattr(args, "tariff", None) is not None:
        load_tariff(args.tariff)  # a bad name or file is refused here, before any work
        overrides["tariff"] = args.tariff
    if getattr(args, "coincident_peak", None) is not None:
        load_coincident_peak(args.coincident_peak)  # a bad name or file is refused here, before any work
        overrides["coincident_peak"] = args.coincident_peak
    return overrides


def instance_from_args(args: argparse.Namespace, profiles: ProfileSet | None = None) -> Instance:
    return build_instance(args.case, day=args.day, profiles=profiles if profiles is not None else args.profiles,
                          **case_overrides(args))


def jobs_table_markdown(inst: Instance) -> str:
    """The instance's jobs (kind, model, baseline mode, Pareto modes, checkpoints, window, target) and its
    inference services as a Markdown table: ``python -m aidc_env.case --case fleet --jobs-table``."""
    lines = ["| job | kind | model | baseline mode | baseline GPUs | Pareto modes (GPUs) | segments K | window (h) "
             "| target (B tokens) |", "|---|---|---|---|---:|---|---:|---|---:|"]
    for job in inst.jobs:
        base = job.modes[job.baseline_mode] if job.baseline_mode != PAUSE else None
        release, deadline = (slot * inst.slot_hours for slot in inst.job_window(job))
        gpus = sorted({m.gpus for m in job.modes})
        lines.append(f"| {job.name} | {job.kind} | {job.model} | {base.label if base else 'none'} | "
                     f"{base.gpus if base else 0:,} | {job.n_modes} ({gpus[0]:,}-{gpus[-1]:,}) | {job.segments} | "
                     f"{release:g}-{deadline:g} | {job.tranche_tokens / 1e9:.3f} |")
    for service in inst.inference:
        lines.append(f"| {service.name} | inference | - | - | {int(service.gpus.min()):,}-{int(service.gpus.max()):,} "
                     f"| peak {service.peak_gpus:,} at {service.it_kw_per_gpu:g} kW/GPU | - | every slot | - |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m aidc_env.case", description="Print the full problem instance of a case on one "
                       "day: every parameter, each job's Pareto modes, and the day's price, renewable shape and "
                       "renewable availability per slot. This JSON is the exchange format read by the oracle, the "
                       "simulator CLI and outside solvers (its schema: python -m aidc_env.schema instance).")
    add_case_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the instance as JSON (default: a summary)")
    parser.add_argument("--out", help="also write the JSON to this file")
    parser.add_argument("--jobs-table", action="store_true",
                        help="print the jobs and inference as a Markdown table (docs/fleet.md)")
    args = parser.parse_args(argv)
    if args.out:
        check_output_file(args.out, "out")
    inst = instance_from_args(args)
    text = inst.to_json(indent=1)
    if args.out:
        atomic_write_text(args.out, text)
    if args.jobs_table:
        print(jobs_table_markdown(inst))
    elif args.json:
        print(text)
    else:
        print(f"case {inst.case_name} on {inst.day}: {inst.n_gpus} GPUs, {inst.slots} slots of "
              f"{inst.slot_hours * MINUTES_PER_HOUR:g} min, rated {inst.rated_facility_mw:.3f} MW, "
              f"rho {inst.renewable_ratio:g}")
        print(f"price ${inst.price_usd_per_mwh.min():.1f}..{inst.price_usd_per_mwh.max():.1f}/MWh, "
              f"renewable {inst.renewable_mw.sum() * inst.slot_hours:.3f} MWh available")
        for site, view in zip(inst.sites if inst.has_sites else (), inst.site_views, strict=False):
            print(f"  site {site.name}: {site.n_gpus} GPUs, {site.price_node} price "
                  f"${site.price_usd_per_mwh.min():.1f}..{site.price_usd_per_mwh.max():.1f}/MWh, {site.plant} plant "
                  f"{site.plant_mw:.3f} MW ({view.renewable_mw.sum() * inst.slot_hours:.3f} MWh available)")
        for job in inst.jobs:
            base = job.modes[job.baseline_mode].label if job.baseline_mode != PAUSE else "none"
            print(f"  {job.name} ({job.model}): {job.n_modes} Pareto modes, K = {job.segments}, "
                  f"baseline {base}, tranche {job.tranche_tokens / 1e9:.3f} B tokens")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
