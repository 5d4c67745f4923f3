"""Which nodes of a pool a stage's pod may use (issue 60, items 2 and 3): its template's
nodeSelector, required node affinity and tolerations of the nodes' taints (one predicate,
`idlegate.api.nodes.allows`), and a resource the pool does not count that a node lacks.
The pool places, counts and judges (never fits) a stage's task among those nodes alone."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from idlegate.api.labels import HOSTNAME
from idlegate.api.nodes import NodeRequirements, allows, read_node
from idlegate.operator.nodes.rules import NodeRules
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import Decision
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow
from tests.test_node_pools import _Live, following, node

pytestmark = pytest.mark.looptime

R = ResourceVector.parse


def tainted(name: str, *taints: tuple[str, str, str], **labels: str) -> dict[str, Any]:
    body = node(name, **labels)
    body["spec"]["taints"] = [{"key": k, "value": v, "effect": e} for k, v, e in taints]
    return body


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    term = {"nodeSelectorTerms": list(terms)}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term}}}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


GPU_NODE = node("g1", gpu="a100", zone="b", cores="64")
PLAIN_NODE = node("c1", zone="a", cores="8")
TAINT = ("nvidia.com/gpu", "present", "NoSchedule")

ALLOWS = [  # (the pod's spec, the node, whether it may run there)
    ({}, PLAIN_NODE, True),
    ({"nodeSelector": {"gpu": "a100"}}, GPU_NODE, True),
    ({"nodeSelector": {"gpu": "a100"}}, PLAIN_NODE, False),
    ({"nodeSelector": {HOSTNAME: "g1"}}, node("g1", **{HOSTNAME: "g1"}), True),
    ({"nodeSelector": {HOSTNAME: "g1"}}, node("c1", **{HOSTNAME: "c1"}), False),
    (required(expr("zone", "In", "a", "c")), PLAIN_NODE, True),
    (required(expr("zone", "In", "a", "c")), GPU_NODE, False),
    (required(expr("zone", "NotIn", "a")), PLAIN_NODE, False),
    (required(expr("zone", "NotIn", "a")), GPU_NODE, True),
    (required(expr("gpu", "Exists")), GPU_NODE, True),
    (required(expr("gpu", "Exists")), PLAIN_NODE, False),
    (required(expr("gpu", "DoesNotExist")), PLAIN_NODE, True),
    (required(expr("cores", "Gt", "16")), GPU_NODE, True),
    (required(expr("cores", "Gt", "16")), PLAIN_NODE, False),
    (required(expr("cores", "Lt", "16")), PLAIN_NODE, True),
    (required(expr("gpu", "Exists"), expr("zone", "In", "a")), PLAIN_NODE, True),  # (ORed)
    (required({}), PLAIN_NODE, False),  # (an empty term matches no node)
    (
        required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c1"]}]}),
        PLAIN_NODE,
        True,
    ),
    (
        required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c1"]}]}),
        GPU_NODE,
        False,
    ),
    # taints: NoSchedule and NoExecute keep off a pod that does not tolerate them
    ({}, tainted("t", TAINT), False),
    ({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}, tainted("t", TAINT), True),
    ({"tolerations": [{"operator": "Exists"}]}, tainted("t", TAINT), True),  # (every taint)
    ({"tolerations": [{"key": "nvidia.com/gpu", "value": "present"}]}, tainted("t", TAINT), True),
    ({"tolerations": [{"key": "nvidia.com/gpu", "value": "other"}]}, tainted("t", TAINT), False),
    (
        {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}]},
        tainted("t", TAINT),
        False,
    ),
    ({}, tainted("t", ("spot", "", "PreferNoSchedule")), True),  # (it only weighs)
    ({}, tainted("t", ("drain", "", "NoExecute")), False),
]


@pytest.mark.parametrize(("spec", "body", "expected"), ALLOWS)
def test_the_one_predicate_of_which_node_a_pod_may_use(spec, body, expected):
    assert allows(NodeRequirements.of(spec), read_node(body)) is expected


# -- the state machine: placed, counted and judged among those nodes --------------------------


def _cluster(bodies: list[dict[str, Any]], counted: tuple[str, ...] = ("cpu", "memory")):
    nodes = [read_node(b) for b in bodies]
    cluster = Cluster(10, resources=R(",".join(f"{n}=1m" for n in counted)))
    alloc = tuple(n.allocatable for n in nodes)
    capacity = sum(alloc, ResourceVector()).restricted(counted)
    rules = NodeRules(tuple(nodes), counted)
    cluster.set_capacity(capacity, alloc, alloc, tuple(n.host for n in nodes), rules)
    return cluster


def _job(cluster: Cluster, tasks: int, requests: dict[str, str], **pod: Any):
    container = {"name": "c", "image": "x", "resources": {"requests": requests}}
    template = {"spec": {"containers": [container], **pod}}
    stage = {"name": "s", "tasks": tasks, "taskDurationSeconds": 1.0, "template": template}
    return cluster.add_job(Dag.from_spec(parse_workflow({"stages": [stage]})), 0.0)


def test_a_task_goes_only_to_a_node_its_template_allows_and_waits_when_those_are_full():
    # packing alone would put a 1-CPU task on the fuller node a (3 CPUs); it asks for b
    cluster = _cluster(
        [node("a", cpu="3", **{HOSTNAME: "a"}), node("b", cpu="8", **{HOSTNAME: "b"})]
    )
    job = _job(cluster, 9, {"cpu": "1"}, nodeSelector={HOSTNAME: "b"})
    launches = cluster.apply(Decision(job.stages[0], 10), 0.0)
    assert {cluster.host_of(launch.executor) for launch in launches} == {"b"}
    assert len(launches) == 8  # b is full; a's 3 CPUs are not for it
    assert cluster.runnable_stages() == [] and cluster.fits_no_node(job.stages[0]) is None
    # a fork (a planner's) keeps the rule
    twin = cluster.fork()
    assert twin.runnable_stages() == []


def test_a_stage_no_node_allows_is_judged_as_one_too_large_for_every_node():
    cluster = _cluster([node("a", cpu="8"), tainted("g", TAINT, cpu="8")])
    job = _job(cluster, 1, {"cpu": "1"}, nodeSelector={"gpu": "a100"})
    (stage,) = job.stages
    assert cluster.runnable_stages() == []
    assert cluster.fits_no_node(stage) == (
        "may run on none of the pool's 2 node(s): its pod template's nodeSelector, required "
        "node affinity and tolerations of their taints rule out each"
    )
    # without a toleration, the tainted node is not for a plain stage either, nor for one
    # without a template (its default pod tolerates nothing)
    plain = _job(cluster, 2, {"cpu": "1"})
    launches = cluster.apply(Decision(plain.stages[0], 10), 0.0)
    assert [cluster.host_of(launch.executor) for launch in launches] == ["a", "a"]
    bare = {"name": "s", "tasks": 8, "taskDurationSeconds": 1.0, "resources": {"cpu": "1"}}
    job = cluster.add_job(Dag.from_spec(parse_workflow({"stages": [bare]})), 0.0)
    launches = cluster.apply(Decision(job.stages[0], 10), 0.0)
    # a is full (2 + 6 tasks); g's 8 CPUs are not for it
    assert {cluster.host_of(launch.executor) for launch in launches} == {"a"}
    assert len(launches) == 6 and cluster.runnable_stages() == []


def test_a_stage_asking_a_resource_no_node_has_never_fits():
    """Item 2: a GPU stage on CPU-only nodes (the pool counts cpu and memory only)."""
    cluster = _cluster([node("a", cpu="8"), node("b", cpu="8")])
    job = _job(cluster, 1, {"cpu": "1", "nvidia.com/gpu": "1"})
    assert cluster.runnable_stages() == []
    assert cluster.fits_no_node(job.stages[0]) == (
        "asks nvidia.com/gpu=1 a task, which no node of the pool has (its pods pend on its "
        "nodes for ever)"
    )
    only = _job(cluster, 1, {"nvidia.com/gpu": "1"})  # (nothing the pool counts but that)
    assert cluster.fits_no_node(only.stages[0]) is not None
    gpu = {**node("g", cpu="8"), "status": {**node("g")["status"]}}
    gpu["status"]["allocatable"] = {**gpu["status"]["allocatable"], "nvidia.com/gpu": "2"}
    cluster = _cluster([node("a", cpu="8"), gpu])
    job = _job(cluster, 1, {"cpu": "1", "nvidia.com/gpu": "1"})
    (launch,) = cluster.apply(Decision(job.stages[0], 10), 0.0)
    assert cluster.host_of(launch.executor) == "g"


def test_a_pool_with_nodes_and_no_constraints_is_unchanged():
    """No template, no taint: no stage is restricted (today's placement, bit for bit)."""
    cluster = _cluster([node("a", cpu="3"), node("b", cpu="8")])
    spec = {"name": "s", "tasks": 2, "taskDurationSeconds": 1.0, "resources": {"cpu": "1"}}
    job = cluster.add_job(Dag.from_spec(parse_workflow({"stages": [spec]})), 0.0)
    assert job.stages[0].need is not None and job.stages[0].need.allowed is None
    launches = cluster.apply(Decision(job.stages[0], 10), 0.0)
    assert [cluster.host_of(launch.executor) for launch in launches] == ["a", "a"]


# -- the operator ------------------------------------------------------------------------------


def _container(**requests: str) -> dict[str, Any]:
    return {"name": "task", "image": "busybox", "resources": {"requests": requests}}


@pytest.mark.asyncio
async def test_a_template_naming_its_node_is_counted_there_and_waits_for_its_room(monkeypatch):
    """Item 3: it was counted against the node the pool chose, and pended on its own."""
    from tests.operator_fakes import harness, stage

    h = harness(pool=8, pool_nodes="")
    following(h, monkeypatch)
    watch = h.pools.watch
    watch.nodes = {n: [node(n, cpu=c, **{HOSTNAME: n})] for n, c in (("a", "2"), ("b", "4"))}
    watch.pods, watch.read = _Live(h.kube), True
    h.pools.nodes_changed()
    template = {"spec": {"nodeSelector": {HOSTNAME: "b"}, "containers": [_container(cpu="2")]}}
    await h.submit("w", {"stages": [stage("s", tasks=3, template=template)]})
    # packing would fill a first; b alone holds two of them
    assert len(h.released("w")) == 2
    hosts = {h.kube.pods[("default", n)]["spec"]["nodeSelector"][HOSTNAME] for n in h.released()}
    assert hosts == {"b"}
    assert h.kube.reasons("w").count("NoNodeFits") == 0


@pytest.mark.asyncio
async def test_a_gpu_stage_on_cpu_only_nodes_is_not_released_and_says_why(monkeypatch):
    """Item 2: it was released, pended for ever, its workflow Running, no Warning."""
    from tests.operator_fakes import harness, stage

    h = harness(pool=8, pool_nodes="")
    following(h, monkeypatch)
    watch = h.pools.watch
    watch.nodes = {n: [node(n, cpu="8")] for n in ("a", "b")}
    watch.pods, watch.read = _Live(h.kube), True
    h.pools.nodes_changed()
    gpu = {"spec": {"containers": [_container(cpu="1", **{"nvidia.com/gpu": "1"})]}}
    await h.submit("w", {"stages": [stage("train", template=gpu)]})
    assert h.released("w") == []
    (said,) = [e["message"] for e in h.kube.events if e["reason"] == "NoNodeFits"]
    assert said.startswith(
        "Stage 'train' asks nvidia.com/gpu=1 a task, which no node of the pool has"
    )
    assert h.kube.status("w").get("phase") != "Running"


class _Counting(NodeRules):
    """NodeRules that count the stages they are asked about (equal as NodeRules are)."""

    asked: ClassVar[list[int]] = []

    def __call__(self, stage):  # type: ignore[no-untyped-def]
        _Counting.asked.append(stage.index)
        return super().__call__(stage)


def test_a_reading_that_changes_only_room_asks_no_stage_its_nodes_again():
    # a pool following its nodes is told them on every pod's change: equal rules on the
    # same nodes give each stage the same nodes, so the stages are not asked again
    bodies = [node("a", cpu="8", **{HOSTNAME: "a"}), tainted("g", TAINT, cpu="8")]
    nodes = tuple(read_node(b) for b in bodies)
    cluster = _cluster(bodies)
    for _ in range(3):
        _job(cluster, 2, {"cpu": "1"})
    alloc = tuple(n.allocatable for n in nodes)
    hosts = tuple(n.host for n in nodes)
    capacity = sum(alloc, ResourceVector()).restricted(("cpu", "memory"))
    rules = _Counting(nodes, ("cpu", "memory"))
    cluster.set_capacity(capacity, alloc, alloc, hosts, rules)  # (new rules: each stage)
    _Counting.asked = []
    cluster.set_capacity(capacity, alloc, alloc, hosts, _Counting(nodes, ("cpu", "memory")))
    assert _Counting.asked == []
    # a node changed (it lost its taint): every stage is asked again
    untainted = (nodes[0], read_node(node("g", cpu="8")))
    cluster.set_capacity(capacity, alloc, alloc, hosts, _Counting(untainted, ("cpu", "memory")))
    assert _Counting.asked == [0, 0, 0]


def test_stages_whose_pods_place_alike_share_one_placement_across_workflows():
    from idlegate.operator.nodes.rules import _placements

    def first(template: dict[str, Any] | None) -> Any:
        stage: dict[str, Any] = {"name": "s", "tasks": 1, "taskDurationSeconds": 1}
        if template is not None:
            stage["template"] = {"spec": {"containers": [{"name": "c", "image": "x"}], **template}}
        return _placements(Dag.from_spec(parse_workflow({"stages": [stage]})))[0]

    assert first(None) is first(None) is first({})  # (no template, or one placing nothing)
    gpu = {"nodeSelector": {"gpu": "a100"}, "tolerations": [{"operator": "Exists"}]}
    assert first(gpu) is first(dict(reversed(gpu.items()))) is not first(None)
    assert first({"nodeSelector": {"gpu": "h100"}}) is not first(gpu)
