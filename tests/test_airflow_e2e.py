"""A real Airflow 3 (API server, scheduler with the KubernetesExecutor, DAG processor,
PostgreSQL) runs the DAGs of tests/data/airflow/dags against the test API server, its pods
run by :class:`~tests.k8s.kubelet.CommandKubelet`, the idlegate operator beside it on the
same namespace with DagWorkflows of its own.

Marked ``airflow_e2e``: ``make e2e`` runs it, not ``make test`` (Airflow's start alone takes
about half a minute of two cores). Airflow's interpreter comes from IDLEGATE_AIRFLOW_PYTHON,
else .venv-airflow, installed when missing (tests/k8s/airflow_stack.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.airflow_e2e import AirflowE2E
from tests.k8s.airflow_stack import E2E_DAGS

pytestmark = pytest.mark.airflow_e2e


def test_airflow_runs_its_dags_on_the_test_cluster_beside_the_operator(tmp_path: Path) -> None:
    with AirflowE2E(tmp_path, operator_args=[], pool=4, workflows=2) as e2e:
        outcome = e2e.run({dag: 1 for dag in E2E_DAGS})
        mapped = [
            ti["map_index"]
            for run in e2e.airflow.runs("idlegate_e2e_mapped")
            for ti in e2e.airflow.task_instances("idlegate_e2e_mapped", run["dag_run_id"])
            if ti["task_id"] == "square"
        ]
        scheduler_log = e2e.airflow.tail("scheduler", 10**9)
    report = "\n".join(outcome.lines()) + f"\n{scheduler_log[-3000:]}"
    assert outcome.runs_succeeded == outcome.runs == len(E2E_DAGS), report
    # diamond 4, mapped items + 3 squares + total, group 4 (the group's two in it)
    assert outcome.task_instances == 4 + 5 + 4 and not outcome.failed, report
    assert sorted(mapped) == [0, 1, 2], report
    assert outcome.pods_created == outcome.task_instances and not outcome.pods_twice, report
    assert outcome.watcher_deaths == 0, report
    assert set(outcome.workflows.values()) == {"Succeeded"}, report
    assert e2e.leftovers() == [], "processes outlived the scenario"


def test_idlegate_gates_airflows_pods_in_the_pool_of_its_dagworkflows_through_a_kill_9(
    tmp_path: Path,
) -> None:
    # Airflow's worker pods created gated (its pod template), released by the operator in
    # one pool of 3 with two DagWorkflows' pods; the operator killed -9 once the first
    # Airflow pod runs, and started again
    with AirflowE2E(
        tmp_path, operator_args=[], pool=3, workflows=2, gate_airflow=True, kill_operator=True
    ) as e2e:
        outcome = e2e.run({dag: 1 for dag in E2E_DAGS})
        events = e2e.api.list("events", "airflow")
    report = "\n".join(outcome.lines())
    assert outcome.runs_succeeded == outcome.runs == len(E2E_DAGS), report
    assert outcome.task_instances == 4 + 5 + 4 and not outcome.failed, report
    assert outcome.pending_timeouts == outcome.requeued == 0, report
    assert outcome.pods_created == outcome.task_instances and not outcome.pods_twice, report
    assert outcome.max_running_all <= 3, report  # the pool bound, across both kinds
    assert outcome.operator_kills == 1, report
    assert set(outcome.workflows.values()) == {"Succeeded"}, report
    accepted = [e for e in events if e.get("reason") == "Accepted"]
    assert {e["involvedObject"]["kind"] for e in accepted} == {"Pod", "DagWorkflow"}, report
    assert e2e.leftovers() == [], "processes outlived the scenario"
