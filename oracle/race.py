"""The day oracle's guard against slow days: the textbook MILP raced in a child process.

When the label-setting search (:mod:`oracle.labeling`) stalls (its labels outgrow the budget, or it is still searching
after :func:`threshold_s` CPU seconds), the textbook build of the same instance (HiGHS, the same MIP start and gap)
starts in a child process. :meth:`oracle.model.OracleModel.solve` takes whichever path proves optimality first and stops
the other (``proof`` says which), so a stalled day costs at most the textbook's time plus the threshold plus the child's
start (an interpreter and the Pyomo import, about 1 s). A process, not a thread: building the textbook model in Pyomo is
Python and would compete with the label search for the GIL.

The child is ``python -m oracle.race_child``: it reads its task (pickled) from stdin and writes its answer (pickled) to
stdout. It runs in its own process group, so Ctrl-C in a terminal reaches only the parent, whose ``with`` block stops
it; and it exits by itself when its stdin closes: no orphan outlives the solve.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

RACE_AFTER_S = 1.0
"""CPU seconds of the solving process after which the textbook race starts on a day of up to :data:`SIZE_BLOCKS` blocks.
CPU, not wall-clock, seconds: on a shared machine every path slows down alike. The label search proves most K = 12 days
before it (``benchmarks/oracle_speed.py --variants oracle,textbook`` gives the paths and ratios)."""
SIZE_BLOCKS, SIZE_EXPONENT = 12, 1.5
"""Beyond SIZE_BLOCKS blocks the threshold grows as (blocks / SIZE_BLOCKS) ** SIZE_EXPONENT, as the textbook build's
time does, so that the race starts at about the same share of it."""
POLL_S = 0.05
"""How often the race's watcher reads the CPU clock (seconds)."""
TERMINATE_WAIT_S = 5.0
"""Seconds a stopped child gets to exit after SIGTERM before it is killed."""
CHILD_MODULE = "oracle.race_child"
"""The child's entry point (``python -m``)."""
PROOF = "textbook"
"""``OracleResult.proof`` when the raced textbook MILP proved the day (HiGHS's branch and bound, gap ≤ mip_gap)."""


def threshold_s(race_after_s: float, n_blocks: int) -> float:
    """CPU seconds after which a day of ``n_blocks`` blocks is raced: ``race_after_s`` up to SIZE_BLOCKS blocks, ×
    (n_blocks / SIZE_BLOCKS) ** SIZE_EXPONENT beyond (24 blocks: 2.8×, 48: 8×, 96: 22.6×)."""
    return race_after_s * max(1.0, n_blocks / SIZE_BLOCKS) ** SIZE_EXPONENT


class TextbookRace:
    """The textbook MILP of ``inst`` in a child process, started after ``after_s`` CPU seconds of this process
    (:func:`time.process_time`) or by :meth:`start`.

    Use it as a context manager: leaving the block stops the child (and the watcher). :meth:`poll` returns the child's
    answer once it has ended: a dict with ``status``, ``schedule``, ``objective_usd``, ``best_bound_usd``, ``seconds``
    (the child's solve) and ``reason``.
    """

    def __init__(self, inst: Any, *, time_limit_s: float, mip_gap: float, allow_pause: bool, threads: int | None,
                 after_s: float | None = RACE_AFTER_S) -> None:
        self._task = {"inst": inst, "mip_gap": mip_gap, "allow_pause": allow_pause, "threads": threads}
        self._tick = time.perf_counter()
        self._deadline = self._tick + time_limit_s
        self._after_s = after_s
        self._cpu0 = time.process_time()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None
        self._proc: subprocess.Popen | None = None
        self._answer: dict[str, Any] | None = None
        self._closed = False
        self.started_s: float | None = None
        """Seconds after the race was set up at which the child started (None: not started)."""

    def __enter__(self) -> TextbookRace:
        if self._after_s is not None:
            self._watcher = threading.Thread(target=self._watch, name="textbook-race", daemon=True)
            self._watcher.start()
        return self

    def _watch(self) -> None:
        """Start the child once this process has spent ``after_s`` CPU seconds (unless closed before)."""
        while time.process_time() - self._cpu0 < self._after_s:
            if self._closing.wait(POLL_S):
                return
        self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the child now (once; not after :meth:`close` or past the deadline)."""
        with self._lock:
            remaining = self._deadline - time.perf_counter()
            if self._proc is not None or self._closed or remaining <= 0:
                return
            root = str(Path(__file__).resolve().parents[1])
            paths = [root, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}  # this checkout's oracle, as the parent's
            self._proc = subprocess.Popen([sys.executable, "-m", CHILD_MODULE], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, env=env, process_group=0)
            self.started_s = time.perf_counter() - self._tick
            with contextlib.suppress(BrokenPipeError):  # the child died at once: poll() reports it
                self._proc.stdin.write(pickle.dumps({**self._task, "time_limit_s": remaining}))
                self._proc.stdin.flush()

    def poll(self) -> dict[str, Any] | None:
        """The child's answer, once it has ended (None while it runs or if it never started)."""
        proc = self._proc
        if self._answer is None and proc is not None and proc.poll() is not None:
            data = proc.stdout.read() if proc.returncode == 0 else b""
            self._answer = pickle.loads(data) if data else {
                "status": "error", "schedule": None, "objective_usd": None, "best_bound_usd": None, "seconds": None,
                "reason": f"the textbook race's child exited with code {proc.returncode}"}
        return self._answer

    def proved(self) -> bool:
        """Whether the child has ended with a proven optimum (cheap: one ``waitpid``)."""
        answer = self.poll()
        return answer is not None and answer["status"] == "optimal"

    def wait(self) -> dict[str, Any] | None:
        """Block until the child ends (at most until the deadline); its answer, or None."""
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, self._deadline - time.perf_counter()) + TERMINATE_WAIT_S)
        return self.poll()

    def close(self) -> None:
        """Stop the watcher and the child (if still running); idempotent."""
        with self._lock:
            self._closed = True
        self._closing.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join()
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=TERMINATE_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):  # a broken pipe to a child that is gone
                stream.close()

