"""``idlegate lint`` on Airflow DAG exports: the job each DAG maps to, or why it does not.

An Airflow DAG export (`idlegate.sim.airflow`: the REST API's answers about one DAG, as
`idlegate history airflow --raw` writes them; a JSON list of them is read item by item)
maps to an :class:`AirflowLintJob`: its counts, its stages and the tasks left to Airflow
(sensors, deferrable tasks, tasks without a pod), each with its reason. A DAG with
nothing left to schedule is a note with the reason, since it is valid for Airflow; a
broken export (a downstream task that does not exist, a cycle, a field of the wrong
shape, a run that does not fit the DAG) is a problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from idlegate.api.lint_render import PoolFactory, head_line, misfits, stage_lines
from idlegate.sim.airflow import (
    AirflowJob,
    AirflowRefusal,
    AirflowRefusalReason,
    airflow_runs,
    map_dag,
)


@dataclass(frozen=True)
class AirflowLintJob:
    """An Airflow DAG export that maps to a job."""

    file: str
    document: int
    item: int | None
    job: AirflowJob

    def lines(self) -> list[str]:
        """The job as lint prints it: a head line with the counts, one line per stage,
        one per task left to Airflow."""
        head = head_line(
            self.file, self.document, self.item, f"Airflow DAG {self.job.dag_id}", self.job.counts
        )
        if self.job.left:
            head += f"; {len(self.job.left)} task(s) left to Airflow"
        live = self.job.live_stages
        priority = {s.name: f", priority {s.priority:g}" for s in live}
        out = [head, *stage_lines(live, "? tasks (mapped: known as it runs)", priority)]
        out += [f"  left to Airflow ({t.reason}): {t.message}" for t in self.job.left]
        return out

    def to_json(self) -> dict[str, Any]:
        """Machine output: where, DAG id, counts, stages and the tasks left to Airflow."""
        return {
            "file": self.file,
            "document": self.document,
            "item": self.item,
            "dag_id": self.job.dag_id,
            "counts": self.job.counts,
            "max_active_tasks": self.job.max_active_tasks,
            "stages": [
                {
                    "name": s.name,
                    "task_id": s.task_id,
                    "operator": s.operator,
                    "tasks": s.tasks,
                    "tasks_known": s.tasks_known,
                    "duration_seconds": s.duration,
                    "duration_source": str(s.duration_source),
                    "depends_on": list(s.depends_on),
                    "priority": s.priority,
                    "retries": s.retries,
                    "resources": s.demand.to_list(),
                    "condition": None if s.condition is None else str(s.condition),
                }
                for s in self.job.live_stages
            ],
            "left_to_airflow": [
                {"task_id": t.task_id, "reason": str(t.reason), "message": t.message}
                for t in self.job.left
            ],
        }


@dataclass(frozen=True)
class AirflowVerdict:
    """What lint found of one export: its job, or a note or problem with its reason."""

    job: AirflowLintJob | None = None
    note: str | None = None
    problem: str | None = None
    reason: AirflowRefusalReason | None = None


def lint_airflow(
    file: str,
    document: int,
    item: int | None,
    obj: Mapping[str, Any],
    pool: PoolFactory | None = None,
) -> AirflowVerdict:
    """Map the DAG export `obj` (see the module docstring); with a `pool`, a task whose
    pods can never fit it is a problem naming its task id."""
    try:
        # the estimates are what the export's own finished runs measured
        job = map_dag(obj, durations=airflow_runs(obj).history)
        job.spec()
    except AirflowRefusal as exc:
        if exc.left_to_airflow:
            return AirflowVerdict(note=exc.note(), reason=exc.reason)
        return AirflowVerdict(problem=str(exc), reason=exc.reason)
    where = f"DAG {job.dag_id}"
    too_large = "" if pool is None else misfits(job.live_stages, pool, where)
    if too_large:
        return AirflowVerdict(problem=too_large)
    return AirflowVerdict(job=AirflowLintJob(file, document, item, job))
