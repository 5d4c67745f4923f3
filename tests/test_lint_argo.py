"""``idlegate lint`` on Argo manifests: the job each maps to, with its counts; refusals as
notes with their reason; broken DAGs as problems; templates found across files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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
    head, *stages, summary = r.stdout.splitlines()
    assert summary.startswith("1 Argo workflow(s) in 1 file(s)")
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


def _lint(path: str) -> tuple[int, dict]:
    """Exit code and JSON report of `idlegate lint --json PATH`."""
    r = runner.invoke(app, ["lint", "--json", path])
    return r.exit_code, json.loads(r.stdout)


def test_an_entrypoint_naming_no_template_is_a_problem_naming_the_templates(tmp_path):
    typo = _workflow([{"name": "a", "template": "pod"}])
    typo["spec"]["entrypoint"] = "mian"
    code, report = _lint(_write(tmp_path / "w.yaml", typo))
    assert code == 1 and report["invalid"] == 1 and report["notes"] == []
    (problem,) = report["problems"]
    assert problem["reason"] == "missing-template"
    assert all(f"'{name}'" in problem["message"] for name in ("mian", "main", "pod"))


def test_a_task_calling_a_template_that_is_not_defined_is_a_problem(tmp_path):
    typo = _workflow([{"name": "a", "template": "podd"}])
    code, report = _lint(_write(tmp_path / "w.yaml", typo))
    assert code == 1
    assert [p["reason"] for p in report["problems"]] == ["missing-template"]


def _malformed() -> dict[str, dict]:
    """Workflows whose dag, steps or templates have a shape Argo refuses, by what is wrong."""
    mapping_tasks = _workflow([])
    mapping_tasks["spec"]["templates"][0]["dag"]["tasks"] = {"a": {"template": "pod"}}
    flat_steps = _workflow([])
    flat_steps["spec"]["templates"][0] = {
        "name": "main",
        "steps": [{"name": "a", "template": "pod"}],
    }
    mapping_steps = _workflow([])
    mapping_steps["spec"]["templates"][0] = {"name": "main", "steps": {"a": {"template": "pod"}}}
    dag_list = _workflow([])
    dag_list["spec"]["templates"][0]["dag"] = [{"name": "a", "template": "pod"}]
    mapping_templates = _workflow([])
    mapping_templates["spec"]["templates"] = {"main": {"container": {"image": "busybox"}}}
    return {
        "dag.tasks a mapping": mapping_tasks,
        "steps not a list of lists": flat_steps,
        "steps a mapping": mapping_steps,
        "dag a list": dag_list,
        "templates a mapping": mapping_templates,
    }


@pytest.mark.parametrize("case", list(_malformed()))
def test_a_malformed_dag_or_steps_is_a_problem_not_a_workflow_without_pods(tmp_path, case):
    code, report = _lint(_write(tmp_path / "w.yaml", _malformed()[case]))
    assert code == 1 and report["invalid"] == 1 and report["notes"] == []
    assert [p["reason"] for p in report["problems"]] == ["invalid"]


def test_a_cycle_names_its_tasks(tmp_path):
    tasks = [
        {"name": "extract", "template": "pod", "dependencies": ["load"]},
        {"name": "load", "template": "pod", "dependencies": ["extract"]},
        {"name": "report", "template": "pod"},
    ]
    code, report = _lint(_write(tmp_path / "w.yaml", _workflow(tasks)))
    assert code == 1
    (problem,) = report["problems"]
    assert problem["reason"] == "bad-dag"
    assert "'extract'" not in problem["message"]  # named in the cycle, not as one task
    cycle = problem["message"].rsplit(":", 1)[-1]
    assert "extract" in cycle and "load" in cycle and "report" not in cycle


def test_the_summary_counts_argo_workflows(tmp_path):
    mapped = _workflow([{"name": "a", "template": "pod"}], name="ok")
    daemon = _workflow([{"name": "a", "template": "pod"}], name="d")
    daemon["spec"]["templates"][1]["daemon"] = True
    broken = _workflow([{"name": "a", "template": "pod", "dependencies": ["x"]}], name="b")
    report = lint_paths([_write(tmp_path / "w.yaml", mapped, daemon, broken)])
    assert (report.argo_workflows, len(report.argo_jobs), report.invalid) == (3, 1, 1)
    assert [n.reason for n in report.notes] == ["daemon"]
    assert report.to_json()["argo_workflows"] == 3
    summary = report.summary()
    assert "DagWorkflow" not in summary and "skipped" not in summary  # the daemon was checked
    assert "3 Argo workflow" in summary
