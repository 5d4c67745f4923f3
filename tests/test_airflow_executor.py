"""The stand-in for Airflow's scheduler and KubernetesExecutor (tests/k8s/airflow_executor.py)
with a DAG generated in the recorded answers' shape: hundreds of tasks, their task instances
paged as Airflow pages them, read and mapped by idlegate's own client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from idlegate.integrations.airflow import AirflowAuth, AirflowClient
from idlegate.integrations.airflow_live import LiveDags
from tests.airflow_data import PASSWORD
from tests.e2e import wait
from tests.k8s.airflow_executor import AirflowExecutor, layered
from tests.k8s.apiserver import PODS
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet

NAMESPACE = "airflow"
ADMIN = AirflowAuth(username="admin", password=PASSWORD)
RUN = "manual__big"


def test_a_generated_dag_of_hundreds_of_tasks_runs_and_is_read_page_by_page(tmp_path: Path) -> None:
    # 5 layers of 50: three pages of task instances; each task's pod override asks for 1 CPU
    dag, answers = layered(250, width=50, requests={"cpu": "1"})
    durations = {f"t{i}": 1.0 for i in range(250)}
    asked: list[Any] = []

    def release(res: Any, etype: str, pod: dict[str, Any]) -> None:  # stands in for idlegate
        if res == PODS and etype == "ADDED" and pod["spec"].get("schedulingGates"):
            asked.append(pod["spec"]["containers"][0].get("resources"))
            name = pod["metadata"]["name"]
            api.emulator.patch(PODS, NAMESPACE, name, {"spec": {"schedulingGates": None}})

    with ApiServer(tmp_path) as api:
        executor = AirflowExecutor(api, dag, durations, queued_timeout=600, answers=answers)
        with SimKubelet(api, NAMESPACE, time_factor=0.01), executor as airflow:
            client = AirflowClient(airflow.url, ADMIN)
            unsubscribe = api.call(api.emulator.subscribe, release)
            airflow.trigger(NAMESPACE, RUN)
            live = LiveDags(client).run(dag, RUN, now=0.0)
            wait(lambda: airflow.done(NAMESPACE, RUN), 60, "the run's end")
            api.call(unsubscribe)
            instances = client.task_instances(dag, RUN)
            ended = LiveDags(client).run(dag, RUN, now=0.0)
        api.assert_no_internal_errors()
    # mapped from the generated tasks, each a stage whose time the earlier run gives
    assert len(live.job.stages) == 250 and live.state == "running"
    assert {(s.duration, s.demand.format()) for s in live.job.stages} == {(1.0, "cpu=1")}
    # read page by page (100 a page): every task succeeded, each with one pod asking for
    # the resources given
    assert len(instances) == 250 and {ti["state"] for ti in instances} == {"success"}
    assert ended.over and ended.state == "success" and len(ended.succeeded) == 250
    assert len(airflow.pods) == 250 and set(airflow.pods.values()) == {1}
    assert asked == [{"requests": {"cpu": "1"}}] * 250
