"""Rigid jobs: the SWF reader, the swf and lublin workloads, requested vs actual run time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.lublin import LublinConfig, bucket_weights, lublin_jobs
from idlegate.sim.metrics import job_metrics, run_metrics
from idlegate.sim.swf import parse_swf, read_swf
from idlegate.sim.workloads import build_workload
from tests.helpers import need_shared

HEADER = "; Version: 2\n; MaxNodes: 8\n; MaxProcs: 16\n"


def _swf(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "t.swf"
    path.write_text(header + body)
    return path


def test_reader_fields_and_skips() -> None:
    lines = (HEADER + (
        "1 0 -1 100 4 -1 -1 -1 300 -1 1\n"  # requested 300 s, allocated 4
        "2 5 -1 50 -1 -1 -1 2 -1 -1 1\n"  # allocated missing: requested 2; requested time = run
        "3 7 -1 0 4 -1 -1 -1 10 -1 1\n"  # run time 0: skipped
        "4 8 -1 20 0 -1 -1 -1 10 -1 1\n"  # no processors: skipped
        "5 9 -1 20 32 -1 -1 -1 10 -1 1\n"  # wider than MaxProcs 16: skipped
        "6 9 -1 abc 3 -1 -1 -1 10\n"  # not a number: skipped
        "7 9 -1\n"  # too short: skipped
        "8 3 -1 30 16 -1 -1 -1 40 -1 1\n"  # earlier submit: sorted to second place
    )).splitlines()  # fmt: skip
    trace = parse_swf(lines)
    assert trace.max_procs == 16  # MaxProcs wins over MaxNodes
    assert [j.id for j in trace.jobs] == [1, 8, 2]
    first, _, second = trace.jobs
    assert (first.submit, first.run_time, first.processors, first.requested_time) == (
        0,
        100,
        4,
        300,
    )
    assert (second.processors, second.requested_time) == (2, 50)
    assert trace.skipped == {
        "run_time": 1,
        "processors": 1,
        "wider_than_machine": 1,
        "malformed": 2,
    }


def test_reader_machine_size_from_nodes_or_jobs() -> None:
    body = "1 0 -1 10 3 -1 -1 -1 -1\n"
    assert parse_swf(("; MaxNodes: 64\n" + body).splitlines()).machine_size == 64
    assert parse_swf(body.splitlines()).machine_size == 3


@pytest.mark.parametrize(
    ("header", "size"),
    [
        ("; MaxNodes: 338 (batch partition; 512 total)", 338),  # a real trace's header
        ("; MaxProcs: 1024.0", 1024),
        ("; MaxProcs: 1e3 processors", 1000),
        ("; MaxNodes: unknown", 3),  # no number: the widest job's size
        ("; MaxNodes: -5", 3),
    ],
)
def test_reader_takes_the_number_a_header_value_starts_with(header: str, size: int) -> None:
    body = "1 0 -1 10 3 -1 -1 -1 -1\n"
    assert parse_swf((header + "\n" + body).splitlines()).machine_size == size


def test_read_errors_are_sentences(tmp_path: Path) -> None:
    # The reader serves several commands (--trace, --file, a workload's path): it names none.
    with pytest.raises(IdlegateError, match="cannot read the SWF trace") as missing:
        read_swf(tmp_path / "missing.swf")
    assert "existing .swf file" in str(missing.value) and "--" not in str(missing.value)
    with pytest.raises(IdlegateError, match="no usable SWF job records"):
        read_swf(_swf(tmp_path, "garbage line\n"))


def test_swf_workload_window_is_seeded_and_relative(tmp_path: Path) -> None:
    body = "".join(f"{i} {100 + 10 * i} -1 {5 + i} {1 + i % 4} -1 -1 -1 -1\n" for i in range(1, 21))
    path = _swf(tmp_path, body)
    a = build_workload("swf", seed=3, path=path, num_jobs=5)
    assert a == build_workload("swf", seed=3, path=path, num_jobs=5)
    assert len(a.jobs) == 5 and a.jobs[0].time == 0.0
    assert [j.time for j in a.jobs] == [0, 10, 20, 30, 40]
    assert a.num_executors == 16
    starts = {build_workload("swf", seed=s, path=path, num_jobs=5).jobs[0].name for s in range(12)}
    assert len(starts) > 3  # different seeds, different windows
    fixed = build_workload("swf", path=path, num_jobs=3, start=2)
    assert [j.name for j in fixed.jobs] == ["job-3", "job-4", "job-5"]
    whole = build_workload("swf", path=path)
    assert len(whole.jobs) == 20
    with pytest.raises(IdlegateError, match="lower --jobs-count"):
        build_workload("swf", path=path, num_jobs=21)
    with pytest.raises(IdlegateError, match="raise num_executors"):
        build_workload("swf", path=path, num_executors=2)


def test_train_and_test_parts(tmp_path: Path) -> None:
    body = "".join(f"{i} {i} -1 10 1 -1 -1 -1 -1\n" for i in range(1, 11))
    path = _swf(tmp_path, body)
    train = build_workload("swf", path=path, part="train")
    test = build_workload("swf", path=path, part="test")
    assert [j.name for j in train.jobs] == ["job-1", "job-2"]
    assert len(test.jobs) == 8 and test.jobs[0].name == "job-3"


def test_requested_time_is_seen_actual_run_time_is_run(tmp_path: Path) -> None:
    """The stage's duration is the request; the simulator runs the recorded run time."""
    body = "1 0 -1 100 4 -1 -1 -1 300\n2 0 -1 50 16 -1 -1 -1 60\n"
    path = _swf(tmp_path, body)
    w = build_workload("swf", path=path)
    assert [j.dag.durations[0] for j in w.jobs] == [300, 60]
    assert all(j.dag.gang == (True,) for j in w.jobs)
    result = simulate(w, make_scheduler("fcfs"))
    jm = job_metrics(result)
    # job 1 (4 procs) runs 0-100; job 2 needs all 16, so it waits for job 1's real end
    assert jm.first_start.tolist() == [0, 100]
    assert jm.finish.tolist() == [100, 150]
    same = build_workload("swf", path=path, requested_time="run")
    assert [j.dag.durations[0] for j in same.jobs] == [100, 50]


