"""Cleanup: deleting task pods (``spec.podGC``) and finished workflows
(``spec.ttlSecondsAfterFinished``), never before what they hold is written elsewhere.

The strategies and the TTL, with the operator's defaults (``--pod-gc``,
``--ttl-after-finished``), are the user's contract in deploy/README.md ("Cleanup,
deadlines and suspend"). What is deleted is recorded first:

* a pod only after a status write that counts its outcome has landed (:meth:`Cleanup.landed`):
  the status names the succeeded tasks (``stages[].completedIndexes``), so a restarted
  operator that finds no pod for them knows they are done;
* the workflow-level strategies and the TTL wait for the workflow's history record
  (``status.historyRecorded``) when a history sink is configured (``--history-file``).

Finished workflows are handled from the API's view of them (:meth:`Cleanup.seen`, with
their pods as the pods' index holds them), so what the checks read has landed. Everything
is said as intents (:meth:`Cleanup.react` answers the core's facts); the TTL is a
`SetTimer` whose firing is the `DeleteWorkflow`. The TTL timer is derived from the persisted completion
time: a restart arms it for the same time, and the deletion, which checks the uid and
phase first, happens once.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from idlegate.api.settings import Settings
from idlegate.api.status import FINISHED, Phase
from idlegate.api.task_pods import Owner, TaskPod, owner_of, pod_name, read_task_pod
from idlegate.errors import IdlegateError
from idlegate.operator.core.events import (
    Fact,
    FoundFinished,
    StatusLanded,
    TaskEnded,
    WorkflowAdmitted,
)
from idlegate.operator.core.intents import CancelTimer, DeleteWorkflow, Outbox, SetTimer
from idlegate.operator.core.tracking import StageTrack, Task, Workflow
from idlegate.sim.spec import PodGCStrategy, WorkflowSpec, parse_workflow
from idlegate.sim.timestamps import from_datetime

log = logging.getLogger(__name__)

POD_LEVEL = (PodGCStrategy.ON_POD_COMPLETION, PodGCStrategy.ON_POD_SUCCESS)
MAX_SWEPT = 65536
"""Finished workflows remembered as swept (the oldest are forgotten: a later event of one
lists its pods again, and finds them gone)."""


class Cleanup:
    """Pod GC and TTL deletion, said as intents (see the module docstring)."""

    takes = (TaskEnded, WorkflowAdmitted, StatusLanded, FoundFinished)
    """The core's facts it answers."""

    def __init__(self, settings: Settings) -> None:
        self.default_gc = settings.pod_gc
        self.default_ttl = settings.ttl_after_finished
        self.needs_record = settings.history_file is not None
        """A history sink is configured: workflow-level cleanup waits for the record."""
        self.intents = Outbox()
        self._swept: OrderedDict[str, None] = OrderedDict()
        """Uids of finished workflows whose pods were swept."""

    def react(self, fact: Fact) -> list[Any]:
        """The intents that answer one of the core's facts."""
        match fact:
            case TaskEnded(wf, track, task, succeeded):
                self.task_ended(wf, track, task, succeeded=succeeded)
            case WorkflowAdmitted(wf, pods):
                self.admitted(wf, pods)
            case StatusLanded(wf, counted):
                self.landed(wf, counted)
            case FoundFinished(body, pods):
                self.finished_before(body, pods)
        return self.intents.take()

    def strategy(self, spec: WorkflowSpec) -> PodGCStrategy:
        return spec.pod_gc.strategy if spec.pod_gc is not None else self.default_gc

    # -- while a workflow runs -------------------------------------------------------------

    def task_ended(self, wf: Workflow, track: StageTrack, task: Task, *, succeeded: bool) -> None:
        """The state machine has the outcome of the task's current attempt: its pod is
        deleted after the next status write (a pod-level strategy permitting)."""
        strategy = self.strategy(wf.spec)
        if strategy is PodGCStrategy.ON_POD_COMPLETION or (
            succeeded and strategy is PodGCStrategy.ON_POD_SUCCESS
        ):
            wf.collectable.append(
                pod_name(wf.owner.name, track.spec.name, task.index, task.attempt)
            )

    def admitted(self, wf: Workflow, pods: Iterable[Mapping[str, Any]]) -> None:
        """A workflow admitted with its pods (a restart, a resume): the ended ones, whose
        outcome its state now holds, are deleted after its first status write."""
        strategy = self.strategy(wf.spec)
        if strategy in POD_LEVEL:
            wf.collectable += [p.name for p in _own(pods, wf.owner) if _wanted(strategy, p)]

    def landed(self, wf: Workflow, counted: int) -> None:
        """A status write of `wf` has landed; it counted the first `counted` pods noted."""
        names = wf.collectable[:counted]
        del wf.collectable[:counted]
        for name in names:
            self.intents.delete_pod(wf.owner, name)

    # -- finished workflows ----------------------------------------------------------------

    def finished_before(self, body: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> None:
        """A finished workflow met at its admission (a restart): the unfinished pods of a
        failed one are deleted (the operator stopped before it could), then as :meth:`seen`."""
        owner = owner_of(body)
        if (body.get("status") or {}).get("phase") == Phase.FAILED:
            for pod in _own(pods, owner):
                if not pod.terminal:
                    self.intents.delete_pod(owner, pod.name)
        self._seen(body, pods)

    def seen(self, body: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[Any]:
        """A DagWorkflow as the API holds it (a watch event), with its pods: once it has
        finished, and its record is written where one is wanted, its TTL is armed and its
        pods are swept. Returns the intents."""
        self._seen(body, pods)
        return self.intents.take()

    def _seen(self, body: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> None:
        status = body.get("status") or {}
        phase = status.get("phase")
        if phase not in FINISHED:
            return
        try:
            spec = parse_workflow(body.get("spec"), "spec")
        except IdlegateError:
            return  # (it cannot have finished)
        owner = owner_of(body)
        recorded = not self.needs_record or bool(status.get("historyRecorded"))
        ttl = spec.ttl_seconds_after_finished
        if ttl is None:
            ttl = self.default_ttl
        completion = status.get("completionTime")
        if recorded and ttl is not None and isinstance(completion, str):
            self._arm_ttl(owner, from_datetime(completion) + ttl, ttl)
        strategy = self.strategy(spec)
        if strategy is PodGCStrategy.NEVER or owner.uid in self._swept:
            return
        if strategy in POD_LEVEL or recorded:
            self._sweep(owner, strategy, phase, pods)

    def forget(self, uid: str | None) -> list[Any]:
        """The workflow was deleted: no TTL left to wait for (the intent that says so)."""
        if not uid:
            return []
        self._swept.pop(uid, None)
        return [CancelTimer(_ttl_key(uid))]

    def _arm_ttl(self, owner: Owner, at: float, ttl: int) -> None:
        why = f"ttlSecondsAfterFinished ({ttl} s) after it finished"
        self.intents.add(SetTimer(_ttl_key(owner.uid), at, DeleteWorkflow(owner, why)))

    def _sweep(
        self, owner: Owner, strategy: PodGCStrategy, phase: str, pods: Iterable[Mapping[str, Any]]
    ) -> None:
        """Delete the finished workflow's pods that `strategy` lets go."""
        self._swept[owner.uid] = None
        while len(self._swept) > MAX_SWEPT:
            self._swept.popitem(last=False)
        if strategy is PodGCStrategy.ON_WORKFLOW_SUCCESS and phase != Phase.SUCCEEDED:
            return
        log.info("Pod GC (%s) of %s/%s.", strategy.value, owner.namespace, owner.name)
        for pod in _own(pods, owner):
            if strategy not in POD_LEVEL or _wanted(strategy, pod):
                self.intents.delete_pod(owner, pod.name)


def _own(pods: Iterable[Mapping[str, Any]], owner: Owner) -> Iterator[TaskPod]:
    """The task pods of `owner`'s workflow (that very object: its uid) not being deleted."""
    for pod in pods:
        info = read_task_pod(pod)
        if info is not None and info.owner_uid == owner.uid and not info.deleting:
            yield info


def _wanted(strategy: PodGCStrategy, pod: TaskPod) -> bool:
    """Whether a pod-level `strategy` deletes `pod`: it has ended (and succeeded)."""
    return pod.terminal and (
        strategy is PodGCStrategy.ON_POD_COMPLETION or pod.phase == "Succeeded"
    )


def _ttl_key(uid: str) -> str:
    return f"ttl/{uid}"
