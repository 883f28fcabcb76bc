"""The decomposition on sites (oracle/decomposition.py): its bound is below the brute-force optimum, its
objective above it and equal to the simulator's replay; one site gives the day oracle's optimum; in its schedules
a job is at one site per segment, moves only at a checkpoint and pays its transfer time."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aidc_env.case import build_instance
from aidc_env.instance import PAUSE, SECONDS_PER_HOUR, Instance
from aidc_env.sites import SiteNetwork
from oracle import Decomposition, solve
from oracle import __main__ as oracle_cli
from oracle.graph import decomposition_data
from oracle.pricing import ALL, LabelSearch
from tests.conftest import simulate_at, site_array

TWO_SITES = """
name = "tiny2"
gpus = 256
slots = 24
day = "{day}"
[energy]
ppa_usd_per_mwh = 30.0
[migration]
link_gbps = {link}
[[sites]]
name = "a"
gpus = 256
price_node = "SCE"
plant = "solar"
renewable_ratio = {ratio}
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
site = "{home}"
"""

SECOND_JOB = """
[[jobs]]
name = "K"
model = "llama-7b"
segments = 2
restart_minutes = 10
baseline_gpus = 128
baseline_hours = {hours2}
site = "b"
"""


def solve_sites_cg(inst: Instance, **kwargs):
    """The decomposition through the one entry."""
    return solve(inst, method="decomposition", **kwargs)


def two_sites(tmp_path: Path, *, second: bool = False, **kwargs) -> Instance:
    text = TWO_SITES.format(**kwargs) + (SECOND_JOB.format(**kwargs) if second else "")
    path = tmp_path / "tiny2.toml"
    path.write_text(text)
    return build_instance(path)


def brute_force(inst: Instance) -> float:
    """The cheapest feasible (schedule, sites) by the simulator, over every combination."""
    options = []
    for job in inst.jobs:
        per_segment = [(c, s) for c in [PAUSE, *range(job.n_modes)] for s in range(len(inst.sites))]
        options.append(list(itertools.product(per_segment, repeat=job.segments)))
    best = np.inf
    for combo in itertools.product(*options):
        schedule = [[c for c, _ in row] for row in combo]
        sites = [[s for _, s in row] for row in combo]
        metrics = simulate_at(inst, schedule, sites).metrics
        if metrics.feasible:
            best = min(best, metrics.operating_cost_usd)
    return best


def check_moves(inst: Instance, schedule, sites, result) -> None:
    """One site per segment, moves only at boundaries, the transfer paid by every running moved-into segment."""
    net = inst.network
    for j, job in enumerate(inst.jobs):
        where = np.asarray(sites[j])
        choices = np.asarray(schedule[j])
        assert where.shape == (job.segments,)  # one site per segment: a move can only happen at a checkpoint
        per_slot = np.repeat(where, inst.slots_per_segment(job))
        running = np.repeat(choices != PAUSE, inst.slots_per_segment(job))
        for s in range(len(net.sites)):  # the job's GPUs are counted at its one site only
            elsewhere = running & (per_slot != s)
            assert not np.any(elsewhere & (per_slot == s))
        previous = np.concatenate(([net.home[j]], where[:-1]))
        moved_running = (where != previous) & (choices != PAUSE)
        assert result.metrics.jobs[j].transfer_hours_lost == pytest.approx(net.transfer_hours[j] * moved_running.sum())
        # tokens: every running segment's productive hours, less τ after a (re)start and the transfer after a move
        previous_c = np.concatenate(([job.initial_mode], choices[:-1]))
        restarted = (choices != PAUSE) & ((choices != previous_c) | (where != previous))
        hours = np.where(choices != PAUSE, inst.segment_hours(job) - job.restart_hours * restarted
                         - net.transfer_hours[j] * moved_running, 0.0)
        tokens = float(np.sum(job.tokens_per_s_by_choice[choices] * SECONDS_PER_HOUR * hours))
        assert result.metrics.jobs[j].tokens == pytest.approx(tokens, rel=1e-12)
    gpus = np.zeros_like(site_array(result, 'gpus_used'))
    for j, job in enumerate(inst.jobs):
        per_slot = np.repeat(np.asarray(schedule[j]), inst.slots_per_segment(job))
        at = np.repeat(np.asarray(sites[j]), inst.slots_per_segment(job))
        for s in range(len(inst.sites)):
            gpus[s] += np.where((per_slot != PAUSE) & (at == s), job.gpus_by_choice[per_slot], 0)
    assert np.array_equal(gpus, site_array(result, 'gpus_used'))


@settings(max_examples=4, deadline=None, derandomize=True)
@given(day=st.sampled_from(["2023-06-17", "2023-01-18", "2023-10-12"]), link=st.sampled_from([0.5, 2.0, 10.0]),
       ratio=st.sampled_from([0.0, 0.5, 1.0]), hours=st.sampled_from([10.0, 14.0, 18.0]),
       home=st.sampled_from(["a", "b"]))
def test_bound_below_brute_force_below_objective_equal_to_replay(tmp_path_factory, day, link, ratio, hours, home):
    inst = two_sites(tmp_path_factory.mktemp("s"), day=day, link=link, ratio=ratio, segments=3, hours=hours,
                     home=home)
    best = brute_force(inst)
    result = solve_sites_cg(inst, time_limit_s=60, mip_gap=1e-9)
    assert result.objective_usd is not None and np.isfinite(best)
    assert result.best_bound_usd <= best + 1e-6 <= result.objective_usd + 2e-6
    assert result.status == "optimal" and result.objective_usd == pytest.approx(best, rel=1e-9)
    replay = simulate_at(inst, result.schedule, result.sites)
    assert replay.metrics.operating_cost_usd == pytest.approx(result.objective_usd, rel=1e-9, abs=1e-9)
    check_moves(inst, result.schedule, result.sites, replay)


def test_two_jobs_share_a_site_and_match_brute_force(tmp_path):
    inst = two_sites(tmp_path, second=True, day="2023-06-17", link=2.0, ratio=0.5, segments=2, hours=12.0,
                     hours2=10.0, home="a")
    best = brute_force(inst)
    result = solve_sites_cg(inst, time_limit_s=60, mip_gap=1e-9)
    assert result.best_bound_usd <= best + 1e-6
    assert result.objective_usd == pytest.approx(best, rel=1e-9)
    check_moves(inst, result.schedule, result.sites, simulate_at(inst, result.schedule, result.sites))


def per_state_groups(graph) -> list[list[tuple[int, float]]]:
    """The candidate groups of a search without sites: every state, and each state whose arc makes more alone."""
    arc = graph.arc_tokens
    low = arc.min(axis=0)
    return [[(ALL, low[c])] + [(-2 - int(p), arc[p, c]) for p in np.flatnonzero(arc[:, c] > low[c])]
            for c in range(graph.n_states)]


def test_grouped_label_search_equals_the_per_state_search(tmp_path):
    """The site-grouped candidates (oracle/pricing.py) find the cheapest cost of the per-state candidates."""
    inst = build_instance("sites3", segments=4)
    data = decomposition_data(inst)
    rng = np.random.default_rng(7)
    for graph in data.graphs:
        grouped, plain = LabelSearch(graph), LabelSearch(graph)
        plain.groups = per_state_groups(graph)
        assert any(len(groups) > 1 and groups[1][0] >= 0 for groups in grouped.groups)  # a site group is used
        for _ in range(3):
            cost = rng.normal(0.0, 50.0, size=(graph.n_stages, graph.n_states))
            a, b = grouped.cheapest(cost), plain.cheapest(cost)
            assert (not a and not b) or a[0].cost == pytest.approx(b[0].cost, abs=1e-9)


def test_one_site_gives_the_day_oracle_optimum():
    """One site, K = 6 (the K = 12 reference day, $529.8088802758, is the reference solve of
    ``benchmarks/oracle_days.py --method decomposition``)."""
    from oracle.model import OracleModel

    inst = build_instance("2048", segments=6)
    one = dataclasses.replace(inst, network=SiteNetwork(sites=inst.sites, home=(0,) * len(inst.jobs),
                                                        transfer_hours=(0.0,) * len(inst.jobs)))
    result = solve_sites_cg(one, time_limit_s=60, mip_gap=1e-9)
    day = OracleModel(inst).solve(time_limit_s=60, mip_gap=1e-9)
    assert result.status == "optimal" and day.status == "optimal"
    assert result.objective_usd == pytest.approx(day.objective_usd, rel=1e-9)
    assert result.objective_usd == pytest.approx(simulate_at(one, result.schedule, result.sites)
                                                 .metrics.operating_cost_usd, rel=1e-12)


def test_placements_order_home_stay_free(tmp_path):
    """Staying home ≥ one chosen site ≥ chosen sites with moves (same optimum or better, each proven)."""
    inst = two_sites(tmp_path, day="2023-06-17", link=10.0, ratio=0.0, segments=3, hours=12.0, home="a")
    values = {}
    for placement in ("home", "stay", "free"):
        oracle = Decomposition(inst, placement=placement)
        result = oracle.solve(time_limit_s=60, mip_gap=1e-9)
        assert result.status == "optimal"
        values[placement] = result.objective_usd
        if placement == "home":
            assert all(s == 0 for s in result.sites[0])
        if placement == "stay":
            assert len(set(result.sites[0])) == 1
    assert values["home"] >= values["stay"] - 1e-9 >= values["free"] - 2e-9


CLI_MOVES_MIP_GAP = 0.01
"""The gap the CLI test asks of the sites oracle: the pattern master's bound ($783.47 on sites3 at K = 4) closes it
at the first stage dive's schedule ($785.87, which moves jobs), so the answer is proven and the same on any load
(~4 s on a quiet machine, 6 s at load 4 on 2 cores)."""
CLI_MOVES_TIME_LIMIT_S = 120
"""A safety limit only: the test's answer must be proven within :data:`CLI_MOVES_MIP_GAP` well before it. (Until
2026-12-05 an 8 s wall limit without a proof decided the answer, and under load it was the jobs at home.)"""


def test_oracle_cli_dispatches_sites_to_the_decomposition_whose_moves_pay_their_transfer(capsys):
    """sites3 at K = 4 moves jobs (the one case with moves of running segments at this size), proven within 1%."""
    import json

    assert oracle_cli.main(["--case", "sites3", "--segments", "4", "--time-limit", str(CLI_MOVES_TIME_LIMIT_S),
                            "--mip-gap", str(CLI_MOVES_MIP_GAP), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == out["formulation"] == "decomposition"
    assert out["status"] == "optimal"  # within the gap: the answer does not depend on the machine's load
    assert out["metrics"]["operating_cost_usd"] == out["objective_usd"]
    assert out["best_bound_usd"] <= out["objective_usd"] <= out["best_bound_usd"] * (1 + CLI_MOVES_MIP_GAP)
    inst = build_instance("sites3", segments=4)
    names = [job.name for job in inst.jobs]
    schedule = [out["schedule"][n] for n in names]
    sites = [[inst.network.index[s] for s in out["sites"][n]] for n in names]
    replay = simulate_at(inst, schedule, sites)
    assert replay.metrics.operating_cost_usd == pytest.approx(out["objective_usd"], rel=1e-12)
    assert sum(m.transfer_hours_lost > 0 for m in replay.metrics.jobs) >= 1
    check_moves(inst, schedule, sites, replay)


def pattern_master(master, start):
    """A pattern master (oracle/patterns.py) with the path master's columns and the start's patterns."""
    from oracle.patterns import PatternMaster

    pm = PatternMaster(master.data)
    for column in master.columns:
        pm.add(column)
    pm.add_patterns_of(start)
    return pm


def converged_pattern_master(dec):
    """The pattern master of a decomposition, started from its first start's path master and prices, after its
    column generation (60 s at most): (the master, the column generation's outcome)."""
    import time

    from oracle.master import MasterLP, make_column
    from oracle.patterns import column_generation, prices_from

    data = dec.data
    start = dec._starts(None)[0]
    master = MasterLP(data)
    for j, p in enumerate(start):
        master.add(make_column(data.graphs[j], j, p))
    prices = master.solve()
    pm = pattern_master(master, start)
    return pm, column_generation(pm, dec.searches, prices_from(pm, prices.gpu, prices.load), time.perf_counter() + 60)


@pytest.mark.parametrize("day", ["2023-06-17", "2023-01-18"])
def test_branch_and_price_bound_below_brute_force_and_its_schedules_exact(tmp_path, day):
    """oracle/branching.py on its own, from the baseline and no column generation: the tree's proven bound is
    below the brute-force optimum, its schedule's objective above it; a finished tree whose bound meets its
    schedule has found the optimum."""
    import time

    from oracle.branching import BranchAndPrice
    from oracle.master import make_column

    inst = two_sites(tmp_path, second=True, day=day, link=2.0, ratio=0.5, segments=2, hours=12.0, hours2=10.0,
                     home="a")
    best = brute_force(inst)
    dec = Decomposition(inst)
    start = dec._starts(None)[0]
    columns = [make_column(dec.data.graphs[j], j, p) for j, p in enumerate(start)]
    tree = BranchAndPrice(dec.data, dec.searches, columns)
    details: dict = {}
    (paths, value), bound = tree.run(-np.inf, (start, dec.data.objective_usd(start)), time.perf_counter() + 60, 0.0,
                                     details)
    assert bound <= best + 1e-6 <= value + 2e-6
    assert dec.data.fits(paths) and value == pytest.approx(dec.data.objective_usd(paths), rel=1e-12)
    replay = simulate_at(inst, dec.data.schedule(paths), dec.data.site_rows(paths))
    assert replay.metrics.operating_cost_usd == pytest.approx(value, rel=1e-9, abs=1e-9)
    assert details["bp_nodes"] >= 1
    if details["bp_open"] == 0 and bound >= value - 1e-9:
        assert value == pytest.approx(best, rel=1e-9)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), a=st.sampled_from([-40.0, 0.0, 35.0, 120.0]), b=st.sampled_from([0.0, 5.0]))
