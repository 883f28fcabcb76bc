"""The env replays its recorded trajectories bit for bit (``tests/golden``; re-record with
``python -m tests.golden.record`` only when the dynamics change on purpose)."""

from __future__ import annotations

import pytest

from tests.golden.record import SPECS, load, make_env, play


@pytest.mark.parametrize("name", sorted(SPECS))
def test_recorded_trajectories_replay_bit_for_bit(name):
    golden = load(name)
    env = make_env(golden["spec"])
    for seed, episode in zip(golden["spec"]["seeds"], golden["episodes"], strict=True):
        replay = play(env, seed, actions=[step["action"] for step in episode["steps"]])
        assert replay["reset_obs"] == episode["reset_obs"]
        assert replay["reset_info"] == episode["reset_info"]
        for k, (got, want) in enumerate(zip(replay["steps"], episode["steps"], strict=True)):
            assert got == want, (name, seed, k)
        assert replay["schedule"] == episode["schedule"]
        assert replay.get("sites") == episode.get("sites")
