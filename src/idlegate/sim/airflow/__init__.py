"""Airflow DAGs -> idlegate's job model: the one mapping of Airflow's DAGs and DAG runs.

`map_dag` turns a DAG *export* (the answers of Airflow's stable REST API about one DAG:
its details, its tasks, and optionally its runs and their task instances; see
`idlegate.sim.airflow.mapping`) into an `AirflowJob`; `AirflowJob.spec()` is that job as
the `AirflowSpec` the simulator, the schedulers and the cluster state machine run on. The
rules (docs/airflow.md says them for users):

* a DAG run is a job; each task is a stage: one task instance, or a mapped task's
  (``expand``) N instances, N known once the run expands it (until then 1);
* task groups flatten: their tasks are the DAG's tasks (their ids carry the group's
  prefix) and the edges are the tasks' ``downstream_task_ids``;
* sensors, deferrable tasks and tasks Airflow marks done without a pod (EmptyOperator)
  are left to Airflow, each with its reason (`LeftTask`): no stage, their dependents wait
  for what they waited for;
* a task downstream of a branching operator, or with a trigger rule that may skip it, is
  *conditional*; a run's task instances show what it skipped, which leaves the job;
* each stage's priority is Airflow's: ``priority_weight`` under the task's weight rule
  (default ``downstream``: its own plus every downstream task's);
* each stage's estimate comes from a history lookup (the DAG's earlier runs, by stage),
  else a prior; the stage records which (`DurationSource`).

A DAG that cannot map raises `AirflowRefusal` with a `reason` and a sentence (a cycle, a
downstream task that does not exist, nothing left to schedule, a run that does not fit the
DAG any more). `airflow_runs` reads an export's finished runs as a history.

Pure: dicts in, jobs out; nothing here reads a file or the network.
"""

from idlegate.sim.airflow.mapping import (
    NO_POD_CLASSES,
    dag_id,
    is_airflow,
    map_dag,
    operator_of,
    run_instances,
)
from idlegate.sim.airflow.model import (
    AirflowCondition,
    AirflowJob,
    AirflowRefusal,
    AirflowRefusalReason,
    AirflowSpec,
    AirflowStage,
    LeftReason,
    LeftTask,
)
from idlegate.sim.airflow.runs import AirflowRun, AirflowRuns, airflow_runs, run_arrival

__all__ = [
    "NO_POD_CLASSES",
    "AirflowCondition",
    "AirflowJob",
    "AirflowRefusal",
    "AirflowRefusalReason",
    "AirflowRun",
    "AirflowRuns",
    "AirflowSpec",
    "AirflowStage",
    "LeftReason",
    "LeftTask",
    "airflow_runs",
    "dag_id",
    "is_airflow",
    "map_dag",
    "operator_of",
    "run_arrival",
    "run_instances",
]
