"""Input errors and the command-line wrapper that turns them into exit code 2.

Every check of user input (case files, CSV profiles, overrides, instance JSON; the documents' schemas:
:mod:`aidc_env.schema`) raises :class:`InputError` naming the offending field. Command-line entry points build their
parser with :class:`CliParser` (argparse's own errors become one line too) and run through :func:`run_cli`, which
prints exactly one line on stderr and exits with code 2 instead of showing a traceback; Ctrl-C ends with one line
and exit code 130.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import numbers
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

MAX_MACHINE_INT = 2**63 - 1
"""Largest integer of a machine type (int64): a number beyond ±this is no count, index or seed of any input, and
numpy, HiGHS and torch cannot hold it (an OverflowError, or an object array, where they meet it)."""
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
"""128 + SIGINT (2): the shell's code for a command ended by Ctrl-C."""


class InputError(ValueError):
    """A bad input value. ``field`` names what was wrong (e.g. ``jobs[0].segments``)."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        """Pickled with both fields, so that an error raised in a worker (process or Ray) reaches the CLI whole."""
        return type(self), (self.field, self.message)


def require(condition: bool, field: str, message: str) -> None:
    """Raise :class:`InputError` for ``field`` unless ``condition`` holds."""
    if not condition:
        raise InputError(field, message)


def require_unique(names: Sequence[Any], field: str, what: str) -> None:
    """Raise :class:`InputError` for ``field`` naming the first name that ``names`` holds twice (``what``: e.g.
    "jobs", for "two jobs named 'LLM-A'")."""
    seen: set[Any] = set()
    for name in names:
        require(name not in seen, field, f"two {what} named {name!r}: names must be unique")
        seen.add(name)


def is_integer(value: Any) -> bool:
    """An integer (Python or numpy), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_finite(value: Any) -> bool:
    """A finite real number (Python or numpy), not a bool (an integer of any size is finite: no float conversion,
    which overflows beyond 1e308)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return isinstance(value, numbers.Integral) or math.isfinite(value)


def require_date(text: Any, field: str) -> None:
    """Raise :class:`InputError` for ``field`` unless ``text`` is a date YYYY-MM-DD."""
    try:
        dt.date.fromisoformat(text)
    except (TypeError, ValueError):
        raise InputError(field, f"{text!r} is not a valid date YYYY-MM-DD") from None


def require_number(value: Any, field: str, low: float, high: float, *, integer: bool = False,
                   low_open: bool = False) -> None:
    """Raise :class:`InputError` unless ``value`` is a finite number (an integer if asked) in [low, high]
    (``(low, high]`` with ``low_open``). The bounds come from named constants in :mod:`aidc_env.limits`."""
    kind = "an integer" if integer else "a finite number"
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    try:  # numpy scalars
        is_number = is_number or (hasattr(value, "dtype") and value.dtype.kind in "iuf")
    except AttributeError:
        pass
    # Integers are compared as they are (exactly, whatever their size): a float conversion overflows beyond 1e308.
    whole = is_number and is_integer(value)
    ok = is_number and (whole or (math.isfinite(value) and (float(value).is_integer() or not integer)))
    ok = ok and (value > low if low_open else value >= low) and value <= high
    bound = f"{'>' if low_open else '>='} {number_text(low)} and <= {number_text(high)}"
    require(bool(ok), field, f"must be {kind} {bound}, got {number_text(value) if is_integer(value) else repr(value)}")


def number_text(value: float) -> str:
    """A number as a message shows it: an integer in full (by its size beyond 40 digits), a float by ``:g``."""
    if is_integer(value) and abs(value) >= 1e16:  # no float conversion: it overflows beyond 1e308
        digits = len(str(abs(int(value)))) if abs(value) < 10**4000 else None  # str() refuses > 4300 digits
        return str(int(value)) if digits is not None and digits <= 40 else \
            f"{'a negative' if value < 0 else 'an'} integer of {digits or 'over 4000'} digits"
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e16 else f"{value:g}"


class CliParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``error: ...``, exit 2) instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        raise InputError("arguments", message)


def run_cli(main: Callable[[Sequence[str] | None], int | None], argv: Sequence[str] | None = None) -> int:
    """Run a CLI ``main``; bad input ends with one line on stderr and exit code 2, Ctrl-C with exit code 130."""
    try:
        return int(main(argv) or 0)
    except InputError as err:
        message = f"error: {err}"
    except FileNotFoundError as err:
        message = f"error: file not found: {err.filename or err}"
    except (IsADirectoryError, NotADirectoryError, PermissionError) as err:
        message = f"error: {err.filename or 'path'}: {err.strerror or err}"
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(" ".join(message.split()), file=sys.stderr)  # one line, whatever the message holds
    return EXIT_BAD_INPUT


def exit_at_once(code: int) -> NoReturn:
    """End a CLI process with ``code``; after Ctrl-C (130) at once, its streams flushed, without the interpreter's
    finalisation: a solver's native worker thread still alive then would abort the process (SIGABRT) instead. For a
    command that runs no worker processes (their clean-up is the finalisation it skips)."""
    if code == EXIT_INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


__all__ = ["EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "MAX_MACHINE_INT", "CliParser", "InputError", "exit_at_once",
           "is_finite", "is_integer", "number_text", "require", "require_date", "require_number", "require_unique",
           "run_cli"]
