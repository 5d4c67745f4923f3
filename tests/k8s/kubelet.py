"""A simulated scheduler + kubelet for one node of the emulated cluster.

It runs inside the emulator's event loop and talks to the emulator through its
in-process API (the same code paths as HTTP, so every write gets a new
resourceVersion and reaches all watch streams). For every pod it:

1. leaves it ``Pending`` (``PodScheduled=False/SchedulingGated``) while
   ``spec.schedulingGates`` is non-empty;
2. binds it to the node (``spec.nodeName``, ``PodScheduled=True``) once the gates
   are gone and the node has a free slot (``max_pods``), else reports it as
   ``Unschedulable`` and queues it (FIFO by creationTimestamp);
3. shows ``ContainerCreating``, then ``Running`` after ``startup_delay``
   (``startTime``, ``podIP``, ``hostIP``, ready containers, Ready condition);
4. finishes it after its duration: ``Succeeded`` (exit code 0, ``Completed``) or
   ``Failed`` (non-zero exit code, ``Error``), as a real kubelet reports it.

The duration is taken from the pod's ``idlegate.io/duration-seconds`` annotation,
else from a ``TASK_DURATION_SECONDS`` (or ``TASK_DURATION``) env var of its first container, else
``default_duration``. All simulated seconds are multiplied by ``time_factor``
to get wall-clock seconds (``time_factor=0.01`` runs 100x faster). Timestamps
written into the status are wall-clock times.

Failure injection: the ``idlegate.io/exit-code`` annotation (or
``idlegate.io/fail: "true"`` for exit code 1), a ``failure(pod) -> int | None``
callback, a seeded ``failure_rate``, or :meth:`SimKubelet.evict` at any time.
``restartPolicy`` is treated as ``Never`` (no container restarts).

Pod deletion is graceful while the kubelet runs: the API server only sets
``deletionTimestamp``; the kubelet kills the containers (exit code 143) and
then deletes the pod with a zero grace period.
"""

from __future__ import annotations

import copy
import datetime
import random
from collections.abc import Callable, Mapping
from typing import Any

import kmock

from tests.k8s.apiserver import NODES, PODS, ApiServer, KubeApiEmulator, now_rfc3339

DURATION_ANNOTATION = "idlegate.io/duration-seconds"
EXIT_CODE_ANNOTATION = "idlegate.io/exit-code"
FAIL_ANNOTATION = "idlegate.io/fail"
DURATION_ENVS = ("TASK_DURATION_SECONDS", "TASK_DURATION")
"""Env vars of the first container read as the task duration (idlegate's pod contract first)."""


def _condition(type_: str, status: bool, reason: str | None = None) -> dict[str, Any]:
    cond: dict[str, Any] = {
        "type": type_,
        "status": "True" if status else "False",
        "lastProbeTime": None,
        "lastTransitionTime": now_rfc3339(),
    }
    if reason:
        cond["reason"] = reason
    return cond


