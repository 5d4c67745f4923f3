"""A pool that follows the cluster (issue 52, "The API"): an ExecutorPool's nodeSelector
counts the allocatable of the Ready nodes it selects, less the pods idlegate did not
release, and releases a task only where it fits one node's free allocatable (first fit);
a released pod the kube-scheduler leaves pending is counted and said."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from idlegate.api.labels import ANNOTATION_EXECUTOR, HOSTNAME
from idlegate.api.nodes import read_node
from idlegate.api.pool_spec import ExecutorPoolSpec, LabelSelector
from idlegate.operator.nodes.ledger import room
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import Decision
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow

pytestmark = pytest.mark.looptime

R = ResourceVector.parse


def node(name: str, cpu: str = "4", memory: str = "16Gi", ready: bool = True, **labels: str):
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(name: str, cpu: str, node_name: str | None = None, mine: bool = False, **extra: Any):
    annotations = {ANNOTATION_EXECUTOR: "0"} if mine else {}
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    body = {
        "metadata": {"namespace": "other", "name": name, "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }
    body["metadata"]["annotations"] = annotations
    for key, value in extra.items():
        body[key] = {**body.get(key, {}), **value}
    return body


# -- the state machine's per-node rule ----------------------------------------------------


def _job(cluster: Cluster, tasks: int, cpu: str, gang: bool = False, now: float = 0.0):
    spec = parse_workflow(
        {
            "stages": [
                {
                    "name": "a",
                    "tasks": tasks,
                    "taskDurationSeconds": 1.0,
                    "gang": gang,
                    "resources": {"cpu": cpu},
                }
            ]
        }
    )
    return cluster.add_job(Dag.from_spec(spec), now)


def test_a_task_starts_only_where_it_fits_one_node():
    cluster = Cluster(10, resources=R("cpu=1m"))
    nodes = (R("cpu=3,pods=110"), R("cpu=3,pods=110"))
    assert cluster.set_capacity(R("cpu=6"), nodes)
    job = _job(cluster, 4, "2")
    # 6 CPUs in all hold 3 tasks of 2, but each node of 3 holds only one
    launches = cluster.apply(Decision(job.stages[0], 10), 0.0)
    assert len(launches) == 2 and not cluster.runnable_stages()
    # a fork counts its own nodes; the original's are untouched
    twin = cluster.fork()
    assert twin.set_capacity(R("cpu=10"), (R("cpu=5,pods=110"), R("cpu=5,pods=110")))
    assert len(twin.apply(Decision(twin.jobs[0].stages[0], 10), 0.0)) == 2
    assert not cluster.runnable_stages()


def test_a_gang_starts_only_where_all_its_tasks_fit_the_nodes_and_the_pods_count():
    cluster = Cluster(10, resources=R("cpu=1m"))
    cluster.set_capacity(R("cpu=8"), (R("cpu=4,pods=1"), R("cpu=4,pods=110")))
    gang = _job(cluster, 3, "1", gang=True)
    # 8 CPUs hold 3 tasks of 1, but the first node has room for one pod: 1 + 4 >= 3 fits
    assert cluster.runnable_stages() == [gang.stages[0]]
    cluster.set_capacity(R("cpu=8"), (R("cpu=4,pods=1"), R("cpu=1,pods=110")))
    assert cluster.runnable_stages() == []  # 1 + 1 < 3
    assert not cluster.set_capacity(R("cpu=8"), (R("cpu=4,pods=1"), R("cpu=1,pods=110")))


def test_the_next_task_of_an_executor_goes_on_only_where_a_node_has_room_now():
    cluster = Cluster(10, resources=R("cpu=1m"))
    cluster.set_capacity(R("cpu=4"), (R("cpu=2,pods=110"), R("cpu=2,pods=110")))
    job = _job(cluster, 3, "2")
    (first, _) = cluster.apply(Decision(job.stages[0], 10), 0.0)
    # the nodes, told again, have no room: the room the ended task leaves went to a pod
    # of someone else's meanwhile (the driver saw it before the task's end)
    cluster.set_capacity(R("cpu=4"), (R("pods=110"), R("pods=110")))
    assert cluster.task_finished(first.executor, 1.0) is None  # freed, not gone on
    assert cluster.free_executors == 9 and job.stages[0].launched == 2


PACKING = [  # (each node's free CPUs of 8, a task's CPUs, the node it goes to)
    # the node it fills most, not the first it fits (first fit: 0) nor the emptiest
    # (the kube-scheduler's LeastAllocated: 0)
    (("6", "3", "4"), "3", 1),
    (("8", "5", "2"), "2", 2),
    (("8", "5", "2"), "4", 1),
    (("1", "8", "8"), "2", 1),  # (equals: the first)
    (("1", "1", "1"), "2", None),
]


@pytest.mark.parametrize(("free", "cpu", "at"), PACKING)
def test_a_task_takes_its_room_on_the_node_it_fills_most_on_both_clocks(free, cpu, at):
    """The operator's told nodes and the simulator's `--nodes` place by one rule
    (`idlegate.sim.pool.packed`): a 4-CPU task waiting later finds a node's room in one
    piece."""
    eight = R("cpu=8,memory=32Gi,pods=110")
    told = Cluster(10, resources=R("cpu=1m,memory=1m"))
    nodes = tuple(R(f"cpu={f},memory=32Gi,pods=110") for f in free)
    told.set_capacity(R("cpu=24,memory=96Gi"), nodes, (eight,) * 3, hosts=("a", "b", "c"))
    job = _job(told, 1, cpu)
    launches = told.apply(Decision(job.stages[0], 1), 0.0) if at is not None else []
    assert [told.host_of(launch.executor) for launch in launches] == (
        [] if at is None else ["abc"[at]]
    )
    # the simulator's nodes, filled first to the same free amounts by 1-CPU tasks
    fixed = Cluster(30, resources=R("cpu=24"), nodes=(R("cpu=8,pods=10"),) * 3)
    filler = _job(fixed, 24, "1")
    fixed.apply(Decision(filler.stages[0], 24), 0.0)
    where = fixed.placed_nodes()[1]
    for executor in list(where):  # (end the tasks that leave each node its free CPUs)
        node = where[executor]
        if sum(1 for e in where if where[e] == node) > 8 - int(free[node]):
            fixed.task_finished(executor, 1.0)
    assert [n[0] // 1000 for n in fixed.placed_nodes()[0]] == [int(f) for f in free]
    job = _job(fixed, 1, cpu, now=2.0)
    before = dict(where)
    fixed.apply(Decision(job.stages[0], 1), 2.0) if at is not None else None
    new = {e: n for e, n in fixed.placed_nodes()[1].items() if e not in before}
    assert list(new.values()) == ([] if at is None else [at])


# -- the room on the nodes (operator/nodes/ledger.py) ----------------------------------------------------


def test_room_counts_ready_selected_nodes_less_what_runs_there():
    nodes = [
        read_node(node("a", cpu="4", pool="batch")),
        read_node(node("b", cpu="8", pool="batch")),
        read_node(node("c", cpu="8", pool="other")),
        read_node(node("d", cpu="8", ready=False, pool="batch")),
    ]
    pods = [
        pod("foreign", "1", "a"),  # not idlegate's: less capacity, less room on a
        pod("ours", "2", "b", mine=True),  # idlegate's, bound: less room on b only
        pod("flying", "3", mine=True),  # released, not bound yet: where it would go (b)
        pod("stuck", "9", mine=True),  # released, fits no node
        pod("gated", "4", spec={"schedulingGates": [{"name": "x"}]}),  # holds nothing
        pod("done", "4", "a", status={"phase": "Succeeded"}),
    ]
    selector = LabelSelector.model_validate({"matchLabels": {"pool": "batch"}})
    found = room(nodes, pods, selector)
    assert found.capacity == R("cpu=11,memory=32Gi,pods=219")
    free = dict(found.free)
    # LeastAllocated: b, left with 3 of its 8 CPUs, rather than a, left with none of 4
    assert free["a"] == R("cpu=3,memory=16Gi,pods=109")
    assert free["b"] == R("cpu=3,memory=16Gi,pods=108")
    assert [p["metadata"]["name"] for p in found.short] == ["stuck"]
    # a gate removal under way: the pod read still has its gate, but it takes room
    gated = pod("releasing", "1", spec={"schedulingGates": [{"name": "idlegate.io/release"}]})
    later = room(nodes, [gated], selector, releasing={("other", "releasing"): (None, None)})
    assert dict(later.free)["b"] == R("cpu=7,memory=16Gi,pods=109")
    # one created released, not read yet: its request, as the release knew it
    unread = room(nodes, [], selector, releasing={("other", "new"): (R("cpu=2"), None)})
    assert dict(unread.free)["b"] == R("cpu=6,memory=16Gi,pods=109")


# -- the operator: an ExecutorPool with a nodeSelector ----------------------------------------


class _Live(Mapping[Any, Any]):
    """What kopf's index of pods not ended holds, over the fake API's pods and `extra`."""

    def __init__(self, kube: Any) -> None:
        self.kube, self.extra = kube, {}

    def _all(self) -> dict[Any, Any]:
        ended = ("Succeeded", "Failed")
        pods = {**self.kube.pods, **self.extra}
        return {k: [p] for k, p in pods.items() if p["status"].get("phase") not in ended}

    def __getitem__(self, key: Any) -> Any:
        return self._all()[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def following(h: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the operator's pod-events handler does at every pod event: the pools on nodes
    are told their room (before the task pod's own part)."""
    handle = h.pools.handle

    def both(event: Any) -> None:
        h.pools.nodes_changed()
        handle(event)

    monkeypatch.setattr(h.pools, "handle", both)


