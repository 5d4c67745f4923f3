"""The `DagWorkflow` CustomResourceDefinition, generated from the pydantic models.

One source of truth: the `spec` schema is :class:`idlegate.sim.spec.WorkflowSpec` (the model
the simulator validates workflows with) and the `status` schema is
:class:`idlegate.api.status.WorkflowStatus` (the model the operator writes its status
with). Both are converted from pydantic's
JSON Schema into a Kubernetes *structural* schema: no ``$ref``, no ``anyOf`` with null, a
``type`` on every node, OpenAPI v3.0's boolean ``exclusiveMinimum``, bounded lists.

Regenerate the committed CRD after changing either model::

    python -m idlegate.api.crd > deploy/base/crd.yaml

This module imports neither kopf nor kubernetes: the tests and the generator run without the
`operator` extra.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from idlegate.api.crd_schema import (
    add_rules,
    at,
    conditions_overlay,
    reorder,
    resource_schema,
    structural_schema,
)
from idlegate.api.cron_spec import MAX_CRON_NAME_LENGTH, CronWorkflowSpec, CronWorkflowStatus
from idlegate.api.kinds import (
    CATEGORIES,
    CRON_KIND,
    CRON_PLURAL,
    GROUP,
    KIND,
    PLURAL,
    POOL_KIND,
    POOL_PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
)
from idlegate.api.names import DNS_SUBDOMAIN as DNS_SUBDOMAIN  # (re-exported)
from idlegate.api.names import MAX_WORKFLOW_NAME_LENGTH as MAX_WORKFLOW_NAME_LENGTH
from idlegate.api.names import check_workflow_name as check_workflow_name
from idlegate.api.pool_spec import DEFAULT_POOL, ExecutorPoolSpec, ExecutorPoolStatus, no_queues
from idlegate.api.status import MAX_CR_DEPENDENCIES, MAX_CR_STAGES, WorkflowStatus
from idlegate.sim.spec import (
    MAX_NAME_LENGTH,
    NAME_PATTERN,
    WorkflowSpec,
)

REGENERATE_COMMAND = "python -m idlegate.api.crd > deploy/base/crd.yaml"
"""The command that writes deploy/base/crd.yaml (`regenerate_command` for any kind)."""
CRD_PATH = Path("deploy/base/crd.yaml")
"""Where the repository keeps the generated CRD (it is not part of the package)."""


# Kubernetes-only additions to the generated spec schema. `setdefault` everywhere: once the
# pydantic model states a bound itself, the model's value wins and the output is unchanged.
def _spec_overlay(spec: dict[str, Any]) -> None:
    spec["description"] = (
        "The workflow: stages of identical parallel tasks and the dependencies between them. "
        "The same schema as the simulator's workflow files (idlegate.sim.spec.WorkflowSpec)."
    )
    # One root at least: a workflow in which every stage depends on another is cyclic (or
    # names an unknown stage). Cheap (linear); the full cycle and unknown-dependency checks
    # need a graph walk or O(stages^2 x dependsOn) comparisons, beyond CEL's cost budget, and
    # are the operator's job (phase Invalid, condition Valid=False).
    add_rules(
        spec,
        {
            "rule": "self.stages.exists(s, !has(s.dependsOn) || size(s.dependsOn) == 0)",
            "message": "at least one stage must have an empty dependsOn: "
            "a workflow in which every stage waits for another can never start",
        },
    )
    stages = at(spec, "stages")
    # stage names unique, enforced by the API server itself (no quadratic CEL rule), and
    # server-side apply merges stages by name
    stages["x-kubernetes-list-type"] = "map"
    stages["x-kubernetes-list-map-keys"] = ["name"]
    stages["maxItems"] = MAX_CR_STAGES  # the CEL rules' cost (MAX_CR_STAGES), below the model's
    stage = stages["items"]
    add_rules(
        stage,
        {
            "rule": "!has(self.dependsOn) || !(self.name in self.dependsOn)",
            "message": "a stage cannot depend on itself; remove its own name from dependsOn",
            "fieldPath": ".dependsOn",
        },
    )
    depends_on = at(stage, "dependsOn")
    depends_on["x-kubernetes-list-type"] = "set"  # no duplicates, checked by the API server
    depends_on.setdefault("maxItems", MAX_CR_DEPENDENCIES)
    depends_on["items"].setdefault("minLength", 1)
    depends_on["items"].setdefault("maxLength", MAX_NAME_LENGTH)
    depends_on["items"].setdefault("pattern", NAME_PATTERN)
    reorder(spec, stages, stage, depends_on, depends_on["items"])


def _status_overlay(status: dict[str, Any]) -> None:
    conditions_overlay(status)
    for name in ("stages", "idleSlots"):
        node = at(status, name)
        node["x-kubernetes-list-type"] = "map"
        node["x-kubernetes-list-map-keys"] = ["name" if name == "stages" else "stage"]
    reorder(status, at(status, "stages"), at(status, "idleSlots"))


def spec_schema() -> dict[str, Any]:
    """The `spec` schema: WorkflowSpec plus the Kubernetes-only list types and CEL rules."""
    spec = structural_schema(WorkflowSpec)
    _spec_overlay(spec)
    return spec


def status_schema() -> dict[str, Any]:
    """The `status` schema: WorkflowStatus; kopf's `status.kopf` keeps unknown fields."""
    status = structural_schema(WorkflowStatus, nullable_optionals=False)
    _status_overlay(status)
    return status


