"""One switch for every sweep: a local process pool (the default, no Ray needed) or Ray, on this machine or a cluster.

The sweeps (evaluate.py, the studies, the forecast study, the oracle benchmark, ``agents.tune``) call this module and
never Ray directly::

    backend = backend_from_args(args, workers=args.workers)      # --backend process|ray, --ray-address
    with backend.running():                                       # a local Ray lives as long as the run
        with open_pool(backend) as pool:
            inst = pool.put(instance)                             # read-only data: Ray's object store, once
            for result in pool.map(solve, [(inst, seed) for seed in seeds]):   # in task order
                ...

``process``: a :class:`~concurrent.futures.ProcessPoolExecutor` whose workers ignore Ctrl-C (the parent ends them);
``workers = 1`` runs the tasks in this process. ``ray``: tasks of one CPU each, at most ``workers`` in flight, on a
local Ray started for the run, the cluster this machine joined (``auto``) or a remote one (``ray://host:port``). Results
come back in task order on both backends and every task carries its own seed: the same sweep gives the same numbers on
either backend (docs/scale-out.md).
"""

from __future__ import annotations

import contextlib
import logging
import re
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from aidc_env.errors import InputError, require

BACKENDS = ("process", "ray")
RAY_INSTALL_HINT = 'Ray is not installed: pip install -e ".[ray]"'
RAY_ADDRESS = re.compile(r"^(auto|ray://[\w.\-]+:\d+|[\w.\-]+:\d+)$")
"""``auto``, ``ray://host:port`` (Ray Client) or ``host:port`` (the head's GCS address)."""
RAY_TASK_CPUS = 1
"""CPUs Ray reserves for each task: one solve or one training run is single-threaded here."""


def ray_module() -> Any:
    """The ``ray`` package, or :class:`InputError` naming ``backend`` with the line that installs it."""
    try:
        import ray
    except ImportError:
        raise InputError("backend", RAY_INSTALL_HINT) from None
    return ray


