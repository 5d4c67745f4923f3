"""The `alibaba` workload: the trace's folder read into DAGs, streamed, and its errors.

The tests on a tiny folder of .npy files written here always run; those on the real
trace (``../shared/data/alibaba``) skip, saying how to provide it, when it is absent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.errors import IdlegateError, SpecError
from idlegate.policy import make_scheduler
from idlegate.sim import alibaba
from idlegate.sim.alibaba import (
    ENV_VAR,
    AlibabaTrace,
    default_alibaba_dir,
    load_alibaba_job,
    open_alibaba_trace,
)
from idlegate.sim.engine import simulate
from idlegate.sim.workloads import build_workload, interarrival_for_load, workload_config
from idlegate.sim.workloads.alibaba import AlibabaConfig
from tests.helpers import alibaba_trace

# job 0: one stage; job 1: s0 depends on s2, s1 on s0 (not in index order), a 0 s stage;
# job 2: a diamond s0 -> s1, s2 -> s3
JOBS = {
    0: ([[0]], [[4, 10]]),
    1: ([[0, 1, 0], [0, 0, 0], [1, 0, 0]], [[3, 2], [1, 0], [2, 5]]),
    2: (
        [[0, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 0]],
        [[2, 3], [5, 1], [1, 8], [1, 2]],
    ),
}


def write_job(folder: Path, n: int, adj, ins_dur) -> None:
    np.save(folder / f"adj_mat_{n}.npy", np.asarray(adj, dtype=float))
    np.save(folder / f"ins_dur{n}.npy", np.asarray(ins_dur, dtype=float))


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "alibaba"
    folder.mkdir()
    for n, (adj, ins_dur) in JOBS.items():
        write_job(folder, n, adj, ins_dur)
    return folder


# ---------------------------------------------------------------------------------------
# the loader


def test_a_job_reads_into_its_dag(trace_dir: Path):
    job = load_alibaba_job(trace_dir, 1)
    assert job.name == "alibaba-1"
    assert job.dag.names == ("s0", "s1", "s2")
    assert job.dag.tasks == (3, 1, 2)
    # adj[i, j] = 1: stage j depends on stage i
    assert job.dag.parents == ((2,), (0,), ())
    assert job.dag.durations == (2.0, 1.0, 5.0)  # the recorded 0 s read as 1 s
    assert job.dag.topological_order == (2, 0, 1)
    diamond = load_alibaba_job(trace_dir, 2).dag
    assert diamond.parents == ((), (0,), (0,), (1, 2))
    assert diamond.total_work == 2 * 3 + 5 * 1 + 1 * 8 + 1 * 2


def test_a_folder_is_read_once_and_filtered_by_stages(trace_dir: Path):
    trace = open_alibaba_trace(trace_dir)
    assert open_alibaba_trace(str(trace_dir)) is trace
    assert [j.number for j in trace.jobs] == [0, 1, 2]
    assert [j.number for j in trace.select(2)] == [1, 2]
    with pytest.raises(IdlegateError, match=r"no job of .* has 5 or more stages .*most is 4"):
        trace.select(5)


def test_the_environment_names_the_folder(trace_dir: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(ENV_VAR, str(trace_dir))
    assert default_alibaba_dir() == trace_dir
    assert [j.number for j in AlibabaTrace().jobs] == [0, 1, 2]


def test_a_missing_folder_says_how_to_give_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(IdlegateError, match="does not exist; pass --alibaba-dir or set"):
        AlibabaTrace(tmp_path / "nowhere")
    (tmp_path / "a-file").write_text("")  # said as a file, not as missing
    with pytest.raises(IdlegateError, match="a-file is a file, not a directory; pass --alibaba"):
        AlibabaTrace(tmp_path / "a-file")
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr(alibaba, "default_data_dir", lambda env, name: None)
    with pytest.raises(IdlegateError, match="no Alibaba trace directory given; pass"):
        AlibabaTrace()


def test_a_folder_without_the_files_is_named(tmp_path: Path, trace_dir: Path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.md").write_text("not a job")
    with pytest.raises(IdlegateError, match=r"holds no Alibaba trace jobs .*adj_mat_N.npy"):
        AlibabaTrace(tmp_path / "empty")
    (trace_dir / "ins_dur1.npy").unlink()
    with pytest.raises(IdlegateError, match=r"has adj_mat_1.npy but no ins_dur1.npy"):
        AlibabaTrace(trace_dir)


@pytest.mark.parametrize(
    ("adj", "ins_dur", "message"),
    [
        ([[0, 1]], [[1, 1]], r"adj_mat_7.npy has shape \(1, 2\); a stage graph is a square"),
        ([[0, 1], [0, 0]], [[1, 1]], r"ins_dur7.npy has shape \(1, 2\).*expected \(2, 2\)"),
        ([[0, 2], [0, 0]], [[1, 1], [1, 1]], "must hold 0 or 1, with 0 on its diagonal"),
        ([[1]], [[1, 1]], "must hold 0 or 1, with 0 on its diagonal"),
        ([[0]], [[np.nan, 1]], "must hold finite numbers"),
        ([[0]], [[2.5, 1]], "stage 0 has instance_num 2.5; it must be a whole number"),
        ([[0]], [[0, 1]], "stage 0 has instance_num 0"),
        ([[0, 0], [0, 0]], [[1, 1], [1, -3]], "stage 1 has duration -3 s"),
        ([[0, 1], [1, 0]], [[1, 1], [1, 1]], "adj_mat_7.npy: the dependencies form a cycle"),
    ],
)
def test_a_malformed_job_is_named(tmp_path: Path, adj, ins_dur, message: str):
    write_job(tmp_path, 7, adj, ins_dur)
    with pytest.raises(SpecError, match=message):
        load_alibaba_job(tmp_path, 7)


def test_a_file_that_is_no_plain_array_is_refused(tmp_path: Path):
    np.save(tmp_path / "adj_mat_3.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(tmp_path / "ins_dur3.npy", np.ones((1, 2)))
    with pytest.raises(SpecError, match=r"adj_mat_3.npy is not a plain numeric .npy array"):
        load_alibaba_job(tmp_path, 3)
    (tmp_path / "adj_mat_3.npy").write_bytes(b"a,b\n1,2\n")
    with pytest.raises(SpecError, match=r"adj_mat_3.npy is not a plain numeric .npy array"):
        load_alibaba_job(tmp_path, 3)
    np.save(tmp_path / "adj_mat_3.npy", np.array([["x"]]))
    with pytest.raises(SpecError, match="must hold finite numbers"):
        load_alibaba_job(tmp_path, 3)


# ---------------------------------------------------------------------------------------
# the workload


def test_the_stream_draws_the_jobs_at_the_load(trace_dir: Path):
    w = build_workload("alibaba", 3, alibaba_dir=trace_dir, num_jobs=40, num_executors=4)
    assert w.name == "alibaba" and w.num_executors == 4 and len(w.jobs) == 40
    assert {j.name.rsplit("-", 1)[0] for j in w.jobs} == {"alibaba-0", "alibaba-1", "alibaba-2"}
    again = build_workload("alibaba", 3, alibaba_dir=trace_dir, num_jobs=40, num_executors=4)
    assert [(j.time, j.name) for j in again.jobs] == [(j.time, j.name) for j in w.jobs]
    mean_work = np.mean([40.0, 6 + 1 + 10, 6 + 5 + 8 + 2])
    assert workload_config("alibaba", alibaba_dir=trace_dir).mean_job_work() == mean_work
    # at half the load the same jobs arrive at twice the gaps
    half = build_workload(
        "alibaba", 3, alibaba_dir=trace_dir, num_jobs=40, num_executors=4, load=0.425
    )
    assert [j.name for j in half.jobs] == [j.name for j in w.jobs]
    np.testing.assert_allclose([j.time for j in half.jobs], [2 * j.time for j in w.jobs])
    gaps = np.diff([j.time for j in w.jobs])
    assert interarrival_for_load(mean_work, 0.85, 4) == pytest.approx(
        AlibabaConfig(alibaba_dir=str(trace_dir), num_executors=4).mean_interarrival(
            lambda: mean_work, 4
        )
    )
    assert gaps.min() >= 0


def test_min_stages_draws_only_dags(trace_dir: Path):
    w = build_workload("alibaba", 1, alibaba_dir=trace_dir, num_jobs=30, min_stages=2)
    assert {j.name.rsplit("-", 1)[0] for j in w.jobs} == {"alibaba-1", "alibaba-2"}


def test_tasks_spread_around_the_figure_with_its_mean(trace_dir: Path):
    w = build_workload("alibaba", 0, alibaba_dir=trace_dir, num_jobs=60, num_executors=3)
    assert w.fidelity.wave_durations and w.fidelity.moving_delay == 0
    result = simulate(w, make_scheduler("fifo"), seed=5, record_tasks=True)
    assert result.unfinished == 0
    ratios = np.array(
        [(t.end - t.start) / w.jobs[t.job].dag.durations[t.stage] for t in result.tasks]
    )
    assert 0.95 < ratios.mean() < 1.05  # mean 1: the work is the trace's
    assert 0.3 < np.log(ratios).std() < 0.4  # the default spread, 0.35
    exact = build_workload(
        "alibaba", 0, alibaba_dir=trace_dir, num_jobs=60, num_executors=3, duration_spread=0
    )
    assert not exact.fidelity.wave_durations and exact.jobs[0].durations is None


def test_a_child_starts_after_its_parents_in_the_traces_order(trace_dir: Path):
    w = build_workload("alibaba", 2, alibaba_dir=trace_dir, num_jobs=20, num_executors=3)
    result = simulate(w, make_scheduler("srpt"), seed=2, record_tasks=True)
    assert result.unfinished == 0
    ends: dict[tuple[int, int], float] = {}
    for t in result.tasks:
        ends[t.job, t.stage] = max(ends.get((t.job, t.stage), 0.0), t.end)
    for t in result.tasks:
        for p in w.jobs[t.job].dag.parents[t.stage]:
            assert t.start >= ends[t.job, p]


def test_the_cli_runs_it_and_names_a_missing_folder(trace_dir: Path, tmp_path: Path):
    runner = CliRunner()
    args = ["--alibaba-dir", str(trace_dir), "--jobs-count", "10", "-k", "3"]
    r = runner.invoke(app, ["simulate", "-w", "alibaba", "-s", "srpt", *args])
    assert r.exit_code == 0, r.output
    assert "srpt on alibaba" in r.stdout
    r = runner.invoke(
        app, ["compare", "-w", "alibaba", "--schedulers", "fifo", "--seeds", "1", *args]
    )
    assert r.exit_code == 0, r.output
    said = " ".join(r.stdout.split())  # (the sentence wraps at the console's width)
    assert f"Alibaba 2018 trace from {trace_dir.resolve()} (3 jobs" in said
    missing = tmp_path / "nowhere"
    r = runner.invoke(app, ["simulate", "-w", "alibaba", "--alibaba-dir", str(missing)])
    assert r.exit_code == 1
    assert f"Alibaba trace directory {missing} does not exist" in r.output
    assert "Traceback" not in r.output


# ---------------------------------------------------------------------------------------
# the real trace (skipped without ../shared/data/alibaba)


def test_the_real_trace_is_what_its_readme_says():
    trace = open_alibaba_trace(alibaba_trace())
    assert len(trace.jobs) == 1832
    assert len(trace.select(2)) == 1214
    assert max(j.dag.num_stages for j in trace.jobs) == 74
    assert max(j.total_tasks for j in trace.jobs) == 49_126
    assert int(np.median([j.total_tasks for j in trace.jobs])) == 5
    assert all(min(j.dag.durations) >= 1 for j in trace.jobs)


def test_a_real_stream_runs_to_the_end():
    w = build_workload("alibaba", 0, alibaba_dir=alibaba_trace(), num_jobs=30)
    assert w.num_executors == 100
    result = simulate(w, make_scheduler("srpt"), seed=0)
    assert result.unfinished == 0 and len(result.records) == 30
