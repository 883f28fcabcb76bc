"""Make the bundled weekly LLM-inference demand profile from Azure's public LLM inference traces.

    python scripts/make_inference_profile.py --repo GITDIR [--commit C] [--out aidc_env/data/inference_profile.csv]

Two public sources, both in the repository Azure/AzurePublicDataset (CC-BY 4.0), read from its git directory ``GITDIR``
(e.g. a bare clone; nothing is downloaded):

1. **Daily and weekly shape**: the *Azure LLM inference trace 2024* (Stojkovic et al., "DynamoLLM", HPCA 2025; one week
   of May 2024, a coding and a conversation service). Its CSVs are not in the repository (they sit on a blob store), but
   its notebook ``analysis/AzureLLMInferenceDataset2024.ipynb`` carries, as stored outputs, the plots of *invocations
   per minute over the week* of each service (pandas line plots, x from the first to the last minute, y from 0, grid
   lines every 1,000 invocations per minute). This script decodes those two PNGs and digitises them: in every pixel
   column the trace's line spans the minute values falling in that column; the column's value is the middle of that
   span, converted to invocations per minute with the grid lines; the columns are then averaged per UTC hour of the week
   (about 8 columns per hour).
2. **Request mix**: the *Azure LLM inference trace 2023* (Patel et al., "Splitwise", ISCA 2024;
   ``data/AzureLLMInferenceTrace_code.csv`` and ``_conv.csv``, one hour of 16 Nov 2023): the mean context and generated
   tokens per request of each service. The shape alone does not say how much work a request is.

Reduction: tokens per minute in hour h = Σ_services invocations per minute(h) × mean (context + generated) tokens per
request of that service; ``demand_share`` = that / its weekly maximum. Hours are UTC, hour of the week 0 = Monday 00:00.
The raw traces are never copied into the repository: only the 168 rows written here.
"""

from __future__ import annotations

import argparse
import base64
import csv
import datetime as dt
import io
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPOSITORY = "Azure/AzurePublicDataset"
NOTEBOOK = "analysis/AzureLLMInferenceDataset2024.ipynb"
TRACES_2023 = {"coding": "data/AzureLLMInferenceTrace_code.csv", "conversation": "data/AzureLLMInferenceTrace_conv.csv"}
LICENCE = "CC-BY 4.0 (the repository's LICENSE); cite Stojkovic et al. HPCA 2025 and Patel et al. ISCA 2024"
HOURS_PER_WEEK = 168
HOURS_PER_DAY = 24


@dataclass(frozen=True)
class PlotSpec:
    """Where a service's invocations-per-minute plot sits in the notebook and what its x axis spans."""

    service: str
    title: str
    """The plot's title, printed by the notebook cell just before the figure."""
    first_day_utc: dt.date
    """The x axis runs from 00:00 UTC of this day over 7 days (the trace's week, read off the axis labels)."""


PLOTS = (PlotSpec("coding", "Coding", dt.date(2024, 5, 10)),
         PlotSpec("conversation", "Conversation", dt.date(2024, 5, 12)))
LINE_RGB = (31, 119, 180)
"""Matplotlib's default first line colour (tab:blue)."""
GRID_RGB = (176, 176, 176)
"""Matplotlib's default grid colour (#b0b0b0)."""
COLOUR_TOLERANCE = 40
GRID_TOLERANCE = 8
GRID_STEP_INVOCATIONS_PER_MIN = 1000.0
"""The y grid spacing of both plots (read off their tick labels: 0, 1000, 2000, ...)."""
DAYS_PLOTTED = 7


def git_show(repo: Path, commit: str, path: str) -> bytes:
    return subprocess.run(["git", "--git-dir", str(repo), "show", f"{commit}:{path}"], check=True,
                          capture_output=True).stdout


def resolve_commit(repo: Path, commit: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), "rev-parse", commit], check=True, capture_output=True,
                          text=True).stdout.strip()


