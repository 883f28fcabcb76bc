"""Exact label-setting search of the fast model's joint-state network: the day oracle's quick optimality proof.

The fast model (:mod:`oracle.formulations`) is a shortest path over (block, joint state) with one side constraint per
job (its tokens must reach the tranche): a resource-constrained shortest path, solved exactly by label setting.

- a *label* is a partial schedule up to block b: its joint state S, its cost so far and each job's tokens so far (a
  segment's tokens are credited at its first block and capped at the tranche);
- label A *dominates* B at the same (b, S) when A costs no more and has at least B's tokens for every job: every
  completion of B is one of A, at no lower cost. Dominated labels are dropped;
- token prices μ ≥ 0 give, by a backward shortest path, a lower bound on completing a label, ``cost + backward[b, S] +
  Σ_j μ_j·max(W_j − tokens_j, 0)``, raised by the completion tables of :mod:`oracle.completion`. A label whose bound
  exceeds a threshold θ, or that cannot reach a tranche any more, is dropped.

Every schedule that costs ≤ θ and meets the tranches survives to the last block, so the cheapest surviving label is the
optimum, or, if none survives, the optimum costs more than θ. Raising θ from the root bound (:func:`prove`) proves ever
higher bounds until a search returns the optimum, with no branch-and-bound gap. A search gives up (``status="budget"``)
when its labels outgrow a budget or the deadline passes; the oracle then falls back to branch and bound on the reduced
MILP. Supported: one or two jobs (the dominance test is over two token counts) and no daily minimums.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from oracle.completion import RESTRICT_MARGIN, CompletionBound, RestrictedCompletionBound
from oracle.data import OracleData, daily_rows, span_days
from oracle.kernels import staircase_keep
from oracle.reduction import joint_tokens

MAX_JOBS = 2
"""Largest number of jobs the dominance test handles."""
MAX_LABELS = 400_000
"""Budget: the most labels alive after a block before the search gives up."""
PARETO_INPUT_FACTOR = 8
"""The search also gives up when more than this × MAX_LABELS extensions pass the bounds in one block."""
CHUNK_EXTENSIONS = 1_000_000
"""Labels are extended in chunks of about this many (label, next state) pairs, to bound memory."""
MAX_NETWORK_ENTRIES = 30_000_000
"""Largest blocks × states² × jobs the precomputed transition arrays may hold (8 bytes each)."""
THRESHOLD_STEP0 = 5e-4
"""First step of the threshold above the LP bound, relative to the bound (the labels grow fast with it)."""
MIN_THRESHOLD_STEP = 2e-5
"""The search gives up when even a step this small (relative to the bound) outgrows the budget."""
BEAM_WIDTH = 2
"""Labels kept per state and block by the heuristic search that finds the first schedule (see :func:`prove`)."""
BEAM_CANDIDATES = 4
"""The beam first keeps this × BEAM_WIDTH extensions per state (lowest bound), then drops dominated ones."""
TARGET_LABELS = 3_000
"""Size of the next search that the threshold's step aims at (the searches grow about exponentially in θ)."""
LABEL_GROWTH = 2.0
"""Beyond TARGET_LABELS, each next search aims at this × the last one's labels (so the budget ends a run of searches
that find nothing, instead of θ creeping)."""
GROWTH_FIT_MIN_LABELS = 10
"""The growth rate is fitted only once the last search kept at least this many labels."""
BOUND_RTOL = 1e-9
"""A label is dropped only if its bound exceeds the threshold by more than this (relative)."""
TOKEN_RTOL = 1e-12
"""A final label meets a tranche if its tokens reach W·(1 − this) (the tranche W already has the model's margin)."""
SCREEN_RTOL = 1e-9
"""Slack of the screen of :meth:`LabelSearch.run` (relative to the largest term of its sum): the screen's sum is rounded
differently from the bound's, by about 1e-16 × a few terms, so with this slack it never drops an extension the bound
keeps."""


@dataclass(frozen=True)
class LabelingOutcome:
    """What a search proved. Costs in $ (the constant PPA term included)."""

    status: str
    """``optimal`` (``schedule`` is the model's optimum), ``above`` (no schedule costs ≤ ``threshold_usd``), or
    ``budget`` (gave up: too many labels or out of time)."""
    schedule: list[list[int]] | None
    objective_usd: float | None
    threshold_usd: float
    max_labels: int
    """Most labels alive after any block (or about to be, when the search gave up)."""
    seconds: float


