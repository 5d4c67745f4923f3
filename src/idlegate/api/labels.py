"""The labels, annotations and gate on task pods: the contract between the operator and its pods.

A task pod says which workflow, stage and task it belongs to (labels), which attempt it is
and, once released, which executor slot it runs on (annotations). It is created with the
scheduling gate :data:`GATE`, which only the operator removes.

A label's key and value follow the API server's rules (`label_problem`, the simulator's
:mod:`idlegate.sim.pod_template`, which a pod template's nodeSelector is checked by too).
"""

from __future__ import annotations

from idlegate.sim.pod_template import label_problem as label_problem  # (re-exported)
from idlegate.sim.queues import QUEUE_LABEL

GATE = "idlegate.io/release"
"""The scheduling gate the operator puts on every task pod and removes to release it."""
LABEL_WORKFLOW = "idlegate.io/workflow"
LABEL_STAGE = "idlegate.io/stage"
LABEL_TASK = "idlegate.io/task"
ANNOTATION_ATTEMPT = "idlegate.io/attempt"
"""0 for the first pod of a task, n for its n-th retry."""
ANNOTATION_EXECUTOR = "idlegate.io/executor"
"""The executor slot (0 .. pool-1) the task was released on; set with the gate removal."""
ANNOTATION_PREEMPTED = "idlegate.io/preempted"
"""n when n of the task's attempts before this pod were stopped to give quota back (absent:
none): they are no failures (`idlegate.api.eviction`)."""
ANNOTATION_STOP = "idlegate.io/stop"
"""On a running pod being stopped to give quota back: the queue that reclaims and why,
written before its eviction is asked (`idlegate.api.eviction`)."""
FINALIZER_STOP = "idlegate.io/stop"
"""The finalizer written with :data:`ANNOTATION_STOP`: it keeps the stopped pod in the API
until the operator has counted its stop (a leader taking over reads it there), then the
operator takes it off (`idlegate.api.eviction`, point 6)."""
HOSTNAME = "kubernetes.io/hostname"
"""The node label a released pod's nodeSelector pins it to its node by (a pool on nodes)."""
LABEL_POOL = "idlegate.io/pool"
"""Label on an Argo Workflow or an Airflow worker pod: the ExecutorPool it runs in (a
DagWorkflow names it in spec.pool; :mod:`idlegate.api.routing`)."""
LABEL_QUEUE = QUEUE_LABEL
"""Label on a workflow of any kind: the queue it asks for (:mod:`idlegate.api.routing`;
`idlegate.sim.queues.queue_of` places by it in both clocks)."""
LABEL_CRON = "idlegate.io/cron-workflow"
"""Label on each run of a DagCronWorkflow: the name of the cron workflow that started it."""
ANNOTATION_SCHEDULED = "idlegate.io/scheduled-time"
"""Annotation on each such run: the schedule time it was started for (epoch seconds)."""
DEFAULT_SERVICE_ACCOUNT = "default"
"""Task pods run as this service account, without a token, unless the template names one
the namespace allows (:mod:`idlegate.api.podsecurity`)."""
