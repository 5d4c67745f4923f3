"""What kube-apiserver itself admits, on the real control plane:

* the ValidatingAdmissionPolicy of deploy/components/pod-security, its CEL compiled and
  evaluated by the API server (tests/test_security.py evaluates the same expressions with
  cel-python): ``kubectl apply`` of a DagWorkflow with a privileged template is refused,
  naming the field; every case of the shared tables (tests/security_cases.py) is answered
  as the operator and ``idlegate lint`` answer it, on one plane (dry runs: admission runs
  in full, nothing is stored); and an update that leaves the spec alone is not judged;
* PodSecurity admission refuses a namespace label that is no level (so the operator's
  reading of such a label as restricted is only for namespaces labelled before it);
* the Argo gate's mutating webhook, called by the API server over TLS on loopback (a URL,
  its caBundle the plane's CA): a pod Argo creates in a namespace that opted in gets the
  operator's scheduling gate at its creation, and while no operator answers, failurePolicy
  Fail refuses the pod rather than let it run ungated.
"""

from __future__ import annotations

import copy
import itertools
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from idlegate.api.argo_pods import NODE_NAME, WORKFLOW_LABEL
from idlegate.api.labels import GATE
from idlegate.api.podsecurity import Level, check_template, namespace_policy
from idlegate.controlplane.client import ApiRefusal
from tests import security_cases as cases
from tests.e2e import DWF, OperatorProcess, stage, wait, workflow
from tests.k8s.real import ROOT, RealApiServer
from tests.real.gate import argo_gate

POLICY = ROOT / "deploy" / "components" / "pod-security" / "policy.yaml"
BY_POLICY = (
    "ValidatingAdmissionPolicy 'idlegate-pod-security' with binding 'idlegate-pod-security'"
    " denied request: "
)
LEVELS = ("privileged", "baseline", "restricted")
ESCALATION_IDS = [e[0] for e in cases.ESCALATIONS]
AGREEMENT_IDS = [a[0] for a in cases.AGREEMENT]
Change = Callable[[dict[str, Any]], None]
Labelled = Callable[[str | None, str | None], str]
_names = itertools.count()
PRIVILEGED = {
    "spec": {
        "containers": [
            {"name": "task", "image": "busybox", "securityContext": {"privileged": True}}
        ]
    }
}


def kubectl_apply(api: RealApiServer, ns: str, body: dict[str, Any]) -> subprocess.CompletedProcess:
    command = ["kubectl", f"--kubeconfig={api.kubeconfig}", "-n", ns, "apply", "-f", "-"]
    return subprocess.run(command, input=json.dumps(body), capture_output=True, text=True)


@pytest.fixture(scope="module")
def policy(api: RealApiServer) -> Iterator[None]:
    """The pod-security policy, in force: applied, then waited for until the API server
    refuses a privileged workflow by it. The probes are dry runs: a workflow created before
    the API server had loaded the policy would stay, and each later apply of it, an update
    of an unchanged spec, is one the policy does not judge (its match condition). Removed
    at the end, as the plane serves the other modules' scenarios next."""
    api.kubectl("apply", "-f", str(POLICY))
    probe = workflow("probe", stage("a", template=PRIVILEGED))
    wait(lambda: verdict(api, "default", probe), 60, "the policy to be in force")
    yield
    api.kubectl("delete", "-f", str(POLICY))


def verdict(api: RealApiServer, ns: str, body: dict[str, Any]) -> str:
    """The API server's answer to a dry-run create of `body` in `ns`: "" when it admits it,
    else the message of the policy's first failing validation (a refusal by anything else
    fails the test)."""
    body = copy.deepcopy(body)
    body["metadata"] = {**body["metadata"], "name": f"case-{next(_names)}", "namespace": ns}
    plural = "dagworkflows" if body["kind"] == "DagWorkflow" else "dagcronworkflows"
    try:
        api.client.request("POST", api.path(plural, ns), body, query={"dryRun": "All"})
    except ApiRefusal as exc:
        said = str(exc.body.get("message") or exc)
        assert BY_POLICY in said, said
        return said.split(BY_POLICY, 1)[1]
    return ""


