"""Issue 52's e2e on nodes, scaled down for the suite: mixed-size DagWorkflows and Argo
Workflows on one resource pool over three nodes of 8 CPU and 32 GiB (tests/nodes_e2e.py:
the real operator, the test API server's kube-scheduler binding pods by their requests,
the simulated kubelet, the stand-in for Argo's controller). The scenario runs once per
module; each test checks one figure of the issue's "Done when". The 60-workflow run is
benchmarks/e2e_nodes.py (docs/resources.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from idlegate.api.labels import LABEL_WORKFLOW
from tests.argo_data import WORKFLOW_CRD, need
from tests.e2e import new_namespace, wait
from tests.k8s.harness import ApiServer, serving_crd
from tests.k8s.scheduler import node
from tests.nodes_e2e import ClusterMonitor, Outcome, run
from tests.test_k8s_scheduler import NS, end, pod

# On an accelerated wall clock, not fake loop time: the real operator, the API emulator
# and the simulated kubelet run in threads of their own; why: tests/e2e.py, at SPEED.

pytestmark = pytest.mark.slow
pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")

WORKFLOWS = 12
UTILISATION = 0.70
"""The share of the nodes' CPU requested while work waits that this short run always
reaches: 82.6-89.1 % in five runs with the pool packing (`idlegate.sim.pool.packed`),
wall-clock figures that move from run to run. Issue 52's 85 % is
benchmarks/e2e_nodes.py's bar, on 60 workflows (docs/resources.md).