def notebook_plots(notebook: dict) -> dict[str, np.ndarray]:
    """The invocations-per-minute figures by title: the cell that calls ``plt_invocations_time`` prints the title, then
    shows the figure."""
    from PIL import Image  # matplotlib's dependency; only this script needs it

    for cell in notebook["cells"]:
        if "plt_invocations_time(df_trace)" not in "".join(cell.get("source", [])):
            continue
        images = [o["data"]["image/png"] for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        titles = [spec.title for spec in PLOTS]
        if len(images) != len(titles):
            raise SystemExit(f"expected {len(titles)} figures in the invocations cell, found {len(images)}")
        return {title: np.asarray(Image.open(io.BytesIO(base64.b64decode(png))).convert("RGB")).astype(int)
                for title, png in zip(titles, images, strict=True)}
    raise SystemExit("no plt_invocations_time cell in the notebook")


def _mask(rgb: np.ndarray, colour: tuple[int, int, int], tolerance: int) -> np.ndarray:
    return np.all(np.abs(rgb - np.array(colour)) <= tolerance, axis=2)


def digitise(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(hours since the axis start, invocations per minute) of every pixel column the line covers."""
    line = _mask(rgb, LINE_RGB, COLOUR_TOLERANCE)
    dark = rgb.sum(axis=2) < 100
    spine_rows = np.flatnonzero(dark.sum(axis=1) > rgb.shape[1] // 2)
    spine_cols = np.flatnonzero(dark.sum(axis=0) > rgb.shape[0] // 2)
    top, bottom = spine_rows.min(), spine_rows.max()
    left, right = spine_cols.min(), spine_cols.max()
    grid = _mask(rgb, GRID_RGB, GRID_TOLERANCE)
    grid_rows = np.flatnonzero(grid[:, left:right].sum(axis=1) > (right - left) // 5)
    grid_rows = np.sort(grid_rows[(grid_rows > top) & (grid_rows < bottom)])[::-1]  # 1000, 2000, ... upwards
    pixels_per_step = -float(np.mean(np.diff(np.concatenate(([bottom], grid_rows)))))  # rows grow downwards
    hours, values = [], []
    for col in range(left + 1, right):
        rows = np.flatnonzero(line[top:bottom, col])
        if rows.size == 0:
            continue
        middle_row = top + (rows.min() + rows.max()) / 2.0
        hours.append((col - left) / (right - left) * DAYS_PLOTTED * HOURS_PER_DAY)
        values.append((bottom - middle_row) / pixels_per_step * GRID_STEP_INVOCATIONS_PER_MIN)
    return np.array(hours), np.array(values)


def hour_of_week_means(spec: PlotSpec, hours: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Mean invocations per minute per UTC hour of the week (0 = Monday 00:00)."""
    start_how = spec.first_day_utc.weekday() * HOURS_PER_DAY
    index = (start_how + np.floor(hours).astype(int)) % HOURS_PER_WEEK
    sums = np.bincount(index, weights=values, minlength=HOURS_PER_WEEK)
    counts = np.bincount(index, minlength=HOURS_PER_WEEK)
    if np.any(counts == 0):
        raise SystemExit(f"{spec.service}: hours of the week without a digitised column: {np.flatnonzero(counts == 0)}")
    return sums / counts


def tokens_per_request(text: bytes) -> tuple[float, float, int]:
    """(mean context tokens, mean generated tokens, requests) of a 2023 trace CSV."""
    rows = list(csv.DictReader(io.StringIO(text.decode("utf-8-sig"))))
    context = np.array([float(r["ContextTokens"]) for r in rows])
    generated = np.array([float(r["GeneratedTokens"]) for r in rows])
    return float(context.mean()), float(generated.mean()), len(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True, help="git directory of Azure/AzurePublicDataset")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--out", default="aidc_env/data/inference_profile.csv")
    args = parser.parse_args(argv)
    repo = Path(args.repo)
    commit = resolve_commit(repo, args.commit)
    plots = notebook_plots(json.loads(git_show(repo, commit, NOTEBOOK)))
    per_service = {spec.service: hour_of_week_means(spec, *digitise(plots[spec.title])) for spec in PLOTS}
    mix = {service: tokens_per_request(git_show(repo, commit, path)) for service, path in TRACES_2023.items()}
    tokens_per_min = sum(per_service[s] * (mix[s][0] + mix[s][1]) for s in per_service)
    share = tokens_per_min / tokens_per_min.max()
    header = [
        "# Weekly LLM-inference demand profile (hourly, UTC; hour_of_week 0 = Monday 00:00 UTC).",
        f"# Source: github.com/{REPOSITORY} at commit {commit}; licence {LICENCE}.",
        f"# Shape: {NOTEBOOK} (stored plots of invocations per minute, 2024 week), digitised per pixel column,",
        "#   averaged per hour of the week; coding week from 2024-05-10, conversation week from 2024-05-12.",
        "# Request mix: " + "; ".join(
            f"{TRACES_2023[s]}: {n} requests, mean {c:.1f} context + {g:.1f} generated tokens"
            for s, (c, g, n) in mix.items()) + ".",
        "# tokens_per_min = sum over services of invocations_per_min x mean tokens per request; "
        "demand_share = tokens_per_min / its weekly max.",
        "# Made by scripts/make_inference_profile.py; do not edit by hand."]
    out = io.StringIO()
    out.write("\n".join(header) + "\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["hour_of_week", "weekday", "hour_utc", "coding_invocations_per_min",
                     "conversation_invocations_per_min", "tokens_per_min", "demand_share"])
    for h in range(HOURS_PER_WEEK):
        writer.writerow([h, h // HOURS_PER_DAY, h % HOURS_PER_DAY, f"{per_service['coding'][h]:.1f}",
                         f"{per_service['conversation'][h]:.1f}", f"{tokens_per_min[h]:.0f}", f"{share[h]:.4f}"])
    Path(args.out).write_text(out.getvalue())
    print(f"wrote {args.out}: 168 hours, demand share min {share.min():.3f}, mean {share.mean():.3f} "
          f"(peak hour of week {int(np.argmax(share))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
