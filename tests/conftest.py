"""Shared fixtures: tiny hand-made instances and the reference case (loaded once per session)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from aidc_env.information import Forecast
from aidc_env.instance import PAUSE, Instance, Job
from aidc_env.modes import Mode

SHARED_YEAR_CSV = Path(__file__).resolve().parents[2] / "shared" / "data" / "caiso" / "caiso_2023_hourly.csv"

# Property tests draw the same examples in every process and on every machine (no example database, a fixed seed
# derived from each test), so that a failure in CI reproduces locally; ``--hypothesis-profile default`` explores anew.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.load_profile("deterministic")


def pytest_addoption(parser):
    parser.addoption("--fuzz-examples", type=int, default=0,
                     help="documents per reader in tests/test_fuzz_readers.py, counted and printed (the long run)")


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


SLOTS_PER_DAY = 24  # hourly slots: the forecast's issue time (10:00 the day before) falls inside the horizon
DAYS = 2


def dayahead_instance(seed: int = 0, days: int = DAYS, share: float = 0.0) -> Instance:
    """Two jobs over ``days`` days of hourly slots, 4 segments a day, with a synthetic day-ahead forecast."""
    rng = np.random.default_rng(seed)
    T = days * SLOTS_PER_DAY
    modes_a = (mode(2, 10.0, 800.0), mode(4, 18.0, 1800.0), mode(3, 15.0, 1200.0))
    modes_b = (mode(1, 4.0, 300.0), mode(2, 7.0, 700.0))
    jobs = [tiny_job("A", segments=4 * days, modes=modes_a, initial_mode=0, tranche_tokens=10.0 * 3600 * T * 0.8),
            tiny_job("B", segments=4 * days, modes=modes_b, initial_mode=0, tranche_tokens=4.0 * 3600 * T * 0.7)]
    base = tiny_instance(jobs, rng.uniform(-20, 200, T).tolist(), rng.uniform(0, 1, T).tolist(), n_gpus=6)
    forecast = Forecast(price_usd_per_mwh=rng.uniform(0, 150, T), renewable_shape=rng.uniform(0, 1, T),
                        price_scenarios_usd_per_mwh=rng.uniform(-20, 200, (2, T)),
                        renewable_shape_scenarios=rng.uniform(0, 1, (2, T)), source="synthetic test forecast",
                        persistence_price_usd_per_mwh=rng.uniform(0, 150, T))
    return dataclasses.replace(base, horizon_days=days, min_daily_share=share, forecast=forecast)


def assert_day_models_equal_brute_force(inst: Instance) -> None:
    """Both day formulations prove, at gap 0, the optimum that enumerating every schedule of a one-segment instance
    (each job: a mode or a pause) finds; their objective is the simulator's replay and pays a demand charge."""
    import itertools

    import oracle
    from aidc_env.simulator import simulate

    per_job = [list(range(job.n_modes)) + [PAUSE] for job in inst.jobs]
    scored = [simulate(inst, [[c] for c in choice]).metrics for choice in itertools.product(*per_job)]
    best = min(m.objective_usd for m in scored if m.feasible)
    for method in ("exact", "textbook"):
        result = oracle.solve(inst, method=method, mip_gap=0.0)
        assert result.status == "optimal"
        assert result.objective_usd == pytest.approx(best, rel=1e-9)
        assert result.metrics.objective_usd == pytest.approx(result.objective_usd, rel=1e-9)
        assert result.metrics.demand_charge_usd > 0
