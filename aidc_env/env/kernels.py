"""The env's compiled kernels (numba): the per-job mask's reservation rule with several sites, a decision's bookkeeping,
the per-job observation and the simulated slots' objectives.

Each computes the same expressions of the same floats as the NumPy and Python code it stands for (numba compiles
without fast-math, so every operation rounds as NumPy's does): the env's trajectories are the same bit for bit.
"""

from __future__ import annotations

import numba
import numpy as np

from aidc_env.env.observation import PROGRESS_OBS_HIGH, RATE_RATIO_OBS_HIGH
from aidc_env.instance import SECONDS_PER_HOUR
from aidc_env.simulator import TRANCHE_TOLERANCE


@numba.njit(cache=True)
def allow(free, pools, q_end, q_stop, gpus, stay, away, site, row, mark):
    """Marks in ``row`` (entry s·C + c) the deciding job's choices that ``free`` (sites, intervals: the room left
    beside the committed GPUs and the other jobs' holds) allows: the segment fits its site in the intervals before
    ``q_end`` and its hold fits in those of [q_end, q_stop), at the segment's site (``stay``) or at another
    (``away``); per row of both, the segment at the job's ``site`` (0) or elsewhere (1). Returns how many it marks
    (with ``mark``; else how many it would)."""
    S, n, C = pools.size, gpus.size, row.size // pools.size
    now, after = pools.copy(), pools.copy()
    for s in range(S):
        for q in range(q_end):
            now[s] = min(now[s], free[s, q])
        for q in range(q_end, q_stop):
            after[s] = min(after[s], free[s, q])
    marked = 0
    for s in range(S):
        other, moved = -1, 0 if s == site else 1
        for sigma in range(S):
            if sigma != s:
                other = max(other, after[sigma])
        for c in range(n):
            if not row[s * C + c] and gpus[c] <= now[s] and (stay[moved, c] <= after[s] or away[moved, c] <= other):
                row[s * C + c] = mark
                marked += 1
    return marked


