"""Command line: ``python -m aidc_env.modes --model M [--gpus N] | --case C [--json]``.

It sits above :mod:`aidc_env.case` (``--case`` reads a case's jobs and mode parameters), which itself builds on this
package; nothing in the package imports this module, so there is no import circle.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence

from aidc_env.case import load_case
from aidc_env.errors import CliParser, require_number
from aidc_env.io import dumps_json
from aidc_env.limits import MAX_GPUS
from aidc_env.modes import LLAMA_MODELS, ModeSet, generate_modes


def _format_table(title: str, mode_set: ModeSet) -> str:
    header = (f"{'label':<20}{'tp':>4}{'pp':>4}{'dp':>6}{'mb':>4}{'GPUs':>7}{'tokens/s':>12}"
              f"{'tok/s/GPU':>11}{'IT kW':>9}{'kWh/Mtok':>10}")
    lines = [f"{title}: {len(mode_set.feasible)} feasible, {len(mode_set.pareto)} Pareto", header]
    for md in mode_set.pareto:
        lines.append(f"{md.label:<20}{md.tp:>4}{md.pp:>4}{md.dp:>6}{md.micro_batch:>4}{md.gpus:>7}"
                     f"{md.tokens_per_s:>12.0f}{md.tokens_per_s_per_gpu:>11.1f}{md.it_power_kw:>9.1f}"
                     f"{md.kwh_per_million_tokens:>10.3f}")
    return "\n".join(lines)


DEFAULT_CLI_GPUS = 2048  # pool of --model runs: the reference case's 2048 GPUs


def _build_parser() -> CliParser:
    parser = CliParser(
        prog="python -m aidc_env.modes", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Generate the screened and Pareto-pruned 3D-parallel (tp, pp, dp, micro-batch) modes "
                    "of LLaMA pre-training jobs on A100-80GB nodes: GPUs, tokens/s and IT power (kW, no PUE).",
        epilog="Examples:\n  python -m aidc_env.modes --model llama-13b --gpus 2048\n"
               "  python -m aidc_env.modes --case 2048 --json\n"
               f"Models: {', '.join(LLAMA_MODELS)}.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="one model by name (e.g. llama-13b); default pool 2048 GPUs")
    source.add_argument("--case", help="a bundled case name or a case TOML path: every job of the case, "
                                       "with the case's mode parameters and GPU pool")
    parser.add_argument("--gpus", type=int, default=None,
                        help="GPU pool size (default: 2048 with --model, the case's n_gpus with --case)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    if args.gpus is not None:
        require_number(args.gpus, "gpus", 1, MAX_GPUS, integer=True)

    jobs: list[tuple[str, ModeSet]] = []
    kinds: dict[str, str] = {}
    if args.model is not None:
        n_gpus = DEFAULT_CLI_GPUS if args.gpus is None else args.gpus
        mode_set = generate_modes(args.model, n_gpus)
        jobs.append((mode_set.model, mode_set))
    else:
        case = load_case(args.case)
        n_gpus = case.n_gpus if args.gpus is None else args.gpus
        for job in case.jobs:
            mode_set = generate_modes(job.model, n_gpus, case.mode_params)
            if job.max_gpus is not None:  # a capped (fine-tuning) job: the Pareto modes within its cap
                mode_set = dataclasses.replace(
                    mode_set, feasible=tuple(m for m in mode_set.feasible if m.gpus <= job.max_gpus),
                    pareto=tuple(m for m in mode_set.pareto if m.gpus <= job.max_gpus))
            jobs.append((job.name, mode_set))
            kinds[job.name] = job.kind

    if args.json:
        print(dumps_json({"gpus": n_gpus, "jobs": [
            {**ms.to_dict(name), **({"kind": kinds[name]} if name in kinds else {})} for name, ms in jobs]},
            indent=2))
    else:
        print(f"GPU pool: {n_gpus}")
        for name, ms in jobs:
            title = name if name == ms.model else f"{name} ({ms.model}{', ' + kinds[name] if name in kinds else ''})"
            print(_format_table(title, ms))
            print()
    return 0
