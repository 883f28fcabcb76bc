"""Figures: the dispatch of a day, a horizon under forecasts, mode timelines, cost ratios and study curves (matplotlib,
PNG)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from aidc_env.instance import PAUSE, Instance  # noqa: E402
from aidc_env.io import atomic_path  # noqa: E402
from aidc_env.simulator import SimulationResult  # noqa: E402

FIGURE_DPI = 120


def _hours(inst: Instance) -> np.ndarray:
    return np.arange(inst.slots + 1) * inst.slot_hours


def _step(values: np.ndarray) -> np.ndarray:
    return np.append(values, values[-1])


def plot_dispatch(inst: Instance, results: Mapping[str, SimulationResult], path: Path) -> None:
    """One panel per policy: renewable used and grid import stacked, renewable available, curtailment, price."""
    n = len(results)
    fig, axes = plt.subplots(n, 1, figsize=(10, 2.6 * n + 0.6), sharex=True, squeeze=False)
    hours = _hours(inst)
    for ax, (name, result) in zip(axes[:, 0], results.items(), strict=True):
        f, m = result.flows, result.metrics
        ax.fill_between(hours, 0, _step(f.renewable_used_mw), step="post", color="tab:green", alpha=0.6,
                        label="renewable used")
        ax.fill_between(hours, _step(f.renewable_used_mw), _step(f.load_mw), step="post", color="tab:gray", alpha=0.6,
                        label="grid import")
        ax.fill_between(hours, _step(f.load_mw), _step(np.maximum(f.renewable_mw, f.load_mw)), step="post",
                        color="tab:orange", alpha=0.35, label="curtailment")
        ax.step(hours, _step(f.renewable_mw), where="post", color="tab:green", lw=1.2, label="renewable available")
        ax.step(hours, _step(f.load_mw), where="post", color="black", lw=1.2, label="load")
        ax.set_ylabel("MW")
        ax.set_title(f"{name}: ${m.operating_cost_usd:,.0f}, curtailment {m.curtailment_mwh:.3f} MWh, "
                     f"green {m.green_share:.1%}", fontsize=10)
        twin = ax.twinx()
        twin.step(hours, _step(inst.price_usd_per_mwh), where="post", color="tab:red", lw=0.9, ls="--")
        twin.set_ylabel("$/MWh", color="tab:red")
    axes[0, 0].legend(loc="upper left", fontsize=7, ncol=3)
    axes[-1, 0].set_xlabel(f"hour of {inst.day}")
    axes[-1, 0].set_xlim(0, 24)
    fig.tight_layout()
    save_figure(fig, path)


def plot_horizon(inst: Instance, results: Mapping[str, SimulationResult], path: Path) -> None:
    """A horizon under day-ahead forecasts: truth vs forecast of the price and of the renewable power (each day's
    forecast as issued at 10:00 the day before; the persistence price if the forecast carries it), then one panel per
    policy with its facility load against the true renewable power."""
    n = len(results)
    fig, axes = plt.subplots(n + 2, 1, figsize=(12, 2.0 * n + 4.6), sharex=True, squeeze=False)
    hours = _hours(inst)
    forecast = inst.forecast
    price_ax, ren_ax = axes[0, 0], axes[1, 0]
    price_ax.step(hours, _step(inst.price_usd_per_mwh), where="post", color="black", lw=1.0, label="true price")
    renewable_per_shape = inst.renewable_mw / np.where(inst.renewable_shape > 0, inst.renewable_shape, np.nan)
    scale = float(np.nanmedian(renewable_per_shape)) if np.any(inst.renewable_shape > 0) else 0.0
    ren_ax.step(hours, _step(inst.renewable_mw), where="post", color="tab:green", lw=1.0, label="true renewable")
    if forecast is not None:
        price_ax.step(hours, _step(forecast.price_usd_per_mwh), where="post", color="tab:blue", lw=1.0,
                      label="forecaster (issued d-1 10:00)")
        if forecast.persistence_price_usd_per_mwh is not None:
            price_ax.step(hours, _step(forecast.persistence_price_usd_per_mwh), where="post", color="tab:orange",
                          lw=0.9, ls="--", label="persistence")
        ren_ax.step(hours, _step(forecast.renewable_shape * scale), where="post", color="tab:blue", lw=1.0,
                    label="day-ahead forecast")
    price_ax.set_ylabel("$/MWh")
    price_ax.legend(loc="upper left", fontsize=7, ncol=3)
    price_ax.set_title(f"{inst.horizon_days} days from {inst.day}: truth and day-ahead forecasts", fontsize=10)
    ren_ax.set_ylabel("renewable MW")
    ren_ax.legend(loc="upper left", fontsize=7, ncol=2)
    for ax, (name, result) in zip(axes[2:, 0], results.items(), strict=True):
        f, m = result.flows, result.metrics
        ax.fill_between(hours, 0, _step(f.load_mw), step="post", color="tab:gray", alpha=0.5, label="facility load")
        ax.step(hours, _step(f.renewable_mw), where="post", color="tab:green", lw=0.8, label="true renewable")
        ax.set_ylabel("MW")
        ax.set_title(f"{name}: ${m.operating_cost_usd:,.0f}, tranches met {m.tranches_met}", fontsize=9)
    if n:
        axes[2, 0].legend(loc="upper left", fontsize=7, ncol=2)
    for d in range(1, inst.horizon_days):
        for ax in axes[:, 0]:
            ax.axvline(d * inst.slots_per_day * inst.slot_hours, color="black", lw=0.4, alpha=0.5)
    axes[-1, 0].set_xlabel(f"hour from the start of {inst.day}")
    axes[-1, 0].set_xlim(0, hours[-1])
    fig.tight_layout()
    save_figure(fig, path)


def plot_mode_timeline(inst: Instance, results: Mapping[str, SimulationResult], path: Path) -> None:
    """Per policy and job: the job's GPUs over the day, coloured by mode (white = pause)."""
    n = len(results)
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.2 + 1.1 * n * len(inst.jobs) / 2 + 0.8), sharex=True, squeeze=False)
    cmap = plt.get_cmap("tab20")
    for ax, (name, result) in zip(axes[:, 0], results.items(), strict=True):
        for j, job in enumerate(inst.jobs):
            choices = result.job_choice[j]
            for t, c in enumerate(choices):
                if c == PAUSE:
                    continue
                ax.barh(j, inst.slot_hours, left=t * inst.slot_hours, color=cmap(int(c) % 20), edgecolor="none")
            used = sorted({int(c) for c in choices if c != PAUSE})
            for c in used:
                first = int(np.argmax(choices == c))
                ax.text(first * inst.slot_hours + 0.05, j, f"{job.modes[c].gpus}", va="center", fontsize=6)
        ax.set_yticks(range(len(inst.jobs)), [job.name for job in inst.jobs])
        ax.set_title(f"{name}: modes (labels: GPUs; white: paused)", fontsize=9)
    axes[-1, 0].set_xlim(0, 24)
    axes[-1, 0].set_xlabel(f"hour of {inst.day}")
    fig.tight_layout()
    save_figure(fig, path)


