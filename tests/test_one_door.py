"""Issue 68, item 1: one door. Every kind (DagWorkflow, Argo Workflow, Airflow run) is placed in
its pool, queue and priority by one function (`Pools.place`), and a pool's change (resize,
edit, queues changed, removed) walks every held job of every kind: a running Argo or Airflow
job moves to the pool's new state machine with its pods, never dropped. Over the operator's
fakes in fake time; and a quota a node pool's nodes cannot hold is refused."""

from __future__ import annotations

import pytest

from idlegate.api.pool_spec import DEFAULT_POOL, ExecutorPoolSpec, parse_pool_spec
from idlegate.api.routing import AIRFLOW_KIND, ARGO_KIND
from idlegate.operator.edge import intake
from idlegate.operator.features.argo import ArgoSide
from idlegate.policy import make_scheduler
from tests.airflow_data import session
from tests.operator_fakes import FakeClock, FakeKube, FeatureHost, Harness
from tests.test_airflow_live import LIVE, MAPPING, with_live_run
from tests.test_airflow_operator import _gated, _see, airflow, worker_pod
from tests.test_routing import BATCH, WF, _argo_pod, _argo_workflow, _in

pytestmark = pytest.mark.looptime

BIGGER = {**BATCH, "size": 2}
QUEUED = {**BATCH, "queues": [{"name": "a", "nominal": {"pods": 1}}]}


async def _change(h: Harness, spec: dict, pool: str = "batch") -> None:
    """What the ExecutorPool handler does with a new spec of `pool`."""
    with h.pools.moving():
        await intake.readmit(h.pools, h.pools.apply(pool, ExecutorPoolSpec.model_validate(spec)))
    await h.settle()


@pytest.mark.asyncio
@pytest.mark.parametrize("spec", [BIGGER, QUEUED], ids=["resized", "queues-added"])
async def test_a_pool_change_keeps_a_running_argo_job_and_its_executor(spec):
    # the pool's state machine is built again: its Argo job left with the old one (busy 1
    # -> 0), not admitted again until the Workflow's next event
    h = Harness(FakeKube(), FakeClock(), 2, make_scheduler("fifo"))
    h.kube.add_namespace("default", labels={"team": "batch"})
    h.pools.apply("batch", ExecutorPoolSpec.model_validate(BATCH))
    side = ArgoSide(FeatureHost(h))
    await side.workflow_seen(False, _argo_workflow())
    a = await _argo_pod(h, side, "a")
    assert not h.kube.pods["default", a]["spec"]["schedulingGates"]
    assert h.pools.bridges["batch"].busy == 1
    await _change(h, spec)
    batch = h.pools.bridges["batch"]
    assert _in(h, ARGO_KIND) == {DEFAULT_POOL: [], "batch": [("default", WF)]}
    assert batch.busy == 1  # its running pod holds its executor in the new state machine
    # and it goes on there: its pod's end frees the executor, the next stage's pod is released
    h.clock.advance(1)  # (the admission's question is cached for an instant: issue 68)
    await _argo_pod(h, side, "a", "Succeeded")
    assert batch.busy == 0
    h.clock.advance(1)
    b = await _argo_pod(h, side, "b")
    assert not h.kube.pods["default", b]["spec"]["schedulingGates"] and batch.busy == 1


@pytest.mark.asyncio
async def test_a_removed_pool_sends_its_argo_job_to_the_pool_that_takes_it_now():
    h = Harness(FakeKube(), FakeClock(), 2, make_scheduler("fifo"))
    h.kube.add_namespace("default", labels={"team": "batch"})
    h.pools.apply("batch", ExecutorPoolSpec.model_validate(BATCH))
    side = ArgoSide(FeatureHost(h))
    await side.workflow_seen(False, _argo_workflow())
    await _argo_pod(h, side, "a")
    with h.pools.moving():
        await intake.readmit(h.pools, h.pools.remove("batch"))
    await h.settle()
    assert _in(h, ARGO_KIND) == {DEFAULT_POOL: [("default", WF)]}
    assert h.bridge.busy == 1


