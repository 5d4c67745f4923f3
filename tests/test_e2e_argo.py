"""Argo Workflows scheduled by the real operator, end to end: the emulated API server with
Argo's real Workflow CRD, the stand-in for Argo's controller (tests/k8s/argo_controller.py,
which creates each ready node's pod gated, as the webhook makes it), the simulated kubelet,
and the operator with ``--argo`` in one pool beside DagWorkflows. Waits are on what the
emulator holds, never on the wall clock's pace (tests/e2e.py's `wait`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from idlegate.api.argo_pods import NODE_NAME, WORKFLOW_LABEL
from idlegate.api.kinds import API_VERSION, GROUP, POOL_KIND, POOL_PLURAL, VERSION
from idlegate.api.labels import ANNOTATION_EXECUTOR, GATE
from idlegate.sim.history import load_history
from idlegate.sim.protocol import Decision
from idlegate.sim.timestamps import from_datetime
from tests.argo_data import WORKFLOW_CRD, need
from tests.argo_workflows import argo, diamond, loop, phase, pod_template, steps
from tests.clocks import ScaledClock
from tests.e2e import (
    DWF,
    HOLD_SECONDS,
    SPEED,
    OperatorProcess,
    PodMonitor,
    events_of,
    operator_processes,
    running_operator,
    stage,
    status_of,
    wait,
    workflow,
)
from tests.helpers import Scripted
from tests.k8s.apiserver import PODS
from tests.k8s.argo_controller import DONE, WORKFLOWS, ArgoController
from tests.k8s.harness import ApiServer, serving_crd
from tests.k8s.kubelet import SimKubelet, duration_of

# On an accelerated wall clock, not fake loop time: the real operator, the API emulator
# and the simulated kubelet run in threads (or processes) of their own; why: tests/e2e.py,
# at SPEED.

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    crd = yaml.safe_load(need(WORKFLOW_CRD).read_text())
    for server in serving_crd(tmp_path_factory.mktemp("k8s")):
        server.create("customresourcedefinitions", crd)
        yield server


# -- Argo workflows of the shapes users run -------------------------------------------------------


def _bare(name: str) -> dict[str, Any]:
    """A pod template without an estimate (no annotation)."""
    return {"name": name, "container": {"image": "busybox"}}


def flaky(name: str, seconds: float = 10) -> dict[str, Any]:
    """A task whose first attempt fails (see `first_attempt_of_flaky_fails`), retried."""
    tasks = [
        {"name": "fetch", "template": "f"},
        {"name": "load", "template": "p", "dependencies": ["fetch"]},
    ]
    return argo(
        name,
        {"dag": {"tasks": tasks}},
        pod_template("f", seconds, retries=2),
        pod_template("p", seconds),
    )


def first_attempt_of_flaky_fails(pod: Mapping[str, Any]) -> int | None:
    node = pod["metadata"]["annotations"].get(NODE_NAME, "")
    return 1 if node.startswith("flaky") and node.endswith(".fetch(0)") else None


# -- what the emulator holds ----------------------------------------------------------------------


def all_finished(api: ApiServer, ns: str, argo_names: list[str], dag_names: list[str]) -> bool:
    return all(phase(api, ns, n) in DONE for n in argo_names) and all(
        status_of(api, ns, n).get("phase") in ("Succeeded", "Failed") for n in dag_names
    )


class Releases:
    """Every executor ever recorded on each pod: a pod released twice would show two."""

    def __init__(self, api: ApiServer, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.executors: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        self._unsubscribe = api.call(api.emulator.subscribe, self._on_event)

    def _on_event(self, res: Any, etype: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if res != PODS or meta.get("namespace") != self.namespace:
            return
        executor = (meta.get("annotations") or {}).get(ANNOTATION_EXECUTOR)
        if executor is not None:
            with self._lock:
                self.executors.setdefault(meta["name"], set()).add(executor)

    def twice(self) -> list[str]:
        with self._lock:
            return [pod for pod, seen in self.executors.items() if len(seen) > 1]

    def close(self) -> None:
        self.api.call(self._unsubscribe)


# -- scenarios ------------------------------------------------------------------------------------


def test_an_argo_diamond_runs_under_the_pool_with_events_on_the_workflow(api, ns):
    monitor = PodMonitor(api, ns)
    with (
        SimKubelet(api, ns, time_factor=1 / SPEED),
        ArgoController(api, ns),
        running_operator(api, ns, pool=1, argo=True) as op,
    ):
        api.create(WORKFLOWS, diamond("dia"), ns)
        # a daemon step does not map to a job: its pods are released as Argo creates them
        daemon = argo(
            "daemon", {"dag": {"tasks": [{"name": "db", "template": "p"}]}}, pod_template("p", 5)
        )
        daemon["spec"]["templates"][1]["daemon"] = True
        api.create(WORKFLOWS, daemon, ns)
        wait(lambda: phase(api, ns, "dia") in DONE, 60, "the Argo diamond to finish")
        wait(lambda: phase(api, ns, "daemon") in DONE, 60, "the daemon workflow to finish")
        wait(lambda: op.bridge.core.cluster.jobs == [], 60, "the diamond's job to leave the pool")
    monitor.close()
    assert phase(api, ns, "dia") == phase(api, ns, "daemon") == "Succeeded"
    assert [e["reason"] for e in events_of(api, ns, "daemon")] == ["NotScheduled"]
    (unscheduled,) = api.list(PODS, ns, label_selector=f"{WORKFLOW_LABEL}=daemon")
    assert ANNOTATION_EXECUTOR not in unscheduled["metadata"].get("annotations", {})
    # the diamond ran on the one executor, one pod at a time (the daemon's beside it)
    assert monitor.max_per_workflow[""] <= 2
    pods = api.list(PODS, ns, label_selector=f"{WORKFLOW_LABEL}=dia")
    assert len(pods) == 4 and all(not p["spec"].get("schedulingGates") for p in pods)
    assert {p["metadata"]["annotations"][ANNOTATION_EXECUTOR] for p in pods} == {"0"}
    events = events_of(api, ns, "dia")
    assert {e["involvedObject"]["kind"] for e in events} == {"Workflow"}
    reasons = [e["reason"] for e in events]
    released = sum(e.get("count", 1) for e in events if e["reason"] == "Released")
    assert reasons.count("Accepted") == 1 and released >= 4  # (joined ones: counted)
    assert "Waiting" in reasons  # b or c waited for the one executor
    # the estimates came from the template's annotation: no Event about the prior
    assert "Estimated" not in reasons


def test_an_argo_workflow_lands_in_the_pool_its_namespace_selects(api, ns):
    """Issue 59's seam: the Workflow joins the ExecutorPool that selects its namespace (it
    joined the operator's own pool whatever the namespace), read from kopf's index of
    namespaces; its pods run there, one at a time in a pool of one."""
    team = f"argo-{ns}"
    api.patch("namespaces", None, ns, {"metadata": {"labels": {"team": team}}})
    selector = {"matchLabels": {"team": team}}
    batch = {"apiVersion": API_VERSION, "kind": POOL_KIND, "metadata": {"name": team}}
    batch["spec"] = {"size": 1, "namespaceSelector": selector}
    with (
        SimKubelet(api, ns, time_factor=1 / SPEED),
        ArgoController(api, ns),
        running_operator(api, ns, pool=3, argo=True) as op,
    ):
        api.create(f"{GROUP}/{VERSION}/{POOL_PLURAL}", batch)
        wait(lambda: team in op.pools.bridges, 10, "the second pool")
        api.create(WORKFLOWS, diamond("routed"), ns)
        joined = lambda: (ns, "routed") in op.pools.bridges[team].held("Workflow")  # noqa: E731
        wait(joined, 30, "the Workflow to join the second pool")
        assert op.bridge.held("Workflow") == {}
        wait(lambda: phase(api, ns, "routed") in DONE, 60, "the workflow to finish")
    assert phase(api, ns, "routed") == "Succeeded"
    pods = api.list(PODS, ns, label_selector=f"{WORKFLOW_LABEL}=routed")
    assert {p["metadata"]["annotations"][ANNOTATION_EXECUTOR] for p in pods} == {"0"}
    (accepted,) = [e for e in events_of(api, ns, "routed") if e["reason"] == "Accepted"]
    assert "in the pool of 1 executors" in accepted["message"]


def test_argos_parallelism_holds_back_pods_and_the_pool_goes_on(api, ns):
    """Argo creates no pod while `parallelism` pods exist, gated ones included: a policy
    that prefers the stage whose pod Argo holds back must not hold the executor for it."""
    tasks = [
        {"name": "x", "template": "p", "withItems": list(range(5))},
        {"name": "y", "template": "p"},
    ]
    doc = argo("wide", {"dag": {"tasks": tasks}}, pod_template("p", 5))
    doc["spec"]["parallelism"] = 2
    latest_first = Scripted(lambda view, stages: Decision(stages[-1], view.num_executors))
    with (
        SimKubelet(api, ns, time_factor=1 / SPEED),
        ArgoController(api, ns),
        running_operator(api, ns, pool=1, argo=True, scheduler=latest_first) as op,
    ):
        api.create(WORKFLOWS, doc, ns)
        wait(lambda: phase(api, ns, "wide") in DONE, 60, "the workflow to finish")
        # (the operator reads the last pod's end after Argo may have set the phase)
        wait(lambda: op.bridge.core.cluster.jobs == [], 60, "the operator to let the workflow go")
    assert phase(api, ns, "wide") == "Succeeded"
    pods = api.list(PODS, ns, label_selector=f"{WORKFLOW_LABEL}=wide")
    assert len(pods) == 6
    assert {p["metadata"]["annotations"][ANNOTATION_EXECUTOR] for p in pods} == {"0"}


def test_estimates_come_from_the_templates_history_which_the_sink_records(api, ns, tmp_path):
    sink = tmp_path / "history.jsonl"

    def run(name: str) -> dict[str, Any]:
        doc = argo(name, {"dag": {"tasks": [{"name": "a", "template": "p"}]}}, _bare("p"))
        doc["metadata"]["labels"] = {"workflows.argoproj.io/workflow-template": "etl"}
        api.create(WORKFLOWS, doc, ns)
        wait(lambda: phase(api, ns, name) in DONE, 60, f"{name} to finish")
        return {e["reason"] for e in events_of(api, ns, name)}

    # the pods run 2 wall seconds, so that Argo's whole-second node times measure them
    with (
        SimKubelet(api, ns, time_factor=1 / SPEED, durations=lambda pod: 2 * SPEED),
        ArgoController(api, ns),
        running_operator(api, ns, pool=1, argo=True, history_file=sink),
    ):
        first = run("etl-1")  # no history, no annotation: the prior, and an Event says so
        wait(lambda: sink.exists() and sink.read_text(), 30, "the first record in the sink")
        second = run("etl-2")  # the first run's measured time is its estimate
        wait(lambda: len(sink.read_text().splitlines()) == 2, 30, "the second record")
    assert "Estimated" in first and "Estimated" not in second
    records = load_history(sink)
    assert [(r.name, r.template, r.outcome) for r in records] == [
        (f"{ns}/etl-1", "etl", "Succeeded"),
        (f"{ns}/etl-2", "etl", "Succeeded"),
    ]
    assert all(r.measured[0] for r in records)


def _own_seconds(pod: Mapping[str, Any]) -> float:
    """A finished pod's run time as its container reports it (the kubelet's whole seconds)."""
    (ended,) = (c["state"]["terminated"] for c in pod["status"]["containerStatuses"])
    return from_datetime(ended["finishedAt"]) - from_datetime(ended["startedAt"])


def test_a_pods_wait_at_the_gate_is_not_recorded_as_its_run_time(api, ns, tmp_path):
    """Argo starts a node's clock when it creates the node's (gated) pod: on a pool of one,
    the last of three pods waits for the two before it, and its node's time counts that
    wait. The records, Argo's and a DagWorkflow's beside it, keep each pod's own run time,
    which the next runs' estimates are learned from."""
    sink = tmp_path / "history.jsonl"
    fan = [{"name": "x", "template": "p", "withItems": [0, 1, 2]}]
    with (
        SimKubelet(api, ns, time_factor=1 / SPEED, durations=lambda pod: 2 * SPEED),
        ArgoController(api, ns),
        running_operator(api, ns, pool=1, argo=True, history_file=sink),
    ):
        api.create(
            WORKFLOWS, argo("fan", {"dag": {"tasks": fan}}, pod_template("p", 2 * SPEED)), ns
        )
        api.create(DWF, workflow("dwf", stage("a", 2, 2 * SPEED)), namespace=ns)
        wait(lambda: all_finished(api, ns, ["fan"], ["dwf"]), 60, "both workflows to finish")
        wait(
            lambda: sink.exists() and len(sink.read_text().splitlines()) == 2,
            30,
            "both records in the sink",
        )
    records = {r.name: r for r in load_history(sink)}
    pods = api.list(PODS, ns, label_selector=f"{WORKFLOW_LABEL}=fan")
    own = {p["metadata"]["name"]: _own_seconds(p) for p in pods}
    nodes = api.get(WORKFLOWS, ns, "fan")["status"]["nodes"]
    at_node = {
        n["id"]: from_datetime(n["finishedAt"]) - from_datetime(n["startedAt"])
        for n in nodes.values()
        if n["type"] == "Pod"
    }
    # the premise: a pod waited 4 s or more at the gate (pods are named by their node's id)
    assert max(at_node[name] - seconds for name, seconds in own.items()) >= 3
    assert sorted(records[f"{ns}/fan"].measured[0]) == sorted(own.values())
    dag_pods = [p for p in api.list(PODS, ns) if p["metadata"]["name"].startswith("dwf-")]
    dag_own = sorted(SPEED * _own_seconds(p) for p in dag_pods)  # (the operator's clock)
    assert sorted(status_of(api, ns, "dwf")["stages"][0]["measuredDurationSeconds"]) == dag_own
    assert sorted(records[f"{ns}/dwf"].measured[0]) == dag_own


