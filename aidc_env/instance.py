"""Problem instances: a case resolved on one day or a horizon of days, and their exchange format (JSON).

An :class:`Instance` holds every parameter, each job's Pareto modes (a :class:`Job`) and the price,
renewable shape and renewable availability per slot. It is what the simulator, the env, the oracle and
outside solvers read; :func:`aidc_env.case.build_instance` makes one from a case file and a profile
source, :meth:`Instance.to_json` / :func:`load_instance` write and read the exchange format
(``python -m aidc_env.case --case 2048 --json``), whose form is declared by :class:`aidc_env.schema.InstanceDocument`.

**Horizon.** An instance spans D = ``horizon_days`` consecutive days on *one* flat time axis
of T = D × (slots per day) slots: the price and renewable arrays are the days' arrays end to end, a job's
``segments`` counts its checkpoint segments over the whole horizon (K per day × D) and its
``tranche_tokens`` is the target over the horizon (D × the daily tranche). Every consumer that reads
``slots``, ``segments`` and ``slots_per_segment`` therefore works unchanged on a long instance, and job
state (mode, progress within a segment) carries across midnight: there is no free restart at 00:00.
``min_daily_share`` s ∈ [0, 1] asks every day to make at least s × tranche / D tokens of every job
(s = 1: a daily tranche every day). The default s = 0 (targets over the horizon only): the point of a
multi-day budget is to move work between days, and s = 0 is the bound that shows what that is worth;
an operator who needs steady progress sets a share (D = 1 is unaffected by s). D = 1 is today's day
instance, bit for bit. DST days keep the day model's 24 clock hours (see :mod:`aidc_env.profiles`).

**Workloads** (``docs/fleet.md``). A :class:`Job` is a pre-training job (``kind = "pretraining"``,
its window the whole horizon) or a fine-tuning job (``kind = "finetuning"``: a window ``[release_slot,
deadline_slot)`` on its checkpoint boundaries, outside which it cannot run, and a target due by the deadline).
``inference`` holds the services (:class:`~aidc_env.workloads.Inference`) whose GPUs per slot come out of the
pool first (``inference_gpus``, ``inference_it_kw``: their per-slot totals); ``idle_value_usd_per_gpu_hour``
credits idle GPU-hours in the objective. Without them (the default) the instance is the day model's.

Units: power in kW (per GPU, per mode) or MW (facility), energy in MWh, prices in $/MWh,
time in hours unless the name says otherwise.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aidc_env.billing import TariffTerms, tariff_terms, with_demand_charges
from aidc_env.coincident import CoincidentPeak
from aidc_env.errors import is_finite, is_integer, require, require_date, require_unique
from aidc_env.grid import CapCurve, GridCall, check_calls
from aidc_env.information import Forecast
from aidc_env.io import dumps_json, path_component, read_json_file
from aidc_env.modes import Mode
from aidc_env.schedule import PAUSE  # noqa: F401 (the instance's name for a pause, re-exported)
from aidc_env.site_profiles import SOLAR_WIND
from aidc_env.schema import INSTANCE_FORMAT, InstanceDocument, validate
from aidc_env.schema.instance import JobDocument
from aidc_env.sites import DEFAULT_LINK_GBPS, Site, SiteNetwork
from aidc_env.tariffs import Tariff
from aidc_env.workloads import FINETUNING, PRETRAINING, Inference

SECONDS_PER_HOUR = 3600.0
MINUTES_PER_HOUR = 60.0

MODE_FIELDS = {"tp", "pp", "dp", "micro_batch", "gpus", "tokens_per_s", "it_power_kw"}
"""The fields of a :class:`~aidc_env.modes.Mode` (its JSON adds derived ones)."""
DEFAULT_MIN_DAILY_SHARE = 0.0
"""Default minimum share of the per-day tranche each day of a horizon must make: none, targets over the
horizon only (the module docstring says why)."""


@dataclass(frozen=True, eq=False)
class Job:
    """A job resolved in an instance: its Pareto modes as arrays, its baseline and its tranche."""

    name: str
    model: str
    segments: int
    """Checkpoint segments over the instance's horizon (K per day × D days)."""
    restart_hours: float
    modes: tuple[Mode, ...]
    baseline_mode: int
    """Index of the baseline mode in ``modes`` (PAUSE if the pool is too small for it)."""
    initial_mode: int
    """Mode running before t = 0 (keeping it costs no restart); PAUSE if none."""
    tranche_tokens: float
    """Token target over the instance's horizon (D × the daily tranche)."""

    def __post_init__(self) -> None:
        gpus = np.array([m.gpus for m in self.modes], dtype=np.int64)
        rate = np.array([m.tokens_per_s for m in self.modes], dtype=float)
        power = np.array([m.it_power_kw for m in self.modes], dtype=float)
        # Index PAUSE (-1) reads the trailing zero: pause uses no GPU, makes no token, draws no IT power.
        object.__setattr__(self, "gpus_by_choice", np.append(gpus, 0))
        object.__setattr__(self, "tokens_per_s_by_choice", np.append(rate, 0.0))
        object.__setattr__(self, "it_power_kw_by_choice", np.append(power, 0.0))
        for arr in (self.gpus_by_choice, self.tokens_per_s_by_choice, self.it_power_kw_by_choice):
            arr.setflags(write=False)

    gpus_by_choice: np.ndarray = field(init=False, repr=False)
    tokens_per_s_by_choice: np.ndarray = field(init=False, repr=False)
    it_power_kw_by_choice: np.ndarray = field(init=False, repr=False)
    kind: str = PRETRAINING
    """``"pretraining"`` or ``"finetuning"`` (:mod:`aidc_env.workloads`)."""
    release_slot: int = 0
    """First slot the job may run (a checkpoint boundary); 0 for pre-training."""
    deadline_slot: int | None = None
    """The job may not run from this slot on (a checkpoint boundary) and must have met ``tranche_tokens`` by
    then; None: the end of the horizon (pre-training)."""
    max_throughput_loss: float | None = None
    """Throughput tier: the largest share of its baseline throughput the job may lose over the slots of each grid
    call (:mod:`aidc_env.grid`; the demonstration's Flex 0/1/2/3 are 0, 0.1, 0.25, 0.5); None: no tier."""

    @property
    def n_modes(self) -> int:
        return len(self.modes)

    @property
    def is_finetuning(self) -> bool:
        return self.kind == FINETUNING

    @property
    def baseline_rate(self) -> tuple[int, float]:
        """(GPUs, tokens/s) of the baseline mode: what the job's training value and its tier are measured against;
        with no baseline mode in the pool, the mode of most tokens per GPU."""
        if self.baseline_mode != PAUSE:
            mode = self.modes[self.baseline_mode]
        else:
            mode = max(self.modes, key=lambda m: m.tokens_per_s / m.gpus)
        return mode.gpus, mode.tokens_per_s

    def to_dict(self) -> dict[str, Any]:
        """The job in the exchange format (:class:`aidc_env.schema.JobDocument`, its keys in order; no tier key
        without one)."""
        return {key: [m.to_dict() for m in self.modes] if key == "modes" else getattr(self, key)
                for key in JobDocument.model_fields
                if key != "max_throughput_loss" or self.max_throughput_loss is not None}


