"""A small typed client of Airflow's stable REST API: what idlegate reads of a DAG.

`AirflowClient` asks an Airflow API server for a DAG *export* (`idlegate.sim.airflow`
maps it): the DAG's details and tasks, its last finished runs and their task instances.
It speaks Airflow 3's ``/api/v2`` and Airflow 2's ``/api/v1`` (``api="auto"`` asks
``/api/v2/version`` first, then ``/api/v1/version``), and authenticates as Airflow
documents it:

* Airflow 3: a JWT. Give it (`AirflowAuth.token`), or a user name and password, which
  are exchanged for one at ``POST /auth/token`` (the simple and the FAB auth managers);
  the token goes in ``Authorization: Bearer``.
* Airflow 2: basic auth (``auth_backends = airflow.api.auth.backend.basic_auth``) from
  the user name and password, or a token as Bearer.

No Airflow package is needed: plain HTTP (``urllib``) and JSON. Every answer goes
through a `Transport`, so a recording of a real Airflow's answers can stand in for it
(tests/data/airflow, recorded by benchmarks/airflow_record.py). Errors a user can fix
(an API that cannot be reached, credentials it refuses, a DAG it does not have, an answer
that is not the API's) are `AirflowError`s, one sentence each.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from idlegate.errors import IdlegateError
from idlegate.sim.airflow import airflow_runs
from idlegate.sim.history import HistoryWorkflow, airflow_workflows
from idlegate.textfiles import read_text

ApiVersion = Literal["auto", "v1", "v2"]
PAGE = 100
"""Items per page: Airflow's default most (``maximum_page_limit``)."""
DEFAULT_RUNS = 25
"""Finished DAG runs read by default (the most recent)."""
TIMEOUT = 30.0
"""Seconds to wait for one answer."""
DAG_HINT = "check the DAG id (GET /api/v2/dags lists them)"
"""What to do about a DAG Airflow does not have."""


class AirflowError(IdlegateError):
    """Airflow's API could not be asked, or did not answer as Airflow does."""

    reason = "AirflowError"
    """What went wrong, as a word an Event's reason can carry."""


class AirflowUnreachable(AirflowError):
    """Airflow's API server did not answer (refused, timed out, no such host)."""

    reason = "AirflowUnreachable"


class AirflowRefused(AirflowError):
    """Airflow refused the credentials, or asked for some (HTTP 401 or 403)."""

    reason = "AirflowUnauthorized"


class AirflowNotFound(AirflowError):
    """Airflow has no such DAG or DAG run (HTTP 404)."""

    reason = "AirflowNotFound"


@dataclass(frozen=True)
class AirflowAuth:
    """How to authenticate: a token, or a user name and password (see the module
    docstring); nothing for an API that needs no authentication."""

    token: str | None = None
    username: str | None = None
    password: str | None = None

    def __repr__(self) -> str:  # never print a secret
        return f"AirflowAuth(token={'***' if self.token else None}, username={self.username!r})"


@dataclass(frozen=True)
class HttpAnswer:
    """One HTTP answer: status code and body."""

    status: int
    body: bytes


Transport = Callable[[str, str, bytes | None, Mapping[str, str]], HttpAnswer]
"""(method, absolute URL, body, headers) -> the answer; raises OSError when the server
cannot be reached."""


