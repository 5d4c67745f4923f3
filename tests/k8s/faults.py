"""A fault-injecting HTTP proxy between the operator and the test API server.

:class:`FaultProxy` listens on 127.0.0.1 in a thread with its own event loop and forwards
every request to an :class:`~tests.k8s.harness.ApiServer`: a watch stream chunk by chunk,
as the server writes it, any other request as one answer. It writes its own kubeconfig,
pointing at itself: the operator under test is given that one, while the tests and the
simulated kubelet keep talking to the server directly (so they see the truth).

Faults are switched at run time, from the test thread, with :meth:`FaultProxy.set` or,
for a while, :meth:`FaultProxy.fault`; they apply to requests that arrive from then on:

* ``outage``: every request is answered 503 and every open watch stream is cut (its
  connection dropped), as when the API server is down behind its load balancer;
* ``throttle``: every request is answered 429 with ``Retry-After: <throttle>`` seconds,
  as API Priority and Fairness answers a storm;
* ``latency``: seconds added before each request is forwarded;
* ``cut_watches``: each watch stream is cut that many seconds after it opened;
* ``drop_before`` and ``drop_after``: a request's connection is dropped with that
  probability, before it is forwarded (the server never saw it) or after the server
  answered (the server applied it, the client gets no response). Watch requests are
  dropped only before.

Every request is recorded as a :class:`Hit` (method, path, who sent it, when, the status
or the fault it got), so tests can check when retries came. :attr:`FaultProxy.calm_since`
is the time the last outage or throttling ended: a test's bound on recovery counts from it.

    with ApiServer(tmp) as api, FaultProxy(api, tmp) as proxy:
        operator = ...(kubeconfig=proxy.kubeconfig)
        with proxy.fault(outage=True):
            time.sleep(20)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import aiohttp.web

from tests.k8s.harness import ApiServer, LoopThread, write_kubeconfig

HOP_BY_HOP = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade"}
)
"""Headers that belong to one connection, not to the request: never forwarded."""


@dataclasses.dataclass
class Faults:
    """What the proxy does to the requests that arrive now (see the module docstring)."""

    outage: bool = False
    throttle: float | None = None
    """Answer every request 429 with this Retry-After (seconds); None: no throttling."""
    latency: float = 0.0
    cut_watches: float | None = None
    """Cut each watch stream this many seconds after it opened; None: never."""
    drop_before: float = 0.0
    drop_after: float = 0.0

    @property
    def calm(self) -> bool:
        """Neither an outage nor a throttling storm (the faults the API recovers from)."""
        return not self.outage and self.throttle is None


@dataclasses.dataclass
class Hit:
    """One request as the proxy saw it; times are ``time.monotonic()``."""

    method: str
    path: str
    """The path with its query string."""
    agent: str
    """The User-Agent: kopf's own requests say ``kopf/...``, the operator's ``OpenAPI...``."""
    name: str
    """The name of the object a POST creates (from its body); "" for other requests."""
    start: float
    end: float | None = None
    status: int | None = None
    """The HTTP status the client got; None if it got none (dropped, cut)."""
    fault: str = ""
    """The fault injected: "outage", "throttle", "drop-before", "drop-after", "cut"."""

    @property
    def watch(self) -> bool:
        return "watch=true" in self.path.lower() or "watch=1" in self.path

    @property
    def kopf(self) -> bool:
        return self.agent.startswith("kopf")


def _status(code: int, reason: str, message: str) -> aiohttp.web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }
    return aiohttp.web.json_response(body, status=code)


class FaultProxy(LoopThread):
    """The proxy in a background thread (see the module docstring)."""

    what = "the fault proxy"

    def __init__(self, upstream: ApiServer, directory: Path, *, seed: int = 0) -> None:
        super().__init__("fault-proxy")
        self.upstream = upstream
        self.kubeconfig = Path(directory) / "kubeconfig-proxy"
        self.url = ""
        self.faults = Faults()
        self.hits: list[Hit] = []
        self.calm_since = time.monotonic()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._watches: dict[asyncio.Event, Hit] = {}  # open watch streams -> their cut

    # -- from the test thread ----------------------------------------------------------------

    def set(self, **changes: Any) -> Faults:
        """Switch faults (fields of :class:`Faults`); returns the faults before. Turning an
        outage on cuts the open watch streams; ending the last outage or throttling sets
        :attr:`calm_since`."""
        with self._lock:
            before = self.faults
            self.faults = dataclasses.replace(before, **changes)
            if self.faults.calm and not before.calm:
                self.calm_since = time.monotonic()
        if self.faults.outage and not before.outage:
            self.call(self._cut_all, "outage")
        return before

    @contextlib.contextmanager
    def fault(self, **changes: Any) -> Iterator[Faults]:
        """Switch faults for the block, then back to what they were."""
        before = self.set(**changes)
        try:
            yield self.faults
        finally:
            self.set(**{name: getattr(before, name) for name in changes})

    def requests(self) -> list[Hit]:
        """A copy of the record so far."""
        with self._lock:
            return list(self.hits)

    # -- in the proxy's loop -----------------------------------------------------------------

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        # no total timeout: a watch lasts as long as the server keeps it open
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(
            timeout=timeout, connector=connector, auto_decompress=False
        ) as self._session:
            server = aiohttp.web.Server(self._handle, handler_cancellation=True)
            runner = aiohttp.web.ServerRunner(server, handle_signals=False)
            await runner.setup()
            site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            host, port = runner.addresses[0][:2]
            self.url = f"http://{host}:{port}"
            write_kubeconfig(self.kubeconfig, self.url)
            self._ready.set()
            await self._stop.wait()
            self._cut_all("")
            await runner.cleanup()

    def _cut_all(self, fault: str) -> None:
        for cut, hit in list(self._watches.items()):
            hit.fault = hit.fault or fault
            cut.set()

    def _record(self, request: aiohttp.web.BaseRequest, body: bytes) -> Hit:
        name = ""
        if request.method == "POST" and body:
            with contextlib.suppress(ValueError, AttributeError):
                name = (json.loads(body).get("metadata") or {}).get("name") or ""
        agent = request.headers.get("User-Agent", "")
        hit = Hit(request.method, request.path_qs, agent, name, time.monotonic())
        with self._lock:
            self.hits.append(hit)
        return hit

    async def _handle(self, request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        body = await request.read()
        hit = self._record(request, body)
        response = await self._respond(request, body, hit, self.faults)
        hit.end = time.monotonic()
        return response

    async def _respond(
        self, request: aiohttp.web.BaseRequest, body: bytes, hit: Hit, faults: Faults
    ) -> aiohttp.web.StreamResponse:
        if faults.latency:
            await asyncio.sleep(faults.latency)
            faults = self.faults  # (an outage may have begun meanwhile)
        if faults.outage:
            hit.status, hit.fault = 503, "outage"
            return _status(503, "ServiceUnavailable", "the API server is down (fault proxy)")
        if faults.throttle is not None:
            hit.status, hit.fault = 429, "throttle"
            response = _status(429, "TooManyRequests", "throttled (fault proxy), retry later")
            response.headers["Retry-After"] = f"{faults.throttle:g}"
            return response
        if faults.drop_before and self._rng.random() < faults.drop_before:
            hit.fault = "drop-before"
            return self._drop(request)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        upstream = await self._session.request(
            request.method,
            self.upstream.url + request.path_qs,
            headers=headers,
            data=body or None,
            allow_redirects=False,
        )
        async with upstream:
            if hit.watch and upstream.status == 200:
                return await self._stream(request, upstream, hit, faults)
            data = await upstream.read()
        if faults.drop_after and self._rng.random() < faults.drop_after:
            hit.fault = "drop-after"
            return self._drop(request)
        hit.status = upstream.status
        kept = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP}
        return aiohttp.web.Response(body=data, status=upstream.status, headers=kept)

    @staticmethod
    def _drop(request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """Close the connection without an answer (the client sees it reset)."""
        assert request.transport is not None
        request.transport.abort()
        return aiohttp.web.Response(status=499)  # never sent: the connection is gone

    async def _stream(
        self,
        request: aiohttp.web.BaseRequest,
        upstream: aiohttp.ClientResponse,
        hit: Hit,
        faults: Faults,
    ) -> aiohttp.web.StreamResponse:
        """Pass a watch stream through as it comes, until it ends or is cut."""
        response = aiohttp.web.StreamResponse(
            status=upstream.status,
            headers={"Content-Type": upstream.headers.get("Content-Type", "application/json")},
        )
        await response.prepare(request)
        hit.status = upstream.status

        async def pump() -> None:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)

        task = asyncio.create_task(pump())
        cut = asyncio.Event()
        self._watches[cut] = hit
        cutting = asyncio.create_task(cut.wait())
        try:
            await asyncio.wait(
                {task, cutting}, timeout=faults.cut_watches, return_when="FIRST_COMPLETED"
            )
        finally:
            self._watches.pop(cut, None)
            cutting.cancel()
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, aiohttp.ClientError):
            await task
        if not task.cancelled() and task.exception() is None:
            return response  # the server ended the stream (its timeout): end it the same way
        hit.fault = hit.fault or "cut"
        hit.status = None
        assert request.transport is not None
        request.transport.abort()  # the connection goes without the stream's proper end
        return response


def retries_after(hits: list[Hit], status: int) -> list[tuple[Hit, Hit]]:
    """Each request answered `status` paired with the next request of the same client for
    the same object (method, path, created name): its retry, or the next write of it."""

    def key(hit: Hit) -> tuple[str, str, str, bool]:
        return hit.method, hit.path, hit.name, hit.kopf

    pairs = []
    for i, hit in enumerate(hits):
        if hit.status != status:
            continue
        retry = next((later for later in hits[i + 1 :] if key(later) == key(hit)), None)
        if retry is not None:
            pairs.append((hit, retry))
    return pairs
