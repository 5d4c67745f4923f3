"""The few Kubernetes API calls the operator makes itself, as one small async interface.

kopf watches with its own client; the operator's own reads and writes go through
:class:`KubeApi`: the ``kubernetes`` client's configuration (:mod:`idlegate.kubeconfig`:
every kubeconfig flavour, in-cluster service accounts, token refresh) and HTTP layer in a
small thread pool, without its model classes (bodies are plain dicts). Unit tests use a fake.

A request that gets no answer, a 429 (but an eviction's, a PodDisruptionBudget's
refusal) or a 5xx is retried by urllib3's ``Retry``
(:func:`client_retry`; the back-off is in deploy/README.md): for ever and for every
method, since each write of the operator is idempotent. Each failed try, and the first
answer after one, goes to `report` (:class:`~idlegate.operator.edge.watchdog.ApiHealth`)
and is logged once per request; a back-off in progress ends with the outage (`wake`), a
Retry-After does not. Closing the client ends the retries.

The write gate (:class:`WriteGate`) refuses every write of a
replica that does not lead (:class:`NotLeaderError`); the Lease's own requests are exempt
and have a thread of their own, so that no burst of reads delays a renewal. Each request
names its replica in its User-Agent (:func:`~idlegate.api.paths.user_agent`), which audit
logs record.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Self

from idlegate.api.eviction import eviction_body
from idlegate.api.kinds import CRON_PLURAL, GROUP, PLURAL, POOL_PLURAL, VERSION
from idlegate.api.paths import api_path as _path
from idlegate.api.paths import user_agent

log = logging.getLogger(__name__)
RETRYABLE = frozenset({0, 408, 425, 429, 500, 502, 503, 504})
"""Statuses worth retrying (0: no response at all)."""
LIST_PAGE = 500
CORE = "/api/v1"
OURS = f"/apis/{GROUP}/{VERSION}"
LEASES = "/apis/coordination.k8s.io/v1"
Report = Callable[[str, int], None]
"""Told of a request's outcome (see the module docstring): (what, HTTP status, 0 for no answer)."""


class WriteGate:
    """Open unless bound to an elector that does not lead now."""

    def __init__(self) -> None:
        self._leads: Callable[[], bool] | None = None

    def follow(self, leads: Callable[[], bool]) -> None:
        """Open from now on only while `leads()` (the elector's; bound once: one election
        per replica)."""
        if self._leads is not None:
            raise RuntimeError("This write gate already follows an elector.")
        self._leads = leads

    def open(self) -> bool:
        """Whether a write may be sent now."""
        return self._leads is None or self._leads()


class ApiError(Exception):
    """A request failed: `status` is the HTTP status (0 when there was no response)."""

    def __init__(self, status: int, reason: str, message: str, *, lost: bool = False) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message
        self.lost = lost
        """An earlier try of the same request got no answer: it may have been carried out
        (so a 409 or a refused guard may be that try's own effect)."""

    @property
    def retryable(self) -> bool:
        return self.status in RETRYABLE

    @property
    def answered(self) -> bool:
        """The server answered (any status but a 5xx): it is there. Without an answer (no
        response, a timeout, a 5xx, maybe from a proxy in between) the request may or may
        not have been carried out."""
        return 0 < self.status < 500


class NotLeaderError(ApiError):
    """A write asked of a replica that is not the leader (it is never sent)."""

    def __init__(self, what: str) -> None:
        super().__init__(0, "NotLeader", f"{what}: not sent, this replica is not the leader")


def client_retry(
    *,
    backoff_max: float,
    retry_after_max: float,
    report: Report,
    stop: threading.Event,
    wake: Callable[[], threading.Event] | None = None,
) -> Any:
    """The urllib3 ``Retry`` of the operator's API client (see the module docstring): each
    failed try goes to `report`; `stop` ends the retries, the event `wake()` a back-off."""
    from urllib3.exceptions import MaxRetryError
    from urllib3.util import Retry

    class _Retry(Retry):
        def is_exhausted(self) -> bool:
            return stop.is_set() or super().is_exhausted()

        def _sleep_backoff(self) -> None:
            (wake() if wake is not None else stop).wait(self.get_backoff_time())

        def increment(
            self, method: str | None = None, url: str | None = None, *a: Any, **kw: Any
        ) -> Self:
            response, error = kw.get("response"), kw.get("error")
            status = response.status if response is not None else 0
            what = f"{method} {(url or '').split('?')[0]}"
            report(what, status)
            if status == 429 and what.endswith("/eviction"):  # (a PodDisruptionBudget's no:
                raise MaxRetryError(kw["_pool"], url or "", None)  # the caller's answer)
            if not self.history:  # (once per request)
                cause = str(status) if status else f"{type(error).__name__}: {error}"
                log.warning("Retrying %s until the API takes it: %s", what, cause)
            return super().increment(method, url, *a, **kw)

    return _Retry(
        total=None,  # (no count set: never exhausted, but by `stop`)
        redirect=0,
        allowed_methods=None,  # every method: the operator's writes are idempotent
        status_forcelist=sorted(RETRYABLE - {0}),
        backoff_factor=0.1,
        backoff_max=backoff_max,
        backoff_jitter=0.2 * backoff_max,
        respect_retry_after_header=True,
        retry_after_max=retry_after_max,  # type: ignore[arg-type]  # typed int, only compared
        raise_on_status=False,
    )


