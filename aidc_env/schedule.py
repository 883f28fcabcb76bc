"""Schedules: per job and checkpoint segment a choice (a mode index or ``PAUSE``) and a site, and their file format.

A :class:`Schedule` is what every policy returns and what :func:`aidc_env.simulator.simulate` scores: ``modes``
gives, per job (instance order), its K_j segment choices; ``sites`` the site holding the job's checkpoint during
each segment, where it runs if it runs (an index into ``Instance.sites``). A job is at one site per segment by
construction and can change site only between two segments, i.e. at a checkpoint. With one site every entry of
``sites`` is 0; ``sites=None`` keeps every job at its home site. ``caps`` (optional) gives per job and *slot* a GPU
power-cap level position of the instance's cap curve (:mod:`aidc_env.grid`; 0: no cap; 1.5: half the slot at level 1,
half at level 2), which needs no checkpoint; None, or every position 0, is the schedule without caps, scored exactly as
before caps existed.

The file format (``python -m aidc_env.simulate --schedule FILE``, the oracle's ``--json``) is a list of segment
choices per job, an object job name → list, or ``{"schedule": ..., "sites": ...}`` with ``sites`` the same shape
(entries site names or indices), and ``"caps"`` the cap levels per job and slot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aidc_env.errors import InputError, is_integer, require
from aidc_env.io import read_json_file
from aidc_env.schema import ScheduleDocument, validate

if TYPE_CHECKING:
    from aidc_env.instance import Instance, Job

PAUSE = -1
"""Schedule value of a paused segment (any other value is an index into the job's modes)."""

Rows = Sequence[Sequence[Any]] | Mapping[str, Sequence[Any]]
"""Per job a list of segment entries, in job order or by job name."""


@dataclass(frozen=True, eq=False)
class Schedule:
    """A validated schedule of an instance: per job an int array of its K_j choices and one of its K_j sites."""

    modes: tuple[np.ndarray, ...]
    sites: tuple[np.ndarray, ...]
    caps: tuple[np.ndarray, ...] | None = None
    """Per job a float array of its T slots' cap level positions; None: no cap anywhere."""

    def __eq__(self, other: object) -> bool:
        """The same choices, sites and caps, row by row."""
        if not isinstance(other, Schedule):
            return NotImplemented
        return (len(self.modes) == len(other.modes)
                and all(np.array_equal(a, b) for a, b in zip(self.modes, other.modes, strict=True))
                and all(np.array_equal(a, b) for a, b in zip(self.sites, other.sites, strict=True))
                and (self.caps is None) == (other.caps is None)
                and (self.caps is None
                     or all(np.array_equal(a, b) for a, b in zip(self.caps, other.caps, strict=True))))

    __hash__ = None  # arrays: equal schedules are not hashable keys

    def mode_lists(self) -> list[list[int]]:
        return [row.tolist() for row in self.modes]

    def site_lists(self) -> list[list[int]]:
        return [row.tolist() for row in self.sites]

    def to_dict(self, inst: Instance) -> dict[str, Any]:
        """The file format: ``schedule`` (mode rows) and, with several sites, ``sites`` (site-name rows)."""
        out: dict[str, Any] = {"schedule": self.mode_lists()}
        if len(inst.sites) > 1:
            names = [site.name for site in inst.sites]
            out["sites"] = [[names[s] for s in row.tolist()] for row in self.sites]
        if self.caps is not None:
            out["caps"] = [row.tolist() for row in self.caps]
        return out


def _rows(inst: Instance, rows: Rows, what: str) -> list[Sequence[Any]]:
    """Per job its row, from a list in job order or a mapping by job name (every job once, no other name)."""
    names = [job.name for job in inst.jobs]
    if isinstance(rows, Mapping):
        missing = [name for name in names if name not in rows]
        require(not missing, what, f"no entry for job(s) {', '.join(missing)}")
        unknown = sorted(set(rows) - set(names))
        require(not unknown, what, f"unknown job(s) {', '.join(map(str, unknown))}; the instance's jobs: "
                f"{', '.join(names)}")
        rows = [rows[name] for name in names]
    require(isinstance(rows, Sequence) and not isinstance(rows, str) and len(rows) == len(names), what,
            f"expected {len(names)} jobs")
    return list(rows)


def _mode_row(inst: Instance, job: Job, choices: Any) -> np.ndarray:
    where = f"schedule.{job.name}"
    arr = np.asarray(choices)
    require(arr.shape == (job.segments,), where, f"expected {job.segments} segment choices, got shape {arr.shape}")
    require(arr.size == 0 or np.issubdtype(arr.dtype, np.integer)
            or (np.issubdtype(arr.dtype, np.floating) and bool(np.all(np.isfinite(arr) & (arr == np.round(arr))))),
            where, "choices must be integers")
    require(bool(np.all((arr >= PAUSE) & (arr < job.n_modes))), where,
            f"choices must be -1 (pause) or a mode index 0..{job.n_modes - 1}")
    arr = arr.astype(np.int64)
    if job.is_finetuning:  # a pre-training job's window is the horizon
        outside = np.flatnonzero((arr != PAUSE) & ~inst.allowed_segments(job))
        if outside.size:
            release, deadline = inst.job_window(job)
            raise InputError(where, f"runs in segment {outside[0]} outside its window [{release}, {deadline}) slots "
                             "(a fine-tuning job runs only between its release and its deadline)")
    return arr


def _site_row(inst: Instance, job: Job, row: Any) -> np.ndarray:
    where = f"sites.{job.name}"
    names = [site.name for site in inst.sites]
    require(isinstance(row, (list, tuple, np.ndarray)), where, "must be a list of one site per segment")
    values = []
    for entry in row:
        if isinstance(entry, str):
            require(entry in names, where, f"unknown site {entry!r}; the sites: {', '.join(names)}")
            values.append(names.index(entry))
        else:
            require(is_integer(entry) and 0 <= int(entry) < len(names), where,
                    f"site entries must be site names or indices 0..{len(names) - 1}, got {entry!r}")
            values.append(int(entry))
    require(len(values) == job.segments, where, f"expected one site per checkpoint segment ({job.segments}), got "
            f"{len(values)} (a job is at one site per segment and moves only at a checkpoint)")
    return np.array(values, dtype=np.int64)


def _cap_row(inst: Instance, job: Job, row: Any) -> np.ndarray:
    where = f"caps.{job.name}"
    top = inst.cap_curve.levels - 1 if inst.cap_curve is not None else 0
    arr = np.asarray(row)
    require(arr.shape == (inst.slots,), where, f"expected one cap level per slot ({inst.slots}), got shape {arr.shape}")
    require(arr.size == 0 or np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating), where,
            "cap levels must be numbers")
    arr = arr.astype(float)
    require(bool(np.all(np.isfinite(arr) & (arr >= 0) & (arr <= top))), where,
            f"cap level positions must be within [0, {top}]" if inst.cap_curve is not None
            else "the instance has no cap curve: every level must be 0")
    return arr