A floor against nodes left idle, not a check of the packing: with the operator's node
choice swapped for LeastAllocated's (the emptiest node) this run reached 80.1 and 84.4 %,
for first fit 85.4 %, packing 85.5-87.5 % in four runs (`-k cpu_is_used -s`), so no bar
on this figure tells them apart, nor did the share of releases to the fullest node as a
watcher of the API sees the room (packing 63-75 %, LeastAllocated 20-45 %: the
operator's view of the room lags the watcher's). The packing is checked where it is
decided, without a clock: tests/test_node_pools.py's
`test_a_task_takes_its_room_on_the_node_it_fills_most_on_both_clocks` and
`test_a_released_pod_is_pinned_to_the_node_its_pool_placed_it_on` fail under either swap."""


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    crd = yaml.safe_load(need(WORKFLOW_CRD).read_text())
    for api in serving_crd(tmp_path_factory.mktemp("k8s")):
        api.create("customresourcedefinitions", crd)
        namespace = new_namespace(api, "e2e-nodes")
        result = run(api, namespace, workflows=WORKFLOWS, seed=1)
        print("\n".join(result.lines()))
        yield result


def test_every_workflow_succeeds_and_no_pod_is_created_twice(outcome: Outcome) -> None:
    report = "\n".join(outcome.lines())
    assert len(outcome.workflows) == WORKFLOWS, report
    assert outcome.succeeded == WORKFLOWS, (outcome.workflows, report)
    assert outcome.twice == [], report


def test_requests_on_a_node_never_exceed_its_allocatable(outcome: Outcome) -> None:
    assert outcome.overcommits == []
    assert max(outcome.peak_cpu.values()) > 0.5  # (the nodes were used, and so checked)


def test_no_pod_idlegate_releases_pends_unschedulable(outcome: Outcome) -> None:
    assert outcome.released > 0
    assert outcome.unschedulable_released == [], "\n".join(outcome.lines())


def test_cpu_is_used_while_work_waits(outcome: Outcome) -> None:
    assert outcome.waiting_seconds > 0
    assert outcome.utilisation >= UTILISATION, "\n".join(outcome.lines())


def test_the_monitor_sees_an_overcommit_a_released_pod_pending_and_the_cpu_in_use(
    tmp_path: Path,
) -> None:
    """Its figures from writes whose answer is known: two pods bound past the scheduler
    (created with a nodeName) overcommit the node; a released pod then pends there; while
    it waits, the node's pods request 2.5 of its 2 CPUs, then less as they end; a name
    created twice."""
    with ApiServer(tmp_path) as api:
        api.create("nodes", node("n", cpu="2"))
        monitor = ClusterMonitor(api, NS, {"w"})
        try:
            for _ in range(2):
                api.create("pods", pod("dup", "0", nodeName="n"), NS)
                api.delete("pods", NS, "dup")
            api.create("pods", pod("held", "1500m", nodeName="n"), NS)
            api.create("pods", pod("over", "1", nodeName="n"), NS)
            api.create("pods", pod("late", "1", gated=True), NS)
            api.patch("pods", NS, "late", {"spec": {"schedulingGates": None}})
            wait(lambda: monitor.outcome().unschedulable, 30, "late to pend")
            pending = monitor.outcome()  # (the held pods' 2.5 CPU all the while late waited)
            for name in ("held", "over"):
                end(api, name)
            wait(lambda: not monitor.waiting, 30, "late to be bound")
        finally:
            monitor.close()
        out = monitor.outcome()
    assert out.overcommits == ["n: cpu=2500m,memory=2Gi,pods=2 (cpu over)"]
    assert out.peak_cpu == {"n": 1.25}
    assert out.released == 1 and out.unschedulable_released == ["late"]
    assert out.twice == ["dup"] and out.pods == 4
    assert pending.waiting_seconds > 0 and pending.utilisation == pytest.approx(1.25)
    assert out.waiting_seconds > pending.waiting_seconds and out.utilisation < 1.25


def test_the_monitor_times_a_status_from_its_workflows_last_pod_ending() -> None:
    """benchmarks/scale.py's status_lag_s: from a DagWorkflow's last pod ending (its first
    write saying so; its deletion later does not count) to its status first saying
    Succeeded (a later write of it neither), at the times the monitor saw them."""

    class Api:  # (no API server: each write handed over at a chosen time)
        def call(self, start: object) -> None:
            return None

    monitor = ClusterMonitor(Api(), NS, {"w"})  # type: ignore[arg-type]
    labels = {LABEL_WORKFLOW: "w"}

    def seen(at: float, write: Callable[..., None], *args: Any) -> None:
        monitor._last = at
        write(*args)

    for name, at in (("w-a-0", 10.0), ("w-a-1", 12.0)):
        ended = {"metadata": {"name": name, "labels": labels}, "status": {"phase": "Succeeded"}}
        seen(at, monitor._on_pod, "MODIFIED", ended)
    seen(14.0, monitor._on_workflow, "MODIFIED", {"metadata": {"name": "w"}, "status": {}})
    seen(15.5, monitor._on_pod, "DELETED", ended)
    for at in (15.5, 20.0):
        done = {"metadata": {"name": "w"}, "status": {"phase": "Succeeded"}}
        seen(at, monitor._on_workflow, "MODIFIED", done)
    assert monitor.status_lags() == [3.5]


# -- with failures: each retry's pod goes back to its task's node (issue 60, item 1) --------


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    crd = yaml.safe_load(need(WORKFLOW_CRD).read_text())
    for api in serving_crd(tmp_path_factory.mktemp("k8s")):
        api.create("customresourcedefinitions", crd)
        namespace = new_namespace(api, "e2e-retries")
        result = run(api, namespace, workflows=WORKFLOWS, seed=1, failing=True)
        print("\n".join(result.lines()))
        yield result


def test_every_retry_is_pinned_and_no_released_pod_pends(failing: Outcome) -> None:
    """Issue 60, item 1: 12 of 12 retries went out unpinned, and 8 released pods then
    pended Unschedulable, the pool's view off where the retries landed."""
    report = "\n".join(failing.lines())
    assert failing.succeeded == WORKFLOWS, report
    assert len(failing.retries) >= WORKFLOWS, report  # (two a DagWorkflow)
    assert [name for name, pinned in failing.retries if not pinned] == [], report
    assert failing.unschedulable_released == [], report
    assert failing.overcommits == [], report
