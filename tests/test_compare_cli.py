"""`idlegate compare`: --json, the measured setting in every output, missing policy paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import CompareConfig, WorkloadOptions, build
from idlegate.evaluation.setting import SOURCES, describe_setting, jobs_source
from idlegate.policy import make_scheduler
from idlegate.sim.workloads import (
    CATALOGUE,
    build_workload,
    interarrival_for_load,
    mean_job_work,
    workload_config,
)
from tests.helpers import alibaba_trace, need_shared, tpch_traces

runner = CliRunner()

SMALL = ["--workload", "synthetic", "--jobs-count", "30", "--schedulers", "fifo,fair"]
RIGID = ["--schedulers", "fcfs,easy:fcfs,strict:sjf,easy:sjf,reject:sjf", "--seeds", "2"]
RIGID_HEADERS = ("avg wait (s)", "avg bsld", "max bsld", "utilisation (%)", "avg bsld vs fcfs")


def _tpch_dir() -> Path:
    return tpch_traces()


def test_compare_json_is_one_document_with_the_setting(tmp_path):
    out = tmp_path / "cmp"
    r = runner.invoke(
        app, ["compare", *SMALL, "--seeds", "2", "--load", "0.6", "--json", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)  # nothing but the JSON on stdout
    assert list(data["schedulers"]) == ["fifo", "fair"]
    assert "jct" not in data["schedulers"]["fair"]  # per-job arrays only in the file
    setting = data["setting"]
    assert setting["num_executors"] == 4 and setting["jobs"] == 30
    assert setting["load_given"] is True and setting["offered_load"] == pytest.approx(0.6)
    cfg = workload_config("synthetic", load=0.6)
    expected_gap = interarrival_for_load(mean_job_work(cfg), 0.6, 4)
    assert setting["mean_interarrival"] == pytest.approx(expected_gap)
    assert setting["tpch_sizes"] is None and "generated" in setting["source"]
    assert f"wrote {out / 'compare.json'}" in r.stderr
    on_disk = json.loads((out / "compare.json").read_text())
    assert on_disk["setting"] == setting
    md = (out / "compare.md").read_text()
    assert "30 jobs per seed" in md and "chosen for offered load 0.6" in md


def test_compare_table_says_what_it_measured():
    r = runner.invoke(app, ["compare", *SMALL, "--seeds", "1", "--interarrival", "40"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())
    assert "4 executors, 30 jobs per seed, mean interarrival 40 s" in text
    assert "jobs: two-type jobs (generated, no trace files)" in text
    # the header "overhead (%)" over two lines, right-aligned as its column
    lines = r.stdout.splitlines()
    top = next(i for i, line in enumerate(lines) if "overhead" in line)
    end = lines[top].index("overhead") + len("overhead")
    assert lines[top + 1][end - 3 : end] == "(%)"


def test_tpch_setting_names_the_sizes_and_the_directory():
    tpch = _tpch_dir()
    options = WorkloadOptions(
        num_executors=10, tpch_dir=tpch, extra={"num_stream": 3, "sizes": "2g,10g"}
    )
    config = CompareConfig(workload="tpch", schedulers=("fair",), seeds=1, options=options)
    built = build(config.workload, 0, options)
    setting = describe_setting("tpch", options.to_kwargs(), built)
    assert setting.tpch_sizes == ("2g", "10g")
    assert setting.tpch_dir == str(tpch.resolve())
    assert setting.mean_interarrival == 25.0 and setting.load_given is False
    assert setting.jobs == 4 and str(tpch.resolve()) in setting.source
    every = describe_setting("tpch", {"tpch_dir": str(tpch), "num_stream": 3}, built)
    assert len(every.tpch_sizes) > 2  # no sizes given: every size folder found


def test_a_missing_learned_policy_names_the_resolved_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(IdlegateError) as err:
        make_scheduler("learned:models/p.onnx")
    assert str(tmp_path / "models" / "p.onnx") in str(err.value)
    r = runner.invoke(app, ["compare", *SMALL, "--seeds", "1", "--schedulers", "learned:x.onnx"])
    assert r.exit_code == 1 and str(tmp_path / "x.onnx") in r.stderr


def _check_rigid_outputs(stdout: str, out: Path) -> None:
    text = " ".join(stdout.split())
    assert "bsld = max(1, (wait + run) / max(run, 10))" in text
    md = (out / "compare.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| scheduler"))
    assert all(f"| {h} |" in header for h in RIGID_HEADERS) and "overhead" not in header
    data = json.loads((out / "compare.json").read_text())
    assert data["rigid"] is True and list(data["schedulers"])[-1] == "reject:sjf"
    for result in data["schedulers"].values():
        assert result["summary"]["avg_bsld"]["mean"] >= 1
        assert result["summary"]["max_bsld"]["mean"] >= result["summary"]["avg_bsld"]["mean"]
        assert result["summary"]["avg_wait"]["mean"] >= 0
        assert 0 < result["summary"]["utilisation"]["mean"] <= 1


def test_compare_lublin_shows_the_rigid_metrics(tmp_path):
    out = tmp_path / "lublin"
    args = ["compare", "--workload", "lublin", *RIGID, "--jobs-count", "64", "--out", str(out)]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    _check_rigid_outputs(r.stdout, out)


def test_compare_swf_trace_shows_the_rigid_metrics(tmp_path):
    trace = need_shared("swf", "lublin_256.swf")
    out = tmp_path / "swf"
    args = ["compare", "--workload", "swf", "--file", str(trace), *RIGID, "--jobs-count", "64"]
    r = runner.invoke(app, [*args, "--out", str(out)])
    assert r.exit_code == 0, r.output
    _check_rigid_outputs(r.stdout, out)


SHARED = ["compare", "-w", "shared", "--schedulers", "fair", "-o", "hours=0.2"]


def test_a_workload_sized_by_hours_says_the_jobs_each_seed_ran():
    """`shared` is sized by its hours, not a job count: every seed draws a number of its
    own, and the caption says their range and mean, and the hours, not the first seed's
    count as every seed's."""
    opts = {"hours": 0.2, "heavy_source": "generated"}
    counts = [len(build_workload("shared", seed, **opts).jobs) for seed in range(3)]
    assert len(set(counts)) > 1  # (else the test says nothing)
    args = [*SHARED, "-o", "heavy_source=generated", "--seeds", "3"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())
    mean = sum(counts) / 3
    said = f"{min(counts)}–{max(counts)} jobs per seed (mean {mean:.1f}) arriving over 0.2 h"
    assert f"96 executors, {said}, 3 seed(s)" in text
    assert "jobs: heavy team: heavy-tailed DAGs (generated, no trace files); science" in text
    setting = json.loads(runner.invoke(app, [*args, "--json"]).stdout)["setting"]
    assert setting["jobs_per_seed"] == counts and setting["jobs"] == counts[0]
    assert setting["hours"] == 0.2


def test_shared_says_its_heavy_jobs_come_from_the_trace():
    trace = alibaba_trace()
    args = [*SHARED, "--seeds", "1", "-o", f"alibaba_dir={trace}", "--json"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    source = json.loads(r.stdout)["setting"]["source"]
    assert source.startswith(f"heavy team: Alibaba 2018 trace from {trace.resolve()}")


def test_every_workload_says_where_its_jobs_come_from():
    """No workload of the catalogue falls back to a bare "generated": each has its phrase,
    a trace's naming the trace."""
    assert {k.config for k in CATALOGUE} <= set(SOURCES)
    teams = jobs_source(workload_config("teams", base="k8s-batch"))
    assert teams == "3 teams' streams of k8s-batch: pod pipelines (generated, no trace files)"
    shift = jobs_source(workload_config("shift"))
    assert shift.startswith("phase 1, tpch-like: TPC-H-like DAGs") and "phase 2, k8s-batch" in shift
    swf = jobs_source(workload_config("swf", path="x.swf"))
    assert swf == f"rigid jobs of the SWF trace {Path('x.swf').resolve()}"
