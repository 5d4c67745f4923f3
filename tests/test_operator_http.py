"""Asking the operator's endpoints (idlegate.api.operator_http): what went wrong is one
sentence, whatever answers at the URL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from idlegate.api.operator_http import ask_operator
from idlegate.errors import IdlegateError


class _Page(BaseHTTPRequestHandler):
    """Not the operator: an HTML page, 404 under /missing, 200 elsewhere, a JSON
    refusal under /refused."""

    def do_GET(self) -> None:
        if self.path == "/refused":
            self._send(400, b'{"error": "queue q is not in pool p."}', "application/json")
        elif self.path == "/missing":
            self._send(404, b"<html>not here</html>", "text/html")
        else:
            self._send(200, b"<html>hello</html>", "text/html")

    def _send(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def page() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_a_url_that_is_no_url_is_named():
    with pytest.raises(IdlegateError, match="notaurl is not an http:// URL"):
        ask_operator("notaurl")


def test_a_page_that_is_not_the_operators_json_says_so(page):
    with pytest.raises(IdlegateError, match="answered something other than the operator's"):
        ask_operator(page + "/")
    with pytest.raises(IdlegateError, match="answers 404: Not Found"):
        ask_operator(page + "/missing")


def test_the_operators_refusal_is_its_own_sentence(page):
    with pytest.raises(IdlegateError, match=r"answers 400: queue q is not in pool p\."):
        ask_operator(page + "/refused")
