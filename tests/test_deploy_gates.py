"""Offline checks of deploy/overlays/argo-airflow: Argo's gate and Airflow's on the
operator's one webhook server (deploy/components/webhook, which both gates' components
call). It builds with `kubectl kustomize`, adds the server once (one Service, one
certificate, one ``--webhook-*`` patch), and holds both gates, each on its own path of
that server with its own namespace label, with both kinds' flags and RBAC."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from idlegate.api.settings import Settings
from idlegate.operator.features import airflow, argo
from tests.deploy_files import BASE, DEPLOY, NAMESPACE, kustomize, only, validate_versions
from tests.test_deploy_argo import CERT_MANAGER, CERT_MANAGER_SCHEMAS

OVERLAY = DEPLOY / "overlays" / "argo-airflow"


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    return kustomize(OVERLAY)


def _container(built: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = only(built, "Deployment")["spec"]["template"]["spec"]["containers"]
    return container


WEBHOOK_SERVER = [
    ("Certificate", "idlegate-webhook"),
    ("Issuer", "idlegate-selfsigned"),
    ("Service", "idlegate-webhook"),
]


def _gate(kind: str) -> list[tuple[str, str]]:
    return [
        ("ClusterRole", f"idlegate-operator-{kind}"),
        ("ClusterRoleBinding", f"idlegate-operator-{kind}"),
        ("MutatingWebhookConfiguration", f"idlegate-{kind}-gate"),
    ]


GATES = {"argo": ["argo"], "airflow": ["airflow"], "argo-airflow": ["argo", "airflow"]}
"""Each gates' overlay and the kinds it gates."""


@pytest.mark.parametrize("overlay", sorted(GATES))
def test_each_gates_overlay_adds_the_webhook_server_once_and_its_gates(overlay):
    base = kustomize(BASE)
    built = kustomize(DEPLOY / "overlays" / overlay)
    added = sorted(
        (d["kind"], d["metadata"]["name"])
        for d in built
        if d not in base and d["kind"] != "Deployment"
    )
    assert added == sorted(WEBHOOK_SERVER + [o for kind in GATES[overlay] for o in _gate(kind)])


@pytest.mark.parametrize("version", validate_versions())
@pytest.mark.parametrize("overlay", sorted(GATES))
def test_each_gates_overlay_passes_kubernetes_validate(overlay, version):
    kv = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed (dev dependency)"
    )
    for obj in kustomize(DEPLOY / "overlays" / overlay):
        if obj["apiVersion"] == CERT_MANAGER:
            jsonschema.validate(obj, CERT_MANAGER_SCHEMAS[obj["kind"]])
            continue
        try:
            kv.validate(obj, version, strict=True)
        except kv.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} at {path}: {exc.message}")


def test_the_operator_gets_one_webhook_server_patch_and_both_kinds_flags(built):
    container = _container(built)
    args = container["args"]
    added = args[len(_container(kustomize(BASE))["args"]) :]
    assert [a.split("=", 1)[0] for a in added if a.startswith("--webhook")] == [
        "--webhook-port",
        "--webhook-certs",
    ]
    assert [p["name"] for p in container["ports"]].count("webhook") == 1
    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    assert len(mounts) == len(set(mounts))
    assert "--argo" in added
    pairs = (a[2:].split("=", 1) for a in added if "=" in a)
    given = {key.replace("-", "_"): value for key, value in pairs}
    settings = Settings(pool_size=1, policy="fair", argo=True, **given)
    assert settings.airflow_url and settings.webhook_port == 9443
    pod = only(built, "Deployment")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    certs = str(settings.webhook_certs)
    (mounted,) = [m["name"] for m in container["volumeMounts"] if m["mountPath"] == certs]
    certificate = only(built, "Certificate")
    assert volumes[mounted]["secret"]["secretName"] == certificate["spec"]["secretName"]


def test_each_gate_calls_the_one_server_on_its_own_path_for_its_own_namespaces(built):
    (service,) = [
        d for d in built if d["kind"] == "Service" and d["metadata"]["name"] == "idlegate-webhook"
    ]
    certificate = only(built, "Certificate")
    gates = {d["metadata"]["name"]: d for d in built if d["kind"] == "MutatingWebhookConfiguration"}
    expected = {
        "idlegate-argo-gate": ("/" + argo.WEBHOOK_ID, "idlegate.io/argo"),
        "idlegate-airflow-gate": ("/" + airflow.WEBHOOK_ID, "idlegate.io/airflow"),
    }
    for name, (path, label) in expected.items():
        configuration = gates[name]
        (hook,) = configuration["webhooks"]
        ref = hook["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"], ref["path"]) == (
            service["metadata"]["name"],
            NAMESPACE,
            path,
        )
        (port,) = service["spec"]["ports"]
        assert ref["port"] == port["port"]
        inject = configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        assert inject == f"{NAMESPACE}/{certificate['metadata']['name']}"
        assert hook["namespaceSelector"] == {"matchLabels": {label: "enabled"}}
    assert f"{service['metadata']['name']}.{NAMESPACE}.svc" in certificate["spec"]["dnsNames"]


@pytest.mark.parametrize("overlay", ["argo", "airflow", "argo-airflow"])
def test_every_gates_overlay_takes_the_webhook_server_from_its_one_component(overlay):
    built = kustomize(DEPLOY / "overlays" / overlay)
    args = _container(built)["args"]
    assert sum(a.startswith("--webhook-port=") for a in args) == 1
    assert len([d for d in built if d["kind"] == "Service"]) == 2  # the base's metrics, ours
