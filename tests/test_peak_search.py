"""The peak-level search under demand charges (oracle.peak_search): its shortest path equals the label search's, its
bound is a bound (below the textbook MILP's proven optimum), its incumbents are priced as the simulator prices them, and
the oracle runs it first. Its speed on months is measured by ``python -m experiments.bills_study``, not here."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

import oracle
from aidc_env.calls import with_calls
from aidc_env.case import build_instance
from aidc_env.instance import Instance
from aidc_env.schema.case import CallSpec
from aidc_env.simulator import simulate
from aidc_env.tariffs import BUNDLED, load_tariff
from oracle.data import oracle_data
from oracle.labeling import LabelSearch
from oracle.model import best_start
from oracle.peak_search import PeakSearch, _Box, applies, peak_network, repair


def _instance(tariff: str, day: str = "2023-07-05", days: int = 1, segments: int = 4) -> Instance:
    return build_instance("2048", day=day, profiles="caiso-2023", horizon_days=days,
                          segments=segments).with_tariff(load_tariff(tariff))


@pytest.fixture(scope="module")
def day() -> Instance:
    return _instance("sce-tou8")


def test_grid_path_equals_the_label_search(day: Instance) -> None:
    """Without caps the grid's shortest path (four cases per move) has the label search's Lagrangian value at any
    token price, and the cost and tokens of its path are the network's."""
    net = peak_network(day)
    search = PeakSearch(net, None)
    box = _Box(search, np.full(len(net.levels_mw), np.inf))
    data = oracle_data(day)
    labels = LabelSearch(data, data.joint_states, data.block_cost_usd, None, net.tranche_tokens, completion=False)
    rng = np.random.default_rng(7)
    scale = data.block_cost_usd.max() / net.tranche_tokens * data.n_blocks
    fixed = day.tariff_terms.fixed_usd  # a constant of the search, not of the label search
    for mu in [np.zeros(2), *(rng.uniform(0, 1, 2) * scale for _ in range(12))]:
        value, cost, tokens = box.lagrangian(mu)
        expected, _, _ = labels.lagrangian(mu)
        assert value - fixed == pytest.approx(expected, rel=1e-12, abs=1e-9)
        assert cost + float(mu @ (net.tranche_tokens - tokens)) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("tariff", sorted(BUNDLED))
def test_bound_is_below_the_optimum_and_incumbents_are_replayed(tariff: str) -> None:
    """On a July day at K = 4 under each bundled tariff: bound ≤ the textbook MILP's proven optimum ≤ the search's
    incumbent, whose cost is the simulator's objective of its schedule (the search stopped after 5 s or at its
    leaves)."""
    inst = _instance(tariff)
    assert applies(inst)
    exact = oracle.solve(inst, method="textbook", mip_gap=0.0, warm_start=False, time_limit_s=120)
    assert exact.status == "optimal"
    search = PeakSearch(peak_network(inst), best_start(inst))
    bound = search.run(1e-4, time.perf_counter() + 5)
    assert search.boxes > 0
    assert bound <= exact.objective_usd * (1 + 1e-9)
    assert search.best_usd >= exact.objective_usd * (1 - 1e-9)
    assert simulate(inst, search.best_schedule).metrics.objective_usd == pytest.approx(search.best_usd, rel=1e-9)


@pytest.mark.parametrize("program", ["bip", "elrp"])
def test_calls_keep_their_limit_and_price_their_payment(program: str) -> None:
    """A call (4-9 pm, a quarter of the baseline) on the July day under TOU-8: the search takes it (the call's slots
    keep only the states within its limit; ELRP's $2,000/MWh below the baseline prices their import), its bound is below
    the textbook MILP's proven optimum, and its incumbent delivers the call at the simulator's objective."""
    inst = with_calls(_instance("sce-tou8"), [CallSpec(program=program, start_hour=16.0, hours=5.0,
                                                        reduction_share=0.25, notice_hours=2.0)])
    assert applies(inst) and inst.grid_calls[0].payment_usd_per_mwh == (2000.0 if program == "elrp" else 0.0)
    exact = oracle.solve(inst, method="textbook", mip_gap=0.0, warm_start=False, time_limit_s=120)
    assert exact.status == "optimal" and exact.metrics.calls_delivered
    search = PeakSearch(peak_network(inst), best_start(inst))
    bound = search.run(1e-4, time.perf_counter() + 5)
    assert bound <= exact.objective_usd * (1 + 1e-9) <= search.best_usd * (1 + 2e-9)
    metrics = simulate(inst, search.best_schedule).metrics
    assert metrics.calls_delivered and metrics.objective_usd == pytest.approx(search.best_usd, rel=1e-9)
    assert not applies(dataclasses.replace(inst, training_value_usd_per_gpu_hour=1.0))


def test_one_job_runs_on_a_grid_of_one_column() -> None:
    """A single job (a grid of one column): the bound is below the MILP's optimum and the incumbent is replayed."""
    day = _instance("pge-e19")
    single = dataclasses.replace(day, jobs=day.jobs[:1])
    exact = oracle.solve(single, method="textbook", mip_gap=0.0, warm_start=False)
    search = PeakSearch(peak_network(single), best_start(single))
    bound = search.run(1e-4, time.perf_counter() + 5)
    assert bound <= exact.objective_usd * (1 + 1e-9) <= search.best_usd * (1 + 2e-9)
    assert simulate(single, search.best_schedule).metrics.objective_usd == pytest.approx(search.best_usd, rel=1e-9)


def test_the_oracle_runs_the_search_first(day: Instance) -> None:
    """auto: the search runs (its boxes are in the details), the MILP proves what it leaves, and the replay agrees."""
    result = oracle.solve(day, mip_gap=1e-4, time_limit_s=20)
    assert result.status == "optimal"
    assert result.details["peak_boxes"] > 0
    assert result.metrics.objective_usd == pytest.approx(result.objective_usd, rel=1e-9)
    assert result.best_bound_usd <= result.objective_usd



def test_repair_meets_the_targets_from_the_cheapest_path(day: Instance) -> None:
    """At zero token prices the shortest path is the cheapest (far short of the targets); the repair turns it into a
    schedule that meets them, priced as the simulator prices it."""
    net = peak_network(day)
    box = _Box(PeakSearch(net, None), np.full(len(net.levels_mw), np.inf))
    _, _, tokens = box.lagrangian(np.zeros(2))
    assert np.any(tokens < net.tranche_tokens)
    energy, peaks, path_a, path_b = repair(net, box.cost, *box.last_path)
    metrics = simulate(day, net.schedule(path_a, path_b)).metrics
    assert metrics.feasible
    charges = sum(net.charge_usd(c, float(p)) for c, p in enumerate(peaks))
    assert metrics.objective_usd == pytest.approx(energy + charges, rel=1e-9)
