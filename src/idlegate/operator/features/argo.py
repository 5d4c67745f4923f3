"""Argo Workflows in the operator: their pods gated at creation (docs/argo.md).

With ``--argo-webhook-port`` the operator serves a mutating admission webhook (kopf's
webhook server, path ``/argo-gate``) that adds idlegate's gate ``idlegate.io/release`` to
every node's pod of an Argo workflow as it is created (`gates_with_ours`: the pod's
other gates kept, any other pod left alone, a pod gated already unchanged). Which pods
reach it is the MutatingWebhookConfiguration's choice (deploy/components/argo: namespaces
labelled ``idlegate.io/argo: enabled``, pods labelled ``workflows.argoproj.io/workflow``).

The webhook writes nothing and keeps no state, so it answers before the operator has
rebuilt its state; while the operator is down Argo cannot create pods there (the
configuration's ``failurePolicy: Fail``) and retries, and the pods created before stay
gated until the operator is back.
"""

from __future__ import annotations

from typing import Any

import kopf

from idlegate.operator.settings import Settings
from idlegate.sim.argo.pods import WORKFLOW_LABEL, gates_with_ours

WEBHOOK_ID = "argo-gate"
"""The webhook's handler id, which is its URL path (``/argo-gate``)."""


def webhook_server(settings: Settings) -> kopf.WebhookServer | None:
    """kopf's webhook server as the settings ask (None without a webhook port)."""
    if settings.argo_webhook_port is None:
        return None
    certs = settings.argo_webhook_certs
    return kopf.WebhookServer(
        addr=settings.listen_host,
        port=settings.argo_webhook_port,
        certfile=None if certs is None else str(certs / "tls.crt"),
        pkeyfile=None if certs is None else str(certs / "tls.key"),
        insecure=certs is None,
    )


def register(registry: kopf.OperatorRegistry, settings: Settings) -> None:
    """Add the Argo handlers to the operator's registry (nothing without ``--argo``)."""
    server = webhook_server(settings) if settings.argo else None
    if server is None:
        return

    @kopf.on.startup(registry=registry)
    def serve_webhook(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.admission.server = server

    @kopf.on.mutate(
        "v1",
        "pods",
        registry=registry,
        id=WEBHOOK_ID,
        operations=["CREATE"],
        labels={WORKFLOW_LABEL: kopf.PRESENT},
        side_effects=False,
    )
    def gate(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
        gates = gates_with_ours(body)
        if gates is not None:
            patch.spec["schedulingGates"] = gates
