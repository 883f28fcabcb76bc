"""Exact MILP oracle of a day (DESIGN §3): Pyomo model, HiGHS by default, checked against the simulator.

Public API:

- :func:`solve` -- one call: an Instance (or a case + day + overrides) -> :class:`OracleResult`;
- :class:`OracleModel` -- build once, ``solve()`` many times, ``update(instance)`` for sweeps over
  days, prices, renewable ratio or tranches, ``write(path)`` for other solvers (MPS);
- :class:`OracleResult` -- status, schedule, objective, bound, gap, seconds, the simulator's metrics,
  reason; ``to_dict()`` for JSON;
- :func:`precheck` -- the quick infeasibility proofs with their reasons;
- :data:`FORMULATIONS` -- ``"fast"`` (joint states, the default) and ``"textbook"``.

An instance with fleet workloads (fine-tuning, inference, an idle-GPU value) or more than two jobs goes to the
fleet oracle (:mod:`oracle.fleet`: column generation with a proven Lagrangian bound) through the same
:func:`solve` and :class:`OracleModel`; its result's ``formulation`` is ``"fleet"``.

Command line: ``python -m oracle --help``. The heavy modules (Pyomo, SciPy) load on first use of the
API, so that the command line answers bad input at once.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_SOLVER, DEFAULT_TIME_LIMIT_S, FORMULATIONS, STATUSES

if TYPE_CHECKING:
    from oracle.feasibility import FeasibilityCheck, precheck
    from oracle.model import OracleModel, OracleResult, solve

_LAZY = {
    "FeasibilityCheck": "oracle.feasibility",
    "precheck": "oracle.feasibility",
    "OracleModel": "oracle.model",
    "OracleResult": "oracle.model",
    "solve": "oracle.model",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'oracle' has no attribute {name!r}")


__all__ = [
    "DEFAULT_MIP_GAP",
    "DEFAULT_SOLVER",
    "DEFAULT_TIME_LIMIT_S",
    "FORMULATIONS",
    "STATUSES",
    "FeasibilityCheck",
    "OracleModel",
    "OracleResult",
    "precheck",
    "solve",
]
