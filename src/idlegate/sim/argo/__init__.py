"""Argo Workflows -> idlegate's job model: the one mapping of Argo's manifests.

`map_workflow` turns a Workflow (or a WorkflowTemplate, ClusterWorkflowTemplate or
CronWorkflow) into an `ArgoJob`; `ArgoJob.spec()` is that job as the `WorkflowSpec` the
simulator, the schedulers and the cluster state machine run on. The rules (docs/argo.md
says them for users):

* every call of a template that runs a pod (container, script, containerSet, resource,
  data) is a stage; the call's `withItems`/`withParam`/`withSequence` items are its tasks;
* a DAG task waits for its `dependencies`, or for every task its `depends` expression
  names; a step waits for every step of the group before it (steps of one group run in
  parallel);
* nested `dag`/`steps` templates, `templateRef`s (into WorkflowTemplates and
  ClusterWorkflowTemplates) and inline templates are flattened: their stages join the job,
  entered after the call's dependencies and left through their last stages; a loop over a
  nested template is one copy of its stages per item;
* `suspend`, `http` and `plugin` templates run no pod: they pass their dependencies on;
* a `when`, a `depends` that can hold without success, and lifecycle hooks make a stage
  *conditional* (it may be skipped); `retryStrategy.limit` becomes the stage's retries;
  `spec.parallelism` the job's; `onExit` handlers run after what they guard;
* a `workflowTemplateRef` runs the named WorkflowTemplate with the workflow's own fields
  on top;
* each stage's estimate comes from a history lookup (by workflow template and stage), else
  the template's annotation `idlegate.io/task-duration-seconds`, else a prior; the stage
  records which (`DurationSource`).

What only the run decides (a `withParam` over an output, a `when` on a result) is settled
by `status.nodes` (`idlegate.sim.argo.status`): pass the nodes (or a Workflow carrying
them) and the job is derived again, fan-outs at their real size and skipped nodes left
out. A manifest that cannot map raises `ArgoRefusal` with a `reason` and a sentence:
recursion, daemons, missing templates, no pod at all, too many stages.

Pure: dicts in, jobs out; nothing here reads a file or the network.
"""

from idlegate.sim.argo.mapping import (
    DURATION_ANNOTATION,
    GROUP,
    TEMPLATE_KINDS,
    WORKFLOW_KINDS,
    TemplateLookup,
    is_argo,
    map_workflow,
    template_index,
    workflow_name,
)
from idlegate.sim.argo.model import (
    ArgoCondition,
    ArgoJob,
    ArgoRefusal,
    ArgoRefusalReason,
    ArgoSpec,
    ArgoStage,
)
from idlegate.sim.argo.status import ObservedNodes, PodNode, canonical_path, node_id

__all__ = [
    "DURATION_ANNOTATION",
    "GROUP",
    "TEMPLATE_KINDS",
    "WORKFLOW_KINDS",
    "ArgoCondition",
    "ArgoJob",
    "ArgoRefusal",
    "ArgoRefusalReason",
    "ArgoSpec",
    "ArgoStage",
    "ObservedNodes",
    "PodNode",
    "TemplateLookup",
    "canonical_path",
    "is_argo",
    "map_workflow",
    "node_id",
    "template_index",
    "workflow_name",
]
