"""Workflow validation messages and the DAG algorithms."""

from __future__ import annotations

import pytest
import yaml

from idlegate.errors import SpecError
from idlegate.sim.dag import Dag
from idlegate.sim.pod_template import load_workflow_file
from idlegate.sim.spec import MAX_STAGES, parse_workflow


def st(name, tasks=1, dur=1.0, deps=(), **kw):
    return {"name": name, "tasks": tasks, "taskDurationSeconds": dur, "dependsOn": list(deps)} | kw


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"stages": []}, "has no stages"),
        ({}, "stages: Field required"),
        ({"stages": [st("a"), st("a")]}, "stage name 'a' appears twice"),
        ({"stages": [st("a", deps=["ghost"])]}, "depends on 'ghost', which is not a stage"),
        (
            {"stages": [st("a", deps=["b"]), st("b", deps=["c"]), st("c", deps=["a"])]},
            "cycle: a -> b -> c -> a",
        ),
        ({"stages": [st("a", deps=["a"])]}, "depends on itself"),
        (
            {"stages": [st("a", tasks=0)]},
            r"stages\[0\].tasks: Input should be greater than or equal to 1",
        ),
        ({"stages": [st("a", dur=0)]}, r"taskDurationSeconds: Input should be greater than 0"),
        ({"stages": [st("a", dur="ten")]}, "must be a number of seconds"),
        ({"stages": [st("a", tasks="3")]}, "tasks: must be an integer, not the string '3'"),
        ({"stages": [st("Bad_Name")]}, "name: 'Bad_Name' must be a DNS label"),
        ({"stages": [st("a", tasks=10**6)]}, "less than or equal to 100000"),
        ({"stages": [st(f"s{i}") for i in range(MAX_STAGES + 1)]}, "at most 100000 items"),
        (
            {"stages": [st("a", colour="red")]},
            "colour: is not a field here; the fields are name, tasks",
        ),
        ([1, 2], "expected a mapping"),
        ({"stages": [st("a", dependson=["b"])]}, r"dependson: .*did you mean dependsOn\?"),
        ({"stages": [st("a")], "podGc": {}}, r"podGc: .*did you mean podGC\?"),
        (
            {"stages": [st("a")], "podGC": "OnPodSuccess"},
            r"podGC: is an object, not a string: write podGC: \{strategy: OnPodSuccess\}",
        ),
        (
            {"stages": [st("a")], "pool": "Team_A"},
            r"pool: 'Team_A' must be a DNS subdomain name \(lower case letters, digits, '-' "
            "and '.'",
        ),
        ({"stages": [st("a")], "suspend": "true"}, "suspend: must be true or false"),
        ({"stages": [st("a", gang=1)]}, "gang: must be true or false, not 1"),
    ],
)
def test_invalid_specs_say_what_is_wrong(doc, message):
    with pytest.raises(SpecError, match=message):
        parse_workflow(doc)


def test_dag_metrics_on_a_diamond():
    dag = Dag.from_spec(
        parse_workflow(
            {
                "stages": [
                    st("a", 2, 1.0),
                    st("b", 3, 2.0, ["a"]),
                    st("c", 1, 5.0, ["a"]),
                    st("d", 2, 1.0, ["b", "c"]),
                ]
            }
        )
    )
    assert dag.topological_order == (0, 1, 2, 3)
    assert dag.bottom_levels == (7.0, 3.0, 6.0, 1.0)
    assert dag.critical_path == 7.0
    assert dag.total_work == 2 + 6 + 5 + 2
    assert dag.average_width == pytest.approx(15 / 7)
    assert dag.depth == 3
    assert dag.parents == ((), (0,), (0,), (1, 2)) and dag.children == ((1, 2), (3,), (3,), ())
    assert dag.lower_bound_jct(1) == 15 and dag.lower_bound_jct(100) == 7


def test_topological_order_is_deterministic_for_out_of_order_specs():
    dag = Dag.from_spec(
        parse_workflow({"stages": [st("z", deps=["y"]), st("y"), st("x", deps=["z"])]})
    )
    assert dag.topological_order == (1, 0, 2)
    assert dag.bottom_levels == (2.0, 3.0, 1.0)


def test_workflow_files(tmp_path):
    (tmp_path / "two.yaml").write_text(
        "stages:\n- {name: a, tasks: 2, taskDurationSeconds: 1}\n---\n"
        "apiVersion: idlegate.io/v1alpha1\nkind: DagWorkflow\nmetadata: {name: w}\n"
        "spec:\n  stages:\n  - {name: b, tasks: 1, taskDurationSeconds: 3}\n"
    )
    specs = load_workflow_file(tmp_path / "two.yaml")
    assert [s.stage_names() for s in specs] == [["a"], ["b"]]
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SpecError, match="is not valid JSON"):
        load_workflow_file(tmp_path / "bad.json")
    with pytest.raises(SpecError, match=r"cannot read the workflow file .* does not exist"):
        load_workflow_file(tmp_path / "missing.yaml")
    (tmp_path / "cr.yaml").write_text(
        "kind: DagWorkflow\nmetadata: {name: broken}\nspec: {stages: [{name: a, tasks: 1, "
        "taskDurationSeconds: 1, dependsOn: [nope]}]}\n"
    )
    with pytest.raises(SpecError, match=r"DagWorkflow broken\): stage 'a' depends on 'nope'"):
        load_workflow_file(tmp_path / "cr.yaml")


def test_every_problem_of_the_dag_is_said_and_lint_puts_each_at_its_stage(tmp_path):
    # (issue 80) the first only was said: a workflow took a run per mistake
    from idlegate.api.lint import lint_paths

    stages = [st("b", deps=["x", "b"]), st("c", deps=["y", "b", "b"]), st("c")]
    with pytest.raises(SpecError) as err:
        parse_workflow({"stages": stages})
    said = str(err.value)
    assert said.startswith("workflow: stage name 'c' appears twice; stage names must be unique; ")
    for part in ("depends on 'x'", "'b' depends on itself", "depends on 'y'", "same dependency"):
        assert said.count(part) == 1, said
    manifest = tmp_path / "w.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "idlegate.io/v1alpha1",
                "kind": "DagWorkflow",
                "metadata": {"name": "w"},
                "spec": {"stages": stages},
            }
        )
    )
    problems = lint_paths([str(manifest)]).problems
    assert [(p.field, p.message.split(";")[0].split(",")[0]) for p in problems] == [
        ("spec.stages[2].name", "stage name 'c' appears twice"),
        ("spec.stages[0].dependsOn", "stage 'b' depends on 'x'"),
        ("spec.stages[0].dependsOn", "stage 'b' depends on itself"),
        ("spec.stages[1].dependsOn", "stage 'c' depends on 'y'"),
        ("spec.stages[1].dependsOn", "stage 'c' lists the same dependency twice in dependsOn"),
    ]
