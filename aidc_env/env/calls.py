"""The joint action's grid side: GPU power caps set within the slot, and the mask that keeps accepted calls deliverable.

An instance with a cap curve, grid calls or a training value (``Instance.has_grid_side``) is run by the joint action
with :class:`CallResponse` beside it. The agent chooses modes and pauses at checkpoints and, with a cap curve, a cap
level for the running jobs (the action's last digit: caps save energy per token at any hour); in a call's slot the env
caps deeper where the limit needs it, the way a cluster's power controller does:

- **Caps** (:meth:`CallResponse.positions`): in a call's slot, after the joint choice at the agent's level, if the
  site's import would exceed the call's limit, the running jobs are capped just enough to meet it, cheapest first:
  every (job, level step) is a cut of GPU power at a cost in training value (the job's value per token, or a value of
  $1 per GPU-hour of its baseline mode without a training value), and the steps are taken in order of cost per kW.
  The curve is concave, so this is the least value lost for the cut (a fractional knapsack), and a job's steps are
  taken in level order. Outside calls the agent's level alone.
- **Acceptance and the delivery mask** (:meth:`CallResponse.deliverable`). A call is accepted at its notice if,
  together with the calls accepted before it, it can still be delivered from the state reached: every job keeps its
  choice to the end of its committed segment at the deepest cap, and pauses at its next checkpoint. From then on a
  joint choice is allowed only if, in every slot of every accepted call, that continuation meets the limit (the
  renewable output counted only as the outlook knows it: the truth under ``perfect``, none otherwise). The
  continuation of a choice that passes stays available at the next decision, so a policy that follows the mask
  delivers every accepted call (the caps of the slot reach the limit whenever the deepest caps do). A call that cannot
  be guaranteed at its notice is declined: it is still scored, and the caps still cut what they can.
- **The slot's objective**: the simulator's decision cost, the call's payment and penalty of the slot
  (:func:`aidc_env.simulator.call_slot_usd`), the payment per MW committed at the last slot of a call delivered in
  every slot, and the training value lost against the baseline mode, so that the episode's total equals the
  simulator's objective of the schedule.

**Tiers** (``Job.max_throughput_loss``) are kept slot by slot, which is sufficient for the call's total: in every slot
of a call a tiered job makes at least its tier's share of its baseline mode's tokens. The caps never go deeper than that
allows (:meth:`CallResponse.ceilings`; the agent's level is lifted where it would), and the delivery continuation keeps
a tiered job in its choice through the call at that ceiling instead of pausing it; a choice that cannot make the
tier's tokens in an accepted call's slot (a pause, a mode too slow, a restart inside the call) is masked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aidc_env.errors import require
from aidc_env.grid import CAP_TOLERANCE_MW, slot_limits_mw
from aidc_env.instance import SECONDS_PER_HOUR, Instance
from aidc_env.simulator import baseline_tokens, call_slot_usd, facility_load_mw

LIMIT_MARGIN_MW = 0.5 * CAP_TOLERANCE_MW
"""The caps aim this far below a call's limit (the oracle's call rows do the same), half the simulator's tolerance."""
DEFAULT_VALUE_USD_PER_GPU_HOUR = 1.0
"""Without a training value, caps are ranked as if a GPU-hour of training at the baseline mode were worth $1."""
TIER_POSITION_SLACK = 1e-9
"""A tier's deepest cap position is taken this much shallower, so that rounding never leaves a slot short of its
tier's tokens."""
CALL_FEATURES = ("call_known", "call_starts_in", "call_left", "call_depth", "cap_depth")
"""Observation entries of the grid side (all in [0, 1]): a known call ahead or on now; slots to its start and slots
left in it, per day's slots; its depth now or at its start (1 − limit / baseline); the mean cap position of the last
slot over the deepest."""
NO_CALL = [0.0, 0.0, 0.0, 0.0]
"""The call entries of :data:`CALL_FEATURES` where no call is known."""


@dataclass(frozen=True)
class JobState:
    """What the rules read of the jobs at a decision: per job the end of the segment it is committed to, whether it
    is at a checkpoint, its current local choice and whether its current segment restarted."""

    ends: Sequence[int]
    at_boundary: Sequence[bool]
    current: Sequence[int]
    restarted: Sequence[bool]


