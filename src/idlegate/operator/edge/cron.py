"""The controller of `DagCronWorkflow`s: start each run when it is due, and tidy up after.

A sync is level-triggered: it reads the object and its runs (the DagWorkflows labelled
with its name) and acts on what it finds, so a sync after a restart, a missed timer or a
change of spec does the right thing. What is due, the starting deadline, the concurrency
policy and the history limits are `api.cron_spec`'s; a sync is this pipeline:

1. validate the spec, its workflowSpec's templates held to the namespace's Pod Security
   level and its runs' size (`api.cron_runs`) as each run's will be (an invalid one gets
   condition Valid=False, reason Invalid, a Warning, no run and no timer until it changes);
2. sort the runs into active, succeeded and failed (``status.phase``);
3. delete the finished runs beyond the history limits, oldest first;
4. unless suspended, find the due run (`cron_spec.due`) and apply the concurrency
   policy: start it (Allow), skip it while a run is active (Forbid), or delete the active
   runs and start it (Replace);
5. write the status (lastScheduleTime, lastSuccessfulTime, active, nextScheduleTime),
   once the run it records exists;
6. arm one timer for the next schedule time, which syncs again.

Its writes are intents (:mod:`idlegate.operator.core.intents`), each sync's in order, that
the applier carries out with its retries. A run is named by its scheduled time
(`cron_spec.run_name`): one listed already (a restart between the create and the status
write) is not started again, and a create that answers 409 is taken as done. Runs are
owned by their cron workflow (ownerReferences), so deleting it deletes them.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from idlegate.api.cron_runs import (
    check_run_size,
    created_at,
    object_name,
    run_object,
    scheduled_at,
    sort_runs,
    upcoming_runs,
)
from idlegate.api.cron_spec import (
    ConcurrencyPolicy,
    CronSchedule,
    CronWorkflowSpec,
    CronWorkflowStatus,
    Due,
    check_cron_name,
    due,
    parse_cron_spec,
    run_name,
)
from idlegate.api.kinds import CRON_KIND
from idlegate.api.labels import LABEL_CRON
from idlegate.api.podsecurity import DEFAULT_LEVEL, Level, namespace_policy
from idlegate.api.settings import Clock
from idlegate.api.status import HISTORY_SAMPLES, Conditions
from idlegate.api.task_pods import Owner, owner_of
from idlegate.api.template import check_templates
from idlegate.errors import SpecError
from idlegate.operator.core.intents import (
    CreateWorkflow,
    DeleteWorkflow,
    Intent,
    PatchStatus,
    PostEvent,
)
from idlegate.operator.edge.kube import KubeApi
from idlegate.operator.edge.timers import Timers
from idlegate.sim.engine import JobArrival
from idlegate.sim.timestamps import stamp, to_datetime

log = logging.getLogger(__name__)

RETRY_SECONDS = 5.0
"""A timer's sync that the API did not answer is tried again after this long."""


