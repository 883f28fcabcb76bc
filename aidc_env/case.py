"""Cases (TOML files) and problem instances (a case resolved on one day or a horizon of days).

A :class:`Case` is what a case file says: the GPU pool, the facility, the energy contract and the
jobs (model, checkpoint segments, restart time, baseline mode, tranche). :func:`build_instance`
resolves a case on one day of a profile source -- or on ``horizon_days`` consecutive days -- into an
:class:`Instance`: every parameter, each job's Pareto modes and the price, renewable shape and
renewable availability per slot.

**Horizon** (DESIGN §9). An instance spans D = ``horizon_days`` consecutive days on *one* flat time axis
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
The instance is the exchange format read by the simulator, the env, the oracle and outside solvers
(``python -m aidc_env.case --case 2048 --json``).

Units: power in kW (per GPU, per mode) or MW (facility), energy in MWh, prices in $/MWh,
time in hours unless the name says otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import math
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from aidc_env import limits
from aidc_env.errors import CliParser, InputError, require, require_number, run_cli
from aidc_env.information import Forecast
from aidc_env.io import atomic_write_text, check_output_file, dumps_json, read_input_text, read_json_file
from aidc_env.modes import Mode, ModeParams, generate_modes
from aidc_env.profiles import HOURS_PER_DAY, ProfileSet, hourly_to_slots, load_profiles

SECONDS_PER_HOUR = 3600.0
MINUTES_PER_HOUR = 60.0
PAUSE = -1
"""Schedule value of a paused segment (any other value is an index into the job's modes)."""

INSTANCE_FORMAT = "aidc-instance/1"

DEFAULT_MIN_DAILY_SHARE = 0.0
"""Default minimum share of the per-day tranche each day of a horizon must make: none, targets over the
horizon only (the module docstring says why)."""


@dataclass(frozen=True)
class JobSpec:
    """One pre-training job as a case file states it."""

    name: str
    model: str
    segments: int
    """Checkpoint segments per day K_j (must divide the slots per day)."""
    restart_minutes: float = 10.0
    """Time to load a checkpoint after a resume or a mode switch: full power, zero tokens."""
    baseline_gpus: int | None = None
    """Baseline mode by GPU count (the fastest Pareto mode with that many GPUs)."""
    baseline_mode: str | None = None
    """Baseline mode by label, e.g. ``"tp4-pp4-dp32"`` (wins over ``baseline_gpus``)."""
    tranche_tokens: float | None = None
    """Daily token tranche W_j; default: what the baseline mode trains in 24 hours. An instance of D days
    targets D × this over its horizon."""


@dataclass(frozen=True)
class Case:
    """A case file, parsed and validated (see ``aidc_env/cases/2048.toml``)."""

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

    @property
    def slot_hours(self) -> float:
        return HOURS_PER_DAY / self.slots

    def with_overrides(
        self,
        *,
        gpus: int | None = None,
        segments: int | Sequence[int] | None = None,
        renewable_ratio: float | None = None,
        day: str | None = None,
        **fields: Any,
    ) -> Case:
        """A copy with overrides; ``segments`` sets K for every job (or one value per job)."""
        changes: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        require(not unknown, ",".join(sorted(unknown)), "unknown case field")
        if self.mode_pool_gpus is None:
            changes.setdefault("mode_pool_gpus", self.n_gpus)
        if gpus is not None:
            changes["n_gpus"] = gpus
        if renewable_ratio is not None:
            changes["renewable_ratio"] = renewable_ratio
        if day is not None:
            changes["day"] = day
        if segments is not None:
            per_job = [segments] * len(self.jobs) if isinstance(segments, int) else list(segments)
            require(len(per_job) == len(self.jobs), "segments", f"expected {len(self.jobs)} values")
            changes["jobs"] = tuple(
                dataclasses.replace(job, segments=int(k)) for job, k in zip(self.jobs, per_job, strict=True)
            )
        case = dataclasses.replace(self, **changes)
        case.validate()
        return case

    def validate(self) -> None:
        """Raise :class:`InputError` naming the first bad field."""
        require(_is_int(self.n_gpus) and self.n_gpus > 0, "gpus", f"must be a positive integer, got {self.n_gpus!r}")
        require(_is_int(self.slots) and self.slots > 0, "slots", f"must be a positive integer, got {self.slots!r}")
        require(
            self.slots % HOURS_PER_DAY == 0 or HOURS_PER_DAY % self.slots == 0,
            "slots",
            f"must be a multiple or a divisor of {HOURS_PER_DAY} (hourly data), got {self.slots}",
        )
        for name in ("pue",):
            require(_finite(getattr(self, name)) and getattr(self, name) >= 1.0, name, "must be a number >= 1")
        for name in ("idle_kw_per_gpu", "rated_kw_per_gpu", "renewable_ratio", "ppa_usd_per_mwh",
                     "curtailment_penalty_usd_per_mwh"):
            value = getattr(self, name)
            require(_finite(value) and value >= 0, name, f"must be a finite number >= 0, got {value!r}")
        if self.renewable_capacity_mw is not None:
            require(_finite(self.renewable_capacity_mw) and self.renewable_capacity_mw > 0,
                    "renewable_capacity_mw", "must be a number > 0")
        if self.mode_pool_gpus is not None:
            require(_is_int(self.mode_pool_gpus) and self.mode_pool_gpus > 0, "mode_pool_gpus",
                    "must be a positive integer")
        self._check_bounds()
        _check_date(self.day, "day")
        require(len(self.jobs) > 0, "jobs", "at least one job is needed")
        names = [job.name for job in self.jobs]
        require(len(set(names)) == len(names), "jobs", f"job names must be unique, got {names}")
        for j, job in enumerate(self.jobs):
            where = f"jobs[{j}]"
            require(isinstance(job.name, str) and job.name != "", f"{where}.name", "must be a non-empty string")
            require(isinstance(job.model, str) and job.model != "", f"{where}.model", "must be a model name")
            require(_is_int(job.segments) and job.segments > 0, f"{where}.segments",
                    f"must be a positive integer, got {job.segments!r}")
            require(self.slots % job.segments == 0, f"{where}.segments",
                    f"K = {job.segments} does not divide the {self.slots} slots of the day")
            segment_hours = self.slot_hours * self.slots / job.segments
            require(_finite(job.restart_minutes) and 0 <= job.restart_minutes / MINUTES_PER_HOUR < segment_hours,
                    f"{where}.restart_minutes",
                    f"must be >= 0 and shorter than a segment ({segment_hours * MINUTES_PER_HOUR:g} min)")
            require(job.baseline_gpus is not None or job.baseline_mode is not None, f"{where}.baseline_gpus",
                    "give baseline_gpus or baseline_mode")
            if job.baseline_gpus is not None:
                require(_is_int(job.baseline_gpus) and job.baseline_gpus > 0, f"{where}.baseline_gpus",
                        "must be a positive integer")
            if job.tranche_tokens is not None:
                require_number(job.tranche_tokens, f"{where}.tranche_tokens", 0.0, limits.MAX_TRANCHE_TOKENS)
            require_number(job.restart_minutes, f"{where}.restart_minutes", 0.0, limits.MAX_RESTART_MINUTES)
            if job.baseline_gpus is not None:
                require_number(job.baseline_gpus, f"{where}.baseline_gpus", 1, limits.MAX_GPUS, integer=True)
        _validate_horizon(self.horizon_days, self.min_daily_share)

    def _check_bounds(self) -> None:
        """Upper bounds that keep every cost finite (see :mod:`aidc_env.limits` for the reasons)."""
        require_number(self.n_gpus, "gpus", 1, limits.MAX_GPUS, integer=True)
        require_number(self.slots, "slots", 1, limits.MAX_SLOTS_PER_DAY, integer=True)
        require_number(self.pue, "pue", 1.0, limits.MAX_PUE)
        for name in ("idle_kw_per_gpu", "rated_kw_per_gpu"):
            require_number(getattr(self, name), name, 0.0, limits.MAX_KW_PER_GPU)
        require_number(self.renewable_ratio, "renewable_ratio", 0.0, limits.MAX_RENEWABLE_RATIO)
        for name in ("ppa_usd_per_mwh", "curtailment_penalty_usd_per_mwh"):
            require_number(getattr(self, name), name, 0.0, limits.MAX_PRICE_USD_PER_MWH)
        if self.renewable_capacity_mw is not None:
            require_number(self.renewable_capacity_mw, "renewable_capacity_mw", 0.0, limits.MAX_RENEWABLE_CAPACITY_MW,
                           low_open=True)
        if self.mode_pool_gpus is not None:
            require_number(self.mode_pool_gpus, "mode_pool_gpus", 1, limits.MAX_GPUS, integer=True)


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

    @property
    def n_modes(self) -> int:
        return len(self.modes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model,
            "segments": self.segments,
            "restart_hours": self.restart_hours,
            "baseline_mode": self.baseline_mode,
            "initial_mode": self.initial_mode,
            "tranche_tokens": self.tranche_tokens,
            "modes": [m.to_dict() for m in self.modes],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str) -> Job:
        try:
            modes = tuple(Mode.from_dict(m) for m in data["modes"])
            job = cls(
                name=str(data["name"]),
                model=str(data.get("model", "")),
                segments=_as_int(data["segments"], f"{where}.segments"),
                restart_hours=_as_float(data["restart_hours"], f"{where}.restart_hours"),
                modes=modes,
                baseline_mode=_as_int(data.get("baseline_mode", PAUSE), f"{where}.baseline_mode"),
                initial_mode=_as_int(data.get("initial_mode", PAUSE), f"{where}.initial_mode"),
                tranche_tokens=_as_float(data["tranche_tokens"], f"{where}.tranche_tokens"),
            )
        except KeyError as err:
            raise InputError(f"{where}.{err.args[0]}", "missing") from None
        except (TypeError, ValueError) as err:
            if isinstance(err, InputError):
                raise
            raise InputError(where, f"bad value ({err})") from None
        for name in ("baseline_mode", "initial_mode"):
            index = getattr(job, name)
            require(PAUSE <= index < len(modes), f"{where}.{name}", f"must be -1 or a mode index < {len(modes)}")
        require(job.segments > 0, f"{where}.segments", "must be > 0")
        require(_finite(job.restart_hours) and job.restart_hours >= 0, f"{where}.restart_hours", "must be >= 0")
        require(_finite(job.tranche_tokens) and job.tranche_tokens >= 0, f"{where}.tranche_tokens", "must be >= 0")
        return job


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
    renewable_capacity_mw: float
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
    never reads it (costs are paid on the truth)."""

    def __post_init__(self) -> None:
        price = np.array(self.price_usd_per_mwh, dtype=float)
        shape = np.array(self.renewable_shape, dtype=float)
        require(price.ndim == 1 and price.size > 0, "price_usd_per_mwh", "must be a non-empty list of numbers")
        require(bool(np.all(np.isfinite(price))), "price_usd_per_mwh", "contains NaN or infinite values")
        require(shape.shape == price.shape, "renewable_shape", f"must have {price.size} values like the prices")
        require(bool(np.all(np.isfinite(shape))) and bool(np.all((shape >= 0) & (shape <= 1))),
                "renewable_shape", "values must be finite and within [0, 1]")
        require(_is_int(self.n_gpus) and self.n_gpus > 0, "gpus", f"must be a positive integer, got {self.n_gpus}")
        require(_finite(self.slot_hours) and self.slot_hours > 0, "slot_hours", "must be > 0")
        for job in self.jobs:
            require(price.size % job.segments == 0, f"{job.name}.segments",
                    f"K = {job.segments} does not divide the {price.size} slots")
            require(job.restart_hours < self.segment_hours(job), f"{job.name}.restart_hours",
                    "must be shorter than a checkpoint segment")
        self._check_horizon(price.size)
        require(self.forecast is None or (isinstance(self.forecast, Forecast) and self.forecast.slots == price.size),
                "forecast", f"must be a Forecast of {price.size} slots")
        renewable = self.renewable_ratio * self.rated_facility_mw * shape
        for name, arr in (("price_usd_per_mwh", price), ("renewable_shape", shape), ("renewable_mw", renewable)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    renewable_mw: np.ndarray = field(init=False, repr=False)
    """R_t = ρ · P_rated · cf_t (MW) per slot."""

    def _check_horizon(self, slots: int) -> None:
        _validate_horizon(self.horizon_days, self.min_daily_share)
        if self.horizon_days > 1:
            _check_date(self.day, "day")
        require(slots % self.horizon_days == 0, "horizon_days",
                f"{self.horizon_days} days do not split the {slots} slots evenly")
        for job in self.jobs:
            require(job.segments % self.horizon_days == 0, f"{job.name}.segments",
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
        """The fewest tokens of ``job`` every day must make: min_daily_share × tranche / D."""
        return self.min_daily_share * job.tranche_tokens / self.horizon_days

    @property
    def rated_facility_mw(self) -> float:
        """P_rated = PUE · N · p_rated / 1000 (MW)."""
        return self.pue * self.n_gpus * self.rated_kw_per_gpu / 1000.0

    def slots_per_segment(self, job: Job) -> int:
        return self.slots // job.segments

    def segment_hours(self, job: Job) -> float:
        return self.slot_hours * self.slots_per_segment(job)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": INSTANCE_FORMAT,
            "case": self.case_name,
            "day": self.day,
            "gpus": self.n_gpus,
            "slots": self.slots,
            "slot_hours": self.slot_hours,
            "pue": self.pue,
            "idle_kw_per_gpu": self.idle_kw_per_gpu,
            "rated_kw_per_gpu": self.rated_kw_per_gpu,
            "rated_facility_mw": self.rated_facility_mw,
            "renewable_ratio": self.renewable_ratio,
            "ppa_usd_per_mwh": self.ppa_usd_per_mwh,
            "curtailment_penalty_usd_per_mwh": self.curtailment_penalty_usd_per_mwh,
            "renewable_capacity_mw": self.renewable_capacity_mw,
            "jobs": [job.to_dict() for job in self.jobs],
            "price_usd_per_mwh": self.price_usd_per_mwh.tolist(),
            "renewable_shape": self.renewable_shape.tolist(),
            "renewable_mw": self.renewable_mw.tolist(),
            "horizon_days": self.horizon_days,
            "days": list(self.days),
            "day_start_slots": list(self.day_start_slots),
            "min_daily_share": self.min_daily_share,
            **({"forecast": self.forecast.to_dict()} if self.forecast is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Instance:
        """Read the exchange format; ``renewable_mw``, if present, must match ρ · P_rated · cf."""
        require(isinstance(data, Mapping), "instance", "must be a JSON object")
        try:
            jobs_data = data["jobs"]
            require(isinstance(jobs_data, list) and jobs_data, "jobs", "must be a non-empty list")
            inst = cls(
                case_name=str(data.get("case", "")),
                day=str(data.get("day", "")),
                n_gpus=_as_int(data["gpus"], "gpus"),
                slot_hours=_as_float(data["slot_hours"], "slot_hours"),
                pue=_as_float(data["pue"], "pue"),
                idle_kw_per_gpu=_as_float(data["idle_kw_per_gpu"], "idle_kw_per_gpu"),
                rated_kw_per_gpu=_as_float(data["rated_kw_per_gpu"], "rated_kw_per_gpu"),
                renewable_ratio=_as_float(data["renewable_ratio"], "renewable_ratio"),
                ppa_usd_per_mwh=_as_float(data["ppa_usd_per_mwh"], "ppa_usd_per_mwh"),
                curtailment_penalty_usd_per_mwh=_as_float(
                    data.get("curtailment_penalty_usd_per_mwh", 0.0), "curtailment_penalty_usd_per_mwh"),
                renewable_capacity_mw=_as_float(data.get("renewable_capacity_mw", float("nan")),
                                                "renewable_capacity_mw", allow_nan=True),
                jobs=tuple(Job.from_dict(j, f"jobs[{i}]") for i, j in enumerate(jobs_data)),
                price_usd_per_mwh=_as_array(data["price_usd_per_mwh"], "price_usd_per_mwh"),
                renewable_shape=_as_array(data["renewable_shape"], "renewable_shape"),
                horizon_days=_as_int(data.get("horizon_days", 1), "horizon_days"),
                min_daily_share=_as_float(data.get("min_daily_share", DEFAULT_MIN_DAILY_SHARE), "min_daily_share"),
                forecast=Forecast.from_dict(data["forecast"]) if data.get("forecast") is not None else None,
            )
        except KeyError as err:
            raise InputError(str(err.args[0]), "missing from the instance") from None
        if "renewable_mw" in data:
            given = _as_array(data["renewable_mw"], "renewable_mw")
            require(given.shape == inst.renewable_mw.shape and np.allclose(given, inst.renewable_mw, rtol=1e-9,
                                                                           atol=1e-12),
                    "renewable_mw", "does not equal renewable_ratio * rated_facility_mw * renewable_shape")
        # Derived keys, written for outside readers: if present they must agree with day and horizon_days.
        if "days" in data:
            require(data["days"] == list(inst.days), "days",
                    f"must be the {inst.horizon_days} consecutive days from {inst.day}")
        if "day_start_slots" in data:
            require(data["day_start_slots"] == list(inst.day_start_slots), "day_start_slots",
                    f"must be {list(inst.day_start_slots)} for {inst.horizon_days} days of {inst.slots_per_day} slots")
        return inst

    def to_json(self, indent: int | None = None) -> str:
        return dumps_json(self.to_dict(), indent=indent)


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
    except tomllib.TOMLDecodeError as err:
        raise InputError("case", f"malformed TOML in {text_source}: {err}") from None
    return case_from_dict(data, source=text_source)


_FACILITY_KEYS = ("pue", "idle_kw_per_gpu", "rated_kw_per_gpu")
_ENERGY_KEYS = ("renewable_ratio", "ppa_usd_per_mwh", "curtailment_penalty_usd_per_mwh", "renewable_capacity_mw")
_TOP_KEYS = {"name", "description", "gpus", "slots", "day", "horizon_days", "min_daily_share", "mode_pool_gpus",
             "facility", "energy", "jobs", "modes"}
_JOB_KEYS = {f.name for f in dataclasses.fields(JobSpec)}


def case_from_dict(data: Mapping[str, Any], source: str = "") -> Case:
    """Parse a case table (as read from TOML)."""
    unknown = set(data) - _TOP_KEYS
    require(not unknown, ",".join(sorted(unknown)), f"unknown key in case (known: {', '.join(sorted(_TOP_KEYS))})")
    facility = dict(data.get("facility", {}))
    energy = dict(data.get("energy", {}))
    for table, keys, name in ((facility, _FACILITY_KEYS, "facility"), (energy, _ENERGY_KEYS, "energy")):
        bad = set(table) - set(keys)
        require(not bad, f"{name}.{','.join(sorted(bad))}", f"unknown key (known: {', '.join(keys)})")
    jobs = []
    for j, job in enumerate(data.get("jobs", [])):
        require(isinstance(job, Mapping), f"jobs[{j}]", "must be a table")
        bad = set(job) - _JOB_KEYS
        require(not bad, f"jobs[{j}].{','.join(sorted(bad))}", f"unknown key (known: {', '.join(sorted(_JOB_KEYS))})")
        require("name" in job and "model" in job and "segments" in job, f"jobs[{j}]",
                "needs name, model and segments")
        jobs.append(JobSpec(**job))
    require("gpus" in data, "gpus", "missing")
    require("day" in data, "day", "missing (the reference day, YYYY-MM-DD)")
    numeric = {**facility, **energy}
    for key, value in numeric.items():
        require(isinstance(value, (int, float)) and not isinstance(value, bool), key, f"must be a number, got {value!r}")
    case = Case(
        name=str(data.get("name", Path(source).stem if source else "case")),
        description=str(data.get("description", "")),
        n_gpus=data["gpus"],
        slots=data.get("slots", 96),
        day=str(data["day"]),
        horizon_days=data.get("horizon_days", 1),
        min_daily_share=data.get("min_daily_share", DEFAULT_MIN_DAILY_SHARE),
        jobs=tuple(jobs),
        mode_pool_gpus=data.get("mode_pool_gpus"),
        mode_params=ModeParams.from_dict(dict(data.get("modes", {})), field_prefix="modes"),
        source=source,
        **{k: float(v) for k, v in numeric.items()},
    )
    case.validate()
    return case


def _pick_baseline(job: JobSpec, modes: Sequence[Mode], where: str) -> int:
    if job.baseline_mode is not None:
        for i, mode in enumerate(modes):
            if mode.label == job.baseline_mode:
                return i
        raise InputError(f"{where}.baseline_mode", f"{job.baseline_mode!r} is not a Pareto mode of {job.model}")
    candidates = [i for i, m in enumerate(modes) if m.gpus == job.baseline_gpus]
    require(bool(candidates), f"{where}.baseline_gpus",
            f"no Pareto mode of {job.model} uses {job.baseline_gpus} GPUs "
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
        reference_modes = generate_modes(spec.model, max(reference_pool, case.n_gpus), case.mode_params).pareto
        require(len(reference_modes) > 0, f"{where}.model", f"{spec.model} has no feasible mode")
        reference_pareto = [m for m in reference_modes if m.gpus <= reference_pool] or list(reference_modes)
        baseline = reference_pareto[_pick_baseline(spec, reference_pareto, where)]
        tranche = spec.tranche_tokens
        if tranche is None:
            tranche = baseline.tokens_per_s * SECONDS_PER_HOUR * HOURS_PER_DAY
        modes = tuple(m for m in reference_modes if m.gpus <= case.n_gpus)
        baseline_index = modes.index(baseline) if baseline in modes else PAUSE
        segment_hours = HOURS_PER_DAY / spec.segments
        jobs.append(
            Job(
                name=spec.name,
                model=spec.model,
                segments=spec.segments,
                restart_hours=min(spec.restart_minutes / MINUTES_PER_HOUR, segment_hours),
                modes=modes,
                baseline_mode=baseline_index,
                initial_mode=baseline_index,
                tranche_tokens=float(tranche),
            )
        )
    return tuple(jobs)


def build_instance(
    case: str | Path | Case,
    day: str | None = None,
    profiles: ProfileSet | str | Path | None = None,
    *,
    horizon_days: int | None = None,
    min_daily_share: float | None = None,
    **overrides: Any,
) -> Instance:
    """Resolve a case on a day (default: the case's reference day) of a profile source.

    ``profiles``: a loaded :class:`ProfileSet`, a CSV path, or None for the bundled table.
    ``horizon_days``: D consecutive days from ``day`` (default: the case's, 1); the profile source must
    hold all of them (InputError naming the first missing day otherwise). ``min_daily_share``: each day's
    minimum share of tranche / D (default: the case's, 0).
    ``overrides``: ``gpus``, ``segments``, ``renewable_ratio`` or any :class:`Case` field.
    """
    case = _resolved_case(case, day=day, horizon_days=horizon_days, min_daily_share=min_daily_share, **overrides)
    if not isinstance(profiles, ProfileSet):
        profiles = load_profiles(profiles, renewable_capacity_mw=case.renewable_capacity_mw)
    return _instance_on_days(case, case.day, profiles, horizon_jobs(resolve_jobs(case), case.horizon_days))


def build_instances(
    case: str | Path | Case,
    days: Sequence[str] | None = None,
    profiles: ProfileSet | str | Path | None = None,
    *,
    horizon_days: int | None = None,
    min_daily_share: float | None = None,
    **overrides: Any,
) -> dict[str, Instance]:
    """One instance per start day; modes are resolved once.

    ``days``: the first day of each instance (default: every day of the profile source that starts
    ``horizon_days`` consecutive complete days; with D = 1, every day). Horizons may overlap.
    """
    case = _resolved_case(case, horizon_days=horizon_days, min_daily_share=min_daily_share, **overrides)
    if not isinstance(profiles, ProfileSet):
        profiles = load_profiles(profiles, renewable_capacity_mw=case.renewable_capacity_mw)
    jobs = horizon_jobs(resolve_jobs(case), case.horizon_days)
    starts = days or profiles.horizon_starts(case.horizon_days)
    return {day: _instance_on_days(case, day, profiles, jobs) for day in starts}


def _resolved_case(case: str | Path | Case, **overrides: Any) -> Case:
    case = load_case(case)
    if any(v is not None for v in overrides.values()):
        case = case.with_overrides(**overrides)
    return case


def horizon_jobs(jobs: tuple[Job, ...], horizon_days: int) -> tuple[Job, ...]:
    """Jobs resolved for a day, stretched over D days: D × the segments and D × the tranche."""
    if horizon_days == 1:
        return jobs
    return tuple(dataclasses.replace(job, segments=job.segments * horizon_days,
                                     tranche_tokens=job.tranche_tokens * horizon_days) for job in jobs)


def _instance_on_days(case: Case, first_day: str, profiles: ProfileSet, jobs: tuple[Job, ...]) -> Instance:
    capacity = case.renewable_capacity_mw or profiles.renewable_capacity_mw
    day_profiles = profiles.consecutive_days(first_day, case.horizon_days)
    return Instance(
        case_name=case.name,
        day=first_day,
        n_gpus=case.n_gpus,
        slot_hours=case.slot_hours,
        pue=case.pue,
        idle_kw_per_gpu=case.idle_kw_per_gpu,
        rated_kw_per_gpu=case.rated_kw_per_gpu,
        renewable_ratio=case.renewable_ratio,
        ppa_usd_per_mwh=case.ppa_usd_per_mwh,
        curtailment_penalty_usd_per_mwh=case.curtailment_penalty_usd_per_mwh,
        renewable_capacity_mw=capacity,
        jobs=jobs,
        price_usd_per_mwh=np.concatenate([hourly_to_slots(p.price_usd_per_mwh, case.slots) for p in day_profiles]),
        renewable_shape=np.concatenate([hourly_to_slots(p.renewable_shape(capacity), case.slots)
                                        for p in day_profiles]),
        horizon_days=len(day_profiles),
        min_daily_share=case.min_daily_share,
    )


def load_instance(path: str | Path) -> Instance:
    """Read an instance JSON file (the output of ``python -m aidc_env.case --json``)."""
    inst = Instance.from_dict(read_json_file(path, "instance"))
    limits.check_instance(inst)
    return inst


# --------------------------------------------------------------------------------------------- CLI


OVERRIDE_ARGUMENTS = ("gpus", "segments", "renewable_ratio", "horizon_days", "min_daily_share")
"""The case-override options of every CLI (``--gpus``, ``--segments``, ``--renewable-ratio``, ``--horizon-days``,
``--min-daily-share``), as Case overrides."""


def add_case_arguments(parser: argparse.ArgumentParser, *, day: bool = True, default_case: str = "2048") -> None:
    """The case options shared by every CLI: case, day (unless ``day=False``), overrides, profiles."""
    parser.add_argument("--case", default=default_case,
                        help="bundled case name or a TOML file (default: %(default)s)")
    if day:
        parser.add_argument("--day", help="day YYYY-MM-DD (default: the case's reference day)")
    parser.add_argument("--gpus", type=int, help="override the GPU pool size N")
    parser.add_argument("--segments", type=int, help="override the checkpoint segments K of every job")
    parser.add_argument("--renewable-ratio", type=float, help="override the renewable-to-AIDC ratio rho")
    parser.add_argument("--profiles", help="canonical CAISO-style hourly CSV (default: the bundled days)")
    parser.add_argument("--horizon-days", type=int,
                        help="consecutive days D from --day in one instance (default: the case's, 1)")
    parser.add_argument("--min-daily-share", type=float,
                        help="each day of a horizon makes at least this share (0..1) of tranche / D tokens of "
                             "every job; 1 = a daily tranche every day (default: the case's, 0)")


def case_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The case overrides given on the command line (the options of :func:`add_case_arguments`), None left out."""
    values = {name: getattr(args, name, None) for name in OVERRIDE_ARGUMENTS}
    return {name: value for name, value in values.items() if value is not None}


def instance_from_args(args: argparse.Namespace, profiles: ProfileSet | None = None) -> Instance:
    return build_instance(args.case, day=args.day, profiles=profiles if profiles is not None else args.profiles,
                          **case_overrides(args))


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(
        prog="python -m aidc_env.case",
        description="Print the full problem instance of a case on one day: every parameter, each job's "
        "Pareto modes, and the day's price, renewable shape and renewable availability per slot. "
        "This JSON is the exchange format read by the oracle, the simulator CLI and outside solvers.",
    )
    add_case_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the instance as JSON (default: a summary)")
    parser.add_argument("--out", help="also write the JSON to this file")
    args = parser.parse_args(argv)
    if args.out:
        check_output_file(args.out, "out")
    inst = instance_from_args(args)
    text = inst.to_json(indent=1)
    if args.out:
        atomic_write_text(args.out, text)
    if args.json:
        print(text)
    else:
        print(f"case {inst.case_name} on {inst.day}: {inst.n_gpus} GPUs, {inst.slots} slots of "
              f"{inst.slot_hours * MINUTES_PER_HOUR:g} min, rated {inst.rated_facility_mw:.3f} MW, "
              f"rho {inst.renewable_ratio:g}")
        print(f"price ${inst.price_usd_per_mwh.min():.1f}..{inst.price_usd_per_mwh.max():.1f}/MWh, "
              f"renewable {inst.renewable_mw.sum() * inst.slot_hours:.3f} MWh available")
        for job in inst.jobs:
            base = job.modes[job.baseline_mode].label if job.baseline_mode != PAUSE else "none"
            print(f"  {job.name} ({job.model}): {job.n_modes} Pareto modes, K = {job.segments}, "
                  f"baseline {base}, tranche {job.tranche_tokens / 1e9:.3f} B tokens")
    return 0


# --------------------------------------------------------------------------------------------- helpers


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool) and math.isfinite(
        value)


def _as_int(value: Any, name: str) -> int:
    require(_is_int(value), name, f"must be an integer, got {value!r}")
    return int(value)


def _as_float(value: Any, name: str, allow_nan: bool = False) -> float:
    require(isinstance(value, (int, float)) and not isinstance(value, bool), name, f"must be a number, got {value!r}")
    require(allow_nan or math.isfinite(value), name, f"must be finite, got {value!r}")
    return float(value)


def _as_array(value: Any, name: str) -> np.ndarray:
    require(isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value),
            name, "must be a list of numbers")
    arr = np.asarray(value, dtype=float)
    require(bool(np.all(np.isfinite(arr))), name, "contains NaN or infinite values")
    return arr


def _check_date(text: str, name: str) -> None:
    try:
        dt.date.fromisoformat(text)
    except (TypeError, ValueError):
        raise InputError(name, f"{text!r} is not a valid date YYYY-MM-DD") from None


def _validate_horizon(horizon_days: Any, min_daily_share: Any) -> None:
    require(_is_int(horizon_days) and horizon_days > 0, "horizon_days",
            f"must be a positive integer, got {horizon_days!r}")
    require(_finite(min_daily_share) and 0 <= min_daily_share <= 1, "min_daily_share",
            f"must be a number in [0, 1], got {min_daily_share!r}")


if __name__ == "__main__":
    sys.exit(run_cli(main))