def plot_cost_ratios(per_day: pd.DataFrame, path: Path) -> None:
    """Cost ratio to the oracle per policy: per-day points and the mean."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    policies = list(dict.fromkeys(per_day["policy"]))
    for i, policy in enumerate(policies):
        ratios = per_day.loc[per_day["policy"] == policy, "cost_ratio_to_oracle"].to_numpy(dtype=float)
        ax.scatter(np.full(ratios.size, i) + np.linspace(-0.15, 0.15, ratios.size), ratios, s=10, alpha=0.6)
        ax.hlines(np.nanmean(ratios), i - 0.3, i + 0.3, color="black")
    ax.axhline(1.0, color="tab:green", lw=0.8, ls="--")
    ax.set_xticks(range(len(policies)), policies)
    ax.set_ylabel("operating cost / oracle's")
    fig.tight_layout()
    save_figure(fig, path)


def plot_study(frame: pd.DataFrame, x: str, ys: list[tuple[str, str]], path: Path, title: str,
               logx: bool = False, seed_points: Mapping[str, tuple[list[float], list[float]]] | None = None) -> None:
    """A study's curves: one panel per (column, label)."""
    fig, axes = plt.subplots(1, len(ys), figsize=(4.2 * len(ys), 3.4), squeeze=False)
    for ax, (column, label) in zip(axes[0], ys, strict=True):
        for series, group in frame.groupby("series", sort=False) if "series" in frame else [("", frame)]:
            ax.plot(group[x], group[column], marker="o", ms=3, label=series or None)
        if seed_points and column in seed_points:
            sx, sy = seed_points[column]
            ax.scatter(sx, sy, marker="*", s=80, color="black", zorder=5, label="seed")
        ax.set_xlabel(x)
        ax.set_ylabel(label)
        if logx:
            ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
    if axes[0, 0].get_legend_handles_labels()[1]:
        axes[0, 0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)


def save_figure(fig, path: Path, dpi: int = FIGURE_DPI) -> None:
    """Save a figure atomically (a temporary PNG beside it, then os.replace) and close it."""
    try:
        with atomic_path(path) as temp:
            fig.savefig(temp, dpi=dpi)
    finally:
        plt.close(fig)
