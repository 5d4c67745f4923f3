"""`idlegate advise` and the history it reads: simulated histories, the time split, the
report (every candidate, the recommendation, the files), and its errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.errors import IdlegateError
from idlegate.evaluation.advise import AdviseConfig, run_advise
from idlegate.evaluation.advise_report import advice_rows, to_markdown, write_advice
from idlegate.policy import DEFAULT_POLICY_PATH, make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.history import (
    history_facts,
    load_history,
    simulate_history,
    split_history,
    write_history,
)
from idlegate.sim.workloads import build_workload

FAST = ("fifo", "fair")


def _history(
    tmp_path: Path,
    jobs: int = 30,
    sigma: float = 0.3,
    name: str = "h.jsonl",
    policy: str = "fair",
) -> Path:
    """A k8s-batch history of `jobs` workflows run by fair on a pool of 6, recorded as run
    by `policy`."""
    w = build_workload("k8s-batch", 3, num_jobs=jobs, num_executors=6, task_sigma=sigma)
    return write_history(tmp_path / name, simulate_history(w, make_scheduler("fair"), 0, policy))


def test_simulated_history_records_what_the_simulator_ran(tmp_path: Path) -> None:
    w = build_workload("k8s-batch", 1, num_jobs=12, num_executors=4)
    ran = simulate(w, make_scheduler("srpt"), seed=2)
    history = simulate_history(w, make_scheduler("srpt"), 2, "srpt")
    assert [h.jct for h in history] == pytest.approx([r.jct for r in ran.records])
    for h, job in zip(history, w.jobs, strict=True):
        assert (h.name, h.arrival, h.outcome, h.policy, h.pool_size) == (
            job.name,
            job.time,
            "Succeeded",
            "srpt",
            4,
        )
        assert [len(m or ()) for m in h.measured] == list(job.dag.tasks)
    back = load_history(write_history(tmp_path / "h.yaml", history))
    assert [(b.arrival, b.jct, b.measured) for b in back] == [
        (h.arrival, h.jct, h.measured) for h in history
    ]


def test_a_history_without_duration_noise_replays_its_jcts(tmp_path: Path) -> None:
    path = _history(tmp_path, jobs=15, sigma=0.0)
    recorded = [h.jct for h in load_history(path)]
    replay = build_workload("file", 0, path=str(path), num_executors=6)
    again = simulate(replay, make_scheduler("fair"), seed=7)
    assert [r.jct for r in again.records] == pytest.approx(recorded)


def test_the_time_split_cuts_the_recorded_span(tmp_path: Path) -> None:
    history = load_history(_history(tmp_path))
    train, test = split_history(history, 0.6)
    times = [h.arrival or 0.0 for h in history]
    cut = min(times) + 0.6 * (max(times) - min(times))
    assert len(train) + len(test) == len(history)
    assert all((h.arrival or 0.0) < cut for h in train)
    assert all((h.arrival or 0.0) >= cut for h in test)
    with pytest.raises(IdlegateError, match="train part of the history is empty"):
        split_history(history[:1], 0.5)


def test_advise_reports_every_candidate_on_the_last_part(tmp_path: Path) -> None:
    path = _history(tmp_path)
    advice = run_advise(path, AdviseConfig(heuristics=FAST, seeds=2, train_fraction=0.5))
    _, test = split_history(load_history(path), 0.5)
    names = [r.name for r in advice.comparison.results]
    assert names == ["fifo", "fair", "learned:default", "default"]
    assert advice.cluster == "fair" and advice.comparison.baseline.name == "fair"
    # the report covers the test part only, replayed from its own first arrival
    start = min(h.arrival or 0.0 for h in test)
    assert advice.arrivals.tolist() == pytest.approx(sorted((h.arrival or 0) - start for h in test))
    assert all(r.jobs == len(test) for r in advice.comparison.baseline.runs)
    rows = advice_rows(advice)
    assert [r[0] for r in rows] == [*names, f"recorded ({len(test)} workflows)"]
    text = to_markdown(advice)
    assert advice.recommendation.text in text and text.count("Recommendation:") == 1
    assert advice.recommendation.best != "fair"
    written = write_advice(advice, tmp_path / "out")
    assert {p.name for p in written.values()} >= {"advise.md", "advise.json"}
    data = json.loads((tmp_path / "out" / "advise.json").read_text())
    assert data["reported_workflows"] == len(test)
    assert data["history"]["sha256"] == history_facts(path).sha256


def test_advise_cli_prints_and_writes_the_report(tmp_path: Path) -> None:
    path = _history(tmp_path, jobs=20)
    out = tmp_path / "report"
    result = CliRunner().invoke(
        app,
        ["advise", str(path), "--heuristics", "fifo", "--seeds", "2", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert any("fifo" in line for line in table) and "Recommendation:" in result.stdout
    files = {p.name for p in out.iterdir()}
    assert {"advise.md", "advise.json"} <= files
    plots = {"jct_cdf.png", "jct_by_hour.png"}
    assert plots <= files or "skipped" in result.stderr  # plots need matplotlib


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        ("[]\n", [], "holds no workflow"),
        ("- stages: [{name: a, tasks: 1, taskDurationSeconds: 5}]\n", [], "has no arrival"),
        (
            "- {arrival: 0, stages: [{name: a, tasks: 1, taskDurationSeconds: 5}]}\n"
            "- {arrival: 9, stages: [{name: a, tasks: 1, taskDurationSeconds: 5}]}\n",
            [],
            "records no poolSize",
        ),
        (
            "- {arrival: 0, poolSize: 2, stages: [{name: a, tasks: 1, taskDurationSeconds: 5}]}\n"
            "- {arrival: 9, poolSize: 2, stages: [{name: a, tasks: 1, taskDurationSeconds: 5}]}\n",
            ["--policy", "missing.onnx"],
            "missing.onnx does not exist",
        ),
    ],
)
def test_advise_errors_are_sentences(
    tmp_path: Path, text: str, args: list[str], message: str
) -> None:
    path = tmp_path / "h.yaml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["advise", str(path), "--seeds", "2", *args])
    assert result.exit_code == 1
    assert message in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda d: d / "none.yaml", "does not exist"),
        (lambda d: d, "is not a file"),
        (lambda d: _write(d / "h.yaml", ""), "is empty"),
        (lambda d: _write(d / "h.jsonl", "\n  \n"), "is empty"),
    ],
    ids=["missing", "directory", "empty", "blank"],
)
def test_the_history_file_is_checked_before_the_options(tmp_path: Path, make, said: str) -> None:
    path = make(tmp_path)
    result = CliRunner().invoke(app, ["advise", "--seeds", "1", str(path)])  # --seeds 1: bad
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and said in lines[0], lines
    assert str(path) in lines[0] and "--seeds" not in lines[0]
    with pytest.raises(IdlegateError, match=said):
        run_advise(path, AdviseConfig())


def test_an_unreadable_history_file_is_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "h.yaml", "- {}\n")

    def refuse(self: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "open", refuse)  # (as root, chmod would not stop the read)
    result = CliRunner().invoke(app, ["advise", str(path), "--seeds", "1"])
    assert result.exit_code == 1
    assert f"cannot read the history file {path} (Permission denied)" in result.stderr


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_recorded_learned_policy_is_replayed_or_its_missing_file_named(tmp_path: Path) -> None:
    model = tmp_path / "models" / "model.onnx"
    model.parent.mkdir()
    shutil.copyfile(DEFAULT_POLICY_PATH, model)
    config = AdviseConfig(heuristics=("fifo",), seeds=2)
    path = _history(tmp_path, jobs=12, policy=f"learned:{model}")
    advice = run_advise(path, config)
    assert (advice.cluster, advice.cluster_source) == (f"learned:{model}", "recorded")
    model.unlink()  # the history of another machine: one sentence, before any run
    result = CliRunner().invoke(app, ["advise", str(path), "--heuristics", "fifo", "--seeds", "2"])
    assert result.exit_code == 1
    [line] = [x for x in result.stderr.splitlines() if x.startswith("Error: ")]
    assert f"model file {model} is not on this machine" in line and "--cluster-policy" in line
    assert "Recommendation" not in result.stdout
    given = run_advise(path, AdviseConfig(heuristics=("fifo",), seeds=2, cluster_policy="fair"))
    assert (given.cluster, given.cluster_source) == ("fair", "given")


def test_an_old_history_naming_a_model_file_asks_for_the_cluster_policy(tmp_path: Path) -> None:
    path = _history(tmp_path, jobs=12, policy="model")  # what the operator recorded before
    assert {w.policy for w in load_history(path)} == {"model"}  # still readable
    with pytest.raises(IdlegateError, match=r"records policy 'model', .* --cluster-policy SPEC"):
        run_advise(path, AdviseConfig(heuristics=("fifo",), seeds=2))


def test_trained_on_reported_data_is_flagged(tmp_path: Path) -> None:
    """The report says when the trained policy saw what it reports on (here: no metadata)."""
    pytest.importorskip("torch")
    from idlegate.policy.model import PolicyNet
    from idlegate.policy.model_config import ModelConfig
    from idlegate.policy.onnx_export import export_model

    onnx = tmp_path / "p.onnx"
    export_model(PolicyNet(ModelConfig()), onnx)
    path = _history(tmp_path, jobs=16)
    advice = run_advise(path, AdviseConfig(heuristics=("fifo",), seeds=2, policy=onnx))
    assert "trained" in [r.name for r in advice.comparison.results]
    assert any("names no training history" in n for n in advice.notes)
    assert np.isfinite(advice.comparison["trained"].summary["avg_jct"].mean)


def test_history_simulate_cli_writes_a_replayable_history(tmp_path: Path) -> None:
    out = tmp_path / "h.jsonl"
    args = ["history", "simulate", "-w", "k8s-batch", "-s", "srpt", "--jobs-count", "9"]
    result = CliRunner().invoke(app, [*args, "-k", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    history = load_history(out)
    assert len(history) == 9
    assert {(h.policy, h.pool_size, h.outcome) for h in history} == {("srpt", 3, "Succeeded")}
    assert all(h.jct is not None and h.jct > 0 for h in history)


def test_cluster_preset_needs_a_history() -> None:
    from idlegate.training.config import load_config

    with pytest.raises(IdlegateError, match="give --history HISTORY"):
        load_config(None, "cluster")


def test_train_on_a_history_names_it_in_the_onnx_metadata(tmp_path: Path) -> None:
    """A tiny run of the cluster preset: train part as workload and validation, metadata."""
    pytest.importorskip("torch")
    from idlegate.policy.onnx_runtime import open_session
    from idlegate.training.config import load_config
    from idlegate.training.history import history_settings, history_source
    from idlegate.training.reinforce import train

    path = _history(tmp_path, jobs=16)
    tiny = {
        "iterations": 1,
        "rollouts_per_sequence": 2,
        "workers": 1,
        "validation": {"seeds": [1_000_000], "every": 1, "reference_schedulers": ["fifo"]},
        "bc": {"heuristic": "srpt", "episodes": 1, "epochs": 1, "dagger_rounds": 0},
        "out_dir": str(tmp_path / "run"),
    }
    settings = history_settings(history_source(path, 0.6))
    config = load_config(None, "cluster", **settings, **tiny)
    assert config.validation_workload == config.workload
    assert config.workload.options["part"] == "train"
    result = train(config)
    _, meta = open_session(
        Path(result.out_dir) / "policy.onnx", threads=1, what="policy", remedy="-"
    )
    named = json.loads(meta["idlegate.history"])
    facts = history_facts(path)
    assert named["sha256"] == facts.sha256
    assert (named["workflows"], named["train_fraction"], named["pool_size"]) == (16, 0.6, 6)
    assert named["span_seconds"] == pytest.approx(facts.span_seconds)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "cluster"], "give --history HISTORY"),
        (["--preset", "cluster", "--history", "H", "--workload", "k8s-batch"], "drop --workload"),
    ],
)
def test_train_history_errors_are_sentences(tmp_path: Path, args: list[str], message: str) -> None:
    path = _history(tmp_path, jobs=8)
    args = [str(path) if a == "H" else a for a in args]
    result = CliRunner().invoke(app, ["train", *args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 1
    assert message in result.stderr and "Traceback" not in result.output


def test_advise_replays_the_history_in_the_queues_given(tmp_path: Path) -> None:
    path = _history(tmp_path, jobs=12)
    queues = tmp_path / "queues.yaml"
    queues.write_text("- {name: default, nominal: {pods: 4}}\n- {name: ml, nominal: {pods: 2}}\n")
    config = AdviseConfig(heuristics=FAST, seeds=2, train_fraction=0, queues=queues)
    advice = run_advise(path, config)
    for result in advice.comparison.results:
        (first, *_) = result.queues_per_seed
        assert [q["queue"] for q in first["queues"]] == ["default", "ml"]
        assert first["queues"][0]["workflows"] == 12  # (its records name no queue)
    plain = run_advise(path, AdviseConfig(heuristics=FAST, seeds=2, train_fraction=0))
    assert all(not r.queues_per_seed for r in plain.comparison.results)
