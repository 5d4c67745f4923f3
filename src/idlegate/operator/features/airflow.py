"""Airflow's KubernetesExecutor in the operator (``--airflow-url``; docs/airflow.md, "Gating
Airflow's pods"): its worker pods gated at creation, released by the default pool's state
machine and policy beside DagWorkflows and Argo's pods.

* **Gate.** The admission webhook (kopf's server, path ``/airflow-gate``) adds
  ``idlegate.io/release`` to each worker pod (`gates_with_ours`), as Airflow's pod template
  may too (a ``schedulingGates`` entry in ``pod_template_file``).
* **Job.** A DAG run is admitted when its first pod is seen: its job is read from Airflow's
  REST API (`LiveDags`, off the event loop) and joins the pool as an `ExternalJob`
  whose owner is that first pod (Events about the run go on it), restored from the run's
  pods listed then. Each later pod is placed (`place`): its stage takes it, the run is read
  again (a mapped task Airflow expanded), or it is left to Airflow with a Warning on it.
* **The pending timeout.** A gated pod is released at its `QueuedTimeout.deadline`,
  beyond the pool if need be, with a Warning on the pod and
  ``idlegate_airflow_releases_total{reason="QueuedTimeout"}``, before Airflow's
  ``task_queued_timeout`` would delete it and create it again.
* **End.** A run leaves the pool when its job is done, or when Airflow says it ended
  (asked every `POLL` seconds while it is in the pool).

A run that cannot be read (API unreachable, credentials refused, no such run, a DAG that
changed under it) is not scheduled: its pods are released as they come, each with a
Warning saying why (`LiveRefusal`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import kopf
from prometheus_client import Counter

from idlegate.api.task_pods import Owner
from idlegate.integrations.airflow import AirflowClient, AirflowError, read_auth
from idlegate.integrations.airflow_live import LiveDags, LiveRefusal, LiveRun, place
from idlegate.integrations.airflow_pods import (
    EXECUTOR_LABEL,
    WORKER,
    AirflowPod,
    QueuedTimeout,
    gates_with_ours,
)
from idlegate.operator.core.events import Ended, Join, Observed, Schedule
from idlegate.operator.core.external import unscheduled
from idlegate.operator.core.intents import Outbox
from idlegate.operator.features.gates import gate_pods

if TYPE_CHECKING:
    from idlegate.operator.features.argo import Host, Pool

log = logging.getLogger(__name__)

WEBHOOK_ID = "airflow-gate"
KIND = "Pod"
"""The owner kind of an Airflow DAG run in the pool: its first pod (Events go on it)."""
SELECTOR = f"{EXECUTOR_LABEL}=True"
"""The pods listed at a run's admission (`AirflowPod.of` keeps the worker pods)."""
POLL = 60.0
"""Seconds between two questions to Airflow whether a run in the pool has ended."""

RunKey = tuple[str, str, str]
"""(namespace, dag_id, run_id)."""


def _first(pod: AirflowPod) -> tuple[float, str]:
    """The order of a run's pods by creation: the first is the run's owner."""
    return (pod.created or 0.0, pod.name)


def pod_owner(pod: AirflowPod) -> Owner:
    """The pod as the owner of Events (and, for a run's first pod, of the run's job)."""
    return Owner(pod.namespace, pod.name, pod.uid, kind=KIND, api_version="v1")


