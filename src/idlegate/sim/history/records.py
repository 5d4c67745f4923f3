"""A history record: one past workflow, read from and written to its document.

`HistoryWorkflow` is one past workflow (its DAG spec, arrival, measured task durations and
what happened to it); `parse_record` reads one from a plain workflow document or a
`DagWorkflow` with the history keys (the format `idlegate.sim.history` describes), and
`history_record` writes one back, so that the two read each other's output equal.
`RecordedDurations` is the simulator's duration model of a recorded workflow's jobs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from idlegate.errors import SpecError
from idlegate.sim.durations import Uniforms
from idlegate.sim.pod_template import check_stage_templates
from idlegate.sim.spec import MAX_TASK_SECONDS, WorkflowSpec, parse_workflow

ARRIVAL_KEYS = ("arrival", "submitTime")
"""Keys naming a workflow's submission time (seconds); give at most one."""
MEASURED_KEY = "measuredDurationSeconds"
"""Stage key: the measured task durations in seconds."""
OUTCOMES = ("Succeeded", "Failed")
"""The values of a record's `outcome`."""
RECORD_KEYS = (
    "jctSeconds",
    "outcome",
    "policy",
    "poolSize",
    "template",
    "pool",
    "namespace",
    "labels",
    "forecast",
)
"""Top-level keys of what happened to a workflow (beside `arrival`)."""


@dataclass(frozen=True)
class RecordedDurations:
    """A job's real task durations: drawn from each stage's measurements, else its estimate.

    `measured[i]` is stage i's list of measured durations (None: none were measured, the
    task takes exactly `estimates[i]`).
    """

    measured: tuple[tuple[float, ...] | None, ...]
    estimates: tuple[float, ...]

    def sample(
        self, stage: int, job_executors: int, first: bool, moved: bool, u: Uniforms
    ) -> float:
        row = self.measured[stage]
        if not row:
            return self.estimates[stage]
        return row[int(u.next() * len(row))]


FORECAST_KEYS = (
    "madeAt",
    "start",
    "finish",
    "startedAt",
    "startLow",
    "startHigh",
    "finishLow",
    "finishHigh",
)
"""A record's ``forecast``: when its first forecast was made while it waited, the start
and finish it forecast, when it really started (its finish: arrival + jctSeconds), and the
replays' 80 % interval around the start and the finish before the pool's calibration
widened it (what a restarted operator's calibration is rebuilt from:
`operator.forecasting.book.resumed_calibration`), in the operator clock's epoch seconds (all
but the first three may be absent: records of operators before them)."""
OPTIONAL_FORECAST_KEYS = frozenset(FORECAST_KEYS[3:])


@dataclass(frozen=True)
class HistoryWorkflow:
    """One past workflow: its DAG spec, when it arrived, and its measured task durations."""

    spec: WorkflowSpec
    name: str | None
    """The workflow's label (`name`, or a DagWorkflow's metadata.name), if it has one."""
    arrival: float | None
    """Submission time in seconds as written in the file (None: not recorded)."""
    measured: tuple[tuple[float, ...] | None, ...]
    """Per stage, in spec order: the measured task durations, or None."""
    source: str
    """Where it is in the file, for error messages."""
    jct: float | None = None
    """Its job completion time in seconds, arrival to finish (None: not recorded)."""
    outcome: str | None = None
    """`Succeeded` or `Failed` (None: not recorded)."""
    policy: str | None = None
    """The scheduler spec that ran it (None: not recorded)."""
    pool_size: int | None = None
    """The executors of its pool when it ran (None: not recorded)."""
    template: str | None = None
    """An Argo workflow's template key (`ArgoJob.template_key`), for the estimates of its
    later runs (None: not an Argo workflow, or not recorded)."""
    pool: str | None = None
    """The ExecutorPool that ran it (the operator's sink; None: not recorded)."""
    namespace: str | None = None
    """Its namespace (a queue's ``namespaces`` place it in a replay; None: not recorded)."""
    labels: Mapping[str, str] | None = field(default=None, hash=False, compare=True)
    """Its labels (``idlegate.io/queue`` places it in a replay; None: not recorded)."""
    forecast: tuple[tuple[str, float], ...] | None = None
    """Its first forecast and its real start (`FORECAST_KEYS`, as pairs; None: none)."""

    def durations(self) -> RecordedDurations | None:
        """The simulator's duration model for this workflow's jobs (None if nothing measured)."""
        if all(m is None for m in self.measured):
            return None
        estimates = tuple(float(s.task_duration_seconds) for s in self.spec.stages)
        return RecordedDurations(self.measured, estimates)


