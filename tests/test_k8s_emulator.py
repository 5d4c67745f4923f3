"""The test API server of tests/k8s: the semantics it adds to kmock, which the end-to-end
tests rely on without checking them one by one."""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e import wait
from tests.k8s import _tables, apiserver
from tests.k8s._patching import PatchFailed, apply_json_patch, merge_patch
from tests.k8s.airflow_stack import leftovers
from tests.k8s.apiserver import route
from tests.k8s.harness import ApiServer, serving_crd
from tests.k8s.kubelet import CommandKubelet, SimKubelet

# On the wall clock (the kubelet's pods sped up by time_factor), not fake loop time:
# the API emulator and the simulated kubelet are threads of their own serving real
# HTTP, which looptime's fake time of one event loop cannot cover (tests/e2e.py, at SPEED).

DWF = "idlegate.io/v1alpha1/dagworkflows"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    yield from serving_crd(tmp_path_factory.mktemp("k8s"))


def http(api: ApiServer, method: str, path: str, body: Any = None, **headers: str) -> Any:
    """(status, decoded JSON body) of one request."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(api.url + path, data, headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def watch(api: ApiServer, path: str) -> list[tuple[str, str]]:
    """(type, name) of the events of a watch of 1 s (whole seconds, as kube-apiserver takes
    them)."""
    with urllib.request.urlopen(f"{api.url}{path}&timeoutSeconds=1", timeout=10) as response:
        lines = [json.loads(line) for line in response.read().splitlines()]
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in lines]


def pod(name: str, **meta: Any) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "busybox",
        "env": [{"name": "TASK_DURATION_SECONDS", "value": "1"}],
    }
    return {"metadata": {"name": name, **meta}, "spec": {"containers": [container]}}


def test_paths_kmock_cannot_parse_are_routed() -> None:
    assert route("/api/v1/namespaces") == (apiserver.NAMESPACES, None, None, None)
    assert route("/api/v1/namespaces/ns") == (apiserver.NAMESPACES, None, "ns", None)
    assert route(f"/apis/{DWF.replace('/dagworkflows', '')}/namespaces/ns/dagworkflows/w/status")[
        1:
    ] == (
        "ns",
        "w",
        "status",
    )
    assert route("/apis/idlegate.io/v1alpha1") is None  # discovery


def test_discovery_serves_core_v1_and_a_posted_crd(api: ApiServer) -> None:
    assert http(api, "GET", "/api/v1")[1]["groupVersion"] == "v1"  # kmock says "/v1"
    status, doc = http(api, "GET", "/apis/idlegate.io/v1alpha1")
    entries = {r["name"]: r for r in doc["resources"]}
    assert status == 200 and entries["dagworkflows"]["shortNames"] == ["dwf"]
    assert entries["dagworkflows"]["namespaced"] is True and "dagworkflows/status" in entries


def test_create_fills_server_metadata_and_refuses_a_taken_name(api: ApiServer) -> None:
    created = api.create("pods", pod("meta"), "create")
    meta = created["metadata"]
    assert meta["namespace"] == "create" and meta["generation"] == 1 and meta["uid"]
    assert int(meta["resourceVersion"]) > 0 and meta["creationTimestamp"].endswith("Z")
    assert created["status"] == {"phase": "Pending"}
    generated = api.create("events", {"metadata": {"generateName": "kopf-event-"}}, "create")
    assert generated["metadata"]["name"].startswith("kopf-event-")
    status, error = http(api, "POST", "/api/v1/namespaces/create/pods", pod("meta"))
    assert (status, error["reason"]) == (409, "AlreadyExists")


def test_the_audit_tells_each_write_over_http_with_its_user_agent(api: ApiServer) -> None:
    seen: list[apiserver.Write] = []
    stop = api.call(lambda: api.emulator.audit(seen.append))
    try:
        http(api, "GET", "/api/v1/namespaces/audit/pods")  # (a read: not audited)
        http(api, "POST", "/api/v1/namespaces/audit/pods", pod("a"), **{"User-Agent": "one"})
        http(api, "POST", "/api/v1/namespaces/audit/pods", pod("a"), **{"User-Agent": "two"})
        http(api, "DELETE", "/api/v1/namespaces/audit/pods/a", **{"User-Agent": "two"})
    finally:
        api.call(stop)
    assert [(w.user_agent, w.method, w.name, w.status) for w in seen] == [
        ("one", "POST", None, 201),
        ("two", "POST", None, 409),
        ("two", "DELETE", "a", 200),
    ]
    assert {(w.resource, w.namespace) for w in seen} == {(apiserver.PODS, "audit")}


def test_a_failed_json_patch_test_is_422_and_changes_nothing(api: ApiServer) -> None:
    api.create("pods", pod("gated", labels={"a": "b"}), "patch")
    path = "/api/v1/namespaces/patch/pods/gated"
    guard = [
        {"op": "test", "path": "/metadata/labels/a", "value": "x"},
        {"op": "remove", "path": "/metadata/labels"},
    ]
    status, error = http(
        api, "PATCH", path, guard, **{"Content-Type": "application/json-patch+json"}
    )
    assert (status, error["reason"]) == (422, "Invalid")
    assert api.get("pods", "patch", "gated")["metadata"]["labels"] == {"a": "b"}
    merge = {"metadata": {"labels": {"a": None, "c": "d"}}}
    status, patched = http(
        api, "PATCH", path, merge, **{"Content-Type": "application/merge-patch+json"}
    )
    assert status == 200 and patched["metadata"]["labels"] == {"c": "d"}
    status, _ = http(
        api, "PATCH", path, merge, **{"Content-Type": "application/strategic-merge-patch+json"}
    )
    assert status == 415  # refused, rather than applied as something else


def test_status_changes_only_through_its_subresource_and_generation_counts_spec_changes(
    api: ApiServer,
) -> None:
    api.create(DWF, {"metadata": {"name": "w"}, "spec": {"stages": []}}, "status")
    api.patch(
        DWF, "status", "w", {"status": {"phase": "Running"}, "metadata": {"labels": {"x": "y"}}}
    )
    unchanged = api.get(DWF, "status", "w")
    assert "status" not in unchanged and unchanged["metadata"]["generation"] == 1
    api.patch(
        DWF, "status", "w", {"status": {"phase": "Running"}, "spec": {"x": 1}}, subresource="status"
    )
    written = api.get(DWF, "status", "w")
    assert written["status"] == {"phase": "Running"} and "x" not in written["spec"]
    # (a field the schema does not declare is pruned, as kube-apiserver does: no change)
    assert api.patch(DWF, "status", "w", {"spec": {"x": 1}})["metadata"]["generation"] == 1
    assert api.patch(DWF, "status", "w", {"spec": {"suspend": True}})["metadata"]["generation"] == 2


def test_selectors_of_the_equality_kind(api: ApiServer) -> None:
    for name, labels in (("l1", {"app": "a"}), ("l2", {"app": "b"}), ("l3", {})):
        api.create("pods", pod(name, labels=labels), "select")
    names = lambda **sel: [p["metadata"]["name"] for p in api.list("pods", "select", **sel)]  # noqa: E731
    assert names(label_selector="app=a") == ["l1"]
    assert names(label_selector="app,app!=a") == ["l2"] and names(label_selector="!app") == ["l3"]
    assert names(field_selector="metadata.name=l3,metadata.namespace=select") == ["l3"]
    status, _ = http(api, "GET", "/api/v1/namespaces/select/pods?labelSelector=app%20in%20(a)")
    assert status == 400  # set-based: refused rather than matched wrongly


def test_a_watch_from_a_resource_version_sees_only_what_came_after(api: ApiServer) -> None:
    api.create("pods", pod("before"), "watch")
    since = api.create("pods", pod("mark"), "watch")["metadata"]["resourceVersion"]
    api.create("pods", pod("after"), "watch")
    api.delete("pods", "watch", "before")
    assert watch(api, f"/api/v1/namespaces/watch/pods?watch=true&resourceVersion={since}") == [
        ("ADDED", "after"),
        ("DELETED", "before"),
    ]
    assert watch(api, "/api/v1/namespaces/watch/pods?watch=true") == [
        ("ADDED", "after"),
        ("ADDED", "mark"),
    ]


def test_a_watch_with_a_label_selector_sees_objects_come_to_match_and_stop(
    api: ApiServer,
) -> None:
    """As Airflow's KubernetesExecutor watches its pods (``airflow-worker=1,done!=True``):
    a pod relabelled done leaves that watch as DELETED, one relabelled into it is ADDED."""
    since = api.create("pods", pod("other", labels={"w": "2"}), "lw")["metadata"]
    api.create("pods", pod("mine", labels={"w": "1"}), "lw")
    api.patch("pods", "lw", "mine", {"metadata": {"labels": {"done": "True"}}})
    api.patch("pods", "lw", "other", {"metadata": {"labels": {"w": "1"}}})
    api.delete("pods", "lw", "other")
    query = "watch=true&labelSelector=w%3D1%2Cdone%21%3DTrue"
    path = f"/api/v1/namespaces/lw/pods?{query}&resourceVersion={since['resourceVersion']}"
    assert watch(api, path) == [
        ("ADDED", "mine"),
        ("DELETED", "mine"),
        ("ADDED", "other"),
        ("DELETED", "other"),
    ]
    api.create("pods", pod("again", labels={"w": "1"}), "lw")
    assert watch(api, f"/api/v1/namespaces/lw/pods?{query}") == [("ADDED", "again")]
    status, _ = http(api, "GET", "/api/v1/namespaces/lw/pods?watch=true&fieldSelector=a%3Db")
    assert status == 400


def test_a_watch_from_a_forgotten_resource_version_is_gone(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(apiserver, "WATCH_WINDOW", 2)
    with ApiServer(tmp_path) as api:
        first = api.create("pods", pod("p0"), "gone")["metadata"]["resourceVersion"]
        for i in range(1, 4):
            api.create("pods", pod(f"p{i}"), "gone")
        assert watch(api, f"/api/v1/pods?watch=true&resourceVersion={first}") == [("ERROR", "")]


def test_deleting_an_owner_collects_its_dependents_and_finalizers_hold_a_deletion(
    api: ApiServer,
) -> None:
    owner = api.create(DWF, {"metadata": {"name": "owner"}, "spec": {}}, "gc")
    ref = {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "DagWorkflow",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    api.create("pods", pod("owned", ownerReferences=[ref]), "gc")
    api.create("pods", pod("held", finalizers=["x"]), "gc")
    api.delete(DWF, "gc", "owner")
    assert api.get("pods", "gc", "owned") is None
    assert api.delete("pods", "gc", "held")["metadata"]["deletionTimestamp"]
    api.patch("pods", "gc", "held", {"metadata": {"finalizers": None}})
    assert api.get("pods", "gc", "held") is None


def test_the_kubelet_runs_released_pods_and_reports_their_exit_codes(api: ApiServer) -> None:
    api.create(
        "pods",
        {**pod("gated"), "spec": {**pod("")["spec"], "schedulingGates": [{"name": "g"}]}},
        "kubelet",
    )
    api.create("pods", pod("ok"), "kubelet")
    api.create("pods", pod("bad"), "kubelet")
    fail = lambda p: 3 if p["metadata"]["name"] == "bad" else None  # noqa: E731
    with SimKubelet(api, "kubelet", time_factor=0.01, failure=fail):
        deadline = time.monotonic() + 300  # a safety net for a hang, not a bound on speed
        while any(
            api.get("pods", "kubelet", n)["status"]["phase"] in ("Pending", "Running")
            for n in ("ok", "bad")
        ):
            assert time.monotonic() < deadline, "the kubelet did not finish its pods"
            time.sleep(0.01)
    assert api.get("pods", "kubelet", "gated")["status"]["phase"] == "Pending"
    assert api.get("pods", "kubelet", "ok")["status"]["phase"] == "Succeeded"
    bad = api.get("pods", "kubelet", "bad")["status"]
    assert (
        bad["phase"] == "Failed"
        and bad["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    )


def test_the_command_kubelet_runs_a_pods_command_and_kills_it_when_the_pod_goes(
    api: ApiServer, tmp_path
) -> None:
    """As it runs Airflow's pods: ``python`` is its interpreter, the env the container's
    over its own; the exit code ends the pod; deleting a running pod kills its command."""
    marker = tmp_path / "started"

    def command(name: str, code: str) -> dict[str, Any]:
        env = [{"name": "EXIT", "value": "3"}]
        container = {"name": "base", "image": "apache/airflow", "args": ["python", "-c", code]}
        return {"metadata": {"name": name}, "spec": {"containers": [{**container, "env": env}]}}

    exits = "import os, sys; sys.exit(int(os.environ['EXIT']) + int(os.environ['BASE']))"
    hangs = f"import pathlib, time; pathlib.Path({str(marker)!r}).touch(); time.sleep(600)"
    logs = tmp_path / "logs"
    with CommandKubelet(api, "cmd", python=sys.executable, env={"BASE": "1"}, logs=logs):
        api.create("pods", command("exits", exits), "cmd")
        api.create("pods", command("hangs", hangs), "cmd")
        ended = wait(
            lambda: (
                (api.get("pods", "cmd", "exits") or {}).get("status", {}).get("phase") == "Failed"
            ),
            30,
            "the command's pod to fail",
        )
        assert ended
        status = api.get("pods", "cmd", "exits")["status"]
        assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 4
        wait(marker.exists, 30, "the hanging command to start")
        assert len(leftovers(str(marker))) == 1
        api.delete("pods", "cmd", "hangs")
        wait(lambda: not leftovers(str(marker)), 30, "the deleted pod's command to be killed")


def test_tables_carry_the_printer_columns() -> None:
    obj = {
        "metadata": {"name": "w", "creationTimestamp": "2020-01-01T00:00:00Z"},
        "status": {"phase": "Running"},
    }
    columns = [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "JCT", "type": "number", "jsonPath": ".status.jctSeconds"},
    ]
    table = _tables.table([obj], columns)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Phase", "JCT"]
    assert table["rows"][0]["cells"] == ["w", "Running", None]
    assert _tables.table([obj], [])["rows"][0]["cells"][1].endswith("m")  # the age


def test_patches_leave_their_arguments_alone() -> None:
    doc = {"a": {"b": 1, "c": [1, 2]}}
    assert merge_patch(doc, {"a": {"b": None, "c": [3]}}) == {"a": {"c": [3]}}
    assert apply_json_patch(doc, [{"op": "remove", "path": "/a/c/0"}]) == {"a": {"b": 1, "c": [2]}}
    assert doc == {"a": {"b": 1, "c": [1, 2]}}
    with pytest.raises(PatchFailed):
        apply_json_patch(doc, [{"op": "test", "path": "/a/b", "value": 2}])
    with pytest.raises(PatchFailed):
        apply_json_patch(doc, [{"op": "remove", "path": "/nothing"}])


def test_a_lease_is_replaced_only_at_the_resource_version_it_was_read_at(api: ApiServer) -> None:
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    lease = {"metadata": {"name": "elect"}, "spec": {"holderIdentity": "a"}}
    status, created = http(api, "POST", path, lease, **{"Content-Type": "application/json"})
    assert status == 201 and created["kind"] == "Lease"
    read = created["metadata"]["resourceVersion"]
    mine = {**created, "spec": {"holderIdentity": "b"}}
    status, replaced = http(
        api, "PUT", f"{path}/elect", mine, **{"Content-Type": "application/json"}
    )
    assert status == 200 and replaced["spec"] == {"holderIdentity": "b"}
    assert replaced["metadata"]["resourceVersion"] != read
    late = {**created, "spec": {"holderIdentity": "c"}}  # read before b's write
    status, refused = http(
        api, "PUT", f"{path}/elect", late, **{"Content-Type": "application/json"}
    )
    assert (status, refused["reason"]) == (409, "Conflict")
    merge = {"metadata": {"resourceVersion": read}, "spec": {"holderIdentity": "c"}}
    status, refused = http(
        api, "PATCH", f"{path}/elect", merge, **{"Content-Type": "application/merge-patch+json"}
    )
    assert (status, refused["reason"]) == (409, "Conflict")
    assert api.get("leases", "default", "elect")["spec"] == {"holderIdentity": "b"}
    assert "elect" in api.kubectl("get", "leases", "-n", "default").stdout


def test_an_eviction_honours_disruption_budgets_and_the_kubelet_stops_the_pod(
    api: ApiServer,
) -> None:
    # three pods of app=a run (they last 10^6 s); a budget keeps 2 of them available
    long = lambda name: {  # noqa: E731
        **pod(name, labels={"app": "a"}),
        "spec": {
            "terminationGracePeriodSeconds": 20,
            "containers": [{**pod("")["spec"]["containers"][0], "env": []}],
        },
    }
    for name in ("e1", "e2", "e3"):
        api.create("pods", long(name), "evict")
    api.create(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "keep-2"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "a"}}},
        },
        "evict",
    )
    with SimKubelet(api, "evict", durations=lambda p: 1e6, stop_seconds=5, time_factor=0.01):
        wait(
            lambda: all(
                api.get("pods", "evict", n)["status"]["phase"] == "Running"
                for n in ("e1", "e2", "e3")
            ),
            30,
            "the pods running",
        )
        path = "/api/v1/namespaces/evict/pods/{}/eviction"
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "e1"}}
        status, answer = http(api, "POST", path.format("e1"), body)
        assert (status, answer["status"]) == (201, "Success")
        e1 = api.get("pods", "evict", "e1")
        assert e1 is not None  # (its grace period: being deleted, its kubelet stops it)
        assert (
            e1["metadata"]["deletionTimestamp"]
            and e1["metadata"]["deletionGracePeriodSeconds"] == 20
        )
        assert {c["type"] for c in e1["status"]["conditions"]} >= {"DisruptionTarget"}
        status, answer = http(api, "POST", path.format("e2"), body | {"metadata": {"name": "e2"}})
        assert (status, answer["reason"]) == (429, "TooManyRequests")  # (2 of 3 must stay up)
        assert not api.get("pods", "evict", "e2")["metadata"].get("deletionTimestamp")
        wait(lambda: api.get("pods", "evict", "e1") is None, 30, "the evicted pod stopped and gone")
    ended = [
        o
        for o in api.emulator.objects[(apiserver.PODS, "evict", "e1")].history
        if o and (o.get("status") or {}).get("phase") == "Failed"
    ]
    assert (
        ended
        and ended[-1]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143
    )
    # a pod that does not run goes at once, whatever the budget
    api.create("pods", {**pod("pending", labels={"app": "a"})}, "evict-idle")
    assert http(api, "POST", "/api/v1/namespaces/evict-idle/pods/pending/eviction", body)[0] == 201
    assert api.get("pods", "evict-idle", "pending") is None


def test_the_kubelet_stretches_durations_and_delays_starts_only_when_asked(
    api: ApiServer,
) -> None:
    """Off by default (a pod runs what it declares, at once); with `stretch` and
    `start_latency`, a released pod stays Pending for its latency, then runs its declared
    duration times its stretch, both drawn per pod from the seed (benchmarks/live_forecast.py)."""
    plain = SimKubelet(api, "stretch")
    assert plain.draws("p0") == (1.0, 0.0)
    kubelet = SimKubelet(api, "stretch", stretch=0.3, start_latency=4.0, seed=7)
    draws = [kubelet.draws(f"p{i}") for i in range(2000)]
    assert draws[:3] == [kubelet.draws(f"p{i}") for i in range(3)]  # the pod's, not the order's
    assert SimKubelet(api, "stretch", stretch=0.3, seed=8).draws("p0") != draws[0]
    logs = sorted(math.log(f) for f, _ in draws)
    assert abs(logs[len(logs) // 2]) < 0.03  # median 1
    assert 0.27 < statistics.stdev(logs) < 0.33
    assert all(2.0 <= lat <= 6.0 for _, lat in draws)
    assert 3.8 < statistics.mean(lat for _, lat in draws) < 4.2

    later: list[tuple[float, str]] = []

    class Recorded(SimKubelet):
        def _later(self, wall: float, fn: Any, *args: Any) -> Any:
            later.append((wall, fn.__name__))
            return super()._later(wall, fn, *args)

    api.create("pods", pod("p0"), "stretch")  # (declares 1 s)
    factor, latency = kubelet.draws("p0")
    with Recorded(api, "stretch", time_factor=0.01, stretch=0.3, start_latency=4.0, seed=7):
        wait(
            lambda: api.get("pods", "stretch", "p0")["status"].get("phase") == "Succeeded",
            30,
            "the stretched pod to end",
        )
    assert later == [
        (pytest.approx(latency * 0.01), "_running"),
        (pytest.approx(factor * 0.01), "_finish"),
    ]