class SimKubelet:
    """A simulated node: scheduler and kubelet in one, driven by pod events."""

    def __init__(
        self,
        api: ApiServer | KubeApiEmulator,
        *,
        node_name: str = "sim-node-1",
        time_factor: float = 1.0,
        default_duration: float = 1.0,
        startup_delay: float = 0.05,
        termination_delay: float = 0.05,
        max_pods: int | None = None,
        namespace: str | None = None,
        failure_rate: float = 0.0,
        failure: Callable[[Mapping[str, Any]], int | None] | None = None,
        seed: int = 0,
        cpu: str = "8",
        memory: str = "32Gi",
    ) -> None:
        self.server = api if isinstance(api, ApiServer) else None
        self.emulator = api.emulator if isinstance(api, ApiServer) else api
        self.node_name = node_name
        self.time_factor = time_factor
        self.default_duration = default_duration
        self.startup_delay = startup_delay
        self.termination_delay = termination_delay
        self.max_pods = max_pods
        self.namespace = namespace
        self.failure_rate = failure_rate
        self.failure = failure
        self.cpu, self.memory = cpu, memory
        self._rng = random.Random(seed)
        self._timers: dict[str, Any] = {}  # pod uid -> asyncio.TimerHandle
        self._slots: set[str] = set()  # uids of pods bound here and not finished
        self._queue: list[tuple[str, str]] = []  # (namespace, name) waiting for a slot
        self._terminating: set[str] = set()
        self._started_at: dict[str, float] = {}  # pod uid -> loop time of Running
        self._unsubscribe: Callable[[], None] | None = None
        self._ip_counter = 0
        self.running = False

    # Lifecycle (thread-safe when given an ApiServer).

    def __enter__(self) -> SimKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, fn: Callable[[], Any]) -> Any:
        return self.server.call(fn) if self.server is not None else fn()

    def start(self) -> SimKubelet:
        """Register the node, watch pods, resume the pods that already exist."""
        self._call(self._start)
        return self

    def stop(self, *, node_ready: bool = True) -> None:
        """Stop reacting; pending timers are cancelled (pods freeze in their phase)."""
        self._call(lambda: self._stop(node_ready))

    def evict(
        self,
        namespace: str,
        name: str,
        reason: str = "Evicted",
        message: str = "The node was low on resource: memory.",
    ) -> None:
        """Fail a pod right now, as a node-pressure eviction does."""
        self._call(lambda: self._evict(namespace, name, reason, message))

    # Internals (run in the emulator's loop).

    @property
    def _loop(self) -> Any:
        loop = self.emulator._loop
        if loop is None:
            raise RuntimeError("the kubelet needs a running emulator (ApiServer.start())")
        return loop

    def _start(self) -> None:
        if self.running:
            return
        self.running = True
        self._register_node(ready=True)
        self.emulator._kubelets[self.node_name] = self
        self._unsubscribe = self.emulator.subscribe(self._on_event)
        self._resync()

    def _resync(self) -> None:
        """Rebuild the slots and timers from the pods as they are now."""
        self._slots.clear()
        self._queue.clear()
        self._terminating.clear()
        pods = sorted(
            self.emulator.list_objects(PODS, self.namespace),
            key=lambda p: (
                p["spec"].get("nodeName") != self.node_name,
                p["metadata"]["creationTimestamp"],
            ),
        )
        for pod in pods:  # the pods already running here take their slots first
            self._reconcile(pod["metadata"]["namespace"], pod["metadata"]["name"])

    def resume(self) -> None:
        """Re-arm after the emulator moved to a new loop (an API server restart)."""
        if not self.running:
            return
        self._timers.clear()  # their loop is gone
        self._resync()

    def _stop(self, node_ready: bool) -> None:
        if not self.running:
            return
        self.running = False
        if self._unsubscribe is not None:
            self._unsubscribe()
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self.emulator._kubelets.pop(self.node_name, None)
        if not node_ready:
            self._register_node(ready=False)

    def _register_node(self, *, ready: bool) -> None:
        try:
            self.emulator.get_object(NODES, None, self.node_name)
        except kmock.KubernetesError:
            self.emulator.create_object(
                NODES,
                {
                    "metadata": {
                        "name": self.node_name,
                        "labels": {
                            "kubernetes.io/hostname": self.node_name,
                            "kubernetes.io/os": "linux",
                            "idlegate.io/simulated": "true",
                        },
                    },
                    "spec": {},
                },
            )
        capacity = {"cpu": self.cpu, "memory": self.memory, "pods": str(self.max_pods or 110)}
        self.emulator.patch_object(
            NODES,
            None,
            self.node_name,
            {
                "status": {
                    "capacity": capacity,
                    "allocatable": dict(capacity),
                    "conditions": [
                        {
                            **_condition(
                                "Ready", ready, "KubeletReady" if ready else "NodeStatusUnknown"
                            ),
                            "lastHeartbeatTime": now_rfc3339(),
                        }
                    ],
                    "nodeInfo": {
                        "kubeletVersion": "v1.32.0-sim",
                        "operatingSystem": "linux",
                        "architecture": "amd64",
                    },
                    "addresses": [
                        {"type": "InternalIP", "address": "10.0.0.1"},
                        {"type": "Hostname", "address": self.node_name},
                    ],
                }
            },
            subresource="status",
        )

    def _on_event(
        self, res: kmock.resource, etype: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if not self.running or res != PODS:
            return
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return
        if etype == "DELETED":
            self._forget(meta["uid"])
            self._schedule_queued()
            return
        self._reconcile(meta["namespace"], meta["name"])

    def _get(self, namespace: str, name: str) -> dict[str, Any] | None:
        pod = self.emulator._holder(PODS, namespace, name)
        return None if pod is None else pod.last.raw

    def _patch_status(self, pod: Mapping[str, Any], status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        self.emulator.patch_object(
            PODS, meta["namespace"], meta["name"], {"status": status}, subresource="status"
        )

    def _forget(self, uid: str) -> None:
        handle = self._timers.pop(uid, None)
        if handle is not None:
            handle.cancel()
        self._slots.discard(uid)
        self._terminating.discard(uid)
        self._started_at.pop(uid, None)

    def _later(self, uid: str, sim_seconds: float, fn: Callable[[], None]) -> None:
        old = self._timers.pop(uid, None)
        if old is not None:
            old.cancel()
        self._timers[uid] = self._loop.call_later(
            max(0.0, sim_seconds * self.time_factor), self.emulator._safely, fn
        )

    def _reconcile(self, namespace: str, name: str) -> None:
        pod = self._get(namespace, name)
        if pod is None or not self.running:
            return
        meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
        uid, node = meta["uid"], spec.get("nodeName")
        if meta.get("deletionTimestamp"):
            if node == self.node_name and uid not in self._terminating:
                self._terminate(pod)
            return
        if status.get("phase") in ("Succeeded", "Failed"):
            if uid in self._slots:
                self._forget(uid)
                self._schedule_queued()
            return
        if not node:
            if spec.get("schedulingGates"):
                return
            if self.max_pods is not None and len(self._slots) >= self.max_pods:
                self._mark_unschedulable(pod)
                return
            self._slots.add(uid)
            self._queue = [q for q in self._queue if q != (namespace, name)]
            try:
                self.emulator.bind_pod(namespace, name, self.node_name)
            except kmock.KubernetesError:
                self._slots.discard(uid)  # another kubelet won the race, or the pod is going
            return
        if node != self.node_name or uid in self._timers:
            return
        self._slots.add(uid)
        if status.get("phase") == "Running":
            self._resume(pod)
        else:
            self._create_containers(pod)

    def _mark_unschedulable(self, pod: dict[str, Any]) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if key not in self._queue:
            self._queue.append(key)
        conditions = pod.get("status", {}).get("conditions", [])
        if not any(
            c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in conditions
        ):
            self._patch_status(
                pod,
                {
                    "conditions": [
                        {
                            **_condition("PodScheduled", False, "Unschedulable"),
                            "message": f"0/1 nodes are available: 1 Too many pods ({self.max_pods}).",
                        }
                    ]
                },
            )

    def _schedule_queued(self) -> None:
        waiting = [self._get(ns, name) for ns, name in self._queue]
        pods = sorted(
            (p for p in waiting if p is not None),
            key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]),
        )
        self._queue = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods]
        for pod in pods:
            if self.max_pods is not None and len(self._slots) >= self.max_pods:
                break
            self._reconcile(pod["metadata"]["namespace"], pod["metadata"]["name"])

    def _container_statuses(
        self, pod: Mapping[str, Any], state: dict[str, Any], *, ready: bool, started: bool
    ) -> list[dict[str, Any]]:
        statuses = []
        for c in pod.get("spec", {}).get("containers", []):
            entry: dict[str, Any] = {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": f"docker.io/library/{c.get('image', '')}@sha256:{'0' * 64}",
                "ready": ready,
                "started": started,
                "restartCount": 0,
                "state": copy.deepcopy(state),
            }
            if "running" in state or "terminated" in state:
                entry["containerID"] = f"containerd://{pod['metadata']['uid'].replace('-', '')}"
            statuses.append(entry)
        return statuses

    def _create_containers(self, pod: dict[str, Any]) -> None:
        conditions = [
            _condition("PodReadyToStartContainers", False),
            _condition("Initialized", True),
            _condition("Ready", False, "ContainersNotReady"),
            _condition("ContainersReady", False, "ContainersNotReady"),
            _condition("PodScheduled", True),
        ]
        self._patch_status(
            pod,
            {
                "phase": "Pending",
                "hostIP": "10.0.0.1",
                "conditions": conditions,
                "containerStatuses": self._container_statuses(
                    pod, {"waiting": {"reason": "ContainerCreating"}}, ready=False, started=False
                ),
            },
        )
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self._later(pod["metadata"]["uid"], self.startup_delay, lambda: self._run(ns, name))

    def _run(self, namespace: str, name: str) -> None:
        pod = self._get(namespace, name)
        if pod is None or pod["metadata"].get("deletionTimestamp") or not self.running:
            return
        self._ip_counter += 1
        started = now_rfc3339()
        ip = f"10.244.{self._ip_counter // 250}.{self._ip_counter % 250 + 2}"
        self._patch_status(
            pod,
            {
                "phase": "Running",
                "startTime": pod.get("status", {}).get("startTime") or started,
                "hostIP": "10.0.0.1",
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "conditions": [
                    _condition("PodReadyToStartContainers", True),
                    _condition("Initialized", True),
                    _condition("Ready", True),
                    _condition("ContainersReady", True),
                    _condition("PodScheduled", True),
                ],
                "containerStatuses": self._container_statuses(
                    pod, {"running": {"startedAt": started}}, ready=True, started=True
                ),
            },
        )
        uid = pod["metadata"]["uid"]
        self._started_at[uid] = self._loop.time()
        self._later(uid, self.duration_of(pod), lambda: self._finish(namespace, name))

    def _resume(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        duration = self.duration_of(pod) * self.time_factor
        if uid in self._started_at:
            elapsed = self._loop.time() - self._started_at[uid]
        else:
            start = pod.get("status", {}).get("startTime")
            parsed = (
                datetime.datetime.fromisoformat(start.replace("Z", "+00:00")) if start else None
            )
            now = datetime.datetime.now(datetime.UTC)
            elapsed = (now - parsed).total_seconds() if parsed else 0.0
        remaining = max(0.0, duration - elapsed) / (self.time_factor or 1.0)
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self._later(uid, remaining, lambda: self._finish(ns, name))

    def _finish(
        self,
        namespace: str,
        name: str,
        exit_code: int | None = None,
        reason: str | None = None,
        message: str | None = None,
    ) -> None:
        pod = self._get(namespace, name)
        if pod is None:
            return
        uid = pod["metadata"]["uid"]
        self._timers.pop(uid, None)
        if exit_code is None:
            exit_code = self.exit_code_of(pod)
        succeeded = exit_code == 0
        finished = now_rfc3339()
        old_statuses = pod.get("status", {}).get("containerStatuses", [])
        started = next(
            (
                cs["state"]["running"]["startedAt"]
                for cs in old_statuses
                if "running" in cs.get("state", {})
            ),
            finished,
        )
        terminated: dict[str, Any] = {
            "exitCode": exit_code,
            "reason": "Completed" if succeeded else "Error",
            "startedAt": started,
            "finishedAt": finished,
            "containerID": f"containerd://{uid.replace('-', '')}",
        }
        status: dict[str, Any] = {
            "phase": "Succeeded" if succeeded else "Failed",
            "conditions": [
                _condition("PodReadyToStartContainers", False),
                _condition("Initialized", True),
                _condition("Ready", False, "PodCompleted" if succeeded else "PodFailed"),
                _condition("ContainersReady", False, "PodCompleted" if succeeded else "PodFailed"),
                _condition("PodScheduled", True),
            ],
            "containerStatuses": self._container_statuses(
                pod, {"terminated": terminated}, ready=False, started=False
            ),
        }
        if reason:
            status["reason"] = reason
        if message:
            status["message"] = message
        self._patch_status(pod, status)
        self._forget(uid)
        self._schedule_queued()

    def _terminate(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self._terminating.add(uid)
        handle = self._timers.pop(uid, None)
        if handle is not None:
            handle.cancel()
        if pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            self._finish(ns, name, exit_code=143)
            self._terminating.add(uid)

        def delete() -> None:
            self._terminating.discard(uid)
            if self._get(ns, name) is not None:
                self.emulator.delete_object(PODS, ns, name, grace_period=0)

        self._loop.call_later(
            self.termination_delay * self.time_factor, self.emulator._safely, delete
        )

    def _evict(self, namespace: str, name: str, reason: str, message: str) -> None:
        pod = self._get(namespace, name)
        if pod is None or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            return
        self._finish(namespace, name, exit_code=137, reason=reason, message=message)

    # Policies (override in subclasses if needed).

    def duration_of(self, pod: Mapping[str, Any]) -> float:
        """Simulated seconds the pod's main container runs."""
        annotations = pod.get("metadata", {}).get("annotations") or {}
        if DURATION_ANNOTATION in annotations:
            return float(annotations[DURATION_ANNOTATION])
        containers = pod.get("spec", {}).get("containers") or [{}]
        for env in containers[0].get("env") or []:
            if env.get("name") in DURATION_ENVS and env.get("value") is not None:
                return float(env["value"])
        return self.default_duration

    def exit_code_of(self, pod: Mapping[str, Any]) -> int:
        """The exit code of the main container (failure injection happens here)."""
        annotations = pod.get("metadata", {}).get("annotations") or {}
        if EXIT_CODE_ANNOTATION in annotations:
            return int(annotations[EXIT_CODE_ANNOTATION])
        if str(annotations.get(FAIL_ANNOTATION, "")).lower() == "true":
            return 1
        if self.failure is not None:
            code = self.failure(pod)
            if code is not None:
                return int(code)
        if self.failure_rate and self._rng.random() < self.failure_rate:
            return 1
        return 0
