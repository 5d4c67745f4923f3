"""Stopping a running task end to end (issue 82, item 5): the real kopf operator against the
test API server, its eviction subresource and PodDisruptionBudgets, and a simulated kubelet
that stops an evicted pod within its grace period (tests/k8s).

The first test drives the stop through the entry a plan's stops call, the pool's
`StopTasks` (`Core.stop_tasks`), handed to its bridge in the operator's own event loop; the
last has the admission decide it (a queue's ``preemption.reclaim``). A workflow of two
long tasks runs on a pool of 2; a budget
keeps the first task's pod, so a stop of one of the two, the first named first, evicts the
second; with the budget gone the first is stopped too. Each stopped task runs again as a
new pod, the workflow succeeds with no failure counted, and the Events and metrics say so.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from idlegate.api.labels import ANNOTATION_EXECUTOR, ANNOTATION_STOP
from idlegate.operator.core.events import StopTasks
from idlegate.operator.runtime import Operator
from tests.e2e import (
    DWF,
    HANG_SECONDS,
    PodMonitor,
    events_of,
    holding_first_runs,
    running_operator,
    stage,
    wait,
    wait_phase,
    workflow,
)
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet, duration_of

# On an accelerated wall clock, not fake loop time: the real operator, the API emulator
# and the simulated kubelet run in threads of their own; why: tests/e2e.py, at SPEED.

T = TypeVar("T")
GRACE = 30
"""The task pods' terminationGracePeriodSeconds (Kubernetes' default)."""
UNTIL_TOLD = 1e6
"""A task's run that ends only when the test ends it (`SimKubelet.finish`)."""


def in_loop(operator: Operator, fn: Callable[[], T]) -> T:
    """`fn()` run in the operator's event loop (where its pools live), its answer."""
    loop = operator.timers._loop
    assert loop is not None, "the operator's loop is not running"
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(fn())
        except BaseException as exc:  # (the test's failure, not the loop's)
            done.set_exception(exc)

    loop.call_soon_threadsafe(run)
    return done.result(60)


def executor_of(api: ApiServer, ns: str, pod: str) -> int:
    body = api.get("pods", ns, pod) or {}
    return int(body["metadata"]["annotations"][ANNOTATION_EXECUTOR])


def running(api: ApiServer, ns: str, *pods: str) -> bool:
    return all(
        ((api.get("pods", ns, p) or {}).get("status") or {}).get("phase") == "Running" for p in pods
    )


def test_a_stopped_task_is_evicted_runs_again_and_its_workflow_succeeds(
    api: ApiServer, ns: str, kubelet: SimKubelet
) -> None:
    kubelet.durations = holding_first_runs("w-a-0", "w-a-1")  # (each ends only if stopped)
    kubelet.stop_seconds = 5.0  # (a task saving its progress: within its grace period)
    monitor = PodMonitor(api, ns)
    budget: dict[str, Any] = {
        "metadata": {"name": "keep-w-a-0"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"idlegate.io/task": "0"}}},
    }
    try:
        with running_operator(api, ns, pool=2) as op:
            api.create(DWF, workflow("w", stage("a", 2, 5)), namespace=ns)
            wait(lambda: running(api, ns, "w-a-0", "w-a-1"), 30, "both tasks running")
            first, second = executor_of(api, ns, "w-a-0"), executor_of(api, ns, "w-a-1")
            api.create("poddisruptionbudgets", budget, namespace=ns)
            stop = StopTasks((first, second), 1, "reclaim", "owners")
            in_loop(op, lambda: op.bridge.handle(stop))
            # the budget refuses w-a-0's eviction: w-a-1's is asked, and it goes
            wait(lambda: api.get("pods", ns, "w-a-1") is None, 30, "w-a-1 evicted and gone")
            kept = api.get("pods", ns, "w-a-0")
            assert kept is not None and not kept["metadata"].get("deletionTimestamp")
            assert ANNOTATION_STOP not in kept["metadata"]["annotations"]  # (taken off)
            wait(lambda: api.get("pods", ns, "w-a-1-r1"), 30, "w-a-1 run again")
            api.delete("poddisruptionbudgets", ns, "keep-w-a-0")
            in_loop(op, lambda: op.bridge.handle(StopTasks((first,), 1, "reclaim", "owners")))
            status = wait_phase(api, ns, "w", ("Succeeded", "Failed"))
            metrics = op.bridge.metrics
            stopped = metrics.value(
                "idlegate_preempted_tasks_total", queue="owners", reason="reclaim"
            )
            lost = metrics.value("idlegate_preempted_work_seconds_total")
    finally:
        monitor.close()
    assert status["phase"] == "Succeeded" and status["stages"][0]["failed"] == 0
    assert stopped == 2 and lost > 0
    said = [e for e in events_of(api, ns, "w") if e["reason"] == "Preempted"]
    assert said and all("queue 'owners' (reclaim)" in e["message"] for e in said)
    assert sum(e.get("count", 1) for e in said) == 2
    # each task ran twice, a pod per attempt, none created twice
    runs = sorted(name for name, n in monitor.created.items() if name.startswith("w-a-"))
    assert runs == ["w-a-0", "w-a-0-r1", "w-a-1", "w-a-1-r1"] and not monitor.duplicates


