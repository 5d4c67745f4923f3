"""What the dashboard reads of the Kubernetes API, with the user's credentials.

GETs only, through the ``kubernetes`` client's configuration loading and HTTP layer (every
kubeconfig flavour, in-cluster service accounts) in a few threads, with no retries: an API
that does not answer is an outage the page shows at once (:class:`Outage`), and the next
poll finds it back. A 403 is RBAC saying no (:class:`Forbidden`): what the user may not
read is left out, never an error (:meth:`Reader.visible`).
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from idlegate.api.kinds import GROUP, PLURAL, POOL_PLURAL, VERSION

CORE = "/api/v1"
OURS = f"/apis/{GROUP}/{VERSION}"


class Outage(Exception):
    """The API server did not answer, or answered 5xx: the page shows a banner."""


class Forbidden(Exception):
    """RBAC refused (403) or the resource is not served here (404): left out."""


class Reader:
    """GETs of the API (:meth:`get`) and the listings the dashboard needs."""

    def __init__(self, configuration: Any, timeout: float = 5.0) -> None:
        import kubernetes.client

        configuration.retries = 0  # (an outage is shown, not waited out)
        self.client = kubernetes.client.ApiClient(configuration)
        self.client.user_agent = "idlegate-dashboard"
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="dashboard-api")
        self.listed_all = False
        """The last :meth:`workflows` could list every namespace's."""
        self.allowed: list[str] = []
        """Else the namespaces whose workflows it could list (the others are not shown)."""

    @property
    def host(self) -> str:
        """The API server's address, as the kubeconfig gives it."""
        return str(self.client.configuration.host)

    def unreachable(self, exc: BaseException) -> str:
        """What the user reads of a request that got no answer (`exc`, urllib3's
        MaxRetryError around the socket's error): what cannot be reached and what to check,
        in one sentence (never the exception's class name)."""
        chain: list[BaseException] = []
        found: BaseException | None = exc
        while found is not None and found not in chain:
            chain.append(found)
            reason = getattr(found, "reason", None)
            found = reason if isinstance(reason, BaseException) else found.__cause__
            found = found or chain[-1].__context__
        if any(
            isinstance(e, socket.gaierror) or "NameResolution" in type(e).__name__ for e in chain
        ):
            what = "has a name that does not resolve"
        elif any(isinstance(e, ConnectionRefusedError) for e in chain):
            what = "refuses connections"
        elif any(isinstance(e, ssl.SSLError) for e in chain):
            what = (
                "fails the TLS handshake (check the kubeconfig's certificate-authority "
                "and the server's certificate)"
            )
        elif any(isinstance(e, TimeoutError) or "Timeout" in type(e).__name__ for e in chain):
            what = f"does not answer within {self.timeout:g} s"
        elif any(isinstance(e, ConnectionError) or "Protocol" in type(e).__name__ for e in chain):
            what = "drops the connection"
        else:
            what = f"cannot be reached ({chain[-1]})"
        return (
            f"The Kubernetes API server at {self.host} {what}: check that the cluster runs "
            "and that your kubeconfig's server address reaches it (kubectl cluster-info)."
        )

    @classmethod
    def from_kubeconfig(cls, kubeconfig: Path | None) -> Reader:
        """The user's credentials: `kubeconfig`, else $KUBECONFIG or ~/.kube/config, else
        the pod's service account (IdlegateError saying how to fix one that cannot be read)."""
        from idlegate.kubeconfig import load_configuration

        return cls(load_configuration(kubeconfig))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    def _get_sync(self, path: str, query: list[tuple[str, str]] | None) -> Any:
        try:
            prepared = self.client.param_serialize(
                "GET",
                path,
                query_params=query or None,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            response = self.client.call_api(*prepared, _request_timeout=self.timeout)
            data = response.read()
        except Exception as exc:  # no answer at all: refused, reset, timed out
            raise Outage(self.unreachable(exc)) from None
        if response.status in (401, 403, 404):
            raise Forbidden(f"GET {path}: {response.status}")
        if not 200 <= response.status < 300:
            raise Outage(
                f"The Kubernetes API server at {self.host} answers {response.status} to GET "
                f"{path}: it runs but fails; check its health (kubectl get --raw /readyz)."
            )
        return json.loads(data) if data else None

    async def get(self, path: str, **query: str) -> Any:
        loop = asyncio.get_running_loop()
        pairs = [(k, v) for k, v in query.items() if v]
        return await loop.run_in_executor(self._pool, partial(self._get_sync, path, pairs))

    async def items(self, path: str, **query: str) -> list[dict[str, Any]]:
        return list((await self.get(path, **query) or {}).get("items") or [])

    async def visible(
        self, api: str, plural: str, namespaces: list[str]
    ) -> tuple[list[dict[str, Any]], list[str] | None]:
        """Every `plural` object the user may list, and the namespaces it could list them
        in (None: all): cluster-wide if RBAC allows, else per namespace of `namespaces`,
        skipping those it refuses."""
        try:
            return await self.items(f"{api}/{plural}"), None
        except Forbidden:
            pass
        found: list[dict[str, Any]] = []
        allowed = []
        for ns in namespaces:
            try:
                found += await self.items(f"{api}/namespaces/{ns}/{plural}")
            except Forbidden:
                continue
            allowed.append(ns)
        return found, allowed

    async def namespaces(self, fallback: list[str]) -> list[str]:
        """The namespaces the user may list, else `fallback` (those given on the command
        line, or the kubeconfig's context's)."""
        try:
            return [n["metadata"]["name"] for n in await self.items(f"{CORE}/namespaces")]
        except Forbidden:
            return fallback

    async def workflows(self, namespaces: list[str]) -> list[dict[str, Any]]:
        """The DagWorkflows the user may list (:attr:`listed_all`, :attr:`allowed` say where)."""
        found, allowed = await self.visible(OURS, PLURAL, namespaces)
        self.listed_all, self.allowed = allowed is None, allowed or []
        return found

    async def pools(self) -> list[dict[str, Any]]:
        try:
            return await self.items(f"{OURS}/{POOL_PLURAL}")
        except Forbidden:
            return []

    async def workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return dict(await self.get(f"{OURS}/namespaces/{namespace}/{PLURAL}/{name}"))
        except Forbidden:
            return None

    async def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        try:
            return await self.items(f"{CORE}/namespaces/{namespace}/pods", labelSelector=selector)
        except Forbidden:
            return []

    async def events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        where = f"involvedObject.name={name}"
        try:
            return await self.items(f"{CORE}/namespaces/{namespace}/events", fieldSelector=where)
        except Forbidden:
            return []
