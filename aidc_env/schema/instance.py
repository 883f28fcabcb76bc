"""The schemas of the exchange format (an instance's JSON, :class:`InstanceDocument`, with its jobs and modes,
inference loads, forecasts and sites) and of a schedule file (:class:`ScheduleDocument`)."""

from __future__ import annotations

import datetime as dt
import math
from typing import Annotated, Any, Literal, Union

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationInfo, model_validator

from aidc_env.errors import is_integer, require, require_unique
from aidc_env.hourly import is_valid_date
from aidc_env.limits import (MAX_CALL_USD_PER_MWH, MAX_GPUS, MAX_KW_PER_GPU, MAX_RESTART_MINUTES, MAX_SLOTS_PER_DAY,
                             MAX_TRANCHE_TOKENS)
from aidc_env.schema.base import (MINUTES_PER_HOUR, Capacity, Cost, Float, Gpus, Horizon, IdleValue, Int, KwPerGpu,
                                  Link, Name, Node, Plant, Prices, Pue, Ratio, Shapes, Share, Str, Table, Tokens,
                                  limit, shown)
from aidc_env.workloads import JOB_KINDS, PRETRAINING

INSTANCE_FORMAT = "aidc-instance/1"
"""The ``format`` of the exchange JSON; an instance without one is read as this format."""


def _slots(name: str, values: list[Any] | None, slots: int, what: str = "the instance's slots") -> None:
    require(values is None or len(values) == slots, name, f"must have {slots} values ({what}), got {len(values or ())}")


class ModeDocument(Table):
    """One Pareto mode of a job; ``label``, ``kwh_per_million_tokens`` and ``tokens_per_s_per_gpu`` are derived
    (written for readers, not read)."""

    tp: Annotated[Int, Field(ge=1)]
    pp: Annotated[Int, Field(ge=1)]
    dp: Annotated[Int, Field(ge=1)]
    micro_batch: Annotated[Int, Field(ge=1)]
    gpus: Gpus
    tokens_per_s: Annotated[Float, Field(gt=0), limit(MAX_TRANCHE_TOKENS)]
    it_power_kw: Annotated[Float, Field(gt=0)]
    label: Str | None = None
    kwh_per_million_tokens: Float | None = None
    tokens_per_s_per_gpu: Float | None = None

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ModeDocument:
        require(self.gpus == self.tp * self.pp * self.dp, "gpus",
                f"must equal tp*pp*dp = {self.tp * self.pp * self.dp}, got {self.gpus}")
        require(not (info.context or {}).get("limits", True) or self.it_power_kw <= MAX_KW_PER_GPU * self.gpus,
                "it_power_kw", f"must be <= {MAX_KW_PER_GPU:g} kW per GPU, got {self.it_power_kw:g} kW")
        return self


class JobDocument(Table):
    """A job resolved in an instance (:class:`aidc_env.instance.Job`): its Pareto modes, baseline and target."""

    name: Name
    model: Str = ""
    segments: Annotated[Int, Field(ge=1)]
    """Checkpoint segments over the horizon (they divide its slots)."""
    restart_hours: Annotated[Float, Field(ge=0), limit(MAX_RESTART_MINUTES / MINUTES_PER_HOUR)]
    baseline_mode: Annotated[Int, Field(ge=-1)] = -1
    initial_mode: Annotated[Int, Field(ge=-1)] = -1
    tranche_tokens: Tokens
    kind: Literal[JOB_KINDS] = PRETRAINING
    release_slot: Annotated[Int, Field(ge=0)] = 0
    deadline_slot: Annotated[Int, Field(ge=1)] | None = None
    max_throughput_loss: Share | None = None
    """Throughput tier: the share of baseline throughput the job may lose over each grid call."""
    modes: list[ModeDocument]

    @model_validator(mode="after")
    def _consistent(self) -> JobDocument:
        for name in ("baseline_mode", "initial_mode"):
            require(getattr(self, name) < len(self.modes), name, f"must be -1 or a mode index < {len(self.modes)}")
        return self


