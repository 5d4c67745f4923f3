"""Argo Workflows in the operator (``--argo``; docs/argo.md, "How the operator schedules
them"): their pods gated at creation, released by the default pool's state machine and
policy beside DagWorkflows.

* **Gate.** With ``--argo-webhook-port``, a mutating admission webhook (kopf's server,
  path ``/argo-gate``) adds ``idlegate.io/release`` to each node's pod Argo creates
  (`gates_with_ours`); it keeps no state, so it answers before the rebuild.
* **Job.** Each Workflow that has not finished is mapped (`map_workflow`) and its job
  (`LiveArgo`) joins the default pool's cluster, restored from its pods; each change of
  the Workflow maps it again with its ``status.nodes``. One that does not map is not
  scheduled: its pods are released as Argo creates them, with a Warning.
* **Releases.** The job's payload is the core's `ArgoWorkflow`: a launch of a stage,
  paired with a gated pod of that stage, is a `RemoveGate`, an idle slot a `SetTimer`.
  What its pods and ``status.nodes`` show is handed to its `LiveArgo` here, and the pods
  that pairs releases become RemoveGates too. Argo's objects are never written.
* **History.** A Workflow that finishes while the operator runs goes into the history
  sink and its pod run times into the estimates of its template's next runs: each pod's
  own (its main container's, `ArgoPod.ran`), never its node's, which counts the wait at
  the gate too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import kopf
from prometheus_client import Gauge

from idlegate.errors import IdlegateError
from idlegate.operator.core.argo import LiveArgo, Release
from idlegate.operator.core.argo_pods import WORKFLOW_LABEL, ArgoPod, gates_with_ours
from idlegate.operator.core.events import Schedule
from idlegate.operator.core.intents import Outbox
from idlegate.operator.core.pods import Owner
from idlegate.operator.core.tracking import ArgoWorkflow, timer_key
from idlegate.operator.edge.kube import ApiError
from idlegate.operator.settings import Settings
from idlegate.sim.argo import (
    DEFAULT_PRIOR,
    GROUP,
    ArgoJob,
    ArgoRefusal,
    DurationSource,
    RefusalReason,
    map_workflow,
    parse_time,
    template_index,
)
from idlegate.sim.history import ArgoLearning

if TYPE_CHECKING:
    from idlegate.operator.edge.bridge import Bridge
    from idlegate.operator.edge.pools import Pools
    from idlegate.operator.metrics import Metrics

log = logging.getLogger(__name__)

WEBHOOK_ID = "argo-gate"
"""The webhook's handler id, which is its URL path (``/argo-gate``)."""
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
DONE = ("Succeeded", "Failed", "Error")
"""Phases of a finished Argo Workflow."""
TEMPLATE_PLURALS = ("workflowtemplates", "clusterworkflowtemplates")
MISSING = (RefusalReason.MISSING_TEMPLATE, RefusalReason.MISSING_WORKFLOW_TEMPLATE)
"""Refusals that a template seen later may lift."""
RETRY = 5.0
"""Seconds (operator clock) before a workflow that could not be admitted is tried again."""


def owner_of(body: Mapping[str, Any]) -> Owner:
    """The Workflow as the owner of Events."""
    meta = body.get("metadata") or {}
    names = (meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""))
    return Owner(*names, kind="Workflow", api_version=API_VERSION)


class Host(Protocol):
    """What this module uses of the operator (:class:`idlegate.operator.main.Operator`)."""

    settings: Settings
    metrics: Metrics

    @property
    def pools(self) -> Pools: ...
    @property
    def ready(self) -> bool: ...
    async def ready_pools(self) -> Pools: ...


