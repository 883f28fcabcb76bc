"""The documents of the reader fuzz (``tests/test_fuzz_readers.py``): hypothesis strategies of every kind of document
a user gives, and the readers they are fed to.

The documents: the bundled cases and instances, schedules, PPO configs and hourly CSVs, mutated at any depth (a value
of the wrong type, a huge integer, NaN and infinities, unicode, a key removed or added, an entry duplicated, a table
emptied, an array cut or grown), documents generated from the readers' keys, and texts cut and flipped byte by byte
(malformed TOML, JSON and CSV).
"""

from __future__ import annotations

import copy
import csv
import datetime as dt
import functools
import gzip
import io
import json
import math
import tempfile
import tomllib
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from aidc_env.errors import InputError

Document = Any
"""A document as a reader takes it: a Python value (a table as TOML or JSON gives it) or the text of a file."""

# ------------------------------------------------------------------------------------------ values

WEIRD = [None, True, False, 0, -1, 1, 7, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**30, 0.5, -0.0, 1e-320, 1e308,
         -1e308, math.nan, math.inf, -math.inf, "", "x", "1", "-1", "1e3", "nan", "2023-02-30", "2023-06-17",
         "ünïcødé ☃ 𝔘", "\x00", "../..", "a" * 300, [], [1], [[]], ["x", 1], {}, {"a": 1}, {"": None},
         [[[[[[[]]]]]]], dt.date(2023, 6, 17), dt.datetime(2023, 6, 17, 1, 2)]
"""Values that are wrong somewhere: every type, the edges of the machine types, NaN and infinities, unicode."""

scalars = st.one_of(st.sampled_from(WEIRD), st.integers(), st.floats(), st.text(max_size=20), st.booleans())
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)


def _children(node: Any) -> list[Any]:
    return list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []


@st.composite
def mutate(draw: Any, doc: Any, *, keys: list[str]) -> Any:
    """``doc`` with one change at a node reached by a random walk from the root (so that every depth is reached)."""
    doc = copy.deepcopy(doc)
    parent, key = None, None
    node = doc
    while _children(node) and (parent is None or draw(st.integers(0, 3)) > 0):
        parent, key = node, draw(st.sampled_from(_children(node)))
        node = node[key]
    action = draw(st.sampled_from(["replace", "replace", "remove", "add", "duplicate", "empty", "number", "tweak",
                                   "tweak"]))
    if parent is None or action == "add":
        target = node if isinstance(node, (dict, list)) else doc
        if isinstance(target, dict):
            target[draw(st.sampled_from([*keys, "colour", "", "ünï"]))] = draw(values)
        elif isinstance(target, list):
            target.append(draw(st.sampled_from(target)) if target and draw(st.booleans()) else draw(values))
        return doc
    if action == "remove":
        del parent[key]
    elif action == "duplicate" and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(node))
    elif action == "empty":
        parent[key] = type(node)() if isinstance(node, (dict, list, str)) else None
    elif action == "number" and isinstance(node, (int, float)) and not isinstance(node, bool):
        parent[key] = draw(st.sampled_from([0, -node, node * 1000, node + 1, node / 3, node * 1e300, -(10**20)]))
    elif action == "tweak":  # a change of the same type, often still a valid document
        parent[key] = (not node if isinstance(node, bool) else int(node * draw(st.sampled_from([0.5, 2])))
                       if isinstance(node, int) else node * draw(st.floats(0.5, 2)) if isinstance(node, float)
                       else f"{node}-b" if isinstance(node, str) else node)
    else:
        parent[key] = draw(values)
    return doc


@st.composite
def documents(draw: Any, seeds: list[Any], keys: list[str]) -> Any:
    """A seed mutated up to four times, or (one in six) a table made of the readers' keys and any values."""
    if draw(st.integers(0, 5)) == 0:
        return draw(st.dictionaries(st.sampled_from(keys), values, max_size=8))
    doc = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(0, 4))):
        doc = draw(mutate(doc, keys=keys))
    return doc


