"""Several sites: one site is today's model bit for bit; jobs move only at checkpoints and pay their
transfer; the sites oracle against brute force; bad sites input exits 2 with one line."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest

import evaluate
import train
from aidc_env import case as case_cli
from aidc_env.baselines import fixed_schedule, greedy_schedule
from aidc_env.case import build_instance
from aidc_env.errors import EXIT_BAD_INPUT, InputError, run_cli
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.simulator import simulate
from aidc_env.sites import CHECKPOINT_BYTES_PER_PARAMETER, SiteNetwork, checkpoint_bytes, transfer_hours
from oracle import __main__ as oracle_cli
from oracle import solve
from tests.conftest import simulate_at, site_array

REFERENCE_ORACLE_USD = 529.8088802758355  # tests/test_regression.py
REFERENCE_ORACLE_SCHEDULE = [[0, 0, 0, 8, 8, 8, 8, 8, 8, -1, -1, -1], [3, 15, 15, 15, 15, 15, 15, 15, 15, 15, -1, -1]]

TINY_SITES = """
name = "tiny2"
gpus = 256
slots = 24
day = "2023-06-17"
[energy]
ppa_usd_per_mwh = 30.0
[migration]
link_gbps = {link}
[[sites]]
name = "a"
gpus = 256
price_node = "SCE"
plant = "solar"
renewable_ratio = 0.5
[[sites]]
name = "b"
gpus = 128
price_node = "PGE"
plant = "wind"
renewable_ratio = 1.0
[[jobs]]
name = "J"
model = "llama-7b"
segments = {segments}
restart_minutes = 10
baseline_gpus = 128
baseline_hours = {hours}
site = "a"
"""


def tiny(tmp_path: Path, *, segments: int = 3, hours: float = 12.0, link: float = 0.5) -> Instance:
    path = tmp_path / "tiny2.toml"
    path.write_text(TINY_SITES.format(segments=segments, hours=hours, link=link))
    return build_instance(path)


def one_site_network(inst: Instance) -> Instance:
    """The day instance with its one implicit site made explicit."""
    return dataclasses.replace(inst, network=SiteNetwork(sites=inst.sites, home=(0,) * len(inst.jobs),
                                                         transfer_hours=(0.0,) * len(inst.jobs)))


# ----------------------------------------------------------------------------------- one site = today


@pytest.mark.parametrize("make", [fixed_schedule, greedy_schedule])
def test_one_site_reproduces_the_day_simulator_bit_for_bit(make):
    inst = build_instance("2048")
    schedule = make(inst)
    today = simulate(inst, schedule).metrics
    assert simulate_at(inst, schedule).metrics == today
    explicit = one_site_network(inst)
    assert explicit.has_sites and explicit.site_views[0].renewable_mw.tobytes() == inst.renewable_mw.tobytes()
    assert simulate_at(explicit, schedule).metrics == today


def test_sites_oracle_with_one_site_finds_the_reference_optimum():
    result = solve(one_site_network(build_instance("2048")), method="decomposition", time_limit_s=300, mip_gap=1e-7)
    assert result.status == "optimal"
    assert abs(result.objective_usd - REFERENCE_ORACLE_USD) <= 1e-9 * REFERENCE_ORACLE_USD
    assert result.schedule == REFERENCE_ORACLE_SCHEDULE
    assert result.sites is None  # one site: every job at home


def test_instance_json_round_trip_keeps_the_network():
    inst = build_instance("sites3")
    back = Instance.from_dict(inst.to_dict())
    assert back.network.names == inst.network.names and back.network.home == inst.network.home
    assert back.network.transfer_hours == inst.network.transfer_hours
    schedule = fixed_schedule(inst)
    assert simulate_at(back, schedule).metrics == simulate_at(inst, schedule).metrics
    assert "network" not in build_instance("2048").to_dict()


# ----------------------------------------------------------------------------------- migration, by hand


def test_transfer_time_from_parameters_and_link():
    hours = transfer_hours("llama-7b", 10.0)
    params = checkpoint_bytes("llama-7b") / CHECKPOINT_BYTES_PER_PARAMETER
    assert hours == pytest.approx(params * 14 * 8 / 10e9 / 3600, rel=1e-12)
    assert 6.5e9 < params < 6.8e9


def test_a_move_into_a_running_segment_pays_transfer_and_restart(tmp_path):
    inst = tiny(tmp_path)
    job = inst.jobs[0]
    base = job.baseline_mode
    rate, H, tau = job.modes[base].tokens_per_s, inst.segment_hours(job), job.restart_hours
    transfer = inst.network.transfer_hours[0]
    assert transfer > 0.1  # 0.5 Gbit/s: a visible transfer
    stay = simulate_at(inst, [[base] * 3], [[0, 0, 0]])
    moved = simulate_at(inst, [[base] * 3], [[0, 1, 1]])
    assert stay.metrics.jobs[0].tokens == pytest.approx(rate * SECONDS_PER_HOUR * 3 * H, rel=1e-12)
    # Segment 1 starts at b: the checkpoint travels (no tokens), then the job restarts (tau, no tokens).
    expected = rate * SECONDS_PER_HOUR * (3 * H - tau - transfer)
    assert moved.metrics.jobs[0].tokens == pytest.approx(expected, rel=1e-12)
    assert moved.metrics.jobs[0].moves == 1 and moved.metrics.jobs[0].transfer_hours_lost == pytest.approx(transfer)
    assert moved.metrics.jobs[0].restarts == 1
    # The GPUs are held at the destination from the boundary on, never at both sites in one slot.
    per = inst.slots_per_segment(job)
    assert list(site_array(moved, 'gpus_used')[0]) == [job.modes[base].gpus] * per + [0] * 2 * per
    assert list(site_array(moved, 'gpus_used')[1]) == [0] * per + [job.modes[base].gpus] * 2 * per
    assert np.all((site_array(moved, 'gpus_used') > 0).sum(axis=0) <= 1)
    # Each site pays its own price for its own load.
    for s, m in enumerate(moved.metrics.sites):
        view = inst.site_views[s]
        grid = np.maximum(moved.site_flows[s].load_mw - view.renewable_mw, 0.0)
        assert m.grid_cost_usd == pytest.approx(float(np.sum(view.price_usd_per_mwh * grid) * inst.slot_hours))
    assert moved.metrics.operating_cost_usd == pytest.approx(sum(m.operating_cost_usd for m in moved.metrics.sites))


def test_a_move_during_a_pause_costs_no_transfer(tmp_path):
    inst = tiny(tmp_path)
    job = inst.jobs[0]
    base = job.baseline_mode
    rate, H, tau = job.modes[base].tokens_per_s, inst.segment_hours(job), job.restart_hours
    result = simulate_at(inst, [[base, PAUSE, base]], [[0, 1, 1]])
    assert result.metrics.jobs[0].moves == 1 and result.metrics.jobs[0].transfer_hours_lost == 0.0
    assert result.metrics.jobs[0].tokens == pytest.approx(rate * SECONDS_PER_HOUR * (2 * H - tau), rel=1e-12)


def test_a_schedule_cannot_put_a_job_at_two_sites_or_move_it_mid_segment(tmp_path):
    inst = tiny(tmp_path)
    base = inst.jobs[0].baseline_mode
    per_slot = [0] * inst.slots  # one site per slot: a move within a segment is not writable
    with pytest.raises(InputError, match="one site per checkpoint segment"):
        simulate_at(inst, [[base] * 3], [per_slot])
    with pytest.raises(InputError, match="site entries"):
        simulate_at(inst, [[base] * 3], [[[0, 1], 0, 0]])  # two sites in one segment
    with pytest.raises(InputError, match="site entries"):
        simulate_at(inst, [[base] * 3], [[0, 2, 0]])
    with pytest.raises(InputError, match="unknown site"):
        simulate_at(inst, [[base] * 3], [["a", "c", "a"]])
    assert simulate_at(inst, [[base] * 3], {"J": ["a", "b", "b"]}).metrics.jobs[0].moves == 1


def test_capacity_is_checked_per_site(tmp_path):
    inst = tiny(tmp_path)
    job = inst.jobs[0]
    big = max(range(job.n_modes), key=lambda c: job.modes[c].gpus)
    assert job.modes[big].gpus > 128
    result = simulate_at(inst, [[big] * 3], [[1, 1, 1]])  # site b holds 128 GPUs
    assert not result.metrics.sites[1].capacity_ok and result.metrics.sites[0].capacity_ok and not result.metrics.feasible


# ----------------------------------------------------------------------------------- oracle vs brute force


def test_sites_oracle_matches_brute_force_on_a_tiny_two_site_instance(tmp_path):
    inst = tiny(tmp_path, segments=3, hours=14.0, link=0.5)
    job = inst.jobs[0]
    options = [(c, s) for c in [PAUSE, *range(job.n_modes)] for s in range(2)]
    best = np.inf
    for combo in itertools.product(options, repeat=job.segments):
        result = simulate_at(inst, [[c for c, _ in combo]], [[s for _, s in combo]])
        if result.metrics.feasible:
            best = min(best, result.metrics.operating_cost_usd)
    assert np.isfinite(best)
    solved = solve(inst, method="decomposition", time_limit_s=60, mip_gap=1e-9)
    assert solved.status == "optimal"
    assert solved.objective_usd == pytest.approx(best, rel=1e-7)
    assert solved.metrics.operating_cost_usd == solved.objective_usd
    fixed = solve(inst, method="decomposition", time_limit_s=60, mip_gap=1e-9, placement="home")
    assert fixed.objective_usd >= solved.objective_usd - 1e-9 and all(s == 0 for s in fixed.sites[0])


# ----------------------------------------------------------------------------------- bad input


BAD_SITES = [
    ('price_node = "SCE"', 'price_node = "ERCOT"', "sites[0].price_node"),
    ('plant = "solar"', 'plant = "coal"', "sites[0].plant"),
    ('site = "a"', 'site = "z"', "jobs[0].site"),
    ("link_gbps = 0.5", "link_gbps = 0", "migration.link_gbps"),
    ("gpus = 128", "gpus = 512", "sites[1].gpus"),
    ('[[sites]]\nname = "b"', '[[sites]]\nname = "a"', "sites"),
    ("link_gbps = 0.5", "link_gbps = 0.0001", "jobs[0].transfer_hours"),
]


@pytest.mark.parametrize("old,new,field", BAD_SITES)
def test_bad_sites_case_exits_2_with_one_line(tmp_path, capsys, old, new, field):
    text = TINY_SITES.format(segments=3, hours=12.0, link=0.5)
    assert old in text
    path = tmp_path / "bad.toml"
    path.write_text(text.replace(old, new, 1))
    assert run_cli(case_cli.main, ["--case", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0], err


@pytest.mark.parametrize("main,argv,field", [
    (train.main, ["--case", "sites3", "--information", "dayahead"], "forecasts"),
    (train.main, ["--case", "sites3", "--oracle-time-limit", "0"], "oracle-time-limit"),
    (evaluate.main, ["--case", "sites3", "--policies", "mpc,bogus"], "policies"),
    (evaluate.main, ["--case", "sites3", "--policies", "ppo", "--model", "/nonexistent/model.zip"], "model")])
def test_train_and_evaluate_take_sites_and_refuse_bad_flags_with_one_line(capsys, tmp_path, main, argv, field):
    assert run_cli(main, [*argv, "--out", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0], err


def test_oracle_cli_refuses_the_exact_method_and_mps_for_sites(capsys):
    for options in (["--method", "exact"], ["--mps", "unused.mps"]):
        assert run_cli(oracle_cli.main, ["--case", "sites3", *options]) == EXIT_BAD_INPUT
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err


def test_study_price_spread_scales_deviations_from_the_nodes_mean():
    from experiments.sites_study import with_link, with_spread

    inst = build_instance("sites3")
    prices = np.array([s.price_usd_per_mwh for s in inst.sites])
    assert np.allclose([s.price_usd_per_mwh for s in with_spread(inst, 1.0).sites], prices)
    flat = np.array([s.price_usd_per_mwh for s in with_spread(inst, 0.0).sites])
    assert np.allclose(flat, prices.mean(axis=0)[None, :])
    assert with_link(inst, 2.0).network.transfer_hours[0] == pytest.approx(5 * inst.network.transfer_hours[0])
