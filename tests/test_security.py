"""Creating a DagWorkflow is no way around RBAC and Pod Security (docs/security.md).

One table of escalation attempts, each refused with its field path and control in the
three places that judge a template: the operator's check (`idlegate.api.podsecurity`,
through `template.check_templates`), `idlegate lint`, and the ValidatingAdmissionPolicy of
deploy/components/pod-security, whose CEL runs here under cel-python. A second table covers
every rule and the exemptions; on both, the policy's messages must equal the Python
check's first violation per rule, so the two cannot disagree. Then the pieces around them:
the service-account default of task pods, the aggregated roles, the policy's manifests,
the operator's own hardening, the samples at restricted.
"""

from __future__ import annotations

import copy
import io
import json
import shutil
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from idlegate.api.lint import lint_paths
from idlegate.api.podsecurity import (
    RULES,
    Level,
    NamespacePolicy,
    check_template,
    namespace_policy,
    parse_service_accounts,
)
from idlegate.api.settings import Settings
from idlegate.api.task_pods import DEFAULT_TEMPLATE, Owner, task_pod
from idlegate.api.template import check_templates
from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.spec import StageSpec, parse_workflow
from tests.k8s.real import BIN as CLUSTER_BIN
from tests.security_cases import (
    AGREEMENT,
    CONTROLS,
    CRON_PREFIX,
    ESCALATIONS,
    HOST_PATH,
    ISSUE_EXAMPLE,
    PREFIX,
    SC0,
    WRONG_IDS,
    WRONG_TYPES,
    cron_workflow,
    edit,
    escalated,
    first_per_rule,
    first_problem,
    lint_one,
    namespace,
    restricted_template,
    workflow,
)

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
POLICY = DEPLOY / "components" / "pod-security" / "policy.yaml"
SAMPLES = DEPLOY / "samples"
KUBERNETES_VERSIONS = ("1.30", "1.32")  # the minimum (scheduling gates, VAP v1) and kind's


# -- the admission policy, evaluated offline -----------------------------------------------------


def _kubernetes_functions() -> dict[str, Callable[..., Any]]:
    """What Kubernetes' CEL (cel-go) has and cel-python lacks, as far as the policy uses it:
    the strings extension's split and trim, indexOf of lists (Kubernetes' list library)
    and of strings (the strings extension), and heterogeneous equality (the CEL spec's:
    values of different types are unequal, numbers compare by value), which `==`, `!=`,
    `in` and indexOf use; cel-python raises "no such overload" for some such pairs (1 ==
    true) where Kubernetes answers false."""
    from celpy import celtypes
    from celpy.evaluation import CELEvalError

    numbers = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)

    def kind(value: Any) -> Any:
        if isinstance(value, celtypes.BoolType):
            return celtypes.BoolType
        return numbers if isinstance(value, numbers) else type(value)

    def equal(a: Any, b: Any) -> Any:
        if isinstance(a, CELEvalError) or isinstance(b, CELEvalError):
            return a if isinstance(a, CELEvalError) else b
        if kind(a) != kind(b):
            return celtypes.BoolType(False)
        if kind(a) is numbers:
            return celtypes.BoolType(float(a) == float(b))
        if isinstance(a, celtypes.ListType):
            same = len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
            return celtypes.BoolType(same)
        if isinstance(a, celtypes.MapType):
            same = a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
            return celtypes.BoolType(same)
        return celtypes.BoolType(a == b)

    def contains(item: Any, container: Any) -> Any:
        if isinstance(container, celtypes.MapType):
            return celtypes.BoolType(any(equal(item, k) for k in container))
        return celtypes.BoolType(any(equal(item, x) for x in container))

    def index_of(target: Any, item: Any) -> Any:
        if isinstance(target, str):
            return celtypes.IntType(target.find(item))
        found = (i for i, x in enumerate(target) if equal(x, item))
        return celtypes.IntType(next(found, -1))

    return {
        "split": lambda s, sep: celtypes.ListType(celtypes.StringType(p) for p in s.split(sep)),
        "trim": lambda s: celtypes.StringType(s.strip()),
        "indexOf": index_of,
        "_==_": equal,
        "_!=_": lambda a, b: celtypes.logical_not(equal(a, b)),
        "_in_": contains,
    }


