"""Argo Workflows in the operator (``--argo``; docs/argo.md, "How the operator schedules
them"): their pods gated at creation, released by their pool's state machine and policy
beside DagWorkflows.

* **Gate.** With ``--webhook-port``, a mutating admission webhook (kopf's server,
  path ``/argo-gate``) adds ``idlegate.io/release`` to each node's pod Argo creates
  (`gates_with_ours`); it keeps no state, so it answers before the rebuild.
* **Job.** Each Workflow that has not finished is mapped (`map_workflow`) and its job
  (`ExternalJob`) joins the cluster of its pool (the label ``idlegate.io/pool``, else its
  namespace's ExecutorPool, else the default pool: :mod:`idlegate.api.routing`; a pool
  that does not exist is waited for, its pods gated), restored from its pods; each change of
  the Workflow maps it again with its ``status.nodes``. One that does not map is not
  scheduled: its pods are released as Argo creates them, with a Warning. At a rebuild
  (`ArgoSide.restore`) the Workflows there are joined before the first decision, so that
  the pods released before a restart hold their executors again.
* **Releases.** The job's payload is the core's `ExternalJob` (the kind of the
  workflows whose pods another controller creates, :mod:`idlegate.operator.kinds.protocol`):
  a launch of a stage, paired with a gated pod of that stage, is a `RemoveGate`, an idle
  slot a `SetTimer`. What its pods and ``status.nodes`` show is handed to the core as
  events (``Join``, ``Observed``, ``Ended``). Argo's objects are never
  written.
* **History.** A Workflow that finishes while the operator runs goes into the history
  sink (with its first forecast made while it waited, as a DagWorkflow's record: a
  restarted pool's forecast calibration is rebuilt from them) and its pod run times into
  the estimates of its template's next runs: each pod's own (its main container's,
  `ArgoPod.ran`), never its node's, which counts the wait at the gate too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from time import thread_time
from typing import TYPE_CHECKING, Any

from idlegate.api.argo_pods import WORKFLOW_LABEL, ArgoPod
from idlegate.api.notices import pool_of
from idlegate.api.routing import ARGO_KIND, NoPlaceError
from idlegate.api.task_pods import Owner
from idlegate.errors import DemandTooLargeError, IdlegateError
from idlegate.operator.core.events import Ended, Join, Observed, Schedule
from idlegate.operator.core.intents import PostEvent
from idlegate.operator.features.external import FeaturePool, FeaturePools, Host
from idlegate.operator.forecasting.book import history_forecast
from idlegate.operator.kinds.external import ExternalJob, unscheduled
from idlegate.operator.kinds.pairing import too_large
from idlegate.operator.kinds.workflow import AdmitLaterError
from idlegate.operator.lag.pacing import pause_after
from idlegate.sim.argo import (
    GROUP,
    ArgoJob,
    ArgoRefusal,
    ArgoRefusalReason,
    map_workflow,
    template_index,
)
from idlegate.sim.argo.status import succeeded_pods
from idlegate.sim.external import DEFAULT_PRIOR, DurationSource
from idlegate.sim.history import ArgoLearning
from idlegate.sim.timestamps import parse_time

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

WEBHOOK_ID = "argo-gate"
"""The webhook's handler id, which is its URL path (``/argo-gate``)."""
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = ARGO_KIND
"""Argo's kind: its workflows' owner kind, by which the core holds them."""
DONE = ("Succeeded", "Failed", "Error")
"""Phases of a finished Argo Workflow."""
TEMPLATE_PLURALS = ("workflowtemplates", "clusterworkflowtemplates")
MISSING = (ArgoRefusalReason.MISSING_TEMPLATE, ArgoRefusalReason.MISSING_WORKFLOW_TEMPLATE)
"""Refusals that a template seen later may lift."""
RETRY = 5.0
"""Seconds (operator clock) before a workflow that could not be admitted is tried again."""


def owner_of(body: Mapping[str, Any]) -> Owner:
    """The Workflow as the owner of Events."""
    meta = body.get("metadata") or {}
    names = (meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""))
    return Owner(*names, kind=KIND, api_version=API_VERSION)


