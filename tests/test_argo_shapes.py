"""The `argo-shapes` workload: Argo example shapes mapped by the Argo mapping, a pure
function of (options, seed), minute-scale pods, offered load as asked."""

from __future__ import annotations

import numpy as np

from idlegate.sim.argo import map_workflow
from idlegate.sim.workloads import build_workload, offered_load
from idlegate.sim.workloads.argo_shapes import (
    SHAPES,
    ArgoShapesConfig,
    mean_shape_work,
    shape_manifest,
)
from tests.helpers import shapes_signature


def _signature(seed: int, **options: object) -> list[tuple]:
    return shapes_signature("argo-shapes", seed, **options)


def test_the_same_seed_gives_the_same_workflows_and_times():
    assert _signature(3) == _signature(3)
    assert _signature(3) != _signature(4)
    # the arrival stream is its own: another load stretches the same gaps, same jobs
    a, b = _signature(3, load=0.5), _signature(3, load=0.9)
    assert [s[1:] for s in a] == [s[1:] for s in b]
    ratio = np.array([s[0] for s in a[1:]]) / np.array([s[0] for s in b[1:]])
    assert np.allclose(ratio, ratio[0])


def test_each_shape_maps_to_the_dag_of_its_example():
    rng = np.random.default_rng(0)
    counts = {s: map_workflow(shape_manifest(s, rng)).counts for s in SHAPES}
    assert counts["diamond"] == {"stages": 4, "edges": 4, "tasks": 4}
    assert counts["steps"] == {"stages": 3, "edges": 2, "tasks": 3}
    assert counts["diamond-steps"] == {"stages": 4, "edges": 4, "tasks": 12}
    assert counts["nested"]["stages"] == 16
    assert counts["hello"] == {"stages": 1, "edges": 0, "tasks": 1}
    assert counts["map-reduce"]["stages"] == 3 and 6 <= counts["map-reduce"]["tasks"] <= 34


def test_pods_run_for_minutes_and_the_load_is_what_was_asked():
    w = build_workload("argo-shapes", 1, num_jobs=400, load=0.6)
    durations = [d for j in w.jobs for d in j.dag.durations]
    assert 30 < float(np.median(durations)) < 600
    gap = float(np.mean(np.diff([j.time for j in w.jobs])))
    load = offered_load(mean_shape_work(ArgoShapesConfig()), gap, w.num_executors)
    assert abs(load - 0.6) < 0.1