@dataclass(frozen=True)
class Backend:
    """Where the tasks of a sweep run: ``name`` process or ray, ``workers`` tasks at once, and the Ray address (None: a
    local Ray started for the run)."""

    name: str = "process"
    workers: int = 1
    address: str | None = None

    def __post_init__(self) -> None:
        require(self.name in BACKENDS, "backend", f"must be one of {', '.join(BACKENDS)}, got {self.name!r}")
        require(isinstance(self.workers, int) and self.workers >= 1, "workers", f"must be >= 1, got {self.workers!r}")
        require(self.address is None or self.name == "ray", "ray-address", "only with --backend ray")
        require(self.address is None or bool(RAY_ADDRESS.match(self.address)), "ray-address",
                f"must be auto, ray://host:port or host:port, got {self.address!r}")

    @classmethod
    def of(cls, backend: Backend | int) -> Backend:
        """``backend`` itself, or a process pool of that many workers (the sweeps' older ``workers`` argument)."""
        return backend if isinstance(backend, Backend) else cls("process", max(1, int(backend)))

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Connect to (or start) Ray for the whole run, so that every pool inside reuses it; no-op for process."""
        if self.name != "ray":
            yield
            return
        started = _connect_ray(self)
        try:
            yield
        finally:
            if started:
                ray_module().shutdown()


def add_backend_arguments(parser: Any) -> None:
    """``--backend process|ray`` and ``--ray-address`` (the number of workers stays each CLI's ``--workers``)."""
    parser.add_argument("--backend", choices=BACKENDS, default="process",
                        help="where the tasks run: a local process pool (process, default) or Ray (ray; "
                        'pip install -e ".[ray]")')
    parser.add_argument("--ray-address", help="with --backend ray: auto (the cluster this machine joined with "
                        "ray start), ray://host:port or host:port; default: a local Ray started for the run with "
                        "--workers CPUs")


def backend_from_args(args: Any, workers: int) -> Backend:
    """The :class:`Backend` of parsed ``--backend``/``--ray-address`` flags (InputError if Ray is asked for but not
    installed, or an address comes without it)."""
    backend = Backend(getattr(args, "backend", "process"), int(workers), getattr(args, "ray_address", None))
    if backend.name == "ray":
        ray_module()
    return backend


def _connect_ray(backend: Backend) -> bool:
    """Initialise Ray for ``backend`` unless it already is; True if this call started it."""
    ray = ray_module()
    if ray.is_initialized():
        return False
    if backend.address is None:
        # "local": a new Ray of its own, even where `ray start` left a cluster running on this machine
        ray.init(address="local", num_cpus=backend.workers, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING)
    else:
        try:
            ray.init(address=backend.address, log_to_driver=False, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as err:  # no cluster there, or not reachable
            raise InputError("ray-address", f"cannot connect to Ray at {backend.address}: {err}") from None
    return True


# ------------------------------------------------------------------------------------------ pools


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def worker_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A process pool of ``workers`` that ignore SIGINT; on any exception (Ctrl-C) they are ended at once."""
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_ignore_sigint)
    try:
        yield pool
    except BaseException:
        # No public API ends running tasks: end the workers, then let the pool find them gone (its pending futures
        # fail as a broken pool; cancelling them as well races with its manager thread).
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()
        pool.shutdown(wait=False)
        raise
    pool.shutdown(wait=True)


def _call(job: tuple[Callable[..., Any], tuple[Any, ...]]) -> Any:
    fn, args = job
    return fn(*args)


class Pool:
    """Runs ``fn(*task)`` for each task of :meth:`map` on the backend; results in task order."""

    def __init__(self, backend: Backend, stack: contextlib.ExitStack):
        self.backend = backend
        self._stack = stack
        self._executor: ProcessPoolExecutor | None = None
        self._remote: dict[Callable[..., Any], Any] = {}
        self._pending: set[Any] = set()

    def put(self, value: Any) -> Any:
        """A handle of read-only ``value`` to pass as a task's argument: a reference into Ray's object store (put once,
        read by each node once), or the value itself for the process backend."""
        return ray_module().put(value) if self.backend.name == "ray" else value

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> Iterator[Any]:
        """``fn(*task)`` for every task, yielded in task order as they finish (``fn`` must be importable)."""
        tasks = list(tasks)
        if self.backend.name == "ray":
            return self._ray_map(fn, tasks)
        if self.backend.workers == 1 or len(tasks) <= 1:
            return (fn(*task) for task in tasks)
        if self._executor is None:
            self._executor = self._stack.enter_context(worker_pool(self.backend.workers))
        return self._executor.map(_call, [(fn, task) for task in tasks])

    def _ray_map(self, fn: Callable[..., Any], tasks: list[tuple[Any, ...]]) -> Iterator[Any]:
        ray = ray_module()
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = ray.remote(num_cpus=RAY_TASK_CPUS, max_retries=0)(fn)
        index_of: dict[Any, int] = {}
        finished: dict[int, Any] = {}
        submitted = given = 0
        while given < len(tasks):
            while len(index_of) < self.backend.workers and submitted < len(tasks):
                ref = remote.remote(*tasks[submitted])
                index_of[ref] = submitted
                self._pending.add(ref)
                submitted += 1
            done, _ = ray.wait(list(index_of), num_returns=1)
            for ref in done:
                finished[index_of.pop(ref)] = ref
            while given in finished:
                ref = finished.pop(given)
                self._pending.discard(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as err:  # the task's own exception (e.g. InputError), unwrapped
                    raise (err.cause if isinstance(err.cause, BaseException) else err) from None
                given += 1
                yield result

    def cancel(self) -> None:
        """End the Ray tasks still running or queued (after Ctrl-C or an error)."""
        if self.backend.name == "ray" and self._pending:
            ray = ray_module()
            for ref in self._pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            self._pending.clear()


@contextlib.contextmanager
def open_pool(backend: Backend) -> Iterator[Pool]:
    """A :class:`Pool` on ``backend`` (Ray is started here if no :meth:`Backend.running` is open)."""
    with contextlib.ExitStack() as stack:
        if backend.name == "ray":
            stack.enter_context(backend.running())
        pool = Pool(backend, stack)
        try:
            yield pool
        except BaseException:
            pool.cancel()
            raise


__all__ = ["BACKENDS", "RAY_INSTALL_HINT", "Backend", "Pool", "add_backend_arguments", "backend_from_args",
           "open_pool", "ray_module", "worker_pool"]
