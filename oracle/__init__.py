"""Exact MILP oracle of a day (DESIGN §3): Pyomo model, HiGHS by default, checked against the simulator.

Public API:

- :func:`solve` -- one call: an Instance (or a case + day + overrides) -> :class:`OracleResult`;
- :class:`OracleModel` -- build once, ``solve()`` many times, ``update(instance)`` for sweeps over
  days, prices, renewable ratio or tranches, ``write(path)`` for other solvers (MPS);
- :class:`OracleResult` -- status, schedule, objective, bound, gap, seconds, the simulator's metrics,
  reason; ``to_dict()`` for JSON;
- :func:`precheck` -- the quick infeasibility proofs with their reasons;
- :data:`FORMULATIONS` -- ``"fast"`` (joint states, the default) and ``"textbook"``.

Command line: ``python -m oracle --help``.
"""

from oracle.feasibility import FeasibilityCheck, precheck
from oracle.formulations import FORMULATIONS
from oracle.model import DEFAULT_MIP_GAP, DEFAULT_TIME_LIMIT_S, STATUSES, OracleModel, OracleResult, solve

__all__ = [
    "DEFAULT_MIP_GAP",
    "DEFAULT_TIME_LIMIT_S",
    "FORMULATIONS",
    "STATUSES",
    "FeasibilityCheck",
    "OracleModel",
    "OracleResult",
    "precheck",
    "solve",
]
