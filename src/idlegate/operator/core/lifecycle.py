"""A workflow's life outside the policy's decisions: suspended, resumed, timed out (pure:
functions of the core, which calls them from `Core.handle`).

What ``spec.suspend`` and ``spec.activeDeadlineSeconds`` mean to a user, and which spec
fields may change on an admitted workflow (`sim.spec.MUTABLE`), is in deploy/README.md
("Cleanup, deadlines and suspend"). A workflow created suspended is not admitted
(:func:`hold` writes its status). Suspended while it runs, it leaves the pool at once
(:func:`suspend`): its running task pods are deleted and their executors freed; its gated
pods, finished tasks and idle slots are kept. Resumed, it is admitted as a restarted
operator admits it, from its pods and status. The deadline's timer (a `SetTimer` firing
`DeadlinePassed`) is derived from the persisted ``status.startTime``, so a restart arms it
for the same time; a suspended workflow whose deadline passes is read from the API by the
edge (`ReadAgain`) and admitted to be failed (`Admit.fail`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from idlegate.api import notices
from idlegate.api.status import Phase, WorkflowStatus, dump
from idlegate.api.task_pods import Owner
from idlegate.operator.core.events import DeadlinePassed, ReadAgain
from idlegate.operator.core.intents import Outbox
from idlegate.operator.core.tracking import TaskState, Workflow, WorkflowKey
from idlegate.operator.kinds.protocol import Pool
from idlegate.operator.kinds.workflow import DagWorkflow
from idlegate.sim.spec import WorkflowSpec, only_mutable_changed
from idlegate.sim.timestamps import from_datetime, to_datetime

log = logging.getLogger(__name__)

UNFINISHED = (Phase.PENDING, Phase.RUNNING, Phase.SUSPENDED)
"""The phases of a workflow whose deadline may still fail it."""
DEADLINE_RETRY = 5.0
"""Seconds before a deadline whose workflow the API did not give is tried again."""


class Lifecycle(Pool):
    """Suspension and deadlines: the core's (:class:`~.core.Core` is one), kept here."""

    intents: Outbox
    workflows: dict[WorkflowKey, DagWorkflow]

    if TYPE_CHECKING:

        @property
        def busy(self) -> int: ...
        def known(self, owner: Owner) -> bool: ...
        def schedule(self) -> None: ...

    def hold(self, wf: Workflow, body: Mapping[str, Any]) -> None:
        """Keep the suspended `wf` out of the pool, with a status that says so; its deadline,
        if it has started, still runs."""
        status, now = body.get("status") or {}, self.now()
        message = "spec.suspend is true: no task is released until it is set back to false."
        wf.conditions.set("Suspended", True, "Suspended", message, wf.generation, now)
        running = "Suspended (spec.suspend): no task runs until it is set back to false."
        wf.conditions.set("Running", False, "Suspended", running, wf.generation, now)
        held = WorkflowStatus(
            observed_generation=wf.generation,
            phase=Phase.SUSPENDED,
            conditions=wf.conditions.models(),
        )
        self.intents.patch_status(wf.owner, dump(held))
        if status.get("startTime"):
            started = from_datetime(status["startTime"])
            self.arm_deadline(wf.owner, wf.spec.active_deadline_seconds, started)

    def entered(self, wf: Workflow, *, expiring: bool) -> None:
        """`wf` entered the pool: resumed if it was suspended (unless it is `expiring`:
        admitted only to fail by its deadline); its deadline is armed."""
        suspended = wf.conditions.get("Suspended")
        if suspended is not None and suspended.status == "True" and not expiring:
            message = "spec.suspend was set to false: the workflow is back in the pool."
            wf.conditions.set("Suspended", False, "Resumed", message, wf.generation, self.now())
            self.intents.event(wf.owner, "Normal", "Resumed", message)
        self.arm_deadline(wf.owner, wf.spec.active_deadline_seconds, wf.admitted)

    def spec_changed(
        self, key: WorkflowKey, uid: str, spec: WorkflowSpec | None, generation: int
    ) -> None:
        """The admitted workflow's spec changed: a change of `sim.spec.MUTABLE` fields only is
        taken in (suspended, a new deadline), any other is refused with a Warning Event."""
        wf = self.workflows.get(key)
        if wf is None or wf.owner.uid != uid:
            return
        if spec is None or not only_mutable_changed(wf.spec, spec):
            self.intents.event(wf.owner, *notices.spec_change_ignored(generation, wf.generation))
            return
        wf.spec, wf.generation = spec, generation
        if spec.suspend:
            self.suspend(wf)
            return
        self.arm_deadline(wf.owner, spec.active_deadline_seconds, wf.admitted)
        self.intents.status(wf, urgent=True)

    def suspend(self, wf: DagWorkflow) -> None:
        """Take the running `wf` out of the pool: its running pods are deleted (evicted) and
        its executors freed; it is admitted again once spec.suspend is false."""
        busy = self.busy
        wf.active, wf.phase = False, Phase.SUSPENDED
        self.intents.cancel_writes(wf.owner)  # drop its creations and releases not done yet
        self.drop(wf)
        evicted = wf.delete_pods(self, TaskState.RELEASED)
        freed = busy - self.busy
        message = (
            f"Suspended (spec.suspend): {evicted} running task pod(s) deleted, to run again "
            f"when it is resumed; {freed} executor(s) back to the pool."
        )
        wf.conditions.set("Suspended", True, "Suspended", message, wf.generation, self.now())
        self.intents.status(wf, urgent=True)
        self.intents.event(wf.owner, "Normal", "Suspended", message)
        self.arm_deadline(wf.owner, wf.spec.active_deadline_seconds, wf.admitted)
        self.schedule()

    def arm_deadline(
        self, owner: Owner, seconds: int | None, started: float, at: float | None = None
    ) -> None:
        """Arm (or re-arm, or with `seconds` None drop) the deadline of the workflow admitted
        at `started`, to fire at its end (or at `at`, a retry)."""
        if seconds is None:
            self.intents.cancel_timer(deadline_key(owner.uid))
            return
        when = started + seconds if at is None else at
        self.intents.set_timer(
            deadline_key(owner.uid), when, DeadlinePassed(owner, seconds, started)
        )

    def deadline_dropped(self, wf: Workflow) -> None:
        """`wf` left the pool (finished, failed, deleted or suspended): no deadline."""
        if wf.spec.active_deadline_seconds is not None:
            self.intents.cancel_timer(deadline_key(wf.owner.uid))

    def deadline_passed(self, event: DeadlinePassed) -> None:
        """Fail the workflow by its deadline: now if it is admitted, else (it is suspended)
        once the edge has read it from the API and admitted it (`ReadAgain`)."""
        owner, seconds, started = event.owner, event.seconds, event.started
        message = (
            f"The workflow ran longer than its activeDeadlineSeconds ({seconds} s since it was "
            f"admitted at {to_datetime(started):%Y-%m-%dT%H:%M:%SZ}); its task pods are "
            "deleted and its executors freed."
        )
        wf = self.workflows.get((owner.namespace, owner.name))
        if wf is not None and wf.owner.uid == owner.uid:
            # (a timer armed while it was held, its deadline dropped since: nothing)
            if wf.active and wf.spec.active_deadline_seconds is not None:
                wf.fail(self, "DeadlineExceeded", message)
                self.schedule()
            return
        if not self.known(owner):
            retry = DeadlinePassed(owner, seconds, started)
            self.intents.add(ReadAgain(owner, message, retry))


def deadline_key(uid: str) -> str:
    return f"deadline/{uid}"
