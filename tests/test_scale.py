"""What issue 61's scale benchmark (benchmarks/scale.py) found: the costs of every pod
event, of an admission and of a decision's first question.

The benchmark itself is not run here: its smallest size (``--scale 0.005``: 5 nodes, 240
pods) took 100 s on a loaded 2-core machine; tests/test_e2e_nodes.py checks the same
counts (every workflow succeeds, no pod created twice, none released Unschedulable) on
three nodes."""

from __future__ import annotations

import inspect

import pytest

from idlegate.api.labels import LABEL_WORKFLOW

pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")


def test_every_index_runs_in_kopfs_loop():
    """kopf runs a plain function in its thread pool, an async one in its loop: an index is
    evaluated on every event of its resource (every pod, for two of them), and a thread hop
    per index and event was a tenth of the operator's CPU at 50 nodes (benchmarks/scale.py
    profiled with py-spy)."""
    from idlegate.api.settings import Settings
    from idlegate.operator.main import build_registry
    from idlegate.operator.runtime import Operator
    from tests.operator_fakes import FakeClock, FakeKube

    operator = Operator(Settings(pool_size=2, clock=FakeClock()), kube=FakeKube())
    handlers = list(build_registry(operator)._indexing.get_all_handlers())
    assert {h.id for h in handlers} == {"namespaces", "cluster_nodes"}  # (pods': ours)
    assert [h.id for h in handlers if not inspect.iscoroutinefunction(h.fn)] == []


@pytest.mark.asyncio
async def test_kopf_runs_one_index_and_one_event_handler_on_a_pods_event(monkeypatch):
    """kopf's machinery around each handler costs more than our handlers do, on each pod
    event (`python -m benchmarks.kopf_floor --repeat 5`: no-op pod handlers as two indexes
    and two event handlers, 4.35 ms of CPU a pod; one of each, 3.90). One index holds every
    pod and the task pods by workflow; one event handler follows the room and hands a task
    pod, and only one, to its workflow. No index of kopf's: the handler keeps the
    operator's (a kopf index of pods cost 0.95 ms of CPU a pod, `benchmarks.kopf_floor`)."""
    from idlegate.api.settings import Settings
    from idlegate.operator.core.events import PodSeen
    from idlegate.operator.main import build_registry
    from idlegate.operator.runtime import Operator
    from tests.operator_fakes import FakeClock, FakeKube, harness

    operator = Operator(Settings(pool_size=2, clock=FakeClock()), kube=FakeKube())
    operator._pools = harness(pool=2).pools
    monkeypatch.setattr(Operator, "ready", property(lambda self: True))
    registry = build_registry(operator)
    on_pods = lambda handlers: [h for h in handlers if h.selector.any_name == "pods"]  # noqa: E731
    assert [h.id for h in on_pods(registry._indexing.get_all_handlers())] == []
    (handler,) = on_pods(registry._watching.get_all_handlers())
    seen: list[PodSeen] = []
    monkeypatch.setattr(operator.pools, "handle", seen.append)
    for labels in ({LABEL_WORKFLOW: "w"}, {"app": "other"}):
        body = {"metadata": {"namespace": "ns", "name": "p", "uid": "u", "labels": labels}}
        await handler.fn(type="ADDED", event={"type": "ADDED", "object": body}, labels=labels)
    assert [event.body["metadata"]["labels"] for event in seen] == [{LABEL_WORKFLOW: "w"}]
    assert list(operator.pod_index) == [("pod", "ns", "p")]  # (its label gone: one key left)
    # what the room's part raises (kopf logs it) does not keep the pod from its workflow
    monkeypatch.setattr(operator.pools.watch, "seen", lambda event: 1 / 0)
    labels = {LABEL_WORKFLOW: "w"}
    body = {"metadata": {"namespace": "ns", "name": "q", "uid": "v", "labels": labels}}
    with pytest.raises(ZeroDivisionError):
        await handler.fn(type="ADDED", event={"type": "ADDED", "object": body}, labels=labels)
    assert [event.body["metadata"]["name"] for event in seen] == ["p", "q"]