@pytest.mark.asyncio
async def test_a_node_pool_releases_what_fits_a_node_and_follows_the_pods(monkeypatch):
    from idlegate.operator.edge import intake
    from tests.operator_fakes import harness, stage

    h = harness(pool=4)
    following(h, monkeypatch)
    watch = h.pools.watch
    watch.nodes = {n: [node(n, cpu="3")] for n in ("a", "b")}
    watch.pods = live = _Live(h.kube)
    live.extra = {("other", f"f{n}"): pod(f"f{n}", "1", n) for n in ("a", "b")}
    spec = ExecutorPoolSpec.model_validate({"size": 10, "nodeSelector": {}})
    await intake.readmit(h.pools, h.pools.apply("batch", spec))
    body = h.kube.add_workflow("w", {"stages": [stage("s", tasks=4, resources={"cpu": "2"})]})
    body["spec"]["pool"] = "batch"
    h.admit(body)
    await h.settle()
    bridge = h.pools.bridges["batch"]
    assert bridge.status()["usage"]["cpu"] == "4/4"  # 6 allocatable less 2 of others'
    # 4 CPUs free hold 2 tasks of 2, and each node (2 free) holds one, pinned to it
    assert len(h.released("w")) == 2
    pins = [h.kube.pods[("default", n)]["spec"]["nodeSelector"] for n in h.released("w")]
    assert sorted(p[HOSTNAME] for p in pins) == ["a", "b"]
    live.extra = {}  # the others' pods ended: 2 CPUs free in all, but 1 on each node
    h.pools.nodes_changed()
    await h.settle()
    assert bridge.status()["usage"]["cpu"] == "4/6"
    assert len(h.released("w")) == 2  # (by the totals alone, a third would go)
    watch.nodes = {**watch.nodes, "c": [node("c", cpu="2")]}  # a node joins
    h.pools.nodes_changed()
    await h.settle()
    assert len(h.released("w")) == 3
    await h.run_to_completion()
    assert h.kube.status("w")["phase"] == "Succeeded"


