"""A simulated kubelet: it runs the pods of one namespace for the duration they declare.

It lives in the test API server's event loop and writes through the emulator, so its
status writes reach kopf's watches as a real kubelet's would. For every pod it

1. leaves it ``Pending`` while ``spec.schedulingGates`` is non-empty;
2. then marks it ``Running`` at once (there is no image to pull); if some Node exists, it
   waits first for the API server's scheduler (tests/k8s/scheduler.py) to bind the pod to
   one (``spec.nodeName``), and a pod that fits no node stays ``Pending``;
3. after its ``TASK_DURATION_SECONDS`` (the operator's pod contract: an env var of the first
   container; or what ``durations(pod)`` says, for a test that gives tasks of one stage
   different run times) times `time_factor` wall seconds, ends it ``Succeeded``, or ``Failed`` with the
   exit code ``failure(pod)`` returns, reported in ``containerStatuses`` as a kubelet does.

Opt-in, off by default, so that a pod runs exactly what it declares unless asked (a live
forecast's benchmark, benchmarks/live_forecast.py, asks): `stretch` σ > 0 runs each pod for
its declared duration times a lognormal draw, exp(σ·Z) (median 1: a declared duration is
the typical one, some run longer, some shorter), and `start_latency` L > 0 keeps a released
(and bound) pod ``Pending`` for a uniform draw in [L/2, 3L/2] seconds (binding, image pull,
container start) before it is ``Running``. Both are drawn from a generator seeded by `seed`
and the pod's namespace and name, so a pod's draws do not depend on the order pods come in.

A deleted pod is simply gone: deletion is immediate on the test API server, but for a
running pod given a grace period (an eviction): the kubelet stops it then, after
`stop_seconds` (at most its grace period) times `time_factor`, ends it ``Failed`` (exit
code 143, as SIGTERM leaves a process) and deletes it at once, as a kubelet does.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import signal
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import kmock

from tests.k8s.apiserver import PODS, now
from tests.k8s.harness import ApiServer

DURATION_ENV = "TASK_DURATION_SECONDS"


def duration_of(pod: Mapping[str, Any]) -> float:
    """The pod's simulated run time, from its first container's environment (default 1 s)."""
    env = (pod["spec"].get("containers") or [{}])[0].get("env") or []
    return next((float(e["value"]) for e in env if e.get("name") == DURATION_ENV), 1.0)


def container_status(
    container: Mapping[str, Any], *, ready: bool, state: dict[str, Any]
) -> dict[str, Any]:
    """A container's status as a kubelet reports it: with the fields the ``kubernetes``
    client requires (Airflow's pod watcher dies on a status without ``image``)."""
    return {
        "name": container["name"],
        "image": container.get("image") or "",
        "imageID": "",
        "ready": ready,
        "restartCount": 0,
        "started": ready,
        "state": state,
    }


class SimKubelet:
    """Runs the pods of `namespace` (a context manager: from enter to exit)."""

    def __init__(
        self,
        api: ApiServer,
        namespace: str,
        *,
        time_factor: float = 1.0,
        failure: Callable[[Mapping[str, Any]], int | None] | None = None,
        durations: Callable[[Mapping[str, Any]], float] = duration_of,
        selects: Callable[[Mapping[str, Any]], bool] = lambda pod: True,
        stop_seconds: float = 0.0,
        stretch: float = 0.0,
        start_latency: float = 0.0,
        seed: int = 0,
    ) -> None:
        if stretch < 0 or start_latency < 0:
            raise ValueError("a kubelet's stretch and start latency are at least 0")
        self.api, self.emulator, self.namespace = api, api.emulator, namespace
        self.stop_seconds = stop_seconds
        """How long a pod takes to stop once its graceful deletion began (at most its grace
        period): a task that saves its progress first."""
        self.time_factor, self.failure = time_factor, failure
        self.durations = durations
        """A pod's simulated run time; a test may replace it before it creates the pods."""
        self.stretch, self.start_latency, self.seed = stretch, start_latency, seed
        self.selects = selects
        """Which pods of the namespace this kubelet runs (another kubelet may run the rest)."""
        self._timers: dict[str, asyncio.TimerHandle | asyncio.Task] = {}  # pod name -> its end
        self._unsubscribe: Callable[[], None] | None = None

    def __enter__(self) -> SimKubelet:
        self.api.call(self._start)
        return self

    def __exit__(self, *exc: object) -> None:
        self.api.call(self._stop)

    def finish(self, *names: str) -> None:
        """End the running pods `names` now, succeeded: a test's lever for a pod whose run
        should outlast whatever it races (its duration then says only "until told")."""

        def end() -> None:
            for name in names:
                timer = self._timers.pop(name, None)
                if timer is not None:
                    timer.cancel()
                    self._finish(name, 0)

        self.api.call(end)

    def _start(self) -> None:
        self._unsubscribe = self.emulator.subscribe(self._on_event)
        for pod in self.emulator.list(PODS, self.namespace):
            if self.selects(pod):
                self._reconcile(pod)

    def _stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        for timer in self._timers.values():
            timer.cancel()

    def _on_event(self, res: kmock.resource, etype: str, pod: dict[str, Any]) -> None:
        if res != PODS or pod["metadata"].get("namespace") != self.namespace:
            return
        if not self.selects(pod):
            return
        if etype == "DELETED":
            timer = self._timers.pop(pod["metadata"]["name"], None)
            if timer is not None:
                timer.cancel()
        elif pod["metadata"].get("deletionTimestamp"):
            self._stopping(pod)
        else:
            self._reconcile(pod)

    def _stopping(self, pod: dict[str, Any]) -> None:
        """A pod it runs is being deleted with a grace period: stop it (once)."""
        name = pod["metadata"]["name"]
        timer = self._timers.pop(name, None)
        if timer is None:
            return  # (not running here, or stopping already)
        timer.cancel()
        grace = float(pod["metadata"].get("deletionGracePeriodSeconds") or 0)
        seconds = min(self.stop_seconds, grace) * self.time_factor
        loop = asyncio.get_running_loop()
        loop.call_later(seconds, self.emulator._safely, self._stopped, name)

    def _stopped(self, name: str) -> None:
        """The stopped pod ends Failed, then goes (its deletion's end)."""
        self._finish(name, 143)
        with contextlib.suppress(kmock.KubernetesError):  # (gone already)
            self.emulator.delete(PODS, self.namespace, name, grace=0)

    def _reconcile(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        phase = (pod.get("status") or {}).get("phase")
        if name in self._timers or phase in ("Running", "Succeeded", "Failed"):
            return
        if pod["spec"].get("schedulingGates") or pod["metadata"].get("deletionTimestamp"):
            return
        if self.api.scheduler.placing and not pod["spec"].get("nodeName"):
            return  # not bound yet: its binding's event brings it back here
        latency = self.draws(name)[1]
        if latency > 0:  # (Pending meanwhile: its timer keeps `_reconcile` from starting it)
            self._timers[name] = self._later(latency * self.time_factor, self._running, name)
            return
        self._running(name)

    def draws(self, name: str) -> tuple[float, float]:
        """The pod `name`'s (stretch factor, start latency in seconds): (1, 0) unless asked
        for (the module docstring)."""
        if not (self.stretch or self.start_latency):
            return 1.0, 0.0
        rng = random.Random(f"{self.seed}/{self.namespace}/{name}")
        factor = math.exp(self.stretch * rng.gauss(0.0, 1.0))
        return factor, self.start_latency * (0.5 + rng.random())

    def _running(self, name: str) -> None:
        """The pod `name` (released, bound if nodes exist, its latency over) is ``Running``."""
        try:
            pod = self.emulator.get(PODS, self.namespace, name)
        except kmock.KubernetesError:
            self._timers.pop(name, None)
            return  # deleted in the same turn of the loop, before its event came
        self._timers[name] = self._run(name, pod)
        started = {"running": {"startedAt": now()}}
        containers = [
            container_status(c, ready=True, state=started)
            for c in pod["spec"].get("containers") or []
        ]
        self._status(
            name, {"phase": "Running", "startTime": now(), "containerStatuses": containers}
        )

    def _run(self, name: str, pod: dict[str, Any]) -> asyncio.TimerHandle | asyncio.Task:
        """Start running the pod; the handle's cancel() stops it (the pod was deleted)."""
        seconds = self.durations(pod) * self.draws(name)[0] * self.time_factor
        return self._later(seconds, self._finish, name)

    def _later(self, wall: float, fn: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        """`fn(*args)` in the API server's loop `wall` seconds from now."""
        loop = asyncio.get_running_loop()
        return loop.call_later(wall, self.emulator._safely, fn, *args)

    def _finish(self, name: str, exit_code: int | None = None) -> None:
        """End the pod with `exit_code` (None: ask ``failure(pod)``, 0 if it says nothing)."""
        self._timers.pop(name, None)
        try:
            pod = self.emulator.get(PODS, self.namespace, name)
        except kmock.KubernetesError:
            return  # deleted in the same turn of the loop, before its event came
        if exit_code is None:
            exit_code = self.failure(pod) if self.failure else None
        code = exit_code or 0
        terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": (pod.get("status") or {}).get("startTime") or now(),
            "finishedAt": now(),
        }
        containers = [
            container_status(c, ready=False, state={"terminated": terminated})
            for c in pod["spec"].get("containers") or []
        ]
        phase = "Succeeded" if code == 0 else "Failed"
        self._status(name, {"phase": phase, "containerStatuses": containers})

    def _status(self, name: str, status: dict[str, Any]) -> None:
        self.emulator.patch(PODS, self.namespace, name, {"status": status}, subresource="status")


class CommandKubelet(SimKubelet):
    """A kubelet that really runs its pods' commands on this machine, for pods whose images
    are not to be pulled: the first container's ``command`` and ``args``, ``python`` replaced
    by `python`, with the container's env over `env`, in a process group of its own (output
    in `logs`/<pod>.log). The pod ends with the command's exit code; deleting a running pod
    kills its group, as does leaving the context.

    Airflow's KubernetesExecutor pods run so (tests/k8s/airflow_stack.py): their command
    calls the Airflow execution API, which says how the task ended.
    """

    def __init__(
        self,
        api: ApiServer,
        namespace: str,
        *,
        python: str,
        env: Mapping[str, str],
        logs: Path,
        selects: Callable[[Mapping[str, Any]], bool] = lambda pod: True,
    ) -> None:
        super().__init__(api, namespace, selects=selects)
        self.python, self.env, self.logs = python, dict(env), logs
        self._groups: dict[str, int] = {}  # pod name -> its process group, while it runs
        self.started = 0
        """Commands started (one per pod that ran)."""

    def _run(self, name: str, pod: dict[str, Any]) -> asyncio.Task:
        self.started += 1
        return asyncio.get_running_loop().create_task(self._command(name, pod))

    async def _command(self, name: str, pod: dict[str, Any]) -> None:
        container = pod["spec"]["containers"][0]
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        if argv[:1] in (["python"], ["python3"]):
            argv[0] = self.python
        env = {**self.env, **{e["name"]: e.get("value", "") for e in container.get("env") or []}}
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                *argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
            self._groups[name] = process.pid
            try:
                code = await process.wait()
            except asyncio.CancelledError:  # the pod was deleted, or the kubelet stops
                _kill_group(process.pid)
                raise
            finally:
                self._groups.pop(name, None)
        if self._timers.get(name) is asyncio.current_task():
            self.emulator._safely(self._finish, name, code)

    def _stop(self) -> None:
        for group in list(self._groups.values()):  # before the cancelled tasks forget them
            _kill_group(group)
        super()._stop()


def _kill_group(group: int) -> None:
    """SIGKILL a process group that may have ended already."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
