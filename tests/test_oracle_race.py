"""The oracle's guard: the textbook MILP raced in a child process when the label search stalls.

Which path wins a real race depends on the machine's load, so the tests force it: a label search that
never finishes (it stops only when the race has proved the day), a race started at once, a HiGHS solve
interrupted by its check. Every test checks that no child process outlives the race.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from aidc_env.case import build_instance
from oracle import OracleModel, labeling
from oracle.labeling import LabelingOutcome
from oracle.race import PROOF, RACE_AFTER_S, TextbookRace, threshold_s
from oracle.solvers import HighsRunner

GAP = 1e-4
REPLAY_RTOL = 1e-6
CHILD_EXIT_S = 60.0
"""Generous: the child imports Pyomo before it reads its stdin's end (seconds under a loaded machine)."""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find child processes")


def race_children() -> list[int]:
    """Pids of live children of this process that run ``oracle.race``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"oracle.race" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def day():
    """The reference day at K = 4 (the textbook build proves it in about a second) and its exact optimum."""
    inst = build_instance("2048", segments=4)
    exact = OracleModel(inst, race_after_s=None).solve(mip_gap=1e-9)
    assert exact.status == "optimal" and exact.proof == "label-setting"
    return inst, exact


def test_a_stalled_label_search_is_overtaken_by_the_textbook_milp(day, monkeypatch):
    """The label search stalls (it gives up only when told that the race has proved the day): the textbook
    MILP, started at once, proves the day; the result names it, equals the label path's optimum within the
    gap and the simulator's replay of its schedule, and its child is gone."""
    inst, exact = day
    asked = []

    def stalled(search, lower, incumbent=None, *, deadline, max_labels, stop, target_usd=None, horizon_days=1):
        while not stop():
            asked.append(True)
            time.sleep(0.01)
        return LabelingOutcome("budget", None, None, lower, 0, 0.0), lower

    monkeypatch.setattr(labeling, "prove", stalled)
    r = OracleModel(inst, race_after_s=0.0).solve(time_limit_s=120)
    assert r.status == "optimal" and r.proof == PROOF == "textbook" and r.gap <= GAP, r.reason
    assert asked and r.details["race_start"] >= 0 and r.details["textbook"] > 0
    assert exact.objective_usd * (1 - 1e-9) <= r.objective_usd <= exact.objective_usd * (1 + GAP)
    assert r.best_bound_usd <= exact.objective_usd + 1e-9 * abs(exact.objective_usd)
    assert r.metrics.operating_cost_usd == pytest.approx(r.objective_usd, rel=REPLAY_RTOL)
    assert r.to_dict()["proof"] == "textbook"
    assert race_children() == []


def test_the_label_path_that_wins_stops_the_race(day):
    """A race started at once loses to the label search (milliseconds at K = 4): the child is stopped."""
    inst, exact = day
    r = OracleModel(inst, race_after_s=0.0).solve(time_limit_s=120)
    assert r.status == "optimal" and r.proof == "label-setting"
    assert r.objective_usd == exact.objective_usd
    assert race_children() == []


def test_a_race_leaves_no_process_behind_on_ctrl_c_or_when_its_parent_goes(day):
    inst, _ = day
    with pytest.raises(KeyboardInterrupt):
        with TextbookRace(inst, time_limit_s=120, mip_gap=GAP, allow_pause=True, threads=None, after_s=0.0) as race:
            while race.pid is None:
                time.sleep(0.01)
            raise KeyboardInterrupt
    assert race_children() == []
    # a parent that dies without cleaning up closes the child's stdin: the child exits by itself
    race = TextbookRace(inst, time_limit_s=120, mip_gap=GAP, allow_pause=True, threads=None, after_s=None)
    race.start()
    race._proc.stdin.close()
    assert race._proc.wait(timeout=CHILD_EXIT_S) is not None
    race.close()
    assert race_children() == []


def test_a_race_reports_the_textbook_answer_and_starts_once(day):
    inst, exact = day
    with TextbookRace(inst, time_limit_s=120, mip_gap=GAP, allow_pause=True, threads=None, after_s=None) as race:
        assert race.poll() is None and not race.proved()
        race.start()
        pid = race.pid
        race.start()  # once only
        assert race.pid == pid
        answer = race.wait()
    assert answer["status"] == "optimal" and race.proved()
    assert answer["best_bound_usd"] <= exact.objective_usd + 1e-9 * abs(exact.objective_usd)
    assert exact.objective_usd * (1 - 1e-9) <= answer["objective_usd"] <= exact.objective_usd * (1 + GAP)
    assert race_children() == []


def test_highs_stops_when_its_interrupt_check_says_so(day):
    """Branch and bound of the fast model checks the race at HiGHS's MIP interrupt points."""
    inst, _ = day
    oracle = OracleModel(inst, race_after_s=None)
    run = HighsRunner().solve(oracle.built.model, time_limit_s=60, mip_gap=1e-9, start=None, threads=None, tee=False,
                              options={}, interrupt=lambda: True)
    assert run.status == "interrupted"
    again = HighsRunner().solve(oracle.built.model, time_limit_s=60, mip_gap=GAP, start=None, threads=None, tee=False,
                                options={}, interrupt=lambda: False)
    assert again.status == "optimal"


def test_the_race_threshold_grows_with_the_day_beyond_twelve_blocks():
    assert threshold_s(RACE_AFTER_S, 4) == threshold_s(RACE_AFTER_S, 12) == RACE_AFTER_S
    assert threshold_s(RACE_AFTER_S, 96) == pytest.approx(RACE_AFTER_S * 8 ** 1.5)
    assert threshold_s(0.0, 96) == 0.0
