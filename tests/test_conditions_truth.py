"""Issue 68, item 5: conditions and Events that tell the truth. A Waiting Event always says
why (none reads "waits for an executor: ; 3 executor(s) stay free"), a stage no node can hold
is the workflow's condition (NoNodeFits, not WaitingForExecutors), and an ExecutorPool's
status is written when a change ends, not only every 5 s. Over the operator's fakes in fake
time; every Event the e2e suites post is checked too (tests/k8s/harness.py, `says_nothing`)."""

from __future__ import annotations

import asyncio

import pytest

from idlegate.sim.resources import ResourceVector
from tests.k8s.harness import says_nothing
from tests.operator_fakes import harness, stage

pytestmark = pytest.mark.looptime


@pytest.mark.asyncio
async def test_a_stage_whose_requests_do_not_fit_the_free_cpu_says_so_not_nothing():
    # the round ends with executors free and no WAIT (no stage fits the free CPU): its
    # Waiting Event read "waits for an executor: ; 3 executor(s) stay free"
    resources = ResourceVector.of({"cpu": "2", "pods": 4})
    h = harness(pool=4, pool_resources=resources)
    big = {"resources": {"cpu": "2"}}
    await h.submit("w1", {"stages": [stage("a", tasks=1, duration=10.0, **big)]})
    h.clock.advance(1)
    await h.submit("w2", {"stages": [stage("a", tasks=1, duration=10.0, **big)]})
    assert len(h.released()) == 1
    # (a Waiting Event, or the Accepted one that says why a new workflow waits: issue 79)
    waiting = [e for e in h.kube.events if "waits for an executor" in e["message"]]
    assert waiting, h.kube.events
    assert [says_nothing(e) for e in waiting] == [None] * len(waiting), waiting
    (said,) = [e["message"] for e in waiting if e["involvedObject"]["name"] == "w2"]
    assert "cpu" in said, said


def _running(h, name: str) -> tuple[str, str, str]:
    (running,) = [c for c in h.kube.status(name)["conditions"] if c["type"] == "Running"]
    return running["status"], running["reason"], running["message"]


@pytest.mark.asyncio
async def test_a_stage_no_node_holds_is_the_workflows_condition_not_a_wait_for_executors(
    monkeypatch,
):
    # the condition read Running=False WaitingForExecutors ("wait for a free executor"):
    # only an Event said NoNodeFits
    from tests.test_node_pools import _Live, following, node

    h = harness(pool=8, pool_nodes="")
    following(h, monkeypatch)
    watch = h.pools.watch
    watch.nodes = {n: [node(n, cpu="8")] for n in ("a", "b")}
    watch.pods = _Live(h.kube)
    h.pools.nodes_changed()
    await h.submit("w", {"stages": [stage("train", resources={"cpu": "12"})]})
    h.pools.nodes_changed()
    await h.settle()
    status, reason, message = _running(h, "w")
    assert (status, reason) == ("False", "NoNodeFits"), message
    assert message.startswith("Stage 'train' asks cpu=12 a task, more than any node")
    watch.nodes["c"] = [node("c", cpu="16")]  # (a node that large joins: it runs)
    h.pools.nodes_changed()
    await h.settle()
    assert h.released("w") == ["w-train-0"]
    assert _running(h, "w")[:2] == ("True", "TasksRunning")


@pytest.mark.asyncio
async def test_a_pools_status_is_written_when_a_change_ends_not_only_every_five_seconds():
    # it showed BUSY 2, PENDING 1 after everything had finished, until the next refresh
    from idlegate.api.pool_spec import ExecutorPoolSpec

    h = harness(pool=1, status_interval=0.5)
    queues = [{"name": "a", "nominal": {"pods": 2}}]
    raw = {"size": 2, "namespaceSelector": {}, "queues": queues}
    body = h.kube.add_pool("batch", raw)
    h.pools.apply("batch", ExecutorPoolSpec.model_validate(raw), body["metadata"]["uid"])
    await h.submit("w", {"stages": [stage("a", tasks=3)]})
    await asyncio.sleep(1)  # (the status lane's batch: status_interval)
    await h.settle()
    status = h.kube.pools["batch"]["status"]
    assert (status["busy"], status["pending"], status["queuesSummary"]) == (2, 1, "a=1")
    await h.run_to_completion()
    await asyncio.sleep(1)  # (the status lane's batch: status_interval)
    await h.settle()
    status = h.kube.pools["batch"]["status"]
    assert (status["busy"], status["pending"], status["queuesSummary"]) == (0, 0, "a=0")
