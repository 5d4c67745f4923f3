"""Airflow's recorded answers (tests/data/airflow, recorded by benchmarks/airflow_record.py
from Airflow 3.1.3 with its example DAGs), and a server that replays them over HTTP."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "airflow"
PASSWORD = "admin"
"""The recording's user admin's password (of a throwaway Airflow)."""
TOKEN = "recorded-token"
"""What the recording put in place of the access token Airflow issued."""
SESSIONS = sorted(p.name[len("session-") : -len(".json")] for p in DATA.glob("session-*.json"))
"""The DAGs whose runs were recorded."""


def session(dag: str) -> dict[str, Any]:
    """'METHOD /path?query' -> {'status', 'body'} of one DAG's recorded export."""
    return json.loads((DATA / f"session-{dag}.json").read_text())


def errors() -> dict[str, Any]:
    """Airflow's answers to a wrong password, a token it did not issue, an unknown DAG."""
    return json.loads((DATA / "errors.json").read_text())


def examples() -> dict[str, Any]:
    """The example set: DAG id -> its export without runs."""
    found = json.loads((DATA / "examples.json").read_text())
    return {export["dag"]["dag_id"]: export for export in found}


@contextmanager
def replaying(answers: dict[str, Any], *, guard: bool = True) -> Iterator[str]:
    """An HTTP server on localhost that answers as the recorded Airflow did; yields its URL.

    ``POST /auth/token`` checks the password, every other request but ``/api/v2/version``
    the recorded token, as Airflow does (unless not `guard`); a request not recorded gets
    Airflow's 404."""
    refused = errors()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def reply(self, found: dict[str, Any]) -> None:
            body = json.dumps(found["body"]).encode()
            self.send_response(found["status"])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            key = f"POST {self.path}"
            if sent.get("password") != PASSWORD:
                self.reply(refused["wrong-password"])
            else:
                self.reply(answers.get(key, refused["unknown-dag"]))

        def do_GET(self) -> None:
            key = f"GET {self.path}"
            token = self.headers["Authorization"] == f"Bearer {TOKEN}"
            if guard and self.path != "/api/v2/version" and not token:
                self.reply(refused["bad-token"])
            else:
                self.reply(answers.get(key, refused["unknown-dag"]))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