def urllib_transport(timeout: float = TIMEOUT) -> Transport:
    """The transport over the network (``urllib``)."""

    def send(method: str, url: str, body: bytes | None, headers: Mapping[str, str]) -> HttpAnswer:
        request = urllib.request.Request(url, data=body, headers=dict(headers), method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                return HttpAnswer(reply.status, reply.read())
        except urllib.error.HTTPError as exc:
            return HttpAnswer(exc.code, exc.read())

    return send


class AirflowClient:
    """Airflow's REST API at `url` (the API server's root, e.g. ``http://airflow:8080``)."""

    def __init__(
        self,
        url: str,
        auth: AirflowAuth | None = None,
        *,
        api: ApiVersion = "auto",
        transport: Transport | None = None,
        flags: str = "--",
    ) -> None:
        self.flags = flags
        """How the command's flags begin (``--``; the operator's ``--airflow-``): what the
        messages tell to change."""
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise AirflowError(
                f"{flags}url must be the address of Airflow's API server, e.g. "
                f"http://airflow:8080, got {url!r}"
            )
        self.url = url.rstrip("/")
        self.auth = auth or AirflowAuth()
        self.transport = transport or urllib_transport()
        self._api: Literal["v1", "v2"] | None = None if api == "auto" else api
        self._headers: dict[str, str] | None = None

    # -- what idlegate reads --------------------------------------------------------------

    @property
    def api(self) -> Literal["v1", "v2"]:
        """The API version spoken (found out on first use with ``api="auto"``)."""
        if self._api is None:
            self._api = self._detect()
        return self._api

    def version(self) -> str:
        """Airflow's version, as ``GET /version`` says it."""
        return str(self.get("version").get("version", "unknown"))

    def dag_export(self, dag_id: str, *, runs: int = DEFAULT_RUNS) -> dict[str, Any]:
        """The DAG export of `dag_id`: its details, tasks, `runs` most recent finished runs
        and their task instances (the shape `idlegate.sim.airflow.map_dag` reads)."""
        dag = self.dag_details(dag_id)
        tasks = self.dag_tasks(dag_id)
        dag_runs = self.finished_runs(dag_id, runs)
        instances: list[Any] = []
        for run in dag_runs:
            instances += self.task_instances(dag_id, str(run.get("dag_run_id")))
        return {"dag": dag, "tasks": tasks, "dag_runs": dag_runs, "task_instances": instances}

    def dag_details(self, dag_id: str) -> Any:
        """``GET /dags/{dag_id}/details``."""
        return self.get(f"dags/{_quote(dag_id)}/details", what=f"DAG {dag_id!r}")

    def dag_tasks(self, dag_id: str) -> Any:
        """The ``tasks`` of ``GET /dags/{dag_id}/tasks`` (the DAG as it is now)."""
        return self.get(f"dags/{_quote(dag_id)}/tasks", what=f"DAG {dag_id!r}").get("tasks")

    def finished_runs(self, dag_id: str, most: int) -> list[Any]:
        """The `most` most recent finished runs of `dag_id`, newest first."""
        order = "-run_after" if self.api == "v2" else "-execution_date"
        query = {"order_by": order, "state": ["success", "failed"]}
        return self.pages(f"dags/{_quote(dag_id)}/dagRuns", "dag_runs", query, most=most)

    def dag_run(self, dag_id: str, run_id: str) -> Any:
        """``GET /dags/{dag_id}/dagRuns/{run_id}``: one run, whatever its state."""
        path = f"dags/{_quote(dag_id)}/dagRuns/{_quote(run_id)}"
        hint = "the run was deleted, or its pod is not of this Airflow (check the Airflow URL)"
        return self.get(path, what=f"DAG run {run_id!r} of DAG {dag_id!r}", hint=hint)

    def task_instances(self, dag_id: str, run_id: str) -> list[Any]:
        """Every task instance of the run `run_id` of `dag_id`."""
        path = f"dags/{_quote(dag_id)}/dagRuns/{_quote(run_id)}/taskInstances"
        return self.pages(path, "task_instances", {})

    # -- HTTP -----------------------------------------------------------------------------

    def get(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        what: str = "",
        hint: str = DAG_HINT,
    ) -> Any:
        """The JSON answer of ``GET /api/<version>/<path>``; a 404 says Airflow has no
        `what` (if given) and `hint`."""
        url = f"{self.url}/api/{self.api}/{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query, doseq=True)
        answer = self._send("GET", url, None, self.headers())
        if answer.status == 401 and self.auth.username and not self.auth.token and self._headers:
            self._headers = None  # (Airflow 3's token expired: the password gets a new one)
            answer = self._send("GET", url, None, self.headers())
        return self._json(answer, url, what, hint)

    def pages(
        self, path: str, key: str, query: Mapping[str, Any], *, most: int | None = None
    ) -> list[Any]:
        """Every item under `key` of a paged list (at most `most`), page by page."""
        out: list[Any] = []
        while most is None or len(out) < most:
            limit = PAGE if most is None else min(PAGE, most - len(out))
            page = self.get(path, {**query, "limit": limit, "offset": len(out)})
            items = page.get(key) if isinstance(page, Mapping) else None
            if not isinstance(items, list):
                raise AirflowError(
                    f"Airflow at {self.url} answered GET {path} without a {key!r} list; "
                    f"is {self.flags}url the root of Airflow's API server?"
                )
            out += items
            total = page.get("total_entries")
            if not items or len(items) < limit or (isinstance(total, int) and len(out) >= total):
                break
        return out

    def headers(self) -> dict[str, str]:
        """The Authorization header for the API (a token fetched once, if need be)."""
        if self._headers is None:
            self._headers = {"Accept": "application/json", **self._authorization()}
        return self._headers

    def _authorization(self) -> dict[str, str]:
        auth = self.auth
        if auth.token:
            return {"Authorization": f"Bearer {auth.token}"}
        if auth.username is None:
            return {}
        if auth.password is None:
            raise AirflowError(
                f"a user name ({auth.username!r}) was given without a password; give the "
                f"password too (AIRFLOW_PASSWORD or {self.flags}password-file), or a token"
            )
        if self.api == "v1":
            pair = base64.b64encode(f"{auth.username}:{auth.password}".encode()).decode()
            return {"Authorization": f"Basic {pair}"}
        return {"Authorization": f"Bearer {self._token(auth.username, auth.password)}"}

    def _token(self, username: str, password: str) -> str:
        """A JWT for `username` from ``POST /auth/token`` (Airflow 3)."""
        url = f"{self.url}/auth/token"
        body = json.dumps({"username": username, "password": password}).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        answer = self._send("POST", url, body, headers)
        found = self._json(answer, url, f"a token for {username!r}")
        token = found.get("access_token") if isinstance(found, Mapping) else None
        if not isinstance(token, str) or not token:
            raise AirflowError(
                f"Airflow at {self.url} answered POST /auth/token without an access_token; "
                "give a token instead of the user name and password"
            )
        return token

    def _detect(self) -> Literal["v1", "v2"]:
        for version in ("v2", "v1"):
            url = f"{self.url}/api/{version}/version"
            answer = self._send("GET", url, None, {"Accept": "application/json"})
            if answer.status in (200, 401, 403):  # there, whether or not it asks who we are
                return version  # type: ignore[return-value]
        raise AirflowError(
            f"{self.url} is no Airflow API server: neither /api/v2/version (Airflow 3) nor "
            f"/api/v1/version (Airflow 2) is there; give the API server's root as {self.flags}url"
        )

    def _send(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str]
    ) -> HttpAnswer:
        try:
            return self.transport(method, url, body, headers)
        except (TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise AirflowUnreachable(
                f"cannot reach Airflow's API at {self.url} ({reason}); check {self.flags}url and "
                "that Airflow's API server runs there (airflow api-server; the webserver in "
                "Airflow 2)"
            ) from None

    def _json(self, answer: HttpAnswer, url: str, what: str, hint: str = DAG_HINT) -> Any:
        detail = _detail(answer.body)
        path = url[len(self.url) :].split("?")[0]
        if answer.status in (401, 403):
            said = f"HTTP {answer.status}{': ' + detail if detail else ''}"
            give = (
                f"give a valid token (AIRFLOW_TOKEN or {self.flags}token-file) or user name "
                f"and password ({self.flags}username, AIRFLOW_PASSWORD or "
                f"{self.flags}password-file) of a user allowed to read DAGs"
            )
            if not self.auth.token and not self.auth.username:
                raise AirflowRefused(f"Airflow at {self.url} asks who is asking ({said}); {give}")
            how = "the token" if self.auth.token else "the user name and password"
            raise AirflowRefused(f"Airflow at {self.url} refused {how} for {path} ({said}); {give}")
        if answer.status == 404 and what:
            raise AirflowNotFound(
                f"Airflow at {self.url} has no {what} (HTTP 404{': ' + detail if detail else ''}); "
                f"{hint}"
            )
        if answer.status != 200 and not (answer.status == 201 and path == "/auth/token"):
            raise AirflowError(
                f"Airflow at {self.url} answered {path} with HTTP {answer.status}"
                f"{': ' + detail if detail else ''}"
            )
        try:
            return json.loads(answer.body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise AirflowError(
                f"Airflow at {self.url} answered {path} with something that is not JSON; is "
                f"{self.flags}url the root of Airflow's API server?"
            ) from None


def _quote(part: str) -> str:
    """A DAG or run id as one segment of a path (a run id has colons and a plus)."""
    return urllib.parse.quote(part, safe="")


def _detail(body: bytes) -> str:
    """The API's own word on an error (its ``detail``), shortened, else ''."""
    try:
        found = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return ""
    detail = found.get("detail") if isinstance(found, Mapping) else None
    text = detail if isinstance(detail, str) else json.dumps(detail) if detail else ""
    return text[:200]


@dataclass(frozen=True)
class Imported:
    """What `import_history` read: the DAG exports, their history, and what was left out."""

    exports: list[dict[str, Any]]
    """One DAG export per DAG asked for (what ``--raw`` writes)."""
    workflows: list[HistoryWorkflow]
    """The finished runs of every DAG as history records, oldest first per DAG."""
    notes: list[str]
    """One sentence per run left out (the DAG changed since it ran) or DAG without runs."""


def import_history(client: AirflowClient, dags: Sequence[str], runs: int) -> Imported:
    """The history of `dags`: each DAG's `runs` most recent finished runs, mapped on the DAG
    as it is now. AirflowError when a DAG has no run left to import (none finished, or
    all ran an older DAG); a run that ran an older DAG is left out with a note."""
    exports, workflows, notes = [], [], []
    for dag in dags:
        export = client.dag_export(dag, runs=runs)
        found = airflow_runs(export)
        notes += [f"left out: {text}" for text in found.left_out]
        if not found.runs:
            why = (
                "every one of them ran an older version of the DAG"
                if found.left_out
                else "it has no finished run"
            )
            raise AirflowError(
                f"DAG {dag!r} has no run to import: {why}; run it (or let it run) and import "
                "again, or leave it out of --dag"
            )
        exports.append(export)
        workflows += airflow_workflows(export, f"Airflow at {client.url}")
    return Imported(exports, workflows, notes)


def read_auth(
    username: str | None,
    password_file: Path | None,
    token_file: Path | None,
    flags: str = "--",
) -> AirflowAuth:
    """The credentials of the command line: a token (``--token-file``, else the
    environment's ``AIRFLOW_TOKEN``), else a user name and its password (``--password-file``,
    else ``AIRFLOW_PASSWORD``): never a secret on the command line itself. Both a token
    file and a user name is an AirflowError (which identity is meant?); `flags` begin the
    command's flags, as `AirflowClient`'s."""
    if token_file is not None and username is not None:
        raise AirflowError(
            f"both {flags}token-file and {flags}username are given, so it is not clear as "
            f"whom to read Airflow's API: give the token ({flags}token-file) or the user "
            f"({flags}username with {flags}password-file or AIRFLOW_PASSWORD), not both"
        )

    def secret(path: Path | None, variable: str) -> str | None:
        if path is None:
            return os.environ.get(variable) or None
        text = read_text(
            path, f"{variable.lower()[8:]} file", "check the path", AirflowError
        ).strip()
        if not text:
            raise AirflowError(f"{path} is empty; it should hold the {variable.lower()[8:]}")
        return text

    token = secret(token_file, "AIRFLOW_TOKEN")
    if token is not None:
        return AirflowAuth(token=token)
    if username is None:
        return AirflowAuth()
    return AirflowAuth(username=username, password=secret(password_file, "AIRFLOW_PASSWORD"))
