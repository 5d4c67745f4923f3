"""Run many independent tasks in parallel: in this process, a local process pool, or Ray.

Rollouts, teacher labelling, comparisons and evaluation sweeps are all maps of a pure,
top-level function over a list of picklable tasks. A `TaskPool` carries out such a map
and hands the results back *in task order*, whatever order they finished in, so a
result never depends on the backend or on the number of workers:

* `LocalPool` (the default): a `concurrent.futures.ProcessPoolExecutor` of `workers`
  processes started by forkserver (spawn where forkserver is missing); with one worker
  the tasks run in this process, one after the other.
* `RayPool` (``--ray auto`` or ``--ray ADDRESS``): one Ray task per item, on a new local
  Ray instance with as many CPUs as this process may use (``auto``) or on a running
  cluster (``host:port`` of its head, as ``ray start --head`` prints it, or a Ray Client
  address ``ray://host:10001``). Every node of a cluster needs the same idlegate
  installed: tasks refer to idlegate's functions by name.

Arguments every task shares (model weights, say) are passed once per map as `shared`
and given to each call before the item: ``fn(*shared, item)``. Ray stores them once in
its object store instead of shipping them with every task.

A pool may run an `initializer(*initargs)` once in each worker process before its
first task (single-threaded torch, say); it never runs in the calling process.

This module imports neither torch nor ray at import time: Ray is imported when a
`RayPool` is made, and is an optional extra (``pip install 'idlegate[ray]'``).
"""

from __future__ import annotations

import multiprocessing
import os
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit

from idlegate.errors import IdlegateError

R = TypeVar("R")

Progress = Callable[[int, int, int], None]
"""Called after each finished task as ``progress(done, total, index)``; `index` is the
finished task's position in the list handed to `map`."""

RAY_INSTALL_HINT = "pip install 'idlegate[ray]'"
RAY_CONNECT_TIMEOUT = 5.0
"""Seconds to wait for the TCP connection to a cluster's head before giving up (Ray
itself retries an unreachable address for minutes)."""


class TaskPool(ABC):
    """Maps a function over tasks, results in task order; a context manager that closes
    the pool on exit."""

    @property
    @abstractmethod
    def workers(self) -> int:
        """How many tasks may run at once (the cluster's CPUs for Ray)."""

    @property
    @abstractmethod
    def description(self) -> str:
        """Where tasks run, for logs (``"2 local processes"``, ``"Ray at host:6379"``)."""

    @abstractmethod
    def map(
        self,
        fn: Callable[..., R],
        items: Sequence[Any],
        *,
        shared: Sequence[Any] = (),
        progress: Progress | None = None,
    ) -> list[R]:
        """``[fn(*shared, item) for item in items]``, computed in parallel."""

    @abstractmethod
    def close(self) -> None:
        """Stop the workers (idempotent); the pool may not be used afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_pool(
    ray: str | None,
    workers: int,
    *,
    preload: Sequence[str] = (),
    initializer: Callable[..., None] | None = None,
    initargs: tuple[Any, ...] = (),
) -> TaskPool:
    """The pool a command asked for: Ray at `ray` (``"auto"`` or an address), else
    `workers` local processes (forkserver preloading the modules `preload`).

    `initializer(*initargs)` runs once in every worker process of either backend.
    """
    if ray is not None:
        return RayPool(ray, initializer=initializer, initargs=initargs)
    return LocalPool(workers, preload=preload, initializer=initializer, initargs=initargs)


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


# ---------------------------------------------------------------------------------------
# local processes


class LocalPool(TaskPool):
    """A process pool on this machine, started on first use and kept until `close`.

    With ``workers <= 1`` every task runs in the calling process. `preload` names
    modules the forkserver imports once, so that each worker starts in milliseconds.
    """

    def __init__(
        self,
        workers: int,
        *,
        preload: Sequence[str] = (),
        initializer: Callable[..., None] | None = None,
        initargs: tuple[Any, ...] = (),
        mp_context: str | None = None,
    ) -> None:
        if workers < 1:
            raise IdlegateError(f"the number of workers must be at least 1, got {workers}")
        self._workers = workers
        self.preload = tuple(preload)
        self.initializer = initializer
        self.initargs = initargs
        self.mp_context = mp_context
        self._pool: ProcessPoolExecutor | None = None

    @property
    def workers(self) -> int:
        return self._workers

    @property
    def description(self) -> str:
        if self._workers == 1:
            return "this process"
        return f"{self._workers} local processes"

    def _context(self) -> multiprocessing.context.BaseContext:
        # forkserver: never fork a process that has threads (torch's, a progress bar's)
        method = self.mp_context
        if method is None:
            method = (
                "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
            )
        ctx = multiprocessing.get_context(method)
        if method == "forkserver" and self.preload:
            ctx.set_forkserver_preload(list(self.preload))
        return ctx

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self._workers,
                mp_context=self._context(),
                initializer=self.initializer,
                initargs=self.initargs,
            )
        return self._pool

    def map(
        self,
        fn: Callable[..., R],
        items: Sequence[Any],
        *,
        shared: Sequence[Any] = (),
        progress: Progress | None = None,
    ) -> list[R]:
        """``[fn(*shared, item) for item in items]`` in the pool (or in this process)."""
        total = len(items)
        if self._workers == 1:
            out = []
            for i, item in enumerate(items):
                out.append(fn(*shared, item))
                if progress is not None:
                    progress(i + 1, total, i)
            return out
        results: list[Any] = [None] * total
        pool = self._executor()
        futures: dict[Future[Any], int] = {}
        try:
            for i, item in enumerate(items):
                futures[pool.submit(fn, *shared, item)] = i
            for done, fut in enumerate(as_completed(futures), start=1):
                i = futures[fut]
                results[i] = fut.result()
                if progress is not None:
                    progress(done, total, i)
        except BrokenProcessPool:
            self._pool = None
            raise IdlegateError(
                "a worker process died (out of memory, killed, or started from a script "
                "without an `if __name__ == '__main__':` guard); try fewer workers"
            ) from None
        except BaseException:
            for fut in futures:  # a failed task: do not start the others
                fut.cancel()
            raise
        return results

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


# ---------------------------------------------------------------------------------------
# Ray

_INITIALIZED: set[tuple[Callable[..., None], tuple[Any, ...]]] = set()
"""The initializers already run in this (Ray worker) process."""


def _ray_call(
    initializer: Callable[..., None] | None,
    initargs: tuple[Any, ...],
    fn: Callable[..., Any],
    *args: Any,
) -> Any:
    """The body of every Ray task: the worker's initializer once, then the call."""
    if initializer is not None and (initializer, initargs) not in _INITIALIZED:
        initializer(*initargs)
        _INITIALIZED.add((initializer, initargs))
    return fn(*args)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise IdlegateError(
            f"--ray needs Ray, which is not installed; install it with {RAY_INSTALL_HINT} "
            "(or run without --ray to use local processes)"
        ) from None
    return ray


