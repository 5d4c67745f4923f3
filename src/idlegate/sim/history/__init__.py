"""A user's own workflow history: past workflows, when they arrived, and how long tasks ran.

A history file is a workflow file (`sim.pod_template.load_workflow_file`: YAML, JSON or JSON
Lines, one workflow, a list, a multi-document stream, or `DagWorkflow` resources) whose
workflows may carry more keys, so the simulator can replay the past:

* `arrival` (or `submitTime`) at the top of a workflow (next to `stages`, or next to
  `spec` in a `DagWorkflow`): when it was submitted, in seconds. Only differences
  matter; the replay starts at the earliest one, so epoch seconds work as well.
* `name` at the top of a plain workflow: a label for its jobs (a `DagWorkflow` uses
  `metadata.name`).
* `measuredDurationSeconds` in a stage: the task durations seen in the past, a list of
  seconds. The simulator draws each task's *real* duration from this list (uniformly,
  with replacement), while schedulers keep seeing `taskDurationSeconds` as the estimate;
  without `taskDurationSeconds` the estimate is the mean of the measurements.
* what happened, beside `arrival` (all optional; the replay ignores them, reports
  compare with them): `jctSeconds` (arrival to finish), `outcome` (`Succeeded` or
  `Failed`), `policy` (the scheduler spec that ran it), `poolSize` (the executors
  of its pool then), `pool` (the ExecutorPool that ran it) and `template` (an Argo
  workflow's template key, `ArgoJob.template_key`: what later runs of it look their
  estimates up by).

Airflow DAG exports may stand in it too (`idlegate.sim.airflow.runs`): each finished DAG
run is a workflow (its arrival, measured task-instance durations, JCT and outcome from
Airflow's records; its estimates from the runs before it), an export without finished
runs the DAG itself. A DAG left to Airflow (every task a sensor or an EmptyOperator:
`AirflowRefusal.left_to_airflow`, which lint notes) is left out with a warning giving
lint's reason; only a file of which no DAG maps is an error.

Argo Workflows may stand in a history file too (`idlegate.sim.argo.runs`): each maps to
its job (`idlegate.sim.argo`), its arrival and measured pod run times come from its
metadata and `status.nodes` unless the keys above say them, and the WorkflowTemplates
beside them are what their references resolve to.

`history_record` and `write_history` write this format (what `idlegate history export`
and the operator's `--history-file` sink produce), and `load_history` reads it back.
`simulate_history` makes a history without a cluster: a workload run in the simulator,
recorded as the operator would have recorded it (`idlegate history simulate`).

A *time split* keeps a replay honest: `split_history` cuts a history at a fraction of
its recorded span into a train part (the workflows that arrived before the cut) and a
test part (the rest), so a policy trained on the first part is judged on the last.
`history_facts` names a history file (its hash, span and size, the pool and policy it
records) for reports and a trained model's metadata.

Drawing with replacement rather than handing measurement i to task i is deliberate: the
tasks of a stage are interchangeable and a different schedule runs them in a different
order anyway, and a stateless model stays correct when one workload is simulated many
times (every scheduler of a comparison) or forked. A stage with one measurement, or
with all measurements equal, therefore replays exactly.

Alibaba's raw 2018 batch trace (``batch_task.csv``) converts to this format
(`read_batch_tasks`, ``idlegate history alibaba``): each finished job a workflow with
its arrival and its tasks' measured durations.

The package, by concern: `records` (one record: `HistoryWorkflow`, read and written),
`sources` (Argo and Airflow objects as records), `alibaba` (Alibaba's raw batch trace as
records), `files` (history files checked, read, tailed, written and named), `replay`
(the time split and a replay's arrivals) and `learning` (Argo estimates learned from
records). Import from here.
"""

from __future__ import annotations

from idlegate.sim.history.alibaba import (
    AlibabaImport,
    batch_task_history,
    in_queue,
    read_batch_tasks,
)
from idlegate.sim.history.files import (
    ACCEPTED,
    HistoryFacts,
    Tail,
    check_history_file,
    check_history_out,
    history_facts,
    history_text,
    load_history,
    tail_history,
    write_history,
)
from idlegate.sim.history.learning import (
    ArgoLearning,
    argo_durations,
)
from idlegate.sim.history.records import (
    ARRIVAL_KEYS,
    MEASURED_KEY,
    OUTCOMES,
    RECORD_KEYS,
    HistoryWorkflow,
    RecordedDurations,
    history_record,
    most_recorded,
    parse_record,
)
from idlegate.sim.history.replay import (
    PARTS,
    history_arrivals,
    history_part,
    recorded_order,
    replay_workload,
    require_arrivals,
    simulate_history,
    split_history,
)
from idlegate.sim.history.sources import (
    airflow_workflows,
    argo_history,
    argo_workflow,
)

__all__ = [
    "ACCEPTED",
    "ARRIVAL_KEYS",
    "MEASURED_KEY",
    "OUTCOMES",
    "PARTS",
    "RECORD_KEYS",
    "AlibabaImport",
    "ArgoLearning",
    "HistoryFacts",
    "HistoryWorkflow",
    "RecordedDurations",
    "Tail",
    "airflow_workflows",
    "argo_durations",
    "argo_history",
    "argo_workflow",
    "batch_task_history",
    "check_history_file",
    "check_history_out",
    "history_arrivals",
    "history_facts",
    "history_part",
    "history_record",
    "history_text",
    "in_queue",
    "load_history",
    "most_recorded",
    "parse_record",
    "read_batch_tasks",
    "recorded_order",
    "replay_workload",
    "require_arrivals",
    "simulate_history",
    "split_history",
    "tail_history",
    "write_history",
]
