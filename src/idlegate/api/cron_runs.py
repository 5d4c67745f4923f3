"""A DagCronWorkflow's runs, as the DagWorkflows it creates.

:func:`run_object` is the object the operator's cron controller
(:mod:`idlegate.operator.edge.cron`) creates for a run; :func:`check_run_size` is whether
such a run fits what Kubernetes stores, by the DagWorkflow's own estimate
(:func:`idlegate.api.status.check_object_size`). The controller's validation and
``idlegate lint`` both check it on the cron object: a workflowSpec too big for its runs
is refused once, where it is written, instead of in every run created from it.
:func:`sort_runs` reads the runs there are into active, succeeded and failed, each oldest
first (by :func:`scheduled_at`); :func:`upcoming_runs` are those the planner is told.

Pure: it reads the object, no API.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from idlegate.api.cron_spec import MAX_CRON_NAME_LENGTH, CronSchedule, CronWorkflowSpec, run_name
from idlegate.api.kinds import API_VERSION, CRON_KIND, KIND
from idlegate.api.labels import ANNOTATION_SCHEDULED, LABEL_CRON
from idlegate.api.status import FINISHED_OR_INVALID, HISTORY_SAMPLES, Phase, check_object_size
from idlegate.api.task_pods import Owner
from idlegate.sim.dag import Dag
from idlegate.sim.runs import JobArrival
from idlegate.sim.spec import WorkflowSpec
from idlegate.sim.timestamps import from_datetime

FORESEE_SECONDS = 24 * 3600.0
"""How far ahead a cron workflow's runs are told to the planner."""
FORESEE_RUNS = 8
"""At most this many runs of one cron workflow are told ('* * * * *' would tell 1,440 a day)."""
SIZED_RUN_AT = (10 ** (63 - MAX_CRON_NAME_LENGTH - 1) - 1) * 60.0
"""The run time a cron object's runs are sized at: the last minute whose run name still
fits a DagWorkflow's 63 characters, so that the estimate holds for every run (none has a
longer name or scheduled-time annotation)."""


def run_object(owner: Owner, workflow: Mapping[str, Any], at: float) -> dict[str, Any]:
    """The run of cron workflow `owner` due at `at`, as it is created: its spec is
    `workflow` (the cron object's ``spec.workflowSpec`` as written)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": run_name(owner.name, at),
            "namespace": owner.namespace,
            "labels": {LABEL_CRON: owner.name},
            "annotations": {ANNOTATION_SCHEDULED: f"{at:.0f}"},
            "ownerReferences": [owner.reference()],
        },
        "spec": workflow,
    }


def sized_run(cron: Mapping[str, Any]) -> dict[str, Any]:
    """The run of DagCronWorkflow `cron` (its raw object) whose size bounds its runs'
    (due at `SIZED_RUN_AT`). A name too long for its runs' (`check_cron_name` refuses it)
    is cut to fit, so that no run-name check says so a second time."""
    meta = cron.get("metadata") or {}
    name, namespace, uid = meta.get("name"), meta.get("namespace"), meta.get("uid")
    name = str(name or "run")[:MAX_CRON_NAME_LENGTH]
    owner = Owner(str(namespace or ""), name, str(uid or ""), CRON_KIND)
    return run_object(owner, (cron.get("spec") or {}).get("workflowSpec"), SIZED_RUN_AT)


def check_run_size(
    cron: Mapping[str, Any], workflow: WorkflowSpec, samples: int = HISTORY_SAMPLES
) -> None:
    """Raise SpecError, with the DagWorkflow's one-line reason, if the runs of DagCronWorkflow
    `cron` (whose workflowSpec is `workflow`) would outgrow what etcd stores once their
    status holds `samples` measured durations a stage."""
    check_object_size(sized_run(cron), workflow, samples)


def upcoming_runs(
    name: str, spec: CronWorkflowSpec, schedule: CronSchedule, now: float
) -> tuple[JobArrival, ...]:
    """The runs due in the next `FORESEE_SECONDS` (at most `FORESEE_RUNS`), as arrivals
    whose tasks take their estimates (``taskDurationSeconds``)."""
    dag = Dag.from_spec(spec.workflow_spec)
    times = itertools.islice(schedule.times(now, now + FORESEE_SECONDS), FORESEE_RUNS)
    return tuple(JobArrival(t, run_name(name, t), dag, None, scheduled=True) for t in times)


def object_name(run: dict[str, Any]) -> str:
    """A run's ``metadata.name`` ('' if it has none)."""
    return str((run.get("metadata") or {}).get("name", ""))


def scheduled_at(run: dict[str, Any]) -> float:
    """A run's scheduled time: its annotation (else its creation, for a hand-made one, which
    only orders it among the others)."""
    meta = run.get("metadata") or {}
    value = (meta.get("annotations") or {}).get(ANNOTATION_SCHEDULED, "")
    try:
        return float(value)
    except (TypeError, ValueError):
        return created_at(meta) or 0.0


def created_at(meta: dict[str, Any]) -> float | None:
    """An object's ``metadata.creationTimestamp`` as wall-clock seconds (None: unset)."""
    created = meta.get("creationTimestamp")
    return from_datetime(created) if created else None


def sort_runs(
    runs: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(active, succeeded, failed) runs, each oldest first."""
    runs = sorted(runs, key=scheduled_at)
    phases = [(r.get("status") or {}).get("phase") for r in runs]
    active = [r for r, p in zip(runs, phases, strict=True) if p not in FINISHED_OR_INVALID]
    succeeded = [r for r, p in zip(runs, phases, strict=True) if p == Phase.SUCCEEDED]
    failed = [r for r, p in zip(runs, phases, strict=True) if p in (Phase.FAILED, Phase.INVALID)]
    return active, succeeded, failed
