"""`idlegate lint`: DagWorkflow manifests checked offline with the operator's admission checks.

One problem per field (file, document, List item, field path), exit 1 when anything is
invalid, notes for documents of other kinds, syntax errors with their line and column,
stdin, directories, --json; and the command needs only the base package (no kopf,
kubernetes or torch). Problems are compared by where they are and, where the operator
checks them, with the operator's own message, never with a sentence written here.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from idlegate.api.kinds import CRON_KIND, KIND
from idlegate.api.lint import LintReport, admission_errors, lint_paths, split_message
from idlegate.api.status import MAX_MEASURED
from idlegate.api.template import check_templates
from idlegate.cli import app
from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow
from idlegate.sim.workloads import build_workload
from tests.helpers import wide_workflow

runner = CliRunner()


def workflow(name: str = "wf", stages: list[dict[str, Any]] | None = None, **top: Any) -> dict:
    """A DagWorkflow manifest; by default a valid two-stage chain."""
    return {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "DagWorkflow",
        "metadata": {"name": name},
        "spec": {"stages": stages if stages is not None else [stage("a"), stage("b", "a")]},
        **top,
    }


def stage(name: str, *deps: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "tasks": 2, "taskDurationSeconds": 3, "dependsOn": list(deps), **fields}


def write(path: Path, *docs: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def lint(*args: str, stdin: str | None = None) -> tuple[int, list[str], str]:
    """Exit code, the report's lines (problems, mapped jobs) and what ends it (its notes and
    summary, on stdout too; or the command's error, on stderr) of `idlegate lint ARGS`."""
    r = runner.invoke(app, ["lint", *args], input=stdin)
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    lines = r.stdout.splitlines()
    if "--json" in args or not lines:
        return r.exit_code, lines, r.stderr
    assert r.stderr == ""  # a report is no error (issue 60, 25)
    end = len(lines) - 1  # the summary, after the notes
    while end > 0 and lines[end - 1].startswith("note: "):
        end -= 1
    return r.exit_code, lines[:end], "\n".join(lines[end:]) + "\n"


def lint_json(*args: str) -> tuple[int, dict[str, Any]]:
    """Exit code and the report of `idlegate lint --json ARGS`."""
    code, out, _ = lint("--json", *args)
    return code, json.loads("\n".join(out))


def check(*paths: Path | str, stdin: str | None = None, **options: Any) -> LintReport:
    """The report of linting `paths` (``-``: `stdin`)."""
    source = io.StringIO(stdin) if stdin is not None else None
    return lint_paths([str(p) for p in paths], stdin=source, **options)


def fields(report: LintReport) -> list[str | None]:
    return [p.field for p in report.problems]


def places(report: LintReport) -> list[tuple[str, int | None, int | None, str | None]]:
    """(file, document, item, field) of each problem."""
    return [(p.file, p.document, p.item, p.field) for p in report.problems]


def counts(report: LintReport) -> tuple[int, int, int, int]:
    """(files, objects checked, invalid objects, problems)."""
    return report.files, report.workflows, report.invalid, len(report.problems)


def test_a_valid_file_exits_0_with_no_problem(tmp_path):
    f = write(tmp_path / "ok.yaml", workflow("one"), workflow("two"))
    assert lint(str(f))[:2] == (0, [])
    report = check(f)
    assert report.ok and counts(report) == (1, 2, 0, 0)


@pytest.mark.parametrize(
    ("stages", "field"),
    [
        pytest.param([stage("a", tasks=0)], "spec.stages[0].tasks", id="bad-spec"),
        pytest.param(
            [stage("a"), stage("b", "x")], "spec.stages[1].dependsOn", id="unknown-dependency"
        ),
        pytest.param(
            [stage("r"), stage("a", "r", "c"), stage("b", "a"), stage("c", "b")],
            "spec.stages[1].dependsOn",
            id="cycle",
        ),
        pytest.param([stage("a"), stage("a")], "spec.stages[1].name", id="duplicate-stage"),
        pytest.param(
            [stage("a", template={"spec": {"containers": "busybox"}})],
            "spec.stages[0].template.spec.containers",
            id="bad-template",
        ),
    ],
)
def test_each_invalid_spec_is_one_problem_with_its_field_path(tmp_path, stages, field):
    f = write(tmp_path / "bad.yaml", workflow("fine"), workflow("broken", stages))
    code, out, _ = lint(str(f))
    assert (code, len(out)) == (1, 1)
    report = check(f)
    assert places(report) == [(str(f), 1, None, field)]
    assert counts(report) == (1, 2, 1, 1)
    assert out == [str(report.problems[0])]  # the line printed is the problem's