def test_rigid_metrics_wait_and_bounded_slowdown(tmp_path: Path) -> None:
    body = "1 0 -1 100 16 -1 -1 -1 -1\n2 0 -1 5 16 -1 -1 -1 -1\n"
    m = run_metrics(
        simulate(build_workload("swf", path=_swf(tmp_path, body)), make_scheduler("fcfs"))
    )
    # job 1: wait 0, bsld 1; job 2: waits 100, runs 5 -> (100 + 5) / 10
    assert m.avg_wait == pytest.approx(50)
    assert m.avg_bsld == pytest.approx((1 + 10.5) / 2)
    assert m.max_bsld == pytest.approx(10.5)
    assert m.utilisation == pytest.approx(105 / 105)
    assert {"avg_wait", "avg_bsld", "max_bsld"} <= set(m.to_dict())


def test_lublin_is_seeded_and_fits_the_machine() -> None:
    a = build_workload("lublin", seed=4, num_jobs=300, num_executors=64)
    assert a == build_workload("lublin", seed=4, num_jobs=300, num_executors=64)
    assert a != build_workload("lublin", seed=5, num_jobs=300, num_executors=64)
    assert len(a.jobs) == 300 and a.jobs[0].time == 0.0
    assert max(j.dag.tasks[0] for j in a.jobs) <= 64
    first = build_workload("lublin", seed=4, num_jobs=100, num_executors=64)
    assert first.jobs == a.jobs[:100]  # a longer run extends the same sequence
    both = build_workload("lublin", seed=4, num_jobs=300, job_types="batch-interactive")
    assert len(both.jobs) == 300


@pytest.mark.parametrize("job_types", ["typeless", "batch-interactive"])
def test_lublin_fits_the_smallest_machine_it_takes_and_names_the_flag_below(
    job_types: str,
) -> None:
    w = build_workload("lublin", seed=0, num_jobs=2000, num_executors=12, job_types=job_types)
    assert max(j.dag.tasks[0] for j in w.jobs) <= 12
    r = CliRunner().invoke(app, ["simulate", "-w", "lublin", "-k", "4", "--jobs-count", "20"])
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output
    assert "-k/--executors: Input should be greater than or equal to 12 (given 4)" in r.stderr


def test_lublin_daily_cycle_weights() -> None:
    w = np.array(bucket_weights(8.1737, 3.9631))
    assert w.mean() == pytest.approx(1.0)
    assert w.argmax() in range(20, 32)  # busiest half hours around midday
    assert w[8] < 0.3  # early morning is quiet


def test_lublin_statistics_match_the_sample_file() -> None:
    """10,000 generated jobs against the 10,000-job sample of the model on 256 nodes."""
    sample = read_swf(need_shared("swf", "lublin_256.swf"))
    assert sample.max_procs == 256 and len(sample.jobs) == 10_000 and not sample.skipped

    def stats(nodes: np.ndarray, runs: np.ndarray, submits: np.ndarray) -> dict[str, float]:
        pow2 = (nodes & (nodes - 1)) == 0
        return {
            "mean_size": nodes.mean(),
            "median_size": float(np.median(nodes)),
            "mean_run": runs.mean(),
            "median_run": float(np.median(runs)),
            "serial": float(np.mean(nodes == 1)),
            "pow2": float(pow2.mean()),
            "mean_gap": float(np.diff(submits).mean()),
        }

    ref = stats(
        np.array([j.processors for j in sample.jobs]),
        np.array([j.run_time for j in sample.jobs]),
        np.array([j.submit for j in sample.jobs]),
    )
    jobs = lublin_jobs(LublinConfig(num_jobs=10_000), np.random.default_rng(2))
    got = stats(
        np.array([j.processors for j in jobs]),
        np.array([j.run_time for j in jobs]),
        np.array([j.submit for j in jobs]),
    )
    # heavy tails: means within 15 %, medians within 25 %, fractions within 3 points
    for key in ("mean_size", "mean_run", "mean_gap"):
        assert got[key] == pytest.approx(ref[key], rel=0.15), key
    for key in ("median_size", "median_run"):
        assert got[key] == pytest.approx(ref[key], rel=0.25), key
    for key in ("serial", "pow2"):
        assert got[key] == pytest.approx(ref[key], abs=0.03), key


def test_swf_sample_window_runs(tmp_path: Path) -> None:
    path = need_shared("swf", "lublin_256.swf")
    w = build_workload("swf", seed=1, path=path, num_jobs=256, requested_time="run")
    result = simulate(w, make_scheduler("fcfs"))
    assert result.unfinished == 0 and len(result.records) == 256


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_workload_help_lists_the_rigid_workloads(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    first = next(i for i, x in enumerate(lines) if "--workload" in x)
    rest = [x for x in lines[first + 1 :] if x.strip()]
    end = next((i for i, x in enumerate(rest) if x.lstrip().startswith("-")), len(rest))
    text = " ".join([lines[first], *rest[:end]])  # the option's wrapped help
    assert "lublin" in text and "swf" in text, text
