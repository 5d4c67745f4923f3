"""The edge of one pool: the core (:class:`idlegate.operator.core.core.Core`) wired to the
API, the operator's clock and its timers.

The core decides and says what to write (intents, :mod:`idlegate.operator.core.intents`);
this module hands each intent, as it is made, to the operator's writer
(:class:`idlegate.operator.edge.writes.Writer`, which queues it on the actuator's lanes) or its
timers, and gives the core the time of each event. What is read from the API (a workflow's
pods, the outcome of a write) is handed in by :mod:`idlegate.operator.edge.intake`. Everything
runs in the operator's event loop, one event at a time, synchronously.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from typing import Any

from idlegate.operator.clock import Steady
from idlegate.operator.core.core import Core
from idlegate.operator.core.intents import (
    CancelTimer,
    CancelWrites,
    CreatePod,
    DeletePod,
    DeleteWorkflow,
    Intent,
    LiveStatus,
    PatchStatus,
    PostEvent,
    RemoveGate,
    SetTimer,
    Timing,
)
from idlegate.operator.core.pods import read_task_pod
from idlegate.operator.core.tracking import StageTrack, Task, Workflow
from idlegate.operator.edge.actuator import Actuator
from idlegate.operator.edge.health import ApiHealth, ObservedApi
from idlegate.operator.edge.kube import KubeApi
from idlegate.operator.edge.metrics import Metrics
from idlegate.operator.edge.timers import Timers
from idlegate.operator.edge.writes import Writer
from idlegate.operator.features.cleanup import Cleanup
from idlegate.operator.features.history import HistoryRecorder
from idlegate.operator.features.lifecycle import Lifecycle
from idlegate.operator.features.planning import planning_worker
from idlegate.operator.settings import Settings
from idlegate.sim.protocol import Scheduler

log = logging.getLogger(__name__)


class Bridge(Core):
    """A pool's core, its intents carried out by the writer and the timers."""

    def __init__(
        self,
        settings: Settings,
        kube: KubeApi,
        scheduler: Scheduler,
        *,
        metrics: Metrics,
        timers: Timers,
        health: ApiHealth | None = None,
        actuator: Actuator | None = None,
        beside: Bridge | None = None,
    ) -> None:
        super().__init__(settings, scheduler, metrics=metrics)
        self.intents.sink = self.carry_out
        self.health = health or ApiHealth(metrics)
        """Whether the API answers; every request of the operator's own reports to it."""
        self.kube = ObservedApi(kube, self.health)
        """The API (its writes go through the actuator; :mod:`idlegate.operator.edge.intake` reads)."""
        self.timers = timers
        self.time = Steady(settings.clock)
        self.actuator = actuator or (
            beside.actuator
            if beside
            else Actuator(
                self.kube,
                retry_delays=settings.retry_delays,
                retry_after_cap=settings.retry_after_cap,
                health=self.health,
                concurrency=settings.api_concurrency,
            )
        )
        pod = os.environ.get("POD_ID") or socket.gethostname()
        if beside is not None:  # another pool's: one writer, history and cleanup for all
            self.writes, self.history, self.cleanup = beside.writes, beside.history, beside.cleanup
        else:
            self.writes = Writer(settings, self.actuator, metrics, time=self.time, instance=pod)
            self.history = HistoryRecorder(settings, metrics, self.writes, self.actuator)
            self.cleanup = Cleanup(settings, self.writes, timers)
        self.lifecycle = Lifecycle(self, self.kube, timers)
        self.planning = planning_worker(self)

    def now(self) -> float:
        return self.time.now()

    def observe_pod(
        self, body: Mapping[str, Any], *, deleted: bool = False, now: float | None = None
    ) -> None:
        info = read_task_pod(body)
        if info is not None:  # it may confirm an unanswered write
            namespace = (body.get("metadata") or {}).get("namespace", "")
            self.writes.observed(namespace, info, deleted=deleted)
        super().observe_pod(body, deleted=deleted, now=now)

    def drop(self, wf: Workflow, *, remove_job: bool = True) -> None:
        if wf.status_timer is not None:  # a final write, if any, is queued by the caller
            wf.status_timer.cancel()
            wf.status_timer = None
        super().drop(wf, remove_job=remove_job)

    # -- the intents, carried out ----------------------------------------------------------

    def carry_out(self, intent: Intent | Timing) -> None:
        """Queue the write (or set the timer) `intent` asks for."""
        w = self.writes
        match intent:
            case PostEvent(owner, type_, reason, message):
                w.event(owner, type_, reason, message)
            case PatchStatus(owner, LiveStatus() as status, urgent):
                w.status(status.workflow, urgent=urgent)
            case PatchStatus(owner, status):
                w.patch_status(owner, dict(status))
            case CreatePod() | RemoveGate():
                found = self._task(intent)
                if found is None:
                    log.debug("Not carried out (the task moved on): %r", intent)
                elif isinstance(intent, CreatePod):
                    w.create_pod(*found, gated=intent.gated)
                else:
                    w.release_pod(*found)
            case DeletePod(owner, name):
                w.delete_pod(owner, name)
            case DeleteWorkflow(owner, why):
                w.delete_workflow(owner, why)
            case SetTimer(key, at, owner, stage):
                where, uid = (owner.namespace, owner.name), owner.uid

                async def fire() -> None:
                    self.idle_expired(where, uid, stage)

                self.timers.arm(key, at, fire)
            case CancelTimer(key):
                self.timers.cancel(key)
            case CancelWrites(owner):
                self.actuator.clear((owner.namespace, owner.name))
                wf = self.workflows.get((owner.namespace, owner.name))
                if wf is not None and wf.owner.uid == owner.uid:
                    wf.status_queued = False  # (the queued write, if any, was dropped too)
                    if wf.status_timer is not None:
                        wf.status_timer.cancel()
                        wf.status_timer = None

    def _task(self, intent: CreatePod | RemoveGate) -> tuple[Workflow, StageTrack, Task] | None:
        owner = intent.owner
        wf = self.workflows.get((owner.namespace, owner.name))
        if wf is None or wf.owner.uid != owner.uid:
            return None
        track = wf.by_name[intent.stage]
        task = track.tasks.get(intent.index)
        if task is None or task.attempt != intent.attempt:
            return None
        return wf, track, task
