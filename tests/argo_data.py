"""Argo's own material in ../shared/data/argo, for the Argo tests: examples and recorded
statuses, read as documents. Tests calling these skip with a reason when it is absent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from idlegate.api.argo_pods import NODE_ID, NODE_NAME, WORKFLOW_LABEL
from idlegate.api.labels import GATE
from idlegate.sim.argo.status import node_id
from tests.helpers import need_shared, shared_path

ARGO_DATA = shared_path("argo")
EXAMPLES = ARGO_DATA / "examples"
RECORDED = ARGO_DATA / "controller-testdata"
WORKFLOW_CRD = ARGO_DATA / "crds" / "argoproj.io_workflows.yaml"
"""Argo's Workflow CRD, which the e2e tests install in the test API server."""


def need(path: Path) -> Path:
    """`path` (under `ARGO_DATA`), or skip the test as `need_shared` does when it is absent."""
    return need_shared("argo", *path.relative_to(ARGO_DATA).parts)


def documents(path: Path) -> list[dict[str, Any]]:
    """The non-empty YAML documents of a file."""
    return [d for d in yaml.safe_load_all(need(path).read_text()) if d]


def example(name: str) -> dict[str, Any]:
    """The first document of examples/`name`."""
    return documents(EXAMPLES / name)[0]


def recorded(name: str) -> dict[str, Any]:
    """A Workflow of controller-testdata/`name` (some omit apiVersion and kind)."""
    doc = documents(RECORDED / name)[0]
    doc.setdefault("apiVersion", "argoproj.io/v1alpha1")
    doc.setdefault("kind", "Workflow")
    return doc


def all_examples() -> list[tuple[str, int, dict[str, Any]]]:
    """(relative path, document index, document) of every example."""
    root = need(EXAMPLES)
    out = []
    for path in sorted(root.rglob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc:
                out.append((str(path.relative_to(root)), i, doc))
    return out


def gated_argo_pod(workflow: str, node: str) -> dict[str, Any]:
    """The pod Argo creates for node `node` of `workflow` in `default`, held by idlegate's
    gate and not started."""
    return {
        "metadata": {
            "name": node_id(workflow, node),
            "namespace": "default",
            "labels": {WORKFLOW_LABEL: workflow},
            "annotations": {NODE_NAME: node, NODE_ID: node_id(workflow, node)},
        },
        "spec": {"schedulingGates": [{"name": GATE}], "containers": [{"name": "main"}]},
        "status": {"phase": "Pending"},
    }
