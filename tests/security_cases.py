"""The escalation table of docs/security.md and its pieces: what tests/test_security.py
judges in the three places that check templates (and the policy's CEL under cel-python),
tests/real/test_admission.py on kube-apiserver, and tests/test_e2e_operator.py end to
end; with the tables of every rule (AGREEMENT) and of fields of the wrong type
(WRONG_TYPES), and the operator's answer to each."""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from idlegate.api.lint import lint_paths
from idlegate.api.podsecurity import Level, NamespacePolicy, Violation
from idlegate.api.task_pods import DEFAULT_TEMPLATE
from idlegate.api.template import check_templates
from idlegate.errors import SpecError
from idlegate.sim.spec import parse_workflow

PREFIX = "spec.stages[0].template"


def restricted_template() -> dict[str, Any]:
    """A task template that meets restricted: a copy of the operator's default one."""
    return copy.deepcopy(DEFAULT_TEMPLATE)


DELETE = object()
"""A value for :func:`edit`: remove the field."""


def edit(*changes: tuple[str, Any]) -> Callable[[dict[str, Any]], None]:
    """A change of the template: set each dotted path (``spec.containers.0.x``) to a value
    (or remove it: DELETE)."""

    def apply(template: dict[str, Any]) -> None:
        for path, value in changes:
            *head, last = path.split(".")
            node: Any = template
            for key in head:
                node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
            if value is DELETE:
                del node[last]
            elif isinstance(node, list):
                node[int(last)] = value
            else:
                node[last] = value

    return apply


C0 = "spec.containers.0"
SC0 = f"{C0}.securityContext"

# The issue's escalation table: (name, change, field path, control), each at baseline (the
# default level) on a template that is otherwise restricted-compliant.
ESCALATIONS = [
    (
        "privileged",
        edit((f"{SC0}.privileged", True)),
        "spec.containers[0].securityContext.privileged",
    ),
    ("hostNetwork", edit(("spec.hostNetwork", True)), "spec.hostNetwork"),
    ("hostPID", edit(("spec.hostPID", True)), "spec.hostPID"),
    ("hostIPC", edit(("spec.hostIPC", True)), "spec.hostIPC"),
    (
        "hostPath",
        edit(("spec.volumes", [{"name": "root", "hostPath": {"path": "/"}}])),
        "spec.volumes[0].hostPath",
    ),
    (
        "hostPort",
        edit((f"{C0}.ports", [{"containerPort": 80, "hostPort": 80}])),
        "spec.containers[0].ports[0].hostPort",
    ),
    (
        "SYS_ADMIN",
        edit((f"{SC0}.capabilities", {"drop": ["ALL"], "add": ["SYS_ADMIN"]})),
        "spec.containers[0].securityContext.capabilities.add[0]",
    ),
    (
        "procMount Unmasked",
        edit((f"{SC0}.procMount", "Unmasked")),
        "spec.containers[0].securityContext.procMount",
    ),
    (
        "unsafe sysctl",
        edit(("spec.securityContext.sysctls", [{"name": "kernel.msgmax", "value": "65536"}])),
        "spec.securityContext.sysctls[0].name",
    ),
    (
        "seccomp Unconfined",
        edit(("spec.securityContext.seccompProfile", {"type": "Unconfined"})),
        "spec.securityContext.seccompProfile.type",
    ),
    (
        "service account not on the list",
        edit(("spec.serviceAccountName", "cluster-admin-sa")),
        "spec.serviceAccountName",
    ),
    (
        "automounted token",
        edit(("spec.automountServiceAccountToken", True)),
        "spec.automountServiceAccountToken",
    ),
    ("namespace override", edit(("metadata.namespace", "kube-system")), "metadata.namespace"),
]
CONTROLS = {
    "privileged": "Privileged Containers",
    "hostNetwork": "Host Namespaces",
    "hostPID": "Host Namespaces",
    "hostIPC": "Host Namespaces",
    "hostPath": "HostPath Volumes",
    "hostPort": "Host Ports",
    "SYS_ADMIN": "Capabilities",
    "procMount Unmasked": "/proc Mount Type",
    "unsafe sysctl": "Sysctls",
    "seccomp Unconfined": "Seccomp",
    "service account not on the list": "Service Account",
    "automounted token": "Service Account Token",
    "namespace override": "Namespace",
}
ISSUE_EXAMPLE = {
    "spec": {
        "serviceAccountName": "cluster-admin-sa",
        "hostNetwork": True,
        "hostPID": True,
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
        "containers": [
            {
                "name": "x",
                "image": "busybox",
                "securityContext": {"privileged": True},
                "volumeMounts": [{"name": "root", "mountPath": "/host"}],
            }
        ],
    }
}


