"""A history file may hold Argo Workflows: `load_history` maps them, and the `file`
workload replays them (`idlegate simulate -w file`). The operator records the Argo
Workflows it schedules (operator/features/argo.py), each pod measured by its own run
time, against the in-memory fakes of tests/operator_fakes.py."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from idlegate.api.argo_pods import ArgoPod
from idlegate.api.external_pods import run_seconds
from idlegate.api.labels import ANNOTATION_EXECUTOR
from idlegate.errors import SpecError
from idlegate.operator.edge import intake
from idlegate.operator.features.argo import ArgoSide
from idlegate.policy import make_scheduler
from idlegate.sim.argo import ArgoRefusal, ArgoRefusalReason, map_workflow, node_id
from idlegate.sim.argo.runs import argo_run, duration_lookup
from idlegate.sim.engine import simulate
from idlegate.sim.external import DEFAULT_PRIOR, DurationHistory, DurationSource
from idlegate.sim.history import (
    ArgoLearning,
    argo_durations,
    argo_history,
    load_history,
    write_history,
)
from idlegate.sim.workloads import build_workload
from tests.argo_data import RECORDED, gated_argo_pod, need, recorded
from tests.operator_fakes import (
    FakeClock,
    FakeKube,
    FeatureHost,
    Harness,
    forecasting,
    refreshed,
    stage,
)

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
    assert refused.value.reason is ArgoRefusalReason.RECURSION
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


# -- the operator's records: each pod's own run time, not its node's -----------------------------

FAN = "fan"
START = 1_704_103_200  # 2024-01-01T10:00:00Z


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(START + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fan(phase: str, ends: list[float | None]) -> dict:
    """Workflow `fan`: three items of one pod template, all created at 0 (gated) and
    ended at `ends` (None: running); its nodes as Argo records them, each from its pod's
    creation."""
    doc = _run(FAN, 0, [{"name": "x", "template": "pod", "withItems": [0, 1, 2]}])
    del doc["arrival"]
    doc["spec"]["templates"].append({"name": "pod", "container": {"image": "busybox"}})
    doc["metadata"].update(namespace="default", uid="uid-fan", creationTimestamp=_stamp(0))
    nodes = {FAN: {"id": FAN, "name": FAN, "type": "DAG", "phase": phase}}
    for i, end in enumerate(ends):
        name = f"{FAN}.x({i}:{i})"
        node = {"id": node_id(FAN, name), "name": name, "type": "Pod", "startedAt": _stamp(0)}
        if end is not None:
            node.update(phase="Succeeded", finishedAt=_stamp(end))
        nodes[node["id"]] = {"phase": "Running", **node}
    doc["status"] = {"phase": phase, "startedAt": _stamp(0), "nodes": nodes}
    if phase == "Succeeded":
        doc["status"]["finishedAt"] = _stamp(max(e or 0 for e in ends))
    return doc


def _fan_pod(i: int, ran: tuple[float, float] | None = None) -> dict:
    """Item `i`'s pod, gated; with `ran` (start, end), released and succeeded: its
    ``main`` container ran then, Argo's ``wait`` beside it a second longer."""
    pod = gated_argo_pod(FAN, f"{FAN}.x({i}:{i})")
    if ran is not None:
        start, end = ran
        pod["spec"]["schedulingGates"] = []  # (released)
        pod["status"] = {
            "phase": "Succeeded",
            "containerStatuses": [
                {"name": "wait", "state": {"terminated": _ended(start, end + 1)}},
                {"name": "main", "state": {"terminated": _ended(start, end)}},
            ],
        }
    return pod


def _ended(start: float, end: float) -> dict:
    return {"exitCode": 0, "startedAt": _stamp(start), "finishedAt": _stamp(end)}


def test_a_pods_run_time_is_its_main_containers():
    pod = _fan_pod(0, (3, 5))
    assert run_seconds(pod) == 2.0  # not 3: Argo's wait container outlives main
    assert ArgoPod.of(pod).ran == 2.0
    del pod["status"]["containerStatuses"][1]  # a containerSet's pod: no main
    assert run_seconds(pod) is None  # (its only container is Argo's wait)
    assert ArgoPod.of(_fan_pod(0)).ran is None  # not finished