def open_api_v3_schema() -> dict[str, Any]:
    return resource_schema(
        "A DAG workflow whose stages run as task pods, released by the idlegate operator's "
        "scheduling policy (which stage next, how many executors, whether to wait).",
        spec_schema(),
        status_schema(),
        {
            "rule": f"size(self.metadata.name) <= {MAX_WORKFLOW_NAME_LENGTH}",
            "message": f"a DagWorkflow's name has at most {MAX_WORKFLOW_NAME_LENGTH} "
            "characters: it is a label value on every task pod",
        },
    )


def column(name: str, kind: str, path: str, description: str = "") -> dict[str, str]:
    """An additionalPrinterColumn: `kubectl get` shows `path` under `name`."""
    out = {"name": name, "type": kind}
    if description:
        out["description"] = description
    return {**out, "jsonPath": path}


AGE = column("Age", "date", ".metadata.creationTimestamp")
"""Every kind's last column, as kubectl's own."""

PRINTER_COLUMNS: tuple[dict[str, str], ...] = (
    column("Phase", "string", ".status.phase"),
    column("Suspended", "boolean", ".spec.suspend", "Held out of the pool (spec.suspend)"),
    column("Stages", "string", ".status.stagesSummary", "Stages done/total"),
    column("JCT", "number", ".status.jctSeconds", "Job completion time (s)"),
    column("Idle", "number", ".status.idleInsertedSeconds", "Deliberate idle time inserted (s)"),
    column("Policy", "string", ".status.policy", "The rule that released its tasks last"),
    # what happened, else the forecast marked ~, as text (UTC): a date column prints an
    # age, and kubectl prints "<invalid>" for a time ahead (its HumanDuration of a
    # negative duration): as Next below (`forecast_status.columns`)
    column("Start", "string", ".status.startSummary", "First task's start (UTC); ~: forecast"),
    column("Finish", "string", ".status.finishSummary", "Finish (UTC); ~: forecast"),
    AGE,
)


CRON_PRINTER_COLUMNS: tuple[dict[str, str], ...] = (
    column("Schedule", "string", ".spec.schedule"),
    column("Suspend", "boolean", ".spec.suspend"),
    column("Active", "string", ".status.active", "Runs not finished"),
    column("Last Schedule", "date", ".status.lastScheduleTime"),
    # a date column prints an age (time since): a time ahead would read as a negative one
    column("Next", "string", ".status.nextScheduleTime", "When the next run is due"),
    AGE,
)


def cron_open_api_v3_schema() -> dict[str, Any]:
    """The DagCronWorkflow schema: its spec with `workflowSpec` exactly a DagWorkflow's spec."""
    spec = structural_schema(CronWorkflowSpec)
    workflow = spec_schema()
    workflow["description"] = spec["properties"]["workflowSpec"]["description"]
    spec["properties"]["workflowSpec"] = workflow
    status = structural_schema(CronWorkflowStatus, nullable_optionals=False)
    conditions_overlay(status)
    return resource_schema(
        "A DagWorkflow started on a cron schedule, as a CronJob starts Jobs: each run is a "
        "DagWorkflow named after its scheduled minute.",
        spec,
        status,
        {
            "rule": f"size(self.metadata.name) <= {MAX_CRON_NAME_LENGTH}",
            "message": f"a DagCronWorkflow's name has at most {MAX_CRON_NAME_LENGTH} "
            "characters: each run is named NAME-<minutes since the epoch>",
        },
    )


POOL_PRINTER_COLUMNS: tuple[dict[str, str], ...] = (
    column("Size", "integer", ".spec.size"),
    column("Busy", "integer", ".status.busy", "Executors running task pods"),
    column("Pending", "integer", ".status.pending", "Workflows in the pool not finished"),
    column("CPU", "string", ".status.usage.cpu", "CPU requested by running task pods/capacity"),
    column("Memory", "string", ".status.usage.memory", "Memory requested/capacity"),
    column("Policy", "string", ".status.policy"),
    column("Waiting", "string", ".status.queuesSummary", "Workflows waiting per queue"),
    AGE,
)


