"""Argo Workflow -> job (idlegate.sim.argo): every example maps or is refused with a reason;
stages, tasks and edges checked by hand on a few; status.nodes settles what only the run
decides; the duration rule."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from idlegate.errors import SpecError
from idlegate.sim.argo import (
    DURATION_ANNOTATION,
    WORKFLOW_KINDS,
    ArgoCondition,
    ArgoRefusal,
    ArgoRefusalReason,
    ObservedNodes,
    is_argo,
    map_workflow,
    node_id,
    template_index,
)
from idlegate.sim.dag import Dag
from idlegate.sim.external import DurationSource
from tests.argo_data import EXAMPLES, all_examples, documents, example, recorded


def edges(job: Any) -> set[tuple[str, str]]:
    return {(d, s.name) for s in job.spec().stages for d in s.depends_on}


def tasks(job: Any) -> dict[str, int]:
    return {s.name: s.tasks for s in job.spec().stages}


# -- every example ------------------------------------------------------------------------


def test_every_example_maps_or_is_refused_with_a_reason():
    docs = all_examples()
    lookup = template_index(d for _, _, d in docs)
    mapped, refused = 0, collections.Counter()
    for where, _, doc in docs:
        if not is_argo(doc) or doc.get("kind") not in WORKFLOW_KINDS:
            continue
        try:
            job = map_workflow(doc, templates=lookup)
        except ArgoRefusal as exc:
            assert exc.reason is not ArgoRefusalReason.INVALID, f"{where}: {exc}"
            assert str(exc), where
            refused[exc.reason] += 1
            continue
        Dag.from_spec(job.spec())  # a job the simulator and the cluster can run
        mapped += 1
    # what the examples hold that a job cannot: recursion, daemons, template libraries
    # without an entrypoint, and workflows that run no pod
    assert set(refused) == {
        ArgoRefusalReason.RECURSION,
        ArgoRefusalReason.DAEMON,
        ArgoRefusalReason.NO_ENTRYPOINT,
        ArgoRefusalReason.NO_PODS,
    }
    assert mapped > 9 * sum(refused.values())


def test_dag_diamond_is_four_stages_and_four_edges():
    job = map_workflow(example("dag-diamond.yaml"))
    assert job.counts == {"stages": 4, "edges": 4, "tasks": 4}
    assert edges(job) == {("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")}
    assert [s.path for s in job.stages] == [".A", ".B", ".C", ".D"]


def test_steps_are_sequential_groups_parallel_within_one():
    job = map_workflow(example("steps.yaml"))
    assert tasks(job) == {"hello1": 1, "hello2a": 1, "hello2b": 1}
    assert edges(job) == {("hello1", "hello2a"), ("hello1", "hello2b")}
    assert job.stage("hello2b").path == "[1].hello2b"


def test_a_loop_is_one_stage_whose_tasks_are_the_items():
    assert tasks(map_workflow(example("loops.yaml"))) == {"print-message-loop": 2}
    job = map_workflow(recorded("dag-loop.yaml"))
    assert tasks(job) == {"b": 2, "c": 2}
    assert edges(job) == {("b", "c")}


def test_a_loop_over_a_nested_template_is_one_copy_per_item_folded_into_stages():
    # dag-diamond-steps: each diamond task runs a steps template looping over 3 items
    job = map_workflow(example("dag-diamond-steps.yaml"))
    assert job.counts == {"stages": 4, "edges": 4, "tasks": 12}
    nested = map_workflow(example("dag-nested.yaml"))
    assert nested.counts["stages"] == 16  # a diamond of diamonds
    # the inner diamond of B waits for the exit of A's inner diamond
    assert ("a-d", "b-a") in edges(nested)


def test_retries_become_the_stages_retries():
    job = map_workflow(example("retry-with-steps.yaml"))
    assert {s.name: s.retries for s in job.stages} == {"hello1": 10, "hello2a": 10, "hello2b": 10}
    assert {s.name: s.backoff_limit for s in job.spec().stages} == {
        "hello1": 10,
        "hello2a": 10,
        "hello2b": 10,
    }


def test_when_makes_a_stage_conditional_and_a_skipped_node_leaves_the_job():
    doc = example("coinflip.yaml")
    job = map_workflow(doc)
    assert {s.name: s.condition for s in job.stages} == {
        "flip-coin": None,
        "heads": ArgoCondition.WHEN,
        "tails": ArgoCondition.WHEN,
    }
    name = "coinflip-x"
    nodes = {
        node_id(name, n): {"id": node_id(name, n), "name": n, "phase": p, "type": t}
        for n, p, t in [
            (name, "Running", "Steps"),
            (f"{name}[0].flip-coin", "Succeeded", "Pod"),
            (f"{name}[1].heads", "Running", "Pod"),
            (f"{name}[1].tails", "Skipped", "Skipped"),
        ]
    }
    nodes[name] = {**nodes.pop(node_id(name, name)), "id": name}
    settled = map_workflow({**doc, "metadata": {"name": name}}, nodes=nodes)
    assert settled.stage("tails").skipped
    assert tasks(settled) == {"flip-coin": 1, "heads": 1}


def test_depends_names_every_task_and_failure_branches_are_conditional():
    doc = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "w"},
        "spec": {
            "entrypoint": "main",
            "templates": [
                {
                    "name": "main",
                    "dag": {
                        "tasks": [
                            {"name": "a", "template": "pod"},
                            {"name": "b-1", "template": "pod"},
                            {"name": "c", "template": "pod", "depends": "a && b-1.Succeeded"},
                            {"name": "fix", "template": "pod", "depends": "a.Failed || c"},
                        ]
                    },
                },
                {"name": "pod", "container": {"image": "busybox"}},
            ],
        },
    }
    job = map_workflow(doc)
    assert edges(job) == {("a", "c"), ("b-1", "c"), ("a", "fix"), ("c", "fix")}
    assert job.stage("c").condition is None
    assert job.stage("fix").condition is ArgoCondition.DEPENDS


def test_with_param_over_an_output_is_settled_by_status_nodes():
    doc = {**example("loops-param-result.yaml"), "metadata": {"name": "lp"}}
    job = map_workflow(doc)
    assert not job.stage("sleep").tasks_known
    assert job.open_questions == {"unknown_fanout": 1, "conditional": 0}
    names = ["lp", "lp[0].generate", "lp[1].sleep(0:20)", "lp[1].sleep(1:21)", "lp[1].sleep(2:22)"]
    nodes = {node_id("lp", n): {"id": node_id("lp", n), "name": n, "type": "Pod"} for n in names}
    nodes["lp"] = {"id": "lp", "name": "lp", "type": "Steps"}
    settled = map_workflow(doc, nodes=nodes)
    assert settled.stage("sleep").tasks == 3
    assert settled.stage("sleep").tasks_known
    assert settled.open_questions["unknown_fanout"] == 0


def test_with_sequence_and_a_literal_with_param_are_known_up_front():
    job = map_workflow(example("loops-sequence.yaml"))
    assert all(s.tasks_known for s in job.stages)
    assert sorted(tasks(job).values()) == [3, 5, 5, 6, 6]


def test_workflow_template_references_need_the_templates():
    ref = example("workflow-template/workflow-template-ref.yaml")
    with pytest.raises(ArgoRefusal) as refused:
        map_workflow(ref)
    assert refused.value.reason is ArgoRefusalReason.MISSING_WORKFLOW_TEMPLATE
    lookup = template_index(
        d for p in sorted((EXAMPLES / "workflow-template").glob("*.yaml")) for d in documents(p)
    )
    job = map_workflow(ref, templates=lookup)
    assert job.template_key == "workflow-template-submittable"
    steps = map_workflow(example("workflow-template/steps.yaml"), templates=lookup)
    assert steps.counts["stages"] == 5  # templateRefs into inner steps, flattened


def test_recursion_and_daemons_are_refused_with_their_reason():
    for name, reason in [
        ("coinflip-recursive.yaml", ArgoRefusalReason.RECURSION),
        ("dag-daemon-task.yaml", ArgoRefusalReason.DAEMON),
        ("http-hello-world.yaml", ArgoRefusalReason.NO_PODS),
    ]:
        with pytest.raises(ArgoRefusal) as refused:
            map_workflow(example(name))
        assert refused.value.reason is reason


def test_parallelism_is_the_jobs():
    job = map_workflow(example("parallelism-limit.yaml"))
    assert job.parallelism == 2
    assert job.spec().parallelism == 2


# -- recorded statuses ------------------------------------------------------------------------


def test_retry_attempts_fold_into_their_stage_with_measured_times():
    doc = recorded("dag_retry_succeeded.yaml")
    observed = ObservedNodes.from_nodes(doc["status"]["nodes"], doc["metadata"]["name"])
    assert [p.phase for p in observed.pods[".step1"]] == ["Failed", "Failed", "Succeeded"]
    assert observed.measured(".step1") == (7.0,)  # 10:23:01 to 10:23:08
    job = map_workflow(doc)
    assert job.stage("step1").retries == 10


def test_recorded_node_ids_are_argos_hash_of_the_node_name():
    doc = recorded("dag-disable-fail-fast.yaml")
    wf = doc["metadata"]["name"]
    for node in doc["status"]["nodes"].values():
        if node["id"] != wf:
            assert node_id(wf, node["name"]) == node["id"]


def test_an_omitted_node_of_a_recorded_run_leaves_the_job():
    doc = recorded("dag-exhausted-retries-xfail.yaml")
    job = map_workflow(doc)
    assert job.stage("success2").skipped
    assert "success2" not in tasks(job)


# -- durations ------------------------------------------------------------------------------------


def _two_stage(annotation: Any = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"name": "pod", "container": {"image": "busybox"}}
    if annotation is not None:
        pod["metadata"] = {"annotations": {DURATION_ANNOTATION: annotation}}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "etl-"},
        "spec": {
            "entrypoint": "main",
            "templates": [
                {
                    "name": "main",
                    "steps": [
                        [{"name": "x", "template": "pod"}],
                        [{"name": "y", "template": "plain"}],
                    ],
                },
                pod,
                {"name": "plain", "container": {"image": "busybox"}},
            ],
        },
    }


def test_a_stage_estimate_comes_from_history_then_annotation_then_prior():
    seen = []

    def history(key: str, stage: str) -> float | None:
        seen.append((key, stage))
        return 42.0 if stage == "y" else None

    job = map_workflow(_two_stage("90"), durations=history, prior=30.0)
    assert seen == [("etl", "x"), ("etl", "y")]
    assert {s.name: (s.duration, s.duration_source) for s in job.stages} == {
        "x": (90.0, DurationSource.ANNOTATION),
        "y": (42.0, DurationSource.HISTORY),
    }
    plain = map_workflow(_two_stage(), prior=30.0)
    assert {s.duration_source for s in plain.stages} == {DurationSource.PRIOR}
    assert {s.task_duration_seconds for s in plain.spec().stages} == {30.0}


def test_a_bad_duration_annotation_is_an_error_naming_it():
    with pytest.raises(SpecError) as bad:
        map_workflow(_two_stage("soon"))
    assert not isinstance(bad.value, ArgoRefusal)
    assert DURATION_ANNOTATION in str(bad.value)


def test_a_workflow_of_thousands_of_steps_is_mapped_not_refused():
    # Argo runs it, so idlegate orders it: once 500 stages were refused (issue 61)
    n = 2000
    tasks = [
        {"name": f"t{i}", "template": "pod", **({"dependencies": [f"t{i - 1}"]} if i else {})}
        for i in range(n)
    ]
    job = map_workflow(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "metadata": {"name": "big"},
            "spec": {
                "entrypoint": "main",
                "templates": [
                    {"name": "main", "dag": {"tasks": tasks}},
                    {"name": "pod", "container": {"image": "busybox"}},
                ],
            },
        }
    )
    dag = Dag.from_spec(job.spec())
    assert dag.num_stages == n and dag.depth == n
