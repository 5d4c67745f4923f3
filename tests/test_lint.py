"""`idlegate lint`: DagWorkflow manifests checked offline with the operator's admission checks.

One line per problem (file, document, field path), exit 1 when anything is invalid, notes
for documents of other kinds, syntax errors with their line, stdin, directories, --json;
and the command needs only the base package (no kopf, kubernetes or torch).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.errors import IdlegateError, SpecError
from idlegate.operator.lint import admission_errors, lint_paths, split_message
from idlegate.operator.template import check_templates
from idlegate.sim.spec import parse_workflow

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
    """Exit code, stdout lines, stderr of `idlegate lint ARGS`."""
    r = runner.invoke(app, ["lint", *args], input=stdin)
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.stdout.splitlines(), r.stderr


def problems(*args: str, stdin: str | None = None) -> list[str]:
    """The stdout lines of `idlegate lint ARGS`, which must exit 1 (a problem found)."""
    code, out, _ = lint(*args, stdin=stdin)
    assert code == 1, out
    return out


def test_a_valid_file_exits_0_with_a_summary_and_no_problem(tmp_path):
    f = write(tmp_path / "ok.yaml", workflow("one"), workflow("two"))
    code, out, err = lint(str(f))
    assert (code, out) == (0, [])
    assert "2 DagWorkflow(s) in 1 file(s): 0 invalid" in err


@pytest.mark.parametrize(
    ("stages", "line"),
    [
        pytest.param(
            [stage("a", tasks=0)],
            "spec.stages[0].tasks: Input should be greater than or equal to 1",
            id="bad-spec",
        ),
        pytest.param(
            [stage("a"), stage("b", "x")],
            "spec.stages[1].dependsOn: stage 'b' depends on 'x', which is not a stage of this "
            "workflow (stages: a, b)",
            id="unknown-dependency",
        ),
        pytest.param(
            [stage("r"), stage("a", "r", "c"), stage("b", "a"), stage("c", "b")],
            "spec.stages[1].dependsOn: the dependencies form a cycle: a -> c -> b -> a (each "
            "depends on the next); a workflow must be acyclic",
            id="cycle",
        ),
        pytest.param(
            [stage("a"), stage("a")],
            "spec.stages[1].name: stage name 'a' appears twice; stage names must be unique",
            id="duplicate-stage",
        ),
        pytest.param(
            [stage("a", template={"spec": {"containers": "busybox"}})],
            "spec.stages[0].template.spec.containers: must be a list, not a string",
            id="bad-template",
        ),
    ],
)
def test_each_invalid_spec_is_one_line_with_its_field_path(tmp_path, stages, line):
    f = write(tmp_path / "bad.yaml", workflow("fine"), workflow("broken", stages))
    code, out, err = lint(str(f))
    assert code == 1
    assert out == [f"{f}[1] {line}"]
    assert "2 DagWorkflow(s) in 1 file(s): 1 invalid, 1 problem(s)" in err


def test_several_problems_of_one_check_are_one_line_each(tmp_path):
    bad = [stage("a", tasks="2"), stage("B", taskDurationSeconds=float("nan"), extra=1)]
    f = write(tmp_path / "bad.yaml", workflow("w", bad))
    assert problems(str(f)) == [
        f"{f}[0] spec.stages[0].tasks: must be an integer, not the string '2' (write it "
        "without quotes)",
        f"{f}[0] spec.stages[1].name: 'B' must be a DNS label (lower case letters, digits and "
        "'-', starting and ending with a letter or digit)",
        f"{f}[0] spec.stages[1].taskDurationSeconds: must be a finite number of seconds, e.g. 12.5",
        f"{f}[0] spec.stages[1].extra: is not a field here; the fields are name, tasks, "
        "taskDurationSeconds, dependsOn, gang, backoffLimit, template",
    ]
    template = {"metadata": {"labels": {"team": 7}}, "spec": {"containers": [{"name": "t"}]}}
    f = write(tmp_path / "tmpl.yaml", workflow("t", [stage("a", template=template)]))
    assert lint(str(f))[1] == [
        f"{f}[0] spec.stages[0].template.metadata.labels.team: must be a string, not a number",
        f"{f}[0] spec.stages[0].template.spec.containers[0].image: is required",
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
    long_name = "w" * 64
    gang = workflow("g", [stage("a"), stage("big", "a", tasks=5, gang=True)])
    gang["metadata"]["namespace"] = "team-a"
    f = write(tmp_path / "w.yaml", workflow(long_name), gang)
    assert problems(str(f)) == [
        f"{f}[0] metadata.name: the name '{long_name}' is longer than 63 characters; it is a "
        "label value on every task pod"
    ]
    # a gang larger than the pool only with the operator's --pool-size
    out = problems("--pool-size", "4", str(f))
    assert out[1] == (
        f"{f}[1] spec.stages[1].tasks: stage 'big' of team-a/g is a gang of 5 tasks, but the "
        "cluster has only 4 executors, so it could never start; use fewer tasks or more executors"
    )
    assert lint("--pool-size", "5", str(f))[1] == out[:1]
    assert lint("--pool-size", "0", str(f))[0] == 2  # a usage error, not an invalid manifest


def test_a_yaml_syntax_error_is_a_problem_with_its_line_and_document(tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n"
        "apiVersion: idlegate.io/v1alpha1\nkind: DagWorkflow\n"
        "spec:\n  stages:\n    - name: a\n     tasks: 1\n"  # one space short
    )
    code, out, _ = lint(str(f))
    assert (code, out) == (
        1,
        [
            f"{f}[1] line 10, column 6: invalid YAML: while parsing a block collection, expected "
            "<block end>, but found '<block mapping start>'"
        ],
    )
    # the documents before the error were checked
    bad_first = yaml.safe_dump(workflow("x", [stage("a", tasks=0)]))
    f.write_text(bad_first + "---\na: b: c\n")
    code, out, _ = lint(str(f))
    assert out[0].startswith(f"{f}[0] spec.stages[0].tasks:")
    assert out[1].startswith(f"{f}[1] line ") and "mapping values are not allowed" in out[1]


def test_duplicate_keys_are_refused_as_kubectl_does(tmp_path):
    f = tmp_path / "dup.yaml"
    f.write_text("apiVersion: idlegate.io/v1alpha1\nkind: DagWorkflow\nkind: DagWorkflow\n")
    assert lint(str(f))[:2] == (
        1,
        [
            f"{f}[0] line 3, column 1: invalid YAML: while constructing a mapping, found "
            "duplicate key 'kind' (kubectl refuses duplicate fields)"
        ],
    )
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
    assert lint(str(f))[:2] == (1, [f"{f}[0] line 2, column 11: invalid JSON: Expecting value"])
    f.write_text(json.dumps(workflow()))
    assert lint(str(f))[:2] == (0, [])


def test_a_dagworkflow_under_the_wrong_api_version_or_kind_is_an_error(tmp_path):
    f = write(
        tmp_path / "w.yaml",
        workflow("v1", apiVersion="idlegate.io/v1"),
        workflow("case", kind="Dagworkflow"),
        workflow("other", kind="DagWorkflowTemplate"),
        {k: v for k, v in workflow("nokind").items() if k != "kind"},
        {k: v for k, v in workflow("noapi").items() if k != "apiVersion"},
    )
    assert problems(str(f)) == [
        f"{f}[0] apiVersion: 'idlegate.io/v1' does not serve DagWorkflow; use idlegate.io/v1alpha1",
        f"{f}[1] kind: 'Dagworkflow' is not DagWorkflow: kinds are case-sensitive; use kind: "
        "DagWorkflow",
        f"{f}[2] kind: 'DagWorkflowTemplate' is not a kind of idlegate.io; use kind: DagWorkflow (or DagCronWorkflow)",
        f"{f}[3] kind: is missing; use kind: DagWorkflow",
        f"{f}[4] apiVersion: is missing; use idlegate.io/v1alpha1",
    ]


def test_other_kinds_are_skipped_with_a_note_and_non_objects_are_errors(tmp_path):
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    f = write(tmp_path / "mixed.yaml", config_map, workflow(), None)
    code, out, err = lint(str(f))
    assert (code, out) == (0, [])
    assert f"note: {f}[0]: skipped: a ConfigMap (v1), not a DagWorkflow" in err
    assert "1 DagWorkflow(s) in 1 file(s): 0 invalid; 1 other document(s) skipped" in err
    f = write(tmp_path / "data.yaml", ["a", "b"], "text")
    code, out, err = lint(str(f))
    assert (code, out) == (0, [])
    assert f"note: {f}[0]: skipped: a list, not a Kubernetes object" in err
    assert f"note: {f}[1]: skipped: a string, not a Kubernetes object" in err
    # a bare workflow (idlegate simulate's format) is not a manifest either
    f = write(tmp_path / "bare.yaml", {"stages": [stage("a")]}, [{"stages": [stage("a")]}])
    code, out, err = lint(str(f))
    assert (code, out) == (0, [])
    assert (
        f"note: {f}[0]: skipped: a document with no kind, not a DagWorkflow (to lint a bare "
        "workflow, put it under spec of a DagWorkflow)"
    ) in err


def test_list_documents_are_checked_item_by_item(tmp_path):
    items = [workflow("a"), workflow("b", [stage("x", "y")])]
    f = write(tmp_path / "l.yaml", {"apiVersion": "v1", "kind": "List", "items": items})
    assert problems(str(f)) == [
        f"{f}[0].items[1] spec.stages[0].dependsOn: stage 'x' depends on 'y', which is not a "
        "stage of this workflow (stages: x)"
    ]


def test_stdin(tmp_path):
    text = yaml.safe_dump_all([workflow(), workflow("c", [stage("a", "a")])])
    assert problems("-", stdin=text) == [
        "<stdin>[1] spec.stages[0].dependsOn: stage 'a' depends on itself; remove it from dependsOn"
    ]
    assert lint("-", stdin=yaml.safe_dump(workflow()))[0] == 0


def test_a_directory_is_searched_recursively_for_manifests(tmp_path):
    write(tmp_path / "d" / "a.yaml", workflow("a"))
    write(tmp_path / "d" / "sub" / "b.yml", workflow("b", [stage("x", tasks=-1)]))
    (tmp_path / "d" / "sub" / "c.json").write_text(json.dumps(workflow("c")))
    (tmp_path / "d" / "notes.txt").write_text("not: [yaml")
    write(tmp_path / "d" / ".git" / "x.yaml", workflow("hidden", [stage("x", tasks=-1)]))
    code, out, err = lint(str(tmp_path / "d"))
    assert code == 1
    assert out == [
        f"{tmp_path / 'd' / 'sub' / 'b.yml'}[0] spec.stages[0].tasks: Input should be greater "
        "than or equal to 1"
    ]
    assert "3 DagWorkflow(s) in 3 file(s): 1 invalid" in err
    (tmp_path / "empty").mkdir()
    assert lint(str(tmp_path / "empty"))[:2] == (
        1,
        [f"{tmp_path / 'empty'}: is a directory with no *.yaml, *.yml or *.json file in it"],
    )


def test_an_unreadable_file_is_a_problem_and_the_others_are_still_checked(tmp_path):
    ok = write(tmp_path / "ok.yaml", workflow())
    missing = tmp_path / "missing.yaml"
    code, out, err = lint(str(missing), str(ok))
    assert (code, out) == (1, [f"{missing}: cannot read: no such file or directory"])
    assert "1 DagWorkflow(s) in 1 file(s): 0 invalid, 1 problem(s)" in err


def test_json_output(tmp_path):
    f = write(tmp_path / "w.yaml", workflow(), workflow("b", [stage("a", tasks=0)]))
    code, out, _ = lint("--json", str(f))
    assert code == 1
    report = json.loads("\n".join(out))
    assert {k: report[k] for k in ("valid", "files", "workflows", "invalid")} == {
        "valid": False,
        "files": 1,
        "workflows": 2,
        "invalid": 1,
    }
    (problem,) = report["problems"]
    assert problem == {
        "file": str(f),
        "message": "Input should be greater than or equal to 1",
        "document": 1,
        "item": None,
        "field": "spec.stages[0].tasks",
        "line": None,
        "column": None,
        "text": f"{f}[1] spec.stages[0].tasks: Input should be greater than or equal to 1",
    }
    code, out, _ = lint("--json", str(write(tmp_path / "ok.yaml", workflow())))
    assert code == 0 and json.loads("\n".join(out))["valid"] is True


def test_lint_paths_refuses_a_pool_of_nothing():
    with pytest.raises(IdlegateError, match="--pool-size must be at least 1"):
        lint_paths([], pool_size=0)


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
    exit_line, modules = out.stdout.splitlines()
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
    code, out, err = lint(str(f))
    assert (code, out) == (0, [])
    assert "1 DagWorkflow(s) and 1 DagCronWorkflow(s) in 1 file(s): 0 invalid" in err


@pytest.mark.parametrize(
    ("manifest", "line"),
    [
        pytest.param(
            cron(schedule="every night"),
            "spec.schedule: 'every night' is not valid cron syntax",
            id="schedule",
        ),
        pytest.param(
            cron(timeZone="Mars/Olympus"),
            "spec.timeZone: 'Mars/Olympus' is not a known IANA time zone",
            id="time-zone",
        ),
        pytest.param(
            cron(concurrencyPolicy="Never"),
            "spec.concurrencyPolicy: Input should be 'Allow', 'Forbid' or 'Replace'",
            id="policy",
        ),
        pytest.param(
            cron(workflowSpec={"stages": [stage("a"), stage("b", "x")]}),
            "spec.workflowSpec.stages[1].dependsOn: stage 'b' depends on 'x'",
            id="workflow",
        ),
        pytest.param(
            cron("n" * 53),
            "metadata.name: the name 'nnnnn",
            id="name",
        ),
    ],
)
def test_each_cron_problem_has_its_field_path(tmp_path, manifest, line):
    f = write(tmp_path / "bad.yaml", manifest)
    (out,) = problems(str(f))
    assert out.startswith(f"{f}[0] {line}"), out


def test_a_miscased_cron_kind_is_named(tmp_path):
    bad = {**cron(), "kind": "DagCronworkflow"}
    (out,) = problems(str(write(tmp_path / "k.yaml", bad)))
    assert "is not DagCronWorkflow: kinds are case-sensitive; use kind: DagCronWorkflow" in out


UNQUOTE = " (write it without quotes)"


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("suspend", "yes", "must be true or false, not the string 'yes'" + UNQUOTE),
        ("suspend", "true", "must be true or false, not the string 'true'" + UNQUOTE),
        ("suspend", "no", "must be true or false, not the string 'no'" + UNQUOTE),
        ("suspend", 1, "must be true or false, not 1"),
        ("startingDeadlineSeconds", "3600", "must be an integer, not the string '3600'" + UNQUOTE),
        ("successfulJobsHistoryLimit", "3", "must be an integer, not the string '3'" + UNQUOTE),
        ("failedJobsHistoryLimit", 1.5, "must be an integer, not 1.5"),
    ],
)
def test_cron_fields_are_as_strict_as_the_crd_types_them(tmp_path, field, value, said):
    # kubectl apply refuses a string where the CRD says boolean or integer: so does lint
    f = write(tmp_path / "c.yaml", cron(**{field: value}))
    assert problems(str(f)) == [f"{f}[0] spec.{field}: {said}"]
    if field == "suspend":  # the same value on a DagWorkflow: refused in the same words
        f = write(tmp_path / "w.yaml", workflow(spec={**workflow()["spec"], "suspend": value}))
        assert problems(str(f)) == [f"{f}[0] spec.suspend: {said}"]


def test_every_independent_cron_problem_is_reported_at_once(tmp_path):
    bad = cron(
        schedule="bad",
        timeZone="Nowhere/X",
        concurrencyPolicy="Sometimes",
        workflowSpec={"stages": [stage("a", tasks=0)]},
    )
    f = write(tmp_path / "c.yaml", bad)
    fields = [line.split(" ")[1].rstrip(":") for line in problems(str(f))]
    assert fields == [
        "spec.concurrencyPolicy",
        "spec.timeZone",
        "spec.schedule",
        "spec.workflowSpec.stages[0].tasks",
    ]


def test_pool_problems_are_one_line_per_field_with_no_kubectl_advice(tmp_path):
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
    lines = problems(str(f))
    assert lines[:3] == [
        f"{f}[0] spec.size: must be an integer, not the string '3' (write it without quotes)",
        f"{f}[0] spec.planBudgetMs: Input should be greater than 0",
        f"{f}[0] spec.namespaceSelecter: is not a field here; did you mean namespaceSelector?",
    ]
    assert lines[3].startswith(f"{f}[0] spec.policy: unknown scheduler 'bogus'"), lines
    code, out, _ = lint("--json", str(f))
    fields = [p["field"] for p in json.loads("\n".join(out))["problems"]]
    assert (code, fields) == (
        1,
        ["spec.size", "spec.planBudgetMs", "spec.namespaceSelecter", "spec.policy"],
    )
    assert "kubectl edit" not in "\n".join(out)


def _pool(policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "ExecutorPool",
        "metadata": {"name": "planner"},
        "spec": {"size": 4, "policy": policy},
    }


def test_a_pools_planner_options_are_checked_as_the_operator_does(tmp_path):
    from idlegate.policy import make_scheduler

    cases = {  # policy: the start of its one problem, which the operator's build gives too
        "lookahead?mode=decisionx&bogus=1:analytic:sjf": "the lookahead planner has no "
        "parameter 'bogus'; it takes mode,",
        "lookahead?mode=decisionx:analytic:sjf": "the lookahead planner: mode: Input should be",
        "lookahead?candidates=fair+sjff:sjf": "the lookahead planner's candidate 'sjff': unknown",
        "analytic?bogus=1:sjf": "scheduler 'analytic' has no parameter 'bogus'",
        "lookahead:learned:default?windoww=3": "a learned policy has no parameter 'windoww'",
    }
    for policy, start in cases.items():
        f = write(tmp_path / "p.yaml", _pool(policy))
        lines = problems(str(f))
        assert len(lines) == 1 and lines[0].startswith(f"{f}[0] spec.policy: {start}"), lines
        with pytest.raises(IdlegateError) as built:
            make_scheduler(policy)
        assert start in str(built.value)


def test_a_pools_planner_is_linted_without_its_model_or_history_files(tmp_path):
    policy = (
        "lookahead?mode=decision&futures=conditional&futures_history=/history/history.jsonl"
        ":learned:/models/absent.onnx?window=32"
    )
    f = write(tmp_path / "p.yaml", _pool(policy))
    assert lint(str(f))[0] == 0
