"""The escalation table of docs/security.md and its pieces: what tests/test_security.py
judges in the three places that check templates and tests/test_e2e_operator.py judges end
to end."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from idlegate.api.task_pods import DEFAULT_TEMPLATE

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
