"""Command line of the oracle: ``python -m oracle --case 2048 [overrides] [--time-limit S] --json``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aidc_env import limits
from aidc_env.case import add_case_arguments, instance_from_args
from aidc_env.errors import CliParser, require, require_number, run_cli
from aidc_env.instance import Instance, load_instance
from aidc_env.io import atomic_path, check_output_file, dumps_json
from aidc_env.simulator import format_metrics
from oracle.constants import DEFAULT_MIP_GAP, DEFAULT_SOLVER, DEFAULT_TIME_LIMIT_S, FORMULATIONS

if TYPE_CHECKING:
    from oracle.model import OracleResult


def build_parser() -> CliParser:
    parser = CliParser(
        prog="python -m oracle",
        description="Exact MILP oracle of one day (Pyomo + HiGHS): the cheapest schedule of checkpoint "
        "segments (a 3D mode or a pause per job and segment) that trains every daily tranche within the GPU pool. "
        "Optimality is proved exactly by a label-setting search of the model's joint-state network when it fits, "
        "else by the solver's branch and bound; when the label search stalls, the textbook MILP races it in a "
        "child process and the first proof wins (the JSON's 'proof': label-setting, branch-and-bound or textbook). "
        "An instance with fleet workloads (fine-tuning, inference, an idle-GPU value; e.g. --case fleet) or more than "
        "two jobs goes to the fleet oracle: column generation with a proven Lagrangian bound, the objective being "
        "the operating cost less the idle-GPU value (the JSON's formulation is 'fleet'; --formulation, --no-reduce, "
        "--no-labeling and --mps do not apply). "
        "An instance with several sites (e.g. --case sites3) goes to the sites decomposition (oracle/sites_cg.py: "
        "column generation over site-indexed job paths, then a pattern master (oracle/sites_patterns.py) with "
        "exact per-site costs and a proven Lagrangian bound; the "
        "JSON's formulation is 'sites-decomposition'); --formulation textbook solves it with the direct sites MILP "
        "instead. "
        "Prints status, objective, best bound, gap, seconds, the simulator's metrics of the schedule and the "
        "schedule itself (per job, per segment: mode index, or -1 for pause). Infeasible cases are an answer "
        "(status infeasible, with the reason), not an error: the exit code is 0. Bad input exits with code 2.",
    )
    add_case_arguments(parser)
    parser.add_argument("--instance", help="solve this instance JSON (python -m aidc_env.case --json) instead of a "
                                           "case; the case options are then ignored")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S,
                        help=f"solver time limit in seconds (default {DEFAULT_TIME_LIMIT_S:g})")
    parser.add_argument("--mip-gap", type=float, default=DEFAULT_MIP_GAP,
                        help=f"relative optimality gap at which to stop (default {DEFAULT_MIP_GAP:g})")
    parser.add_argument("--solver", default=DEFAULT_SOLVER,
                        help="highs (default: HiGHS via highspy, persistent) or any Pyomo solver name "
                             "(appsi_highs, cbc, glpk, gurobi, cplex, scip, ...)")
    parser.add_argument("--formulation", choices=FORMULATIONS, default="fast",
                        help="fast: joint states with exact block costs (default); textbook: per-slot load and "
                             "grid variables, for comparison")
    parser.add_argument("--no-pause", action="store_true", help="forbid pausing: every job runs in every segment")
    parser.add_argument("--no-reduce", action="store_true",
                        help="fast formulation: solve the whole model at once, without the Lagrangian reduction")
    parser.add_argument("--no-labeling", action="store_true",
                        help="fast formulation: skip the exact label-setting proof and close the gap by the solver's "
                             "branch and bound only")
    parser.add_argument("--no-race", action="store_true",
                        help="fast formulation: never race the textbook MILP in a child process when the label "
                             "search stalls (the guard against slow days, oracle/race.py)")
    parser.add_argument("--no-warm-start", action="store_true",
                        help="do not hand the best of fixed / greedy as a MIP start")
    parser.add_argument("--threads", type=int, help="solver threads (default: the solver's own)")
    parser.add_argument("--mps", metavar="FILE", help="also write the model in MPS format to FILE (for other solvers)")
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
    if inst.has_sites:
        return _solve_sites(inst, args)
    from oracle.model import OracleModel  # Pyomo loads only once the input is known to be good
    from oracle.race import RACE_AFTER_S

    oracle = OracleModel(inst, formulation=args.formulation, solver=args.solver, allow_pause=not args.no_pause,
                         reduce=not args.no_reduce, labeling=not args.no_labeling,
                         race_after_s=None if args.no_race else RACE_AFTER_S)
    if args.mps:
        with atomic_path(args.mps) as temp:
            oracle.write(str(temp), format="mps")
    stdout = sys.stdout
    if args.log:
        sys.stdout = sys.stderr  # the solver log goes to stderr, the answer to stdout
    try:
        result = oracle.solve(time_limit_s=args.time_limit, mip_gap=args.mip_gap, warm_start=not args.no_warm_start,
                              threads=args.threads, tee=args.log)
    finally:
        sys.stdout = stdout
    if args.json:
        print(dumps_json(result.to_dict(), indent=1))
    else:
        print(summary(result))
    return 0


def _solve_sites(inst: Instance, args: Any) -> int:
    """A sites instance: the decomposition (:mod:`oracle.sites_cg`, the default) or, with ``--formulation
    textbook``, the direct MILP (:mod:`oracle.sites`); the day oracle's other options do not apply."""
    require(not args.no_pause and not args.mps, "formulation",
            "a sites instance is solved by the sites decomposition (oracle/sites_cg.py) or, with --formulation "
            "textbook, the sites MILP (oracle/sites.py): --no-pause and --mps do not apply")
    stdout = sys.stdout
    if args.log:
        sys.stdout = sys.stderr
    try:
        if args.formulation == "textbook":
            from oracle.sites import solve_sites  # Pyomo loads only once the input is known to be good

            result = solve_sites(inst, time_limit_s=args.time_limit, mip_gap=args.mip_gap, threads=args.threads,
                                 tee=args.log, warm_start=not args.no_warm_start)
        else:
            from oracle.sites_cg import solve_sites_cg

            result = solve_sites_cg(inst, time_limit_s=args.time_limit, mip_gap=args.mip_gap, threads=args.threads)
    finally:
        sys.stdout = stdout
    if args.json:
        print(dumps_json(result.to_dict(), indent=1))
        return 0
    print(f"{result.case} on {result.day}: {result.status}")
    if result.objective_usd is not None:
        bound = "none" if result.best_bound_usd is None else f"${result.best_bound_usd:,.4f}"
        gap = "none" if result.gap is None else f"{result.gap:.2e}"
        print(f"operating cost ${result.objective_usd:,.4f} (best bound {bound}, gap {gap}), build "
              f"{result.build_seconds:.2f} s, solve {result.solve_seconds:.2f} s [{result.formulation}, highs]")
    if result.result is not None:
        print(format_metrics(result.result.metrics))
    return 0


def summary(result: OracleResult) -> str:
    head = f"{result.case} on {result.day}: {result.status}"
    lines = [head]
    if result.objective_usd is not None:
        what = "objective" if result.formulation == "fleet" else "operating cost"
        lines.append(f"{what} ${result.objective_usd:,.4f} (best bound ${result.best_bound_usd:,.4f}, gap "
                     f"{result.gap:.2e}), build {result.build_seconds:.2f} s, solve {result.solve_seconds:.2f} s "
                     f"[{result.formulation}, {result.solver}{', ' + result.proof if result.proof else ''}]")
    if result.reason:
        lines.append(f"reason: {result.reason}")
    if result.metrics is not None:
        lines.append(format_metrics(result.metrics))
    schedule = result.schedule_by_job()
    if schedule:
        for name, row in schedule.items():
            lines.append(f"  {name}: {' '.join(f'{c:>2d}' for c in row)}   modes {', '.join(result.modes_used[name])}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
