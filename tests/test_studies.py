"""Each research study runs end to end on a small grid and shows the expected shape."""

from __future__ import annotations

import pandas as pd
import pytest

from aidc_env.baselines import fixed_schedule
from aidc_env.case import build_instance, load_case
from aidc_env.simulator import simulate
from experiments import studies
from experiments.studies import continuous_power_optimum, restrict_to_baseline_mode
from experiments.runs import update_docs_section


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    out = tmp_path_factory.mktemp("studies")
    # K = 4 keeps every solve well under a second; the grids below set K where it matters.
    case = load_case("2048").with_overrides(segments=4)
    return studies.StudyContext(case=case, profiles=None, day=None, backend=1, time_limit_s=60, out=out)


def test_checkpoint_study_diminishing_returns(ctx):
    frame, table = studies.study_checkpoints(ctx, grid=[1, 2, 4, 8])
    costs = frame.sort_values("segments")["operating_cost_usd"].to_numpy()
    # More checkpoints never cost more (every schedule of K is one of 2K), and the gains shrink.
    assert all(b <= a + 1e-6 for a, b in zip(costs, costs[1:]))
    gains = -pd.Series(costs).diff().dropna().to_numpy()
    assert gains[-1] <= gains[0]
    assert "| K |" in table and (ctx.out / "checkpoints.png").stat().st_size > 0


def test_gpu_study_threshold(ctx):
    frame, table = studies.study_gpus(ctx, grid=[768, 1152, 1280, 2048])
    feasible = dict(zip(frame["gpus"], frame["feasible"]))
    assert feasible == {768: False, 1152: False, 1280: True, 2048: True}
    assert frame.loc[frame["gpus"] == 1152, "reason"].iloc[0] != ""


def test_renewable_study_green_share_rises(ctx):
    frame, _ = studies.study_renewable(ctx, grid=[0.0, 0.5, 1.0, 1.5])
    dispatch = frame[frame["series"] == "3D dispatch"].sort_values("renewable_ratio")
    green = dispatch["green_share"].to_numpy()
    assert green[0] == 0.0 and all(b >= a for a, b in zip(green, green[1:]))
    assert (frame.groupby("series").size() == 4).all()


def test_flexibility_study_orders_the_load_models(ctx):
    frame, table = studies.study_flexibility(ctx)
    cost = dict(zip(frame["model"].str[:3], frame["operating_cost_usd"]))
    # (d) relaxes (b) and (c), and (e) relaxes everything: each is at most the cost of the models it contains.
    assert cost["(d)"] <= min(cost["(b)"], cost["(c)"]) + 1e-6
    assert cost["(b)"] <= cost["(a)"] + 1e-6 and cost["(c)"] <= cost["(a)"] + 1e-6
    assert cost["(e)"] <= cost["(d)"] + 1e-6
    change = dict(zip(frame["model"].str[:3], frame["cost_change_vs_fixed"]))
    assert change["(a)"] == 0.0
    # The table names every load model and states by how much (e) overstates the saving of (d).
    assert all(model in table for model in frame["model"])
    overstatement = change["(d)"] - change["(e)"]
    assert overstatement >= -1e-9
    assert f"claims a saving {abs(overstatement):.2%} points larger" in table


def test_headline_and_results_section(ctx, tmp_path):
    frame, table = studies.study_headline(ctx)
    fixed, best = frame.iloc[0], frame.iloc[1]
    assert best["operating_cost_usd"] < fixed["operating_cost_usd"]
    results = tmp_path / "results.md"
    update_docs_section(results, "headline", table, ["2023-06-17"])
    update_docs_section(results, "headline", "replaced", ["2023-06-17"])
    text = results.read_text()
    assert text.count("<!-- study:headline days=1:") == 1 and "replaced" in text


def test_baseline_restriction_and_continuous_model():
    inst = build_instance("2048", segments=4)
    restricted = restrict_to_baseline_mode(inst)
    assert [job.n_modes for job in restricted.jobs] == [1, 1]
    assert simulate(restricted, fixed_schedule(restricted)).metrics.operating_cost_usd == pytest.approx(
        simulate(inst, fixed_schedule(inst)).metrics.operating_cost_usd, rel=1e-12)
    continuous = continuous_power_optimum(inst)
    assert continuous.status == "optimal"
    assert continuous.gpus_used.max() <= inst.n_gpus + 1e-6


def test_study_cli_writes_csv_png_and_section(tmp_path):
    results = tmp_path / "docs" / "results.md"
    out = tmp_path / "run"
    code = studies.main(["gpus", "--grid", "1152,1280", "--out", str(out), "--results", str(results),
                         "--workers", "1"])
    assert code == 0
    assert (out / "gpus.csv").exists() and (out / "gpus.png").exists() and (out / "gpus.md").exists()
    assert not results.exists() and not (out / "gpus.partial.csv").exists()  # docs only with --update-docs
    with pytest.raises(studies.InputError, match="already holds a run's results"):  # each run its own folder
        studies.main(["gpus", "--grid", "1152,1280", "--out", str(out), "--results", str(results), "--workers", "1",
                      "--update-docs"])
    code = studies.main(["gpus", "--grid", "1152,1280", "--out", str(tmp_path / "again"), "--results", str(results),
                         "--workers", "1", "--update-docs"])
    assert code == 0
    assert "<!-- study:gpus days=1:" in results.read_text() and "(figures/gpus.png)" in results.read_text()
    assert (tmp_path / "docs" / "figures" / "gpus.png").exists()