def supported(data: OracleData) -> bool:
    """Whether the search applies: one or two jobs, a network of bounded size, and no daily minimums (a label holds each
    job's tokens over the horizon, not per day; those instances go to branch and bound)."""
    if data.joint_states is None or not 1 <= len(data.inst.jobs) <= MAX_JOBS or daily_rows(data.inst):
        return False
    return data.n_blocks * data.n_states ** 2 * len(data.inst.jobs) <= MAX_NETWORK_ENTRIES


class LabelSearch:
    """Precomputed network of one instance's joint states (for a given token price vector μ)."""

    def __init__(self, data: OracleData, states: np.ndarray, block_cost_usd: np.ndarray,
                 mu_per_token: np.ndarray | None, tranche_tokens: np.ndarray, *, completion: bool = True,
                 restricted: bool | None = None):
        inst = data.inst
        self.data, self.states = data, states
        self.n_blocks, self.n_states = block_cost_usd.shape
        n_jobs = states.shape[1]
        self.cost = block_cost_usd
        finite = np.isfinite(block_cost_usd)  # +inf marks a state a grid call does not allow in a block
        self._dearest = np.where(finite, block_cost_usd, -np.inf).max(axis=1)
        """Per block its dearest allowed state's cost."""
        self._cost_scale = float(np.abs(np.where(finite, block_cost_usd, 0.0)).max(axis=1).sum())
        """Σ over blocks of the largest |cost| of an allowed state: a term of the label screen's slack."""
        self.tranche = np.asarray(tranche_tokens, dtype=float)
        self.constant = data.constant_usd
        tokens = joint_tokens(data, states)
        kept, lost = tokens.kept, tokens.loss
        starts = np.vstack([np.ones((1, n_jobs), dtype=bool), data.block_segment[1:] != data.block_segment[:-1]])
        self.segment_start = starts  # (blocks, jobs): the block opens a segment of the job
        changed = np.stack([states[:, j][:, None] != states[:, j][None, :] for j in range(n_jobs)], axis=-1)
        initial = np.array([job.initial_mode for job in inst.jobs])
        first_changed = states != initial[None, :]
        # gain[b][old, new, j]: job j's tokens credited when block b is entered in `new` after `old` (a segment's
        # tokens, kept or restarted, at its first block; 0 elsewhere); allowed[b][old, new]: the move is possible.
        # A block after the first depends only on which jobs' segments it opens: blocks that open the same share
        # one (read-only) pair of arrays (a week at K = 12 has 84 blocks and one such pattern).
        self.allowed: list[np.ndarray] = []
        self.gain: list[np.ndarray] = []
        shared: dict[tuple[bool, ...], tuple[np.ndarray, np.ndarray]] = {}
        for b in range(self.n_blocks):
            opens = starts[b]
            key = tuple(bool(v) for v in opens)
            if b == 0:
                credit = np.where(first_changed, kept - lost, kept)[None, :, :]  # from the initial modes
                allowed = np.ones((1, self.n_states), dtype=bool)
                gain = np.where(opens[None, None, :], credit, 0.0)
            elif key in shared:
                gain, allowed = shared[key]
            else:
                credit = np.where(changed, (kept - lost)[None, :, :], kept[None, :, :])
                allowed = ~np.any(changed & ~opens[None, None, :], axis=-1)
                gain = np.where(opens[None, None, :], credit, 0.0)
                shared[key] = gain, allowed
            self.gain.append(gain)
            self.allowed.append(allowed)
        # Most tokens still reachable from (b, S); the backward and through bounds at the token prices μ.
        self.reachable = np.zeros((self.n_blocks, self.n_states, n_jobs))
        masked: dict[int, np.ndarray] = {}  # per distinct block: its gains, −inf where the move is not allowed
        for b in range(self.n_blocks - 2, -1, -1):
            gains = masked.setdefault(id(self.gain[b + 1]),
                                      np.where(self.allowed[b + 1][:, :, None], self.gain[b + 1], -np.inf))
            self.reachable[b] = np.max(gains + self.reachable[b + 1][None, :, :], axis=1)  # −inf + finite = −inf
        self._tokens = (kept, kept - lost)
        self.log: list[tuple[float, str, int, float]] = []
        """(θ, status, labels, seconds) of every search :meth:`run` made."""
        self.table_log: list[tuple[float, float]] = []
        """(ceiling, seconds) of every build of the restricted completion tables."""
        self._use_completion = completion
        self._restricted = span_days(data.inst) > 1 if restricted is None else restricted
        """Completion tables restricted to the pairs near the bound, on a finer grid (horizons: several days)."""
        if mu_per_token is not None:
            self.price(mu_per_token)

    def price(self, mu_per_token: np.ndarray) -> None:
        """Set the token prices μ ≥ 0 ($ per token): the backward and through bounds and the completion tables."""
        self.mu = np.maximum(np.asarray(mu_per_token, dtype=float), 0.0)
        self.backward = self._backward(self.mu)
        self.through = self._forward(self.mu) + self.backward + float(self.mu @ self.tranche) + self.constant
        """Lower bound on the cost of every tranche-meeting schedule in S during block b."""
        self.moves = self._moves(self.mu)
        """Per block b ≥ 1: −μ·gain of each move (old, new), +inf where not allowed (the screen of :meth:`run`)."""
        self.completion = None
        if self._use_completion and self._restricted:
            lagrangian = float(self.through.min())
            self._restrict_to(lagrangian + RESTRICT_MARGIN * max(1.0, abs(lagrangian)))
        elif self._use_completion:
            self.completion = CompletionBound(self, *self._tokens)

    def _restrict_to(self, ceiling_usd: float) -> None:
        """(Re)build the restricted completion tables for searches at thresholds up to ``ceiling_usd``."""
        tick = time.perf_counter()
        self.completion = RestrictedCompletionBound(self, *self._tokens, ceiling_usd)
        self.table_log.append((ceiling_usd, time.perf_counter() - tick))

    def lagrangian(self, mu_per_token: np.ndarray) -> tuple[float, float, np.ndarray]:
        """The Lagrangian bound at μ (a lower bound on every tranche-meeting schedule for any μ ≥ 0), and the cost and
        tokens per job of a schedule that attains it (its subgradient is W − tokens)."""
        mu = np.maximum(np.asarray(mu_per_token, dtype=float), 0.0)
        fwd = self.cost[0] - self.gain[0][0] @ mu
        parents = []
        moves = self._moves(mu)
        for b in range(1, self.n_blocks):
            length = fwd[:, None] + moves[b]  # the same floats as fwd − gain·μ (inf where not allowed)
            parent = np.argmin(length, axis=0)
            parents.append(parent)
            fwd = self.cost[b] + length[parent, np.arange(self.n_states)]
        state = int(np.argmin(fwd))
        value = float(fwd[state]) + float(mu @ self.tranche) + self.constant
        path = [state]
        for parent in reversed(parents):
            path.append(int(parent[path[-1]]))
        path.reverse()
        tokens = self.gain[0][0, path[0]].copy()
        for b in range(1, self.n_blocks):
            tokens += self.gain[b][path[b - 1], path[b]]
        return value, self.path_cost(path), tokens

    def path_cost(self, path: list[int]) -> float:
        """The exact cost of a path of states (one per block), the constant PPA term included."""
        return float(self.cost[np.arange(self.n_blocks), path].sum() + self.constant)

    def _moves(self, mu: np.ndarray) -> list[np.ndarray | None]:
        """Per block b ≥ 1: −gain·μ of each move (old, new), +inf where it is not allowed; computed once per distinct
        block (blocks share their arrays) and per μ. ``x + moves[b]`` is bit for bit ``np.where(allowed[b], x −
        gain[b]·μ, inf)`` (a − b is a + (−b) in floating point)."""
        done: dict[int, np.ndarray] = {}
        moves: list[np.ndarray | None] = [None]
        for b in range(1, self.n_blocks):
            key = id(self.gain[b])
            if key not in done:
                done[key] = np.where(self.allowed[b], -(self.gain[b] @ mu), np.inf)
            moves.append(done[key])
        return moves

    def _backward(self, mu: np.ndarray) -> np.ndarray:
        """Least Lagrangian length (cost − μ·tokens) from the end of block b in state S to the end of the day."""
        back = np.zeros((self.n_blocks, self.n_states))
        for b in range(self.n_blocks - 2, -1, -1):
            length = self.cost[b + 1][None, :] - self.gain[b + 1] @ mu + back[b + 1][None, :]
            back[b] = np.min(np.where(self.allowed[b + 1], length, np.inf), axis=1)
        return back

    def _forward(self, mu: np.ndarray) -> np.ndarray:
        """Least Lagrangian length from the start of the day to the end of block b in state S."""
        fwd = np.empty((self.n_blocks, self.n_states))
        fwd[0] = self.cost[0] - self.gain[0][0] @ mu
        for b in range(1, self.n_blocks):
            length = fwd[b - 1][:, None] - self.gain[b] @ mu
            fwd[b] = self.cost[b] + np.min(np.where(self.allowed[b], length, np.inf), axis=0)
        return fwd

    @property
    def lower_bound_usd(self) -> float:
        """A lower bound on every tranche-meeting schedule: the Lagrangian one, raised by the completion bounds of the
        first block's states."""
        lagrangian = float(self.through.min())
        if self.completion is None:
            return lagrangian
        state = np.arange(self.n_states)
        tokens = np.minimum(self.gain[0][0], self.tranche)
        bound = self.completion.bound(0, state, tokens)
        allowed = np.isfinite(self.cost[0])  # a grid call may not allow a state (whose completion bound may be −inf)
        strong = float((self.cost[0][allowed] + self.constant + bound[allowed]).min(initial=np.inf))
        if isinstance(self.completion, RestrictedCompletionBound):  # it bounds only schedules up to its ceiling
            strong = min(strong, self.completion.ceiling)
        return max(lagrangian, strong)

    @property
    def most_cost_usd(self) -> float:
        """No schedule costs more than this (each block in its dearest state)."""
        return float(self._dearest.sum() + self.constant)

    def run(self, threshold_usd: float, *, deadline: float = np.inf, max_labels: int = MAX_LABELS,
            beam: int | None = None, stop: Callable[[], bool] | None = None) -> LabelingOutcome:
        """The cheapest schedule costing ≤ threshold, or the proof that there is none (exact).

        ``beam``: keep only the ``beam`` labels of each state with the lowest bound after every block (a heuristic: the
        status is then ``found`` or ``above``, and neither proves anything). ``stop``: asked with the deadline; when it
        answers True the search gives up (another path proved the day). Restricted completion tables that do not cover
        the threshold are rebuilt first (twice as far above the Lagrangian bound), except for a beam (a heuristic: they
        then only narrow it)."""
        completion = self.completion
        if isinstance(completion, RestrictedCompletionBound) and beam is None and not completion.covers(threshold_usd):
            lagrangian = float(self.through.min())
            self._restrict_to(min(threshold_usd + max(threshold_usd - lagrangian, 0.0), self.most_cost_usd))
        outcome = self._run(threshold_usd, deadline, max_labels, beam, stop)
        self.log.append((threshold_usd, outcome.status, outcome.max_labels, outcome.seconds))
        return outcome

    def _run(self, threshold_usd: float, deadline: float, max_labels: int, beam: int | None,
             stop: Callable[[], bool] | None) -> LabelingOutcome:
        tick = time.perf_counter()
        tolerance = BOUND_RTOL * max(1.0, abs(threshold_usd))
        limit = threshold_usd + tolerance
        need = self.tranche
        target = need * (1.0 - TOKEN_RTOL)

        def bounds(block: int, state: np.ndarray, cost: np.ndarray, tokens: np.ndarray) -> np.ndarray:
            """Each label's lower bound on its schedule's cost (inf: it cannot meet the tranches)."""
            bound = cost + self.constant + self.backward[block, state] + np.maximum(need - tokens, 0.0) @ self.mu
            bound[~np.all(tokens + self.reachable[block, state] >= target, axis=1)] = np.inf
            if self.completion is not None:  # the stronger bound, only on the labels the cheap one keeps
                rows = np.flatnonzero(bound <= limit)
                bound[rows] = np.maximum(bound[rows], cost[rows] + self.constant
                                         + self.completion.bound(block, state[rows], tokens[rows]))
            return bound

        def viable(block: int, state: np.ndarray, cost: np.ndarray, tokens: np.ndarray) -> np.ndarray:
            return bounds(block, state, cost, tokens) <= limit

        def give_up(most: int) -> LabelingOutcome:
            return LabelingOutcome("budget", None, None, threshold_usd, most, time.perf_counter() - tick)

        inside = [np.flatnonzero(self.through[b] <= limit) for b in range(self.n_blocks)]
        finite = self.backward[np.isfinite(self.backward)]
        slack = SCREEN_RTOL * max(1.0, abs(threshold_usd), float(self.mu @ need),  # the screen's terms, at most
                                  float(np.abs(finite).max(initial=0.0)), self._cost_scale)
        state = inside[0]
        cost = self.cost[0, state].copy()
        tokens = np.minimum(self.gain[0][0, state], need)
        keep = viable(0, state, cost, tokens)
        state, cost, tokens = state[keep], cost[keep], tokens[keep]
        history = [(state, np.full(state.size, -1))]
        most = int(state.size)
        for b in range(1, self.n_blocks):
            if state.size == 0:
                break  # nothing left: no schedule costs ≤ θ
            cols = inside[b]
            chunk = max(1, CHUNK_EXTENSIONS // max(cols.size, 1))
            entry = cost + self.constant + (need - tokens) @ self.mu  # tokens are capped at the tranche
            ahead = self.cost[b, cols] + self.backward[b, cols]
            parts = []
            for first in range(0, state.size, chunk):  # extend the labels a chunk at a time (bounded memory)
                if time.perf_counter() > deadline or (stop is not None and stop()):
                    return give_up(most)
                rows = slice(first, first + chunk)
                # Screen: the bound without the tranche cap, cost + μ·(W − tokens) − μ·gain + block b's cost and
                # backward length, is never above the bound (μ·max(W − t − g, 0) ≥ μ·(W − t − g)); the pairs it
                # puts above the threshold (most of them) are dropped before they are built. +inf: not allowed.
                screen = (entry[rows, None] + ahead[None, :]) + self.moves[b][np.ix_(state[rows], cols)]
                parent, k = np.nonzero(screen <= limit + slack)
                parent += first
                new = cols[k]
                new_cost = cost[parent] + self.cost[b, new]
                new_tokens = np.minimum(tokens[parent] + self.gain[b][state[parent], new], need)
                keep = viable(b, new, new_cost, new_tokens)
                parts.append((parent[keep], new[keep], new_cost[keep], new_tokens[keep]))
            parent, new, new_cost, new_tokens = (np.concatenate(x) for x in zip(*parts, strict=True))
            if new.size > PARETO_INPUT_FACTOR * max_labels:
                return give_up(most)
            if beam is not None:  # first the best few per state by bound, then dominance among them
                keep = _best_per_state(np.arange(new.size), new, bounds(b, new, new_cost, new_tokens),
                                       BEAM_CANDIDATES * beam)
                parent, new, new_cost, new_tokens = parent[keep], new[keep], new_cost[keep], new_tokens[keep]
            order = _pareto(new, new_cost, new_tokens)
            if beam is not None:
                order = _best_per_state(order, new, bounds(b, new[order], new_cost[order], new_tokens[order]), beam)
            if order.size > max_labels:
                return give_up(max(most, int(order.size)))
            state, cost, tokens = new[order], new_cost[order], new_tokens[order]
            history.append((state, parent[order]))
            most = max(most, int(state.size))
        done = np.flatnonzero(np.all(tokens >= target, axis=1)) if len(history) == self.n_blocks else np.array([], int)
        if done.size == 0:
            return LabelingOutcome("above", None, None, threshold_usd, most, time.perf_counter() - tick)
        best = int(done[np.argmin(cost[done])])
        path = []
        for b in range(self.n_blocks - 1, -1, -1):
            path.append(int(history[b][0][best]))
            best = int(history[b][1][best])
        objective = self.path_cost(path[::-1])
        return LabelingOutcome("optimal" if beam is None else "found", self.schedule_of(path[::-1]), objective,
                               threshold_usd, most, time.perf_counter() - tick)

    def schedule_of(self, path: list[int]) -> list[list[int]]:
        """Per job, per segment: the choice of the joint state in the segment's first block."""
        schedule = []
        for j in range(self.states.shape[1]):
            firsts = np.flatnonzero(self.segment_start[:, j])
            schedule.append([int(self.states[path[b], j]) for b in firsts])
        return schedule


def _best_per_state(order: np.ndarray, state: np.ndarray, bound: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` labels of lowest bound in each state (``order`` indexes ``state``, ``bound`` follows order)."""
    by = np.lexsort((bound, state[order]))
    ranked = state[order][by]
    first = np.r_[0, np.flatnonzero(ranked[1:] != ranked[:-1]) + 1]
    rank = np.arange(ranked.size) - np.repeat(first, np.diff(np.r_[first, ranked.size]))
    return order[by[rank < width]]


def _pareto(state: np.ndarray, cost: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Indices of the labels no other label of the same state dominates (cheaper or equal, tokens ≥): sorted by state,
    cost ascending, then tokens descending, each state's labels go through a staircase of the kept ones
    (:func:`oracle.kernels.staircase_keep`, compiled)."""
    n_jobs = tokens.shape[1]
    second = tokens[:, 1] if n_jobs > 1 else np.zeros(state.size)
    order = np.lexsort((-second, -tokens[:, 0], cost, state))
    groups = np.flatnonzero(np.r_[True, state[order][1:] != state[order][:-1]])
    ends = np.r_[groups[1:], order.size]
    keep = staircase_keep(np.ascontiguousarray(tokens[order, 0], dtype=np.float64),
                          np.ascontiguousarray(second[order], dtype=np.float64), groups, ends)
    return order[keep]


def prove(search: LabelSearch, lower_bound_usd: float, incumbent_usd: float | None = None, *, deadline: float = np.inf,
          max_labels: int = MAX_LABELS, stop: Callable[[], bool] | None = None, target_usd: float | None = None,
          horizon_days: float = 1) -> tuple[LabelingOutcome, float]:
    """Raise a threshold θ from the lower bound until the exact search finds the optimum.

    Each search that finds nothing proves that the optimum costs more than its θ; the first that finds a schedule
    returns the optimum. The step starts at :data:`THRESHOLD_STEP0` of the bound and doubles; after two searches it is
    the one whose predicted search keeps :data:`TARGET_LABELS` labels, or :data:`LABEL_GROWTH` × the last search's once
    beyond it (0.25-4× the last step). A search over budget halves the step from the last proof. θ never exceeds the
    incumbent's cost, nor ``target_usd`` when given: a search at the target that finds nothing proves that no schedule
    costs ≤ target (the tolerance stop: the returned bound is then the target and the outcome ``above``). Returns the
    last outcome and the best proven lower bound; ``stop`` (see :meth:`LabelSearch.run`) ends the searches early.

    On a horizon (``horizon_days`` = D > 1) the first step is THRESHOLD_STEP0 / D of the bound (the gap between the
    Lagrangian bound and the optimum does not grow with the days), and no search aims at or beyond a threshold that
    already went over budget (the next one aims half-way between the proof and it).
    """
    cap = incumbent_usd if target_usd is None else (
        target_usd if incumbent_usd is None else min(target_usd, incumbent_usd))
    scale = max(1.0, abs(lower_bound_usd))
    proven = lower_bound_usd
    horizon = horizon_days > 1
    step = THRESHOLD_STEP0 * scale / (horizon_days if horizon else 1)
    seen: list[tuple[float, int]] = []  # (θ, labels) of the searches that found nothing
    failed = np.inf  # lowest θ whose search went over budget (horizons)
    while True:
        threshold = proven + step
        if horizon and threshold >= failed:
            threshold = proven + 0.5 * (failed - proven)
            step = threshold - proven
        if cap is not None:
            threshold = min(threshold, cap)
        threshold = min(threshold, search.most_cost_usd)
        outcome = search.run(threshold, deadline=deadline, max_labels=max_labels, stop=stop)
        if outcome.status == "optimal" or time.perf_counter() > deadline or (stop is not None and stop()):
            return outcome, proven
        if outcome.status == "budget":  # too far at once: retry a smaller step from the last proof
            failed = min(failed, threshold)
            step /= 2.0
            if step < MIN_THRESHOLD_STEP * scale:
                return outcome, proven
            continue
        proven = max(proven, threshold)
        if threshold >= search.most_cost_usd:
            return outcome, proven  # no schedule meets the tranches (branch and bound will say why)
        if cap is not None and threshold >= cap:
            return outcome, proven  # the target is proven (or the incumbent is not inside: float noise)
        seen.append((threshold, max(outcome.max_labels, 1)))
        step = _next_step(seen, step)


def _next_step(seen: list[tuple[float, int]], step: float) -> float:
    """The θ step predicted to reach TARGET_LABELS labels, from the growth between the last two searches."""
    if len(seen) < 2 or seen[-1][1] < GROWTH_FIT_MIN_LABELS:
        return 2.0 * step
    (theta0, labels0), (theta1, labels1) = seen[-2], seen[-1]
    rate = np.log(labels1 / labels0) / max(theta1 - theta0, 1e-12)  # e-folds of labels per $
    if rate <= 0:
        return 2.0 * step
    # Aim at TARGET_LABELS, or at LABEL_GROWTH × the last search once beyond it (a step aimed at a target
    # already passed would shrink each time and creep towards a limit below the optimum).
    target = max(TARGET_LABELS, LABEL_GROWTH * labels1)
    return float(np.clip(np.log(target / labels1) / rate, 0.25 * step, 4.0 * step))
