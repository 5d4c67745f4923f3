"""Offline checks of the DagWorkflow CRD in deploy/: it is the generator's output, its schema
is structural and accepts and rejects what the operator's model does (jsonschema for the
schema, `cel-python` for its CEL rules), and the sample workflows pass it.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from idlegate.api import crd, kinds
from idlegate.api.lint import lint_paths
from idlegate.api.status import (
    MAX_CR_STAGES,
    Condition,
    FirstForecastState,
    IdleSlot,
    Phase,
    StageStatus,
    WorkflowStatus,
)
from idlegate.errors import SpecError
from idlegate.sim.spec import StageSpec, WorkflowSpec, parse_workflow
from tests.deploy_files import (
    BASE,
    CLEANUP_SAMPLE,
    INVALID_SAMPLE,
    KIND_UP,
    RIGID_SAMPLE,
    ROOT,
    SAMPLES,
    VALID_SAMPLES,
    committed_crd,
    load_all,
    load_yaml,
    sample_files,
    sample_workflows,
    samples,
)


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    (version,) = committed_crd()["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


# -- the generator ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(crd.KINDS))
def test_committed_crds_are_the_generators_output(kind: str):
    path = crd.KINDS[kind].path
    committed = (ROOT / path).read_text()
    assert committed == crd.render_crd_yaml(kind), (
        f"{path} is out of date with the pydantic models; regenerate it with:\n"
        f"    {crd.regenerate_command(kind)}"
    )


def test_generator_runs_without_kopf_or_kubernetes():
    # the generator (and CI's check) must not need the operator extra
    code = (
        "import sys, runpy\n"
        "sys.modules['kopf'] = None\n"
        "sys.modules['kubernetes'] = None\n"
        "sys.argv = ['crd']\n"
        "runpy.run_module('idlegate.api.crd', run_name='__main__', alter_sys=True)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout == (BASE / "crd.yaml").read_text()


def test_generator_check_mode(tmp_path, capsys):
    assert crd.main(["--check", str(BASE / "crd.yaml")]) == 0
    stale = tmp_path / "crd.yaml"
    stale.write_text((BASE / "crd.yaml").read_text().replace("maxItems: 8000", "maxItems: 5"))
    assert crd.main(["--check", str(stale)]) == 1
    assert crd.REGENERATE_COMMAND in capsys.readouterr().err


def test_crd_names_and_version():
    spec = committed_crd()["spec"]
    assert committed_crd()["metadata"]["name"] == "dagworkflows.idlegate.io"
    assert spec["group"] == "idlegate.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "kind": "DagWorkflow",
        "listKind": "DagWorkflowList",
        "plural": "dagworkflows",
        "singular": "dagworkflow",
        "shortNames": ["dwf"],
        "categories": ["idlegate"],
    }
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_printer_columns():
    columns = {
        c["name"]: c for c in committed_crd()["spec"]["versions"][0]["additionalPrinterColumns"]
    }
    assert list(columns) == [
        "Phase", "Suspended", "Stages", "JCT", "Idle", "Policy", "Start", "Finish", "Age"
    ]  # fmt: skip
    assert columns["Phase"]["jsonPath"] == ".status.phase"
    assert (columns["Suspended"]["jsonPath"], columns["Suspended"]["type"]) == (
        ".spec.suspend",
        "boolean",
    )
    assert (columns["Stages"]["jsonPath"], columns["Stages"]["type"]) == (
        ".status.stagesSummary",
        "string",
    )
    assert columns["JCT"]["jsonPath"] == ".status.jctSeconds"
    assert columns["Idle"]["jsonPath"] == ".status.idleInsertedSeconds"
    assert columns["Policy"]["jsonPath"] == ".status.policy"
    # what happened, else the forecast, as text: a date column would print an age, and
    # "<invalid>" for a time ahead
    for name, field in (("Start", "start"), ("Finish", "finish")):
        assert (columns[name]["jsonPath"], columns[name]["type"]) == (
            f".status.{field}Summary",
            "string",
        )
    assert (columns["Age"]["jsonPath"], columns["Age"]["type"]) == (
        ".metadata.creationTimestamp",
        "date",
    )


def _field(schema: dict[str, Any], json_path: str) -> dict[str, Any]:
    """The schema node a printer column's dotted jsonPath (``.spec.suspend``) reads."""
    node = schema
    for key in json_path.strip(".").split("."):
        node = node["properties"][key]
    return node


