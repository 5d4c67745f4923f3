"""A Kubernetes API server emulator for end-to-end tests, built on kmock 0.8.

Plain ``kmock.KubernetesEmulator`` is a good HTTP mock but a weak API server
(no resourceVersions/uids, no 409/422 semantics, no status subresource, no
garbage collection, quadratic request matching...). This module keeps kmock as
the foundation and adds a compatibility layer that behaves like a real API
server closely enough for kopf, the ``kubernetes`` client and ``kubectl``.

What is used from kmock, and what is replaced:

* **used**: ``kmock.Server`` (the aiohttp server on 127.0.0.1 and a free port),
  ``kmock.Request`` (every HTTP request is recorded as a kmock request, so the
  kmock DSL works for failure injection: ``emulator['patch'] << 500``),
  ``kmock.RawHandler`` reaction matching (consulted only when a test has added
  its own reactions), ``kmock.KubernetesError`` (errors rendered as ``Status``),
  ``kmock.ResourcesArray`` + ``load_bundled()`` (the built-in resource catalogue,
  extended with CRD-registered resources) and ``kmock.ObjectsArray``/``Object``
  (object storage with a version history and kmock's pattern-matching
  assertions: ``emulator.objects['v1/pods', 'default', 'p'] >= {...}``).
* **replaced**: request-path parsing (kmock crashes on ``/api/v1/namespaces``
  and recognises only ``watch=true``), the CRUD/watch handlers (the whole
  metadata, resourceVersion, patch, subresource, finalizer, GC and watch
  semantics below), discovery rendering (``/api/v1`` said groupVersion
  ``/v1``; CRDs were not registered), and the request dispatch (kmock scans
  the whole request history for every request and every reaction, which is
  quadratic; here the built-in behaviour is dispatched directly, the history
  is bounded, and only test-added reactions go through kmock's matching).
  Watch fan-out uses per-watch queues instead of ``kmock.Bus``, so that every
  mutation stays synchronous and therefore atomic in the event loop.

Semantics implemented (see ``tests/test_k8s_emulator.py`` for the proofs):
uid/resourceVersion/creationTimestamp/generation, ``generateName``, namespaces
from the URL, 201 on create, 409 on stale resourceVersions and existing names,
merge/JSON/strategic patches (422 on a failed JSON-patch ``test``), PUT,
status subresources (status writes only via ``/status``; only spec changes
bump ``generation``), finalizers and ``deletionTimestamp``, ownerReference
garbage collection (background, foreground, orphan), namespace and CRD
cascades, CRD registration with discovery (shortNames/categories), printer
column Tables for ``kubectl get``, label/field selectors, ``limit/continue``,
watches with resourceVersion replay, 410 Gone, bookmarks, ``sendInitialEvents``,
``timeoutSeconds`` and selector-transition events, and structural-schema
pruning/defaulting/validation of custom resources.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import concurrent.futures
import contextlib
import copy
import datetime
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import threading
import time
import traceback
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp.test_utils
import aiohttp.web
import aiohttp.web_runner
import aiohttp.web_server
import attrs
import kmock
import yaml

from tests.k8s import _patching, _schema, _selectors, _tables

T = TypeVar("T")
ObjectKey = tuple[kmock.resource, str | None, str]
Subscriber = Callable[[kmock.resource, str, dict[str, Any], dict[str, Any] | None], None]

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
DEFAULT_SERVER_VERSION: dict[str, str] = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-emulated",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
CR_VERBS = ("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")
CRD = kmock.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
NAMESPACES = kmock.resource("", "v1", "namespaces")
PODS = kmock.resource("", "v1", "pods")
NODES = kmock.resource("", "v1", "nodes")
# Non-standard groups of the K3s-made catalogue bundled with kmock.
_DROPPED_GROUPS = frozenset({"gateway.networking.k8s.io", "metrics.k8s.io"})
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


# --------------------------------------------------------------------------------------------
# Errors: kmock.KubernetesError is rendered as a Status object by KubeApiEmulator._render_error.
# --------------------------------------------------------------------------------------------


def api_error(
    status: int,
    reason: str,
    message: str,
    *,
    details: Mapping[str, Any] | None = None,
) -> kmock.KubernetesError:
    """Build an API error as the real server reports it (``reason`` is the StatusReason)."""
    return kmock.KubernetesError(
        status=status, reason=reason, message=message, details=dict(details or {})
    )


def _qualified(res: kmock.resource) -> str:
    return f"{res.plural}.{res.group}" if res.group else str(res.plural)


def not_found(res: kmock.resource, name: str) -> kmock.KubernetesError:
    """404 for a missing object."""
    return api_error(
        404,
        "NotFound",
        f'{_qualified(res)} "{name}" not found',
        details={"name": name, "group": res.group, "kind": res.plural},
    )


def conflict(res: kmock.resource, name: str, why: str) -> kmock.KubernetesError:
    """409 for an optimistic-concurrency conflict."""
    return api_error(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(res)} "{name}": {why}',
        details={"name": name, "group": res.group, "kind": res.plural},
    )


def invalid(kind: str, name: str, causes: Sequence[str]) -> kmock.KubernetesError:
    """422 for a semantically invalid object."""
    return api_error(
        422,
        "Invalid",
        f'{kind} "{name}" is invalid: {"; ".join(causes)}',
        details={"name": name, "kind": kind, "causes": [{"message": c} for c in causes]},
    )


def bad_request(message: str) -> kmock.KubernetesError:
    """400 for a malformed request."""
    return api_error(400, "BadRequest", message)


def now_rfc3339() -> str:
    """The current time in the API server's timestamp format (seconds precision, UTC)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _version_priority(version: str) -> tuple[int, int, int]:
    m = _VERSION_RE.match(version)
    if not m:
        return (-1, 0, 0)
    stability = {"alpha": 0, "beta": 1, None: 2}[m[2]]
    return (stability, int(m[1]), int(m[3] or 0))


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1", "yes", "t", "y", "on")


def _gv(res: kmock.resource) -> str:
    return f"{res.group}/{res.version}" if res.group else str(res.version)


