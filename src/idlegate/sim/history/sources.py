"""Argo Workflows and Airflow DAG exports read as history records.

An Argo Workflow's record comes from its run (`idlegate.sim.argo.runs`): its job, its
arrival, measured pod run times and outcome from its metadata and `status.nodes` unless
the history keys beside it say them. An Airflow DAG export gives one record per
finished DAG run (`idlegate.sim.airflow.runs`), else the DAG itself.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from idlegate.errors import SpecError
from idlegate.sim.airflow import AirflowRefusal, airflow_runs, map_dag
from idlegate.sim.argo import ArgoRefusal
from idlegate.sim.argo.runs import argo_run
from idlegate.sim.history.records import HistoryWorkflow, record_keys, recorded_arrival

log = logging.getLogger(__name__)


def argo_workflow(raw: dict[str, Any], objects: list[Any], source: str) -> HistoryWorkflow:
    """An Argo workflow of a history file (`idlegate.sim.argo.runs`): its job, and its
    arrival, measurements and outcome from its status unless the file's keys say them."""
    try:
        run = argo_run(raw, objects)
        spec = run.job.spec()
    except ArgoRefusal as exc:
        raise ArgoRefusal(exc.reason, f"{source}: {exc}") from None
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from None
    where = f"{source[:-1]} {run.name!r})"
    arrival = recorded_arrival(raw, where)
    record = {
        "jct": run.jct,
        "outcome": run.outcome,
        "template": run.job.template_key,
        **record_keys(raw, where),
    }
    return HistoryWorkflow(
        spec,
        run.name,
        arrival if arrival is not None else run.arrival,
        run.measured,
        where,
        **record,
    )


def airflow_workflows(raw: Mapping[str, Any], source: str) -> list[HistoryWorkflow]:
    """The workflows of an Airflow DAG export (`idlegate.sim.airflow.runs`): one per
    finished DAG run, else the DAG itself (no arrival, estimates from no history). A run
    that does not fit the DAG any more is left out with a warning."""
    try:
        found = airflow_runs(raw)
        dag = f"DAG {found.dag_id!r}"
        where = f"{source[:-1]} {dag})" if source.endswith(")") else f"{source} ({dag})"
        for text in found.left_out:
            log.warning("Left out of the history: %s: %s", where, text)
        if not found.runs:
            job = map_dag(raw, durations=found.history)
            spec = job.spec()
            measured = (None,) * len(spec.stages)
            return [
                HistoryWorkflow(spec, job.dag_id, None, measured, where, template=job.template_key)
            ]
        return [
            HistoryWorkflow(
                run.job.spec(),
                f"{found.dag_id}/{run.run_id}",
                run.arrival,
                run.measured,
                f"{where[:-1]}, run {run.run_id})",
                jct=run.jct,
                outcome=run.outcome,
                template=run.job.template_key,
            )
            for run in found.runs
        ]
    except AirflowRefusal as exc:
        raise AirflowRefusal(exc.reason, str(exc), where=source) from None


def argo_history(
    obj: Mapping[str, Any],
    objects: Sequence[Any] = (),
    *,
    name: str | None = None,
    policy: str | None = None,
    pool_size: int | None = None,
    ran: Mapping[str, float] | None = None,
) -> HistoryWorkflow | None:
    """The history record of a finished Argo Workflow `obj` as the API returns it (the
    WorkflowTemplates its references use among `objects`), labelled `name` (default: its
    own); None while it has not finished. ArgoRefusal or SpecError if it does not map.

    Its measured run times are its pods' own, `ran` (node name -> seconds: `argo_run`),
    when given; else its `status.nodes`' times, which count a wait at the gate too."""
    run = argo_run(obj, [obj, *objects], ran=ran)
    if run.outcome is None or run.jct is None:
        return None
    return HistoryWorkflow(
        run.job.spec(),
        name or run.name,
        run.arrival,
        run.measured,
        name or run.name,
        jct=run.jct,
        outcome=run.outcome,
        policy=policy,
        pool_size=pool_size,
        template=run.job.template_key,
    )