@pytest.fixture(scope="module")
def labelled(api: RealApiServer) -> Callable[[str | None, str | None], str]:
    """The namespace of a case's labels: (its Pod Security level label, its allow-list of
    service accounts), each made at its first use."""
    made: dict[tuple[str | None, str | None], str] = {}

    def namespace(level: str | None, allowed: str | None) -> str:
        if (level, allowed) not in made:
            if level is not None and level not in LEVELS:
                pytest.skip(
                    f"kube-apiserver refuses the namespace label {level!r}, no level "
                    "(test_podsecurity_refuses_a_namespace_label_that_is_no_level)"
                )
            meta = cases.namespace(level, allowed)["metadata"]
            name = f"real-admission-case-{len(made)}"
            del meta["labels"]["kubernetes.io/metadata.name"]  # (the API server sets it)
            api.create("namespaces", {"metadata": {**meta, "name": name}})
            made[(level, allowed)] = name
        return made[(level, allowed)]

    return namespace


def test_the_api_server_refuses_a_privileged_template_by_the_policy(
    api: RealApiServer, ns: str, policy: None
):
    bad = workflow("escalates", stage("a", template=PRIVILEGED))
    refused = kubectl_apply(api, ns, bad)
    field = "spec.stages[0].template.spec.containers[0].securityContext.privileged"
    assert refused.returncode != 0, refused.stdout
    assert "ValidatingAdmissionPolicy 'idlegate-pod-security'" in refused.stderr, refused.stderr
    assert field in refused.stderr and "baseline" in refused.stderr, refused.stderr
    assert api.get(DWF, ns, "escalates") is None
    fine = workflow("plain", stage("a"))
    assert kubectl_apply(api, ns, fine).returncode == 0


@pytest.mark.parametrize(("name", "change", "path"), cases.ESCALATIONS, ids=ESCALATION_IDS)
def test_every_escalation_is_refused_by_the_api_server_as_by_the_operator_and_lint(
    api: RealApiServer, policy: None, labelled: Labelled, name: str, change: Change, path: str
):
    obj = cases.workflow(cases.escalated(change))
    (expected,) = check_template(
        cases.escalated(change), level=Level.BASELINE, path_prefix=cases.PREFIX
    )
    assert expected.path == f"{cases.PREFIX}.{path}"
    assert cases.lint_one(obj) == [(expected.path, expected.message)]
    assert cases.first_problem(obj, "spec", Level.BASELINE) == str(expected)
    assert verdict(api, labelled(None, None), obj) == str(expected)


@pytest.mark.parametrize(("name", "labels", "change"), cases.AGREEMENT, ids=AGREEMENT_IDS)
def test_the_api_server_answers_every_rule_as_the_operator(
    api: RealApiServer,
    policy: None,
    labelled: Labelled,
    name: str,
    labels: tuple[str | None, str | None],
    change: Change,
):
    """Refused with the operator's first violation (the policy's first failing validation
    is the first rule the operator reports), or admitted when the operator finds none."""
    ns = labelled(*labels)
    rules = namespace_policy(cases.namespace(*labels))
    template = cases.escalated(change)
    violations = check_template(
        template,
        level=rules.level,
        allowed_service_accounts=rules.allowed_service_accounts,
        path_prefix=cases.PREFIX,
    )
    expected = cases.first_per_rule(violations)
    assert verdict(api, ns, cases.workflow(template)) == (expected[0] if expected else "")


@pytest.mark.parametrize(("change", "path"), cases.WRONG_TYPES, ids=cases.WRONG_IDS)
def test_a_field_of_the_wrong_type_is_refused_by_the_api_server_as_by_the_operator(
    api: RealApiServer, policy: None, labelled: Labelled, change: Change, path: str
):
    obj = cases.workflow(cases.escalated(change))
    expected = cases.first_problem(obj, "spec", Level.RESTRICTED)
    assert expected.startswith(f"{cases.PREFIX}.{path} must be ")
    assert verdict(api, labelled("restricted", None), obj) == expected


