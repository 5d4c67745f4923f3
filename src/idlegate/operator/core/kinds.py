"""The job kinds one pool schedules (Kueue's ``GenericJob``): what a workflow of each kind
does at each step of the state machine, behind one protocol, :class:`JobKind`.

The core (:class:`~.core.Core`) holds every kind's workflows the same way: a job in the
pool's :class:`~idlegate.sim.cluster.Cluster` whose payload is the workflow, found by
its :class:`~.pods.Owner` (kind, namespace, name, uid: ``Core.holding``). Each step that
differs by kind is a method of the workflow, given the core as a :class:`Pool`:
``observe`` (a pod of it as it is now, level-triggered, read as its kind reads pods),
``launched`` (the policy launched tasks of a stage), ``adopted`` (a task that ran beyond
the pool, or a gang's task without a pod, `token` None, has an executor now),
``idle_started`` and ``idle_ended`` (a stage's idle slot began, its timer fired: the
timer is the core's), ``confirmed`` and ``refused`` (a write for it was carried out,
refused for good) and ``dropped``
(it left the pool; the core then takes its job out and forgets it).

:class:`~.admission.DagWorkflow` is idlegate's own kind: the core creates its task pods
gated, it keeps their bookkeeping (:mod:`.tracking`), and it is admitted from its body
and pods (``Admit``); its history record is the ``Finished`` fact.
:class:`ExternalWorkflow` is any kind whose pods another controller creates, gated at
creation by idlegate's webhook (Argo's Workflows; Airflow's worker pods): its
:class:`~.external.ExternalJob` pairs the launches with those pods. Such a kind brings
its mapping of a workflow (:class:`~.external.Mapped`), its reading of a pod
(:class:`~.external.ExternalPod`) and a feature that hands them in as ``Join``,
``Observed`` and ``Ended`` events; its history record is the feature's
(``ExternalJob.ran`` keeps its pods' run times). A third such kind needs nothing new here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from idlegate.api.status import SlotState
from idlegate.errors import IdlegateError
from idlegate.operator.core.external import ExternalJob, ExternalPod, Mapped, Release
from idlegate.operator.core.intents import Confirmed, Outbox, Refused, RemoveGate
from idlegate.operator.core.pods import Owner
from idlegate.operator.core.tracking import Workflow, timer_key
from idlegate.operator.metrics import Metrics
from idlegate.operator.settings import Settings
from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import Job, Launch

log = logging.getLogger(__name__)


class Pool(Protocol):
    """What a kind uses of the core that holds it (:class:`~.core.Core`)."""

    cluster: Cluster
    intents: Outbox
    settings: Settings
    metrics: Metrics
    spec: str | None

    def now(self) -> float: ...
    def schedule(self) -> None: ...
    def adopt(self, launches: list[tuple[Launch, Any]]) -> None: ...
    def forget(self, namespace: str, name: str, uid: str | None) -> None: ...
    def deadline_dropped(self, wf: Workflow) -> None: ...
    def drop(self, wf: JobKind) -> None: ...
    def end(self, uid: str) -> None: ...


class JobKind(Protocol):
    """One workflow in the pool, of any kind: what the core asks of it (see the module
    docstring). Its job's payload is the workflow itself."""

    owner: Owner
    active: bool
    """In the pool (False once dropped: late timers and events find nothing to do)."""
    noted: set[str]
    """Stages whose wait for an executor an Event said (once each)."""

    @property
    def job(self) -> Job: ...
    def observe(self, pool: Pool, pod: Any, *, deleted: bool = False) -> None: ...
    def launched(self, pool: Pool, stage: int, launches: list[Launch], rule: str) -> None: ...
    def adopted(self, pool: Pool, launch: Launch, token: Any) -> None: ...
    def idle_started(self, pool: Pool, stage: int, slot: SlotState) -> None: ...
    def idle_ended(self, pool: Pool, stage: int) -> None: ...
    def confirmed(self, pool: Pool, outcome: Confirmed) -> None: ...
    def refused(self, pool: Pool, outcome: Refused) -> None: ...
    def dropped(self, pool: Pool) -> None: ...


@dataclass(eq=False)
class ExternalWorkflow(JobKind):
    """A workflow whose pods another controller creates, as a :class:`JobKind`: its job
    and pods as its :class:`~.external.ExternalJob` pairs them. The core only releases
    its pods (and says why on the workflow, `owner`); its idle slots persist nothing (a
    restart maps it again from its controller's state) and its controller deletes its
    pods."""

    owner: Owner
    live: ExternalJob
    noted: set[str] = field(default_factory=set)
    active: bool = True

    def __post_init__(self) -> None:
        self.live.payload = self  # (what the cluster's job carries)

    @property
    def job(self) -> Job:
        """Its job now (`ExternalJob.remap` replaces it as the controller settles it)."""
        return self.live.job

    def remap(self, pool: Pool, mapped: Mapped) -> None:
        """Its controller settled more of it: the job `mapped` replaces the current one."""
        job = self.job
        try:
            releases = self.live.remap(pool.cluster, mapped, pool.now())
        except IdlegateError as exc:
            log.warning("%s/%s no longer maps (%s): kept as it was.", *self.live.key, exc)
            return
        if self.job is not job:  # a new job: its idle slots' timers are set under its indexes
            for stage in job.stages:
                if stage.idle_until is not None:
                    pool.intents.cancel_timer(timer_key(self.owner, stage.index))
        self._release(pool, releases)
        for pod in self.live.take_unplaced():
            why = "its task is no stage of the job idlegate mapped"
            unscheduled(pool.intents, self.owner, pod.name, why)

    def observe(self, pool: Pool, pod: ExternalPod, *, deleted: bool = False) -> None:
        # (a pod deleted before it ended comes as Failed: its executor is free)
        self._release(pool, self.live.observe(pool.cluster, pod, pool.now()))

    def launched(self, pool: Pool, stage: int, launches: list[Launch], rule: str) -> None:
        self._release(pool, self.live.launched(launches))

    def adopted(self, pool: Pool, launch: Launch, token: Any) -> None:
        self._release(pool, self.live.adopted(pool.cluster, [(launch, token)], pool.now()))

    def refused(self, pool: Pool, outcome: Refused) -> None:
        refused_release(pool.intents, outcome)

    def _release(self, pool: Pool, releases: Iterable[Release]) -> None:
        """Remove each paired pod's gate, recording its executor on it."""
        for r in releases:
            pool.intents.add(RemoveGate(self.owner, r.stage, 0, 0, r.pod, r.executor, None))


def unscheduled(intents: Outbox, owner: Owner, pod: str, why: str) -> None:
    """Release the gated `pod` of `owner` unscheduled (no stage takes it), saying why."""
    intents.add(RemoveGate(owner, "", 0, 0, pod, None, None))
    log.warning("Released pod %s/%s unscheduled: %s.", owner.namespace, pod, why)


def refused_release(intents: Outbox, outcome: Refused) -> None:
    """A gate removal of a pod another controller made was refused: a Warning on its
    workflow, which goes on (the controller may delete or recreate the pod)."""
    intent = outcome.intent
    message = f"Cannot release pod {getattr(intent, 'name', '?')}: {outcome.message}"
    intents.event(intent.owner, "Warning", "PodError", message)
