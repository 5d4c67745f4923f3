"""The operator's API client retries by itself (src/idlegate/operator/edge/kube.py): urllib3's
``Retry`` on the kubernetes client's configuration, against a scripted HTTP server on
127.0.0.1. What is asserted is what the server saw (how many tries, in which order) and
what the client reported, never how long anything took (a Retry-After is checked as a
lower bound only: a busy machine makes it later, never sooner)."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from urllib3.exceptions import ProtocolError

from idlegate import __version__
from idlegate.operator.edge.kube import ApiError, KubeApi, client_retry

kubernetes = pytest.importorskip("kubernetes", reason="the operator extra is not installed")

# On the wall clock, not fake loop time: the retries under test are urllib3's, whose back-off
# sleeps (time.sleep) in the client's worker threads against a real HTTP server, outside
# any event loop that looptime could fake. Every wait is short (0.05 s back-offs, a 1 s
# Retry-After) or woken by the test.
Answer = tuple[int, dict[str, str]] | None
"""(status, headers) of one answer; None: the connection is closed without one."""


class Script(http.server.ThreadingHTTPServer):
    """Answers each request with the next scripted answer (the last one repeats) and
    records (monotonic time, method, path) of every request."""

    def __init__(self, answers: list[Answer]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers = answers
        self.seen: list[tuple[float, str, str]] = []
        self.agents: list[str] = []

    def next_answer(self) -> Answer:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Script

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.server.seen.append((time.monotonic(), self.command, self.path))
        self.server.agents.append(self.headers.get("User-Agent", ""))
        answer = self.server.next_answer()
        if answer is None:
            self.close_connection = True
            return
        status, headers = answer
        body = json.dumps({"kind": "Status", "code": status, "reason": "R", "message": "m"})
        if status < 300:
            body = json.dumps({"metadata": {"name": "p"}})
        self.send_response(status)
        for key, value in {**headers, "Content-Type": "application/json"}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = do_POST = do_PATCH = do_DELETE = _answer  # noqa: N815 (http.server's names)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serving(answers: list[Answer]) -> Iterator[Script]:
    server = Script(answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def client(server: Script, reports: list[tuple[str, int]], **kw: Any) -> KubeApi:
    configuration = kubernetes.client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.server_address[1]}"
    report = lambda what, status: reports.append((what, status))  # noqa: E731
    return KubeApi(configuration, backoff_max=0.05, report=report, **kw)


def test_the_retry_takes_every_method_and_the_statuses_worth_retrying() -> None:
    retry = client_retry(
        backoff_max=1.0, retry_after_max=60.0, report=lambda *_: None, stop=threading.Event()
    )
    for method in ("GET", "POST", "PATCH", "DELETE"):
        assert all(retry.is_retry(method, status) for status in (429, 500, 502, 503, 504))
        assert not any(retry.is_retry(method, status) for status in (400, 404, 409, 422))
    assert retry.parse_retry_after("3600") == 60.0  # (a longer Retry-After is capped)
    assert not retry.is_exhausted()


def test_a_back_off_in_progress_ends_when_the_outage_ends() -> None:
    """A request waiting out its back-off when the API answers again tries at once (the
    event is ApiHealth.ended, set at an outage's end), not up to a back-off later."""
    ended = threading.Event()
    retry = client_retry(
        backoff_max=3600.0,
        retry_after_max=60.0,
        report=lambda *_: None,
        stop=threading.Event(),
        wake=lambda: ended,
    )
    for _ in range(20):  # tries without an answer: the back-off at its cap
        retry = retry.increment(method="GET", url="/x", error=ProtocolError("refused"))
    assert retry.get_backoff_time() == 3600.0
    waiting = threading.Thread(target=retry.sleep, daemon=True)
    waiting.start()
    ended.set()  # the outage ends
    waiting.join(timeout=600)  # (without the wake-up: an hour)
    assert not waiting.is_alive()


def test_a_5xx_is_retried_until_the_api_takes_it_each_try_reported() -> None:
    async def scenario(server: Script) -> None:
        reports: list[tuple[str, int]] = []
        api = client(server, reports)
        try:
            assert (await api.get_pod("ns", "p"))["metadata"]["name"] == "p"
        finally:
            api.close()
        assert [status for _, status in reports] == [503, 503, 200]  # (the answer after them)

    with serving([(503, {}), (503, {}), (200, {})]) as server:
        asyncio.run(scenario(server))
        assert [m for _, m, _ in server.seen] == ["GET"] * 3


def test_each_request_names_the_replica_in_its_user_agent() -> None:
    # (an API server's audit log records it: which replica of the operator wrote)
    async def scenario(server: Script) -> None:
        api = client(server, [], identity="replica-a")
        try:
            await api.get_pod("ns", "p")
            await api.create_pod("ns", {"metadata": {"name": "p"}})
        finally:
            api.close()

    with serving([(200, {})]) as server:
        asyncio.run(scenario(server))
    assert server.agents == [f"idlegate/{__version__} (replica-a)"] * 2


async def create(server: Script, reports: list[tuple[str, int]]) -> ApiError:
    api = client(server, reports)
    try:
        with pytest.raises(ApiError) as caught:
            await api.create_pod("ns", {"metadata": {"name": "p"}})
    finally:
        api.close()
    return caught.value


def test_a_creation_whose_answer_was_lost_ends_in_a_409_that_says_so() -> None:
    reports: list[tuple[str, int]] = []
    with serving([None, (409, {})]) as server:
        refused = asyncio.run(create(server, reports))
        assert [m for _, m, _ in server.seen] == ["POST", "POST"]
    assert (refused.status, refused.lost) == (409, True)
    assert [status for _, status in reports] == [0, 409]  # no answer, then the final one
    with serving([(409, {})]) as server:  # a 409 at the first try: not the operator's effect
        assert asyncio.run(create(server, [])).lost is False


def test_a_429_waits_for_its_retry_after() -> None:
    async def scenario(server: Script) -> None:
        reports: list[tuple[str, int]] = []
        api = client(server, reports)
        try:
            await api.patch_pod("ns", "p", [{"op": "test", "path": "/a", "value": 1}])
        finally:
            api.close()
        assert [status for _, status in reports] == [429]  # (an answer: the next is no news)

    with serving([(429, {"Retry-After": "1"}), (200, {})]) as server:
        asyncio.run(scenario(server))
        (first, _, _), (second, _, _) = server.seen
        assert second - first >= 1.0


def test_closing_the_client_ends_its_retries() -> None:
    async def scenario(server: Script) -> None:
        api = client(server, [])
        request = asyncio.ensure_future(api.get_pod("ns", "p"))
        while len(server.seen) < 2:  # retrying
            await asyncio.sleep(0.01)
        api.close()
        with pytest.raises(ApiError) as caught:
            await asyncio.wait_for(request, 30)  # (a hang guard, not a bound)
        assert caught.value.retryable  # it ends with its last answer

    with serving([(503, {})]) as server:
        asyncio.run(scenario(server))


@pytest.mark.parametrize(
    ("key", "value", "prefix", "expected"),
    [
        ("authorization", "Bearer t-1", None, ("Bearer", "t-1")),  # (a kubeconfig's token)
        ("BearerToken", "t-2", "Bearer", ("Bearer", "t-2")),  # (in-cluster)
        ("BearerToken", "t-3", None, (None, "t-3")),
        (None, None, None, (None, None)),  # (client certificates, no token)
    ],
)
def test_kopf_logs_in_with_the_clients_own_credentials(key, value, prefix, expected):
    from idlegate.operator.edge.kube import connection_info

    configuration = kubernetes.client.Configuration()
    configuration.host = "https://api.example:6443"
    if key is not None:
        configuration.api_key[key] = value
    if prefix is not None:
        configuration.api_key_prefix[key] = prefix
    info = connection_info(configuration)
    assert (info.scheme, info.token) == expected
    assert info.server == "https://api.example:6443"