@dataclass(eq=False)
class CronController:
    """Syncs DagCronWorkflows (see the module docstring); one per operator. Its writes are
    intents, each sync's in order, given to `apply` (the applier: the one write path)."""

    api: KubeApi
    timers: Timers
    clock: Clock
    apply: Callable[[Iterable[Intent]], None]
    foresee: Callable[[tuple[str, str], tuple[JobArrival, ...], str | None], None] = (
        lambda key, runs, pool: None
    )
    """Told each cron workflow's (namespace, name), upcoming runs and ``workflowSpec.pool``
    after every sync (the planner's ``futures=known``); () when it has none (invalid,
    suspended, deleted)."""
    pod_security: Level = DEFAULT_LEVEL
    """The level of a namespace without the label (the operator's --pod-security)."""
    history_samples: int = HISTORY_SAMPLES
    """The operator's --history-samples: a run's status holds as many durations a stage."""
    _locks: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict, init=False)

    async def sync(self, body: dict[str, Any]) -> None:
        """One sync of the cron workflow `body` (serialised per object)."""
        meta = body.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        async with self._locks.setdefault(key, asyncio.Lock()):
            self.apply(await self._sync(body))

    async def resync(self, namespace: str, name: str) -> None:
        """Sync the cron workflow as it is now in the API (a timer, or a run finished)."""
        body = await self.api.get_cron_workflow(namespace, name)
        if body is None:
            self.forget(namespace, name)
            return
        await self.sync(body)

    def forget(self, namespace: str, name: str) -> None:
        """The cron workflow is gone: drop its timer and its upcoming runs."""
        self.timers.cancel(_timer_key(namespace, name))
        self._locks.pop((namespace, name), None)
        self.foresee((namespace, name), (), None)

    # long: the numbered pipeline of the module docstring, one step per block
    async def _sync(self, body: dict[str, Any]) -> list[Intent]:
        meta = body.get("metadata") or {}
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        owner = Owner(ns, name, meta.get("uid", ""), CRON_KIND)
        status = CronWorkflowStatus.model_validate(body.get("status") or {})
        conditions = Conditions((body.get("status") or {}).get("conditions"))
        now = self.clock.now()
        generation = int(meta.get("generation") or 0)
        # 1. validate (the runs' templates as their admission will: by the namespace)
        policy = namespace_policy(await self.api.get_namespace(ns), self.pod_security)
        try:
            check_cron_name(name)
            spec = parse_cron_spec(body.get("spec"), f"DagCronWorkflow {ns}/{name}")
            check_templates(spec.workflow_spec, "spec.workflowSpec", policy)
            check_run_size(body, spec.workflow_spec, self.history_samples)
            schedule = CronSchedule.parse(spec.schedule, spec.time_zone)
        except SpecError as exc:
            conditions.set("Valid", False, "Invalid", str(exc), generation, now)
            self.timers.cancel(_timer_key(ns, name))
            self.foresee((ns, name), (), None)
            invalid = PostEvent(owner, "Warning", "Invalid", str(exc))
            return [invalid, _status(owner, status, conditions)]
        valid = "the schedule and workflowSpec are valid"
        conditions.set("Valid", True, "Valid", valid, generation, now)
        # 2. sort the runs
        runs = await self.api.list_workflows(ns, f"{LABEL_CRON}={name}")
        active, succeeded, failed = sort_runs(runs)
        # 3. history limits
        out = _prune(ns, succeeded, spec.successful_jobs_history_limit)
        out += _prune(ns, failed, spec.failed_jobs_history_limit)
        if succeeded:
            status.last_successful_time = to_datetime(scheduled_at(succeeded[-1]))
        # 4. the due run
        last = status.last_schedule_time.timestamp() if status.last_schedule_time else None
        wall = created_at(meta)  # an API timestamp: wall time
        created = now if wall is None else self.clock.from_wall(wall)
        when = due(
            schedule,
            now=now,
            last_scheduled=last,
            created=created,
            starting_deadline=spec.starting_deadline_seconds,
        )
        run, existing = None, {object_name(r) for r in runs}
        if not spec.suspend:  # suspended: due runs wait, as missed ones (see the spec)
            raw = copy.deepcopy(body["spec"]["workflowSpec"])  # as written: no defaults added
            run = _start_due(owner, spec, raw, when, active, existing, out)
        at = when.run_at  # (not None when a run started)
        if run is not None and at is not None:
            status.last_schedule_time = to_datetime(at)
        # 5. the status (once the run it records exists)
        status.active = sorted(object_name(r) for r in active)
        status.next_schedule_time = to_datetime(when.next_at)
        written = _status(owner, status, conditions)
        if run is None or at is None or object_name(run) in existing:
            out.append(written)
        else:
            said = f"started {object_name(run)} (due at {stamp(at)})"
            started = PostEvent(owner, "Normal", "RunStarted", said)
            out.append(CreateWorkflow(owner, run, (started, written)))
        # 6. the next look, and the runs ahead for the planner
        self._arm(ns, name, when.next_at)
        upcoming = () if spec.suspend else upcoming_runs(name, spec, schedule, now)
        self.foresee((ns, name), upcoming, spec.workflow_spec.pool)
        return out

    def _arm(self, ns: str, name: str, at: float) -> None:
        async def fire() -> None:
            try:
                await self.resync(ns, name)
            except Exception as exc:  # the API is away: look again soon, or no run ever starts
                log.warning("Cannot sync cron workflow %s/%s (%s); retrying.", ns, name, exc)
                self._arm(ns, name, self.clock.now() + RETRY_SECONDS)

        self.timers.arm(_timer_key(ns, name), at, fire)


def _start_due(
    owner: Owner,
    spec: CronWorkflowSpec,
    workflow: dict[str, Any],
    when: Due,
    active: list[dict[str, Any]],
    existing: set[str],
    out: list[Intent],
) -> dict[str, Any] | None:
    """The due run, if the policy starts it (the Events and deletions that go first to
    `out`); one in `existing` was started before (its status write lost): not again."""
    if when.too_late is not None:
        late = (
            f"the run due at {stamp(when.too_late)} was not started: it is more than "
            f"startingDeadlineSeconds ({spec.starting_deadline_seconds}) late"
        )
        out.append(PostEvent(owner, "Warning", "MissedSchedule", late))
        return None
    if when.run_at is None:
        return None
    if run_name(owner.name, when.run_at) in existing:
        return {"metadata": {"name": run_name(owner.name, when.run_at)}}  # (listed already)
    due_at = stamp(when.run_at)
    if when.missed:
        missed = f"{when.missed} earlier run(s) were missed; starting only the latest"
        out.append(PostEvent(owner, "Warning", "MissedSchedule", f"{missed}, due at {due_at}"))
    if active and spec.concurrency_policy is ConcurrencyPolicy.FORBID:
        forbid = (
            f"not starting the run due at {due_at}: concurrencyPolicy is Forbid and "
            f"{object_name(active[0])} is still active"
        )
        out.append(PostEvent(owner, "Normal", "RunAlreadyActive", forbid))
        return None
    if active and spec.concurrency_policy is ConcurrencyPolicy.REPLACE:
        for run in active:
            replaced = f"deleted the active run {object_name(run)}"
            out.append(DeleteWorkflow(owner_of(run), "concurrencyPolicy Replace", True))
            out.append(PostEvent(owner, "Normal", "Replaced", replaced))
        active.clear()
    active.append(run_object(owner, workflow, when.run_at))
    return active[-1]


def _prune(ns: str, finished: list[dict[str, Any]], keep: int) -> list[Intent]:
    """Delete the oldest of `finished` beyond `keep` (and drop them from it)."""
    gone = finished[: max(0, len(finished) - keep)]
    del finished[: len(gone)]
    return [DeleteWorkflow(owner_of(run), "history limit") for run in gone]


def _status(owner: Owner, status: CronWorkflowStatus, conditions: Conditions) -> PatchStatus:
    status.conditions = conditions.models()
    return PatchStatus(owner, status.model_dump(mode="json", by_alias=True, exclude_none=True))


def _timer_key(namespace: str, name: str) -> str:
    return f"cron/{namespace}/{name}"
