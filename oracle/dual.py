"""Token prices μ without the LP relaxation: the Lagrangian dual of the tranche rows, by cutting planes.

Relaxing the tranche rows with prices μ_j ≥ 0 ($ per token) turns the day into a shortest path over the
joint-state network (:meth:`oracle.labeling.LabelSearch.lagrangian`)::

    L(μ) = min over schedules p of  cost(p) + Σ_j μ_j·(W_j − tokens_j(p))

L(μ) is a lower bound on every tranche-meeting schedule for *any* μ ≥ 0 (weak duality), so the bounds
and the label search built on it stay valid whatever μ is returned; a better μ only makes them tighter.
L is concave and piecewise linear: each schedule p met so far gives a cut ``z ≤ cost(p) + μ·(W − tokens(p))``
and Kelley's cutting-plane method maximises the cuts' minimum (a tiny LP: one variable per job and z, in
highspy) and adds the cut of the shortest path at its maximiser, until the cuts' maximum is within
:data:`DUAL_RTOL` of the best L found. The result is the Lagrangian dual optimum, which is never below the
LP relaxation's bound of the fast formulation (whose restart rows are looser than the paths).

μ is scaled as ν_j = μ_j·W_j ($ per whole tranche) for the LP and boxed in [0, :data:`PRICE_BOX` × the day's
dearest cost]; a maximiser on the box (the tranches may be jointly out of reach) is reported as such, and
the oracle then takes the LP path, which explains infeasibility.
"""

from __future__ import annotations

from dataclasses import dataclass

import highspy
import numpy as np

from oracle.labeling import LabelSearch

DUAL_RTOL = 1e-9
"""Stop when the cutting-plane model's maximum is within this (relative) of the best Lagrangian bound."""

MAX_CUTS = 200
"""Most shortest paths (cuts) before the method stops with the best μ found (measured: 10-40 suffice)."""

PRICE_BOX = 10.0
"""ν_j = μ_j·W_j is at most this × the day's dearest cost: beyond it a tranche is not worth meeting."""


@dataclass(frozen=True)
class DualOutcome:
    mu_per_token: np.ndarray
    bound_usd: float
    """L(μ): a lower bound on every tranche-meeting schedule."""
    cuts: int
    on_box: bool
    """The maximiser sits on the price box: the tranches may be out of reach together (use the LP)."""


def lagrangian_prices(search: LabelSearch) -> DualOutcome:
    """Maximise the Lagrangian bound over μ ≥ 0 (see the module docstring)."""
    need = search.tranche
    n_jobs = need.size
    priced = need > 0
    box = PRICE_BOX * max(1.0, search.most_cost_usd)
    scale = np.where(priced, need, 1.0)  # ν = μ·W

    lp = highspy.Highs()
    lp.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    # columns: ν_0..ν_{n-1}, z; maximise z
    for j in range(n_jobs):
        lp.addVar(0.0, box if priced[j] else 0.0)
    lp.addVar(-inf, inf)
    lp.changeColCost(n_jobs, -1.0)  # HiGHS minimises: min −z

    nu = np.zeros(n_jobs)
    best: tuple[float, np.ndarray] | None = None
    cuts = 0
    while cuts < MAX_CUTS:
        mu = nu / scale
        value, cost, tokens = search.lagrangian(mu)
        cuts += 1
        if best is None or value > best[0]:
            best = (value, mu)
        # z − Σ ν_j·(1 − tokens_j / W_j) ≤ cost
        slope = np.where(priced, 1.0 - tokens / scale, 0.0)
        lp.addRow(-inf, cost, n_jobs + 1, np.arange(n_jobs + 1, dtype=np.int32),
                  np.append(-slope, 1.0).astype(float))
        lp.run()
        if lp.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            break
        solution = np.asarray(lp.getSolution().col_value, dtype=float)
        nu, top = solution[:n_jobs], float(solution[n_jobs])
        if top - best[0] <= DUAL_RTOL * max(1.0, abs(best[0])):
            break
    assert best is not None
    on_box = bool(np.any(best[1] * scale >= box * (1.0 - 1e-9)))
    return DualOutcome(best[1], best[0], cuts, on_box)
