"""The backend switch: same results on a process pool and on a local Ray, whatever the number of workers; a clear
line when Ray is asked for but missing. One local Ray (2 CPUs, no dashboard) serves the whole module."""

from __future__ import annotations

import sys
import time
import types

import pytest

import evaluate
from agents.policies import PolicySettings
from aidc_env.case import build_instances, load_case
from aidc_env.errors import InputError, run_cli
from aidc_env.parallel import RAY_INSTALL_HINT, Backend, backend_from_args, open_pool
from experiments import studies

RAY_CPUS = 2
SEGMENTS = 4
"""K = 4 keeps each oracle solve well under a second."""


def _slow_square(x: int, delay_s: float) -> int:
    time.sleep(delay_s)
    return x * x


def _fail(field: str) -> None:
    raise InputError(field, "refused in the worker")


def _length(values: list[float], offset: int) -> int:
    return len(values) + offset


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the test module is not importable by workers
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def instances():
    case = load_case("2048").with_overrides(segments=SEGMENTS)
    return build_instances(case, case_days(case))


def case_days(case) -> list[str]:
    from aidc_env.profiles import load_profiles

    return list(load_profiles(None, renewable_capacity_mw=case.renewable_capacity_mw).dates())[:3]


def test_backend_flags_are_checked():
    assert Backend() == Backend("process", 1, None)
    for bad, field in [({"name": "dask"}, "backend"), ({"workers": 0}, "workers"),
                       ({"name": "process", "address": "auto"}, "ray-address"),
                       ({"name": "ray", "address": "http://x"}, "ray-address")]:
        with pytest.raises(InputError) as err:
            Backend(**bad)
        assert err.value.field == field
    for good in ("auto", "ray://head.example:10001", "10.0.0.5:6379"):
        assert Backend("ray", 2, good).address == good


def test_missing_ray_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    args = type("Args", (), {"backend": "ray", "ray_address": None})()
    with pytest.raises(InputError, match=r'pip install -e "\.\[ray\]"'):
        backend_from_args(args, workers=2)
    assert run_cli(evaluate.main, ["--policies", "fixed", "--backend", "ray", "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and RAY_INSTALL_HINT in err
    # The process backend never needs Ray.
    args.backend = "process"
    assert backend_from_args(args, workers=2) == Backend("process", 2)


def test_an_unreachable_cluster_is_one_line(monkeypatch):
    def no_cluster(**kwargs):
        raise ConnectionError("ray client connection timeout")

    fake = types.SimpleNamespace(is_initialized=lambda: False, init=no_cluster)
    monkeypatch.setitem(sys.modules, "ray", fake)
    with pytest.raises(InputError) as err:
        with Backend("ray", 2, "ray://head.example:10001").running():
            pass
    assert err.value.field == "ray-address" and "cannot connect to Ray at ray://head.example:10001" in str(err.value)


def test_process_pool_keeps_task_order():
    tasks = [(x, 0.05 * (4 - x)) for x in range(5)]  # the first tasks finish last
    for workers in (1, 2):
        with open_pool(Backend("process", workers)) as pool:
            assert list(pool.map(_slow_square, tasks)) == [x * x for x in range(5)]


def test_ray_keeps_order_shares_data_and_unwraps_errors(ray_local):
    tasks = [(x, 0.05 * (4 - x)) for x in range(5)]
    with open_pool(Backend("ray", 2)) as pool:
        assert list(pool.map(_slow_square, tasks)) == [x * x for x in range(5)]
        shared = pool.put([0.5] * 10_000)
        assert isinstance(shared, ray_local.ObjectRef)
        assert list(pool.map(_length, [(shared, k) for k in range(3)])) == [10_000, 10_001, 10_002]
        with pytest.raises(InputError) as err:
            list(pool.map(_fail, [("days",)]))
        assert err.value.field == "days"
    assert ray_local.is_initialized()  # a Ray the pool did not start is left running


def test_evaluate_sweep_same_on_both_backends(ray_local, instances):
    """A small evaluate sweep (oracle, mpc and fixed over 3 days) gives the same per-day numbers on a process
    pool of 1 and 2 workers and on Ray with 1 and 2 tasks in flight."""
    settings = PolicySettings(time_limit_s=60.0, seed=3)
    policies = ["oracle", "mpc", "fixed"]
    runs = {str(b): evaluate.summarise(evaluate.run_all(instances, policies, settings, b))[0]
            for b in (Backend("process", 1), Backend("process", 2), Backend("ray", 1), Backend("ray", 2))}
    reference = next(iter(runs.values()))
    assert len(reference) == len(policies) * len(instances)
    for frame in runs.values():
        assert list(frame["policy"]) == list(reference["policy"]) and list(frame["day"]) == list(reference["day"])
        for column in ("operating_cost_usd", "grid_energy_mwh", "completion"):
            assert (frame[column] - reference[column]).abs().max() <= 1e-6


def test_study_sweep_on_ray(ray_local, tmp_path):
    case = load_case("2048").with_overrides(segments=SEGMENTS)
    frames = [studies.study_checkpoints(studies.StudyContext(case, None, None, backend, 60.0, tmp_path / str(i)),
                                        grid=[1, 2, 4])[0]
              for i, backend in enumerate((Backend("process", 1), Backend("ray", 2)))]
    assert list(frames[0]["segments"]) == list(frames[1]["segments"])
    assert (frames[0]["operating_cost_usd"] - frames[1]["operating_cost_usd"]).abs().max() <= 1e-6