FUTURE_TIMES = {".status.nextScheduleTime"}
"""Times ahead of now: a ``date`` column prints the age (time since), which they have not."""


@pytest.mark.parametrize("kind", sorted(crd.KINDS))
def test_printer_columns_read_as_meant(kind):
    rendered = crd.render_crd(kind)["spec"]["versions"][0]
    schema = rendered["schema"]["openAPIV3Schema"]
    for column in rendered["additionalPrinterColumns"]:
        path = column["jsonPath"]
        if column["type"] == "date":
            assert path not in FUTURE_TIMES, f"{column['name']}: a time ahead shown as an age"
        if path.startswith(".spec.") and column["type"] == "boolean":
            # the API server applies the default, so an unset flag shows false, not <none>
            assert _field(schema, path)["default"] is False, column["name"]
    if kind == kinds.CRON_KIND:
        (nxt,) = [c for c in rendered["additionalPrinterColumns"] if c["name"] == "Next"]
        assert (nxt["jsonPath"], nxt["type"]) == (".status.nextScheduleTime", "string")
        assert _field(schema, nxt["jsonPath"])["format"] == "date-time"


# -- the schema is structural ----------------------------------------------------------------

_NOT_STRUCTURAL = ("$ref", "$defs", "definitions", "anyOf", "oneOf", "allOf", "not", "const")