def test_several_problems_of_one_check_are_one_problem_each(tmp_path):
    bad = [stage("a", tasks="2"), stage("B", taskDurationSeconds=float("nan"), extra=1)]
    f = write(tmp_path / "bad.yaml", workflow("w", bad))
    assert fields(check(f)) == [
        "spec.stages[0].tasks",
        "spec.stages[1].name",
        "spec.stages[1].taskDurationSeconds",
        "spec.stages[1].extra",
    ]
    assert len(lint(str(f))[1]) == 4
    template = {"metadata": {"labels": {"team": 7}}, "spec": {"containers": [{"name": "t"}]}}
    f = write(tmp_path / "tmpl.yaml", workflow("t", [stage("a", template=template)]))
    assert fields(check(f)) == [
        "spec.stages[0].template.metadata.labels.team",
        "spec.stages[0].template.spec.containers[0].image",
    ]


def test_lint_reports_what_the_operator_reports():
    # the functions Bridge.admit calls, so each message is the operator's condition message
    bad = workflow("w", [stage("a"), stage("b", "x")])
    with pytest.raises(SpecError) as exc:
        parse_workflow(bad["spec"], "spec")
    assert admission_errors(bad) == [str(exc.value)]
    template = workflow("t", [stage("a", template={"spec": {"containers": []}})])
    with pytest.raises(SpecError) as exc:
        check_templates(parse_workflow(template["spec"], "spec"), "spec")
    assert admission_errors(template) == [str(exc.value)]
    assert admission_errors(workflow()) == []
    # a message lint cannot take apart is kept whole, with no field
    assert split_message("something new went wrong", {}) == [(None, "something new went wrong")]


def test_the_name_and_gangs_are_checked_as_the_operator_does(tmp_path):
    gang = workflow("g", [stage("a"), stage("big", "a", tasks=5, gang=True)])
    gang["metadata"]["namespace"] = "team-a"
    f = write(tmp_path / "w.yaml", workflow("w" * 64), gang)
    assert places(check(f)) == [(str(f), 0, None, "metadata.name")]
    # a gang larger than the pool only with the operator's --pool-size
    assert places(check(f, pool_size=4)) == [
        (str(f), 0, None, "metadata.name"),
        (str(f), 1, None, "spec.stages[1].tasks"),
    ]
    assert check(f, pool_size=4).problems[1].message == admission_errors(gang, 4)[0]
    assert fields(check(f, pool_size=5)) == ["metadata.name"]
    assert lint("--pool-size", "4", str(f))[0] == 1
    assert lint("--pool-size", "0", str(f))[0] == 2  # a usage error, not an invalid manifest


def test_a_yaml_syntax_error_is_a_problem_with_its_line_and_document(tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n"
        "apiVersion: idlegate.io/v1alpha1\nkind: DagWorkflow\n"
        "spec:\n  stages:\n    - name: a\n     tasks: 1\n"  # one space short
    )
    assert lint(str(f))[0] == 1
    (problem,) = check(f).problems
    assert (problem.document, problem.line, problem.column, problem.field) == (1, 10, 6, None)
    # the documents before the error were checked
    bad_first = yaml.safe_dump(workflow("x", [stage("a", tasks=0)]))
    f.write_text(bad_first + "---\na: b: c\n")
    first, syntax = check(f).problems
    assert (first.document, first.field, first.line) == (0, "spec.stages[0].tasks", None)
    assert (syntax.document, syntax.line) == (1, bad_first.count("\n") + 2)  # a: b: c


