"""train.py → save → load → evaluate, with tiny timesteps (seconds, not minutes), and evaluate's JSON schema."""

from __future__ import annotations

import json

import numpy as np
import pytest

import evaluate
import train
from agents.days import split_days
from agents.ppo import CONFIG_ATTRIBUTE, PPOConfig, load_model, model_config, ppo_schedule, rollout_schedule, wrap_env
from aidc_env.baselines import fixed_schedule
from aidc_env.case import build_instance
from aidc_env.env import DispatchEnv
from aidc_env.profiles import load_profiles
from aidc_env.simulator import simulate

TINY = ["--timesteps", "128", "--n-envs", "2", "--n-steps", "32", "--batch-size", "32", "--n-epochs", "1",
        "--net-arch", "16", "--checkpoint-freq", "64"]
METRIC_KEYS = ("operating_cost_usd", "curtailment_mwh", "green_share", "completion")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny training run on the bundled days (shared by the tests of this module)."""
    out = tmp_path_factory.mktemp("run")
    assert train.main([*TINY, "--out", str(out), "--seed", "3"]) == 0
    return out


def test_train_saves_model_config_and_checkpoints(trained):
    assert (trained / "model.zip").is_file()
    assert sorted(p.name for p in (trained / "checkpoints").glob("ppo_*_steps.zip")) == [
        "ppo_128_steps.zip", "ppo_64_steps.zip"]
    assert any((trained / "tb").rglob("events.out.tfevents.*"))
    record = json.loads((trained / "config.json").read_text())
    config = record["config"]
    assert record["status"] == "done" and record["num_timesteps"] == 128
    assert config["seed"] == 3 and config["total_timesteps"] == 128 and config["net_arch"] == [16]
    for key in ("learning_rate", "n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda", "ent_coef",
                "clip_range", "env_kwargs", "reward_scale_usd", "decision_steps", "hourly_forecast"):
        assert key in config
    assert set(config["env_kwargs"]) >= {"lookahead", "reward_scale", "safety_mask"}
    train_days, heldout = split_days(load_profiles().dates())
    assert config["train_days"] == train_days and config["heldout_days"] == heldout
    assert not set(config["train_days"]) & set(config["heldout_days"])
    assert {"torch", "stable_baselines3", "sb3_contrib", "gymnasium"} <= set(record["versions"])
    assert record["heldout_check"]["tranches_met"] == 1.0


def test_load_and_schedule_completes(trained):
    model = load_model(trained / "model.zip")
    assert model_config(model).seed == 3
    assert getattr(model, CONFIG_ATTRIBUTE)["net_arch"] == [16]
    inst = build_instance("2048")
    schedule = ppo_schedule(model, inst)
    assert [len(s) for s in schedule.modes] == [job.segments for job in inst.jobs]
    metrics = simulate(inst, schedule).metrics
    assert metrics.tranches_met and metrics.capacity_ok  # the safety mask guarantees completion
    assert ppo_schedule(model, inst) == schedule  # deterministic


def test_resume_continues_from_newest_checkpoint(trained, tmp_path):
    out = tmp_path / "resumed"
    (out / "checkpoints").mkdir(parents=True)
    source = trained / "checkpoints" / "ppo_64_steps.zip"
    (out / "checkpoints" / source.name).write_bytes(source.read_bytes())
    (out / "config.json").write_text((trained / "config.json").read_text())
    assert train.main(["--resume", "--out", str(out)]) == 0
    record = json.loads((out / "config.json").read_text())
    assert record["num_timesteps"] == 128 and record["config"]["seed"] == 3


def test_evaluate_json_schema(trained, tmp_path):
    summary_path = tmp_path / "summary.json"
    code = evaluate.main(["--policies", "fixed,greedy,ppo", "--model", str(trained / "model.zip"), "--no-plots",
                          "--out", str(tmp_path / "eval"), "--json", str(summary_path)])
    assert code == 0
    summary = json.loads(summary_path.read_text())
    assert set(summary["policies"]) == {"fixed", "greedy", "ppo"}
    days = summary["days"]
    assert days == split_days(load_profiles().dates())[1]
    for name, block in summary["policies"].items():
        assert set(block) >= {"mean", "days"}
        for key in METRIC_KEYS:
            assert isinstance(block["mean"][key], float), (name, key)
        assert set(block["days"]) == set(days)
        for row in block["days"].values():
            for key in METRIC_KEYS:
                assert isinstance(row[key], float)
    assert summary["policies"]["ppo"]["mean"]["completion"] >= 1.0 - 1e-9


@pytest.mark.parametrize("factored", [False, True])
def test_wrapper_rewards_are_savings_versus_fixed(factored):
    inst = build_instance("2048")
    config = PPOConfig(factored_actions=factored, reward_day_scaled=False)
    env = wrap_env(DispatchEnv(case=inst, **config.behaviour_env_kwargs()), config)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    total, steps, done = 0.0, 0, False
    while not done:
        assert env.observation_space.contains(obs)
        mask = env.action_masks()
        assert mask.sum() > 1  # forced slots are played by the wrapper
        obs, reward, done, _, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        total += reward
        steps += 1
    assert steps <= max(job.segments for job in inst.jobs) * (len(inst.jobs) if factored else 1)
    fixed = simulate(inst, fixed_schedule(inst)).metrics.decision_cost_usd
    taken = simulate(inst, env.dispatch.schedule()).metrics
    assert taken.tranches_met
    assert total * config.reward_scale_usd == pytest.approx(fixed - taken.decision_cost_usd, rel=1e-9, abs=1e-9)


def test_rollout_schedule_random_completes():
    inst = build_instance("2048")
    rng = np.random.default_rng(0)
    schedule = rollout_schedule(inst, lambda obs, mask: int(rng.choice(np.flatnonzero(mask))))
    assert simulate(inst, schedule).metrics.tranches_met


def test_train_help_explains(capsys):
    with pytest.raises(SystemExit) as err:
        train.main(["--help"])
    assert err.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--timesteps", "--seed", "--profiles", "--n-envs", "--out", "--resume"):
        assert flag in text


def test_training_is_deterministic_given_the_seed(tmp_path):
    import torch

    args = ["--timesteps", "64", "--n-envs", "2", "--n-steps", "32", "--batch-size", "32", "--n-epochs", "1",
            "--net-arch", "16", "--checkpoint-freq", "1000", "--seed", "5"]
    params = []
    for name in ("a", "b"):
        assert train.main([*args, "--out", str(tmp_path / name)]) == 0
        model = load_model(tmp_path / name / "model.zip")
        params.append(torch.cat([p.detach().flatten() for p in model.policy.parameters()]))
    assert torch.equal(params[0], params[1])


def test_make_vec_env_uses_the_given_instances_only(monkeypatch):
    import aidc_env.case
    import aidc_env.env
    import aidc_env.env.core
    import aidc_env.profiles
    from agents.ppo import make_vec_env
    from aidc_env.case import build_instances

    instances = build_instances("2048", ["2023-04-15", "2023-07-25", "2023-10-28"])

    def forbidden(*args, **kwargs):
        raise AssertionError("make_vec_env reloaded a case or profiles")

    for module, name in ((aidc_env.case, "load_case"), (aidc_env.case, "load_profiles"),
                         (aidc_env.case, "build_instances"), (aidc_env.case, "build_instance"),
                         (aidc_env.profiles, "load_profiles"), (aidc_env.env.core, "build_instances")):
        monkeypatch.setattr(module, name, forbidden)
    config = PPOConfig(n_envs=2, seed=4)
    vec = make_vec_env(config, list(instances.values()))
    try:
        vec.reset()
        days = {env.unwrapped.instance().day for env in vec.envs}
        assert days <= set(instances)
        assert all(env.unwrapped.days == list(instances) for env in vec.envs)
        assert all(env.unwrapped.instance(d) is instances[d] for env in vec.envs for d in instances)
    finally:
        vec.close()


def test_docs_training_defaults_table_matches_ppoconfig():
    """docs/training.md's defaults table states PPOConfig's defaults (the one source of train.py's defaults)."""
    import re
    from pathlib import Path

    defaults = PPOConfig()
    text = (Path(__file__).resolve().parents[1] / "docs" / "training.md").read_text()
    section = text.split("## Defaults", 1)[1].split("\n## ", 1)[0]
    table = next(block for block in section.split("\n\n") if block.startswith("| setting"))
    fields = {"timesteps": "total_timesteps"}
    checked = set()
    for line in table.splitlines()[2:]:
        setting, value = [cell.strip() for cell in line.strip("|").split("|")][:2]
        names = [n.strip().strip("`").lstrip("-").replace("-", "_") for n in setting.split("/")]
        values = [v.strip() for v in value.split(" / ")]
        assert len(names) == len(values), line
        for name, shown in zip(names, values, strict=True):
            field = fields.get(name, name)
            expected = getattr(defaults, field)
            first = re.split(r"[\s(]", shown.strip("`"), maxsplit=1)[0].rstrip(",")
            if isinstance(expected, list):
                assert [int(x) for x in first.split(",")] == expected, line
            else:
                assert type(expected)(first.replace(",", "")) == expected, line
            checked.add(field)
    assert "linear" in table and defaults.lr_schedule == "linear"
    assert f"{defaults.net_arch[-1]} {defaults.activation}" in table
    assert f"`{defaults.vec_env}`" in table
    assert f"every {defaults.checkpoint_freq:,} steps" in text
    assert checked >= {"total_timesteps", "n_envs", "n_steps", "batch_size", "n_epochs", "learning_rate", "gamma",
                       "gae_lambda", "ent_coef", "net_arch", "reward_scale_usd", "torch_threads"}


def test_train_defaults_come_from_ppoconfig():
    args = train.parse_args([])
    defaults = PPOConfig()
    for flag, field in (("learning_rate", "learning_rate"), ("n_steps", "n_steps"), ("batch_size", "batch_size"),
                        ("n_epochs", "n_epochs"), ("gamma", "gamma"), ("gae_lambda", "gae_lambda"),
                        ("ent_coef", "ent_coef"), ("clip_range", "clip_range"), ("n_envs", "n_envs"),
                        ("seed", "seed"), ("vec_env", "vec_env"), ("checkpoint_freq", "checkpoint_freq"),
                        ("lr_schedule", "lr_schedule"), ("activation", "activation"),
                        ("reward_scale_usd", "reward_scale_usd"), ("factored_actions", "factored_actions"),
                        ("choice_features", "choice_features"), ("reward_day_scaled", "reward_day_scaled"),
                        ("forecast_plan", "forecast_plan"),
                        ("case", "case")):
        assert getattr(args, flag) == getattr(defaults, field), flag
    assert args.net_arch == defaults.net_arch
    assert args.lookahead == defaults.env_kwargs["lookahead"]
    # The wrapper's own keyword defaults are PPOConfig's too.
    import inspect

    from agents.steps import AgentSteps

    for name, parameter in inspect.signature(AgentSteps.__init__).parameters.items():
        if parameter.default is not inspect.Parameter.empty:
            assert parameter.default == getattr(defaults, name), name


def test_case_flags_are_declared_once():
    """train.py, evaluate.py, the studies, the oracle and the case CLI take the same case flags."""
    import argparse

    from aidc_env.case import add_case_arguments, case_overrides

    parser = argparse.ArgumentParser()
    add_case_arguments(parser)
    args = parser.parse_args(["--gpus", "1024", "--segments", "6", "--renewable-ratio", "0.5"])
    assert case_overrides(args) == {"gpus": 1024, "segments": 6, "renewable_ratio": 0.5}
    assert case_overrides(parser.parse_args([])) == {}
    args = train.parse_args(["--gpus", "1536", "--renewable-ratio", "0.4", "--profiles", "x.csv"])
    assert case_overrides(args) == {"gpus": 1536, "renewable_ratio": 0.4} and args.profiles == "x.csv"
