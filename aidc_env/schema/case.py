"""The schema of a case file (TOML): :class:`CaseDocument`, its jobs, sites and inference services, and the rules
between them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from aidc_env.errors import MAX_MACHINE_INT, InputError, is_integer, number_text, require, require_unique
from aidc_env.grid import FLEX_TIER_LOSS
from aidc_env.hourly import HOURS_PER_DAY
from aidc_env.io import path_component
from aidc_env.limits import MAX_GPUS, MAX_RESTART_MINUTES, MAX_SLOTS_PER_DAY
from aidc_env.modes import ModeParams
from aidc_env.schema.base import (CONFIG, MINUTES_PER_HOUR, Capacity, Cost, Day, Float, Gpus, Horizon, IdleValue, Int,
                                  KwPerGpu, Link, Name, Node, Plant, Pue, Ratio, Share, Str, Table, Tokens, limit)
from aidc_env.workloads import FINETUNING_MAX_GPUS, JOB_KINDS, PRETRAINING

UTC_OFFSETS_HOURS = 14.0
"""Largest |UTC offset| of a local clock (hours): Kiribati's +14, Baker Island's -12."""


@dataclass(frozen=True)
class JobSpec:
    """One pre-training or fine-tuning job as a case file states it (``[[jobs]]``)."""

    __pydantic_config__ = CONFIG
    name: Name
    model: Name
    segments: Annotated[Int, Field(ge=1), limit(MAX_SLOTS_PER_DAY)]
    """Checkpoint segments per day K_j (must divide the slots per day)."""
    restart_minutes: Annotated[Float, Field(ge=0), limit(MAX_RESTART_MINUTES)] = 10.0
    """Time to load a checkpoint after a resume or a mode switch: full power, zero tokens."""
    baseline_gpus: Gpus | None = None
    """Baseline mode by GPU count (the fastest Pareto mode with that many GPUs)."""
    baseline_mode: Str | None = None
    """Baseline mode by label, e.g. ``"tp4-pp4-dp32"`` (wins over ``baseline_gpus``)."""
    tranche_tokens: Tokens | None = None
    """Daily token tranche W_j; default: what the baseline mode trains in ``baseline_hours``. An instance of D
    days targets D × this over its horizon (a fine-tuning job: this once, by its deadline)."""
    kind: Literal[JOB_KINDS] = PRETRAINING
    """``"pretraining"`` or ``"finetuning"`` (:mod:`aidc_env.workloads`)."""
    release_hour: Annotated[Float, Field(ge=0)] = 0.0
    """Fine-tuning: hours from the start of the horizon before which the job may not run (a checkpoint boundary)."""
    deadline_hour: Float | None = None
    """Fine-tuning: hours from the start of the horizon by which the target is due; it may not run after."""
    max_gpus: Gpus | None = None
    """Cap on the job's modes (GPUs); fine-tuning jobs need one, at most ``FINETUNING_MAX_GPUS``."""
    baseline_hours: Annotated[Float, Field(gt=0)] | None = None
    """Default target = the baseline mode's tokens in this many productive hours (default: 24 for pre-training;
    required for fine-tuning unless ``tranche_tokens`` is given)."""
    site: Str | None = None
    """Sites case: the site holding the job's checkpoint before t = 0 (default: the first site)."""
    flex_tier: Annotated[Int, Field(ge=0, le=len(FLEX_TIER_LOSS) - 1)] | None = None
    """Throughput tier of the demonstration (Flex 0..3: it may lose 0, 10, 25, 50% of its baseline throughput over
    each grid call); None: no tier."""


@dataclass(frozen=True)
class SiteSpec:
    """One ``[[sites]]`` table of a case file (:mod:`aidc_env.sites`); facility and energy fields default to the
    case's."""

    __pydantic_config__ = CONFIG
    name: Name
    gpus: Gpus
    """The site's pool (at most the case's ``gpus``, which is the largest site's)."""
    price_node: Node
    plant: Plant
    renewable_ratio: Ratio = 0.0
    pue: Pue | None = None
    idle_kw_per_gpu: KwPerGpu | None = None
    rated_kw_per_gpu: KwPerGpu | None = None
    ppa_usd_per_mwh: Cost | None = None
    curtailment_penalty_usd_per_mwh: Cost | None = None


@dataclass(frozen=True)
class InferenceSpec:
    """An inference service as a case file states it (``[[inference]]``; its load: :mod:`aidc_env.workloads`)."""

    __pydantic_config__ = CONFIG
    name: Name
    peak_gpus: Annotated[Int, Field(ge=0), limit(MAX_GPUS)]
    """GPUs serving the weekly peak of the demand profile."""
    it_kw_per_gpu: KwPerGpu
    """IT power (kW) per serving GPU with its host share, before PUE."""
    utc_offset_hours: Annotated[Float, Field(ge=-UTC_OFFSETS_HOURS, le=UTC_OFFSETS_HOURS),
                                AfterValidator(lambda h: require(float(h).is_integer(), "", "must be whole hours") or h)
                                ] = 0.0
    """Site's local clock minus UTC (the profile is in UTC hours, the price data in local days)."""
    profile: Str | None = None
    """Path of a weekly profile CSV (``hour_of_week``, ``demand_share``); None: the bundled Azure profile."""
    source: Str = ""
    site: Str | None = None
    """Sites case: the name of the site whose pool serves it (default: the first site)."""


