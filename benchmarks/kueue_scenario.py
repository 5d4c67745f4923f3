"""benchmarks/kueue_vs_idlegate.py's scenario, written once for both controllers.

Three Nodes of 8 CPU (KWOK's), three teams ``a``, ``b``, ``c`` in namespaces ``team-a`` …,
each a queue of :data:`NOMINAL_CPU` CPU nominal that may borrow :data:`BORROW_CPU` more, the
three in one cohort (an ExecutorPool's queues; ClusterQueues of one ``cohortName``). The
arrivals (:func:`arrivals`), in the scenario's clock (the plane runs pods `speed` times
faster than declared):

* ``alone``: teams b and c each submit a `STEADY` workflow (benchmarks/live_pool.py's: a
  chain of two stages of one task of 2 CPU and 4 s) every 3 s for :data:`STEADY_FOR` s,
  team a nothing: their JCT alone, ρ's denominator;
* ``flood``: the same, and team a submits `flood` `FLOOD` workflows (live_pool's diamond
  of 2, 3, 3 and 1 tasks of half a CPU and 4 s) at once at 0;
* ``large``: "large among small" (docs/queues.md): team a submits one `LARGE` workflow
  (8 tasks of 2 CPU and 30 s: 30 times a `STEADY` workflow's work) at 0, and from
  :data:`LEAD` s on all three teams submit the steady stream: the large one borrows the
  quota b and c leave idle before their work arrives.

Reclaim of lent quota (:func:`pool`, :func:`kueue_objects`) is off (idlegate's
``preemption.reclaim: Never``; Kueue's ``reclaimWithinCohort: Never``) or on (``Any`` in
both).

idlegate runs each workflow as a DagWorkflow (:func:`dag_workflow`); Kueue, which has no
DAG workflow, runs each stage as a suspended ``batch/v1`` Job (:func:`job`: parallelism and
completions its tasks, the LocalQueue's label) that benchmarks/kueue_driver.py creates when
the stage's parents have ended. Both pods carry the same request, the same
``TASK_DURATION_SECONDS`` (KWOK's run time) and the labels ``idlegate.io/workflow`` and
``idlegate.io/stage`` that benchmarks/kueue_figures.py reads.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from benchmarks.kueue_figures import Plan
from benchmarks.live_pool import FLOOD, STEADY, Shape, executor_pool
from idlegate.api.labels import LABEL_STAGE, LABEL_WORKFLOW
from idlegate.controlplane.launcher import NodeSpec
from tests.e2e import stage, workflow

NODES = NodeSpec(3, "8", "32Gi", prefix="node")
NOMINAL_CPU, BORROW_CPU = "8", "8"
TEAMS = {"a": "team-a", "b": "team-b", "c": "team-c"}
STEADY_EVERY, STEADY_FOR = 3.0, 45.0
LEAD = 2.0
"""Seconds the large workflow comes before the streams."""
LARGE = Shape((("l", 8, ()),), "2", 30.0)
SCENARIOS = ("alone", "flood", "large")
POOL_PODS = 330
"""The pool's size: the nodes' pod slots (110 each), never what binds (its CPU does)."""
KUEUE_GROUP = "kueue.x-k8s.io/v1beta2"
FLAVOR = "default-flavor"
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
"""Kueue's queue label (a DagWorkflow's queue: its namespace's, `pool`)."""


@dataclasses.dataclass(frozen=True)
class Arrival:
    """One workflow: when (the scenario's clock), whose, its name and shape."""

    at: float
    team: str
    name: str
    shape: Shape

    @property
    def namespace(self) -> str:
        return TEAMS[self.team]


def arrivals(scenario: str, flood: int) -> list[Arrival]:
    """The scenario's workflows in the order they arrive (the module's docstring)."""
    steady_teams = ("b", "c") if scenario != "large" else ("a", "b", "c")
    lead = LEAD if scenario == "large" else 0.0
    out = []
    if scenario == "flood":
        out += [Arrival(0.0, "a", f"f{i:03d}", FLOOD) for i in range(flood)]
    if scenario == "large":
        out.append(Arrival(0.0, "a", "large", LARGE))
    for i in range(round(STEADY_FOR / STEADY_EVERY)):
        out += [Arrival(lead + i * STEADY_EVERY, t, f"s{i:03d}", STEADY) for t in steady_teams]
    return sorted(out, key=lambda a: a.at)


