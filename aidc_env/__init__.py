"""aidc_env: checkpoint-aware 3D dispatch of LLM pre-training as a flexible grid load.

The package holds the 3D mode generator (:mod:`aidc_env.modes`), cases (:mod:`aidc_env.case`) and the
instances built from them (:mod:`aidc_env.instance`; fine-tuning, inference and the idle-GPU value in
:mod:`aidc_env.workloads`), CAISO profiles (:mod:`aidc_env.profiles`), the day simulator that computes
every cost and metric (:mod:`aidc_env.simulator`) and the Gymnasium environment
(:mod:`aidc_env.env`: one class registered on import as ``aidc_env/CheckpointDispatch-v0`` and its variants).

Submodules are imported lazily, so that ``python -m aidc_env.<module>`` runs each CLI cleanly.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {name: module for module, names in {
    "aidc_env.instance": ("PAUSE", "Instance", "Job", "load_instance"),
    "aidc_env.case": ("Case", "JobSpec", "build_instance", "load_case"),
    "aidc_env.errors": ("InputError",),
    "aidc_env.simulator": ("Metrics", "SimulationResult", "simulate"),
    "aidc_env.profiles": ("load_profiles",),
    "aidc_env.modes": ("generate_modes",),
    "aidc_env.workloads": ("Inference",),
    "aidc_env.schema": ("InferenceSpec",),
}.items() for name in names}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aidc_env' has no attribute {name!r}")


def register_envs() -> None:
    """Register the env's ids (``aidc_env/CheckpointDispatch-v0``, ``FleetDispatch-v0``, ``SitesDispatch-v0``,
    ``SitesFleetDispatch-v0``, ``GridCallsDispatch-v0``: one class, :class:`aidc_env.env.DispatchEnv`, with the default
    configurations of
    :data:`aidc_env.env.core.VARIANTS`) with Gymnasium (idempotent).

    Only the entry point is registered: :mod:`aidc_env.env` is imported by ``gymnasium.make``, so that importing the
    package stays light and ``python -m aidc_env.<module>`` runs cleanly.
    """
    import gymnasium

    for env_id, config in ENV_VARIANTS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point="aidc_env.env:DispatchEnv", kwargs=dict(config))


ENV_VARIANTS = {"aidc_env/CheckpointDispatch-v0": {"case": "2048", "action": "joint"},
                "aidc_env/FleetDispatch-v0": {"case": "fleet", "action": "per_job"},
                "aidc_env/SitesDispatch-v0": {"case": "sites3", "action": "per_job"},
                "aidc_env/SitesFleetDispatch-v0": {"case": "sites-fleet", "action": "per_job"},
                "aidc_env/GridCallsDispatch-v0": {"case": "2048", "action": "joint",
                                                  "overrides": {"power_caps": {"curve": "a100-dvfs"}},
                                                  "call_stream": "bip:0.25"}}
"""Registered ids → the env configuration keys they set (the rest: :func:`aidc_env.env.default_config`)."""


register_envs()
