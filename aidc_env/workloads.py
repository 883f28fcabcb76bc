"""Kinds of work in one GPU pool: pre-training, fine-tuning, inference.

* **Pre-training** and **fine-tuning** jobs are both a :class:`~aidc_env.instance.Job` (3D modes from the same
  generator, checkpoint segments, a token target); ``Job.kind`` tells them apart. A fine-tuning job is small
  (its modes are capped at a few hundred GPUs by the case), has a *window* ``[release_slot, deadline_slot)`` on
  checkpoint boundaries outside which it cannot run, and its target must be met by the deadline. A pre-training
  job's window is the whole horizon.
* **Inference** (:class:`Inference`) is not deferrable: a demand profile fixes the GPUs it needs in every slot,
  each drawing ``it_kw_per_gpu``; those GPUs come out of the pool first (the jobs share what is left).
* The **idle-GPU value** (``Instance.idle_value_usd_per_gpu_hour``) credits every GPU-hour left idle (e.g. lent
  to other work) in the objective.

The demand profile is the bundled weekly profile ``aidc_env/data/inference_profile.csv`` (168 UTC hours of two
Azure LLM inference services, made by ``scripts/make_inference_profile.py``; provenance in its header and in
``aidc_env/data/README.md``): :func:`inference_demand_share` maps a run of local days onto it.

Units: GPUs are counts, power in kW per GPU (IT, before PUE), demand shares in [0, 1].
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from aidc_env.errors import InputError, require
from aidc_env.io import read_input_text

PRETRAINING = "pretraining"
FINETUNING = "finetuning"
JOB_KINDS = (PRETRAINING, FINETUNING)
"""The kinds of :class:`~aidc_env.instance.Job`."""

FINETUNING_MAX_GPUS = 512
"""Largest mode of a fine-tuning job: a *small* job, a few hundred GPUs at most."""
HOURS_PER_WEEK = 168
HOURS_PER_DAY = 24
BUNDLED_INFERENCE_PROFILE = "inference_profile.csv"
"""The bundled weekly demand profile (in ``aidc_env/data``)."""
SHARE_ROUNDING = 1e-9
"""Slack when turning a demand share into whole GPUs: ceil(share × peak − this), so that share 1 gives the peak."""


@dataclass(frozen=True, eq=False)
class Inference:
    """An inference service in the pool: the GPUs it occupies in every slot and their IT power.

    ``gpus`` is what the simulator reads (it is ``ceil(demand_share × peak_gpus)`` for a case's load);
    ``demand_share`` (the normalised demand each slot) and ``source`` are kept for observers and the record.
    """

    name: str
    gpus: np.ndarray
    """GPUs serving inference in each slot (int, ≥ 0); they are taken from the pool before any job."""
    it_kw_per_gpu: float
    """IT power (kW) of one serving GPU with its host share, before PUE."""
    peak_gpus: int
    """The GPUs at full demand (share 1)."""
    demand_share: np.ndarray
    """Normalised demand per slot in [0, 1] (demand / the profile's weekly peak)."""
    source: str = ""
    site: int = 0
    """Index of the site whose pool serves it (``Instance.sites``; 0 with one site)."""

    def __post_init__(self) -> None:
        gpus = np.asarray(self.gpus).astype(np.int64)
        share = np.asarray(self.demand_share, dtype=float)
        for name, arr in (("gpus", gpus), ("demand_share", share)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        it_kw = gpus * float(self.it_kw_per_gpu)
        it_kw.setflags(write=False)
        object.__setattr__(self, "it_power_kw", it_kw)

    it_power_kw: np.ndarray = field(init=False, repr=False)
    """IT power of the serving GPUs per slot (kW)."""

    @property
    def slots(self) -> int:
        return int(self.gpus.size)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "it_kw_per_gpu": self.it_kw_per_gpu, "peak_gpus": self.peak_gpus,
                "source": self.source, **({"site": self.site} if self.site else {}), "gpus": self.gpus.tolist(),
                "demand_share": self.demand_share.tolist()}


def gpus_for_share(share: np.ndarray, peak_gpus: int) -> np.ndarray:
    """Whole GPUs that serve a demand share: ceil(share × peak), never more than the peak."""
    return np.minimum(np.ceil(np.asarray(share) * peak_gpus - SHARE_ROUNDING), peak_gpus).clip(0).astype(np.int64)


def load_inference_profile(path: str | Path | None = None) -> np.ndarray:
    """The weekly demand shares (168 values, UTC hour of the week from Monday 00:00) of a profile CSV.

    ``path``: a CSV with columns ``hour_of_week`` and ``demand_share`` (``#`` lines are comments); None: the
    bundled profile. :class:`InputError` names a bad file or value.
    """
    if path is None:
        text = (resources.files("aidc_env") / "data" / BUNDLED_INFERENCE_PROFILE).read_text()
        where = BUNDLED_INFERENCE_PROFILE
    else:
        text, where = read_input_text(path, "inference.profile"), str(path)
    rows = list(csv.DictReader(io.StringIO("".join(line for line in text.splitlines(keepends=True)
                                                   if not line.startswith("#")))))
    require(len(rows) == HOURS_PER_WEEK, "inference.profile", f"{where}: expected {HOURS_PER_WEEK} hourly rows, "
            f"got {len(rows)}")
    share = np.full(HOURS_PER_WEEK, np.nan)
    for i, row in enumerate(rows):
        try:
            hour, value = int(row["hour_of_week"]), float(row["demand_share"])
        except (KeyError, TypeError, ValueError):
            raise InputError("inference.profile", f"{where} row {i + 1}: needs integer hour_of_week and a number "
                             "demand_share") from None
        require(0 <= hour < HOURS_PER_WEEK and math.isfinite(value) and 0 <= value <= 1, "inference.profile",
                f"{where} row {i + 1}: hour_of_week in 0..167 and demand_share in [0, 1]")
        share[hour] = value
    require(not bool(np.any(np.isnan(share))), "inference.profile", f"{where}: every hour of the week once")
    return share


def inference_demand_share(weekly_share: np.ndarray, first_day: str, days: int, slots_per_day: int,
                           utc_offset_hours: float) -> np.ndarray:
    """Demand share per slot of ``days`` local days from ``first_day``: the weekly profile (UTC hours)
    read at each local hour's UTC hour, held over the hour's slots (a slot of several hours takes its busiest)."""
    start = dt.date.fromisoformat(first_day)
    hours = []
    for d in range(days):
        local_midnight_how = (start + dt.timedelta(days=d)).weekday() * HOURS_PER_DAY
        utc_how = (local_midnight_how + np.arange(HOURS_PER_DAY) - utc_offset_hours) % HOURS_PER_WEEK
        hours.append(weekly_share[np.floor(utc_how).astype(int)])
    hourly = np.concatenate(hours)
    if slots_per_day >= HOURS_PER_DAY:
        return np.repeat(hourly, slots_per_day // HOURS_PER_DAY)
    return hourly.reshape(-1, HOURS_PER_DAY // slots_per_day).max(axis=1)  # a coarse slot serves its busiest hour