def test_a_released_pod_left_pending_is_counted_once_and_said():
    from tests.operator_fakes import harness

    h = harness(pool=2)
    watch = h.pools.watch
    unschedulable = {
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient cpu.",
            }
        ]
    }
    stuck = pod("stuck", "9", mine=True, status=unschedulable)
    event = watch.unschedulable(stuck)
    assert event is not None and event.reason == "NoRoom" and event.type == "Warning"
    assert "3 Insufficient cpu" in event.message and event.owner.kind == "Pod"
    assert watch.unschedulable(stuck) is None  # once
    assert watch.unschedulable(pod("theirs", "9", status=unschedulable)) is None
    value = h.metrics.registry.get_sample_value("idlegate_released_pods_pending_total")
    assert value == 1.0


def test_pool_nodes_takes_kubectls_selector_syntax_and_not_with_pool_resources():
    from idlegate.api.settings import Settings
    from idlegate.errors import IdlegateError

    settings = Settings(pool_size=4, pool_nodes="pool=batch,tier in (a, b),gpu,!spot")
    selector = settings.pool_nodes
    assert selector is not None and selector.match_labels == {"pool": "batch"}
    ops = [(r.key, r.operator.value, r.values) for r in selector.match_expressions]
    assert ops == [("tier", "In", ("a", "b")), ("gpu", "Exists", ()), ("spot", "DoesNotExist", ())]
    assert selector.text() == "pool=batch,tier in (a,b),gpu,!spot"  # (as a NoNodes names it)
    assert LabelSelector.parse(selector.text()) == selector
    assert Settings(pool_size=4, pool_nodes="").pool_nodes == LabelSelector()  # every node
    with pytest.raises(IdlegateError, match="'=x' is not a label selector's requirement"):
        Settings(pool_size=4, pool_nodes="=x")
    with pytest.raises(IdlegateError, match=r"--pool-nodes .* not both"):
        Settings(pool_size=4, pool_nodes="", pool_resources="cpu=4")