def test_a_record_the_sink_cannot_write_is_a_warning_on_the_workflow(api, ns, tmp_path):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    with (
        SimKubelet(api, ns, time_factor=1 / SPEED),
        ArgoController(api, ns),
        running_operator(api, ns, pool=1, argo=True, history_file=blocked / "h.jsonl") as op,
    ):
        api.create(WORKFLOWS, diamond("unrecorded"), ns)
        wait(lambda: phase(api, ns, "unrecorded") in DONE, 60, "the workflow to finish")
        reasons = lambda: {e["reason"] for e in events_of(api, ns, "unrecorded")}  # noqa: E731
        wait(lambda: "HistoryNotRecorded" in reasons(), 30, "the Warning on the Workflow")
        assert op.metrics.value("idlegate_history_errors_total") == 1
        assert op.metrics.value("idlegate_history_records_total") == 0


def test_a_restart_posts_no_event_again_that_a_workflow_has_already(api, ns):
    """Issue 42: a restarted operator posted each Argo Workflow's Accepted and Estimated
    again, the running one's and the queued one's alike."""

    def run_holds(pod: Mapping[str, Any]) -> float:  # (run's one pod runs on and on)
        held = pod["metadata"]["annotations"].get(NODE_NAME) == "run.a"
        return HOLD_SECONDS if held else duration_of(pod)

    names = ("run", "queued")  # no estimate for their pods: each gets Estimated too
    # (run's pod runs, queued's waits gated for the one executor)
    clock = ScaledClock(SPEED)  # one clock across both runs, as wall time is for real
    monitor = PodMonitor(api, ns)
    with (
        SimKubelet(api, ns, time_factor=1 / SPEED, durations=run_holds),
        ArgoController(api, ns),
    ):
        with running_operator(api, ns, pool=1, argo=True, clock=clock) as first:
            for name, pods in zip(names, ((1, 0), (1, 1)), strict=True):
                task = {"name": "a", "template": "p"}
                api.create(WORKFLOWS, argo(name, {"dag": {"tasks": [task]}}, _bare("p")), ns)
                wait(lambda pods=pods: monitor.counts() == pods, 30, f"{name}'s pod")
            wait(lambda: len(first.bridge.core.held.get("Workflow", {})) == 2, 30, "both admitted")
            wait(lambda: first.bridge.lanes.pending() == 0, 10, "the writes")
        with running_operator(api, ns, pool=1, argo=True, clock=clock) as second:
            wait(
                lambda: len(second.bridge.core.held.get("Workflow", {})) == 2,
                30,
                "both admitted again",
            )
            wait(lambda: second.bridge.lanes.pending() == 0, 10, "the writes")
    monitor.close()
    assert phase(api, ns, "queued") not in DONE  # (it waited through the restart)
    for name in names:
        reasons = [e["reason"] for e in events_of(api, ns, name)]
        assert (reasons.count("Accepted"), reasons.count("Estimated")) == (1, 1), (name, reasons)