def parse_record(
    raw: dict[str, Any], spec: dict[str, Any], name: str | None, source: str
) -> HistoryWorkflow:
    """A workflow with its record keys: a plain one (`spec` is `raw`), or a DagWorkflow
    (`raw` the object, `name` its metadata.name)."""
    body = dict(spec)
    if name is not None:  # a DagWorkflow: its source already names it
        where = source
    else:
        name = _name(body, source)
        where = source
        if name is not None:  # "f.yaml (workflow #0 'a')", or "workflow 'a'" from lint
            where = f"{source[:-1]} {name!r})" if source.endswith(")") else f"{source} {name!r}"
    arrival = recorded_arrival(raw, where)
    record = record_keys(raw, where)
    if spec is raw:  # a plain workflow: history keys sit beside `stages`
        for key in (*ARRIVAL_KEYS, *RECORD_KEYS):
            body.pop(key, None)
    stages, measured = _strip_measurements(body.get("stages"), where)
    if stages is not None:
        body["stages"] = stages
    parsed = parse_workflow(body, where)
    try:  # (the operator's and lint's check: a template they refuse is no workflow here)
        check_stage_templates(parsed, "" if spec is raw else "spec")
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from None
    return HistoryWorkflow(parsed, name, arrival, measured, where, **record)


def history_record(workflow: HistoryWorkflow) -> dict[str, Any]:
    """One workflow as a plain history document (`load_history` reads it back equal).

    Pod templates are left out: a replay does not need them, and they may hold what a
    history file should not (images, environment); what a template's pod requests stays,
    as the stage's `resources` (what a pool of resources counted).
    """
    out: dict[str, Any] = {}
    if workflow.name is not None:
        out["name"] = workflow.name
    if workflow.arrival is not None:
        out["arrival"] = workflow.arrival
    stages = []
    for stage, measured in zip(workflow.spec.stages, workflow.measured, strict=True):
        doc = stage.model_dump(by_alias=True, exclude={"template"}, exclude_defaults=True)
        if stage.template is not None and stage.demand:
            doc["resources"] = stage.demand.to_list()
        doc["taskDurationSeconds"] = stage.task_duration_seconds
        if doc.get("dependsOn") is not None:
            doc["dependsOn"] = list(doc["dependsOn"])
        if measured:
            doc[MEASURED_KEY] = list(measured)
        stages.append(doc)
    out["stages"] = stages
    # (the queue and priority class a replay with --queues waits in, as the workflow named them)
    named = {
        "queueName": workflow.spec.queue_name,
        "priorityClassName": workflow.spec.priority_class_name,
    }
    out.update({key: value for key, value in named.items() if value is not None})
    extra = zip(
        RECORD_KEYS,
        (
            workflow.jct,
            workflow.outcome,
            workflow.policy,
            workflow.pool_size,
            workflow.template,
            workflow.pool,
            workflow.namespace,
            None if workflow.labels is None else dict(workflow.labels),
            None if workflow.forecast is None else dict(workflow.forecast),
        ),
        strict=True,
    )
    out.update({key: value for key, value in extra if value is not None})
    return out


def _forecast(found: Any, where: str) -> tuple[tuple[str, float], ...]:
    ok = isinstance(found, dict) and set(found) <= set(FORECAST_KEYS)
    pairs = []
    for key in FORECAST_KEYS if ok else ():
        value = found.get(key)
        if value is None and key in OPTIONAL_FORECAST_KEYS:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            ok = False
            break
        pairs.append((key, float(value)))
    if not ok:
        raise SpecError(
            f"{where}: forecast must be a mapping of madeAt, start, finish (and startedAt, "
            f"startLow, startHigh, finishLow, finishHigh) in seconds, got {found!r}"
        )
    return tuple(pairs)


def most_recorded(values: Sequence[Any]) -> Any:
    """The value recorded most often (ties: the one recorded first); None if none is."""
    counts = Counter(v for v in values if v is not None)
    return counts.most_common(1)[0][0] if counts else None


