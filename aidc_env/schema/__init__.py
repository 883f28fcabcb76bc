"""The declared schemas of the documents a user gives: case files, instance JSON, schedule JSON and PPO configs.

Every reader validates its document here first (:func:`validate`), so that a document becomes a well-formed object
or ends in one :class:`~aidc_env.errors.InputError` naming the path of the first bad field, e.g.
``jobs[1].modes[0].gpus: must be an integer, got 'x'``. What a schema cannot state (a model's Pareto modes, a day of
the profile data, a file on disk) stays with the code that knows it and raises the same error.

The schemas: :mod:`aidc_env.schema.case` (a case file, :class:`CaseDocument`), :mod:`aidc_env.schema.instance` (the
exchange format, :class:`InstanceDocument`, and a schedule file, :class:`ScheduleDocument`), and a PPO config's from
its dataclass (:func:`validate_dataclass`); the field types and :func:`validate` in :mod:`aidc_env.schema.base`.

**Why pydantic.** The schemas are pydantic (v2) models and dataclasses rather than a JSON Schema read by
``jsonschema``: many rules of these documents compare one field with another (a job's segments divide the slots of
the day, every per-slot array has the instance's slots, a job's home site is an index of the network's sites, a
fine-tuning window lies on checkpoint boundaries), which JSON Schema cannot express, so half of the rules would stay
hand-written beside it. Pydantic declares types, required and unknown keys, ranges and lengths in the annotations
and the cross-field rules as validators next to them, in one place, and still exports the JSON Schema of each
document for outside tools (``python -m aidc_env.schema instance`` prints the exchange format's).

**Conventions.** Scalars are strict: ``"4"``, ``4.0`` and ``true`` are no integer, ``true`` is no number, an
integer is a number; NaN and infinities are refused (strict JSON has none; TOML has ``nan`` and ``inf``). Unknown
keys are refused, except in a PPO config (saved configs outlive settings that were removed) and beside a
schedule. The bounds of
:mod:`aidc_env.limits` (:func:`limit`) apply to case files and to the instance files that
:func:`aidc_env.instance.load_instance` reads; :meth:`aidc_env.instance.Instance.from_dict` checks the form only
(``limits=False``), so that hand-sized test instances round-trip.
"""

from __future__ import annotations

from typing import Any

from aidc_env.schema.base import limit, validate, validate_dataclass
from aidc_env.schema.case import CaseDocument, Energy, Facility, InferenceSpec, JobSpec, Migration, SiteSpec
from aidc_env.schema.instance import (INSTANCE_FORMAT, ForecastDocument, InstanceDocument, NetworkDocument,
                                      ScheduleDocument)


def json_schema(document: str) -> dict[str, Any]:
    """The JSON Schema of a document: ``case``, ``instance`` or ``schedule``."""
    return {"case": CaseDocument, "instance": InstanceDocument, "schedule": ScheduleDocument}[document] \
        .model_json_schema(mode="validation")


__all__ = ["INSTANCE_FORMAT", "CaseDocument", "Energy", "Facility", "ForecastDocument", "InferenceSpec",
           "InstanceDocument", "JobSpec", "Migration", "NetworkDocument", "ScheduleDocument", "SiteSpec", "json_schema",
           "limit", "validate", "validate_dataclass"]
