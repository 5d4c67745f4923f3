"""benchmarks/live_pool.py's log on the real control plane: kube-apiserver's audit log.

On the test API server a :class:`~benchmarks.live_figures.Recorder` subscribes to the
emulator's writes and audit. A real kube-apiserver has neither hook, but with
``start(audit=True)`` (idlegate.controlplane.launcher's ``AUDIT_POLICY``) it writes one
JSON line per write request once answered, with who sent it (user, User-Agent), its
outcome, when it completed (``stageTimestamp``, microseconds) and, for pods, Events and
idlegate's kinds, the object after the write. :func:`read` turns those lines into the same
:class:`~benchmarks.live_figures.Entry` and :class:`~benchmarks.live_figures.Request` lists,
so :func:`~benchmarks.live_figures.figures` computes the same figures from them:

* every successful write of a pod, an Event, a DagWorkflow or an ExecutorPool is an Entry
  at its ``stageTimestamp``, made of its response's object; a binding (kube-scheduler's
  ``pods/binding``, whose response is only a Status) is an Entry of the pod as last written,
  on the binding's node (its request's ``target``); deletions are left out, as the figures
  read none;
* an Entry's ``version`` is its rank in the log ordered by ``stageTimestamp``, not etcd's
  resourceVersion (a binding has none in its audit line): the order of the writes, which is
  all the figures read of it;
* every write request whose User-Agent is the operator's (kopf's client, ``kopf/…``, or
  idlegate's own, ``idlegate/…``) is a Request at the same rank, answered or refused;
  KWOK's pod ends (user ``kwok``), kube-scheduler's bindings and the benchmark's own
  writes (``Python-urllib``) are Entries only.

:class:`AuditRecorder` has the Recorder's interface over a plane's audit log: it follows
the file as it grows for the run's waits (the pool built, the workflows ended) and reads it
whole at :meth:`~AuditRecorder.close`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.live_figures import ENDED, Entry, Key, Request, entry_of

OPERATOR_AGENTS = ("kopf/", "idlegate/")
"""The User-Agents of the operator's requests (kopf's client, idlegate's own)."""
RECORDED = ("pods", "events", "dagworkflows", "executorpools")
"""The resources whose writes are Entries."""
METHODS = {
    "create": "POST",
    "patch": "PATCH",
    "update": "PUT",
    "delete": "DELETE",
    "deletecollection": "DELETE",
}
ETYPES = {"create": "ADDED", "patch": "MODIFIED", "update": "MODIFIED"}


def stamp(text: str) -> float:
    """An audit timestamp (RFC 3339, UTC, up to nanoseconds) as epoch seconds."""
    whole, _, fraction = text.rstrip("Z").partition(".")
    seconds = datetime.fromisoformat(whole + "+00:00").timestamp()
    return seconds + (float("0." + fraction) if fraction else 0.0)


def ours(event: dict[str, Any]) -> bool:
    """Whether an audit event is of a request the operator sent."""
    return str(event.get("userAgent") or "").startswith(OPERATOR_AGENTS)


def read(lines: Iterable[str]) -> tuple[list[Entry], list[Request], dict[Key, float]]:
    """The log's Entries, the operator's Requests and each DagWorkflow's JCT (the last
    written), from an audit log's `lines` (the module docstring)."""
    events = []
    for line in lines:
        if line.strip():
            event = json.loads(line)
            if event.get("stage") == "ResponseComplete" and event.get("verb") in METHODS:
                events.append((stamp(event["stageTimestamp"]), event))
    events.sort(key=lambda te: te[0])  # (stable: the log's order within a microsecond)
    entries: list[Entry] = []
    requests: list[Request] = []
    jcts: dict[Key, float] = {}
    last: dict[Key, Entry] = {}  # pod -> its last Entry
    for rank, (t, event) in enumerate(events, start=1):
        ref, code = event.get("objectRef") or {}, int(event["responseStatus"].get("code", 0))
        kind, sub = ref.get("resource", ""), ref.get("subresource", "")
        namespace, name = ref.get("namespace", ""), ref.get("name", "")
        if ours(event):
            method = METHODS[event["verb"]]
            requests.append(Request(t, method, kind, namespace, name, sub, code, rank))
        if kind not in RECORDED or code >= 400 or event["verb"] not in ETYPES:
            continue
        entry = None
        if sub == "binding":
            target = ((event.get("requestObject") or {}).get("target") or {}).get("name", "")
            if (was := last.get((namespace, name))) is not None:
                entry = replace(was, t=t, version=rank, etype="MODIFIED", node=target)
        elif isinstance(obj := event.get("responseObject"), dict) and "metadata" in obj:
            entry = replace(entry_of(kind, ETYPES[event["verb"]], obj, t), version=rank)
            if kind == "dagworkflows" and (jct := (obj.get("status") or {}).get("jctSeconds")):
                jcts[entry.namespace, entry.name] = float(jct)
        if entry is not None:
            entries.append(entry)
            if kind == "pods":
                last[entry.namespace, entry.name] = entry
    return entries, requests, jcts


class AuditRecorder:
    """The :class:`~benchmarks.live_figures.Recorder`'s interface over the audit log at
    `path`: :attr:`pool_seen` is set at the operator's first successful write of an
    ExecutorPool, :meth:`ended` says whether workflows ended with their JCT written, both
    from the lines written so far (a thread follows the file every `every` seconds, and
    parses only those lines); :meth:`close` reads the whole log."""

    def __init__(self, path: Path, every: float = 0.2) -> None:
        self.path = path
        self.pool_seen = threading.Event()
        self.phases: dict[Key, str] = {}
        self.jcts: dict[Key, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._offset = 0
        self._thread = threading.Thread(
            target=self._follow, args=(every,), name="audit", daemon=True
        )
        self._thread.start()

    def _follow(self, every: float) -> None:
        while not self._stop.wait(every):
            self._read_new()

    def _read_new(self) -> None:
        """The lines appended since the last call (a line not ended yet is left for the
        next)."""
        try:
            with self.path.open("rb") as log:
                log.seek(self._offset)
                chunk = log.read()
        except FileNotFoundError:  # (no request audited yet)
            return
        done = chunk.rfind(b"\n") + 1
        self._offset += done
        for line in chunk[:done].splitlines():
            if b'"dagworkflows"' in line or b'"executorpools"' in line:
                self._note(json.loads(line))

    def _note(self, event: dict[str, Any]) -> None:
        ref, obj = event.get("objectRef") or {}, event.get("responseObject")
        if int(event["responseStatus"].get("code", 0)) >= 400 or event.get("verb") not in ETYPES:
            return
        if ref.get("resource") == "executorpools" and ours(event):
            self.pool_seen.set()
        if ref.get("resource") == "dagworkflows" and isinstance(obj, dict):
            key = ((obj.get("metadata") or {}).get("namespace", ""), obj["metadata"]["name"])
            status = obj.get("status") or {}
            with self._lock:
                self.phases[key] = status.get("phase") or ""
                if status.get("jctSeconds") is not None:
                    self.jcts[key] = float(status["jctSeconds"])

    def ended(self, names: Iterable[tuple[str, str]]) -> bool:
        """Whether every workflow (namespace, name) of `names` ended, its JCT written."""
        with self._lock:
            return all(self.phases.get(k) in ENDED and k in self.jcts for k in names)

    def close(self) -> tuple[list[Entry], list[Request], dict[Key, float]]:
        """Stop following; (entries, requests, JCT of each DagWorkflow) of the whole log."""
        self._stop.set()
        self._thread.join()
        with self.path.open() as log:
            return read(log)
