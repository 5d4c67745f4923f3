"""A DAG the real-Airflow end-to-end harness changes while a run of it runs
(tests/airflow_e2e.py): ``wait`` holds the run until the harness has rewritten this file's
copy (task ``c`` replaced by ``e``) and Airflow has parsed it, and then made the marker
file ``dag-changed`` in ``AIRFLOW_HOME``. The run goes on with the new DAG: ``c``'s
instance ``removed``, ``e``'s created."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pendulum
from airflow.sdk import dag, task

START = pendulum.datetime(2025, 1, 1, tz="UTC")
MOST = 240.0
"""Seconds ``wait`` waits for the marker at most (then it goes on, and the run is unchanged)."""


@task
def step(name: str) -> str:
    time.sleep(1.0)
    return name


@dag(dag_id="idlegate_e2e_changing", schedule=None, start_date=START, catchup=False)
def changing() -> None:
    @task
    def wait() -> None:
        marker = Path(os.environ["AIRFLOW_HOME"]) / "dag-changed"
        deadline = time.monotonic() + MOST
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.5)

    wait() >> step.override(task_id="b")("b") >> step.override(task_id="c")("c")


changing()
