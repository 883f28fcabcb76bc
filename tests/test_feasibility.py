"""The feasibility precheck's time-sharing LP (HiGHS through highspy) against thresholds worked out by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from aidc_env.case import SECONDS_PER_HOUR
from aidc_env.simulator import TRANCHE_TOLERANCE
from oracle import precheck
from oracle.feasibility import _lp_feasible
from tests.conftest import mode, tiny_instance, tiny_job

ROOT = Path(__file__).resolve().parents[1]
SLOTS = 4
DAY_SECONDS = SLOTS * SECONDS_PER_HOUR  # tiny_instance's slots are one hour long
LP_REASON = "no mix of joint modes"


def tranche(rate_tokens_per_s: float) -> float:
    """The tranche whose counted tokens (tolerance off) equal an average rate held all day."""
    return rate_tokens_per_s * DAY_SECONDS / (1.0 - TRANCHE_TOLERANCE)


def day_instance(jobs, n_gpus: int):
    return tiny_instance(jobs, price=[10.0] * SLOTS, shape=[0.1] * SLOTS, n_gpus=n_gpus)


@pytest.mark.parametrize("need, feasible", [
    ((0.5, 0.5), True),     # f1 = f2 = 1/2
    ((0.3, 0.7), True),     # f = (0.3, 0.7)
    ((0.5, 0.6), False),    # f1 + f2 >= 1.1 > 1
    ((0.0, 1.0), True),     # f = (0, 1)
    ((0.0, 1.01), False),   # f2 > 1
])
def test_lp_on_a_hand_made_matrix(need, feasible):
    # f ≥ 0, f1 + f2 = 1, f1 ≥ need1, f2 ≥ need2  (written as −f ≤ −need).
    assert _lp_feasible(-np.eye(2), -np.array(need)) is feasible


@pytest.mark.parametrize("share_a, share_b, feasible", [
    (0.5, 0.49, True), (0.5, 0.51, False), (0.3, 0.69, True), (0.3, 0.71, False), (0.0, 0.7, True),
])
def test_two_jobs_that_cannot_run_together(share_a, share_b, feasible):
    # Each job has one 3-GPU mode of 10 tokens/s; the pool of 4 GPUs holds one at a time. By hand, the time
    # fractions f_A + f_B ≤ 1 must reach the shares of the day: feasible iff share_A + share_B ≤ 1. The average-GPU
    # check (3 · (share_A + share_B) ≤ 4) passes all of these, so only the LP decides.
    rate = 10.0
    jobs = [tiny_job(name, segments=2, modes=(mode(3, rate, 900.0),), initial_mode=0,
                     tranche_tokens=tranche(share * rate)) for name, share in (("A", share_a), ("B", share_b))]
    check = precheck(day_instance(jobs, n_gpus=4))
    assert sum(need.min_average_gpus for need in check.jobs) <= 4
    assert check.infeasible is not feasible
    assert (LP_REASON in check.reason) is not feasible


@pytest.mark.parametrize("rate_b, feasible", [(5.9, True), (6.0, True), (6.1, False), (6.5, False)])
def test_a_mix_of_three_joint_states(rate_b, feasible):
    # A: 2 GPUs at 10 tokens/s or 4 GPUs at 16; B: 3 GPUs at 12; pool 5. The joint states that fit give the
    # rate pairs (10, 12), (16, 0), (10, 0), (0, 12), (0, 0); the upper-right edge of their hull runs from
    # (16, 0) to (10, 12). With A at an average 13 tokens/s, half the day at (16, 0) and half at (10, 12):
    # B's best average is 6 tokens/s. The average-GPU check passes (A >= 3, B >= 3 · 6.5/12 = 1.625; 4.625 ≤ 5).
    jobs = [tiny_job("A", segments=2, modes=(mode(2, 10.0, 800.0), mode(4, 16.0, 1800.0)), initial_mode=1,
                     tranche_tokens=tranche(13.0)),
            tiny_job("B", segments=2, modes=(mode(3, 12.0, 1200.0),), initial_mode=0, tranche_tokens=tranche(rate_b))]
    check = precheck(day_instance(jobs, n_gpus=5))
    assert check.jobs[0].min_average_gpus == pytest.approx(3.0)
    assert check.jobs[1].min_average_gpus == pytest.approx(3.0 * rate_b / 12.0)
    assert check.infeasible is not feasible
    assert (LP_REASON in check.reason) is not feasible


def test_precheck_prints_nothing():
    # highspy prints a banner on a process's first Highs(); it must not reach stdout (the CLIs print JSON there).
    code = "from aidc_env.case import build_instance; from oracle import precheck; precheck(build_instance('2048'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout == ""
