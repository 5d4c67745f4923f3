"""benchmarks/live_pool.py's figures, from every write the test API server saw.

* :class:`Recorder`: an emulator subscriber and auditor (in the API server's loop): each
  write as an :class:`Entry` (when, its resourceVersion, what it wrote), each write request
  over HTTP as the audit has it (``tests.k8s.apiserver.Write``: the operator's, here, since
  the kubelets, the kube-scheduler and the benchmark write in-process), and each
  DagWorkflow's phase and JCT;
* :func:`figures`: pure, from a recorded log: watch lag, Event lag, release→bind and the
  operator's requests a pod (tests/test_benchmarks.py checks them on a written log).

A write is the operator's when an audited request of the operator answered at its
resourceVersion, on its kind and name (a request that wrote nothing, a no-op patch or a
refusal, answers at an earlier write's version, which names another object, or is left out
by its status).
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
import time
from calendar import timegm
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from idlegate.api.labels import GATE, LABEL_WORKFLOW

ENDED = ("Succeeded", "Failed")
Key = tuple[str, str]
"""(namespace, name); a cluster-scoped object's namespace is ""."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One write the API server made, as its subscribers saw it."""

    t: float
    """Wall seconds (epoch) when the API server told its subscribers."""
    version: int
    kind: str
    """The resource's plural: pods, dagworkflows, events, executorpools, ..."""
    etype: str
    namespace: str
    name: str
    workflow: str = ""
    """A pod's workflow (its label), a DagWorkflow's own name."""
    phase: str = ""
    gated: bool = False
    """A pod carries the operator's scheduling gate."""
    node: str = ""
    """A pod's spec.nodeName."""
    involved: tuple[str, str] = ("", "")
    """An Event's involved object (kind, name)."""
    stamp: float | None = None
    """An Event's lastTimestamp (epoch seconds; the API's timestamps are whole seconds)."""
    reason: str = ""
    """An Event's reason."""


@dataclasses.dataclass(frozen=True)
class Request:
    """One write request over HTTP (the audit's), when it was answered."""

    t: float
    method: str
    kind: str
    namespace: str
    name: str
    subresource: str
    status: int
    version: int


def entry_of(kind: str, etype: str, obj: dict[str, Any], t: float) -> Entry:
    """The :class:`Entry` of a write of `obj` (of the resource `kind`)."""
    meta = obj.get("metadata") or {}
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    found: dict[str, Any] = {}
    if kind == "pods":
        gates = [g.get("name") for g in spec.get("schedulingGates") or []]
        found = {
            "workflow": (meta.get("labels") or {}).get(LABEL_WORKFLOW, ""),
            "phase": status.get("phase") or "",
            "gated": GATE in gates,
            "node": spec.get("nodeName") or "",
        }
    elif kind == "dagworkflows":
        found = {"workflow": meta.get("name", ""), "phase": status.get("phase") or ""}
    elif kind == "events":
        involved = obj.get("involvedObject") or {}
        stamp = obj.get("lastTimestamp") or obj.get("firstTimestamp")
        found = {
            "involved": (involved.get("kind") or "", involved.get("name") or ""),
            "stamp": timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) if stamp else None,
            "reason": obj.get("reason") or "",
        }
    return Entry(
        t=t,
        version=int(meta.get("resourceVersion") or 0),
        kind=kind,
        etype=etype,
        namespace=meta.get("namespace") or "",
        name=meta.get("name") or "",
        **found,
    )


