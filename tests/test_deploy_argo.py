"""Offline checks of deploy/components/argo (the gate on Argo's pods) through
deploy/overlays/argo: it builds with `kubectl kustomize`, its built-in kinds pass
kubernetes-validate, and its parts fit together (webhook, Service, Deployment, the
certificate, RBAC). Its match with the kopf handler is in test_argo_gate.py."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from idlegate.api.argo_pods import WORKFLOW_LABEL
from tests.deploy_files import BASE, DEPLOY, NAMESPACE, kustomize, only

OVERLAY = DEPLOY / "overlays" / "argo"
CERT_MANAGER = "cert-manager.io/v1"
# The cert-manager fields the component uses, as cert-manager.io/v1 defines them; a field
# it does not know is an error here (kubernetes-validate knows only built-in kinds).
_ISSUER_REF = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {"name": {"type": "string"}, "kind": {"enum": ["Issuer", "ClusterIssuer"]}},
}
CERT_MANAGER_SCHEMAS: dict[str, dict[str, Any]] = {
    "Issuer": {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"selfSigned": {"type": "object"}},
            }
        },
    },
    "Certificate": {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["secretName", "issuerRef"],
                "additionalProperties": False,
                "properties": {
                    "secretName": {"type": "string"},
                    "dnsNames": {"type": "array", "items": {"type": "string"}},
                    "issuerRef": _ISSUER_REF,
                },
            }
        },
    },
}


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    return kustomize(OVERLAY)


def _named(built: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (obj,) = [d for d in built if d["kind"] == kind and d["metadata"]["name"] == name]
    return obj


def test_cert_manager_objects_use_only_fields_it_defines(built):
    others = [d for d in built if d["apiVersion"] == CERT_MANAGER]
    assert sorted(d["kind"] for d in others) == ["Certificate", "Issuer"]
    for obj in others:
        jsonschema.validate(obj, CERT_MANAGER_SCHEMAS[obj["kind"]])
        assert obj["metadata"]["namespace"] == NAMESPACE


def test_the_webhook_reaches_the_operators_webhook_port_with_its_certificate(built):
    configuration = only(built, "MutatingWebhookConfiguration")
    (hook,) = configuration["webhooks"]
    service_ref = hook["clientConfig"]["service"]
    service = _named(built, "Service", service_ref["name"])
    assert service["metadata"]["namespace"] == service_ref["namespace"] == NAMESPACE
    (port,) = service["spec"]["ports"]
    assert port["port"] == service_ref["port"]
    deployment = only(built, "Deployment")
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    args = container["args"]
    assert "--argo" in args
    assert f"--webhook-port={ports[port['targetPort']]}" in args
    # the certificate: its Secret mounted where --webhook-certs points, its CA injected
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    (certs,) = [a.split("=", 1)[1] for a in args if a.startswith("--webhook-certs=")]
    (volume,) = [n for n, path in mounts.items() if path == certs]
    certificate = only(built, "Certificate")
    assert volumes[volume]["secret"]["secretName"] == certificate["spec"]["secretName"]
    inject = configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert inject == f"{NAMESPACE}/{certificate['metadata']['name']}"
    dns = f"{service['metadata']['name']}.{NAMESPACE}.svc"
    assert dns in certificate["spec"]["dnsNames"]
    issuer = certificate["spec"]["issuerRef"]
    assert _named(built, issuer["kind"], issuer["name"])["spec"] == {"selfSigned": {}}
    # the rest of the operator as in the base
    base_container = only(kustomize(BASE), "Deployment")["spec"]["template"]["spec"]
    assert (
        args[: len(base_container["containers"][0]["args"])]
        == (base_container["containers"][0]["args"])
    )


def test_the_webhook_is_opt_in_per_namespace_and_only_for_argos_pods(built):
    (hook,) = only(built, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["namespaceSelector"] == {"matchLabels": {"idlegate.io/argo": "enabled"}}
    assert hook["objectSelector"] == {
        "matchExpressions": [{"key": WORKFLOW_LABEL, "operator": "Exists"}]
    }
    (rule,) = hook["rules"]
    assert (rule["resources"], rule["operations"]) == (["pods"], ["CREATE"])
    assert hook["sideEffects"] == "None" and hook["timeoutSeconds"] <= 10


def test_rbac_reads_argo_and_patches_pods_only(built):
    role = _named(built, "ClusterRole", "idlegate-operator-argo")
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    for resource in ("workflows", "workflowtemplates", "clusterworkflowtemplates"):
        assert {("argoproj.io", resource, v) for v in ("get", "list", "watch")} <= granted
    assert ("", "pods", "patch") in granted
    # Argo's objects and their status are Argo's; pods are created and deleted by Argo
    assert not [
        g for g in granted if g[0] == "argoproj.io" and g[2] not in ("get", "list", "watch")
    ]
    assert not [g for g in granted if g[1] == "pods" and g[2] in ("create", "delete")]
    binding = _named(built, "ClusterRoleBinding", "idlegate-operator-argo")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    sa = only(built, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}
    ]
