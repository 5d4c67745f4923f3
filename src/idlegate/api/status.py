"""The DagWorkflow status the operator writes: its models (:class:`WorkflowStatus`; the CRD's
status schema is generated from them, :mod:`idlegate.api.crd`), conditions in
metav1.Condition style, idle slots as persisted, and the status of a rejected workflow (an
admitted one's is :meth:`idlegate.operator.core.tracking.Workflow.status`).

Regenerate the CRD after changing a model (``python -m idlegate.api.crd``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from idlegate.api.samples import HISTORY_SAMPLES as HISTORY_SAMPLES  # (re-exported)
from idlegate.api.samples import MAX_MEASURED as MAX_MEASURED
from idlegate.errors import SpecError
from idlegate.sim.spec import MAX_NAME_LENGTH, NAME_PATTERN, WorkflowSpec
from idlegate.sim.timestamps import to_datetime

MAX_CONDITIONS = 16
MAX_MESSAGE = 1024
"""Longest condition or Event message the operator writes (longer ones are cut)."""

# metav1.Condition's own validation (k8s.io/apimachinery/pkg/apis/meta/v1/types.go)
CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
MAX_POLICY = 253
MAX_SPEC = 4096
"""Longest scheduler spec in a status (a portfolio with its options, a path)."""
MAX_COMPLETED_INDEXES = 2**19
"""Longest completedIndexes: every other task of the largest stage (100,000 tasks) fits."""
MAX_OBJECT_BYTES = 1_572_864
"""The largest object the API server can store: etcd's default request limit
(``--max-request-bytes``, 1.5 MiB). A DagWorkflow's real bound (`check_object_size`)."""
MAX_CR_STAGES = 8_000
"""The CRD's bound on a DagWorkflow's stages (and its status lists). Kubernetes refuses a
CRD whose CEL rule costs more than 10,000,000 (its static estimate times the items the
rule runs on): the rule that no stage depends on itself costs about `MAX_CR_DEPENDENCIES`
+ 5 per stage, so 8,000 x 1,005 = 8.04 million. More than fit `MAX_OBJECT_BYTES` even of
the smallest stages (docs/scale.md): the object's size binds first."""
MAX_CR_DEPENDENCIES = 1_000
"""The CRD's bound on one stage's ``dependsOn`` (see `MAX_CR_STAGES`)."""
_POLICY = (
    "The rule that decided the last release of tasks: the policy, the policy a lookahead "
    "planner followed then (its PolicySwitched Events say why), or the fallback rule that "
    "answered for a failing policy"
)


class Phase(StrEnum):
    """Where a workflow is in its life."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUSPENDED = "Suspended"
    """Out of the pool by ``spec.suspend`` (no task runs); Pending or Running once resumed."""
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    INVALID = "Invalid"


FINISHED = (Phase.SUCCEEDED, Phase.FAILED)
"""The phases of a workflow that ran to its end: it has a record and may be cleaned up."""
FINISHED_OR_INVALID = (*FINISHED, Phase.INVALID)
"""The phases of a workflow that runs no more (an Invalid one is kept for a fix)."""


class _StatusModel(BaseModel):
    # camelCase on the wire, snake_case in Python; the operator dumps with
    # model_dump(mode="json", by_alias=True, exclude_none=True)
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class Condition(_StatusModel):
    """A condition in the shape of metav1.Condition."""

    type: str = Field(
        max_length=316,
        pattern=CONDITION_TYPE_PATTERN,
        description="Type of the condition in CamelCase, e.g. Valid, Complete, Failed.",
    )
    status: Literal["True", "False", "Unknown"] = Field(
        description="Status of the condition: True, False or Unknown."
    )
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description="The .metadata.generation the condition was set for.",
    )
    last_transition_time: datetime = Field(
        description="When the condition last changed from one status to another."
    )
    reason: str = Field(
        min_length=1,
        max_length=1024,
        pattern=CONDITION_REASON_PATTERN,
        description="Programmatic identifier of the reason for the last transition, in CamelCase.",
    )
    message: str = Field(
        max_length=32768, description="Human-readable details of the last transition."
    )


class StageStatus(_StatusModel):
    """Task counts of one stage."""

    name: str = Field(
        min_length=1, max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN, description="Stage name."
    )
    tasks: int = Field(ge=0, description="Tasks of the stage (spec.stages[].tasks).")
    pending: int = Field(
        default=0,
        ge=0,
        description="Tasks not running yet: not created, gated, or waiting for a node.",
    )
    running: int = Field(default=0, ge=0, description="Task pods running now.")
    succeeded: int = Field(default=0, ge=0, description="Tasks that have succeeded.")
    failed: int = Field(
        default=0, ge=0, description="Failed task pod attempts so far (retries included)."
    )
    policy: str | None = Field(
        default=None, max_length=MAX_POLICY, description=_POLICY + " of this stage."
    )
    completed_indexes: str | None = Field(
        default=None,
        max_length=MAX_COMPLETED_INDEXES,
        pattern=r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$",
        description="Indexes of the succeeded tasks in a Job's completedIndexes format "
        "(e.g. 0-3,7: runs of three or more as first-last): a restarted operator reads the "
        "tasks whose pods pod GC deleted from it.",
    )
    measured_duration_seconds: list[float] | None = Field(
        default=None,
        max_length=MAX_MEASURED,
        description="Run times in seconds (pod start to finish) of succeeded tasks: all of "
        "them, or a uniform sample of them once there are more than the operator keeps "
        "(--history-samples); what `idlegate history export` records as the stage's "
        "measuredDurationSeconds.",
    )


MAX_STOPPED = 20
"""Most stopped attempts a workflow's status keeps (the latest)."""


