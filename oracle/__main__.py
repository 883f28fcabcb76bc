"""Command line of the oracle: ``python -m oracle --case 2048 [overrides] [--method M] [--time-limit S] --json``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aidc_env import limits
from aidc_env.case import add_case_arguments, instance_from_args
from aidc_env.errors import CliParser, exit_at_once, require, require_number, run_cli
from aidc_env.instance import Instance, load_instance
from aidc_env.io import atomic_path, check_output_file, dumps_json
from aidc_env.schedule import validate_schedule
from aidc_env.simulator import bill_line, format_metrics, simulate, site_bills
from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_SOLVER, DEFAULT_TIME_LIMIT_S, METHODS, PLACEMENTS

if TYPE_CHECKING:
    from oracle.result import OracleResult


def build_parser() -> CliParser:
    parser = CliParser(prog="python -m oracle", description="The oracle of a day, a horizon, a fleet or several sites: "
                       "the cheapest schedule of checkpoint segments (per job and segment a 3D mode or a pause, and "
                       "with several sites the site holding its checkpoint) that meets every target within the GPU "
                       "pools, with a proven lower bound. The objective is the operating cost less the idle-GPU value. "
                       "Prints status, objective, bound, gap, seconds, the simulator's metrics and the schedule (mode "
                       "index per segment, -1 for pause). An infeasible case is an answer (exit code 0, status "
                       "infeasible with the reason); bad input exits with code 2.")
    add_case_arguments(parser)
    parser.add_argument("--instance", help="solve this instance JSON (python -m aidc_env.case --json) instead of a "
                                           "case; the case options are then ignored")
    parser.add_argument("--method", choices=METHODS, default="auto",
                        help="exact: the day oracle (one site, at most two jobs, no fine-tuning, inference or idle-GPU "
                        "value; grid calls it takes); decomposition: column generation with a proven bound (any "
                        "instance); textbook: the day's direct MILP (one site, no fine-tuning, inference or idle-GPU "
                        "value); auto (default): textbook for caps, tiers, a training value or demand charges (which "
                        "the peak-level search bounds first), else exact where it applies, else decomposition")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S,
                        help=f"solver time limit in seconds (default {DEFAULT_TIME_LIMIT_S:g})")
    parser.add_argument("--mip-gap", type=float, default=DEFAULT_MIP_GAP,
                        help=f"relative optimality gap at which to stop (default {DEFAULT_MIP_GAP:g})")
    parser.add_argument("--solver", default=DEFAULT_SOLVER, help="highs (default: HiGHS via highspy, persistent) or, "
                        "for the day models, any Pyomo solver name (appsi_highs, cbc, glpk, gurobi, cplex, scip, ...)")
    parser.add_argument("--placement", choices=PLACEMENTS, default="move",
                        help="decomposition: move (default: jobs start at home and may move), home "
                             "(no migration), stay (one chosen site per job), free (chosen sites at t = 0, then moves)")
    parser.add_argument("--no-pause", action="store_true", help="forbid pausing: every job runs in every segment")
    parser.add_argument("--no-reduce", action="store_true",
                        help="exact: solve the whole model at once, without the Lagrangian reduction")
    parser.add_argument("--no-labeling", action="store_true", help="exact: skip the exact label-setting proof and "
                        "close the gap by the solver's branch and bound only")
    parser.add_argument("--no-race", action="store_true",
                        help="exact: never race the textbook MILP in a child process (oracle/race.py)")
    parser.add_argument("--no-warm-start", action="store_true", help="do not start from the baselines (fixed, greedy)")
    parser.add_argument("--threads", type=int, help="solver threads (default: the solver's own)")
    parser.add_argument("--mps", metavar="FILE", help="exact or the day's textbook: also write the model in MPS format "
                                                      "to FILE (for other solvers)")
    parser.add_argument("--log", action="store_true", help="show the solver's log (on stderr)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (default: a summary)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    require_number(args.time_limit, "time-limit", 0.0, limits.MAX_TIME_LIMIT_S, low_open=True)
    require(0 <= args.mip_gap < 1, "mip-gap", f"must be in [0, 1), got {args.mip_gap}")
    if args.threads is not None:
        require_number(args.threads, "threads", 1, limits.MAX_THREADS, integer=True)
    if args.mps:
        check_output_file(args.mps, "mps")
    inst = load_instance(args.instance) if args.instance else instance_from_args(args)
    from oracle.entry import route, solve  # Pyomo loads only once the input is known to be good
    from oracle.race import RACE_AFTER_S

    model = route(inst, args.method, args.placement)
    if args.mps:
        require(model in ("exact", "textbook"), "mps", f"the {model} method has no single Pyomo model to write "
                "(--mps writes the day models: --method exact or textbook on one site)")
        from oracle.model import OracleModel

        formulation = "fast" if model == "exact" else "textbook"
        with atomic_path(args.mps) as temp:
            OracleModel(inst, formulation=formulation, allow_pause=not args.no_pause).write(str(temp), format="mps")
    stdout = sys.stdout
    if args.log:
        sys.stdout = sys.stderr  # the solver log goes to stderr, the answer to stdout
    try:
        result = solve(inst, method=args.method, time_limit_s=args.time_limit, mip_gap=args.mip_gap, solver=args.solver,
                       warm_start=not args.no_warm_start, allow_pause=not args.no_pause, reduce=not args.no_reduce,
                       labeling=not args.no_labeling, race_after_s=None if args.no_race else RACE_AFTER_S,
                       threads=args.threads, tee=args.log, placement=args.placement)
    finally:
        sys.stdout = stdout
    bills = tariff_bills(inst, result)
    if args.json:
        print(dumps_json({**result.to_dict(), **({"bills": {name: b.to_dict() for name, b in bills.items()}}
                                                 if bills else {})}, indent=1))
    else:
        print("\n".join([summary(result)] + [bill_line(name, b) for name, b in bills.items()]))
    return 0


def tariff_bills(inst: Instance, result: OracleResult) -> dict[str, Any]:
    """Under a tariff or a coincident-peak charge, each site's itemised bill of the answer's schedule (the simulator's
    replay); else none."""
    if (inst.tariff is None and inst.coincident_peak is None) or result.schedule is None:
        return {}
    replayed = simulate(inst, validate_schedule(inst, result.schedule, result.sites, result.caps))
    return site_bills(inst, replayed, inst.tariff)


def summary(result: OracleResult) -> str:
    lines = [f"{result.case} on {result.day}: {result.status}"]
    if result.objective_usd is not None:
        bound = "none" if result.best_bound_usd is None else f"${result.best_bound_usd:,.4f}"
        gap = "none" if result.gap is None else f"{result.gap:.2e}"
        lines.append(f"objective ${result.objective_usd:,.4f} (best bound {bound}, gap {gap}), build "
                     f"{result.build_seconds:.2f} s, solve {result.solve_seconds:.2f} s [{result.method}, "
                     f"{result.formulation}, {result.solver}{', ' + result.proof if result.proof else ''}]")
    if result.reason:
        lines.append(f"reason: {result.reason}")
    if result.metrics is not None:
        lines.append(format_metrics(result.metrics))
    schedule, sites = result.schedule_by_job(), result.sites_by_job()
    for name, row in (schedule or {}).items():
        where = f"   sites {', '.join(dict.fromkeys(sites[name]))}" if sites else ""
        lines.append(f"  {name}: {' '.join(f'{c:>2d}' for c in row)}   modes {', '.join(result.modes_used[name])}"
                     + where)
    return "\n".join(lines)


if __name__ == "__main__":
    exit_at_once(run_cli(main))  # HiGHS's threads may outlive a Ctrl-C
