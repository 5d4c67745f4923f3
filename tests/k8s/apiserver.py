"""The Kubernetes API of the end-to-end tests: kmock 0.8, and what it lacks for the operator.

kopf, the ``kubernetes`` client, ``kubectl`` and the simulated kubelet talk to it as to a
real API server. kmock (PyPI, by kopf's author) provides the aiohttp server
(:class:`kmock.Server`), the object store with each object's history
(``emulator.objects[res, ns, name]``), the resource catalogue and the discovery documents
rendered from it, and API errors rendered as ``Status`` objects.

Its ``KubernetesEmulator`` cannot serve the operator as it is (read in kmock 0.8's source):

* no ``resourceVersion``, ``uid``, ``generation`` or ``creationTimestamp``: a list says
  resourceVersion ``...`` and a watch ignores ``?resourceVersion=`` and replays every
  object as ADDED. The operator ties pods to workflows by uid, reports
  ``observedGeneration`` and measures the admission lag from ``creationTimestamp``;
* PATCH merges the body into the object: the operator's JSON patch (a list whose ``test``
  op guards the gate's index, 422 when it fails) does not apply, and ``/status`` is no
  subresource (a status write may change the spec);
* no PUT, and no resourceVersion precondition: leader election (a Lease replaced with the
  resourceVersion it was read at, 409 Conflict if another write came between) needs both;
* no label or field selectors (the operator lists its pods by label, ``kubectl describe``
  finds Events by field), no ``generateName`` (kopf's Events), no ownerReference garbage
  collection (deleting a workflow collects its pods), no graceful deletion and no
  ``eviction`` subresource with PodDisruptionBudgets (a reclaim stops a task so);
* its path parser fails on ``/api/v1/namespaces`` (kopf lists and watches namespaces),
  ``/api/v1`` discovery says groupVersion ``/v1``, and a POSTed CRD is not served;
* each request is matched against every reaction by iterating the whole request history:
  quadratic in the requests of a test module;
* no server-side Table (``kubectl get`` prints a CRD's printer columns from it).

:class:`Emulator` keeps kmock's store, catalogue and server and replaces its request
handling with those semantics and no more: no paging, no strategic merge, graceful
deletion only for a running pod given a grace period (an eviction's: its kubelet stops
it), no schema validation (test_deploy checks the CRD's schema; tests/real runs on a
real API server) but its pruning and defaulting (tests/k8s/_schema.py),
and a watch with a field selector is refused (400) rather than served wrongly. A watch with
a label selector is served as the real server does (Airflow's KubernetesExecutor watches
its pods so): an object that comes to match is ADDED, one that stops matching DELETED.
Each write request over HTTP is told to the :meth:`Emulator.audit` callbacks with its
User-Agent, as a real server's audit log records it (who wrote).

It serves Nodes too (cluster-scoped, with a status subresource), and writes a pod's binding
(:meth:`Emulator.bind`) and its Unschedulable condition (:meth:`Emulator.unschedulable`)
for the kube-scheduler of tests/k8s/scheduler.py, which the harness runs beside it.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import datetime
import json
import traceback
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp.web
import attrs
import kmock

from tests.k8s import _disruption, _selectors, _tables
from tests.k8s._patching import PatchFailed, apply_json_patch, merge_patch
from tests.k8s._schema import structural

NAMESPACES = kmock.resource("", "v1", "namespaces")
PODS = kmock.resource("", "v1", "pods")
NODES = kmock.resource("", "v1", "nodes")
EVENTS = kmock.resource("", "v1", "events")
CRDS = kmock.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
LEASES = kmock.resource("coordination.k8s.io", "v1", "leases")
PRIORITY_CLASSES = kmock.resource("scheduling.k8s.io", "v1", "priorityclasses")
BUDGETS = kmock.resource("policy", "v1", "poddisruptionbudgets")
SERVICE_ACCOUNTS = kmock.resource("", "v1", "serviceaccounts")
VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
BUILTIN = {
    NAMESPACES: kmock.ResourceInfo(kind="Namespace", singular="namespace", namespaced=False),
    PODS: kmock.ResourceInfo(kind="Pod", singular="pod", namespaced=True, subresources={"status"}),
    NODES: kmock.ResourceInfo(
        kind="Node", singular="node", namespaced=False, subresources={"status"}
    ),
    EVENTS: kmock.ResourceInfo(kind="Event", singular="event", namespaced=True),
    CRDS: kmock.ResourceInfo(kind="CustomResourceDefinition", namespaced=False),
    LEASES: kmock.ResourceInfo(kind="Lease", singular="lease", namespaced=True),
    PRIORITY_CLASSES: kmock.ResourceInfo(kind="PriorityClass", namespaced=False),
    BUDGETS: kmock.ResourceInfo(
        kind="PodDisruptionBudget", singular="poddisruptionbudget", namespaced=True
    ),
    SERVICE_ACCOUNTS: kmock.ResourceInfo(
        kind="ServiceAccount", singular="serviceaccount", namespaced=True
    ),
}
PATCH_TYPES = {
    "application/merge-patch+json": merge_patch,
    "application/json-patch+json": apply_json_patch,
}
WATCH_WINDOW = 20_000
"""Events kept per resource for a watch from a resourceVersion; an older one gets 410 Gone."""
WATCH_SECONDS = 1800.0
"""How long a watch without ``timeoutSeconds`` lasts."""

Key = tuple[kmock.resource, str | None, str]
Subscriber = Callable[[kmock.resource, str, dict[str, Any]], None]


@attrs.frozen
class Write:
    """One write request as the audit log has it: its sender (User-Agent), what it asked
    and the status of the answer."""

    user_agent: str
    method: str
    resource: kmock.resource
    namespace: str | None
    name: str | None
    subresource: str | None
    status: int
    version: int = 0
    """The server's resourceVersion as it answered: the object's new one when the request
    wrote one (a delete that collected dependents: the last dependent's)."""


Auditor = Callable[[Write], None]
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def api_error(status: int, reason: str, message: str) -> kmock.KubernetesError:
    """An error the client gets as the real server's Status (``reason`` is its StatusReason)."""
    return kmock.KubernetesError(status=status, reason=reason, message=message, details={})


def now() -> str:
    """The current time as the API server writes timestamps (whole seconds, UTC)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def route(path: str) -> tuple[kmock.resource, str | None, str | None, str | None] | None:
    """(resource, namespace, name, subresource) of a resource path; None for any other."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    name = rest[1] if len(rest) > 1 else None
    return kmock.resource(group, version, rest[0]), namespace, name, "/".join(rest[2:]) or None


def _json(data: Any, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.json_response(data, status=status, dumps=json.dumps)


def _line(etype: str, obj: Mapping[str, Any]) -> bytes:
    return json.dumps({"type": etype, "object": obj}).encode() + b"\n"


@attrs.frozen
class Change:
    """One write as the watches see it: its event (`etype`, `chunk` the rendered line) and
    the object's labels before (None if it did not exist) and after it."""

    etype: str
    chunk: bytes
    before: Mapping[str, str] | None
    after: Mapping[str, str]

    def seen_by(self, selector: _selectors.Matcher) -> bytes | None:
        """The line a watch with label `selector` gets, None if none: as the real server
        does, an object that comes to match is ADDED to it, one that stops matching
        DELETED."""
        was = self.before is not None and selector(self.before.get)
        matches = self.etype != "DELETED" and selector(self.after.get)
        if was == matches:
            return self.chunk if matches else None
        etype = "ADDED" if matches else "DELETED"
        return self.chunk.replace(f'"{self.etype}"'.encode(), f'"{etype}"'.encode(), 1)


@attrs.define(kw_only=True)
class Emulator(kmock.KubernetesEmulator):
    """kmock's emulator with the semantics the operator relies on (see the module docstring).

    Every method runs in the serving event loop: the writes are synchronous, hence atomic,
    and reach the watch streams and the in-process subscribers in resourceVersion order.
    """

    internal_errors: list[str] = attrs.field(factory=list, init=False)
    _rv: int = attrs.field(default=1000, init=False)
    _log: dict[kmock.resource, collections.deque] = attrs.field(factory=dict, init=False)
    _gone: dict[kmock.resource, int] = attrs.field(factory=dict, init=False)
    _watches: set[tuple[kmock.resource, str | None, _selectors.Matcher, asyncio.Queue]] = (
        attrs.field(factory=set, init=False)
    )
    _subscribers: list[Subscriber] = attrs.field(factory=list, init=False)
    _auditors: list[Auditor] = attrs.field(factory=list, init=False)
    _columns: dict[kmock.resource, list[dict[str, Any]]] = attrs.field(factory=dict, init=False)
    _schemas: dict[kmock.resource, dict[str, Any]] = attrs.field(factory=dict, init=False)
    """Each custom resource's structural schema (tests/k8s/_schema.py)."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._payloads.clear()  # kmock's own reactions: this class serves every request
        for res, info in BUILTIN.items():
            info.verbs = set(VERBS)
            self.resources[res] = info

    # -- the HTTP side ----------------------------------------------------------------------

    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        response = await self._answer(raw)
        where = route(raw.path)
        if raw.method in WRITES and where is not None and self._auditors:
            agent = raw.headers.get("User-Agent", "")
            write = Write(agent, raw.method, *where, status=response.status, version=self._rv)
            for auditor in list(self._auditors):
                self._safely(auditor, write)
        return response

    async def _answer(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        try:
            body = await raw.read()
            try:
                data = json.loads(body) if body else None
            except ValueError:
                raise api_error(400, "BadRequest", "the body is not JSON") from None
            where = route(raw.path)
            if where is None:
                return _json(await self._discovery([p for p in raw.path.split("/") if p]))
            return await self._serve(raw, *where, data)
        except kmock.KubernetesError as exc:
            return await self._render_error(exc)
        except Exception as exc:
            self.internal_errors.append(traceback.format_exc())
            return await self._render_error(exc)

    async def _discovery(self, parts: list[str]) -> dict[str, Any]:
        if parts == ["version"]:
            return await self._serve_server_version(kmock.Request())
        if parts == ["api"]:
            return await self._serve_api(kmock.Request())
        if parts == ["apis"]:
            return await self._serve_apis(kmock.Request())
        if parts[:1] == ["apis"] and len(parts) == 2:
            return await self._serve_group(kmock.Request(resource=kmock.resource(group=parts[1])))
        if parts == ["api", "v1"] or (parts[:1] == ["apis"] and len(parts) == 3):
            group, version = ("", "v1") if parts[0] == "api" else (parts[1], parts[2])
            request = kmock.Request(resource=kmock.resource(group=group, version=version))
            doc = await self._serve_version(request)
            doc["groupVersion"] = f"{group}/{version}" if group else version  # kmock: "/v1"
            return doc
        raise api_error(404, "NotFound", "the server could not find the requested resource")

    async def _serve(
        self,
        raw: aiohttp.web.BaseRequest,
        res: kmock.resource,
        namespace: str | None,
        name: str | None,
        subresource: str | None,
        data: Any,
    ) -> aiohttp.web.StreamResponse:
        params, table = raw.query, "as=Table" in raw.headers.get("Accept", "")
        if raw.method == "GET" and params.get("watch") in ("true", "True", "1"):
            return await self._watch(raw, res, namespace)
        if raw.method == "GET" and name is None:
            try:
                items = self.list(
                    res,
                    namespace,
                    label_selector=params.get("labelSelector"),
                    field_selector=params.get("fieldSelector"),
                )
            except _selectors.SelectorError as exc:
                raise api_error(400, "BadRequest", str(exc)) from None
            if table:
                return _json(_tables.table(items, self._columns.get(res, [])))
            kind = self._info(res).kind
            meta = {"resourceVersion": str(self._rv)}
            return _json(
                {
                    "kind": f"{kind}List",
                    "apiVersion": self._gv(res),
                    "metadata": meta,
                    "items": items,
                }
            )
        if raw.method == "GET":
            obj = self._current((res, namespace, name))
            return _json(_tables.table([obj], self._columns.get(res, [])) if table else obj)
        if raw.method == "POST" and name is None:
            return _json(self.create(res, data, namespace), status=201)
        if raw.method == "POST" and res == PODS and name and subresource == "eviction":
            return _json(self.evict(namespace or "default", name), status=201)
        if raw.method == "PATCH" and name is not None:
            patch = PATCH_TYPES.get(raw.content_type)
            if patch is None:
                raise api_error(
                    415,
                    "UnsupportedMediaType",
                    f"the test API server takes "
                    f"{' or '.join(PATCH_TYPES)} patches, not {raw.content_type}",
                )
            return _json(
                self._update((res, namespace, name), lambda cur: patch(cur, data), subresource)
            )
        if raw.method == "PUT" and name is not None:
            return _json(self.replace(res, namespace, name, data, subresource=subresource))
        if raw.method == "DELETE" and name is not None:
            grace = (data or {}).get("gracePeriodSeconds")
            return _json(self.delete(res, namespace, name, grace=grace))
        raise api_error(405, "MethodNotAllowed", f"the test API server has no {raw.method} here")

    async def _watch(
        self, raw: aiohttp.web.BaseRequest, res: kmock.resource, namespace: str | None
    ) -> aiohttp.web.StreamResponse:
        params = raw.query
        if params.get("fieldSelector"):
            raise api_error(
                400, "BadRequest", "the test API server watches without field selectors"
            )
        try:
            selector = _selectors.matcher(params.get("labelSelector"))
        except _selectors.SelectorError as exc:
            raise api_error(400, "BadRequest", str(exc)) from None
        timeout = params.get("timeoutSeconds") or str(int(WATCH_SECONDS))
        if not timeout.isdigit():  # as kube-apiserver parses it (strconv.ParseInt)
            raise api_error(
                400, "BadRequest", f'strconv.ParseInt: parsing "{timeout}": invalid syntax'
            )
        since = int(params.get("resourceVersion") or 0)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        # the backlog and the registration in one synchronous step: nothing lost or repeated
        if since and since < self._gone.get(res, 0):
            gone = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "reason": "Expired",
                "code": 410,
                "message": f"too old resource version: {since}",
            }
            queue.put_nowait(_line("ERROR", gone))
            queue.put_nowait(None)
        elif since:
            for rv, namespace_, change in self._log.get(res, ()):
                chunk = change.seen_by(selector)
                if rv > since and namespace in (None, namespace_) and chunk is not None:
                    queue.put_nowait(chunk)
        else:
            for obj in self.list(res, namespace, label_selector=params.get("labelSelector")):
                queue.put_nowait(_line("ADDED", obj))
        watch = (res, namespace, selector, queue)
        self._watches.add(watch)
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        try:
            await response.prepare(raw)
            async with asyncio.timeout(int(timeout)):
                while (chunk := await queue.get()) is not None:
                    await response.write(chunk)
        except (TimeoutError, ConnectionResetError):
            pass  # the watch's time is up, or the client went away
        finally:
            self._watches.discard(watch)
        return response

    def close_watches(self) -> None:
        """End every watch stream (before the server stops)."""
        for *_, queue in self._watches:
            queue.put_nowait(None)

    # -- the objects (synchronous, in the serving loop) -------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(resource, event_type, object)`` soon after every change."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    def audit(self, callback: Auditor) -> Callable[[], None]:
        """Call ``callback(write)`` after each write request over HTTP is answered."""
        self._auditors.append(callback)
        return lambda: self._auditors.remove(callback)

    def list(
        self,
        res: kmock.resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Copies of the live objects of `res` that match, by namespace and name."""
        self._info(res)
        labels, fields = _selectors.matcher(label_selector), _selectors.matcher(field_selector)
        found = [
            holder.raw
            for (r, ns, _), holder in sorted(
                self.objects.items(), key=lambda kv: (kv[0][1] or "", kv[0][2])
            )
            if r == res and namespace in (None, ns) and not holder.deleted
        ]
        return [
            copy.deepcopy(obj)
            for obj in found
            if labels((obj["metadata"].get("labels") or {}).get)
            and fields(lambda path, o=obj: _selectors.field(o, path))
        ]

    def get(self, res: kmock.resource, namespace: str | None, name: str) -> dict[str, Any]:
        """A copy of the object; its 404 if there is none."""
        return copy.deepcopy(self._current((res, namespace, name)))

    def create(
        self, res: kmock.resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        """Create as POST does: server metadata, ``generateName``, 409 if the name is taken."""
        info = self._info(res)
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        namespace = (namespace or meta.get("namespace") or "default") if info.namespaced else None
        name = meta.get("name") or meta.get("generateName", "") + uuid.uuid4().hex[:5]
        if not (meta.get("name") or meta.get("generateName")):
            raise api_error(422, "Invalid", "metadata.name: Required value")
        key = (res, namespace, name)
        if key in self.objects and not self.objects[key].deleted:
            raise api_error(409, "AlreadyExists", f'{res.plural} "{name}" already exists')
        meta.update(name=name, uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
        if namespace is not None:
            meta["namespace"] = namespace
        obj.update(apiVersion=self._gv(res), kind=info.kind)
        if res in self._schemas:
            if "status" in info.subresources:
                obj.pop("status", None)  # a create sets no status where it has its subresource
            obj = structural(self._schemas[res], obj)
        if res == CRDS:
            self._register(obj)
        if res == PODS:
            obj["status"] = {"phase": "Pending"}  # until a kubelet runs it
        return self._write(key, obj, "ADDED")

    def patch(
        self,
        res: kmock.resource,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Patch as PATCH does; `patch_type` is ``merge`` or ``json``."""
        apply = {"merge": merge_patch, "json": apply_json_patch}[patch_type]
        return self._update((res, namespace, name), lambda cur: apply(cur, patch), subresource)

    def replace(
        self,
        res: kmock.resource,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Replace as PUT does: 409 Conflict if `body` carries a resourceVersion that is not
        the object's (an unconditional replace carries none)."""
        if not isinstance(body, dict):
            raise api_error(400, "BadRequest", "the body of a PUT is no JSON object")
        return self._update((res, namespace, name), lambda _: copy.deepcopy(body), subresource)

    def delete(
        self, res: kmock.resource, namespace: str | None, name: str, *, grace: float | None = None
    ) -> dict[str, Any]:
        """Delete as DELETE does: at once, or once the finalizers are gone; dependents follow.
        A running pod given a `grace` period (seconds; an eviction gives its own) is marked
        (``deletionTimestamp``, ``deletionGracePeriodSeconds``) for its kubelet to stop and
        then delete at once (``grace`` 0); any other object, and a pod that does not run,
        goes at once."""
        key = (res, namespace, name)
        obj = copy.deepcopy(self._current(key))
        meta = obj["metadata"]
        running = res == PODS and (obj.get("status") or {}).get("phase") == "Running"
        if grace and running and not meta.get("deletionTimestamp"):
            meta.update(deletionTimestamp=now(), deletionGracePeriodSeconds=int(grace))
            return self._write(key, obj, "MODIFIED")
        if not meta.get("finalizers"):
            return self._remove(key, obj)
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = now()
            return self._write(key, obj, "MODIFIED")
        return obj

    def evict(self, namespace: str, name: str) -> dict[str, Any]:
        """Evict a pod as the ``eviction`` subresource does (policy/v1): a pod that is not
        running or is being deleted goes as a deletion does; a running one only if every
        PodDisruptionBudget selecting it allows a disruption (else 429, and nothing
        changes: `tests.k8s._disruption`), then deleted with its own grace period
        (``terminationGracePeriodSeconds``, 30 by default), its ``DisruptionTarget``
        condition set. The answer is a Status."""
        key = (PODS, namespace, name)
        pod = self._current(key)
        meta, phase = pod["metadata"], (pod.get("status") or {}).get("phase")
        if phase == "Running" and not meta.get("deletionTimestamp"):
            pods = self.list(PODS, namespace)
            refused = "Cannot evict pod as it would violate the pod's disruption budget."
            for budget in self.list(BUDGETS, namespace):
                if _disruption.selects(budget, pod) and (
                    _disruption.disruptions_allowed(budget, pods) < 1
                ):
                    raise api_error(429, "TooManyRequests", refused)
            disrupted = copy.deepcopy(pod)
            reason = {"reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}
            _set_condition(disrupted, {"type": "DisruptionTarget", "status": "True", **reason})
            self._write(key, disrupted, "MODIFIED")
        grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
        self.delete(PODS, namespace, name, grace=grace)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    def live(self, res: kmock.resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The stored object itself (not a copy: read, never change it), None if there is none."""
        key = (res, namespace, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        return self.objects[key].raw

    def bind(self, namespace: str, name: str, node: str) -> dict[str, Any]:
        """Bind a pod to `node` as its ``binding`` subresource does: ``spec.nodeName`` and
        the ``PodScheduled`` condition ``True`` in one write (no new generation); 409 if it
        is bound already."""
        key = (PODS, namespace, name)
        pod = copy.deepcopy(self._current(key))
        if pod["spec"].get("nodeName"):
            raise api_error(
                409,
                "Conflict",
                f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"',
            )
        pod["spec"]["nodeName"] = node
        _set_condition(pod, {"type": "PodScheduled", "status": "True"})
        return self._write(key, pod, "MODIFIED")

    def unschedulable(self, namespace: str, name: str, message: str) -> dict[str, Any]:
        """Say on the pod that it fits no node, as the kube-scheduler does: the
        ``PodScheduled`` condition ``False``, reason ``Unschedulable``, with `message`."""
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
        }
        key = (PODS, namespace, name)
        pod = copy.deepcopy(self._current(key))
        _set_condition(pod, condition)
        return self._write(key, pod, "MODIFIED")

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Run `fn` in the serving loop after the callbacks already due (a failure is
        recorded as the emulator's own error)."""
        asyncio.get_running_loop().call_soon(self._safely, fn)

    # -- internals --------------------------------------------------------------------------

    def _info(self, res: kmock.resource) -> kmock.ResourceInfo:
        if res not in self.resources:
            raise api_error(404, "NotFound", f"the server has no resource {res.plural}")
        return self.resources[res]

    @staticmethod
    def _gv(res: kmock.resource) -> str:
        return f"{res.group}/{res.version}" if res.group else str(res.version)

    def _current(self, key: Key) -> dict[str, Any]:
        self._info(key[0])
        if key not in self.objects or self.objects[key].deleted:
            raise api_error(404, "NotFound", f'{key[0].plural} "{key[2]}" not found')
        return self.objects[key].raw

    def _register(self, crd: Mapping[str, Any]) -> None:
        """Serve the CRD's resource (every version) from now on, pruned and defaulted by
        its schema."""
        spec, names = crd["spec"], crd["spec"]["names"]
        for version in spec["versions"]:
            res = kmock.resource(spec["group"], version["name"], names["plural"])
            self.resources[res] = kmock.ResourceInfo(
                kind=names["kind"],
                singular=names.get("singular") or names["kind"].lower(),
                namespaced=spec.get("scope") == "Namespaced",
                verbs=set(VERBS),
                shortnames=set(names.get("shortNames") or []),
                categories=set(names.get("categories") or []),
                subresources=set(version.get("subresources") or {}),
            )
            self._columns[res] = list(version.get("additionalPrinterColumns") or [])
            if schema := (version.get("schema") or {}).get("openAPIV3Schema"):
                self._schemas[res] = schema

    def _update(
        self, key: Key, compute: Callable[[dict[str, Any]], Any], subresource: str | None
    ) -> dict[str, Any]:
        """Write compute(current); the status changes only through the status subresource.
        `compute` must leave `current` unchanged (it is the stored object, not a copy: a
        copy of a workflow of thousands of nodes at each write was most of its cost)."""
        has_status = "status" in self._info(key[0]).subresources
        if subresource not in (None, "status") or (subresource and not has_status):
            raise api_error(404, "NotFound", f"the server has no subresource {subresource}")
        current = self._current(key)
        try:
            new = compute(current)
        except PatchFailed as exc:
            raise api_error(422, "Invalid", str(exc)) from None
        if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
            raise api_error(400, "BadRequest", "the patched object is no JSON object")
        version = new.get("metadata", {}).get("resourceVersion")
        if version is not None and version != current["metadata"]["resourceVersion"]:
            raise api_error(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {key[0].plural} "{key[2]}": the object has '
                "been modified; please apply your changes to the latest version and try again",
            )
        body = current if subresource == "status" else new
        status = new if subresource == "status" or not has_status else current
        new = {k: v for k, v in body.items() if k != "status"}
        if "status" in status:
            new["status"] = status["status"]
        kept = ("name", "namespace", "uid", "creationTimestamp", "generation", "resourceVersion")
        new["metadata"] = {
            **new.get("metadata", {}),
            **{k: current["metadata"][k] for k in kept if k in current["metadata"]},
        }
        if key[0] in self._schemas:
            new = structural(self._schemas[key[0]], new)
        if new == current:
            return copy.deepcopy(current)  # a no-op: no resourceVersion, no event
        if {k: v for k, v in new.items() if k not in ("metadata", "status")} != {
            k: v for k, v in current.items() if k not in ("metadata", "status")
        }:
            new["metadata"]["generation"] = current["metadata"]["generation"] + 1
        gone = current["metadata"].get("finalizers") and not new["metadata"].get("finalizers")
        if new["metadata"].get("deletionTimestamp") and gone:  # (the last finalizer went)
            return self._remove(key, new)
        return self._write(key, new, "MODIFIED")

    def _remove(self, key: Key, obj: dict[str, Any]) -> dict[str, Any]:
        """Delete at once, then collect the objects it owns (as the garbage collector does)."""
        result = self._write(key, obj, "DELETED")
        uid = obj["metadata"]["uid"]
        for dependent, holder in list(self.objects.items()):
            refs = [] if holder.deleted else holder.raw["metadata"].get("ownerReferences") or []
            if any(ref.get("uid") == uid for ref in refs):
                self.delete(*dependent)
        return result

    def _write(self, key: Key, obj: dict[str, Any], etype: str) -> dict[str, Any]:
        """Store `obj` under a new resourceVersion and tell the watches and subscribers."""
        res = key[0]
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        before = None
        if key in self.objects and not self.objects[key].deleted:
            before = self.objects[key].raw["metadata"].get("labels") or {}
        if key not in self.objects:
            self.objects[key] = obj
        else:
            self.objects[key].history.append(obj)
        if etype == "DELETED":
            self.objects[key].delete()  # kmock's soft deletion: the history stays
        log = self._log.setdefault(res, collections.deque(maxlen=WATCH_WINDOW))
        if len(log) == log.maxlen:
            self._gone[res] = log[0][0]
        after = obj["metadata"].get("labels") or {}
        change = Change(etype, _line(etype, obj), before if etype != "ADDED" else None, after)
        log.append((self._rv, key[1], change))
        for res_, namespace, selector, queue in self._watches:
            if res_ != res or namespace not in (None, key[1]):
                continue
            if (chunk := change.seen_by(selector)) is not None:
                queue.put_nowait(chunk)
        loop = asyncio.get_running_loop()
        for subscriber in self._subscribers:
            loop.call_soon(self._safely, subscriber, res, etype, copy.deepcopy(obj))
        return copy.deepcopy(obj)

    def _safely(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn` in the loop; a failure is recorded as the emulator's own error."""
        try:
            fn(*args)
        except Exception:
            self.internal_errors.append(traceback.format_exc())


def _set_condition(obj: dict[str, Any], condition: dict[str, Any]) -> None:
    """Put `condition` in ``status.conditions`` in place of the one of its type; its
    lastTransitionTime moves only when its status does."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    old = next((c for c in conditions if c.get("type") == condition["type"]), None)
    moved = old is None or old.get("status") != condition["status"]
    stamp = now() if moved else old.get("lastTransitionTime", now())  # type: ignore[union-attr]
    new = {**condition, "lastProbeTime": None, "lastTransitionTime": stamp}
    conditions[:] = [c for c in conditions if c.get("type") != condition["type"]] + [new]
