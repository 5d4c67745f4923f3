"""The live DagWorkflows `idlegate history export` reads through the operator's API
client, and the namespace kubectl would read them from (out of `idlegate.cli`, which
declares the commands)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from idlegate.errors import IdlegateError

__all__ = ["live_workflows", "namespace"]


def live_workflows(kubeconfig: Path | None, namespaces: Sequence[str] | None) -> list[Any]:
    """The live DagWorkflows of `namespaces` (none: the current one; None: all), read by the
    operator's API client."""
    import asyncio

    from idlegate.kubeconfig import load_configuration
    from idlegate.operator.edge.kube import ApiError, KubeApi

    api = KubeApi(load_configuration(kubeconfig))

    async def read() -> list[Any]:
        chosen = (None,) if namespaces is None else namespaces or [namespace(kubeconfig)]
        found = await asyncio.gather(*(api.list_workflows(ns) for ns in chosen))
        return [obj for objects in found for obj in objects]

    try:
        return asyncio.run(read())
    except ApiError as exc:
        raise IdlegateError(
            f"cannot list DagWorkflows: {exc}; check the credentials (--kubeconfig) and that "
            "the CRD is installed, or export from a sink file (--from-sink)"
        ) from None
    finally:
        api.close()


def namespace(kubeconfig: Path | None) -> str:
    """The namespace kubectl would use: the service account's in a cluster, else the
    kubeconfig's current context's (default ``default``)."""
    if kubeconfig is None and IN_CLUSTER_NAMESPACE.is_file():
        return IN_CLUSTER_NAMESPACE.read_text().strip()
    import kubernetes.config

    try:
        _, active = kubernetes.config.list_kube_config_contexts(
            config_file=str(kubeconfig) if kubeconfig is not None else None
        )
    except (kubernetes.config.ConfigException, OSError):
        return "default"  # (load_configuration reports unusable credentials)
    return (active or {}).get("context", {}).get("namespace") or "default"


IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
