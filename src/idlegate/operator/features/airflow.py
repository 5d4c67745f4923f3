"""Airflow's KubernetesExecutor in the operator (``--airflow-url``): its worker pods, gated at
creation (the webhook `/airflow-gate`, or Airflow's pod template), released by their pool's
state machine and policy beside DagWorkflows and Argo's pods. docs/airflow.md,
"Gating Airflow's pods", says what it does; in short:

* a DAG run is admitted at its first pod: its job, read from Airflow's REST API
  (`LiveDags`, off the event loop), joins the pool as an `ExternalJob` owned by the run
  (`run_owner`), restored from the run's pods; each later pod is placed (`place`). Its pool
  is the one its first pod seen routes to (the label ``idlegate.io/pool``, else its
  namespace's ExecutorPool, else the default pool: :mod:`idlegate.api.routing`); a pool that
  does not exist leaves its pods to Airflow, and the run is tried again after `POLL` s;
* the run is read again when a pod of it ends, when a new gated pod of it comes, and every
  `POLL` s (what Airflow skipped or removed leaves the job; a run Airflow ended leaves);
* a read an API error fails is tried again after `RETRIES` (a pod of a task the job does
  not know yet waits at the gate meanwhile); a pod whose run cannot be read (again) goes
  to Airflow's own order with a Warning: none waits on an unknown job;
* a gated pod is released at its `QueuedTimeout.deadline`, before Airflow's
  ``task_queued_timeout`` would delete it and create it again.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from time import thread_time
from typing import TYPE_CHECKING, Any

import kopf
from prometheus_client import Counter

from idlegate.api.notices import pool_of
from idlegate.api.routing import AIRFLOW_KIND, NoPlaceError
from idlegate.api.task_pods import Owner
from idlegate.errors import DemandTooLargeError
from idlegate.integrations.airflow import AirflowClient, AirflowError, read_auth
from idlegate.integrations.airflow_live import (
    NO_RUN,
    NOT_SCHEDULED,
    LiveDags,
    LiveRefusal,
    LiveRun,
    place,
)
from idlegate.integrations.airflow_pods import (
    EXECUTOR_LABEL,
    WORKER,
    AirflowPod,
    QueuedTimeout,
    run_name,
)
from idlegate.operator.core.events import Ended, Join, Observed, Schedule
from idlegate.operator.core.intents import PostEvent
from idlegate.operator.kinds.external import unscheduled
from idlegate.operator.kinds.pairing import too_large
from idlegate.operator.kinds.workflow import AdmitLaterError
from idlegate.operator.lag.pacing import pause_after

if TYPE_CHECKING:
    from idlegate.operator.features.external import FeaturePools, Host

log = logging.getLogger(__name__)

WEBHOOK_ID = "airflow-gate"
KIND = AIRFLOW_KIND
"""The owner kind of an Airflow DAG run in the pool (`run_owner`)."""
SELECTOR = f"{EXECUTOR_LABEL}=True"
"""The pods listed at a run's admission (`AirflowPod.of` keeps the worker pods)."""
POD_LABELS: dict[str, Any] = {WORKER: kopf.PRESENT, EXECUTOR_LABEL: "True"}
"""The labels of the worker pods of Airflow's KubernetesExecutor (kopf's filter)."""
POLL = 30.0
"""Seconds between two reads of a run in the pool, and before a run refused for an API
error is tried again."""
RETRIES = (5.0, 10.0, 20.0)
"""Seconds before each new try of a read an API error failed."""
FLAGS = "--airflow-"
"""How the operator's Airflow flags begin (what the client's messages tell to change)."""

RunKey = tuple[str, str, str]
"""(namespace, dag_id, run_id)."""


def pod_owner(pod: AirflowPod) -> Owner:
    """The pod as the owner of Events."""
    return Owner(pod.namespace, pod.name, pod.uid, kind="Pod", api_version="v1")


def run_owner(key: RunKey, uid: str) -> Owner:
    """The DAG run as the owner of its job and Events (`run_name`): no Kubernetes object, so its
    Events outlive the pods Airflow deletes; `uid`, its first pod's, tells its admissions apart."""
    return Owner(key[0], run_name(*key[1:]), uid, kind=KIND, api_version="airflow.apache.org/v1")


@dataclass
class _Reads:
    """One run's reads: one at a time, each answering every call made before it began."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    asked: int = 0
    answered: int = 0
    failed: LiveRefusal | None = None
    """Why the last read failed (None: it did not)."""
    after: float = 0.0
    """When a refresh may read again (`_refresh`): `pause_after` the last remap, as Argo's."""


