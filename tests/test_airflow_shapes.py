"""The `airflow-shapes` workload: Airflow's example DAGs (their tasks and edges as the
recorded Airflow gives them) mapped by the Airflow mapping, a pure function of (options,
seed), minute-scale pods, Airflow's priorities, offered load as asked."""

from __future__ import annotations

import numpy as np
import pytest

from idlegate.sim.airflow import map_dag
from idlegate.sim.workloads import build_workload, offered_load
from idlegate.sim.workloads.airflow_shapes import (
    SHAPES,
    AirflowShapesConfig,
    mean_shape_work,
    shape_export,
)
from tests.airflow_data import examples
from tests.helpers import shapes_signature


def _signature(seed: int, **options: object) -> list[tuple]:
    return shapes_signature("airflow-shapes", seed, **options)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_is_its_example_dags_tasks_and_edges(shape):
    dag_id, _ = SHAPES[shape]
    recorded = {t["task_id"]: set(t["downstream_task_ids"]) for t in examples()[dag_id]["tasks"]}
    export, run = shape_export(shape, np.random.default_rng(0))
    drawn = {t["task_id"]: set(t["downstream_task_ids"]) for t in export["tasks"]}
    assert drawn == recorded
    mapped = {t["task_id"] for t in examples()[dag_id]["tasks"] if t["is_mapped"]}
    assert {t["task_id"] for t in export["tasks"] if t["is_mapped"]} == mapped
    # the workload's job is the recorded DAG's, its mapped tasks at the drawn size
    assert map_dag(examples()[dag_id]).counts["stages"] == map_dag(export, run=run).counts["stages"]


def test_the_same_seed_gives_the_same_runs_and_times():
    assert _signature(3) == _signature(3)
    assert _signature(3) != _signature(4)
    a, b = _signature(3, load=0.5), _signature(3, load=0.9)
    assert [s[1:] for s in a] == [s[1:] for s in b]
    ratio = np.array([s[0] for s in a[1:]]) / np.array([s[0] for s in b[1:]])
    assert np.allclose(ratio, ratio[0])


def test_runs_keep_airflows_priorities_and_pods_run_for_minutes_at_the_load_asked():
    w = build_workload("airflow-shapes", 1, num_jobs=400, load=0.6)
    mapping = next(j for j in w.jobs if j.name.startswith("mapping-"))
    assert mapping.dag.spec.priorities == (2.0, 1.0)  # add_one: its own and sum_it's
    assert 2 <= mapping.dag.tasks[0] <= 20
    durations = [d for j in w.jobs for d in j.dag.durations]
    assert 30 < float(np.median(durations)) < 600
    gap = float(np.mean(np.diff([j.time for j in w.jobs])))
    load = offered_load(mean_shape_work(AirflowShapesConfig()), gap, w.num_executors)
    assert abs(load - 0.6) < 0.1
