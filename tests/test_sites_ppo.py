"""The sites PPO's defaults and its reference (issue 14 goal 2): train.py --case sites3 takes SITES_DEFAULTS (the
fleet recipe) and clones the decomposition oracle; the oracle cache keeps one file per method; evaluate.py divides by
the method it names in its JSON; bad method flags exit 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import evaluate
import train
from agents import sites_oracle
from agents.sites_oracle import DEFAULT_METHOD, METHOD_TAGS, METHODS, cache_path, solve_days
from agents.sites_train import ORACLE_TRAIN_DAYS, SITES_DEFAULTS, SITES_ENV_KWARGS
from aidc_env.case import build_instance
from aidc_env.errors import EXIT_BAD_INPUT, InputError, run_cli
from tests.conftest import simulate_at
from oracle.constants import SITES_ORACLE_REVISION
from tests.test_sites import TINY_SITES

TINY = TINY_SITES.format(segments=3, hours=14.0, link=0.5)
"""One job on two sites (tests/test_sites.py's tiny instance, 14 h baseline)."""


def test_train_sites3_defaults_are_the_sites_recipe():
    args = train.parse_args(["--case", "sites3"])
    assert args.learning_rate == 3e-5 and args.lr_schedule == "constant" and args.ent_coef == 0.0
    assert args.gae_lambda == 1.0 and args.n_steps == 512 and args.imitation_epochs == 60
    assert args.oracle_days == ORACLE_TRAIN_DAYS == 125
    assert args.oracle_method == DEFAULT_METHOD == "decomposition"
    assert args.oracle_time_limit == sites_oracle.DEFAULT_TRAIN_TIME_LIMIT_S == 30.0
    assert {k: getattr(args, k) for k in SITES_DEFAULTS if k != "total_timesteps"} == {
        k: v for k, v in SITES_DEFAULTS.items() if k != "total_timesteps"}
    flagged = train.parse_args(["--case", "sites3", "--n-steps", "128", "--oracle-method", "per-site-milp"])
    assert flagged.n_steps == 128 and flagged.oracle_method == "per-site-milp"
    one_site = train.parse_args(["--case", "2048"])  # the one-site defaults are untouched
    assert one_site.n_steps == 128 and one_site.gae_lambda == 0.95


def test_train_sites3_config_takes_900k_steps(monkeypatch, tmp_path):
    seen = {}

    def fake(args, config, out):
        seen.update(config=config, method=args.oracle_method)
        return 0

    monkeypatch.setattr(train, "train_sites", fake)
    assert train.main(["--case", "sites3", "--out", str(tmp_path / "run")]) == 0
    config = seen["config"]
    assert config.total_timesteps == SITES_DEFAULTS["total_timesteps"] == 900_000
    assert (config.learning_rate, config.ent_coef, config.gae_lambda, config.n_steps) == (3e-5, 0.0, 1.0, 512)
    assert seen["method"] == "decomposition"
    assert config.env_kwargs["pause_when_done"] is False and SITES_ENV_KWARGS == {"pause_when_done": False}


def test_sites_env_takes_the_recorded_pause_setting_and_one_site_keeps_its_default(monkeypatch, tmp_path):
    """A sites run records pause_when_done=False (SITES_ENV_KWARGS) and its env is built with it; a model trained
    before (config with True) replays in the env it was trained in; the PPOConfig default stays True."""
    from agents.ppo_config import PPOConfig
    from agents.sites_train import sites_env

    seen = {}
    monkeypatch.setattr(train, "train_sites", lambda args, config, out: seen.update(config=config) or 0)
    assert train.main(["--case", "sites3", "--out", str(tmp_path / "run")]) == 0
    inst = build_instance("sites3")
    assert sites_env(seen["config"], [inst]).sites_env.pause_when_done is False
    assert sites_env(PPOConfig(), [inst]).sites_env.pause_when_done is True
    restored = PPOConfig.from_dict(seen["config"].to_dict())
    assert restored.env_kwargs["pause_when_done"] is False
    assert PPOConfig().env_kwargs["pause_when_done"] is True  # the one-site (and fleet) default


@pytest.mark.parametrize("main,argv,field", [
    (train.main, ["--case", "sites3", "--oracle-method", "milp"], "oracle-method"),
    (train.main, ["--case", "sites3", "--oracle-time-limit", "0"], "oracle-time-limit"),
    (evaluate.main, ["--case", "sites3", "--oracle-method", "exact"], "oracle-method")])
def test_bad_oracle_flags_exit_2_with_one_line(capsys, tmp_path, main, argv, field):
    assert run_cli(main, [*argv, "--out", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0], err


def test_the_teacher_days_hold_the_earlier_63_so_their_cache_is_reused():
    """spread(days, 2k - 1) contains spread(days, k): the 125 teacher days hold the 63 of the earlier default (on the
    sites3 split's 301 training days and on every length up to 400)."""
    from agents.days import spread

    for n in range(1, 401):
        days = [f"d{i:03d}" for i in range(n)]
        assert set(spread(days, 63)) <= set(spread(days, ORACLE_TRAIN_DAYS)), n
    days = [f"d{i:03d}" for i in range(301)]
    assert len(spread(days, ORACLE_TRAIN_DAYS)) == 125


def test_solve_days_refuses_an_unknown_method(tmp_path):
    with pytest.raises(InputError, match="oracle-method"):
        solve_days([], tmp_path, 1.0, method="exact")


def test_each_method_has_its_own_cache_file(tmp_path):
    inst = build_instance("sites3")
    names = {cache_path(tmp_path, inst, 30.0, m).name for m in METHODS}
    assert names == {f"sites3_{inst.day}_30s.json", f"sites3_{inst.day}_decomposition_30s.json"}
    assert set(METHOD_TAGS) == set(METHODS)


def test_decomposition_answer_is_cached_replayed_and_never_worse_than_home(tmp_path, monkeypatch):
    path = tmp_path / "tiny2.toml"
    path.write_text(TINY)
    inst = build_instance(path)
    folder = tmp_path / "cache"
    answer = solve_days([inst], folder, 10.0, progress=False)[inst.day]
    data = json.loads(cache_path(folder, inst, 10.0).read_text())
    assert data["method"] == METHOD_TAGS["decomposition"] and data["day"] == inst.day
    replay = simulate_at(inst, answer.schedule, answer.sites).metrics
    assert replay.feasible and replay.operating_cost_usd == pytest.approx(answer.objective_usd, rel=1e-12)
    assert answer.objective_usd <= data["home_optimum_usd"] + 1e-9

    def refuse(*args, **kwargs):
        raise AssertionError("a cached day was solved again")

    monkeypatch.setattr(sites_oracle, "_solve", refuse)
    again = solve_days([inst], folder, 10.0, progress=False)[inst.day]
    assert again == answer
    # the other method's file name is not there: its answer is not taken from the decomposition's
    assert sites_oracle._read(cache_path(folder, inst, 10.0, "per-site-milp"), inst, "per-site-milp") is None
    assert sites_oracle._read(cache_path(folder, inst, 10.0), inst, "per-site-milp") is None
    # an answer of an earlier oracle revision (or of none: written before revisions were recorded) is solved again
    assert data["oracle_revision"] == SITES_ORACLE_REVISION
    for stale in (SITES_ORACLE_REVISION - 1, None):
        data["oracle_revision"] = stale
        cache_path(folder, inst, 10.0).write_text(json.dumps(data))
        assert sites_oracle._read(cache_path(folder, inst, 10.0), inst, "decomposition") is None
    monkeypatch.undo()  # the stale day is solved again (in a worker) and its file rewritten at this revision
    solve_days([inst], folder, 10.0, progress=False)
    assert json.loads(cache_path(folder, inst, 10.0).read_text())["oracle_revision"] == SITES_ORACLE_REVISION


def test_evaluate_sites_names_its_reference(tmp_path):
    path = tmp_path / "tiny2.toml"
    path.write_text(TINY)
    out = tmp_path / "eval"
    assert evaluate.main(["--case", str(path), "--policies", "oracle,fixed,greedy", "--days", "reference",
                          "--time-limit", "10", "--workers", "1", "--oracle-cache", str(tmp_path / "cache"),
                          "--out", str(out), "--no-plots"]) == 0
    summary = json.loads(Path(out / "summary.json").read_text())
    assert summary["oracle_method"] == "decomposition" and "decomposition" in summary["oracle"]
    ratio = summary["policies"]["fixed"]["ratio_to_oracle"]
    assert ratio["mean"] >= 1.0 - 1e-12 and ratio["max"] >= ratio["median"] >= 1.0 - 1e-12
    assert summary["policies"]["oracle"]["ratio_to_oracle"]["median"] == pytest.approx(1.0)
    assert summary["policies"]["oracle"]["every_target_met_and_capacity_kept"] == 1.0


def test_a_refused_running_choice_is_cloned_as_a_running_one_not_a_pause(tmp_path):
    """The warm start's fallback (agents/sites_train.py oracle_actions): a running choice the mask refuses becomes
    the nearest running mode at the schedule's site, else at the job's site -- never the lowest valid action."""
    from agents.ppo_config import PPOConfig
    from agents.sites_train import oracle_actions, sites_env

    path = tmp_path / "tiny2.toml"
    path.write_text(TINY)
    inst = build_instance(path)
    job = inst.jobs[0]
    big = max(range(job.n_modes), key=lambda c: job.modes[c].gpus)
    assert job.modes[big].gpus > inst.sites[1].n_gpus  # the schedule's mode does not fit site b
    env = sites_env(PPOConfig(env_kwargs={"lookahead": 0, "pause_when_done": False}), [inst])
    raw = env.sites_env
    env.reset(options={"day": inst.day})
    schedule, sites = [[big] * job.segments], [[1] * job.segments]
    done, steps = False, 0
    while not done:
        action, ok = oracle_actions(raw, schedule, sites)
        site, choice = divmod(action, raw.n_choices)
        assert raw.action_masks()[action] and choice > 0, (site, choice)
        if steps == 0:
            assert not ok
        _, _, done, _, _ = env.step(action)
        steps += 1
    assert simulate_at(inst, raw.schedule().mode_lists(), raw.schedule().site_lists()).metrics.feasible
