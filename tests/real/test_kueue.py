"""Kueue's own manager on the real control plane (``make e2e-kueue``; not part of ``make
test``: its build, sigs.k8s.io/kueue v0.17.0 from its module in deploy/local/kueue, compiles
Kubernetes 0.35's libraries beside the plane's 0.36 ones, CI minutes the suite does not
have, as Argo's does for ``make e2e-argo``).

Kueue is started as benchmarks/kueue_vs_idlegate.py starts it (idlegate.controlplane.kueue:
its module's CRDs, RBAC and configuration, its webhooks on loopback), and admits a
suspended Job from a LocalQueue: the Job's webhook and Workload, its quota reserved in
the ClusterQueue, the Job resumed, its pods run by KWOK. If a new Kueue or plane breaks
any of it, this fails, not the benchmark's numbers silently.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from idlegate.controlplane import kueue
from tests.e2e import wait
from tests.k8s.real import ROOT, RealApiServer

pytestmark = pytest.mark.kueue_real

HOME = Path(os.environ.get("IDLEGATE_KUEUE_HOME", ROOT / "out" / "kueue"))
"""Where ``make kueue`` put the manager and its configuration."""
GROUP = "kueue.x-k8s.io/v1beta2"


def queues(ns: str) -> list[tuple[str, str | None, dict[str, Any]]]:
    """A ResourceFlavor, a ClusterQueue of 2 CPU and a LocalQueue in `ns`."""
    quota = {"name": "cpu", "nominalQuota": "2"}
    flavors = [{"name": "flavor", "resources": [quota]}]
    return [
        (
            f"{GROUP}/resourceflavors",
            None,
            {"apiVersion": GROUP, "kind": "ResourceFlavor", "metadata": {"name": "flavor"}},
        ),
        (
            f"{GROUP}/clusterqueues",
            None,
            {
                "apiVersion": GROUP,
                "kind": "ClusterQueue",
                "metadata": {"name": f"cq-{ns}"},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [{"coveredResources": ["cpu"], "flavors": flavors}],
                },
            },
        ),
        (
            f"{GROUP}/localqueues",
            ns,
            {
                "apiVersion": GROUP,
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": ns},
                "spec": {"clusterQueue": f"cq-{ns}"},
            },
        ),
    ]


def job(tasks: int, cpu: str, suspend: bool = True) -> dict[str, Any]:
    container = {
        "name": "task",
        "image": "busybox",
        "resources": {"requests": {"cpu": cpu}},
        "env": [{"name": "TASK_DURATION_SECONDS", "value": "20"}],  # (1 s at the e2e SPEED)
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"j{tasks}", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            **({"suspend": True} if suspend else {}),
            "parallelism": tasks,
            "completions": tasks,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def test_kueue_admits_a_suspended_job_from_a_local_queue(
    api: RealApiServer, ns: str, tmp_path: Path
) -> None:
    manager = kueue.start(api.plane, HOME, tmp_path / "kueue")
    try:
        for resource, namespace, body in queues(ns):
            api.create(resource, body, namespace)
        # not suspended by its author: Kueue's webhook suspends it at its creation
        created = api.create("jobs", job(2, "500m", suspend=False), ns)
        too_big = api.create("jobs", job(3, "1"), ns)  # (3 CPU: beyond the queue's 2)
        done = wait(
            lambda: _complete(api.get("batch/v1/jobs", ns, "j2")),
            120,
            "Kueue to admit the Job and its pods to succeed",
        )
        workloads = api.list(f"{GROUP}/workloads", ns)
        admitted = {
            w["metadata"]["ownerReferences"][0]["name"] for w in workloads if _true(w, "Admitted")
        }
    finally:
        kueue.stop(manager)
    assert created["spec"]["suspend"] is True
    assert done["succeeded"] == 2, done
    assert admitted == {"j2"}, workloads  # (j3 waits: it does not fit its queue)
    assert (api.get("batch/v1/jobs", ns, "j3") or too_big)["spec"]["suspend"] is True
    pods = api.list("pods", ns, label_selector="batch.kubernetes.io/job-name=j2")
    assert {p["status"]["phase"] for p in pods} == {"Succeeded"} and len(pods) == 2


def _true(obj: dict[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def _complete(job: dict[str, Any] | None) -> dict[str, Any] | None:
    return job["status"] if job is not None and _true(job, "Complete") else None