def test_hull_pieces_stay_under_the_slot_cost_at_every_reachable_load(seed, a, b):
    """oracle/master.py hull_pieces: the master LP's envelope of a slot cost over the reachable loads is under
    the cost at each of them and touches it at the least and the most (a vertex of any lower hull)."""
    from oracle.master import hull_pieces

    rng = np.random.default_rng(seed)
    loads = np.round(rng.uniform(0.2, 3.0, size=rng.integers(1, 40)), 4)
    renewable = float(rng.uniform(0.0, 3.5))
    cost = a * np.maximum(loads - renewable, 0.0) + b * np.maximum(renewable - loads, 0.0)
    pieces = hull_pieces(loads, a, b, renewable)
    envelope = np.max([alpha + beta * loads for alpha, beta in pieces], axis=0)
    assert np.all(envelope <= cost + 1e-9)
    for end in (loads.argmin(), loads.argmax()):
        assert envelope[end] == pytest.approx(cost[end], abs=1e-6)


@pytest.mark.parametrize("day", ["2023-06-17", "2023-01-18"])
def test_pattern_master_bound_below_brute_force_above_the_path_master(tmp_path, day):
    """oracle/patterns.py: the pattern master's Lagrangian bound is below the brute-force optimum and, from the
    path master's converged prices, at least its bound; the integer master over its columns gives an exact
    schedule (its objective the decomposition's and the simulator's)."""
    import time

    from oracle.decomposition import COLUMNS_PER_JOB
    from oracle.master import MasterLP, integer_master, lagrangian_bound, make_column
    from oracle.patterns import column_generation, prices_from
    from oracle.pricing import price

    inst = two_sites(tmp_path, second=True, day=day, link=2.0, ratio=0.5, segments=2, hours=12.0, hours2=10.0,
                     home="a")
    best = brute_force(inst)
    dec = Decomposition(inst)
    data = dec.data
    start = dec._starts(None)[0]
    master = MasterLP(data)
    for j, p in enumerate(start):
        master.add(make_column(data.graphs[j], j, p))
    path_bound, path_prices = -np.inf, None
    while True:
        prices = master.solve()
        cheapest, added = price(master, dec.searches, prices, COLUMNS_PER_JOB)
        bound = lagrangian_bound(master, prices, cheapest)
        if bound > path_bound:
            path_bound, path_prices = bound, prices
        if not added:
            break
    pm = pattern_master(master, start)
    out = column_generation(pm, dec.searches, prices_from(pm, path_prices.gpu, path_prices.load),
                            time.perf_counter() + 60)
    assert out.converged
    assert path_bound - 1e-6 <= out.bound <= best + 1e-6
    columns = pm.columns + [make_column(data.graphs[j], j, p) for j, p in enumerate(start)]
    paths = integer_master(data, columns, time_limit_s=60, mip_gap=0.0, start=start).paths
    assert paths is not None and data.fits(paths) and data.tokens_ok(paths)
    value = data.objective_usd(paths)
    replay = simulate_at(inst, data.schedule(paths), data.site_rows(paths))
    assert replay.metrics.operating_cost_usd == pytest.approx(value, rel=1e-9, abs=1e-9)
    assert value >= best - 1e-6


