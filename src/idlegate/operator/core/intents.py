"""The operator core's intents (the writes it wants) and their outcomes (what the API said).

The core never writes: it makes intents, in the order they are to be carried out, and the
edge's applier carries them out, each in the lane of the object it writes (its `lane`),
and hands the core each one's outcome, :class:`Confirmed` or :class:`Refused`. Pod writes
are idempotent: a pod's name is a function of its workflow, stage, task and attempt
(`task_pods.pod_name`).

What the operator's Events say is :mod:`idlegate.api.notices` (pure texts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from idlegate.api.notices import accepted_waiting
from idlegate.api.task_pods import Owner, pod_name, task_pod
from idlegate.operator.core.evictions import Evictions

if TYPE_CHECKING:
    from idlegate.operator.core.tracking import StageTrack, Task, Workflow
    from idlegate.sim.spec import StageSpec


class _PodWrite:
    """A write of the pod `name` in `owner`'s namespace: its lane is the pod's."""

    __slots__ = ()
    owner: Owner
    name: str

    @property
    def lane(self) -> tuple[str, str, str]:
        return ("pod", self.owner.namespace, self.name)


@dataclass(frozen=True, slots=True)
class CreatePod(_PodWrite):
    """Create the pod of one attempt of one task: gated (``executor`` None, it waits for a
    :class:`RemoveGate`) or released on ``executor`` (a retry, or a task released before
    its gated pod was made). A 409 is success when the pod found has ``owner``'s uid and is
    not being deleted (an earlier, unanswered try made it; a released creation then removes
    the gate it finds); a pod of another uid (an older workflow's) is waited out."""

    owner: Owner
    stage: str
    index: int
    attempt: int
    name: str
    """The pod's name (`pod_name`), also :attr:`manifest`'s."""
    spec: StageSpec
    """The stage, whose template the pod is made of."""
    executor: int | None = None
    after_status: bool = False
    """Send it once the workflow's latest :class:`PatchStatus` before it has landed: the one
    persisting the stage's idle slot, so a restart neither forgets nor repeats the delay."""
    owner_check: bool = False
    """Read the workflow first (a pod of it vanished, maybe with it): gone, or of another
    uid, it is refused with ``gone``."""
    host: str | None = None
    """As :attr:`RemoveGate.host`, for a pod created released (a retry lands where its
    pool counts it)."""
    preempted: int = 0
    """The task's attempts stopped before this one (its annotation: they are no failures)."""

    @property
    def gated(self) -> bool:
        return self.executor is None

    @property
    def manifest(self) -> dict[str, Any]:
        """The whole pod to create (made when it is sent: `task_pod`)."""
        return task_pod(
            self.owner,
            self.spec,
            self.index,
            self.attempt,
            gated=self.gated,
            executor=self.executor,
            host=self.host,
            preempted=self.preempted,
        )


@dataclass(frozen=True, slots=True)
class RemoveGate(_PodWrite):
    """Release a gated pod onto executor slot ``executor``: record the slot in its
    ``idlegate.io/executor`` annotation and remove only our gate (`release_patch`, whose
    ``test`` op guards its index). A refused guard (409, 422: the gates moved) reads the pod
    and patches again, or, if the gate is gone already, records the executor. A 404 creates
    ``released`` instead, unless the workflow itself is gone.

    A pod another controller made (an Argo Workflow's: ``spec`` None; ``index`` and
    ``attempt`` 0) is read before it is patched, and a 404 is left to its deletion's event;
    with ``executor`` None only the gate goes (released unscheduled)."""

    owner: Owner
    stage: str
    index: int
    attempt: int
    name: str
    executor: int | None
    spec: StageSpec | None
    """The stage, whose template the pod is made of (None: a pod another controller made)."""
    after_status: bool = False
    """As :attr:`CreatePod.after_status`."""
    host: str | None = None
    """The node (its host name) the pool placed it on, where the release pins it (a pool
    on nodes: `release_patch`); None: wherever the kube-scheduler puts it."""
    preempted: int = 0
    """As :attr:`CreatePod.preempted`."""

    @property
    def released(self) -> CreatePod:
        """The pod created released instead, when the gated pod is gone."""
        owner, spec = self.owner, self.spec
        assert spec is not None  # (only a pod of idlegate's own template is created again)
        return CreatePod(
            owner,
            spec.name,
            self.index,
            self.attempt,
            self.name,
            spec,
            self.executor,
            host=self.host,
            preempted=self.preempted,
        )


@dataclass(frozen=True, slots=True)
class EvictPod(_PodWrite):
    """Stop the running task pod of one attempt (`idlegate.api.eviction`): write ``stop``
    on it, then evict it (policy/v1, its own grace period). Confirmed with the pod as read
    before its eviction: one that ended meanwhile is left, its phase says so. A
    PodDisruptionBudget's refusal comes back Refused, 429, the mark taken off; a pod
    gone, 404. ``evictions``: the call it is part of."""

    owner: Owner
    name: str
    stage: str
    index: int
    attempt: int
    executor: int
    stop: str
    evictions: Evictions = field(compare=False)


@dataclass(frozen=True, slots=True)
class ReleaseStop(_PodWrite):
    """Take the stop's finalizer off the pod `name` (`idlegate.api.eviction`, point 6):
    read, then a guarded patch (read again while the finalizers move under the guard); a
    pod gone, or without it, is success. Confirmed with the pod the API returned."""

    owner: Owner
    name: str
    after_status: bool = False
    """Send it once the workflow's latest :class:`PatchStatus` before it has landed: the
    one recording the stop in ``status.stopped`` (as Kubernetes' Job controller records a
    pod's end before it takes its finalizer off)."""


@dataclass(frozen=True, slots=True)
class DeletePod(_PodWrite):
    """Delete a pod (gone already is success). `frees`: it holds an executor the core gave
    back already (a failed or suspended workflow's running pod): a gate removal decided
    after it waits until it has ended, so the pool's bound holds in the API too."""

    owner: Owner
    name: str
    frees: bool = False


@dataclass(frozen=True, slots=True)
class PatchStatus:
    """Merge ``status`` into the status subresource of the workflow ``owner`` (a 404 is
    success). A later PatchStatus of the same owner replaces one not sent yet (its body is
    the whole state then); ``urgent`` False (only counts changed) lets the applier hold it
    for half the status interval to batch changes."""

    owner: Owner
    status: Mapping[str, Any] | Readable
    urgent: bool = True


@dataclass(frozen=True, slots=True)
class PostEvent:
    """Post an Event on ``owner`` (core/v1, shown by ``kubectl describe``); equal Events
    aggregate as client-go's recorder does. ``type`` is ``Normal`` or ``Warning``;
    ``reason`` is a CamelCase word, ``message`` one or two sentences."""

    owner: Owner
    type: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class DeleteWorkflow:
    """Delete the workflow ``owner`` (its pods go by garbage collection), only if it is
    still that very object (``owner.uid``) and has finished (phase Succeeded or Failed),
    or, with ``running_too``, whatever its phase (a cron's Replace); ``why`` is for the log
    (a TTL, a history limit)."""

    owner: Owner
    why: str
    running_too: bool = False

    @property
    def lane(self) -> tuple[str, str, str]:
        return ("delete", self.owner.namespace, self.owner.name)


@dataclass(frozen=True, slots=True)
class CreateWorkflow:
    """Create the DagWorkflow ``body`` (a cron workflow's run) in ``owner``'s namespace
    (``owner``: the cron workflow, whose Events these are). A 409 (it exists: made before a
    restart, or an answer lost) is success. Once it exists, ``then`` is carried out (the
    Event and status saying it started), so a run refused for good is never recorded."""

    owner: Owner
    body: Mapping[str, Any]
    then: tuple[PatchStatus | PostEvent, ...] = ()

    @property
    def lane(self) -> tuple[str, str, str]:
        return ("create", self.owner.namespace, str(self.body["metadata"]["name"]))


Intent = (
    (CreatePod | RemoveGate | EvictPod | ReleaseStop | DeletePod | PatchStatus | PostEvent)
    | DeleteWorkflow
    | CreateWorkflow
)
"""Everything the core asks the edge to write."""


@dataclass(frozen=True, slots=True)
class Confirmed:
    """``intent`` was carried out: ``body`` is the object the API returned (a pod for pod writes,
    read like a watch event; None for a deletion, an Event, or a write that found nothing to do)."""

    intent: Intent
    body: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """The API refused ``intent`` and the applier stopped trying. ``status``: the HTTP
    status (None: no answer came); ``reason``: the API's Status reason (``Forbidden``,
    ``NotFound``, …, or the exception's type without a Status). ``permanent``: retrying
    cannot succeed (a 4xx other than 409/429; a pod write refused for good fails its
    workflow); False: the applier's retries ran out on a transient failure."""

    intent: Intent
    status: int | None
    reason: str
    message: str
    permanent: bool = True
    gone: bool = False
    """The workflow the intent was for no longer exists (or has another uid): the core
    forgets it (its deletion's event may come later, or never)."""


Outcome = Confirmed | Refused
"""What the applier hands back for an intent that needed an answer."""


def follow_ups(outcome: Outcome) -> tuple[Intent, ...]:
    """What an ended write asks next, written by whoever takes the outcome in: a cron's run
    created, the Event and status saying it started (`CreateWorkflow.then`); one refused
    for good, a Warning on its cron, its run not recorded (it is tried again)."""
    intent = outcome.intent
    if not isinstance(intent, CreateWorkflow):
        return ()
    if isinstance(outcome, Confirmed):
        return intent.then
    said = (
        f"{outcome.status} {outcome.reason}: {outcome.message}"
        if outcome.status
        else outcome.message
    )
    return (
        PostEvent(
            intent.owner, "Warning", "RunNotStarted", f"Cannot create {intent.lane[2]}: {said}"
        ),
    )


@dataclass(frozen=True, slots=True)
class SetTimer:
    """At ``at`` (the operator clock's seconds), hand ``fire`` to the pool: an event for the
    core (an idle slot's end, a deadline) or an intent to carry out (a TTL's deletion). A
    SetTimer of the same ``key`` replaces it."""

    key: str
    at: float
    fire: Any
    """An :data:`~.events.Event` or an :data:`Intent`."""


@dataclass(frozen=True, slots=True)
class CancelTimer:
    """Drop the timer ``key`` (one that fired, or was never set, is no error)."""

    key: str


@dataclass(frozen=True, slots=True)
class CancelWrites:
    """The workflow ``owner`` left (deleted, failed, suspended): its pod creations and gate
    removals not sent yet are dropped, and a status write waiting to be batched is sent
    with the next PatchStatus instead (later intents are carried out as usual)."""

    owner: Owner


Timing = SetTimer | CancelTimer | CancelWrites
"""What the core asks of the edge besides writes (additions to :data:`Intent`'s list)."""


class Readable(Protocol):
    """A status read when it is written (`LiveStatus`; an ExecutorPool's)."""

    def read(self, now: float) -> dict[str, Any]: ...


class LiveStatus:
    """The status of a workflow the core holds, read when it is written (`Workflow.status`)."""

    def __init__(self, wf: Workflow) -> None:
        self.workflow = wf
        self.counted = 0
        """The pods the status counted when it was :meth:`read` (the first that many of
        `Workflow.collectable`: pod GC deletes them once this write has landed)."""
        self.slots: frozenset[int] = frozenset()
        """The stages whose idle slot it carried when it was read."""

    def read(self, now: float) -> dict[str, Any]:
        """The status as it is at `now` (the operator's clock), to be sent."""
        wf = self.workflow
        wf.refresh_conditions(now)
        self.counted, self.slots = len(wf.collectable), frozenset(wf.idle_slots)
        return wf.status()


class Outbox:
    """How the core (and the features over it) say what to write, one intent a method, kept
    until :meth:`take` hands them over (`Core.handle` returns them).
    A workflow's status is a :class:`LiveStatus`, read when the write is sent, so coalesced
    writes carry the latest state."""

    def __init__(self) -> None:
        self.intents: list[Any] = []
        """Intents, timings and the core's facts (:mod:`.events`), in order."""

    def add(self, item: Any) -> None:
        self.intents.append(item)

    def take(self) -> list[Any]:
        """The intents kept so far (the box is empty after)."""
        taken = self.intents.copy()
        self.intents.clear()
        return taken

    def create_pod(
        self, wf: Workflow, track: StageTrack, task: Task, *, gated: bool, host: str | None = None
    ) -> None:
        """The pod of the task's current attempt: gated, or released on its executor
        (pinned to the node `host`, if given)."""
        owner, spec, index, attempt = wf.owner, track.spec, task.index, task.attempt
        executor = None if gated else task.executor
        name = pod_name(owner.name, spec.name, index, attempt)
        after = not gated and _unpersisted(wf, track.index)
        check, stopped = wf.pod_vanished, task.preempted
        args = (owner, spec.name, index, attempt, name, spec, executor, after, check, host)
        self.add(CreatePod(*args, preempted=stopped))

    def release_pod(
        self, wf: Workflow, track: StageTrack, task: Task, host: str | None = None
    ) -> None:
        """Remove the gate of the task's pod, recording its executor on it (pinned to the
        node `host`, if given)."""
        owner, spec, index, attempt = wf.owner, track.spec, task.index, task.attempt
        name = pod_name(owner.name, spec.name, index, attempt)
        after = _unpersisted(wf, track.index)
        args = (owner, spec.name, index, attempt, name, task.executor, spec, after, host)
        self.add(RemoveGate(*args, preempted=task.preempted))

    def delete_pod(self, owner: Owner, name: str, *, frees: bool = False) -> None:
        self.add(DeletePod(owner, name, frees))

    def status(self, wf: Workflow, *, urgent: bool = False) -> None:
        """Write the workflow's status as it is when the write is sent."""
        self.add(PatchStatus(wf.owner, LiveStatus(wf), urgent))

    def patch_status(self, owner: Owner, body: Mapping[str, Any]) -> None:
        """Merge `body` into the status of a workflow the core holds no record of."""
        self.add(PatchStatus(owner, body))

    def event(self, owner: Owner, type_: str, reason: str, message: str) -> PostEvent:
        self.add(said := PostEvent(owner, type_, reason, message))
        return said

    def amend(self, said: PostEvent, waiting: tuple[str, str, str]) -> bool:
        """Say `waiting` in the Accepted Event `said` (`notices.accepted_waiting`), if it is
        kept still (not taken: the same handling); False if it went."""
        i = next((i for i, kept in enumerate(self.intents) if kept is said), None)
        if i is not None:
            self.intents[i] = PostEvent(said.owner, *accepted_waiting(said.message, waiting))
        return i is not None

    def cancel_writes(self, owner: Owner) -> None:
        self.add(CancelWrites(owner))

    def set_timer(self, key: str, at: float, fire: Any) -> None:
        self.add(SetTimer(key, at, fire))

    def cancel_timer(self, key: str) -> None:
        self.add(CancelTimer(key))


def _unpersisted(wf: Workflow, stage: int) -> bool:
    """The stage's idle slot is not in the API yet: its release waits for the status."""
    return stage in wf.idle_slots and stage not in wf.persisted_slots