@numba.njit(cache=True)
def assignment_rule(committed, t, pools, state, deadline, every_site, j, end, current, base, made, tables, has_keep,
                     rule, out):
    """The reservation rule with several sites (compiled): per (site s, local choice c) of the deciding job j, whether
    its segment fits s beside the committed GPUs (``out[0, s·C + c]``) and (with ``rule``) whether, for some
    assignment of the other jobs' holds to sites that fits every site in every slot, the segment fits s beside them
    and its hold after (at s: kept or after a restart; elsewhere: after a move) fits some site (``out[1]``).

    ``committed`` (sites, T) GPUs of the committed choices and inference; ``state`` (4, jobs) per job its hold at
    its own site and elsewhere, its site and its hold's start (job j's entries are not read; j = −1: no deciding
    job); ``every_site``: each job's hold may go to any site (else it stays at its own); job j's segment from slot t
    ends at ``end``; ``made`` (6, choices) its segment's tokens kept, restarted and moved (``current``: the choice
    that can be kept), then the restart tokens sorted and the kept tokens of its plan staying (that of
    :meth:`~aidc_env.env.reservation.FleetPlan.held_gpus`) and the restart tokens sorted of its plan moving;
    ``tables`` (3, choices + 1) its GPUs per choice and the fewest GPUs of a mode at least that fast, staying and
    moving; ``base`` its missing tokens.

    The reservations change only where one starts or ends, so the slots from t split into intervals, each site's room
    in one the pool less its most committed GPUs. The assignments are enumerated depth first, a branch cut as soon as
    a site overflows (holds only take GPUs), and the search stops once every choice that the room without any other
    hold allows is allowed. Returns 2 if some choice is allowed, + 1 if an assignment fits (determined for j = −1)."""
    S, T = committed.shape
    held, held_away, site, hold_from = state[0], state[1], state[2], state[3]
    J, C, n = site.size, out.shape[1] // S, tables.shape[1] - 1
    gpus = tables[0, :n]
    stop = deadline[j] if j >= 0 else T
    cuts = np.empty(2 * J + 3, dtype=np.int64)
    cuts[0], cuts[1], cuts[2] = t, end, stop
    cuts[3:3 + J] = hold_from
    cuts[3 + J:] = deadline
    cuts = np.unique(cuts)
    first = cuts[(cuts >= t) & (cuts < T)]  # the intervals' first slots
    Q = first.size
    q_end, q_stop = np.searchsorted(first, end), np.searchsorted(first, stop)
    free = np.empty((S, Q), dtype=np.int64)
    out[:] = False
    for s in range(S):
        now = pools[s]
        for q in range(Q):
            most = 0
            for slot in range(first[q], first[q + 1] if q + 1 < Q else T):
                most = max(most, committed[s, slot])
            free[s, q] = pools[s] - most
            now = min(now, free[s, q]) if q < q_end else now
        for c in range(n):
            out[0, s * C + c] = gpus[c] <= now
    if not rule or free.min() < 0:
        return 0
    stay, away = np.empty((2, n), dtype=np.int64), np.empty((2, n), dtype=np.int64)  # job j's hold after choice c
    for moved in range(2):
        for c in range(n):
            need = base - made[2 if moved else 0 if c == current else 1, c]
            stay[moved, c] = min(tables[1, np.searchsorted(made[3], need)],
                                 gpus[c] if has_keep and made[4, c] >= need else tables[1, n])
            away[moved, c] = tables[2, np.searchsorted(made[5], need)]
    possible = np.zeros(S * C, dtype=np.bool_)
    n_possible = allow(free, pools, q_end, q_stop, gpus, stay, away, site[j], possible, True)
    if n_possible == 0 and j >= 0:
        return 0
    others = np.array([i for i in range(J) if i != j], dtype=np.int64)
    lo, hi = np.searchsorted(first, hold_from), np.searchsorted(first, deadline)  # the intervals a hold covers
    tried = np.full(others.size, -1, dtype=np.int64)  # per level (job of ``others``): the site its hold is at
    taken = np.zeros(others.size, dtype=np.int64)  # and the GPUs it took there
    n_ok, level, found = 0, 0, False
    while level >= 0:
        if level == others.size:  # every hold placed and every site fits
            found = True
            n_ok += allow(free, pools, q_end, q_stop, gpus, stay, away, site[j], out[1], True)
            if n_ok == n_possible:
                break
            level -= 1
            continue
        i = others[level]
        if taken[level]:
            free[tried[level], lo[i]:hi[i]] += taken[level]
            taken[level] = 0
        sigma = tried[level] + 1 if every_site else (site[i] if tried[level] < 0 else S)
        if sigma >= S:
            tried[level] = -1
            level -= 1
            continue
        tried[level] = sigma
        h = held[i] if sigma == site[i] else held_away[i]
        if h > pools[sigma]:
            continue
        taken[level], fits = h, True
        for q in range(lo[i], hi[i]):
            free[sigma, q] -= h
            fits = fits and free[sigma, q] >= 0
        if fits and (j < 0 or level + 1 == others.size or  # holds only take GPUs: ``free`` bounds the branch
                     allow(free, pools, q_end, q_stop, gpus, stay, away, site[j], out[1], False)):
            level += 1
    return (1 if found else 0) + (2 if n_ok else 0)


@numba.njit(cache=True)
def slot_objectives(t0, t1, job_gpus, job_kw, pools, inference_gpus, day, sites):
    """Per site and slot of [t0, t1) the objective, in the last row its sum over the sites: the simulator's grid cost
    and curtailment penalty (:func:`~aidc_env.simulator.facility_load_mw`, :func:`~aidc_env.simulator.renewable_first`,
    :func:`~aidc_env.simulator.slot_decision_cost_usd`) + take-or-pay renewable cost − idle-GPU value
    (:func:`~aidc_env.simulator.slot_idle_value_usd`), each the same expression of the same floats.

    ``job_gpus``, ``job_kw``: the jobs' GPUs and IT kW per site (sites,), or per site and slot (sites · (t1 − t0),);
    ``pools`` (sites,); ``inference_gpus`` (sites, T); ``day`` (4, sites, T): inference IT kW, renewable MW, price,
    take-or-pay cost; ``sites`` (5, sites): PUE, idle kW per GPU, curtailment penalty, slot hours, idle value."""
    S, n = pools.size, t1 - t0
    gpus_of, kw_of = job_gpus.reshape(S, -1), job_kw.reshape(S, -1)
    out = np.empty((S + 1, n))
    for k in range(n):
        t, i = t0 + k, k if gpus_of.shape[1] > 1 else 0
        for s in range(S):
            idle = max(pools[s] - (gpus_of[s, i] + inference_gpus[s, t]), 0)
            load = sites[0, s] * (kw_of[s, i] + day[0, s, t] + idle * sites[1, s]) / 1000.0
            used = min(load, day[1, s, t])
            cost = (day[2, s, t] * (load - used) + sites[2, s] * (day[1, s, t] - used)) * sites[3, s]
            out[s, k] = cost + day[3, s, t] - sites[4, s] * idle * sites[3, s]
            out[S, k] = out[s, k] if s == 0 else out[S, k] + out[s, k]
    return out


