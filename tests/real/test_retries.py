"""Failed tasks retried on the real control plane: KWOK fails the first attempt of every task
whose template carries ``kwok.idlegate.io/exit-code`` (idlegate.controlplane.kwok), and each
retry's pod goes back to its task's node, pinned by ``kubernetes.io/hostname``, where
kube-scheduler binds it (issue 60, item 1, on a pool following its nodes)."""

from __future__ import annotations

from typing import Any

from idlegate.api.labels import ANNOTATION_ATTEMPT, LABEL_STAGE, LABEL_TASK
from idlegate.controlplane.kwok import EXIT_CODE_ANNOTATION
from tests.e2e import DWF, PodMonitor, pods_of, running_operator, stage, wait_phase, workflow
from tests.k8s.real import RealApiServer

HOSTNAME = "kubernetes.io/hostname"
FAILING = {
    "metadata": {"annotations": {EXIT_CODE_ANNOTATION: "3"}},
    "spec": {
        "containers": [{"name": "t", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}]
    },
}


def chain(name: str) -> dict[str, Any]:
    """Two stages of three tasks, each failing once (its first attempt) and retried."""
    return workflow(
        name,
        stage("a", 3, 10, template=FAILING, backoffLimit=1),
        stage("b", 3, 10, ("a",), template=FAILING, backoffLimit=1),
    )


def test_every_retry_goes_back_to_its_tasks_node(
    api: RealApiServer, ns: str, monitor: PodMonitor
) -> None:
    with running_operator(api, ns, pool=12, pool_nodes="type=kwok"):
        for i in range(3):
            api.create(DWF, chain(f"r{i}"), namespace=ns)
        done = {f"r{i}": wait_phase(api, ns, f"r{i}", ("Succeeded", "Failed")) for i in range(3)}
    assert {name: s["phase"] for name, s in done.items()} == dict.fromkeys(done, "Succeeded")
    pods = [pod for name in done for pod in pods_of(api, ns, name)]
    first: dict[tuple[str, str, str], str] = {}
    retries = []
    for pod in pods:
        meta, spec = pod["metadata"], pod["spec"]
        task = (
            meta["labels"]["idlegate.io/workflow"],
            meta["labels"][LABEL_STAGE],
            meta["labels"][LABEL_TASK],
        )
        if meta["annotations"][ANNOTATION_ATTEMPT] == "0":
            assert pod["status"]["phase"] == "Failed", pod["status"]
            first[task] = spec["nodeName"]
        else:
            retries.append((task, spec))
    assert len(first) == len(retries) == 18
    for task, spec in retries:
        assert spec["nodeSelector"][HOSTNAME] == first[task] == spec["nodeName"], (task, spec)
    assert not monitor.duplicates