class Recorder:
    """Every write of the API server `api` (a ``tests.k8s.harness.ApiServer``) as
    :class:`Entry`, every HTTP write request as :class:`Request`, from creation to
    :meth:`close`; :attr:`pool_seen` is set at the operator's first write of an
    ExecutorPool."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.entries: list[Entry] = []
        self.requests: list[Request] = []
        self.phases: dict[tuple[str, str], str] = {}
        self.jcts: dict[tuple[str, str], float] = {}
        self.pool_seen = threading.Event()
        self._lock = threading.Lock()
        self._stops = api.call(self._start)

    def _start(self) -> tuple[Any, Any]:
        emulator = self.api.emulator
        return emulator.subscribe(self._on_change), emulator.audit(self._on_request)

    def _on_change(self, res: Any, etype: str, obj: dict[str, Any]) -> None:
        entry = entry_of(res.plural, etype, obj, time.time())
        with self._lock:
            self.entries.append(entry)
            if entry.kind == "dagworkflows":
                key = (entry.namespace, entry.name)
                self.phases[key] = entry.phase
                jct = (obj.get("status") or {}).get("jctSeconds")
                if jct is not None:
                    self.jcts[key] = float(jct)

    def _on_request(self, write: Any) -> None:
        request = Request(
            t=time.time(),
            method=write.method,
            kind=write.resource.plural,
            namespace=write.namespace or "",
            name=write.name or "",
            subresource=write.subresource or "",
            status=write.status,
            version=write.version,
        )
        with self._lock:
            self.requests.append(request)
        if request.kind == "executorpools" and request.status < 400:
            self.pool_seen.set()

    def ended(self, names: Iterable[tuple[str, str]]) -> bool:
        """Whether every workflow (namespace, name) of `names` ended, its JCT written."""
        with self._lock:
            return all(self.phases.get(k) in ENDED and k in self.jcts for k in names)

    def close(self) -> tuple[list[Entry], list[Request], dict[tuple[str, str], float]]:
        """Stop recording; (entries, requests, JCT of each DagWorkflow)."""
        for stop in self._stops:
            self.api.call(stop)
        with self._lock:
            return list(self.entries), list(self.requests), dict(self.jcts)


# -- the figures (pure) --------------------------------------------------------------------


@dataclasses.dataclass
class Figures:
    """What :func:`figures` found in a log (seconds are the wall's)."""

    pods: int
    """Pods created."""
    watch_lags: list[float]
    """Per pod end, seconds to the operator's next write about it."""
    unanswered: int
    """Pod ends the operator wrote nothing about afterwards."""
    event_lags: list[float]
    """Per Event posted, seconds from its stated time to the API server's receipt."""
    binds: list[float]
    """Per pod released, seconds from its release to its binding."""
    requests: Counter[str]
    """The operator's write requests by what they wrote (see `category`)."""
    watch_at: list[float] = dataclasses.field(default_factory=list)
    """When each of `watch_lags` was answered (wall seconds, epoch), in their order."""
    event_at: list[float] = dataclasses.field(default_factory=list)
    """When each of `event_lags` was received (wall seconds, epoch), in their order."""
    watch_ns: list[str] = dataclasses.field(default_factory=list)
    """The namespace of each of `watch_lags`' pods, in their order."""
    watch_by: list[str] = dataclasses.field(default_factory=list)
    """What answered each of `watch_lags`: the kind of the operator's write (``pods``, a
    pod's creation or release; ``dagworkflows``, its workflow's status), in their order."""

    def after(self, t: float) -> tuple[list[float], list[float]]:
        """The watch lags answered and the Event lags received at or after `t` (epoch)."""
        watch = [lag for lag, at in zip(self.watch_lags, self.watch_at, strict=True) if at >= t]
        events = [lag for lag, at in zip(self.event_lags, self.event_at, strict=True) if at >= t]
        return watch, events

    def per_pod(self, *categories: str) -> float:
        """The operator's requests of `categories` (all if none) over the pods created."""
        counted = categories or tuple(self.requests)
        return sum(self.requests[c] for c in counted) / max(self.pods, 1)


def category(request: Request) -> str:
    """What a write request wrote: ``pod creates``, ``pod patches``, ``events``,
    ``status`` (any status subresource), ``pool status`` (an ExecutorPool's), or
    ``other``."""
    if request.subresource == "status":
        return "pool status" if request.kind == "executorpools" else "status"
    if request.kind == "pods":
        return {"POST": "pod creates", "PATCH": "pod patches"}.get(request.method, "other")
    if request.kind == "events":
        return "events"
    return "other"


def operator_versions(entries: Sequence[Entry], requests: Sequence[Request]) -> set[int]:
    """The resourceVersions of the writes the operator's requests made (module docstring)."""
    by_version = {e.version: e for e in entries}
    found = set()
    for r in requests:
        e = by_version.get(r.version)
        if r.status >= 400 or e is None or e.kind != r.kind or e.namespace != r.namespace:
            continue
        if r.method == "POST" or e.name == r.name:
            found.add(r.version)
    return found


def quantile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile of `values` (linear between the closest ranks); None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def figures(entries: Sequence[Entry], requests: Sequence[Request]) -> Figures:
    """The figures of a run from its log (see the module docstring and :class:`Figures`)."""
    ours = operator_versions(entries, requests)
    phase: dict[Key, str] = {}
    gated: dict[Key, bool] = {}
    workflow_of: dict[Key, str] = {}  # pod -> its workflow
    released: dict[Key, float] = {}  # pod -> when its gate was removed
    ends: dict[Key, list[float]] = {}  # (namespace, workflow) -> its pods' ends not answered
    written: dict[Key, list[float]] = {}  # object -> when the operator wrote about it
    watch_lags, event_lags, binds = [], [], []
    watch_at: list[float] = []
    watch_ns: list[str] = []
    watch_by: list[str] = []
    event_at: list[float] = []
    created = 0
    for e in sorted(entries, key=lambda e: e.version):
        key, ourselves = (e.namespace, e.name), e.version in ours
        about: Key | None = None  # the object an operator's write is about
        if e.kind == "pods":
            created += e.etype == "ADDED"
            workflow_of[key] = e.workflow
            about = (e.namespace, e.workflow)
            was_gated, was = gated.get(key, False), phase.get(key, "")
            gated[key], phase[key] = e.gated, e.phase
            if ourselves and was_gated and not e.gated:
                released[key] = e.t
            if e.node and key in released:
                binds.append(e.t - released.pop(key))
            if not ourselves and e.phase in ENDED and was not in ENDED:
                ends.setdefault(about, []).append(e.t)
        elif e.kind == "dagworkflows":
            about = key
        elif e.kind == "executorpools":
            about = ("", e.name)
        elif e.kind == "events" and e.etype == "ADDED" and ourselves and e.stamp is not None:
            kind, name = e.involved
            subject = {
                "Pod": (e.namespace, workflow_of.get((e.namespace, name), "")),
                "ExecutorPool": ("", name),
            }.get(kind, (e.namespace, name))
            event_lags.append(e.t - described(written.get(subject, []), e.stamp, e.t))
            event_at.append(e.t)
        if ourselves and about is not None:
            written.setdefault(about, []).append(e.t)
            answered = [e.t - end for end in ends.pop(about, [])]
            watch_lags += answered
            watch_at += [e.t] * len(answered)
            watch_ns += [about[0]] * len(answered)
            watch_by += [e.kind] * len(answered)
    return Figures(
        pods=created,
        watch_lags=watch_lags,
        unanswered=sum(len(v) for v in ends.values()),
        event_lags=event_lags,
        binds=binds,
        requests=Counter(category(r) for r in requests),
        watch_at=watch_at,
        event_at=event_at,
        watch_ns=watch_ns,
        watch_by=watch_by,
    )


def described(writes: Sequence[float], stamp: float, received: float) -> float:
    """When what an Event stamped `stamp` and received at `received` describes happened:
    its stamp, refined within that second (the API's timestamps are whole seconds) to the
    operator's last write about its object there (`writes`, in order) before the Event."""
    i = bisect.bisect_right(writes, min(stamp + 1.0, received))
    return max(stamp, writes[i - 1]) if i else stamp
