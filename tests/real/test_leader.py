"""Two replicas of ``idlegate operator`` with leader election on the real control plane: a
coordination.k8s.io Lease kept by kube-apiserver (its resourceVersion guarding every take
and renewal), the leader killed -9 in the middle of a burst. The standby takes the Lease
once it expires and finishes the burst: every workflow succeeds, no pod is created twice,
the pool's bound holds. (tests/test_e2e_leader.py runs four such scenarios on the test API
server, with its audit of who wrote what, which a real server keeps in its audit log.)"""

from __future__ import annotations

from pathlib import Path

from tests.e2e import DWF, OperatorProcess, PodMonitor, stage, status_of, wait, workflow
from tests.k8s.real import RealApiServer

POOL = 4
WORKFLOWS = 30
LEASE = ("--lease-duration=8", "--lease-renew-deadline=6", "--lease-retry-period=1")


def holder(api: RealApiServer, ns: str) -> str:
    lease = api.get("coordination.k8s.io/v1/leases", ns, "idlegate-operator") or {}
    return (lease.get("spec") or {}).get("holderIdentity") or ""


def finished(api: RealApiServer, ns: str) -> dict[str, str]:
    phases = {f"wf-{i}": status_of(api, ns, f"wf-{i}").get("phase") for i in range(WORKFLOWS)}
    return {name: phase for name, phase in phases.items() if phase in ("Succeeded", "Failed")}


def test_the_standby_takes_the_lease_when_the_leader_is_killed(
    api: RealApiServer, ns: str, monitor: PodMonitor, tmp_path: Path
) -> None:
    flags = ("--leader-election", f"--lease-namespace={ns}", *LEASE)
    replicas = {
        name: OperatorProcess(
            api, ns, POOL, tmp_path / f"{name}.log", *flags, env={"POD_NAME": name}
        )
        for name in ("replica-a", "replica-b")
    }
    try:
        first = wait(lambda: holder(api, ns), 60, "a leader")
        leader = next(name for name in replicas if first.startswith(name))
        for i in range(WORKFLOWS):
            body = workflow(f"wf-{i}", stage("a", 2, 10), stage("b", 1, 10, ("a",)))
            api.create(DWF, body, namespace=ns)
        wait(lambda: len(finished(api, ns)) >= WORKFLOWS // 3, 120, "a third finished")
        replicas[leader].kill()
        second = wait(lambda: (h := holder(api, ns)) != first and h, 120, "a new leader")
        done = wait(lambda: len(finished(api, ns)) == WORKFLOWS and finished(api, ns), 300, "all")
    finally:
        logs = {name: r.tail() for name, r in replicas.items()}
        for replica in replicas.values():
            replica.kill()
    standby = next(name for name in replicas if name != leader)
    assert second.startswith(standby), (second, logs)
    assert set(done.values()) == {"Succeeded"}, (done, logs)
    assert monitor.duplicates == [], logs
    assert monitor.max_total <= POOL, monitor.max_total
