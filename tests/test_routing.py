"""Where a workflow of each kind lands (issue 59's seam): the one routing function
(idlegate.api.routing) on small hand-built objects, then the operator's Argo Workflows and
Airflow runs entering the ExecutorPool it picks, over the operator's fakes in fake time."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from idlegate.api.kinds import KIND
from idlegate.api.labels import LABEL_POOL, LABEL_QUEUE
from idlegate.api.pool_spec import DEFAULT_POOL, ExecutorPoolSpec
from idlegate.api.routing import (
    AIRFLOW_KIND,
    ARGO_KIND,
    PoolNotFoundError,
    Routing,
    route_workflow,
)
from idlegate.operator.features.argo import RETRY, ArgoSide
from idlegate.policy import make_scheduler
from idlegate.sim.argo.status import node_id
from idlegate.sim.history import load_history
from tests import test_too_large as too_large
from tests.airflow_data import session
from tests.argo_data import gated_argo_pod
from tests.argo_workflows import argo
from tests.operator_fakes import FakeClock, FakeKube, FeatureHost, Harness
from tests.test_airflow_live import LIVE, MAPPING, with_live_run
from tests.test_airflow_operator import _finish, _gated, _see, airflow, worker_pod
from tests.test_argo_history import FAN, START, _fan, _fan_pod

POOLS = [
    ("batch", ExecutorPoolSpec.model_validate({"size": 1, "namespaceSelector": {}})),
    ("gpu", ExecutorPoolSpec.model_validate({"size": 1})),  # (reached only by name)
]
"""batch selects every namespace; gpu none."""


def _obj(
    *, labels: dict[str, Any] | None = None, spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"metadata": {"name": "w", "namespace": "ns", "labels": labels or {}}, "spec": spec}


@pytest.mark.parametrize(
    ("kind", "obj", "pools", "expected"),
    [
        # a DagWorkflow names its pool in spec.pool, its priority class in the spec too
        (KIND, _obj(spec={"pool": "gpu", "priorityClassName": "high"}), POOLS,
         Routing("gpu", None, "high")),
        (KIND, _obj(spec={}), POOLS, Routing("batch")),  # its namespace's pool
        (KIND, _obj(spec={}), [], Routing(DEFAULT_POOL)),  # none selects it
        (KIND, _obj(spec={"pool": DEFAULT_POOL}), POOLS, Routing(DEFAULT_POOL)),
        # the label is not a DagWorkflow's way to name its pool (spec.pool is)
        (KIND, _obj(labels={LABEL_POOL: "gpu"}), POOLS, Routing("batch")),
        # an Argo Workflow: the label; spec.podPriorityClassName
        (ARGO_KIND, _obj(labels={LABEL_POOL: "gpu"}, spec={"podPriorityClassName": "low"}),
         POOLS, Routing("gpu", None, "low")),
        (ARGO_KIND, _obj(spec={"pool": "gpu", "priorityClassName": "x"}), POOLS,
         Routing("batch")),
        # an Airflow worker pod: the label; the pod's spec.priorityClassName
        (AIRFLOW_KIND, _obj(labels={LABEL_POOL: "gpu"}, spec={"priorityClassName": "p"}), POOLS,
         Routing("gpu", None, "p")),
        (AIRFLOW_KIND, _obj(), [], Routing(DEFAULT_POOL)),
        # the queue: the label, any kind
        (KIND, _obj(labels={LABEL_QUEUE: "team-a"}, spec={}), POOLS, Routing("batch", "team-a")),
        (ARGO_KIND, _obj(labels={LABEL_QUEUE: "team-b"}), [], Routing(DEFAULT_POOL, "team-b")),
        (AIRFLOW_KIND, _obj(labels={LABEL_QUEUE: "etl"}), [], Routing(DEFAULT_POOL, "etl")),
        # what is not a name names nothing
        (KIND, _obj(labels={LABEL_QUEUE: ""}, spec={"priorityClassName": 3}), [],
         Routing(DEFAULT_POOL)),
        (KIND, {"metadata": None, "spec": "x"}, [], Routing(DEFAULT_POOL)),
    ],
)  # fmt: skip
def test_each_kind_is_routed_by_its_own_fields(kind, obj, pools, expected):
    assert route_workflow(kind, obj, {}, pools) == expected


def test_a_namespace_selector_picks_by_the_namespaces_labels():
    team = ExecutorPoolSpec.model_validate(
        {"size": 1, "namespaceSelector": {"matchLabels": {"t": "a"}}}
    )
    assert route_workflow(ARGO_KIND, _obj(), {"t": "a"}, [("team", team)]).pool == "team"
    assert route_workflow(ARGO_KIND, _obj(), {"t": "b"}, [("team", team)]).pool == DEFAULT_POOL


@pytest.mark.parametrize(
    ("kind", "obj", "where"),
    [
        (KIND, _obj(spec={"pool": "nope"}), "spec.pool"),
        (ARGO_KIND, _obj(labels={LABEL_POOL: "nope"}), f"label {LABEL_POOL}"),
        (AIRFLOW_KIND, _obj(labels={LABEL_POOL: "nope"}), f"label {LABEL_POOL}"),
    ],
)
def test_a_named_pool_that_does_not_exist_says_where_it_was_named(kind, obj, where):
    with pytest.raises(PoolNotFoundError) as raised:
        route_workflow(kind, obj, {}, POOLS)
    assert raised.value.pool == "nope" and raised.value.where == where
    assert str(raised.value) == (
        "ExecutorPool 'nope' does not exist: the workflow waits until it is created "
        f"(kubectl get executorpools), or {where} names another."
    )


# -- the operator: an Argo Workflow and an Airflow run land in their pool ---------------------

WF = "etl"
BATCH = {"size": 1, "namespaceSelector": {"matchLabels": {"team": "batch"}}}
"""A second pool of one executor, selecting the namespaces labelled team=batch."""


def _argo_workflow(labels: dict[str, str] | None = None) -> dict[str, Any]:
    """Workflow `etl` in `default`: a, then b."""
    tasks = [{"name": "a", "template": "p"}, {"name": "b", "template": "p", "dependencies": ["a"]}]
    doc = argo(WF, {"dag": {"tasks": tasks}}, {"name": "p", "container": {"image": "x"}})
    doc["metadata"].update(namespace="default", uid="uid-etl", labels=labels or {})
    return doc | {"status": {"phase": "Running"}}


async def _argo_pod(h: Harness, side: ArgoSide, task: str, phase: str | None = None) -> str:
    key = ("default", node_id(WF, f"{WF}.{task}"))
    body = h.kube.pods.setdefault(key, gated_argo_pod(WF, f"{WF}.{task}"))
    if phase is not None:
        body["status"]["phase"] = phase
    await side.pod_seen(False, copy.deepcopy(body))
    await h.settle()
    return key[1]


def _in(h: Harness, kind: str) -> dict[str, list[tuple[str, str]]]:
    """The workflows of `kind` in each pool."""
    return {name: list(b.held(kind)) for name, b in h.pools.bridges.items()}


@pytest.mark.asyncio
async def test_an_argo_workflow_lands_in_the_pool_its_namespace_selects():
    h = Harness(FakeKube(), FakeClock(), 2, make_scheduler("fifo"))
    h.kube.add_namespace("default", labels={"team": "batch"})
    h.pools.apply("batch", ExecutorPoolSpec.model_validate(BATCH))
    side = ArgoSide(FeatureHost(h))
    await side.workflow_seen(False, _argo_workflow())
    a = await _argo_pod(h, side, "a")
    assert _in(h, ARGO_KIND) == {DEFAULT_POOL: [], "batch": [("default", WF)]}
    batch = h.pools.bridges["batch"]
    assert not h.kube.pods["default", a]["spec"]["schedulingGates"]
    assert (batch.busy, h.bridge.busy) == (1, 0)
    (accepted,) = [e["message"] for e in h.kube.events if e["reason"] == "Accepted"]
    assert "in the pool of 1 executors" in accepted
    # its pod's end and the next pod go to that pool too
    await _argo_pod(h, side, "a", "Succeeded")
    assert batch.busy == 0
    b = await _argo_pod(h, side, "b")
    assert not h.kube.pods["default", b]["spec"]["schedulingGates"] and batch.busy == 1


@pytest.mark.asyncio
async def test_an_argo_workflow_naming_a_missing_pool_waits_gated_until_it_exists():
    h = Harness(FakeKube(), FakeClock(), 2, make_scheduler("fifo"))
    side = ArgoSide(FeatureHost(h))
    await side.workflow_seen(False, _argo_workflow({LABEL_POOL: "gpu"}))
    a = await _argo_pod(h, side, "a")
    assert h.kube.pods["default", a]["spec"]["schedulingGates"]
    assert _in(h, ARGO_KIND) == {DEFAULT_POOL: []}
    (said,) = [e["message"] for e in h.kube.events if e["reason"] == "PoolNotFound"]
    assert said.startswith("ExecutorPool 'gpu' does not exist") and LABEL_POOL in said
    h.pools.apply("gpu", ExecutorPoolSpec.model_validate({"size": 1}))
    h.clock.advance(RETRY)
    await h.timers.fire_due(h.clock.now())
    await h.settle()
    assert _in(h, ARGO_KIND) == {DEFAULT_POOL: [], "gpu": [("default", WF)]}
    assert not h.kube.pods["default", a]["spec"]["schedulingGates"]


MAPPED = ["add-one-0", "add-one-1", "add-one-2"]


@pytest.mark.asyncio
async def test_an_airflow_run_lands_in_the_pool_its_pods_namespace_selects(tmp_path):
    answers = with_live_run(session(MAPPING), MAPPING)
    with airflow(answers, tmp_path, pool=3) as (h, side):
        h.kube.add_namespace("default", labels={"team": "batch"})
        h.pools.apply("batch", ExecutorPoolSpec.model_validate(BATCH))
        for i in range(3):
            pod = worker_pod("add_one", i)
            h.kube.pods[("default", pod["metadata"]["name"])] = pod
        await _see(h, side, *MAPPED)
        run = (
            side.owners["default", MAPPING, LIVE].namespace,
            side.owners["default", MAPPING, LIVE].name,
        )
        assert _in(h, AIRFLOW_KIND) == {DEFAULT_POOL: [], "batch": [run]}
        # the pool of one releases one pod of the three (the default pool, three)
        assert len(_gated(h)) == 2 and h.pools.bridges["batch"].busy == 1
        (released,) = [n for n in MAPPED if n not in _gated(h)]
        await _finish(h, side, released, (1, 31))
        assert len(_gated(h)) == 1 and h.pools.bridges["batch"].busy == 1


@pytest.mark.asyncio
async def test_an_airflow_run_naming_a_missing_pool_is_left_to_airflow_saying_why(tmp_path):
    answers = with_live_run(session(MAPPING), MAPPING)
    with airflow(answers, tmp_path, pool=3) as (h, side):
        pod = worker_pod("add_one", 0)
        pod["metadata"]["labels"][LABEL_POOL] = "gpu"
        h.kube.pods[("default", pod["metadata"]["name"])] = pod
        await _see(h, side, "add-one-0")
        assert _gated(h) == [] and _in(h, AIRFLOW_KIND) == {DEFAULT_POOL: []}
        (said,) = [e["message"] for e in h.kube.events if e["reason"] == "PoolNotFound"]
        assert said.startswith("ExecutorPool 'gpu' does not exist: its pods are left to Airflow")


@pytest.mark.asyncio
async def test_an_airflow_run_naming_a_missing_queue_is_left_to_airflow_saying_which(tmp_path):
    # it said "ExecutorPool 'default' cannot run: ... until its spec is fixed, or label
    # idlegate.io/pool names another": the pool runs, the queue is what is missing
    from idlegate.api.queueing import QueueFile
    from idlegate.sim.queues import queues_from

    answers = with_live_run(session(MAPPING), MAPPING)
    queues = QueueFile(queues_from([{"name": "a", "nominal": {"pods": 2}}]))
    with airflow(answers, tmp_path, pool=3, queues=queues) as (h, side):
        pod = worker_pod("add_one", 0)
        pod["metadata"]["labels"][LABEL_QUEUE] = "gpu"
        h.kube.pods[("default", pod["metadata"]["name"])] = pod
        await _see(h, side, "add-one-0")
        assert _gated(h) == [] and _in(h, AIRFLOW_KIND) == {DEFAULT_POOL: []}
        (said,) = [e["message"] for e in h.kube.events if e["reason"] == "QueueNotFound"]
        assert said == (
            "Queue 'gpu' does not exist in ExecutorPool 'default' (its queues: a): its pods "
            f"are left to Airflow until it is declared, or label {LABEL_QUEUE} names another."
        )


@pytest.mark.asyncio
async def test_an_argo_workflows_history_record_names_the_pool_it_ran_in(tmp_path):
    kube, sink = FakeKube(), tmp_path / "history.jsonl"
    for i in range(3):
        kube.pods[("default", node_id(FAN, f"{FAN}.x({i}:{i})"))] = _fan_pod(i)
    h = Harness(kube, FakeClock(START), 3, make_scheduler("fifo"), history_file=sink)
    kube.add_namespace("default", labels={"team": "batch"})
    h.pools.apply("batch", ExecutorPoolSpec.model_validate(BATCH))
    side = ArgoSide(FeatureHost(h))
    await side.workflow_seen(False, _fan("Running", [None, None, None]))
    await h.settle()
    for i, ran in enumerate([(0, 2), (2, 4), (4, 7)]):
        key = ("default", node_id(FAN, f"{FAN}.x({i}:{i})"))
        kube.pods[key] = _fan_pod(i, ran)
        await side.pod_seen(False, kube.pods[key])
        await h.settle()
    await side.workflow_seen(False, _fan("Succeeded", [2, 4, 7]))
    h.bridge.history.close()
    (record,) = load_history(sink)
    assert (record.pool, record.pool_size) == ("batch", 1)  # not the default pool's 3


@pytest.mark.asyncio
async def test_an_argo_workflow_too_large_for_its_pool_is_left_to_argo_not_held_waiting():
    # the default pool (no resources counted) would take it; its namespace's pool, of one
    # CPU, never can: not scheduled, as on --pool-resources (a DagWorkflow would wait)
    h = Harness(FakeKube(), FakeClock(), 2, make_scheduler("fifo"))
    h.kube.add_namespace("default", labels={"team": "batch"})
    h.pools.apply("batch", ExecutorPoolSpec.model_validate({**BATCH, "resources": {"cpu": 1}}))
    side = ArgoSide(FeatureHost(h))
    pod = gated_argo_pod(too_large.WF, f"{too_large.WF}.a")
    h.kube.pods[("default", pod["metadata"]["name"])] = pod
    await side.workflow_seen(False, too_large._argo(cpu="2"))
    await h.settle()
    assert _in(h, ARGO_KIND) == {DEFAULT_POOL: [], "batch": []}
    assert not h.kube.pods["default", pod["metadata"]["name"]]["spec"]["schedulingGates"]
    (said,) = [e["message"] for e in h.kube.events if e["reason"] == "NotScheduled"]
    assert (
        "stage 'b' of default/etl needs cpu=2 at once" in said and "(its resources: cpu=1)" in said
    )