@pytest.mark.asyncio
async def test_the_default_pool_follows_its_nodes_with_pool_nodes(monkeypatch):
    from tests.operator_fakes import harness, stage

    h = harness(pool=8, pool_nodes="pool=batch")
    following(h, monkeypatch)
    await h.submit("w", {"stages": [stage("s", tasks=3, resources={"cpu": "2"})]})
    assert h.released("w") == []  # no node read yet: no room
    watch = h.pools.watch
    watch.nodes = {"a": [node("a", cpu="4", pool="batch")], "b": [node("b", cpu="8")]}
    watch.pods = _Live(h.kube)
    h.pools.nodes_changed()
    await h.settle()
    assert len(h.released("w")) == 2  # node a only: 4 CPUs, two tasks of 2
    assert h.bridge.status()["usage"] == {"cpu": "4/4", "memory": "0/16Gi"}
    await h.run_to_completion()
    assert h.kube.status("w")["phase"] == "Succeeded"


def test_a_released_pod_is_pinned_to_the_node_its_pool_placed_it_on():
    from idlegate.api.task_pods import release_patch

    cluster = Cluster(10, resources=R("cpu=1m"))
    free = (R("cpu=2,pods=110"), R("cpu=8,pods=110"))
    cluster.set_capacity(R("cpu=10"), free, free, hosts=("small", "big"))
    job = _job(cluster, 1, "2")
    (launch,) = cluster.apply(Decision(job.stages[0], 1), 0.0)
    assert cluster.host_of(launch.executor) == "small"  # (it fills it: packing)
    cluster.task_finished(launch.executor, 1.0)  # (a task of no request may take it next)
    assert cluster.host_of(launch.executor) is None
    gated = {"metadata": {}, "spec": {"schedulingGates": [{"name": "idlegate.io/release"}]}}
    ops = release_patch(gated, 0, "big")
    assert {"op": "add", "path": "/spec/nodeSelector", "value": {HOSTNAME: "big"}} in ops
    beside = {**gated, "spec": {**gated["spec"], "nodeSelector": {"disk": "ssd"}}}
    ops = release_patch(beside, 0, "big")
    assert {
        "op": "add",
        "path": "/spec/nodeSelector/kubernetes.io~1hostname",
        "value": "big",
    } in ops
    own = {**gated, "spec": {**gated["spec"], "nodeSelector": {HOSTNAME: "mine"}}}
    assert not [op for op in release_patch(own, 0, "big") if "nodeSelector" in op["path"]]
    # the room counts a pinned pod not bound yet on its node, fitting or not
    nodes = [read_node(node("a", cpu="4")), read_node(node("b", cpu="4"))]
    pinned = pod("p", "3", mine=True, spec={"nodeSelector": {HOSTNAME: "b"}})
    found = room(
        nodes,
        [pinned, pod("q", "3", mine=True, spec={"nodeSelector": {HOSTNAME: "b"}})],
        LabelSelector(),
    )
    assert dict(found.free)["b"]["cpu"] == -2000 and [
        p["metadata"]["name"] for p in found.short
    ] == ["q"]


def test_the_watch_reads_a_pod_once_but_counts_a_release_under_way_all_the_same():
    from tests.operator_fakes import harness

    watch = harness(pool=2).pools.watch
    watch.nodes = {"a": [node("a", cpu="4")]}
    gated = pod("g", "1", spec={"schedulingGates": [{"name": "idlegate.io/release"}]})
    gated["metadata"]["resourceVersion"] = "7"
    watch.pods = {("other", "g"): [gated]}
    assert dict(watch.room(LabelSelector()).free)["a"]["cpu"] == 4000  # gated: nothing
    watch.releasing[("other", "g")] = (None, None)  # its release is under way
    assert dict(watch.room(LabelSelector()).free)["a"]["cpu"] == 3000


