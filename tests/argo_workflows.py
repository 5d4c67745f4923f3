"""Argo Workflows of the shapes users run, as documents for the Argo stand-in controller
(tests/k8s/argo_controller.py), shared by the Argo e2e (tests/test_e2e_argo.py) and the
real-Airflow e2e (tests/airflow_e2e.py), which runs them in one pool with Airflow's pods.

Each pod template carries its run time in ``idlegate.io/task-duration-seconds`` (the
simulated kubelet runs it that long, the operator reads it as the estimate)."""

from __future__ import annotations

from typing import Any

from idlegate.sim.argo import DURATION_ANNOTATION
from tests.k8s.argo_controller import WORKFLOWS
from tests.k8s.harness import ApiServer


def pod_template(name: str, seconds: float, retries: int | None = None) -> dict[str, Any]:
    """A pod template of `seconds`, retried up to `retries` times if given."""
    template: dict[str, Any] = {
        "name": name,
        "metadata": {"annotations": {DURATION_ANNOTATION: str(seconds)}},
        "container": {"image": "busybox"},
    }
    if retries is not None:
        template["retryStrategy"] = {"limit": retries}
    return template


def argo(name: str, main: dict[str, Any], *pods: dict[str, Any]) -> dict[str, Any]:
    """A Workflow whose entrypoint ``main`` is `main` (a ``dag`` or ``steps``)."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name},
        "spec": {"entrypoint": "main", "templates": [{"name": "main", **main}, *pods]},
    }


def diamond(name: str, seconds: float = 10) -> dict[str, Any]:
    tasks = [
        {"name": "a", "template": "p"},
        {"name": "b", "template": "p", "dependencies": ["a"]},
        {"name": "c", "template": "p", "dependencies": ["a"]},
        {"name": "d", "template": "p", "dependencies": ["b", "c"]},
    ]
    return argo(name, {"dag": {"tasks": tasks}}, pod_template("p", seconds))


def loop(name: str, items: int, seconds: float = 10) -> dict[str, Any]:
    """split, then `items` map pods (``withItems``), then reduce."""
    tasks = [
        {"name": "split", "template": "p"},
        {
            "name": "map",
            "template": "p",
            "dependencies": ["split"],
            "withItems": list(range(items)),
        },
        {"name": "reduce", "template": "p", "dependencies": ["map"]},
    ]
    return argo(name, {"dag": {"tasks": tasks}}, pod_template("p", seconds))


def steps(name: str, seconds: float = 10) -> dict[str, Any]:
    """build; test (two items) beside lint; ship."""
    groups = [
        [{"name": "build", "template": "p"}],
        [
            {"name": "test", "template": "p", "withItems": ["x", "y"]},
            {"name": "lint", "template": "p"},
        ],
        [{"name": "ship", "template": "p"}],
    ]
    return argo(name, {"steps": groups}, pod_template("p", seconds))


def phase(api: ApiServer, ns: str, name: str) -> str | None:
    """The Workflow's ``status.phase`` (None before the controller set one)."""
    return ((api.get(WORKFLOWS, ns, name) or {}).get("status") or {}).get("phase")