def test_one_index_of_pods_reads_as_the_two_it_replaces():
    """`Tagged` reads the one index of pods (kopf's: a key to a store of bodies) as the
    index of every pod by name and the index of task pods by workflow: a task pod in
    both, counted once in each."""
    from idlegate.operator.edge.pod_index import POD, TASK, Tagged, pod_keys

    index: dict[tuple[str | None, ...], list[str]] = {}
    for name, labels in (("a", {LABEL_WORKFLOW: "w"}), ("b", {LABEL_WORKFLOW: "w"}), ("c", {})):
        for key in pod_keys("ns", name, labels):
            index.setdefault(key, []).append(name)
    live, tasks = Tagged(index, POD), Tagged(index, TASK)
    assert dict(live) == {("ns", "a"): ["a"], ("ns", "b"): ["b"], ("ns", "c"): ["c"]}
    assert dict(tasks) == {("ns", "w"): ["a", "b"]} and len(tasks) == 1
    assert live.get(("ns", "w")) is None and tasks.get(("other", "w"), ()) == ()


@pytest.mark.asyncio
async def test_a_pods_writes_that_change_no_room_read_no_room(monkeypatch):
    """A room read costs every node and pod (`NodeWatch.room`), and was asked after every
    pod event: most of a pod's writes (created gated, Running, a label) change no pool's
    room. Its release, its binding, its end and its deletion may; the same write again
    does not."""
    from idlegate.api.labels import ANNOTATION_EXECUTOR
    from idlegate.api.settings import Settings
    from idlegate.operator.main import build_registry
    from idlegate.operator.runtime import Operator
    from tests.operator_fakes import FakeClock, FakeKube, harness

    operator = Operator(Settings(pool_size=2, clock=FakeClock()), kube=FakeKube())
    operator._pools = harness(pool=2, pool_nodes="").pools
    monkeypatch.setattr(Operator, "ready", property(lambda self: True))
    reads: list[int] = []
    monkeypatch.setattr(operator.pools, "room_soon", lambda: reads.append(1))
    handlers = build_registry(operator)._watching.get_all_handlers()
    (handler,) = [h for h in handlers if h.id == "pod-events"]
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
        await handler.fn(type=etype, event={"type": etype, "object": pod}, labels={})
        assert len(reads) - before == expected, (etype, spec, phase)
    # a running pod deleted frees its room
    running = {"metadata": {**released, "uid": "u2"}, "spec": {"nodeName": "n1"}}
    await handler.fn(type="ADDED", event={"type": "ADDED", "object": running}, labels={})
    before = len(reads)
    await handler.fn(type="DELETED", event={"type": "DELETED", "object": running}, labels={})
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


def test_whether_a_stage_can_start_tries_each_shape_of_need_once(monkeypatch):
    """With thousands of workflows waiting on a full pool, each decision asked every
    runnable stage whether it fits (`Cluster.can_schedule`): stages of one need fit alike,
    so each shape is tried at most once (one asking more than the pool has free not at
    all: `sim.shapes`' bound), and the answer is the same."""
    from idlegate.sim.cluster import Cluster
    from idlegate.sim.dag import Dag
    from idlegate.sim.protocol import Decision, Need
    from idlegate.sim.resources import ResourceVector
    from idlegate.sim.spec import parse_workflow

    def job(cpu: str, tasks: int = 1, gang: bool = False) -> Dag:
        one = {"name": "a", "tasks": tasks, "taskDurationSeconds": 10, "gang": gang}
        return Dag.from_spec(parse_workflow({"stages": [{**one, "resources": {"cpu": cpu}}]}))

    cluster = Cluster(10, resources=ResourceVector.parse("cpu=8"))
    running = cluster.add_job(job("6"), 0.0)
    assert len(cluster.apply(Decision(running.stages[0], 10), 0.0)) == 1  # 2 CPUs left
    for _ in range(50):
        cluster.add_job(job("4"), 0.0)  # none fits
    tries: list[int] = []
    fits = Need.fits
    monkeypatch.setattr(Need, "fits", lambda need, tasks=1: tries.append(1) or fits(need, tasks))
    assert not cluster.can_schedule() and tries == []  # (4 CPUs: beyond the 2 free)
    cluster.add_job(job("1", tasks=3, gang=True), 0.0)  # a gang of 3 CPUs: does not fit
    cluster.add_job(job("1"), 0.0)  # fits
    tries.clear()
    assert cluster.can_schedule() and len(tries) == 2  # (the gang's, then the one that fits)


