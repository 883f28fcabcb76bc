"""``python -m aidc_env.simulate --instance FILE --schedule FILE --json``: score any schedule (one site or several)."""

import sys

from aidc_env.errors import run_cli
from aidc_env.simulator import main

if __name__ == "__main__":
    sys.exit(run_cli(main))