class AirflowSide:
    """The operator's Airflow DAG runs (see the module docstring)."""

    def __init__(self, operator: Host) -> None:
        self.operator = operator
        settings = operator.settings
        auth = read_auth(
            settings.airflow_username, settings.airflow_password_file, settings.airflow_token_file
        )
        self.dags = LiveDags(AirflowClient(str(settings.airflow_url), auth))
        self.timeout = QueuedTimeout(
            settings.airflow_queued_timeout, settings.airflow_release_margin
        )
        self.runs: dict[RunKey, LiveRun] = {}
        self.owners: dict[RunKey, Owner] = {}
        self.refused: dict[RunKey, LiveRefusal] = {}
        self.pending: dict[RunKey, list[AirflowPod]] = {}
        """Pods seen while their run is being read (placed after)."""
        self.over: set[RunKey] = set()
        """Runs Airflow says ended, in the pool until their pods that run have ended."""
        self.gated: dict[tuple[str, str], AirflowPod] = {}
        """Gated pods by (namespace, name), as last seen: what a deadline releases."""
        self.released = Counter(
            "idlegate_airflow_releases_total",
            "Airflow worker pods released outside the policy, by reason (QueuedTimeout: "
            "before Airflow's task_queued_timeout; the others: left to Airflow).",
            ["reason"],
            registry=operator.metrics.registry,
        )

    @property
    def bridge(self) -> Pool:
        return self.operator.pools.default

    def _from_wall(self, t: float) -> float:
        return self.bridge.settings.clock.from_wall(t)

    def _say(self, owner: Owner, type_: str, reason: str, message: str) -> None:
        box = Outbox()
        box.event(owner, type_, reason, message)
        self.bridge.carry(box.take())

    def _release(self, pod: AirflowPod, reason: str, message: str) -> None:
        """Leave `pod` to Airflow: its gate removed, a Warning on it saying why."""
        self.gated.pop((pod.namespace, pod.name), None)
        box = Outbox()
        unscheduled(box, pod_owner(pod), pod.name, message)
        box.event(pod_owner(pod), "Warning", reason, message)
        self.bridge.carry(box.take())
        self.released.labels(reason).inc()

    # -- what is seen ------------------------------------------------------------------------

    async def restore(self) -> Callable[[], None]:
        """Read the runs of the worker pods there are, and return what admits them: the
        rebuild reads before and admits after its own admissions, with no wait between
        them and its first decision (pods released before a restart hold their executors
        again; a round in a wait could give those executors away)."""
        by_run: dict[RunKey, list[AirflowPod]] = {}
        for namespace in self.bridge.settings.namespaces or (None,):
            listed = await self.bridge.pods(namespace, SELECTOR)  # type: ignore[arg-type]
            for pod in filter(None, map(AirflowPod.of, listed or [])):
                if pod.dag_run is not None:
                    by_run.setdefault((pod.namespace, *pod.dag_run), []).append(pod)
        reads = [
            (key, await self._read_run(key), pods)
            for key, pods in by_run.items()
            if key not in self.runs and key not in self.refused
            if not all(p.terminal for p in pods)
        ]

        def admit() -> None:
            for key, run, pods in reads:
                if isinstance(run, LiveRefusal):
                    self._refuse(key, run, pods)
                else:
                    self._join(key, run, pods, [])

        return admit

    def _track(self, pod: AirflowPod) -> None:
        """Keep the gated pods (what a deadline releases), each with its deadline."""
        where = (pod.namespace, pod.name)
        if pod.gated:
            self._watch_deadline(pod, where not in self.gated)
            self.gated[where] = pod
        else:
            self.gated.pop(where, None)

    async def pod_seen(self, deleted: bool, body: Mapping[str, Any]) -> None:
        pod = AirflowPod.of(body)
        if pod is None:
            return
        await self.operator.ready_pools()  # (after the rebuild, which restores the runs)
        if deleted and not pod.terminal:  # gone before it ended: its executor is free
            pod = replace(pod, phase="Failed", gated=False)
        self._track(replace(pod, gated=pod.gated and not deleted))
        if pod.dag_run is None:
            if pod.gated and not deleted:
                self._release(pod, "NoDagRun", pod.problem or "")
            return
        key = (pod.namespace, *pod.dag_run)
        if key in self.pending:
            self.pending[key].append(pod)
        elif key in self.refused:
            if pod.gated and not deleted:
                self._release(pod, self.refused[key].reason, str(self.refused[key]))
        elif key in self.runs:
            await self._place(key, pod)
        elif not pod.terminal:
            await self._admit(key, pod)

    async def _place(self, key: RunKey, pod: AirflowPod, *, remapped: bool = False) -> None:
        verdict = place(self.runs[key], pod, remapped=remapped)
        if verdict.action == "release":
            if pod.gated:
                self._release(pod, verdict.reason, verdict.message)
        elif verdict.action == "remap":
            if await self._read(key):
                await self._place(key, pod, remapped=True)
        else:
            owner = self.owners[key]
            self.bridge.handle(Observed(KIND, (owner.namespace, owner.name), pod))
            self._maybe_done(key)

    async def _read(self, key: RunKey) -> bool:
        """Read the run again (Airflow settled more of it): its job replaces the old."""
        run = await self._read_run(key)
        if isinstance(run, LiveRefusal):
            log.warning("DAG run %s/%s cannot be read again (%s): kept as it was.", *key[1:], run)
            return False
        self.runs[key] = run
        self.bridge.handle(Join(self.owners[key], run.job))  # (in the pool: its new job)
        return True

    # -- admission and end ---------------------------------------------------------------------

    async def _read_run(self, key: RunKey) -> LiveRun | LiveRefusal:
        try:
            return await asyncio.to_thread(self.dags.run, key[1], key[2], self.bridge.now())
        except LiveRefusal as exc:
            return exc

    def _refuse(self, key: RunKey, why: LiveRefusal, pods: list[AirflowPod]) -> None:
        """Not scheduled: its gated pods are released, now and as they come."""
        self.refused[key] = why
        for pod in pods:
            if pod.gated:
                self._release(pod, why.reason, str(why))

    async def _admit(self, key: RunKey, first: AirflowPod) -> None:
        self.pending[key] = [first]
        run = await self._read_run(key)
        if isinstance(run, LiveRefusal):
            self._refuse(key, run, self.pending.pop(key))
            return
        listed = await self.bridge.pods(key[0], SELECTOR)
        seen = self.pending.pop(key)
        if listed is None:  # (the API cannot list them now: the next pod event tries again)
            return
        pods = [p for p in map(AirflowPod.of, listed) if p is not None and p.dag_run == key[1:]]
        self._join(key, run, pods, seen)
        self.bridge.handle(Schedule())

    def _join(
        self, key: RunKey, run: LiveRun, pods: list[AirflowPod], seen: list[AirflowPod]
    ) -> None:
        """The run joins the pool with its `pods` listed and those `seen` since."""
        pods = [*pods, *run.done_pods(key[0], pods)]  # (Airflow deleted the pods of tasks done)
        every = {p.name: p for p in [*pods, *seen]}  # (a pod seen since: as it is now)
        owner = pod_owner(min((p for p in every.values() if p.uid), key=_first))
        verdicts = {name: place(run, p, remapped=True) for name, p in every.items()}
        for name, pod in every.items():
            verdict = verdicts[name]
            if verdict.action != "schedule" and pod.gated:
                self._release(pod, verdict.reason or "DagChanged", verdict.message)
        ok = [p for p in pods if verdicts[p.name].action == "schedule"]
        later = [p for p in seen if verdicts[p.name].action == "schedule"]
        now = self.bridge.now()
        arrival = min(now, self._from_wall(run.arrival)) if run.arrival is not None else now
        self.runs[key], self.owners[key] = run, owner
        self.bridge.handle(Join(owner, run.job, arrival, ok, later))
        self._poll(key)
        counts = run.job.counts
        message = (
            f"DAG run {key[1]}/{key[2]} scheduled by idlegate: {counts['stages']} stages, "
            f"{counts['edges']} edges, {counts['tasks']} pods, in the pool of "
            f"{self.bridge.settings.pool_size} executors."
        )
        self._say(owner, "Normal", "Accepted", " ".join([message, *run.notes]))
        for pod in ok:
            self._track(pod)
        self._maybe_done(key)

    def _maybe_done(self, key: RunKey) -> None:
        """End the run once its job is done, or once Airflow said it ended and none of its
        pods runs (a pod tearing down after its task reported holds its executor)."""
        owner = self.owners.get(key)
        if owner is None:
            return
        wf = self.bridge.core.held.get(KIND, {}).get((owner.namespace, owner.name))
        if wf is None or wf.job.finish is not None or (key in self.over and not wf.running):
            self._end(key)

    def _end(self, key: RunKey) -> None:
        owner = self.owners.pop(key, None)
        self.runs.pop(key, None)
        self.over.discard(key)
        if owner is not None:
            self.bridge.handle(Ended(owner))
            self.bridge.handle(Schedule())

    def _poll(self, key: RunKey) -> None:
        """Ask Airflow every `POLL` seconds whether the run ended (failed runs leave tasks
        that never get a pod)."""

        async def ask() -> None:
            if key not in self.runs:
                return
            try:
                found = await asyncio.to_thread(self.dags.client.dag_run, key[1], key[2])
            except AirflowError as exc:
                log.info("Cannot ask Airflow about run %s/%s now (%s).", *key[1:], exc)
                found = {}
            if found.get("state") in ("success", "failed"):
                self.over.add(key)
                self._maybe_done(key)
            elif key in self.runs:
                self._poll(key)

        self.bridge.later(f"airflow-poll/{'/'.join(key)}", self.bridge.now() + POLL, ask)

    # -- the pending timeout -----------------------------------------------------------------

    def _waiting(self, pod: AirflowPod) -> bool:
        """`pod` is still to be released: waiting in its run's job, or its run not in the
        pool (a pod event may not have told yet that a release took effect)."""
        owner = self.owners.get((pod.namespace, *pod.dag_run)) if pod.dag_run else None
        held = self.bridge.core.held.get(KIND, {})
        wf = held.get((owner.namespace, owner.name)) if owner is not None else None
        if wf is None:
            return True
        return any(p.name == pod.name for queue in wf.waiting for p in queue)

    def _watch_deadline(self, pod: AirflowPod, new: bool) -> None:
        """Release `pod` at its deadline if it is still gated then."""
        if not new:
            return
        where = (pod.namespace, pod.name)
        run = self.runs.get((pod.namespace, *pod.dag_run)) if pod.dag_run else None
        queued = None
        if run is not None and pod.task_id is not None and pod.try_number is not None:
            queued = run.queued.get((pod.task_id, pod.map_index, pod.try_number))
        at = self.timeout.deadline(pod, self.bridge.now(), queued, self._from_wall)

        async def due() -> None:
            still = self.gated.get(where)
            if still is None or still.uid != pod.uid or not self._waiting(still):
                return
            message = self.timeout.released_message(still, self.bridge.now(), self._from_wall)
            self._release(still, "QueuedTimeout", message)

        self.bridge.later(f"airflow-deadline/{pod.namespace}/{pod.name}", at, due)


def register(registry: kopf.OperatorRegistry, operator: Host) -> None:
    """Add the Airflow handlers to the operator's registry (nothing without
    ``--airflow-url``)."""
    settings = operator.settings
    if settings.airflow_url is None:
        return
    labels = {WORKER: kopf.PRESENT, EXECUTOR_LABEL: "True"}
    if settings.webhook_port is not None:
        gate_pods(registry, WEBHOOK_ID, labels, gates_with_ours)
    side = AirflowSide(operator)
    operator.restorers.append(side.restore)

    @kopf.on.event("v1", "pods", registry=registry, id="airflow-pods", labels=labels)
    async def pod_event(type: str | None, event: kopf.RawEvent, **_: Any) -> None:
        await side.pod_seen(type == "DELETED", event["object"])
