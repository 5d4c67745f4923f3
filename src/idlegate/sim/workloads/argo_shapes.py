"""The `argo-shapes` workload: Argo Workflows shaped like Argo's own examples, pods of minutes.

Every job is an Argo Workflow manifest, written here in the shape of one of Argo's
examples and mapped to its job by `idlegate.sim.argo.map_workflow` (the same mapping
`lint` and history replays use), so the DAGs are the ones Argo users write:

* ``hello`` (hello-world, retry-container, scripts-*): one pod;
* ``steps`` (steps.yaml): one step, then two in parallel;
* ``diamond`` (dag-diamond.yaml): A -> B, C -> D;
* ``loop`` (loops-param-result.yaml): a generate step, then a `withParam` fan-out of
  2-20 pods (its size drawn: what the run's `status.nodes` would show);
* ``map-reduce`` (map-reduce.yaml): split -> a map over 4-32 parts -> reduce;
* ``diamond-steps`` (dag-diamond-steps.yaml): a diamond whose tasks each loop over 3 items;
* ``nested`` (dag-nested.yaml): a diamond of diamonds, 16 stages;
* ``ci`` (ci.yaml, ci-workflowtemplate.yaml): checkout -> build and test over 2-6
  platforms -> release.

A stage's pods share a run time drawn log-normally around the median of its template's
kind (`TEMPLATE_KINDS`: minutes, times `duration_scale`); like `k8s-batch`, each pod also
pays `start_latency` seconds, the estimate (what schedulers see) is start latency + run
time, and a pod's real run time varies around it (`task_sigma`, `K8sPodDurations`). No
workflow carries a `parallelism`: every scheduler compared may run a workflow as wide as
it likes. Arrivals are Poisson at offered load 0.7 by default (any `ArrivalOptions`).

Requests (`requests`, off by default): each pod template's container requests what pods
of its kind do (`TEMPLATE_REQUESTS`, drawn by `idlegate.sim.workloads.requests`: CPU from
0.1 to 8, memory to match, a GPU on a fifth of the map templates), written into the
manifest, so the mapping reads them as it reads a user's.

Seeds: the jobs' content and the arrival gaps come from independent streams
(`base.split_streams`), so the same seed gives the same jobs at any load.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from idlegate.sim.argo import map_workflow
from idlegate.sim.dag import Dag
from idlegate.sim.engine import Workload
from idlegate.sim.spec import WorkflowSpec
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

TEMPLATE_KINDS: dict[str, tuple[float, float]] = {
    "echo": (1 * MINUTE, 0.5),
    "generate": (0.5 * MINUTE, 0.4),
    "work": (3 * MINUTE, 0.6),
    "split": (0.5 * MINUTE, 0.4),
    "map": (4 * MINUTE, 0.6),
    "reduce": (2 * MINUTE, 0.5),
    "checkout": (0.5 * MINUTE, 0.3),
    "build": (6 * MINUTE, 0.5),
    "test": (4 * MINUTE, 0.6),
    "release": (1 * MINUTE, 0.4),
}
"""Template kinds: median pod run time (before `duration_scale`) and the log-normal spread
of a stage's run time around it."""

TEMPLATE_REQUESTS: dict[str, PodSize] = {
    "echo": PodSize(0.1, 0.25),
    "generate": PodSize(0.1, 0.5),
    "work": PodSize(0.5, 2.0),
    "split": PodSize(0.1, 0.5),
    "map": PodSize(0.5, 4.0, gpu_share=0.2),
    "reduce": PodSize(1.0, 4.0),
    "checkout": PodSize(0.1, 0.5),
    "build": PodSize(1.0, 8.0),
    "test": PodSize(0.5, 4.0),
    "release": PodSize(0.1, 0.5),
}
"""What a pod of each template kind requests with `requests` on (a GPU on a fifth of the
map templates: batch inference)."""

SHAPES = ("hello", "steps", "diamond", "loop", "map-reduce", "diamond-steps", "nested", "ci")
SHAPE_WEIGHTS = (0.2, 0.15, 0.15, 0.15, 0.1, 0.08, 0.05, 0.12)
"""How often each shape is drawn (small workflows are the most common)."""
ESTIMATE_SAMPLES = 2000
ESTIMATE_SEED = 20261123


class ArgoShapesConfig(ShapesConfig):
    """Argo-example-shaped workflows of minute-scale pods, Poisson arrivals (module docs).

    Default: 200 workflows on 20 executors at offered load 0.7."""


# -- the shapes, as Argo manifests ----------------------------------------------------------


def _pod(kind: str) -> dict[str, Any]:
    return {"name": kind, "container": {"image": "busybox", "command": ["sh", "-c", kind]}}


def _task(name: str, template: str, depends: str | None = None, **more: Any) -> dict[str, Any]:
    task: dict[str, Any] = {"name": name, "template": template, **more}
    if depends:
        task["depends"] = depends
    return task


def _diamond(name: str, template: str) -> dict[str, Any]:
    return {
        "name": name,
        "dag": {
            "tasks": [
                _task("A", template),
                _task("B", template, "A"),
                _task("C", template, "A"),
                _task("D", template, "B && C"),
            ]
        },
    }