def test_the_dives_keep_the_optimum(tmp_path):
    inst = two_sites(tmp_path, second=True, day="2023-06-17", link=2.0, ratio=0.5, segments=2, hours=12.0,
                     hours2=10.0, home="a")
    result = Decomposition(inst).solve(time_limit_s=60, mip_gap=1e-9)
    assert result.objective_usd == pytest.approx(brute_force(inst), rel=1e-9)
    replay = simulate_at(inst, result.schedule, result.sites)
    assert replay.metrics.operating_cost_usd == pytest.approx(result.objective_usd, rel=1e-9, abs=1e-9)


def test_threads_one_after_a_default_solve_in_the_same_process(tmp_path):
    """HiGHS sizes its global scheduler at the first run; the masters resize it when asked for a thread count
    (before, solve_sites_cg(threads=1) after a default solve raised "restricted master LP ended Not Set")."""
    inst = two_sites(tmp_path, day="2023-06-17", link=2.0, ratio=0.5, segments=2, hours=12.0, home="a")
    default = solve_sites_cg(inst, time_limit_s=30, mip_gap=1e-9)
    one = solve_sites_cg(inst, time_limit_s=30, mip_gap=1e-9, threads=1)
    assert one.objective_usd == pytest.approx(default.objective_usd, rel=1e-9)


