"""The bundled GPU power-cap curve, and how it maps onto the modes of a job.

``a100-dvfs`` is the Phoenix field demonstration's sweep of real workloads on A100 GPUs at power caps of 100-400 W
(``aidc_env/data/emerald_dvfs_curve.csv``, made by ``scripts/make_emerald_data.py``; provenance in
``aidc_env/data/README.md``): per cap, the median over the workloads of the throughput and of the measured GPU power,
each relative to the uncapped (400 W) run. A cap level is offered when its share of the rated 400 W is at least
``min_cap_share`` and it lies on the upper concave hull of throughput against power (350 W does not: sharing a slot
between 300 W and no cap gives more throughput for the same mean power).

**Mapping onto modes.** A mode's tokens/s is multiplied by the level's throughput factor, and the GPU part of its IT
power by the level's power factor; the host's share per GPU (the mode generator's ``host_power_kw_per_gpu``) is not
capped. The same relative curve serves every model and 3D layout: the sweep's workloads (pre-training, fine-tuning and
inference of 7-13B models) lose throughput alike under a cap (spread in the file's min and max columns), and the
mode generator's GPU power is itself a calibrated share of the rated power, so a relative curve is what it can carry.
"""

from __future__ import annotations

from importlib import resources

import numpy as np
import pandas as pd

from aidc_env.errors import require
from aidc_env.grid import CapCurve
from aidc_env.modes import ModeParams

CURVES = {"a100-dvfs": "emerald_dvfs_curve.csv"}
"""Bundled cap curves by name: their files in ``aidc_env/data``."""
DEFAULT_MIN_CAP_SHARE = 0.5
"""Lowest cap offered, as a share of the GPU's rated power: below half the sweep's throughput falls off steeply (at
25%: about a fifth of the throughput)."""


def upper_hull(power: np.ndarray, throughput: np.ndarray) -> list[int]:
    """Indices (in the given order, highest power first) of the points on the upper concave hull of throughput against
    power: a level below the chord of its neighbours is beaten by sharing a slot between them (:mod:`aidc_env.grid`)."""
    order = np.argsort(power)  # lowest power first
    hull: list[int] = []
    for i in order:
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            cross = (power[b] - power[a]) * (throughput[i] - throughput[a]) - \
                (throughput[b] - throughput[a]) * (power[i] - power[a])
            if cross < 0:
                break
            hull.pop()  # b lies on or below the chord from a to i
        hull.append(int(i))
    return sorted(hull, key=lambda i: -power[i])


def cap_curve(name: str = "a100-dvfs", min_cap_share: float = DEFAULT_MIN_CAP_SHARE,
              host_kw_per_gpu: float | None = None) -> CapCurve:
    """A bundled curve with its levels from no cap down to ``min_cap_share`` of the rated power (``host_kw_per_gpu``:
    the uncapped host share; default the mode generator's)."""
    require(name in CURVES, "power_caps.curve", f"unknown cap curve {name!r}; bundled: {', '.join(CURVES)}")
    with resources.files("aidc_env").joinpath("data", CURVES[name]).open() as handle:
        table = pd.read_csv(handle).sort_values("cap_w", ascending=False)
    table = table[table["cap_fraction"] >= min_cap_share - 1e-12]
    require(len(table) >= 1 and table["cap_fraction"].iloc[0] == 1.0, "power_caps.min_cap_share",
            f"no level at or above {min_cap_share:g} of the rated power")
    table = table.iloc[upper_hull(table["power_factor"].to_numpy(), table["throughput_factor"].to_numpy())]
    host = ModeParams().host_power_kw_per_gpu if host_kw_per_gpu is None else host_kw_per_gpu
    return CapCurve(name=name, cap_share=tuple(table["cap_fraction"]),
                    throughput_factor=tuple(table["throughput_factor"]), power_factor=tuple(table["power_factor"]),
                    host_kw_per_gpu=float(host),
                    source=f"aidc_env/data/{CURVES[name]} (median over the workloads of the sweep)")
