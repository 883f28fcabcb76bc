"""Files a user would hate to lose: atomic writes, strict JSON and output paths checked before the work.

- :func:`atomic_write_text` / :func:`atomic_write_bytes`: a temporary file in the same folder, flushed and
  fsynced, then ``os.replace`` onto the target: a reader sees the old file or the new one, never half of one
  (also after a crash or Ctrl-C in the middle of a write). Only a regular file (or an absent path) is replaced: a
  symlink to a regular file has its target replaced (the link stays), and anything else -- ``/dev/null``, a device,
  a FIFO, a symlink to one -- is opened and written through, never replaced (:func:`write_destination`).
- :func:`atomic_path`: the same for libraries that write to a path themselves (SB3 ``model.save``,
  matplotlib ``savefig``, ``DataFrame.to_csv``): yields a temporary path with the target's suffix.
- :func:`dumps_json` / :func:`write_json`: strict JSON (RFC 8259): NaN and ±Infinity become ``null``
  (callers report a status beside them), and ``allow_nan=False`` makes any that slip through an error.
- :func:`check_output_folder` / :func:`check_output_file`: refuse an output that cannot be written, before
  any work starts, without leaving anything behind.
- :func:`path_component`: a name that becomes part of a path (a case's name in ``runs/ppo-<case>``) is a plain file
  name, never ``..`` nor a folder.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from aidc_env.errors import MAX_MACHINE_INT, InputError, require

TEMP_PREFIX = ".tmp-"
"""Prefix of the temporary files (hidden; a crash may leave one, never a half-written target)."""


# ------------------------------------------------------------------------------------------ atomic writes


def write_destination(target: str | os.PathLike[str]) -> tuple[Path, bool]:
    """(the path a write to ``target`` goes to, whether it is written through rather than replaced).

    A regular file or an absent path is replaced atomically; a symlink to a regular file has that file replaced (the
    link stays a link). Anything else that exists -- a character or block device such as ``/dev/null``, a FIFO, a
    socket, a symlink to one of those -- is written through: opened and written, never replaced (replacing it would
    turn ``/dev/null`` into a regular file).
    """
    target = Path(target)
    try:
        info = os.stat(target)  # follows symlinks
    except FileNotFoundError:
        return target, os.path.islink(target)  # a dangling symlink: written through (its target is created)
    except OSError:  # e.g. a file where a folder is expected: the write itself says so
        return target, False
    if not stat.S_ISREG(info.st_mode):
        return target, not stat.S_ISDIR(info.st_mode)
    if os.path.islink(target):
        real = Path(os.path.realpath(target))
        if real.is_file() and os.path.samefile(real, target):
            return real, False
        return target, True
    return target, False


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``target`` (same suffix); on success it replaces ``target`` atomically (or is
    written through to it: :func:`write_destination`).

    On an exception (Ctrl-C included) the temporary file is removed and ``target`` is left as it was.
    """
    target, through = write_destination(target)
    if through:
        with _through_path(target) as temp:
            yield temp
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{target.name}.", suffix=target.suffix, dir=target.parent)
    os.close(fd)
    temp = Path(name)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(temp, 0o666 & ~umask)  # mkstemp's 0600 would otherwise become the target's mode
    try:
        yield temp
        with open(temp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _through_path(target: Path) -> Iterator[Path]:
    """A temporary file (in the temporary folder, same suffix) whose bytes are written through to ``target`` on
    success; removed in any case."""
    fd, name = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=target.suffix)
    os.close(fd)
    temp = Path(name)
    try:
        yield temp
        with open(temp, "rb") as source, open(target, "wb") as sink:
            shutil.copyfileobj(source, sink)
    finally:
        temp.unlink(missing_ok=True)


