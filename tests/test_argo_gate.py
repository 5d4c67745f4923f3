"""The gate on Argo's pods: what the admission webhook adds to which pod
(idlegate.api.argo_pods), and the kopf handler that serves it (operator/handlers/pods.py)."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import kopf
import pytest
from kopf._core.engines.admission import build_webhooks

from idlegate.api.argo_pods import (
    NODE_ID,
    NODE_NAME,
    WORKFLOW_LABEL,
    ArgoPod,
    gates_with_ours,
)
from idlegate.api.labels import GATE
from idlegate.api.settings import Settings
from idlegate.api.task_pods import release_patch
from idlegate.operator.features import argo
from idlegate.operator.main import build_registry
from idlegate.operator.runtime import Operator
from tests.deploy_files import DEPLOY, load_all
from tests.operator_fakes import FakeClock

T0 = 1_700_000_000.0
CREATED = "2023-11-14T22:13:20Z"
"""T0 as the API server writes it."""


def argo_pod(gates: list[str] | None = None, *, node: str | None = "wf-1.extract") -> dict:
    """A node's pod as Argo's controller creates it (the parts the gate looks at)."""
    annotations = {NODE_ID: "wf-1-2093436122"}
    if node is not None:
        annotations[NODE_NAME] = node
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "wf-1-2093436122",
            "namespace": "etl",
            "labels": {WORKFLOW_LABEL: "wf-1"},
            "annotations": annotations,
        },
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    if gates is not None:
        pod["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return pod


def test_a_nodes_pod_gets_idlegates_gate():
    assert gates_with_ours(argo_pod()) == [{"name": GATE}]
    assert gates_with_ours(argo_pod([])) == [{"name": GATE}]


def test_other_gates_are_kept_and_ours_comes_last():
    assert gates_with_ours(argo_pod(["kueue.x-k8s.io/admission"])) == [
        {"name": "kueue.x-k8s.io/admission"},
        {"name": GATE},
    ]


def test_the_gate_is_added_once():
    pod = argo_pod()
    pod["spec"]["schedulingGates"] = gates_with_ours(pod)
    assert gates_with_ours(pod) is None
    assert gates_with_ours(argo_pod(["other", GATE])) is None


def test_pods_that_are_no_nodes_pods_are_left_alone():
    plain = argo_pod()
    del plain["metadata"]["labels"][WORKFLOW_LABEL]
    assert gates_with_ours(plain) is None
    # Argo's agent pod (http and plugin templates) has the workflow label but no node
    assert gates_with_ours(argo_pod(node=None)) is None
    assert gates_with_ours({"metadata": None, "spec": None}) is None


def test_argo_pod_reads_workflow_node_and_gate():
    pod = argo_pod([GATE])
    pod["status"] = {"phase": "Pending"}
    found = ArgoPod.of(pod)
    assert found is not None
    assert (found.namespace, found.name, found.workflow) == ("etl", "wf-1-2093436122", "wf-1")
    assert (found.node_name, found.node_id, found.gated) == (
        "wf-1.extract",
        "wf-1-2093436122",
        True,
    )
    assert (found.task_key, found.stage_key, found.executor) == (".extract", ".extract", None)
    assert ArgoPod.of(argo_pod(["other"])).gated is False
    assert ArgoPod.of(argo_pod(node=None)) is None


@pytest.mark.parametrize(
    ("node", "task", "stage"),
    [
        ("wf-1.b(2:x)", ".b(2)", ".b"),  # a fan-out item
        ("wf-1.a(1)", ".a", ".a"),  # a retry attempt
        ('wf-1.a(0:{"k":1})(3)', ".a(0)", ".a"),  # an item's retry attempt
        ("wf-1.B(1:y).C", ".B(1).C", ".B(1).C"),  # a task in copy 1 of a looped DAG
        ("wf-1[1].hello2b", "[1].hello2b", "[1].hello2b"),  # a step
        ("other.a", None, None),  # not under the workflow's node
    ],
)
def test_a_pods_node_name_finds_its_task_and_stage(node, task, stage):
    pod = ArgoPod.of(argo_pod(node=node))
    assert (pod.task_key, pod.stage_key) == (task, stage)


def test_the_executor_idlegate_released_a_pod_on_is_read_back():
    pod = argo_pod()
    pod["metadata"]["annotations"]["idlegate.io/executor"] = "3"
    assert ArgoPod.of(pod).executor == 3


def test_releasing_unscheduled_removes_only_idlegates_gate_guarded_by_its_index():
    pod = argo_pod(["kueue.x-k8s.io/admission", GATE])
    ops = release_patch(pod, None)
    assert ops == [
        {"op": "test", "path": "/spec/schedulingGates/1/name", "value": GATE},
        {"op": "remove", "path": "/spec/schedulingGates/1"},
    ]
    assert jsonpatch.apply_patch(pod, ops)["spec"]["schedulingGates"] == [
        {"name": "kueue.x-k8s.io/admission"}
    ]
    assert release_patch(argo_pod(["other"]), None) is None
    assert release_patch(argo_pod(), None) is None


# -- the kopf handler ---------------------------------------------------------------------------


def _registry(**settings: Any) -> kopf.OperatorRegistry:
    return build_registry(Operator(Settings(pool_size=1, policy="fair", **settings)))


def _webhooks(registry: kopf.OperatorRegistry) -> list[Any]:
    return list(registry._webhooks.get_all_handlers())


def test_no_webhook_unless_asked():
    # kopf refuses to start with an admission handler and no webhook server
    assert _webhooks(_registry()) == []
    assert _webhooks(_registry(argo=True)) == []
    assert _webhooks(_registry(webhook_port=9443)) == []
    (handler,) = _webhooks(_registry(argo=True, webhook_port=9443))
    assert handler.id == argo.WEBHOOK_ID


@pytest.mark.parametrize(
    ("gates", "ops"),
    [
        (None, [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]),
        (["other"], [{"op": "add", "path": "/spec/schedulingGates/1", "value": {"name": GATE}}]),
        ([GATE], []),
    ],
)
def test_the_handler_answers_with_a_json_patch_adding_only_the_gate(gates, ops):
    (handler,) = _webhooks(_registry(argo=True, webhook_port=9443))
    raw = argo_pod(gates)
    before = copy.deepcopy(raw)
    patch = kopf.Patch()
    handler.fn(body=kopf.Body(raw), patch=patch)
    assert patch.as_json_patch(kopf.Body(raw)) == ops
    assert raw == before  # the request's object is not changed in place


def test_the_components_webhook_configuration_matches_the_handler():
    """What the component registers (deploy/components/argo/webhook.yaml) is what kopf
    would register for the handler: the same rules, object selector, path and policies."""
    (handler,) = _webhooks(_registry(argo=True, webhook_port=9443))
    client = kopf.WebhookClientConfig(url="https://idlegate.example/")
    (expected,) = build_webhooks(
        [handler],
        resources=[kopf.Resource("", "v1", "pods")],
        name_suffix="idlegate.io",
        client_config=client,
    )
    configuration = next(
        d
        for d in load_all(DEPLOY / "components" / "argo" / "webhook.yaml")
        if d["kind"] == "MutatingWebhookConfiguration"
    )
    (ours,) = configuration["webhooks"]
    (rule,) = ours["rules"]
    (kopf_rule,) = expected["rules"]
    for key in ("apiGroups", "apiVersions", "resources", "operations"):
        assert rule[key] == kopf_rule[key], key
    assert ours["objectSelector"] == expected["objectSelector"]
    assert ours["clientConfig"]["service"]["path"] == "/" + argo.WEBHOOK_ID
    assert expected["clientConfig"]["url"].endswith("/" + argo.WEBHOOK_ID)
    for key in ("sideEffects", "failurePolicy", "matchPolicy"):
        assert ours[key] == expected[key], key
    assert ours["failurePolicy"] == "Fail"  # down: no pod escapes the pool ungated


# -- the watch lag of Argo's Workflows ----------------------------------------------------------


@pytest.mark.asyncio
async def test_an_argo_workflows_change_is_in_the_watch_lag_by_its_kind():
    # the Workflow created at 2023-11-14T22:13:20Z (1_700_000_000), read 3 s later by the
    # operator's clock: 2.5 s from the middle of its second
    operator = Operator(Settings(pool_size=1, policy="fair", argo=True, clock=FakeClock(T0 + 3)))
    registry = build_registry(operator)

    async def standby() -> tuple[object, bool]:  # (not fresh: the handler's lag comes first)
        return None, False

    operator.fresh_pools = standby  # type: ignore[method-assign]
    (handler,) = [h for h in registry._watching.get_all_handlers() if h.id == "argo-workflows"]
    meta = {"name": "wf-1", "namespace": "etl", "uid": "u1", "creationTimestamp": CREATED}
    body = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": meta}
    await handler.fn(type="ADDED", event={"type": "ADDED", "object": body})
    count = "idlegate_watch_lag_seconds_count"
    assert operator.metrics.value(count, kind="workflow") == 1
    assert operator.metrics.value("idlegate_watch_lag_seconds_sum", kind="workflow") == 2.5
