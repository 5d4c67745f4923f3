"""Fakes for the operator's unit tests: a clock, timers and an API that live in memory, and a
harness that runs one bridge against them.

Fast and deterministic: the clock moves when told to, timers fire by hand, and the API
applies creations, JSON patches (the tests' one copy, :mod:`tests.k8s._patching`) and
status merges the way the API server does. The "kubelet" is the test itself, finishing
pods when it wants to.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import itertools
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from idlegate.api.labels import LABEL_WORKFLOW
from idlegate.api.settings import Clock, Settings
from idlegate.operator.core.events import PodSeen
from idlegate.operator.core.intents import Outcome, follow_ups
from idlegate.operator.edge import intake
from idlegate.operator.edge.applier import Applier
from idlegate.operator.edge.bridge import Bridge
from idlegate.operator.edge.kube import ApiError
from idlegate.operator.edge.lanes import Lanes
from idlegate.operator.edge.pools import Pools
from idlegate.operator.edge.recorder import EventRecorder
from idlegate.operator.edge.watchdog import ApiHealth
from idlegate.operator.features.planning import ReplayWorker
from idlegate.operator.metrics import Metrics
from idlegate.policy import make_scheduler
from idlegate.sim.protocol import Action, ClusterView, Decision
from idlegate.sim.task_times import EVIDENCE, TaskTimes
from tests.k8s._patching import PatchFailed, apply_json_patch, merge_patch

STAMP = "2024-01-01T00:00:00Z"
"""The deletionTimestamp the fake API stamps."""


class FakeClock(Clock):
    """A clock that moves only when told to; it counts epoch seconds, like the wall."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.t = float(start)

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        """Move the clock forward and return the new time."""
        if seconds < 0:
            raise ValueError("a fake clock does not go backwards")
        self.t += seconds
        return self.t


