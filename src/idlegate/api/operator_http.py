"""Asking the operator's own HTTP endpoints from a user's machine (its metrics port: the
visibility API, the what-if): one JSON request, and what went wrong as one sentence that
says how to reach the port. The standard library only, so the CLI needs no extra."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from idlegate.errors import IdlegateError

FORWARD = "kubectl -n idlegate-system port-forward svc/idlegate-operator-metrics 9090"
"""How a user reaches the operator's metrics port from outside the cluster."""


def check_url(url: str) -> None:
    """IdlegateError (one sentence naming ``--url``) unless `url` is an http(s) URL with a
    host and, if it gives one, a port of 1-65535: a port out of range is no address, so
    asking it would only say "connection refused", as if the operator were down."""
    parts = urllib.parse.urlsplit(url)
    given = f"--url {parts.scheme}://{parts.netloc}" if parts.netloc else f"--url {url}"
    fix = f"give the operator's metrics port, e.g. http://localhost:9090 after {FORWARD}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise IdlegateError(f"{given} is not an http:// URL with a host; {fix}")
    try:
        port = parts.port
    except ValueError:  # (not a number, or past 65535)
        port = -1
    if port is not None and not 0 < port < 65536:
        said = parts.netloc.rpartition(":")[2]
        what = "out of range (1-65535)" if said.isdigit() else "not a port number"
        raise IdlegateError(f"{given}: port {said!r} is {what}; {fix}")


def ask_operator(url: str, body: bytes | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """The JSON document the operator answers at `url` (a GET, or with `body` a POST of
    that YAML), or IdlegateError naming the URL: the operator's own error sentence for an
    answer it refused, how to forward its port when it cannot be reached."""
    check_url(url)
    headers = {"Content-Type": "application/yaml"} if body is not None else {}
    try:
        request = urllib.request.Request(url, data=body, headers=headers)
    except ValueError as exc:  # (not a URL at all: "notaurl")
        raise IdlegateError(
            f"{url} is not an http:// URL of the operator's metrics port ({exc}); forward "
            f"the port ({FORWARD}) and pass --url http://localhost:9090"
        ) from None
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = response.read()
    except urllib.error.HTTPError as exc:
        said = _error_of(exc.read()) or exc.reason
        raise IdlegateError(f"the operator at {url} answers {exc.code}: {said}") from None
    except (OSError, ValueError) as exc:
        raise IdlegateError(
            f"cannot reach the operator at {url} ({_why(exc)}); is the operator's metrics port "
            f"forwarded ({FORWARD})?"
        ) from None
    try:
        found = json.loads(answer)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise IdlegateError(
            f"{url} answered something other than the operator's JSON document; is --url "
            f"the operator's metrics port ({FORWARD})?"
        )
    return found


def _why(exc: Exception) -> str:
    """Why a request went nowhere, in the system's words ("Connection refused"), not
    urllib's wrapping of them ("<urlopen error [Errno 111] ...>")."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    return str(getattr(reason, "strerror", None) or reason)


def _error_of(body: bytes) -> str | None:
    """The operator's error sentence in a refusal's body (None: not the operator's JSON)."""
    try:
        found = json.loads(body or b"{}")
    except ValueError:
        return None
    return str(found.get("error")) if isinstance(found, dict) and found.get("error") else None