@pytest.mark.asyncio
async def test_the_operator_records_each_pods_own_run_time_not_its_wait_at_the_gate(tmp_path):
    """On a pool of one, the three pods of `fan` run one after another, 2 s, 2 s and 3 s,
    each waiting at the gate for the ones before: their nodes say 2, 4 and 7 s."""
    kube, sink = FakeKube(), tmp_path / "history.jsonl"
    for i in range(3):
        kube.pods[("default", node_id(FAN, f"{FAN}.x({i}:{i})"))] = _fan_pod(i)
    h = Harness(kube, FakeClock(START), 1, make_scheduler("fifo"), history_file=sink)
    side = ArgoSide(FeatureHost(h))
    await side.workflow_seen(False, _fan("Running", [None, None, None]))
    await h.settle()
    for i, ran in enumerate([(0, 2), (2, 4)]):
        key = ("default", node_id(FAN, f"{FAN}.x({i}:{i})"))
        kube.pods[key] = _fan_pod(i, ran)
        await side.pod_seen(False, kube.pods[key])
        await h.settle()
    del kube.pods[("default", node_id(FAN, f"{FAN}.x(0:0)"))]  # (Argo's pod GC)
    kube.pods[("default", node_id(FAN, f"{FAN}.x(2:2)"))] = _fan_pod(2, (4, 7))
    # the Workflow's end comes before its last pod's: that pod is read from the API
    await side.workflow_seen(False, _fan("Succeeded", [2, 4, 7]))
    h.bridge.history.close()
    (record,) = load_history(sink)
    assert sorted(record.measured[0]) == [2.0, 2.0, 3.0]  # (Argo's nodes: 2, 4 and 7)
    assert side.learning.durations(record.template, "x") == pytest.approx(7 / 3)


@pytest.mark.asyncio
async def test_an_argo_workflows_first_forecast_is_in_its_record_and_a_restart_scores_it(
    tmp_path,
):
    """Issue 70: Argo's objects are never written, so a Workflow's first forecast made while
    it waited (kept in memory, scored live) goes into its record in the history sink, as a
    DagWorkflow's; a restarted operator's pool rebuilds the same scores from it."""
    kube, sink = FakeKube(), tmp_path / "history.jsonl"
    for i in range(3):
        kube.pods[("default", node_id(FAN, f"{FAN}.x({i}:{i})"))] = _fan_pod(i)

    h = forecasting(kube, sink, START)
    await h.submit("busy", {"stages": [stage("a", duration=2.0)]})  # (the one executor)
    side = ArgoSide(FeatureHost(h))
    await side.workflow_seen(False, _fan("Running", [None, None, None]))
    await h.settle()
    refresh = await refreshed(h)
    (kept,) = refresh.kept.values()  # (fan's: it waits behind busy)
    (busy,) = h.released()
    await h.finish(busy, after=2.0)
    for i, ran in enumerate([(2, 4), (4, 6), (6, 9)]):
        key = ("default", node_id(FAN, f"{FAN}.x({i}:{i})"))
        h.clock.t = START + ran[1]
        kube.pods[key] = _fan_pod(i, ran)
        await side.pod_seen(False, kube.pods[key])
        await h.settle()
        await refreshed(h)
    await side.workflow_seen(False, _fan("Succeeded", [4, 6, 9]))
    await h.settle()
    live = await refreshed(h)
    scored = {which: list(c.scores) for which, c in live.calibration.items()}
    assert [len(v) for v in scored.values()] == [1, 1]  # (fan's start and finish)
    h.bridge.history.close()
    fan = [r for r in load_history(sink) if r.template is not None]
    (record,) = fan
    made = dict(record.forecast or ())
    assert made["madeAt"] == kept.forecast.computed_at and made["startedAt"] == START + 2
    assert made["startLow"] <= made["start"] <= made["startHigh"]
    # the next operator, on the same sink: the same scores
    second = forecasting(FakeKube(), sink, START + 10_000)
    await second.submit("next", {"stages": [stage("a", duration=2.0)]})
    resumed = await refreshed(second)
    assert {which: list(c.scores) for which, c in resumed.calibration.items()} == scored
    second.bridge.history.close()


