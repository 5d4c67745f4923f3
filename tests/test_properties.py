"""Invariants of the state machine on random workloads and random legal decisions."""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import pairwise
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idlegate.sim.dag import Dag
from idlegate.sim.durations import StageWaves, WaveDurations
from idlegate.sim.engine import Fidelity, JobArrival, Workload, simulate
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision
from idlegate.sim.spec import parse_workflow


@st.composite
def dags(draw: Any, max_stages: int = 6) -> Dag:
    n = draw(st.integers(1, max_stages))
    stages = []
    for i in range(n):
        parents = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        stages.append(
            {
                "name": f"s{i}",
                "tasks": draw(st.integers(1, 6)),
                "taskDurationSeconds": draw(st.sampled_from([0.5, 1.0, 2.5, 4.0, 7.0])),
                "dependsOn": [f"s{p}" for p in parents],
                "gang": draw(st.booleans()) and draw(st.booleans()),
            }
        )
    return Dag.from_spec(parse_workflow({"stages": stages}))


@st.composite
def workloads(draw: Any) -> Workload:
    k = draw(st.integers(1, 8))
    n = draw(st.integers(1, 6))
    times = sorted(
        draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0, 7.5, 12.0]), min_size=n, max_size=n))
    )
    jobs = []
    for i, t in enumerate(times):
        dag = draw(dags())
        # gang stages wider than the cluster could never start
        if any(g and tasks > k for g, tasks in zip(dag.gang, dag.tasks, strict=True)):
            dag = Dag.from_spec(
                parse_workflow(
                    {
                        "stages": [
                            s.model_dump(by_alias=True) | {"gang": False} for s in dag.spec.stages
                        ]
                    }
                )
            )
        jobs.append(JobArrival(t, f"j{i}", dag))
    return Workload("prop", tuple(jobs), k)


class Chaos:
    """Random legal decisions (random stage, cap, sometimes an idle slot, sometimes WAIT),
    checking the invariants the view must hold at every call."""

    name = "chaos"

    def __init__(self) -> None:
        self.violations: list[str] = []

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def decide(self, view: ClusterView) -> Action:
        busy = view.num_executors - view.free_executors
        if busy != sum(j.held for j in view.jobs) or not 0 <= busy <= view.num_executors:
            self.violations.append(f"busy {busy} vs held {[j.held for j in view.jobs]}")
        for j in view.jobs:
            if j.cap and j.held > j.cap:
                self.violations.append(f"{j.name} holds {j.held} > cap {j.cap}")
        stages = view.runnable_stages()
        # WAIT is only safe when something else will cause an event later
        if self.rng.random() < 0.1 and busy > 0:
            return WAIT
        s = stages[int(self.rng.integers(len(stages)))]
        need = s.tasks if s.gang else 1
        cap = int(self.rng.integers(s.job.held + need, view.num_executors + 1))
        if not s.delayed and not s.launched and self.rng.random() < 0.3:
            return Decision(s, cap, float(self.rng.choice([0.25, 1.0, 3.0])))
        return Decision(s, cap)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads(), seed=st.integers(0, 2**16))
def test_invariants_on_random_workloads(w, seed):
    chaos = Chaos()
    r = simulate(w, chaos, seed=seed, trace=True, record_tasks=True)
    assert chaos.violations == []
    assert r.unfinished == 0 and len(r.records) == len(w.jobs)
    dags = {i: j.dag for i, j in enumerate(w.jobs)}

    # every task runs exactly once
    runs = Counter((t.job, t.stage) for t in r.tasks)
    assert runs == Counter(
        {(j, s): dags[j].tasks[s] for j in dags for s in range(dags[j].num_stages)}
    )

    # an executor runs one task at a time, and there are K of them
    by_exec = defaultdict(list)
    for t in r.tasks:
        by_exec[t.executor].append((t.start, t.end))
    assert set(by_exec) <= set(range(w.num_executors))
    for spans in by_exec.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in pairwise(spans))

    # precedence: a stage starts after all its parents finished
    start = defaultdict(lambda: float("inf"))
    end = defaultdict(float)
    for t in r.tasks:
        start[t.job, t.stage] = min(start[t.job, t.stage], t.start)
        end[t.job, t.stage] = max(end[t.job, t.stage], t.end)
    for j, dag in dags.items():
        for s, parents in enumerate(dag.parents):
            for p in parents:
                assert start[j, s] >= end[j, p]

    # gang stages start all their tasks together
    for j, dag in dags.items():
        for s in range(dag.num_stages):
            if dag.gang[s]:
                assert len({t.start for t in r.tasks if (t.job, t.stage) == (j, s)}) == 1

    # a stage idles at most once, and no task of it starts inside its slot
    idles = [(t, j, s, d) for t, kind, j, s, d in r.trace if kind == "idle"]
    assert max(Counter((j, s) for _, j, s, _ in idles).values(), default=0) <= 1
    for t0, j, s, d in idles:
        assert start[j, s] >= t0 + d

    # Little's law: the time-average of jobs in system, integrated from the event trace,
    # times the horizon over the number of jobs is the average JCT
    area, n, last = 0.0, 0, 0.0
    for t, kind, *_ in r.trace:
        area += n * (t - last)
        last = t
        n += {"arrive": 1, "job-done": -1}.get(kind, 0)
    avg_jct = sum(rec.jct for rec in r.records) / len(r.records)
    assert n == 0
    assert abs(area / len(r.records) - avg_jct) < 1e-6 * max(1.0, avg_jct)
    assert abs(r.jobs_time_integral - area) < 1e-6 * max(1.0, area)

    # idle inserted per job matches the trace
    for rec in r.records:
        assert rec.idle_inserted == sum(d for _, j, _, d in idles if j == rec.id)


@settings(max_examples=20, deadline=None)
@given(w=workloads(), seed=st.integers(0, 2**16))
def test_same_seed_same_trace(w, seed):
    a = simulate(w, Chaos(), seed=seed, trace=True, record_tasks=True)
    b = simulate(w, Chaos(), seed=seed, trace=True, record_tasks=True)
    assert a.trace == b.trace and a.tasks == b.tasks and a.records == b.records


def _noisy(dag: Dag) -> WaveDurations:
    """A wave model with spread, so seeds matter."""
    waves = []
    for d in dag.durations:
        ms = [d * 1000 * f for f in (0.5, 1.0, 1.5, 2.0)]
        waves.append(StageWaves.from_ms({1: ms, 8: ms[:2]}, {1: ms[1:], 8: ms}, {1: [d * 3000]}))
    return WaveDurations(tuple(waves))


def test_seed_changes_sampled_durations_but_not_legality():
    dag = Dag.from_spec(
        parse_workflow(
            {
                "stages": [
                    {"name": "a", "tasks": 20, "taskDurationSeconds": 1.0},
                    {"name": "b", "tasks": 5, "taskDurationSeconds": 2.0, "dependsOn": ["a"]},
                ]
            }
        )
    )
    jobs = tuple(JobArrival(float(t), f"j{t}", dag, _noisy(dag)) for t in range(0, 30, 3))
    w = Workload("noisy", jobs, 4, Fidelity())
    runs = [simulate(w, Chaos(), seed=s, record_tasks=True) for s in (1, 1, 2)]
    assert runs[0].tasks == runs[1].tasks
    assert runs[0].tasks != runs[2].tasks
    assert all(r.unfinished == 0 for r in runs)