@functools.cache
def identity() -> str:
    """This process's name in the Lease, its User-Agent and its Events: its Pod's
    (POD_NAME, or kopf's POD_ID), else the host's, and a random suffix (as client-go's):
    two processes under one name would each take the other's Lease for their own, and
    both lead."""
    name = os.environ.get("POD_NAME") or os.environ.get("POD_ID") or socket.gethostname()
    return f"{name}_{secrets.token_hex(4)}"


def connection_info(configuration: Any) -> Any:
    """kopf's ConnectionInfo for the same credentials (one source of truth for both)."""
    import kopf

    header = configuration.get_api_key_with_prefix("BearerToken")
    header = header or configuration.get_api_key_with_prefix("authorization") or ""
    scheme, _, token = header.rpartition(" ")  # ("Bearer", " ", token), or a bare token
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        username=configuration.username or None,
        password=configuration.password or None,
        scheme=scheme or None,
        token=token or None,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
    )


class KubeApi:
    """What the operator asks of the API server (async; bodies are plain dicts), over the
    ``kubernetes`` client's HTTP layer in a thread pool."""

    def __init__(
        self,
        configuration: Any,
        *,
        concurrency: int = 8,
        timeout: float = 30.0,
        backoff_max: float = 1.0,
        retry_after_max: float = 60.0,
        report: Report | None = None,
        identity: str | None = None,
        gate: WriteGate | None = None,
        wake: Callable[[], threading.Event] | None = None,
    ) -> None:
        import kubernetes.client

        # (threads beyond the writes' concurrency: reads and the probe never wait for them)
        threads = concurrency + 4
        configuration.connection_pool_maxsize = max(
            threads, configuration.connection_pool_maxsize or 0
        )
        self.report = report
        """Told of the outcomes, in the event loop (the outage bookkeeping, metrics)."""
        self._doubt = False
        """A failure was reported and no answer since."""
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        configuration.retries = client_retry(
            backoff_max=backoff_max,
            retry_after_max=retry_after_max,
            report=self._report,
            stop=self._stop,
            wake=wake,
        )
        self.client = kubernetes.client.ApiClient(configuration)
        self.client.user_agent = user_agent(identity)
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="idlegate-api")
        self._lease_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="idlegate-lease")
        self.gate = gate
        """Whether writes may be sent now (the leader's; None: no election, always)."""

    def close(self) -> None:
        self._stop.set()
        for pool in (self._pool, self._lease_pool):
            pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    def _report(self, what: str, status: int) -> None:
        if 200 <= status < 300 and not self._doubt:
            return  # (an answer is news only after a failure)
        self._doubt = not 0 < status < 500
        loop = self._loop
        if self.report is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.report, what, status)

    def _request_sync(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            prepared = self.client.param_serialize(
                method,
                path,
                query_params=query or None,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.client.call_api(*prepared, _request_timeout=self.timeout)
            data = response.read()
        except Exception as exc:  # retries ended (the client closes): no response at all
            self._report(f"{method} {path}", 0)
            raise ApiError(0, type(exc).__name__, f"{method} {path} failed: {exc}") from None
        self._report(f"{method} {path}", response.status)
        if not 200 <= response.status < 300:
            try:
                status = json.loads(data)
                reason, message = status.get("reason", ""), status.get("message", "")
            except (ValueError, AttributeError):
                reason, message = response.reason or "", (data or b"").decode(errors="replace")
            tries = getattr(getattr(response, "response", None), "retries", None)
            lost = any(h.status is None or h.status >= 500 for h in getattr(tries, "history", ()))
            raise ApiError(response.status, reason or str(response.reason), message, lost=lost)
        return json.loads(data) if data else None

    async def _request(
        self, method: str, path: str, *, gone_ok: bool = False, **kwargs: Any
    ) -> Any:
        """The answer's body; with `gone_ok`, None if there is no such object (404)."""
        self._loop = asyncio.get_running_loop()
        lease = path.startswith(LEASES)
        if method != "GET" and not lease and self.gate is not None and not self.gate.open():
            raise NotLeaderError(f"{method} {path}")
        request = partial(self._request_sync, method, path, **kwargs)
        pool = self._lease_pool if lease else self._pool
        try:
            return await self._loop.run_in_executor(pool, request)
        except ApiError as exc:
            if exc.status != 404 or not gone_ok:
                raise
            return None

    async def _list(
        self, path: str, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query = [("limit", str(LIST_PAGE))]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if field_selector:
                query.append(("fieldSelector", field_selector))
            if token:
                query.append(("continue", token))
            page = await self._request("GET", path, query=query)
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return items

    async def _delete(self, path: str) -> None:
        """Delete an object (its dependents in the background); one gone already is fine."""
        await self._request("DELETE", path, gone_ok=True, body={"propagationPolicy": "Background"})

    async def _merge_status(self, path: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch an object's status through its status subresource."""
        merge = "application/merge-patch+json"
        return await self._request(
            "PATCH", f"{path}/status", body={"status": status}, content_type=merge
        )

    async def list_workflows(
        self, namespace: str | None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        return await self._list(_path(OURS, PLURAL, namespace), label_selector)

    async def get_workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._request("GET", _path(OURS, PLURAL, namespace, name), gone_ok=True)

    async def create_workflow(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create a DagWorkflow (a cron workflow's run)."""
        return await self._request("POST", _path(OURS, PLURAL, namespace), body=body)

    async def delete_workflow(self, namespace: str, name: str) -> None:
        await self._delete(_path(OURS, PLURAL, namespace, name))

    async def patch_workflow_status(
        self, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._merge_status(_path(OURS, PLURAL, namespace, name), status)

    async def get_cron_workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._request("GET", _path(OURS, CRON_PLURAL, namespace, name), gone_ok=True)

    async def patch_cron_status(
        self, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._merge_status(_path(OURS, CRON_PLURAL, namespace, name), status)

    async def patch_pool_status(
        self, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        """An ExecutorPool's (cluster-scoped: `namespace` is its Events', not its own)."""
        return await self._merge_status(_path(OURS, POOL_PLURAL, None, name), status)

    async def list_pools(self) -> list[dict[str, Any]]:
        """The ExecutorPools (cluster-scoped)."""
        return await self._list(_path(OURS, POOL_PLURAL, None))

    async def list_objects(
        self, api_version: str, plural: str, namespace: str | None
    ) -> list[dict[str, Any]]:
        """The `plural` objects of another controller's `api_version` (``group/version``),
        e.g. Argo's Workflows."""
        return await self._list(_path(f"/apis/{api_version}", plural, namespace))

    async def list_pods(self, namespace: str | None, label_selector: str) -> list[dict[str, Any]]:
        return await self._list(_path(CORE, "pods", namespace), label_selector)

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._request("GET", _path(CORE, "pods", namespace, name))

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._request("POST", _path(CORE, "pods", namespace), body=body)

    async def patch_pod(
        self, namespace: str, name: str, ops: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Apply a JSON patch (RFC 6902)."""
        path, json_patch = _path(CORE, "pods", namespace, name), "application/json-patch+json"
        return await self._request("PATCH", path, body=ops, content_type=json_patch)

    async def delete_pod(self, namespace: str, name: str) -> None:
        await self._delete(_path(CORE, "pods", namespace, name))

    async def evict_pod(self, namespace: str, name: str) -> None:
        """Evict a pod (policy/v1, its own grace period); a PodDisruptionBudget's refusal,
        429, is answered at once, never retried."""
        path = _path(CORE, "pods", namespace, name) + "/eviction"
        await self._request("POST", path, body=eviction_body(namespace, name))

    async def create_event(self, namespace: str, body: dict[str, Any]) -> None:
        await self._request("POST", _path(CORE, "events", namespace), body=body)

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        path, merge = _path(CORE, "events", namespace, name), "application/merge-patch+json"
        await self._request("PATCH", path, body=patch, content_type=merge)

    async def list_events(self, namespace: str | None, field_selector: str) -> list[dict[str, Any]]:
        return await self._list(_path(CORE, "events", namespace), field_selector=field_selector)

    async def list_namespaces(self) -> list[dict[str, Any]]:
        return await self._list(_path(CORE, "namespaces", None))

    async def get_namespace(self, name: str) -> dict[str, Any] | None:
        return await self._request("GET", _path(CORE, "namespaces", None, name), gone_ok=True)

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._request("GET", _path(LEASES, "leases", namespace, name), gone_ok=True)

    async def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._request("POST", _path(LEASES, "leases", namespace), body=body)

    async def replace_lease(
        self, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """PUT the Lease: refused (409) unless its metadata.resourceVersion is the current one."""
        return await self._request("PUT", _path(LEASES, "leases", namespace, name), body=body)

    async def ping(self) -> None:
        """A cheap request (GET /version) that succeeds whenever the API server answers."""
        await self._request("GET", "/version")