class AdmissionPolicy:
    """deploy/components/pod-security's ValidatingAdmissionPolicy under cel-python: match
    conditions, then the variables in order, then each validation (its message when false)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        celpy = pytest.importorskip("celpy", reason="cel-python is not installed")
        self.celpy = celpy
        env = celpy.Environment()
        functions = _kubernetes_functions()

        def program(expression: str) -> Any:
            return env.program(env.compile(expression), functions=functions)

        self.conditions = [program(c["expression"]) for c in spec["matchConditions"]]
        self.variables = [(v["name"], program(v["expression"])) for v in spec["variables"]]
        self.validations = [
            (program(v["expression"]), program(v["messageExpression"])) for v in spec["validations"]
        ]

    def denials(
        self,
        obj: dict[str, Any],
        ns: dict[str, Any],
        operation: str = "CREATE",
        old: dict[str, Any] | None = None,
    ) -> list[str] | None:
        """The messages of the failing validations (None: the request does not match)."""
        celtypes = self.celpy.celtypes
        activation: dict[str, Any] = {
            "object": self.celpy.json_to_cel(obj),
            "oldObject": self.celpy.json_to_cel(old),
            "namespaceObject": self.celpy.json_to_cel(ns),
            "request": self.celpy.json_to_cel({"operation": operation}),
        }
        if not all(c.evaluate(activation) for c in self.conditions):
            return None
        variables = celtypes.MapType()
        for name, program in self.variables:
            activation["variables"] = variables
            variables[celtypes.StringType(name)] = program.evaluate(activation)
        activation["variables"] = variables
        return [
            str(message.evaluate(activation))
            for expression, message in self.validations
            if not expression.evaluate(activation)
        ]


def policy_documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(POLICY.read_text()) if d]


@cache
def admission_policy() -> AdmissionPolicy:
    (vap,) = [d for d in policy_documents() if d["kind"] == "ValidatingAdmissionPolicy"]
    return AdmissionPolicy(vap["spec"])


# -- the escalation table, in the three places ---------------------------------------------------


@pytest.mark.parametrize(("name", "change", "path"), ESCALATIONS, ids=[e[0] for e in ESCALATIONS])
def test_escalation_is_refused_by_the_operators_check(name, change, path):
    violations = check_template(escalated(change), level=Level.BASELINE, path_prefix=PREFIX)
    assert [(v.path, v.control) for v in violations] == [(f"{PREFIX}.{path}", CONTROLS[name])]
    # and through the admission entry point, as the operator reports it
    spec = parse_workflow(workflow(escalated(change))["spec"], "spec")
    with pytest.raises(SpecError) as exc:
        check_templates(spec, "spec", NamespacePolicy())
    assert str(exc.value) == f"invalid pod template: {violations[0]}"


@pytest.mark.parametrize(("name", "change", "path"), ESCALATIONS, ids=[e[0] for e in ESCALATIONS])
def test_escalation_is_refused_by_lint(name, change, path):
    (expected,) = check_template(escalated(change), level=Level.BASELINE, path_prefix=PREFIX)
    assert lint_one(workflow(escalated(change))) == [(f"{PREFIX}.{path}", expected.message)]


@pytest.mark.parametrize(("name", "change", "path"), ESCALATIONS, ids=[e[0] for e in ESCALATIONS])
def test_escalation_is_refused_by_the_admission_policy(name, change, path):
    (expected,) = check_template(escalated(change), level=Level.BASELINE, path_prefix=PREFIX)
    assert expected.path == f"{PREFIX}.{path}"
    assert admission_policy().denials(workflow(escalated(change)), namespace()) == [str(expected)]


def test_the_issues_example_is_invalid_at_baseline():
    violations = check_template(ISSUE_EXAMPLE, level=Level.BASELINE, path_prefix=PREFIX)
    assert (violations[0].path, violations[0].control) == (
        f"{PREFIX}.spec.hostNetwork",
        "Host Namespaces",
    )
    assert {v.control for v in violations} == {
        "Host Namespaces",
        "Privileged Containers",
        "HostPath Volumes",
        "Service Account",
    }
    assert len(lint_one(workflow(ISSUE_EXAMPLE))) == len(violations) == 5
    denials = admission_policy().denials(workflow(ISSUE_EXAMPLE), namespace())
    assert denials == first_per_rule(violations)
    # a privileged namespace that allows the service account lets it through
    relaxed = namespace("privileged", allowed="cluster-admin-sa")
    assert admission_policy().denials(workflow(ISSUE_EXAMPLE), relaxed) == []
    assert (
        check_template(
            ISSUE_EXAMPLE, level=Level.PRIVILEGED, allowed_service_accounts={"cluster-admin-sa"}
        )
        == []
    )


# -- every rule: the Python check and the policy agree ---------------------------------------------


def _case_policy(labels: tuple[str | None, str | None]) -> tuple[dict[str, Any], NamespacePolicy]:
    ns = namespace(*labels)
    return ns, namespace_policy(ns)


@pytest.mark.parametrize(("name", "labels", "change"), AGREEMENT, ids=[a[0] for a in AGREEMENT])
def test_the_admission_policy_agrees_with_the_operators_check(name, labels, change):
    ns, policy = _case_policy(labels)
    template = escalated(change)
    violations = check_template(
        template,
        level=policy.level,
        allowed_service_accounts=policy.allowed_service_accounts,
        path_prefix=PREFIX,
    )
    denials = admission_policy().denials(workflow(template), ns)
    assert denials == first_per_rule(violations)


def test_the_agreement_table_exercises_every_rule():
    hit = set()
    for _, labels, change in AGREEMENT + [(n, (None, None), c) for n, c, _ in ESCALATIONS]:
        _, policy = _case_policy(labels)
        for v in check_template(
            escalated(change),
            level=policy.level,
            allowed_service_accounts=policy.allowed_service_accounts,
        ):
            hit.add(v.message.removesuffix(f" at Pod Security level {policy.level}"))
    assert hit == {rule.sentence for rule in RULES}
    (vap,) = [d for d in policy_documents() if d["kind"] == "ValidatingAdmissionPolicy"]
    types, *rules = vap["spec"]["validations"]  # (fields of the wrong type first)
    assert "variables.wrongTypes" in types["expression"] and len(rules) == len(RULES)


def test_exemptions_and_allowances_judged_as_pod_security_admission_does():
    def controls(change, level, allowed=()):
        found = check_template(escalated(change), level=level, allowed_service_accounts=allowed)
        return [v.control for v in found]

    windows = AGREEMENT[[a[0] for a in AGREEMENT].index("Windows pod at restricted")][2]
    assert controls(windows, Level.RESTRICTED) == []
    userns_proc = edit(("spec.hostUsers", False), (f"{SC0}.procMount", "Unmasked"))
    assert controls(userns_proc, Level.BASELINE) == []
    assert controls(userns_proc, Level.RESTRICTED) == ["/proc Mount Type"]
    token = edit(("spec.serviceAccountName", "etl"), ("spec.automountServiceAccountToken", True))
    assert controls(token, Level.BASELINE, {"etl"}) == []
    assert controls(token, Level.BASELINE) == ["Service Account", "Service Account Token"]
    # restricted is baseline and more: hostPath and added capabilities under their
    # restricted rules, not twice
    host_path = edit(("spec.volumes", [{"name": "h", "hostPath": {"path": "/"}}]))
    assert controls(host_path, Level.RESTRICTED) == ["Volume Types"]


def test_violations_name_the_stage_and_container():
    bad = edit(("spec.initContainers", [{"name": "i", "image": "x"}]), (f"{SC0}.privileged", True))
    obj = workflow(restricted_template(), None, escalated(bad))
    spec = parse_workflow(obj["spec"], "spec")
    with pytest.raises(SpecError) as exc:
        check_templates(spec, "spec", NamespacePolicy(Level.RESTRICTED))
    # rule by rule (privileged before privilege escalation), each field in visiting order
    found = check_template(
        escalated(bad), level=Level.RESTRICTED, path_prefix="spec.stages[2].template"
    )
    assert [(v.path, v.control) for v in found[:2]] == [
        (
            "spec.stages[2].template.spec.containers[0].securityContext.privileged",
            "Privileged Containers",
        ),
        (
            "spec.stages[2].template.spec.initContainers[0].securityContext.allowPrivilegeEscalation",
            "Privilege Escalation",
        ),
    ]
    assert f"{found[0]}; {found[1]}" in str(exc.value)  # the operator's message, in that order
    # the policy names the same first field of each rule
    denials = admission_policy().denials(obj, namespace("restricted"))
    assert denials is not None and denials[0].startswith(
        "spec.stages[2].template.spec.containers[0]"
    )
    assert any(d.startswith("spec.stages[2].template.spec.initContainers[0]") for d in denials)
    # without a policy (the operator's check before it reads namespaces) only the shape counts
    check_templates(spec, "spec")


def test_the_policy_judges_only_new_specs():
    bad = workflow(ISSUE_EXAMPLE)
    policy = admission_policy()
    # the operator patching its finalizer onto a workflow from before the policy
    patched = copy.deepcopy(bad)
    patched["metadata"]["finalizers"] = ["kopf.zalando.org/KopfFinalizerMarker"]
    assert policy.denials(patched, namespace(), "UPDATE", old=bad) is None
    changed = copy.deepcopy(bad)
    changed["spec"]["stages"][0]["tasks"] = 2
    assert policy.denials(changed, namespace(), "UPDATE", old=bad)
    assert policy.denials(workflow(None, restricted_template()), namespace("restricted")) == []


# -- what the API server would refuse of any pod: nodeName beside gates, fields of a wrong type ----


def test_a_template_naming_a_node_is_refused_at_every_level():
    template = escalated(edit(("spec.nodeName", "node-1")))
    (v,) = check_template(template, level=Level.PRIVILEGED, path_prefix=PREFIX)
    assert (v.path, v.control) == (f"{PREFIX}.spec.nodeName", "Node Name")
    spec = parse_workflow(workflow(template)["spec"], "spec")
    with pytest.raises(SpecError):
        check_templates(spec, "spec", NamespacePolicy(Level.PRIVILEGED))
    assert [p for p, _ in lint_one(workflow(template))] == [f"{PREFIX}.spec.nodeName"]
    assert admission_policy().denials(workflow(template), namespace("privileged")) == [str(v)]


def test_a_number_in_a_containers_command_is_refused_with_the_fix():
    """YAML reads `command: [sleep, 5]` as a number, which the API server refuses in a pod:
    the operator, lint and the admission policy say so, and how to fix it."""
    text = """
