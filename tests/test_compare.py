"""The comparison library: common random numbers, paired summaries, reports."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rich.console import Console

from idlegate.errors import IdlegateError
from idlegate.evaluation.compare_report import table_headers, table_rows, to_markdown
from idlegate.evaluation.comparison import (
    RIGID_SUMMARY_FIELDS,
    SUMMARY_FIELDS,
    CompareConfig,
    WorkloadOptions,
    build,
    is_rigid,
    run_comparison,
    run_one,
)
from idlegate.evaluation.console import render_comparison_table
from idlegate.evaluation.files import write_text
from idlegate.sim.metrics import paired_relative_change

OPTS = WorkloadOptions(num_jobs=25, num_executors=3)


@pytest.fixture(scope="module")
def cmp():
    calls: list[tuple[int, int, str, int]] = []
    config = CompareConfig(
        workload="synthetic",
        schedulers=("fifo", "sjf-cp", "fair"),
        seeds=3,
        first_seed=5,
        options=OPTS,
    )
    result = run_comparison(config, lambda *a: calls.append(a))
    return result, calls


def test_progress_is_called_once_per_run(cmp):
    _, calls = cmp
    assert [c[0] for c in calls] == list(range(1, 10))
    assert {c[1] for c in calls} == {9}
    assert sorted((c[2], c[3]) for c in calls) == sorted(
        (s, seed) for s in ("fifo", "sjf-cp", "fair") for seed in (5, 6, 7)
    )


def test_runs_share_arrivals_and_match_single_runs(cmp):
    result, _ = cmp
    for name in ("fifo", "sjf-cp"):
        r = result[name]
        assert [m.seed for m in r.runs] == [5, 6, 7]
        single = run_one("synthetic", name, 6, OPTS)
        assert single.metrics == r.runs[1]
        np.testing.assert_array_equal(single.jobs.jct, r.jct[1])
    # common random numbers: with one-task jobs every scheduler finishes the same work
    w = build("synthetic", 5, OPTS)
    lb = result["fifo"].runs[0].lb_avg_jct
    assert all(result[s].runs[0].lb_avg_jct == lb for s in ("sjf-cp", "fair"))
    assert len(w.jobs) == 25


def test_baseline_defaults_to_fair_and_change_is_paired(cmp):
    result, _ = cmp
    assert result.config.baseline_name == "fair"
    assert result.baseline.is_baseline and result.baseline.vs_baseline.mean == 0
    sjf = result["sjf-cp"]
    expected = paired_relative_change(
        [m.avg_jct for m in sjf.runs], [m.avg_jct for m in result["fair"].runs]
    )
    assert sjf.vs_baseline == expected
    assert sjf.summary["avg_jct"].mean == pytest.approx(np.mean([m.avg_jct for m in sjf.runs]))
    assert result.best.name in ("fifo", "sjf-cp", "fair")


def test_reports_render(cmp):
    result, _ = cmp
    data = result.to_dict()
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    md = to_markdown(result)
    assert md.count("\n| ") == 4 and "baseline" in md
    console = Console(width=150, record=True)
    console.print(render_comparison_table(result))
    text = console.export_text()
    # each header over two lines (the table fits 100 columns: test_console)
    assert "avg JCT vs" in text and "fair" in text and "sjf-cp" in text and "±" in text


def test_config_validation():
    with pytest.raises(IdlegateError, match="baseline"):
        CompareConfig(workload="synthetic", schedulers=("fifo",), baseline="fair")
    with pytest.raises(IdlegateError, match="twice"):
        CompareConfig(workload="synthetic", schedulers=("fifo", "fifo"))
    with pytest.raises(IdlegateError, match="seed"):
        CompareConfig(workload="synthetic", schedulers=("fifo",), seeds=0)
    with pytest.raises(IdlegateError, match="jobs"):
        CompareConfig(workload="synthetic", schedulers=("fifo",), jobs=0)
    assert CompareConfig(workload="synthetic", schedulers="fifo,sjf").baseline_name == "fifo"


def test_workload_options_pass_only_given():
    assert WorkloadOptions().to_kwargs() == {}
    assert WorkloadOptions(load=0.5, extra={"init": 0}).to_kwargs() == {"load": 0.5, "init": 0}
    with pytest.raises(IdlegateError, match="--load and -o load both give the workload"):
        WorkloadOptions(load=0.5, extra={"load": 0.6}).to_kwargs()


def test_write_failures_are_sentences_naming_the_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(IdlegateError, match=r"cannot create directory .*file"):
        write_text(blocker / "report.md", "text")
    (tmp_path / "taken").mkdir()
    with pytest.raises(IdlegateError, match=r"cannot write .*taken"):
        write_text(tmp_path / "taken", "text")  # a directory is in the way
    assert write_text(tmp_path / "a" / "b.md", "ok").read_text() == "ok"


DAG_HEADERS = [
    "scheduler",
    "avg JCT (s)",
    "p95 JCT (s)",
    "makespan (s)",
    "utilisation (%)",
    "overhead (%)",
    "JCT / bound",
    "avg JCT vs fair",
]


def test_dag_tables_keep_their_columns(cmp):
    result, _ = cmp
    assert not result.rigid and not is_rigid(build("synthetic", 5, OPTS))
    assert table_headers(result) == DAG_HEADERS
    assert set(result["fifo"].summary) == set(SUMMARY_FIELDS)
    data = result.to_dict()
    assert data["rigid"] is False
    assert "avg_bsld_vs_baseline" not in data["schedulers"]["fifo"]


@pytest.fixture(scope="module")
def rigid_cmp():
    config = CompareConfig(
        workload="lublin",
        schedulers=("fcfs", "easy:fcfs", "reject:sjf"),
        seeds=2,
        first_seed=1,
        options=WorkloadOptions(num_jobs=60),
    )
    return run_comparison(config)


def test_rigid_tables_show_wait_and_bounded_slowdown(rigid_cmp):
    result = rigid_cmp
    assert result.rigid and is_rigid(build("lublin", 1, WorkloadOptions(num_jobs=60)))
    headers = table_headers(result)
    assert headers == [
        "scheduler",
        "avg wait (s)",
        "avg bsld",
        "max bsld",
        "utilisation (%)",
        "avg JCT (s)",
        "makespan (s)",
        "avg bsld vs fcfs",
    ]
    easy = result["easy:fcfs"]
    assert set(easy.summary) == set(RIGID_SUMMARY_FIELDS)
    bsld = [m.avg_bsld for m in easy.runs]
    assert easy.summary["avg_bsld"].mean == pytest.approx(np.mean(bsld))
    assert easy.summary["max_bsld"].mean == pytest.approx(np.mean([m.max_bsld for m in easy.runs]))
    assert easy.summary["avg_wait"].mean == pytest.approx(np.mean([m.avg_wait for m in easy.runs]))
    fcfs_bsld = [m.avg_bsld for m in result["fcfs"].runs]
    assert easy.bsld_vs_baseline == paired_relative_change(bsld, fcfs_bsld)
    rows = {cells[0]: dict(zip(headers, cells, strict=True)) for cells in table_rows(result)}
    assert rows["fcfs"]["avg bsld vs fcfs"] == "baseline"
    change = rows["easy:fcfs"]["avg bsld vs fcfs"].lstrip("+")
    assert change.startswith(f"{easy.bsld_vs_baseline.mean * 100:.1f} %")
    assert rows["easy:fcfs"]["avg bsld"].startswith(f"{np.mean(bsld):,.1f} ±")


def test_rigid_reports_carry_the_rigid_fields(rigid_cmp, tmp_path):
    data = rigid_cmp.to_dict(include_jct=False)
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert data["rigid"] is True
    reject = data["schedulers"]["reject:sjf"]
    assert {"avg_wait", "avg_bsld", "max_bsld", "utilisation"} <= set(reject["summary"])
    assert reject["avg_bsld_vs_baseline"]["n"] == 2
    md = to_markdown(rigid_cmp)
    assert "| avg wait (s) | avg bsld | max bsld | utilisation (%) |" in md
    assert "bsld = max(1, (wait + run) / max(run, 10))" in md
    assert "overhead (%)" not in md