class StoppedAttempt(_StatusModel):
    """A task attempt stopped to give quota back (its pod evicted): what the workflow's
    page draws once the pod is gone (issue 93)."""

    pod: str = Field(min_length=1, max_length=253, description="The evicted pod's name.")
    stage: str = Field(
        min_length=1, max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN, description="Its stage."
    )
    index: int = Field(ge=0, description="Its task's index in the stage.")
    attempt: int = Field(ge=0, description="The attempt stopped (its task runs again as the next).")
    preempted: int = Field(
        ge=1, description="Its task's attempts stopped so far, this one included (no failures)."
    )
    queue: str = Field(max_length=253, description="The queue its stop gave quota back to.")
    start_time: datetime | None = Field(
        default=None, description="When the attempt started to run (absent: not known)."
    )
    stop_time: datetime = Field(description="When its stop was taken (its eviction).")
    lost_seconds: float = Field(
        ge=0, description="Executor-seconds of work it lost (0: a checkpointed stage)."
    )


class IdleSlot(_StatusModel):
    """A deliberate idle slot: the stage is held back until releaseTime (at most once per stage)."""

    stage: str = Field(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        pattern=NAME_PATTERN,
        description="The stage held back.",
    )
    delay_seconds: float = Field(ge=0, description="Length of the idle slot in seconds.")
    release_time: datetime = Field(
        description="When the stage is released; persisted so a restarted operator neither "
        "forgets nor repeats the delay."
    )
    released: bool = Field(
        default=False, description="The slot is over and the stage has been released."
    )
    reason: str | None = Field(
        default=None,
        max_length=1024,
        description="Why the policy waited (shown in Events as well).",
    )


class ForecastState(_StatusModel):
    """When a waiting workflow is forecast to start and finish, with 80 % intervals, or why
    it cannot be (`idlegate.api.forecast_status` reads and writes it)."""

    computed_at: datetime = Field(description="When the forecast was made.")
    position: int | None = Field(
        default=None, ge=1, description="Its position in its queue then (1: first)."
    )
    start: datetime | None = Field(default=None, description="Forecast start.")
    start_interval: list[datetime] | None = Field(
        default=None, min_length=2, max_length=2, description="80 % interval of the start."
    )
    finish: datetime | None = Field(default=None, description="Forecast finish.")
    finish_interval: list[datetime] | None = Field(
        default=None, min_length=2, max_length=2, description="80 % interval of the finish."
    )
    unavailable: str | None = Field(
        default=None,
        max_length=MAX_MESSAGE,
        description="Why no forecast could be computed (then no times are given).",
    )