def test_duplicate_keys_are_refused_as_kubectl_does(tmp_path):
    f = tmp_path / "dup.yaml"
    f.write_text("apiVersion: idlegate.io/v1alpha1\nkind: DagWorkflow\nkind: DagWorkflow\n")
    (problem,) = check(f).problems
    assert (problem.document, problem.line, problem.column) == (0, 3, 1)
    assert "'kind'" in problem.message  # the key repeated
    assert lint(str(f))[0] == 1
    # a merge key may repeat what it merges (kubectl's YAML decoder allows it too)
    f.write_text(
        "apiVersion: idlegate.io/v1alpha1\nkind: DagWorkflow\nmetadata: {name: m}\nspec:\n"
        "  stages:\n    - &base {name: a, tasks: 1, taskDurationSeconds: 1}\n"
        "    - <<: *base\n      name: b\n      tasks: 2\n"
    )
    assert lint(str(f))[:2] == (0, [])


def test_a_json_syntax_error_has_its_line_and_column(tmp_path):
    f = tmp_path / "w.json"
    f.write_text('{"apiVersion": "idlegate.io/v1alpha1",\n  "kind": }')
    (problem,) = check(f).problems
    assert (problem.document, problem.line, problem.column) == (0, 2, 11)
    f.write_text(json.dumps(workflow()))
    assert lint(str(f))[:2] == (0, [])


def test_a_file_that_is_no_manifest_says_what_lint_reads(tmp_path):
    # an Airflow DAG file: lint reads the DAG's export, never its Python source
    dag_file = Path(__file__).parent / "data" / "airflow" / "dags" / "idlegate_e2e.py"
    code, out, _ = lint(str(dag_file))
    (line,) = out
    assert code == 1 and line.startswith(f"{dag_file}: is Python source, which lint does not")
    assert "Argo Workflows, and Airflow DAGs as the JSON export `idlegate history airflow" in line
    # any file not named as a manifest that does not parse says so too
    notes = tmp_path / "notes.txt"
    notes.write_text("a: [\n")
    (problem,) = check(notes).problems
    assert (
        "invalid YAML" in problem.message
        and "; lint reads YAML, JSON or JSON Lines (.jsonl): Dag" in problem.message
    )
    # a manifest with a typo is a manifest: its syntax error is enough
    notes.rename(tmp_path / "typo.yaml")
    (problem,) = check(tmp_path / "typo.yaml").problems
    assert "lint reads" not in problem.message


def test_a_dagworkflow_under_the_wrong_api_version_or_kind_is_an_error(tmp_path):
    f = write(
        tmp_path / "w.yaml",
        workflow("v1", apiVersion="idlegate.io/v1"),
        workflow("case", kind="Dagworkflow"),
        workflow("other", kind="DagWorkflowTemplate"),
        {k: v for k, v in workflow("nokind").items() if k != "kind"},
        {k: v for k, v in workflow("noapi").items() if k != "apiVersion"},
    )
    report = check(f)
    assert [(p.document, p.field) for p in report.problems] == [
        (0, "apiVersion"),
        (1, "kind"),
        (2, "kind"),
        (3, "kind"),
        (4, "apiVersion"),
    ]
    assert KIND in report.problems[1].message  # the kind meant, whose case differs
    assert counts(report) == (1, 5, 5, 5)


def test_other_kinds_are_skipped_with_a_note_and_non_objects_are_errors(tmp_path):
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    f = write(tmp_path / "mixed.yaml", config_map, workflow(), None)
    assert lint(str(f))[:2] == (0, [])
    report = check(f)
    assert [n.document for n in report.notes] == [0]
    # (not "not a DagWorkflow": lint checks ExecutorPools and Argo's and Airflow's too)
    assert "a ConfigMap (v1), not one of the kinds lint checks" in report.notes[0].message
    assert counts(report) == (1, 1, 0, 0)
    f = write(tmp_path / "data.yaml", ["a", "b"], "text")
    report = check(f)
    assert not report.problems and [n.document for n in report.notes] == [0, 1]
    assert report.workflows == 0 and not report.ok  # (nothing to check: no pass, issue 80)


