"""Workload generators: determinism, arrival statistics, load arithmetic, shapes and errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.cli_train import train_workload
from idlegate.errors import IdlegateError
from idlegate.sim.dag import Dag
from idlegate.sim.durations import Uniforms
from idlegate.sim.engine import Fidelity, Workload, simulate
from idlegate.sim.history import load_history
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
    session_arrivals,
    size_factors,
    synthetic_workload,
    tpch_like_spec,
    workload_config,
)
from tests.helpers import Scripted, fifo_rule, jcts, sjf_rule


def signature(w: Workload) -> list[tuple]:
    return [(j.time, j.name, j.dag.tasks, j.dag.durations, j.dag.parents) for j in w.jobs]


def gaps(w: Workload, init: int = 1) -> np.ndarray:
    return np.diff([j.time for j in w.jobs][init - 1 :])


NO_DATA = {
    "synthetic": {},
    "tpch-like": {},
    "mixed": {"dags": "tpch-like"},
    "bursty": {},
    "heavy-tailed": {"size_distribution": "pareto"},
    "k8s-batch": {},
    "argo-shapes": {},
    "follow": {},
    "push": {},
    "recurring": {},
}


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
    kind = "synthetic" if name == "heavy-tailed" else name
    a, b = build_workload(kind, 7, **opts), build_workload(kind, 7, **opts)
    assert signature(a) == signature(b)
    c = build_workload(kind, 8, **opts)
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


def test_a_history_replays_on_the_pool_it_records(workflow_file: Path, tmp_path: Path):
    from idlegate.policy import make_scheduler
    from idlegate.sim.history import simulate_history, write_history

    ran = build_workload("follow", 0, num_jobs=12)  # 4 executors
    history = write_history(tmp_path / "h.jsonl", simulate_history(ran, make_scheduler("fair")))
    assert build_workload("file", 0, path=history).num_executors == 4
    assert build_workload("file", 0, path=history, num_executors=7).num_executors == 7
    assert build_workload("file", 0, path=workflow_file).num_executors == 10  # none recorded


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
    assert set(WORKLOADS) == {
        "synthetic",
        "tpch",
        "tpch-like",
        "mixed",
        "bursty",
        "k8s-batch",
        "argo-shapes",
        "airflow-shapes",
        "alibaba",
        "follow",
        "push",
        "recurring",
        "shift",
        "teams",
        "shared",
        "file",
        "swf",
        "lublin",
    }
    for kind in WORKLOADS.values():
        assert "num_executors" in kind.options()


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("nope", {}, "unknown workload 'nope'; choose one of: synthetic, tpch, tpch-like"),
        ("synthetic", {"bogus": 1}, "has no option 'bogus'; it takes .*long_fraction"),
        ("tpch-like", {"alpha": 0.5}, "has no option 'alpha'"),
        ("synthetic", {"load": -1}, "load: Input should be greater than 0"),
        ("synthetic", {"long_fraction": 2}, "long_fraction: Input should be less"),
        (
            "synthetic",
            {"load": 0.5, "interarrival": 3},
            "at most one of interarrival, rate and load",
        ),
        ("tpch-like", {"num_jobs": 5, "num_stream": 5}, "num_jobs or num_stream, not both"),
        ("tpch-like", {"num_jobs": 2, "init": 3}, r"num_jobs \(2\) counts the 3 job\(s\) .*init=0"),
        ("tpch-like", {"num_jobs": -3}, r"num_jobs \(-3\) must be at least 1"),
        ("tpch-like", {"num_jobs": "many"}, "num_jobs must be a whole number"),
        ("tpch-like", {"init": 0, "num_stream": 0}, "has no job: .* give at least one"),
        ("tpch-like", {"min_stages": 9, "max_stages": 3}, r"min_stages \(9\) exceeds max_stages"),
        ("mixed", {"dags": "foo"}, "dags: "),
        ("tpch", {"queries": "0,30"}, "TPC-H queries are 1-22"),
        ("tpch", {"sizes": "huge"}, "is not like '2g'"),
        ("file", {}, "path: Field required"),
        ("file", {"path": "x.yaml", "arrival": "batch", "load": 1}, "arrival 'batch' submits"),
        (
            "file",
            {"path": "x.yaml", "arrival": "poisson"},
            "needs one of interarrival, rate or load",
        ),
        ("file", {"path": "x.yaml", "repeat": 2, "num_jobs": 3}, "repeat or num_jobs, not both"),
        ("bursty", {"burstiness": 0.5}, "burstiness: Input should be greater than or equal"),
        ("bursty", {"session_size": 0}, "session_size: "),
        ("synthetic", {"size_shape": 2}, "size_shape needs size_distribution pareto or lognormal"),
        (
            "bursty",
            {"size_distribution": "pareto", "size_shape": 1},
            r"Pareto size_shape \(tail index\) must be > 1",
        ),
        ("synthetic", {"size_distribution": "zipf"}, "size_distribution: "),
        ("bursty", {"job_shape": "dag", "tasks_per_job": 4}, "job_shape dag draws its own"),
        ("k8s-batch", {"burst_size": 4, "load": 0.5}, "burst_size or one of interarrival"),
        ("k8s-batch", {"burst_size": 4, "adhoc_fraction": 1}, "adhoc_fraction must be below 1"),
        ("k8s-batch", {"jitter": 900}, r"jitter \(900 s\) must be shorter than the period"),
        ("k8s-batch", {"task_sigma": -1}, "task_sigma: Input should be greater than or equal"),
        ("k8s-batch", {"moving_delay": 2}, "has no option 'moving_delay'"),
    ],
)
def test_bad_options_are_sentences(name: str, options: dict, message: str):
    with pytest.raises(IdlegateError, match=message):
        build_workload(name, 0, **options)


def test_missing_tpch_dir_says_how_to_fix(tmp_path: Path):
    with pytest.raises(IdlegateError, match="pass --tpch-dir or set IDLEGATE_TPCH_DIR"):
        build_workload("tpch", 0, tpch_dir=tmp_path / "absent")


def test_missing_workflow_file(tmp_path: Path):
    with pytest.raises(IdlegateError, match=r"cannot read the workflow file .* does not exist"):
        build_workload("file", 0, path=tmp_path / "absent.yaml")


def test_bad_seed():
    with pytest.raises(IdlegateError, match="seed must be a whole number >= 0"):
        build_workload("synthetic", -1)


def test_configs_are_typed_and_frozen():
    cfg = TpchLikeConfig(num_jobs=10)
    assert cfg.num_stream == 9 and cfg.num_jobs == 10
    with pytest.raises(Exception, match="frozen"):
        cfg.init = 3  # type: ignore[misc]


# ---------------------------------------------------------------------------------------
# bursty arrivals


def scv(x: np.ndarray) -> float:
    """Squared coefficient of variation: 1 for exponential gaps, > 1 for bursty ones."""
    return float(x.var() / x.mean() ** 2)


def test_sessions_have_the_mean_size_and_the_predicted_burstiness():
    s, b, m = 4.0, 10.0, 2.0
    times, session = session_arrivals(np.random.default_rng(3), 40_000, s, b, m)
    g = np.diff(times)
    assert g.mean() == pytest.approx(m, rel=0.04)
    sizes = np.bincount(session)
    assert sizes.min() >= 1 and sizes.mean() == pytest.approx(s, rel=0.05)
    # gaps: a silence with probability 1/s, else an in-session gap of mean m/b
    inside, silence = m / b, s * m - (s - 1) * m / b
    second_moment = 2 * (silence**2 / s + (1 - 1 / s) * inside**2)
    assert scv(g) == pytest.approx(second_moment / m**2 - 1, rel=0.1)
    assert scv(g) > 4
    inside_gaps = g[session[1:] == session[:-1]]
    assert inside_gaps.mean() == pytest.approx(inside, rel=0.05)


@pytest.mark.parametrize(("burstiness", "session_size"), [(1.0, 4.0), (10.0, 1.0)])
def test_sessions_degenerate_to_poisson(burstiness: float, session_size: float):
    times, _ = session_arrivals(np.random.default_rng(4), 40_000, session_size, burstiness, 1.0)
    assert scv(np.diff(times)) == pytest.approx(1.0, abs=0.05)


def test_bursty_workload_is_bursty_and_poisson_without_bursts():
    bursty = gaps(build_workload("bursty", 1, num_jobs=20_000))
    assert scv(bursty) > 2.5
    poisson = gaps(build_workload("bursty", 1, num_jobs=20_000, burstiness=1))
    assert scv(poisson) == pytest.approx(1.0, abs=0.06)


def test_bursty_defaults_and_realised_load():
    cfg = workload_config("bursty")
    assert (cfg.num_executors, cfg.num_jobs, cfg.session_size, cfg.long_fraction) == (
        4,
        100,
        4,
        0.2,
    )
    assert mean_job_work(cfg) == pytest.approx(0.8 * 10 + 0.2 * 50)
    for load in (0.5, 0.7):
        w = build_workload("bursty", 5, num_jobs=30_000, load=load)
        assert gaps(w).mean() == pytest.approx(18.0 / (load * 4), rel=0.05)
        work = sum(j.dag.total_work for j in w.jobs)
        assert work / w.jobs[-1].time / 4 == pytest.approx(load, rel=0.05)
        longs = [j for j in w.jobs if j.name.startswith("long")]
        assert len(longs) / len(w.jobs) == pytest.approx(0.2, abs=0.015)
        assert {j.dag.total_work for j in w.jobs} == {10.0, 50.0}


def test_long_jobs_are_poisson_and_short_ones_come_in_sessions():
    w = build_workload("bursty", 2, num_jobs=20_000, long_fraction=0.5)
    long = np.diff([j.time for j in w.jobs if j.name.startswith("long")])
    short = np.diff([j.time for j in w.jobs[1:] if j.name.startswith("short")])
    assert scv(long) == pytest.approx(1.0, abs=0.08)
    assert scv(short) > 3


def test_bursty_first_jobs_do_not_depend_on_the_job_count_and_load_rescales():
    few = build_workload("bursty", 9, num_jobs=10)
    many = build_workload("bursty", 9, num_jobs=200)
    assert signature(few) == signature(many)[:10]
    high = build_workload("bursty", 9, num_jobs=200, load=0.35)
    np.testing.assert_allclose([j.time / 2 for j in high.jobs], [j.time for j in many.jobs])
    only_short = build_workload("bursty", 9, num_jobs=50, long_fraction=0)
    only_long = build_workload("bursty", 9, num_jobs=50, long_fraction=1)
    assert all(j.name.startswith("short") for j in only_short.jobs)
    assert all(j.name.startswith("long") for j in only_long.jobs)


# ---------------------------------------------------------------------------------------
# heavy-tailed sizes


def test_pareto_factors_have_mean_one_and_a_power_tail():
    rng = np.random.default_rng(0)
    finite_variance = size_factors(rng, "pareto", 2.5, 200_000)
    assert finite_variance.mean() == pytest.approx(1.0, rel=0.02)
    alpha = 1.5
    x = size_factors(rng, "pareto", alpha, 200_000)
    x_min = (alpha - 1) / alpha
    assert x.min() >= x_min
    for point in (1.0, 10.0):
        assert (x > point).mean() == pytest.approx((x_min / point) ** alpha, rel=0.1)
    # Hill estimate of the tail index from the sample
    assert 1 / np.mean(np.log(x / x_min)) == pytest.approx(alpha, rel=0.03)


def test_lognormal_factors_have_mean_one_and_the_given_spread():
    x = size_factors(np.random.default_rng(1), "lognormal", 1.0, 200_000)
    assert x.mean() == pytest.approx(1.0, rel=0.02)
    assert np.log(x).std() == pytest.approx(1.0, rel=0.02)


@pytest.mark.parametrize("distribution", ["pareto", "lognormal"])
def test_heavy_tailed_synthetic_keeps_the_mean_work_and_the_job_types(distribution: str):
    opts = {"num_jobs": 20_000, "load": 0.7, "size_distribution": distribution}
    if distribution == "pareto":
        opts["size_shape"] = 2.5  # finite variance, so the sample mean settles
    w = build_workload("synthetic", 4, **opts)
    plain = build_workload("synthetic", 4, num_jobs=20_000, load=0.7)
    assert mean_job_work(workload_config("synthetic", **opts)) == pytest.approx(30.0)
    assert [j.name for j in w.jobs] == [j.name for j in plain.jobs]  # same types
    assert [j.time for j in w.jobs] == [j.time for j in plain.jobs]  # same arrivals
    for kind, nominal in (("short", 10.0), ("long", 50.0)):
        work = np.array([j.dag.total_work for j in w.jobs if j.name.startswith(kind)])
        assert work.mean() == pytest.approx(nominal, rel=0.05)
        assert work.max() > 4 * nominal  # a tail
    assert len({j.dag.total_work for j in w.jobs}) > 19_000


def test_heavy_tailed_bursty_workload_simulates():
    w = build_workload("bursty", 3, num_jobs=60, size_distribution="pareto", tasks_per_job=2)
    assert all(j.dag.tasks == (2,) for j in w.jobs)
    result = simulate(w, Scripted(fifo_rule), seed=3)
    assert result.unfinished == 0
    total = sum(j.dag.total_work for j in w.jobs)
    assert result.busy_seconds == pytest.approx(total)


def test_dag_shaped_jobs_keep_the_sizes_and_types():
    opts = {"num_jobs": 400, "size_distribution": "lognormal"}
    dags = build_workload("bursty", 6, job_shape="dag", **opts)
    stages = build_workload("bursty", 6, **opts)
    assert [j.name for j in dags.jobs] == [j.name for j in stages.jobs]
    for a, b in zip(dags.jobs, stages.jobs, strict=True):
        assert a.dag.total_work == pytest.approx(b.dag.total_work)
        assert 2 <= a.dag.num_stages <= 6 and max(a.dag.tasks) <= 8
    assert np.mean([j.dag.num_stages for j in dags.jobs]) > 3
    assert simulate(dags, Scripted(fifo_rule), seed=6).unfinished == 0


# ---------------------------------------------------------------------------------------
# history files: recorded arrivals and measured durations

HISTORY = """
- name: nightly
  submitTime: 1000
  stages:
    - {name: only, tasks: 1, taskDurationSeconds: 10, measuredDurationSeconds: [2]}
