"""A DagCronWorkflow's runs, as the DagWorkflows it creates.

:func:`run_object` is the object the operator's cron controller
(:mod:`idlegate.operator.edge.cron`) creates for a run; :func:`check_run_size` is whether
such a run fits what Kubernetes stores, by the DagWorkflow's own estimate
(:func:`idlegate.api.status.check_object_size`). The controller's validation and
``idlegate lint`` both check it on the cron object: a workflowSpec too big for its runs
is refused once, where it is written, instead of in every run created from it.

Pure: it reads the object, no API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from idlegate.api.crd import API_VERSION, CRON_KIND, KIND
from idlegate.api.cron_spec import MAX_CRON_NAME_LENGTH, run_name
from idlegate.api.labels import ANNOTATION_SCHEDULED, LABEL_CRON
from idlegate.api.status import HISTORY_SAMPLES, check_object_size
from idlegate.api.task_pods import Owner
from idlegate.sim.spec import WorkflowSpec

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