class InferenceDocument(Table):
    """An inference service's load (:class:`aidc_env.workloads.Inference`): GPUs and demand share per slot."""

    name: Name
    it_kw_per_gpu: KwPerGpu
    peak_gpus: Annotated[Int, Field(ge=0), limit(MAX_GPUS)]
    source: Str = ""
    site: Annotated[Int, Field(ge=0)] = 0
    """Index of the site whose pool serves it."""
    gpus: Annotated[list[Annotated[Int, Field(ge=0)]], Field(min_length=1), limit(MAX_GPUS)]
    demand_share: Shapes

    @model_validator(mode="after")
    def _consistent(self) -> InferenceDocument:
        _slots("demand_share", self.demand_share, len(self.gpus), "one per entry of gpus")
        return self


class ForecastDocument(Table):
    """Day-ahead forecasts of an instance's slots (:class:`aidc_env.information.Forecast`)."""

    price_usd_per_mwh: Prices
    renewable_shape: Shapes
    price_scenarios_usd_per_mwh: list[Prices] = []
    renewable_shape_scenarios: list[Shapes] = []
    source: Str = ""
    persistence_price_usd_per_mwh: Prices | None = None
    issue_outlook_price_usd_per_mwh: Annotated[list[Prices], Field(min_length=1)] | None = None
    """One row per day of the horizon."""
    price_issue_hour: Int | None = None
    """None: the issue hour of the forecasts (:data:`aidc_env.information.ISSUE_HOUR`)."""

    @model_validator(mode="after")
    def _consistent(self) -> ForecastDocument:
        slots = len(self.price_usd_per_mwh)
        what = "like price_usd_per_mwh"
        _slots("renewable_shape", self.renewable_shape, slots, what)
        _slots("persistence_price_usd_per_mwh", self.persistence_price_usd_per_mwh, slots, what)
        for name in ("price_scenarios_usd_per_mwh", "renewable_shape_scenarios", "issue_outlook_price_usd_per_mwh"):
            for k, row in enumerate(getattr(self, name) or ()):
                _slots(f"{name}[{k}]", row, slots, what)
        require(len(self.renewable_shape_scenarios) == len(self.price_scenarios_usd_per_mwh),
                "renewable_shape_scenarios", f"must have as many scenarios as the prices "
                f"({len(self.price_scenarios_usd_per_mwh)})")
        return self


class CapCurveDocument(Table):
    """GPU power-cap levels (:class:`aidc_env.grid.CapCurve`), uncapped first."""

    name: Name
    cap_share: Annotated[list[Annotated[Float, Field(gt=0, le=1)]], Field(min_length=1)]
    throughput_factor: Annotated[list[Annotated[Float, Field(gt=0, le=1)]], Field(min_length=1)]
    power_factor: Annotated[list[Annotated[Float, Field(gt=0, le=1)]], Field(min_length=1)]
    host_kw_per_gpu: KwPerGpu = 0.0
    source: Str = ""


class GridCallDocument(Table):
    """A grid call (:class:`aidc_env.grid.GridCall`): its slots, baseline and limit per slot, payments and penalty."""

    program: Name
    notice_slot: Annotated[Int, Field(ge=0)]
    start_slot: Annotated[Int, Field(ge=0)]
    end_slot: Annotated[Int, Field(ge=1)]
    baseline_mw: Annotated[list[Annotated[Float, Field(ge=0)]], Field(min_length=1)]
    limit_mw: Annotated[list[Annotated[Float, Field(ge=0)]], Field(min_length=1)]
    payment_usd_per_mwh: Annotated[Float, Field(ge=0), limit(MAX_CALL_USD_PER_MWH)] = 0.0
    payment_usd_per_mw: Annotated[Float, Field(ge=0), limit(MAX_CALL_USD_PER_MWH)] = 0.0
    penalty_usd_per_mwh: Annotated[Float, Field(ge=0), limit(MAX_CALL_USD_PER_MWH)] = 0.0
    site: Annotated[Int, Field(ge=0)] = 0
    baseline_rule: Str = ""


