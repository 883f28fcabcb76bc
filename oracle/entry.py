"""The one entry of the oracle: :func:`solve` answers a day, a horizon, a fleet or several sites by one of
:data:`~oracle.constants.METHODS`.

- ``exact``: the day oracle (:class:`oracle.model.OracleModel`, fast formulation): one site, no fleet workloads
  (fine-tuning, inference, an idle-GPU value), at most two jobs, of the grid's side grid calls alone (priced into the
  joint states' costs: :func:`oracle.data.call_costs`); optimality proved by label setting or branch and bound, the
  textbook MILP raced as the guard; a tariff's demand charges (peak rows over the joint states) by branch and bound
  alone;
- ``decomposition``: column generation with a proven Lagrangian bound (:mod:`oracle.decomposition`), any instance
  without power caps, tiers or a training value (grid calls it models: :mod:`oracle.call_rows`);
- ``textbook``: the day's direct MILP (the textbook formulation of :mod:`oracle.formulations`): one site, no fleet
  workloads, no placement or start (any number of jobs); the one method that models all the grid's side (GPU power
  caps, grid calls, throughput tiers, a training value: :mod:`oracle.grid_rows`) and a tariff's demand charges;
- ``auto`` (the default): ``textbook`` for a tariff's demand charges (its model is the smaller; the peak-level search
  first, :mod:`oracle.peak_search`) or a grid side the exact oracle does not take (``decomposition`` for grid calls
  alone where the textbook does not apply), else ``exact`` where it applies, else ``decomposition``. The exact oracle
  proves its days (its joint-state network is exact, its answers are the regression pins), but its states multiply
  with every job and site; the decomposition scales to fleets and sites and reports its proven bound and gap.

Every answer is an :class:`~oracle.result.OracleResult` whose metrics are the simulator's replay of its schedule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aidc_env.case import Case, build_instance
from aidc_env.errors import require
from aidc_env.instance import Instance
from aidc_env.profiles import ProfileSet
from oracle.call_rows import joint_state_calls, refusal
from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_SOLVER, DEFAULT_TIME_LIMIT_S, METHODS
from oracle.race import RACE_AFTER_S
from oracle.result import OracleResult, Start


def exact_applies(inst: Instance) -> bool:
    """The exact day oracle applies: one site, no fleet workloads, at most two jobs, and of the grid's side at most grid
    calls whose payment is linear in the import (:func:`oracle.call_rows.joint_state_calls`)."""
    return (not inst.has_sites and not inst.has_fleet_workloads and joint_state_calls(inst)
            and len(inst.jobs) <= 2)


def route(inst: Instance, method: str = "auto", placement: str = "move", start: Start | None = None) -> str:
    """The model a request solves: ``exact``, ``textbook`` or ``decomposition``; one InputError line for a method that
    cannot answer it."""
    require(method in METHODS, "method", f"must be one of {', '.join(METHODS)}, got {method!r}")
    day_model = exact_applies(inst) and placement == "move" and start is None
    textbook = not inst.has_sites and not inst.has_fleet_workloads and placement == "move" and start is None
    if method == "auto" and (inst.has_demand_charges or (inst.has_grid_side and not day_model)):
        if not textbook and not refusal(inst):  # grid calls only, on sites or fleets
            return "decomposition"
        require(textbook, "method", "power caps, tiers, a training value and demand charges are solved by the "
                "textbook MILP of one "
                "site without fine-tuning, inference or idle-GPU value (no placement or start either); grid calls "
                "alone also by the decomposition")
        return "textbook"
    if method == "auto":
        return "exact" if day_model else "decomposition"
    if method == "exact":
        require(day_model, "method", "exact solves one site with at most two jobs and no fine-tuning, inference, "
                "idle-GPU value, power caps, tiers or training value (grid calls it takes when their payment is linear "
                "in the import; no placement or start either): use 'decomposition', 'textbook' or 'auto'")
    if method == "decomposition":
        require(not refusal(inst), "method", refusal(inst))
    if method == "textbook":
        require(textbook, "method", "textbook solves the day MILP of one site without fine-tuning, inference or "
                "idle-GPU value (no placement or start either): use 'decomposition' or 'auto'")
    return method


def solve(case_or_instance: Instance | Case | str | Path, day: str | None = None, *, method: str = "auto",
          profiles: ProfileSet | str | Path | None = None, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
          mip_gap: float = DEFAULT_MIP_GAP, solver: str = DEFAULT_SOLVER, warm_start: bool = True,
          allow_pause: bool = True, reduce: bool = True, labeling: bool = True,
          race_after_s: float | None = RACE_AFTER_S, threads: int | None = None, tee: bool = False,
          placement: str = "move", start: Start | None = None, **overrides: Any) -> OracleResult:
    """Solve an instance (or a case on a day) by ``method`` (see the module docstring).

    ``case_or_instance``: an :class:`~aidc_env.instance.Instance` (used as is), or a case (name, TOML path or
    :class:`~aidc_env.case.Case`) resolved with ``day``, ``profiles`` and ``overrides`` (``gpus``, ``segments``,
    ``renewable_ratio``, any case field) through :func:`~aidc_env.case.build_instance`. ``allow_pause=False`` forbids
    pausing (every job runs some mode in every segment of its window). The day oracle's options: ``solver`` (any Pyomo
    solver; the others run HiGHS), ``reduce=False`` (the fast model in one piece, without the Lagrangian reduction),
    ``labeling=False`` (branch and bound only), ``race_after_s`` (CPU seconds after which the textbook MILP races a
    solve still running; None: never). The decomposition's options: ``placement`` (``move``,
    ``home``, ``stay``, ``free``: :mod:`oracle.graph`) and ``start``, a (schedule, sites) pair to start from.
    """
    if isinstance(case_or_instance, Instance):
        given = {k for k, v in overrides.items() if v is not None}
        require(day is None and profiles is None and not given, "overrides",
                "day, profiles and overrides apply to a case, not to an Instance")
        inst = case_or_instance
    else:
        inst = build_instance(case_or_instance, day=day, profiles=profiles, **overrides)
    model = route(inst, method, placement, start)
    require(solver == DEFAULT_SOLVER or model in ("exact", "textbook"), "solver",
            f"the {model} method runs HiGHS only (another solver serves the day models)")
    if model in ("exact", "textbook"):
        from oracle.model import OracleModel  # Pyomo loads on first use

        formulation = "fast" if model == "exact" else "textbook"
        result = OracleModel(inst, formulation=formulation, solver=solver, allow_pause=allow_pause, reduce=reduce,
                             labeling=labeling, race_after_s=race_after_s).solve(
            time_limit_s=time_limit_s, mip_gap=mip_gap, warm_start=warm_start, threads=threads, tee=tee)
        result.method = model
        return result
    from oracle.decomposition import Decomposition

    return Decomposition(inst, placement=placement, allow_pause=allow_pause).solve(
        time_limit_s=time_limit_s, mip_gap=mip_gap, warm_start=warm_start, threads=threads, start=start)


__all__ = ["exact_applies", "route", "solve"]
