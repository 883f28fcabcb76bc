"""Named datasets: the hourly data shipped in the package, by name.

Every reader of an hourly source takes a dataset name or a file path: :func:`aidc_env.profiles.load_profiles`,
:func:`aidc_env.site_profiles.load_site_profiles` and :func:`aidc_env.forecasts.load_forecasts`, and through them
every ``--profiles`` and ``--forecasts`` option, :func:`aidc_env.case.build_instance` / ``build_instances`` and
the envs' ``profiles=`` argument. :func:`resolve` tells the two apart, for all of them:

- a name of :data:`DATASETS` (text, e.g. ``"caiso-2023"``) is that packaged file, which needs no folder beside the
  repository; a name wins over a file of the same name in the working directory (give ``./caiso-2023`` for that);
- anything else is a path to a CSV of the canonical form (``.gz`` and other compressed files by their suffix);
- a bare word (no ``/``, no ``.``) that is neither a name nor an existing file is an InputError listing the names.

The files and their provenance: ``aidc_env/data/README.md``. Command line: ``python -m aidc_env.datasets [--json]``
lists the names, kinds, files, coverage and provenance.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from aidc_env.errors import CliParser, InputError, require, run_cli
from aidc_env.io import dumps_json

PACKAGE = "aidc_env"
DATA_DIR = "data"
PROFILES, FORECASTS = "profiles", "forecasts"
KINDS = (PROFILES, FORECASTS)
"""A profiles dataset holds actual prices and renewables (:mod:`aidc_env.profiles`); a forecasts dataset day-ahead
forecasts (:mod:`aidc_env.forecasts`)."""

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
"""A bare word: text that cannot be meant as a path with a folder or a suffix."""

YEAR_CSV = "caiso_2023_hourly.csv.gz"
DAYS_CSV = "caiso_2023_days.csv"
DAYS_META = "caiso_2023_days.json"
SITE_DAYS_CSV = "caiso_2023_site_days.csv"
SITE_DAYS_META = "caiso_2023_site_days.json"
DAYAHEAD_CSV = "caiso_2023_dayahead_hourly.csv.gz"
DAP_COMMIT = "dd8bf4cb204ae0752b3baff0704b80c208292191"
"""The commit of nmadev/CAISO-EnergyStorage whose ``src/data/CAISO_DAP.csv`` gave the day-ahead LMP."""


@dataclass(frozen=True)
class Coverage:
    """What a dataset covers, as its reader sees it (checked against the files by the tests)."""

    first_day: str
    last_day: str
    days: int
    """Complete days (loaded)."""
    skipped: int
    """Days with rows but a gap (skipped by the reader, with the reason)."""
    price_days: int | None = None
    """Forecasts: the days with a complete supplied price forecast (``price_forecast_usd_per_mwh``)."""
    price_first_day: str | None = None
    price_last_day: str | None = None

    def text(self) -> str:
        line = f"{self.days} complete days, {self.first_day} to {self.last_day}"
        line += f"; {self.skipped} days skipped (a gap or no data)" if self.skipped else ""
        if self.price_days is not None:
            line += (f"; day-ahead LMP (supplied price) on {self.price_days} of them, {self.price_first_day} to "
                     f"{self.price_last_day}")
        return line


@dataclass(frozen=True)
class Dataset:
    """One packaged dataset: a file of ``aidc_env/data`` and what it is."""

    name: str
    kind: str
    """:data:`PROFILES` or :data:`FORECASTS`."""
    file: str
    """The file in ``aidc_env/data`` the reader loads."""
    description: str
    provenance: str
    coverage: Coverage
    meta: str | None = None
    """Profiles: a sidecar JSON whose ``renewable_capacity_mw`` normalises solar + wind (else the file's peak)."""
    site_file: str | None = None
    """Profiles: the file the sites case reads (three zone prices, solar and wind apart); None: none."""
    site_meta: str | None = None
    """Profiles: a sidecar JSON with the solar and wind peaks of the sites case (else the site file's peaks)."""

    def path(self, file: str | None = None) -> Any:
        """The packaged file (a :class:`importlib.resources.abc.Traversable`), by default :attr:`file`."""
        return resources.files(PACKAGE).joinpath(DATA_DIR, file or self.file)

    @contextlib.contextmanager
    def local_path(self, file: str | None = None) -> Iterator[Path]:
        """The packaged file as a path on disk for the ``with`` block (readers infer gzip from its suffix)."""
        with resources.as_file(self.path(file)) as path:
            yield Path(path)

    def read_meta(self, file: str) -> dict[str, Any]:
        """A sidecar JSON of this dataset; InputError naming the kind if it is unreadable."""
        try:
            meta = json.loads(self.path(file).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise InputError(self.kind, f"dataset {self.name}: {file} unreadable ({err})") from None
        require(isinstance(meta, dict), self.kind, f"dataset {self.name}: {file} is not a JSON object")
        return meta

    def size_bytes(self) -> int:
        """The size of :attr:`file` as packaged (compressed if it is)."""
        with self.local_path() as path:
            return path.stat().st_size


_REAL_TIME = ("CAISO OASIS real-time LMP (PRC_RTM_LAP) and EIA-930 (CISO) data, as collected in the public "
              "repositories xluo06/GreenH2 and Cagataykacademy/caiso-nuclear-bess-dispatch")

DATASETS: Mapping[str, Dataset] = MappingProxyType({d.name: d for d in (
    Dataset(
        name="caiso-2023", kind=PROFILES, file=YEAR_CSV, site_file=YEAR_CSV,
        description="CAISO 2023, every hour: real-time LMP at the SCE load zone (price_usd_per_mwh), PG&E and "
                    "SDG&E ($/MWh); CAISO solar, wind and demand (MW). The sites case reads it too.",
        provenance=_REAL_TIME + "; values as in the project's source CSV",
        coverage=Coverage(first_day="2023-01-08", last_day="2023-12-30", days=351, skipped=14)),
    Dataset(
        name="caiso-2023-days", kind=PROFILES, file=DAYS_CSV, meta=DAYS_META, site_file=SITE_DAYS_CSV,
        site_meta=SITE_DAYS_META,
        description="24 representative days of caiso-2023 (the default without --profiles); the sites case reads "
                    "the same days with the three zone prices",
        provenance="rows of caiso-2023 picked by scripts/make_representative_days.py; "
                   "solar + wind normalised by the full year's peak",
        coverage=Coverage(first_day="2023-01-18", last_day="2023-12-14", days=24, skipped=0)),
    Dataset(
        name="caiso-2023-dayahead", kind=FORECASTS, file=DAYAHEAD_CSV,
        description="CAISO day-ahead solar, wind (SP15) and load forecasts (MW), with the day-ahead market LMP "
                    "($/MWh) of SCE (price_forecast_usd_per_mwh, the supplied price forecast), PG&E and SDG&E",
        provenance="CAISO OASIS day-ahead forecasts as collected in the public repository yijint/RL_battery; the "
                   f"day-ahead LMP from nmadev/CAISO-EnergyStorage src/data/CAISO_DAP.csv at {DAP_COMMIT}, joined "
                   "by scripts/make_dayahead_lmp.py",
        coverage=Coverage(first_day="2023-03-13", last_day="2023-11-14", days=247, skipped=118, price_days=167,
                          price_first_day="2023-06-01", price_last_day="2023-11-14")),
)})
"""The packaged datasets by name."""

DEFAULT_PROFILES = "caiso-2023-days"
"""The dataset read when no profiles are given (its source is then called ``bundled``, as it always was)."""


def names(kind: str | None = None) -> list[str]:
    """The dataset names (of one kind), in registry order."""
    return [name for name, found in DATASETS.items() if kind is None or found.kind == kind]


def _known(kind: str) -> str:
    return f"the {kind} datasets: {', '.join(names(kind))} (python -m aidc_env.datasets lists them)"


def resolve(source: str | os.PathLike[str], kind: str) -> Dataset | Path:
    """The dataset ``source`` names, or ``source`` as a path (not checked: the reader says if it is missing).

    InputError(``kind``, ...) if ``source`` names a dataset of the other kind, or is a bare word that is neither a
    dataset name nor an existing file; both messages list the names of ``kind``.
    """
    require(kind in KINDS, "kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    if isinstance(source, str) and source in DATASETS:
        found = DATASETS[source]
        require(found.kind == kind, kind, f"{source} is a {found.kind} dataset, not {kind}; {_known(kind)}")
        return found
    path = Path(source)
    if isinstance(source, str) and NAME_PATTERN.match(source) and not path.exists():
        raise InputError(kind, f"{source!r} is neither a dataset nor a file; {_known(kind)}")
    return path


@contextlib.contextmanager
def source_file(source: str | os.PathLike[str], kind: str, *, site: bool = False
                ) -> Iterator[tuple[Path, str, Dataset | None]]:
    """For the ``with`` block: (the file on disk, its source name, the dataset or None) of a dataset name (its
    ``site_file`` with ``site``) or a path (FileNotFoundError if missing; InputError naming ``kind`` if not a file)."""
    found = resolve(source, kind)
    if isinstance(found, Dataset):
        require(not site or found.site_file is not None, kind, f"dataset {found.name} has no table for the sites case")
        with found.local_path(found.site_file if site else None) as file:
            yield file, found.name, found
        return
    if not found.exists():
        raise FileNotFoundError(2, "No such file", str(found))
    require(found.is_file(), kind, f"{found} is not a file")
    yield found, str(found), None


# ------------------------------------------------------------------------------------- Command line


def summary() -> list[dict[str, Any]]:
    """A JSON-ready description of every dataset."""
    return [{"name": d.name, "kind": d.kind, "file": f"{PACKAGE}/{DATA_DIR}/{d.file}", "bytes": d.size_bytes(),
             "sites": d.site_file is not None, "description": d.description,
             "coverage": {k: v for k, v in asdict(d.coverage).items() if v is not None},
             "provenance": d.provenance} for d in DATASETS.values()]


def _format(info: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for entry in info:
        found = DATASETS[entry["name"]]
        default = " (default)" if found.name == DEFAULT_PROFILES else ""
        lines += [f"{found.name}{default}: {found.kind}, {entry['file']} ({entry['bytes']:,} bytes)",
                  f"  {found.description}", f"  coverage: {found.coverage.text()}", f"  provenance: {found.provenance}"]
    lines.append("A path to any CSV of the canonical form works wherever a name does (aidc_env/data/README.md).")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m aidc_env.datasets",
                       description="List the packaged datasets that --profiles and --forecasts take by name.")
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
    args = parser.parse_args(argv)
    info = summary()
    print(dumps_json(info, indent=2) if args.json else _format(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
