"""The child process of the textbook race (:mod:`oracle.race`): ``python -m oracle.race_child``.

It reads its task (pickled: the instance, gap, pause rule, threads and time limit) from stdin, solves the textbook MILP
of the instance (``OracleModel(formulation="textbook")``, the same MIP start as the textbook build) and writes the
answer (pickled) to stdout. It exits at once when its stdin closes: the parent is done with it, or died without cleaning
up.
"""

from __future__ import annotations

import os
import pickle
import sys
import threading
import time


def _exit_when_closed(fd: int) -> None:
    """The parent closed our stdin (it is done, or it died): stop at once."""
    while os.read(fd, 1):
        pass
    os._exit(0)


def main() -> None:
    """Solve the textbook MILP of the task on stdin; the answer goes to stdout (pickled)."""
    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything else printed (a solver's log) goes to stderr
    task = pickle.load(sys.stdin.buffer)
    threading.Thread(target=_exit_when_closed, args=(sys.stdin.fileno(),), daemon=True).start()
    from oracle.model import OracleModel  # the heavy imports, after the task is read

    tick = time.perf_counter()
    result = OracleModel(task["inst"], formulation="textbook", reduce=False, allow_pause=task["allow_pause"]).solve(
        time_limit_s=task["time_limit_s"], mip_gap=task["mip_gap"], threads=task["threads"])
    answer.write(pickle.dumps({"status": result.status, "schedule": result.schedule,
                               "objective_usd": result.objective_usd, "best_bound_usd": result.best_bound_usd,
                               "seconds": time.perf_counter() - tick, "reason": result.reason}))
    answer.flush()
    os._exit(0)  # at once: the watcher thread still reads stdin, which a normal shutdown would wait for


if __name__ == "__main__":
    main()