class FakeKube:
    """The KubeApi protocol in memory: pods, DagWorkflows (status merges), Events and
    Namespaces (``default``, ``kube-system`` and those of the workflows added)."""

    def __init__(self) -> None:
        self.namespaces: dict[str, dict[str, Any]] = {}
        for name in ("default", "kube-system"):
            self.add_namespace(name)
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.workflows: dict[tuple[str, str], dict[str, Any]] = {}
        self.cron_workflows: dict[tuple[str, str], dict[str, Any]] = {}
        self.pools: dict[str, dict[str, Any]] = {}
        """ExecutorPools by name (cluster-scoped)."""
        self.objects: dict[tuple[str, str], list[dict[str, Any]]] = {}
        """Other controllers' objects by (apiVersion, plural), e.g. Argo's Workflows."""
        self.events: list[dict[str, Any]] = []
        self.calls: list[str] = []
        self.fail: dict[str, list[ApiError]] = {}
        """Per method name, errors to raise on the next calls (failure injection)."""
        self.fault: Callable[[str], ApiError | None] | None = None
        """Asked before every call (with the method's name): an error to raise instead of
        answering (an outage, a storm of 429s), or None."""
        self.lose: dict[str, int] = {}
        """Per method name, how many of the next calls take effect but lose their answer
        (the connection drops after the server acted: the caller sees no response)."""
        self.done: list[tuple[float, str, str]] = []
        """Writes that took effect: (loop time, method, object name)."""
        self.on_effect: Callable[[str, str], None] | None = None
        """Called as a write takes effect, before it is answered (a watch event, say)."""
        self.attempts: list[tuple[float, str, str]] = []
        """Every call: (loop time, method, object name or "")."""
        self.budgeted: set[str] = set()
        """Pods a PodDisruptionBudget keeps: their eviction is refused (429)."""
        self.webhook_gates: list[str] = []
        """Scheduling gates a mutating webhook puts first on every new pod (as Kueue's pod
        integration does; a template itself may set none)."""
        self._uids = itertools.count(1)

    def _maybe_fail(self, method: str, name: str = "") -> None:
        self.calls.append(method)
        self.attempts.append((asyncio.get_running_loop().time(), method, name))
        queue = self.fail.get(method)
        if queue:
            raise queue.pop(0)
        error = self.fault(method) if self.fault is not None else None
        if error is not None:
            raise error

    def _took_effect(self, method: str, name: str) -> None:
        """A write took effect; its answer is lost if `lose` says so."""
        self.done.append((asyncio.get_running_loop().time(), method, name))
        if self.on_effect is not None:
            self.on_effect(method, name)
        if self.lose.get(method):
            self.lose[method] -= 1
            raise ApiError(0, "ProtocolError", f"{method} {name}: connection reset by peer")

    def add_namespace(self, name: str, **metadata: Any) -> dict[str, Any]:
        """A Namespace (`metadata`: its labels, annotations)."""
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, **metadata}}
        self.namespaces[name] = body
        return body

    def add_workflow(self, name: str, spec: dict[str, Any], namespace: str = "default") -> dict:
        if namespace not in self.namespaces:
            self.add_namespace(namespace)
        body = {
            "apiVersion": "idlegate.io/v1alpha1",
            "kind": "DagWorkflow",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}-{next(self._uids)}",
                "generation": 1,
                "creationTimestamp": "2024-01-01T00:00:00Z",
            },
            "spec": spec,
        }
        self.workflows[(namespace, name)] = body
        return body

    async def list_workflows(
        self, namespace: str | None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        self._maybe_fail("list_workflows")
        return _select(self.workflows, namespace, label_selector)

    def add_pool(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {
            "apiVersion": "idlegate.io/v1alpha1",
            "kind": "ExecutorPool",
            "metadata": {"name": name, "uid": f"uid-{name}-{next(self._uids)}", "generation": 1},
            "spec": spec,
        }
        self.pools[name] = body
        return body

    async def patch_pool_status(self, namespace: str, name: str, status: dict) -> dict:
        self._maybe_fail("patch_pool_status", name)
        body = self.pools.get(name)
        if body is None:
            raise ApiError(404, "NotFound", f'executorpools "{name}" not found')
        body["status"] = merge_patch(body.get("status"), status)  # (as the API server: RFC 7386)
        return copy.deepcopy(body)

    async def list_pools(self) -> list[dict[str, Any]]:
        self._maybe_fail("list_pools")
        return [copy.deepcopy(body) for _, body in sorted(self.pools.items())]

    async def list_objects(
        self, api_version: str, plural: str, namespace: str | None
    ) -> list[dict[str, Any]]:
        self._maybe_fail("list_objects")
        found = self.objects.get((api_version, plural), [])
        return [o for o in found if namespace in (None, o["metadata"].get("namespace"))]

    async def list_pods(self, namespace: str | None, label_selector: str) -> list[dict[str, Any]]:
        self._maybe_fail("list_pods")
        return _select(self.pods, namespace, label_selector)

    def add_cron_workflow(
        self, name: str, spec: dict[str, Any], namespace: str = "default", created: float = 0.0
    ) -> dict[str, Any]:
        """A DagCronWorkflow created at epoch second `created`."""
        stamp = datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "idlegate.io/v1alpha1",
            "kind": "DagCronWorkflow",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}-{next(self._uids)}",
                "generation": 1,
                "creationTimestamp": stamp,
            },
            "spec": spec,
        }
        self.cron_workflows[(namespace, name)] = body
        return copy.deepcopy(body)

    async def create_workflow(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        self._maybe_fail("create_workflow", name)
        if (namespace, name) in self.workflows:
            raise ApiError(409, "AlreadyExists", f'dagworkflows "{name}" already exists')
        created = copy.deepcopy(body)
        created["metadata"]["uid"] = f"uid-{name}-{next(self._uids)}"
        self.workflows[(namespace, name)] = created
        self._took_effect("create_workflow", name)
        return copy.deepcopy(created)

    async def delete_workflow(self, namespace: str, name: str) -> None:
        self._maybe_fail("delete_workflow", name)
        if self.workflows.pop((namespace, name), None) is not None:  # (gone already: fine)
            self._took_effect("delete_workflow", name)

    async def get_cron_workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._maybe_fail("get_cron_workflow", name)
        body = self.cron_workflows.get((namespace, name))
        return None if body is None else copy.deepcopy(body)

    async def patch_cron_status(self, namespace: str, name: str, status: dict) -> dict:
        self._maybe_fail("patch_cron_status", name)
        body = self.cron_workflows.get((namespace, name))
        if body is None:
            raise ApiError(404, "NotFound", f'dagcronworkflows "{name}" not found')
        body["status"] = merge_patch(body.get("status"), status)  # (as the API server: RFC 7386)
        self._took_effect("patch_cron_status", name)
        return copy.deepcopy(body)

    async def get_workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._maybe_fail("get_workflow", name)
        body = self.workflows.get((namespace, name))
        return None if body is None else copy.deepcopy(body)

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        self._maybe_fail("get_pod", name)
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        return copy.deepcopy(pod)

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        self._maybe_fail("create_pod", name)
        if (namespace, name) in self.pods:
            raise ApiError(409, "AlreadyExists", f'pods "{name}" already exists')
        pod = copy.deepcopy(body)
        if self.webhook_gates:
            gates = pod["spec"].get("schedulingGates") or []
            pod["spec"]["schedulingGates"] = [{"name": g} for g in self.webhook_gates] + gates
        pod["metadata"]["uid"] = f"pod-{next(self._uids)}"
        pod["status"] = {"phase": "Pending"}
        self.pods[(namespace, name)] = pod
        self._took_effect("create_pod", name)
        return copy.deepcopy(pod)

    async def patch_pod(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> dict:
        self._maybe_fail("patch_pod", name)
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        try:
            patched = self.pods[(namespace, name)] = apply_json_patch(pod, ops)
        except PatchFailed as exc:
            raise ApiError(422, "Invalid", str(exc)) from None
        self._took_effect("patch_pod", name)
        self._gone_if_done(namespace, name)
        return copy.deepcopy(patched)

    def _gone_if_done(self, namespace: str, name: str) -> None:
        """A pod being deleted goes once it has stopped and no finalizer holds it."""
        pod = self.pods[(namespace, name)]
        meta, phase = pod["metadata"], (pod.get("status") or {}).get("phase")
        stopped = phase in ("Succeeded", "Failed") or meta.get("deletionGracePeriodSeconds") == 0
        if meta.get("deletionTimestamp") and stopped and not meta.get("finalizers"):
            del self.pods[(namespace, name)]

    def grace_over(self, name: str, namespace: str = "default") -> None:
        """A pod being deleted has stopped (its grace period over): it ends Failed and goes,
        unless a finalizer holds it."""
        pod = self.pods[(namespace, name)]
        pod["status"]["phase"] = "Failed"
        self._gone_if_done(namespace, name)

    async def delete_pod(self, namespace: str, name: str) -> None:
        self._maybe_fail("delete_pod", name)
        pod = self.pods.get((namespace, name))
        if pod is not None and pod["metadata"].get("finalizers"):  # (held: being deleted)
            pod["metadata"].update(deletionTimestamp=STAMP, deletionGracePeriodSeconds=0)
            return
        self.pods.pop((namespace, name), None)  # (gone already: fine)

    async def evict_pod(self, namespace: str, name: str) -> None:
        """As the Eviction API: 429 for a pod in `budgeted` (a PodDisruptionBudget's no),
        else the pod is being deleted (its grace period: `deletionTimestamp`)."""
        self._maybe_fail("evict_pod", name)
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        if name in self.budgeted:
            message = "Cannot evict pod as it would violate the pod's disruption budget."
            raise ApiError(429, "TooManyRequests", message)
        pod["metadata"]["deletionTimestamp"] = STAMP
        self._took_effect("evict_pod", name)

    async def patch_workflow_status(self, namespace: str, name: str, status: dict) -> dict:
        self._maybe_fail("patch_workflow_status", name)
        body = self.workflows.get((namespace, name))
        if body is None:
            raise ApiError(404, "NotFound", f'dagworkflows "{name}" not found')
        body["status"] = merge_patch(body.get("status"), status)  # (as the API server: RFC 7386)
        self._took_effect("patch_workflow_status", name)
        return copy.deepcopy(body)

    async def create_event(self, namespace: str, body: dict[str, Any]) -> None:
        self._maybe_fail("create_event")
        if any(e["metadata"]["name"] == body["metadata"]["name"] for e in self.events):
            raise ApiError(409, "AlreadyExists", f'events "{body["metadata"]["name"]}" exists')
        self.events.append(copy.deepcopy(body))

    async def list_events(self, namespace: str | None, field_selector: str) -> list[dict[str, Any]]:
        self._maybe_fail("list_events")
        key, _, value = field_selector.partition("=")
        return [
            copy.deepcopy(e)
            for e in self.events
            if namespace in (None, e["metadata"]["namespace"]) and e.get(key) == value
        ]

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._maybe_fail("patch_event")
        for event in self.events:
            if event["metadata"]["name"] == name:
                event.update(copy.deepcopy(patch))
                return
        raise ApiError(404, "NotFound", f'events "{name}" not found')

    async def list_namespaces(self) -> list[dict[str, Any]]:
        self._maybe_fail("list_namespaces")
        return [copy.deepcopy(ns) for _, ns in sorted(self.namespaces.items())]

    async def get_namespace(self, name: str) -> dict[str, Any] | None:
        self._maybe_fail("get_namespace")
        return copy.deepcopy(self.namespaces.get(name))

    async def ping(self) -> None:
        self._maybe_fail("ping")

    def close(self) -> None:
        pass

    # views for assertions

    def pods_of(self, workflow: str) -> list[dict[str, Any]]:
        return [  # (pods of other kinds, Airflow's, carry no workflow label)
            p for p in self.pods.values() if p["metadata"]["labels"].get(LABEL_WORKFLOW) == workflow
        ]

    def occupying(self) -> list[dict[str, Any]]:
        """Pods that hold an executor: ungated and not finished."""
        return [
            p
            for p in self.pods.values()
            if not p["spec"].get("schedulingGates")
            and p["status"]["phase"] not in ("Succeeded", "Failed")
        ]

    def status(self, workflow: str, namespace: str = "default") -> dict[str, Any]:
        return self.workflows[(namespace, workflow)].get("status") or {}

    def reasons(self, workflow: str) -> list[str]:
        return [e["reason"] for e in self.events if e["involvedObject"]["name"] == workflow]


def _select(
    objects: dict[tuple[str, str], dict[str, Any]], namespace: str | None, selector: str | None
) -> list[dict[str, Any]]:
    """Copies of the objects in `namespace` (None: all) matching ``key`` or ``key=value``."""
    key, _, value = (selector or "").partition("=")
    out = []
    for (ns, _), body in objects.items():
        labels = body["metadata"].get("labels") or {}
        matches = not key or (key in labels and (not value or labels[key] == value))
        if namespace in (None, ns) and matches:
            out.append(copy.deepcopy(body))
    return out


class FakeTimers:
    """Timers the test fires by hand."""

    def __init__(self) -> None:
        self.armed: dict[str, tuple[float, Callable[[], Any]]] = {}

    def arm(self, key: str, at: float, fire: Callable[[], Any]) -> None:
        self.armed[key] = (at, fire)

    def cancel(self, key: str) -> None:
        self.armed.pop(key, None)

    async def fire_due(self, now: float) -> int:
        due = [(k, v) for k, v in self.armed.items() if v[0] <= now]
        for key, (_, fire) in due:
            del self.armed[key]
            await fire()
        return len(due)


class IdleRootsOnce:
    """A test policy: FIFO, but the root stages of workflows named `prefix`* first idle
    `delay` seconds, once."""

    name = "idle-roots"

    def __init__(self, delay: float, prefix: str = "") -> None:
        self.delay, self.prefix = delay, prefix
        self.fifo = make_scheduler("fifo")

    def reset(self, rng: Any) -> None:
        self.fifo.reset(rng)

    def decide(self, view: ClusterView) -> Action:
        for s in view.runnable_stages():
            job = s.job
            if (
                job.name.split("/")[-1].startswith(self.prefix)
                and not s.delayed
                and not s.launched
                and not job.dag.parents[s.index]
            ):
                return Decision(s, view.num_executors, self.delay)
        return self.fifo.decide(view)


class Throttled(ApiError):
    """A 429 with a Retry-After of `seconds` (what the API client honours)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(429, "TooManyRequests", "slow down")
        self.retry_after = seconds


class Retrying:
    """What the operator's API client does about a failed try (urllib3's ``Retry``,
    :func:`idlegate.operator.edge.kube.client_retry`), over a :class:`FakeKube`: a request
    that gets no answer, a 429 or a 5xx is tried again, for ever, after 0, 0.2, 0.4, ...
    seconds up to `backoff_max` (a 429's Retry-After instead); each failed try, the error
    that ends a request and the first answer after a failure go to `report`; that error
    says whether an earlier try got no answer (`ApiError.lost`)."""

    def __init__(
        self,
        kube: FakeKube,
        *,
        backoff_max: float = 1.0,
        report: Callable[[str, int], None] | None = None,
    ) -> None:
        self.inner = kube
        self.backoff_max = backoff_max
        self.report = report
        self.doubt = False
        """A failure was reported and no answer since."""

    def _report(self, what: str, status: int) -> None:
        if status == 200 and not self.doubt:
            return
        self.doubt = not 0 < status < 500
        if self.report is not None:
            self.report(what, status)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if not inspect.iscoroutinefunction(method):
            return method

        async def retried(*args: Any, **kwargs: Any) -> Any:
            lost, failed = False, 0
            while True:
                try:
                    answer = await method(*args, **kwargs)
                except ApiError as exc:
                    self._report(name, exc.status)
                    if not exc.retryable or (name, exc.status) == ("evict_pod", 429):
                        exc.lost = exc.lost or lost
                        raise
                    lost |= not exc.answered
                    wait = getattr(exc, "retry_after", None)
                    if wait is None:
                        wait = 0.0 if failed == 0 else min(self.backoff_max, 0.1 * 2**failed)
                    failed += 1
                    await asyncio.sleep(wait)
                    continue
                self._report(name, 200)
                return answer

        return retried


def applier_on(kube: FakeKube) -> Applier:
    """An applier of its own over `kube` (retried as the API client retries), its outcomes
    taken in as a core takes them in, for what they ask next (`follow_ups`: a cron's run
    said started) and nothing else: what cron's tests write through (settle:
    ``applier.lanes.wait_idle``)."""
    lanes = Lanes(Retrying(kube))  # type: ignore[arg-type]
    events = EventRecorder(lanes, Settings(pool_size=1, component="idlegate"))

    def taken_in(outcome: Outcome) -> None:
        applier.apply(follow_ups(outcome))

    applier = Applier(lanes, events, Metrics(1, "fifo"), taken_in)
    return applier


class Harness:
    """One bridge against the fakes."""

    def __init__(
        self,
        kube: FakeKube,
        clock: FakeClock,
        pool: int,
        scheduler: Any,
        status_interval: float = 0.0,
        **settings_kw: Any,
    ) -> None:
        self.kube, self.clock, self.timers = kube, clock, FakeTimers()
        settings = Settings(
            pool_size=pool,
            clock=clock,
            status_interval=status_interval,
            **{"round_window": 0.0, **settings_kw},  # (a wall-time test settles each end)
        )
        self.metrics = Metrics(pool, scheduler.name)
        self.health = ApiHealth(self.metrics)
        client = Retrying(kube, backoff_max=settings.retry_backoff_max, report=self.health.report)
        self.pools = Pools(  # (given policy=, `scheduler` is what it builds, as the operator's)
            functools.partial(
                Bridge,
                settings,
                client,
                scheduler,
                metrics=self.metrics,
                timers=self.timers,
                spec=settings.policy,
            )
        )
        """The operator's pools, the default one alone (what intake and the watchdog take)."""
        self.bridge = self.pools.default
        self.core = self.bridge.core
        self.max_occupying = 0

    async def settle(self) -> None:
        """Until every write is done (its outcome is taken in as it ends)."""
        for bridge in self.pools.bridges.values():
            if isinstance(bridge.planning, ReplayWorker):  # (a portfolio's round)
                await bridge.planning.idle()
        await self.bridge.lanes.wait_idle(timeout=5)
        self.max_occupying = max(self.max_occupying, len(self.kube.occupying()))

    def indexed(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """The workflow's task pods and namespace, as kopf's indexes hold them (the API's
        now: the fakes have no watch delay)."""
        meta = body["metadata"]
        pods = [
            p
            for p in self.kube.pods_of(meta["name"])
            if p["metadata"]["namespace"] == meta["namespace"]
        ]
        namespace = self.kube.namespaces.get(meta["namespace"])
        return copy.deepcopy(pods), copy.deepcopy(namespace)

    def admit(self, body: dict[str, Any]) -> None:
        """What kopf's create handler does with `body` (`Pools.admit`, from the indexes)."""
        body = copy.deepcopy(body)
        self.pools.admit(body, *self.indexed(body))

    def spec_changed(self, body: dict[str, Any]) -> None:
        """What kopf's update handler does with `body`."""
        body = copy.deepcopy(body)
        intake.spec_changed(self.pools, body, *self.indexed(body))

    async def submit(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = self.kube.add_workflow(name, spec)
        self.admit(body)
        await self.settle()
        return body

    async def run(self, name: str, after: float = 0.0) -> None:
        """The kubelet starts pod `name` (Running: its workflow's start, as a user sees it)
        after `after` seconds."""
        self.clock.advance(after)
        pod = self.kube.pods[("default", name)]
        pod["status"]["phase"] = "Running"
        self.pools.handle(PodSeen(copy.deepcopy(pod)))
        await self.settle()

    async def finish(self, name: str, phase: str = "Succeeded", after: float = 0.0) -> None:
        """The kubelet finishes pod `name` after `after` seconds."""
        self.clock.advance(after)
        pod = self.kube.pods[("default", name)]
        assert not pod["spec"].get("schedulingGates"), f"{name} is still gated"
        pod["status"]["phase"] = phase
        if phase == "Failed":
            pod["status"]["containerStatuses"] = [
                {"name": "task", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}
            ]
        self.pools.handle(PodSeen(copy.deepcopy(pod)))
        await self.settle()

    def released(self, workflow: str | None = None) -> list[str]:
        return sorted(
            p["metadata"]["name"]
            for p in self.kube.occupying()
            if workflow is None or p["metadata"]["labels"][LABEL_WORKFLOW] == workflow
        )

    async def run_to_completion(self, limit: int = 500) -> None:
        """A discrete-event kubelet: released pods run for their TASK_DURATION_SECONDS from
        the moment they are seen released; idle timers fire on time."""
        started: dict[str, float] = {}
        for _ in range(limit):
            await self.settle()
            for name in self.released():
                started.setdefault(name, self.clock.now())
            ends = {
                name: started[name] + _duration(self.kube.pods[("default", name)])
                for name in self.released()
            }
            timer = min((at for at, _ in self.timers.armed.values()), default=None)
            end = min(ends.values(), default=None)
            if end is None and timer is None:
                return
            if timer is not None and (end is None or timer <= end):
                self.clock.t = max(self.clock.t, timer)
                await self.timers.fire_due(self.clock.now())
                continue
            name = min(ends, key=lambda n: (ends[n], n))
            self.clock.t = max(self.clock.t, ends[name])
            await self.finish(name)
        raise AssertionError("did not complete")


def _duration(pod: dict[str, Any]) -> float:
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    return float(env["TASK_DURATION_SECONDS"])


def stage(name: str, tasks: int = 1, duration: float = 10.0, deps: tuple[str, ...] = (), **kw):
    return {
        "name": name,
        "tasks": tasks,
        "taskDurationSeconds": duration,
        "dependsOn": list(deps),
        **kw,
    }


def harness(pool: int = 2, scheduler: Any = None, kube: Any = None, **settings: Any) -> Harness:
    return Harness(
        kube or FakeKube(), FakeClock(), pool, scheduler or make_scheduler("fifo"), **settings
    )


def forecasting(kube: FakeKube, sink: Any, t: float) -> Harness:
    """An operator's pool of one under fifo at `t`, its forecasts refreshed every 30 s and
    its history in the sink at `sink` (the restart tests': a second one on the same sink),
    its tasks known to run as they declare (`as_declared`)."""
    h = Harness(
        kube, FakeClock(t), 1, make_scheduler("fifo"), history_file=sink,
        forecast_interval=30.0,
    )  # fmt: skip
    as_declared(h.bridge.core.times)
    return h


def as_declared(times: TaskTimes) -> None:
    """A pool's own task times (`sim.task_times`) as if `EVIDENCE` of its tasks had run
    exactly what they declare, started the moment they were released: what the fakes' pods
    do, so that its forecasts are made at once and replay the declared durations (a pool
    that has seen none of its tasks end says it cannot forecast yet)."""
    for _ in range(EVIDENCE):
        times.record(1.0, 1.0, 1.0)


async def refreshed(h: Harness) -> Any:
    """One refresh of `h`'s pool, the history sink read first if it is being read (wait,
    not race its thread), and its status writes landed (and so the scores of what started
    or ended)."""
    refresh = h.bridge.forecasts
    assert refresh is not None
    if refresh.resuming is not None:
        refresh.resuming.result(timeout=10)
    refresh.not_before = -math.inf  # (the duty cap paces the pool's own, on the clock's time)
    refresh.poke()
    await refresh.idle()
    await h.settle()
    return refresh


def stranded(h: Harness) -> list[str]:
    """The watchdog's view: gated pods while no pod holds an executor, which no job will
    release (the pool is idle, so nothing they wait for can still end)."""
    if h.kube.occupying():
        return []
    return sorted(n for (_, n), p in h.kube.pods.items() if p["spec"].get("schedulingGates"))


class FeatureHost:
    """What a job kind's handlers (`features.argo.ArgoSide`, `features.airflow.AirflowSide`)
    use of the operator (`features.external.Host`): one Harness's pools, ready."""

    def __init__(self, h: Harness) -> None:
        self.settings, self.metrics = h.bridge.settings, h.metrics
        self.pools = h.pools
        self.kube = h.kube
        self.ready = True
        self.fresh = True
        """False: a handler's body predates the first rebuild's read (queued as a standby)."""

    async def ready_pools(self) -> Pools:
        return self.pools

    async def fresh_pools(self) -> tuple[Pools, bool]:
        return self.pools, self.fresh

    def namespace(self, name: str) -> dict[str, Any] | None:
        """Namespace `name` as kopf's index holds it (the API's now: no watch delay)."""
        return copy.deepcopy(self.kube.namespaces.get(name))


def pool_handler(h: Harness, monkeypatch: Any) -> Any:
    """kopf's handler of ExecutorPools, registered by an `Operator` (of two executors, on
    fake time) whose pools are `h`'s (the tests that drive the pool's handler itself)."""
    from idlegate.api.settings import Settings
    from idlegate.operator.main import build_registry
    from idlegate.operator.runtime import Operator

    operator = Operator(Settings(pool_size=2, clock=FakeClock()), kube=h.kube)
    operator._pools = h.pools

    async def ready_pools() -> object:
        return h.pools

    monkeypatch.setattr(operator, "ready_pools", ready_pools)
    handlers = build_registry(operator)._changing.get_all_handlers()
    return next(handler for handler in handlers if handler.id == "pool")
