"""`DagCronWorkflow`: a DagWorkflow created on a cron schedule, and when each run is due.

A `DagCronWorkflow` is to a `DagWorkflow` what a Kubernetes CronJob is to a Job (and an
Argo CronWorkflow to a Workflow): `schedule` (five-field cron syntax or a macro such as
``@hourly``) in `timeZone` says when a run is due, and each run is a DagWorkflow made from
`workflowSpec`. The semantics follow the CronJob controller's, so a user who knows one
knows the other:

* **Which run is due.** At time `now`, the schedule's times in ``(earliest, now]`` are
  the unmet ones, where `earliest` is the last scheduled time (``status.lastScheduleTime``)
  or, before the first run, the object's creation. Only the most recent is run; the older
  ones are *missed* (counted, not run), as many at once would only pile up.
* **startingDeadlineSeconds.** A run more than this late is not started
  (``MissedSchedule``), and unmet times older than ``now − startingDeadlineSeconds`` are
  not even counted. After an operator restart this decides what happens to runs that fell
  due meanwhile: started if still within the deadline, else skipped. Unset: no deadline.
* **concurrencyPolicy.** ``Allow`` starts the run beside active ones; ``Forbid`` skips it
  while one is active (it stays due, and starts once the active one finishes if still
  within the deadline); ``Replace`` deletes the active ones first.
* **Exactly once.** A run's name is derived from its scheduled time (``NAME-<minutes
  since the epoch>``, as CronJob names its Jobs), so creating it twice (a restart between
  creating it and recording ``lastScheduleTime``) finds the first one instead.
* **History limits.** Finished runs beyond ``successfulJobsHistoryLimit`` (default 3) /
  ``failedJobsHistoryLimit`` (default 1) are deleted, oldest first.

The schedule is apscheduler's `CronTrigger` (the library the operator's timers run on):
this module only adds the macros and the CronJob semantics above, as pure functions of
plain times so that tests drive them without a clock.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from idlegate.api.status import Condition
from idlegate.errors import SpecError
from idlegate.sim.spec import WorkflowSpec, parse_workflow, validation_problems

if TYPE_CHECKING:  # the CRD generator imports the models without the operator extra
    from apscheduler.triggers.cron import CronTrigger

MAX_CRON_NAME_LENGTH = 52
"""A run is named ``NAME-<minutes>`` (up to 11 more characters) and a DagWorkflow's name
has at most 63: the cron workflow's name has at most 52, as a CronJob's."""
MAX_MISSED = 100
"""Unmet schedule times counted before giving up counting (the CronJob controller's 100):
enough to say "many"; beyond it the schedule or the deadline is wrong."""
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The cron macros Kubernetes accepts, as five-field expressions."""


class ConcurrencyPolicy(StrEnum):
    """What to do when a run is due while an earlier one is still active."""

    ALLOW = "Allow"
    FORBID = "Forbid"
    REPLACE = "Replace"


class CronWorkflowSpec(BaseModel):
    """The spec of a DagCronWorkflow."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    schedule: str = Field(
        min_length=1,
        max_length=256,
        description="When runs are due: five-field cron syntax (minute hour day-of-month "
        "month day-of-week), e.g. '*/15 * * * *', or a macro such as @hourly or @daily.",
    )
    time_zone: str = Field(
        default="UTC",
        alias="timeZone",
        min_length=1,
        max_length=64,
        description="IANA time zone the schedule is read in, e.g. Europe/Berlin.",
    )
    workflow_spec: WorkflowSpec = Field(
        alias="workflowSpec", description="The spec of each run (a DagWorkflow's spec)."
    )
    concurrency_policy: ConcurrencyPolicy = Field(
        default=ConcurrencyPolicy.ALLOW,
        alias="concurrencyPolicy",
        description="A run due while an earlier one is active: Allow (start it too), "
        "Forbid (skip it while one is active) or Replace (delete the active ones first).",
    )
    starting_deadline_seconds: int | None = Field(
        default=None,
        alias="startingDeadlineSeconds",
        ge=0,
        strict=True,
        description="A run later than this (e.g. after an operator restart) is skipped, "
        "not started. Unset: started however late.",
    )
    suspend: bool = Field(
        default=False,
        strict=True,
        description="No new runs while true (active ones go on). Runs due meanwhile are "
        "missed: on resume the latest starts if within startingDeadlineSeconds, as a CronJob's.",
    )
    successful_jobs_history_limit: int = Field(
        default=3,
        alias="successfulJobsHistoryLimit",
        ge=0,
        le=1000,
        strict=True,
        description="Succeeded runs kept; older ones are deleted.",
    )
    failed_jobs_history_limit: int = Field(
        default=1,
        alias="failedJobsHistoryLimit",
        ge=0,
        le=1000,
        strict=True,
        description="Failed runs kept; older ones are deleted.",
    )


class CronWorkflowStatus(BaseModel):
    """Observed state of a DagCronWorkflow, written by the idlegate operator."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    last_schedule_time: datetime | None = Field(
        default=None,
        alias="lastScheduleTime",
        description="The scheduled time of the last run started (or found started).",
    )
    last_successful_time: datetime | None = Field(
        default=None,
        alias="lastSuccessfulTime",
        description="When the last run that succeeded was scheduled.",
    )
    active: list[str] = Field(
        default_factory=list, max_length=1000, description="Names of the runs not finished."
    )
    next_schedule_time: datetime | None = Field(
        default=None, alias="nextScheduleTime", description="When the next run is due."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        description="Valid (False with reason Invalid: the schedule or time zone is wrong).",
    )