@pytest.mark.asyncio
async def test_a_burst_of_node_and_pod_events_is_one_reading_of_the_room(monkeypatch):
    # (a burst in one turn is one reading, at once; a stream of them, one reading in
    # ROOM_SECONDS of the loop's clock; after a quiet spell, at once again)
    import asyncio

    from idlegate.operator.lag.pacing import ROOM_SECONDS
    from tests.operator_fakes import harness

    h = harness(pool=2)
    loop = asyncio.get_running_loop()
    reads: list[float] = []
    monkeypatch.setattr(h.pools, "nodes_changed", lambda: reads.append(loop.time()))
    start = loop.time()
    for _ in range(50):
        h.pools.room_soon()
    await asyncio.sleep(0)
    assert reads == [start]
    for _ in range(10):  # a change every fifth of ROOM_SECONDS
        h.pools.room_soon()
        await asyncio.sleep(ROOM_SECONDS / 5)
    assert [round(t - start, 3) for t in reads] == [0, ROOM_SECONDS, 2 * ROOM_SECONDS]
    await asyncio.sleep(1)
    quiet = loop.time()
    h.pools.room_soon()
    await asyncio.sleep(0)
    assert reads[3:] == [quiet]


@pytest.mark.asyncio
async def test_a_pool_whose_selector_picks_no_node_says_so_once_its_nodes_are_read(caplog):
    from idlegate.api.task_pods import Owner
    from tests.operator_fakes import harness

    h = harness(pool=4, pool_nodes="gpu=a100")
    h.bridge.core.reporter = Owner("idlegate", "operator-0", "uid-op", "Pod", "v1")
    gauge = "idlegate_pool_without_nodes"
    assert h.bridge.no_room is None and h.metrics.value(gauge) == 0  # not read yet: no word
    watch = h.pools.watch
    watch.nodes, watch.pods, watch.read = {"a": [node("a")]}, {}, True
    h.pools.nodes_changed()
    h.pools.nodes_changed()  # (read again: said once)
    await h.settle()
    said = (
        "Pool 'default': nodeSelector 'gpu=a100' selects no Ready, schedulable node: label a "
        "node or change the selector; its workflows wait until then."
    )
    assert h.bridge.no_room == said and h.metrics.value(gauge) == 1
    warned = [e for e in h.kube.events if e["reason"] == "NoNodes"]
    assert [(e["type"], e["message"], e["involvedObject"]["name"]) for e in warned] == [
        ("Warning", said, "operator-0")
    ]
    assert said in caplog.text
    watch.nodes = {**watch.nodes, "b": [node("b", gpu="a100")]}  # a node is labelled
    h.pools.nodes_changed()
    assert h.bridge.no_room is None and h.metrics.value(gauge) == 0
    # its one node full of others' pods: nothing left to release onto
    full = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "4", "memory": "16Gi"}}}]
    }
    watch.pods = {("other", "x"): [pod("x", "4", "b", spec=full)]}
    h.pools.nodes_changed()
    assert "selects 1 node(s) with nothing left of their allocatable" in (h.bridge.no_room or "")


@pytest.mark.asyncio
async def test_an_executor_pools_ready_condition_says_its_selector_picks_no_node(monkeypatch):
    kopf = pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")
    from idlegate.api.pool_spec import pool_conditions
    from idlegate.api.settings import Settings
    from idlegate.operator.main import build_registry
    from idlegate.operator.runtime import Operator
    from tests.operator_fakes import FakeClock, FakeKube, harness

    operator = Operator(Settings(pool_size=2, clock=FakeClock()), kube=FakeKube())
    operator._pools = harness(pool=2).pools  # (what start() builds, on the fakes)
    monkeypatch.setattr(Operator, "ready", property(lambda self: True))
    handlers = build_registry(operator)._spawning.get_all_handlers()
    (refresh,) = [h for h in handlers if h.id == "pool-status"]
    operator.pools.watch.read = True  # (kopf's indexes filled: its first node event)
    selector = {"matchLabels": {"gpu": "a100"}}
    spec = ExecutorPoolSpec.model_validate({"size": 2, "nodeSelector": selector})
    operator.pools.apply("gpu", spec)

    async def ready(body: dict) -> dict:
        patch = kopf.Patch()
        await refresh.fn(name="gpu", body=kopf.Body(body), patch=patch)
        (condition,) = patch["status"].get("conditions") or [None]
        return condition

    running = {"status": {"conditions": pool_conditions(True, "Running", "runs", 0.0, {})}}
    found = await ready(running)
    assert (found["status"], found["reason"]) == ("False", "NoNodes")
    assert found["message"].startswith("Pool 'gpu': nodeSelector 'gpu=a100' selects no Ready")
    invalid = {"status": {"conditions": pool_conditions(False, "Invalid", "bad", 0.0, {})}}
    assert await ready(invalid) is None  # (an invalid spec's condition stays)
    operator.pools.watch.nodes = {"a": [node("a", gpu="a100")]}
    operator.pools.nodes_changed()
    found = await ready({"status": {"conditions": [found]}})
    assert (found["status"], found["reason"]) == ("True", "Running")