class FirstForecastState(_StatusModel):
    """The first forecast made while the workflow waited, kept (never moved: only its
    ``startedAt`` is added, at the start) so that an operator restarted before it starts
    and ends still scores it (`idlegate.api.forecast_first`; docs/research/forecasts.md, "After
    a restart")."""

    computed_at: datetime = Field(description="When the forecast was made.")
    start: datetime = Field(description="Forecast start.")
    start_interval: list[datetime] = Field(
        min_length=2, max_length=2, description="80 % interval of the start, as shown."
    )
    start_replayed: list[datetime] = Field(
        min_length=2,
        max_length=2,
        description="The replays' 80 % interval of the start, before the pool's calibration "
        "widened it (what the calibration scores).",
    )
    finish: datetime = Field(description="Forecast finish.")
    finish_interval: list[datetime] = Field(
        min_length=2, max_length=2, description="80 % interval of the finish, as shown."
    )
    finish_replayed: list[datetime] = Field(
        min_length=2,
        max_length=2,
        description="The replays' 80 % interval of the finish, before the calibration widened it.",
    )
    started_at: datetime | None = Field(
        default=None, description="When its first task started (the start's score)."
    )


class WorkflowStatus(_StatusModel):
    """Observed state of a DagWorkflow, written by the idlegate operator."""

    observed_generation: int | None = Field(
        default=None, ge=0, description="The .metadata.generation this status describes."
    )
    phase: Phase | None = Field(
        default=None, description="Pending, Running, Succeeded, Failed or Invalid."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        max_length=MAX_CONDITIONS,
        description="Latest observations of the workflow's state (Valid, Complete, Failed, ...).",
    )
    stages_total: int | None = Field(default=None, ge=0, description="Number of stages.")
    stages_done: int | None = Field(
        default=None, ge=0, description="Stages whose tasks have all succeeded."
    )
    stages_summary: str | None = Field(
        default=None,
        max_length=16,
        pattern=r"^[0-9]+/[0-9]+$",
        description="stagesDone/stagesTotal, e.g. 3/5 (a printer column).",
    )
    stages: list[StageStatus] | None = Field(
        default=None, max_length=MAX_CR_STAGES, description="Task counts per stage."
    )
    parallelism_cap: int | None = Field(
        default=None,
        ge=0,
        description="Executors (running task pods) this workflow may hold, as last set by the policy.",
    )
    idle_slots: list[IdleSlot] | None = Field(
        default=None,
        max_length=MAX_CR_STAGES,
        description="Deliberate idle slots, pending and past (each stage is delayed at most once).",
    )
    start_time: datetime | None = Field(
        default=None, description="When the operator first saw (admitted) the workflow."
    )
    admission_lag_seconds: float | None = Field(
        default=None,
        ge=0,
        description="startTime - metadata.creationTimestamp: how long the workflow waited "
        "for the operator (e.g. while it was down), to the timestamp's one-second precision.",
    )
    completion_time: datetime | None = Field(
        default=None, description="When the last task succeeded or the workflow failed."
    )
    jct_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Job completion time: completionTime - metadata.creationTimestamp (its "
        "arrival), admission lag included.",
    )
    idle_inserted_seconds: float | None = Field(
        default=None, ge=0, description="Total deliberate idle time inserted into this workflow."
    )
    policy: str | None = Field(
        default=None, max_length=MAX_POLICY, description=_POLICY + " (a printer column)."
    )
    pool_size: int | None = Field(
        default=None,
        ge=1,
        description="Executors of the operator's pool (--pool-size) when the workflow finished.",
    )
    scheduler: str | None = Field(
        default=None,
        max_length=MAX_SPEC,
        description="The scheduler spec its pool ran when the workflow finished (--scheduler, "
        "default without one, or the ExecutorPool's policy): what a replay of its history "
        "rebuilds, where policy names the rule (a portfolio's candidate, a model file's name).",
    )
    stopped: list[StoppedAttempt] | None = Field(
        default=None,
        max_length=MAX_STOPPED,
        description="The latest task attempts stopped to give quota back (their pods "
        "evicted), oldest first: written before the stop's finalizer is taken off its pod, so "
        "a restarted operator that finds the pod gone runs its task's next attempt; the "
        "workflow's page shows them once their pods are gone.",
    )
    history_recorded: bool | None = Field(
        default=None,
        description="The finished workflow's record is in the operator's --history-file (it "
        "is written once: not again after a restart).",
    )
    forecast: ForecastState | None = Field(
        default=None,
        description="When the workflow is forecast to start and finish (docs/dashboard.md); "
        "absent: no forecast yet, or finished (cleared as it ends).",
    )
    start_summary: str | None = Field(
        default=None,
        max_length=32,
        description="When its first task started (UTC), else its forecast start marked ~, "
        "or unavailable (a printer column: idlegate.api.forecast_status.columns).",
    )
    finish_summary: str | None = Field(
        default=None,
        max_length=32,
        description="When it finished (UTC), else its forecast finish marked ~, or "
        "unavailable (a printer column).",
    )
    first_forecast: FirstForecastState | None = Field(
        default=None,
        description="Its first forecast made while it waited, with what an operator "
        "restarted before it ends needs to score it (docs/forecast.md, After a restart); "
        "absent: none was made.",
    )
    kopf: dict[str, Any] | None = Field(
        default=None, description="Reserved for kopf's own bookkeeping (progress of handlers)."
    )