def plan(found: list[Arrival]) -> Plan:
    """The figures' plan: each workflow's stages, their tasks and parents."""
    return {
        (a.namespace, a.name): {name: (tasks, deps) for name, tasks, deps in a.shape.stages}
        for a in found
    }


def container(shape: Shape) -> dict[str, Any]:
    """A task's container: its CPU, and its run time for KWOK."""
    return {
        "name": "task",
        "image": "busybox",
        "resources": {"requests": {"cpu": shape.cpu}},
        "env": [{"name": "TASK_DURATION_SECONDS", "value": f"{shape.seconds:g}"}],
    }


def dag_workflow(arrival: Arrival) -> dict[str, Any]:
    """The arrival as a DagWorkflow (its queue: its namespace's, `pool`)."""
    template = {"spec": {"containers": [container(arrival.shape)]}}
    stages = (
        stage(name, tasks, arrival.shape.seconds, deps, template=template)
        for name, tasks, deps in arrival.shape.stages
    )
    return workflow(arrival.name, *stages)


def pool(policy: str, reclaim: bool) -> dict[str, Any]:
    """idlegate's ExecutorPool: every node, the three queues, reclaim on or off."""
    queues = [
        {
            "name": team,
            "nominal": {"cpu": NOMINAL_CPU},
            "borrowingLimit": {"cpu": BORROW_CPU},
            "namespaces": [ns],
            "preemption": {"reclaim": "Any" if reclaim else "Never"},
        }
        for team, ns in TEAMS.items()
    ]
    return executor_pool("teams", policy, queues, POOL_PODS)


def kueue_objects(reclaim: bool) -> list[tuple[str, str | None, dict[str, Any]]]:
    """Kueue's side of the same queues, as (resource, namespace, body): one
    ResourceFlavor, a ClusterQueue a team in one cohort, a LocalQueue in each team's
    namespace."""
    out: list[tuple[str, str | None, dict[str, Any]]] = [
        (
            f"{KUEUE_GROUP}/resourceflavors",
            None,
            {"apiVersion": KUEUE_GROUP, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        )
    ]
    for team, ns in TEAMS.items():
        quota = {"name": "cpu", "nominalQuota": NOMINAL_CPU, "borrowingLimit": BORROW_CPU}
        spec = {
            "cohortName": "teams",
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": FLAVOR, "resources": [quota]}]}
            ],
            "preemption": {
                "reclaimWithinCohort": "Any" if reclaim else "Never",
                "withinClusterQueue": "Never",
            },
        }
        meta = {"name": team}
        body = {"apiVersion": KUEUE_GROUP, "kind": "ClusterQueue", "metadata": meta, "spec": spec}
        out.append((f"{KUEUE_GROUP}/clusterqueues", None, body))
        local = {
            "apiVersion": KUEUE_GROUP,
            "kind": "LocalQueue",
            "metadata": {"name": team, "namespace": ns},
            "spec": {"clusterQueue": team},
        }
        out.append((f"{KUEUE_GROUP}/localqueues", ns, local))
    return out


def job(arrival: Arrival, name: str) -> dict[str, Any]:
    """Stage `name` of the arrival's workflow as a suspended Job in its team's LocalQueue."""
    tasks = next(n for s, n, _ in arrival.shape.stages if s == name)
    labels = {LABEL_WORKFLOW: arrival.name, LABEL_STAGE: name}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{arrival.name}-{name}", "labels": {QUEUE_NAME: arrival.team}},
        "spec": {
            "suspend": True,
            "parallelism": tasks,
            "completions": tasks,
            # a stopped pod (its Job suspended: Kueue's preemption) is no failure of the task
            "backoffLimit": 100,
            "template": {
                "metadata": {"labels": labels},
                "spec": {"restartPolicy": "Never", "containers": [container(arrival.shape)]},
            },
        },
    }