def _workflow(shape: str, templates: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": f"{shape}-"},
        "spec": {"entrypoint": "main", "templates": templates},
    }


def shape_manifest(shape: str, rng: np.random.Generator) -> dict[str, Any]:
    """An Argo Workflow of `shape` (`SHAPES`), its fan-out widths drawn from `rng`."""
    if shape == "hello":
        main = {"name": "main", "steps": [[{"name": "hello", "template": "echo"}]]}
        return _workflow(shape, [main, _pod("echo")])
    if shape == "steps":
        steps: list[list[dict[str, Any]]] = [[{"name": "one", "template": "echo"}]]
        steps.append([{"name": "two-a", "template": "work"}, {"name": "two-b", "template": "work"}])
        return _workflow(shape, [{"name": "main", "steps": steps}, _pod("echo"), _pod("work")])
    if shape == "diamond":
        return _workflow(shape, [_diamond("main", "work"), _pod("work")])
    if shape == "loop":
        items = list(range(int(rng.integers(2, 21))))
        steps = [[{"name": "generate", "template": "generate"}]]
        steps.append([{"name": "each", "template": "work", "withItems": items}])
        return _workflow(shape, [{"name": "main", "steps": steps}, _pod("generate"), _pod("work")])
    if shape == "map-reduce":
        parts = list(range(int(rng.integers(4, 33))))
        tasks = [
            _task("split", "split"),
            _task("map", "map", "split", withItems=parts),
            _task("reduce", "reduce", "map"),
        ]
        return _workflow(
            shape,
            [{"name": "main", "dag": {"tasks": tasks}}, *map(_pod, ("split", "map", "reduce"))],
        )
    if shape == "diamond-steps":
        thrice = {
            "name": "thrice",
            "steps": [[{"name": "echo", "template": "echo", "withItems": [1, 2, 3]}]],
        }
        return _workflow(shape, [_diamond("main", "thrice"), thrice, _pod("echo")])
    if shape == "nested":
        return _workflow(
            shape, [_diamond("main", "inner"), _diamond("inner", "echo"), _pod("echo")]
        )
    platforms = list(range(int(rng.integers(2, 7))))
    tasks = [
        _task("checkout", "checkout"),
        _task("build", "build", "checkout", withItems=platforms),
        _task("test", "test", "build", withItems=platforms),
        _task("release", "release", "test"),
    ]
    kinds = ("checkout", "build", "test", "release")
    return _workflow(shape, [{"name": "main", "dag": {"tasks": tasks}}, *map(_pod, kinds)])


def with_requests(manifest: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """`manifest` with each pod template's container requesting what pods of its kind do
    (`TEMPLATE_REQUESTS`), drawn from `rng` in the order of the templates."""
    for template in manifest["spec"]["templates"]:
        if "container" in template:
            size = TEMPLATE_REQUESTS[template["name"]]
            template["container"]["resources"] = {"requests": draw_requests(rng, size)}
    return manifest


def _draw(
    rng: np.random.Generator, c: ArgoShapesConfig, requests: np.random.Generator | None = None
) -> tuple[str, Dag, tuple[float, ...]]:
    """One workflow: its shape, its DAG (estimates include the start latency; with a
    `requests` stream, its pods' requests, read by the mapping from the manifest) and its
    stages' run times without the latency."""
    shape = SHAPES[int(rng.choice(len(SHAPES), p=SHAPE_WEIGHTS))]
    manifest = shape_manifest(shape, rng)
    job = map_workflow(manifest if requests is None else with_requests(manifest, requests))
    kinds = (TEMPLATE_KINDS[stage.template] for stage in job.stages)
    runs = draw_runs(rng, kinds, c.duration_scale, c.start_latency)
    stages = timed_stages(job.spec().stages, runs, c.start_latency)
    return shape, Dag.from_spec(WorkflowSpec(stages=stages)), runs


@lru_cache(maxsize=64)
def _mean_work(duration_scale: float, start_latency: float) -> float:
    """The mean estimated work of a workflow over a fixed-seed sample."""
    c = ArgoShapesConfig(duration_scale=duration_scale, start_latency=start_latency)
    return sample_mean_work(lambda rng, _: _draw(rng, c), ESTIMATE_SEED, ESTIMATE_SAMPLES)


def mean_shape_work(config: ArgoShapesConfig) -> float:
    """Mean estimated work of one workflow (executor-seconds; a fixed-seed sample, cached)."""
    return _mean_work(config.duration_scale, config.start_latency)


def argo_shapes_workload(config: ArgoShapesConfig | None = None, seed: SeedLike = 0) -> Workload:
    """Argo-example-shaped workflows, Poisson arrivals (module docs)."""
    c = config or ArgoShapesConfig()
    return shapes_workload(
        "argo-shapes",
        c,
        seed,
        draw=lambda rng, requests: _draw(rng, c, requests),
        mean_work=lambda: mean_shape_work(c),
    )
