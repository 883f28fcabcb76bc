"""``python -m aidc_env.modes``: see :mod:`aidc_env.modes.cli`."""

from aidc_env.errors import run_cli
from aidc_env.modes.cli import main

raise SystemExit(run_cli(main))