- name: adhoc
  arrival: 1000
  stages:
    - {name: only, tasks: 1, measuredDurationSeconds: [5, 7]}
- apiVersion: idlegate.io/v1alpha1
  kind: DagWorkflow
  metadata: {name: report}
  arrival: 1012
  spec:
    stages:
      - {name: scan, tasks: 3, taskDurationSeconds: 1}
      - {name: sum, tasks: 1, taskDurationSeconds: 2, dependsOn: [scan],
         measuredDurationSeconds: [4]}
"""


@pytest.fixture
def history_file(tmp_path: Path) -> Path:
    path = tmp_path / "history.yaml"
    path.write_text(HISTORY)
    return path


def test_history_file_round_trip(history_file: Path):
    history = load_history(history_file)
    assert [h.name for h in history] == ["nightly", "adhoc", "report"]
    assert [h.arrival for h in history] == [1000.0, 1000.0, 1012.0]
    assert history[0].measured == ((2.0,),)
    assert history[1].spec.stages[0].task_duration_seconds == 6.0  # the measured mean
    assert history[2].measured == (None, (4.0,))
    w = build_workload("file", 0, path=history_file, num_executors=2)
    assert [(j.time, j.name) for j in w.jobs] == [
        (0.0, "nightly-0"),
        (0.0, "adhoc-1"),
        (12.0, "report-2"),
    ]
    assert w.fidelity.wave_durations and w.fidelity.moving_delay == 0
    assert w.jobs[0].dag.durations == (10.0,)  # the estimate is what schedulers see


@pytest.mark.parametrize("suffix", [".yaml", ".json", ".jsonl"])
def test_written_history_reads_back_equal(history_file: Path, tmp_path: Path, suffix: str):
    from dataclasses import replace

    from idlegate.sim.history import write_history

    history = load_history(history_file)
    history[0] = replace(history[0], jct=12.5, outcome="Succeeded", policy="fair", pool_size=4)
    again = load_history(write_history(tmp_path / f"copy{suffix}", history))
    strip = [replace(h, source="") for h in history]
    assert [replace(h, source="") for h in again] == strip
    a = build_workload("file", 0, path=history_file, num_executors=2)
    b = build_workload("file", 0, path=tmp_path / f"copy{suffix}", num_executors=2)
    assert jcts(simulate(a, Scripted(fifo_rule))) == jcts(simulate(b, Scripted(fifo_rule)))


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("jctSeconds", -1, "jctSeconds must be"),
        ("outcome", "Done", "outcome must be one of Succeeded, Failed"),
        ("policy", "", "policy must be a scheduler spec"),
        ("poolSize", 0, "poolSize must be a whole number"),
    ],
)
def test_bad_record_keys_are_named(tmp_path: Path, key: str, value: object, said: str):
    path = tmp_path / "bad.yaml"
    path.write_text(
        f"- {{name: w, arrival: 0, {key}: {value!r}, stages: "
        "[{name: a, tasks: 1, taskDurationSeconds: 1}]}\n"
    )
    with pytest.raises(IdlegateError, match=said):
        load_history(path)


def test_history_in_json_reads_like_yaml(history_file: Path, tmp_path: Path):
    import yaml

    as_json = tmp_path / "history.json"
    as_json.write_text(json.dumps(yaml.safe_load(HISTORY)))
    a = build_workload("file", 0, path=history_file, repeat=2)
    b = build_workload("file", 0, path=as_json, repeat=2)
    assert [(j.time, j.name.split("-")[0], j.dag.durations, j.durations) for j in a.jobs] == [
        (j.time, j.name.split("-")[0], j.dag.durations, j.durations) for j in b.jobs
    ]


def test_measured_durations_reach_the_simulator(tmp_path: Path):
    """SJF orders by the estimates; the simulator runs the measured durations."""
    path = tmp_path / "two.yaml"
    path.write_text(
        "- {name: x, arrival: 0, stages: [{name: a, tasks: 1, taskDurationSeconds: 10, "
        "measuredDurationSeconds: [2]}]}\n"
        "- {name: y, arrival: 0, stages: [{name: a, tasks: 1, taskDurationSeconds: 5, "
        "measuredDurationSeconds: [6]}]}\n"
    )
    w = build_workload("file", 0, path=path, num_executors=1)
    # by the estimates y (5 s) goes first and runs 6 s; x then runs 2 s
    assert jcts(simulate(w, Scripted(sjf_rule), seed=0)) == {"y-1": 6.0, "x-0": 8.0}


def test_more_tasks_than_measurements_resample_them(tmp_path: Path):
    path = tmp_path / "wide.yaml"
    path.write_text(
        "stages: [{name: a, tasks: 400, taskDurationSeconds: 2, "
        "measuredDurationSeconds: [1, 3]}]\narrival: 5\n"
    )
    w = build_workload("file", 0, path=path, num_executors=8)
    result = simulate(w, Scripted(fifo_rule), seed=1, record_tasks=True)
    durations = np.array([t.end - t.start for t in result.tasks or []])
    assert len(durations) == 400 and set(durations.tolist()) == {1.0, 3.0}
    assert durations.mean() == pytest.approx(2.0, abs=0.2)
    again = simulate(w, Scripted(fifo_rule), seed=1)
    assert again.records == result.records  # a seed fixes the draws


def test_recorded_arrivals_repeat_and_rescale(history_file: Path):
    # recorded gaps 0 and 12: span 12, a copy every 12 * 3 / 2 = 18 s
    w = build_workload("file", 0, path=history_file, repeat=2)
    assert [j.time for j in w.jobs] == [0.0, 0.0, 12.0, 18.0, 18.0, 30.0]
    mean_work = (10 + 6 + 5) / 3  # estimated work: 10, 6, 3 * 1 + 2
    half = build_workload("file", 0, path=history_file, load=0.5, num_executors=2)
    gap = mean_work / (0.5 * 2)
    assert [j.time for j in half.jobs] == pytest.approx([0.0, 0.0, 12.0 * gap / 6.0])
    poisson = build_workload("file", 0, path=history_file, arrival="poisson", interarrival=3)
    assert poisson.jobs[0].time == 0 and poisson.jobs[1].time > 0


def test_example_history_file_loads_and_simulates():
    example = (
        Path(__file__).resolve().parents[1]
        / "src"
        / "idlegate"
        / "training"
        / "examples"
        / "history.yaml"
    )
    w = build_workload("file", 0, path=example, num_executors=4)
    assert w.fidelity.wave_durations and len(w.jobs) >= 5
    assert any(j.durations is not None for j in w.jobs)
    assert simulate(w, Scripted(fifo_rule), seed=0).unfinished == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "- {name: a, arrival: 0, stages: [{name: s, tasks: 1, taskDurationSeconds: 1}]}\n"
            "- {name: b, stages: [{name: s, tasks: 1, taskDurationSeconds: 1}]}\n",
            r"\(workflow #1 'b'\) has no arrival \(or submitTime\)",
        ),
        (
            "{name: a, arrival: soon, stages: [{name: s, tasks: 1, taskDurationSeconds: 1}]}",
            r"\(workflow #0 'a'\): arrival must be a number of seconds",
        ),
        (
            "{arrival: 1, submitTime: 1, stages: [{name: s, tasks: 1, taskDurationSeconds: 1}]}",
            "give either arrival or submitTime, not both",
        ),
        (
            "{name: a, stages: [{name: s, tasks: 1, measuredDurationSeconds: []}]}",
            r"'a'\): stage 's': measuredDurationSeconds must be a non-empty list",
        ),
        (
            "{name: a, stages: [{name: s, tasks: 1, measuredDurationSeconds: [1, -2]}]}",
            r"stage 's': measuredDurationSeconds holds -2; every duration must be .* > 0",
        ),
        (
            "{name: a, stages: [{name: s, tasks: 1}]}",
            r"'a'\): stages\[0\].taskDurationSeconds: Field required",
        ),
    ],
)
def test_bad_history_files_are_sentences(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(IdlegateError, match=message):
        build_workload("file", 0, path=path)


def test_history_with_one_arrival_time_cannot_be_rescaled(tmp_path: Path):
    path = tmp_path / "same.yaml"
    path.write_text(
        "- {arrival: 3, stages: [{name: s, tasks: 1, taskDurationSeconds: 1}]}\n"
        "- {arrival: 3, stages: [{name: s, tasks: 1, taskDurationSeconds: 1}]}\n"
    )
    assert [j.time for j in build_workload("file", 0, path=path).jobs] == [0.0, 0.0]
    with pytest.raises(IdlegateError, match="no recorded gap to rescale"):
        build_workload("file", 0, path=path, load=0.5)


# ---------------------------------------------------------------------------------------
# the command line: --workload bursty, --option, and train --workload file


def test_cli_simulates_bursty_heavy_tailed_workloads():
    runner = CliRunner()
    args = ["simulate", "-w", "bursty", "-s", "sjf", "--jobs-count", "40", "--seed", "2"]
    plain = runner.invoke(app, [*args, "--json"])
    heavy = runner.invoke(app, [*args, "--json", "-o", "size_distribution=pareto"])
    assert plain.exit_code == 0 and heavy.exit_code == 0, plain.output + heavy.output
    a, b = json.loads(plain.output), json.loads(heavy.output)
    assert (a["workload"], a["jobs"], a["unfinished"], a["num_executors"]) == ("bursty", 40, 0, 4)
    assert a["avg_jct"] != b["avg_jct"]
    bad = runner.invoke(app, [*args, "-o", "size_distribution"])
    assert bad.exit_code == 1 and "write KEY=VALUE" in bad.output


def test_train_takes_a_history_file_as_its_workload(history_file: Path):
    from idlegate.training.config import load_config

    options = {"path": str(history_file), "num_executors": 2, "repeat": "5"}
    cfg = load_config(None, "quick", workload=train_workload("file", options))
    assert cfg.workload.name == "file" and cfg.workload.options == options
    assert cfg.validation_workload == cfg.workload
    assert load_config(None, "quick", workload=train_workload(None, {})).workload.name != "file"
    with pytest.raises(IdlegateError, match="need --workload too"):
        train_workload(None, {"path": "history.yaml"})
    bursty = {"name": "bursty", "options": {"load": 0.6, "size_distribution": "pareto"}}
    assert load_config(None, "quick", workload=bursty).workload.name == "bursty"
    with pytest.raises(IdlegateError, match="burstiness: "):
        load_config(None, "quick", workload={"name": "bursty", "options": {"burstiness": 0}})


def test_every_workload_has_a_summary_and_every_option_a_description():
    # the models are where a workload's options are described (field docstrings)
    for kind in WORKLOADS.values():
        assert kind.summary.strip(), kind.name
        options = kind.options()
        assert options, kind.name
        assert not [o for o, text in options.items() if not text.strip()], kind.name


# ---------------------------------------------------------------------------------------
# k8s-batch


def _k8s(seed: int = 0, **options: object) -> Workload:
    return build_workload("k8s-batch", seed, **options)


def test_k8s_batch_same_seed_same_jobs_and_same_pod_durations():
    a, b = _k8s(3, num_jobs=30), _k8s(3, num_jobs=30)
    assert signature(a) == signature(b)
    assert [j.durations for j in a.jobs] == [j.durations for j in b.jobs]
    # the run's seed fixes every pod's real duration: the same JCTs twice
    assert jcts(simulate(a, Scripted(fifo_rule), seed=5)) == jcts(
        simulate(b, Scripted(fifo_rule), seed=5)
    )
    assert signature(_k8s(4, num_jobs=30)) != signature(a)
    # the first jobs do not depend on how many are drawn
    assert signature(_k8s(3, num_jobs=80))[:30] == signature(a)


def test_k8s_batch_pipelines_are_minute_scale_argo_shapes_without_moving_delay():
    w = _k8s(1, num_jobs=300)
    assert w.fidelity.moving_delay == 0 and w.num_executors == 40
    shapes = {j.name.split("-", 1)[1].rsplit("-", 1)[0] for j in w.jobs}
    assert shapes == {"etl", "fanout", "train-eval"}
    by_shape = {j.name.split("-", 1)[1].rsplit("-", 1)[0]: j for j in reversed(w.jobs)}
    assert by_shape["train-eval"].dag.names == ("prepare", "train", "eval", "register")
    assert by_shape["fanout"].dag.names == ("split", "map", "merge")
    assert by_shape["etl"].dag.names[-1] == "load"
    for job in w.jobs:  # chains and fan-ins: one sink
        children = {p for ps in job.dag.parents for p in ps}
        assert len(set(range(job.dag.num_stages)) - children) == 1
    estimates = np.array([d for j in w.jobs for d in j.dag.durations])
    assert estimates.min() >= 15 + 1  # start latency + at least a second of run
    assert 60 < np.median(estimates) < 600  # minutes, not seconds


def test_k8s_batch_cron_bursts_and_adhoc_share():
    cron_only = _k8s(2, num_jobs=200, adhoc_fraction=0, burst_size=5)
    times = np.array([j.time for j in cron_only.jobs])
    assert np.all(times % 900 < 60)  # each within its burst's jitter
    bursts = np.bincount((times // 900).astype(int))
    assert bursts[:-1].min() >= 4 and bursts.max() <= 6 and bursts[:-1].mean() == pytest.approx(5)
    assert all(j.name.startswith("cron-") for j in cron_only.jobs)
    hourly = _k8s(2, num_jobs=200, adhoc_fraction=0, burst_size=5, period=3600)
    assert np.all(np.array([j.time for j in hourly.jobs]) % 3600 < 60)
    mixed = _k8s(2, num_jobs=2000, adhoc_fraction=0.3)
    adhoc = [j for j in mixed.jobs if j.name.startswith("adhoc-")]
    assert len(adhoc) / len(mixed.jobs) == pytest.approx(0.3, abs=0.03)
    off_burst = [j.time % 900 >= 60 for j in adhoc]
    assert np.mean(off_burst) > 0.85  # Poisson: mostly between the bursts


@pytest.mark.parametrize("options", [{"load": 0.5}, {"burst_size": 3.5}, {"load": 0.9}])
def test_k8s_batch_offered_load_is_realised(options: dict):
    config = workload_config("k8s-batch", **options)
    w = _k8s(9, num_jobs=3000, **options)
    work = sum(j.dag.total_work for j in w.jobs)
    realised = work / w.jobs[-1].time / w.num_executors
    expected = mean_job_work(config) / config.mean_gap() / w.num_executors
    assert realised == pytest.approx(expected, rel=0.05)
    if "load" in options:
        assert expected == pytest.approx(options["load"])
    else:  # what reports show as the mean interarrival: (1 - 0.3) * 900 s / 3.5
        assert config.mean_interarrival(lambda: 1.0, 40) == pytest.approx(180)


def test_k8s_pod_durations_include_the_start_latency_and_average_the_estimate():
    w = _k8s(0, num_jobs=1, task_sigma=0.4, start_latency=20)
    job = w.jobs[0]
    model = job.durations
    u = Uniforms(np.random.default_rng(0))
    draws = np.array([model.sample(0, 1, True, True, u) for _ in range(20_000)])
    assert draws.min() > 20
    assert draws.mean() == pytest.approx(job.dag.durations[0], rel=0.02)
    exact = _k8s(0, num_jobs=1, task_sigma=0, start_latency=20).jobs[0]
    assert exact.durations.sample(0, 1, True, True, u) == exact.dag.durations[0]
    slower = _k8s(0, num_jobs=1, duration_scale=2, start_latency=20).jobs[0]
    assert slower.dag.durations[0] - 20 == pytest.approx(2 * (job.dag.durations[0] - 20), abs=0.1)


def test_k8s_batch_simulates_to_completion():
    w = _k8s(1, num_jobs=40)
    result = simulate(w, Scripted(fifo_rule), seed=1)
    assert result.unfinished == 0 and len(result.records) == 40


def test_the_workload_flag_help_names_every_registered_workload():
    from idlegate.sim.workloads.kinds import WORKLOADS

    out = CliRunner().invoke(app, ["simulate", "--help"], terminal_width=200)
    listed = " ".join(out.stdout.split()).split("Workload: ", 1)[1].split(".", 1)[0]
    assert [w.strip() for w in listed.split(",")] == list(WORKLOADS)


def test_a_document_of_another_kind_is_named_by_its_kind(tmp_path):
    # 'is a ExecutorPool of apiVersion ...' read wrong; a kind takes no article
    path = tmp_path / "pools.yaml"
    path.write_text("apiVersion: idlegate.io/v1alpha1\nkind: ExecutorPool\nmetadata: {name: a}\n")
    with pytest.raises(IdlegateError) as raised:
        load_history(path)
    assert (
        f"{path} (workflow #0) is of kind ExecutorPool (apiVersion 'idlegate.io/v1alpha1'), "
        in (str(raised.value))
    )
