"""Three teams share one ExecutorPool through its queues, end to end (issue 59's Done-when): the
real kopf operator against the emulated API server and kubelets (tests/e2e.py), the clock
and the kubelets `PACE` (10) times faster than the wall.

Pool ``shared`` (6 executors) has three queues of 2 pods each, each of one team's namespace,
each allowed to borrow 2 more. The steady teams ``b`` and ``c`` first run alone (their JCT
alone: their load fits their nominal quota, so it is their JCT alone on it, Themis's
measure of the issue's ρ); then team ``a`` floods 100 DagWorkflows at once while ``b``
and ``c`` submit as before. Checked: every workflow succeeds, no pod is created twice, no
queue ever holds more than its quota plus what it may borrow (at every pod write: each gate
removal), the steady teams' mean JCT within 1.2 times their JCT alone as the pool decided
it (`decided`: their declared paths plus how long each of their tasks waited after the
pool released one of the flood's instead, from the admission's own record of its starts.
A machine busy with other work stretches the time to see a pod end and to run one: a
check of the measured JCT failed there, 36.4 s against 28.8 s in issue 80. The admission
mutated to serve a borrowing queue first, with no wait bound and no claim on idle quota
for ready tasks, fails this one: 38.2 s against 26.5 s), and every wait within its
queue's bound plus the overshoot the issue allows (the running tasks' time to free room:
one task).

An Argo Workflow (labelled ``idlegate.io/queue: a``) runs among the flood, under Argo's
controller stand-in (tests/k8s/argo_controller.py), when Argo's CRD is at hand (skipped
otherwise, as tests/test_e2e_argo.py is). Each steady team's first workflow is an Airflow
DAG run, alone and shared alike: a run of the recorded DAG ``tutorial`` (print_date, then
sleep and templated: two pods at most, within the quota beside the steady DagWorkflows), b's
in its namespace (its queue by namespace), c's labelled ``idlegate.io/queue: c`` from a
namespace of the pool that no queue lists (without the label it would join the default
queue, the flood's). Airflow's scheduler and KubernetesExecutor are stood in for
(tests/k8s/airflow_executor.py: its REST API, its worker pods created gated with Airflow's
labels, its task instances marked done as they end: a real Airflow, tests/airflow_e2e.py,
takes half a minute of two cores to start); the operator schedules them through its own Airflow path
(``--airflow-url``: operator/features/airflow.py, integrations/airflow_pods.py). Checked
besides: each run succeeds and counts in its team's mean JCT; each task has one pod, gated
at creation and released by the operator, none requeued by Airflow's pending timeout nor
left to Airflow; its tasks start in its queue (the admission's count of each queue's starts)
and its pods count in its queue's most held.

The shared steady teams start once the operator has admitted the flood (a pod of each):
that burst takes it about a second of wall (20 s of a clock 20 times the wall's), which any
workflow submitted meanwhile would wait for, whatever its queue.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from statistics import mean
from typing import Any

import pytest
import yaml

from idlegate.api.kinds import API_VERSION, GROUP, POOL_KIND, POOL_PLURAL, VERSION
from idlegate.api.labels import LABEL_QUEUE
from tests.airflow_data import PASSWORD
from tests.argo_data import WORKFLOW_CRD
from tests.argo_workflows import diamond, phase
from tests.clocks import ScaledClock
from tests.e2e import (
    DWF,
    PodMonitor,
    new_namespace,
    running_operator,
    stage,
    wait,
    wait_phase,
    workflow,
)
from tests.k8s.airflow_executor import AirflowExecutor
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


PACE = 10.0
"""Simulated seconds per wall second, for the operator's clock, the kubelets and Airflow:
half tests/e2e.py's SPEED. The operator's writes for the flood take wall time; at 20 times
the wall, on two cores other tests share, they delayed the steady teams' releases by
seconds of the clock, past 1.2 times their JCT alone in some runs (docs/research/queues.md)."""
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
"""Simulated seconds (300 ms of wall) the operator may take to see a pod end and release."""
DAG = "tutorial"
DAG_TASKS = {"print_date": 4.0, "sleep": 12.0, "templated": 2.0}
"""Simulated seconds of each task's pod (print_date, then the other two), as recorded."""
QUEUED_TIMEOUT = 600.0
"""Airflow's ``task_queued_timeout`` (its default), in simulated seconds."""


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


Run = tuple[str, str, dict[str, str]]
"""An Airflow DAG run: (namespace of its pods, run id, its pods' labels)."""


def steady(
    api: ApiServer, airflow: AirflowExecutor, teams: list[tuple[str, Run]]
) -> tuple[list[tuple[str, str]], list[Run]]:
    """Each team (its namespace, an Airflow run) submits STEADY workflows, one every
    STEADY_EVERY seconds: first the run, then DagWorkflows; (DagWorkflows, runs)."""
    out = []
    for i in range(STEADY):
        for ns, run in teams:
            if i == 0:
                airflow.trigger(*run)
                continue
            name = f"s{i}"
            api.create(DWF, workflow(name, stage("s", 1, STEADY_TASK)), namespace=ns)
            out.append((ns, name))
        time.sleep(STEADY_EVERY / PACE)  # (paces the submissions; nothing is timed by it)
    return out, [run for _, run in teams]