@pytest.mark.parametrize("decide", ["Rules", "Forecast"])
def test_an_owner_returns_and_the_admission_evicts_a_borrowed_task_for_it(
    api: ApiServer, ns: str, kubelet: SimKubelet, decide: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # queue a (2 of the 4 pods) lends b's idle quota to x's four tasks; y comes to queue b
    # (reclaim: Any): one of x's tasks is evicted within its grace period, y's starts and
    # ends while x's others still run, and x's stopped task runs again: both succeed. With
    # decide: Forecast the stop is judged first, in the replay process, and its Event says
    # the verdict (x's tasks declared 90 s, within the judge's horizon: they run until the
    # test ends them, once y succeeded, so a verdict slow to come never races their end)
    from idlegate.api.queueing import QueueFile
    from idlegate.operator.core import judging as reclaim_judging
    from idlegate.sim.queues import queues_from
    from idlegate.sim.reclaim_plan import Reclaim

    monkeypatch.setattr(reclaim_judging, "WAIT", 1e6)  # (the verdict, not the fallback's)

    lent = {f"x-a-{i}" for i in range(4)}

    def durations(pod: Any) -> float:  # (x's first runs until told, every other as declared)
        return UNTIL_TOLD if pod["metadata"]["name"] in lent else duration_of(pod)

    kubelet.durations = durations
    kubelet.stop_seconds = 5.0
    queues = QueueFile(
        queues_from(
            [
                {"name": "a", "nominal": {"pods": 2}},
                {
                    "name": "b",
                    "nominal": {"pods": 2},
                    "preemption": {"reclaim": "Any", "decide": decide},
                },
            ]
        )
    )
    monitor = PodMonitor(api, ns)
    try:
        with running_operator(api, ns, pool=4, queues=queues) as op:
            if decide == "Forecast":  # (its replay process started: the judge answers at once)
                warm = Reclaim((), (), "b", "warm-up", 0.0)
                process = op.bridge.replay_process
                in_loop(op, lambda: process.call(reclaim_judging.fallback, warm, "")).result(
                    HANG_SECONDS
                )
            x = workflow("x", stage("a", 4, 400 if decide == "Rules" else 90))
            x["spec"]["queueName"] = "a"
            api.create(DWF, x, namespace=ns)
            wait(lambda: running(api, ns, *sorted(lent)), 30, "x's four tasks running")
            y = workflow("y", stage("b", 1, 5))
            y["spec"]["queueName"] = "b"
            api.create(DWF, y, namespace=ns)
            owner = wait_phase(api, ns, "y", ("Succeeded", "Failed"), timeout=HANG_SECONDS)
            still = [p for p in sorted(lent) if running(api, ns, p)]
            kubelet.finish(*still)  # (only now: a slow verdict never races their own end)
            lender = wait_phase(api, ns, "x", ("Succeeded", "Failed"), timeout=60)
    finally:
        monitor.close()
    assert owner["phase"] == "Succeeded" and len(still) == 3  # (one stopped, three ran on)
    assert lender["phase"] == "Succeeded" and lender["stages"][0]["failed"] == 0
    said = [e for e in events_of(api, ns, "x") if e["reason"] == "Preempted"]
    assert len(said) == 1 and "queue 'b' (Reclaim)" in said[0]["message"]
    assert ("Decided on forecasts" in said[0]["message"]) == (decide == "Forecast")
    reruns = [n for n in monitor.created if n.startswith("x-a-") and n.endswith("-r1")]
    assert len(reruns) == 1 and not monitor.duplicates