@pytest.mark.asyncio
async def test_a_retried_task_goes_back_to_the_node_its_pool_placed_it_on(monkeypatch):
    """Issue 60, item 1: the retry's pod (created released) is pinned as its first attempt
    was, so the room counts it on the node the pool placed the task on."""
    from tests.operator_fakes import harness, stage

    h = harness(pool=4, pool_nodes="")
    following(h, monkeypatch)
    watch = h.pools.watch
    watch.nodes = {n: [node(n, cpu="3")] for n in ("a", "b")}
    watch.pods = _Live(h.kube)
    h.pools.nodes_changed()
    await h.submit("w", {"stages": [stage("s", tasks=2, resources={"cpu": "2"}, backoffLimit=1)]})
    first = {n: h.kube.pods[("default", n)]["spec"]["nodeSelector"] for n in h.released("w")}
    assert sorted(p[HOSTNAME] for p in first.values()) == ["a", "b"]
    await h.finish("w-s-0", "Failed", after=1.0)
    (retry,) = [n for n in h.released("w") if n not in first]
    assert h.kube.pods[("default", retry)]["spec"]["nodeSelector"] == first["w-s-0"]


@pytest.mark.asyncio
async def test_a_pool_on_nodes_judges_its_nodes_only_once_their_index_is_read():
    """Issue 60, item 4: a NoNodes Warning at every start, matching nodes there all along
    (kopf's index of them was not filled yet), cleared a moment later."""
    from idlegate.api.task_pods import Owner
    from tests.operator_fakes import harness

    h = harness(pool=4, pool_nodes="gpu=a100")
    h.bridge.core.reporter = Owner("idlegate", "operator-0", "uid-op", "Pod", "v1")
    watch = h.pools.watch
    h.pools.nodes_changed()  # (the first round after the rebuild: the index still empty)
    await h.settle()
    assert h.bridge.no_room is None and h.metrics.value("idlegate_pool_without_nodes") == 0
    watch.nodes, watch.pods = {"a": [node("a", gpu="a100")]}, {}
    watch.read = True  # (what kopf's first node or pod event says: its indexes are filled)
    h.pools.nodes_changed()
    await h.settle()
    assert h.bridge.no_room is None
    assert [e for e in h.kube.events if e["reason"] == "NoNodes"] == []


@pytest.mark.asyncio
async def test_the_nodes_are_read_once_a_handler_ran_and_the_pods_listing_ended(monkeypatch):
    """kopf runs a resource's handlers only once its indexes (nodes) are filled; the index
    of pods is the operator's, read once the pods watch's first listing ended and its
    handler saw every pod listed (`operator.edge.pod_index.Listing`), in either order (item 4's
    signal)."""
    pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")
    from idlegate.api.settings import Settings
    from idlegate.operator.main import build_registry
    from idlegate.operator.runtime import Operator
    from tests.operator_fakes import FakeClock, FakeKube, harness

    for id_, body in (("node-events", node("n")), ("pod-events", pod("p", "1"))):
        for listed_first in (True, False):
            kwargs = {"type": None, "event": {"type": None, "object": body}, "labels": {}}
            operator = Operator(Settings(pool_size=2, clock=FakeClock()), kube=FakeKube())
            operator._pools = harness(pool=2).pools
            monkeypatch.setattr(Operator, "ready", property(lambda self: False))
            handlers = build_registry(operator)._watching.get_all_handlers()
            (handler,) = [h for h in handlers if h.id == id_]
            listed = {"uid-p", "uid-q"}
            if listed_first:
                operator.listing.listed(None, listed)
            await handler.fn(**kwargs)
            assert not operator.pools.watch.read, (id_, listed_first)  # (no end, q not seen)
            if not listed_first:
                operator.listing.listed(None, listed)
            assert not operator.pools.watch.read, (id_, listed_first)
            for name in ("p", "q"):  # (p seen again: once seen is enough)
                event = {"type": None, "object": pod(name, "1")}
                operator.listing.handled(operator.pod_index.seen(event))
            assert operator.pools.watch.read, (id_, listed_first)


