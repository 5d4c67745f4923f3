"""`compare`'s offered load on a pool of resources: its dominant resource's, named, not the
pods' (0.04 of 330 pods says nothing of 24 CPUs); a pods-only pool's caption and JSON keep
their form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.evaluation.comparison import WorkloadOptions, build
from idlegate.evaluation.setting import describe_setting
from idlegate.sim.resources import ResourceVector

runner = CliRunner()

# one workflow of 2 tasks of 10 s, each asking a CPU: 20 executor-s and 20 CPU-s a job
ONE_CPU = "stages:\n  - {name: a, tasks: 2, taskDurationSeconds: 10, resources: {cpu: '1'}}\n"


def _setting(path: Path, resources: str | None, **extra: object):
    options = WorkloadOptions(
        num_executors=10,
        path=path,
        resources=None if resources is None else ResourceVector.parse(resources),
        extra={"arrival": "poisson", "num_jobs": 20, **extra},
    )
    return describe_setting("file", options.to_kwargs(), build("file", 0, options))


def test_a_resource_pool_reads_its_load_on_the_dominant_resource(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(ONE_CPU)
    # a job every 10 s: 2 executors of 10 busy (0.2), 2 CPUs of 4 (0.5)
    setting = _setting(path, "cpu=4,memory=8Gi", interarrival=10)
    assert setting.resource_loads == pytest.approx({"pods": 0.2, "cpu": 0.5, "memory": 0.0})
    assert setting.offered_load == pytest.approx(0.5) and setting.dominant == "cpu"
    assert "(i.e. offered load 0.5 of cpu, the pool's dominant resource)" in setting.summary()
    assert setting.to_dict()["resource_loads"] == setting.resource_loads
    # --load sets the pods' load; the caption says what that is on the dominant resource
    given = _setting(path, "cpu=4", load=0.2)
    assert given.mean_interarrival == pytest.approx(10)
    assert "(chosen for offered load 0.2 of pods: 0.5 of cpu, the pool's dominant resource)" in (
        given.summary()
    )
    # pods dominate where the CPUs are plenty
    roomy = _setting(path, "cpu=100", interarrival=10)
    assert roomy.dominant == "pods" and roomy.offered_load == pytest.approx(0.2)
    assert "(i.e. offered load 0.2 of pods, the pool's dominant resource)" in roomy.summary()


def test_a_pods_only_pool_keeps_its_caption_and_json(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(ONE_CPU)
    setting = _setting(path, None, interarrival=10)
    assert setting.resource_loads is None and setting.dominant is None
    assert setting.summary().endswith("mean interarrival 10 s (i.e. offered load 0.2)")
    assert "resource_loads" not in setting.to_dict()


def test_compare_prints_the_dominant_load_on_nodes() -> None:
    r = runner.invoke(
        app,
        [
            "compare", "-w", "k8s-batch", "-o", "requests=true", "-o", "interarrival=240",
            "--jobs-count", "20", "--nodes", "3", "--resources",
            "cpu=8,memory=32Gi,nvidia.com/gpu=1", "-k", "330", "--seeds", "1",
            "--first-seed", "1000", "--schedulers", "fifo", "--json",
        ],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    setting = json.loads(r.stdout)["setting"]
    loads = setting["resource_loads"]
    assert set(loads) == {"pods", "cpu", "memory", "nvidia.com/gpu"}
    # the pods' 330 are far from full; the 24 CPUs are the measure
    assert loads["pods"] < 0.1 < loads["cpu"] == setting["offered_load"]