apiVersion: idlegate.io/v1alpha1
kind: DagWorkflow
metadata: {name: wf, namespace: team-a}
spec:
  stages:
    - name: a
      tasks: 1
      taskDurationSeconds: 1
      template:
        spec:
          containers: [{name: task, image: busybox, command: [sleep, 5]}]
"""
    obj = yaml.safe_load(text)
    field = f"{PREFIX}.spec.containers[0].command[1]"
    said = f"{field} must be a string, not 5: quote it ('5')"
    assert first_problem(obj, "spec", Level.PRIVILEGED) == said
    report = lint_paths(["-"], stdin=io.StringIO(text))
    assert [(p.field, p.message) for p in report.problems] == [
        (field, "must be a string, not 5: quote it ('5')")
    ]
    assert admission_policy().denials(obj, namespace()) == [said]
    quoted = yaml.safe_load(text.replace("[sleep, 5]", "[sleep, '5']"))
    assert lint_one(quoted) == [] and admission_policy().denials(quoted, namespace()) == []


@pytest.mark.parametrize(("change", "path"), WRONG_TYPES, ids=WRONG_IDS)
def test_a_field_of_the_wrong_type_is_refused_by_the_operator_and_lint(change, path):
    # at privileged (where the value, read as meant, would be allowed): only its type refuses it
    obj = workflow(escalated(change))
    assert first_problem(obj, "spec", Level.PRIVILEGED).startswith(f"{PREFIX}.{path} must be ")
    check_templates(parse_workflow(workflow(restricted_template())["spec"], "spec"), "spec")
    assert [p for p, _ in lint_one(obj, NamespacePolicy(Level.PRIVILEGED))] == [f"{PREFIX}.{path}"]


@pytest.mark.parametrize(("change", "path"), WRONG_TYPES, ids=WRONG_IDS)
def test_a_field_of_the_wrong_type_is_refused_by_the_admission_policy_as_by_the_operator(
    change, path
):
    """Refused as the operator refuses it, first: the message the API server reports (its
    first failing validation) is the operator's first problem, also at restricted, where
    the most rules judge the template besides (the validation reads no level)."""
    obj = workflow(escalated(change))
    denials = admission_policy().denials(obj, namespace("restricted"))
    assert denials and denials[0] == first_problem(obj, "spec", Level.RESTRICTED)


@pytest.mark.parametrize(("change", "path"), WRONG_TYPES[:3], ids=WRONG_IDS[:3])
def test_a_cron_workflows_field_of_the_wrong_type_is_refused_by_the_admission_policy(change, path):
    obj = cron_workflow(escalated(change))
    expected = first_problem(obj, "spec.workflowSpec", Level.PRIVILEGED)
    assert expected.startswith(f"{CRON_PREFIX}.{path} must be ")
    assert admission_policy().denials(obj, namespace("privileged")) == [expected]


# -- DagCronWorkflows: their workflowSpec is judged as each run's will be --------------------------


async def _sync_cron(
    template: dict[str, Any], ns: dict[str, Any], **settings: Any
) -> tuple[Any, Any, list]:
    """One sync of a cron workflow in namespace `ns`, a minute after it was created, by a
    controller with `settings`: the fake API (its runs, its status), the timers, the
    Events recorded."""
    from idlegate.operator.edge.cron import CronController
    from tests.operator_fakes import FakeClock, FakeKube, FakeTimers, applier_on

    kube, timers, clock = FakeKube(), FakeTimers(), FakeClock(1_700_000_000.0)
    kube.namespaces["team-a"] = ns
    kube.add_cron_workflow("cw", cron_workflow(template)["spec"], "team-a", created=clock.now())
    clock.advance(90)
    applier = applier_on(kube)
    controller = CronController(kube, timers, clock, applier.apply, **settings)
    await controller.resync("team-a", "cw")
    await applier.lanes.wait_idle(600)
    return kube, timers, [(e["type"], e["reason"], e["message"]) for e in kube.events]


@pytest.mark.asyncio
async def test_a_cron_workflow_whose_runs_exceed_its_namespace_is_invalid_and_starts_none():
    template = escalated(HOST_PATH)
    kube, timers, events = await _sync_cron(template, namespace())
    (valid,) = [c for c in kube.cron_workflows[("team-a", "cw")]["status"]["conditions"]]
    assert (valid["type"], valid["status"], valid["reason"]) == ("Valid", "False", "Invalid")
    violations = check_template(template, level=Level.BASELINE, path_prefix=CRON_PREFIX)
    assert [v.control for v in violations] == ["Privileged Containers", "HostPath Volumes"]
    assert all(str(v) in valid["message"] for v in violations)
    assert [(t, r) for t, r, _ in events] == [("Warning", "Invalid")]
    assert kube.workflows == {} and timers.armed == {}
    # the same workflowSpec where the namespace allows it: valid, and its run starts
    kube, timers, events = await _sync_cron(template, namespace("privileged"))
    (valid,) = kube.cron_workflows[("team-a", "cw")]["status"]["conditions"]
    assert (valid["status"], len(kube.workflows), len(timers.armed)) == ("True", 1, 1)


@pytest.mark.asyncio
async def test_a_cron_workflow_in_an_unlabelled_namespace_is_held_to_the_operators_level():
    loose = escalated(edit((SC0, {})))  # baseline, not restricted
    kube, _, _ = await _sync_cron(loose, namespace())
    (valid,) = kube.cron_workflows[("team-a", "cw")]["status"]["conditions"]
    assert valid["status"] == "True" and len(kube.workflows) == 1
    kube, _, events = await _sync_cron(loose, namespace(), pod_security=Level.RESTRICTED)
    (valid,) = kube.cron_workflows[("team-a", "cw")]["status"]["conditions"]
    assert (valid["status"], kube.workflows, events[0][1]) == ("False", {}, "Invalid")
    assert f"{CRON_PREFIX}.spec.containers[0].securityContext" in valid["message"]


def test_the_admission_policy_judges_a_cron_workflows_runs():
    template = escalated(HOST_PATH)
    violations = check_template(template, level=Level.BASELINE, path_prefix=CRON_PREFIX)
    denials = admission_policy().denials(cron_workflow(template), namespace())
    assert denials == first_per_rule(violations)
    assert admission_policy().denials(cron_workflow(template), namespace("privileged")) == []
    ok = cron_workflow(restricted_template())
    assert admission_policy().denials(ok, namespace("restricted")) == []


# -- the namespace's policy ----------------------------------------------------------------------


def test_namespace_policy_reads_the_label_and_the_allow_list():
    assert namespace_policy(namespace()) == NamespacePolicy(Level.BASELINE, frozenset())
    assert namespace_policy(namespace(), Level.RESTRICTED).level is Level.RESTRICTED
    assert namespace_policy(namespace("privileged")).level is Level.PRIVILEGED
    assert namespace_policy(namespace("Privileged")).level is Level.RESTRICTED  # fails closed
    assert namespace_policy(namespace(allowed=" etl-runner ,, b")).allowed_service_accounts == {
        "etl-runner",
        "b",
    }
    assert namespace_policy(None) == NamespacePolicy()
    assert parse_service_accounts("") == frozenset()
    # the operator's --pod-security: the level of a namespace without the label
    assert Settings(pool_size=1).pod_security is Level.BASELINE
    with pytest.raises(IdlegateError, match=r"pod_security: Input should be 'privileged'"):
        Settings(pool_size=1, pod_security="strict")


def test_lint_takes_the_namespace_policy_as_options():
    sa = workflow(escalated(edit(("spec.serviceAccountName", "etl"))))
    assert [p for p, _ in lint_one(sa)] == [f"{PREFIX}.spec.serviceAccountName"]
    assert lint_one(sa, NamespacePolicy(allowed_service_accounts=frozenset({"etl"}))) == []
    loose = workflow(escalated(edit((SC0, {}))))
    assert lint_one(loose) == []
    assert {p for p, _ in lint_one(loose, NamespacePolicy(Level.RESTRICTED))} == {
        f"{PREFIX}.spec.containers[0].securityContext.allowPrivilegeEscalation",
        f"{PREFIX}.spec.containers[0].securityContext.capabilities.drop",
    }


def test_lint_cli_options(tmp_path):
    from typer.testing import CliRunner

    from idlegate.cli import app

    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump(workflow(escalated(edit((SC0, {}))))))
    runner = CliRunner()
    assert runner.invoke(app, ["lint", str(path)]).exit_code == 0
    strict = runner.invoke(app, ["lint", "--json", "--pod-security", "restricted", str(path)])
    assert strict.exit_code == 1
    assert [p["field"] for p in json.loads(strict.stdout)["problems"]] == [
        f"{PREFIX}.spec.containers[0].securityContext.allowPrivilegeEscalation",
        f"{PREFIX}.spec.containers[0].securityContext.capabilities.drop",
    ]
    sa = tmp_path / "sa.yaml"
    sa.write_text(yaml.safe_dump(workflow(escalated(edit(("spec.serviceAccountName", "etl"))))))
    assert runner.invoke(app, ["lint", str(sa)]).exit_code == 1
    allowed = runner.invoke(app, ["lint", "--allowed-service-accounts", "etl,x", str(sa)])
    assert allowed.exit_code == 0
    assert runner.invoke(app, ["lint", "--pod-security", "nope", str(sa)]).exit_code == 2


# -- task pods: the service-account default ------------------------------------------------------

OWNER = Owner("team-a", "wf", "uid-1")


def _pod_spec(template: dict[str, Any] | None) -> dict[str, Any]:
    stage = StageSpec.model_validate(
        {"name": "s", "tasks": 1, "taskDurationSeconds": 1, "template": template}
    )
    return task_pod(OWNER, stage, 0)["spec"]


def test_task_pods_run_as_default_without_a_token_unless_the_template_names_one():
    for template in (None, restricted_template()):
        spec = _pod_spec(template)
        assert spec["serviceAccountName"] == "default"
        assert spec["automountServiceAccountToken"] is False
    named = _pod_spec(escalated(edit(("spec.serviceAccountName", "etl-runner"))))
    assert named["serviceAccountName"] == "etl-runner"
    assert "automountServiceAccountToken" not in named  # the account's own setting
    # a namespace that allows `default` may ask for its token explicitly
    explicit = _pod_spec(escalated(edit(("spec.automountServiceAccountToken", True))))
    assert explicit["automountServiceAccountToken"] is True
    assert check_template(DEFAULT_TEMPLATE, level=Level.RESTRICTED) == []


# -- deploy/: the roles, the policy's manifests, the operator's own hardening, the samples -------


def _kustomize(path: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: cannot run `kubectl kustomize`")
    out = subprocess.run(
        [kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, f"kubectl kustomize {path} failed:\n{out.stderr}"
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return _kustomize(DEPLOY / "base")


def _named(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (obj,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def test_workflow_roles_aggregate_into_the_built_in_ones(base):
    edit_role = _named(base, "ClusterRole", "idlegate-edit")
    view_role = _named(base, "ClusterRole", "idlegate-view")
    aggregate = "rbac.authorization.k8s.io/aggregate-to-"
    assert {k for k, v in edit_role["metadata"]["labels"].items() if v == "true"} >= {
        f"{aggregate}edit",
        f"{aggregate}admin",
    }
    assert f"{aggregate}view" not in edit_role["metadata"]["labels"]
    assert view_role["metadata"]["labels"][f"{aggregate}view"] == "true"
    assert not {f"{aggregate}edit", f"{aggregate}admin"} & set(view_role["metadata"]["labels"])
    kinds = ["dagworkflows", "dagcronworkflows"]
    rule, pools = edit_role["rules"]
    assert (rule["apiGroups"], rule["resources"]) == (["idlegate.io"], kinds)
    assert set(rule["verbs"]) == {"create", "update", "patch", "delete", "get", "list", "watch"}
    # executor pools (the cluster admin's) are read-only to workflow authors
    assert (pools["apiGroups"], pools["resources"]) == (["idlegate.io"], ["executorpools"])
    assert set(pools["verbs"]) == {"get", "list", "watch"}
    (rule,) = view_role["rules"]
    assert (rule["resources"], set(rule["verbs"])) == (
        [*kinds, "executorpools"],
        {"get", "list", "watch"},
    )
    for role in (edit_role, view_role):
        assert not [r for r in role["rules"] if "executorpools/status" in r["resources"]]
    # the operator's own role is aggregated into nothing
    operator = _named(base, "ClusterRole", "idlegate-operator")
    assert not [k for k in operator["metadata"]["labels"] if k.startswith(aggregate)]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_policy_manifests_pass_kubernetes_validate(version):
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    overlay = _kustomize(DEPLOY / "overlays" / "pod-security")
    extra = [o for o in overlay if o["apiVersion"].startswith("admissionregistration.k8s.io")]
    assert sorted(o["kind"] for o in extra) == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    for obj in [*extra, *(o for o in overlay if o["kind"] == "ClusterRole")]:
        try:
            kv.validate(obj, version, strict=True)
        except kv.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")
    vap = _named(overlay, "ValidatingAdmissionPolicy", "idlegate-pod-security")
    binding = _named(overlay, "ValidatingAdmissionPolicyBinding", "idlegate-pod-security")
    assert binding["spec"] == {"policyName": "idlegate-pod-security", "validationActions": ["Deny"]}
    assert vap["spec"]["failurePolicy"] == "Fail"
    (rule,) = vap["spec"]["matchConstraints"]["resourceRules"]
    assert (rule["apiGroups"], rule["resources"]) == (
        ["idlegate.io"],
        ["dagworkflows", "dagcronworkflows"],
    )
    assert set(rule["operations"]) == {"CREATE", "UPDATE"}
    assert all("message" not in v for v in vap["spec"]["validations"])
    types, *rules = (v["reason"] for v in vap["spec"]["validations"])
    assert types == "Invalid" and set(rules) == {"Forbidden"}


def _vap_check(path: Path) -> subprocess.CompletedProcess[str]:
    checker = CLUSTER_BIN / "vap-check"
    if not checker.exists():
        pytest.skip(f"vap-check is not built in {CLUSTER_BIN}: `make cluster` builds it")
    return subprocess.run([checker, path], capture_output=True, text=True, timeout=120)


def test_kube_apiserver_would_accept_the_policy(tmp_path):
    """kube-apiserver's own validation of the policy, without a cluster (vap-check): it
    compiles every expression as the API server does when the policy is applied, which
    cel-python does not: a map or list literal's values must have one type, and CEL's
    reserved words are no variable names. It refuses such a policy, naming the field."""
    checked = _vap_check(POLICY)
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")
    text = POLICY.read_text()
    mixed = text.replace("'at': dyn(variables.workflowPath", "'at': (variables.workflowPath", 1)
    assert mixed != text
    (tmp_path / "mixed.yaml").write_text(
        mixed.replace("name: templateNamespace", "name: namespace")
    )
    refused = _vap_check(tmp_path / "mixed.yaml")
    assert refused.returncode == 1, refused.stderr
    assert "spec.variables[9].expression" in refused.stdout
    assert "expected type 'string' but found 'dyn'" in refused.stdout
    assert 'spec.variables[39].name: Invalid value: "namespace"' in refused.stdout


def test_operator_pod_is_hardened(base):
    """The operator itself: non-root, read-only root filesystem, no capabilities, restricted."""
    pod = _named(base, "Deployment", "idlegate-operator")["spec"]["template"]
    account = pod["spec"]["serviceAccountName"]
    assert check_template(pod, level=Level.RESTRICTED, allowed_service_accounts={account}) == []
    (container,) = pod["spec"]["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["runAsNonRoot"] is True
    assert sc["runAsUser"] != 0 and sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["allowPrivilegeEscalation"] is False
    ns = _named(base, "Namespace", "idlegate-system")
    assert namespace_policy(ns).level is Level.RESTRICTED
    # least privilege: nothing that would let the operator read secrets or escalate
    rules = _named(base, "ClusterRole", "idlegate-operator")["rules"]
    granted = {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    for forbidden in [
        ("", "secrets", "get"),
        ("", "serviceaccounts/token", "create"),
        ("", "pods/exec", "create"),
        ("rbac.authorization.k8s.io", "clusterroles", "escalate"),
        ("rbac.authorization.k8s.io", "clusterrolebindings", "create"),
    ]:
        assert forbidden not in granted
    assert not [x for x in granted if "*" in x]


def _sample_templates() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        for i, doc in enumerate(d for d in yaml.safe_load_all(path.read_text()) if d):
            for j, stage in enumerate(doc["spec"]["stages"]):
                if "template" in stage:
                    found.append((f"{path.name}[{i}] stage {j}", stage["template"]))
    return found


def test_samples_are_valid_at_restricted():
    templates = _sample_templates()
    assert len(templates) >= 5, "the samples have no templates: nothing was checked"
    for where, template in templates:
        assert check_template(template, level=Level.RESTRICTED) == [], where
    report = lint_paths([str(SAMPLES)], policy=NamespacePolicy(Level.RESTRICTED))
    assert [p.file for p in report.problems] == [str(SAMPLES / "invalid-cycle.yaml")]
    policy = admission_policy()
    for path in sorted(SAMPLES.glob("*.yaml")):
        for doc in (d for d in yaml.safe_load_all(path.read_text()) if d):
            assert policy.denials(doc, namespace("restricted")) == [], path.name