class ArgoSide:
    """The operator's Argo Workflows (see the module docstring)."""

    def __init__(self, operator: Host) -> None:
        self.operator = operator
        self.refused: dict[tuple[str, str], str] = {}
        """Workflows not scheduled, and why: their pods are released as they come."""
        self.pending: dict[tuple[str, str], list[ArgoPod]] = {}
        """Pods seen while their workflow is being admitted (replayed after)."""
        self.unjoined: set[tuple[str, str]] = set()
        """Running Workflows a rebuild read and left to their events (they did not map)."""
        self.templates: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        """(namespace or "", kind, name) -> WorkflowTemplate or ClusterWorkflowTemplate."""
        self.learning = ArgoLearning()
        self.latest: dict[tuple[str, str], Mapping[str, Any]] = {}
        """Each Workflow's body not mapped yet; `next_map`: when it may be (`_remap_soon`)."""
        self.next_map: dict[tuple[str, str], float] = {}
        path = operator.settings.history_file
        if path is not None:  # (a restart keeps what the sink's records taught)
            try:
                self.learning.load(path)
            except (IdlegateError, OSError) as exc:
                log.warning("Argo estimates start without the history %s: %s", path, exc)
        self.active = operator.metrics.active_by_kind

    @property
    def pools(self) -> FeaturePools:
        return self.operator.pools

    @property
    def held(self) -> Mapping[tuple[str, str], ExternalJob]:
        """The Argo Workflows in the pools."""
        return self.pools.held(KIND)

    # -- what is seen ------------------------------------------------------------------------

    def template_seen(self, deleted: bool, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key = (meta.get("namespace", ""), str(body.get("kind")), meta.get("name", ""))
        if deleted:
            self.templates.pop(key, None)
        else:
            self.templates[key] = body

    async def workflow_seen(self, deleted: bool, body: Mapping[str, Any]) -> None:
        fresh = (await self.operator.fresh_pools())[1]
        meta = body.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        phase = (body.get("status") or {}).get("phase")
        gone = deleted or meta.get("deletionTimestamp") or phase in DONE
        if not (fresh or gone or key in self.unjoined):
            return  # (queued as a standby: the rebuild read it later, joined, done or gone)
        wf = self.held.get(key)
        if wf is not None and wf.owner.uid != meta.get("uid"):
            self.pools.handle(Ended(wf.owner))  # (deleted and created again under the name)
            wf = None
        if gone:
            held_in = None if wf is None else self.pools.holder(key, KIND)
            self.pools.handle(Ended(owner_of(body)))  # (never admitted again)
            self.refused.pop(key, None)
            self.latest.pop(key, None)
            self.next_map.pop(key, None)
            self._gauges()
            self.pools.handle(Schedule())
            if phase in DONE and not deleted:
                await self._record(body, wf, held_in)
            return
        if key in self.refused or key in self.pending:
            return
        if wf is None:
            await self._admit(key, body)
        elif self._remap_soon(key, body):
            return
        else:
            await self._remap(key, wf, body)
        self._gauges()
        self.pools.handle(Schedule())

    def _remap_soon(self, key: tuple[str, str], body: Mapping[str, Any]) -> bool:
        """Whether `body`'s remap waits: a map of thousands of steps costs a large part of
        a second and Argo writes the status at each step (`pause_after` the last map); the
        body it maps then is the latest."""
        self.latest[key] = body
        at = self.next_map.get(key, 0.0)
        if at <= self.pools.now():
            return False
        self.pools.timers.arm(f"argo-remap/{'/'.join(key)}", at, lambda: self._remap_latest(key))
        return True

    async def _remap_latest(self, key: tuple[str, str]) -> None:
        body, wf = self.latest.get(key), self.held.get(key)
        if body is None or wf is None or key in self.refused:
            return  # (mapped since, gone or refused)
        if wf.owner.uid == (body.get("metadata") or {}).get("uid"):
            await self._remap(key, wf, body)
            self._gauges()
            self.pools.handle(Schedule())

    async def _remap(self, key: tuple[str, str], wf: ExternalJob, body: Mapping[str, Any]) -> None:
        start = thread_time()
        try:
            mapped = self._map(body)
            self.pools.handle(Join(wf.owner, mapped))
        except DemandTooLargeError as exc:  # (it left the pool)
            await self._refuse(key, body, self._too_large(exc, mapped))
        except IdlegateError as exc:
            log.warning("%s/%s no longer maps (%s): kept as it was.", *key, exc)
        self.latest.pop(key, None)
        self.next_map[key] = self.pools.now() + pause_after(thread_time() - start)

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
        else:
            self.pools.handle(Observed(KIND, key, pod))

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
            self.pools.carry([PostEvent(owner, "Warning", "TemplateMissing", message)])
            self._later(body)
            return
        self.pending[key] = []
        pods = await self._pods(key)
        seen = self.pending.pop(key)
        if pods is None:
            self._later(body)  # (admitted later)
            return
        self._join(key, body, mapped, pods, seen)

    async def _pods(self, key: tuple[str, str]) -> list[ArgoPod] | None:
        """The pods of the Workflow `key`; None if the API cannot list them now."""
        listed = await self.pools.pods(key[0], f"{WORKFLOW_LABEL}={key[1]}")
        if listed is None:
            return None
        return [p for p in (ArgoPod.of(b) for b in listed) if p is not None]

    def _join(
        self,
        key: tuple[str, str],
        body: Mapping[str, Any],
        mapped: ArgoJob,
        pods: Sequence[ArgoPod],
        seen: Sequence[ArgoPod],
    ) -> None:
        """The job of a Workflow joins the pool with its pods, and its Events say so."""
        owner = owner_of(body)
        now = self.pools.now()
        created = parse_time((body.get("metadata") or {}).get("creationTimestamp"))
        arrival = min(now, self.pools.settings.clock.from_wall(created)) if created else now
        namespace = self.operator.namespace(owner.namespace)
        try:
            bridge = self.pools.join(owner, body, namespace, mapped, arrival, pods, seen)
        except (NoPlaceError, AdmitLaterError) as exc:  # (its pods wait, gated)
            if isinstance(exc, NoPlaceError):
                self.pools.carry([PostEvent(owner, "Warning", exc.reason, str(exc))])
            self._later(body)
            return
        except DemandTooLargeError as exc:
            self._refused(key, body, self._too_large(exc, mapped), [*pods, *seen])
            return
        if key not in self.held:  # it finished or went while its pods were listed
            return
        counts = mapped.counts
        guessed = [s.name for s in mapped.live_stages if s.duration_source is DurationSource.PRIOR]
        message = (
            f"Scheduled by idlegate: {counts['stages']} stages, {counts['edges']} edges, "
            f"{counts['tasks']} pods, in the {pool_of(bridge.settings)}."
        )
        self.pools.carry([PostEvent(owner, "Normal", "Accepted", message)])
        if guessed:
            message = (
                f"No history of {mapped.template_key} and no annotation "
                f"idlegate.io/task-duration-seconds for stage(s) {', '.join(guessed[:10])}: "
                f"their pods are estimated at {DEFAULT_PRIOR:g} s each (the prior) until runs "
                "of the template are measured."
            )
            self.pools.carry([PostEvent(owner, "Normal", "Estimated", message)])

    async def restore(self) -> Callable[[], None]:
        """Read the Workflows there are with their pods, and return what joins them: the
        rebuild admits them before its first decision, so that the pods released before
        a restart hold their executors again (their Workflows' events come only after the
        first decision, which could give those executors away). A Workflow that does not
        map now (refused, its templates not seen yet) is left to its event."""
        reads = []
        for namespace in self.pools.settings.namespaces or (None,):
            try:
                bodies = await self.pools.list_objects(API_VERSION, "workflows", namespace)
            except Exception as exc:  # the client's ApiError: it raises nothing else here
                log.warning(
                    "Cannot list Argo's Workflows in %s at the rebuild (%s): each joins the "
                    "pool at its event, its running pods not counted against it until then.",
                    namespace or "every namespace",
                    exc,
                )
                continue
            for body in bodies:
                meta = body.get("metadata") or {}
                key = (meta.get("namespace", ""), meta.get("name", ""))
                phase = (body.get("status") or {}).get("phase")
                gone = phase in DONE or meta.get("deletionTimestamp")
                if gone or key in self.held or key in self.refused:
                    continue
                try:
                    mapped = self._map(body)
                except IdlegateError:
                    self.unjoined.add(key)  # (its event refuses it, or tries it again)
                    continue
                pods = await self._pods(key)
                if pods is not None:
                    reads.append((key, body, mapped, pods))
                else:
                    self.unjoined.add(key)

        def admit() -> None:
            for key, body, mapped, pods in reads:
                if key not in self.held:
                    self._join(key, body, mapped, pods, [])
            self._gauges()

        return admit

    def _later(self, body: Mapping[str, Any]) -> None:
        """See `body` again in `RETRY` seconds (a later event of it may come first)."""
        meta = body.get("metadata") or {}

        async def again() -> None:
            key = (meta.get("namespace", ""), meta.get("name", ""))
            # (unless it went meanwhile, or a later event of it came first)
            if not self.pools.ended(meta.get("uid", "")) and key not in self.held:
                await self.workflow_seen(False, body)

        key = f"argo-admit/{meta.get('namespace')}/{meta.get('name')}"
        self.pools.timers.arm(key, self.pools.now() + RETRY, again)

    def _too_large(self, exc: DemandTooLargeError, mapped: ArgoJob) -> str:
        self.operator.metrics.too_large.labels("argo").inc()
        return too_large(exc, mapped.live_stages)

    async def _refuse(self, key: tuple[str, str], body: Mapping[str, Any], why: str) -> None:
        """Not scheduled: its pods are released as they come, those there already now."""
        pods = await self._pods(key)
        if pods is None:
            self._later(body)  # (tried again)
            return
        self._refused(key, body, why, pods)

    def _refused(
        self, key: tuple[str, str], body: Mapping[str, Any], why: str, pods: Iterable[ArgoPod]
    ) -> None:
        """Not scheduled, its `pods` as listed (and seen since, later ones last): released
        now if gated, the others as they come."""
        self.refused[key] = why
        message = f"Not scheduled by idlegate: {why}. Its pods are released as Argo creates them."
        self.pools.carry([PostEvent(owner_of(body), "Warning", "NotScheduled", message)])
        for pod in {p.name: p for p in pods}.values():
            if pod.gated:
                self._unscheduled(pod, why)

    # -- history ------------------------------------------------------------------------------

    async def _record(
        self, body: Mapping[str, Any], wf: ExternalJob | None, pool: FeaturePool | None = None
    ) -> None:
        """A finished Workflow: learned from, and if it finished while the operator ran (`wf`, its
        job then, in `pool`) into the history sink (one that finished before would be again).

        Its pods' run times are their own: those its job saw end, and for the others (a
        pod whose end comes after the Workflow's, a Workflow that finished before) its
        pods as listed now. A pod whose run time neither tells (deleted unseen, a status
        without its container's times) is left out of the record, and logged."""
        meta = body.get("metadata") or {}
        if str(meta.get("uid", "")) in self.learning.learned:
            return  # (each once: before its pods are listed again)
        key = (meta.get("namespace", ""), meta.get("name", ""))
        ran = dict(wf.ran) if wf is not None else {}
        unknown = succeeded_pods((body.get("status") or {}).get("nodes")) - ran.keys()
        if unknown:
            pods = await self._pods(key) or []
            ran.update((p.node_name, p.ran) for p in pods if p.ran is not None)
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
            pool_size=(pool or self.pools).settings.pool_size,
            ran=ran,
        )
        if record is not None and wf is not None:
            history = (pool or self.pools).history
            # (its first forecast, as a DagWorkflow's record: a restarted pool's calibration)
            made = history_forecast(wf.forecast_made, wf.job.first_start, wf.forecast_replayed)
            record = replace(record, pool=history.pool, forecast=made)
            history.write(record, owner_of(body))

    def _unscheduled(self, pod: ArgoPod, why: str) -> None:
        owner = Owner(pod.namespace, pod.workflow, "", kind=KIND, api_version=API_VERSION)
        self.pools.carry([unscheduled(owner, pod.name, why)])

    def _gauges(self) -> None:
        self.active.labels("argo").set(len(self.held))
        self.active.labels("dagworkflow").set(len(self.operator.pools.workflows))
