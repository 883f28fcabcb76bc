"""What every action type of the env applies the same way: an action outside the mask, the terminal penalty, and the
cached mask with its fallback flag."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from aidc_env.instance import SECONDS_PER_HOUR, Instance, Job

PENALTY_PRICE_FLOOR_USD_PER_MWH = 100.0
"""The terminal penalty prices energy at max(day's highest price, $100/MWh), so it never vanishes."""


def masked_action(action: Any, mask: np.ndarray, keep: int) -> tuple[int, bool]:
    """(the action taken, whether the one given was invalid): an action outside the mask (or not an integer) never
    raises; ``keep`` is taken if valid, else the lowest valid action."""
    try:
        a = operator.index(action)
    except TypeError:
        arr = np.asarray(action)
        a = int(arr.reshape(-1)[0]) if arr.size == 1 and np.issubdtype(arr.dtype, np.integer) else -1
    invalid = not (0 <= a < mask.size) or not mask[a]
    if invalid:
        a = keep if mask[keep] else int(np.argmax(mask))
    return a, invalid


def local_choice_tables(jobs: Sequence[Job]) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Per job, by local choice (0 = pause, i = mode i − 1): its GPUs, IT kW and tokens per hour."""
    local = [np.arange(job.n_modes + 1) - 1 for job in jobs]
    return ([job.gpus_by_choice[c].astype(np.int64) for job, c in zip(jobs, local, strict=True)],
            [job.it_power_kw_by_choice[c].astype(float) for job, c in zip(jobs, local, strict=True)],
            [job.tokens_per_s_by_choice[c] * SECONDS_PER_HOUR for job, c in zip(jobs, local, strict=True)])


def penalty_usd_per_token(inst: Instance, factor: float) -> np.ndarray:
    """Terminal penalty per missing token of each job ($/token).

    ``factor`` × max(the highest price of any site, $100/MWh) × the job's highest facility energy per token over
    its modes (PUE·P/1000 / (r·3600), MWh/token, at the site of the highest PUE) × T_seg / (T_seg − τ) (a restart
    spends energy for no token). The most not making a token can save is its energy at the highest price, so with
    a factor ≥ 1 missing a target never pays.
    """
    out = np.zeros(len(inst.jobs))
    for view in inst.site_views:
        price = max(float(view.price_usd_per_mwh.max()), PENALTY_PRICE_FLOOR_USD_PER_MWH)
        for j, job in enumerate(inst.jobs):
            if job.n_modes == 0:
                continue
            rate = job.tokens_per_s_by_choice[:-1]
            energy = view.pue * job.it_power_kw_by_choice[:-1] / 1000.0 / (rate * SECONDS_PER_HOUR)
            seg = inst.segment_hours(job)
            out[j] = max(out[j], factor * price * float(energy.max()) * seg / (seg - job.restart_hours))
    return out


class MaskedSteps:
    """What the dynamics of every action type share: the slot, the tokens, the terminal penalty and the mask,
    computed once per step (``_compute_mask``, cached in ``_mask``) with whether the completion rule found no safe
    choice (``_fallback``: the mask is then the capacity mask); ``starts_safe`` is set by ``reset``."""

    @property
    def slot(self) -> int:
        return self._t

    def tokens(self) -> list[float]:
        return list(self._tokens)

    def _terminal_penalty(self, extra: Any = 0.0) -> float:
        """The terminal penalty ($) once the episode is over (0 before): every job's missing tokens (+ ``extra``) at
        its penalty per token."""
        if self._t < self.n_slots:
            return 0.0
        return float(np.sum((self.env.shortfall_tokens() + extra) * self._penalty_per_token))

    @property
    def safety_fallback(self) -> bool:
        if self._inst is not None and self._mask is None and self._t < self.n_slots:
            self._compute_mask()
        return self._fallback

    def mask(self) -> np.ndarray:
        if self._t >= self.n_slots:
            return np.ones(self.n_actions, dtype=bool)
        return self._mask if self._mask is not None else self._compute_mask()


__all__ = ["PENALTY_PRICE_FLOOR_USD_PER_MWH", "MaskedSteps", "local_choice_tables", "masked_action",
           "penalty_usd_per_token"]
