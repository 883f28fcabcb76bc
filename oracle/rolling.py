"""Re-solving the oracle on rolling sub-instances: built models kept per structure and re-priced in place.

A rolling controller (MPC, stochastic MPC) solves, at every re-planning point, the sub-instance of the remaining slots
from the current state. Its structure (remaining slots and segments, each job's current choice as its initial mode)
differs from one point to the next within a day, but recurs across days, scenarios and candidate first decisions.
:class:`RollingOracle` keeps one :class:`~oracle.OracleModel` per structure (least recently used first out) and
:meth:`~oracle.OracleModel.update` re-prices it in place (new objective, tranche right-hand sides) instead of rebuilding
the Pyomo model: only the first solve of a structure pays the build. Every solve's wall time is recorded
(:attr:`RollingOracle.seconds`).

A sub-instance the exact day oracle does not apply to (several sites, fleet workloads, more than two jobs:
:func:`oracle.entry.exact_applies`) is solved by :func:`oracle.solve` (the decomposition, from the jobs' current sites)
within the same time limit and gap; there is no built model to keep.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

from aidc_env.instance import Instance
from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_TIME_LIMIT_S
from oracle.data import span_days
from oracle.entry import exact_applies, solve
from oracle.model import OracleModel, OracleResult, structure_key

MAX_CACHED_MODELS = 256
"""Most built models kept (each holds a Pyomo model and a persistent HiGHS copy, a few MB)."""


@dataclass
class RollingOracle:
    """Solve many sub-instances, reusing a built model for every structure already seen."""

    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    mip_gap: float = DEFAULT_MIP_GAP
    max_models: int = MAX_CACHED_MODELS
    seconds: list[float] = field(default_factory=list)
    """Wall time of every solve (update or build included), in call order."""
    log: list[dict] = field(default_factory=list)
    """Per solve, in call order: its slots, the days it spans (:func:`oracle.data.span_days`), status, proof, gap and
    seconds (for benchmarks: whether every re-solve was proven optimal)."""
    builds: int = 0
    """How many solves had to build a model (the others re-priced one in place)."""
    _models: OrderedDict = field(default_factory=OrderedDict, repr=False)

    def solve(self, inst: Instance) -> OracleResult:
        tick = time.perf_counter()
        if not exact_applies(inst):
            return self._record(inst, solve(inst, time_limit_s=self.time_limit_s, mip_gap=self.mip_gap), tick)
        key = (structure_key(inst), tuple(m.it_power_kw for job in inst.jobs for m in job.modes))
        model = self._models.pop(key, None)
        if model is None:
            model = OracleModel(inst)
            self.builds += 1
        else:
            model.update(inst)
        self._models[key] = model
        while len(self._models) > self.max_models:
            self._models.popitem(last=False)
        return self._record(inst, model.solve(time_limit_s=self.time_limit_s, mip_gap=self.mip_gap), tick)

    def _record(self, inst: Instance, result: OracleResult, tick: float) -> OracleResult:
        self.seconds.append(time.perf_counter() - tick)
        self.log.append({"slots": inst.slots, "span_days": span_days(inst), "status": result.status,
                         "proof": result.proof, "gap": result.gap, "seconds": self.seconds[-1]})
        return result


__all__ = ["MAX_CACHED_MODELS", "RollingOracle"]