@dataclass(frozen=True)
class CronSchedule:
    """A parsed `schedule` in its time zone: the times it fires at."""

    trigger: CronTrigger

    @classmethod
    def parse(cls, schedule: str, time_zone: str = "UTC") -> CronSchedule:
        """The schedule, or a SpecError saying what is wrong with it (the time zone and the
        schedule both, when both are wrong)."""
        trigger, problems = _read_schedule(schedule, time_zone)
        if trigger is None:
            raise SpecError("; ".join(f"{path}: {text}" for path, text in problems))
        return cls(trigger)

    def next_after(self, t: float) -> float:
        """The first time the schedule fires strictly after epoch second `t`."""
        start = datetime.fromtimestamp(t + 1e-3, UTC)
        fire = self.trigger.get_next_fire_time(None, start)
        if fire is None:  # a cron expression always fires again; guard the library's None
            raise SpecError("the schedule never fires again")
        return fire.timestamp()

    def times(self, after: float, until: float) -> Iterator[float]:
        """The times the schedule fires in ``(after, until]``, in order."""
        t = self.next_after(after)
        while t <= until:
            yield t
            t = self.next_after(t)


@dataclass(frozen=True)
class Due:
    """What a cron workflow should do at `now` (see the module docstring)."""

    run_at: float | None
    """The scheduled time of the run to start now, or None."""
    missed: int
    """Unmet schedule times not run: older than `run_at`, or `run_at` itself if too late."""
    too_late: float | None
    """The most recent unmet time, when it is past the starting deadline."""
    next_at: float
    """The next schedule time after `now`: when to look again."""


def due(
    schedule: CronSchedule,
    *,
    now: float,
    last_scheduled: float | None,
    created: float,
    starting_deadline: float | None,
) -> Due:
    """Which run is due at `now`, given the last scheduled time (or the creation time)."""
    earliest = created if last_scheduled is None else last_scheduled
    if starting_deadline is not None:
        earliest = max(earliest, now - starting_deadline)
    unmet: list[float] = []
    for i, t in enumerate(schedule.times(earliest, now)):
        if i >= MAX_MISSED:
            break
        unmet.append(t)
    next_at = schedule.next_after(now)
    if not unmet:
        return Due(None, 0, None, next_at)
    latest = unmet[-1]
    if starting_deadline is not None and now - latest > starting_deadline:
        return Due(None, len(unmet), latest, next_at)
    return Due(latest, len(unmet) - 1, None, next_at)