@st.composite
def broken_text(draw: Any, text: str) -> bytes:
    """``text`` (UTF-8) cut, with bytes flipped, inserted or removed: mostly malformed files."""
    data = bytearray(text.encode())
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, max(0, len(data) - 1)))
        kind = draw(st.sampled_from(["cut", "flip", "insert", "remove"]))
        if kind == "cut":
            del data[where:]
        elif kind == "flip" and data:
            data[where] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[where:where] = draw(st.sampled_from([b"\x00", b"\xff", b"\xef\xbb\xbf", b"[", b"{", b'"', b",",
                                                      b"\n", b"=", b"nan", b"1e400", b"9" * 40, b"[" * 5000]))
        else:
            del data[where:where + draw(st.integers(1, 20))]
    return bytes(data)


def keys_of(*docs: Any) -> list[str]:
    """Every key of the documents, at any depth."""
    found: set[str] = set()
    stack = list(docs)
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found |= {k for k in node if isinstance(k, str)}
        stack.extend(node.values() if isinstance(node, dict) else node if isinstance(node, list) else ())
    return sorted(found)


# ------------------------------------------------------------------------------------------ writers


def toml_text(doc: dict[str, Any]) -> str:
    """A TOML document of ``doc``: one ``key = value`` line per top-level key, tables inline (None left out)."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return "nan" if v != v else "inf" if v == math.inf else "-inf" if v == -math.inf else repr(v)
        if isinstance(v, (int, dt.date)):
            return v.isoformat() if isinstance(v, dt.date) else str(v)
        if isinstance(v, str):
            return json.dumps(v, ensure_ascii=False)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v if x is not None) + "]"
        return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)} = {value(x)}" for k, x in v.items()
                               if x is not None) + "}"
    return "".join(f"{json.dumps(str(k), ensure_ascii=False)} = {value(v)}\n" for k, v in doc.items() if v is not None)


def json_text(doc: Any) -> str:
    """JSON of ``doc`` as any writer might make it (NaN and infinities as their non-standard tokens)."""
    return json.dumps(doc, default=str, allow_nan=True)


def file_of(text: str | bytes, suffix: str) -> Path:
    """A file in this run's temporary folder holding ``text`` (the same name each time: one file per reader)."""
    path = _folder() / f"document{suffix}"
    path.write_bytes(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    return path


@functools.cache
def _folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="fuzz-readers-"))


# ------------------------------------------------------------------------------------------ seeds


@functools.cache
def case_seeds() -> list[dict[str, Any]]:
    folder = resources.files("aidc_env") / "cases"
    return [tomllib.loads((folder / f"{name}.toml").read_text()) for name in ("2048", "fleet", "sites3", "sites-fleet")]


@functools.cache
def instances() -> dict[str, Any]:
    """A day instance, one with forecasts, a fleet and a sites instance (objects, for the schedules too)."""
    import numpy as np

    from aidc_env.case import build_instance
    from aidc_env.information import Forecast

    day = build_instance("2048", segments=4)
    rng = np.random.default_rng(0)
    forecast = Forecast(rng.uniform(0, 100, day.slots), rng.uniform(0, 1, day.slots), rng.uniform(0, 100, (2, 96)),
                        rng.uniform(0, 1, (2, 96)), persistence_price_usd_per_mwh=rng.uniform(0, 100, 96),
                        issue_outlook_price_usd_per_mwh=rng.uniform(0, 100, (1, 96)))
    return {"day": day, "forecast": day.with_forecasts([forecast]), "fleet": build_instance("fleet"),
            "sites": build_instance("sites-fleet")}


@functools.cache
def instance_seeds() -> list[dict[str, Any]]:
    return [json.loads(inst.to_json()) for inst in instances().values()]


@functools.cache
def schedule_seeds() -> list[Any]:
    from aidc_env.baselines import fixed_schedule
    from aidc_env.schedule import validate_schedule

    day, sites = instances()["day"], instances()["sites"]
    rows = [list(map(int, row)) for row in fixed_schedule(day)]
    site_schedule = validate_schedule(sites, fixed_schedule(sites))
    return [["day", rows], ["day", {job.name: row for job, row in zip(day.jobs, rows, strict=True)}],
            ["day", {"schedule": rows}], ["sites", json.loads(json.dumps(site_schedule.to_dict(sites)))],
            ["sites", {"schedule": site_schedule.mode_lists(), "sites": site_schedule.site_lists()}]]