def record_keys(top: dict[str, Any], where: str) -> dict[str, Any]:
    """The optional record keys of a workflow (`RECORD_KEYS`), checked."""
    out: dict[str, Any] = {}
    jct = top.get("jctSeconds")
    if jct is not None:
        ok = isinstance(jct, int | float) and not isinstance(jct, bool) and math.isfinite(jct)
        if not ok or jct < 0:
            raise SpecError(f"{where}: jctSeconds must be a number of seconds >= 0, got {jct!r}")
        out["jct"] = float(jct)
    outcome = top.get("outcome")
    if outcome is not None:
        if outcome not in OUTCOMES:
            raise SpecError(
                f"{where}: outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}"
            )
        out["outcome"] = outcome
    for key, what in (
        ("policy", "a scheduler spec such as 'fair'"),
        ("template", "the name of an Argo workflow template"),
        ("pool", "the name of an ExecutorPool"),
        ("namespace", "the name of a namespace"),
    ):
        text = top.get(key)
        if text is not None:
            if not isinstance(text, str) or not text:
                raise SpecError(f"{where}: {key} must be {what}, got {text!r}")
            out[key] = text
    labels = top.get("labels")
    if labels is not None:
        if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise SpecError(f"{where}: labels must map label names to texts, got {labels!r}")
        out["labels"] = dict(labels)
    forecast = top.get("forecast")
    if forecast is not None:
        out["forecast"] = _forecast(forecast, where)
    pool = top.get("poolSize")
    if pool is not None:
        if isinstance(pool, bool) or not isinstance(pool, int) or pool < 1:
            raise SpecError(
                f"{where}: poolSize must be a whole number of executors >= 1, got {pool!r}"
            )
        out["pool_size"] = pool
    return out


def plain_workflow(spec: WorkflowSpec, source: str) -> HistoryWorkflow:
    """A workflow that records nothing of its past (a document that is not a mapping)."""
    return HistoryWorkflow(spec, None, None, (None,) * len(spec.stages), source)


def recorded_arrival(top: dict[str, Any], source: str) -> float | None:
    """The arrival `top` records (`ARRIVAL_KEYS`) in seconds, None if it records none;
    SpecError naming `source` if it gives both keys or a value that is no time."""
    given = [k for k in ARRIVAL_KEYS if k in top]
    if len(given) > 1:
        raise SpecError(f"{source}: give either arrival or submitTime, not both")
    if not given:
        return None
    key = given[0]
    value = top[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(
            f"{source}: {key} must be a number of seconds (e.g. 12.5 or epoch seconds), "
            f"got {value!r}"
        )
    if value < 0:
        raise SpecError(f"{source}: {key} must be >= 0 seconds, got {value}")
    return float(value)


def _name(body: dict[str, Any], source: str) -> str | None:
    if "name" not in body:
        return None
    value = body.pop("name")
    if not isinstance(value, str | int) or isinstance(value, bool) or str(value) == "":
        raise SpecError(f"{source}: name must be a non-empty text, got {value!r}")
    return str(value)


def _strip_measurements(
    stages: Any, where: str
) -> tuple[list[Any] | None, tuple[tuple[float, ...] | None, ...]]:
    """The stages without their measurements (estimates filled in), and the measurements."""
    if not isinstance(stages, list):
        return None, ()  # parse_workflow reports the missing or malformed stage list
    clean: list[Any] = []
    measured: list[tuple[float, ...] | None] = []
    for i, stage in enumerate(stages):
        if not isinstance(stage, dict) or MEASURED_KEY not in stage:
            clean.append(stage)
            measured.append(None)
            continue
        stage = dict(stage)
        label = f"stage {stage.get('name', f'#{i}')!r}"
        values = _measurements(stage.pop(MEASURED_KEY), f"{where}: {label}")
        stage.setdefault("taskDurationSeconds", float(np.mean(values)))
        clean.append(stage)
        measured.append(values)
    return clean, tuple(measured)


def _measurements(value: Any, where: str) -> tuple[float, ...]:
    hint = f"{MEASURED_KEY} must be a non-empty list of task durations in seconds, e.g. [4.2, 5.0]"
    if not isinstance(value, list) or not value:
        raise SpecError(f"{where}: {hint}; got {value!r}")
    out = []
    for v in value:
        ok = isinstance(v, int | float) and not isinstance(v, bool)
        if not ok or not (0 < v <= MAX_TASK_SECONDS):
            raise SpecError(
                f"{where}: {MEASURED_KEY} holds {v!r}; every duration must be a number of "
                f"seconds > 0 and <= {MAX_TASK_SECONDS}"
            )
        out.append(float(v))
    return tuple(out)
