"""The job kinds one pool schedules (Kueue's ``GenericJob``): what a workflow of each kind
does at each step of the state machine, behind one protocol, :class:`JobKind`.

The core (:class:`~idlegate.operator.core.core.Core`) holds every kind's workflows the
same way: a job in the pool's :class:`~idlegate.sim.cluster.Cluster` whose payload is the
workflow, found by its :class:`~idlegate.api.task_pods.Owner` (kind, namespace, name,
uid: ``Core.holding``). Each step that differs by kind is a method of the workflow,
given the core as a :class:`Pool`: ``observe`` (a pod of it as it is now,
level-triggered, read as its kind reads pods), ``launched`` (the policy launched tasks of
a stage), ``adopted`` (a task that ran beyond the pool, or a gang's task without a pod,
`token` None, has an executor now), ``idle_started`` and ``idle_ended`` (a stage's idle
slot began, its timer fired: the timer is the core's), ``confirmed`` and ``refused`` (a
write for it was carried out, refused for good), ``dropped`` (it left the pool; the core
then takes its job out and forgets it), ``unfit_changed`` (a stage no node can hold, or
one again: ``unfit``), and ``evict`` and ``evicted`` (stop a running task of it, its
eviction answered: why not, or the work it lost; `idlegate.api.eviction`). A step adds
its writes to the pool's intents and hands back what the pool is to do next
(:class:`Then`: a round, or forgetting the workflow); it never calls the pool's round.

:class:`~.workflow.DagWorkflow` is idlegate's own kind: the core creates its task pods
gated, it keeps their bookkeeping (:mod:`idlegate.operator.core.tracking`), and it is
admitted from its body and pods (``Admit``); its history record is the ``Finished``
fact. :class:`~.external.ExternalJob` is any kind whose pods another controller creates,
gated at creation by idlegate's webhook (Argo's Workflows; Airflow's worker pods): it
pairs the launches with those pods (:mod:`.pairing`). Such a kind brings its mapping of
a workflow (:class:`idlegate.sim.external.Mapped`), its reading of a pod
(:class:`idlegate.api.external_pods.ExternalPod`) and a feature that hands them in as
``Join``, ``Observed`` and ``Ended`` events; its history record is the feature's
(``ExternalJob.ran`` keeps its pods' run times). A third such kind needs nothing new
here.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Protocol

from idlegate.api.settings import Settings
from idlegate.api.status import SlotState
from idlegate.api.task_pods import Owner
from idlegate.operator.core.evictions import Evictions
from idlegate.operator.core.intents import Confirmed, EvictPod, Outbox, Refused
from idlegate.operator.core.tracking import Workflow
from idlegate.operator.metrics import Metrics
from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import Job, Launch
from idlegate.sim.task_times import TaskTimes


class Then(Enum):
    """What a kind's step hands the pool to do next, besides the intents it added: a kind
    never calls back into the pool's round (`Core.schedule`); the core does what it is
    handed (`Core.then`)."""

    ROUND = "round"
    """A round: the step freed executors, or changed what may start."""
    FORGET = "forget"
    """Forget the workflow: it is gone from the API (a write found it so), and a round."""


class Pool(Protocol):
    """What a kind uses of the core that holds it (:class:`~idlegate.operator.core.core.Core`)."""

    cluster: Cluster
    intents: Outbox
    settings: Settings
    window: int
    metrics: Metrics
    spec: str | None
    times: TaskTimes

    def now(self) -> float: ...
    def adopt(self, launches: list[tuple[Launch, Any]]) -> None: ...
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
    unfit: dict[str, str]
    """Stages no node of the pool could hold even empty, with why (NoNodeFits)."""
    stoppable: bool  # (whether a plan's stop may evict its tasks: never a controller's pods)

    job: Job

    def observe(self, pool: Pool, pod: Any, *, deleted: bool = False) -> Then | None: ...
    def launched(self, pool: Pool, stage: int, launches: list[Launch], rule: str) -> None: ...
    def adopted(self, pool: Pool, launch: Launch, token: Any) -> None: ...
    def idle_started(self, pool: Pool, stage: int, slot: SlotState) -> None: ...
    def idle_ended(self, pool: Pool, stage: int) -> None: ...
    def confirmed(self, pool: Pool, outcome: Confirmed) -> Then | None: ...
    def refused(self, pool: Pool, outcome: Refused) -> Then | None: ...
    def dropped(self, pool: Pool) -> None: ...
    def unfit_changed(self, pool: Pool) -> None: ...
    def evict(self, pool: Pool, stage: int, executor: int, evictions: Evictions) -> str | None: ...
    def pod_on(self, stage: int, executor: int) -> tuple[object, str]: ...
    def evicted(
        self, pool: Pool, intent: EvictPod, outcome: Confirmed | Refused
    ) -> tuple[float | None, Then | None]: ...