@numba.njit(cache=True)
def commit(profiles, state, feats, end_slots, jobs, pools, j, t, end, c, g, held, old_site, s, tokens, dt):
    """Job j's segment [t, end) of local choice c (g GPUs) at site s, after which it holds ``held`` GPUs there from
    max(end, release) to its deadline: its GPUs added to the committed profile, its hold at ``old_site`` replaced by
    the segment and the new hold in the reserved one (``profiles`` (sites, 2T): committed, then reserved); its hold,
    site and hold start in ``state`` (4, jobs: hold, hold elsewhere, site, hold start), its segment's end in
    ``end_slots``; its observation features 0-4 in ``feats`` (jobs, features: progress, required-rate ratio, GPU
    share and mode index of c, segment left) and its site one-hot with several sites. ``jobs`` (jobs, 5): release,
    deadline, target, fastest tokens per hour, modes (at least 1); ``tokens``: made by ``end``."""
    T = profiles.shape[1] // 2
    old, start, stop = state[0, j], max(end, int(jobs[j, 0])), int(jobs[j, 1])
    profiles[s, t:end] += g
    if old:
        profiles[old_site, T + state[3, j]:T + stop] -= old
    profiles[s, T + t:T + end] += g
    if held and start < stop:
        profiles[s, T + start:T + stop] += held
    state[0, j] = held if held and start < stop else 0
    state[2, j], state[3, j] = s, start
    end_slots[j] = end
    row, W = feats[j], jobs[j, 2]
    row[0] = min(tokens / W, PROGRESS_OBS_HIGH) if W > 0 else 1.0
    missing = W - tokens
    seconds = (jobs[j, 1] - max(end, jobs[j, 0])) * dt * SECONDS_PER_HOUR
    rate = jobs[j, 3] / SECONDS_PER_HOUR
    if missing <= W * TRANCHE_TOLERANCE:
        row[1] = 0.0
    elif seconds > 0 and rate > 0:
        row[1] = min(missing / (seconds * rate), RATE_RATIO_OBS_HIGH)
    else:
        row[1] = RATE_RATIO_OBS_HIGH
    row[2], row[3], row[4] = min(g / pools[s], 1.0), c / jobs[j, 4], 1.0
    if pools.size > 1:
        row[8:] = 0.0
        row[8 + s] = 1.0


@numba.njit(cache=True)
def observe(obs, committed, pools, t, ng, choice, static, done, rate, scale, deciding):
    """The observation: ``obs`` with, per site, its free GPU share at slot t (entries ng + 2s + 1), the deciding job's
    choice features (``choice``: ``static``, and unless ``done`` (nothing missing) the coverage min(``rate`` ×
    ``scale``, 10) with ``scale`` = hours to the deadline / missing tokens) and 1 at ``deciding``, copied."""
    for s in range(pools.size):
        obs[ng + 2 * s + 1] = max(pools[s] - committed[s, t], 0) / pools[s]
    for a in range(choice.shape[0]):
        for f in range(choice.shape[1]):
            choice[a, f] = static[a, f] if done or f != 1 else min(rate[a] * scale, RATE_RATIO_OBS_HIGH)
    obs[deciding] = 1.0
    out = obs.copy()
    obs[deciding] = 0.0
    return out
