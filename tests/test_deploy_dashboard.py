"""Offline checks of deploy/'s dashboard component (deploy/components/dashboard, built by
deploy/overlays/dashboard): a read-only ServiceAccount, a Deployment that runs `idlegate
dashboard` with flags it has, a Service before it; valid for the supported Kubernetes."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from tests.deploy_files import DEPLOY, NAMESPACE, kustomize, validate_versions
from tests.test_deploy import restricted_violations

OVERLAY = DEPLOY / "overlays" / "dashboard"
NAME = "idlegate-dashboard"


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    return kustomize(OVERLAY)


def named(built: list[dict[str, Any]], kind: str, name: str = NAME) -> dict[str, Any]:
    (found,) = [d for d in built if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def test_the_overlay_adds_the_dashboard_to_the_base(built):
    base = {(d["kind"], d["metadata"]["name"]) for d in kustomize(DEPLOY / "base")}
    added = {(d["kind"], d["metadata"]["name"]) for d in built} - base
    kinds = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service")
    assert added == {(kind, NAME) for kind in kinds}


def test_its_service_account_may_only_read(built):
    role = named(built, "ClusterRole")
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs == {"get", "list", "watch"}
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert {"dagworkflows", "executorpools", "pods", "events", "namespaces"} <= resources
    assert not any("*" in rule["resources"] + rule["verbs"] for rule in role["rules"])
    binding = named(built, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == NAME
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    pod = named(built, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == NAME


def test_its_pod_runs_the_dashboard_with_flags_it_has_and_meets_restricted(built):
    deployment = named(built, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert restricted_violations(pod) == []
    (container,) = pod["containers"]
    assert container["command"] == ["idlegate", "dashboard"]
    help_text = CliRunner().invoke(app, ["dashboard", "--help"]).output
    for arg in container["args"]:
        assert arg.split("=")[0] in help_text, arg
    assert "--url=http://idlegate-operator-metrics.idlegate-system.svc:9090" in container["args"]
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["http"]
    assert f"--port={port}" in container["args"]
    service = named(built, "Service")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["targetPort"] == "http"


@pytest.mark.parametrize("version", validate_versions())
def test_the_dashboard_objects_pass_kubernetes_validate(built, version):
    kv = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed (dev dependency)"
    )
    for obj in built:
        if NAME not in obj["metadata"]["name"]:
            continue
        try:
            kv.validate(obj, version, strict=True)
        except kv.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} at {path}: {exc.message}")