def test_bare_workflows_are_checked_as_simulate_reads_them(tmp_path):
    # idlegate simulate's format (alone, or a list): skipped with exit 0 before, though
    # `simulate -w file` refused the very file (a cycle)
    f = write(tmp_path / "bare.yaml", {"stages": [stage("a")]}, [{"stages": [stage("a")]}])
    report = check(f)
    assert report.ok and report.notes == [] and report.bare_workflows == 2
    assert lint(str(f))[:2] == (0, [])
    cyclic = [
        {"name": "loop", "stages": [stage("s1", "s2"), stage("s2", "s1")]},
        {"name": "fine", "arrival": 3, "stages": [stage("a")]},
    ]
    f = write(tmp_path / "cyclic.yaml", cyclic)
    code, out, err = lint(str(f))
    assert code == 1
    assert out == [
        f"{f}[0].items[0]: workflow 'loop': the dependencies form a cycle: s1 -> s2 -> s1 "
        "(each depends on the next); a workflow must be acyclic"
    ]
    assert "2 bare workflow(s) in 1 file(s): 1 invalid" in err
    with pytest.raises(SpecError, match="form a cycle"):
        build_workload("file", 0, path=str(f))


def test_a_list_of_bare_workflows_checks_each_item_and_its_history_keys(tmp_path):
    items = [
        {"stages": [stage("a")], "arrival": -1},
        {"stages": [stage("a", measuredDurationSeconds=[])]},
        "text",
        {"name": "x"},
        workflow("wf", [stage("a", "nowhere")]),
    ]
    report = check(write(tmp_path / "list.yaml", items))
    assert [(p.item, p.field) for p in report.problems] == [
        (0, None),
        (1, None),
        (2, None),
        (3, None),
        (4, "spec.stages[0].dependsOn"),
    ]
    said = [p.message for p in report.problems]
    assert "arrival must be >= 0 seconds" in said[0]
    assert "measuredDurationSeconds must be a non-empty list" in said[1]
    assert said[2] == "workflow: expected a mapping with a 'stages' list, got a string"
    assert said[3].startswith("workflow 'x': stages")
    assert report.bare_workflows == 4 and report.workflows == 1 and report.invalid == 5
    assert lint_json(str(tmp_path / "list.yaml"))[1]["bare_workflows"] == 4


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("kind: ExecutorPool\n", "<stdin>[0] metadata: is missing; an ExecutorPool needs a name"),
        (
            "kind: DagCronWorkflow\nmetadata: {}\n",
            "<stdin>[0] metadata.name: is missing; give the DagCronWorkflow a name",
        ),
        (
            "apiVersion: idlegate.io/v1alpha1\nkind: ExecutorPool\nmetadata: {name: p}\nspec: 5\n",
            "<stdin>[0] spec: must be a mapping (of size, resources, nodeSelector, "
            "namespaceSelector, policy, planBudgetMs, queues, forecastArrivals), not a number",
        ),
        ("stages: 5\n", "<stdin>[0]: workflow: stages: must be a list, not a number"),
        (
            "kind: DagWorkflow\nmetadata: {name: x}\nspec: {stages: [5]}\n",
            "<stdin>[0] spec.stages[0]: must be a mapping (of name, tasks,",
        ),
    ],
    ids=["pool-no-metadata", "cron-no-name", "pool-spec-number", "stages-number", "stage-number"],
)
def test_a_value_of_the_wrong_type_is_said_in_the_manifests_terms(text, said):
    # pydantic's own words were "Input should be a valid dictionary or instance of
    # ExecutorPoolSpec", "a valid tuple", and a pool's missing name was "a DagWorkflow's"
    code, out, _ = lint("-", stdin=text)
    assert code == 1
    assert any(line.startswith(said) for line in out), out
    assert not any("Input should be" in line or "instance of" in line for line in out), out


def test_a_plain_list_of_dag_workflows_is_checked_item_by_item(tmp_path):
    # simulate -w file reads such a list; lint skipped it as "a list"
    f = write(tmp_path / "list.yaml", [workflow("ok"), workflow("loop", [stage("a", "a")])])
    report = check(f)
    assert places(report) == [(str(f), 0, 1, "spec.stages[0].dependsOn")]
    assert report.workflows == 2 and report.notes == []