@pytest.mark.asyncio
async def test_with_namespace_a_pool_on_nodes_subtracts_the_pods_of_the_other_namespaces():
    """Issue 60, item 7: with --namespace, kopf's index of pods holds those namespaces'
    alone; a node agent elsewhere took room the pool did not know of. The pods of the
    others are listed (`Pools.sweep`, every 10 s of the operator's clock), those bound to a
    node counted."""
    from tests.operator_fakes import harness

    h = harness(pool=4, pool_nodes="")
    watch = h.pools.watch
    watch.nodes, watch.read = {"a": [node("a", cpu="4")]}, True
    agent = pod("agent", "1", "a")
    agent["metadata"].update(namespace="kube-system", resourceVersion="1")
    h.kube.pods[("kube-system", "agent")] = agent
    watch.pods = {k: v for k, v in _Live(h.kube).items() if k[0] == "default"}  # (kopf's)
    assert watch.capacity(LabelSelector(), ("cpu",)).capacity["cpu"] == 4000
    await h.pools.sweep(h.kube, ["default"])
    assert watch.capacity(LabelSelector(), ("cpu",)).capacity["cpu"] == 3000
    assert not await watch.sweep(h.kube, ["default"])  # (nothing new)
    agent["status"]["phase"] = "Succeeded"
    assert await watch.sweep(h.kube, ["default"])
    assert watch.capacity(LabelSelector(), ("cpu",)).capacity["cpu"] == 4000


@pytest.mark.asyncio
async def test_the_operator_with_namespace_lists_the_other_namespaces_pods_every_10_s(
    monkeypatch,
):
    """Item 7's wiring: the loop start() runs with --namespace (on the loop's fake time)."""
    import asyncio

    pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")
    from idlegate.api.settings import Settings
    from idlegate.operator.runtime import Operator
    from tests.operator_fakes import FakeClock, harness

    h = harness(pool=4, pool_nodes="")
    settings = Settings(pool_size=4, clock=FakeClock(), namespaces=["default"], pool_nodes="")
    operator = Operator(settings, kube=h.kube)
    operator._pools = h.pools
    monkeypatch.setattr(Operator, "ready", property(lambda self: True))
    sweeps: list[float] = []

    async def sweep(kube: Any, watched: Any) -> None:
        sweeps.append(asyncio.get_running_loop().time())

    monkeypatch.setattr(h.pools, "sweep", sweep)
    task = asyncio.create_task(operator._sweeping(10.0))
    await asyncio.sleep(25)
    task.cancel()
    assert [t - sweeps[0] for t in sweeps] == [0.0, 10.0, 20.0]


@pytest.mark.asyncio
async def test_a_pool_built_before_its_nodes_were_read_counts_their_resources_once_they_are():
    """At a start the rebuild may build an ExecutorPool before kopf's index of nodes is
    filled: it counted cpu and memory alone, its GPUs never. Its handler, run once the
    index is filled, builds it again counting them."""
    from idlegate.operator.edge import intake
    from tests.operator_fakes import harness

    h = harness(pool=2)
    spec = ExecutorPoolSpec.model_validate({"size": 4, "nodeSelector": {}})
    await intake.readmit(h.pools, h.pools.apply("gpu", spec))  # (the rebuild's restore)
    assert h.pools.bridges["gpu"].counted == ("cpu", "memory")
    gpu = node("g", cpu="8")
    gpu["status"]["allocatable"]["nvidia.com/gpu"] = "2"
    watch = h.pools.watch
    watch.nodes, watch.pods, watch.read = {"g": [gpu]}, {}, True
    await intake.readmit(h.pools, h.pools.apply("gpu", spec))  # (its kopf handler's)
    names = h.pools.bridges["gpu"].counted
    assert names == ("cpu", "memory", "nvidia.com/gpu")
    built = h.pools.bridges["gpu"]
    await intake.readmit(h.pools, h.pools.apply("gpu", spec))  # (the same: kept)
    assert h.pools.bridges["gpu"] is built


