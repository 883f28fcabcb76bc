"""What evaluate.py and the studies share about running long jobs without losing them.

- :class:`RowsOnDisk`: the rows finished so far, rewritten atomically as a CSV at most every ``min_interval_s`` and once
  more at the end or on Ctrl-C;
- :func:`update_docs_section`: rewrite one study section of a committed markdown file, only when the section's recorded
  day set is the run's;
- :func:`result_folder` / :func:`result_file`: each run its own results (a new numbered folder by default, e.g.
  ``runs/eval/2048_3``; an earlier run's results in a given ``--out`` are refused, never overwritten).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from aidc_env.errors import InputError, require
from aidc_env.io import (atomic_path, atomic_write_text, check_output_file, check_output_folder, path_component,
                         read_input_text, write_destination)

ROWS_WRITE_INTERVAL_S = 2.0
"""Rows finished are rewritten to disk at most this often (and always at the end or on Ctrl-C)."""


class RowsOnDisk:
    """Rows of a table written to ``path`` atomically as they come, at most every ``min_interval_s``."""

    def __init__(self, path: Path, rows: Callable[[], pd.DataFrame] | None = None,
                 min_interval_s: float = ROWS_WRITE_INTERVAL_S):
        self.path = Path(path)
        self.rows: list[dict[str, Any]] = []
        self._frame = rows
        self._interval = min_interval_s
        self._last = -float("inf")

    def add(self, new_rows: Sequence[dict[str, Any]] = ()) -> None:
        self.rows.extend(new_rows)
        if time.monotonic() - self._last >= self._interval:
            self.write()

    def frame(self) -> pd.DataFrame:
        return self._frame() if self._frame is not None else pd.DataFrame(self.rows)

    def write(self) -> None:
        frame = self.frame()
        if len(frame):
            with atomic_path(self.path) as temp:
                frame.to_csv(temp, index=False)
        self._last = time.monotonic()


# ------------------------------------------------------------------------------------------ result folders


def result_folder(out: str | os.PathLike[str] | None, parent: str | os.PathLike[str], name: str,
                  results: Sequence[str], field: str = "out", *, replace: bool = False) -> Path:
    """The folder a run writes its ``results`` (file names or glob patterns) to; checked, not created.

    Without ``out``: ``parent/<name>_<N>``, N one more than the highest ``<name>_<k>`` already there (1 at first). With
    ``out``: that folder, refused (:class:`InputError` naming ``field``) if it already holds one of ``results`` of an
    earlier run, unless ``replace`` (a run meant to rewrite committed results, e.g. ``--update-docs``).
    """
    if out is None:
        path_component(name, field)
        parent = Path(parent)
        numbered = re.compile(rf"{re.escape(name)}_(\d+)")
        taken = [int(m.group(1)) for p in (parent.iterdir() if parent.is_dir() else ())
                 if (m := numbered.fullmatch(p.name))]
        folder = parent / f"{name}_{max(taken, default=0) + 1}"
    else:
        folder = Path(out)
        if folder.is_dir() and not replace:
            found = sorted({p.name for pattern in results for p in folder.glob(pattern)})
            flag = field if field.startswith("-") else f"--{field}"
            require(not found, field, f"{folder} already holds a run's results ({', '.join(found[:3])}"
                    f"{', ...' if len(found) > 3 else ''}); give another {flag} or none (a new numbered folder)")
    return check_output_folder(folder, field)


def result_file(path: str | os.PathLike[str], field: str) -> Path:
    """An output file of a run's results: refused if it is an existing regular file (an earlier run's results); a device
    or FIFO (``/dev/null``) is written through."""
    path = check_output_file(path, field)
    _, through = write_destination(path)
    require(through or not path.exists(), field, f"{path} already holds a run's results; give another --{field}")
    return path


# ------------------------------------------------------------------------------------------ docs sections

SECTION_START = re.compile(r"<!-- study:(?P<name>[\w-]+)(?: days=(?P<days>\S+))? -->")


def day_set_key(days: Sequence[str]) -> str:
    """A short key of a day set: its size and a hash of the sorted days (``351:1a2b3c4d``)."""
    unique = sorted(set(days))
    return f"{len(unique)}:{hashlib.sha256(','.join(unique).encode()).hexdigest()[:8]}"


def update_docs_section(results_md: Path, study: str, body: str | None, days: Sequence[str]) -> None:
    """Replace (or append) the study's section of ``results_md`` atomically, if its day set is the run's.

    The start marker records the day set (``<!-- study:days days=351:1a2b3c4d -->``); a section over another day set (or
    none recorded) is refused with :class:`InputError`. With ``body`` None, only check (write nothing).
    """
    key = day_set_key(days)
    text = read_input_text(results_md, "update-docs") if results_md.exists() else "# Results\n"
    end = f"<!-- /study:{study} -->"
    found = [m for m in SECTION_START.finditer(text) if m.group("name") == study]
    require(len(found) <= 1, "update-docs", f"{results_md} has {len(found)} sections of the {study} study")
    block = f"<!-- study:{study} days={key} -->\n{body}\n{end}"
    if not found:
        if body is not None:
            atomic_write_text(results_md, text.rstrip() + f"\n\n{block}\n")
        return
    start = found[0]
    recorded = start.group("days")
    if recorded != key:
        raise InputError("update-docs", f"the {study} section of {results_md} is over "
                         f"{_describe(recorded)}, this run over {len(set(days))} days ({key}); not replaced")
    stop = text.find(end, start.end())
    require(stop >= 0, "update-docs", f"{results_md}: the {study} section has no end marker {end}")
    if body is not None:
        atomic_write_text(results_md, text[:start.start()] + block + text[stop + len(end):])


def _describe(recorded: str | None) -> str:
    return "an unrecorded day set" if recorded is None else f"{recorded.split(':')[0]} days ({recorded})"


__all__ = ["RowsOnDisk", "day_set_key", "result_file", "result_folder", "update_docs_section"]