def test_fifty_argo_and_twenty_dag_workflows_share_one_pool_through_a_kill(api, ns, tmp_path):
    pool = 6
    monitor = PodMonitor(api, ns)
    releases = Releases(api, ns)
    argo_docs = (
        [diamond(f"dia-{i}") for i in range(15)]
        + [loop(f"loop-{i}", 2 + i % 5) for i in range(15)]
        + [steps(f"steps-{i}") for i in range(12)]
        + [flaky(f"flaky-{i}") for i in range(8)]
    )
    dags = [workflow(f"dwf-{i}", stage("a", 2, 10), stage("b", 1, 10, ("a",))) for i in range(20)]
    argo_names = [d["metadata"]["name"] for d in argo_docs]
    dag_names = [d["metadata"]["name"] for d in dags]
    try:
        with (
            operator_processes(tmp_path) as started,
            SimKubelet(api, ns, time_factor=1 / SPEED, failure=first_attempt_of_flaky_fails),
            ArgoController(api, ns),
        ):
            first = OperatorProcess(api, ns, pool, tmp_path / "first.log", "--argo")
            started.append(first)
            for i, doc in enumerate(argo_docs):
                api.create(WORKFLOWS, doc, ns)
                if i < len(dags):
                    api.create(DWF, dags[i], namespace=ns)
            wait(
                lambda: sum(phase(api, ns, n) in DONE for n in argo_names) >= 15,
                120,
                "15 Argo workflows to finish",
            )
            assert monitor.counts()[0] > 0  # it is killed with pods running
            first.kill()
            started.append(OperatorProcess(api, ns, pool, tmp_path / "second.log", "--argo"))
            wait(lambda: all_finished(api, ns, argo_names, dag_names), 300, "every workflow")
    finally:
        monitor.close()
        releases.close()
    assert {n: phase(api, ns, n) for n in argo_names} == dict.fromkeys(argo_names, "Succeeded")
    assert {n: status_of(api, ns, n)["phase"] for n in dag_names} == dict.fromkeys(
        dag_names, "Succeeded"
    )
    assert monitor.max_total <= pool, monitor.max_total
    assert releases.twice() == []
    # no pod created twice; no DagWorkflow task with two pods (Argo's pods have no such labels)
    assert [d for d in monitor.duplicates if isinstance(d, str) or d[0]] == []
    pods = api.list(PODS, ns)
    assert not [
        p["metadata"]["name"] for p in pods if GATE in str(p["spec"].get("schedulingGates"))
    ]
    # Argo's retries ran: each flaky fetch failed once and succeeded on its second attempt
    failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    assert len(failed) == 8
