"""Three teams share one ExecutorPool through its queues, end to end (issue 59's Done-when): the
real kopf operator against the emulated API server and kubelets (tests/e2e.py), the clock
and the kubelets 20 times faster than the wall.

Pool ``shared`` (6 executors) has three queues of 2 pods each, each of one team's namespace,
each allowed to borrow 2 more. The steady teams ``b`` and ``c`` first run alone (their JCT
alone: their load fits their nominal quota, so it is their JCT alone on it, Themis's
measure of the issue's ρ); then team ``a`` floods 100 DagWorkflows at once while ``b`` and ``c`` submit as
before. Checked: every workflow succeeds, no pod is created twice, no queue ever holds more
than its quota plus what it may borrow (at every pod write: each gate removal), the steady
teams' mean JCT within 1.2 times their JCT alone, and every wait within its queue's bound
plus the overshoot the issue allows (the running tasks' time to free room: one task).

An Argo Workflow (labelled ``idlegate.io/queue: a``) runs among the flood, under Argo's
controller stand-in (tests/k8s/argo_controller.py), when Argo's CRD is at hand (skipped
otherwise, as tests/test_e2e_argo.py is). An Airflow-style run is not among them: its
harness (tests/airflow_e2e.py) runs Airflow's own scheduler and would triple this test's
time; an Airflow run joins its queue by the same code as an Argo Workflow (`Core.join`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from statistics import mean
from typing import Any

import pytest
import yaml

from idlegate.api.crd import API_VERSION, GROUP, POOL_KIND, POOL_PLURAL, VERSION
from idlegate.api.labels import LABEL_QUEUE
from tests.argo_data import WORKFLOW_CRD
from tests.argo_workflows import diamond, phase
from tests.e2e import (
    DWF,
    SPEED,
    PodMonitor,
    new_namespace,
    running_operator,
    stage,
    wait,
    wait_phase,
    workflow,
)
from tests.k8s.argo_controller import DONE, WORKFLOWS, ArgoController
from tests.k8s.harness import ApiServer, serving_crd
from tests.k8s.kubelet import SimKubelet

pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")

POOLS = f"{GROUP}/{VERSION}/{POOL_PLURAL}"
ARGO = WORKFLOW_CRD.exists()
"""Argo's CRD is at hand (../shared/data/argo): an Argo Workflow joins the flood."""


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    for server in serving_crd(tmp_path_factory.mktemp("k8s")):
        if ARGO:
            server.create("customresourcedefinitions", yaml.safe_load(WORKFLOW_CRD.read_text()))
        yield server


FLOOD = 100
FLOOD_TASK = 2.0  # simulated seconds
STEADY = 4
STEADY_TASK = 30.0
STEADY_EVERY = 20.0  # (a task at a time of 30 s each 20 s: within a quota of 2 pods)
BOUND = {"a": 300.0, "b": 1.0, "c": 1.0}
"""Seconds: the flood's queue drains within its bound; the steady teams' tasks, waiting for
the flood's borrowed pods to end, pass theirs (Events WaitBound)."""
QUOTA, BORROW = 2, 2
LATENCY = 3.0
"""Simulated seconds (150 ms of wall) the operator may take to see a pod end and release."""


def queues(namespaces: dict[str, list[str]]) -> list[dict[str, Any]]:
    return [
        {
            "name": q,
            "nominal": {"pods": QUOTA},
            "borrowingLimit": {"pods": BORROW},
            "waitBound": BOUND[q],
            "namespaces": namespaces[q],
        }
        for q in ("a", "b", "c")
    ]


def steady(api: ApiServer, namespaces: list[str]) -> list[tuple[str, str]]:
    """Each of `namespaces` submits STEADY workflows, one every STEADY_EVERY seconds."""
    out = []
    for i in range(STEADY):
        for ns in namespaces:
            name = f"s{i}"
            api.create(DWF, workflow(name, stage("s", 1, STEADY_TASK)), namespace=ns)
            out.append((ns, name))
        time.sleep(STEADY_EVERY / SPEED)  # (paces the submissions; nothing is timed by it)
    return out


def jct(api: ApiServer, runs: list[tuple[str, str]]) -> float:
    statuses = [wait_phase(api, ns, n, ("Succeeded", "Failed"), timeout=120) for ns, n in runs]
    assert all(s["phase"] == "Succeeded" for s in statuses), statuses
    return mean(float(s["jctSeconds"]) for s in statuses)


