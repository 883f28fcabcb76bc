"""Compiled inner loops (numba) of the label search (:mod:`oracle.labeling`) and its restricted completion tables
(:mod:`oracle.completion`): the dominance filter of the labels, the rows of a block's tables, the labels' completion
bound.

Each computes the same float expressions in the same order as a pure-Python reference (no fast-math: nothing is
re-associated or fused), so the labels kept, the tables and the bounds are the same to the bit (tests/test_kernels.py
and tests/test_horizon_tables.py check them). ``cache=True`` keeps the machine code on disk after the first compilation
(a few seconds).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _maximum(a: float, b: float) -> float:
    """``np.maximum`` of two floats that are not NaN (the tables hold none: sums of finite numbers and +inf)."""
    return a if a >= b else b


@numba.njit(cache=True, inline="always")
def _minimum(a: float, b: float) -> float:
    """``np.minimum`` of two floats that are not NaN."""
    return a if a <= b else b


@numba.njit(cache=True)
def staircase_keep(first_tokens: np.ndarray, second_tokens: np.ndarray, group_starts: np.ndarray,
                   group_ends: np.ndarray) -> np.ndarray:
    """Which labels no earlier label of their group dominates (≥ tokens of both jobs).

    The labels come sorted by state, then cost ascending (then first tokens and second tokens descending), so an earlier
    label of the group is at most as dear. Each group keeps a staircase of its kept labels (first tokens ascending,
    second descending): a label is dominated when the kept label with the least first tokens ≥ its own has second tokens
    ≥ its own; else it enters the staircase and removes the kept labels it dominates."""
    keep = np.ones(first_tokens.size, dtype=np.bool_)
    xs = np.empty(first_tokens.size)
    ys = np.empty(first_tokens.size)
    for g in range(group_starts.size):
        size = 0
        for i in range(group_starts[g], group_ends[g]):
            x, y = first_tokens[i], second_tokens[i]
            p = np.searchsorted(xs[:size], x)  # the first kept label with first tokens ≥ x
            if p < size and ys[p] >= y:
                keep[i] = False
                continue
            r = p
            while r > 0 and ys[r - 1] <= y:  # kept labels with fewer first tokens and no more second: dominated
                r -= 1
            hi = p + 1 if p < size and xs[p] == x else p
            moved = 1 - (hi - r)  # replace xs[r:hi] by x: the tail moves by this many places
            if moved > 0:
                for t in range(size - 1, hi - 1, -1):
                    xs[t + moved] = xs[t]
                    ys[t + moved] = ys[t]
            elif moved < 0:
                for t in range(hi, size):
                    xs[t + moved] = xs[t]
                    ys[t + moved] = ys[t]
            size += moved
            xs[r] = x
            ys[r] = y
    return keep


@numba.njit(cache=True, inline="always")
def _min_into(target: np.ndarray, values: np.ndarray, offset: float) -> None:
    """target = np.minimum(target, values + offset), in place."""
    for u in range(target.size):
        target[u] = _minimum(target[u], values[u] + offset)


@numba.njit(cache=True, inline="always")
def _least_into(target: np.ndarray, values: np.ndarray) -> None:
    """target = np.minimum(target, values), in place."""
    for u in range(target.size):
        target[u] = _minimum(target[u], values[u])


@numba.njit(cache=True, inline="always")
def _shift_row(after: np.ndarray, own: float, grid: np.ndarray, start: int, step: float, penalty: float,
               first: int, width: int, shifted: np.ndarray) -> None:
    """One row of H_j after a block (``after``, on its window from grid point ``start``) read at the previous block's
    grid points first..first + width − 1, shifted by ``own`` tokens, into ``shifted`` (see
    :meth:`oracle.completion.RestrictedCompletionBound._restricted_back`)."""
    span = after.size
    whole = int(np.floor(own / step))
    part = penalty * _maximum(own - whole * step, 0.0)
    shift = whole + 1 + start - first  # output column u reads the columns u − shift, u − shift + 1
    mid_lo, mid_hi = max(0, shift), min(width - 1, span - 2 + shift)
    for u in range(mid_lo, mid_hi + 1):
        shifted[u] = _maximum(after[u - shift], after[u - shift + 1] - part)
    below = min(max(0, shift), width)  # columns whose need falls below the window
    for u in range(below):
        x = _maximum(grid[first + u] - own, 0.0)
        shifted[u] = _maximum(after[0] - penalty * _maximum(grid[start] - x, 0.0),
                              after[1] - penalty * (grid[start + 1] - x))
    for u in range(max(mid_hi + 1, below), width):  # columns whose need lies past the window
        x = grid[first + u] - own
        shifted[u] = after[span - 1] + penalty * (x - grid[start + span - 1])


@numba.njit(cache=True, nogil=True)
def back_rows(after: np.ndarray, row_of_out: np.ndarray, into_j: np.ndarray, into_k: np.ndarray, out_j: np.ndarray,
              out_k: np.ndarray, kept_gain: np.ndarray, restarted_gain: np.ndarray, offsets_kept: np.ndarray,
              offsets_changed: np.ndarray, has_k: bool, opens_j: bool, opens_k: bool, grid: np.ndarray, start: int,
              step: float, penalty: float, first: int, width: int, n_choices: int) -> np.ndarray:
    """Rows of block b − 1's inside states from the rows of block b's (``after``), for one job j: the loop of
    :meth:`oracle.completion.RestrictedCompletionBound._restricted_back`, which documents the variants.

    Per row r of ``after`` (an inside state S' of block b): ``row_of_out[r]`` the row of S' among block b − 1's inside
    states (−1: none), ``into_j``/``into_k`` its choices of job j and the other job k (+1, so that a pause is 0),
    ``kept_gain``/``restarted_gain`` job j's tokens of the move into S' when j keeps / changes its choice,
    ``offsets_kept``/``offsets_changed`` block b's cost of S' less k's priced tokens when k keeps / changes. Per row o
    of the result (a state of block b − 1): ``out_j``/``out_k`` its choices (+1). ``n_choices``: choices + 1 of the job
    with the most."""
    n_out = out_j.size
    best = np.full((n_out, width), np.inf)
    j_group = np.full((n_choices, width), np.inf)  # minimum over S' by j's choice (k changes)
    k_group = np.full((n_choices, width), np.inf)  # minimum over S' by k's choice (j changes)
    j_present = np.zeros(n_choices, dtype=np.bool_)
    k_present = np.zeros(n_choices, dtype=np.bool_)
    for o in range(n_out):
        if opens_k:
            j_present[out_j[o]] = True
        if opens_j and has_k:
            k_present[out_k[o]] = True
    anywhere = np.full(width, np.inf)  # minimum over every S' (both change)
    use_anywhere = opens_j and (not has_k or opens_k)
    shifted = np.empty(width)
    for r in range(after.shape[0]):
        own = row_of_out[r]
        in_j = j_present[into_j[r]]
        if own >= 0 or in_j:  # j keeps its choice
            _shift_row(after[r], kept_gain[r], grid, start, step, penalty, first, width, shifted)
            if own >= 0:  # S' = S
                _min_into(best[own], shifted, offsets_kept[r])
            if in_j:  # k changes
                _min_into(j_group[into_j[r]], shifted, offsets_changed[r])
        in_k = has_k and k_present[into_k[r]]
        if in_k or use_anywhere:  # j changes
            _shift_row(after[r], restarted_gain[r], grid, start, step, penalty, first, width, shifted)
            if in_k:  # k keeps its choice
                _min_into(k_group[into_k[r]], shifted, offsets_kept[r])
            if use_anywhere:  # k changes too (or there is no k)
                _min_into(anywhere, shifted, offsets_changed[r] if has_k else offsets_kept[r])
    for o in range(n_out):
        row = best[o]
        if opens_k:
            _least_into(row, j_group[out_j[o]])
        if opens_j and has_k:
            _least_into(row, k_group[out_k[o]])
        if use_anywhere:
            _least_into(row, anywhere)
    return best


@numba.njit(cache=True)
def table_bound(best: np.ndarray, table: np.ndarray, rows: np.ndarray, short: np.ndarray, priced: np.ndarray,
                mu: float, grid: np.ndarray, step: float, penalty: float, start: int) -> None:
    """Raise each label's bound ``best`` to job j's completion bound, in place: its table row ``rows``, read at its need
    ``short`` of job j between two grid points (a need outside the window: the exact extension of
    :meth:`oracle.completion.RestrictedCompletionBound.bound`), + ``priced`` − ``mu`` × its need."""
    top = grid[grid.size - 1]
    last = table.shape[1] - 2
    for i in range(rows.size):
        x = min(max(short[i], 0.0), top)
        low = min(max(int(np.floor(x / step)) - start, 0), last)
        below = penalty * _maximum(grid[start + low] - x, 0.0)
        above = penalty * (grid[start + low + 1] - x)  # < 0 past the window: the exact extension
        own = _maximum(table[rows[i], low] - below, table[rows[i], low + 1] - above)
        best[i] = _maximum(best[i], own + priced[i] - mu * short[i])


__all__ = ["back_rows", "staircase_keep", "table_bound"]


@numba.njit(cache=True)
def grid_shortest_path(weight: np.ndarray, first: np.ndarray, loss0: np.ndarray, loss1: np.ndarray) -> tuple:
    """The least-length path over blocks on a grid of two jobs' choices (:mod:`oracle.peak_search`).

    ``weight`` (blocks, A, B): the length of each state (a, b) in each block (+inf where it may not be); ``first``
    (A, B): what entering block 0 in a state adds; ``loss0``/``loss1`` (A, B): what entering a state costs when job 0 /
    job 1 changed its choice (a restart). Every move between blocks is allowed, so the least length into (a, b) is the
    least of four cases: no job changed (from (a, b)), only job 0 changed (the least of column b), only job 1 (the least
    of row a), both (the least of all); each case over-counts the moves of a smaller case, which its own case counts
    exactly. Returns (least length, the path's a per block, its b per block)."""
    n_blocks, n_a, n_b = weight.shape
    fwd = weight[0] + first
    parent = np.empty((n_blocks, n_a, n_b), dtype=np.int64)
    row_best = np.empty(n_a)
    row_arg = np.empty(n_a, dtype=np.int64)
    col_best = np.empty(n_b)
    col_arg = np.empty(n_b, dtype=np.int64)
    nxt = np.empty((n_a, n_b))
    for blk in range(1, n_blocks):
        all_best, all_arg = np.inf, 0
        for a in range(n_a):
            row_best[a] = np.inf
            row_arg[a] = 0
        for b in range(n_b):
            col_best[b] = np.inf
            col_arg[b] = 0
        for a in range(n_a):
            for b in range(n_b):
                v = fwd[a, b]
                if v < row_best[a]:
                    row_best[a] = v
                    row_arg[a] = a * n_b + b
                if v < col_best[b]:
                    col_best[b] = v
                    col_arg[b] = a * n_b + b
                if v < all_best:
                    all_best = v
                    all_arg = a * n_b + b
        for a in range(n_a):
            for b in range(n_b):
                w = weight[blk, a, b]
                if w == np.inf:
                    nxt[a, b] = np.inf
                    parent[blk, a, b] = 0
                    continue
                best, arg = fwd[a, b], a * n_b + b
                v = col_best[b] + loss0[a, b]
                if v < best:
                    best, arg = v, col_arg[b]
                v = row_best[a] + loss1[a, b]
                if v < best:
                    best, arg = v, row_arg[a]
                v = all_best + loss0[a, b] + loss1[a, b]
                if v < best:
                    best, arg = v, all_arg
                nxt[a, b] = best + w
                parent[blk, a, b] = arg
        for a in range(n_a):
            for b in range(n_b):
                fwd[a, b] = nxt[a, b]
    end, least = 0, np.inf
    for a in range(n_a):
        for b in range(n_b):
            if fwd[a, b] < least:
                least = fwd[a, b]
                end = a * n_b + b
    path_a = np.empty(n_blocks, dtype=np.int64)
    path_b = np.empty(n_blocks, dtype=np.int64)
    state = end
    for blk in range(n_blocks - 1, -1, -1):
        path_a[blk] = state // n_b
        path_b[blk] = state % n_b
        if blk > 0:
            state = parent[blk, path_a[blk], path_b[blk]]
    return least, path_a, path_b