@pytest.mark.parametrize("day", ["2023-06-17", "2023-01-18"])
def test_stage_dive_schedule_is_feasible_exact_and_not_below_brute_force(tmp_path, day):
    """oracle/pattern_search.py stage_dive: from the converged pattern master, its schedule fits,
    meets the targets, its cost equals the simulator's replay and its final (all-fixed) LP value, and is ≥ the
    brute-force optimum; the bound computed before it is unchanged."""
    import time

    from oracle import pattern_search

    inst = two_sites(tmp_path, second=True, day=day, link=2.0, ratio=0.5, segments=2, hours=12.0, hours2=10.0,
                     home="a")
    best = brute_force(inst)
    dec = Decomposition(inst)
    data = dec.data
    pm, out = converged_pattern_master(dec)
    assert out.converged and out.bound <= best + 1e-6
    runs = [pattern_search.stage_dive(pm, dec.searches, time.perf_counter() + 60)]
    pattern_search.release(pm)  # released, then a diversified dive
    runs.append(pattern_search.stage_dive(pm, dec.searches, time.perf_counter() + 60, np.random.default_rng(1),
                                          top=3))
    for paths, info in runs:
        assert paths is not None and data.fits(paths) and data.tokens_ok(paths)
        value = data.objective_usd(paths)
        replay = simulate_at(inst, data.schedule(paths), data.site_rows(paths))
        assert replay.metrics.feasible
        assert replay.metrics.operating_cost_usd == pytest.approx(value, rel=1e-9, abs=1e-9)
        assert value >= best - 1e-6
        assert info["artificial"] <= 1e-9 and info["lp_usd"] == pytest.approx(value, rel=1e-9, abs=1e-6)