def generation_of(body: Mapping[str, Any]) -> int:
    """An object's ``metadata.generation`` (1 before the API server set one)."""
    return int((body.get("metadata") or {}).get("generation") or 1)


def judged(body: Mapping[str, Any]) -> bool:
    """The workflow's status describes its current generation (a verdict on this very spec)."""
    meta = body.get("metadata") or {}
    return (body.get("status") or {}).get("observedGeneration") == meta.get("generation", 1)


def clip(message: str, limit: int = MAX_MESSAGE) -> str:
    """`message` cut to `limit` characters (with an ellipsis)."""
    return message if len(message) <= limit else message[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class SlotState:
    """One idle slot a policy gave a stage: what was decided, for the status and Events.
    Whether the stage is in it now is the state machine's (``Stage.idle_until``)."""

    stage: str
    delay: float
    release: float
    """When it was to end, clock seconds (it ends earlier if the stage starts unasked)."""
    reason: str = ""

    def model(self, *, released: bool) -> IdleSlot:
        return IdleSlot(
            stage=self.stage,
            delay_seconds=round(self.delay, 6),
            release_time=to_datetime(self.release),
            released=released,
            reason=clip(self.reason) or None,
        )


class Conditions:
    """The workflow's conditions; lastTransitionTime moves only when a status changes."""

    def __init__(self, existing: list[dict[str, Any]] | None = None) -> None:
        self._by_type: dict[str, Condition] = {}
        for raw in existing or []:
            try:
                cond = Condition.model_validate(raw)
            except ValueError:
                continue
            self._by_type[cond.type] = cond

    def set(
        self, type_: str, status: bool, reason: str, message: str, generation: int, now: float
    ) -> None:
        value = "True" if status else "False"
        old = self._by_type.get(type_)
        when = old.last_transition_time if old is not None and old.status == value else None
        self._by_type[type_] = Condition(
            type=type_,
            status=value,
            reason=reason,
            message=clip(message),
            observed_generation=generation,
            last_transition_time=when or to_datetime(now),
        )

    def get(self, type_: str) -> Condition | None:
        return self._by_type.get(type_)

    def remove(self, type_: str) -> None:
        self._by_type.pop(type_, None)

    def models(self) -> list[Condition]:
        order = {"Valid": 0, "Suspended": 1, "Running": 2, "Complete": 3, "Failed": 4}
        return sorted(self._by_type.values(), key=lambda c: (order.get(c.type, 9), c.type))


def format_indexes(indexes: list[int]) -> str | None:
    """Sorted task indexes in a Job's completedIndexes format: "0-3,5,6" (None: none)."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(indexes) + 1):
        if i == len(indexes) or indexes[i] != indexes[i - 1] + 1:
            first, last = indexes[start], indexes[i - 1]
            if last - first >= 2:
                parts.append(f"{first}-{last}")
            else:
                parts.extend(str(x) for x in range(first, last + 1))
            start = i
    return ",".join(parts) or None


def parse_indexes(text: Any, limit: int) -> set[int]:
    """The indexes below `limit` of a completedIndexes string (nothing from a malformed one)."""
    found: set[int] = set()
    if not isinstance(text, str):
        return found
    for part in text.split(","):
        first, _, last = part.partition("-")
        if not first.isdigit() or not (last or first).isdigit():
            return set()
        found.update(range(int(first), min(int(last or first), limit - 1) + 1))
    return found


def dump(status: WorkflowStatus) -> dict[str, Any]:
    """The status as the API takes it (camelCase, no nulls)."""
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def json_names(model: type[BaseModel]) -> tuple[str, ...]:
    """The JSON names (aliases) of `model`'s fields, in order."""
    return tuple(f.alias or name for name, f in model.model_fields.items())


def with_nulls(body: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """`body` as a JSON merge patch (RFC 7386) that also removes each of `keys` it lacks.
    An API server keeps every key a merge patch omits, so a field its writer no longer has
    (an optional one it may stop writing) must be written as null, or its old value stays
    beside the new ones (issue 97: a forecast kept its ``unavailable`` beside its times)."""
    return {**dict.fromkeys(keys), **body}


UNFORECAST = {"forecast": None, "startSummary": None, "finishSummary": None}
"""The status fields of a forecast, removed (a merge patch's nulls): what a workflow that is
no longer forecast (invalid, or in no pool) writes, so no old forecast stays on it."""


def invalid_status(
    conditions: Conditions, generation: int, stages_total: int | None
) -> dict[str, Any]:
    """The status of a workflow the operator rejected (a merge patch: what it no longer has,
    a forecast and a cap, is removed)."""
    status = WorkflowStatus(
        observed_generation=generation,
        phase=Phase.INVALID,
        conditions=conditions.models(),
        stages_total=stages_total,
        stages_done=0 if stages_total is not None else None,
        stages_summary=f"0/{stages_total}" if stages_total is not None else None,
        # an empty list replaces the task counts of an earlier judgement (a merge patch
        # replaces lists): an invalid workflow has no pending tasks
        stages=[],
    )
    return dump(status) | UNFORECAST | {"parallelismCap": None}


def object_bytes(
    body: Mapping[str, Any], spec: WorkflowSpec, samples: int = HISTORY_SAMPLES
) -> int:
    """The bytes etcd holds for DagWorkflow `body` (whose spec is `spec`) once all its stages
    are done: the object as compact JSON without its status, the status entry of each stage
    as the operator writes it then (its counts, a policy, completedIndexes and `samples`
    measured durations as long as its task duration's), and the API server's managedFields
    of both (`_fields_bytes`). The status's other fields are left out (a few KiB)."""
    rest = {k: v for k, v in body.items() if k != "status"}
    stages = [
        StageStatus(
            name=s.name,
            tasks=s.tasks,
            succeeded=s.tasks,
            policy="learned:default",
            completed_indexes="0" if s.tasks == 1 else f"0-{s.tasks - 1}",
            measured_duration_seconds=[round(s.task_duration_seconds, 3)] * min(s.tasks, samples),
        ).model_dump(mode="json", by_alias=True, exclude_none=True)
        for s in spec.stages
    ]
    status = {"stages": stages}
    return (
        _json_bytes(rest)
        + _fields_bytes(rest.get("spec"))
        + _json_bytes(status)
        + _fields_bytes(status)
    )


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), default=str))


