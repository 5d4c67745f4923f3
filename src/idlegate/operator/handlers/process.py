"""The operator process's own handlers: its start and stop, its credentials, its liveness
probe's payload, and the server its admission webhooks are served on."""

from __future__ import annotations

from typing import Any

import kopf

from idlegate.operator.edge.kube import connection_info
from idlegate.operator.runtime import Operator


async def startup(
    operator: Operator,
    settings: kopf.OperatorSettings,
    namespaces: kopf.Index,
    cluster_nodes: kopf.Index,
    **_: Any,
) -> None:
    await operator.started(settings, namespaces, cluster_nodes)


async def cleanup(operator: Operator, **_: Any) -> None:
    await operator.stop()


def login(operator: Operator, **_: Any) -> kopf.ConnectionInfo:
    return connection_info(operator.configuration)  # (the operator's own client's)


async def probe(operator: Operator, **_: Any) -> dict[str, Any]:
    return operator.summary()


def serve_webhooks(operator: Operator, settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.admission.server = operator.webhook_server()
