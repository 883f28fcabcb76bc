"""Training checkpoints: written atomically, found newest first, and a corrupt one skipped with a warning.

A checkpoint is ``<run>/checkpoints/ppo_<steps>_steps.zip`` (SB3's naming), written through a temporary
file and ``os.replace`` so that a crash or Ctrl-C never leaves a half-written zip under that name. A run
resumes from the newest checkpoint that loads; one that does not (truncated by a full disk, corrupted
by hand) is reported in one line on stderr and the next older one is tried.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aidc_env.errors import InputError
from aidc_env.io import atomic_path

CHECKPOINT_PREFIX = "ppo"
CHECKPOINT_PATTERN = re.compile(rf"{CHECKPOINT_PREFIX}_(\d+)_steps\.zip")


def checkpoint_path(folder: Path, steps: int) -> Path:
    return Path(folder) / f"{CHECKPOINT_PREFIX}_{steps}_steps.zip"


def checkpoints_newest_first(folder: Path) -> list[Path]:
    """The checkpoints of a run folder, the most steps first."""
    found = []
    for path in Path(folder).glob(f"{CHECKPOINT_PREFIX}_*_steps.zip"):
        match = CHECKPOINT_PATTERN.fullmatch(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found, reverse=True)]


def newest_checkpoint(folder: Path) -> Path | None:
    """The checkpoint with the most steps (whether it loads or not)."""
    paths = checkpoints_newest_first(folder)
    return paths[0] if paths else None


def save_model_atomically(model: Any, path: Path) -> Path:
    """``model.save`` through a temporary file beside ``path`` (suffix .zip kept, so SB3 adds none)."""
    with atomic_path(path) as temp:
        model.save(temp)
    return Path(path)


def save_checkpoint(model: Any, folder: Path) -> Path:
    """Save ``model`` as the checkpoint of its current step count; returns its path."""
    return save_model_atomically(model, checkpoint_path(folder, int(model.num_timesteps)))


def load_newest_good(folder: Path, load: Callable[[Path], Any]) -> tuple[Any, Path]:
    """``load`` the newest checkpoint that loads; each one that does not is reported in one line on stderr."""
    for path in checkpoints_newest_first(folder):
        try:
            return load(path), path
        except Exception as err:  # a corrupt zip raises anything from zipfile, torch, json or pickle
            print(f"warning: skipping unreadable checkpoint {path} ({type(err).__name__}); trying an older one",
                  file=sys.stderr)
    raise InputError("resume", f"no readable checkpoint in {folder}")


def checkpoint_callback(every_steps: int, folder: Path):
    """An SB3 callback saving a checkpoint, atomically, each time the step count passes a multiple of
    ``every_steps``, at the next rollout boundary (after the update, so that a resume starts where an uninterrupted
    run would be; SB3 learns from whole rollouts) and at the end of training."""
    from stable_baselines3.common.callbacks import BaseCallback

    class AtomicCheckpoints(BaseCallback):
        def _init_callback(self) -> None:
            self._next = (self.model.num_timesteps // every_steps + 1) * every_steps

        def _maybe_save(self) -> None:
            if self.model.num_timesteps >= self._next:
                save_checkpoint(self.model, folder)
                self._next = (self.model.num_timesteps // every_steps + 1) * every_steps

        _on_rollout_start = _on_training_end = _maybe_save  # at each rollout boundary and at the end
        def _on_step(self) -> bool:
            return True

    return AtomicCheckpoints()


def stop_callback(should_stop: Callable[[], bool]):
    """An SB3 callback ending ``learn`` at the next step once ``should_stop()`` (e.g. after Ctrl-C), with the model
    back at the step count of its last update."""
    from stable_baselines3.common.callbacks import BaseCallback

    class StopWhenAsked(BaseCallback):
        def _on_step(self) -> bool:
            if not should_stop():
                return True
            # SB3 learns from whole rollouts: the steps of this unfinished one are dropped, so they are not counted
            # either. A resumed run then keeps an uninterrupted run's rollout boundaries and learning-rate schedule.
            # (on_step comes after the step is counted and before it is added to the buffer: pos + 1 steps.)
            self.model.num_timesteps -= (self.model.rollout_buffer.pos + 1) * self.model.n_envs
            return False

    return StopWhenAsked()


__all__ = ["CHECKPOINT_PREFIX", "checkpoint_callback", "checkpoint_path", "checkpoints_newest_first",
           "load_newest_good", "newest_checkpoint", "save_checkpoint", "save_model_atomically", "stop_callback"]
