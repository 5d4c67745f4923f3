"""``idlegate lint`` on Argo manifests: the job each maps to, with its counts; refusals as
notes with their reason; broken DAGs as problems; templates found across files."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from idlegate.api.lint import lint_paths
from idlegate.cli import app
from tests.argo_data import EXAMPLES, need

runner = CliRunner()


def _write(path: Path, *docs: dict) -> str:
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def _workflow(tasks: list[dict], **meta: str) -> dict:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": meta or {"name": "w"},
        "spec": {
            "entrypoint": "main",
            "templates": [
                {"name": "main", "dag": {"tasks": tasks}},
                {"name": "pod", "container": {"image": "busybox"}},
            ],
        },
    }


def test_lint_prints_the_job_dag_diamond_maps_to():
    diamond = str(need(EXAMPLES / "dag-diamond.yaml"))
    r = runner.invoke(app, ["lint", diamond])
    assert r.exit_code == 0
    head, *stages = r.stdout.splitlines()
    assert "4 stages" in head and "4 edges" in head
    assert [line.split(":")[0].strip() for line in stages] == ["a", "b", "c", "d"]
    as_json = json.loads(runner.invoke(app, ["lint", "--json", diamond]).stdout)
    (job,) = as_json["argo"]
    assert job["counts"] == {"stages": 4, "edges": 4, "tasks": 4}
    assert [s["depends_on"] for s in job["stages"]] == [[], ["a"], ["a"], ["b", "c"]]
    assert {s["duration_source"] for s in job["stages"]} == {"prior"}


def test_a_refused_workflow_is_a_note_and_a_broken_dag_a_problem(tmp_path):
    daemon = _workflow([{"name": "a", "template": "pod"}], name="d")
    daemon["spec"]["templates"][1]["daemon"] = True
    broken = _workflow([{"name": "a", "template": "pod", "dependencies": ["nope"]}], name="b")
    report = lint_paths([_write(tmp_path / "w.yaml", daemon, broken)])
    assert [n.document for n in report.notes] == [0]
    assert "daemon" in report.notes[0].message
    assert [p.document for p in report.problems] == [1]
    assert not report.ok and report.argo_jobs == []


def test_a_template_ref_finds_a_workflow_template_in_another_file(tmp_path):
    library = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "WorkflowTemplate",
        "metadata": {"name": "lib"},
        "spec": {"templates": [{"name": "pod", "container": {"image": "busybox"}}]},
    }
    ref = {"name": "b", "templateRef": {"name": "lib", "template": "pod"}, "withItems": [1, 2, 3]}
    workflow = _workflow([{"name": "a", "template": "pod"}, {**ref, "depends": "a"}])
    report = lint_paths(
        [_write(tmp_path / "w.yaml", workflow), _write(tmp_path / "lib.yaml", library)]
    )
    assert report.ok
    (job,) = report.argo_jobs
    assert job.job.counts == {"stages": 2, "edges": 1, "tasks": 4}
    # the library itself runs nothing: a note, not a problem
    assert any("no-entrypoint" in n.message for n in report.notes)
