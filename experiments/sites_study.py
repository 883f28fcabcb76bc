"""The coordination study of several sites (docs/sites.md).

    python -m experiments.sites_study [--profiles CSV] [--days N] [--segments K] [--time-limit S] [--out DIR]

On held-out days the sites3 case is solved three ways by the decomposition: (a) every job at its home site; (b) each
job's one site for the day chosen jointly; (c) the sites at t = 0 chosen as in (b), then moves at checkpoints paying the
transfer time; as the price spread between the nodes is scaled (each node's price = the nodes' mean + α × its
deviation, α = 1 the real prices) and the link varies. (a)'s schedule starts (b) and (b)'s starts (c), so (a) ≥ (b) ≥
(c) whatever the time limit. The table, the rows (JSON) and a figure go to ``--out``; every cost is the simulator's
replay, with each solve's status and gap.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from agents.days import held_out_starts
from aidc_env.case import build_instance, load_case
from aidc_env.errors import CliParser, run_cli
from aidc_env.instance import Instance
from aidc_env.io import atomic_write_text, dumps_json
from experiments.runs import result_folder
from aidc_env.site_profiles import load_site_profiles
from aidc_env.sites import transfer_hours
from oracle import solve as solve_oracle

DEFAULT_PROFILES = "caiso-2023"
SPREADS = (1.0, 3.0)
"""α: the real node prices (1) and their deviations from the nodes' mean tripled (3)."""
LINKS_GBPS = (100.0, 10.0, 2.0)
"""A 100G wavelength (transfers of 8 s-1.2 min), the case's 10 Gbit/s (1.3-12 min) and 2 Gbit/s (6 min-1 h)."""
PLACEMENTS = {"own": "home", "fixed": "stay", "migrate": "free"}
"""The oracle's placement of each study case (oracle/graph.py)."""


def with_spread(inst: Instance, alpha: float) -> Instance:
    """The instance with every node's price = the nodes' mean + α × (its price − the mean), slot by slot."""
    net = inst.network
    assert net is not None
    mean = np.mean([s.price_usd_per_mwh for s in net.sites], axis=0)
    sites = tuple(dataclasses.replace(s, price_usd_per_mwh=mean + alpha * (s.price_usd_per_mwh - mean))
                  for s in net.sites)
    return dataclasses.replace(inst, price_usd_per_mwh=sites[0].price_usd_per_mwh,
                               network=dataclasses.replace(net, sites=sites))


def with_link(inst: Instance, link_gbps: float) -> Instance:
    net = inst.network
    assert net is not None
    hours = tuple(transfer_hours(job.model, link_gbps) for job in inst.jobs)
    return dataclasses.replace(inst, network=dataclasses.replace(net, transfer_hours=hours, link_gbps=link_gbps))


def run(days: Sequence[str], profiles: str, segments: int | None, time_limit_s: float, mip_gap: float) -> list[dict]:
    site_profiles = load_site_profiles(profiles)
    rows = []
    for day in days:
        base = build_instance("sites3", day=day, profiles=site_profiles, **({"segments": segments} if segments else {}))
        for alpha in SPREADS:
            inst = with_spread(base, alpha)
            row = {"day": day, "alpha": alpha}
            start = None
            for name, variant in (("own", inst), ("fixed", inst),
                                  *((f"migrate_{link:g}", with_link(inst, link)) for link in LINKS_GBPS)):
                tick = time.perf_counter()
                result = solve_oracle(variant, method="decomposition", time_limit_s=time_limit_s, mip_gap=mip_gap,
                                      placement=PLACEMENTS[name.split("_")[0]], start=start)
                if name in ("own", "fixed") and result.schedule is not None:  # (a) starts (b), (b) starts (c)
                    start = (result.schedule, result.sites)
                row.update({name: result.objective_usd, f"{name}_gap": result.gap, f"{name}_status": result.status,
                            f"{name}_seconds": time.perf_counter() - tick,
                            f"{name}_moves": sum(job.moves for job in result.metrics.jobs)
                            if result.metrics is not None and name.startswith("migrate") else 0})
            rows.append(row)
            print(dumps_json(row, indent=None), flush=True)
    return rows


