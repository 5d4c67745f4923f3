"""Issue 93, item 3, end to end: the operator killed (-9) right after the API server took
its eviction of a borrowed task, and started again; the test API server keeps a pod while
a finalizer is on it, and the simulated kubelet stops the evicted pod at once, so the pod
would be gone before the new operator reads it. The stop is counted and said once, the
task runs again as its next attempt (never its first pod again), and the stopped pod goes
once its stop is counted: the finalizer is never left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from idlegate.api.labels import ANNOTATION_STOP, FINALIZER_STOP
from tests.e2e import (
    DWF,
    OperatorProcess,
    PodMonitor,
    events_of,
    operator_processes,
    pods_of,
    stage,
    wait,
    wait_phase,
    workflow,
)
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet, duration_of

QUEUES = [
    {"name": "a", "nominal": {"pods": 2}},
    {"name": "b", "nominal": {"pods": 2}, "preemption": {"reclaim": "Any"}},
]


def evicted(api: ApiServer, ns: str) -> str | None:
    """The name of x's pod whose eviction the API server took (being deleted, or stopped,
    with the stop's mark), if one is."""
    for pod in pods_of(api, ns, "x"):
        meta = pod["metadata"]
        stopped = (pod.get("status") or {}).get("phase") == "Failed"
        if ANNOTATION_STOP in (meta.get("annotations") or {}) and (
            meta.get("deletionTimestamp") or stopped
        ):
            return str(meta["name"])
    return None


def test_an_operator_killed_right_after_an_eviction_has_the_stop_counted_once(
    api: ApiServer, ns: str, kubelet: SimKubelet, tmp_path: Path, monkeypatch: Any
) -> None:
    lent = {f"x-a-{i}" for i in range(4)}

    def durations(pod: Any) -> float:  # (x's first pods run long; their reruns as declared)
        return 400.0 if pod["metadata"]["name"] in lent else duration_of(pod)

    kubelet.durations = durations
    kubelet.stop_seconds = 1.0  # (it stops at once: with no finalizer, gone at once)
    queues = tmp_path / "queues.yaml"
    queues.write_text(yaml.safe_dump(QUEUES))
    monitor = PodMonitor(api, ns)
    first: OperatorProcess | None = None
    emulator = type(api.emulator)
    take = emulator.evict

    def evict(self: Any, namespace: str, name: str) -> dict[str, Any]:
        """The eviction taken, then its operator killed before the answer is sent."""
        answer = take(self, namespace, name)
        if first is not None:
            first.kill()
        return answer

    monkeypatch.setattr(emulator, "evict", evict)
    try:
        with operator_processes(tmp_path) as started:
            first = OperatorProcess(api, ns, 4, tmp_path / "first.log", f"--queues={queues}")
            started.append(first)
            x = workflow("x", stage("a", 4, 400))
            x["spec"]["queueName"] = "a"
            api.create(DWF, x, namespace=ns)
            wait(lambda: len(monitor.occupying) == 4, 60, "x's four tasks running")
            y = workflow("y", stage("b", 1, 5))
            y["spec"]["queueName"] = "b"
            api.create(DWF, y, namespace=ns)
            victim = wait(lambda: evicted(api, ns), 60, "an eviction of x's pods taken")
            assert first.process.poll() is not None  # (killed -9 as it was taken)
            wait(lambda: kubelet_done(api, ns, victim), 60, f"{victim} stopped by its kubelet")
            started.append(
                OperatorProcess(api, ns, 4, tmp_path / "second.log", f"--queues={queues}")
            )
            owner = wait_phase(api, ns, "y", ("Succeeded", "Failed"), timeout=60)
            lender = wait_phase(api, ns, "x", ("Succeeded", "Failed"), timeout=120)
            wait(lambda: let_go(api, ns, victim, monitor), 60, f"{victim} let go")
    finally:
        monitor.close()
    assert owner["phase"] == "Succeeded"
    assert lender["phase"] == "Succeeded" and lender["stages"][0]["failed"] == 0
    said = [e for e in events_of(api, ns, "x") if e["reason"] == "Preempted"]
    assert sum(e.get("count", 1) for e in said) == 1, said
    assert monitor.created[victim] == 1 and not monitor.duplicates  # (never its first pod again)
    assert monitor.created[f"{victim}-r1"] == 1
    assert not [
        p for p in api.list("pods", ns) if FINALIZER_STOP in p["metadata"].get("finalizers", [])
    ]


def kubelet_done(api: ApiServer, ns: str, name: str) -> bool:
    """`name` stopped by its kubelet: ended Failed (kept by a finalizer), or gone."""
    pod = api.get("pods", ns, name)
    return pod is None or (pod.get("status") or {}).get("phase") == "Failed"


def let_go(api: ApiServer, ns: str, name: str, monitor: PodMonitor) -> bool:
    """`name` is gone (its finalizer off), or was made again (the bug: its first pod rerun)."""
    return api.get("pods", ns, name) is None or monitor.created[name] > 1