class ArgoSide:
    """The operator's Argo Workflows (see the module docstring)."""

    def __init__(self, operator: Host) -> None:
        self.operator = operator
        self.refused: dict[tuple[str, str], str] = {}
        """Workflows not scheduled, and why: their pods are released as they come."""
        self.pending: dict[tuple[str, str], list[ArgoPod]] = {}
        """Pods seen while their workflow is being admitted (replayed after)."""
        self.templates: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        """(namespace or "", kind, name) -> WorkflowTemplate or ClusterWorkflowTemplate."""
        self.learning = ArgoLearning()
        path = operator.settings.history_file
        if path is not None:  # (a restart keeps what the sink's records taught)
            try:
                self.learning.load(path)
            except (IdlegateError, OSError) as exc:
                log.warning("Argo estimates start without the history %s: %s", path, exc)
        self.active = Gauge(
            "idlegate_active_workflows_by_kind",
            "Workflows in the pools, by kind (dagworkflow, argo).",
            ["kind"],
            registry=operator.metrics.registry,
        )

    @property
    def bridge(self) -> Bridge:
        return self.operator.pools.default

    @property
    def said(self) -> _Said:
        """What this module writes, carried out as it is said (the default pool's)."""
        return _Said(self.bridge)

    # -- what is seen ------------------------------------------------------------------------

    def template_seen(self, deleted: bool, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key = (meta.get("namespace", ""), str(body.get("kind")), meta.get("name", ""))
        if deleted:
            self.templates.pop(key, None)
        else:
            self.templates[key] = body

    async def workflow_seen(self, deleted: bool, body: Mapping[str, Any]) -> None:
        await self.operator.ready_pools()
        meta = body.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        phase = (body.get("status") or {}).get("phase")
        wf = self.bridge.core.argo.get(key)
        if wf is not None and wf.owner.uid != meta.get("uid"):
            self._drop(wf)  # (deleted and created again under the name)
            wf = None
        if deleted or meta.get("deletionTimestamp") or phase in DONE:
            self.bridge.core.end(meta.get("uid", ""))  # (never admitted again)
            self.refused.pop(key, None)
            if wf is not None:
                self._drop(wf)
            self.bridge.handle(Schedule())
            if phase in DONE and not deleted:
                await self._record(body, wf)
            return
        if key in self.refused or key in self.pending:
            return
        if wf is None:
            await self._admit(key, body)
        else:
            self._remap(wf, body)
        self._gauges()
        self.bridge.handle(Schedule())

    async def pod_seen(self, deleted: bool, body: Mapping[str, Any]) -> None:
        pod = ArgoPod.of(body)
        if pod is None or not self.operator.ready:
            return
        if deleted and not pod.terminal:  # gone before it ended: its executor is free
            pod = replace(pod, phase="Failed", gated=False)
        key = (pod.namespace, pod.workflow)
        if key in self.pending:
            self.pending[key].append(pod)
        elif key in self.refused:
            if pod.gated and not deleted:
                self._unscheduled(pod, self.refused[key])
        elif (wf := self.bridge.core.argo.get(key)) is not None:
            releases = wf.live.observe(self.bridge.core.cluster, pod, self.bridge.now())
            self.said.release_argo(wf.owner, releases)
            self.bridge.handle(Schedule())

    # -- admission and changes ----------------------------------------------------------------

    def _objects(self, namespace: str) -> list[Mapping[str, Any]]:
        """The templates a Workflow of `namespace` may reference."""
        return [o for (ns, _, _), o in self.templates.items() if ns in ("", namespace)]

    def _map(self, body: Mapping[str, Any]) -> ArgoJob:
        objects = self._objects((body.get("metadata") or {}).get("namespace", ""))
        return map_workflow(
            body, templates=template_index(objects), durations=self.learning.durations
        )

    async def _admit(self, key: tuple[str, str], body: Mapping[str, Any]) -> None:
        owner = owner_of(body)
        try:
            mapped = self._map(body)
        except IdlegateError as exc:
            if not isinstance(exc, ArgoRefusal) or exc.reason not in MISSING:
                await self._refuse(key, body, str(exc))
                return
            # (its templates may not have been seen yet, as at a start): its pods wait
            message = f"{exc}; tried again every {RETRY:g} s."
            self.said.event(owner, "Warning", "TemplateMissing", message)
            self._later(body)
            return
        self.pending[key] = []
        try:
            listed = await self.bridge.kube.list_pods(key[0], f"{WORKFLOW_LABEL}={key[1]}")
        except ApiError as exc:
            del self.pending[key]
            log.info("Cannot list the pods of %s/%s now (%s): admitted later.", *key, exc)
            self._later(body)
            return
        seen = self.pending.pop(key)
        pods = [p for p in (ArgoPod.of(b) for b in listed) if p is not None]
        bridge = self.bridge
        now = bridge.now()
        created = parse_time((body.get("metadata") or {}).get("creationTimestamp"))
        arrival = min(now, bridge.settings.clock.from_wall(created)) if created else now
        live = LiveArgo(key, mapped)
        wf = ArgoWorkflow(owner, live)
        live.admit(bridge.core.cluster, now, arrival, pods)
        bridge.core.argo[key] = wf
        if owner.uid in bridge.core.ended:  # it finished or went while its pods were listed
            self._drop(wf)
            return
        for pod in seen:
            self.said.release_argo(owner, live.observe(bridge.core.cluster, pod, now))
        counts = mapped.counts
        guessed = [s.name for s in mapped.live_stages if s.duration_source is DurationSource.PRIOR]
        message = (
            f"Scheduled by idlegate: {counts['stages']} stages, {counts['edges']} edges, "
            f"{counts['tasks']} pods, in the pool of {bridge.settings.pool_size} executors."
        )
        self.said.event(owner, "Normal", "Accepted", message)
        if guessed:
            message = (
                f"No history of {mapped.template_key} and no annotation "
                f"idlegate.io/task-duration-seconds for stage(s) {', '.join(guessed[:10])}: "
                f"their pods are estimated at {DEFAULT_PRIOR:g} s each (the prior) until runs "
                "of the template are measured."
            )
            self.said.event(owner, "Normal", "Estimated", message)

    def _later(self, body: Mapping[str, Any]) -> None:
        """See `body` again in `RETRY` seconds (a later event of it may come first)."""
        meta = body.get("metadata") or {}

        async def again() -> None:
            key = (meta.get("namespace", ""), meta.get("name", ""))
            # (unless it went meanwhile, or a later event of it came first)
            if meta.get("uid") not in self.bridge.core.ended and key not in self.bridge.core.argo:
                await self.workflow_seen(False, body)

        key = f"argo-admit/{meta.get('namespace')}/{meta.get('name')}"
        self.bridge.timers.arm(key, self.bridge.now() + RETRY, again)

    def _remap(self, wf: ArgoWorkflow, body: Mapping[str, Any]) -> None:
        job = wf.job
        try:
            mapped = self._map(body)
            releases = wf.live.remap(self.bridge.core.cluster, mapped, self.bridge.now())
        except IdlegateError as exc:
            log.warning("%s/%s no longer maps (%s): kept as it was.", *wf.live.key, exc)
            return
        if wf.job is not job:  # a new job: its idle slots' timers are set under its indexes
            for stage in job.stages:
                if stage.idle_until is not None:
                    self.said.cancel_timer(timer_key(wf.owner, stage.index))
        self.said.release_argo(wf.owner, releases)
        for pod in wf.live.take_unplaced():
            self._unscheduled(pod, "its node is no stage of the job idlegate mapped")

    async def _refuse(self, key: tuple[str, str], body: Mapping[str, Any], why: str) -> None:
        """Not scheduled: its pods are released as they come, those there already now."""
        self.refused[key] = why
        message = f"Not scheduled by idlegate: {why}. Its pods are released as Argo creates them."
        self.said.event(owner_of(body), "Warning", "NotScheduled", message)
        try:
            listed = await self.bridge.kube.list_pods(key[0], f"{WORKFLOW_LABEL}={key[1]}")
        except ApiError as exc:
            log.info("Cannot list the pods of %s/%s now (%s): tried again.", *key, exc)
            del self.refused[key]
            self._later(body)
            return
        for pod in (ArgoPod.of(b) for b in listed):
            if pod is not None and pod.gated:
                self._unscheduled(pod, why)

    def _drop(self, wf: ArgoWorkflow) -> None:
        wf.active = False  # (its idle timers fire for nothing)
        wf.live.drop(self.bridge.core.cluster, self.bridge.now())
        if self.bridge.core.argo.get(wf.live.key) is wf:
            del self.bridge.core.argo[wf.live.key]
        self._gauges()

    # -- history ------------------------------------------------------------------------------

    async def _record(self, body: Mapping[str, Any], wf: ArgoWorkflow | None) -> None:
        """A finished Workflow: learned from, and if it finished while the operator ran
        (`wf`, its job then) into the history sink (one that finished before would be
        again).

        Its pods' run times are their own: those its job saw end, and for the others (a
        pod whose end comes after the Workflow's, a Workflow that finished before) its
        pods as listed now. A pod whose run time neither tells (deleted unseen, a status
        without its container's times) is left out of the record, and logged."""
        meta = body.get("metadata") or {}
        if str(meta.get("uid", "")) in self.learning.learned:
            return  # (each once: before its pods are listed again)
        key = (meta.get("namespace", ""), meta.get("name", ""))
        ran = dict(wf.live.ran) if wf is not None else {}
        unknown = _succeeded_nodes(body) - ran.keys()
        if unknown:
            try:
                listed = await self.bridge.kube.list_pods(key[0], f"{WORKFLOW_LABEL}={key[1]}")
            except ApiError as exc:
                listed = []
                log.info("Cannot list the pods of %s/%s now (%s).", *key, exc)
            pods = (ArgoPod.of(b) for b in listed)
            ran.update((p.node_name, p.ran) for p in pods if p is not None and p.ran is not None)
            unknown -= ran.keys()
        if unknown:
            log.warning(
                "%s/%s: %d succeeded pod(s) report no run time (gone, or no container "
                "times in their status): left out of its record and of its template's "
                "estimates, as Argo's node times count the wait at the gate too.",
                *key,
                len(unknown),
            )
        record = self.learning.learn(
            body,
            self._objects(key[0]),
            name=f"{key[0]}/{key[1]}",
            pool_size=self.bridge.settings.pool_size,
            ran=ran,
        )
        if record is not None and wf is not None:
            self.bridge.history.write(record, owner_of(body))

    def _unscheduled(self, pod: ArgoPod, why: str) -> None:
        owner = Owner(pod.namespace, pod.workflow, "", kind="Workflow", api_version=API_VERSION)
        self.said.release_argo(owner, [Release(pod.name, "", None)])
        log.warning("Released pod %s/%s unscheduled: %s.", pod.namespace, pod.name, why)

    def _gauges(self) -> None:
        self.active.labels("argo").set(len(self.bridge.core.argo))
        self.active.labels("dagworkflow").set(len(self.operator.pools.workflows))


def _succeeded_nodes(body: Mapping[str, Any]) -> set[str]:
    """The names of the Workflow's pod nodes that succeeded (``status.nodes``)."""
    nodes = (body.get("status") or {}).get("nodes") or {}
    return {
        str(n.get("name"))
        for n in nodes.values()
        if isinstance(n, Mapping) and n.get("type") == "Pod" and n.get("phase") == "Succeeded"
    }


class _Said(Outbox):
    """An outbox whose intents the pool carries out at once."""

    def __init__(self, bridge: Bridge) -> None:
        super().__init__()
        self.bridge = bridge

    def add(self, item: Any) -> None:
        self.bridge.carry([item])


def register(registry: kopf.OperatorRegistry, operator: Host) -> None:
    """Add the Argo handlers to the operator's registry (nothing without ``--argo``)."""
    settings = operator.settings
    if not settings.argo:
        return
    if settings.argo_webhook_port is not None:
        certs = settings.argo_webhook_certs
        server = kopf.WebhookServer(
            addr=settings.listen_host,
            port=settings.argo_webhook_port,
            certfile=None if certs is None else str(certs / "tls.crt"),
            pkeyfile=None if certs is None else str(certs / "tls.key"),
            insecure=certs is None,
        )

        @kopf.on.startup(registry=registry)
        def serve_webhook(settings: kopf.OperatorSettings, **_: Any) -> None:
            settings.admission.server = server

        @kopf.on.mutate(
            "v1",
            "pods",
            registry=registry,
            id=WEBHOOK_ID,
            operations=["CREATE"],
            labels={WORKFLOW_LABEL: kopf.PRESENT},
            side_effects=False,
        )
        def gate(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
            gates = gates_with_ours(body)
            if gates is not None:
                patch.spec["schedulingGates"] = gates

    side = ArgoSide(operator)

    @kopf.on.event(GROUP, VERSION, "workflows", registry=registry, id="argo-workflows")
    async def workflow_event(type: str | None, event: kopf.RawEvent, **_: Any) -> None:
        await side.workflow_seen(type == "DELETED", event["object"])

    @kopf.on.event(
        "v1", "pods", registry=registry, id="argo-pods", labels={WORKFLOW_LABEL: kopf.PRESENT}
    )
    async def pod_event(type: str | None, event: kopf.RawEvent, **_: Any) -> None:
        await side.pod_seen(type == "DELETED", event["object"])

    for plural in TEMPLATE_PLURALS:

        @kopf.on.event(GROUP, VERSION, plural, registry=registry, id=f"argo-{plural}")
        async def template_event(type: str | None, event: kopf.RawEvent, **_: Any) -> None:
            side.template_seen(type == "DELETED", event["object"])
