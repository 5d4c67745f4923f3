"""Issue 61's scale benchmark (benchmarks/scale.py) and what its profile found in the
operator's edge: what runs on every pod event."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")


def test_every_index_runs_in_kopfs_loop():
    """kopf runs a plain function in its thread pool, an async one in its loop: an index is
    evaluated on every event of its resource (every pod, for two of them), and a thread hop
    per index and event was a tenth of the operator's CPU at 50 nodes (benchmarks/scale.py
    profiled with py-spy)."""
    from idlegate.operator.main import Operator, build_registry
    from idlegate.operator.settings import Settings
    from tests.operator_fakes import FakeClock, FakeKube

    operator = Operator(Settings(pool_size=2, clock=FakeClock()), kube=FakeKube())
    handlers = list(build_registry(operator)._indexing.get_all_handlers())
    assert {h.id for h in handlers} >= {"task_pods", "namespaces", "cluster_nodes", "live_pods"}
    assert [h.id for h in handlers if not inspect.iscoroutinefunction(h.fn)] == []


@pytest.mark.asyncio
async def test_a_pods_writes_that_change_no_room_read_no_room(monkeypatch):
    """A room read costs every node and pod (`NodeWatch.room`), and was asked after every
    pod event: most of a pod's writes (created gated, Running, a label) change no pool's
    room. Its release, its binding, its end and its deletion may; the same write again
    does not."""
    from idlegate.api.labels import ANNOTATION_EXECUTOR
    from idlegate.operator.main import Operator, build_registry
    from idlegate.operator.settings import Settings
    from tests.operator_fakes import FakeClock, FakeKube, harness

    operator = Operator(Settings(pool_size=2, clock=FakeClock()), kube=FakeKube())
    operator._pools = harness(pool=2, pool_nodes="").pools
    monkeypatch.setattr(Operator, "ready", property(lambda self: True))
    reads: list[int] = []
    monkeypatch.setattr(operator.pools, "room_soon", lambda: reads.append(1))
    handlers = build_registry(operator)._watching.get_all_handlers()
    (handler,) = [h for h in handlers if h.id == "room-events"]
    meta = {"namespace": "ns", "name": "p", "uid": "u1"}
    gated = {"schedulingGates": [{"name": "idlegate.io/gate"}], "containers": []}
    released = {**meta, "annotations": {ANNOTATION_EXECUTOR: "0"}}
    steps = [  # (type, metadata, spec, phase, reads the room)
        ("ADDED", meta, gated, "Pending", False),
        ("MODIFIED", {**meta, "labels": {"a": "b"}}, gated, "Pending", False),
        ("MODIFIED", released, {"containers": []}, "Pending", True),
        ("MODIFIED", released, {"containers": [], "nodeName": "n1"}, "Pending", True),
        ("MODIFIED", released, {"containers": [], "nodeName": "n1"}, "Running", False),
        ("MODIFIED", released, {"containers": [], "nodeName": "n1"}, "Running", False),
        ("MODIFIED", released, {"containers": [], "nodeName": "n1"}, "Succeeded", True),
        ("DELETED", released, {"containers": [], "nodeName": "n1"}, "Succeeded", False),
    ]
    for etype, metadata, spec, phase, expected in steps:
        before = len(reads)
        pod = {"metadata": metadata, "spec": spec, "status": {"phase": phase}}
        await handler.fn(event={"type": etype, "object": pod})
        assert len(reads) - before == expected, (etype, spec, phase)
    # a running pod deleted frees its room
    running = {"metadata": {**released, "uid": "u2"}, "spec": {"nodeName": "n1"}}
    await handler.fn(event={"type": "ADDED", "object": running})
    before = len(reads)
    await handler.fn(event={"type": "DELETED", "object": running})
    assert len(reads) - before == 1


@pytest.mark.asyncio
async def test_admitting_a_new_workflow_does_not_pass_over_every_executor(monkeypatch):
    """A workflow with no pod running needs no executor placed (`admission._place`); it
    passed over all of the pool's executors all the same (110,000 on benchmarks/scale.py's
    1,000 nodes), at each of its 4,000 admissions."""
    from idlegate.sim.cluster import Cluster
    from tests.operator_fakes import harness

    h = harness(pool=100_000)
    passes: list[int] = []
    each = Cluster.running_tasks
    monkeypatch.setattr(Cluster, "running_tasks", lambda c: passes.append(1) or each(c))
    spec = {"stages": [{"name": "a", "tasks": 2, "taskDurationSeconds": 5, "dependsOn": []}]}
    await h.submit("wf", spec)
    assert h.bridge.workflows and passes == []