def test_a_history_in_json_lines_is_checked_line_by_line(tmp_path):
    # a history sink's file, which simulate -w file reads: lint took it for broken YAML
    good = {"name": "a", "arrival": 1, "stages": [stage("s")]}
    bad = {"name": "b", "arrival": "soon", "stages": [stage("s")]}
    f = tmp_path / "history.jsonl"
    f.write_text(f"{json.dumps(good)}\n\n{json.dumps(bad)}\nnot json\n")
    report = check(f)
    assert [(p.document, p.line) for p in report.problems] == [(2, None), (3, 4)]
    assert "arrival must be a number of seconds" in report.problems[0].message
    assert report.problems[1].message.startswith("invalid JSON")
    assert report.bare_workflows == 2 and report.invalid == 1
    f.write_text(json.dumps(good) + "\n")
    assert lint(str(f))[:2] == (0, [])


def test_a_dag_workflow_without_spec_says_it_is_missing():
    code, out, _ = lint("-", stdin="kind: DagWorkflow\n")
    assert code == 1
    assert "<stdin>[0] spec: is missing or empty; give a mapping with a 'stages' list" in out
    assert not any("NoneType" in line for line in out)


def test_list_documents_are_checked_item_by_item(tmp_path):
    items = [workflow("a"), workflow("b", [stage("x", "y")])]
    f = write(tmp_path / "l.yaml", {"apiVersion": "v1", "kind": "List", "items": items})
    report = check(f)
    assert places(report) == [(str(f), 0, 1, "spec.stages[0].dependsOn")]
    assert counts(report) == (1, 2, 1, 1)


def test_stdin():
    text = yaml.safe_dump_all([workflow(), workflow("c", [stage("a", "a")])])
    assert places(check("-", stdin=text)) == [("<stdin>", 1, None, "spec.stages[0].dependsOn")]
    assert lint("-", stdin=text)[0] == 1
    assert lint("-", stdin=yaml.safe_dump(workflow()))[0] == 0


def test_a_directory_is_searched_recursively_for_manifests(tmp_path):
    write(tmp_path / "d" / "a.yaml", workflow("a"))
    write(tmp_path / "d" / "sub" / "b.yml", workflow("b", [stage("x", tasks=-1)]))
    (tmp_path / "d" / "sub" / "c.json").write_text(json.dumps(workflow("c")))
    (tmp_path / "d" / "notes.txt").write_text("not: [yaml")
    write(tmp_path / "d" / ".git" / "x.yaml", workflow("hidden", [stage("x", tasks=-1)]))
    report = check(tmp_path / "d")
    assert places(report) == [
        (str(tmp_path / "d" / "sub" / "b.yml"), 0, None, "spec.stages[0].tasks")
    ]
    assert counts(report) == (3, 3, 1, 1)
    assert lint(str(tmp_path / "d"))[0] == 1
    (tmp_path / "empty").mkdir()
    assert places(check(tmp_path / "empty")) == [(str(tmp_path / "empty"), None, None, None)]
    assert lint(str(tmp_path / "empty"))[0] == 1


def test_an_unreadable_file_is_a_problem_and_the_others_are_still_checked(tmp_path):
    ok = write(tmp_path / "ok.yaml", workflow())
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00kind")
    report = check(binary, ok)
    assert places(report) == [(str(binary), None, None, None)]
    assert counts(report) == (2, 1, 0, 1)  # (the file that could not be read was checked)
    assert lint(str(binary), str(ok))[0] == 1


def test_a_path_that_does_not_exist_is_an_error_of_the_command(tmp_path):
    ok = write(tmp_path / "ok.yaml", workflow())
    missing = tmp_path / "missing.yaml"
    with pytest.raises(IdlegateError, match=r"missing\.yaml"):
        check(missing, ok)
    result = CliRunner().invoke(app, ["lint", str(ok), str(missing)])
    assert result.exit_code == 1 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and str(missing) in line and str(ok) not in line


def test_json_output(tmp_path):
    f = write(tmp_path / "w.yaml", workflow(), workflow("b", [stage("a", tasks=0)]))
    code, report = lint_json(str(f))
    assert code == 1
    assert {k: report[k] for k in ("valid", "files", "workflows", "invalid")} == {
        "valid": False,
        "files": 1,
        "workflows": 2,
        "invalid": 1,
    }
    (problem,) = report["problems"]
    (expected,) = check(f).problems
    assert problem == {
        "file": str(f),
        "message": expected.message,
        "document": 1,
        "item": None,
        "field": "spec.stages[0].tasks",
        "line": None,
        "column": None,
        "reason": None,
        "text": f"{f}[1] spec.stages[0].tasks: {expected.message}",
    }
    code, report = lint_json(str(write(tmp_path / "ok.yaml", workflow())))
    assert code == 0 and report["valid"] is True