def _fields_bytes(value: Any) -> int:
    """About the bytes of `value`'s entry in managedFields (fieldsV1): ``"f:key":{...}`` per
    field, ``"k:{\"name\":...}":{".":{},...}`` per item of a list keyed by name and
    ``"v:..."`` per item of a set."""
    if isinstance(value, Mapping):
        return 2 + sum(len(str(k)) + 5 + _fields_bytes(v) for k, v in value.items())
    if not isinstance(value, list):
        return 2
    # (items of any type: the body's size is checked before its fields' types are; an
    # atomic list, of numbers or of unnamed objects, is one field)
    return 2 + sum(
        len(str(v["name"])) + 24 + _fields_bytes(v)
        if isinstance(v, Mapping) and "name" in v
        else len(v) + 10
        if isinstance(v, str)
        else 0
        for v in value
    )


def check_object_size(
    body: Mapping[str, Any], spec: WorkflowSpec, samples: int = HISTORY_SAMPLES
) -> None:
    """Raise SpecError if DagWorkflow `body` would outgrow what etcd stores once its status
    is written (`object_bytes` over `MAX_OBJECT_BYTES`): the operator could then not record
    its progress."""
    size = object_bytes(body, spec, samples)
    if size > MAX_OBJECT_BYTES:
        raise SpecError(
            f"the workflow's {len(spec.stages):,} stages make an object of about {size:,} bytes "
            f"with the status they need, more than the {MAX_OBJECT_BYTES:,} bytes (1.5 MiB) "
            "Kubernetes stores per object; split it into smaller workflows or shorten its "
            "stages (templates, names)"
        )
