"""The `argo` baseline (idlegate.policy.argo): FIFO by node readiness, Argo's parallelism
honoured; known answers on hand-built jobs of 3-4 stages."""

from __future__ import annotations

import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.sim.argo import ArgoSpec
from idlegate.sim.dag import Dag
from idlegate.sim.engine import simulate
from tests.helpers import chain, dag, jcts, workload


def _capped(parallelism: int, tasks: int, duration: float) -> Dag:
    spec = ArgoSpec.model_validate(
        {
            "stages": [{"name": "s", "tasks": tasks, "taskDurationSeconds": duration}],
            "parallelism": parallelism,
        }
    )
    return Dag.from_spec(spec)


def test_a_stage_ready_earlier_runs_first_whatever_its_job():
    # one executor; A: a1 (10 s) -> a2 (10 s) from t=0; B: one 5 s stage at t=1.
    # At t=10 a2 becomes ready, but B's stage has been ready since t=1: B goes first.
    w = workload((0.0, "A", chain(10.0, 10.0)), (1.0, "B", chain(5.0)), executors=1)
    assert jcts(simulate(w, make_scheduler("argo"))) == {"B": 14.0, "A": 25.0}
    # FIFO by job arrival finishes A first
    assert jcts(simulate(w, make_scheduler("fifo"))) == {"A": 20.0, "B": 24.0}


def test_ties_in_readiness_go_by_creation_and_a_diamond_waits_its_turn():
    # one executor; A is a diamond (a -> b, c -> d, 10 s each) from t=0, B one 10 s
    # stage at t=5: when a ends at 10, b and c are ready at 10 but B since 5
    diamond = dag(
        ("a", 1, 10.0, []), ("b", 1, 10.0, ["a"]), ("c", 1, 10.0, ["a"]), ("d", 1, 10.0, ["b", "c"])
    )
    w = workload((0.0, "A", diamond), (5.0, "B", chain(10.0)), executors=1)
    result = simulate(w, make_scheduler("argo"), record_tasks=True)
    assert jcts(result) == {"B": 15.0, "A": 50.0}
    order = [(t.job, t.stage) for t in sorted(result.tasks, key=lambda t: t.start)]
    assert order == [(0, 0), (1, 0), (0, 1), (0, 2), (0, 3)]  # b before c: creation order


def test_a_workflows_parallelism_caps_its_running_pods():
    # four executors; A (parallelism 2) has 4 tasks of 10 s, B 2 tasks of 10 s, both at t=0
    w = workload((0.0, "A", _capped(2, 4, 10.0)), (0.0, "B", chain(10.0, tasks=2)), executors=4)
    assert jcts(simulate(w, make_scheduler("argo"))) == {"B": 10.0, "A": 20.0}
    # without a cap A takes every executor first
    uncapped = workload(
        (0.0, "A", chain(10.0, tasks=4)), (0.0, "B", chain(10.0, tasks=2)), executors=4
    )
    assert jcts(simulate(uncapped, make_scheduler("argo"))) == {"A": 10.0, "B": 20.0}
    # the option caps jobs that carry no parallelism of their own
    assert jcts(simulate(uncapped, make_scheduler("argo?parallelism=2"))) == {"B": 10.0, "A": 20.0}


def test_parallelism_must_be_a_positive_whole_number():
    with pytest.raises(IdlegateError):
        make_scheduler("argo", parallelism=0)
