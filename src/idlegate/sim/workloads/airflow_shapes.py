"""The `airflow-shapes` workload: Airflow DAG runs shaped like Airflow's example DAGs, pods of minutes.

Every job is a run of an Airflow DAG export, its tasks and edges those of one of Airflow's
example DAGs that map (tests/data/airflow/examples.json holds them as Airflow 3.1.3 gives
them; a test checks the shapes against it), mapped to its job by
`idlegate.sim.airflow.map_dag` (the same mapping `lint` and history imports use), so the
DAGs, priorities and tasks left to Airflow are the ones Airflow users have:

* ``simplest`` (example_simplest_dag): one task;
* ``tutorial`` (tutorial): print_date, then sleep and templated in parallel;
* ``taskflow`` (tutorial_taskflow_api): extract -> transform -> load;
* ``bash`` (example_bash_operator): three runme tasks -> run_after_loop, two side tasks,
  an EmptyOperator at the end (left to Airflow);
* ``mapping`` (example_dynamic_task_mapping): add_one mapped over 2-20 items -> sum_it;
* ``second-order`` (example_task_mapping_second_order): get_nums -> times_2 mapped over
  2-12 -> add_10 mapped over as many;
* ``python`` (example_python_operator): 9 tasks, a fan-out of five sleeps;
* ``task-groups`` (example_task_group_decorator): start -> five groups of three chained
  tasks -> end, 17 tasks;
* ``kubernetes`` (example_kubernetes_executor): 6 tasks, two diamonds;
* ``complex`` (example_complex): 37 tasks, 59 edges.

A stage's task instances share a run time drawn log-normally around the median of its
task's kind (`TASK_KINDS`: minutes, times `duration_scale`); like `argo-shapes`, each pod
also pays `start_latency` seconds, the estimate (what schedulers see) is start latency +
run time, and a pod's real run time varies around it (`task_sigma`). Every stage keeps
Airflow's priority (default weights, the downstream rule), which the `airflow` baseline
orders by; no DAG carries a `max_active_tasks`, so every scheduler compared may run a DAG
run as wide as it likes. Arrivals are Poisson at offered load 0.7 by default.

Requests (`requests`, off by default): each stage's pods request what pods of its task's
kind do (`TASK_REQUESTS`, drawn by `idlegate.sim.workloads.requests`: CPU from 0.1 to 8,
memory to match, a GPU on a quarter of the heavy tasks), written into its task instances'
`executor_config` as a KubernetesExecutor's pod override, so the mapping reads them as it
reads a user's.

Seeds: the jobs' content and the arrival gaps come from independent streams
(`base.split_streams`), so the same seed gives the same jobs at any load.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from idlegate.sim.airflow import AirflowSpec, map_dag
from idlegate.sim.dag import Dag
from idlegate.sim.engine import Workload
from idlegate.sim.workloads.base import SeedLike
from idlegate.sim.workloads.examples import (
    ShapesConfig,
    draw_runs,
    sample_mean_work,
    shapes_workload,
    timed_stages,
)
from idlegate.sim.workloads.requests import PodSize, draw_requests

MINUTE = 60.0

TASK_KINDS: dict[str, tuple[float, float]] = {
    "quick": (0.5 * MINUTE, 0.4),
    "work": (3 * MINUTE, 0.6),
    "heavy": (6 * MINUTE, 0.5),
    "map": (4 * MINUTE, 0.6),
    "reduce": (2 * MINUTE, 0.5),
}
"""Task kinds: median run time (before `duration_scale`) and the log-normal spread of a
stage's run time around it."""

TASK_REQUESTS: dict[str, PodSize] = {
    "quick": PodSize(0.1, 0.5),
    "work": PodSize(0.25, 2.0),
    "heavy": PodSize(1.0, 8.0, gpu_share=0.25),
    "map": PodSize(0.25, 2.0),
    "reduce": PodSize(0.5, 2.0),
}
"""What a task instance's pod of each kind requests with `requests` on (a GPU on a
quarter of the heavy tasks)."""

Shape = dict[str, tuple[str, tuple[str, ...]]]
"""task id -> (kind, downstream task ids); a kind ending in '[]' is a mapped task, 'empty'
an EmptyOperator."""


def _groups() -> Shape:
    names = ["task_group_function", *(f"task_group_function__{i}" for i in range(1, 5))]
    out: Shape = {"task_start": ("quick", tuple(f"{g}.task_1" for g in names))}
    for g in names:
        out[f"{g}.task_1"] = ("work", (f"{g}.task_2",))
        out[f"{g}.task_2"] = ("work", (f"{g}.task_3",))
        out[f"{g}.task_3"] = ("work", ("task_end",))
    out["task_end"] = ("quick", ())
    return out


