"""The DAGs the real-Airflow end-to-end harness runs (tests/k8s/airflow_stack.py): a diamond of
four tasks, a task mapped over three items with ``expand``, a task group, and a branch
whose skipped side the task after the join must not wait for. Each task sleeps a moment
so that pods overlap; none needs anything beyond Airflow's Task SDK."""

from __future__ import annotations

import time

import pendulum
from airflow.sdk import dag, task, task_group

START = pendulum.datetime(2025, 1, 1, tz="UTC")
SECONDS = 1.0


@task
def step(name: str) -> str:
    time.sleep(SECONDS)
    return name


@dag(dag_id="idlegate_e2e_diamond", schedule=None, start_date=START, catchup=False)
def diamond() -> None:
    top = step.override(task_id="top")("top")
    left = step.override(task_id="left")("left")
    right = step.override(task_id="right")("right")
    bottom = step.override(task_id="bottom")("bottom")
    top >> [left, right] >> bottom


@dag(dag_id="idlegate_e2e_mapped", schedule=None, start_date=START, catchup=False)
def mapped() -> None:
    @task
    def items() -> list[int]:
        return [1, 2, 3]

    @task
    def square(item: int) -> int:
        time.sleep(SECONDS)
        return item * item

    @task
    def total(values: list[int]) -> int:
        return sum(values)

    total(square.expand(item=items()))


@dag(dag_id="idlegate_e2e_group", schedule=None, start_date=START, catchup=False)
def group() -> None:
    @task_group(group_id="inner")
    def inner() -> None:
        step.override(task_id="first")("first") >> step.override(task_id="second")("second")

    step.override(task_id="before")("before") >> inner() >> step.override(task_id="after")("after")


@dag(dag_id="idlegate_e2e_branch", schedule=None, start_date=START, catchup=False)
def branch() -> None:
    """``pick`` takes ``left``: Airflow skips ``right`` (the branch task itself) and then
    ``right_after`` (its scheduler), and runs ``join`` (none_failed_min_one_success) and
    ``end``."""

    @task.branch
    def pick() -> str:
        return "left"

    left = step.override(task_id="left")("left")
    right = step.override(task_id="right")("right")
    after = step.override(task_id="right_after")("right_after")
    join = step.override(task_id="join", trigger_rule="none_failed_min_one_success")("join")
    pick() >> [left, right]
    right >> after
    [left, after] >> join >> step.override(task_id="end")("end")


diamond()
mapped()
group()
branch()
