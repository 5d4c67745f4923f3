"""Argo's own workflow controller beside idlegate on the real control plane (``make
e2e-argo``; not part of ``make test``: the controller's build, sigs of its own module
github.com/argoproj/argo-workflows/v4 at v4.0.5, costs CI minutes the suite does not have).

The controller (deploy/local/argo/go.mod, built by ``make argo-controller`` with Argo's CRDs
beside it) runs a DAG Workflow in a namespace that opted in to the gate: every pod it
creates gets idlegate's gate from the webhook at its creation, the operator releases them
within its pool of 2, KWOK runs them, and Argo sees its Workflow succeed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import OperatorProcess, PodMonitor, _free_port, wait
from tests.k8s.real import BIN, RealApiServer
from tests.real.gate import argo_gate

pytestmark = pytest.mark.argo_real

CONTROLLER = BIN / "workflow-controller"
CRDS = BIN.parent / "argo-crds"
WORKFLOWS = "argoproj.io/v1alpha1/workflows"
POOL = 2


def diamond(name: str) -> dict[str, Any]:
    step = {
        "name": "step",
        "container": {
            "image": "busybox",
            "command": ["sleep", "10"],
            "env": [{"name": "TASK_DURATION_SECONDS", "value": "10"}],
        },
    }
    tasks = [
        {"name": "a", "template": "step"},
        *({"name": n, "template": "step", "dependencies": ["a"]} for n in ("b", "c", "d")),
        {"name": "e", "template": "step", "dependencies": ["b", "c", "d"]},
    ]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": "main",
            "templates": [{"name": "main", "dag": {"tasks": tasks}}, step],
        },
    }


def test_argos_controller_runs_a_dag_whose_pods_idlegate_gates_and_releases(
    api: RealApiServer, ns: str, monitor: PodMonitor, tmp_path: Path
) -> None:
    if not CONTROLLER.exists():
        raise RuntimeError(f"{CONTROLLER} is not built: run `make argo-controller`")
    api.kubectl("apply", "--server-side", "-f", str(CRDS))
    # its metrics on a free port (9090 by default); its health port, 6060, is fixed: one
    # controller a machine (make e2e-argo runs this test alone)
    metrics = f"enabled: true\nport: {_free_port()}\nsecure: false\n"
    config = {
        "metadata": {"name": "workflow-controller-configmap"},
        "data": {"metricsConfig": metrics},
    }
    api.create("configmaps", config, ns)
    log = (tmp_path / "argo.log").open("wb")
    argo = subprocess.Popen(
        [str(CONTROLLER), f"--kubeconfig={api.kubeconfig}", "-n", ns, "--namespaced",
         f"--managed-namespace={ns}", "--executor-image=quay.io/argoproj/argoexec:v4.0.5"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "LEADER_ELECTION_DISABLE": "true"},
    )  # fmt: skip
    try:
        with argo_gate(api, ns, tmp_path) as flags:
            operator = OperatorProcess(api, ns, POOL, tmp_path / "operator.log", *flags)
            try:
                api.create(WORKFLOWS, diamond("dia"), namespace=ns)
                phase = wait(
                    lambda: (
                        ((api.get(WORKFLOWS, ns, "dia") or {}).get("status") or {}).get("phase")
                        in ("Succeeded", "Failed", "Error")
                        and api.get(WORKFLOWS, ns, "dia")["status"]["phase"]
                    ),
                    300,
                    "Argo's Workflow to end",
                )
            finally:
                operator.kill()
    finally:
        argo.kill()  # (it outlives a SIGTERM by more than 30 s)
        argo.wait(30)
        log.close()
    said = (tmp_path / "argo.log").read_text()[-2000:]
    assert phase == "Succeeded", (phase, said, operator.tail())
    argos = {name for name, _ in monitor.created.items()}
    assert len(argos) == 5, argos  # one pod a step
    assert monitor.gated == argos and monitor.released == argos  # every one through the gate
    assert monitor.max_total <= POOL, monitor.max_total