@pytest.mark.asyncio
async def test_a_pod_whose_run_time_is_unknown_is_left_out_not_taken_from_its_node(caplog):
    """A Workflow that finished before the operator started, one of its pods gone."""
    kube = FakeKube()
    for i, ran in enumerate([(0, 2), (2, 4)]):
        kube.pods[("default", node_id(FAN, f"{FAN}.x({i}:{i})"))] = _fan_pod(i, ran)
    h = Harness(kube, FakeClock(START + 60), 1, make_scheduler("fifo"))
    side = ArgoSide(FeatureHost(h))
    done = _fan("Succeeded", [2, 4, 6])
    await side.workflow_seen(False, done)
    assert side.learning.durations(map_workflow(done).template_key, "x") == 2.0  # not 4
    assert "1 succeeded pod(s) report no run time" in caplog.text
    listed = kube.calls.count("list_pods")
    await side.workflow_seen(False, done)  # the same end again: not listed, not learned again
    assert kube.calls.count("list_pods") == listed


# -- a restart ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_rebuild_joins_argos_workflows_before_its_first_decision():
    """After a restart, an Argo pod released before it runs on executor 0 of two, and a
    DagWorkflow of two tasks waits: the Workflow joins the pool at the rebuild, so its pod
    holds its executor and one DagWorkflow task runs, not two (its own event comes only
    after the first decision)."""
    kube = FakeKube()
    running = _fan_pod(0)
    running["spec"]["schedulingGates"] = []
    running["metadata"]["annotations"][ANNOTATION_EXECUTOR] = "0"
    running["status"] = {"phase": "Running"}
    kube.pods[("default", running["metadata"]["name"])] = running
    for i in (1, 2):
        kube.pods[("default", node_id(FAN, f"{FAN}.x({i}:{i})"))] = _fan_pod(i)
    kube.objects[("argoproj.io/v1alpha1", "workflows")] = [_fan("Running", [None] * 3)]
    kube.add_workflow("beside", {"stages": [stage("a", 2, 10.0)]})
    h = Harness(kube, FakeClock(START), 2, make_scheduler("fifo"))
    side = ArgoSide(FeatureHost(h))
    await intake.rebuild(h.pools, restorers=[side.restore])
    await h.settle()
    names = sorted(p["metadata"]["name"] for p in kube.occupying())
    assert len(names) == 2 and names[0].startswith("beside"), names
    assert names[1] == running["metadata"]["name"]
    # a rebuild after an outage joins it no second time
    await intake.rebuild(h.pools, restorers=[side.restore])
    await h.settle()
    assert sorted(p["metadata"]["name"] for p in kube.occupying()) == names


@pytest.mark.asyncio
async def test_what_a_standby_queued_of_a_workflow_that_finished_before_it_led_joins_nothing(
    tmp_path,
):
    """An elected standby's handlers run the events it queued while standing by: one says
    Running of a Workflow that Succeeded before the takeover (the rebuild's list, newer,
    left it out). It joins no pool, so its end is neither run again nor recorded twice;
    its final event still teaches its run times."""
    kube = FakeKube()
    for i in range(3):
        kube.pods[("default", node_id(FAN, f"{FAN}.x({i}:{i})"))] = _fan_pod(i, (0, 2))
    done = _fan("Succeeded", [2, 2, 2])
    kube.objects[("argoproj.io/v1alpha1", "workflows")] = [done]
    sink = tmp_path / "history.jsonl"
    h = Harness(kube, FakeClock(START + 60), 2, make_scheduler("fifo"), history_file=sink)
    host = FeatureHost(h)
    side = ArgoSide(host)
    await intake.rebuild(h.pools, restorers=[side.restore])
    host.fresh = False  # (both bodies were queued before the rebuild read the API)
    await side.workflow_seen(False, _fan("Running", [None] * 3))
    assert side.held == {}
    await side.workflow_seen(False, done)
    await h.settle()
    h.bridge.history.close()
    assert side.learning.durations(map_workflow(done).template_key, "x") == 2.0
    assert not sink.exists()  # (the old leader recorded it)
