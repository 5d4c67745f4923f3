"""The intents the core produces, in order: built here, handed to the edge.

:class:`Outbox` is how the core (and the features over it) say what to write: each method
makes one intent (:mod:`.intents`). With a `sink` (the edge's), each intent goes to it as it
is made, so the writes keep the order of the decisions; without one (tests, a driver
stepping the core) they are kept until :meth:`Outbox.take`. A workflow's status is given as :class:`LiveStatus`: the status of the
workflow *as it is when the write is sent*, so a later change of the same workflow needs no
second body and coalesced writes carry the latest state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from idlegate.operator.core.intents import (
    CancelTimer,
    CancelWrites,
    CreatePod,
    DeletePod,
    DeleteWorkflow,
    Intent,
    PatchStatus,
    PostEvent,
    RemoveGate,
    SetTimer,
    Timing,
)
from idlegate.operator.pods import Owner, pod_name, task_pod

if TYPE_CHECKING:
    from idlegate.operator.tracking import StageTrack, Task, Workflow


class LiveStatus(Mapping[str, Any]):
    """The status of a workflow the core holds, read when it is written (`Workflow.status`)."""

    def __init__(self, wf: Workflow) -> None:
        self.workflow = wf

    def _now(self) -> dict[str, Any]:
        return self.workflow.status()

    def __getitem__(self, key: str) -> Any:
        return self._now()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())


class Outbox:
    """The intents made so far (oldest first), or handed to `sink` as they are made."""

    def __init__(self, sink: Callable[[Intent | Timing], None] | None = None) -> None:
        self.intents: list[Intent | Timing] = []
        self.sink = sink

    def add(self, intent: Intent | Timing) -> None:
        if self.sink is not None:
            self.sink(intent)
        else:
            self.intents.append(intent)

    def take(self) -> list[Intent | Timing]:
        """The intents so far (the box is empty after)."""
        taken, self.intents = self.intents, []
        return taken

    # -- builders ------------------------------------------------------------------------

    def create_pod(self, wf: Workflow, track: StageTrack, task: Task, *, gated: bool) -> None:
        """The pod of the task's current attempt: gated, or released on its executor."""
        owner, spec, index, attempt = wf.owner, track.spec, task.index, task.attempt
        executor = None if gated else task.executor
        manifest = task_pod(owner, spec, index, attempt, gated=gated, executor=executor)
        name = pod_name(owner.name, spec.name, index, attempt)
        after = not gated and track.index in wf.idle_slots
        self.add(CreatePod(owner, spec.name, index, attempt, name, manifest, executor, after))

    def release_pod(self, wf: Workflow, track: StageTrack, task: Task) -> None:
        """Remove the gate of the task's pod, recording its executor on it."""
        owner, spec, index, attempt = wf.owner, track.spec, task.index, task.attempt
        executor = task.executor
        if executor is None:
            raise ValueError(f"task {index} of stage {spec.name!r} is released on no executor")
        released = task_pod(owner, spec, index, attempt, gated=False, executor=executor)
        name = pod_name(owner.name, spec.name, index, attempt)
        after = track.index in wf.idle_slots
        self.add(RemoveGate(owner, spec.name, index, attempt, name, executor, released, after))

    def delete_pod(self, owner: Owner, name: str) -> None:
        self.add(DeletePod(owner, name))

    def status(self, wf: Workflow, *, urgent: bool = False) -> None:
        """Write the workflow's status as it is when the write is sent."""
        self.add(PatchStatus(wf.owner, LiveStatus(wf), urgent))

    def patch_status(self, owner: Owner, body: Mapping[str, Any]) -> None:
        """Merge `body` into the status of a workflow the core holds no record of."""
        self.add(PatchStatus(owner, body))

    def event(self, owner: Owner, type_: str, reason: str, message: str) -> None:
        self.add(PostEvent(owner, type_, reason, message))

    def delete_workflow(self, owner: Owner, why: str) -> None:
        self.add(DeleteWorkflow(owner, why))

    def cancel_writes(self, owner: Owner) -> None:
        self.add(CancelWrites(owner))

    def set_timer(self, key: str, at: float, owner: Owner, stage: int) -> None:
        self.add(SetTimer(key, at, owner, stage))

    def cancel_timer(self, key: str) -> None:
        self.add(CancelTimer(key))
