"""A history file may hold Argo Workflows: `load_history` maps them, and the `file`
workload replays them (`idlegate simulate -w file`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from idlegate.errors import SpecError
from idlegate.policy import make_scheduler
from idlegate.sim.argo import (
    DEFAULT_PRIOR,
    ArgoRefusal,
    DurationSource,
    RefusalReason,
    map_workflow,
)
from idlegate.sim.argo.runs import DurationHistory, argo_run, duration_lookup
from idlegate.sim.engine import simulate
from idlegate.sim.history import (
    ArgoLearning,
    argo_durations,
    argo_history,
    load_history,
    write_history,
)
from idlegate.sim.workloads import build_workload
from tests.argo_data import RECORDED, need, recorded

LIBRARY = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "WorkflowTemplate",
    "metadata": {"name": "lib"},
    "spec": {
        "templates": [
            {
                "name": "pod",
                "metadata": {"annotations": {"idlegate.io/task-duration-seconds": "120"}},
                "container": {"image": "busybox"},
            }
        ]
    },
}


def _run(name: str, arrival: float, tasks: list[dict]) -> dict:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name},
        "arrival": arrival,
        "spec": {"entrypoint": "main", "templates": [{"name": "main", "dag": {"tasks": tasks}}]},
    }


def _ref(name: str, **more: object) -> dict:
    return {"name": name, "templateRef": {"name": "lib", "template": "pod"}, **more}


def _history(tmp_path: Path) -> Path:
    path = tmp_path / "argo.yaml"
    etl = _run("etl", 0, [_ref("extract", withItems=[1, 2, 3, 4]), _ref("load", depends="extract")])
    one = _run("one", 30, [_ref("only")])
    path.write_text(yaml.safe_dump_all([LIBRARY, etl, one]))
    return path


def test_argo_workflows_of_a_history_are_its_runs_and_templates_resolve_them(tmp_path):
    runs = load_history(_history(tmp_path))
    assert [(w.name, w.arrival) for w in runs] == [("etl", 0.0), ("one", 30.0)]
    etl = runs[0].spec
    assert [(s.name, s.tasks, s.depends_on) for s in etl.stages] == [
        ("extract", 4, ()),
        ("load", 1, ("extract",)),
    ]
    assert {s.task_duration_seconds for s in etl.stages} == {120.0}  # the annotation


def test_simulate_replays_argo_workflows_at_their_recorded_times(tmp_path):
    workload = build_workload("file", path=str(_history(tmp_path)), num_executors=2)
    assert [a.time for a in workload.jobs] == [0.0, 30.0]
    result = simulate(workload, make_scheduler("argo"))
    # etl: 4 x 120 s on 2 executors, then 120 s; one waits for a free executor at t=240
    assert {r.name.rsplit("-", 1)[0]: r.jct for r in result.records} == {
        "etl": 360.0,
        "one": 330.0,
    }


def test_a_recorded_run_brings_its_measured_pod_times_jct_and_outcome():
    (run,) = load_history(need(RECORDED / "dag-disable-fail-fast.yaml"))
    assert run.outcome == "Failed"
    assert run.jct == 48.0  # 09:11:58 to 09:12:46
    by_stage = dict(zip([s.name for s in run.spec.stages], run.measured, strict=True))
    assert by_stage == {"a": (4.0,), "b": (33.0,), "c": None, "d": (4.0,), "e": (3.0,)}


def test_a_refused_argo_workflow_in_a_history_says_which_and_why(tmp_path):
    path = tmp_path / "bad.yaml"
    bad = _run("loop", 0, [{"name": "a", "template": "main"}])
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ArgoRefusal) as refused:
        load_history(path)
    assert refused.value.reason is RefusalReason.RECURSION
    assert str(path) in str(refused.value)


def test_measured_runs_become_the_estimates_of_the_next_run_of_the_template():
    doc = recorded("dag-disable-fail-fast.yaml")
    lookup = duration_lookup([argo_run(doc, [doc])])
    job = map_workflow(doc, durations=lookup)
    by_stage = {s.name: (s.duration, s.duration_source) for s in job.stages}
    assert by_stage["b"] == (33.0, DurationSource.HISTORY)
    assert by_stage["c"] == (DEFAULT_PRIOR, DurationSource.PRIOR)  # no pod of c succeeded


def test_a_finished_argo_workflow_is_a_history_record_that_names_its_template(tmp_path):
    doc = recorded("dag-disable-fail-fast.yaml")
    record = argo_history(doc, name="ns/dag", policy="fair", pool_size=4)
    assert record is not None
    assert (record.name, record.outcome, record.jct) == ("ns/dag", "Failed", 48.0)
    assert (record.policy, record.pool_size) == ("fair", 4)
    assert record.template == map_workflow(doc).template_key
    # the sink's format: written and read back the same, template included
    path = write_history(tmp_path / "h.jsonl", [record])
    (back,) = load_history(path)
    assert (back.template, back.measured, back.jct) == (record.template, record.measured, 48.0)
    # and what the next run of that template is estimated from
    lookup = argo_durations([back, *load_history(_history(tmp_path))])
    assert lookup(record.template, "b") == 33.0
    assert lookup(record.template, "c") is None
    assert len(lookup) == 4  # a, b, d, e: the plain workflows of the other file add nothing


def test_a_running_argo_workflow_has_no_record_yet():
    doc = recorded("dag-disable-fail-fast.yaml")
    doc["status"]["phase"] = "Running"
    doc["status"].pop("finishedAt", None)
    assert argo_history(doc) is None


def test_a_template_in_a_history_must_be_a_name(tmp_path):
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump([{"stages": [{"name": "a"}], "template": 3}]))
    with pytest.raises(SpecError, match="template"):
        load_history(path)


def test_the_duration_history_keeps_the_most_recent_run_times():
    history = DurationHistory(keep=3)
    history.add("etl", ["extract", "load"], [(10.0, 20.0), None])
    assert history("etl", "extract") == 15.0
    assert history("etl", "load") is None and history("other", "extract") is None
    history.add("etl", ["extract", "load"], [(30.0, 40.0), (5.0,)])
    assert history("etl", "extract") == 30.0  # 20, 30, 40
    assert history("etl", "load") == 5.0


def test_argo_learning_learns_each_finished_workflow_once_and_from_a_sink(tmp_path):
    doc = recorded("dag-disable-fail-fast.yaml")
    doc["metadata"]["uid"] = "u-1"
    learning = ArgoLearning()
    record = learning.learn(doc, name="ns/dag")
    assert record is not None and record.name == "ns/dag"
    assert learning.learn(doc) is None  # the same workflow again: nothing new
    assert learning.durations(record.template, "b") == 33.0
    running = {**doc, "metadata": {**doc["metadata"], "uid": "u-2"}, "status": {"phase": "Running"}}
    assert learning.learn(running) is None
    # a restart: the sink's records teach the same
    fresh = ArgoLearning()
    fresh.load(write_history(tmp_path / "sink.jsonl", [record]))
    assert fresh.durations(record.template, "b") == 33.0
    fresh.load(tmp_path / "missing.jsonl")  # no sink yet: nothing learned, no error
    assert fresh.durations(record.template, "b") == 33.0