def pool_open_api_v3_schema() -> dict[str, Any]:
    """The ExecutorPool schema (cluster-scoped): its spec, its status, a name that is not
    the implicit default pool's."""
    spec = structural_schema(ExecutorPoolSpec)
    spec["description"] = "The pool's executors, policy and namespaces."
    requirement = at(spec, "namespaceSelector.matchExpressions.[]")
    add_rules(
        requirement,
        {
            "rule": "(self.operator in ['In', 'NotIn']) == (has(self.values) && "
            "size(self.values) > 0)",
            "message": "In and NotIn need values; Exists and DoesNotExist take none",
        },
    )
    add_rules(
        spec,
        {
            "rule": "has(self.size) || (has(self.resources) && 'pods' in self.resources)",
            "message": "give size (the task pods it runs at once; for a nodeSelector pool, "
            "the pods its nodes hold: 110 a node by default), or resources with pods",
        },
        {
            "rule": "!(has(self.resources) && has(self.nodeSelector))",
            "message": "give resources (a fixed capacity) or nodeSelector (the capacity of "
            "the nodes it selects), not both",
        },
        {
            "rule": "!has(self.forecastArrivals) || self.forecastArrivals != 'queues' || "
            "(has(self.queues) && size(self.queues) > 0)",
            "message": no_queues("forecastArrivals: queues", "the pool", "queues"),
        },
    )
    status = structural_schema(ExecutorPoolStatus, nullable_optionals=False)
    conditions_overlay(status)
    return resource_schema(
        "A pool of executors with its own scheduling policy: the DagWorkflows of the "
        "namespaces it selects (or naming it in spec.pool) share its executors.",
        spec,
        status,
        {
            "rule": f"self.metadata.name != '{DEFAULT_POOL}'",
            "message": f"{DEFAULT_POOL!r} is the operator's implicit pool (--pool-size); "
            "give the ExecutorPool another name",
        },
    )


@dataclass(frozen=True)
class Kind:
    """One of the operator's custom resources: its names, schema and printer columns."""

    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    schema: Callable[[], dict[str, Any]]
    columns: tuple[dict[str, str], ...]
    path: Path
    """Where the repository keeps its generated CRD."""
    scope: str = "Namespaced"


KINDS = {
    KIND: Kind(KIND, PLURAL, SINGULAR, SHORT_NAMES, open_api_v3_schema, PRINTER_COLUMNS, CRD_PATH),
    CRON_KIND: Kind(
        CRON_KIND,
        CRON_PLURAL,
        "dagcronworkflow",
        ("dcwf",),
        cron_open_api_v3_schema,
        CRON_PRINTER_COLUMNS,
        Path("deploy/base/cron-crd.yaml"),
    ),
    POOL_KIND: Kind(
        POOL_KIND,
        POOL_PLURAL,
        "executorpool",
        ("xpool",),
        pool_open_api_v3_schema,
        POOL_PRINTER_COLUMNS,
        Path("deploy/base/pool-crd.yaml"),
        scope="Cluster",
    ),
}
"""The custom resources, by kind."""


def render_crd(kind: str = KIND) -> dict[str, Any]:
    """The CustomResourceDefinition of `kind` as a plain dict (apiextensions.k8s.io/v1)."""
    k = KINDS[kind]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{k.plural}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "idlegate", "app.kubernetes.io/component": "crd"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": k.kind,
                "listKind": f"{k.kind}List",
                "plural": k.plural,
                "singular": k.singular,
                "shortNames": list(k.short_names),
                "categories": list(CATEGORIES),
            },
            "scope": k.scope,
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": k.schema()},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [dict(c) for c in k.columns],
                }
            ],
        },
    }


def regenerate_command(kind: str = KIND) -> str:
    """The command that writes the committed CRD of `kind`."""
    flag = "" if kind == KIND else f" --kind {kind}"
    return f"python -m idlegate.api.crd{flag} > {KINDS[kind].path}"


class _Dumper(yaml.SafeDumper):
    """Block style, lists indented under their key (as kubectl and kustomize write them)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def render_crd_yaml(kind: str = KIND) -> str:
    """The CRD of `kind` as the YAML committed in deploy/base (`Kind.path`)."""
    body = yaml.dump(
        render_crd(kind), Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True
    )
    header = "# Generated from the pydantic models; do not edit. Regenerate with:"
    return f"{header}\n#   {regenerate_command(kind)}\n{body}"


def main(argv: list[str] | None = None, out: Callable[[str], object] = sys.stdout.write) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m idlegate.api.crd",
        description="Print a CRD (YAML), generated from the pydantic models.",
    )
    parser.add_argument(
        "--kind",
        choices=sorted(KINDS),
        default=KIND,
        help=f"the custom resource (default {KIND})",
    )
    parser.add_argument(
        "--check",
        metavar="FILE",
        type=Path,
        help=f"exit 1 if FILE differs from the generated CRD (e.g. {CRD_PATH.name})",
    )
    args = parser.parse_args(argv)
    text = render_crd_yaml(args.kind)
    if args.check is None:
        out(text)
        return 0
    try:
        current = args.check.read_text()
    except OSError as exc:
        print(f"cannot read {args.check}: {exc.strerror}", file=sys.stderr)
        return 1
    if current != text:
        print(
            f"{args.check} is out of date; regenerate with: {regenerate_command(args.kind)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