@dataclass(frozen=True, eq=False)
class Instance:
    """One day, or D consecutive days, of one case: everything the simulator, the env and the oracle need.

    A horizon of D days is one flat time axis of T = D × (slots per day) slots; a job's ``segments`` and
    ``tranche_tokens`` are over the horizon (see the module docstring). ``day`` is the first day.
    """

    case_name: str
    day: str
    n_gpus: int
    slot_hours: float
    pue: float
    idle_kw_per_gpu: float
    rated_kw_per_gpu: float
    renewable_ratio: float
    ppa_usd_per_mwh: float
    curtailment_penalty_usd_per_mwh: float
    renewable_capacity_mw: float | None
    """Capacity that normalised solar + wind into ``renewable_shape`` (MW), for the record; None: not stated."""
    jobs: tuple[Job, ...]
    price_usd_per_mwh: np.ndarray
    """λ_t per slot ($/MWh, may be negative)."""
    renewable_shape: np.ndarray
    """cf_t per slot in [0, 1]: (solar + wind) / renewable_capacity_mw."""
    horizon_days: int = 1
    """D, the consecutive days from ``day`` that the instance spans."""
    min_daily_share: float = DEFAULT_MIN_DAILY_SHARE
    """Each day must make at least this share of ``tranche_tokens / D`` of every job (0..1)."""
    forecast: Forecast | None = None
    """Day-ahead forecasts of the same slots (:mod:`aidc_env.information`); None: truth only. The simulator
    never reads it (costs are paid on the truth). With a network, None: each site carries its own
    (``Site.forecast``, in its view of :attr:`site_views`)."""
    inference: tuple[Inference, ...] = ()
    """Inference services (:class:`~aidc_env.workloads.Inference`): GPUs per slot taken from the pool first."""
    idle_value_usd_per_gpu_hour: float = 0.0
    """Value of a GPU-hour left idle ($, e.g. lent to other work): credited in ``Metrics.objective_usd``."""
    cap_curve: CapCurve | None = None
    """GPU power-cap levels a schedule may choose per job and slot (:mod:`aidc_env.grid`); None: no caps."""
    grid_calls: tuple[GridCall, ...] = ()
    """Firm reductions the grid asks for (:class:`~aidc_env.grid.GridCall`), each at one site."""
    training_value_usd_per_gpu_hour: float = 0.0
    """Value of a GPU-hour of pre-training at a job's baseline throughput ($): tokens short of the baseline's over the
    horizon count as training lost in ``Metrics.objective_usd`` (0: none; targets only)."""
    tariff: Tariff | None = None
    """The utility tariff that bills every site's grid import (:mod:`aidc_env.billing`): the prices are then its energy
    rates (set by :meth:`with_tariff`), and its demand and fixed charges join the objective. None: the real-time LMP."""
    network: SiteNetwork | None = None
    """Several sites (:mod:`aidc_env.sites`): their pools, plants and price nodes, each job's home site and
    transfer time. None: one site, the instance's own fields (the day model). With a network, the top-level
    facility, energy, price and renewable fields are those of the first site, for readers that know no sites
    (they refuse a sites instance: :func:`require_one_site`)."""
    coincident_peak: CoincidentPeak | None = None
    """A coincident-peak charge (ERCOT's 4CP style, :mod:`aidc_env.coincident`) with the system's peak hours of the
    months the horizon touches: each peak hour within the horizon is a demand charge on every site's meter, with a
    tariff or at the real-time LMP. None: none."""

    def __post_init__(self) -> None:
        if self.case_name:  # it may name files and folders
            path_component(self.case_name, "case")
        price = np.array(self.price_usd_per_mwh, dtype=float)
        shape = np.array(self.renewable_shape, dtype=float)
        require(shape.shape == price.shape and bool(np.all((shape >= 0) & (shape <= 1))), "renewable_shape",
                f"must be {price.size} values within [0, 1] like the prices")
        require_unique([job.name for job in self.jobs], "jobs", "jobs")  # schedules are keyed by job name
        for j, job in enumerate(self.jobs):
            require(price.size % job.segments == 0, f"jobs[{j}].segments",
                    f"K = {job.segments} does not divide the {price.size} slots")
            require(job.restart_hours < self.segment_hours(job), f"jobs[{j}].restart_hours",
                    "must be shorter than a checkpoint segment")
        self._check_horizon(price.size)
        self._check_workloads(price.size)
        self._check_grid(price.size)
        self._check_network(price.size)
        self._check_tariff(price)
        require(self.forecast is None or (isinstance(self.forecast, Forecast) and self.forecast.slots == price.size),
                "forecast", f"must be a Forecast of {price.size} slots")
        renewable = self.renewable_ratio * self.rated_facility_mw * shape
        for name, arr in (("price_usd_per_mwh", price), ("renewable_shape", shape), ("renewable_mw", renewable)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    renewable_mw: np.ndarray = field(init=False, repr=False)
    """R_t = ρ · P_rated · cf_t (MW) per slot."""
    inference_gpus: np.ndarray = field(init=False, repr=False)
    """GPUs of every inference service per slot (int, zeros without inference)."""
    inference_it_kw: np.ndarray = field(init=False, repr=False)
    """IT power of every inference service per slot (kW, zeros without inference)."""
    tariff_terms: TariffTerms | None = field(init=False, repr=False)
    """The bill's terms on the instance's slots (a meter's energy rates, demand and fixed charges): the :attr:`tariff`'s
    with the :attr:`coincident_peak` charges within the horizon (without a tariff: energy at the prices, the real-time
    LMP); None with neither (nor a peak within the horizon)."""
    @property
    def site_views(self) -> tuple[Instance, ...]:
        """Per site, the one-site instance of its pool, facility, plant, price and forecast (same jobs and slots): what
        the simulator's per-site physics and the outlooks read. Without a network: ``(self,)``."""
        return self._site_views if self.network is not None else (self,)

    def _check_network(self, slots: int) -> None:
        """Every job of a network has a home and a transfer time that fits a segment; the sites' views."""
        network = self.network
        if network is None:
            return
        require(self.forecast is None, "forecast", "a sites instance carries each site's forecast "
                "(network.sites[i].forecast), none of its own")
        require(len(network.home) == len(self.jobs), "network.home", f"one home site per job ({len(self.jobs)})")
        for j, job in enumerate(self.jobs):
            hours = network.transfer_hours[j] + job.restart_hours
            require(hours < self.segment_hours(job), f"jobs[{j}].transfer_hours",
                    f"transfer {network.transfer_hours[j]:.4g} h + restart {job.restart_hours:.4g} h must be shorter "
                    f"than a checkpoint segment ({self.segment_hours(job):g} h)")
        views = tuple(dataclasses.replace(
            self, n_gpus=site.n_gpus, pue=site.pue, idle_kw_per_gpu=site.idle_kw_per_gpu,
            rated_kw_per_gpu=site.rated_kw_per_gpu, renewable_ratio=site.renewable_ratio,
            ppa_usd_per_mwh=site.ppa_usd_per_mwh, curtailment_penalty_usd_per_mwh=site.curtailment_penalty_usd_per_mwh,
            price_usd_per_mwh=site.price_usd_per_mwh, renewable_shape=site.renewable_shape, forecast=site.forecast,
            inference=tuple(dataclasses.replace(service, site=0) for service in self.inference if service.site == s),
            grid_calls=tuple(dataclasses.replace(call, site=0) for call in self.grid_calls if call.site == s),
            network=None) for s, site in enumerate(network.sites))
        object.__setattr__(self, "_site_views", views)  # not a field: derived, and compared through the network

    def _check_tariff(self, price: np.ndarray) -> None:
        """Under a tariff, every site's prices are its energy rates; the bill's terms (:attr:`tariff_terms`), with the
        coincident-peak charges."""
        terms = None
        if self.tariff is not None:
            require(isinstance(self.tariff, Tariff), "tariff", "must be an aidc_env.tariffs.Tariff")
            terms = tariff_terms(self.tariff, self.day, price.size, self.slot_hours)
            for name, prices in [("price_usd_per_mwh", price)] + [
                    (f"network.sites[{s}].price_usd_per_mwh", site.price_usd_per_mwh)
                    for s, site in enumerate(self.network.sites if self.network is not None else ())]:
                require(np.array_equal(prices, terms.energy_usd_per_mwh), name, f"must be the energy rates of the "
                        f"tariff {self.tariff.name!r} (Instance.with_tariff sets them)")
        if self.coincident_peak is not None:
            require(isinstance(self.coincident_peak, CoincidentPeak), "coincident_peak",
                    "must be an aidc_env.coincident.CoincidentPeak")
            charges = self.coincident_peak.charges(self.day, price.size, price.size // self.horizon_days)
            terms = with_demand_charges(terms, price, charges) if charges else terms
        object.__setattr__(self, "tariff_terms", terms)

    def with_tariff(self, tariff: Tariff | None) -> Instance:
        """The instance billed by ``tariff``: every site's prices become its energy rates per slot (None: unchanged;
        a tariff on an instance billed by one already replaces it)."""
        if tariff is None:
            return self
        rates = tariff_terms(tariff, self.day, self.slots, self.slot_hours).energy_usd_per_mwh
        network = self.network and dataclasses.replace(self.network, sites=tuple(
            dataclasses.replace(site, price_usd_per_mwh=rates) for site in self.network.sites))
        return dataclasses.replace(self, tariff=tariff, price_usd_per_mwh=rates, network=network)

    def with_forecasts(self, forecasts: Sequence[Forecast | None]) -> Instance:
        """The instance with one forecast per site, in site order (one site: its :attr:`forecast`; with a network:
        each ``Site.forecast``)."""
        require(len(forecasts) == len(self.site_views), "forecasts", f"one forecast per site ({len(self.site_views)})")
        if self.network is None:
            return dataclasses.replace(self, forecast=forecasts[0])
        sites = tuple(dataclasses.replace(site, forecast=forecast)
                      for site, forecast in zip(self.network.sites, forecasts, strict=True))
        return dataclasses.replace(self, network=dataclasses.replace(self.network, sites=sites))

    @property
    def sites(self) -> tuple[Site, ...]:
        """The instance's sites: the network's, or the one implicit site of the instance's own fields."""
        if self.network is not None:
            return self.network.sites
        return (Site(name=self.case_name or "site", n_gpus=self.n_gpus, pue=self.pue,
                     idle_kw_per_gpu=self.idle_kw_per_gpu, rated_kw_per_gpu=self.rated_kw_per_gpu, plant=SOLAR_WIND,
                     renewable_ratio=self.renewable_ratio, ppa_usd_per_mwh=self.ppa_usd_per_mwh,
                     curtailment_penalty_usd_per_mwh=self.curtailment_penalty_usd_per_mwh, price_node="SCE",
                     price_usd_per_mwh=self.price_usd_per_mwh, renewable_shape=self.renewable_shape,
                     forecast=self.forecast),)

    @property
    def home_sites(self) -> tuple[int, ...]:
        """Per job, the site holding its checkpoint before t = 0 (0 with one site)."""
        return self.network.home if self.network is not None else (0,) * len(self.jobs)

    @property
    def transfer_hours(self) -> tuple[float, ...]:
        """Per job, the hours to copy its checkpoint to another site (0 with one site)."""
        return self.network.transfer_hours if self.network is not None else (0.0,) * len(self.jobs)

    @property
    def has_sites(self) -> bool:
        """Several sites (a :class:`SiteNetwork`), which the day-model oracle, env and agents do not model."""
        return self.network is not None

    def _check_workloads(self, slots: int) -> None:
        """Job windows on checkpoint boundaries within the horizon; inference loads of the instance's length."""
        for j, job in enumerate(self.jobs):
            per_segment = slots // job.segments
            release, deadline = self.job_window(job)
            require(0 <= release < deadline <= slots and release % per_segment == 0, f"jobs[{j}].release_slot",
                    f"must be a checkpoint boundary (multiple of {per_segment}) before the deadline, got {release}")
            require(deadline % per_segment == 0, f"jobs[{j}].deadline_slot",
                    f"must be a checkpoint boundary (multiple of {per_segment}) <= {slots}, got {job.deadline_slot}")
            require(job.kind == FINETUNING or (release == 0 and deadline == slots), f"jobs[{j}].kind",
                    "a pre-training job runs over the whole horizon (give kind = finetuning for a window)")
        for i, service in enumerate(self.inference):
            require(isinstance(service, Inference) and service.slots == slots, f"inference[{i}]",
                    f"must be an Inference of {slots} slots")
        gpus = np.zeros(slots, dtype=np.int64)
        it_kw = np.zeros(slots)
        for service in self.inference:
            gpus = gpus + service.gpus
            it_kw = it_kw + service.it_power_kw
        for name, arr in (("inference_gpus", gpus), ("inference_it_kw", it_kw)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    def _check_grid(self, slots: int) -> None:
        """Calls within the horizon at a site of the instance; tiers and the training value within their ranges."""
        require(self.cap_curve is None or isinstance(self.cap_curve, CapCurve), "cap_curve", "must be a CapCurve")
        check_calls(self.grid_calls, slots, len(self.network.sites) if self.network is not None else 1)
        for j, job in enumerate(self.jobs):
            loss = job.max_throughput_loss
            require(loss is None or (is_finite(loss) and 0 <= loss <= 1), f"jobs[{j}].max_throughput_loss",
                    f"must be a share in [0, 1], got {loss!r}")
        value = self.training_value_usd_per_gpu_hour
        require(is_finite(value) and value >= 0, "training_value_usd_per_gpu_hour", f"must be >= 0, got {value!r}")

    @property
    def has_grid_side(self) -> bool:
        """Power caps, grid calls, throughput tiers or a training value: what the day-model oracle and the env do not
        model (the textbook MILP does)."""
        return (self.cap_curve is not None or bool(self.grid_calls) or self.training_value_usd_per_gpu_hour > 0
                or any(job.max_throughput_loss is not None for job in self.jobs))

    @property
    def has_demand_charges(self) -> bool:
        """A tariff's demand charges or a coincident-peak charge within the horizon: they couple the slots of a month
        (or bill the system's peak, known only after it), which the decomposition does not model (the textbook MILP
        does)."""
        return self.tariff_terms is not None and bool(self.tariff_terms.demand)

    def token_value_usd(self, job: Job) -> float:
        """Value of one token of ``job`` ($): the training value of a GPU-hour over the tokens its baseline mode makes
        in one GPU-hour (0 without a training value)."""
        if self.training_value_usd_per_gpu_hour <= 0:
            return 0.0
        gpus, rate = job.baseline_rate
        return self.training_value_usd_per_gpu_hour * gpus / (rate * SECONDS_PER_HOUR)

    def job_window(self, job: Job) -> tuple[int, int]:
        """[release, deadline) slots of a job: where it may run (the whole horizon for pre-training)."""
        return job.release_slot, self.slots if job.deadline_slot is None else job.deadline_slot

    def allowed_segments(self, job: Job) -> np.ndarray:
        """Bool per checkpoint segment of ``job``: it may run there (its segment lies within the job's window)."""
        release, deadline = self.job_window(job)
        start = np.arange(job.segments) * self.slots_per_segment(job)
        return (start >= release) & (start < deadline)

    @property
    def has_fleet_workloads(self) -> bool:
        """Fine-tuning jobs, inference or an idle-GPU value: what the day-model oracle and env do not model yet."""
        return (any(job.is_finetuning for job in self.jobs) or bool(self.inference)
                or self.idle_value_usd_per_gpu_hour > 0)

    def _check_horizon(self, slots: int) -> None:
        validate_horizon(self.horizon_days, self.min_daily_share)
        if self.horizon_days > 1:
            require_date(self.day, "day")
        require(slots % self.horizon_days == 0, "horizon_days",
                f"{self.horizon_days} days do not split the {slots} slots evenly")
        for j, job in enumerate(self.jobs):
            require(job.segments % self.horizon_days == 0, f"jobs[{j}].segments",
                    f"{job.segments} segments do not split into {self.horizon_days} days (a day must end on a boundary)")

    @property
    def slots(self) -> int:
        return int(self.price_usd_per_mwh.size)

    @property
    def days(self) -> tuple[str, ...]:
        """The days of the horizon, in order (``(day,)`` for a day instance)."""
        if self.horizon_days == 1:
            return (self.day,)
        first = dt.date.fromisoformat(self.day)
        return tuple((first + dt.timedelta(days=d)).isoformat() for d in range(self.horizon_days))

    @property
    def slots_per_day(self) -> int:
        return self.slots // self.horizon_days

    @property
    def day_start_slots(self) -> tuple[int, ...]:
        """First slot of each day of the horizon."""
        return tuple(d * self.slots_per_day for d in range(self.horizon_days))

    def day_slots(self, d: int) -> slice:
        """The slots of day ``d`` (0-based) of the horizon."""
        return slice(d * self.slots_per_day, (d + 1) * self.slots_per_day)

    def segments_per_day(self, job: Job) -> int:
        return job.segments // self.horizon_days

    def daily_min_tokens(self, job: Job) -> float:
        """The fewest tokens of ``job`` every day must make: min_daily_share × tranche / D (none for fine-tuning,
        whose target is due by its deadline)."""
        return 0.0 if job.is_finetuning else self.min_daily_share * job.tranche_tokens / self.horizon_days

    @property
    def rated_facility_mw(self) -> float:
        """P_rated = PUE · N · p_rated / 1000 (MW)."""
        return self.pue * self.n_gpus * self.rated_kw_per_gpu / 1000.0

    def slots_per_segment(self, job: Job) -> int:
        return self.slots // job.segments

    def segment_hours(self, job: Job) -> float:
        return self.slot_hours * self.slots_per_segment(job)

    def to_dict(self) -> dict[str, Any]:
        """The exchange format (:class:`aidc_env.schema.InstanceDocument`, its keys in order; no forecast or network
        key without one)."""
        values = {"format": INSTANCE_FORMAT, "case": self.case_name, "gpus": self.n_gpus,
                  "jobs": [job.to_dict() for job in self.jobs], "days": list(self.days),
                  "day_start_slots": list(self.day_start_slots),
                  "inference": [service.to_dict() for service in self.inference],
                  "forecast": self.forecast and self.forecast.to_dict(),
                  "network": self.network and self.network.to_dict(),
                  "cap_curve": self.cap_curve and self.cap_curve.to_dict(),
                  "grid_calls": [call.to_dict() for call in self.grid_calls],
                  "tariff": self.tariff and dict(self.tariff.document),
                  "coincident_peak": self.coincident_peak and self.coincident_peak.to_dict(),
                  **{name: getattr(self, name).tolist() for name in ("price_usd_per_mwh", "renewable_shape",
                                                                     "renewable_mw")}}
        # written only when set: the day model's JSON unchanged
        optional = {"forecast": None, "network": None, "cap_curve": None, "grid_calls": [], "tariff": None,
                    "coincident_peak": None, "training_value_usd_per_gpu_hour": 0.0}
        return {key: values[key] if key in values else getattr(self, key) for key in InstanceDocument.model_fields
                if key not in optional or (values[key] if key in values else getattr(self, key)) != optional[key]}

    @classmethod
    def from_dict(cls, data: Any, *, limits: bool = False) -> Instance:
        """Read the exchange format (:class:`aidc_env.schema.InstanceDocument`; ``limits``: with the bounds of
        :mod:`aidc_env.limits`, as :func:`load_instance` reads a file); InputError naming the first bad field."""
        doc = validate(InstanceDocument, data, document="instance", limits=limits)
        network = doc.network
        return cls(
            case_name=doc.case, day=doc.day, n_gpus=doc.gpus, slot_hours=doc.slot_hours, pue=doc.pue,
            idle_kw_per_gpu=doc.idle_kw_per_gpu, rated_kw_per_gpu=doc.rated_kw_per_gpu,
            renewable_ratio=doc.renewable_ratio, ppa_usd_per_mwh=doc.ppa_usd_per_mwh,
            curtailment_penalty_usd_per_mwh=doc.curtailment_penalty_usd_per_mwh,
            renewable_capacity_mw=doc.renewable_capacity_mw,
            jobs=tuple(Job(**{**dict(job), "modes": tuple(Mode(**mode.model_dump(include=MODE_FIELDS))
                                                          for mode in job.modes)}) for job in doc.jobs),
            price_usd_per_mwh=np.array(doc.price_usd_per_mwh), renewable_shape=np.array(doc.renewable_shape),
            horizon_days=doc.horizon_days, min_daily_share=doc.min_daily_share,
            forecast=Forecast.from_document(doc.forecast) if doc.forecast is not None else None,
            inference=tuple(Inference(**dict(service)) for service in doc.inference),
            idle_value_usd_per_gpu_hour=doc.idle_value_usd_per_gpu_hour,
            cap_curve=None if doc.cap_curve is None else CapCurve(**dict(doc.cap_curve)),
            grid_calls=tuple(GridCall(**dict(call)) for call in doc.grid_calls),
            training_value_usd_per_gpu_hour=doc.training_value_usd_per_gpu_hour,
            tariff=None if doc.tariff is None else Tariff.from_urdb(doc.tariff, source="instance JSON"),
            coincident_peak=None if doc.coincident_peak is None else CoincidentPeak.from_dict(doc.coincident_peak),
            network=None if network is None else SiteNetwork(
                sites=tuple(Site(**site.model_dump(exclude={"gpus", "plant_mw", "forecast"}), n_gpus=site.gpus,
                                 forecast=site.forecast and Forecast.from_document(site.forecast))
                            for site in network.sites),
                home=tuple(network.home), transfer_hours=tuple(network.transfer_hours),
                link_gbps=DEFAULT_LINK_GBPS if network.link_gbps is None else network.link_gbps))

    def to_json(self, indent: int | None = None) -> str:
        return dumps_json(self.to_dict(), indent=indent)


def require_one_site(inst: Instance, who: str) -> None:
    """Refuse, with one :class:`InputError` line, a sites instance in a consumer that models one site (``who``)."""
    require(not inst.has_sites, "case", f"{who} does not handle several sites (case {inst.case_name!r}); solve it with "
            "python -m oracle (the decomposition), run it in the sites env (aidc_env/SitesDispatch-v0) and score "
            "schedules with python -m aidc_env.simulate")


def load_instance(path: str | Path) -> Instance:
    """Read an instance JSON file (the output of ``python -m aidc_env.case --json``), within the bounds of
    :mod:`aidc_env.limits`."""
    return Instance.from_dict(read_json_file(path, "instance"), limits=True)


def validate_horizon(horizon_days: Any, min_daily_share: Any) -> None:
    """Raise :class:`InputError` unless D is a positive integer and the daily share within [0, 1]."""
    require(is_integer(horizon_days) and horizon_days > 0, "horizon_days",
            f"must be a positive integer, got {horizon_days!r}")
    require(is_finite(min_daily_share) and 0 <= min_daily_share <= 1, "min_daily_share",
            f"must be a number in [0, 1], got {min_daily_share!r}")