def _complex() -> Shape:
    # example_complex: a Data Catalog walk-through; create_* feed results, lists and deletes
    edges = {
        "create_entry_group": "search_catalog create_entry_group_result delete_entry_group "
        "create_entry_group_result2 create_entry_gcs get_entry_group",
        "create_entry_gcs": "search_catalog create_entry_gcs_result2 create_tag_template "
        "delete_entry get_entry create_entry_gcs_result lookup_entry update_entry",
        "create_tag_template": "search_catalog update_tag_template create_tag_template_field "
        "create_tag_template_result2 create_tag_template_result delete_tag_template_field "
        "get_tag_template",
        "create_tag_template_field": "search_catalog rename_tag_template_field "
        "create_tag_template_field_result update_tag_template_field "
        "create_tag_template_field_result2 delete_tag_template_field create_tag",
        "create_tag": "create_tag_result search_catalog delete_tag create_tag_result2 "
        "list_tags update_tag",
        "search_catalog": "delete_tag delete_tag_template delete_entry_group delete_entry "
        "delete_tag_template_field search_catalog_result",
        "delete_entry_group": "delete_entry",
        "delete_tag": "delete_tag_template_field",
        "delete_tag_template": "delete_entry_group",
        "delete_tag_template_field": "delete_tag_template",
        "get_entry": "get_entry_result delete_entry",
        "get_entry_group": "get_entry_group_result delete_entry_group",
        "get_tag_template": "delete_tag_template get_tag_template_result",
        "list_tags": "list_tags_result delete_tag",
        "lookup_entry": "lookup_entry_result delete_entry",
        "rename_tag_template_field": "delete_tag_template_field",
        "update_entry": "delete_entry",
        "update_tag": "delete_tag",
        "update_tag_template": "delete_tag_template",
        "update_tag_template_field": "rename_tag_template_field",
    }
    out: Shape = {
        t: ("work" if t.startswith("create") else "quick", tuple(d.split()))
        for t, d in edges.items()
    }
    for downs in edges.values():
        for t in downs.split():
            out.setdefault(t, ("quick", ()))
    return out


SHAPES: dict[str, tuple[str, Shape]] = {
    "simplest": ("example_simplest_dag", {"my_task": ("work", ())}),
    "tutorial": (
        "tutorial",
        {
            "print_date": ("quick", ("templated", "sleep")),
            "sleep": ("work", ()),
            "templated": ("work", ()),
        },
    ),
    "taskflow": (
        "tutorial_taskflow_api",
        {
            "extract": ("quick", ("transform",)),
            "transform": ("heavy", ("load",)),
            "load": ("work", ()),
        },
    ),
    "bash": (
        "example_bash_operator",
        {
            "runme_0": ("work", ("run_after_loop",)),
            "runme_1": ("work", ("run_after_loop",)),
            "runme_2": ("work", ("run_after_loop",)),
            "run_after_loop": ("quick", ("run_this_last",)),
            "also_run_this": ("quick", ("run_this_last",)),
            "this_will_skip": ("quick", ("run_this_last",)),
            "run_this_last": ("empty", ()),
        },
    ),
    "mapping": (
        "example_dynamic_task_mapping",
        {"add_one": ("map[]", ("sum_it",)), "sum_it": ("reduce", ())},
    ),
    "second-order": (
        "example_task_mapping_second_order",
        {
            "get_nums": ("quick", ("times_2",)),
            "times_2": ("map[]", ("add_10",)),
            "add_10": ("map[]", ()),
        },
    ),
    "python": (
        "example_python_operator",
        {
            "print_the_context": ("quick", ("log_sql_query", "external_python")),
            "log_sql_query": ("quick", tuple(f"sleep_for_{i}" for i in (3, 0, 2, 4, 1))),
            "external_python": ("work", ("virtualenv_python",)),
            **{f"sleep_for_{i}": ("work", ()) for i in range(4)},
            "sleep_for_4": ("work", ("virtualenv_python",)),
            "virtualenv_python": ("heavy", ()),
        },
    ),
    "task-groups": ("example_task_group_decorator", _groups()),
    "kubernetes": (
        "example_kubernetes_executor",
        {
            "start_task": ("quick", ("test_volume_mount", "test_sharedvolume_mount")),
            "test_volume_mount": ("work", ("non_root_task",)),
            "test_sharedvolume_mount": ("work", ("non_root_task",)),
            "non_root_task": ("work", ("task_with_resource_limits", "base_image_override_task")),
            "task_with_resource_limits": ("heavy", ()),
            "base_image_override_task": ("work", ()),
        },
    ),
    "complex": ("example_complex", _complex()),
}
"""Shape -> (the example DAG it is, its tasks)."""
SHAPE_WEIGHTS = {
    "simplest": 0.15,
    "tutorial": 0.12,
    "taskflow": 0.15,
    "bash": 0.1,
    "mapping": 0.12,
    "second-order": 0.08,
    "python": 0.07,
    "task-groups": 0.06,
    "kubernetes": 0.1,
    "complex": 0.05,
}
"""How often each shape is drawn (small DAGs are the most common)."""
MAPPED_ITEMS = {"mapping": (2, 21), "second-order": (2, 13)}
"""A mapped task's items: drawn in [low, high) per run."""
ESTIMATE_SAMPLES = 2000
ESTIMATE_SEED = 20261125