def test_lint_paths_refuses_a_pool_of_nothing():
    with pytest.raises(IdlegateError, match="--pool-size"):
        lint_paths([], pool_size=0)


def test_a_pool_none_of_whose_resources_a_stage_requests_is_refused_as_simulate_does():
    # lint passed tpch-q3 with --pool-resources gpu=1, which simulate refuses (issue 60, 18)
    sample = str(Path(__file__).parent.parent / "deploy" / "samples" / "tpch-q3.yaml")
    result = runner.invoke(app, ["lint", sample, "--pool-resources", "gpu=1"])
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: the pool counts gpu but no stage of the linted workflows requests any (they "
        "request cpu, memory), so it would count its pods only; name a resource the stages"
    )
    assert runner.invoke(app, ["lint", sample, "--pool-resources", "cpu=64"]).exit_code == 0


def test_a_fraction_of_a_gpu_in_a_stage_is_a_problem(tmp_path):
    # the API server refuses a fractional extended resource on a pod (issue 60, 14)
    obj = workflow()
    obj["spec"]["stages"][0]["resources"] = {"nvidia.com/gpu": "0.5"}
    (problem,) = lint_paths([str(write(tmp_path / "w.yaml", obj))]).problems
    assert problem.field == "spec.stages[0].resources"
    assert problem.message.startswith("nvidia.com/gpu: '0.5' is not a whole number")


def test_the_report_and_its_summary_go_to_stdout_and_errors_to_stderr(tmp_path):
    # the summary went to stderr: `lint ... > report.txt` lost it (issue 60, 25)
    f = write(tmp_path / "w.yaml", workflow(), {"kind": "ConfigMap", "apiVersion": "v1"})
    r = runner.invoke(app, ["lint", str(f)])
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout.splitlines() == [
        f"note: {f}[1]: skipped: a ConfigMap (v1), not one of the kinds lint checks",
        "1 DagWorkflow(s) in 1 file(s): 0 invalid; 1 other document(s) skipped",
    ]
    r = runner.invoke(app, ["lint", str(tmp_path / "nowhere.yaml")])
    assert r.exit_code == 1 and r.stdout == "" and r.stderr.startswith("Error: no such file")


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--pool-nodes", "bad key!=x"], "Error: --pool-nodes: 'bad key!=x' is not a label"),
        (["--pool-nodes", "a/b/c=x"], "Error: --pool-nodes: 'a/b/c' is not a label key"),
        (
            ["--pool-nodes", "pool=batch", "--pool-resources", "cpu=8"],
            "Error: give --pool-resources (a fixed capacity) or --pool-nodes (the capacity of",
        ),
    ],
)
def test_lint_takes_the_operators_pool_nodes(tmp_path, flags, error):
    # the operator's --pool-nodes, which lint did not take (issue 60, 25)
    f = str(write(tmp_path / "w.yaml", workflow()))
    assert runner.invoke(app, ["lint", f, "--pool-nodes", "pool=batch,!spot"]).exit_code == 0
    r = runner.invoke(app, ["lint", f, *flags])
    assert r.exit_code == 1 and r.stderr.startswith(error), r.stderr


