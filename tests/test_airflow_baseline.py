"""The `airflow` baseline (idlegate.policy.airflow): highest Airflow priority first (the
downstream weight rule by default), then the older run; known answers on hand-built jobs."""

from __future__ import annotations

import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.policy.airflow import stage_priorities
from idlegate.sim.airflow import AirflowSpec
from idlegate.sim.dag import Dag
from idlegate.sim.engine import simulate
from tests.helpers import chain, dag, jcts, workload


def _airflow(stages: list[tuple[str, int, float, list[str]]], **more: object) -> Dag:
    spec = AirflowSpec.model_validate(
        {
            "stages": [
                {"name": n, "tasks": t, "taskDurationSeconds": d, "dependsOn": deps}
                for n, t, d, deps in stages
            ],
            **more,
        }
    )
    return Dag.from_spec(spec)


def test_a_new_runs_first_task_outranks_an_old_runs_last_one():
    # one executor; A: a1 -> a2 (10 s each) at t=0, B: b1 -> b2 (5 s each) at t=1. At t=10
    # a2 (priority 1) and b1 (priority 2, its own and b2's) are ready: b1 goes first; at 15
    # a2 and b2 tie at 1 and the older run goes first
    w = workload((0.0, "A", chain(10.0, 10.0)), (1.0, "B", chain(5.0, 5.0)), executors=1)
    result = simulate(w, make_scheduler("airflow"), record_tasks=True)
    assert jcts(result) == {"A": 25.0, "B": 29.0}
    order = [(t.job, t.stage) for t in sorted(result.tasks, key=lambda t: t.start)]
    assert order == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert jcts(simulate(w, make_scheduler("fifo"))) == {"A": 20.0, "B": 29.0}


def test_the_downstream_rule_counts_descendants_and_a_mapped_spec_brings_its_own():
    diamond = dag(
        ("a", 1, 1.0, []), ("b", 1, 1.0, ["a"]), ("c", 1, 1.0, ["a"]), ("d", 1, 1.0, ["b", "c"])
    )
    assert stage_priorities(diamond) == (4.0, 2.0, 2.0, 1.0)
    own = _airflow([("x", 1, 10.0, []), ("y", 1, 10.0, [])], priorities=[1.0, 5.0])
    assert stage_priorities(own) == (1.0, 5.0)
    # one executor: y (weight 5) runs before x although x comes first
    w = workload((0.0, "A", own), executors=1)
    result = simulate(w, make_scheduler("airflow"), record_tasks=True)
    assert [t.stage for t in sorted(result.tasks, key=lambda t: t.start)] == [1, 0]


def test_max_active_tasks_caps_a_runs_running_tasks():
    # four executors; A (max_active_tasks 2) has 4 tasks of 10 s, B 2 tasks of 10 s
    capped = _airflow([("s", 4, 10.0, [])], max_active_tasks=2)
    w = workload((0.0, "A", capped), (0.0, "B", chain(10.0, tasks=2)), executors=4)
    assert jcts(simulate(w, make_scheduler("airflow"))) == {"A": 20.0, "B": 10.0}
    free = workload((0.0, "A", chain(10.0, tasks=4)), (0.0, "B", chain(10.0, tasks=2)), executors=4)
    assert jcts(simulate(free, make_scheduler("airflow"))) == {"A": 10.0, "B": 20.0}
    option = make_scheduler("airflow?max_active_tasks=2")
    assert jcts(simulate(free, option)) == {"A": 20.0, "B": 10.0}


def test_max_active_tasks_must_be_a_positive_whole_number():
    with pytest.raises(IdlegateError, match="max_active_tasks must be a whole number"):
        make_scheduler("airflow", max_active_tasks=0)
