"""A real Airflow 3 (API server, scheduler with the KubernetesExecutor, DAG processor,
PostgreSQL) runs the DAGs of tests/data/airflow/dags against the test API server, its pods
run by :class:`~tests.k8s.kubelet.CommandKubelet`, the idlegate operator beside it on the
same namespace with DagWorkflows of its own and, in the gated test, Argo Workflows run by
the stand-in for Argo's controller (skipped when ../shared/data/argo is absent).

A third test has the operator schedule runs that once left pods behind its gate: a branch
whose skipped side the join must not wait for, a DAG changed during its run, and runs whose
first read by the operator meets an API error.

Marked ``airflow_e2e``: ``make e2e`` runs it, not ``make test`` (Airflow's start alone takes
about half a minute of two cores). Airflow's interpreter comes from IDLEGATE_AIRFLOW_PYTHON,
else .venv-airflow, installed when missing (tests/k8s/airflow_stack.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.airflow_e2e import AirflowE2E
from tests.argo_data import WORKFLOW_CRD, need
from tests.k8s.airflow_stack import BRANCH_DAG, CHANGING_DAG, E2E_DAGS

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


def test_idlegate_gates_airflows_argos_and_dagworkflows_pods_in_one_pool_through_a_kill_9(
    tmp_path: Path,
) -> None:
    # Airflow's worker pods created gated (its worker pod template), Argo's by the stand-in
    # for its controller (as the webhook gates them), released by the operator in one pool
    # of 3 with the DagWorkflows' pods; the operator killed -9 once each kind has a pod
    # not ended, and started again
    need(WORKFLOW_CRD)
    with AirflowE2E(
        tmp_path,
        operator_args=[],
        pool=3,
        workflows=2,
        argo=3,
        gate_airflow=True,
        kill_operator=True,
    ) as e2e:
        outcome = e2e.run({dag: 1 for dag in E2E_DAGS})
        events = e2e.api.list("events", "airflow")
    report = "\n".join(outcome.lines())
    assert outcome.runs_succeeded == outcome.runs == len(E2E_DAGS), report
    assert outcome.task_instances == 4 + 5 + 4 and not outcome.failed, report
    assert outcome.pending_timeouts == outcome.requeued == 0, report
    assert outcome.pods_created == outcome.task_instances and not outcome.pods_twice, report
    assert outcome.max_running_all <= 3, report  # the pool bound, across the three kinds
    assert set(outcome.max_running_by_kind) == {"Airflow", "Argo", "DagWorkflow"}, report
    assert all(outcome.max_running_by_kind.values()), report
    assert outcome.operator_kills == 1, report
    # each kind had work left when the operator was killed
    assert len(outcome.in_flight_at_kill) == 3 and all(outcome.in_flight_at_kill.values()), report
    assert set(outcome.workflows.values()) == {"Succeeded"}, report
    assert list(outcome.argo_workflows.values()) == ["Succeeded"] * 3, report
    # diamond 4, loop over three 5, steps 5
    assert outcome.argo_pods_created == 4 + 5 + 5 and not outcome.argo_pods_twice, report
    accepted = [e for e in events if e.get("reason") == "Accepted"]
    kinds = {e["involvedObject"]["kind"] for e in accepted}
    assert kinds == {"DagRun", "DagWorkflow", "Workflow"}, report
    assert e2e.leftovers() == [], "processes outlived the scenario"


def test_a_branch_a_dag_changed_mid_run_and_an_api_error_leave_no_pod_gated(
    tmp_path: Path,
) -> None:
    # the operator (never restarted) schedules Airflow's pods in a pool of 3 beside a
    # DagWorkflow: two runs of the branch DAG (Airflow skips right and right_after, and
    # runs join and end), a run of a DAG changed while it runs (c replaced by e), and two
    # diamonds whose first read by the operator is answered 503 (a proxy)
    diamond = "idlegate_e2e_diamond"
    with AirflowE2E(
        tmp_path,
        operator_args=[],
        pool=3,
        workflows=1,
        gate_airflow=True,
        flaky=diamond,
        change=True,
    ) as e2e:
        outcome = e2e.run({BRANCH_DAG: 2, CHANGING_DAG: 1, diamond: 2})
        logged = (tmp_path / "operator.log").read_text()
    report = "\n".join(outcome.lines())
    assert outcome.runs_succeeded == outcome.runs == 5, report
    assert not outcome.failed and outcome.pending_timeouts == outcome.requeued == 0, report
    assert outcome.pods_created == outcome.task_instances - 2 * 2 - 1, report  # (skipped, removed)
    assert not outcome.pods_twice and outcome.max_running_all <= 3, report
    # no pod left behind the gate, none released by a deadline or for an error: the API
    # error was tried again, the changed DAG followed
    assert outcome.still_gated == [] and outcome.warnings == {}, report
    assert outcome.changed_run == {
        "wait": "success",
        "b": "success",
        "c": "removed",
        "e": "success",
    }, report
    # each tried again: the log says an outage once (the two 503s may fall in one) and its end
    assert 1 <= logged.count("Service Unavailable (test)") <= 2, report
    assert "Airflow's API can be read again." in logged, report
    assert set(outcome.workflows.values()) == {"Succeeded"}, report
    assert e2e.leftovers() == [], "processes outlived the scenario"
