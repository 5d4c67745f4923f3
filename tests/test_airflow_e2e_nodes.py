"""Issue 52's e2e on nodes with Airflow: a real Airflow 3's DAG runs whose tasks size their
pods (``executor_config``'s ``pod_override``, tests/data/airflow/dags/idlegate_e2e_sized.py),
gated and released by the operator in one resource pool with mixed-size DagWorkflows and
Argo Workflows (tests/nodes_e2e.py's), on three nodes of 8 CPU and 32 GiB (``--pool-nodes
''``: their allocatable; the test API server's kube-scheduler binds pods by their requests).
:class:`~tests.nodes_e2e.ClusterMonitor` watches every node and pod, Airflow's included.

Marked ``airflow_e2e`` (``make e2e``, not ``make test``): tests/test_airflow_e2e.py says why
and where Airflow's interpreter comes from.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.airflow_e2e import NAMESPACE, AirflowE2E
from tests.argo_data import WORKFLOW_CRD, need
from tests.e2e import SPEED
from tests.k8s.airflow_stack import SIZED_DAG
from tests.k8s.apiserver import NODES
from tests.k8s.scheduler import node
from tests.nodes_e2e import (
    NODE_COUNT,
    NODE_CPU,
    NODE_MEMORY,
    POOL_PODS,
    ClusterMonitor,
    mixed_workflows,
)

pytestmark = pytest.mark.airflow_e2e

RUNS = 3
"""Runs of the sized DAG: 6 tasks each, their pods from 500m CPU / 1 GiB to 4 CPU / 8 GiB."""
WORKFLOWS = 9
"""DagWorkflows and Argo Workflows beside them (one in three Argo's), 40 to 120 simulated
seconds a task, run by the simulated kubelet at `SPEED` times the wall's pace."""


def test_airflows_argos_and_dagworkflows_sized_pods_share_three_nodes(tmp_path: Path) -> None:
    need(WORKFLOW_CRD)
    dags, argos = mixed_workflows(WORKFLOWS, seed=2)
    with AirflowE2E(
        tmp_path,
        operator_args=["--pool-nodes="],
        pool=POOL_PODS,
        beside=(dags, argos),
        time_factor=1 / SPEED,
        gate_airflow=True,
    ) as e2e:
        for i in range(NODE_COUNT):
            e2e.api.create(NODES, node(f"node-{i}", cpu=NODE_CPU, memory=NODE_MEMORY))
        names = {w["metadata"]["name"] for w in [*dags, *argos]}
        monitor = ClusterMonitor(e2e.api, NAMESPACE, names)
        try:
            outcome = e2e.run({SIZED_DAG: RUNS})
        finally:
            monitor.close()
    cluster = dataclasses.replace(monitor.outcome(), speed=1.0)  # (the operator's clock: the wall)
    report = "\n".join([*outcome.lines(), *cluster.lines()])
    print(report)
    assert outcome.runs_succeeded == outcome.runs == RUNS, report
    assert outcome.task_instances == 6 * RUNS and not outcome.failed, report
    assert outcome.pods_created == outcome.task_instances and not outcome.pods_twice, report
    assert outcome.pending_timeouts == outcome.requeued == 0, report
    assert cluster.succeeded == WORKFLOWS, report  # DagWorkflows' and Argo's
    assert cluster.twice == [] and not outcome.argo_pods_twice, report
    assert cluster.overcommits == [], report
    assert max(cluster.peak_cpu.values()) > 0.5, report  # (the nodes were used, and so checked)
    assert cluster.released > 0 and cluster.unschedulable_released == [], report
    assert outcome.still_gated == [] and e2e.leftovers() == [], report