def test_the_lint_command_needs_only_the_base_package(tmp_path):
    # kopf, kubernetes and torch made unimportable: lint must run, and load none of them
    f = write(tmp_path / "w.yaml", workflow())
    code = textwrap.dedent(
        f"""
        import sys
        for name in ("kopf", "kubernetes", "torch"):
            sys.modules[name] = None  # any import of them raises ImportError
        from idlegate.cli import main
        try:
            main(["lint", {str(f)!r}])
        except SystemExit as exc:
            print("exit", exc.code)
        print(" ".join(m for m in sys.modules if sys.modules[m] is not None))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    _, exit_line, modules = out.stdout.splitlines()  # (the summary, on stdout)
    assert exit_line == "exit 0", out.stderr
    loaded = {m.split(".")[0] for m in modules.split()}
    assert not loaded & {"kopf", "kubernetes", "torch"}
    assert "idlegate" in loaded


# -- DagCronWorkflow ---------------------------------------------------------------------------


def cron(name: str = "nightly", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "DagCronWorkflow",
        "metadata": {"name": name},
        "spec": {"schedule": "@daily", "workflowSpec": workflow()["spec"], **spec},
    }


def test_a_valid_cron_workflow_passes_and_is_counted_apart(tmp_path):
    f = write(tmp_path / "ok.yaml", workflow("one"), cron(timeZone="Europe/Berlin"))
    assert lint(str(f))[:2] == (0, [])
    report = check(f)
    assert (report.workflows, report.cron_workflows, report.invalid) == (2, 1, 0)


@pytest.mark.parametrize(
    ("manifest", "field"),
    [
        pytest.param(cron(schedule="every night"), "spec.schedule", id="schedule"),
        pytest.param(cron(timeZone="Mars/Olympus"), "spec.timeZone", id="time-zone"),
        pytest.param(cron(concurrencyPolicy="Never"), "spec.concurrencyPolicy", id="policy"),
        pytest.param(
            cron(workflowSpec={"stages": [stage("a"), stage("b", "x")]}),
            "spec.workflowSpec.stages[1].dependsOn",
            id="workflow",
        ),
        pytest.param(cron("n" * 53), "metadata.name", id="name"),
    ],
)
def test_each_cron_problem_has_its_field_path(tmp_path, manifest, field):
    f = write(tmp_path / "bad.yaml", manifest)
    report = check(f)
    assert places(report) == [(str(f), 0, None, field)]
    assert (report.cron_workflows, report.invalid) == (1, 1)
    assert lint(str(f))[0] == 1


def test_a_miscased_cron_kind_is_named(tmp_path):
    bad = {**cron(), "kind": "DagCronworkflow"}
    (problem,) = check(write(tmp_path / "k.yaml", bad)).problems
    assert problem.field == "kind" and CRON_KIND in problem.message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("suspend", "yes"),
        ("suspend", "true"),
        ("suspend", "no"),
        ("suspend", 1),
        ("startingDeadlineSeconds", "3600"),
        ("successfulJobsHistoryLimit", "3"),
        ("failedJobsHistoryLimit", 1.5),
    ],
)
def test_cron_fields_are_as_strict_as_the_crd_types_them(tmp_path, field, value):
    # kubectl apply refuses a string where the CRD says boolean or integer: so does lint
    f = write(tmp_path / "c.yaml", cron(**{field: value}))
    (problem,) = check(f).problems
    assert problem.field == f"spec.{field}"
    if field == "suspend":  # the same value on a DagWorkflow: refused in the same words
        f = write(tmp_path / "w.yaml", workflow(spec={**workflow()["spec"], "suspend": value}))
        (same,) = check(f).problems
        assert (same.field, same.message) == ("spec.suspend", problem.message)


def test_every_independent_cron_problem_is_reported_at_once(tmp_path):
    bad = cron(
        schedule="bad",
        timeZone="Nowhere/X",
        concurrencyPolicy="Sometimes",
        workflowSpec={"stages": [stage("a", tasks=0)]},
    )
    assert fields(check(write(tmp_path / "c.yaml", bad))) == [
        "spec.concurrencyPolicy",
        "spec.timeZone",
        "spec.schedule",
        "spec.workflowSpec.stages[0].tasks",
    ]


def test_pool_problems_are_one_per_field_with_no_kubectl_advice(tmp_path):
    pool = {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "ExecutorPool",
        "metadata": {"name": "p"},
        "spec": {
            "size": "3",
            "planBudgetMs": -1,
            "policy": "bogus:x",
            "namespaceSelecter": {},
        },
    }
    f = write(tmp_path / "p.yaml", pool)
    report = check(f)
    assert fields(report) == [
        "spec.size",
        "spec.planBudgetMs",
        "spec.namespaceSelecter",
        "spec.policy",
    ]
    assert "namespaceSelector" in report.problems[2].message  # the field meant
    assert (report.pools, report.invalid) == (1, 1)
    code, out, _ = lint("--json", str(f))
    assert code == 1 and "kubectl edit" not in "\n".join(out)


def _pool(policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "ExecutorPool",
        "metadata": {"name": "planner"},
        "spec": {"size": 4, "policy": policy},
    }


@pytest.mark.parametrize(
    "policy",
    [
        "lookahead?mode=decisionx&bogus=1:analytic:sjf",
        "lookahead?mode=decisionx:analytic:sjf",
        "lookahead?candidates=fair+sjff:sjf",
        "analytic?bogus=1:sjf",
        "lookahead:learned:default?windoww=3",
    ],
)
def test_a_pools_planner_options_are_checked_as_the_operator_does(tmp_path, policy):
    from idlegate.policy import make_scheduler

    (problem,) = check(write(tmp_path / "p.yaml", _pool(policy))).problems
    with pytest.raises(IdlegateError) as built:
        make_scheduler(policy)
    assert problem.field == "spec.policy"
    assert problem.message == str(built.value)  # the operator's build refuses it so


def test_a_pools_planner_is_linted_without_its_model_or_history_files(tmp_path):
    policy = (
        "lookahead?mode=decision&futures=conditional&futures_history=/history/history.jsonl"
        ":learned:/models/absent.onnx?window=32"
    )
    f = write(tmp_path / "p.yaml", _pool(policy))
    assert lint(str(f))[0] == 0


def test_pool_flags_are_the_default_pools_not_an_executor_pools():
    # the operator holds a workflow naming an ExecutorPool to that pool (PoolTooSmall while
    # it is too small), never to --pool-size / --pool-resources
    stages = [{"name": "g", "tasks": 30, "gang": True, "taskDurationSeconds": 5}]
    stages.append({"name": "h", "tasks": 1, "taskDurationSeconds": 5, "resources": {"cpu": 6}})
    obj = {"metadata": {"name": "w"}, "spec": {"stages": stages}}
    flags = {"pool_size": 8, "resources": ResourceVector.parse("cpu=2")}
    assert len(admission_errors(obj, **flags)) == 1  # (the gang, said first)
    for pool in ("q", "default"):
        in_pool = {"metadata": {"name": "w"}, "spec": {"stages": stages, "pool": pool}}
        assert bool(admission_errors(in_pool, **flags)) == (pool == "default")


def test_a_workflow_too_large_for_its_executor_pool_among_the_inputs_is_a_note(tmp_path):
    # the operator holds it out of that pool (PoolTooSmall), not Invalid: a note, exit 0
    pool = {"apiVersion": "idlegate.io/v1alpha1", "kind": "ExecutorPool"}
    pool |= {"metadata": {"name": "q"}, "spec": {"resources": {"cpu": 4, "pods": 20}}}
    stage = {"name": "huge", "tasks": 1, "taskDurationSeconds": 5, "resources": {"cpu": 6}}
    wf = {"apiVersion": "idlegate.io/v1alpha1", "kind": KIND, "metadata": {"name": "w"}}
    wf |= {"spec": {"pool": "q", "stages": [stage]}}
    path = tmp_path / "in-pool.yaml"
    path.write_text(yaml.safe_dump_all([pool, wf]))
    report = lint_paths([str(path)])
    assert report.ok and not report.problems
    (note,) = report.notes
    assert (note.document, note.reason) == (1, "PoolTooSmall")
    assert note.message.startswith("in ExecutorPool 'q', stage 'huge' of w needs cpu=6 at once")
    assert "skipped" not in report.summary()
    wf["spec"]["pool"] = "elsewhere"  # (a pool not among the inputs: the cluster's)
    path.write_text(yaml.safe_dump_all([pool, wf]))
    assert lint_paths([str(path)]).notes == []


def test_history_samples_sizes_workflows_as_the_operator_does(tmp_path):
    # the wide workflow fits with the operator's default 20 durations a stage, not with 64
    f = write(tmp_path / "wide.yaml", wide_workflow())
    assert lint(str(f))[0] == 0
    code, lines, _ = lint("--history-samples", str(MAX_MEASURED), str(f))
    assert code == 1
    (line,) = lines
    assert line.startswith(f"{f}[0]: the workflow's 2,200 stages make an object of about ")
    code, _, err = lint("--history-samples", "65", str(f))
    assert (code, err) == (
        1,
        "Error: --history-samples must be between 1 and 64 (the operator's bounds), got 65; "
        "give the operator's own --history-samples\n",
    )