class SiteDocument(Table):
    """One data center of a network (:class:`aidc_env.sites.Site`); ``plant_mw`` is derived."""

    name: Name
    gpus: Gpus
    pue: Pue
    idle_kw_per_gpu: KwPerGpu
    rated_kw_per_gpu: KwPerGpu
    plant: Plant
    renewable_ratio: Ratio
    plant_mw: Float | None = None
    ppa_usd_per_mwh: Cost
    curtailment_penalty_usd_per_mwh: Cost = 0.0
    price_node: Node
    price_usd_per_mwh: Prices
    renewable_shape: Shapes
    forecast: ForecastDocument | None = None

    @model_validator(mode="after")
    def _consistent(self) -> SiteDocument:
        slots = len(self.price_usd_per_mwh)
        _slots("renewable_shape", self.renewable_shape, slots, "like price_usd_per_mwh")
        _slots("forecast.price_usd_per_mwh", self.forecast and self.forecast.price_usd_per_mwh, slots,
               "like price_usd_per_mwh")
        plant_mw = self.renewable_ratio * self.pue * self.gpus * self.rated_kw_per_gpu / 1000.0
        require(self.plant_mw is None or math.isclose(self.plant_mw, plant_mw, rel_tol=1e-9, abs_tol=1e-12),
                "plant_mw", f"must be renewable_ratio * pue * gpus * rated_kw_per_gpu / 1000 = {plant_mw:g}")
        return self


class NetworkDocument(Table):
    """Several sites (:class:`aidc_env.sites.SiteNetwork`): per job its home site index and transfer hours."""

    sites: Annotated[list[SiteDocument], Field(min_length=1)]
    home: list[Annotated[Int, Field(ge=0)]]
    transfer_hours: list[Annotated[Float, Field(ge=0)]]
    link_gbps: Link | None = None

    @model_validator(mode="after")
    def _consistent(self) -> NetworkDocument:
        require_unique([site.name for site in self.sites], "sites", "sites")
        _slots("transfer_hours", self.transfer_hours, len(self.home), "one per entry of home")
        for j, home in enumerate(self.home):
            require(home < len(self.sites), f"home[{j}]", f"must be a site index < {len(self.sites)}, got {home}")
        return self


