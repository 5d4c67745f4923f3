"""One rule places a workflow in a queue, in the simulator as in the operator
(`idlegate.sim.queues.queue_of`): the queue it names, then its label idlegate.io/queue,
then the queue whose namespaces include its namespace, then the default queue; a history
keeps what a replay needs of it (namespace, labels), and old histories still read."""

from __future__ import annotations

import pytest

from idlegate.api.history import object_history
from idlegate.api.queueing import QueueNotFoundError, placement
from idlegate.api.routing import Routing
from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.sim.dag import Dag
from idlegate.sim.engine import Engine, JobArrival, Workload
from idlegate.sim.history import history_arrivals, load_history, write_history
from idlegate.sim.queues import queue_of, queues_from

QUEUES = queues_from(
    [
        {"name": "default", "nominal": {"pods": 1}},
        {"name": "data", "nominal": {"pods": 1}, "namespaces": ["etl"]},
        {"name": "ml", "nominal": {"pods": 1}},
    ]
)


def one() -> Dag:
    return Dag(("s",), (1,), (10.0,), ((),), ((),), (False,))


def test_the_name_then_the_label_then_the_namespace_then_the_default():
    label = {"idlegate.io/queue": "ml"}
    assert queue_of(QUEUES, "etl", "ml", {"idlegate.io/queue": "default"}) == 2
    assert queue_of(QUEUES, "etl", None, label) == 2
    assert queue_of(QUEUES, "etl") == 1
    assert queue_of(QUEUES, "web") == 0
    with pytest.raises(IdlegateError, match="queue 'nope' does not exist"):
        queue_of(QUEUES, "etl", "nope")
    # the operator's placement is the same rule (its missing queue: a wait, not an error)
    assert placement(QUEUES, Routing("p", None), "etl", "DagWorkflow") == 1
    with pytest.raises(QueueNotFoundError):
        placement(QUEUES, Routing("p", "nope"), "etl", "DagWorkflow")


def test_the_simulator_places_by_namespace_and_label_as_the_operator_does():
    jobs = (
        JobArrival(0.0, "by-namespace", one(), namespace="etl"),
        JobArrival(0.0, "by-label", one(), labels={"idlegate.io/queue": "ml"}),
        JobArrival(0.0, "by-default", one(), namespace="web"),
    )
    engine = Engine.for_workload(Workload("t", jobs, 3, queues=QUEUES), make_scheduler("fifo"), 0)
    engine.run(until=1.0)
    assert {j.name: j.queue for j in engine.cluster.jobs} == {
        "by-namespace": 1,
        "by-label": 2,
        "by-default": 0,
    }


def test_a_history_keeps_namespace_and_labels_and_old_ones_still_read(tmp_path):
    finished = {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "DagWorkflow",
        "metadata": {"name": "w", "namespace": "etl", "labels": {"idlegate.io/queue": "ml"}},
        "spec": {"stages": [{"name": "s", "tasks": 1, "taskDurationSeconds": 10}]},
        "status": {
            "phase": "Succeeded",
            "jctSeconds": 12.0,
            "completionTime": "2026-01-01T00:00:12Z",
        },
    }
    record = object_history(finished)
    assert record is not None and record.namespace == "etl"
    path = write_history(tmp_path / "h.yaml", [record])
    (back,) = load_history(path)
    assert back.namespace == "etl" and back.labels == {"idlegate.io/queue": "ml"}
    (arrival,) = history_arrivals([back])
    assert queue_of(QUEUES, arrival.namespace, arrival.queue, arrival.labels) == 2
    old = tmp_path / "old.yaml"
    old.write_text("name: w\nstages:\n- {name: s, tasks: 1, taskDurationSeconds: 10}\n")
    (plain,) = load_history(old)
    assert plain.namespace is None and plain.labels is None
