"""Model selection on validation days (``PPOConfig.validation_every``, with day-ahead information).

PPO after the warm start on the forecast plan (:mod:`agents.imitation`) can drift away from the cloned plan and
end dearer than it. So train.py keeps some training days out of training, as validation days, and saves the
candidate that is cheapest on them:

- :func:`split_validation`: of the split's training days (``agents.days.split_days``; the held-out days are
  never given here), sorted by date, every ``every``-th one (the ``every``-th, 2 × ``every``-th, ...) is a
  validation day; the others train. Validation days are neither trained on nor in the warm start's demonstrations.
- :func:`validation_cost`: a model's total cost on the validation days, deterministic, through the same
  rollout (:func:`agents.ppo.ppo_schedule`) and the one simulator that evaluate.py uses.
- :func:`select_best`: the candidate with the least validation cost; on a tie the earlier one (the warm start
  comes first, then the checkpoints by step count), so a fine-tuning that does not pay keeps the warm start.
- :func:`write_selection`: the history (every candidate's cost and which was kept) as strict JSON, atomically,
  in the run folder (:data:`SELECTION_FILE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agents.days import split_starts, spread
from aidc_env.errors import require
from aidc_env.instance import Instance
from aidc_env.io import write_json
from aidc_env.simulator import simulate

SELECTION_FILE = "selection.json"
"""The selection history in the run folder."""
WARM_START_FILE = "warm_start.zip"
"""The policy right after the warm start (the first candidate) in the run folder."""


@dataclass
class Candidate:
    """One model evaluated on the validation days."""

    label: str
    """"warm start" or the checkpoint's file name."""
    steps: int
    """PPO steps when it was saved (0 for the warm start)."""
    path: str
    cost_usd: float
    """Total objective (operating cost − idle-GPU value) on the validation days, by the simulator."""
    tranches_met: int
    """Validation days with every tranche met."""


def split_validation(train_days: Sequence[str], every: int) -> tuple[list[str], list[str]]:
    """(days that train, validation days) of the split's training days; ``every`` = 0: no validation day."""
    require(every == 0 or every >= 2, "validation-every", f"must be 0 (off) or at least 2, got {every}")
    ordered = sorted(train_days)
    if every == 0:
        return ordered, []
    validation = [d for i, d in enumerate(ordered) if i % every == every - 1]
    return [d for i, d in enumerate(ordered) if i % every != every - 1], validation


def split_horizon_starts(dates: Sequence[str], starts: Sequence[str], every: int, max_train: int, max_validation: int,
                         horizon_days: int = 1, split: str = "weeks") -> tuple[list[str], list[str], list[str]]:
    """(training, validation, held-out) first days of multi-day instances (weeks).

    ``dates``: every complete day of the profile source; ``starts``: the first days of the usable instances (D
    consecutive days, with forecasts when needed). :func:`agents.days.split_starts` gives the training starts (the
    instance wholly within training days) and the held-out ones; the training starts are split into training and
    validation by :func:`split_validation` and evenly spread down to ``max_train`` and ``max_validation`` (0: none).
    """
    train_starts, held_out = split_starts(dates, starts, horizon_days, split)
    train, validation = split_validation(train_starts, every)
    return (spread(train, max_train) if max_train > 0 else [],
            spread(validation, max_validation) if max_validation > 0 else [], held_out)


def validation_cost(model: Any, instances: Sequence[Instance], plans: Any = None) -> tuple[float, int]:
    """(total objective in $, days with every tranche met) of ``model`` on ``instances``, deterministic."""
    from agents.ppo import ppo_schedule

    total, met = 0.0, 0
    for inst in instances:
        metrics = simulate(inst, ppo_schedule(model, inst, plans)).metrics
        total += float(metrics.objective_usd)
        met += int(bool(metrics.tranches_met))
    return total, met


def select_best(candidates: Sequence[Candidate]) -> int:
    """Index of the candidate with the least validation cost, the earliest on a tie (candidates in order).

    A candidate that misses a tranche on a validation day loses to one that meets them all.
    """
    require(len(candidates) > 0, "selection", "no candidate model")
    best = 0
    for i, cand in enumerate(candidates):
        if _key(cand, candidates) < _key(candidates[best], candidates):
            best = i
    return best


def _key(cand: Candidate, candidates: Sequence[Candidate]) -> tuple[int, float]:
    most = max(c.tranches_met for c in candidates)
    return (0 if cand.tranches_met == most else 1, cand.cost_usd)


def write_selection(out: Path, validation_days: Sequence[str], candidates: Sequence[Candidate], kept: int) -> Path:
    """The selection history as strict JSON, atomically: ``out/selection.json``."""
    return write_json(Path(out) / SELECTION_FILE, {
        "validation_days": list(validation_days), "kept": candidates[kept].label,
        "kept_steps": candidates[kept].steps, "kept_cost_usd": candidates[kept].cost_usd,
        "candidates": [asdict(c) for c in candidates]})


__all__ = ["SELECTION_FILE", "WARM_START_FILE", "Candidate", "select_best", "split_horizon_starts", "split_validation",
           "validation_cost", "write_selection"]
