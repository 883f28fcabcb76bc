"""aidc_env: checkpoint-aware 3D dispatch of LLM pre-training as a flexible grid load.

The package holds the 3D mode generator (:mod:`aidc_env.modes`), cases (:mod:`aidc_env.case`) and the
instances built from them (:mod:`aidc_env.instance`; fine-tuning, inference and the idle-GPU value in
:mod:`aidc_env.workloads`), CAISO profiles (:mod:`aidc_env.profiles`), the day simulator that computes
every cost and metric (:mod:`aidc_env.simulator`) and the Gymnasium environment
(:mod:`aidc_env.env`, registered as ``aidc_env/CheckpointDispatch-v0`` on import; the fleet env with per-job
actions, :mod:`aidc_env.fleet_env`, as ``aidc_env/FleetDispatch-v0``).

Submodules are imported lazily, so that ``python -m aidc_env.<module>`` runs each CLI cleanly.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "PAUSE": "aidc_env.instance",
    "Case": "aidc_env.case",
    "Instance": "aidc_env.instance",
    "Job": "aidc_env.instance",
    "JobSpec": "aidc_env.case",
    "build_instance": "aidc_env.case",
    "load_case": "aidc_env.case",
    "load_instance": "aidc_env.instance",
    "InputError": "aidc_env.errors",
    "Metrics": "aidc_env.simulator",
    "SimulationResult": "aidc_env.simulator",
    "simulate": "aidc_env.simulator",
    "load_profiles": "aidc_env.profiles",
    "generate_modes": "aidc_env.modes",
    "Inference": "aidc_env.workloads",
    "InferenceSpec": "aidc_env.workloads",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aidc_env' has no attribute {name!r}")


def register_envs() -> None:
    """Register ``aidc_env/CheckpointDispatch-v0``, ``aidc_env/FleetDispatch-v0`` and ``aidc_env/SitesDispatch-v0`` with Gymnasium (idempotent).

    Only the entry point is registered: :mod:`aidc_env.env` is imported by ``gymnasium.make``, so that
    importing the package stays light and ``python -m aidc_env.<module>`` runs cleanly.
    """
    import gymnasium

    if "aidc_env/CheckpointDispatch-v0" not in gymnasium.registry:
        gymnasium.register(id="aidc_env/CheckpointDispatch-v0", entry_point="aidc_env.env:CheckpointDispatchEnv")
    if "aidc_env/FleetDispatch-v0" not in gymnasium.registry:
        gymnasium.register(id="aidc_env/FleetDispatch-v0", entry_point="aidc_env.fleet_env:FleetDispatchEnv")
    if "aidc_env/SitesDispatch-v0" not in gymnasium.registry:
        gymnasium.register(id="aidc_env/SitesDispatch-v0", entry_point="aidc_env.sites_env:SitesDispatchEnv")


register_envs()