Start = tuple[int, float, float]
"""A start of tasks as the admission makes it: (queue, time, how long its first waited),
in the operator's clock."""


def recording(admission: Any) -> list[Start]:
    """The admission's starts from now on, as it makes them (each `Admission.started`)."""
    starts: list[Start] = []
    note = admission.started

    def started(stage: Any, tasks: int, now: float) -> None:
        note(stage, tasks, now)
        q = stage.job.queue
        starts.append((q, now, admission.ledger.waits[q][-tasks]))

    admission.started = started
    return starts


def decided(starts: list[Start]) -> float:
    """The steady teams' mean JCT as the pool decided it, from its `starts` of one phase:
    each workflow's declared critical path, plus, for each task of b and c, how long it
    waited after the pool gave an executor to a task of the flood's queue instead (the
    first such start while it waited: from then on, its wait is the pool's choice), over
    the STEADY workflows of each. Waiting for a running task to end is not a choice (no
    preemption), and how long that takes to be seen a busy machine stretches; the choice is
    whom the pool releases when room comes. An Airflow run's two tasks after print_date run
    side by side, and both their waits count (more than its path's, never less)."""
    flood = [t for q, t, _ in starts if q == 0]
    chosen = 0.0
    for q, t, waited in starts:
        first = next((f for f in flood if t - waited <= f < t), None)
        if q in (1, 2) and first is not None:
            chosen += t - first
    run = DAG_TASKS["print_date"] + max(DAG_TASKS["sleep"], DAG_TASKS["templated"])
    path = (STEADY - 1) * STEADY_TASK + run
    return (2 * path + chosen) / (2 * STEADY)


def jct(
    api: ApiServer, runs: list[tuple[str, str]], dag_runs: list[Run], airflow: AirflowExecutor
) -> float:
    """The mean JCT of `runs` (DagWorkflows) and `dag_runs` (Airflow's), once every one
    succeeded."""
    statuses = [wait_phase(api, ns, n, ("Succeeded", "Failed"), timeout=120) for ns, n in runs]
    assert all(s["phase"] == "Succeeded" for s in statuses), statuses
    for ns, run_id, _ in dag_runs:
        wait(lambda ns=ns, run_id=run_id: airflow.done(ns, run_id), 60, f"DAG run {run_id}")
    assert [airflow.state(ns, r) for ns, r, _ in dag_runs] == ["success"] * len(dag_runs)
    jcts = [float(s["jctSeconds"]) for s in statuses]
    return mean(jcts + [airflow.jct(ns, r, PACE) for ns, r, _ in dag_runs])


