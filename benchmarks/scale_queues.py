"""A question's cost through a pool's queues (`benchmarks.scale --question N --queues Q`),
the state machine alone: `queues_question_cost`, each queue at its quota; with
``--reclaim``, `reclaim_question_cost`, where half the queues borrow the whole pool and
the other half take it back, a task stopped at each question (issue 82, item 1).

    python -m benchmarks.scale --question 400,4000 --queues 20 [--against ../wt-before/src]
    python -m benchmarks.scale --question 4000 --queues 20 --reclaim
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NODES_FULL = 1000
"""The full size's nodes (`benchmarks.scale`'s), of 8 CPU and 32 GiB each."""
REQUESTS = {"cpu": "4", "memory": "8Gi"}
"""A task's requests (`benchmarks.scale`'s)."""


def queues_question_cost(waiting: int, queues: int, questions: int = 200) -> dict[str, float]:
    """`question_cost`'s pool and workflows with `queues` queues of equal CPU quotas (the
    workflows and the running tasks dealt to them in turn, so each queue is at its quota).
    Before each question one running task ends: `can_schedule_ms` is `Cluster.can_schedule`
    saying a stage may start (with queues, the admission's phases), `answer_ms` is
    `Cluster.decide_once` then (fair's answer, of the queue served, and its launch), and
    `nothing_fits_ms` is `can_schedule` saying nothing fits once the pool is full again.
    `queues` 0: the same questions with no admission. Means of `questions`, as there, after
    one unmeasured question of each queue (the first reads the queue's workflows)."""
    from idlegate.policy import make_scheduler
    from idlegate.sim.admission import Admission
    from idlegate.sim.cluster import Cluster
    from idlegate.sim.dag import Dag
    from idlegate.sim.protocol import Decision
    from idlegate.sim.queues import QueueSpec
    from idlegate.sim.resources import MILLI, ResourceVector
    from idlegate.sim.spec import parse_workflow

    def job() -> Dag:
        one = {"name": "a", "tasks": 1, "taskDurationSeconds": 1, "resources": REQUESTS}
        return Dag.from_spec(parse_workflow({"stages": [one]}))

    total = ResourceVector.parse(f"cpu={8 * NODES_FULL},memory={32 * NODES_FULL}Gi")
    cluster = Cluster(NODES_FULL * 110, resources=total)
    if queues:
        cpu = total["cpu"] // queues // (4 * MILLI) * 4 * MILLI  # (whole tasks of 4 CPU)
        specs = [QueueSpec(f"q{i}", {"cpu": cpu}) for i in range(queues)]
        cluster.admission = Admission(specs, cluster.capacity, cluster.resource_names)
    running = []
    for i in range(2 * NODES_FULL):  # (the pool's CPUs, all taken)
        started = cluster.add_job(job(), 0.0)
        started.queue = i % max(1, queues)
        running += cluster.apply(Decision(started.stages[0], 1), 0.0)
    warm = max(1, queues)  # (unmeasured: the first question of each queue reads its jobs)
    for i in range(waiting + warm):
        cluster.add_job(job(), 0.0).queue = i % max(1, queues)
    fair = make_scheduler("fair")
    spent = {"can_schedule_ms": 0.0, "answer_ms": 0.0, "nothing_fits_ms": 0.0}
    gc.collect()
    gc.disable()  # (a collection's pause is not the question's)
    for i in range(questions + warm):
        now = 1.0 + i
        ended = running.pop(0)
        cluster.task_finished(ended.executor, now)
        fits = time.process_time()
        assert cluster.can_schedule()
        asked = time.process_time()
        step = cluster.decide_once(fair, now)
        answered = time.process_time()
        assert step is not None and step[1], "the question started nothing"
        running += step[1]
        full = time.process_time()
        assert not cluster.can_schedule()
        if i >= warm:
            spent["can_schedule_ms"] += asked - fits
            spent["answer_ms"] += answered - asked
            spent["nothing_fits_ms"] += time.process_time() - full
    gc.enable()
    return {k: round(v / questions * 1000, 3) for k, v in spent.items()}


def queues_report(
    counts: list[int], queues: int, against: str | None, reclaim: bool = False
) -> dict[str, Any]:
    """`queues_question_cost` for each of `counts`, here and (`against`) on another
    checkout's package in a child process, side by side; with `reclaim`,
    `reclaim_question_cost` here."""
    if reclaim:
        return reclaim_report(counts, queues)
    here = {n: queues_question_cost(n, queues) for n in counts}
    there: dict[int, dict[str, float]] = {}
    if against is not None:
        code = (
            "import json, sys; from benchmarks.scale_queues import queues_question_cost as q; "
            f"print(json.dumps({{n: q(n, {queues}) for n in {counts!r}}}))"
        )
        env = {**os.environ, "PYTHONPATH": f"{against}{os.pathsep}{Path.cwd()}"}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        there = {int(n): v for n, v in json.loads(out.stdout).items()}
    keys = ("can_schedule_ms", "answer_ms", "nothing_fits_ms")
    print(f"{queues} queues, ms of CPU | waiting | can_schedule | answer | nothing fits")
    for n in counts:
        was = there.get(n)
        cells = [
            f"{here[n][k]:.3f}" + ("" if was is None else f" (before: {was[k]:.3f})") for k in keys
        ]
        print(f"{n:>7} | " + " | ".join(cells))
    return {"queues": queues, "after": here, "before": there}


def reclaim_question_cost(waiting: int, queues: int, questions: int = 200) -> dict[str, float]:
    """`queues_question_cost`'s pool and workflows with every queue's ``preemption.reclaim:
    Any``, the first half of the queues running all 2,000 tasks (each twice its quota, the
    tasks' starts 10 ms apart) and the `waiting` workflows dealt to all of them in turn:
    at each question the admission stops a task of a borrowing queue (the newest, least
    work lost) and fair starts a task of a queue under its quota in the room. `decision_ms`
    is `Cluster.decide_once` (the reclaim's choice, the stop, the question again, fair's
    answer and the launch); `reclaim_ms` the reclaim phase alone (`Reclaimer.plan`, both
    of a decision's), timed in a second run of the same questions so that its clock's
    reads do not count in the first. The candidates are the borrowing queues' running
    tasks, about 2,000. Questions 3.1 s apart (within the no-thrash budget of 20 stops a
    minute). Means of `questions`, after one unmeasured."""
    from idlegate.sim import reclaim_plan

    decision = _reclaim_questions(waiting, queues, questions)
    phase = reclaim_plan.Reclaimer.plan
    inside = [0.0]

    def timed(*args: Any) -> Any:
        at = time.process_time()
        try:
            return phase(*args)
        finally:
            inside[0] += time.process_time() - at

    reclaim_plan.Reclaimer.plan = timed  # type: ignore[method-assign]
    try:
        _reclaim_questions(waiting, queues, questions, inside)
    finally:
        reclaim_plan.Reclaimer.plan = phase  # type: ignore[method-assign]
    return {"decision_ms": decision, "reclaim_ms": round(inside[0] / questions * 1000, 3)}


def _reclaim_questions(
    waiting: int, queues: int, questions: int, inside: list[float] | None = None
) -> float:
    """`reclaim_question_cost`'s questions: the mean ms of CPU of a decision (`inside`: the
    reclaim phase's time, zeroed after the unmeasured question)."""
    from idlegate.policy import make_scheduler
    from idlegate.sim.admission import Admission
    from idlegate.sim.cluster import Cluster
    from idlegate.sim.dag import Dag
    from idlegate.sim.protocol import Decision
    from idlegate.sim.queues import Preemption, QueueSpec
    from idlegate.sim.resources import MILLI, ResourceVector
    from idlegate.sim.spec import parse_workflow

    def job() -> Dag:
        one = {"name": "a", "tasks": 1, "taskDurationSeconds": 86400, "resources": REQUESTS}
        return Dag.from_spec(parse_workflow({"stages": [one]}))

    total = ResourceVector.parse(f"cpu={8 * NODES_FULL},memory={32 * NODES_FULL}Gi")
    cluster = Cluster(NODES_FULL * 110, resources=total)
    cpu = total["cpu"] // queues // (4 * MILLI) * 4 * MILLI
    any_ = Preemption(reclaim="Any")
    specs = [QueueSpec(f"q{i}", {"cpu": cpu}, preemption=any_) for i in range(queues)]
    cluster.admission = Admission(specs, cluster.capacity, cluster.resource_names)
    lenders = max(1, queues // 2)
    for i in range(2 * NODES_FULL):  # (the pool's CPUs, all taken by the first half)
        now = i * 0.01
        started = cluster.add_job(job(), now)
        started.queue = i % lenders
        cluster.touch(started)
        cluster.apply(Decision(started.stages[0], 1), now)
    start = 2 * NODES_FULL * 0.01 + 100.0  # (every running task past the grace)
    for i in range(waiting + 1):
        cluster.add_job(job(), start).queue = i % queues
    fair = make_scheduler("fair")
    spent = 0.0
    gc.collect()
    gc.disable()  # (a collection's pause is not the question's)
    try:
        for i in range(questions + 1):
            now = start + 3.1 * (i + 1)
            before = cluster.preempted
            at = time.process_time()
            step = cluster.decide_once(fair, now)
            took = time.process_time() - at
            assert step is not None and step[1], "the question started nothing"
            assert cluster.preempted == before + 1, "the question stopped no task"
            if i:
                spent += took
            elif inside is not None:
                inside[0] = 0.0
    finally:
        gc.enable()
    return round(spent / questions * 1000, 3)


def reclaim_report(counts: list[int], queues: int) -> dict[str, Any]:
    """`reclaim_question_cost` for each of `counts`."""
    here = {n: reclaim_question_cost(n, queues) for n in counts}
    print(f"{queues} queues, reclaim on, ms of CPU | waiting | a decision | its reclaim phase")
    for n in counts:
        print(f"{n:>7} | {here[n]['decision_ms']:.3f} | {here[n]['reclaim_ms']:.3f}")
    return {"queues": queues, "reclaim": here}