def validate_schedule(inst: Instance, modes: Rows | Schedule, sites: Rows | None = None,
                      caps: Rows | None = None) -> Schedule:
    """The :class:`Schedule` of per-job mode rows, site rows (None: every job at its home site) and cap rows (None:
    none); InputError naming the bad entry. A fine-tuning job that runs outside its window is refused, as a mode index
    out of range is. Cap rows of level 0 only are dropped (``caps=None``)."""
    if isinstance(modes, Schedule):
        modes, sites, caps = modes.modes, modes.sites, modes.caps
    mode_rows = tuple(_mode_row(inst, job, row)
                      for job, row in zip(inst.jobs, _rows(inst, modes, "schedule"), strict=True))
    if sites is None:
        site_rows = tuple(np.full(job.segments, home, dtype=np.int64) for job, home in zip(inst.jobs, inst.home_sites,
                                                                                           strict=True))
    else:
        site_rows = tuple(_site_row(inst, job, row)
                          for job, row in zip(inst.jobs, _rows(inst, sites, "sites"), strict=True))
    cap_rows = None if caps is None else tuple(
        _cap_row(inst, job, row) for job, row in zip(inst.jobs, _rows(inst, caps, "caps"), strict=True))
    if cap_rows is not None and not any(row.any() for row in cap_rows):
        cap_rows = None
    return Schedule(modes=mode_rows, sites=site_rows, caps=cap_rows)


def read_schedule(path: str | Path, inst: Instance) -> Schedule:
    """A schedule file (:class:`aidc_env.schema.ScheduleDocument`), validated against ``inst``. Every choice must be a
    JSON integer (not a string, null, a boolean or a fraction)."""
    data = read_json_file(path, "schedule")
    doc = validate(ScheduleDocument, data if isinstance(data, Mapping) and "schedule" in data else {"schedule": data},
                   document="schedule")
    return validate_schedule(inst, doc.schedule, doc.sites, doc.caps)


def previous(first: int, row: np.ndarray) -> np.ndarray:
    """Per segment, the entry of the segment before (``first`` before segment 0)."""
    return np.concatenate(([first], row[:-1]))


def restarts(job: Job, choices: np.ndarray) -> np.ndarray:
    """Bool per segment: the job (re)starts a mode there (resume or switch), paying τ_j (one site)."""
    return (choices != PAUSE) & (choices != previous(job.initial_mode, choices))


def switches(job: Job, choices: np.ndarray) -> np.ndarray:
    """Bool per segment: the choice differs from the previous one (pauses and resumes included)."""
    return choices != previous(job.initial_mode, choices)


def moves(home: int, sites: np.ndarray) -> np.ndarray:
    """Bool per segment: the job's site differs from the previous segment's (the home site before segment 0)."""
    return sites != previous(home, sites)


def slot_choices(inst: Instance, job: Job, choices: np.ndarray) -> np.ndarray:
    """The job's entry in every slot (segment entries held over their slots)."""
    return np.repeat(choices, inst.slots_per_segment(job))
