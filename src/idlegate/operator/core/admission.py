"""Admission: reading a DagWorkflow, and the pods it already has, into a
:class:`~.kinds.DagWorkflow`.

Read only: a new workflow's checks (its spec; its templates against its namespace's Pod
Security level and service-account allow-list) and times (:func:`new_workflow`), and the
progress its pods and status record (:func:`classify`). `Core.admit` rejects an invalid
spec and puts that progress into the state machine before its first decision.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from idlegate.api.crd import check_workflow_name
from idlegate.api.podsecurity import NamespacePolicy
from idlegate.api.status import Conditions, IdleSlot, SlotState, parse_indexes
from idlegate.api.template import check_templates
from idlegate.errors import IdlegateError
from idlegate.operator.core.kinds import DagWorkflow
from idlegate.operator.core.pods import Owner, TaskPod, read_task_pod
from idlegate.operator.core.tracking import StageTrack, Task, TaskState, Workflow
from idlegate.operator.settings import Clock
from idlegate.sim.cluster import Cluster
from idlegate.sim.spec import parse_workflow
from idlegate.sim.timestamps import from_datetime, timestamp_precision


class AdmitLaterError(IdlegateError):
    """Not admitted now: its namespace (whose policy its templates must meet) is unreadable."""


def arrival_key(body: Mapping[str, Any]) -> tuple[str, str]:
    meta = body.get("metadata") or {}
    return (meta.get("creationTimestamp") or "", meta.get("name", ""))


def owner_of(body: Mapping[str, Any]) -> Owner:
    meta = body["metadata"]
    return Owner(meta.get("namespace") or "default", meta["name"], meta.get("uid", ""))


def generation_of(body: Mapping[str, Any]) -> int:
    return int((body.get("metadata") or {}).get("generation") or 1)


def judged(body: Mapping[str, Any]) -> bool:
    """The status describes the current generation (a verdict on this very spec)."""
    meta = body.get("metadata") or {}
    return (body.get("status") or {}).get("observedGeneration") == meta.get("generation", 1)


def new_workflow(
    body: Mapping[str, Any], now: float, clock: Clock, policy: NamespacePolicy
) -> DagWorkflow:
    """The workflow of `body`, checked against its namespace's `policy` (raises SpecError),
    with its arrival and admission times on the operator's clock."""
    owner = owner_of(body)
    check_workflow_name(owner.name)
    spec = parse_workflow(body.get("spec"), "spec")
    check_templates(spec, "spec", policy)
    status = body.get("status") or {}
    started = status.get("startTime")
    admitted = min(from_datetime(started), now) if started else now
    arrival = _arrival((body.get("metadata") or {}).get("creationTimestamp"), admitted, clock)
    conditions = Conditions(status.get("conditions"))
    return DagWorkflow(owner, generation_of(body), spec, arrival, admitted, conditions)


def _arrival(created: Any, admitted: float, clock: Clock) -> float:
    """The workflow's arrival: its ``metadata.creationTimestamp`` on the operator's clock, at
    most `admitted` (when the operator first saw it, persisted as ``status.startTime``: the
    same after a restart). The API server stamps whole seconds: the end of the stamped
    second is taken (less than 1 s after the true creation)."""
    if not isinstance(created, str):
        return admitted
    try:
        wall = from_datetime(created) + timestamp_precision(created)
    except ValueError:
        return admitted
    return min(admitted, clock.from_wall(wall))


@dataclass
class Restore:
    """What :func:`classify` found on a workflow's pods and in its status."""

    running: list[tuple[StageTrack, Task]] = field(default_factory=list)
    """Tasks whose pod runs (released, not terminal), on their recorded executor."""
    retry: list[tuple[StageTrack, Task]] = field(default_factory=list)
    """Tasks whose last attempt failed and whose retry pod was not created yet."""
    failed_for_good: tuple[StageTrack, Task, str] | None = None
    """A task that failed more than its backoffLimit, with the reason (fails the workflow)."""
    finished: list[int] = field(default_factory=list)
    """Succeeded tasks, per stage."""
    slots: dict[int, SlotState] = field(default_factory=dict)
    """Idle slots persisted in ``status.idleSlots``, by stage index."""
    over: set[int] = field(default_factory=set)
    """The stages whose persisted slot was over (``released``)."""
    cap: int = 0
    """The parallelism cap persisted in ``status.parallelismCap`` (0: none)."""
    holders: list[tuple[StageTrack, Task]] = field(default_factory=list)
    """Tasks holding an executor of the pool (running, awaiting a retry, failed for good)."""
    beyond: list[tuple[StageTrack, Task]] = field(default_factory=list)
    """Running tasks for which no executor was free: they run beyond the pool."""