def brute_force_paths(inst: Instance, data) -> list[tuple[list[np.ndarray], float]]:
    """Every feasible (schedule, sites) as the decomposition's paths, with the simulator's cost."""
    options = []
    for job in inst.jobs:
        per_segment = [(c, s) for c in [PAUSE, *range(job.n_modes)] for s in range(len(inst.sites))]
        options.append(list(itertools.product(per_segment, repeat=job.segments)))
    out = []
    for combo in itertools.product(*options):
        schedule = [[c for c, _ in row] for row in combo]
        sites = [[s for _, s in row] for row in combo]
        metrics = simulate_at(inst, schedule, sites).metrics
        if not metrics.feasible:
            continue
        try:
            paths = data.paths_of(schedule, sites)
        except KeyError:
            continue
        out.append((paths, metrics.operating_cost_usd))
    return out


@pytest.mark.parametrize("day", ["2023-06-17", "2023-01-18"])
def test_pattern_branch_bound_never_above_the_brute_force_optimum_of_its_nodes(tmp_path, day):
    """oracle/pattern_search.py branch_bound and evaluate_node: under random (job, stage, state, keep) rules a node's
    bound is at most the cheapest brute-force schedule the rules allow (+∞ only when none), at least its parent's;
    the whole tree's bound is at most the optimum, and its integral nodes' schedules are exact and not below it."""
    import time

    from oracle.pattern_search import BranchNode, branch_bound, evaluate_node

    inst = two_sites(tmp_path, second=True, day=day, link=2.0, ratio=0.5, segments=2, hours=12.0, hours2=10.0,
                     home="a")
    dec = Decomposition(inst)
    data = dec.data
    every = brute_force_paths(inst, data)
    best = min(value for _, value in every)
    pm, out = converged_pattern_master(dec)
    root = BranchNode((), out.bound, out.prices)
    rng = np.random.default_rng(0)
    raised = 0
    for _ in range(12):
        rules = []
        for _ in range(int(rng.integers(1, 4))):
            j = int(rng.integers(len(data.graphs)))
            paths, _ = every[int(rng.integers(len(every)))]
            k = int(rng.integers(data.graphs[j].n_stages))
            rules.append((j, k, int(paths[j][k]), bool(rng.integers(2))))
        allowed = [v for paths, v in every if all((paths[j][k] == c) == keep for j, k, c, keep in rules)]
        node, _ = evaluate_node(pm, dec.searches, BranchNode(tuple(rules), root.bound, root.prices),
                                time.perf_counter() + 60)
        assert root.bound - 1e-9 <= node.bound <= min(allowed, default=np.inf) + 1e-6
        raised += node.bound > root.bound + 1e-3
    assert raised >= 3  # the rules do raise the bound (the check is not vacuous)
    info: dict = {}
    bound, schedules = branch_bound(pm, dec.searches, root, np.inf, time.perf_counter() + 60, info)
    assert out.bound - 1e-9 <= bound <= best + 1e-6 and info["nodes"] >= 1
    for paths in schedules:
        assert data.fits(paths) and data.objective_usd(paths) >= best - 1e-6