def test_the_api_server_judges_a_cron_workflows_runs(
    api: RealApiServer, policy: None, labelled: Labelled
):
    template = cases.escalated(cases.HOST_PATH)
    violations = check_template(template, level=Level.BASELINE, path_prefix=cases.CRON_PREFIX)
    cron = cases.cron_workflow(template)
    assert verdict(api, labelled(None, None), cron) == str(violations[0])
    assert verdict(api, labelled("privileged", None), cron) == ""
    for change, _ in cases.WRONG_TYPES[:3]:
        wrong = cases.cron_workflow(cases.escalated(change))
        expected = cases.first_problem(wrong, "spec.workflowSpec", Level.PRIVILEGED)
        assert verdict(api, labelled("privileged", None), wrong) == expected


def test_the_api_server_judges_only_a_new_spec(api: RealApiServer, ns: str, policy: None):
    """A workflow admitted before its namespace was held to baseline: the operator's writes
    that leave its spec alone are admitted, a change of its spec is judged."""
    level = "pod-security.kubernetes.io/enforce"
    api.patch("namespaces", None, ns, {"metadata": {"labels": {level: "privileged"}}})
    bad = cases.workflow(PRIVILEGED, name="before")
    api.create(DWF, {**bad, "metadata": {"name": "before"}}, ns)
    api.patch("namespaces", None, ns, {"metadata": {"labels": {level: "baseline"}}})
    api.patch(DWF, ns, "before", {"metadata": {"annotations": {"idlegate.io/note": "x"}}})
    stages = copy.deepcopy(bad["spec"]["stages"])
    stages[0]["tasks"] = 2
    with pytest.raises(ApiRefusal) as refused:
        api.patch(DWF, ns, "before", {"spec": {"stages": stages}})
    (first,) = check_template(PRIVILEGED, level=Level.BASELINE, path_prefix=cases.PREFIX)
    assert refused.value.status == 403 and str(refused.value).endswith(BY_POLICY + str(first))


def test_podsecurity_refuses_a_namespace_label_that_is_no_level(api: RealApiServer, ns: str):
    label = {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "Privileged"}}}
    with pytest.raises(ApiRefusal) as refused:
        api.patch("namespaces", None, ns, label)
    assert refused.value.status == 422
    assert "must be one of privileged, baseline, restricted" in str(refused.value)


def argo_pod(name: str) -> dict[str, Any]:
    """A pod as Argo's controller creates one for a node of workflow ``wf``."""
    return {
        "metadata": {
            "name": name,
            "labels": {WORKFLOW_LABEL: "wf"},
            "annotations": {NODE_NAME: f"wf.{name}"},
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "argo"}]},
    }


def test_the_argo_gate_webhook_gates_argos_pods_at_their_creation(
    api: RealApiServer, ns: str, tmp_path: Path
) -> None:
    with argo_gate(api, ns, tmp_path) as flags:
        # no operator answers yet: failurePolicy Fail keeps Argo's pod out, ungated or not
        def refused() -> bool:
            try:
                api.create("pods", argo_pod("early"), namespace=ns)
            except ApiRefusal as exc:
                return exc.status == 500 and "argo-gate.idlegate.io" in str(exc)
            api.delete("pods", ns, "early")
            return False

        wait(refused, 60, "the webhook configuration to be in force")
        operator = OperatorProcess(api, ns, 2, tmp_path / "operator.log", *flags)
        try:
            created = wait(lambda: _create_once_served(api, ns), 120, "the webhook to answer")
        finally:
            operator.kill()
        gates = [g["name"] for g in created["spec"].get("schedulingGates") or []]
        assert GATE in gates, (created["spec"], operator.tail())
        plain = api.create("pods", {**argo_pod("plain"), "metadata": {"name": "plain"}}, ns)
        assert not plain["spec"].get("schedulingGates")  # (not Argo's: the webhook never saw it)


def _create_once_served(api: RealApiServer, ns: str) -> dict[str, Any] | None:
    try:
        return api.create("pods", argo_pod("gated"), namespace=ns)
    except ApiRefusal as exc:
        if exc.status == 500:  # (the webhook not serving yet)
            return None
        raise
