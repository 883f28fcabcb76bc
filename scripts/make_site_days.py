"""Make the bundled three-node table of the sites case from the full-year hourly file.

    python scripts/make_site_days.py [--source PATH] [--out aidc_env/data]

The same representative days as ``aidc_env/data/caiso_2023_days.csv`` (made by
``scripts/make_representative_days.py``), with the columns the sites case reads (:mod:`aidc_env.site_profiles`):
``timestamp_utc, local_start, price_usd_per_mwh`` (SCE), ``price_pge_usd_per_mwh``, ``price_sdge_usd_per_mwh``,
``solar_mw, wind_mw``; cell text copied verbatim. The sidecar ``caiso_2023_site_days.json`` carries the full
year's solar and wind peaks, which normalise each plant's shape, so that bundled and full-year runs agree.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from aidc_env.errors import require, run_cli
from aidc_env.io import atomic_write_text, dumps_json
from aidc_env.site_profiles import BUNDLED_SITE_CSV, BUNDLED_SITE_META, SITE_COLUMNS, load_site_profiles

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO_ROOT / "aidc_env" / "data" / "caiso_2023_hourly.csv.gz"
"""The full year as packaged (the dataset ``caiso-2023``)."""
DEFAULT_OUT = REPO_ROOT / "aidc_env" / "data"
DAYS_CSV = "caiso_2023_days.csv"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/make_site_days.py", description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=str(DEFAULT_SOURCE))
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    out = Path(args.out)
    source = pd.read_csv(args.source, dtype=str, keep_default_na=False)
    days = sorted(set(pd.read_csv(out / DAYS_CSV, dtype=str).local_start.str[:10]))
    rows = source[source.local_start.str[:10].isin(days)].loc[:, list(SITE_COLUMNS)]
    require(len(rows) >= len(days) * 23, "source", f"{args.source} lacks some of the {len(days)} bundled days")
    csv_text = rows.to_csv(index=False, lineterminator="\n")
    full = load_site_profiles(args.source)
    atomic_write_text(out / BUNDLED_SITE_CSV, csv_text)
    meta = {
        "description": "The bundled representative CAISO 2023 days with the three load-zone prices and solar and "
                       "wind apart, for the sites case (aidc_env/site_profiles.py)",
        "generator": "scripts/make_site_days.py",
        "csv": BUNDLED_SITE_CSV,
        "csv_sha256": hashlib.sha256(csv_text.encode()).hexdigest(),
        "solar_peak_mw": full.solar_peak_mw,
        "wind_peak_mw": full.wind_peak_mw,
        "peak_basis": "max of each column (clipped at 0) over every complete day of the full 2023 year",
        "days": days,
    }
    atomic_write_text(out / BUNDLED_SITE_META, dumps_json(meta, indent=1))
    check = load_site_profiles()
    require(check.dates() == days and not check.skipped, "out", "the written table does not load all its days")
    for day in days:
        require(all(np.array_equal(getattr(check.day(day), c), getattr(full.day(day), c))
                    for c in SITE_COLUMNS[2:]), "out", f"{day} differs from the source")
    print(f"wrote {len(days)} days to {out / BUNDLED_SITE_CSV}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
