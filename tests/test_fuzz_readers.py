"""Every reader of a user's document, fuzzed: a document ends in a valid result or one InputError, never another
exception; on the command line a refused document ends with exit code 2 and exactly one line on stderr.

The documents are those of ``tests/fuzz_documents.py`` (bundled cases, instances, schedules, PPO configs and hourly
CSVs mutated at any depth, generated tables and broken texts): a few dozen per reader in a test run. The long run
feeds thousands per reader, counts what each document became and prints the counts (a crash fails the run at its
end, after the counts)::

    python -m pytest tests/test_fuzz_readers.py --fuzz-examples 3000 -k read_or_refused
"""

from __future__ import annotations

import collections
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from aidc_env import case as case_cli
from aidc_env import forecasts as forecasts_cli
from aidc_env import profiles as profiles_cli
from aidc_env import simulator as simulate_cli
from aidc_env import tariffs as tariffs_cli
from aidc_env.errors import EXIT_BAD_INPUT, run_cli
from tests.fuzz_documents import READERS, file_of, instances, json_text, outcome, strategies, toml_text

EXAMPLES = 60
"""Documents per reader in a test run."""
CLI_EXAMPLES = 15
STRATEGIES = strategies()
COUNTS: dict[str, collections.Counter] = {}
"""Per reader, the outcomes of the documents fed to it (printed after a long run)."""


@pytest.fixture(scope="module", autouse=True)
def counts_table(request):
    """After a long run (``--fuzz-examples``): the table of documents, valid, refused and crashed per reader."""
    yield
    if request.config.getoption("--fuzz-examples") and COUNTS:
        lines = [f"{'reader':<14}{'documents':>10}{'valid':>8}{'refused':>9}{'crashed':>9}{'seconds':>9}"]
        lines += [f"{reader:<14}{sum(counts[k] for k in ('valid', 'refused', 'crashed')):>10}{counts['valid']:>8}"
                  f"{counts['refused']:>9}{counts['crashed']:>9}{counts['seconds']:>9}"
                  for reader, counts in COUNTS.items()]
        with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
            print("\n" + "\n".join(lines))


@pytest.mark.parametrize("reader", list(READERS))
def test_a_document_is_read_or_refused_with_one_input_error(reader, request):
    long_run = request.config.getoption("--fuzz-examples")
    counts = COUNTS.setdefault(reader, collections.Counter())

    @settings(max_examples=long_run or EXAMPLES, deadline=None, database=None, derandomize=bool(long_run),
              phases=[Phase.generate] if long_run else list(Phase), suppress_health_check=list(HealthCheck))
    @given(doc=STRATEGIES[reader])
    def read(doc: Any) -> None:
        result = outcome(READERS[reader], doc)
        counts[result] += 1
        if result == "crashed" and not long_run:
            READERS[reader](doc)  # the exception and its traceback, for hypothesis to shrink and show

    start = time.perf_counter()
    read()
    counts["seconds"] = round(time.perf_counter() - start)
    assert counts["crashed"] == 0, f"{reader}: {counts['crashed']} documents crashed the reader"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """The day instance and its fixed schedule as files: the other half of the simulator's command line."""
    from aidc_env.baselines import fixed_schedule

    folder = tmp_path_factory.mktemp("cli")
    inst = instances()["day"]
    (folder / "instance.json").write_text(inst.to_json())
    (folder / "schedule.json").write_text(str([list(map(int, row)) for row in fixed_schedule(inst)]))
    return {"instance": str(folder / "instance.json"), "schedule": str(folder / "schedule.json")}


def _command(reader: str, path: str, files: dict[str, str]) -> tuple[Any, list[str]]:
    return {
        "case": (case_cli.main, ["--case", path]),
        "instance": (simulate_cli.main, ["--instance", path, "--schedule", files["schedule"]]),
        "schedule": (simulate_cli.main, ["--instance", files["instance"], "--schedule", path]),
        "profile_csv": (profiles_cli.main, ["--profiles", path]),
        "forecast_csv": (forecasts_cli.main, ["--forecasts", path]),
        "tariff": (tariffs_cli.main, ["--tariff", path]),
    }[reader]


@pytest.mark.parametrize("reader", ["case", "instance", "schedule", "profile_csv", "forecast_csv", "tariff"])
def test_a_refused_document_ends_the_command_with_exit_2_and_one_line(reader, files, capsys):
    @settings(max_examples=CLI_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(doc=STRATEGIES[reader])
    def run(doc: Any) -> None:
        kind, text = doc if isinstance(doc, tuple) else ("text", doc)
        if kind == "doc":  # a document as a value: its file
            text = toml_text(text) if reader == "case" and isinstance(text, dict) else json_text(text)
        if kind == "sites":
            return  # the schedule of a sites instance: the simulator's half here is the day instance
        as_file = text if reader.endswith("_csv") else ("day" if reader == "schedule" else "text", text)
        if outcome(READERS[reader], as_file) == "valid" and reader in ("case", "instance"):
            return  # a valid case or instance would be resolved or need its own schedule: the reader said enough
        path = file_of(text, {"case": ".toml", "instance": ".json", "schedule": ".json", "tariff": ".json"}.get(reader,
                                                                                                           ".csv"))
        main, argv = _command(reader, str(path), files)
        capsys.readouterr()
        code = run_cli(main, argv)
        err = capsys.readouterr().err
        if code != 0:
            lines = err.splitlines()
            assert code == EXIT_BAD_INPUT and len(lines) == 1 and lines[0].startswith("error: "), (code, err)

    run()