class AirflowSide:
    """The operator's Airflow DAG runs (see the module docstring)."""

    def __init__(self, operator: Host) -> None:
        self.operator = operator
        s = operator.settings
        auth = read_auth(s.airflow_username, s.airflow_password_file, s.airflow_token_file, FLAGS)
        self.dags = LiveDags(AirflowClient(str(s.airflow_url), auth, flags=FLAGS))
        self.timeout = QueuedTimeout(s.airflow_queued_timeout, s.airflow_release_margin)
        self.runs: dict[RunKey, LiveRun] = {}
        self.owners: dict[RunKey, Owner] = {}
        self.refused: dict[RunKey, tuple[LiveRefusal, float]] = {}
        """Runs not scheduled: why, and until when (`POLL` after an API error's refusal)."""
        self.pending: dict[RunKey, list[AirflowPod]] = {}
        """Pods seen while their run is being read (placed after)."""
        self.reads: dict[RunKey, _Reads] = {}
        self.problem: str | None = None
        """The API error the last read met, None once a read succeeds (`note`)."""
        self.gated: dict[tuple[str, str], AirflowPod] = {}
        """Gated pods by (namespace, name), as last seen: what a deadline releases."""
        self.released = Counter(
            "idlegate_airflow_releases_total",
            "Airflow worker pods released outside the policy, by reason (QueuedTimeout: "
            "before Airflow's task_queued_timeout; the others: left to Airflow).",
            ["reason"],
            registry=operator.metrics.registry,
        )
        active = operator.metrics.active_by_kind.labels("airflow")
        active.set_function(lambda: len(self.owners))

    @property
    def pools(self) -> FeaturePools:
        return self.operator.pools

    def _from_wall(self, t: float) -> float:
        return self.pools.settings.clock.from_wall(t)

    def _later(self, what: str, key: RunKey, delay: float, fire: Any) -> None:
        self.pools.timers.arm(f"airflow-{what}/{'/'.join(key)}", self.pools.now() + delay, fire)

    def _release(self, pod: AirflowPod, reason: str, message: str) -> None:
        """Leave `pod` to Airflow: its gate removed, a Warning on it saying why."""
        self.gated.pop((pod.namespace, pod.name), None)
        warning = PostEvent(pod_owner(pod), "Warning", reason, message)
        self.pools.carry([unscheduled(pod_owner(pod), pod.name, message), warning])
        self.released.labels(reason).inc()

    # -- what is seen ------------------------------------------------------------------------

    def note(self) -> str | None:
        """What /readyz adds while Airflow's API cannot be read: the operator stays ready
        (its webhook gates every kind's pods), and Airflow's pods go to its own order."""
        return (
            self.problem
            and f"Airflow's API cannot be read, its pods go to its order: {self.problem}"
        )

    async def _probe(self) -> None:
        """Ask Airflow's API for a DAG: a wrong URL or credentials is said at once (a
        Warning, `note`), not at a run's first pod."""
        try:
            await asyncio.to_thread(self.dags.client.get, "dags", {"limit": 1})
        except AirflowError as exc:
            self.problem = str(exc)
            log.warning("Airflow's API cannot be read; its pods are left to it: %s", exc)

    async def restore(self) -> Callable[[], None]:
        """Read the runs of the worker pods there are, and return what admits them: the
        rebuild reads before and admits after its own admissions, with no wait between
        them and its first decision (pods released before a restart hold their executors
        again; a round in a wait could give those executors away). A run an API error
        leaves unread is left to its pods' events."""
        self.pools.timers.arm("airflow-probe", self.pools.now(), self._probe)  # (not waited for)
        by_run: dict[RunKey, list[AirflowPod]] = {}
        first: dict[RunKey, Mapping[str, Any]] = {}
        for namespace in self.pools.settings.namespaces or (None,):
            for body in await self.pools.pods(namespace, SELECTOR) or []:
                pod = AirflowPod.of(body)
                if pod is not None and pod.dag_run is not None:
                    by_run.setdefault((pod.namespace, *pod.dag_run), []).append(pod)
                    first.setdefault((pod.namespace, *pod.dag_run), body)
        reads = [
            (key, await self._read_run(key), pods)
            for key, pods in by_run.items()
            if key not in self.runs and key not in self.refused
            if not all(p.terminal for p in pods)
        ]

        def admit() -> None:
            for key, run, pods in reads:
                if not isinstance(run, LiveRefusal):
                    self._join(key, run, pods, [], first[key])
                elif not run.transient:
                    self._refuse(key, run, pods)

        return admit

    def _track(self, pod: AirflowPod) -> bool:
        """Keep the gated pods, each with its deadline; True for one not kept before."""
        where = (pod.namespace, pod.name)
        new = pod.gated and where not in self.gated
        if pod.gated:
            self._watch_deadline(pod, new)
            self.gated[where] = pod
        else:
            self.gated.pop(where, None)
        return new

    async def pod_seen(self, deleted: bool, body: Mapping[str, Any]) -> None:
        pod = AirflowPod.of(body)
        if pod is None:
            return
        await self.operator.ready_pools()  # (after the rebuild, which restores the runs)
        if deleted and not pod.terminal:  # gone before it ended: its executor is free
            pod = replace(pod, phase="Failed")
        pod = replace(pod, gated=pod.gated and not deleted)
        new = self._track(pod)
        if pod.dag_run is None:
            if pod.gated:
                self._release(pod, NO_RUN, pod.problem or "")
            return
        key = (pod.namespace, *pod.dag_run)
        why, until = self.refused.get(key, (None, 0.0))
        if why is not None and until <= self.pools.now():  # (an API error's: try again)
            del self.refused[key]
            why = None
        if key in self.pending:
            self.pending[key].append(pod)
        elif why is not None:
            if pod.gated:
                self._release(pod, why.reason, str(why))
        elif key in self.runs:
            await self._place(key, pod, new)
        elif not pod.terminal:
            self.pending[key] = [pod]
            await self._admit(key, body)

    async def _place(self, key: RunKey, pod: AirflowPod, new: bool = False, tries: int = 0) -> None:
        verdict = place(self.runs[key], pod)
        if verdict.action == "remap":
            why = await self._read(key)
            if why is None and key in self.runs:
                verdict = place(self.runs[key], pod, remapped=True)
            elif why is not None and why.transient and tries < len(RETRIES):
                # (it waits at the gate meanwhile, as a run's first pods do)
                again = partial(self._place_again, key, (pod.namespace, pod.name), tries + 1)
                self._later(f"place/{pod.name}", key, RETRIES[tries], again)
                return
            else:
                why = why or LiveRefusal(NO_RUN, "it left the pool")
                message = f"DAG run {key[1]}/{key[2]} cannot be read again: {why}"
                verdict = replace(verdict, action="release", reason=why.reason, message=message)
        if verdict.action == "release":
            if pod.gated and (pod.namespace, pod.name) in self.gated:  # (not released since)
                self._release(pod, verdict.reason, verdict.message)
            return
        owner = self.owners[key]
        self.pools.handle(Observed(KIND, (owner.namespace, owner.name), pod))
        self._maybe_done(key)
        if key in self.runs and (new or pod.terminal):  # (what Airflow decided since)
            await self._refresh(key)

    async def _place_again(self, key: RunKey, where: tuple[str, str], tries: int) -> None:
        """Place a gated pod again whose task the job did not know when a read failed."""
        pod = self.gated.get(where)
        if pod is None:  # (released or gone since)
            return
        if key in self.runs:
            await self._place(key, pod, tries=tries)
        else:
            message = f"DAG run {key[1]}/{key[2]} left the pool before its pod could be placed"
            self._release(pod, NO_RUN, message)

    # -- reads -------------------------------------------------------------------------------

    async def _read_run(self, key: RunKey) -> LiveRun | LiveRefusal:
        try:
            run = await asyncio.to_thread(self.dags.run, key[1], key[2], self.pools.now())
        except LiveRefusal as exc:
            if not exc.transient:  # (a fact about the run)
                log.info("Cannot read DAG run %s/%s: %s", *key[1:], exc)
            elif self.problem is None:  # (an outage is said once, and its end: `_readable`)
                log.info("Cannot read DAG run %s/%s now: %s", *key[1:], exc)
            self.problem = exc.problem if exc.transient else self.problem
            return exc
        self._readable()
        return run

    def _readable(self) -> None:
        """A read succeeded: the API error said before is over."""
        if self.problem is not None:
            log.info("Airflow's API can be read again.")
        self.problem = None

    async def _read(self, key: RunKey) -> LiveRefusal | None:
        """Read the run in the pool again: its new job replaces the old (`_Reads`); why
        it failed, if it did."""
        reads = self.reads.setdefault(key, _Reads())
        reads.asked += 1
        asked = reads.asked
        async with reads.lock:
            if reads.answered < asked and key in self.runs:
                reads.answered = reads.asked
                run = await self._read_run(key)
                reads.failed = run if isinstance(run, LiveRefusal) else None
                if not isinstance(run, LiveRefusal) and key in self.runs:
                    self.runs[key] = run
                    start = thread_time()
                    try:
                        self.pools.handle(Join(self.owners[key], run.job))  # (remapped)
                    except DemandTooLargeError as exc:  # (it left the pool)
                        gated = [p for p in self.gated.values() if _run_of(p) == key]
                        self._too_large(key, run, exc, gated)
                    reads.after = self.pools.now() + pause_after(thread_time() - start)
                    self._maybe_done(key)
            return reads.failed

    async def _refresh(self, key: RunKey, tries: int = 0) -> None:
        """Read the run again, tried again after an API error, else release its pods."""
        after = self.reads[key].after if key in self.reads else 0.0
        if after > self.pools.now():  # (one refresh then, of what changed until then)
            self._later("read", key, after - self.pools.now(), partial(self._refresh, key))
            return
        why = await self._read(key)
        if why is None or key not in self.runs:
            return
        if why.transient and tries < len(RETRIES):
            self._later("read", key, RETRIES[tries], partial(self._refresh, key, tries + 1))
            return
        message = (
            f"DAG run {key[1]}/{key[2]} cannot be read again, so its gated pods are released "
            f"to Airflow's own order: {why}"
        )
        for pod in list(self.gated.values()):
            if _run_of(pod) == key:
                self._release(pod, why.reason, message)

    def _poll(self, key: RunKey) -> None:
        """Read the run again every `POLL` seconds (Airflow may skip a task, or fail the
        run, with no pod of it changing)."""

        async def again() -> None:
            if key in self.runs:
                await self._refresh(key)
            if key in self.runs:
                self._poll(key)

        self._later("poll", key, POLL, again)

    # -- admission and end ---------------------------------------------------------------------

    async def _admit(self, key: RunKey, body: Mapping[str, Any], tries: int = 0) -> None:
        """Read the run of the pods seen (`pending`, the first of them `body`) and join it
        to its pool."""
        run = await self._read_run(key)
        listed = None if isinstance(run, LiveRefusal) else await self.pools.pods(key[0], SELECTOR)
        if isinstance(run, LiveRefusal) or listed is None:
            unlisted = "its pods cannot be listed from Kubernetes's API now"
            why = run if isinstance(run, LiveRefusal) else LiveRefusal("NotListed", unlisted)
            if why.transient and tries < len(RETRIES):
                self._later(
                    "admit", key, RETRIES[tries], partial(self._admit, key, body, tries + 1)
                )
            else:
                self._refuse(key, why, self.pending.pop(key))
            return
        seen = self.pending.pop(key)
        pods = [p for p in map(AirflowPod.of, listed) if p is not None and p.dag_run == key[1:]]
        self._join(key, run, pods, seen, body)
        self.pools.handle(Schedule())

    def _refuse(self, key: RunKey, why: LiveRefusal, pods: list[AirflowPod]) -> None:
        """Not scheduled: its gated pods are released, now and as they come."""
        self.refused[key] = (why, self.pools.now() + POLL if why.transient else math.inf)
        for pod in pods:
            if pod.gated:
                self._release(pod, why.reason, str(why))

    def _join(
        self,
        key: RunKey,
        run: LiveRun,
        pods: list[AirflowPod],
        seen: list[AirflowPod],
        body: Mapping[str, Any],
    ) -> None:
        """The run joins its pool (the one its pod `body` routes to) with its `pods` listed
        and those `seen` since."""
        pods = [*pods, *run.done_pods(key[0], pods)]  # (Airflow deleted the pods of tasks done)
        every = {p.name: p for p in [*pods, *seen]}  # (a pod seen since: as it is now)
        first = min((p for p in every.values() if p.uid), key=lambda p: (p.created or 0, p.name))
        owner = run_owner(key, first.uid)
        verdicts = {name: place(run, p, remapped=True) for name, p in every.items()}
        for name, pod in every.items():
            verdict = verdicts[name]
            if verdict.action != "schedule" and pod.gated:
                self._release(pod, verdict.reason or "DagChanged", verdict.message)
        ok = [p for p in pods if verdicts[p.name].action == "schedule"]
        later = [p for p in seen if verdicts[p.name].action == "schedule"]
        now = self.pools.now()
        arrival = min(now, self._from_wall(run.arrival)) if run.arrival is not None else now
        self.runs[key], self.owners[key] = run, owner
        namespace = self.operator.namespace(key[0])
        try:
            pool = self.pools.join(owner, body, namespace, run.job, arrival, ok, later)
        except DemandTooLargeError as exc:
            self._too_large(key, run, exc, [*ok, *later])
            return
        except (AdmitLaterError, NoPlaceError) as exc:
            self.runs.pop(key, None)
            self.owners.pop(key, None)
            why = (  # (AdmitLaterError: tried again after POLL, as an API error's)
                LiveRefusal(exc.reason, exc.left_to("Airflow"))  # (or QueueNotFoundError's)
                if isinstance(exc, NoPlaceError)
                else LiveRefusal("NamespaceNotSeen", str(exc))
            )
            self._refuse(key, why, [*ok, *later])  # (the others are released above)
            return
        self._poll(key)
        n = run.job.counts
        said = (
            f"DAG run {key[1]}/{key[2]} scheduled by idlegate: {n['stages']} stages, {n['edges']} "
            f"edges, {n['tasks']} pods, in the {pool_of(pool.settings)}."
        )
        self.pools.carry([PostEvent(owner, "Normal", "Accepted", " ".join([said, *run.notes]))])
        for pod in ok:
            self._track(pod)
        self._maybe_done(key)

    def _too_large(
        self, key: RunKey, run: LiveRun, exc: DemandTooLargeError, pods: list[AirflowPod]
    ) -> None:
        """A stage of the run could never fit the pool: it is not scheduled, its gated
        `pods` released now, the others as they come."""
        self.runs.pop(key, None)
        self.owners.pop(key, None)
        self.operator.metrics.too_large.labels("airflow").inc()
        why = f"DAG run {key[1]}/{key[2]}: {too_large(exc, run.job.live_stages)}"
        refusal = LiveRefusal(NOT_SCHEDULED, f"{why}; its pods are left to Airflow")
        self._refuse(key, refusal, list({p.name: p for p in pods}.values()))  # (each once)

    def _maybe_done(self, key: RunKey) -> None:
        """End the run once its job is done, or once Airflow said it ended and none of its
        pods runs (a pod tearing down after its task reported holds its executor)."""
        wf = self._job(key)
        if key in self.owners and (
            wf is None or wf.job.finish is not None or (self.runs[key].over and not wf.running)
        ):
            self._end(key)

    def _job(self, key: RunKey) -> Any:
        """The run's `ExternalJob` in the pool, if it is."""
        owner = self.owners.get(key)
        return owner and self.pools.held(KIND).get((owner.namespace, owner.name))

    def _end(self, key: RunKey) -> None:
        owner = self.owners.pop(key, None)
        self.runs.pop(key, None)
        self.reads.pop(key, None)
        if owner is not None:
            self.pools.handle(Ended(owner))
            self.pools.handle(Schedule())

    # -- the pending timeout -----------------------------------------------------------------

    def _waiting(self, pod: AirflowPod) -> bool:
        """`pod` is still to be released: waiting in its run's job, or its run not in the
        pool (a pod event may not have told yet that a release took effect)."""
        wf = self._job((pod.namespace, *pod.dag_run)) if pod.dag_run else None
        return wf is None or any(p.name == pod.name for queue in wf.waiting for p in queue)

    def _watch_deadline(self, pod: AirflowPod, new: bool) -> None:
        """Release `pod` at its deadline if it is still gated then."""
        if not new:
            return
        where = (pod.namespace, pod.name)
        run = self.runs.get((pod.namespace, *pod.dag_run)) if pod.dag_run else None
        queued = None
        if run is not None and pod.task_id is not None and pod.try_number is not None:
            queued = run.queued.get((pod.task_id, pod.map_index, pod.try_number))
        at = self.timeout.deadline(pod, self.pools.now(), queued, self._from_wall)

        async def due() -> None:
            still = self.gated.get(where)
            if still is None or still.uid != pod.uid or not self._waiting(still):
                return
            message = self.timeout.released_message(still, self.pools.now(), self._from_wall)
            self._release(still, "QueuedTimeout", message)

        self.pools.timers.arm(f"airflow-deadline/{pod.namespace}/{pod.name}", at, due)


def _run_of(pod: AirflowPod) -> RunKey | None:
    return None if pod.dag_run is None else (pod.namespace, *pod.dag_run)