def atomic_write_bytes(target: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``target`` atomically; returns the target path."""
    with atomic_path(target) as temp:
        temp.write_bytes(data)
    return Path(target)


def atomic_write_text(target: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``target`` atomically; returns the target path."""
    return atomic_write_bytes(target, text.encode("utf-8"))


# ------------------------------------------------------------------------------------------ strict JSON


def finite_or_none(data: Any) -> Any:
    """``data`` with every non-finite float (NaN, ±inf) replaced by None; numpy scalars and arrays as Python."""
    if isinstance(data, (bool, np.bool_)):
        return bool(data)
    if isinstance(data, (int, np.integer)):
        return int(data)
    if isinstance(data, (float, np.floating)):
        value = float(data)
        return value if math.isfinite(value) else None
    if isinstance(data, np.ndarray):
        return finite_or_none(data.tolist())
    if isinstance(data, Mapping):
        return {str(k): finite_or_none(v) for k, v in data.items()}
    return [finite_or_none(v) for v in data] if isinstance(data, (list, tuple)) else data


def dumps_json(data: Any, indent: int | None = 1) -> str:
    """Strict JSON text: no NaN/Infinity tokens (they become null)."""
    return json.dumps(finite_or_none(data), indent=indent, allow_nan=False)


def write_json(target: str | os.PathLike[str], data: Any, indent: int | None = 1) -> Path:
    """Write strict JSON to ``target`` atomically."""
    return atomic_write_text(target, dumps_json(data, indent) + "\n")


def _reject_constant(token: str) -> Any:
    raise InputError("json", f"non-standard JSON token {token}")


def _machine_int(text: str) -> int:
    """A JSON integer that fits a machine integer (int64); a longer one is refused before ``int`` reads it (Python
    refuses more than 4300 digits with a ValueError of its own)."""
    digits = text.lstrip("-")
    require(len(digits) <= len(str(MAX_MACHINE_INT)) and abs(int(text)) <= MAX_MACHINE_INT, "json",
            f"the integer {text if len(digits) <= 40 else text[:12] + f'... ({len(digits)} digits)'} is beyond any "
            f"machine integer (at most {MAX_MACHINE_INT} in size)")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    require(math.isfinite(value), "json", f"the number {text[:40]} is beyond any float (about 1.8e308 at most)")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        require(key not in data, "json", f"the key {key!r} appears twice in one object")
        data[key] = value
    return data


def loads_json(text: str, field: str) -> Any:
    """Parse strict JSON; errors are :class:`InputError` naming ``field``.

    Refused, each with one line: NaN/Infinity tokens, numbers beyond a float (``1e400``) or a machine integer
    (:data:`~aidc_env.errors.MAX_MACHINE_INT`), a key twice in one object (JSON keeps the last one silently),
    nesting too deep for the parser, an empty text.
    """
    require(bool(text.strip()), field, "empty: no JSON value")
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=_machine_int, parse_float=_finite_float,
                          object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as err:
        raise InputError(field, f"not valid JSON ({err.msg} at line {err.lineno})") from None
    except RecursionError:
        raise InputError(field, "not valid JSON here (nested too deeply)") from None
    except InputError as err:
        raise InputError(field, err.message) from None


def read_json_file(path: str | os.PathLike[str], field: str) -> Any:
    """Read a strict JSON file given by the user; a missing file, a folder or bad JSON is an InputError."""
    return loads_json(read_input_text(path, field), field)


def read_input_text(path: str | os.PathLike[str], field: str) -> str:
    """The text of a file given by the user; a missing file, a folder or undecodable bytes is an InputError."""
    file = Path(path)
    require(file.exists(), field, f"no such file {file}")
    require(file.is_file(), field, f"{file} is not a file")
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(field, f"{file} is not UTF-8 text") from None
    except OSError as err:
        raise InputError(field, f"cannot read {file}: {err.strerror}") from None


# ------------------------------------------------------------------------------------------ output paths

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
"""A name that may be part of a path: letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit
(so never ``.``, ``..``, hidden, absolute or with a folder), at most 100 characters."""


def path_component(name: Any, field: str) -> str:
    """``name`` if it is a safe file name (:data:`SAFE_NAME`), else :class:`InputError` naming ``field``: a name that
    becomes part of an output path (``runs/ppo-<case>``) must not lead outside its folder."""
    require(isinstance(name, str) and SAFE_NAME.fullmatch(name) is not None, field, "must be a plain name of letters, "
            f"digits, '.', '_' and '-' (starting with a letter or digit, at most 100 characters), got {name!r}")
    return name


def safe_name(text: str) -> str:
    """``text`` made a :data:`SAFE_NAME` (other characters become ``_``), e.g. a case file's stem as its default
    name."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text).lstrip("._-")[:100] or "case"


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_output_folder(folder: str | os.PathLike[str], field: str) -> Path:
    """Refuse (InputError) an output folder that is a file or cannot be created and written; creates nothing."""
    folder = Path(folder)
    require(not folder.exists() or folder.is_dir(), field, f"{folder} exists and is not a folder")
    base = _nearest_existing(folder)
    require(base.is_dir(), field, f"{base} is not a folder, so {folder} cannot be created")
    try:  # a probe file: os.access says yes to root on read-only and virtual file systems
        fd, probe = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=base)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise InputError(field, f"cannot write in {base} ({err.strerror})") from None
    return folder


def check_output_file(path: str | os.PathLike[str], field: str, *, overwrite: bool = True) -> Path:
    """Refuse an output file whose folder cannot be written, that is a folder, or (``overwrite=False``) exists.
    A device or FIFO (``/dev/null``) is accepted if it can be written: it is written through."""
    path = Path(path)
    require(not path.is_dir(), field, f"{path} is a folder, not a file")
    require(overwrite or not path.exists(), field, f"{path} already exists")
    target, through = write_destination(path)
    if through and path.exists():
        require(os.access(target, os.W_OK), field, f"cannot write to {path}")
        return path
    check_output_folder(target.parent, field)
    return path


__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text", "check_output_file", "check_output_folder",
           "dumps_json", "finite_or_none", "loads_json", "path_component", "read_input_text", "safe_name",
           "read_json_file", "write_destination", "write_json"]
