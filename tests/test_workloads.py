"""Workload generators: determinism, arrival statistics, load arithmetic, shapes and errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idlegate.errors import IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.engine import Fidelity, Workload, simulate
from idlegate.sim.workloads import (
    WORKLOADS,
    DagShape,
    MixedConfig,
    SyntheticConfig,
    TpchLikeConfig,
    build_workload,
    estimate_tpch_like_work,
    interarrival_for_load,
    mean_job_work,
    offered_load,
    synthetic_workload,
    tpch_like_spec,
    workload_config,
)
from idlegate.tests.helpers import Scripted, fifo_rule


def signature(w: Workload) -> list[tuple]:
    return [(j.time, j.name, j.dag.tasks, j.dag.durations, j.dag.parents) for j in w.jobs]


def gaps(w: Workload, init: int = 1) -> np.ndarray:
    return np.diff([j.time for j in w.jobs][init - 1 :])


NO_DATA = {"synthetic": {}, "tpch-like": {}, "mixed": {"dags": "tpch-like"}}


@pytest.fixture
def workflow_file(tmp_path: Path) -> Path:
    path = tmp_path / "pipes.yaml"
    path.write_text(
        """
stages:
  - {name: extract, tasks: 4, taskDurationSeconds: 2}
  - {name: load, tasks: 1, taskDurationSeconds: 3, dependsOn: [extract]}
---
apiVersion: idlegate.io/v1alpha1
kind: DagWorkflow
metadata: {name: tiny}
spec:
  stages:
    - {name: only, tasks: 2, taskDurationSeconds: 1}
