"""The oracle: the cheapest schedule of a day, a horizon, a fleet or several sites, with a proven bound.

Public API:

- :func:`solve` -- one call: an Instance (or a case + day + overrides) and one of :data:`METHODS` (``auto``,
  ``exact``, ``decomposition``, ``textbook``: :mod:`oracle.entry`) -> :class:`OracleResult`;
- :class:`OracleModel` -- the day model: build once, ``solve()`` many times, ``update(instance)`` for sweeps over days,
  prices, renewable ratio or tranches, ``write(path)`` for other solvers (MPS);
- :class:`Decomposition` -- the decomposition of one instance;
- :class:`OracleResult` -- status, schedule and sites, objective, bound, gap, seconds, the simulator's metrics, reason;
  ``to_dict()`` for JSON;
- :func:`precheck` -- the day model's quick infeasibility proofs with their reasons;
- :data:`FORMULATIONS` -- the day model's ``"fast"`` (joint states, the default) and ``"textbook"``.

Command line: ``python -m oracle --help``. The heavy modules (Pyomo, SciPy) load on first use of the API, so that the
command line answers bad input at once.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_SOLVER, DEFAULT_TIME_LIMIT_S, FORMULATIONS, METHODS, STATUSES

if TYPE_CHECKING:
    from oracle.decomposition import Decomposition
    from oracle.entry import solve
    from oracle.feasibility import FeasibilityCheck, precheck
    from oracle.model import OracleModel
    from oracle.result import OracleResult

_LAZY = {"Decomposition": "oracle.decomposition", "FeasibilityCheck": "oracle.feasibility",
         "precheck": "oracle.feasibility", "OracleModel": "oracle.model", "OracleResult": "oracle.result",
         "solve": "oracle.entry"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'oracle' has no attribute {name!r}")


__all__ = ["DEFAULT_MIP_GAP", "DEFAULT_SOLVER", "DEFAULT_TIME_LIMIT_S", "FORMULATIONS", "METHODS", "STATUSES",
           "Decomposition", "FeasibilityCheck", "OracleModel", "OracleResult", "precheck", "solve"]
