"""The machinery of the documents' schemas: strict field types, the bounds of :mod:`aidc_env.limits`, and
:func:`validate`, which turns the first validation error into one :class:`~aidc_env.errors.InputError` line naming
the field's path."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import operator
import types
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, Strict, TypeAdapter,
                      ValidationError, ValidationInfo, create_model)

from aidc_env.errors import InputError, is_integer, number_text, require
from aidc_env.hourly import is_valid_date
from aidc_env.limits import (MAX_GPUS, MAX_HORIZON_DAYS, MAX_IDLE_VALUE_USD_PER_GPU_HOUR, MAX_KW_PER_GPU,
                             MAX_LINK_GBPS, MAX_PRICE_USD_PER_MWH, MAX_PUE, MAX_RENEWABLE_CAPACITY_MW,
                             MAX_RENEWABLE_RATIO, MAX_TRANCHE_TOKENS)
from aidc_env.site_profiles import PLANTS, PRICE_NODES

MINUTES_PER_HOUR = 60.0

# ------------------------------------------------------------------------------------------ field types

CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)
Int = Annotated[int, Strict()]
Float = Annotated[float, Strict()]
Str = Annotated[str, Strict()]
Bool = Annotated[bool, Strict()]
Name = Annotated[Str, Field(min_length=1)]


def limit(high: float, *, absolute: bool = False) -> AfterValidator:
    """The bound ``value <= high`` (``|value| <= high`` with ``absolute``; every entry of a list) of a constant of
    :mod:`aidc_env.limits`, checked unless the validation is asked for no limits (``context={"limits": False}``)."""
    def check(value: Any, info: ValidationInfo) -> Any:
        if (info.context or {}).get("limits", True):
            for i, entry in enumerate(value) if isinstance(value, list) else ((None, value),):
                if (abs(entry) if absolute else entry) > high:
                    raise InputError("" if i is None else f"[{i}]", f"must be {'|value| ' if absolute else ''}<= "
                                     f"{number_text(high)}, got {shown(entry)}")
        return value
    return AfterValidator(check)


def _date(text: str) -> str:
    require(is_valid_date(text), "", f"{text!r} is not a valid date YYYY-MM-DD")
    return text


Day = Annotated[Str, BeforeValidator(lambda v: v.isoformat() if type(v) is dt.date else v), AfterValidator(_date)]
"""A date YYYY-MM-DD (a TOML date too)."""
Gpus = Annotated[Int, Field(ge=1), limit(MAX_GPUS)]
Pue = Annotated[Float, Field(ge=1), limit(MAX_PUE)]
KwPerGpu = Annotated[Float, Field(ge=0), limit(MAX_KW_PER_GPU)]
Ratio = Annotated[Float, Field(ge=0), limit(MAX_RENEWABLE_RATIO)]
Cost = Annotated[Float, Field(ge=0), limit(MAX_PRICE_USD_PER_MWH)]
"""A PPA price or a curtailment penalty ($/MWh)."""
Capacity = Annotated[Float, Field(gt=0), limit(MAX_RENEWABLE_CAPACITY_MW)]
Link = Annotated[Float, Field(gt=0), limit(MAX_LINK_GBPS)]
Share = Annotated[Float, Field(ge=0, le=1)]
Horizon = Annotated[Int, Field(ge=1), limit(MAX_HORIZON_DAYS)]
IdleValue = Annotated[Float, Field(ge=0), limit(MAX_IDLE_VALUE_USD_PER_GPU_HOUR)]
Tokens = Annotated[Float, Field(ge=0), limit(MAX_TRANCHE_TOKENS)]
Prices = Annotated[list[Float], Field(min_length=1), limit(MAX_PRICE_USD_PER_MWH, absolute=True)]
"""Per slot, a price ($/MWh, may be negative)."""
Shapes = Annotated[list[Share], Field(min_length=1)]
"""Per slot, a capacity factor in [0, 1]."""
Node = Literal[tuple(PRICE_NODES)]
Plant = Literal[PLANTS]


class Table(BaseModel):
    model_config = CONFIG


# ------------------------------------------------------------------------------------------ configs


def validate_dataclass(cls: type, data: Any, document: str) -> Any:
    """An instance of the dataclass ``cls`` from a JSON object of its fields, each of the type its annotation states
    (scalars strict, unknown keys ignored; what is absent keeps its default)."""
    model = _dataclass_model(cls)
    doc = validate(model, data, document=document, where=document)
    return cls(**{name: getattr(doc, name) for name in doc.model_fields_set})


@functools.cache
def _dataclass_model(cls: type) -> type[BaseModel]:
    hints = typing.get_type_hints(cls)
    fields = {f.name: (_strict(hints[f.name]), f.default if f.default is not dataclasses.MISSING else
                       Field(default_factory=f.default_factory)) for f in dataclasses.fields(cls) if f.init}
    return create_model(f"{cls.__name__}Document", __config__=ConfigDict(extra="ignore", allow_inf_nan=False), **fields)


def _strict(tp: Any) -> Any:
    """``tp`` with its scalar types (int, float, str, bool) strict, at any depth."""
    if tp in (int, float, str, bool):
        return Annotated[tp, Strict()]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return functools.reduce(operator.or_, [_strict(a) for a in args])
    return origin[tuple(_strict(a) for a in args)] if origin in (list, dict, tuple) else tp


# ------------------------------------------------------------------------------------------ validation

_TAGS = ("<list>", "<object>")
"""The tags of a union of a list and an object (a schedule's rows): no part of a field's path."""


def validate(tp: Any, data: Any, *, document: str, where: str = "", limits: bool = True) -> Any:
    """``data`` validated as ``tp`` (a document model); the first error as one :class:`InputError` naming its path
    (after ``where``; the ``document`` itself if the error is at its root). ``limits=False``: no bounds of
    :mod:`aidc_env.limits`."""
    try:
        return _adapter(tp).validate_python(data, context={"limits": limits})
    except ValidationError as err:
        raise _input_error(tp, err.errors(include_url=False)[0], document, where) from None


@functools.cache
def _adapter(tp: Any) -> TypeAdapter:
    return TypeAdapter(tp)


_MESSAGES = {
    "missing": "missing", "missing_argument": "missing", "extra_forbidden": "unknown key",
    "unexpected_keyword_argument": "unknown key", "int_type": "must be an integer", "float_type": "must be a number",
    "finite_number": "must be a finite number", "string_type": "must be a string",
    "bool_type": "must be true or false", "list_type": "must be a list", "dict_type": "must be a table (an object)",
    "model_type": "must be a table (an object)", "dataclass_type": "must be a table (an object)",
    "literal_error": "must be {expected}", "greater_than_equal": "must be >= {ge}", "greater_than": "must be > {gt}",
    "less_than_equal": "must be <= {le}", "less_than": "must be < {lt}", "string_too_short": "must not be empty",
    "too_short": "must have at least {min_length} entries", "too_long": "must have at most {max_length} entries",
}


def _input_error(tp: Any, error: dict[str, Any], document: str, where: str) -> InputError:
    loc = [part for part in error["loc"] if part not in _TAGS]
    path = where
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    ctx = error.get("ctx") or {}
    inner = ctx.get("error")
    if isinstance(inner, InputError):
        field = inner.field
        path += field if field[:1] in ("", ".", "[") or not path else f".{field}"
        return InputError(path or document, inner.message)
    kind = error["type"]
    if kind not in _MESSAGES:
        return InputError(path or document, error["msg"][:1].lower() + error["msg"][1:])
    message = _MESSAGES[kind].format(**{k: number_text(v) if isinstance(v, (int, float)) else v
                                        for k, v in ctx.items()})
    if kind in ("extra_forbidden", "unexpected_keyword_argument"):
        known = _keys_at(tp, loc[:-1])
        return InputError(path, f"{message} (known: {', '.join(known)})" if known else message)
    if kind not in ("missing", "missing_argument"):
        value = error["input"]
        message += f", got {shown(value)}" if kind != "float_type" or not is_integer(value) else \
            f", got {shown(value)} (beyond any float)"
    return InputError(path or document, message)


def shown(value: Any) -> str:
    """``value`` as an error message shows it: numbers in full (an integer of many digits by its size), tables and
    lists by their kind, other values by their (shortened) repr."""
    if is_integer(value) or isinstance(value, float):
        return number_text(value)
    if isinstance(value, (dict, list, tuple)):
        return "a table" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _keys_at(tp: Any, loc: list[Any]) -> list[str] | None:
    """The keys a document of type ``tp`` accepts at the table ``loc`` (None if that is no table of known keys)."""
    for part in [*loc, None]:
        while typing.get_origin(tp) in (Annotated, Union, types.UnionType):
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            fields = {name: f.annotation for name, f in tp.model_fields.items()}
        else:
            fields = typing.get_type_hints(tp, include_extras=True) if dataclasses.is_dataclass(tp) else None
        if part is None:
            return list(fields) if fields is not None else None
        origin = typing.get_origin(tp)
        tp = typing.get_args(tp)[-1] if origin in (list, dict) else fields.get(part) if fields else None
    return None