def structural_problems(node: dict[str, Any], path: str = "") -> list[str]:
    """What keeps a schema from being structural (or from passing CEL cost estimates)."""
    problems = [f"{path or '<root>'}: {key}" for key in _NOT_STRUCTURAL if key in node]
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    if "type" not in node and not node.get("x-kubernetes-int-or-string") and not preserve:
        problems.append(f"{path}: no type")
    if node.get("additionalProperties") is False:
        problems.append(f"{path}: additionalProperties: false is forbidden")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties and additionalProperties together")
    if node.get("uniqueItems"):
        problems.append(f"{path}: uniqueItems (use x-kubernetes-list-type: set)")
    for key in ("exclusiveMinimum", "exclusiveMaximum"):
        if key in node and not isinstance(node[key], bool):
            problems.append(f"{path}: {key} must be a boolean in OpenAPI v3.0")
    if node.get("type") == "array":
        if "items" not in node:
            problems.append(f"{path}: array without items")
        if "maxItems" not in node:
            problems.append(f"{path}: array without maxItems (CEL cost estimates)")
    bare = "properties" not in node and "additionalProperties" not in node
    if node.get("type") == "object" and not preserve and bare and path != ".metadata":
        problems.append(f"{path}: object without properties would prune everything")
    if node.get("x-kubernetes-list-type") == "map":
        keys = node.get("x-kubernetes-list-map-keys") or []
        required = set(node.get("items", {}).get("required", []))
        if not keys or not set(keys) <= required:
            problems.append(f"{path}: list-map keys {keys} must be required fields")
    for name, sub in (node.get("properties") or {}).items():
        problems += structural_problems(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        problems += structural_problems(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        problems += structural_problems(node["additionalProperties"], f"{path}{{}}")
    return problems


def test_schema_is_structural(schema):
    assert structural_problems(schema) == []
    assert schema["properties"]["metadata"] == {"type": "object"}  # all a CRD may say of it


def test_structural_walker_catches_pydantic_output():
    # the walker is what guards the conversion: raw pydantic output must fail it
    raw = WorkflowSpec.model_json_schema(by_alias=True)
    problems = structural_problems(raw)
    assert any("$ref" in p for p in problems)
    assert any("anyOf" in p for p in problems) or any("no type" in p for p in problems)


def test_strings_are_bounded(schema):
    # CEL's cost estimator multiplies by string lengths: every string it may see is bounded
    def walk(node: dict[str, Any], path: str) -> Iterator[str]:
        if node.get("type") == "string" and not (
            "maxLength" in node or "enum" in node or node.get("format") == "date-time"
        ):
            yield path
        for name, sub in (node.get("properties") or {}).items():
            yield from walk(sub, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            yield from walk(node["items"], f"{path}[]")

    assert list(walk(schema["properties"]["spec"], ".spec")) == []
    assert list(walk(schema["properties"]["status"], ".status")) == []


def test_spec_schema_follows_the_model(schema):
    spec = schema["properties"]["spec"]
    assert spec["required"] == ["stages"]
    stages = spec["properties"]["stages"]
    assert (stages["minItems"], stages["maxItems"]) == (1, MAX_CR_STAGES)
    stage = stages["items"]
    aliases = [f.alias or name for name, f in StageSpec.model_fields.items()]
    assert list(stage["properties"]) == aliases
    assert set(stage["required"]) == {"name", "tasks", "taskDurationSeconds"}
    props = stage["properties"]
    assert props["tasks"]["type"] == "integer" and props["tasks"]["minimum"] == 1
    duration = props["taskDurationSeconds"]
    assert (duration["type"], duration["minimum"], duration["exclusiveMinimum"]) == (
        "number",
        0,
        True,
    )
    assert props["name"]["pattern"] == StageSpec.model_fields["name"].metadata[-1].pattern
    assert props["template"]["x-kubernetes-preserve-unknown-fields"] is True
    assert props["template"]["type"] == "object"
    assert props["dependsOn"]["x-kubernetes-list-type"] == "set"
    assert stages["x-kubernetes-list-type"] == "map"
    assert stages["x-kubernetes-list-map-keys"] == ["name"]
    for name, field in StageSpec.model_fields.items():
        assert props[field.alias or name].get("description"), f"{name} has no description"


def test_status_schema(schema):
    status = schema["properties"]["status"]
    props = status["properties"]
    assert props["phase"]["enum"] == [
        "Pending",
        "Running",
        "Suspended",
        "Succeeded",
        "Failed",
        "Invalid",
    ]
    for name in (
        "observedGeneration",
        "conditions",
        "stagesTotal",
        "stagesDone",
        "stagesSummary",
        "stages",
        "idleSlots",
        "startTime",
        "completionTime",
        "jctSeconds",
        "idleInsertedSeconds",
    ):
        assert name in props, name
    condition = props["conditions"]["items"]
    assert set(condition["required"]) == {
        "type",
        "status",
        "lastTransitionTime",
        "reason",
        "message",
    }
    assert set(condition["properties"]) == set(condition["required"]) | {"observedGeneration"}
    assert condition["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert props["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert set(props["stages"]["items"]["properties"]) >= {
        "name",
        "pending",
        "running",
        "succeeded",
        "failed",
    }
    assert set(props["idleSlots"]["items"]["required"]) == {"stage", "releaseTime", "delaySeconds"}
    # kopf keeps its handler progress in status.kopf: it must survive pruning
    assert props["kopf"] == {
        "description": props["kopf"]["description"],
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert "x-kubernetes-preserve-unknown-fields" not in status  # typos in status get pruned


# -- validating objects as the API server would (schema, list types, CEL) -----------------------


def to_json_schema(node: Any) -> Any:
    """OpenAPI v3.0 flavour -> JSON Schema draft 4 (nullable; x-kubernetes-* dropped)."""
    if isinstance(node, list):
        return [to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {k: to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = to_json_schema(value)
        elif not key.startswith("x-kubernetes-") and key not in ("nullable", "default"):
            out[key] = value
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def list_type_problems(value: Any, node: dict[str, Any], path: str = "") -> list[str]:
    """Duplicates in x-kubernetes-list-type set/map lists (the API server rejects them)."""
    problems = []
    if isinstance(value, list):
        kind = node.get("x-kubernetes-list-type")
        if kind == "set":
            keys = [repr(v) for v in value]
        elif kind == "map":
            keys = [repr([v.get(k) for k in node["x-kubernetes-list-map-keys"]]) for v in value]
        else:
            keys = []
        duplicates = {k for k in keys if keys.count(k) > 1}
        problems += [f"{path}: Duplicate value {k}" for k in sorted(duplicates)]
        for i, item in enumerate(value):
            if isinstance(node.get("items"), dict):
                problems += list_type_problems(item, node["items"], f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, sub in value.items():
            if key in (node.get("properties") or {}):
                problems += list_type_problems(sub, node["properties"][key], f"{path}.{key}")
    return problems


def cel_rules(node: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple, dict]]:
    """(path, rule) of every x-kubernetes-validations rule; "[]" in a path steps into items."""
    for rule in node.get("x-kubernetes-validations", []):
        yield path, rule
    for name, sub in (node.get("properties") or {}).items():
        yield from cel_rules(sub, (*path, name))
    if isinstance(node.get("items"), dict):
        yield from cel_rules(node["items"], (*path, "[]"))


def values_at(value: Any, path: tuple[str, ...]) -> Iterator[Any]:
    if not path:
        yield value
    elif path[0] == "[]":
        for item in value if isinstance(value, list) else []:
            yield from values_at(item, path[1:])
    elif isinstance(value, dict) and path[0] in value:
        yield from values_at(value[path[0]], path[1:])


@cache
def _cel_program(rule: str) -> Any:
    celpy = pytest.importorskip("celpy", reason="cel-python is not installed")
    env = celpy.Environment()
    return env.program(env.compile(rule))


def cel_problems(obj: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    celpy = pytest.importorskip("celpy", reason="cel-python is not installed")
    problems = []
    for path, rule in cel_rules(schema):
        program = _cel_program(rule["rule"])
        for value in values_at(obj, path):
            result = program.evaluate({"self": celpy.json_to_cel(value)})
            if result is not True and not (isinstance(result, celpy.celtypes.BoolType) and result):
                problems.append(f"{'.'.join(path)}: {rule['message']}")
    return problems


def api_server_problems(obj: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Schema errors, duplicate list entries and failed CEL rules of a DagWorkflow object."""
    validator = jsonschema.Draft4Validator(to_json_schema(schema))
    problems = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)
    ]
    problems += list_type_problems(obj, schema)
    if not problems:  # CEL runs on schema-valid objects only
        problems += cel_problems(obj, schema)
    return problems


def test_cel_rules_compile(schema):
    pytest.importorskip("celpy", reason="cel-python is not installed")
    rules = list(cel_rules(schema))
    assert len(rules) >= 3
    for path, rule in rules:
        assert rule["message"], path
        _cel_program(rule["rule"])  # raises on a syntax error


@pytest.mark.parametrize("name", VALID_SAMPLES)
def test_valid_samples_pass_the_crd_and_the_model(name, schema):
    sample = samples()[name]
    assert (sample["apiVersion"], sample["kind"]) == ("idlegate.io/v1alpha1", "DagWorkflow")
    assert api_server_problems(sample, schema) == []
    spec = parse_workflow(sample["spec"], name)
    assert len(spec.stages) >= 4


def test_invalid_sample_passes_admission_but_not_the_operators_validation(schema):
    sample = samples()[INVALID_SAMPLE]
    # the API server takes it (so the operator, not kubectl, must report it) ...
    assert api_server_problems(sample, schema) == []
    # ... and the operator's validation (the simulator's spec model) rejects it: a cycle
    with pytest.raises(SpecError, match=r"cycle: clean -> report -> enrich -> clean"):
        parse_workflow(sample["spec"], INVALID_SAMPLE)


def test_samples_are_all_accounted_for():
    assert set(sample_files()) == {*VALID_SAMPLES, RIGID_SAMPLE, CLEANUP_SAMPLE, INVALID_SAMPLE}
    # deploy/kind-up.sh expects lint to fail exactly on the samples named invalid-*
    assert [n for n in sample_files() if n.startswith("invalid-")] == [INVALID_SAMPLE]


def test_rigid_sample_is_gang_jobs_that_show_backfilling(schema):
    from idlegate.policy import make_scheduler
    from idlegate.sim.engine import simulate
    from idlegate.sim.workloads import build_workload

    docs = sample_files()[RIGID_SAMPLE]
    for doc in docs:
        assert api_server_problems(doc, schema) == []
        (stage,) = parse_workflow(doc["spec"], doc["metadata"]["name"]).stages
        assert stage.gang and stage.tasks > 1
    report = lint_paths([str(SAMPLES / RIGID_SAMPLE)])
    assert report.problems == [] and (report.workflows, report.invalid) == (len(docs), 0)
    # the story its header tells, on the base's pool (--pool-size=8)
    args = load_yaml(BASE / "deployment.yaml")["spec"]["template"]["spec"]["containers"][0]["args"]
    pool = next(int(a.split("=", 1)[1]) for a in args if a.startswith("--pool-size="))
    workload = build_workload("file", 0, path=str(SAMPLES / RIGID_SAMPLE), num_executors=pool)

    def starts(spec: str) -> dict[str, float]:
        result = simulate(workload, make_scheduler(spec), seed=0)
        return {r.name.rsplit("-", 1)[0]: r.first_start for r in result.records}

    easy, strict = starts("easy:fcfs"), starts("fcfs")
    assert easy["rigid-small"] < easy["rigid-wide-b"] <= easy["rigid-long"]
    assert easy["rigid-wide-b"] == strict["rigid-wide-b"]  # backfilling did not delay it
    assert strict["rigid-small"] > strict["rigid-wide-b"]  # without it, small waits


def test_cleanup_sample_sets_every_lifecycle_field(schema):
    sample = samples()[CLEANUP_SAMPLE]
    assert api_server_problems(sample, schema) == []
    spec = parse_workflow(sample["spec"], CLEANUP_SAMPLE)
    assert spec.ttl_seconds_after_finished == 3600 and spec.active_deadline_seconds == 600
    assert spec.pod_gc is not None and spec.pod_gc.strategy == "OnPodSuccess"
    assert spec.suspend is False and "suspend" in sample["spec"]
    report = lint_paths([str(SAMPLES / CLEANUP_SAMPLE)])
    assert report.problems == [] and (report.workflows, report.invalid) == (1, 0)
    bad = copy.deepcopy(sample)
    bad["spec"]["podGC"] = {"strategy": "OnSundays"}
    assert api_server_problems(bad, schema)  # the enum is in the CRD


@pytest.mark.parametrize("name", VALID_SAMPLES)
def test_valid_samples_lint_clean(name):
    report = lint_paths([str(SAMPLES / name)])
    assert report.problems == [] and report.notes == []
    assert (report.workflows, report.invalid) == (1, 0)


def test_samples_directory_lints_clean_except_the_invalid_sample():
    # the command as a user (and deploy/README.md) runs it
    out = subprocess.run(
        [sys.executable, "-m", "idlegate", "lint", "--json", "deploy/samples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    problems = [(p["file"], p["document"], p["field"]) for p in report["problems"]]
    # the cycle: its first stage's dependsOn
    assert problems == [(f"deploy/samples/{INVALID_SAMPLE}", 0, "spec.stages[1].dependsOn")]
    workflows = len(sample_workflows()) + 2 + 1 + 4  # + pools/'s 2 workflows, the cron, 4 pools
    files = len(sample_files()) + 3  # + cron/, pools/ (2)
    assert (report["files"], report["workflows"], report["invalid"]) == (files, workflows, 1)


def _diamond() -> dict[str, Any]:
    return copy.deepcopy(samples()["diamond.yaml"])


def _stage(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in obj["spec"]["stages"] if s["name"] == name)


def _set(obj: dict[str, Any], stage: str, field: str, value: Any) -> dict[str, Any]:
    _stage(obj, stage)[field] = value
    return obj


# Each mutation breaks the spec: the CRD (at admission) and the model must both reject it.
MUTATIONS = {
    "no stages": lambda o: o["spec"].update(stages=[]) or o,
    "zero tasks": lambda o: _set(o, "left", "tasks", 0),
    "fractional tasks": lambda o: _set(o, "left", "tasks", 1.5),
    "too many tasks": lambda o: _set(o, "left", "tasks", 100_001),
    "zero duration": lambda o: _set(o, "left", "taskDurationSeconds", 0),
    "negative duration": lambda o: _set(o, "left", "taskDurationSeconds", -1),
    "duration as text": lambda o: _set(o, "left", "taskDurationSeconds", "10"),
    "upper-case name": lambda o: _set(o, "left", "name", "Left"),
    "long name": lambda o: _set(o, "merge", "name", "m" * 41),
    "negative backoff": lambda o: _set(o, "left", "backoffLimit", -1),
    "gang as text": lambda o: _set(o, "left", "gang", "yes"),
    "duplicate stage": lambda o: _set(o, "left", "name", "right"),
    "duplicate dependency": lambda o: _set(o, "merge", "dependsOn", ["left", "left"]),
    "self dependency": lambda o: _set(o, "merge", "dependsOn", ["left", "merge"]),
    "no root stage": lambda o: _set(o, "extract", "dependsOn", ["merge"]),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_crd_and_model_reject_the_same_broken_specs(mutation, schema):
    obj = MUTATIONS[mutation](_diamond())
    if mutation in ("self dependency", "no root stage"):
        pytest.importorskip("celpy", reason="cel-python is not installed (CEL rules)")
    assert api_server_problems(obj, schema), f"the CRD accepts a spec with {mutation}"
    with pytest.raises(SpecError):
        parse_workflow(obj["spec"], mutation)


def test_workflow_name_fits_a_label_value(schema):
    pytest.importorskip("celpy", reason="cel-python is not installed")
    obj = _diamond()
    obj["metadata"]["name"] = "w" * 63
    assert api_server_problems(obj, schema) == []
    obj["metadata"]["name"] = "w" * 64
    assert any("63 characters" in p for p in api_server_problems(obj, schema))


def test_kind_up_self_dependency_probe_is_rejected_by_cel(schema):
    # the smoke test expects the API server to reject this object with the rule's message
    text = KIND_UP.read_text()
    match = re.search(r"self_dependent='(.*?)'\n", text, re.S)
    assert match, "kind-up.sh lost its CEL smoke probe"
    problems = api_server_problems(yaml.safe_load(match.group(1)), schema)
    assert problems and all("cannot depend on itself" in p for p in problems)


def test_status_written_with_the_model_survives_the_schema(schema):
    # the operator writes WorkflowStatus(...).model_dump(mode="json", by_alias=True,
    # exclude_none=True): all of it must validate and nothing may be pruned
    now = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    status = WorkflowStatus(
        observed_generation=1,
        phase=Phase.SUCCEEDED,
        conditions=[
            Condition(
                type="Complete",
                status="True",
                reason="AllStagesSucceeded",
                message="4/4 stages succeeded",
                last_transition_time=now,
                observed_generation=1,
            )
        ],
        stages_total=4,
        stages_done=4,
        stages_summary="4/4",
        stages=[StageStatus(name="extract", tasks=2, succeeded=2)],
        parallelism_cap=3,
        idle_slots=[
            IdleSlot(
                stage="right", delay_seconds=2.5, release_time=now, released=True, reason="policy"
            )
        ],
        start_time=now,
        completion_time=now,
        jct_seconds=21.5,
        idle_inserted_seconds=2.5,
        first_forecast=FirstForecastState(
            computed_at=now,
            start=now,
            start_interval=[now, now],
            start_replayed=[now, now],
            finish=now,
            finish_interval=[now, now],
            finish_replayed=[now, now],
            started_at=now,
        ),
        kopf={"progress": {"create_fn": {"started": "2024-05-01T12:00:00Z", "retries": 0}}},
    ).model_dump(mode="json", by_alias=True, exclude_none=True)
    obj = {**_diamond(), "status": status}
    assert api_server_problems(obj, schema) == []

    def undeclared(value: Any, node: dict[str, Any], path: str) -> Iterator[str]:
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return
        if isinstance(value, dict):
            for key, sub in value.items():
                if key not in node.get("properties", {}):
                    yield f"{path}.{key}"
                else:
                    yield from undeclared(sub, node["properties"][key], f"{path}.{key}")
        elif isinstance(value, list):
            for item in value:
                yield from undeclared(item, node["items"], f"{path}[]")

    assert list(undeclared(status, schema["properties"]["status"], ".status")) == []
    bad = {**obj, "status": {**status, "phase": "Done"}}
    assert api_server_problems(bad, schema)


# -- the converter ---------------------------------------------------------------------------


def test_converter_handles_optional_unions_and_bounds():
    class Inner(BaseModel):
        size: int = 1

    class Model(BaseModel):
        a: int | None = None
        b: float = 0
        inner: Inner | None = None
        tags: frozenset[str] = frozenset()

    nullable = crd.structural_schema(Model)
    assert nullable["properties"]["a"] == {"type": "integer", "nullable": True}
    assert nullable["properties"]["inner"]["properties"]["size"]["default"] == 1
    assert nullable["properties"]["tags"]["x-kubernetes-list-type"] == "set"
    absent = crd.structural_schema(Model, nullable_optionals=False)
    assert absent["properties"]["a"] == {"type": "integer"}
    assert structural_problems({**absent, "properties": {"a": absent["properties"]["a"]}}) == []


def test_converter_refuses_what_kubernetes_cannot_express():
    class Either(BaseModel):
        value: int | str

    class Node(BaseModel):
        children: list[Node] = []

    with pytest.raises(ValueError, match="anyOf of 2 non-null schemas"):
        crd.structural_schema(Either)
    with pytest.raises(ValueError, match="recursive model"):
        crd.structural_schema(Node)


def test_the_cron_sample_passes_its_crd_lint_and_the_model():
    from idlegate.api.cron_spec import parse_cron_spec

    path = SAMPLES / "cron" / "nightly-report.yaml"
    (sample,) = load_all(path)
    cron_schema = load_yaml(BASE / "cron-crd.yaml")["spec"]["versions"][0]["schema"]
    assert api_server_problems(sample, cron_schema["openAPIV3Schema"]) == []
    spec = parse_cron_spec(sample["spec"], path.name)
    assert spec.concurrency_policy == "Forbid" and spec.time_zone == "Europe/Berlin"
    assert lint_paths([str(path)]).ok


def test_the_pools_sample_passes_its_crd_lint_and_the_model():
    from idlegate.api.pool_spec import parse_pool_spec, pool_problems, route

    path = SAMPLES / "pools" / "team-pools.yaml"
    *pools, pinned = load_all(path)
    pool_schema = load_yaml(BASE / "pool-crd.yaml")["spec"]["versions"][0]["schema"]
    specs = []
    for pool in pools:
        assert api_server_problems(pool, pool_schema["openAPIV3Schema"]) == []
        assert pool_problems(pool) == []
        specs.append((pool["metadata"]["name"], parse_pool_spec(pool["spec"], "sample")))
    assert {n for n, s in specs if s.namespace_selector is None} == {"interactive"}
    # the routing its header and deploy/README.md describe
    assert route(None, {"team": "analytics"}, specs) == "analytics"
    assert route(None, {"team": "analytics", "env": "dev"}, specs) == "default"
    wanted = parse_workflow(pinned["spec"], "sample").pool
    assert route(wanted, {"team": "analytics"}, specs) == "interactive"
    report = lint_paths([str(path)])
    assert report.ok and (report.pools, report.workflows - report.pools) == (2, 1)


def test_the_resource_pools_sample_passes_its_crd_lint_and_the_model(tmp_path):
    # a pool of each kind of capacity (docs/resources.md): a fixed ResourceList and the
    # nodes a label selector picks; the workflow it pins runs as its comments say
    from dataclasses import replace

    from idlegate.api.pool_spec import parse_pool_spec, pool_problems
    from idlegate.policy import make_scheduler
    from idlegate.sim.engine import simulate
    from idlegate.sim.workloads import build_workload

    path = SAMPLES / "pools" / "resource-pools.yaml"
    *pools, sized = load_all(path)
    pool_schema = load_yaml(BASE / "pool-crd.yaml")["spec"]["versions"][0]["schema"]
    specs = {}
    for pool in pools:
        assert api_server_problems(pool, pool_schema["openAPIV3Schema"]) == []
        assert pool_problems(pool) == []
        specs[pool["metadata"]["name"]] = parse_pool_spec(pool["spec"], "sample")
    quota, nodes = specs["batch-quota"], specs["batch-nodes"]
    capacity = quota.capacity
    assert capacity is not None and quota.node_selector is None
    assert nodes.resources is None and nodes.node_selector is not None
    assert nodes.node_selector.match_labels == {"pool": "batch"}
    spec = parse_workflow(sized["spec"], "sample")
    assert spec.pool == "batch-quota" and all(s.resources for s in spec.stages)
    report = lint_paths([str(path)], pool_resources=capacity)
    assert report.ok and (report.pools, report.workflows - report.pools) == (2, 1)
    # on the pool: extract's 1-CPU tasks 4 at a time, transform's 16 of 250m at once
    bare = tmp_path / "sized-etl.yaml"
    bare.write_text(yaml.safe_dump({"stages": sized["spec"]["stages"]}))
    pods = capacity["pods"] // 1000
    workload = build_workload("file", 0, path=str(bare), num_executors=pods)
    workload = replace(workload, resources=capacity.restricted(["cpu", "memory"]))
    tasks = simulate(workload, make_scheduler("fifo"), record_tasks=True).tasks
    assert tasks is not None

    def most_at_once(stage: int) -> int:
        runs = [t for t in tasks if t.stage == stage]
        return max(sum(r.start <= t.start < r.end for r in runs) for t in runs)

    assert (most_at_once(0), most_at_once(1)) == (4, 16)


def test_the_readme_shows_the_pools_sample_as_it_is():
    # its snippet said forecastArrivals: queues with queues the sample has not
    text = (ROOT / "deploy" / "README.md").read_text()
    intro = "`samples/pools/team-pools.yaml` (apply it"
    snippet = text.split(intro, 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    shown = list(yaml.safe_load_all(snippet))
    sample = load_all(SAMPLES / "pools" / "team-pools.yaml")
    assert shown[-1]["spec"].pop("stages") == ["..."]  # (the snippet elides the stages)
    sample[-1]["spec"].pop("stages")
    assert shown == sample


def test_the_readme_documents_every_pool_field():
    from idlegate.api.pool_spec import ExecutorPoolSpec, ExecutorPoolStatus, LabelSelector

    text = (ROOT / "deploy" / "README.md").read_text()
    section = text.split("### Executor pools", 1)[1].split("\n## ", 1)[0]
    for model in (ExecutorPoolSpec, LabelSelector):
        for name, field in model.model_fields.items():
            assert f"{field.alias or name}:" in section, name
    for name, field in ExecutorPoolStatus.model_fields.items():
        assert f"`status.{field.alias or name}" in section, name
    for operator in ("In", "NotIn", "Exists", "DoesNotExist", "PoolNotFound", "spec.pool"):
        assert operator in section


def test_the_per_stage_rule_stays_within_kubernetes_cel_cost_limit(schema):
    # The API server refuses a CRD whose rule's estimated cost (times the items it runs on)
    # exceeds 10,000,000 (apiextensions' StaticEstimatedCostLimit). `x in list` costs the
    # list's maxItems; the rest of the rule (has, !, ||, two selections) about 5.
    stages = schema["properties"]["spec"]["properties"]["stages"]
    depends_on = stages["items"]["properties"]["dependsOn"]
    [rule] = [r["rule"] for r in stages["items"]["x-kubernetes-validations"]]
    assert " in self.dependsOn" in rule
    assert stages["maxItems"] * (depends_on["maxItems"] + 5) <= 10_000_000
