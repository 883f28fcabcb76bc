"""The slot groups of the grid's side (oracle.grid_rows): alike slots share their cap variables, without changing the
optimum, and a past fixed unlike over a group rebuilds the model per slot."""

from __future__ import annotations

import numpy as np
import pytest

from aidc_env.case import build_instance, load_case
from aidc_env.instance import Instance
from aidc_env.schema.case import CallSpec, PowerCaps
from oracle.data import oracle_data
from oracle.formulations import build_textbook
from oracle.grid_rows import slot_groups
from oracle.solvers import HighsRunner

EXACT_GAP = 0.0
OBJECTIVE_RTOL = 1e-7
"""Both models solved to a zero gap: their optima agree to the solver's tolerances."""
EVENING_CALL = CallSpec(program="bip", start_hour=16.0, hours=5.0, reduction_share=0.25, notice_hours=2.0)


@pytest.fixture(scope="module")
def capped() -> Instance:
    """The 2048 case with caps and an evening call, at K = 4 (six-hour segments of hourly prices; no price below zero)."""
    case = load_case("2048").with_overrides(power_caps=PowerCaps(), grid_calls=(EVENING_CALL,))
    return build_instance(case, day="2023-01-16", profiles="caiso-2023", segments=4)


def _optimum(inst: Instance, group: bool) -> tuple[float, int]:
    built = build_textbook(oracle_data(inst, joint=False), group_slots=group)
    run = HighsRunner().solve(built.model, time_limit_s=120, mip_gap=EXACT_GAP, start=None, threads=None, tee=False,
                              options={})
    assert run.status == "optimal"
    return run.objective, len(built.model.u)


def test_alike_slots_share_their_caps_and_the_optimum_is_unchanged(capped):
    groups = slot_groups(oracle_data(capped, joint=False))
    # per six-hour segment: its first slot (the restart), the rest of its first hour, and each later hour
    assert len(set(groups)) == 4 * (1 + 1 + 5)
    grouped, per_slot = _optimum(capped, True), _optimum(capped, False)
    assert grouped[1] * 96 == per_slot[1] * len(set(groups))
    assert grouped[0] == pytest.approx(per_slot[0], rel=OBJECTIVE_RTOL)


def test_a_past_unlike_over_a_group_rebuilds_the_model_per_slot(capped):
    data = oracle_data(capped, joint=False)
    built = build_textbook(data)
    schedule = [[job.initial_mode] * job.segments for job in capped.jobs]
    caps = np.zeros((len(capped.jobs), capped.slots))
    caps[:, :4] = 1.0  # alike over the first hour's groups
    built.fix_before(schedule, caps.tolist(), 4)
    assert len(built.model.u) < len(build_textbook(data, group_slots=False).model.u)
    caps[0, 2] = 1.5  # unlike within the first hour
    built.fix_before(schedule, caps.tolist(), 4)
    assert len(built.model.u) == len(build_textbook(data, group_slots=False).model.u)
    assert built.model.u[0, 2, schedule[0][0], 2].value == pytest.approx(0.5)
