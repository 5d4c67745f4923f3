"""A small synchronous client of the local control plane's API server (standard library).

The launcher needs a handful of calls before anything else exists (readiness, the Nodes,
a namespace's ServiceAccount), and the tests reuse it to read what the real API server
holds: it speaks HTTPS with the admin's client certificate, JSON in and out, and a watch
as a stream of JSON lines. The operator itself never uses it (it has kopf's client).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

from idlegate.controlplane.pki import Pki

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}


class ApiRefusal(Exception):
    """An answer of the API server other than 2xx: its status code and its Status body."""

    def __init__(self, status: int, body: Mapping[str, Any], what: str) -> None:
        self.status = status
        self.body = dict(body)
        self.reason = str(body.get("reason") or "")
        super().__init__(f"{what}: {status} {self.reason}: {body.get('message') or body}")


class Client:
    """The API server at `url`, as the user `name` of `pki` (default: the admin)."""

    def __init__(self, url: str, pki: Pki, name: str = "admin", timeout: float = 30) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._context = ssl.create_default_context(cafile=str(pki.ca))
        self._context.load_cert_chain(str(pki.cert(name)), str(pki.key(name)))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """The decoded JSON answer to one request; :class:`ApiRefusal` on a non-2xx status."""
        with self._open(method, path, body, content_type, query, timeout) as response:
            raw = response.read()
        return json.loads(raw) if raw.strip() else None

    def stream(
        self, path: str, query: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> Iterator[dict[str, Any]]:
        """A watch's events (``{"type": ..., "object": ...}``), one a line, until it ends."""
        with self._open("GET", path, None, "application/json", query, timeout) as response:
            for line in response:
                if line.strip():
                    yield json.loads(line)

    def text(self, path: str) -> str:
        """A plain-text endpoint's answer (``/readyz?verbose``, ``/metrics``)."""
        with self._open("GET", path, None, "application/json", None, None) as response:
            return response.read().decode(errors="replace")

    def _open(
        self,
        method: str,
        path: str,
        body: Any,
        content_type: str,
        query: Mapping[str, str] | None,
        timeout: float | None,
    ) -> Any:
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            return urllib.request.urlopen(
                request, context=self._context, timeout=timeout or self.timeout
            )
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                status = json.loads(raw)
            except ValueError:
                status = {"message": raw.decode(errors="replace")[:500]}
            raise ApiRefusal(exc.code, status, f"{method} {path}") from None