def table(rows: list[dict]) -> str:
    links = [f"migrate_{link:g}" for link in LINKS_GBPS]
    head = ("| day | α | (a) own $ | (b) fixed $ | " + " | ".join(f"(c) link {link:g} Gb/s $ (moves)" for link in
            LINKS_GBPS) + " | (b)/(a) | (c)/(b) best | max gap |")
    lines = [head, "|---|---:|---:|---:|" + "---:|" * len(LINKS_GBPS) + "---:|---:|---:|"]
    for r in rows:
        gaps = [r[f"{n}_gap"] for n in ("own", "fixed", *links) if r[f"{n}_gap"] is not None]
        best = min(r[n] for n in links)
        lines.append(f"| {r['day']} | {r['alpha']:g} | {r['own']:,.2f} | {r['fixed']:,.2f} | "
                     + " | ".join(f"{r[n]:,.2f} ({r[n + '_moves']})" for n in links)
                     + f" | {r['fixed'] / r['own']:.4f} | {best / r['fixed']:.4f} | {max(gaps):.2%} |")
    for alpha in SPREADS:
        sub = [r for r in rows if r["alpha"] == alpha]
        if sub:
            own = sum(r["own"] for r in sub)
            fixed = sum(r["fixed"] for r in sub)
            mig = {n: sum(r[n] for r in sub) for n in links}
            lines.append(f"| **total** | {alpha:g} | {own:,.2f} | {fixed:,.2f} | "
                         + " | ".join(f"{mig[n]:,.2f}" for n in links)
                         + f" | {fixed / own:.4f} | {min(mig.values()) / fixed:.4f} | |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    from experiments.plots import plt, save_figure  # matplotlib on its Agg backend

    fig, ax = plt.subplots(figsize=(7, 3.6))
    names = ["own", "fixed", *(f"migrate_{link:g}" for link in LINKS_GBPS)]
    labels = ["(a) own sites", "(b) coordinated, fixed", *(f"(c) migration, {link:g} Gb/s" for link in LINKS_GBPS)]
    width = 0.8 / len(names)
    for i, (name, label) in enumerate(zip(names, labels, strict=True)):
        values = [sum(r[name] for r in rows if r["alpha"] == a) / sum(r["own"] for r in rows if r["alpha"] == a)
                  for a in SPREADS]
        ax.bar(np.arange(len(SPREADS)) + i * width, values, width, label=label)
    ax.set_xticks(np.arange(len(SPREADS)) + 0.4 - width / 2, [f"price spread α = {a:g}" for a in SPREADS])
    ax.set_ylabel("cost / (a), summed over days")
    ax.set_ylim(0.8, 1.02)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title("sites3: value of coordination and migration (held-out days)")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


DOCS_FOLDER = "docs"
"""Where ``--update-docs`` writes the study (the committed files docs/sites.md shows)."""
RESULTS = ("sites_table.md", "sites_study.json", "figures/sites_study.png")
"""What a run writes to its folder."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = CliParser(prog="python -m experiments.sites_study", description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=DEFAULT_PROFILES,
                        help="dataset name or site profile CSV (default: %(default)s, the full year)")
    parser.add_argument("--days", type=int, default=0, help="N held-out days spread over the year (0: all)")
    parser.add_argument("--segments", type=int, default=None, help="override K of every job (default: the case's)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve")
    parser.add_argument("--mip-gap", type=float, default=1e-3)
    parser.add_argument("--out", help="folder of sites_table.md, sites_study.json and figures/sites_study.png "
                        "(default runs/sites_study_N, the next free N; one holding an earlier run's results is refused)")
    parser.add_argument("--update-docs", action="store_true",
                        help=f"write them to {DOCS_FOLDER}/ (or --out), replacing the committed ones")
    args = parser.parse_args(argv)
    load_case("sites3")
    out = result_folder(args.out or (DOCS_FOLDER if args.update_docs else None), "runs", "sites_study", RESULTS,
                        replace=args.update_docs)
    held_out = held_out_starts(load_site_profiles(args.profiles).dates())
    days = held_out if args.days <= 0 else held_out[::max(1, len(held_out) // args.days)][: args.days]
    rows = run(days, args.profiles, args.segments, args.time_limit, args.mip_gap)
    atomic_write_text(out / "sites_table.md", table(rows) + "\n")
    atomic_write_text(out / "sites_study.json", dumps_json(rows, indent=1))
    plot(rows, out / "figures" / "sites_study.png")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