def classify(
    wf: Workflow, pods: Iterable[Mapping[str, Any]], status: Mapping[str, Any], cluster: Cluster
) -> Restore:
    """Read the tasks' state from the pods (into `wf`'s tracks) and the idle slots from the
    status, and place the tasks that hold an executor on free executors of `cluster` (not
    changed; with too few free, some run beyond the pool: :func:`_place`).

    A task without pods that ``status.stages[].completedIndexes`` names succeeded (pod GC
    deleted its pod). A pod being deleted that has not ended is taken for gone (evicted by
    ``spec.suspend``, or on its way out): its task runs again."""
    found = Restore(finished=[0] * len(wf.stages))
    attempts: dict[tuple[str, int], list[TaskPod]] = defaultdict(list)
    for pod in pods:
        info = read_task_pod(pod)
        if info is None or info.owner_uid != wf.owner.uid:
            continue  # e.g. a pod of an earlier workflow of the same name, being collected
        if info.deleting and not info.terminal:
            continue
        track = wf.by_name.get(info.stage)
        if track is not None and 0 <= info.index < track.spec.tasks:
            attempts[(info.stage, info.index)].append(info)
    for (stage, index), infos in attempts.items():
        _classify_task(wf.by_name[stage], index, infos, found)
    _restore_collected(wf, status, found)
    for raw in status.get("idleSlots") or []:
        try:
            slot = IdleSlot.model_validate(raw)
        except ValueError:
            continue
        track = wf.by_name.get(slot.stage)
        if track is not None:
            release, reason = from_datetime(slot.release_time), slot.reason or ""
            found.slots[track.index] = SlotState(slot.stage, slot.delay_seconds, release, reason)
            if slot.released:
                found.over.add(track.index)
    found.cap = int(status.get("parallelismCap") or 0)
    _place(found, cluster)
    return found


def _restore_collected(wf: Workflow, status: Mapping[str, Any], found: Restore) -> None:
    """The succeeded tasks whose pods were deleted (by pod GC), from the status, the
    failed attempts it counts (their pods may be deleted too) and the history samples."""
    for raw in status.get("stages") or []:
        track = wf.by_name.get(raw.get("name")) if isinstance(raw, dict) else None
        if track is None:
            continue
        for index in parse_indexes(raw.get("completedIndexes"), track.spec.tasks):
            task = track.task(index)
            if task.state is TaskState.PLANNED:
                track.set_state(task, TaskState.SUCCEEDED)
                found.finished[track.index] += 1
        failed = raw.get("failed")
        if isinstance(failed, int) and failed > track.failed:
            track.failed = failed
        values = raw.get("measuredDurationSeconds")
        if isinstance(values, list):
            track.samples = [float(v) for v in values if isinstance(v, int | float) and v > 0]
            track.sampled = max(len(track.samples), int(raw.get("succeeded") or 0))


def _classify_task(track: StageTrack, index: int, infos: list[TaskPod], found: Restore) -> None:
    """One task's state from the pods of its attempts (earlier ones may be deleted: attempt
    n follows n failures)."""
    task = track.task(index)
    latest = max(infos, key=lambda p: p.attempt)
    task.attempt = latest.attempt
    failed = sum(p.phase == "Failed" for p in infos)
    track.attempt_failed(task, max(failed, latest.attempt + (latest.phase == "Failed")))
    if any(p.phase == "Succeeded" for p in infos):
        track.set_state(task, TaskState.SUCCEEDED)
        found.finished[track.index] += 1
        return
    if not latest.terminal and latest.gated:
        track.set_state(task, TaskState.GATED)
        return
    track.set_state(task, TaskState.RELEASED)
    task.executor = latest.executor
    if not latest.terminal:
        found.running.append((track, task))
    elif task.failures > track.spec.backoff_limit:
        found.failed_for_good = (track, task, f"pod {latest.name} failed: {latest.reason}")
    else:  # failed, retry not created yet (the operator stopped in between)
        found.retry.append((track, task))


def _place(found: Restore, cluster: Cluster) -> None:
    """Give each task that holds an executor a free one, its recorded slot if that is free.

    With too few free (a pool made smaller than what runs in it), none is preempted: the
    running tasks left over run beyond the pool (`found.beyond`), a retry left over waits
    for the policy like any task, and a task failed for good needs none (its workflow
    fails). A gang stage's tasks are placed first, all or none: a gang starts as one."""
    taken = {executor for executor, _, _ in cluster.running_tasks()}
    free = set(range(cluster.num_executors)) - taken
    gangs: dict[int, list[tuple[StageTrack, Task]]] = defaultdict(list)
    singles: list[list[tuple[StageTrack, Task]]] = []
    held = [*found.running, *([found.failed_for_good[:2]] if found.failed_for_good else [])]
    for track, task in [*held, *found.retry]:
        if track.spec.gang:
            gangs[track.index].append((track, task))
        else:
            singles.append([(track, task)])
    room = len(free)
    for group in [*gangs.values(), *singles]:
        if len(group) <= room:
            room -= len(group)
            found.holders += group
    placed = {id(task) for _, task in found.holders}
    found.beyond = [(s, t) for s, t in found.running if id(t) not in placed]
    for track, task in found.retry:
        if id(task) not in placed:
            task.attempt += 1
            track.replan(task)
    found.retry = [(s, t) for s, t in found.retry if id(t) in placed]
    unplaced = []
    for _, task in found.holders:  # first the recorded slots that are free
        if task.executor in free:
            free.discard(task.executor)
        else:
            unplaced.append(task)
    for task, executor in zip(unplaced, sorted(free), strict=False):
        task.executor = executor