def test_three_teams_share_a_pool_one_floods_the_others_keep_their_pace(
    api: ApiServer, tmp_path: Path
) -> None:
    teams = {q: new_namespace(api, f"queues-{q}") for q in ("a", "b", "c")}
    alone = {q: new_namespace(api, f"queues-{q}-alone") for q in ("b", "c")}
    unlisted = new_namespace(api, "queues-airflow")  # (in the pool, in no queue's list)
    for ns in [*teams.values(), *alone.values(), unlisted]:
        api.patch("namespaces", None, ns, {"metadata": {"labels": {"queues": "e2e"}}})
    served = (*teams.values(), *alone.values(), unlisted)
    monitors = {
        q: PodMonitor(api, ns, *([unlisted] if q == "c" else [])) for q, ns in teams.items()
    }
    to_c = {LABEL_QUEUE: "c"}
    teams_alone = [
        (alone["b"], (alone["b"], "manual__alone-b", {})),
        (alone["c"], (unlisted, "manual__alone-c", to_c)),
    ]
    teams_shared = [
        (teams["b"], (teams["b"], "manual__shared-b", {})),
        (teams["c"], (unlisted, "manual__shared-c", to_c)),
    ]
    secret = tmp_path / "airflow-password"
    secret.write_text(PASSWORD)
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
                stack.enter_context(SimKubelet(api, ns, time_factor=1 / PACE))
            if ARGO:
                stack.enter_context(ArgoController(api, teams["a"]))
            airflow = stack.enter_context(
                AirflowExecutor(api, DAG, DAG_TASKS, queued_timeout=QUEUED_TIMEOUT / PACE)
            )
            operator = stack.enter_context(
                running_operator(
                    api,
                    teams["a"],
                    pool=1,
                    namespaces=served,
                    argo=ARGO,
                    airflow_url=airflow.url,
                    airflow_username="admin",
                    airflow_password_file=secret,
                    airflow_queued_timeout=QUEUED_TIMEOUT,
                    clock=ScaledClock(PACE),
                )
            )
            api.create(POOLS, pool)
            wait(lambda: "shared" in operator.pools.bridges, 10, "pool shared built")
            admission = operator.pools.bridges["shared"].core.cluster.admission
            assert admission is not None
            starts = recording(admission)
            jct_alone = jct(api, *steady(api, airflow, teams_alone), airflow)
            alone_starts = len(starts)  # (every start alone is made: its workflows are done)
            flood = [(teams["a"], f"f{i}") for i in range(FLOOD)]
            for ns, name in flood:
                api.create(DWF, workflow(name, stage("s", 1, FLOOD_TASK)), namespace=ns)
                if ARGO and name == "f50":
                    argo = diamond("argo", FLOOD_TASK)
                    argo["metadata"]["labels"] = {LABEL_QUEUE: "a"}
                    api.create(WORKFLOWS, argo, teams["a"])
            wait(lambda: len(monitors["a"].workflows()) >= FLOOD, 60, "the flood admitted")
            jct_shared = jct(api, *steady(api, airflow, teams_shared), airflow)
            jct(api, flood, [], airflow)
            if ARGO:
                wait(lambda: phase(api, teams["a"], "argo") in DONE, 60, "the Argo Workflow")
                assert phase(api, teams["a"], "argo") == "Succeeded"

            def shown() -> dict[str, Any]:
                return (api.get(POOLS, None, "shared") or {}).get("status") or {}

            wait(lambda: shown().get("queuesSummary") == "a=0,b=0,c=0", 10, "queues' status")
            assert [q["name"] for q in shown()["queues"]] == ["a", "b", "c"]
            assert operator.pools.bridges["shared"].core.cluster.admission is admission
            ledger = admission.settle(operator.pools.now())
            warned = [
                (e["involvedObject"]["name"], e["reason"])
                for ns in served
                for e in api.list("events", ns)
                if e["type"] == "Warning" and e["involvedObject"]["kind"] in ("Pod", "DagRun")
            ]
    finally:
        for monitor in monitors.values():
            monitor.close()
    for q, monitor in monitors.items():
        # no task ran twice (an Argo or Airflow pod has no task labels: its name says it)
        assert [d for d in monitor.duplicates if d != ("", "", "", "0")] == [], q
        assert 0 < monitor.max_total <= QUOTA + BORROW, q  # at every gate removal
    # each Airflow task had one pod (none requeued by Airflow's pending timeout), gated at
    # creation and released by the operator (a gate, once removed, cannot come back), and
    # none was left to Airflow (a Warning on the pod or its run says so)
    assert len(airflow.pods) == len(DAG_TASKS) * 4 and set(airflow.pods.values()) == {1}, (
        airflow.pods
    )
    shared_pods = {name for ns, name in airflow.names if ns != alone["b"]}
    watched = set().union(*(m.gated & m.released for m in monitors.values()))
    assert shared_pods <= watched, shared_pods - watched
    assert warned == [], warned
    held = {q: m.max_total for q, m in monitors.items()}
    decided_alone, decided_shared = decided(starts[:alone_starts]), decided(starts[alone_starts:])
    print(
        f"\nsteady teams' mean JCT as the pool decided it: {decided_shared:.1f} s shared, "
        f"{decided_alone:.1f} s alone (measured: {jct_shared:.1f} s, {jct_alone:.1f} s)"
    )
    dag_jct = [
        [round(airflow.jct(*r[:2], PACE), 1) for _, r in t] for t in (teams_shared, teams_alone)
    ]
    print(f"its Airflow runs' JCT (b, c): {dag_jct[0]} s shared, {dag_jct[1]} s alone")
    print(f"most pods held at once per queue: {held}")
    worst = [round(max(w, default=0.0), 1) for w in ledger.waits]
    over = max((s - b for _q, b, s in ledger.overdue), default=0.0)
    hits = len(ledger.overdue)
    print(f"worst wait per queue (s): {worst}; {hits} bound hit(s), overshoot {over:.2f} s")
    assert decided_shared <= 1.2 * decided_alone, (decided_shared, decided_alone)
    # every task started in its queue: a's flood (and Argo's diamond), b's and c's steady
    # workflows and Airflow runs, alone and shared
    starts = [len(w) for w in ledger.waits]
    steady_starts = 2 * (STEADY - 1 + len(DAG_TASKS))
    assert starts == [FLOOD + 4 * ARGO, steady_starts, steady_starts], starts
    # the bound held: a task past it started within the time the running tasks take to free
    # its room (the overshoot, no preemption): a flood task's, or a steady one's when
    # a steady team's late tasks overlap past its quota; plus the operator's own latency
    overshoot = [start - bound for _q, bound, start in ledger.overdue]
    allowed = max(FLOOD_TASK, STEADY_TASK) + LATENCY
    assert max(overshoot, default=0.0) <= allowed, ledger.overdue
    for i, waits in enumerate(ledger.waits):
        bound = admission.queues[i].wait_bound
        assert max(waits, default=0.0) <= bound + allowed, (i, max(waits))