@functools.cache
def config_seeds() -> list[dict[str, Any]]:
    from agents.ppo_config import HYPERPARAMETERS, PPOConfig

    full = json.loads(json.dumps(PPOConfig().to_dict()))
    return [full, {"config": full}, {"config": {k: full[k] for k in HYPERPARAMETERS}}]


@functools.cache
def tariff_seeds() -> list[dict[str, Any]]:
    """The bundled tariffs' URDB documents, as a URDB API response and as a single item."""
    from aidc_env.tariffs import BUNDLED

    data = resources.files("aidc_env").joinpath("data")
    items = [json.loads(data.joinpath(name).read_text()) for name in BUNDLED.values()]
    return [*items, {"items": [items[0]]}]


def _csv_rows(text: str, days: int) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    complete = [r for r in rows[1:] if all(cell for cell in r)]
    first = complete[0][1][:10]
    dates = sorted({r[1][:10] for r in complete if r[1][:10] >= first})[:days]
    return [rows[0], *(r for r in complete if r[1][:10] in dates)]


@functools.cache
def csv_seeds(kind: str) -> list[list[list[str]]]:
    """Rows (header first) of two or three complete days of a bundled source: ``profiles``, ``sites`` or
    ``forecasts``."""
    data = resources.files("aidc_env") / "data"
    if kind == "forecasts":
        text = gzip.decompress((data / "caiso_2023_dayahead_hourly.csv.gz").read_bytes()).decode()
        rows = list(csv.reader(io.StringIO(text)))
        june = [r for r in rows[1:] if r[1].startswith("2023-06-1") and r[1][:10] <= "2023-06-12"]
        return [[rows[0], *june], [rows[0][:5], *(r[:5] for r in june)]]
    name = "caiso_2023_days.csv" if kind == "profiles" else "caiso_2023_site_days.csv"
    return [_csv_rows((data / name).read_text(), days) for days in (1, 3)]


@st.composite
def csv_documents(draw: Any, kind: str) -> str | bytes:
    """A seed CSV with cells, rows or columns changed (or its text broken byte by byte)."""
    rows = copy.deepcopy(draw(st.sampled_from(csv_seeds(kind))))
    for _ in range(draw(st.integers(1, 4))):
        r = draw(st.integers(0, len(rows) - 1))
        c = draw(st.integers(0, len(rows[r]) - 1)) if rows[r] else 0
        kind_of = draw(st.sampled_from(["cell", "cell", "cell", "drop_row", "dup_row", "drop_col", "swap", "header"]))
        if kind_of == "cell" and rows[r]:
            rows[r][c] = draw(st.one_of(st.sampled_from(
                ["", "nan", "NaN", "inf", "-inf", "1e400", "-1e308", "9" * 400, "0x10", "1,5", '"', "n/a", "null",
                 "2023-06-17T07:30:00Z", "2023-13-01 00:00-0800", "2023-06-17 25:00-0700", "2023-06-17 00:00+9999",
                 "ünï", "\x00", " 1 ", "1e-320", "-0"]), st.text(max_size=12), st.floats().map(repr)))
        elif kind_of == "drop_row" and len(rows) > 1:
            del rows[r]
        elif kind_of == "dup_row":
            rows.insert(r, list(rows[r]))
        elif kind_of == "drop_col" and rows[0]:
            for row in rows:
                del row[c:c + 1]
        elif kind_of == "swap" and len(rows) > 2:
            s = draw(st.integers(1, len(rows) - 1))
            rows[r], rows[s] = rows[s], rows[r]
        elif kind_of == "header" and rows[0]:
            rows[0][c] = draw(st.sampled_from(["", "x", rows[0][(c + 1) % len(rows[0])], rows[0][c].upper()]))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return draw(broken_text(out.getvalue())) if draw(st.integers(0, 4)) == 0 else out.getvalue()


# ------------------------------------------------------------------------------------------ readers