@pytest.mark.asyncio
async def test_a_pool_change_keeps_a_running_airflow_run(tmp_path):
    answers = with_live_run(session(MAPPING), MAPPING)
    names = ["add-one-0", "add-one-1", "add-one-2"]
    with airflow(answers, tmp_path, pool=3) as (h, side):
        h.kube.add_namespace("default", labels={"team": "batch"})
        h.pools.apply("batch", ExecutorPoolSpec.model_validate(BATCH))
        for i in range(3):
            pod = worker_pod("add_one", i)
            h.kube.pods[("default", pod["metadata"]["name"])] = pod
        await _see(h, side, *names)
        owner = side.owners["default", MAPPING, LIVE]
        run = (owner.namespace, owner.name)
        assert len(_gated(h)) == 2 and h.pools.bridges["batch"].busy == 1
        await _change(h, BIGGER)
        assert _in(h, AIRFLOW_KIND) == {DEFAULT_POOL: [], "batch": [run]}
        # the running pod keeps its executor, and the grown pool releases one more
        assert h.pools.bridges["batch"].busy == 2 and len(_gated(h)) == 1


@pytest.mark.asyncio
async def test_a_gpu_quota_on_a_node_pool_with_no_gpu_node_is_refused_as_on_a_resources_pool():
    from idlegate.errors import IdlegateError
    from tests.k8s.scheduler import node

    queues = [{"name": "a", "nominal": {"pods": 4, "nvidia.com/gpu": 1}}]
    with pytest.raises(IdlegateError, match=r"the pool does not count nvidia\.com/gpu"):
        parse_pool_spec({"size": 4, "resources": {"cpu": 8}, "queues": queues}, "gpu")
    h = Harness(FakeKube(), FakeClock(), 2, make_scheduler("fifo"))
    h.pools.watch.nodes, h.pools.watch.read = {"a": [node("a", cpu="8")]}, True
    spec = ExecutorPoolSpec.model_validate({"size": 4, "nodeSelector": {}, "queues": queues})
    with pytest.raises(IdlegateError, match=r"the pool does not count nvidia\.com/gpu"):
        h.pools.apply("gpu", spec)
    assert "gpu" not in h.pools.bridges
    h.pools.watch.nodes["b"] = [node("b", cpu="8", gpus=1)]  # a GPU node: accepted
    h.pools.apply("gpu", spec)
    assert h.pools.bridges["gpu"].queues


@pytest.mark.asyncio
async def test_a_missing_queue_is_not_a_missing_pool_each_waits_for_its_own():
    # one pool, p, with queue a: `lost` names pool gpu (missing), `unqueued` names queue b
    # of p (missing). Each waits with its own reason and sentence; creating gpu places
    # `lost` only, declaring b places `unqueued`.
    from tests.operator_fakes import harness, stage

    h = harness(pool=2)
    p = {"size": 2, "namespaceSelector": {}, "queues": [{"name": "a", "nominal": {"pods": 2}}]}
    await _change(h, p, "p")
    h.admit(h.kube.add_workflow("lost", {"stages": [stage("s")], "pool": "gpu"}))
    h.admit(h.kube.add_workflow("unqueued", {"stages": [stage("s")], "queueName": "b"}))
    await h.settle()

    def waits() -> dict[str, tuple[str, str]]:
        return {k[1]: (w.pool, w.reason) for k, w in h.pools.waiting.items()}

    def ready(name: str) -> tuple[str, str]:
        (cond,) = [c for c in h.kube.status(name)["conditions"] if c["type"] == "PoolReady"]
        return cond["status"], cond["reason"]

    assert waits() == {"lost": ("gpu", "PoolNotFound"), "unqueued": ("p", "QueueNotFound")}
    assert ready("lost") == ("False", "PoolNotFound")
    assert ready("unqueued") == ("False", "QueueNotFound")
    said = {e["involvedObject"]["name"]: e["message"] for e in h.kube.events}
    assert said["lost"] == (
        "ExecutorPool 'gpu' does not exist: the workflow waits until it is created "
        "(kubectl get executorpools), or spec.pool names another."
    )
    assert said["unqueued"] == (
        "Queue 'b' does not exist in ExecutorPool 'p' (its queues: a): the workflow waits "
        "until it is declared, or names another queue."
    )
    assert h.released() == []
    await _change(h, {"size": 1}, "gpu")
    assert waits() == {"unqueued": ("p", "QueueNotFound")} and h.released() == ["lost-s-0"]
    p["queues"] = [{"name": "a", "nominal": {"pods": 1}}, {"name": "b", "nominal": {"pods": 1}}]
    await _change(h, p, "p")
    assert waits() == {} and h.released() == ["lost-s-0", "unqueued-s-0"]