class InstanceDocument(Table):
    """The exchange format (``python -m aidc_env.case --json``): one day or a horizon of days of a case, resolved.
    ``slots``, ``rated_facility_mw``, ``renewable_mw``, ``days`` and ``day_start_slots`` are derived: written for
    outside readers, and if present they must agree with the rest."""

    format: Literal[INSTANCE_FORMAT] = INSTANCE_FORMAT
    case: Str = ""
    day: Str = ""
    gpus: Gpus
    slots: Int | None = None
    slot_hours: Annotated[Float, Field(gt=0)]
    pue: Pue
    idle_kw_per_gpu: KwPerGpu
    rated_kw_per_gpu: KwPerGpu
    rated_facility_mw: Float | None = None
    renewable_ratio: Ratio
    ppa_usd_per_mwh: Cost
    curtailment_penalty_usd_per_mwh: Cost = 0.0
    renewable_capacity_mw: Capacity | None = None
    jobs: Annotated[list[JobDocument], Field(min_length=1)]
    price_usd_per_mwh: Prices
    renewable_shape: Shapes
    renewable_mw: list[Float] | None = None
    horizon_days: Horizon = 1
    days: list[Str] | None = None
    day_start_slots: list[Int] | None = None
    min_daily_share: Share = 0.0
    idle_value_usd_per_gpu_hour: IdleValue = 0.0
    inference: list[InferenceDocument] = []
    cap_curve: CapCurveDocument | None = None
    grid_calls: list[GridCallDocument] = []
    training_value_usd_per_gpu_hour: IdleValue = 0.0
    forecast: ForecastDocument | None = None
    tariff: dict[str, Any] | None = None
    """The URDB item of the tariff that bills the grid import (:mod:`aidc_env.tariffs` reads it)."""
    coincident_peak: dict[str, Any] | None = None
    """A coincident-peak charge with the system's peak hours (:mod:`aidc_env.coincident` reads it)."""
    network: NetworkDocument | None = None

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> InstanceDocument:
        slots, days = len(self.price_usd_per_mwh), self.horizon_days
        _slots("renewable_shape", self.renewable_shape, slots, "like price_usd_per_mwh")
        require(self.slots in (None, slots), "slots", f"must be the {slots} entries of price_usd_per_mwh")
        require(not (info.context or {}).get("limits", True) or slots <= days * MAX_SLOTS_PER_DAY,
                "price_usd_per_mwh", f"{slots} slots: must be at most {MAX_SLOTS_PER_DAY} a day")
        require(slots % days == 0, "horizon_days", f"{days} days do not split the {slots} slots evenly")
        _slots("forecast.price_usd_per_mwh", self.forecast and self.forecast.price_usd_per_mwh, slots)
        sites = self.network.sites if self.network is not None else ()
        for i, service in enumerate(self.inference):
            _slots(f"inference[{i}].gpus", service.gpus, slots)
            require(service.site < max(1, len(sites)), f"inference[{i}].site",
                    f"must be a site index < {max(1, len(sites))}, got {service.site}")
        if self.network is not None:
            require(self.forecast is None, "forecast", "a sites instance carries each site's forecast "
                    "(network.sites[i].forecast), none of its own")
            _slots("network.home", self.network.home, len(self.jobs), "one home site per job")
            for i, site in enumerate(sites):
                _slots(f"network.sites[{i}].price_usd_per_mwh", site.price_usd_per_mwh, slots)
        self._check_derived(slots)
        return self

    def _check_derived(self, slots: int) -> None:
        """The derived keys, if present, agree with the fields they are derived from."""
        rated = self.pue * self.gpus * self.rated_kw_per_gpu / 1000.0
        require(self.rated_facility_mw is None or math.isclose(self.rated_facility_mw, rated, rel_tol=1e-9),
                "rated_facility_mw", f"must be pue * gpus * rated_kw_per_gpu / 1000 = {rated:g}")
        renewable = self.renewable_ratio * rated * np.asarray(self.renewable_shape)
        require(self.renewable_mw is None or (len(self.renewable_mw) == slots and bool(np.allclose(
            self.renewable_mw, renewable, rtol=1e-9, atol=1e-12))), "renewable_mw",
            "does not equal renewable_ratio * rated_facility_mw * renewable_shape")
        if self.days is not None:
            require(self.horizon_days == 1 or is_valid_date(self.day), "day", f"{self.day!r} is not a valid date "
                    "YYYY-MM-DD (an instance of several days starts on a date)")
            first = dt.date.fromisoformat(self.day) if self.horizon_days > 1 else None
            expected = [self.day] if first is None else [(first + dt.timedelta(days=d)).isoformat()
                                                          for d in range(self.horizon_days)]
            require(self.days == expected, "days", f"must be the {self.horizon_days} consecutive days from {self.day}")
        starts = [d * slots // self.horizon_days for d in range(self.horizon_days)]
        require(self.day_start_slots in (None, starts), "day_start_slots",
                f"must be {starts} for {self.horizon_days} days of {slots // self.horizon_days} slots")


# ------------------------------------------------------------------------------------------ schedule JSON

Choice = Int
"""A segment's choice: -1 (pause) or the index of one of the job's modes."""
_BY_TYPE = Discriminator(lambda v: "<list>" if isinstance(v, list) else "<object>" if isinstance(v, dict) else None,
                         custom_error_type="rows_type",
                         custom_error_message="must be a list per job or an object job name -> list")


def _rows(entry: Any) -> Any:
    """Per job a list of entries, in job order (a list) or by job name (an object)."""
    return Annotated[Union[Annotated[list[list[entry]], Tag("<list>")],
                           Annotated[dict[Str, list[entry]], Tag("<object>")]], _BY_TYPE]


def _site_entry(value: Any) -> Any:
    require(isinstance(value, str) or is_integer(value), "", f"must be a site name or index, got {shown(value)}")
    return value


class ScheduleDocument(BaseModel):
    """A schedule file (:mod:`aidc_env.schedule`): per job its segment choices and, with several sites, the site
    of each segment (a name or an index). A file of the rows alone is read as ``{"schedule": rows}``; other keys are
    ignored (the oracle's ``--json`` answer is a schedule file with its status, costs and metrics beside)."""

    model_config = ConfigDict(extra="ignore")

    schedule: _rows(Choice)
    sites: _rows(Annotated[Any, AfterValidator(_site_entry)]) | None = None
    caps: _rows(Annotated[Union[Int, Float], Field(ge=0)]) | None = None
    """Per job and slot a power-cap level position (0: none) of the instance's cap curve."""
