"""Proofs that the kmock-based API server emulator behaves like a real API server.

Together they cover the gaps of plain kmock 0.8 (comments mark what kmock did
instead). The clients are the ones the operator will use: the ``kubernetes``
Python client, raw HTTP, kopf (in ``KopfRunner``) and the real ``kubectl``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import json
import logging
import shutil
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import aiohttp
import kmock
import kopf
import kubernetes
import pytest
import yaml
from kopf.testing import KopfRunner

from tests.k8s import (
    ApiServer,
    SimKubelet,
    api_error,
    apiserver_fixture,
    make_crd,
    running_apiserver,
)
from tests.k8s.apiserver import PODS, parse_route

GROUP, VERSION, PLURAL = "idlegate.io", "v1alpha1", "dagworkflows"
DWF = f"{GROUP}/{VERSION}/{PLURAL}"
DWF_PATH = f"/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "priority": {"type": "integer", "default": 0},
                "stages": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "tasks": {"type": "integer", "minimum": 1, "default": 1},
                        },
                    },
                },
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}
PRINTER_COLUMNS = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Priority", "type": "integer", "jsonPath": ".spec.priority"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
CRD = make_crd(
    group=GROUP,
    plural=PLURAL,
    kind="DagWorkflow",
    versions=[VERSION],
    short_names=["dwf"],
    categories=["idlegate"],
    printer_columns=PRINTER_COLUMNS,
    schema=SCHEMA,
)

api = apiserver_fixture()


@pytest.fixture()
def crd(api: ApiServer) -> dict[str, Any]:
    return api.create("customresourcedefinitions", CRD)


def pod_body(
    name: str,
    *,
    gated: bool = False,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec},
    }
    if gated:
        body["spec"]["schedulingGates"] = [{"name": "idlegate.io/gate"}]
    return body


def call(
    api: ApiServer,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
    accept: str = "application/json",
    params: dict[str, str] | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """One raw HTTP request; returns (status, decoded JSON or text, headers)."""
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    payload = None if body is None else json.dumps(body).encode()
    conn.request(
        method, path + query, body=payload, headers={"Content-Type": content_type, "Accept": accept}
    )
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    try:
        data: Any = json.loads(raw)
    except ValueError:
        data = raw.decode()
    return resp.status, data, dict(resp.headers)


def watch(
    api: ApiServer,
    path: str,
    params: dict[str, str],
    *,
    count: int | None = None,
    timeout: float = 10.0,
) -> tuple[list[dict[str, Any]], dict[str, str], float]:
    """Read a watch stream until ``count`` events arrive or the server closes it."""
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=timeout)
    started = time.monotonic()
    conn.request("GET", f"{path}?{urllib.parse.urlencode(params)}")
    resp = conn.getresponse()
    events: list[dict[str, Any]] = []
    try:
        while count is None or len(events) < count:
            line = resp.readline()
            if not line:
                break
            events.append(json.loads(line))
    finally:
        conn.close()
    return events, dict(resp.headers), time.monotonic() - started


@pytest.fixture()
def background() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        yield pool


def wait_watching(api: ApiServer, n: int = 1) -> None:
    """Wait until n watch streams on pods are registered server-side."""
    api.wait_for(lambda: len(api.emulator._watchers.get(PODS, ())) >= n, timeout=5)


# ---------------------------------------------------------------------------------------------
# Routing and discovery.
# ---------------------------------------------------------------------------------------------


def test_route_parsing_understands_namespace_paths() -> None:
    assert parse_route("/api/v1/namespaces").plural == "namespaces"
    route = parse_route("/api/v1/namespaces/default")
    assert (route.plural, route.name, route.namespace) == ("namespaces", "default", None)
    route = parse_route("/api/v1/namespaces/default/status")
    assert (route.plural, route.name, route.subresource) == ("namespaces", "default", "status")
    route = parse_route("/api/v1/namespaces/ns1/pods/p1/status")
    assert (route.namespace, route.plural, route.name, route.subresource) == (
        "ns1",
        "pods",
        "p1",
        "status",
    )
    route = parse_route("/apis/idlegate.io/v1alpha1/dagworkflows")
    assert (route.group, route.version, route.plural, route.namespace) == (
        GROUP,
        VERSION,
        PLURAL,
        None,
    )
    assert parse_route("/api/v1/watch/namespaces/x/pods").legacy_watch


def test_core_discovery_reports_v1_group_version(api: ApiServer) -> None:
    status, data, _ = call(api, "GET", "/api/v1")
    assert status == 200 and data["groupVersion"] == "v1"  # kmock 0.8 said "/v1"
    pods = next(r for r in data["resources"] if r["name"] == "pods")
    assert pods["namespaced"] and pods["kind"] == "Pod" and "watch" in pods["verbs"]
    assert any(r["name"] == "pods/status" for r in data["resources"])
    assert call(api, "GET", "/api")[1]["versions"] == ["v1"]
    status, version, _ = call(api, "GET", "/version")
    assert status == 200 and version["major"] == "1"
    status, groups, _ = call(api, "GET", "/apis")
    assert status == 200 and groups["kind"] == "APIGroupList"
    assert "apiextensions.k8s.io" in {g["name"] for g in groups["groups"]}
    assert call(api, "GET", "/openapi/v2")[0] == 404  # tolerated by kubectl --validate=false
    assert call(api, "GET", "/apis/nope.example.com/v1")[0] == 404


def test_namespaces_endpoint_works(api: ApiServer) -> None:
    v1 = kubernetes.client.CoreV1Api(api.api_client())
    names = {ns.metadata.name for ns in v1.list_namespace().items}  # 500 in kmock 0.8
    assert {"default", "kube-system"} <= names
    created = v1.create_namespace({"metadata": {"name": "team-a"}})
    assert created.status.phase == "Active"
    assert v1.read_namespace("team-a").metadata.labels["kubernetes.io/metadata.name"] == "team-a"


def test_posted_crd_is_registered_for_discovery_and_serving(api: ApiServer) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(api.api_client())
    created = ext.create_custom_resource_definition(CRD)
    established = {c.type: c.status for c in created.status.conditions}
    assert established["Established"] == "True"
    status, group, _ = call(api, "GET", f"/apis/{GROUP}")
    assert status == 200 and group["preferredVersion"]["version"] == VERSION
    status, resources, _ = call(api, "GET", f"/apis/{GROUP}/{VERSION}")
    entry = next(r for r in resources["resources"] if r["name"] == PLURAL)
    assert entry["shortNames"] == ["dwf"] and entry["categories"] == ["idlegate"]
    assert entry["kind"] == "DagWorkflow" and entry["namespaced"] is True
    assert f"{PLURAL}/status" in {r["name"] for r in resources["resources"]}
    custom = kubernetes.client.CustomObjectsApi(api.api_client())
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DagWorkflow", "metadata": {"name": "wf"}},
    )
    assert custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "wf")
    ext.delete_custom_resource_definition(CRD["metadata"]["name"])
    api.wait_for(lambda: call(api, "GET", f"/apis/{GROUP}/{VERSION}")[0] == 404)
    assert api.emulator.objects[DWF, "default", "wf"].deleted  # the CRs went with the CRD


# ---------------------------------------------------------------------------------------------
# Object metadata, create, conflicts.
# ---------------------------------------------------------------------------------------------


def test_create_returns_201_and_fills_server_metadata(api: ApiServer) -> None:
    body = pod_body("p1")
    body["metadata"].pop("name")
    body["metadata"]["generateName"] = "task-"
    status, pod, _ = call(api, "POST", "/api/v1/namespaces/default/pods", body)
    assert status == 201  # kmock 0.8: 200
    meta = pod["metadata"]
    assert meta["name"].startswith("task-") and len(meta["name"]) == len("task-") + 5
    assert meta["namespace"] == "default"  # from the URL only
    assert meta["uid"] and meta["resourceVersion"].isdigit() and meta["generation"] == 1
    assert meta["creationTimestamp"].endswith("Z")
    assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod"
    assert pod["status"]["phase"] == "Pending"
    assert call(api, "POST", "/api/v1/namespaces/default/pods", pod_body("p"))[0] == 201
    assert (
        call(api, "POST", "/api/v1/namespaces/default/pods", pod_body("p"))[1]["reason"]
        == "AlreadyExists"
    )
    mismatch = pod_body("q")
    mismatch["metadata"]["namespace"] = "other"
    assert call(api, "POST", "/api/v1/namespaces/default/pods", mismatch)[0] == 400
    assert call(api, "POST", "/api/v1/namespaces/missing/pods", pod_body("q"))[0] == 404
    nameless = pod_body("x")
    nameless["metadata"].pop("name")
    assert call(api, "POST", "/api/v1/namespaces/default/pods", nameless)[0] == 422
    assert call(api, "POST", "/api/v1/namespaces/default/pods", pod_body("Bad_Name"))[0] == 422
    assert (
        call(api, "POST", "/api/v1/namespaces/default/pods", pod_body("l", labels={"n": 1}))[0]
        == 422
    )  # type: ignore[dict-item]


def test_resource_versions_are_unique_and_stale_writes_conflict(api: ApiServer, crd: Any) -> None:
    v1 = kubernetes.client.CoreV1Api(api.api_client())
    first = v1.create_namespaced_pod("default", pod_body("p"))
    second = v1.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    stale = api.get("pods", "default", "p")
    assert stale is not None
    stale["metadata"]["resourceVersion"] = first.metadata.resource_version
    with pytest.raises(kubernetes.client.ApiException) as err:
        v1.replace_namespaced_pod("p", "default", stale)
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "Conflict"
    status, _, _ = call(
        api,
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        {"metadata": {"resourceVersion": first.metadata.resource_version, "labels": {"x": "y"}}},
        content_type="application/merge-patch+json",
    )
    assert status == 409
    # Custom resources require a resourceVersion on PUT; pods do not.
    api.create(DWF, {"metadata": {"name": "wf"}, "spec": {}}, namespace="default")
    status, data, _ = call(
        api,
        "PUT",
        f"{DWF_PATH}/wf",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DagWorkflow", "metadata": {"name": "wf"}},
    )
    assert status == 422 and "resourceVersion" in data["message"]
    current = api.get("pods", "default", "p")
    assert current is not None
    del current["metadata"]["resourceVersion"]
    current["metadata"]["labels"] = {"put": "yes"}
    status, data, _ = call(api, "PUT", "/api/v1/namespaces/default/pods/p", current)
    assert status == 200 and data["metadata"]["labels"] == {"put": "yes"}


# ---------------------------------------------------------------------------------------------
# Patches.
# ---------------------------------------------------------------------------------------------


def test_patch_flavours(api: ApiServer) -> None:
    api.create(
        "pods", pod_body("p", gated=True, labels={"keep": "1", "drop": "1"}), namespace="default"
    )
    path = "/api/v1/namespaces/default/pods/p"
    status, pod, _ = call(
        api,
        "PATCH",
        path,
        {"metadata": {"labels": {"drop": None, "new": "2"}, "finalizers": ["a/one"]}},
        content_type="application/merge-patch+json",
    )
    assert status == 200 and pod["metadata"]["labels"] == {"keep": "1", "new": "2"}
    status, pod, _ = call(
        api,
        "PATCH",
        path,
        {"metadata": {"finalizers": ["a/two"]}},
        content_type="application/strategic-merge-patch+json",
    )
    assert pod["metadata"]["finalizers"] == ["a/one", "a/two"]  # a union, as strategic merge
    status, pod, _ = call(
        api,
        "PATCH",
        path,
        {
            "$setElementOrder/finalizers": ["a/two"],
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a/one", "a/two"]},
            "spec": {"schedulingGates": [{"name": "idlegate.io/gate", "$patch": "delete"}]},
        },
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 200 and pod["spec"].get("schedulingGates") == []
    assert pod["metadata"]["finalizers"] == []
    rv = pod["metadata"]["resourceVersion"]
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/metadata/labels/j", "value": "x"},
    ]
    status, data, _ = call(api, "PATCH", path, ops, content_type="application/json-patch+json")
    assert status == 422 and data["kind"] == "Status"  # kmock 0.8: 500
    ops[0]["value"] = rv
    status, pod, _ = call(api, "PATCH", path, ops, content_type="application/json-patch+json")
    assert status == 200 and pod["metadata"]["labels"]["j"] == "x"
    status, data, _ = call(
        api,
        "PATCH",
        path,
        {"spec": {"schedulingGates": [{"name": "new"}]}},
        content_type="application/merge-patch+json",
    )
    assert status == 422 and "only deletion is allowed" in data["message"]
    status, _, _ = call(
        api,
        "PATCH",
        path,
        {"spec": {"containers": [{"name": "x", "image": "y"}]}},
        content_type="application/merge-patch+json",
    )
    assert status == 422  # pod specs are immutable but for a few fields
    assert call(api, "PATCH", path, {}, content_type="text/plain")[0] == 415
    assert (
        call(
            api,
            "PATCH",
            "/api/v1/namespaces/default/pods/none",
            {},
            content_type="application/merge-patch+json",
        )[0]
        == 404
    )
    no_op = call(
        api,
        "PATCH",
        path,
        {"metadata": {"labels": {"j": "x"}}},
        content_type="application/merge-patch+json",
    )[1]
    assert no_op["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]


def test_status_subresource_and_generation(api: ApiServer, crd: Any) -> None:
    custom = kubernetes.client.CustomObjectsApi(api.api_client())
    obj = custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DagWorkflow",
            "metadata": {"name": "wf"},
            "spec": {"priority": 1},
            "status": {"phase": "ignored on create"},
        },
    )
    assert "status" not in obj and obj["metadata"]["generation"] == 1
    obj = custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "wf", {"spec": {"priority": 2}, "status": {"phase": "X"}}
    )
    assert obj["metadata"]["generation"] == 2 and "status" not in obj  # status via main: ignored
    obj = custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "wf",
        {"spec": {"priority": 99}, "status": {"phase": "Running"}},
    )
    assert obj["status"] == {"phase": "Running"} and obj["spec"]["priority"] == 2
    assert obj["metadata"]["generation"] == 2  # status writes do not bump generation
    obj["status"] = {"phase": "Done"}
    obj = custom.replace_namespaced_custom_object_status(
        GROUP, VERSION, "default", PLURAL, "wf", obj
    )
    assert obj["status"] == {"phase": "Done"} and obj["metadata"]["generation"] == 2
    obj = custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "wf", {"metadata": {"labels": {"a": "b"}}}
    )
    assert obj["metadata"]["generation"] == 2  # metadata writes do not bump generation
    assert call(api, "GET", f"{DWF_PATH}/wf/status")[1]["status"] == {"phase": "Done"}
    api.create("configmaps", {"metadata": {"name": "c"}, "data": {}}, namespace="default")
    assert (
        call(
            api,
            "PATCH",
            "/api/v1/namespaces/default/configmaps/c/status",
            {},
            content_type="application/merge-patch+json",
        )[0]
        == 404
    )


def test_schema_defaulting_pruning_and_validation(api: ApiServer, crd: Any) -> None:
    obj = api.create(
        DWF,
        {"metadata": {"name": "wf"}, "spec": {"stages": [{"name": "a"}], "unknown": 1}},
        namespace="default",
    )
    assert obj["spec"] == {"stages": [{"name": "a", "tasks": 1}], "priority": 0}
    status, data, _ = call(
        api, "POST", DWF_PATH, {"metadata": {"name": "bad"}, "spec": {"priority": "high"}}
    )
    assert status == 422 and "spec.priority" in data["message"]
    status, data, _ = call(
        api, "POST", DWF_PATH, {"metadata": {"name": "bad"}, "spec": {"stages": [{"tasks": 0}]}}
    )
    assert status == 422


# ---------------------------------------------------------------------------------------------
# Lists and selectors.
# ---------------------------------------------------------------------------------------------


def test_list_has_kind_version_and_selectors_work(api: ApiServer) -> None:
    for i in range(6):
        api.create(
            "pods",
            pod_body(
                f"p{i}", labels={"tier": "a" if i % 2 else "b", **({"odd": "y"} if i % 2 else {})}
            ),
            namespace="default",
        )
    api.create("namespaces", {"metadata": {"name": "other"}})
    api.create("pods", pod_body("elsewhere"), namespace="other")
    status, data, _ = call(api, "GET", "/api/v1/namespaces/default/pods")
    assert status == 200 and data["kind"] == "PodList" and data["apiVersion"] == "v1"
    assert data["metadata"]["resourceVersion"] == api.emulator.resource_version
    assert len(data["items"]) == 6 and len(call(api, "GET", "/api/v1/pods")[1]["items"]) == 7

    def names(**params: str) -> list[str]:
        found = call(api, "GET", "/api/v1/namespaces/default/pods", params=params)[1]["items"]
        return [p["metadata"]["name"] for p in found]

    assert names(labelSelector="tier=a") == ["p1", "p3", "p5"]
    assert names(labelSelector="tier!=a") == ["p0", "p2", "p4"]
    assert names(labelSelector="tier in (a,b),!odd") == ["p0", "p2", "p4"]
    assert names(labelSelector="odd") == ["p1", "p3", "p5"]
    assert names(labelSelector="tier notin (a)") == ["p0", "p2", "p4"]
    assert names(fieldSelector="metadata.name=p2") == ["p2"]
    assert names(fieldSelector="status.phase=Pending,metadata.name!=p0")[:1] == ["p1"]
    assert call(api, "GET", "/api/v1/pods", params={"labelSelector": "a in (b"})[0] == 400
    page1 = call(api, "GET", "/api/v1/namespaces/default/pods", params={"limit": "4"})[1]
    assert len(page1["items"]) == 4 and page1["metadata"]["continue"]
    page2 = call(
        api,
        "GET",
        "/api/v1/namespaces/default/pods",
        params={"limit": "4", "continue": page1["metadata"]["continue"]},
    )[1]
    assert [p["metadata"]["name"] for p in page2["items"]] == ["p4", "p5"]
    assert not page2["metadata"].get("continue")


# ---------------------------------------------------------------------------------------------
# Watches.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["true", "True", "1"])
def test_watch_flag_spellings_and_content_type(api: ApiServer, flag: str) -> None:
    api.create("pods", pod_body("p"), namespace="default")
    events, headers, _ = watch(api, "/api/v1/namespaces/default/pods", {"watch": flag}, count=1)
    assert headers["Content-Type"].startswith("application/json")
    assert events == [{"type": "ADDED", "object": api.get("pods", "default", "p")}]


def test_kubernetes_client_watch_with_timeout(api: ApiServer, background: Any) -> None:
    v1 = kubernetes.client.CoreV1Api(api.api_client())
    api.create("pods", pod_body("before"), namespace="default")
    started = time.monotonic()
    stream = kubernetes.watch.Watch().stream(v1.list_namespaced_pod, "default", timeout_seconds=1)
    seen = [(e["type"], e["object"].metadata.name) for e in stream]  # ends by timeoutSeconds
    assert seen == [("ADDED", "before")]
    assert 0.9 < time.monotonic() - started < 3
    assert [r.params["watch"] for r in api.emulator[kmock.action.WATCH]] == ["true"]


def test_watch_resource_version_replay_and_namespaces(api: ApiServer, background: Any) -> None:
    api.create("namespaces", {"metadata": {"name": "other"}})
    start_rv = api.emulator.resource_version
    api.create("pods", pod_body("a"), namespace="default")  # namespace only from the call/URL
    api.patch("pods", "default", "a", {"metadata": {"labels": {"v": "2"}}})
    api.create("pods", pod_body("x"), namespace="other")
    api.delete("pods", "default", "a")
    events, _, _ = watch(
        api,
        "/api/v1/namespaces/default/pods",
        {"watch": "true", "resourceVersion": start_rv},
        count=3,
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
    ]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3
    future = background.submit(
        watch,
        api,
        "/api/v1/namespaces/default/pods",
        {"watch": "true", "resourceVersion": api.emulator.resource_version},
        count=1,
    )
    wait_watching(api)
    api.create("pods", pod_body("ignored"), namespace="other")
    body = pod_body("b")
    assert "namespace" not in body["metadata"]
    assert call(api, "POST", "/api/v1/namespaces/default/pods", body)[0] == 201
    events, _, _ = future.result(10)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b")]


def test_watch_bookmarks_initial_events_and_timeout(api: ApiServer) -> None:
    api.emulator.bookmark_interval = 0.2
    api.create("pods", pod_body("a"), namespace="default")
    events, _, elapsed = watch(
        api,
        "/api/v1/pods",
        {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "timeoutSeconds": "1",
        },
    )
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert sum(1 for e in events if e["type"] == "BOOKMARK") >= 2  # the periodic ones too
    assert all(e["object"]["metadata"]["resourceVersion"] for e in events)
    assert 0.9 < elapsed < 3  # timeoutSeconds is honoured


def test_watch_with_selector_reports_transitions(api: ApiServer, background: Any) -> None:
    future = background.submit(
        watch,
        api,
        "/api/v1/namespaces/default/pods",
        {"watch": "true", "labelSelector": "app=x"},
        count=3,
    )
    wait_watching(api)
    api.create("pods", pod_body("p"), namespace="default")
    api.patch("pods", "default", "p", {"metadata": {"labels": {"app": "x"}}})
    api.patch("pods", "default", "p", {"metadata": {"labels": {"app": "x", "more": "1"}}})
    api.patch("pods", "default", "p", {"metadata": {"labels": {"app": "y"}}})
    events, _, _ = future.result(10)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]


def test_watch_from_compacted_version_is_gone() -> None:
    with running_apiserver(event_window=5) as server:
        early = server.emulator.resource_version
        for i in range(10):
            server.create("configmaps", {"metadata": {"name": f"c{i}"}}, namespace="default")
        events, _, _ = watch(
            server, "/api/v1/configmaps", {"watch": "true", "resourceVersion": early}
        )
        assert len(events) == 1 and events[0]["type"] == "ERROR"
        assert events[0]["object"]["code"] == 410


# ---------------------------------------------------------------------------------------------
# Deletion: finalizers, garbage collection, cascades.
# ---------------------------------------------------------------------------------------------


def test_delete_with_finalizers(api: ApiServer, background: Any) -> None:
    api.create(
        "configmaps",
        {"metadata": {"name": "c", "finalizers": ["idlegate.io/x"]}},
        namespace="default",
    )
    future = background.submit(
        watch,
        api,
        "/api/v1/namespaces/default/configmaps",
        {"watch": "true", "resourceVersion": api.emulator.resource_version},
        count=2,
    )
    api.wait_for(lambda: api.emulator._watchers.get(api.emulator.resolve("configmaps")))
    status, obj, _ = call(api, "DELETE", "/api/v1/namespaces/default/configmaps/c")
    assert status == 200 and obj["metadata"]["deletionTimestamp"]
    assert api.get("configmaps", "default", "c") is not None  # held by the finalizer
    status, data, _ = call(
        api,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/c",
        {"metadata": {"finalizers": ["idlegate.io/x", "idlegate.io/y"]}},
        content_type="application/merge-patch+json",
    )
    assert status == 422 and "no new finalizers" in data["message"]
    api.patch("configmaps", "default", "c", {"metadata": {"finalizers": None}})
    assert api.get("configmaps", "default", "c") is None
    events, _, _ = future.result(10)
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    assert api.emulator.objects["v1/configmaps", "default", "c"].deleted


def owner_ref(owner: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        **extra,
    }


def test_owner_reference_garbage_collection(api: ApiServer, crd: Any) -> None:
    wf = api.create(DWF, {"metadata": {"name": "wf"}, "spec": {}}, namespace="default")
    other = api.create(DWF, {"metadata": {"name": "other"}, "spec": {}}, namespace="default")
    for name, refs in [
        ("only", [owner_ref(wf, controller=True)]),
        ("shared", [owner_ref(wf), owner_ref(other)]),
    ]:
        body = pod_body(name)
        body["metadata"]["ownerReferences"] = refs
        api.create("pods", body, namespace="default")
    api.delete(DWF, "default", "wf")
    api.wait_for(lambda: api.get("pods", "default", "only") is None)
    shared = api.wait_for(
        lambda: (
            (p := api.get("pods", "default", "shared"))
            and len(p["metadata"]["ownerReferences"]) == 1
            and p
        )
    )
    assert shared["metadata"]["ownerReferences"][0]["uid"] == other["metadata"]["uid"]
    # Orphan propagation keeps the dependents and drops the references.
    api.delete(DWF, "default", "other", propagation="Orphan")
    api.wait_for(lambda: "ownerReferences" not in api.get("pods", "default", "shared")["metadata"])
    # A dependent whose owner does not exist (a wrong uid) is collected.
    dangling = pod_body("dangling")
    dangling["metadata"]["ownerReferences"] = [owner_ref(wf)]
    api.create("pods", dangling, namespace="default")
    api.wait_for(lambda: api.get("pods", "default", "dangling") is None)


def test_foreground_deletion_waits_for_dependents(api: ApiServer, crd: Any) -> None:
    wf = api.create(DWF, {"metadata": {"name": "wf"}, "spec": {}}, namespace="default")
    child = pod_body("child")
    child["metadata"]["ownerReferences"] = [owner_ref(wf, blockOwnerDeletion=True)]
    child["metadata"]["finalizers"] = ["idlegate.io/hold"]
    api.create("pods", child, namespace="default")
    status, obj, _ = call(api, "DELETE", f"{DWF_PATH}/wf", {"propagationPolicy": "Foreground"})
    assert status == 200 and "foregroundDeletion" in obj["metadata"]["finalizers"]
    api.wait_for(lambda: api.get("pods", "default", "child")["metadata"].get("deletionTimestamp"))
    assert api.get(DWF, "default", "wf") is not None  # blocked by its dependent
    api.patch("pods", "default", "child", {"metadata": {"finalizers": None}})
    api.wait_for(lambda: api.get(DWF, "default", "wf") is None)


def test_namespace_deletion_cascades(api: ApiServer) -> None:
    api.create("namespaces", {"metadata": {"name": "tmp"}})
    api.create("pods", pod_body("p"), namespace="tmp")
    api.create(
        "configmaps", {"metadata": {"name": "held", "finalizers": ["x.io/y"]}}, namespace="tmp"
    )
    assert api.delete("namespaces", None, "tmp")["status"]["phase"] == "Terminating"
    api.wait_for(lambda: api.get("pods", "tmp", "p") is None)
    assert call(api, "POST", "/api/v1/namespaces/tmp/pods", pod_body("late"))[0] == 403
    assert api.get("namespaces", None, "tmp") is not None  # held by the finalized configmap
    api.patch("configmaps", "tmp", "held", {"metadata": {"finalizers": []}})
    api.wait_for(lambda: api.get("namespaces", None, "tmp") is None)


# ---------------------------------------------------------------------------------------------
# Events, tables, request history, failure injection.
# ---------------------------------------------------------------------------------------------


def test_events_are_accepted_in_both_apis(api: ApiServer) -> None:
    status, event, _ = call(
        api,
        "POST",
        "/api/v1/namespaces/default/events",
        {
            "metadata": {"generateName": "wf."},
            "involvedObject": {"kind": "DagWorkflow", "name": "wf", "namespace": "default"},
            "reason": "Started",
            "message": "hello",
            "type": "Normal",
        },
    )
    assert status == 201 and event["metadata"]["name"].startswith("wf.")
    status, _, _ = call(
        api,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        {
            "metadata": {"name": "e2"},
            "regarding": {"kind": "Pod", "name": "p"},
            "reason": "X",
            "note": "n",
            "type": "Normal",
            "action": "A",
            "eventTime": "2025-01-01T00:00:00.000000Z",
            "reportingController": "idlegate.io/operator",
            "reportingInstance": "i",
        },
    )
    assert status == 201
    found = call(
        api,
        "GET",
        "/api/v1/namespaces/default/events",
        params={"fieldSelector": "involvedObject.name=wf"},
    )[1]["items"]
    assert [e["reason"] for e in found] == ["Started"]


def test_server_side_table_printing(api: ApiServer, crd: Any) -> None:
    api.create(DWF, {"metadata": {"name": "wf"}, "spec": {"priority": 7}}, namespace="default")
    api.patch(DWF, "default", "wf", {"status": {"phase": "Running"}}, subresource="status")
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    status, table, _ = call(api, "GET", DWF_PATH, accept=accept)
    assert status == 200 and table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Phase", "Priority", "Age"]
    assert table["rows"][0]["cells"][:3] == ["wf", "Running", 7]
    assert table["rows"][0]["object"]["metadata"]["name"] == "wf"
    api.create("pods", pod_body("p", gated=True), namespace="default")
    pods = call(api, "GET", "/api/v1/namespaces/default/pods/p", accept=accept)[1]
    assert pods["rows"][0]["cells"][:3] == ["p", "0/1", "SchedulingGated"]


def test_request_history_is_bounded_and_kmock_dsl_injects_failures(api: ApiServer) -> None:
    api.emulator.request_history = 10
    for _ in range(30):
        call(api, "GET", "/api/v1/namespaces/default/pods")
    assert len(api.emulator._requests) <= 20
    assert api.emulator.request_counts[("list", "pods")] == 30
    api.create("pods", pod_body("p"), namespace="default")
    path = "/api/v1/namespaces/default/pods/p"
    # One-shot injection of a realistic API error, then the emulated behaviour again.
    once = api.emulator[kmock.method.PATCH, kmock.resource("", "v1", "pods")][:1] << api_error(
        409, "Conflict", "injected"
    )
    status, data, _ = call(api, "PATCH", path, {}, content_type="application/merge-patch+json")
    assert (status, data["reason"], data["message"]) == (409, "Conflict", "injected")
    assert call(api, "PATCH", path, {}, content_type="application/merge-patch+json")[0] == 200
    assert len(once) == 1
    # A permanent raw HTTP failure, until the test's reactions are cleared.
    api.emulator[kmock.method.GET, kmock.resource("", "v1", "pods")] << 503
    assert call(api, "GET", path)[0] == 503
    api.emulator._payloads.clear()
    assert call(api, "GET", path)[0] == 200


def test_api_server_restart_keeps_state_and_drops_watches(api: ApiServer, background: Any) -> None:
    created = api.create("pods", pod_body("p"), namespace="default")
    future = background.submit(watch, api, "/api/v1/pods", {"watch": "true"})
    wait_watching(api)
    port = api.port
    api.restart()
    events, _, _ = future.result(10)  # the stream ended with the restart
    assert [e["type"] for e in events] == ["ADDED"]
    assert api.port == port and api.get("pods", "default", "p") == created
    patched = kubernetes.client.CoreV1Api(api.api_client()).patch_namespaced_pod(
        "p", "default", {"metadata": {"labels": {"after": "restart"}}}
    )
    assert int(patched.metadata.resource_version) > int(created["metadata"]["resourceVersion"])
    events, _, _ = watch(
        api,
        "/api/v1/pods",
        {"watch": "true", "resourceVersion": created["metadata"]["resourceVersion"]},
        count=1,
    )
    assert events[0]["object"]["metadata"]["labels"] == {"after": "restart"}


# ---------------------------------------------------------------------------------------------
# Performance: the emulator keeps O(1) state per request.
# ---------------------------------------------------------------------------------------------


def test_thousand_pods_create_list_watch_quickly(api: ApiServer) -> None:
    async def scenario() -> dict[str, float]:
        timings: dict[str, float] = {}
        async with aiohttp.ClientSession(api.url) as session:
            seen: list[dict[str, Any]] = []

            async def watcher() -> None:
                async with session.get(
                    "/api/v1/namespaces/default/pods", params={"watch": "true"}
                ) as resp:
                    async for line in resp.content:
                        seen.append(json.loads(line))
                        if len(seen) == 1000:
                            return

            task = asyncio.create_task(watcher())
            await asyncio.sleep(0.05)
            started = time.monotonic()
            limit = asyncio.Semaphore(16)

            async def create(i: int) -> None:
                async with (
                    limit,
                    session.post(
                        "/api/v1/namespaces/default/pods", json=pod_body(f"p{i:04d}")
                    ) as resp,
                ):
                    assert resp.status == 201

            await asyncio.gather(*(create(i) for i in range(1000)))
            timings["create"] = time.monotonic() - started
            await asyncio.wait_for(task, 30)
            timings["watch"] = time.monotonic() - started
            started = time.monotonic()
            async with session.get("/api/v1/pods") as resp:
                assert len((await resp.json())["items"]) == 1000
            timings["list"] = time.monotonic() - started
        return timings

    timings = asyncio.run(scenario())
    print(
        f"\n1000 pods: create {timings['create']:.2f}s, all watched at {timings['watch']:.2f}s, "
        f"list {timings['list']:.3f}s"
    )
    assert timings["watch"] < 20 and timings["list"] < 2
    assert len(api.emulator._requests) <= 2 * api.emulator.request_history


# ---------------------------------------------------------------------------------------------
# The simulated kubelet.
# ---------------------------------------------------------------------------------------------


def test_kubelet_keeps_gated_pods_pending_then_runs_them(api: ApiServer, background: Any) -> None:
    future = background.submit(
        watch,
        api,
        "/api/v1/namespaces/default/pods",
        {"watch": "true", "fieldSelector": "metadata.name=task"},
        count=6,
    )
    wait_watching(api)
    with SimKubelet(api, time_factor=0.1, startup_delay=0.5):
        api.create(
            "pods",
            pod_body("task", gated=True, annotations={"idlegate.io/duration-seconds": "3"}),
            namespace="default",
        )
        time.sleep(0.3)
        pod = api.get("pods", "default", "task")
        assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
        assert pod["status"]["conditions"][0]["reason"] == "SchedulingGated"
        v1 = kubernetes.client.CoreV1Api(api.api_client())
        v1.patch_namespaced_pod(
            "task", "default", [{"op": "remove", "path": "/spec/schedulingGates/0"}]
        )
        events, _, _ = future.result(10)
    phases = [e["object"]["status"]["phase"] for e in events]
    assert phases[0] == "Pending" and phases[-1] == "Succeeded" and "Running" in phases
    running = next(e["object"] for e in events if e["object"]["status"]["phase"] == "Running")
    assert running["spec"]["nodeName"] == "sim-node-1" and running["status"]["startTime"]
    assert running["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    assert {c["type"]: c["status"] for c in running["status"]["conditions"]}["Ready"] == "True"
    done = events[-1]["object"]["status"]
    terminated = done["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 0 and terminated["reason"] == "Completed"
    assert api.get("nodes", None, "sim-node-1")["status"]["capacity"]["pods"] == "110"


def test_kubelet_failure_injection(api: ApiServer) -> None:
    def fail_named_bad(pod: dict[str, Any]) -> int | None:
        return 42 if pod["metadata"]["name"].startswith("bad") else None

    with SimKubelet(api, time_factor=0.01, failure=fail_named_bad):
        api.create("pods", pod_body("ok"), namespace="default")
        api.create(
            "pods",
            pod_body("annotated", annotations={"idlegate.io/exit-code": "3"}),
            namespace="default",
        )
        api.create("pods", pod_body("bad-one"), namespace="default")
        env_pod = pod_body("env")
        env_pod["spec"]["containers"][0]["env"] = [{"name": "TASK_DURATION", "value": "80"}]
        api.create("pods", env_pod, namespace="default")

        def phase(name: str) -> str:
            return api.get("pods", "default", name)["status"]["phase"]

        api.wait_for(
            lambda: all(
                phase(n) in ("Succeeded", "Failed") for n in ("ok", "annotated", "bad-one")
            ),
            timeout=5,
        )
        assert phase("env") == "Running"  # 80 simulated seconds = 0.8 s
        api.wait_for(lambda: phase("env") == "Succeeded", timeout=5)
    codes = {
        n: api.get("pods", "default", n)["status"]["containerStatuses"][0]["state"]["terminated"][
            "exitCode"
        ]
        for n in ("ok", "annotated", "bad-one")
    }
    assert codes == {"ok": 0, "annotated": 3, "bad-one": 42}
    assert api.get("pods", "default", "bad-one")["status"]["phase"] == "Failed"
    with SimKubelet(api, node_name="flaky", time_factor=0.01, failure_rate=1.0):
        api.create("pods", pod_body("flaky"), namespace="default")
        api.wait_for(lambda: api.get("pods", "default", "flaky")["status"]["phase"] == "Failed")


def test_kubelet_capacity_eviction_and_graceful_deletion(api: ApiServer) -> None:
    with SimKubelet(api, time_factor=0.01, max_pods=1) as kubelet:
        api.create(
            "pods",
            pod_body("first", annotations={"idlegate.io/duration-seconds": "1000"}),
            namespace="default",
        )
        api.wait_for(lambda: api.get("pods", "default", "first")["status"]["phase"] == "Running")
        api.create("pods", pod_body("second"), namespace="default")
        api.wait_for(
            lambda: any(
                c.get("reason") == "Unschedulable"
                for c in api.get("pods", "default", "second")["status"].get("conditions", [])
            )
        )
        kubelet.evict("default", "first")
        assert api.get("pods", "default", "first")["status"]["reason"] == "Evicted"
        api.wait_for(lambda: api.get("pods", "default", "second")["status"]["phase"] == "Succeeded")
        api.create(
            "pods",
            pod_body("third", annotations={"idlegate.io/duration-seconds": "1000"}),
            namespace="default",
        )
        api.wait_for(lambda: api.get("pods", "default", "third")["status"]["phase"] == "Running")
        deleting = api.delete("pods", "default", "third")
        assert deleting["metadata"]["deletionTimestamp"]  # graceful: the kubelet finishes it
        api.wait_for(lambda: api.get("pods", "default", "third") is None)


def test_kubelet_restart_resumes_running_pods(api: ApiServer) -> None:
    kubelet = SimKubelet(api, time_factor=0.01).start()
    api.create(
        "pods",
        pod_body("long", annotations={"idlegate.io/duration-seconds": "40"}),
        namespace="default",
    )
    api.wait_for(lambda: api.get("pods", "default", "long")["status"]["phase"] == "Running")
    kubelet.stop()
    time.sleep(0.5)  # the pod would have finished by now, but nobody runs it
    assert api.get("pods", "default", "long")["status"]["phase"] == "Running"
    with SimKubelet(api, time_factor=0.01):
        api.wait_for(
            lambda: api.get("pods", "default", "long")["status"]["phase"] == "Succeeded", timeout=5
        )


# ---------------------------------------------------------------------------------------------
# Real clients: kubectl and kopf.
# ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_apply_and_get_with_printer_columns(api: ApiServer) -> None:
    out = api.kubectl("apply", "--validate=false", "-f", "-", input=yaml.safe_dump(CRD)).stdout
    assert "created" in out
    workflow = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DagWorkflow",
        "metadata": {"name": "wf1"},
        "spec": {"priority": 5},
    }
    out = api.kubectl("apply", "--validate=false", "-f", "-", input=yaml.safe_dump(workflow)).stdout
    assert "dagworkflow.idlegate.io/wf1 created" in out
    api.patch(DWF, "default", "wf1", {"status": {"phase": "Running"}}, subresource="status")
    workflow["spec"]["priority"] = 6
    out = api.kubectl("apply", "--validate=false", "-f", "-", input=yaml.safe_dump(workflow)).stdout
    assert "configured" in out
    lines = api.kubectl("get", "dwf").stdout.splitlines()
    assert lines[0].split() == ["NAME", "PHASE", "PRIORITY", "AGE"]
    assert lines[1].split()[:3] == ["wf1", "Running", "6"]
    assert "wf1" in api.kubectl("get", "idlegate").stdout  # by category
    assert "DagWorkflow" in api.kubectl("api-resources", f"--api-group={GROUP}").stdout
    api.create("pods", pod_body("gated", gated=True), namespace="default")
    assert "SchedulingGated" in api.kubectl("get", "pods").stdout
    assert "deleted" in api.kubectl("delete", "dwf", "wf1").stdout
    assert api.get(DWF, "default", "wf1") is None


def test_kopf_operator_end_to_end(api: ApiServer, crd: Any) -> None:
    registry = kopf.OperatorRegistry()
    calls: dict[str, int] = {"create": 0, "delete": 0}
    lock = threading.Lock()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> Any:
        return api.connection_info()

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.level = logging.INFO
        settings.watching.server_timeout = 10
        settings.persistence.finalizer = "idlegate.io/finalizer"

    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry, id="create")
    def create_fn(body: Any, name: str, namespace: str, patch: Any, **_: Any) -> dict[str, Any]:
        with lock:
            calls["create"] += 1
        pod = pod_body(
            f"{name}-task",
            gated=True,
            labels={"idlegate.io/workflow": name},
            annotations={"idlegate.io/duration-seconds": "10"},
        )
        kopf.adopt(pod, owner=body)
        kubernetes.client.CoreV1Api(api.api_client()).create_namespaced_pod(namespace, pod)
        patch.status["phase"] = "Submitted"
        kopf.info(body, reason="Submitted", message="the task pod is created, gated")
        return {"pod": pod["metadata"]["name"]}

    @kopf.on.field(
        "v1",
        "pods",
        field="status.phase",
        registry=registry,
        labels={"idlegate.io/workflow": kopf.PRESENT},
    )
    def pod_phase(new: Any, labels: dict[str, str], namespace: str, **_: Any) -> None:
        if new in ("Running", "Succeeded", "Failed"):
            kubernetes.client.CustomObjectsApi(
                api.api_client()
            ).patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                labels["idlegate.io/workflow"],
                {"status": {"phase": new}},
            )

    @kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry)
    def delete_fn(**_: Any) -> None:
        with lock:
            calls["delete"] += 1

    args = ["run", "--standalone", "--all-namespaces"]

    def phase() -> str | None:
        return ((api.get(DWF, "default", "wf") or {}).get("status") or {}).get("phase")

    with SimKubelet(api, time_factor=0.01):
        with KopfRunner(args, registry=registry, timeout=30) as runner:
            api.create(
                DWF, {"metadata": {"name": "wf"}, "spec": {"priority": 1}}, namespace="default"
            )
            api.wait_for(lambda: phase() == "Submitted", timeout=15)
            pod = api.get("pods", "default", "wf-task")
            assert pod["status"]["phase"] == "Pending"
            assert pod["metadata"]["ownerReferences"][0]["kind"] == "DagWorkflow"
            workflow = api.get(DWF, "default", "wf")
            assert workflow["metadata"]["finalizers"] == ["idlegate.io/finalizer"]
            assert workflow["status"]["create"] == {"pod": "wf-task"}  # kept by the schema
            event = api.wait_for(
                lambda: api.list("events", "default", field_selector="involvedObject.name=wf")
            )[0]
            assert (event["reason"], event["type"]) == ("Submitted", "Normal")
        assert runner.exit_code == 0 and runner.exception is None
        # The operator restarts: nothing is handled twice, the cluster state is all there.
        with KopfRunner(args, registry=registry, timeout=30) as runner:
            api.wait_for(lambda: api.emulator._watchers.get(PODS), timeout=10)
            api.restart()  # and so does the API server: kopf reconnects and re-watches
            api.patch(
                "pods",
                "default",
                "wf-task",
                [{"op": "remove", "path": "/spec/schedulingGates"}],
                patch_type="json",
            )
            api.wait_for(lambda: phase() == "Succeeded", timeout=15)
            api.delete(DWF, "default", "wf")
            api.wait_for(lambda: api.get(DWF, "default", "wf") is None, timeout=15)
            api.wait_for(lambda: api.get("pods", "default", "wf-task") is None, timeout=5)
        assert runner.exit_code == 0 and runner.exception is None
    assert calls == {"create": 1, "delete": 1}