def test_a_pod_created_released_is_pinned_as_a_released_gated_one_is():
    """Item 1's other ways to a pod created released: a gate removal whose pod is gone
    (it creates it released) keeps its host; a template that names a host keeps its own."""
    from idlegate.api.task_pods import Owner
    from idlegate.operator.core.intents import RemoveGate
    from idlegate.sim.spec import StageSpec

    owner = Owner("default", "w", "uid-w")
    spec = StageSpec(name="s", tasks=1, task_duration_seconds=1.0)
    gate = RemoveGate(owner, "s", 0, 0, "w-s-0", 3, spec, host="b")
    assert gate.released.manifest["spec"]["nodeSelector"] == {HOSTNAME: "b"}
    own = {"spec": {"nodeSelector": {HOSTNAME: "mine", "disk": "ssd"}, "containers": []}}
    mine = spec.model_copy(update={"template": own})
    gate = RemoveGate(owner, "s", 0, 0, "w-s-0", 3, mine, host="b")
    assert gate.released.manifest["spec"]["nodeSelector"] == {HOSTNAME: "mine", "disk": "ssd"}


def test_the_watch_fed_by_events_reads_the_room_as_its_indexes_counted_anew():
    # after its first event, the watch keeps a ledger (operator.nodes.ledger.NodeLedger) from the events
    # and no longer counts every pod in kopf's indexes at each reading (issue 61)
    from tests.operator_fakes import harness

    watch = harness(pool=2).pools.watch
    watch.nodes = {n: [node(n, cpu="4")] for n in ("a", "b")}
    watch.pods = {("other", "x"): [pod("x", "1", "a")]}

    def scratch() -> dict[str, ResourceVector]:
        nodes = [read_node(b[0]) for b in watch.nodes.values()]
        pods = [b[0] for b in watch.pods.values()]
        return dict(room(nodes, pods, LabelSelector(), watch.releasing).free)

    y = pod("y", "2", "b", mine=True)
    watch.pods = {**watch.pods, ("other", "y"): [y]}  # (kopf's index has it, then the event)
    watch.seen({"type": "ADDED", "object": y})
    assert watch.ledger is not None
    assert dict(watch.room(LabelSelector()).free) == scratch()
    assert dict(watch.room(LabelSelector()).free)["b"]["cpu"] == 2000
    # the index no longer read: only events move the room now
    watch.pods = {}
    assert dict(watch.room(LabelSelector()).free)["a"]["cpu"] == 3000
    watch.pods = {("other", "y"): [y]}
    watch.seen({"type": "DELETED", "object": pod("x", "1", "a")})
    c = node("c", cpu="8")
    watch.nodes = {**watch.nodes, "c": [c]}
    watch.seen({"type": "ADDED", "object": c}, node=True)
    ended = pod("y", "2", "b", mine=True, status={"phase": "Succeeded"})
    watch.pods = {("other", "y"): [ended]}
    watch.seen({"type": "MODIFIED", "object": ended})
    assert dict(watch.room(LabelSelector()).free) == scratch()
    assert dict(watch.room(LabelSelector()).free)["c"]["cpu"] == 8000


@pytest.mark.asyncio
async def test_a_costly_reading_of_the_room_waits_nine_times_its_cpu_before_the_next(
    monkeypatch,
):
    # (thousands of nodes and of released pods not bound: a reading costs tens of ms)
    import asyncio

    import idlegate.operator.lag.pacing as pacing
    from idlegate.operator.lag.pacing import ROOM_SECONDS
    from tests.operator_fakes import harness

    h = harness(pool=2)
    loop = asyncio.get_running_loop()
    # (the first reading costs 0.1 s of CPU, each after it 0.5 ms: ROOM_SECONDS apart)
    cpu, reads = iter([0.0, 0.1, *(0.1 + i * 0.0005 for i in range(100))]), []
    monkeypatch.setattr(pacing, "thread_time", lambda: next(cpu))
    monkeypatch.setattr(h.pools, "nodes_changed", lambda: reads.append(loop.time()))
    start = loop.time()
    h.pools.room_soon()
    await asyncio.sleep(0)
    for _ in range(12):  # a change every 0.1 s: the next reading 0.9 s after the costly one
        h.pools.room_soon()
        await asyncio.sleep(0.1)
    assert [round(t - start, 3) for t in reads] == [0, 0.9, 0.9 + ROOM_SECONDS]