@dataclass(frozen=True)
class CallSpec:
    """One call as a case file (``[[grid_calls]]``) or a call stream states it; None: the program's preset."""

    __pydantic_config__ = CONFIG
    program: Name
    start_hour: Annotated[Float, Field(ge=0, lt=24)]
    """Local clock hour the call starts on its day."""
    hours: Annotated[Float, Field(gt=0, le=24)]
    day_offset: Annotated[Int, Field(ge=0)] = 0
    """Day of the horizon (0: its first day)."""
    notice_hours: Annotated[Float, Field(ge=0)] | None = None
    reduction_share: Share | None = None
    limit_mw: Annotated[Float, Field(ge=0)] | None = None
    """A cap on the meter (MW) instead of a share of the baseline."""
    payment_usd_per_mwh: Cost | None = None
    payment_usd_per_mw: Cost | None = None
    penalty_usd_per_mwh: Cost | None = None
    site: Str | None = None
    """Sites case: the name of the site called (default: the first)."""


class PowerCaps(Table):
    """``[power_caps]``: the cap curve a schedule may use (:mod:`aidc_env.power_caps`)."""

    curve: Name = "a100-dvfs"
    min_cap_share: Annotated[Float, Field(gt=0, le=1)] = 0.5
    """Levels below this share of the GPU's rated power are not offered."""


def _mode_params(table: dict[str, Any]) -> ModeParams:
    for key, value in table.items():
        for entry in value if isinstance(value, list) else (value,):
            if is_integer(entry) and abs(entry) > MAX_MACHINE_INT:
                raise InputError(f".{key}", f"{number_text(entry)} is beyond any machine integer")
    return ModeParams.from_dict(table, field_prefix="")


class Facility(Table):
    pue: Pue = 1.2
    idle_kw_per_gpu: KwPerGpu = 0.1
    """Power of an unused GPU and its host share (kW)."""
    rated_kw_per_gpu: KwPerGpu = 0.5
    """Rated facility power per GPU (kW), before PUE."""


class Energy(Table):
    renewable_ratio: Ratio = 1.0
    """ρ: renewable plant size relative to the rated facility power."""
    ppa_usd_per_mwh: Cost = 30.0
    curtailment_penalty_usd_per_mwh: Cost = 0.0
    renewable_capacity_mw: Capacity | None = None
    """Capacity that normalises solar + wind into a shape; None: the profile source's own."""


class Migration(Table):
    link_gbps: Link | None = None
    """Inter-site bandwidth of a checkpoint copy; None: :data:`aidc_env.sites.DEFAULT_LINK_GBPS`."""


