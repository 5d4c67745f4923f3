"""`idlegate train` and `idlegate export-onnx` from the command line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")

from idlegate.cli import app

runner = CliRunner()

TINY = """\
seed: 3
workload: {name: synthetic, options: {num_executors: 2, num_jobs: 12, tasks_per_job: 2}}
validation: {seeds: [1000000], every: 1, reference_schedulers: [fifo]}
iterations: 1
rollouts_per_sequence: 2
curriculum: {initial_mean_seconds: 100}
bc: {episodes: 1, epochs: 1}
"""


def test_train_then_export(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    out = tmp_path / "run"
    r = runner.invoke(app, ["train", "--config", str(cfg), "--out", str(out), "--workers", "1"])
    assert r.exit_code == 0, r.output
    assert "validation avg JCT: learned" in r.stdout and "fifo" in r.stdout
    for name in ("checkpoint.pt", "best.pt", "final.pt", "train_log.csv", "summary.json"):
        assert (out / name).is_file(), name
    again = runner.invoke(app, ["train", "--config", str(cfg), "--out", str(out)])
    assert again.exit_code == 1
    assert "already holds a training run; pass --resume" in again.output

    onnx = tmp_path / "p.onnx"
    r = runner.invoke(app, ["export-onnx", str(out / "best.pt"), str(onnx)])
    assert r.exit_code == 0, r.output
    assert onnx.is_file() and "feature schema" in r.stdout
    from idlegate.policy.onnx_runtime import OnnxPolicy

    assert OnnxPolicy(onnx).metadata["idlegate.training_config_hash"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["train", "--preset", "huge"], "unknown preset 'huge'"),
        (["train", "--config", "missing.yaml"], "does not exist"),
        (["export-onnx", "missing.pt", "out.onnx"], "does not exist"),
    ],
)
def test_user_errors_are_one_line(tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, args)
    assert r.exit_code == 1
    assert r.output.startswith("Error: ") and needle in r.output
    assert "Traceback" not in r.output


def test_bad_yaml_setting_names_the_field(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("entropy: {weight: -1}\n")
    r = runner.invoke(app, ["train", "--config", str(cfg)])
    assert r.exit_code == 1
    assert "entropy.weight: Input should be greater than or equal to 0" in r.output


def test_history_without_the_cluster_preset_is_refused(tmp_path):
    from typer.testing import CliRunner

    from idlegate.cli import app
    from idlegate.policy import make_scheduler
    from idlegate.sim.history import simulate_history, write_history
    from idlegate.sim.workloads import build_workload

    w = build_workload("k8s-batch", 0, num_jobs=20)
    path = write_history(
        tmp_path / "h.jsonl", simulate_history(w, make_scheduler("fair"), 0, "fair")
    )
    result = CliRunner().invoke(
        app, ["train", "--history", str(path), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 1, result.output
    assert "--history trains with --preset cluster" in result.output