def _text_or_doc(doc_strategy: Any, text_of: Callable[[Any], str]) -> Any:
    """Documents as Python values (read by the reader's dict entry) or as file texts (whole or broken)."""
    return st.one_of(doc_strategy.map(lambda d: ("doc", d)), doc_strategy.map(lambda d: ("text", text_of(d))),
                     doc_strategy.flatmap(lambda d: broken_text(text_of(d))).map(lambda t: ("text", t)))


def read_case(item: tuple[str, Any]) -> Any:
    from aidc_env.case import case_from_dict, load_case

    kind, doc = item
    return case_from_dict(doc) if kind == "doc" else load_case(file_of(doc, ".toml"))


def read_instance(item: tuple[str, Any]) -> Any:
    from aidc_env.instance import Instance, load_instance

    kind, doc = item
    return Instance.from_dict(doc) if kind == "doc" else load_instance(file_of(doc, ".json"))


def read_schedule(item: tuple[str, Any]) -> Any:
    from aidc_env.schedule import read_schedule as read

    inst = instances()["sites" if item[0] == "sites" else "day"]
    return read(file_of(item[1], ".json"), inst)


def read_config(item: tuple[str, Any]) -> Any:
    import train
    from agents.ppo_config import PPOConfig

    kind, doc = item
    if kind == "doc":
        return PPOConfig.from_dict(doc.get("config", doc) if isinstance(doc, dict) else doc)
    return train.parse_args(["--config", str(file_of(doc, ".json")), "--out", str(_folder() / "run")])


def read_tariff(item: tuple[str, Any]) -> Any:
    """A tariff document, then its bill of a flat day (a tariff that loads must also bill)."""
    from aidc_env.tariffs import Tariff, bill, load_tariff

    kind, doc = item
    tariff = Tariff.from_urdb(doc) if kind == "doc" else load_tariff(file_of(doc, ".json"))
    return bill(tariff, [1000.0] * 96, dt.date(2023, 7, 3))


def read_csv(loader: str) -> Callable[[Any], Any]:
    def read(text: str | bytes) -> Any:
        if loader == "forecasts":
            from aidc_env.forecasts import load_forecasts
            return load_forecasts(file_of(text, ".csv"))
        if loader == "sites":
            from aidc_env.site_profiles import load_site_profiles
            return load_site_profiles(file_of(text, ".csv"))
        from aidc_env.profiles import load_profiles
        return load_profiles(file_of(text, ".csv"))
    return read


def strategies() -> dict[str, Any]:
    """Per reader, the strategy of its documents."""
    case_keys = keys_of(*case_seeds())
    instance_keys = keys_of(*instance_seeds())
    schedule = st.sampled_from(schedule_seeds()).flatmap(
        lambda seed: documents([seed[1]], ["schedule", "sites", "LLM-A", "LLM-B"]).map(lambda d: (seed[0], d)))
    return {
        "case": _text_or_doc(documents(case_seeds(), case_keys), toml_text),
        "instance": _text_or_doc(documents(instance_seeds(), instance_keys), json_text),
        "schedule": st.one_of(schedule.map(lambda s: (s[0], json_text(s[1]))),
                              schedule.flatmap(lambda s: broken_text(json_text(s[1])).map(lambda t: (s[0], t)))),
        "config": _text_or_doc(documents(config_seeds(), keys_of(*config_seeds())), json_text),
        "profile_csv": csv_documents("profiles"),
        "site_csv": csv_documents("sites"),
        "forecast_csv": csv_documents("forecasts"),
        "tariff": _text_or_doc(documents(tariff_seeds(), keys_of(*tariff_seeds())), json_text),
    }


READERS: dict[str, Callable[[Any], Any]] = {
    "case": read_case, "instance": read_instance, "schedule": read_schedule, "config": read_config,
    "profile_csv": read_csv("profiles"), "site_csv": read_csv("sites"), "forecast_csv": read_csv("forecasts"),
    "tariff": read_tariff,
}


def outcome(reader: Callable[[Any], Any], doc: Any) -> str:
    """``valid``, ``refused`` (one InputError of one line) or ``crashed`` (anything else)."""
    try:
        reader(doc)
    except InputError:
        return "refused"
    except Exception:  # noqa: BLE001 -- what the fuzzer looks for
        return "crashed"
    return "valid"
