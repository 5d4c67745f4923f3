"""Write the worker pods Airflow's KubernetesExecutor creates (tests/data/airflow/worker-pods.json),
made by Airflow's own code (``PodGenerator.construct_pod``, as the executor calls it), for the
tests that read pods (tests/test_airflow_pods.py). Run it with Airflow's interpreter:

    AIRFLOW_HOME=/tmp/airflow-home /tmp/airflow-venv/bin/python benchmarks/airflow_worker_pods.py \
        > tests/data/airflow/worker-pods.json

A plain task and a mapped task's index 2 of one manual run, a task group's task of a
scheduled run: their run ids have the characters Airflow's label sanitiser removes.
"""

import json
import sys

from airflow.providers.cncf.kubernetes.pod_generator import PodGenerator
from kubernetes.client import models as k8s

TRIES = [
    ("example_dynamic_task_mapping", "sum_it", -1, "manual__2026-11-25T00:41:16.996181+00:00"),
    ("example_dynamic_task_mapping", "add_one", 2, "manual__2026-11-25T00:41:16.996181+00:00"),
    ("example_task_group", "section_1.task_2", -1, "scheduled__2026-11-25T00:00:00+00:00"),
]
BASE = k8s.V1Pod(metadata=k8s.V1ObjectMeta(), spec=k8s.V1PodSpec(containers=[]))
COMMAND = ["python", "-m", "airflow.sdk.execution_time.execute_workload", "--json-string", "{}"]

pods = [
    PodGenerator.serialize_pod(
        PodGenerator.construct_pod(
            dag_id=dag,
            task_id=task,
            pod_id=f"{dag}-{task}".replace("_", "-").replace(".", "-"),
            try_number=1,
            kube_image="apache/airflow:3.1.3",
            date=None,
            args=COMMAND,
            pod_override_object=None,
            base_worker_pod=BASE,
            namespace="airflow",
            scheduler_job_id="12",
            run_id=run,
            map_index=index,
        )
    )
    for dag, task, index, run in TRIES
]
json.dump(pods, sys.stdout, indent=1, sort_keys=True)
sys.stdout.write("\n")