def run_name(cron_name: str, scheduled: float) -> str:
    """The name of the run scheduled at `scheduled`: the same for the same time, always."""
    return f"{cron_name}-{int(scheduled // 60)}"


def _read_schedule(
    schedule: str, time_zone: str
) -> tuple[CronTrigger | None, list[tuple[str, str]]]:
    """The trigger of `schedule` in `time_zone`, or None and (field, sentence) of each
    problem: a bad time zone does not hide a bad schedule (read in UTC to check it)."""
    from apscheduler.triggers.cron import CronTrigger

    problems = []
    try:
        zone = ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(
            (
                "timeZone",
                f"{time_zone!r} is not a known IANA time zone; use e.g. UTC or Europe/Berlin",
            )
        )
        zone = ZoneInfo("UTC")
    expression = MACROS.get(schedule.strip(), schedule.strip())
    try:
        trigger = CronTrigger.from_crontab(expression, timezone=zone)
    except ValueError as exc:
        problems.append(
            (
                "schedule",
                f"{schedule!r} is not valid cron syntax ({exc}); use five fields 'minute hour "
                "day-of-month month day-of-week', e.g. '*/15 * * * *', or one of "
                f"{', '.join(MACROS)}",
            )
        )
        trigger = None
    return (None if problems else trigger), problems


PLACEHOLDER_WORKFLOW = {"stages": [{"name": "a", "tasks": 1, "taskDurationSeconds": 1}]}
"""Stands in for a cron workflow's workflowSpec while its own fields are checked (the
workflowSpec's problems are its runs', found by the workflow's own checks)."""


def cron_spec_problems(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(path in the spec, sentence) of each problem of a DagCronWorkflow spec's own fields:
    all but what is inside workflowSpec (each run's spec, checked as a DagWorkflow's). The
    schedule is read even when other fields are wrong, so every problem shows at once."""
    own = {**data, "workflowSpec": PLACEHOLDER_WORKFLOW} if "workflowSpec" in data else data
    try:
        CronWorkflowSpec.model_validate(own)
        out: list[tuple[str, str]] = []
    except ValidationError as exc:
        out = validation_problems(exc, CronWorkflowSpec)
    schedule, zone = data.get("schedule"), data.get("timeZone", "UTC")
    if isinstance(schedule, str) and schedule.strip():  # else the model says what is wrong
        told = {path for path, _ in out}
        _, found = _read_schedule(schedule, zone if isinstance(zone, str) else "UTC")
        out.extend(p for p in found if p[0] not in told)
    return out


def parse_cron_spec(data: object, source: str) -> CronWorkflowSpec:
    """Validate a DagCronWorkflow's spec (schedule and time zone included); the SpecError
    names every problem: the workflowSpec's, then those of :func:`cron_spec_problems`."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: the spec must be a mapping with schedule and workflowSpec")
    parts = [f"{path}: {text}" if path else text for path, text in cron_spec_problems(data)]
    if "workflowSpec" in data:
        try:
            parse_workflow(data["workflowSpec"], "workflowSpec")
        except SpecError as exc:
            parts.insert(0, str(exc))
    if parts:
        raise SpecError(f"{source}: {'; '.join(parts)}")
    return CronWorkflowSpec.model_validate(data)


def check_cron_name(name: str) -> None:
    """Raise SpecError if `name` leaves no room for its runs' names."""
    if len(name) > MAX_CRON_NAME_LENGTH:
        raise SpecError(
            f"the name {name!r} is longer than {MAX_CRON_NAME_LENGTH} characters; each run is "
            "named NAME-<minutes since the epoch>, and a DagWorkflow's name has at most 63"
        )