def test_three_teams_share_a_pool_one_floods_the_others_keep_their_pace(api: ApiServer) -> None:
    teams = {q: new_namespace(api, f"queues-{q}") for q in ("a", "b", "c")}
    alone = {q: new_namespace(api, f"queues-{q}-alone") for q in ("b", "c")}
    for ns in [*teams.values(), *alone.values()]:
        api.patch("namespaces", None, ns, {"metadata": {"labels": {"queues": "e2e"}}})
    served = (*teams.values(), *alone.values())
    monitors = {q: PodMonitor(api, ns) for q, ns in teams.items()}
    members = {q: [teams[q], *([alone[q]] if q in alone else [])] for q in teams}
    pool = {
        "apiVersion": API_VERSION,
        "kind": POOL_KIND,
        "metadata": {"name": "shared"},
        "spec": {
            "size": 3 * QUOTA,
            "policy": "fair",
            "namespaceSelector": {"matchLabels": {"queues": "e2e"}},
            "queues": queues(members),
        },
    }
    try:
        with contextlib.ExitStack() as stack:
            for ns in served:
                stack.enter_context(SimKubelet(api, ns, time_factor=1 / SPEED))
            if ARGO:
                stack.enter_context(ArgoController(api, teams["a"]))
            operator = stack.enter_context(
                running_operator(api, teams["a"], pool=1, namespaces=served, argo=ARGO)
            )
            api.create(POOLS, pool)
            wait(lambda: "shared" in operator.pools.bridges, 10, "pool shared built")
            jct_alone = jct(api, steady(api, list(alone.values())))
            flood = [(teams["a"], f"f{i}") for i in range(FLOOD)]
            for ns, name in flood:
                api.create(DWF, workflow(name, stage("s", 1, FLOOD_TASK)), namespace=ns)
                if ARGO and name == "f50":
                    argo = diamond("argo", FLOOD_TASK)
                    argo["metadata"]["labels"] = {LABEL_QUEUE: "a"}
                    api.create(WORKFLOWS, argo, teams["a"])
            jct_shared = jct(api, steady(api, [teams["b"], teams["c"]]))
            jct(api, flood)
            if ARGO:
                wait(lambda: phase(api, teams["a"], "argo") in DONE, 60, "the Argo Workflow")
                assert phase(api, teams["a"], "argo") == "Succeeded"

            def shown() -> dict[str, Any]:
                return (api.get(POOLS, None, "shared") or {}).get("status") or {}

            wait(lambda: shown().get("queuesSummary") == "a=0,b=0,c=0", 10, "queues' status")
            assert [q["name"] for q in shown()["queues"]] == ["a", "b", "c"]
            admission = operator.pools.bridges["shared"].core.cluster.admission
            ledger = admission.settle(operator.pools.now()) if admission is not None else None
    finally:
        for monitor in monitors.values():
            monitor.close()
    for q, monitor in monitors.items():
        # no task ran twice (an Argo pod has no task labels: its name says it)
        assert [d for d in monitor.duplicates if d != ("", "", "", "0")] == [], q
        assert 0 < monitor.max_total <= QUOTA + BORROW, q  # at every gate removal
    held = {q: m.max_total for q, m in monitors.items()}
    print(f"\nsteady teams' mean JCT: {jct_shared:.1f} s shared, {jct_alone:.1f} s alone")
    print(f"most pods held at once per queue: {held}")
    if ledger is not None:
        worst = [round(max(w, default=0.0), 1) for w in ledger.waits]
        over = max((s - b for _q, b, s in ledger.overdue), default=0.0)
        hits = len(ledger.overdue)
        print(f"worst wait per queue (s): {worst}; {hits} bound hit(s), overshoot {over:.2f} s")
    assert jct_shared <= 1.2 * jct_alone, (jct_shared, jct_alone)
    assert admission is not None and ledger is not None
    # the bound held: a task past it started within the time the running tasks take to free
    # its room (the overshoot, no preemption): a flood task's, or a steady one's when
    # a steady team's late tasks overlap past its quota; plus the operator's own latency
    overshoot = [start - bound for _q, bound, start in ledger.overdue]
    allowed = max(FLOOD_TASK, STEADY_TASK) + LATENCY
    assert max(overshoot, default=0.0) <= allowed, ledger.overdue
    for q, waits in enumerate(ledger.waits):
        bound = admission.queues[q].wait_bound
        assert max(waits, default=0.0) <= bound + allowed, (q, max(waits))