def _check_reachable(address: str, timeout: float = RAY_CONNECT_TIMEOUT) -> None:
    """Fail fast with a clear message when nothing listens at a cluster address."""
    parts = urlsplit(address if "://" in address else f"//{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        host, port = None, None
    if not host or port is None:
        raise IdlegateError(
            f"--ray {address!r} is not an address; give the head's host:port (as "
            "`ray start --head` prints it, e.g. 10.0.0.5:6379), ray://host:10001, or auto "
            "for a local instance"
        )
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise IdlegateError(
            f"cannot reach the Ray cluster at {address} ({exc}); check that its head is "
            "running (`ray start --head`) and the address, or use --ray auto for a local "
            "instance"
        ) from None


class RayPool(TaskPool):
    """Tasks as Ray tasks, on a new local instance (``"auto"``) or a running cluster.

    Connects when made. Shuts Ray down on `close` only if this pool started or joined it;
    a Ray already initialised in this process (by the caller) is used and left running.
    """

    def __init__(
        self,
        address: str = "auto",
        *,
        initializer: Callable[..., None] | None = None,
        initargs: tuple[Any, ...] = (),
        num_cpus: int | None = None,
    ) -> None:
        ray = self._ray = _import_ray()
        self.address = address
        self.initializer = initializer
        self.initargs = initargs
        self._owner = not ray.is_initialized()
        if self._owner:
            self._connect(address, num_cpus)
        self._remote = ray.remote(num_cpus=1)(_ray_call)
        self._cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))

    def _connect(self, address: str, num_cpus: int | None) -> None:
        ray = self._ray
        options: dict[str, Any] = {"include_dashboard": False, "logging_level": "warning"}
        if address == "auto":
            # "local": always a new instance of our own, never a cluster found by chance
            options.update(address="local", num_cpus=num_cpus or available_cpus())
        else:
            _check_reachable(address)
            options.update(address=address)
        try:
            ray.init(**options)
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError, …
            raise IdlegateError(
                f"could not start or join Ray at {address}: {exc}. With a cluster, its Ray "
                f"version must match this one ({ray.__version__}); a ray:// address also "
                "needs pip install 'ray[client]'"
            ) from None

    @property
    def workers(self) -> int:
        return self._cpus

    @property
    def description(self) -> str:
        where = "a local Ray instance" if self.address == "auto" else f"Ray at {self.address}"
        return f"{where} ({self._cpus} CPUs)"

    def map(
        self,
        fn: Callable[..., R],
        items: Sequence[Any],
        *,
        shared: Sequence[Any] = (),
        progress: Progress | None = None,
    ) -> list[R]:
        """``[fn(*shared, item) for item in items]`` as Ray tasks; results in task order."""
        ray = self._ray
        if not items:
            return []
        if self._remote is None:
            raise IdlegateError("this Ray pool is closed; open a new one")
        refs = [ray.put(value) for value in shared]  # stored once, not once per task
        pending = [
            self._remote.remote(self.initializer, self.initargs, fn, *refs, item) for item in items
        ]
        index = {ref: i for i, ref in enumerate(pending)}
        results: list[Any] = [None] * len(items)
        done = 0
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    results[index[ref]] = ray.get(ref)
                    done += 1
                    if progress is not None:
                        progress(done, len(items), index[ref])
        except BaseException as exc:
            for ref in pending:
                ray.cancel(ref)
            raise _translate(ray, exc) from None
        return results

    def close(self) -> None:
        if self._remote is not None and self._owner:
            self._ray.shutdown()
        self._remote = None


def _translate(ray: Any, exc: BaseException) -> BaseException:
    """A task's own error as itself; Ray's failures (lost worker, node) as IdlegateError."""
    errors = ray.exceptions
    if isinstance(exc, errors.RayTaskError):
        cause = getattr(exc, "cause", None)
        # a user-fixable error keeps its one-line message; anything else keeps Ray's
        # rendering, which carries the remote traceback
        return cause if isinstance(cause, IdlegateError) else exc
    if isinstance(exc, errors.RayError):
        return IdlegateError(
            f"a Ray worker or node failed ({type(exc).__name__}: {exc}); check the cluster's "
            "memory and logs, or run without --ray"
        )
    return exc