class CaseDocument(Table):
    """A case file (TOML; see ``aidc_env/cases/2048.toml``): the GPU pool, the facility, the energy contract and the
    jobs; optionally inference services, several sites and the mode generator's parameters."""

    name: Annotated[Str, AfterValidator(lambda name: path_component(name, ""))] | None = None
    """Names output folders (``runs/ppo-<name>``); default: the file's name."""
    description: Str = ""
    gpus: Gpus
    slots: Annotated[Int, Field(ge=1), limit(MAX_SLOTS_PER_DAY)] = 96
    """Slots per day: a multiple or a divisor of 24 (hourly data)."""
    day: Day
    """Reference day used when no day is given."""
    horizon_days: Horizon = 1
    min_daily_share: Share = 0.0
    mode_pool_gpus: Gpus | None = None
    """GPU pool that defines the baseline modes and tranches; None: ``gpus``."""
    idle_value_usd_per_gpu_hour: IdleValue = 0.0
    training_value_usd_per_gpu_hour: IdleValue = 0.0
    """Value of a GPU-hour of pre-training at a job's baseline throughput (tokens short of it are training lost)."""
    power_caps: PowerCaps | None = None
    grid_calls: list[CallSpec] = []
    tariff: Str | None = None
    """The utility tariff that bills the grid import: a bundled name (``python -m aidc_env.tariffs --list``) or a URDB
    JSON file; None: the real-time LMP."""
    coincident_peak: Str | None = None
    """A coincident-peak charge (ERCOT's 4CP style): a bundled name (``ercot-4cp``) or a JSON file
    (:mod:`aidc_env.coincident`); None: none."""
    facility: Facility = Facility()
    energy: Energy = Energy()
    migration: Migration = Migration()
    modes: Annotated[dict[Str, Any], AfterValidator(_mode_params)] = Field(default_factory=dict, validate_default=True)
    """Overrides of :class:`aidc_env.modes.ModeParams` (checked there)."""
    jobs: Annotated[list[JobSpec], Field(min_length=1)]
    inference: list[InferenceSpec] = []
    sites: list[SiteSpec] = []

    @model_validator(mode="after")
    def _consistent(self) -> CaseDocument:
        require(self.slots % HOURS_PER_DAY == 0 or HOURS_PER_DAY % self.slots == 0, "slots",
                f"must be a multiple or a divisor of {HOURS_PER_DAY} (hourly data), got {self.slots}")
        require_unique([job.name for job in self.jobs], "jobs", "jobs")
        for j, job in enumerate(self.jobs):
            _check_job(job, f"jobs[{j}]", self.slots, HOURS_PER_DAY * self.horizon_days, self.sites)
        pools = {site.name: site.gpus for site in self.sites}
        for i, service in enumerate(self.inference):
            require(service.peak_gpus <= self.gpus, f"inference[{i}].peak_gpus",
                    f"must fit the pool of {self.gpus} GPUs, got {service.peak_gpus}")
            require(bool(self.sites) or service.site is None, f"inference[{i}].site",
                    "only a sites case ([[sites]]) names sites")
            site = service.site if service.site is not None else self.sites[0].name if self.sites else None
            require(site is None or site in pools, f"inference[{i}].site",
                    f"must be the name of a site of the case, got {site!r}")
            require(site is None or service.peak_gpus <= pools[site], f"inference[{i}].peak_gpus",
                    f"must fit its site {site}'s pool of {pools.get(site)} GPUs, got {service.peak_gpus}")
        for i, site in enumerate(self.sites):
            require(site.gpus <= self.gpus, f"sites[{i}].gpus",
                    f"must be at most the case's gpus {self.gpus} (the largest site), got {site.gpus}")
            require(site.plant != "none" or site.renewable_ratio == 0, f"sites[{i}].renewable_ratio",
                    "a site without a plant has renewable_ratio 0")
        require_unique(list(pools), "sites", "sites")
        require(not pools or max(pools.values()) == self.gpus, "gpus",
                "in a sites case, gpus is the largest site's pool (the jobs' modes are those that fit it)")
        return self


def _check_job(job: JobSpec, where: str, slots: int, hours: float, sites: list[SiteSpec]) -> None:
    """A job's segments, restart, baseline, site and (fine-tuning) window and target within its case."""
    segment_hours = HOURS_PER_DAY / job.segments
    require(slots % job.segments == 0, f"{where}.segments",
            f"K = {job.segments} does not divide the {slots} slots of the day")
    require(job.restart_minutes / MINUTES_PER_HOUR < segment_hours, f"{where}.restart_minutes",
            f"must be shorter than a segment ({segment_hours * MINUTES_PER_HOUR:g} min)")
    require(job.baseline_gpus is not None or job.baseline_mode is not None, f"{where}.baseline_gpus",
            "give baseline_gpus or baseline_mode")
    require(job.site is None or job.site in {s.name for s in sites}, f"{where}.site",
            f"must be the name of a site of the case, got {job.site!r}")
    require(job.baseline_hours is None or job.baseline_hours <= hours, f"{where}.baseline_hours",
            f"must be <= {hours:g} (the horizon's hours)")
    if job.kind == PRETRAINING:
        require(job.release_hour == 0 and job.deadline_hour is None, f"{where}.deadline_hour",
                "only a fine-tuning job has a release and a deadline (set kind = \"finetuning\")")
        return
    require(job.max_gpus is not None and job.max_gpus <= FINETUNING_MAX_GPUS, f"{where}.max_gpus",
            f"a fine-tuning job needs max_gpus <= {FINETUNING_MAX_GPUS} (a small job)")
    require(job.deadline_hour is not None, f"{where}.deadline_hour", "a fine-tuning job needs a deadline")
    require(job.release_hour <= hours, f"{where}.release_hour", f"must be <= {hours:g} (the horizon's hours)")
    require(job.release_hour < job.deadline_hour <= hours, f"{where}.deadline_hour",
            f"must be > release_hour and <= {hours:g} (the horizon's hours), got {job.deadline_hour:g}")
    for name in ("release_hour", "deadline_hour"):
        value = getattr(job, name) / segment_hours
        require(abs(value - round(value)) < 1e-9, f"{where}.{name}", f"must be on a checkpoint boundary (a multiple "
                f"of {segment_hours:g} h), got {getattr(job, name)!r}")
    require(job.tranche_tokens is not None or job.baseline_hours is not None, f"{where}.baseline_hours",
            "a fine-tuning job needs tranche_tokens or baseline_hours (its target)")
    require(job.baseline_hours is None or job.baseline_hours <= job.deadline_hour - job.release_hour,
            f"{where}.baseline_hours", "must fit between release_hour and deadline_hour")
