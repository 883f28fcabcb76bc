"""Input errors and the command-line wrapper that turns them into exit code 2.

Every check of user input (case files, CSV profiles, overrides, instance JSON) raises
:class:`InputError` naming the offending field. Command-line entry points run through
:func:`run_cli`, which prints exactly one line on stderr and exits with code 2 instead of
showing a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

EXIT_BAD_INPUT = 2


class InputError(ValueError):
    """A bad input value. ``field`` names what was wrong (e.g. ``jobs[0].segments``)."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


def require(condition: bool, field: str, message: str) -> None:
    """Raise :class:`InputError` for ``field`` unless ``condition`` holds."""
    if not condition:
        raise InputError(field, message)


def run_cli(main: Callable[[Sequence[str] | None], int | None], argv: Sequence[str] | None = None) -> int:
    """Run a CLI ``main``; bad input ends with one line on stderr and exit code 2."""
    try:
        return int(main(argv) or 0)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except FileNotFoundError as err:
        print(f"error: file not found: {err.filename}", file=sys.stderr)
        return EXIT_BAD_INPUT