def test_kopf_keeps_a_diff_base_of_our_own_kinds_only():
    """kopf diffs an object's essence for its changing handlers (create, update, resume):
    every one of ours is on our own kinds, so `OursOnlyDiffBase` copies only their bodies
    and builds an empty essence of a pod (of which kopf made a deep copy at each of its
    events)."""
    import kopf

    from idlegate.api.kinds import GROUP
    from idlegate.api.settings import Settings
    from idlegate.operator.kopf_settings import ANNOTATION_PREFIX, DIFF_BASE_KEY, OursOnlyDiffBase
    from idlegate.operator.main import build_registry
    from idlegate.operator.runtime import Operator
    from tests.operator_fakes import FakeClock, FakeKube

    operator = Operator(Settings(pool_size=2, clock=FakeClock()), kube=FakeKube())
    changing = list(build_registry(operator)._changing.get_all_handlers())
    assert {h.id for h in changing} >= {"admit", "spec/spec", "cron", "pool"}
    assert {h.selector.group for h in changing} == {GROUP}
    ours = OursOnlyDiffBase(prefix=ANNOTATION_PREFIX, key=DIFF_BASE_KEY)
    kopfs = kopf.AnnotationsDiffBaseStorage(prefix=ANNOTATION_PREFIX, key=DIFF_BASE_KEY)
    workflow = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "DagWorkflow",
        "metadata": {"name": "w", "labels": {"team": "a"}},
        "spec": {"stages": [{"name": "a"}]},
        "status": {"phase": "Running"},
    }
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}}
    built = ours.build(body=kopf.Body(workflow))
    assert built == kopfs.build(body=kopf.Body(workflow)) and "spec" in built
    assert ours.build(body=kopf.Body(pod)) == {} != kopfs.build(body=kopf.Body(pod))


def test_the_operators_index_of_pods_follows_each_event_and_its_listing_ends_once_seen():
    """The index the pod handler keeps holds what kopf's held (`pod_keys`, one body a pod
    under each key, none once deleted), and kopf's watch stream, wrapped (`install`), tells
    the end of its first listing with the pods listed: the listing has ended once every
    namespace watched told it and the handler saw each pod it listed."""
    import asyncio

    from kopf._cogs.clients import watching

    from idlegate.operator.edge.pod_index import Listing, PodIndex, install

    def pod(name: str, uid: str, **labels: str) -> dict:
        return {"metadata": {"namespace": "ns", "name": name, "uid": uid, "labels": labels}}

    index = PodIndex()
    for event in (
        {"type": None, "object": pod("a", "1", **{LABEL_WORKFLOW: "w"})},
        {"type": None, "object": pod("b", "2", **{LABEL_WORKFLOW: "w"})},
        {"type": "MODIFIED", "object": pod("a", "1")},  # (its label removed)
        {"type": "DELETED", "object": pod("b", "2", **{LABEL_WORKFLOW: "w"})},
    ):
        index.seen(event)
    assert ("task", "ns", "w") not in index  # (a unlabelled, b deleted)
    assert index == {("pod", "ns", "a"): [pod("a", "1")]}

    async def listing(**_: object):  # (kopf's stream: two pods listed, then watch events)
        yield {"type": None, "object": pod("a", "1")}
        yield {"type": None, "object": pod("b", "2")}
        yield watching.Bookmark.LISTED
        yield {"type": "ADDED", "object": pod("c", "3")}

    class Settings:
        pass

    async def scenario() -> None:
        resource = type("Resource", (), {"group": "", "plural": "pods"})()
        told: list[tuple[object, set[str]]] = []
        ended = Listing(["ns", "other"])
        settings = Settings()
        install(settings, lambda ns, uids: (told.append((ns, set(uids))), ended.listed(ns, uids)))
        stream = watching.infinite_watch(settings=settings, resource=resource, namespace="ns")
        events = [event async for event in stream]
        assert len(events) == 4 and told == [("ns", {"1", "2"})]
        ended.handled("1")
        ended.listed("other", set())
        assert not ended.done.is_set()  # (pod 2 not seen yet)
        ended.handled("2")
        assert ended.done.is_set()

    original = watching.infinite_watch
    watching.infinite_watch = listing
    try:
        asyncio.run(scenario())
    finally:
        watching.infinite_watch = original


def test_a_kopf_that_does_not_tell_the_listing_is_refused_with_a_sentence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The operator waits on the end of the pods' first listing before it admits anything:
    a kopf whose watch stream has no such bookmark would leave every pool waiting, so it is
    refused at start with what to install (constraints.txt pins the kopf it reads)."""
    from kopf._cogs.clients import watching

    from idlegate.errors import IdlegateError
    from idlegate.operator.edge.pod_index import Listing, install

    monkeypatch.setattr(watching, "Bookmark", type("Bookmark", (), {}))
    with pytest.raises(IdlegateError, match=r"constraints\.txt pins"):
        install(object(), lambda ns, uids: None)
    with pytest.raises(IdlegateError, match=r"constraints\.txt pins"):  # (as the operator is
        Listing([])  # built, before kopf runs: one line of the CLI, not a retried startup)
