"""A simulated kubelet: it runs the pods of one namespace for the duration they declare.

It lives in the test API server's event loop and writes through the emulator, so its
status writes reach kopf's watches as a real kubelet's would. For every pod it

1. leaves it ``Pending`` while ``spec.schedulingGates`` is non-empty;
2. then marks it ``Running`` at once (there is no scheduler, node or image to wait for);
3. after its ``TASK_DURATION_SECONDS`` (the operator's pod contract: an env var of the first
   container; or what ``durations(pod)`` says, for a test that gives tasks of one stage
   different run times) times `time_factor` wall seconds, ends it ``Succeeded``, or ``Failed`` with the
   exit code ``failure(pod)`` returns, reported in ``containerStatuses`` as a kubelet does.

A deleted pod is simply gone: deletion is immediate on the test API server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import kmock

from tests.k8s.apiserver import PODS, now
from tests.k8s.harness import ApiServer

DURATION_ENV = "TASK_DURATION_SECONDS"


def duration_of(pod: Mapping[str, Any]) -> float:
    """The pod's simulated run time, from its first container's environment (default 1 s)."""
    env = (pod["spec"].get("containers") or [{}])[0].get("env") or []
    return next((float(e["value"]) for e in env if e.get("name") == DURATION_ENV), 1.0)


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
    ) -> None:
        self.api, self.emulator, self.namespace = api, api.emulator, namespace
        self.time_factor, self.failure = time_factor, failure
        self.durations = durations
        """A pod's simulated run time; a test may replace it before it creates the pods."""
        self._timers: dict[str, asyncio.TimerHandle] = {}  # pod name -> its end
        self._unsubscribe: Callable[[], None] | None = None

    def __enter__(self) -> SimKubelet:
        self.api.call(self._start)
        return self

    def __exit__(self, *exc: object) -> None:
        self.api.call(self._stop)

    def _start(self) -> None:
        self._unsubscribe = self.emulator.subscribe(self._on_event)
        for pod in self.emulator.list(PODS, self.namespace):
            self._reconcile(pod)

    def _stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        for timer in self._timers.values():
            timer.cancel()

    def _on_event(self, res: kmock.resource, etype: str, pod: dict[str, Any]) -> None:
        if res != PODS or pod["metadata"].get("namespace") != self.namespace:
            return
        if etype == "DELETED":
            timer = self._timers.pop(pod["metadata"]["name"], None)
            if timer is not None:
                timer.cancel()
        else:
            self._reconcile(pod)

    def _reconcile(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        phase = (pod.get("status") or {}).get("phase")
        if name in self._timers or phase in ("Running", "Succeeded", "Failed"):
            return
        if pod["spec"].get("schedulingGates") or pod["metadata"].get("deletionTimestamp"):
            return
        seconds = self.durations(pod) * self.time_factor
        loop = asyncio.get_running_loop()
        self._timers[name] = loop.call_later(seconds, self.emulator._safely, self._finish, name)
        self._status(name, {"phase": "Running", "startTime": now()})

    def _finish(self, name: str) -> None:
        self._timers.pop(name, None)
        try:
            pod = self.emulator.get(PODS, self.namespace, name)
        except kmock.KubernetesError:
            return  # deleted in the same turn of the loop, before its event came
        code = (self.failure(pod) if self.failure else None) or 0
        terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": (pod.get("status") or {}).get("startTime") or now(),
            "finishedAt": now(),
        }
        containers = [
            {"name": c["name"], "ready": False, "state": {"terminated": terminated}}
            for c in pod["spec"].get("containers") or []
        ]
        phase = "Succeeded" if code == 0 else "Failed"
        self._status(name, {"phase": phase, "containerStatuses": containers})

    def _status(self, name: str, status: dict[str, Any]) -> None:
        self.emulator.patch(PODS, self.namespace, name, {"status": status}, subresource="status")
