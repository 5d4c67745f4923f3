"""Workloads with arrival structure: follow, push, recurring, and the PeriodicStarts they share."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from idlegate.errors import IdlegateError
from idlegate.sim.engine import Workload, simulate
from idlegate.sim.workloads import (
    DEFAULT_PIPELINES,
    PeriodicStarts,
    RecurringConfig,
    build_workload,
    job_class,
    mean_job_work,
    workload_config,
)
from tests.helpers import Scripted, fifo_rule

STRUCTURED = ("follow", "push", "recurring")


def signature(w: Workload) -> list[tuple]:
    return [(j.time, j.name, j.dag.tasks, j.dag.durations, j.dag.parents) for j in w.jobs]


def realised_load(w: Workload) -> float:
    times = [j.time for j in w.jobs]
    return sum(j.dag.total_work for j in w.jobs) / (times[-1] - times[0]) / w.num_executors


@pytest.mark.parametrize("name", STRUCTURED)
@pytest.mark.parametrize("shape", ["one-stage", "dag"])
def test_same_seed_same_jobs_and_the_first_jobs_do_not_depend_on_the_count(name: str, shape: str):
    a = build_workload(name, 5, num_jobs=40, job_shape=shape)
    assert signature(a) == signature(build_workload(name, 5, num_jobs=40, job_shape=shape))
    assert [j.time for j in build_workload(name, 6, num_jobs=40).jobs] != [j.time for j in a.jobs]
    assert signature(build_workload(name, 5, num_jobs=150, job_shape=shape))[:40] == signature(a)
    assert len(a.jobs) == 40 and a.num_executors == 4


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("follow", {}),
        ("follow", {"uncorrelated": 1.0}),
        ("follow", {"uncorrelated": 0.0, "load": 0.5, "size_ratio": 5}),
        ("push", {"long_position": "random", "session_size": 2}),
        ("recurring", {}),
        ("recurring", {"load": 0.5, "num_executors": 3}),
    ],
)
def test_the_offered_load_is_realised(name: str, options: dict):
    config = workload_config(name, **options)
    target = options.get("load", 0.7)
    loads = [realised_load(build_workload(name, s, num_jobs=4000, **options)) for s in range(3)]
    assert np.mean(loads) == pytest.approx(target, rel=0.05)
    work = np.mean(
        [j.dag.total_work for j in build_workload(name, 0, num_jobs=4000, **options).jobs]
    )
    assert mean_job_work(config) == pytest.approx(work, rel=0.05)


def _sessions_after_longs(w: Workload, within: float) -> list[int]:
    """For each long job, the short jobs arriving in the next `within` seconds."""
    return [
        sum(job_class(o.name) == "short" for o in w.jobs if a.time < o.time <= a.time + within)
        for a in w.jobs
        if job_class(a.name) == "long"
    ]


def test_follow_sessions_follow_their_long_job_after_the_lag():
    fixed = build_workload(
        "follow", 1, num_jobs=400, uncorrelated=0, lag=20, lag_distribution="fixed", session_gap=0
    )
    longs = [j.time for j in fixed.jobs if job_class(j.name) == "long"]
    shorts = Counter(round(j.time, 9) for j in fixed.jobs if job_class(j.name) == "short")
    # with no gaps every session is 3 or 4 short jobs at exactly its long job's time + 20 s
    sessions = [shorts[round(t + 20, 9)] for t in longs[:-1]]
    assert set(sessions) == {3, 4} and abs(np.mean(sessions) - 3.5) < 0.2
    assert sum(sessions) + shorts[round(longs[-1] + 20, 9)] == sum(shorts.values())


def test_follow_structure_fades_with_uncorrelated_jobs_and_the_size_ratio_holds():
    tight = build_workload("follow", 2, num_jobs=600, uncorrelated=0, lag=2, session_gap=0.5)
    loose = build_workload("follow", 2, num_jobs=600, uncorrelated=1, lag=2, session_gap=0.5)
    assert np.mean(_sessions_after_longs(tight, 15)) > 3
    assert np.mean(_sessions_after_longs(loose, 15)) < 1.5
    works = {job_class(j.name): j.dag.total_work for j in tight.jobs}
    assert works == {"long": 100.0, "short": 10.0}
    ratio = build_workload("follow", 2, num_jobs=50, size_ratio=20, short_seconds=5)
    assert {j.dag.total_work for j in ratio.jobs} == {5.0, 100.0}


@pytest.mark.parametrize("position", ["first", "random"])
def test_push_workflows_come_seconds_apart_with_one_long_each(position: str):
    w = build_workload(
        "push",
        3,
        num_jobs=300,
        uncorrelated=0,
        load=0.02,  # pushes minutes apart: their workflows do not interleave
        spacing=2,
        spacing_distribution="fixed",
        long_position=position,
    )
    times = np.array([j.time for j in w.jobs])
    groups = np.split(np.arange(len(times)), np.flatnonzero(np.diff(times) > 2.5) + 1)
    # the last push may be cut by num_jobs; now and then two pushes overlap
    whole = [g for g in groups[:-1] if np.allclose(np.diff(times[g]), 2.0)]
    assert len(whole) > 0.9 * (len(groups) - 1)
    assert {len(g) for g in whole} == {4, 5}
    longs = [[job_class(w.jobs[i].name) == "long" for i in g] for g in whole]
    assert all(sum(x) == 1 for x in longs)
    firsts = np.mean([x[0] for x in longs])
    assert firsts == 1.0 if position == "first" else 0.1 < firsts < 0.5


def test_recurring_runs_keep_their_schedule_dag_and_similar_work():
    w = build_workload("recurring", 4, num_jobs=400)
    by_class: dict[str, list] = {}
    for j in w.jobs:
        by_class.setdefault(job_class(j.name), []).append(j)
    assert set(by_class) >= {p.name for p in DEFAULT_PIPELINES} | {"adhoc-short"}
    for p in DEFAULT_PIPELINES:
        runs = by_class[p.name]
        nominal = p.schedule.nominal(np.arange(len(runs)))
        late = np.array([j.time for j in runs]) - nominal
        assert (late >= 0).all() and (late < p.schedule.jitter).all()
        works = np.array([j.dag.total_work for j in runs])
        assert works.mean() == pytest.approx(p.work, rel=0.1) and works.std() < 0.2 * p.work
        assert {j.dag.tasks for j in runs} == {(1,)}
    dags = build_workload("recurring", 4, num_jobs=60, job_shape="dag")
    ingest = [j.dag for j in dags.jobs if job_class(j.name) == "ingest"]
    assert len({(d.tasks, d.parents) for d in ingest}) == 1 and len(ingest) > 2


def test_recurring_load_rescales_the_schedules_clock():
    config = workload_config("recurring", load=0.35)
    assert isinstance(config, RecurringConfig) and config.time_scale() > 1.9
    slow, written = build_workload("recurring", 7, load=0.35), build_workload("recurring", 7)
    assert [j.name for j in slow.jobs][:20] != [] and len(slow.jobs) == len(written.jobs)
    ingest = [j.time for j in slow.jobs if job_class(j.name) == "ingest"]
    assert np.diff(ingest).mean() == pytest.approx(120 * config.time_scale(), rel=0.05)


def test_recurring_pipelines_from_json_text():
    text = '[{"name": "nightly", "schedule": {"period": 60, "phase": 5}, "work": 30, "tasks": 3}]'
    w = build_workload("recurring", 0, pipelines=text, adhoc_fraction=0, num_jobs=5)
    assert [j.name for j in w.jobs] == [f"nightly-{i}" for i in range(5)]
    assert [j.time for j in w.jobs] == [5.0 + 60 * i for i in range(5)]
    assert all(j.dag.tasks == (3,) for j in w.jobs)


def test_schedule_next_nominal_start_and_scaling():
    s = PeriodicStarts(period=900, phase=60, jitter=30)
    assert s.next_after(0) == 60 and s.next_after(60) == 960 and s.next_after(1000) == 1860
    assert s.scaled(2) == PeriodicStarts(period=1800, phase=120, jitter=60)
    runs = s.runs(np.random.default_rng(0), 10)
    assert (np.diff(runs) > 0).all() and ((runs - s.nominal(np.arange(10))) < 30).all()
    with pytest.raises(IdlegateError, match=r"jitter \(900 s\) must be shorter than the period"):
        PeriodicStarts(period=900, jitter=900)


def test_job_class_reads_names_back():
    assert job_class("long-3") == "long" and job_class("ingest-report-17") == "ingest-report"
    assert job_class("adhoc-short-4") == "adhoc-short"


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("follow", {"lag_distribution": "gamma"}, "lag_distribution: "),
        ("follow", {"size_ratio": 0.5}, "size_ratio: Input should be greater than or equal to 1"),
        ("follow", {"uncorrelated": 1.5}, "uncorrelated: Input should be less than or equal"),
        ("follow", {"load": 0.5, "rate": 1}, "at most one of interarrival, rate and load"),
        ("follow", {"spacing": 3}, "has no option 'spacing'"),
        ("push", {"long_position": "last"}, "long_position: "),
        ("push", {"lag": 3}, "has no option 'lag'"),
        ("recurring", {"pipelines": "[{"}, "pipelines is not valid JSON"),
        ("recurring", {"pipelines": []}, "pipelines: "),
        (
            "recurring",
            {"pipelines": [{"name": "Bad_Name", "schedule": {"period": 5}, "work": 1}]},
            "must be lower-case letters",
        ),
        (
            "recurring",
            {"pipelines": [{"name": "adhoc-x", "schedule": {"period": 5}, "work": 1}]},
            "must not start with 'adhoc'",
        ),
        (
            "recurring",
            {"pipelines": [{"name": "a", "schedule": {"period": 5}, "work": 1}] * 2},
            "pipeline 'a' is named twice",
        ),
        (
            "recurring",
            {"pipelines": [{"name": "a", "schedule": {"period": 5, "jitter": 6}, "work": 1}]},
            "must be shorter than the period",
        ),
        ("recurring", {"adhoc_fraction": 1}, "adhoc_fraction: Input should be less than 1"),
    ],
)
def test_bad_options_are_sentences(name: str, options: dict, message: str):
    with pytest.raises(IdlegateError, match=message):
        build_workload(name, 0, **options)


@pytest.mark.parametrize("name", STRUCTURED)
def test_structured_workloads_simulate_to_completion(name: str):
    w = build_workload(name, 1, num_jobs=30, num_executors=3, job_shape="dag")
    result = simulate(w, Scripted(fifo_rule), seed=0)
    assert result.unfinished == 0 and len(result.records) == 30
