"""A workflow's life outside the policy's decisions: suspended, resumed, timed out.

What ``spec.suspend`` and ``spec.activeDeadlineSeconds`` mean to a user, and which spec
fields may change on an admitted workflow (:data:`MUTABLE`), is in deploy/README.md
("Cleanup, deadlines and suspend"). A workflow created suspended is not admitted
(:meth:`Lifecycle.hold` writes its status). Suspended while it runs, it leaves the pool at
once (:meth:`Lifecycle.suspend`): its running task pods are deleted and their executors
freed; its gated pods, finished tasks and idle slots are kept. Resumed, it is admitted as
a restarted operator admits it, from its pods and status. The deadline's timer is derived
from the persisted ``status.startTime``, so a restart arms it for the same time; a
suspended workflow whose deadline passes is read from the API, admitted and failed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from idlegate.api.labels import LABEL_WORKFLOW
from idlegate.api.podsecurity import namespace_policy
from idlegate.api.status import Phase, WorkflowStatus, dump
from idlegate.api.timestamps import from_datetime, to_datetime
from idlegate.operator.core.admission import owner_of
from idlegate.operator.core.pods import Owner, pod_name
from idlegate.operator.core.tracking import TaskState, Workflow
from idlegate.operator.edge.kube import ApiError, KubeApi
from idlegate.sim.spec import WorkflowSpec

if TYPE_CHECKING:
    from idlegate.operator.core.core import Core
    from idlegate.operator.edge.timers import Timers

log = logging.getLogger(__name__)

MUTABLE = ("suspend", "active_deadline_seconds", "ttl_seconds_after_finished", "pod_gc")
"""Spec fields an admitted workflow may change (the rest of its spec is fixed)."""
UNFINISHED = (Phase.PENDING, Phase.RUNNING, Phase.SUSPENDED)
"""The phases of a workflow whose deadline may still fail it."""
DEADLINE_RETRY = 5.0
"""Seconds before a deadline whose workflow the API did not give is tried again."""


def only_mutable_changed(old: WorkflowSpec, new: WorkflowSpec) -> bool:
    """`new` differs from `old` in :data:`MUTABLE` fields only."""
    return new.model_copy(update={f: getattr(old, f) for f in MUTABLE}) == old


class Lifecycle:
    """Suspension and deadlines of one pool's workflows."""

    def __init__(self, core: Core, kube: KubeApi, timers: Timers) -> None:
        self.bridge = core
        self.kube, self.timers = kube, timers
        self._expiring: set[str] = set()
        """Uids of suspended workflows being admitted to be failed by their deadline."""

    # -- suspend and resume ----------------------------------------------------------------

    def hold(self, wf: Workflow, body: Mapping[str, Any]) -> bool:
        """Keep the suspended `wf` out of the pool (True), with a status that says so; its
        deadline, if it has started, still runs."""
        if wf.owner.uid in self._expiring:  # (admitted only to fail by its deadline)
            return False
        b, status = self.bridge, body.get("status") or {}
        now = b.now()
        message = "spec.suspend is true: no task is released until it is set back to false."
        wf.conditions.set("Suspended", True, "Suspended", message, wf.generation, now)
        running = "Suspended (spec.suspend): no task runs until it is set back to false."
        wf.conditions.set("Running", False, "Suspended", running, wf.generation, now)
        held = WorkflowStatus(
            observed_generation=wf.generation,
            phase=Phase.SUSPENDED,
            conditions=wf.conditions.models(),
        )
        b.intents.patch_status(wf.owner, dump(held))
        if status.get("startTime"):
            started = from_datetime(status["startTime"])
            self.arm_deadline(wf.owner, wf.spec.active_deadline_seconds, started)
        return True

    def admitted(self, wf: Workflow) -> None:
        """`wf` entered the pool: resumed if it was suspended; its deadline is armed."""
        suspended = wf.conditions.get("Suspended")
        expiring = wf.owner.uid in self._expiring  # (admitted only to fail by its deadline)
        if suspended is not None and suspended.status == "True" and not expiring:
            message = "spec.suspend was set to false: the workflow is back in the pool."
            now = self.bridge.now()
            wf.conditions.set("Suspended", False, "Resumed", message, wf.generation, now)
            self.bridge.intents.event(wf.owner, "Normal", "Resumed", message)
        self.arm_deadline(wf.owner, wf.spec.active_deadline_seconds, wf.admitted)

    def updated(self, wf: Workflow, spec: WorkflowSpec, generation: int) -> None:
        """The admitted `wf`'s spec changed in :data:`MUTABLE` fields only: take it in."""
        wf.spec, wf.generation = spec, generation
        if spec.suspend:
            self.suspend(wf)
            return
        self.arm_deadline(wf.owner, spec.active_deadline_seconds, wf.admitted)
        self.bridge.intents.status(wf, urgent=True)

    def suspend(self, wf: Workflow) -> None:
        """Take the running `wf` out of the pool: its running pods are deleted (evicted) and
        its executors freed; it is admitted again once spec.suspend is false."""
        b, now = self.bridge, self.bridge.now()
        busy = b.busy
        wf.active, wf.phase = False, Phase.SUSPENDED
        b.intents.cancel_writes(wf.owner)  # drop its creations and releases not done yet
        b.drop(wf)
        evicted = 0
        for track in wf.stages:
            for task in track.tasks.values():
                if task.state is TaskState.RELEASED:
                    name = pod_name(wf.owner.name, track.spec.name, task.index, task.attempt)
                    b.intents.delete_pod(wf.owner, name, frees=True)
                    evicted += 1
        freed = busy - b.busy
        message = (
            f"Suspended (spec.suspend): {evicted} running task pod(s) deleted, to run again "
            f"when it is resumed; {freed} executor(s) back to the pool."
        )
        wf.conditions.set("Suspended", True, "Suspended", message, wf.generation, now)
        b.intents.status(wf, urgent=True)
        b.intents.event(wf.owner, "Normal", "Suspended", message)
        self.arm_deadline(wf.owner, wf.spec.active_deadline_seconds, wf.admitted)
        b.schedule()

    # -- deadlines -------------------------------------------------------------------------

    def arm_deadline(
        self, owner: Owner, seconds: int | None, started: float, at: float | None = None
    ) -> None:
        """Arm (or re-arm, or with `seconds` None drop) the deadline of the workflow
        admitted at `started`, to fire at its end (or at `at`, a retry)."""
        if seconds is None:
            self.timers.cancel(_deadline_key(owner.uid))
            return
        fire = partial(self.deadline_passed, owner, seconds, started)
        when = started + seconds if at is None else at
        self.timers.arm(_deadline_key(owner.uid), when, fire)

    def dropped(self, wf: Workflow) -> None:
        """`wf` left the bridge (finished, failed, deleted or suspended): no deadline."""
        self.timers.cancel(_deadline_key(wf.owner.uid))

    async def deadline_passed(self, owner: Owner, seconds: int, started: float) -> None:
        """Fail the workflow `owner` by its deadline: now if it is admitted, else (it is
        suspended) once it is read from the API and admitted."""
        b = self.bridge
        wf = b.workflows.get((owner.namespace, owner.name))
        message = (
            f"The workflow ran longer than its activeDeadlineSeconds ({seconds} s since it was "
            f"admitted at {to_datetime(started):%Y-%m-%dT%H:%M:%SZ}); its task pods are "
            "deleted and its executors freed."
        )
        if wf is not None and wf.owner.uid == owner.uid:
            # (a timer armed while it was held, its deadline dropped since: nothing)
            if wf.active and wf.spec.active_deadline_seconds is not None:
                b.fail(wf, "DeadlineExceeded", message)
                b.schedule()
            return
        try:
            body = await self.kube.get_workflow(owner.namespace, owner.name)
            phase = ((body or {}).get("status") or {}).get("phase")
            if body is None or owner_of(body).uid != owner.uid or phase not in UNFINISHED:
                return
            pods = await self.kube.list_pods(owner.namespace, f"{LABEL_WORKFLOW}={owner.name}")
            namespace = await self.kube.get_namespace(owner.namespace)
        except ApiError as exc:
            where = f"{owner.namespace}/{owner.name}"
            log.info("Cannot read %s for its deadline (%s); retrying.", where, exc)
            self.arm_deadline(owner, seconds, started, b.now() + DEADLINE_RETRY)
            return
        if b.known(owner_of(body)):
            return
        self._expiring.add(owner.uid)
        try:
            policy = namespace_policy(namespace, b.settings.pod_security)
            wf = b.admit(body, pods, policy, schedule=False)
        finally:
            self._expiring.discard(owner.uid)
        if wf is not None:
            b.fail(wf, "DeadlineExceeded", message)
        b.schedule()


def _deadline_key(uid: str) -> str:
    return f"deadline/{uid}"
