"""Airflow DAG runs as past runs: what a history holding a DAG export replays.

A DAG export (`idlegate.sim.airflow.mapping`) with ``dag_runs`` and ``task_instances`` is
a history of that DAG. `airflow_runs` reads it oldest run first:

* each finished run (state ``success`` or ``failed``) is a run of the history; runs still
  queued or running are left out;
* a run's job is the DAG mapped with that run's task instances (mapped tasks at their
  expanded size, skipped tasks left out); its estimates are the mean run times of the
  same tasks in the *earlier* runs of the export (`DurationHistory`), else the prior, so
  a replay's schedulers know what Airflow's history knew at the time;
* its arrival is ``queued_at`` (else ``start_date``, else ``run_after``), its JCT
  ``end_date - start_date``, its measured run times each stage's succeeded task
  instances' ``duration``, its outcome Succeeded or Failed;
* a run whose task instances do not fit the DAG's tasks as exported (the DAG changed
  since) is left out, with the sentence why (`AirflowRuns.left_out`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from idlegate.sim.airflow.mapping import dag_id, map_dag, run_instances
from idlegate.sim.airflow.model import AirflowJob, AirflowRefusal, AirflowRefusalReason
from idlegate.sim.external import DEFAULT_PRIOR, DurationHistory
from idlegate.sim.spec import MAX_TASK_SECONDS
from idlegate.sim.timestamps import parse_time

FINISHED = {"success": "Succeeded", "failed": "Failed"}
"""A DAG run's final states, and the history's outcome of each."""


@dataclass(frozen=True)
class AirflowRun:
    """One finished DAG run of a history: its job and what Airflow recorded of it."""

    job: AirflowJob
    run_id: str
    arrival: float | None
    """Epoch seconds it was queued (else started), None if not recorded."""
    measured: tuple[tuple[float, ...] | None, ...]
    """Per stage of `job.spec()`: run times of its succeeded task instances, None if none."""
    jct: float | None
    outcome: str


@dataclass
class AirflowRuns:
    """The runs of one DAG export (`airflow_runs`)."""

    dag_id: str
    runs: list[AirflowRun] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    """One sentence per run left out (the DAG changed since it ran)."""
    history: DurationHistory = field(default_factory=DurationHistory)
    """Every finished run's measured times, by (``airflow:<dag_id>``, stage)."""


LEAVE_OUT = (
    "leave the runs before the change out (fewer --runs) or export again once newer runs finished"
)
"""The history's advice about a run of an older DAG (`AirflowRuns.left_out`)."""


def run_arrival(run: Mapping[str, Any]) -> float | None:
    """When the run arrived: ``queued_at``, else ``start_date``, else ``run_after``."""
    for key in ("queued_at", "start_date", "run_after", "execution_date"):
        found = parse_time(run.get(key))
        if found is not None:
            return found
    return None


def airflow_runs(obj: Mapping[str, Any], *, prior: float = DEFAULT_PRIOR) -> AirflowRuns:
    """The finished runs of the DAG export `obj`, oldest first (module docstring)."""
    out = AirflowRuns(dag_id(obj))
    raw = [r for r in obj.get("dag_runs") or [] if isinstance(r, Mapping)]
    finished = [r for r in raw if r.get("state") in FINISHED]
    finished.sort(key=lambda r: (run_arrival(r) is None, run_arrival(r) or 0.0))
    for run in finished:
        try:
            job = map_dag(obj, run=run, durations=out.history, prior=prior)
        except AirflowRefusal as exc:
            if exc.reason is not AirflowRefusalReason.CHANGED:
                raise
            out.left_out.append(f"{exc}; {LEAVE_OUT}")
            continue
        measured = _measured(job, run_instances(obj, str(run.get("dag_run_id"))))
        start, end = parse_time(run.get("start_date")), parse_time(run.get("end_date"))
        out.runs.append(
            AirflowRun(
                job=job,
                run_id=str(run.get("dag_run_id")),
                arrival=run_arrival(run),
                measured=measured,
                jct=end - start if start is not None and end is not None and end >= start else None,
                outcome=FINISHED[run["state"]],
            )
        )
        out.history.add(job.template_key, (s.name for s in job.live_stages), measured)
    return out


def _measured(
    job: AirflowJob, instances: list[Mapping[str, Any]]
) -> tuple[tuple[float, ...] | None, ...]:
    by_task: dict[str, list[float]] = {}
    for ti in instances:
        took = ti.get("duration")
        if not isinstance(took, int | float) or isinstance(took, bool):
            continue
        if ti.get("state") == "success" and 0 < took <= MAX_TASK_SECONDS:
            by_task.setdefault(str(ti.get("task_id")), []).append(float(took))
    return tuple(tuple(by_task.get(s.task_id, ())) or None for s in job.live_stages)