class AirflowShapesConfig(ShapesConfig):
    """Airflow-example-shaped DAG runs of minute-scale pods, Poisson arrivals (module docs).

    Default: 200 DAG runs on 20 executors at offered load 0.7."""


def shape_export(shape: str, rng: np.random.Generator) -> tuple[dict[str, Any], dict[str, Any]]:
    """A DAG export of `shape` (`SHAPES`) and a run of it whose task instances give each
    mapped task its drawn number of items."""
    dag_id, tasks = SHAPES[shape]
    items = int(rng.integers(*MAPPED_ITEMS[shape])) if shape in MAPPED_ITEMS else 0
    exported, instances = [], []
    for tid, (kind, down) in tasks.items():
        mapped = kind.endswith("[]")
        cls = "EmptyOperator" if kind == "empty" else "_PythonDecoratedOperator"
        exported.append(
            {
                "task_id": tid,
                "downstream_task_ids": list(down),
                "class_ref": {"class_name": cls},
                "is_mapped": mapped,
                "trigger_rule": "all_success",
                "priority_weight": 1,
                "weight_rule": "downstream",
            }
        )
        if mapped:
            instances += [
                {"task_id": tid, "dag_run_id": "run", "map_index": i, "state": "queued"}
                for i in range(items)
            ]
    export = {"dag": {"dag_id": dag_id}, "tasks": exported, "task_instances": instances}
    return export, {"dag_run_id": "run", "state": "running"}


def with_requests(export: dict[str, Any], shape: str, rng: np.random.Generator) -> dict[str, Any]:
    """`export` with each task's instances carrying, in their `executor_config`, a pod
    override that requests what pods of its kind do (`TASK_REQUESTS`), as the REST API
    renders it (str() of the dict); a task without an instance in the run gets a queued
    one. Drawn from `rng` in the order of the tasks; EmptyOperators run no pod."""
    instances = export["task_instances"]
    for tid, (kind, _) in SHAPES[shape][1].items():
        if kind == "empty":
            continue
        size = draw_requests(rng, TASK_REQUESTS[kind.removesuffix("[]")])
        base = {"name": "base", "resources": {"requests": size}}
        config = str({"pod_override": {"spec": {"containers": [base]}}})
        own = [ti for ti in instances if ti["task_id"] == tid]
        if not own:
            own = [{"task_id": tid, "dag_run_id": "run", "map_index": -1, "state": "queued"}]
            instances += own
        for ti in own:
            ti["executor_config"] = config
    return export


def _draw(
    rng: np.random.Generator, c: AirflowShapesConfig, requests: np.random.Generator | None = None
) -> tuple[str, Dag, tuple[float, ...]]:
    """One DAG run: its shape, its DAG (estimates include the start latency, priorities
    Airflow's; with a `requests` stream, its pods' requests) and its stages' run times
    without the latency."""
    names = list(SHAPE_WEIGHTS)
    shape = names[int(rng.choice(len(names), p=list(SHAPE_WEIGHTS.values())))]
    export, run = shape_export(shape, rng)
    job = map_dag(export if requests is None else with_requests(export, shape, requests), run=run)
    tasks = SHAPES[shape][1]
    kinds = (TASK_KINDS[tasks[stage.task_id][0].removesuffix("[]")] for stage in job.live_stages)
    runs = draw_runs(rng, kinds, c.duration_scale, c.start_latency)
    spec = job.spec()
    stages = timed_stages(spec.stages, runs, c.start_latency)
    timed = AirflowSpec(stages=stages, priorities=spec.priorities)
    return shape, Dag.from_spec(timed), runs


@lru_cache(maxsize=64)
def _mean_work(duration_scale: float, start_latency: float) -> float:
    """The mean estimated work of a DAG run over a fixed-seed sample."""
    c = AirflowShapesConfig(duration_scale=duration_scale, start_latency=start_latency)
    return sample_mean_work(lambda rng, _: _draw(rng, c), ESTIMATE_SEED, ESTIMATE_SAMPLES)


def mean_shape_work(config: AirflowShapesConfig) -> float:
    """Mean estimated work of one DAG run (executor-seconds; a fixed-seed sample, cached)."""
    return _mean_work(config.duration_scale, config.start_latency)


def airflow_shapes_workload(
    config: AirflowShapesConfig | None = None, seed: SeedLike = 0
) -> Workload:
    """Airflow-example-shaped DAG runs, Poisson arrivals (module docs)."""
    c = config or AirflowShapesConfig()
    return shapes_workload(
        "airflow-shapes",
        c,
        seed,
        draw=lambda rng, requests: _draw(rng, c, requests),
        mean_work=lambda: mean_shape_work(c),
    )