"""
    )
    return path


# ---------------------------------------------------------------------------------------
# determinism and common random numbers


@pytest.mark.parametrize("name", list(NO_DATA))
def test_same_seed_same_workload_different_seed_different(name: str):
    opts = NO_DATA[name] | {"num_jobs": 40}
    a, b = build_workload(name, 7, **opts), build_workload(name, 7, **opts)
    assert signature(a) == signature(b)
    c = build_workload(name, 8, **opts)
    assert [j.time for j in a.jobs] != [j.time for j in c.jobs]
    assert len(a.jobs) == 40


def test_file_workload_is_deterministic(workflow_file: Path):
    opts = {"path": workflow_file, "repeat": 5, "interarrival": 4.0}
    assert signature(build_workload("file", 1, **opts)) == signature(
        build_workload("file", 1, **opts)
    )
    assert signature(build_workload("file", 1, **opts)) != signature(
        build_workload("file", 2, **opts)
    )


def test_a_generator_seed_works_like_an_int_seed():
    cfg = SyntheticConfig(num_jobs=30)
    assert signature(synthetic_workload(cfg, 5)) == signature(
        synthetic_workload(cfg, np.random.default_rng(5))
    )


def test_changing_the_load_rescales_the_same_arrival_pattern():
    """Common random numbers: the same jobs, times scaled by the ratio of interarrivals."""
    low = build_workload("tpch-like", 3, num_stream=50, load=0.4)
    high = build_workload("tpch-like", 3, num_stream=50, load=0.8)
    assert [j.name for j in low.jobs] == [j.name for j in high.jobs]
    assert [j.dag.tasks for j in low.jobs] == [j.dag.tasks for j in high.jobs]
    np.testing.assert_allclose([j.time / 2 for j in low.jobs], [j.time for j in high.jobs])


def test_option_spelling_and_none_values():
    a = build_workload(
        "synthetic", 0, **{"num-executors": 3, "long-fraction": "0.25", "load": None}
    )
    b = build_workload("synthetic", 0, num_executors=3, long_fraction=0.25)
    assert signature(a) == signature(b) and a.num_executors == 3


# ---------------------------------------------------------------------------------------
# arrivals and load


def test_poisson_interarrival_mean_and_spread():
    w = build_workload("synthetic", 11, num_jobs=20_001, interarrival=3.0)
    g = gaps(w)
    assert len(g) == 20_000
    assert g.mean() == pytest.approx(3.0, rel=0.03)
    assert g.std() / g.mean() == pytest.approx(1.0, rel=0.05)  # exponential: CV = 1
    assert build_workload("synthetic", 11, num_jobs=100, rate=0.5).jobs[-1].time == pytest.approx(
        build_workload("synthetic", 11, num_jobs=100, interarrival=2.0).jobs[-1].time
    )


def test_init_jobs_arrive_at_zero():
    w = build_workload("tpch-like", 2, init=5, num_stream=10)
    assert [j.time for j in w.jobs[:5]] == [0.0] * 5
    assert all(j.time > 0 for j in w.jobs[5:])
    assert len(w.jobs) == 15


@given(
    work=st.floats(0.1, 1e5),
    load=st.floats(0.01, 5),
    k=st.integers(1, 1000),
)
def test_load_arithmetic_round_trips(work: float, load: float, k: int):
    gap = interarrival_for_load(work, load, k)
    assert offered_load(work, gap, k) == pytest.approx(load)


def test_target_load_synthetic_is_exact_and_realised():
    cfg = workload_config("synthetic", load=0.7, num_executors=4, num_jobs=20_000)
    assert mean_job_work(cfg) == pytest.approx(30.0)  # (10 + 50) / 2
    w = build_workload("synthetic", 5, load=0.7, num_executors=4, num_jobs=20_000)
    g = gaps(w)
    assert g.mean() == pytest.approx(30.0 / (0.7 * 4), rel=0.03)
    work = sum(j.dag.total_work for j in w.jobs)
    assert work / w.jobs[-1].time / 4 == pytest.approx(0.7, rel=0.05)


def test_synthetic_default_is_load_0_8():
    w = build_workload("synthetic", 0, num_jobs=10_000)
    assert gaps(w).mean() == pytest.approx(30.0 / (0.8 * 4), rel=0.04)


def test_target_load_tpch_like_uses_the_cached_estimate():
    est = estimate_tpch_like_work()
    assert estimate_tpch_like_work() == est  # cached and deterministic
    rng = np.random.default_rng(99)
    sample = np.mean([Dag.from_spec(tpch_like_spec(rng)).total_work for _ in range(800)])
    assert sample == pytest.approx(est, rel=0.12)
    by_load = build_workload("tpch-like", 1, num_stream=20, load=0.5)
    by_gap = build_workload("tpch-like", 1, num_stream=20, interarrival=est / (0.5 * 50))
    np.testing.assert_allclose([j.time for j in by_load.jobs], [j.time for j in by_gap.jobs])


def test_mixed_load_mixes_the_mean_work():
    cfg = MixedConfig(alpha=0.25, dags="tpch-like", load=0.6)
    expected = 0.25 * 30.0 + 0.75 * estimate_tpch_like_work()
    assert mean_job_work(cfg) == pytest.approx(expected)


# ---------------------------------------------------------------------------------------
# job content


def test_synthetic_jobs_are_short_or_long_with_the_given_fraction():
    w = build_workload("synthetic", 2, num_jobs=5000, long_fraction=0.3, tasks_per_job=5)
    kinds = [j.name.split("-")[0] for j in w.jobs]
    assert set(kinds) == {"short", "long"}
    assert kinds.count("long") / len(kinds) == pytest.approx(0.3, abs=0.03)
    for j in w.jobs:
        assert j.dag.num_stages == 1 and j.dag.tasks == (5,)
        assert j.dag.total_work == pytest.approx(50.0 if j.name.startswith("long") else 10.0)
        assert j.durations is None
    assert w.fidelity == Fidelity.none() and w.num_executors == 4
    assert len({id(j.dag) for j in w.jobs}) == 2  # two shared Dags


def test_mix_fraction():
    w = build_workload("mixed", 4, dags="tpch-like", alpha=0.7, num_jobs=2000, num_executors=20)
    synthetic = sum(j.name.startswith(("short", "long")) for j in w.jobs)
    assert synthetic / len(w.jobs) == pytest.approx(0.7, abs=0.035)
    assert w.name == "mixed-tpch-like" and w.num_executors == 20
    assert w.fidelity == Fidelity.none()
    only_dags = build_workload("mixed", 4, dags="tpch-like", alpha=0, num_jobs=50)
    assert all(j.name.startswith("tpch-like") for j in only_dags.jobs)


def test_tpch_like_moving_delay_option():
    w = build_workload("tpch-like", 0, num_jobs=3, moving_delay=2)
    assert w.fidelity == Fidelity(moving_delay=2.0, wave_durations=False)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_tpch_like_dags_are_valid_query_plans(seed: int):
    dag = Dag.from_spec(tpch_like_spec(np.random.default_rng(seed)))
    assert 2 <= dag.num_stages <= 18
    assert all(1 <= t <= 200 for t in dag.tasks)
    assert all(0.2 <= d <= 5.0 for d in dag.durations)
    assert len(dag.topological_order) == dag.num_stages  # acyclic
    sinks = [i for i in range(dag.num_stages) if not dag.children[i]]
    assert sinks == [dag.num_stages - 1]  # one final stage
    sources = [i for i in range(dag.num_stages) if not dag.parents[i]]
    assert all(dag.names[i].startswith("scan-") for i in sources)
    assert all(len(p) <= 3 for p in dag.parents)


def test_tpch_like_averages_look_like_tpch():
    rng = np.random.default_rng(0)
    dags = [Dag.from_spec(tpch_like_spec(rng)) for _ in range(1000)]
    stages = np.mean([d.num_stages for d in dags])
    tasks = np.mean([sum(d.tasks) for d in dags])
    assert 8 <= stages <= 11
    assert 250 <= tasks <= 900  # a few hundred tasks per job
    assert {d.num_stages for d in dags} >= {2, 18}


def test_tpch_like_shape_knobs():
    shape = DagShape(
        min_stages=5, max_stages=5, max_tasks=3, min_task_seconds=1, max_task_seconds=1
    )
    dag = Dag.from_spec(tpch_like_spec(np.random.default_rng(1), shape))
    assert dag.num_stages == 5 and max(dag.tasks) <= 3 and set(dag.durations) == {1.0}
    one = Dag.from_spec(
        tpch_like_spec(np.random.default_rng(1), DagShape(min_stages=1, max_stages=1))
    )
    assert one.num_stages == 1


# ---------------------------------------------------------------------------------------
# spec-file workloads


def test_file_batch_repeat_and_names(workflow_file: Path):
    w = build_workload("file", 0, path=str(workflow_file), repeat=3)
    assert [j.time for j in w.jobs] == [0.0] * 6
    assert [j.name for j in w.jobs][:3] == ["pipes-w0-0", "tiny-1", "pipes-w0-2"]
    assert w.jobs[0].dag is w.jobs[2].dag
    assert w.name == "file:pipes" and w.num_executors == 10


def test_file_fixed_and_poisson_streams(workflow_file: Path):
    fixed = build_workload(
        "file", 0, path=workflow_file, arrival="fixed", interarrival=10, num_jobs=5
    )
    assert [j.time for j in fixed.jobs] == [0.0, 10.0, 20.0, 30.0, 40.0]
    stream = build_workload("file", 0, path=workflow_file, num_jobs=2001, interarrival=5)
    assert stream.jobs[0].time == 0.0
    assert gaps(stream).mean() == pytest.approx(5.0, rel=0.06)


def test_file_target_load(workflow_file: Path):
    # mean work of the two workflows: (4*2 + 3 + 2*1) / 2 = 6.5
    w = build_workload("file", 0, path=workflow_file, arrival="fixed", load=0.5, num_executors=2)
    assert w.jobs[1].time == pytest.approx(6.5 / (0.5 * 2))


def test_small_workloads_simulate_to_completion():
    for w in (
        build_workload("synthetic", 1, num_jobs=30),
        build_workload("tpch-like", 1, num_jobs=8, num_executors=20),
        build_workload("mixed", 1, dags="tpch-like", num_jobs=10, num_executors=20),
    ):
        result = simulate(w, Scripted(fifo_rule), seed=1)
        assert result.unfinished == 0 and len(result.records) == len(w.jobs)


# ---------------------------------------------------------------------------------------
# errors


def test_registry_names():
    assert set(WORKLOADS) == {"synthetic", "tpch", "tpch-like", "mixed", "bursty", "file"}
    for kind in WORKLOADS.values():
        assert "num_executors" in kind.options()


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("nope", {}, "unknown workload 'nope'; choose one of: synthetic, tpch, tpch-like"),
        ("synthetic", {"bogus": 1}, "has no option 'bogus'; valid options: .*long_fraction"),
        ("tpch-like", {"alpha": 0.5}, "has no option 'alpha'"),
        ("synthetic", {"load": -1}, "option load: Input should be greater than 0"),
        ("synthetic", {"long_fraction": 2}, "option long_fraction: Input should be less"),
        (
            "synthetic",
            {"load": 0.5, "interarrival": 3},
            "at most one of interarrival, rate and load",
        ),
        ("tpch-like", {"num_jobs": 5, "num_stream": 5}, "num_jobs or num_stream, not both"),
        ("tpch-like", {"num_jobs": 2, "init": 3}, r"num_jobs \(2\) must be at least init \(3\)"),
        ("tpch-like", {"num_jobs": "many"}, "num_jobs must be a whole number"),
        ("tpch-like", {"init": 0, "num_stream": 0}, "at least one job"),
        ("tpch-like", {"min_stages": 9, "max_stages": 3}, r"min_stages \(9\) exceeds max_stages"),
        ("mixed", {"dags": "foo"}, "option dags"),
        ("tpch", {"queries": "0,30"}, "TPC-H queries are 1-22"),
        ("tpch", {"sizes": "huge"}, "is not like '2g'"),
        ("file", {}, "option path: Field required"),
        ("file", {"path": "x.yaml", "arrival": "batch", "load": 1}, "arrival 'batch' submits"),
        (
            "file",
            {"path": "x.yaml", "arrival": "poisson"},
            "needs one of interarrival, rate or load",
        ),
        ("file", {"path": "x.yaml", "repeat": 2, "num_jobs": 3}, "repeat or num_jobs, not both"),
    ],
)
def test_bad_options_are_sentences(name: str, options: dict, message: str):
    with pytest.raises(IdlegateError, match=message):
        build_workload(name, 0, **options)


def test_missing_tpch_dir_says_how_to_fix(tmp_path: Path):
    with pytest.raises(IdlegateError, match="pass --tpch-dir or set IDLEGATE_TPCH_DIR"):
        build_workload("tpch", 0, tpch_dir=tmp_path / "absent")


def test_missing_workflow_file(tmp_path: Path):
    with pytest.raises(IdlegateError, match="cannot read workflow file"):
        build_workload("file", 0, path=tmp_path / "absent.yaml")


def test_bad_seed():
    with pytest.raises(IdlegateError, match="seed must be a whole number >= 0"):
        build_workload("synthetic", -1)


def test_configs_are_typed_and_frozen():
    cfg = TpchLikeConfig(num_jobs=10)
    assert cfg.num_stream == 9 and cfg.num_jobs == 10
    with pytest.raises(Exception, match="frozen"):
        cfg.init = 3  # type: ignore[misc]