def escalated(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    template = restricted_template()
    change(template)
    return template


def workflow(*templates: dict[str, Any] | None, name: str = "wf") -> dict[str, Any]:
    """A DagWorkflow of a chain of stages, one per template (None: no template)."""
    stages = []
    for i, template in enumerate(templates):
        stage: dict[str, Any] = {"name": f"s{i}", "tasks": 1, "taskDurationSeconds": 1}
        if i:
            stage["dependsOn"] = [f"s{i - 1}"]
        if template is not None:
            stage["template"] = template
        stages.append(stage)
    return {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "DagWorkflow",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"stages": stages},
    }


def namespace(level: str | None = None, allowed: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}}
    if level is not None:
        meta["labels"]["pod-security.kubernetes.io/enforce"] = level
    if allowed is not None:
        meta["annotations"] = {"idlegate.io/allowed-service-accounts": allowed}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def first_per_rule(violations: list[Violation]) -> list[str]:
    """The policy's view of a list of violations: the first of each rule (by message)."""
    seen: dict[str, str] = {}
    for v in violations:
        seen.setdefault(v.message, str(v))
    return list(seen.values())


# (name, namespace labels/annotations, change); each is judged by both and must agree.
AGREEMENT = [
    ("valid at restricted", ("restricted", None), edit()),
    (
        "pod-level HostProcess",
        ("baseline", None),
        edit(("spec.securityContext.windowsOptions", {"hostProcess": True})),
    ),
    (
        "container HostProcess",
        ("baseline", None),
        edit((f"{SC0}.windowsOptions", {"hostProcess": True})),
    ),
    (
        "AppArmor field Unconfined",
        ("baseline", None),
        edit((f"{SC0}.appArmorProfile", {"type": "Unconfined"})),
    ),
    (
        "AppArmor field Localhost",
        ("restricted", None),
        edit((f"{SC0}.appArmorProfile", {"type": "Localhost", "localhostProfile": "p"})),
    ),
    (
        "AppArmor annotation unconfined",
        ("baseline", None),
        edit(
            (
                "metadata.annotations",
                {"container.apparmor.security.beta.kubernetes.io/task": "unconfined"},
            )
        ),
    ),
    (
        "AppArmor annotation localhost",
        ("baseline", None),
        edit(
            (
                "metadata.annotations",
                {"container.apparmor.security.beta.kubernetes.io/task": "localhost/p"},
            )
        ),
    ),
    (
        "SELinux type spc_t",
        ("baseline", None),
        edit(("spec.securityContext.seLinuxOptions", {"type": "spc_t"})),
    ),
    (
        "SELinux container_engine_t",
        ("restricted", None),
        edit((f"{SC0}.seLinuxOptions", {"type": "container_engine_t", "level": "s0:c1"})),
    ),
    (
        "SELinux user and role",
        ("baseline", None),
        edit((f"{SC0}.seLinuxOptions", {"user": "system_u", "role": "sysadm_r"})),
    ),
    (
        "probe host",
        ("baseline", None),
        edit((f"{C0}.livenessProbe", {"httpGet": {"port": 8080, "host": "10.0.0.1"}})),
    ),
    (
        "lifecycle host",
        ("baseline", None),
        edit((f"{C0}.lifecycle", {"preStop": {"tcpSocket": {"port": 22, "host": "node"}}})),
    ),
    (
        "safe sysctl",
        ("restricted", None),
        edit(
            (
                "spec.securityContext.sysctls",
                [{"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}],
            )
        ),
    ),
    (
        "NET_BIND_SERVICE at restricted",
        ("restricted", None),
        edit((f"{SC0}.capabilities.add", ["NET_BIND_SERVICE"])),
    ),
    ("CHOWN at baseline", ("baseline", None), edit((f"{SC0}.capabilities.add", ["CHOWN"]))),
    ("CHOWN at restricted", ("restricted", None), edit((f"{SC0}.capabilities.add", ["CHOWN"]))),
    ("no drop at restricted", ("restricted", None), edit((f"{SC0}.capabilities", {}))),
    (
        "nfs at restricted",
        ("restricted", None),
        edit(("spec.volumes", [{"name": "n", "nfs": {"server": "s", "path": "/"}}])),
    ),
    (
        "hostPath at restricted",
        ("restricted", None),
        edit(("spec.volumes", [{"name": "h", "hostPath": {"path": "/"}}])),
    ),
    (
        "allowed volumes at restricted",
        ("restricted", None),
        edit(
            (
                "spec.volumes",
                [
                    {"name": "e", "emptyDir": {}},
                    {"name": "i", "image": {"reference": "x"}},
                    {"name": "d"},
                ],
            )
        ),
    ),
    (
        "privilege escalation",
        ("restricted", None),
        edit((SC0, {"capabilities": {"drop": ["ALL"]}})),
    ),
    ("no runAsNonRoot", ("restricted", None), edit(("spec.securityContext.runAsNonRoot", DELETE))),
    (
        "runAsNonRoot false on the pod",
        ("restricted", None),
        edit(("spec.securityContext.runAsNonRoot", False), (f"{SC0}.runAsNonRoot", True)),
    ),
    ("runAsUser 0", ("restricted", None), edit((f"{SC0}.runAsUser", 0))),
    (
        "no seccomp at restricted",
        ("restricted", None),
        edit(("spec.securityContext", {"runAsNonRoot": True})),
    ),
    (
        "seccomp Unconfined at restricted",
        ("restricted", None),
        edit((f"{SC0}.seccompProfile", {"type": "Unconfined"})),
    ),
    (
        "Windows pod at restricted",
        ("restricted", None),
        edit(
            ("spec.os", {"name": "windows"}),
            ("spec.securityContext", {"runAsNonRoot": True}),
            (SC0, {}),
        ),
    ),
    (
        "user namespace /proc at baseline",
        ("baseline", None),
        edit(("spec.hostUsers", False), (f"{SC0}.procMount", "Unmasked")),
    ),
    (
        "user namespace /proc at restricted",
        ("restricted", None),
        edit(("spec.hostUsers", False), (f"{SC0}.procMount", "Unmasked")),
    ),
    (
        "user namespace root at restricted",
        ("restricted", None),
        edit(
            ("spec.hostUsers", False),
            (
                "spec.securityContext",
                {"runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}},
            ),
        ),
    ),
    (
        "privileged init container",
        ("baseline", None),
        edit(
            (
                "spec.initContainers",
                [{"name": "init", "image": "busybox", "securityContext": {"privileged": True}}],
            )
        ),
    ),
    (
        "ephemeral container at restricted",
        ("restricted", None),
        edit(("spec.ephemeralContainers", [{"name": "debug", "image": "busybox"}])),
    ),
    ("deprecated serviceAccount", ("baseline", None), edit(("spec.serviceAccount", "admin"))),
    (
        "allowed service account with a token",
        ("baseline", "etl-runner, other"),
        edit(
            ("spec.serviceAccountName", "etl-runner"), ("spec.automountServiceAccountToken", True)
        ),
    ),
    (
        "default service account named",
        ("baseline", None),
        edit(("spec.serviceAccountName", "default")),
    ),
    (
        "projected token",
        ("baseline", None),
        edit(
            (
                "spec.volumes",
                [
                    {
                        "name": "t",
                        "projected": {
                            "sources": [
                                {"configMap": {"name": "c"}},
                                {"serviceAccountToken": {"path": "token"}},
                            ]
                        },
                    }
                ],
            )
        ),
    ),
    (
        "operator labels",
        ("baseline", None),
        edit(
            ("metadata.labels", {"idlegate.io/workflow": "other", "idlegate.io/workload": "mine"}),
            ("metadata.annotations", {"idlegate.io/executor": "0"}),
        ),
    ),
    (
        "scheduling gates",
        ("baseline", None),
        edit(("spec.schedulingGates", [{"name": "mine"}, {"name": "idlegate.io/release"}])),
    ),
    ("node name", ("privileged", None), edit(("spec.nodeName", "node-1"))),
    (
        "command and args of strings",
        ("restricted", None),
        edit((f"{C0}.command", ["sleep", "5"]), (f"{C0}.args", ["--retries", "2"])),
    ),
    ("unknown level label", ("Baseline", None), edit((SC0, {}))),
    (
        "privileged level",
        ("privileged", None),
        edit(("spec.hostNetwork", True), (f"{SC0}.privileged", True)),
    ),
    ("the issue's example", (None, None), lambda t: t.update(copy.deepcopy(ISSUE_EXAMPLE))),
]


# (change, the field refused): each a value the API server would not decode into its type, one
# for every field the Pod Security and operator rules read (and so the policy types)
WRONG_TYPES = [
    (edit((f"{SC0}.privileged", "true")), "spec.containers[0].securityContext.privileged"),
    (edit(("spec.hostNetwork", "true")), "spec.hostNetwork"),
    (edit(("spec.hostPID", 1)), "spec.hostPID"),
    (edit(("spec.hostIPC", "yes")), "spec.hostIPC"),
    (edit(("spec.hostUsers", "false")), "spec.hostUsers"),
    (
        edit(("spec.automountServiceAccountToken", "yes")),
        "spec.automountServiceAccountToken",
    ),
    (edit((f"{SC0}.runAsUser", "0")), "spec.containers[0].securityContext.runAsUser"),
    (edit(("spec.securityContext.runAsUser", 0.5)), "spec.securityContext.runAsUser"),
    (edit((f"{SC0}.runAsNonRoot", "false")), "spec.containers[0].securityContext.runAsNonRoot"),
    (edit(("spec.securityContext.runAsNonRoot", 1)), "spec.securityContext.runAsNonRoot"),
    (
        edit((f"{SC0}.allowPrivilegeEscalation", "false")),
        "spec.containers[0].securityContext.allowPrivilegeEscalation",
    ),
    (edit((f"{SC0}.procMount", 1)), "spec.containers[0].securityContext.procMount"),
    (edit((f"{SC0}.capabilities", "ALL")), "spec.containers[0].securityContext.capabilities"),
    (
        edit((f"{SC0}.capabilities", {"add": "SYS_ADMIN"})),
        "spec.containers[0].securityContext.capabilities.add",
    ),
    (
        edit((f"{SC0}.capabilities", {"drop": ["ALL", 1]})),
        "spec.containers[0].securityContext.capabilities.drop[1]",
    ),
    (
        edit(("spec.securityContext.seccompProfile", "RuntimeDefault")),
        "spec.securityContext.seccompProfile",
    ),
    (
        edit((f"{SC0}.seccompProfile", {"type": 1})),
        "spec.containers[0].securityContext.seccompProfile.type",
    ),
    (
        edit((f"{SC0}.appArmorProfile", {"type": True})),
        "spec.containers[0].securityContext.appArmorProfile.type",
    ),
    (
        edit(("spec.securityContext.seLinuxOptions", {"user": 0})),
        "spec.securityContext.seLinuxOptions.user",
    ),
    (edit((f"{SC0}.windowsOptions", "x")), "spec.containers[0].securityContext.windowsOptions"),
    (
        edit(("spec.securityContext.windowsOptions", {"hostProcess": "true"})),
        "spec.securityContext.windowsOptions.hostProcess",
    ),
    (edit(("spec.securityContext.sysctls", {"name": "x"})), "spec.securityContext.sysctls"),
    (edit(("spec.securityContext.sysctls", ["kernel.msgmax"])), "spec.securityContext.sysctls[0]"),
    (
        edit(("spec.securityContext.sysctls", [{"name": 1, "value": "1"}])),
        "spec.securityContext.sysctls[0].name",
    ),
    (edit((SC0, "privileged")), "spec.containers[0].securityContext"),
    (edit(("spec.securityContext", [])), "spec.securityContext"),
    (edit((f"{C0}.ports", "80")), "spec.containers[0].ports"),
    (edit((f"{C0}.ports", [80])), "spec.containers[0].ports[0]"),
    (
        edit((f"{C0}.ports", [{"containerPort": 80, "hostPort": "80"}])),
        "spec.containers[0].ports[0].hostPort",
    ),
    (edit((f"{C0}.livenessProbe", "x")), "spec.containers[0].livenessProbe"),
    (edit((f"{C0}.readinessProbe", {"httpGet": "/"})), "spec.containers[0].readinessProbe.httpGet"),
    (
        edit((f"{C0}.lifecycle", {"preStop": {"tcpSocket": {"port": 1, "host": 1}}})),
        "spec.containers[0].lifecycle.preStop.tcpSocket.host",
    ),
    (edit((f"{C0}.lifecycle", {"postStart": "x"})), "spec.containers[0].lifecycle.postStart"),
    (edit(("spec.volumes", {"name": "v"})), "spec.volumes"),
    (edit(("spec.volumes", ["v"])), "spec.volumes[0]"),
    (edit(("spec.volumes", [{"name": "root", "hostPath": "/"}])), "spec.volumes[0].hostPath"),
    (edit(("spec.volumes", [{"name": "t", "projected": "x"}])), "spec.volumes[0].projected"),
    (
        edit(("spec.volumes", [{"name": "t", "projected": {"sources": {}}}])),
        "spec.volumes[0].projected.sources",
    ),
    (
        edit(("spec.volumes", [{"name": "t", "projected": {"sources": ["x"]}}])),
        "spec.volumes[0].projected.sources[0]",
    ),
    (
        edit(
            (
                "spec.volumes",
                [{"name": "t", "projected": {"sources": [{"serviceAccountToken": 1}]}}],
            )
        ),
        "spec.volumes[0].projected.sources[0].serviceAccountToken",
    ),
    (edit(("spec.os", "linux")), "spec.os"),
    (edit(("spec.os", {"name": 1})), "spec.os.name"),
    (edit(("spec.serviceAccountName", True)), "spec.serviceAccountName"),
    (edit(("spec.serviceAccount", 1)), "spec.serviceAccount"),
    (edit(("spec.nodeName", 5)), "spec.nodeName"),
    (edit((f"{C0}.command", ["sleep", 5])), "spec.containers[0].command[1]"),
    (edit((f"{C0}.command", "sleep 5")), "spec.containers[0].command"),
    (edit((f"{C0}.args", ["--retries", 2.5])), "spec.containers[0].args[1]"),
    (
        edit(("spec.initContainers", [{"name": "i", "image": "busybox", "args": [True]}])),
        "spec.initContainers[0].args[0]",
    ),
    (edit(("spec.initContainers", {})), "spec.initContainers"),
    (edit(("spec.ephemeralContainers", ["debug"])), "spec.ephemeralContainers[0]"),
    (edit(("spec.schedulingGates", "mine")), "spec.schedulingGates"),
    (edit(("metadata", "x")), "metadata"),
    (edit(("metadata.labels", ["a"])), "metadata.labels"),
    (edit(("metadata.labels", {"team": 1})), "metadata.labels.team"),
    (edit(("metadata.annotations", {"note": True})), "metadata.annotations.note"),
    (lambda t: t.update(spec="x"), "spec"),
]
WRONG_IDS = [w[1] for w in WRONG_TYPES]


def first_problem(obj: dict[str, Any], where: str, level: Level) -> str:
    """The first problem the operator's check reports of workflow `obj` (its spec at `where`)."""
    spec = obj["spec"] if where == "spec" else obj["spec"]["workflowSpec"]
    with pytest.raises(SpecError) as exc:
        check_templates(parse_workflow(spec, where), where, NamespacePolicy(level))
    return str(exc.value).removeprefix("invalid pod template: ").split("; ")[0]


CRON_PREFIX = "spec.workflowSpec.stages[0].template"
HOST_PATH = edit(
    (f"{SC0}.privileged", True),
    ("spec.volumes", [{"name": "root", "hostPath": {"path": "/"}}]),
)


def cron_workflow(template: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "DagCronWorkflow",
        "metadata": {"name": "cw", "namespace": "team-a"},
        "spec": {"schedule": "* * * * *", "workflowSpec": workflow(template)["spec"]},
    }


def lint_one(obj: dict[str, Any], policy: NamespacePolicy | None = None) -> list[tuple[str, str]]:
    """What `idlegate lint` reports of `obj`: (field, message) of each problem."""
    report = lint_paths(["-"], policy=policy, stdin=io.StringIO(yaml.safe_dump(obj)))
    return [(p.field or "", p.message) for p in report.problems]
