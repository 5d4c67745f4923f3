"""The Argo gate's webhook on the real control plane: deploy/components/argo's
MutatingWebhookConfiguration as a user installs it, but calling the operator on loopback by
URL (its caBundle the plane's CA) instead of through cert-manager and a Service, and the
namespace opted in by its label. Shared by tests/real/test_admission.py and test_argo.py."""

from __future__ import annotations

import base64
import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path

import yaml

from idlegate.controlplane.pki import serving
from tests.e2e import _free_port
from tests.k8s.real import ROOT, RealApiServer

WEBHOOK = ROOT / "deploy" / "components" / "argo" / "webhook.yaml"


@contextlib.contextmanager
def argo_gate(api: RealApiServer, ns: str, directory: Path) -> Iterator[tuple[str, ...]]:
    """The webhook configuration in force for `ns` from enter to exit; yields the flags an
    operator serving it needs (``--argo``, its port, its certificate's folder)."""
    port = _free_port()
    crt, key = serving(api.plane.pki, "webhook", ("IP:127.0.0.1",))
    certs = directory / "certs"
    certs.mkdir(exist_ok=True)
    (certs / "tls.crt").write_bytes(crt.read_bytes())
    (certs / "tls.key").write_bytes(key.read_bytes())
    config = copy.deepcopy(yaml.safe_load(WEBHOOK.read_text()))
    config["metadata"] = {"name": f"argo-gate-{ns}"}
    (hook,) = config["webhooks"]
    hook["clientConfig"] = {
        "url": f"https://127.0.0.1:{port}/argo-gate",
        "caBundle": base64.b64encode(api.plane.pki.ca.read_bytes()).decode(),
    }
    api.patch("namespaces", None, ns, {"metadata": {"labels": {"idlegate.io/argo": "enabled"}}})
    api.create("mutatingwebhookconfigurations", config)
    try:
        yield ("--argo", f"--webhook-port={port}", f"--webhook-certs={certs}")
    finally:
        api.delete("mutatingwebhookconfigurations", None, config["metadata"]["name"])