def make_crd(
    *,
    group: str,
    plural: str,
    kind: str,
    versions: Sequence[str] = ("v1",),
    singular: str | None = None,
    short_names: Sequence[str] = (),
    categories: Sequence[str] = (),
    namespaced: bool = True,
    status_subresource: bool = True,
    printer_columns: Sequence[Mapping[str, Any]] = (),
    schema: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build an ``apiextensions.k8s.io/v1`` CustomResourceDefinition body.

    The default schema preserves unknown fields in ``spec`` and ``status``.
    """
    schema = schema or {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    names: dict[str, Any] = {"plural": plural, "kind": kind, "singular": singular or kind.lower()}
    if short_names:
        names["shortNames"] = list(short_names)
    if categories:
        names["categories"] = list(categories)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced" if namespaced else "Cluster",
            "names": names,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": index == 0,
                    "schema": {"openAPIV3Schema": copy.deepcopy(dict(schema))},
                    **({"subresources": {"status": {}}} if status_subresource else {}),
                    **(
                        {"additionalPrinterColumns": [dict(c) for c in printer_columns]}
                        if printer_columns
                        else {}
                    ),
                }
                for index, version in enumerate(versions)
            ],
        },
    }


# --------------------------------------------------------------------------------------------
# Request routing.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """A parsed request path of the Kubernetes API."""

    kind: str  # root|version|health|openapi|api|apis|group|groupversion|resource|unknown
    group: str | None = None
    version: str | None = None
    plural: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    legacy_watch: bool = False

    @property
    def resource(self) -> kmock.resource | None:
        """The kmock resource of a resource route (``None`` for other routes)."""
        if self.kind != "resource":
            return None
        return kmock.resource(self.group, self.version, self.plural)


def parse_route(path: str) -> Route:
    """Parse an API path; unlike kmock 0.8, ``/api/v1/namespaces`` etc. are understood."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return Route("root")
    head = parts[0]
    if head == "version" and len(parts) == 1:
        return Route("version")
    if head in ("healthz", "livez", "readyz"):
        return Route("health")
    if head == "openapi":
        return Route("openapi")
    if head == "api":
        if len(parts) == 1:
            return Route("api")
        group, version, rest = "", parts[1], parts[2:]
    elif head == "apis":
        if len(parts) == 1:
            return Route("apis")
        if len(parts) == 2:
            return Route("group", group=parts[1])
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return Route("unknown")
    if not rest:
        return Route("groupversion", group=group, version=version)
    legacy_watch = rest[0] == "watch"
    if legacy_watch:
        rest = rest[1:]
        if not rest:
            return Route("unknown")
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    return Route(
        "resource",
        group=group,
        version=version,
        plural=rest[0],
        namespace=namespace,
        name=rest[1] if len(rest) > 1 else None,
        subresource="/".join(rest[2:]) or None,
        legacy_watch=legacy_watch,
    )


# --------------------------------------------------------------------------------------------
# Watches.
# --------------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Watcher:
    """One watch stream: its filters and its queue of pre-serialised events."""

    namespace: str | None
    labels: Callable[[Mapping[str, str]], bool]
    fields: _selectors.Matcher
    queue: asyncio.Queue[bytes | None]
    selective: bool

    def matches(self, obj: Mapping[str, Any] | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata", {})
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return self.labels(meta.get("labels") or {}) and self.fields(obj)

    def translate(self, etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> str | None:
        """The event type this watcher must see (selector transitions), or None to skip."""
        now = self.matches(obj)
        if etype != "MODIFIED" or not self.selective:
            return etype if now else None
        before = self.matches(old)
        if now and before:
            return "MODIFIED"
        if now:
            return "ADDED"
        if before:
            return "DELETED"
        return None


def _encode_event(etype: str, obj: Mapping[str, Any]) -> bytes:
    return json.dumps({"type": etype, "object": obj}, separators=(",", ":")).encode() + b"\n"


class _QuickShutdownServer(aiohttp.test_utils.RawTestServer):
    """kmock's default server class, with a short shutdown timeout for open watches."""

    async def _make_runner(
        self, debug: bool = True, **kwargs: Any
    ) -> aiohttp.web_runner.ServerRunner:
        server = aiohttp.web_server.Server(
            self._handler,
            loop=self._loop,
            debug=False,
            handler_cancellation=kwargs.get("handler_cancellation", True),
        )
        return aiohttp.web_runner.ServerRunner(server, shutdown_timeout=0.5)


# --------------------------------------------------------------------------------------------
# The emulator (a kmock handler).
# --------------------------------------------------------------------------------------------


@attrs.define(kw_only=True)
class KubeApiEmulator(kmock.KubernetesEmulator):
    """A kmock ``KubernetesEmulator`` with real-API-server semantics.

    All state lives in the event loop that serves it. The public methods
    (``create_object``, ``patch_object``, ...) are synchronous and must be called
    in that loop; :class:`ApiServer` marshals calls from other threads.
    """

    request_history: int = 1000  # kmock requests kept for DSL assertions (bounded)
    object_history: int = 8  # kmock Object versions kept per object (bounded)
    event_window: int = 20000  # watch events kept per resource for resourceVersion replay
    bookmark_interval: float = 1.0  # seconds between BOOKMARK events (allowWatchBookmarks)
    max_watch_seconds: float = 1800.0  # server-side watch timeout without timeoutSeconds
    auto_create_namespaces: bool = False  # else 404 when creating in a missing namespace
    validate_schemas: bool = True  # prune/default/validate custom resources by their schema
    gc_delay: float = 0.0  # seconds before the garbage collector acts (it is asynchronous)
    strategic_merge_on_custom_resources: bool = True  # False: 415 as on a real server
    server_version: dict[str, str] = attrs.field(factory=lambda: dict(DEFAULT_SERVER_VERSION))

    # Operational state (all O(1)-indexed; nothing scans the request history).
    request_counts: collections.Counter[tuple[str, str]] = attrs.field(
        factory=collections.Counter, init=False
    )
    internal_errors: list[str] = attrs.field(factory=list, init=False)
    _rv: int = attrs.field(default=1000, init=False)
    _live: dict[kmock.resource, dict[tuple[str | None, str], kmock.Object]] = attrs.field(
        factory=dict, init=False
    )
    _uids: dict[str, ObjectKey] = attrs.field(factory=dict, init=False)
    _dependents: dict[str, set[ObjectKey]] = attrs.field(factory=dict, init=False)
    _logs: dict[
        kmock.resource, collections.deque[tuple[int, str, dict[str, Any], dict[str, Any] | None]]
    ] = attrs.field(factory=dict, init=False)
    _evicted: dict[kmock.resource, int] = attrs.field(factory=dict, init=False)
    _watchers: dict[kmock.resource, set[_Watcher]] = attrs.field(factory=dict, init=False)
    _subscribers: list[Subscriber] = attrs.field(factory=list, init=False)
    _printer_columns: dict[kmock.resource, list[dict[str, Any]]] = attrs.field(
        factory=dict, init=False
    )
    _schemas: dict[kmock.resource, dict[str, Any] | None] = attrs.field(factory=dict, init=False)
    _crd_of: dict[kmock.resource, str] = attrs.field(factory=dict, init=False)
    _kubelets: dict[str, Any] = attrs.field(factory=dict, init=False)
    _loop: asyncio.AbstractEventLoop | None = attrs.field(default=None, init=False)
    _served: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        # kmock's default reactions (its stateless discovery and its CRUD) are replaced by
        # _dispatch(); whatever is left in _payloads afterwards was added by the tests.
        self._payloads.clear()
        with warnings.catch_warnings():  # kmock 0.8 uses the deprecated importlib.resources API
            warnings.simplefilter("ignore", DeprecationWarning)
            self.resources.load_bundled()
        for res in list(self.resources):
            if res.group in _DROPPED_GROUPS:
                del self.resources[res]
        for res in self.resources:
            info = self.resources[res]
            if not info.singular:
                info.singular = (info.kind or str(res.plural)).lower()
        for name in DEFAULT_NAMESPACES:
            self.create_object(NAMESPACES, {"metadata": {"name": name}})

    # ----------------------------------------------------------------------------------------
    # Plumbing: loop attachment, deferred actions, subscriptions.
    # ----------------------------------------------------------------------------------------

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bind to the serving loop (deferred GC and in-process callbacks run there).

        On a re-attachment (a restarted server), the controllers catch up: timers and
        deferred actions of the previous loop are gone, so kubelets resume their pods
        and the garbage collector sweeps everything once.
        """
        restarted = self._loop is not None
        self._loop = loop
        if restarted:
            for kubelet in list(self._kubelets.values()):
                self._defer(kubelet.resume)
            self._defer(self.sweep)

    def sweep(self) -> None:
        """Run every controller once over all objects (GC, foreground, namespace, CRD)."""
        for res, objs in list(self._live.items()):
            for (namespace, name), holder in list(objs.items()):
                meta = holder.last.raw["metadata"]
                if meta.get("ownerReferences"):
                    self._safely(
                        lambda r=res, ns=namespace, n=name: self._collect_dangling(r, ns, n)
                    )
                if "foregroundDeletion" in (meta.get("finalizers") or []):
                    self._safely(
                        lambda r=res, ns=namespace, n=name: self._reconcile_foreground(r, ns, n)
                    )
                if meta.get("deletionTimestamp") and res == NAMESPACES:
                    self._safely(lambda n=name: self._reconcile_namespace(n))
                if meta.get("deletionTimestamp") and res == CRD:
                    self._safely(lambda n=name: self._reconcile_crd(n))

    def _defer(self, fn: Callable[[], Any], delay: float = 0.0) -> None:
        if self._loop is None:
            self._safely(fn)
        elif delay > 0:
            self._loop.call_later(delay, self._safely, fn)
        else:
            self._loop.call_soon(self._safely, fn)

    def _safely(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except kmock.KubernetesError:
            pass  # e.g. a GC target deleted meanwhile: exactly what a real controller ignores
        except Exception:
            self.internal_errors.append(traceback.format_exc())

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(resource, event_type, obj, old)`` (in the loop) after every change."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def shutdown_watches(self) -> None:
        """End every open watch stream (before the server stops)."""
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.queue.put_nowait(None)

    @property
    def resource_version(self) -> str:
        """The current (global, etcd-like) resourceVersion."""
        return str(self._rv)

    # ----------------------------------------------------------------------------------------
    # Resource registry (kmock.ResourcesArray) and lookups.
    # ----------------------------------------------------------------------------------------

    def resolve(self, spec: str | kmock.resource) -> kmock.resource:
        """Find a registered resource by ``'v1/pods'``, ``'pods'``, a short name, kind, etc."""
        if isinstance(spec, kmock.resource) and spec in self.resources:
            return spec
        text = spec if isinstance(spec, str) else None
        pattern = kmock.resource(spec)
        candidates = [res for res in self.resources if pattern.check(res)]
        if not candidates and text is not None:
            lowered = text.lower()
            candidates = [
                res
                for res in self.resources
                if lowered in {s.lower() for s in self.resources[res].shortnames}
                or lowered == (self.resources[res].kind or "").lower()
                or lowered == (self.resources[res].singular or "").lower()
            ]
        if not candidates:
            raise LookupError(f"the server doesn't have a resource type {spec!r}")
        return max(candidates, key=lambda r: (r.group == "", _version_priority(str(r.version))))

    def _info(self, res: kmock.resource) -> kmock.ResourceInfo:
        if res not in self.resources:
            raise api_error(404, "NotFound", "the server could not find the requested resource")
        return self.resources[res]

    def _register_resource(self, res: kmock.resource, info: kmock.ResourceInfo) -> None:
        self.resources[res] = info

    # ----------------------------------------------------------------------------------------
    # Storage (kmock.ObjectsArray) with O(1) indexes.
    # ----------------------------------------------------------------------------------------

    def _holder(self, res: kmock.resource, namespace: str | None, name: str) -> kmock.Object | None:
        return self._live.get(res, {}).get((namespace, name))

    def _current(self, res: kmock.resource, namespace: str | None, name: str) -> dict[str, Any]:
        holder = self._holder(res, namespace, name)
        if holder is None:
            raise not_found(res, name)
        return holder.last.raw

    def _store(self, res: kmock.resource, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = obj["metadata"]
        key: ObjectKey = (res, meta.get("namespace"), meta["name"])
        holder = self._holder(res, key[1], key[2])
        if holder is None:
            if key in self._objects:  # soft-deleted earlier: continue its kmock history
                holder = self._objects[key]
                holder.create(obj)
            else:
                self._objects[key] = obj
                holder = self._objects[key]
            self._live.setdefault(res, {})[(key[1], key[2])] = holder
        else:
            holder.history.append(obj)
        if len(holder.history) > 2 * self.object_history:
            del holder.history[: -self.object_history]
        if old is not None:
            self._unindex_owners(key, old)
        self._uids[meta["uid"]] = key
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("uid"):
                self._dependents.setdefault(ref["uid"], set()).add(key)

    def _unindex_owners(self, key: ObjectKey, obj: Mapping[str, Any]) -> None:
        for ref in obj.get("metadata", {}).get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("uid") in self._dependents:
                self._dependents[ref["uid"]].discard(key)
                if not self._dependents[ref["uid"]]:
                    del self._dependents[ref["uid"]]

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _emit(
        self, res: kmock.resource, etype: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        log = self._logs.get(res)
        if log is None:
            log = self._logs[res] = collections.deque(maxlen=self.event_window)
        if len(log) == log.maxlen:
            self._evicted[res] = log[0][0]
        log.append((rv, etype, obj, old))
        watchers = self._watchers.get(res)
        if watchers:
            shared: bytes | None = None
            for watcher in watchers:
                visible = watcher.translate(etype, obj, old)
                if visible == etype:
                    shared = shared or _encode_event(etype, obj)
                    watcher.queue.put_nowait(shared)
                elif visible is not None:
                    watcher.queue.put_nowait(_encode_event(visible, obj))
        for subscriber in list(self._subscribers):
            self._defer(lambda s=subscriber: s(res, etype, obj, old))

    # ----------------------------------------------------------------------------------------
    # Public in-process API (synchronous; call in the serving loop).
    # ----------------------------------------------------------------------------------------

    def get_object(
        self, res: str | kmock.resource, namespace: str | None, name: str
    ) -> dict[str, Any]:
        """Return a deep copy of an object; raises a 404 ``KubernetesError`` if absent."""
        res = self.resolve(res)
        return copy.deepcopy(self._current(res, namespace, name))

    def list_objects(
        self,
        res: str | kmock.resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Return deep copies of the matching objects, sorted by namespace and name."""
        res = self.resolve(res)
        return [
            copy.deepcopy(o) for o in self._select(res, namespace, label_selector, field_selector)
        ]

    def _select(
        self,
        res: kmock.resource,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
    ) -> list[dict[str, Any]]:
        try:
            labels = _selectors.parse_label_selector(label_selector)
            fields = _selectors.parse_field_selector(field_selector)
        except _selectors.SelectorError as e:
            raise bad_request(str(e)) from e
        result = []
        for (ns, _), holder in sorted(
            self._live.get(res, {}).items(), key=lambda kv: (kv[0][0] or "", kv[0][1])
        ):
            if namespace is not None and ns != namespace:
                continue
            obj = holder.last.raw
            if labels(obj.get("metadata", {}).get("labels") or {}) and fields(obj):
                result.append(obj)
        return result

    def create_object(
        self, res: str | kmock.resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        """Create an object as ``POST`` does; returns the stored object."""
        res = self.resolve(res)
        info = self._info(res)
        if not isinstance(body, Mapping):
            raise bad_request("the body of the request must be a JSON object")
        obj: dict[str, Any] = copy.deepcopy(dict(body))
        self._check_type(res, info, obj)
        obj = {"apiVersion": obj.pop("apiVersion"), "kind": obj.pop("kind"), **obj}
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if info.namespaced:
            if namespace and meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the "
                    "namespace sent on the request"
                )
            namespace = namespace or meta.get("namespace") or "default"
            meta["namespace"] = namespace
            self._check_namespace_writable(namespace)
        else:
            meta.pop("namespace", None)
            namespace = None
        if res in self._crd_of:
            crd = self._holder(CRD, None, self._crd_of[res])
            if crd is not None and crd.last.raw["metadata"].get("deletionTimestamp"):
                raise api_error(
                    405,
                    "MethodNotAllowed",
                    "create not allowed while custom resource definition is terminating",
                )
        if meta.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        name = meta.get("name")
        if not name:
            prefix = meta.get("generateName")
            if not prefix:
                raise invalid(
                    str(info.kind),
                    "",
                    ["metadata.name: Required value: name or generateName is required"],
                )
            for _ in range(100):
                name = prefix + "".join(random.choices(_GENERATE_ALPHABET, k=5))
                if self._holder(res, namespace, name) is None:
                    break
            meta["name"] = name
        self._validate_name(res, info, name)
        if self._holder(res, namespace, name) is not None:
            raise api_error(
                409,
                "AlreadyExists",
                f'{_qualified(res)} "{name}" already exists',
                details={"name": name, "group": res.group, "kind": res.plural},
            )
        for field in (
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "managedFields",
        ):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        self._validate_metadata(info, obj, None)
        if "status" in info.subresources:
            obj.pop("status", None)
        self._on_create(res, info, obj)
        self._apply_schema(res, info, obj)
        meta["resourceVersion"] = self._next_rv()
        self._store(res, obj, None)
        self._emit(res, "ADDED", obj, None)
        if meta.get("ownerReferences"):
            self._defer(lambda: self._collect_dangling(res, namespace, name), self.gc_delay)
        return copy.deepcopy(obj)

    def replace_object(
        self,
        res: str | kmock.resource,
        namespace: str | None,
        name: str,
        body: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Replace an object (or its status) as ``PUT`` does."""
        res = self.resolve(res)
        info = self._info(res)
        if not isinstance(body, Mapping):
            raise bad_request("the body of the request must be a JSON object")
        if res in self._crd_of and not (body.get("metadata") or {}).get("resourceVersion"):
            raise invalid(
                str(info.kind),
                name,
                ["metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"],
            )
        return self._update(
            res, namespace, name, lambda _: copy.deepcopy(dict(body)), subresource=subresource
        )

    def patch_object(
        self,
        res: str | kmock.resource,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Patch an object as ``PATCH`` does: ``patch_type`` is merge, json or strategic."""
        res = self.resolve(res)
        if patch_type not in ("merge", "json", "strategic"):
            raise api_error(415, "UnsupportedMediaType", f"unsupported patch type {patch_type!r}")
        if patch_type != "json" and not isinstance(patch, Mapping):
            raise bad_request(f"a {patch_type} patch must be a JSON object")
        if patch_type == "strategic" and res in self._crd_of:
            if not self.strategic_merge_on_custom_resources:
                raise api_error(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an "
                    "unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, "
                    "application/apply-patch+yaml",
                )
            patch_type = "merge"  # treated as a merge patch for custom resources

        def patched(cur: dict[str, Any]) -> Any:
            if patch_type == "merge":
                return _patching.merge_patch(cur, patch)
            if patch_type == "json":
                return _patching.json_patch(cur, patch)
            return _patching.strategic_merge_patch(cur, patch)

        return self._update(res, namespace, name, patched, subresource=subresource)

    def delete_object(
        self,
        res: str | kmock.resource,
        namespace: str | None,
        name: str,
        *,
        propagation: str | None = None,
        grace_period: int | None = None,
        preconditions: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Delete as ``DELETE`` does; returns the object (possibly still terminating)."""
        res = self.resolve(res)
        info = self._info(res)
        current = copy.deepcopy(self._current(res, namespace, name))
        meta = current["metadata"]
        for field in ("uid", "resourceVersion"):
            wanted = (preconditions or {}).get(field)
            if wanted and wanted != meta.get(field):
                raise conflict(
                    res,
                    name,
                    f"Precondition failed: {field} in precondition: "
                    f"{wanted}, {field} in object meta: {meta.get(field)}",
                )
        propagation = propagation or "Background"
        if propagation not in ("Background", "Foreground", "Orphan"):
            raise bad_request(f"unsupported propagationPolicy {propagation!r}")
        if res in (NAMESPACES, CRD):
            return self._start_cascade(res, info, current)
        if propagation == "Orphan":
            self._orphan_dependents(meta["uid"])
        finalizers = list(meta.get("finalizers") or [])
        if (
            propagation == "Foreground"
            and "foregroundDeletion" not in finalizers
            and self._dependents.get(meta["uid"])
        ):
            finalizers.append("foregroundDeletion")
        if res == PODS and self._is_graceful(current, grace_period) and not finalizers:
            if meta.get("deletionTimestamp"):
                return current
            grace = (
                grace_period
                if grace_period is not None
                else int(current.get("spec", {}).get("terminationGracePeriodSeconds", 30))
            )
            meta["deletionTimestamp"] = now_rfc3339()
            meta["deletionGracePeriodSeconds"] = grace
            return self._commit(res, current, self._current(res, namespace, name))
        if finalizers:
            if meta.get("deletionTimestamp") and finalizers == meta.get("finalizers"):
                return current
            meta.setdefault("deletionTimestamp", now_rfc3339())
            meta.setdefault("deletionGracePeriodSeconds", 0)
            meta["finalizers"] = finalizers
            meta["generation"] = int(meta.get("generation", 1)) + 1
            result = self._commit(res, current, self._current(res, namespace, name))
            if "foregroundDeletion" in finalizers:
                self._defer(lambda: self._reconcile_foreground(res, namespace, name), self.gc_delay)
            return result
        return self._remove(res, current, orphaned=propagation == "Orphan")

    def bind_pod(self, namespace: str, name: str, node: str) -> dict[str, Any]:
        """Bind a pod to a node (the ``pods/binding`` subresource, as the scheduler does)."""
        pod = self._current(PODS, namespace, name)
        if pod.get("spec", {}).get("nodeName"):
            raise conflict(
                PODS, name, f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
            )
        if pod.get("spec", {}).get("schedulingGates"):
            raise invalid(
                "Pod",
                name,
                [
                    "spec.nodeName: Forbidden: cannot be set until all "
                    "schedulingGates have been cleared"
                ],
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise conflict(PODS, name, "pod is being deleted, cannot be assigned to a host")

        def bound(cur: dict[str, Any]) -> dict[str, Any]:
            cur["spec"]["nodeName"] = node
            status = cur.setdefault("status", {})
            conditions = [
                c for c in status.get("conditions", []) if c.get("type") != "PodScheduled"
            ]
            conditions.insert(
                0,
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": now_rfc3339(),
                },
            )
            status["conditions"] = conditions
            return cur

        return self._update(PODS, namespace, name, bound, subresource=None, internal=True)

    # ----------------------------------------------------------------------------------------
    # Write internals.
    # ----------------------------------------------------------------------------------------

    def _check_type(
        self, res: kmock.resource, info: kmock.ResourceInfo, obj: dict[str, Any]
    ) -> None:
        api_version, kind = _gv(res), str(info.kind)
        if obj.get("apiVersion") not in (None, "", api_version):
            raise bad_request(
                f"the API version in the data ({obj['apiVersion']}) does not match "
                f"the expected API version ({api_version})"
            )
        if obj.get("kind") not in (None, "", kind):
            raise bad_request(
                f"the kind in the data ({obj['kind']}) does not match the expected kind ({kind})"
            )
        obj["apiVersion"] = api_version
        obj["kind"] = kind

    def _check_namespace_writable(self, namespace: str) -> None:
        ns = self._holder(NAMESPACES, None, namespace)
        if ns is None:
            if not self.auto_create_namespaces:
                raise not_found(NAMESPACES, namespace)
            self.create_object(NAMESPACES, {"metadata": {"name": namespace}})
        elif ns.last.raw["metadata"].get("deletionTimestamp"):
            raise api_error(
                403,
                "Forbidden",
                f"unable to create new content in namespace "
                f"{namespace} because it is being terminated",
            )

    def _validate_name(self, res: kmock.resource, info: kmock.ResourceInfo, name: str) -> None:
        pattern = _LABEL_RE if res == NAMESPACES else _NAME_RE
        limit = 63 if res == NAMESPACES else 253
        if not isinstance(name, str) or len(name) > limit or not pattern.match(name):
            raise invalid(
                str(info.kind),
                str(name),
                [
                    f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 "
                    f"{'label' if res == NAMESPACES else 'subdomain'} must consist of lower case "
                    "alphanumeric characters, '-' or '.'"
                ],
            )

    def _validate_metadata(
        self, info: kmock.ResourceInfo, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        meta = obj["metadata"]
        name = meta.get("name", "")
        causes: list[str] = []
        for field in ("labels", "annotations"):
            values = meta.get(field)
            if values is None:
                continue
            if not isinstance(values, dict):
                causes.append(f"metadata.{field}: Invalid value: must be a map of strings")
                continue
            for key, value in values.items():
                if not isinstance(value, str):
                    causes.append(
                        f"metadata.{field}.{key}: Invalid value: {value!r}: must be a string"
                    )
                elif not _QUALIFIED_NAME_RE.match(key) or len(key.split("/")[-1]) > 63:
                    causes.append(
                        f"metadata.{field}: Invalid value: {key!r}: name part must "
                        "consist of alphanumeric characters, '-', '_' or '.'"
                    )
                elif field == "labels" and (len(value) > 63 or not _LABEL_VALUE_RE.match(value)):
                    causes.append(
                        f"metadata.labels: Invalid value: {value!r}: a valid label "
                        "must be an empty string or consist of alphanumeric "
                        "characters, '-', '_' or '.'"
                    )
        finalizers = meta.get("finalizers")
        if finalizers is not None:
            if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
                causes.append("metadata.finalizers: Invalid value: must be a list of strings")
            elif old is not None and old["metadata"].get("deletionTimestamp"):
                new = set(finalizers) - set(old["metadata"].get("finalizers") or [])
                if new:
                    causes.append(
                        f"metadata.finalizers: Forbidden: no new finalizers can be "
                        f"added if the object is being deleted, found new finalizers "
                        f"{sorted(new)!r}"
                    )
        for ref in meta.get("ownerReferences") or []:
            if not isinstance(ref, dict) or not all(
                ref.get(k) for k in ("apiVersion", "kind", "name", "uid")
            ):
                causes.append(
                    "metadata.ownerReferences: Invalid value: apiVersion, kind, name "
                    "and uid are required"
                )
        if causes:
            raise invalid(str(info.kind), name, causes)

    def _apply_schema(
        self, res: kmock.resource, info: kmock.ResourceInfo, obj: dict[str, Any]
    ) -> None:
        if not self.validate_schemas or res not in self._schemas:
            return
        schema = self._schemas[res]
        _schema.apply_defaults(obj, schema)
        _schema.prune(obj, schema, root=True)
        errors = _schema.validate(obj, schema)
        if errors:
            raise invalid(str(info.kind), obj["metadata"].get("name", ""), errors)

    def _on_create(
        self, res: kmock.resource, info: kmock.ResourceInfo, obj: dict[str, Any]
    ) -> None:
        meta = obj["metadata"]
        if res == NAMESPACES:
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        elif res == PODS:
            self._prepare_pod(obj)
        elif res == CRD:
            self._prepare_crd(obj)

    def _prepare_pod(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        spec = pod.setdefault("spec", {})
        containers = spec.get("containers")
        causes = []
        if not isinstance(containers, list) or not containers:
            causes.append("spec.containers: Required value")
        else:
            for i, c in enumerate(containers):
                if not isinstance(c, dict) or not c.get("name"):
                    causes.append(f"spec.containers[{i}].name: Required value")
                elif not c.get("image"):
                    causes.append(f"spec.containers[{i}].image: Required value")
                else:
                    c.setdefault(
                        "imagePullPolicy",
                        "Always"
                        if c["image"].endswith(":latest") or ":" not in c["image"]
                        else "IfNotPresent",
                    )
                    c.setdefault("terminationMessagePath", "/dev/termination-log")
                    c.setdefault("terminationMessagePolicy", "File")
                    c.setdefault("resources", {})
        gates = spec.get("schedulingGates") or []
        if gates and spec.get("nodeName"):
            causes.append(
                "spec.nodeName: Forbidden: cannot be set until all schedulingGates "
                "have been cleared"
            )
        if not all(isinstance(g, dict) and g.get("name") for g in gates):
            causes.append("spec.schedulingGates: Invalid value: every gate needs a name")
        if spec.get("restartPolicy", "Always") not in ("Always", "OnFailure", "Never"):
            causes.append("spec.restartPolicy: Unsupported value")
        if causes:
            raise invalid("Pod", name, causes)
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("priority", 0)
        spec.setdefault("enableServiceLinks", True)
        status: dict[str, Any] = {"phase": "Pending", "qosClass": "BestEffort"}
        if gates:
            status["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                    "lastProbeTime": None,
                    "lastTransitionTime": now_rfc3339(),
                }
            ]
        pod["status"] = status

    def _check_pod_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        name = old["metadata"]["name"]
        old_spec, new_spec = old.get("spec", {}), new.get("spec", {})
        old_gates = {g.get("name") for g in old_spec.get("schedulingGates") or []}
        added = [
            g.get("name")
            for g in new_spec.get("schedulingGates") or []
            if g.get("name") not in old_gates
        ]
        if added:
            raise invalid(
                "Pod",
                name,
                [
                    f"spec.schedulingGates: Forbidden: only deletion is "
                    f"allowed, but found new scheduling gate '{added[0]}'"
                ],
            )

        def mutable_stripped(spec: Mapping[str, Any]) -> dict[str, Any]:
            spec = copy.deepcopy(dict(spec))
            for field in (
                "activeDeadlineSeconds",
                "tolerations",
                "terminationGracePeriodSeconds",
                "schedulingGates",
            ):
                spec.pop(field, None)
            for field in ("containers", "initContainers"):
                for container in spec.get(field) or []:
                    container.pop("image", None)
            return spec

        if mutable_stripped(old_spec) != mutable_stripped(new_spec):
            raise invalid(
                "Pod",
                name,
                [
                    "spec: Forbidden: pod updates may not change fields other than "
                    "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                    "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing "
                    "tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 "
                    "if it was previously negative) or removal of `spec.schedulingGates`"
                ],
            )

    def _update(
        self,
        res: kmock.resource,
        namespace: str | None,
        name: str,
        compute: Callable[[dict[str, Any]], Any],
        *,
        subresource: str | None,
        internal: bool = False,
    ) -> dict[str, Any]:
        info = self._info(res)
        if subresource not in (None, "status"):
            raise api_error(404, "NotFound", "the server could not find the requested resource")
        if subresource == "status" and "status" not in info.subresources:
            raise api_error(404, "NotFound", "the server could not find the requested resource")
        stored = self._current(res, namespace, name)
        current = copy.deepcopy(stored)
        try:
            new = compute(copy.deepcopy(current))
        except _patching.PatchMalformed as e:
            raise bad_request(str(e)) from e
        except _patching.PatchFailed as e:
            raise api_error(422, "Invalid", str(e)) from e
        if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
            raise bad_request("the object must be a JSON object with an object in metadata")
        new_meta = new.setdefault("metadata", {})
        meta = current["metadata"]
        if (
            new_meta.get("resourceVersion")
            and new_meta["resourceVersion"] != meta["resourceVersion"]
        ):
            raise conflict(
                res,
                name,
                "the object has been modified; please apply your changes "
                "to the latest version and try again",
            )
        if new_meta.get("name", name) != name:
            raise bad_request(
                f"the name of the object ({new_meta['name']}) does not match the "
                f"name on the URL ({name})"
            )
        if info.namespaced and new_meta.get("namespace", namespace) != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the "
                "namespace sent on the request"
            )
        self._check_type(res, info, new)
        if subresource == "status":
            merged = copy.deepcopy(current)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            new, new_meta = merged, merged["metadata"]
        else:
            if "status" in info.subresources and not internal:
                if "status" in current:
                    new["status"] = copy.deepcopy(current["status"])
                else:
                    new.pop("status", None)
            for field in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if field in meta:
                    new_meta[field] = meta[field]
                else:
                    new_meta.pop(field, None)
            new_meta["name"] = name
            if info.namespaced:
                new_meta["namespace"] = namespace
            else:
                new_meta.pop("namespace", None)
            self._validate_metadata(info, new, current)
            if res == PODS and not internal:
                self._check_pod_update(current, new)
            if res == CRD:
                self._prepare_crd(new, old=current)
        self._apply_schema(res, info, new)
        new_meta["resourceVersion"] = meta["resourceVersion"]
        if new == current:
            return current  # a no-op: no new resourceVersion, no watch event
        ignored = {"metadata"} | ({"status"} if "status" in info.subresources else set())
        if {k: v for k, v in new.items() if k not in ignored} != {
            k: v for k, v in current.items() if k not in ignored
        }:
            new_meta["generation"] = int(meta.get("generation", 1)) + 1
        finalized = new_meta.get("deletionTimestamp") and not new_meta.get("finalizers")
        if finalized and res not in (NAMESPACES, CRD):
            return self._remove(res, new, orphaned=False)
        result = self._commit(res, new, stored)
        if new_meta.get("ownerReferences") != meta.get("ownerReferences"):
            self._defer(lambda: self._collect_dangling(res, namespace, name), self.gc_delay)
        if new_meta.get("deletionTimestamp"):
            self._after_finalizer_change(res, new)
        return result

    def _commit(
        self, res: kmock.resource, new: dict[str, Any], old: dict[str, Any]
    ) -> dict[str, Any]:
        new["metadata"]["resourceVersion"] = self._next_rv()
        self._store(res, new, old)
        self._emit(res, "MODIFIED", new, old)
        return copy.deepcopy(new)

    def _remove(
        self, res: kmock.resource, obj: dict[str, Any], *, orphaned: bool
    ) -> dict[str, Any]:
        meta = obj["metadata"]
        namespace, name = meta.get("namespace"), meta["name"]
        key: ObjectKey = (res, namespace, name)
        holder = self._live[res].pop((namespace, name))
        meta["resourceVersion"] = self._next_rv()
        holder.history.append(obj)
        holder.delete()  # kmock's soft-deletion: the history stays available for assertions
        self._uids.pop(meta["uid"], None)
        self._unindex_owners(key, obj)
        self._emit(res, "DELETED", obj, None)
        if not orphaned and meta["uid"] in self._dependents:
            self._defer(lambda: self._collect_dependents(meta["uid"]), self.gc_delay)
        for ref in meta.get("ownerReferences") or []:
            owner_key = self._uids.get(ref.get("uid", ""))
            if owner_key is not None:
                self._defer(lambda k=owner_key: self._reconcile_foreground(*k), self.gc_delay)
        if namespace is not None:
            ns = self._holder(NAMESPACES, None, namespace)
            if ns is not None and ns.last.raw["metadata"].get("deletionTimestamp"):
                self._defer(lambda: self._reconcile_namespace(namespace))
        if res in self._crd_of:
            self._defer(lambda: self._reconcile_crd(self._crd_of.get(res, "")))
        if res == CRD:
            self._unregister_crd(obj)
        return copy.deepcopy(obj)

    def _is_graceful(self, pod: Mapping[str, Any], grace_period: int | None) -> bool:
        node = pod.get("spec", {}).get("nodeName")
        phase = pod.get("status", {}).get("phase")
        return bool(
            node
            and node in self._kubelets
            and grace_period != 0
            and phase not in ("Succeeded", "Failed")
        )

    # ----------------------------------------------------------------------------------------
    # Garbage collection and cascades (asynchronous, like the real controllers).
    # ----------------------------------------------------------------------------------------

    def _owner_alive(self, ref: Mapping[str, Any], namespace: str | None) -> bool:
        key = self._uids.get(ref.get("uid", ""))
        if key is None or key[2] != ref.get("name"):
            return False
        owner_namespace = key[1]
        return owner_namespace is None or owner_namespace == namespace

    def _drop_owner_refs(
        self,
        res: kmock.resource,
        namespace: str | None,
        name: str,
        keep: Callable[[Mapping[str, Any]], bool],
    ) -> None:
        def dropped(cur: dict[str, Any]) -> dict[str, Any]:
            refs = [r for r in cur["metadata"].get("ownerReferences") or [] if keep(r)]
            if refs:
                cur["metadata"]["ownerReferences"] = refs
            else:
                cur["metadata"].pop("ownerReferences", None)
            return cur

        self._update(res, namespace, name, dropped, subresource=None, internal=True)

    def _collect_dangling(self, res: kmock.resource, namespace: str | None, name: str) -> None:
        holder = self._holder(res, namespace, name)
        if holder is None:
            return
        refs = holder.last.raw["metadata"].get("ownerReferences") or []
        alive = [r for r in refs if self._owner_alive(r, namespace)]
        if refs and not alive:
            if not holder.last.raw["metadata"].get("deletionTimestamp"):
                self.delete_object(res, namespace, name)
        elif len(alive) != len(refs):
            self._drop_owner_refs(res, namespace, name, lambda r: self._owner_alive(r, namespace))

    def _collect_dependents(self, owner_uid: str) -> None:
        for res, namespace, name in sorted(
            self._dependents.pop(owner_uid, set()), key=lambda k: (str(k[0]), k[1] or "", k[2])
        ):
            self._collect_dangling(res, namespace, name)

    def _orphan_dependents(self, owner_uid: str) -> None:
        for res, namespace, name in list(self._dependents.get(owner_uid, set())):
            if self._holder(res, namespace, name) is not None:
                self._drop_owner_refs(res, namespace, name, lambda r: r.get("uid") != owner_uid)

    def _reconcile_foreground(self, res: kmock.resource, namespace: str | None, name: str) -> None:
        holder = self._holder(res, namespace, name)
        if holder is None:
            return
        owner = holder.last.raw
        if "foregroundDeletion" not in (owner["metadata"].get("finalizers") or []):
            return
        dependents = [
            k
            for k in self._dependents.get(owner["metadata"]["uid"], set())
            if self._holder(*k) is not None
        ]
        if dependents:
            for dep in dependents:
                if not self._holder(*dep).last.raw["metadata"].get("deletionTimestamp"):
                    self.delete_object(dep[0], dep[1], dep[2], propagation="Foreground")
            return

        def released(cur: dict[str, Any]) -> dict[str, Any]:
            cur["metadata"]["finalizers"] = [
                f for f in cur["metadata"].get("finalizers", []) if f != "foregroundDeletion"
            ]
            return cur

        self._update(res, namespace, name, released, subresource=None, internal=True)

    def _start_cascade(
        self, res: kmock.resource, info: kmock.ResourceInfo, current: dict[str, Any]
    ) -> dict[str, Any]:
        meta = current["metadata"]
        if meta.get("deletionTimestamp"):
            return current
        meta["deletionTimestamp"] = now_rfc3339()
        meta["deletionGracePeriodSeconds"] = 0
        if res == NAMESPACES:
            current.setdefault("status", {})["phase"] = "Terminating"
            result = self._commit(res, current, self._current(res, None, meta["name"]))
            self._defer(lambda: self._reconcile_namespace(meta["name"]))
        else:
            meta["finalizers"] = [
                *(meta.get("finalizers") or []),
                "customresourcecleanup.apiextensions.k8s.io",
            ]
            result = self._commit(res, current, self._current(res, None, meta["name"]))
            self._defer(lambda: self._reconcile_crd(meta["name"]))
        return result

    def _after_finalizer_change(self, res: kmock.resource, obj: dict[str, Any]) -> None:
        if res == NAMESPACES:
            self._defer(lambda: self._reconcile_namespace(obj["metadata"]["name"]))
        elif res == CRD:
            self._defer(lambda: self._reconcile_crd(obj["metadata"]["name"]))

    def _reconcile_namespace(self, namespace: str) -> None:
        holder = self._holder(NAMESPACES, None, namespace)
        if holder is None or not holder.last.raw["metadata"].get("deletionTimestamp"):
            return
        remaining = [
            (res, ns, name)
            for res, objs in self._live.items()
            for (ns, name) in objs
            if ns == namespace
        ]
        for res, ns, name in remaining:
            if not self._holder(res, ns, name).last.raw["metadata"].get("deletionTimestamp"):
                self.delete_object(res, ns, name, grace_period=0)
        remaining = [1 for objs in self._live.values() for (ns, _) in objs if ns == namespace]
        if not remaining and not holder.last.raw["metadata"].get("finalizers"):
            self._remove(NAMESPACES, copy.deepcopy(holder.last.raw), orphaned=False)

    def _reconcile_crd(self, crd_name: str) -> None:
        holder = self._holder(CRD, None, crd_name)
        if holder is None or not holder.last.raw["metadata"].get("deletionTimestamp"):
            return
        served = [res for res, owner in self._crd_of.items() if owner == crd_name]
        remaining = [(res, ns, name) for res in served for (ns, name) in self._live.get(res, {})]
        for res, ns, name in remaining:
            if not self._holder(res, ns, name).last.raw["metadata"].get("deletionTimestamp"):
                self.delete_object(res, ns, name)
        if any(self._live.get(res) for res in served):
            return
        crd = copy.deepcopy(holder.last.raw)
        crd["metadata"]["finalizers"] = [
            f
            for f in crd["metadata"].get("finalizers", [])
            if f != "customresourcecleanup.apiextensions.k8s.io"
        ]
        if crd["metadata"]["finalizers"]:
            self._commit(CRD, crd, holder.last.raw)
        else:
            self._remove(CRD, crd, orphaned=False)

    # ----------------------------------------------------------------------------------------
    # CustomResourceDefinitions.
    # ----------------------------------------------------------------------------------------

    def _prepare_crd(self, crd: dict[str, Any], old: dict[str, Any] | None = None) -> None:
        name = crd["metadata"]["name"]
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
        causes = []
        if not group:
            causes.append("spec.group: Required value")
        if not plural:
            causes.append("spec.names.plural: Required value")
        if not kind:
            causes.append("spec.names.kind: Required value")
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            causes.append("spec.scope: Unsupported value: must be Namespaced or Cluster")
        versions = spec.get("versions") or []
        if not versions or sum(1 for v in versions if v.get("storage")) != 1:
            causes.append(
                "spec.versions: Invalid value: must have exactly one version marked "
                "as storage version"
            )
        for i, version in enumerate(versions):
            if not (version.get("schema") or {}).get("openAPIV3Schema"):
                causes.append(
                    f"spec.versions[{i}].schema.openAPIV3Schema: Required value: "
                    "schemas are required"
                )
        if group and plural and name != f"{plural}.{group}":
            causes.append(
                f'metadata.name: Invalid value: {name!r}: must be spec.names.plural+"."+spec.group'
            )
        if old is not None and old.get("spec", {}).get("group") not in (None, group):
            causes.append("spec.group: Invalid value: field is immutable")
        if causes:
            raise invalid("CustomResourceDefinition", name, causes)
        accepted = {"singular": kind.lower(), **copy.deepcopy(names)}
        crd["status"] = {
            "acceptedNames": accepted,
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": now_rfc3339(),
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": now_rfc3339(),
                },
            ],
            "storedVersions": sorted(
                {
                    *((old or {}).get("status", {}).get("storedVersions", [])),
                    *[v["name"] for v in versions if v.get("storage")],
                }
            ),
        }
        if old is not None and old["metadata"].get("deletionTimestamp"):
            crd["status"]["conditions"].append(
                {"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress"}
            )
        self._register_crd(crd, old)

    def _register_crd(self, crd: dict[str, Any], old: dict[str, Any] | None) -> None:
        if old is not None:
            self._unregister_crd(old, keep_objects=True)
        spec = crd["spec"]
        names = spec["names"]
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            res = kmock.resource(spec["group"], version["name"], names["plural"])
            subresources = set()
            if "status" in (version.get("subresources") or {}):
                subresources.add("status")
            if "scale" in (version.get("subresources") or {}):
                subresources.add("scale")
            self._register_resource(
                res,
                kmock.ResourceInfo(
                    namespaced=spec["scope"] == "Namespaced",
                    kind=names["kind"],
                    singular=names.get("singular") or names["kind"].lower(),
                    verbs=set(CR_VERBS),
                    shortnames=set(names.get("shortNames") or []),
                    categories=set(names.get("categories") or []),
                    subresources=subresources,
                ),
            )
            self._printer_columns[res] = list(version.get("additionalPrinterColumns") or [])
            self._schemas[res] = (version.get("schema") or {}).get("openAPIV3Schema")
            self._crd_of[res] = crd["metadata"]["name"]

    def _unregister_crd(self, crd: dict[str, Any], *, keep_objects: bool = False) -> None:
        name = crd["metadata"]["name"]
        for res in [r for r, owner in self._crd_of.items() if owner == name]:
            if keep_objects and self._live.get(res):
                continue
            del self._crd_of[res]
            self._printer_columns.pop(res, None)
            self._schemas.pop(res, None)
            if res in self.resources:
                del self.resources[res]

    # ----------------------------------------------------------------------------------------
    # HTTP entry point (replaces kmock's RawHandler.__call__; kmock's data model is kept).
    # ----------------------------------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        body = await raw_request.read()
        try:
            if self.limit is not None and self._served >= self.limit:
                raise kmock.KMockError("Too many requests have been served so far.")
            self._served += 1
            route = parse_route(raw_request.path)
            request = kmock.Request(
                id=self._served,
                raw_request=raw_request,
                url=raw_request.url,
                method=raw_request.method,
                params=dict(raw_request.query),
                headers=dict(raw_request.headers),
                cookies=dict(raw_request.cookies),
                body=body,
                text=body.decode("utf-8", errors="replace"),
                data=self._decode_body(raw_request, body),
                action=self._guess_action(route, raw_request),
                resource=route.resource,
                namespace=route.namespace,
                name=route.name,
                subresource=route.subresource,
            )
            self._requests.append(request)
            if len(self._requests) > 2 * self.request_history:
                del self._requests[: -self.request_history]
            return await self._handle(request)
        except kmock.KubernetesError as e:
            return await self._render_error(e)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.internal_errors.append(traceback.format_exc())
            if self._errors:
                self._errors[-1].append(e)
            return await self._render_error(e)

    def _decode_body(self, raw_request: aiohttp.web.BaseRequest, body: bytes) -> Any:
        if not body:
            return None
        if "protobuf" in (raw_request.content_type or ""):
            raise api_error(
                415,
                "UnsupportedMediaType",
                "the emulator speaks JSON only (not "
                "protobuf: use `kubectl apply -f` rather than `kubectl create <kind>`)",
            )
        if "yaml" in (raw_request.content_type or ""):
            try:
                return yaml.safe_load(body)
            except yaml.YAMLError as e:
                raise bad_request(f"invalid YAML body: {e}") from e
        try:
            return json.loads(body)
        except ValueError as e:
            raise bad_request(f"invalid JSON body: {e}") from e

    @staticmethod
    def _guess_action(route: Route, raw_request: aiohttp.web.BaseRequest) -> kmock.action | None:
        if route.kind != "resource":
            return None
        method = raw_request.method
        if method == "GET" and (route.legacy_watch or _truthy(raw_request.query.get("watch"))):
            return kmock.action.WATCH
        if route.name is None:
            return {"GET": kmock.action.LIST, "POST": kmock.action.CREATE}.get(method)
        return {
            "GET": kmock.action.FETCH,
            "PATCH": kmock.action.UPDATE,
            "PUT": kmock.action.UPDATE,
            "DELETE": kmock.action.DELETE,
        }.get(method)

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        # Reactions added by a test (failure injection, spies) go first, through kmock's own
        # matching; that costs O(request_history) per reaction, so it is skipped when unused.
        if self._payloads:
            try:
                return await kmock.RawHandler._handle(self, request)
            except NotImplementedError:
                pass
        return await self._dispatch(request)

    async def _render_error(self, exc: Exception) -> aiohttp.web.StreamResponse:
        if isinstance(exc, kmock.KubernetesError):
            status, reason, message, details = exc.status, exc.reason, exc.message, exc.details
        else:
            status, reason, message = 500, "InternalError", repr(exc)
            details = {"causes": [{"message": traceback.format_exc()}]}
        return _json(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": message or "",
                "reason": reason or "",
                "details": details or {},
                "code": status,
            },
            status=status,
        )

    async def _dispatch(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        raw = request._raw_request
        assert raw is not None
        route = parse_route(raw.path)
        if route.kind == "root":
            return _json(
                {
                    "paths": sorted(
                        {
                            "/api",
                            "/api/v1",
                            "/apis",
                            "/version",
                            "/healthz",
                            *(f"/apis/{g}" for g in self._groups()),
                        }
                    )
                }
            )
        if route.kind == "version":
            return _json(self.server_version)
        if route.kind == "health":
            return aiohttp.web.Response(text="ok")
        if route.kind == "api":
            host = raw.host or "127.0.0.1"
            return _json(
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": host}
                    ],
                }
            )
        if route.kind == "apis":
            return _json(
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [self._group_doc(g) for g in self._groups()],
                }
            )
        if route.kind == "group":
            if route.group not in self._groups():
                raise api_error(404, "NotFound", "the server could not find the requested resource")
            return _json({"kind": "APIGroup", "apiVersion": "v1", **self._group_doc(route.group)})
        if route.kind == "groupversion":
            return _json(self._resource_list(str(route.group), str(route.version)))
        if route.kind == "resource":
            return await self._serve_resource(request, raw, route)
        raise api_error(404, "NotFound", "the server could not find the requested resource")

    # ----------------------------------------------------------------------------------------
    # Discovery.
    # ----------------------------------------------------------------------------------------

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, set[str]] = {}
        for res in self.resources:
            if res.group:
                groups.setdefault(str(res.group), set()).add(str(res.version))
        return {g: sorted(vs, key=_version_priority, reverse=True) for g, vs in groups.items()}

    def _group_doc(self, group: str) -> dict[str, Any]:
        versions = self._groups()[group]
        docs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": docs, "preferredVersion": docs[0]}

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        entries = []
        for res in self.resources:
            if res.group != group or res.version != version:
                continue
            info = self.resources[res]
            entry: dict[str, Any] = {
                "name": res.plural,
                "singularName": info.singular or "",
                "namespaced": bool(info.namespaced),
                "kind": info.kind,
                "verbs": sorted(info.verbs),
            }
            if info.shortnames:
                entry["shortNames"] = sorted(info.shortnames)
            if info.categories:
                entry["categories"] = sorted(info.categories)
            entries.append(entry)
            for sub in sorted(info.subresources):
                entries.append(
                    {
                        "name": f"{res.plural}/{sub}",
                        "singularName": "",
                        "namespaced": bool(info.namespaced),
                        "kind": info.kind,
                        "verbs": list(STATUS_VERBS)
                        if sub in ("status", "scale")
                        else ["create", "get"],
                    }
                )
        if not entries and group:
            raise api_error(404, "NotFound", "the server could not find the requested resource")
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": entries,
        }

    # ----------------------------------------------------------------------------------------
    # Resource endpoints.
    # ----------------------------------------------------------------------------------------

    async def _serve_resource(
        self, request: kmock.Request, raw: aiohttp.web.BaseRequest, route: Route
    ) -> aiohttp.web.StreamResponse:
        res = route.resource
        assert res is not None
        info = self._info(res)
        ns, name, sub = route.namespace, route.name, route.subresource
        if ns is not None and not info.namespaced:
            raise api_error(404, "NotFound", "the server could not find the requested resource")
        if name is not None and info.namespaced and ns is None:
            raise api_error(404, "NotFound", "the server could not find the requested resource")
        params = raw.query
        if "dryRun" in params:
            raise bad_request("dryRun is not supported by the emulator")
        method = raw.method
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")
        if method == "GET":
            watching = route.legacy_watch or _truthy(params.get("watch"))
            verb = "watch" if watching else "list" if name is None else "get"
        elif method == "DELETE":
            verb = "deletecollection" if name is None else "delete"
        self.request_counts[(verb, str(res.plural) + (f"/{sub}" if sub else ""))] += 1
        accept = raw.headers.get("Accept", "")
        if verb == "watch":
            return await self._serve_watch(raw, res, ns, name)
        if verb == "list":
            return self._serve_list(res, info, ns, params, accept)
        if verb == "get":
            if sub == "log" and res == PODS:
                self._current(res, ns, name)
                return aiohttp.web.Response(text="", content_type="text/plain")
            if sub not in (None, "status"):
                raise api_error(404, "NotFound", "the server could not find the requested resource")
            obj = self._current(res, ns, str(name))
            if "as=Table" in accept:
                return _json(self._table(res, [obj], params))
            return _json(obj)
        data = request.data
        if verb == "create":
            if name is None:
                if info.namespaced and ns is None:
                    raise api_error(
                        405,
                        "MethodNotAllowed",
                        "the server does not allow this method on the requested resource",
                    )
                return _json(self.create_object(res, data, ns), status=201)
            if res == PODS and sub == "binding":
                target = (data or {}).get("target") or {}
                self.bind_pod(str(ns), name, str(target.get("name", "")))
                return _json(_success(), status=201)
            if res == PODS and sub == "eviction":
                self.delete_object(res, ns, name)
                return _json(_success(), status=201)
            raise api_error(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        if verb == "update":
            if name is None:
                raise api_error(405, "MethodNotAllowed", "PUT needs an object name")
            if res == NAMESPACES and sub == "finalize":
                return _json(self._finalize_namespace(name, data))
            return _json(self.replace_object(res, ns, name, data, subresource=sub))
        if verb == "patch":
            if name is None:
                raise api_error(405, "MethodNotAllowed", "PATCH needs an object name")
            return self._serve_patch(raw, res, info, ns, name, sub, data)
        if verb == "delete":
            assert name is not None
            return _json(self.delete_object(res, ns, name, **self._delete_options(params, data)))
        if verb == "deletecollection":
            options = self._delete_options(params, data)
            for obj in self._select(
                res, ns, params.get("labelSelector"), params.get("fieldSelector")
            ):
                meta = obj["metadata"]
                with contextlib.suppress(kmock.KubernetesError):
                    self.delete_object(res, meta.get("namespace"), meta["name"], **options)
            return _json(_success())
        raise api_error(405, "MethodNotAllowed", f"method {method} is not allowed")

    def _serve_patch(
        self,
        raw: aiohttp.web.BaseRequest,
        res: kmock.resource,
        info: kmock.ResourceInfo,
        ns: str | None,
        name: str,
        sub: str | None,
        data: Any,
    ) -> aiohttp.web.StreamResponse:
        content_type = raw.content_type
        kinds = {
            "application/merge-patch+json": "merge",
            "application/json-patch+json": "json",
            "application/strategic-merge-patch+json": "strategic",
        }
        if content_type == "application/apply-patch+yaml":
            if self._holder(res, ns, name) is None and sub is None:
                body = dict(data or {})
                body.setdefault("metadata", {})["name"] = name
                return _json(self.create_object(res, body, ns), status=201)
            return _json(
                self.patch_object(res, ns, name, data, patch_type="merge", subresource=sub)
            )
        if content_type not in kinds:
            raise api_error(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an "
                f"unknown format - accepted media types include: {', '.join(kinds)}",
            )
        return _json(
            self.patch_object(res, ns, name, data, patch_type=kinds[content_type], subresource=sub)
        )

    @staticmethod
    def _delete_options(params: Mapping[str, str], data: Any) -> dict[str, Any]:
        body = data if isinstance(data, Mapping) else {}
        propagation = body.get("propagationPolicy") or params.get("propagationPolicy")
        orphan = body.get("orphanDependents", params.get("orphanDependents"))
        if propagation is None and orphan is not None:
            propagation = "Orphan" if orphan in (True, "true") else "Background"
        grace = body.get("gracePeriodSeconds", params.get("gracePeriodSeconds"))
        return {
            "propagation": propagation,
            "grace_period": int(grace) if grace is not None else None,
            "preconditions": body.get("preconditions"),
        }

    def _finalize_namespace(self, name: str, data: Any) -> dict[str, Any]:
        def finalized(cur: dict[str, Any]) -> dict[str, Any]:
            cur.setdefault("spec", {})["finalizers"] = list(
                ((data or {}).get("spec") or {}).get("finalizers") or []
            )
            return cur

        return self._update(NAMESPACES, None, name, finalized, subresource=None, internal=True)

    def _serve_list(
        self,
        res: kmock.resource,
        info: kmock.ResourceInfo,
        ns: str | None,
        params: Mapping[str, str],
        accept: str,
    ) -> aiohttp.web.StreamResponse:
        items = self._select(res, ns, params.get("labelSelector"), params.get("fieldSelector"))
        start = 0
        if params.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(params["continue"]))
                start = int(token["start"])
            except (ValueError, KeyError, TypeError) as e:
                raise bad_request("invalid continue token") from e
        try:
            limit = int(params.get("limit") or 0)
        except ValueError as e:
            raise bad_request("invalid limit") from e
        end = start + limit if limit > 0 else len(items)
        page = items[start:end]
        continue_token = ""
        if end < len(items):
            continue_token = base64.urlsafe_b64encode(
                json.dumps({"start": end, "rv": self._rv}).encode()
            ).decode()
        if "as=Table" in accept:
            return _json(self._table(res, page, params, continue_token))
        metadata: dict[str, Any] = {"resourceVersion": self.resource_version}
        if continue_token:
            metadata["continue"] = continue_token
            metadata["remainingItemCount"] = len(items) - end
        return _json(
            {
                "kind": f"{info.kind}List",
                "apiVersion": _gv(res),
                "metadata": metadata,
                "items": page,
            }
        )

    def _table(
        self,
        res: kmock.resource,
        objs: list[dict[str, Any]],
        params: Mapping[str, str],
        continue_token: str = "",
    ) -> dict[str, Any]:
        columns = self._printer_columns.get(res) if res in self._crd_of else None
        return _tables.build_table(
            plural=str(res.plural),
            objects=objs,
            printer_columns=columns,
            resource_version=self.resource_version,
            include_object=params.get("includeObject", "PartialObjectMetadata"),
            continue_token=continue_token,
        )

    async def _serve_watch(
        self,
        raw: aiohttp.web.BaseRequest,
        res: kmock.resource,
        namespace: str | None,
        name: str | None,
    ) -> aiohttp.web.StreamResponse:
        params = raw.query
        field_selector = params.get("fieldSelector") or ""
        if name is not None:
            field_selector = ",".join(filter(None, [field_selector, f"metadata.name={name}"]))
        try:
            watcher = _Watcher(
                namespace=namespace,
                labels=_selectors.parse_label_selector(params.get("labelSelector")),
                fields=_selectors.parse_field_selector(field_selector),
                queue=asyncio.Queue(),
                selective=bool(params.get("labelSelector") or field_selector),
            )
        except _selectors.SelectorError as e:
            raise bad_request(str(e)) from e
        bookmarks = _truthy(params.get("allowWatchBookmarks"))
        send_initial = _truthy(params.get("sendInitialEvents"))
        try:
            timeout = float(params.get("timeoutSeconds") or self.max_watch_seconds)
        except ValueError as e:
            raise bad_request("invalid timeoutSeconds") from e
        since = params.get("resourceVersion") or ""
        initial: list[bytes] = []
        gone = False
        # Synchronous (hence atomic) section: the snapshot and the registration of the watcher.
        if send_initial or since in ("", "0"):
            for obj in self._select(res, namespace, None, None):
                if watcher.matches(obj):
                    initial.append(_encode_event("ADDED", obj))
        else:
            try:
                since_rv = int(since)
            except ValueError as e:
                raise bad_request(f"invalid resourceVersion {since!r}") from e
            if since_rv < self._evicted.get(res, 0):
                gone = True
            else:
                for rv, etype, obj, old in self._logs.get(res, ()):
                    if rv > since_rv:
                        visible = watcher.translate(etype, obj, old)
                        if visible is not None:
                            initial.append(_encode_event(visible, obj))
        if not gone:
            self._watchers.setdefault(res, set()).add(watcher)
        response = aiohttp.web.StreamResponse(status=200)
        response.content_type = "application/json"
        response.enable_chunked_encoding()
        try:
            await response.prepare(raw)
            if gone:
                await response.write(
                    _encode_event(
                        "ERROR",
                        {
                            "kind": "Status",
                            "apiVersion": "v1",
                            "metadata": {},
                            "status": "Failure",
                            "message": f"too old resource version: {since} ({self._evicted[res]})",
                            "reason": "Expired",
                            "code": 410,
                        },
                    )
                )
                await response.write_eof()
                return response
            if initial:
                await response.write(b"".join(initial))
            if send_initial and bookmarks:
                await response.write(self._bookmark(res, initial_end=True))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                wait = min(remaining, self.bookmark_interval) if bookmarks else remaining
                try:
                    chunk = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    if bookmarks and deadline - loop.time() > 0:
                        await response.write(self._bookmark(res))
                    continue
                chunks = [chunk]
                while chunk is not None and not watcher.queue.empty():
                    chunk = watcher.queue.get_nowait()
                    chunks.append(chunk)
                payload = b"".join(c for c in chunks if c is not None)
                if payload:
                    await response.write(payload)
                if chunk is None:
                    break
            await response.write_eof()
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            pass
        finally:
            self._watchers.get(res, set()).discard(watcher)
        return response

    def _bookmark(self, res: kmock.resource, *, initial_end: bool = False) -> bytes:
        info = self.resources[res] if res in self.resources else kmock.ResourceInfo()
        meta: dict[str, Any] = {"resourceVersion": self.resource_version}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return _encode_event(
            "BOOKMARK", {"kind": info.kind, "apiVersion": _gv(res), "metadata": meta}
        )


def _json(data: Any, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.Response(
        body=json.dumps(data, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )


def _success() -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 200}


# --------------------------------------------------------------------------------------------
# Running it: a background thread, a kubeconfig, synchronous accessors, pytest fixtures.
# --------------------------------------------------------------------------------------------


class ApiServer:
    """Runs a :class:`KubeApiEmulator` behind ``kmock.Server`` in a background thread.

    Usage::

        with ApiServer() as api:
            subprocess.run(["kubectl", "get", "pods"], env=api.env())
            api.create("pods", {...}, namespace="default")
            api.wait_for(lambda: api.get("pods", "default", "p")["status"]["phase"] == "Running")

    The emulator object itself is available as ``api.emulator`` (e.g. for the kmock
    DSL: ``api.emulator['patch', kmock.resource('v1', 'pods')] << 500``).
    """

    def __init__(
        self,
        emulator: KubeApiEmulator | None = None,
        *,
        directory: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        **options: Any,
    ) -> None:
        self.emulator = emulator or KubeApiEmulator(**options)
        self._owns_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="k8s-emulator-"))
        self.kubeconfig = self.directory / "kubeconfig"
        self._host, self._port = host, port
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._stop_event: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.port: int = 0
        self.url: str = ""

    # Lifecycle.

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 10.0) -> ApiServer:
        """Start serving in a daemon thread; returns when the port accepts connections.

        After :meth:`stop` (with ``cleanup=False``) or in :meth:`restart`, the server comes
        back on the same port with all its objects, as a restarted API server does.
        """
        if self._thread is not None:
            raise RuntimeError("the API emulator is already running")
        if self.port:
            self._port = self.port
        self._ready.clear()
        self._failure = None
        self._thread = threading.Thread(target=self._thread_main, name="k8s-emulator", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the API emulator did not start in time")
        if self._failure is not None:
            raise RuntimeError("the API emulator failed to start") from self._failure
        return self

    def stop(self, timeout: float = 10.0, *, cleanup: bool = True) -> None:
        """Close all watches, stop the server, join the thread (and remove its own temp dir)."""
        if self.loop is not None and self._stop_event is not None and self._thread is not None:
            self.loop.call_soon_threadsafe(self._stop_event.set)
            self._thread.join(timeout)
        self._thread = None
        if cleanup and self._owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def restart(self, downtime: float = 0.0) -> None:
        """Simulate an API server restart: connections and watches drop, the state stays."""
        self.stop(cleanup=False)
        time.sleep(downtime)
        self.start()

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self.loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as e:
            self._failure = e
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stop_event = asyncio.Event()
        loop = asyncio.get_running_loop()
        self.emulator._stream_queue = asyncio.Queue()  # kmock's live-stream feeder, per loop
        async with (
            self.emulator,
            kmock.Server(
                self.emulator, host=self._host, port=self._port, server_cls=_QuickShutdownServer
            ) as server,
        ):
            self.emulator.attach(loop)
            self.port = server.port
            self.url = f"http://{self._host}:{self.port}"
            self.write_kubeconfig(self.kubeconfig)
            self._ready.set()
            await self._stop_event.wait()
            self.emulator.shutdown_watches()
            await asyncio.sleep(0.05)

    def write_kubeconfig(self, path: str | os.PathLike[str], namespace: str = "default") -> Path:
        """Write a kubeconfig pointing to this server (for kubectl, kopf, kubernetes)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "emulator", "user": {"token": "emulator-token"}}],
            "contexts": [
                {
                    "name": "emulator",
                    "context": {"cluster": "emulator", "user": "emulator", "namespace": namespace},
                }
            ],
            "current-context": "emulator",
            "preferences": {},
        }
        target = Path(path)
        target.write_text(yaml.safe_dump(config))
        return target

    # Marshalling into the serving loop.

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = 30.0, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in the emulator's loop and return its result."""
        loop = self.loop
        if loop is None or self._thread is None:
            return fn(*args, **kwargs)
        if threading.current_thread() is self._thread:
            return fn(*args, **kwargs)
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def runner() -> None:
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as e:
                future.set_exception(e)

        loop.call_soon_threadsafe(runner)
        return future.result(timeout)

    # Synchronous accessors for tests (thread-safe).

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object, or ``None`` if it does not exist (``LookupError`` for unknown types)."""
        try:
            return self.call(self.emulator.get_object, resource, namespace, name)
        except kmock.KubernetesError as e:
            if e.status == 404:
                return None
            raise

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """The matching objects (all namespaces when ``namespace`` is ``None``)."""
        return self.call(
            self.emulator.list_objects,
            resource,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )

    def create(
        self, resource: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        """Create an object (as POST)."""
        return self.call(self.emulator.create_object, resource, body, namespace)

    def patch(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Patch an object (as PATCH)."""
        return self.call(
            self.emulator.patch_object,
            resource,
            namespace,
            name,
            patch,
            patch_type=patch_type,
            subresource=subresource,
        )

    def replace(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        body: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Replace an object (as PUT)."""
        return self.call(
            self.emulator.replace_object, resource, namespace, name, body, subresource=subresource
        )

    def delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        *,
        propagation: str | None = None,
        grace_period: int | None = None,
    ) -> dict[str, Any]:
        """Delete an object (as DELETE)."""
        return self.call(
            self.emulator.delete_object,
            resource,
            namespace,
            name,
            propagation=propagation,
            grace_period=grace_period,
        )

    def wait_for(
        self,
        predicate: Callable[[], Any],
        timeout: float = 10.0,
        interval: float = 0.02,
        message: str = "",
    ) -> Any:
        """Poll ``predicate`` until it returns something truthy; return that value."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(message or f"condition not met within {timeout}s")
            time.sleep(interval)

    def assert_no_internal_errors(self) -> None:
        """Fail if any request made the emulator itself crash (a 500 that is our bug)."""
        errors = list(self.emulator.internal_errors)
        if errors:
            raise AssertionError("the API emulator had internal errors:\n" + "\n".join(errors))

    # Clients.

    def env(self, **extra: str) -> dict[str, str]:
        """An environment for subprocesses (``KUBECONFIG`` set)."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), **extra}

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the real ``kubectl`` against this server (own discovery cache directory)."""
        binary = shutil.which("kubectl")
        if binary is None:
            raise FileNotFoundError("kubectl is not installed")
        command = [
            binary,
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.directory / 'kube-cache'}",
            *args,
        ]
        result = subprocess.run(
            command, input=input, capture_output=True, text=True, timeout=timeout, env=self.env()
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout}\n{result.stderr}"
            )
        return result

    def connection_info(self) -> Any:
        """A ``kopf.ConnectionInfo`` for this server, for a ``@kopf.on.login`` handler.

        (kopf's default ``login_via_client`` reads ``$KUBECONFIG`` only as it was when
        ``kubernetes.config`` was first imported, which is too early in a test run.)
        """
        import kopf

        return kopf.ConnectionInfo(
            server=self.url, scheme="Bearer", token="emulator-token", default_namespace="default"
        )

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` configured for this server."""
        import kubernetes.client

        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        return kubernetes.client.ApiClient(configuration)


@contextlib.contextmanager
def running_apiserver(**options: Any) -> Iterator[ApiServer]:
    """A context manager: start an :class:`ApiServer`, yield it, check it, stop it."""
    server = ApiServer(**options)
    server.start()
    try:
        yield server
        server.assert_no_internal_errors()
    finally:
        server.stop()


def apiserver_fixture(scope: str = "function", **options: Any) -> Any:
    """Make a pytest fixture yielding a running :class:`ApiServer`.

    In a test module or conftest: ``apiserver = apiserver_fixture(scope="module")``.
    The fixture fails the test at teardown if the emulator had internal errors.
    """
    import pytest

    @pytest.fixture(scope=scope)
    def _apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
        with running_apiserver(directory=tmp_path_factory.mktemp("k8s"), **options) as server:
            yield server

    return _apiserver
