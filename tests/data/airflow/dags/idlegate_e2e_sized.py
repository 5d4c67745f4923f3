"""A DAG whose tasks size their worker pods (``executor_config``'s ``pod_override``
requests, as under the KubernetesExecutor), from 500m CPU / 1 GiB to 4 CPU / 8 GiB and a
memory-heavy 1 CPU / 12 GiB: the Airflow side of tests/test_airflow_e2e_nodes.py, run on
a resource pool over three nodes beside DagWorkflows and Argo Workflows of the same sizes."""

from __future__ import annotations

import time

import pendulum
from airflow.sdk import dag, task
from kubernetes.client import models as k8s

START = pendulum.datetime(2025, 1, 1, tz="UTC")
SECONDS = 2.0


def sized(cpu: str, memory: str) -> dict[str, k8s.V1Pod]:
    """The executor_config of a task whose pod requests `cpu` and `memory`."""
    resources = k8s.V1ResourceRequirements(requests={"cpu": cpu, "memory": memory})
    container = k8s.V1Container(name="base", resources=resources)
    return {"pod_override": k8s.V1Pod(spec=k8s.V1PodSpec(containers=[container]))}


@task
def step(name: str) -> str:
    time.sleep(SECONDS)
    return name


@dag(dag_id="idlegate_e2e_sized", schedule=None, start_date=START, catchup=False)
def sized_dag() -> None:
    """extract (xs) >> train (l), features (m), lookup (mem), clean (s) >> report (s)."""
    sizes = {"train": ("4", "8Gi"), "features": ("2", "4Gi"), "lookup": ("1", "12Gi")}
    sizes["clean"] = ("1", "2Gi")
    extract = step.override(task_id="extract", executor_config=sized("500m", "1Gi"))("extract")
    middle = [
        step.override(task_id=name, executor_config=sized(cpu, memory))(name)
        for name, (cpu, memory) in sizes.items()
    ]
    report = step.override(task_id="report", executor_config=sized("1", "2Gi"))("report")
    extract >> middle >> report


sized_dag()