class CallResponse:
    """The grid side of one joint env (see the module docstring). Tables per job and local choice (0 = pause) are
    built once; :meth:`reset` takes each episode's instance."""

    def __init__(self, inst: Instance, local: np.ndarray, gpus_loc: Sequence[np.ndarray],
                 it_kw_loc: Sequence[np.ndarray], rate3600_loc: Sequence[np.ndarray], knows_renewable: bool,
                 restart_hours_by_offset: Sequence[Sequence[float]], slots_per_segment: Sequence[int]):
        self.curve = curve = inst.cap_curve
        self.levels = curve.levels if curve is not None else 1
        self.n_jobs = len(gpus_loc)
        self.knows_renewable = knows_renewable
        self.gpus_loc, self.it_kw_loc, self.rate3600_loc = gpus_loc, it_kw_loc, rate3600_loc
        host = curve.host_kw_per_gpu if curve is not None else 0.0
        deepest = self.levels - 1
        # Per job and local choice: IT kW at the deepest cap, and the cap's cut of GPU power per unit of level position.
        self.it_min_loc = [np.where(g > 0, curve.it_power_kw(p, g, deepest), 0.0) if curve is not None else p
                           for g, p in zip(gpus_loc, it_kw_loc, strict=True)]
        self.gpu_kw_loc = [np.maximum(p - g * host, 0.0) for g, p in zip(gpus_loc, it_kw_loc, strict=True)]
        # Over the joint actions (A, J): each job's GPUs and IT kW at the deepest cap.
        self.gpus_a = [gpus_loc[j][local[:, j]] for j in range(self.n_jobs)]
        self.it_min_a = [self.it_min_loc[j][local[:, j]] for j in range(self.n_jobs)]
        # Scalars for the per-slot arithmetic (Python floats: the same operations as numpy's, faster one at a time).
        self.host_kw = host
        self.power_list = curve.power.tolist() if curve is not None else [1.0]
        self.throughput_list = curve.throughput.tolist() if curve is not None else [1.0]
        self.gpus_list = [g.tolist() for g in gpus_loc]
        self.it_kw_list = [p.tolist() for p in it_kw_loc]
        # Tiers: per job the tokens a slot of a call must make (None: no tier), and per job the productive hours of each
        # slot of a (re)started segment, by its offset in the segment.
        self.local = local
        self.tier_tokens = [None if job.max_throughput_loss is None else (1.0 - job.max_throughput_loss)
                            * job.baseline_rate[1] * SECONDS_PER_HOUR * inst.slot_hours for job in inst.jobs]
        self.tiered = any(n is not None for n in self.tier_tokens)
        self.restart_hours_by_offset = [np.asarray(h, float) for h in restart_hours_by_offset]
        self.sps = list(slots_per_segment)
        # Facility load (MW) of every joint choice with the running jobs at each cap level (the simulator's sums).
        self.level_load_mw = [facility_load_mw(inst, sum(self.gpus_a), sum(
            np.where(self.gpus_a[j] > 0, curve.it_power_kw(it_kw_loc[j][local[:, j]], self.gpus_a[j], level), 0.0)
            for j in range(self.n_jobs))) for level in range(self.levels)] if curve is not None else []
        # What does not change from day to day (instances of one env share jobs and parameters).
        T = inst.slots
        self.value_usd_per_token = [inst.token_value_usd(job) for job in inst.jobs]
        self.has_value = any(v > 0 for v in self.value_usd_per_token)
        self.baseline_value_usd = [sum(v * baseline_tokens(inst, job, slice(t, t + 1))
                                       for v, job in zip(self.value_usd_per_token, inst.jobs, strict=True))
                                   for t in range(T)]
        value = inst.training_value_usd_per_gpu_hour or DEFAULT_VALUE_USD_PER_GPU_HOUR
        self.cap_weight = [value * job.baseline_rate[0] / (job.baseline_rate[1] * SECONDS_PER_HOUR)
                           for job in inst.jobs]
        self.inst: Instance | None = None
        self._tables: dict[int, tuple] = {}

    # ------------------------------------------------------------------ episode

    def reset(self, inst: Instance) -> None:
        require(all(call.site == 0 for call in inst.grid_calls) and len(inst.sites) == 1, "case",
                "the joint action takes one site")
        self.inst = inst
        tables = self._tables.get(id(inst))
        if tables is None or tables[0] is not inst:  # built once per instance (the env keeps its instances)
            T = inst.slots
            call_of_slot = np.full(T, -1, dtype=np.int64)
            for k, call in enumerate(inst.grid_calls):
                call_of_slot[call.slots] = k
            renewable = np.asarray(inst.renewable_mw, float)
            tables = self._tables[id(inst)] = (
                inst, slot_limits_mw(inst.grid_calls, T).tolist(), call_of_slot.tolist(), renewable.tolist(),
                renewable if self.knows_renewable else np.zeros(T), self._call_table(inst))
        _, self.limit_mw, self.call_of_slot, self.renewable, self.known_renewable, self.call_table = tables
        self.accepted: list[bool | None] = [None] * len(inst.grid_calls)  # None: not noticed yet
        self.shortfall = [False] * len(inst.grid_calls)
        self.cap_depth = 0.0
        self.next_notice = min((call.notice_slot for call in inst.grid_calls), default=inst.slots)

    def pending(self, t: int) -> bool:
        """Whether a call is noticed by slot ``t`` and not yet accepted or declined."""
        return t >= self.next_notice and any(a is None and call.notice_slot <= t for a, call
                                             in zip(self.accepted, self.inst.grid_calls, strict=True))

    def notice(self, t: int, feasible: np.ndarray, state: JobState) -> None:
        """Accept or decline the calls noticed at slot ``t`` (in order), given the joint choices ``feasible`` by the
        other rules and the jobs' state."""
        for k, call in enumerate(self.inst.grid_calls):
            if self.accepted[k] is None and call.notice_slot <= t:
                self.accepted[k] = True
                self.accepted[k] = bool(np.any(feasible & self.deliverable(t, state)))
        self.next_notice = min((call.notice_slot for a, call in zip(self.accepted, self.inst.grid_calls, strict=True)
                                if a is None), default=self.inst.slots)

    def lost_hours(self) -> np.ndarray | None:
        """Per slot, the hours of throughput the deepest cap takes in the slots of the accepted calls (for the
        completion rule: :meth:`aidc_env.env.safety.SafetyTest.safe`); None without an accepted call."""
        calls = [call for k, call in enumerate(self.inst.grid_calls) if self.accepted[k]]
        if not calls:
            return None
        lost = np.zeros(self.inst.slots)
        share = 1.0 - (self.curve.throughput[-1] if self.curve is not None else 0.0)
        for call in calls:
            lost[call.slots] = share * self.inst.slot_hours
        return lost

    def deliverable(self, t: int, state: JobState) -> np.ndarray:
        """(A,) whether, after each joint choice at ``t``, every accepted call stays deliverable: each job without a
        tier at the deepest cap until the end of the segment it is committed to, paused after it; each job with a
        tier in its choice through the call, at the deepest cap at which every slot still makes the tier's tokens."""
        inst = self.inst
        slots = [s for k, call in enumerate(inst.grid_calls) if self.accepted[k]
                 for s in range(max(call.start_slot, t), call.end_slot)]
        ok = np.ones(self.gpus_a[0].size, dtype=bool)
        if not slots:
            return ok
        slots_arr = np.array(slots)
        room = np.asarray(self.limit_mw)[slots_arr] + self.known_renewable[slots_arr] - LIMIT_MARGIN_MW
        if self.tiered:
            for s, room_s in zip(slots, room, strict=True):
                ok &= self._slot_deliverable(s, room_s, state)
            return ok
        locked_by_slot = slots_arr[:, None] < np.asarray(state.ends)[None, :]  # the jobs still in their segment
        codes = locked_by_slot @ (1 << np.arange(self.n_jobs))  # one integer per set of locked jobs
        for code in np.unique(codes):
            in_group = codes == code
            locked = locked_by_slot[np.argmax(in_group)]
            gpus = sum(g for g, lock in zip(self.gpus_a, locked, strict=True) if lock)
            it_kw = sum(p for p, lock in zip(self.it_min_a, locked, strict=True) if lock)
            ok &= facility_load_mw(inst, gpus, it_kw) <= room[in_group].min()
        return ok

    def _slot_deliverable(self, s: int, room_mw: float, state: JobState) -> np.ndarray:
        """(A,) the continuation of :meth:`deliverable` meets slot ``s``'s limit (``room_mw``: the load it allows) and
        every tier."""
        ok = np.ones(self.gpus_a[0].size, dtype=bool)
        gpus, it_kw = 0, 0.0
        for j in range(self.n_jobs):
            locked = s < state.ends[j]
            if self.tier_tokens[j] is None:
                if locked:
                    gpus, it_kw = gpus + self.gpus_a[j], it_kw + self.it_min_a[j]
                continue
            hours = self.slot_hours_by_choice(j, s, state) if locked else np.full(self.gpus_loc[j].size,
                                                                                   self.inst.slot_hours)
            x, meets = self.ceilings(j, hours)
            it_loc = np.where(self.gpus_loc[j] > 0, self.curve.it_power_kw(self.it_kw_loc[j], self.gpus_loc[j], x), 0.0)
            ok &= meets[self.local[:, j]]
            gpus, it_kw = gpus + self.gpus_a[j], it_kw + it_loc[self.local[:, j]]
        return ok & (facility_load_mw(self.inst, gpus, it_kw) <= room_mw)

    def slot_hours_by_choice(self, j: int, s: int, state: JobState) -> np.ndarray:
        """Per local choice of job j, its productive hours in slot ``s`` of its committed segment (less after a
        restart: a choice other than the current one at a checkpoint)."""
        start = state.ends[j] - self.sps[j]
        if state.at_boundary[j]:
            c = np.arange(self.gpus_loc[j].size)
            restart = (c != 0) & (c != state.current[j])
        else:
            restart = np.full(self.gpus_loc[j].size, bool(state.restarted[j]))
        return np.where(restart, self.restart_hours_by_offset[j][s - start], self.inst.slot_hours)

    def ceilings(self, j: int, hours: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """Per local choice of job j making tokens for ``hours`` of a call's slot: the deepest cap position at which it
        still makes its tier's tokens (the deepest level without a tier), and whether it makes them at all."""
        rate = self.rate3600_loc[j]
        if self.tier_tokens[j] is None:
            return np.full(rate.size, self.levels - 1.0), np.ones(rate.size, dtype=bool)
        made = rate * hours
        meets = made >= self.tier_tokens[j]
        share = np.divide(self.tier_tokens[j], made, out=np.full(rate.size, np.inf), where=made > 0)
        x = np.interp(-share, -self.curve.throughput, np.arange(self.levels)) if self.curve is not None else 0.0 * share
        return np.where(meets, np.maximum(x - TIER_POSITION_SLACK, 0.0), 0.0), meets

    # ------------------------------------------------------------------ the slot

    def positions(self, t: int, loc: Sequence[int], load_mw: float, floor: int = 0,
                  hours: Sequence[float] = ()) -> tuple[list[float] | None, bool]:
        """Cap positions of the jobs in slot ``t`` under the joint choice ``loc`` (local choices) capped at level
        ``floor`` (the agent's), whose load is then ``load_mw``; ``hours``: each job's productive hours in the slot. In
        a call's slot no job is capped deeper than its tier allows, and the caps go deeper where needed, the least value
        lost that brings the import to the call's limit. Returns (the positions, None if no job is capped; whether
        they differ from ``floor``, so that the load must be computed again)."""
        limit = self.limit_mw[t]
        if self.curve is None or (floor == 0 and limit == np.inf):
            return None, False
        x = [float(floor) if c else 0.0 for c in loc]
        if limit == np.inf:
            return x, False
        ceiling = [self.levels - 1.0] * self.n_jobs
        changed = False
        if self.tiered:
            for j, c in enumerate(loc):
                if c and self.tier_tokens[j] is not None:
                    ceiling[j] = float(self.ceilings(j, hours[j])[0][c])
                    if x[j] > ceiling[j]:
                        x[j], changed = ceiling[j], True
            if changed:
                load_mw = self.load_mw(loc, x)
        excess_mw = load_mw - self.renewable[t] - (limit - LIMIT_MARGIN_MW)  # a limit of 0: import 0
        if excess_mw <= 0:
            return (x if any(x) else None), changed
        need_kw = excess_mw * 1000.0 / self.inst.pue
        power, throughput = self.power_list, self.throughput_list
        steps = []  # (cost per kW, job, level, kW of the whole step, the share of the step allowed)
        for j, c in enumerate(loc):
            gpu_kw = float(self.gpu_kw_loc[j][c])
            if c == 0 or gpu_kw <= 0:
                continue
            rate = float(self.rate3600_loc[j][c])
            for level in range(int(x[j]), self.levels - 1):
                allowed = min(level + 1.0, ceiling[j]) - max(float(level), x[j])
                if allowed <= 0:
                    break
                kw = gpu_kw * (power[level] - power[level + 1])
                cost = self.cap_weight[j] * rate * (throughput[level] - throughput[level + 1])
                steps.append((cost / kw, j, level, kw, allowed))
        for _, j, level, kw, allowed in sorted(steps):  # ties: job order, then level order
            share = min(need_kw / kw, allowed)
            x[j] = max(float(level), x[j]) + share
            need_kw -= kw * share
            if need_kw <= 0:
                break
        return x, True

    def load_mw(self, loc: Sequence[int], caps: Sequence[float]) -> float:
        """Facility load (MW) of the joint choice ``loc`` with the jobs capped at ``caps`` (the simulator's sums)."""
        gpus, it_kw = 0, 0.0
        for j, c in enumerate(loc):
            gpus += self.gpus_list[j][c]
            it_kw += self.capped_it_kw(j, c, float(caps[j]))
        inst = self.inst
        return inst.pue * (it_kw + max(inst.n_gpus - gpus, 0) * inst.idle_kw_per_gpu) / 1000.0

    def factor(self, values: list[float], x: float) -> float:
        """``numpy.interp(x, range(levels), values)`` for one position, as numpy computes it."""
        level = int(x)
        if level >= self.levels - 1:
            return values[-1]
        return (values[level + 1] - values[level]) * (x - level) + values[level]

    def capped_it_kw(self, j: int, c: int, x: float) -> float:
        """IT kW of job j's local choice c at cap position x (:meth:`aidc_env.grid.CapCurve.it_power_kw`)."""
        f = self.factor(self.power_list, x)
        return self.it_kw_list[j][c] * f + self.gpus_list[j][c] * self.host_kw * (1.0 - f)

    def record(self, positions: list[float] | None) -> None:
        """The caps of the slot just played (for ``cap_depth``)."""
        self.cap_depth = 0.0 if positions is None else sum(positions) / (self.n_jobs * (self.levels - 1))

    def slot_usd(self, t: int, grid_mw: float, made: Sequence[float]) -> float:
        """The slot's call payment (negative) and penalty, the committed payment of a call delivered when its last slot
        closes, and the training value lost against the baseline (``made``: each job's tokens in the slot)."""
        inst = self.inst
        usd = 0.0
        if self.has_value:
            usd = self.baseline_value_usd[t] - sum(v * x for v, x in zip(self.value_usd_per_token, made, strict=True))
        k = self.call_of_slot[t]
        if k < 0:
            return usd
        call = inst.grid_calls[k]
        i = t - call.start_slot
        payment, penalty = call_slot_usd(call, np.array([grid_mw]), inst.slot_hours, slice(i, i + 1))
        self.shortfall[k] |= grid_mw - call.limit_mw[i] > CAP_TOLERANCE_MW
        usd += float(penalty[0]) - float(payment[0])
        if t == call.end_slot - 1 and not self.shortfall[k]:
            usd -= call.payment_usd_per_mw * max(call.committed_mw, 0.0)
        return usd

    def features(self, t: int) -> list[float]:
        """The :data:`CALL_FEATURES` at slot ``t`` (calls known by then only)."""
        return self.call_table.get(t, NO_CALL) + [self.cap_depth]

    @staticmethod
    def _call_table(inst: Instance) -> dict[int, list[float]]:
        """Per slot t the call entries of :data:`CALL_FEATURES` (all but ``cap_depth``): of the call known at t (its
        notice ≤ t) that has not ended (slots without one: :data:`NO_CALL`)."""
        spd = inst.slots_per_day
        table: dict[int, list[float]] = {}
        for call in inst.grid_calls:
            for t in range(call.notice_slot, call.end_slot):
                i = max(t, call.start_slot) - call.start_slot
                base = float(call.baseline_mw[i])
                depth = 1.0 - float(call.limit_mw[i]) / base if base > 0 else 0.0
                table[t] = [1.0, min(max(call.start_slot - t, 0) / spd, 1.0),
                            min((call.end_slot - max(t, call.start_slot)) / spd, 1.0), min(max(depth, 0.0), 1.0)]
        return table


__all__ = ["CALL_FEATURES", "DEFAULT_VALUE_USD_PER_GPU_HOUR", "LIMIT_MARGIN_MW", "CallResponse"]
