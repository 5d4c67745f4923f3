"""What kube-apiserver itself admits, on the real control plane:

* the ValidatingAdmissionPolicy of deploy/components/pod-security, its CEL evaluated by the
  API server (tests/test_security.py evaluates the same expressions with cel-python):
  ``kubectl apply`` of a DagWorkflow with a privileged template is refused, naming the field;
* PodSecurity admission refuses a namespace label that is no level (so the operator's
  reading of such a label as restricted is only for namespaces labelled before it);
* the Argo gate's mutating webhook, called by the API server over TLS on loopback (a URL,
  its caBundle the plane's CA): a pod Argo creates in a namespace that opted in gets the
  operator's scheduling gate at its creation, and while no operator answers, failurePolicy
  Fail refuses the pod rather than let it run ungated.
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from idlegate.api.argo_pods import NODE_NAME, WORKFLOW_LABEL
from idlegate.api.labels import GATE
from idlegate.controlplane.client import ApiRefusal
from idlegate.controlplane.pki import serving
from tests.e2e import DWF, OperatorProcess, _free_port, stage, wait, workflow
from tests.k8s.real import ROOT, RealApiServer

POLICY = ROOT / "deploy" / "components" / "pod-security" / "policy.yaml"
WEBHOOK = ROOT / "deploy" / "components" / "argo" / "webhook.yaml"
PRIVILEGED = {
    "spec": {
        "containers": [
            {"name": "task", "image": "busybox", "securityContext": {"privileged": True}}
        ]
    }
}


def kubectl_apply(api: RealApiServer, ns: str, body: dict[str, Any]) -> subprocess.CompletedProcess:
    command = ["kubectl", f"--kubeconfig={api.kubeconfig}", "-n", ns, "apply", "-f", "-"]
    return subprocess.run(command, input=json.dumps(body), capture_output=True, text=True)


def test_the_api_server_refuses_a_privileged_template_by_the_policy(api: RealApiServer, ns: str):
    api.kubectl("apply", "-f", str(POLICY))
    bad = workflow("escalates", stage("a", template=PRIVILEGED))
    # the policy takes effect once the API server has loaded it: until the refusal comes
    refused = wait(
        lambda: (r := kubectl_apply(api, ns, bad)).returncode != 0 and r.stderr,
        60,
        "the policy to refuse",
    )
    field = "spec.stages[0].template.spec.containers[0].securityContext.privileged"
    assert "ValidatingAdmissionPolicy 'idlegate-pod-security'" in refused, refused
    assert field in refused and "baseline" in refused, refused
    assert api.get(DWF, ns, "escalates") is None
    fine = workflow("plain", stage("a"))
    assert kubectl_apply(api, ns, fine).returncode == 0


def test_podsecurity_refuses_a_namespace_label_that_is_no_level(api: RealApiServer, ns: str):
    label = {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "Privileged"}}}
    with pytest.raises(ApiRefusal) as refused:
        api.patch("namespaces", None, ns, label)
    assert refused.value.status == 422
    assert "must be one of privileged, baseline, restricted" in str(refused.value)


def argo_pod(name: str) -> dict[str, Any]:
    """A pod as Argo's controller creates one for a node of workflow ``wf``."""
    return {
        "metadata": {
            "name": name,
            "labels": {WORKFLOW_LABEL: "wf"},
            "annotations": {NODE_NAME: f"wf.{name}"},
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "argo"}]},
    }


def test_the_argo_gate_webhook_gates_argos_pods_at_their_creation(
    api: RealApiServer, ns: str, tmp_path: Path
) -> None:
    port = _free_port()
    crt, key = serving(api.plane.pki, "webhook", ("IP:127.0.0.1",))
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "tls.crt").write_bytes(crt.read_bytes())
    (certs / "tls.key").write_bytes(key.read_bytes())
    config = yaml.safe_load(WEBHOOK.read_text())
    config = copy.deepcopy(config)
    config["metadata"] = {"name": f"argo-gate-{ns}"}
    (hook,) = config["webhooks"]
    hook["clientConfig"] = {
        "url": f"https://127.0.0.1:{port}/argo-gate",
        "caBundle": base64.b64encode(api.plane.pki.ca.read_bytes()).decode(),
    }
    # the namespace opts in as a user's does (the configuration's own namespaceSelector)
    api.patch("namespaces", None, ns, {"metadata": {"labels": {"idlegate.io/argo": "enabled"}}})
    api.create("mutatingwebhookconfigurations", config)
    try:
        # no operator answers yet: failurePolicy Fail keeps Argo's pod out, ungated or not
        def refused() -> bool:
            try:
                api.create("pods", argo_pod("early"), namespace=ns)
            except ApiRefusal as exc:
                return exc.status == 500 and "argo-gate.idlegate.io" in str(exc)
            api.delete("pods", ns, "early")
            return False

        wait(refused, 60, "the webhook configuration to be in force")
        flags = ("--argo", f"--webhook-port={port}", f"--webhook-certs={certs}")
        operator = OperatorProcess(api, ns, 2, tmp_path / "operator.log", *flags)
        try:
            created = wait(lambda: _create_once_served(api, ns), 120, "the webhook to answer")
        finally:
            operator.kill()
        gates = [g["name"] for g in created["spec"].get("schedulingGates") or []]
        assert GATE in gates, (created["spec"], operator.tail())
        plain = api.create("pods", {**argo_pod("plain"), "metadata": {"name": "plain"}}, ns)
        assert not plain["spec"].get("schedulingGates")  # (not Argo's: the webhook never saw it)
    finally:
        api.delete("mutatingwebhookconfigurations", None, config["metadata"]["name"])


def _create_once_served(api: RealApiServer, ns: str) -> dict[str, Any] | None:
    try:
        return api.create("pods", argo_pod("gated"), namespace=ns)
    except ApiRefusal as exc:
        if exc.status == 500:  # (the webhook not serving yet)
            return None
        raise
