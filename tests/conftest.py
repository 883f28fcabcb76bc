"""Shared fixtures: tiny hand-made instances and the reference case (loaded once per session)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aidc_env.instance import PAUSE, Instance, Job
from aidc_env.modes import Mode

SHARED_YEAR_CSV = Path(__file__).resolve().parents[2] / "shared" / "data" / "caiso" / "caiso_2023_hourly.csv"


def mode(gpus: int, tokens_per_s: float, it_power_kw: float) -> Mode:
    return Mode(tp=1, pp=1, dp=gpus, micro_batch=1, gpus=gpus, tokens_per_s=tokens_per_s, it_power_kw=it_power_kw)


def tiny_instance(
    jobs: list[Job],
    price: list[float],
    shape: list[float],
    *,
    n_gpus: int = 4,
    slot_hours: float = 1.0,
    pue: float = 1.5,
    idle_kw_per_gpu: float = 100.0,
    rated_kw_per_gpu: float = 500.0,
    renewable_ratio: float = 1.0,
    ppa_usd_per_mwh: float = 30.0,
    curtailment_penalty_usd_per_mwh: float = 10.0,
) -> Instance:
    return Instance(
        case_name="tiny",
        day="2023-04-15",
        n_gpus=n_gpus,
        slot_hours=slot_hours,
        pue=pue,
        idle_kw_per_gpu=idle_kw_per_gpu,
        rated_kw_per_gpu=rated_kw_per_gpu,
        renewable_ratio=renewable_ratio,
        ppa_usd_per_mwh=ppa_usd_per_mwh,
        curtailment_penalty_usd_per_mwh=curtailment_penalty_usd_per_mwh,
        renewable_capacity_mw=1.0,
        jobs=tuple(jobs),
        price_usd_per_mwh=np.array(price, dtype=float),
        renewable_shape=np.array(shape, dtype=float),
    )


def tiny_job(name: str = "A", segments: int = 2, modes=None, initial_mode: int = 0, tranche_tokens: float = 0.0,
             restart_hours: float = 0.25, baseline_mode: int | None = None) -> Job:
    modes = modes if modes is not None else (mode(2, 10.0, 800.0), mode(4, 18.0, 1800.0))
    return Job(name=name, model="tiny", segments=segments, restart_hours=restart_hours, modes=tuple(modes),
               baseline_mode=initial_mode if baseline_mode is None else baseline_mode, initial_mode=initial_mode,
               tranche_tokens=tranche_tokens)


@pytest.fixture(scope="session")
def reference_instance() -> Instance:
    from aidc_env.case import build_instance

    return build_instance("2048")


__all__ = ["PAUSE", "SHARED_YEAR_CSV", "mode", "tiny_instance", "tiny_job"]


def simulate_at(inst: Instance, schedule, sites=None):
    """The simulator's result of mode rows at site rows (None: every job at its home site)."""
    from aidc_env.schedule import validate_schedule
    from aidc_env.simulator import simulate

    return simulate(inst, validate_schedule(inst, schedule, sites))


def site_array(result, name: str) -> np.ndarray:
    """(sites, T): a per-site flow of a simulation result (e.g. ``gpus_used``, ``load_mw``)."""
    return np.array([getattr(f, name) for f in result.site_flows])
