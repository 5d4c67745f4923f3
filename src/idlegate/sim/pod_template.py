"""The shape of a stage's pod template, as the API server types it: one check for every
reader of a workflow (the operator's admission and ``idlegate lint`` through
:mod:`idlegate.api.template`, which adds the namespace's Pod Security rules; the
simulator's workflow and history files; ``idlegate forecast FILE``'s local check), so a
template one refuses, all refuse.

The CRD keeps ``template`` free-form (``x-kubernetes-preserve-unknown-fields``), so the API
server accepts ``containers: "busybox"`` as readily as a real pod template. The operator
builds every task pod from the template (:func:`idlegate.api.task_pods.task_pod`): it merges
``metadata.labels`` and ``metadata.annotations``, adds environment variables to every
``spec.containers[]`` and ``spec.initContainers[]``, and adds or removes its own entry in
``spec.schedulingGates``. :class:`PodTemplate` states the shape of exactly those fields
plus what every pod needs (at least one container, each with a name and an image), the
type of every field the Pod Security checks read (host namespaces, security contexts,
ports, volumes, probes, service account), a container's ``command`` and ``args`` (lists
of strings, where YAML reads ``[sleep, 5]`` as a number), and the ``nodeSelector``'s
labels (`label_problem`), all as strictly as the API's own types: a string where a list
or a boolean belongs (``privileged: "true"``) is an error, not coerced. The API server
refuses such a pod, and a check that read ``"true"`` as not ``true`` would let the
workflow in only for every pod of it to be refused.

A label's key and value follow the API server's rules (`label_problem`): a key is a name
of at most 63 characters (alphanumerics, '-', '_', '.', starting and ending with an
alphanumeric), optionally after a DNS subdomain prefix of at most 253 and '/'; a value
is empty or such a name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from idlegate.errors import SpecError
from idlegate.sim.spec import (
    DNS_SUBDOMAIN_PATTERN,
    WorkflowSpec,
    describe,
    not_a_string,
    parse_workflow,
    read_workflow_items,
)

__all__ = [
    "MAX_REPORTED",
    "PodTemplate",
    "check_stage_templates",
    "invalid_template",
    "label_problem",
    "template_problems",
]

MAX_REPORTED = 5
"""Problems listed per template; the rest are counted."""

_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_PREFIX = re.compile(DNS_SUBDOMAIN_PATTERN)


def label_problem(key: str, value: str | None = None) -> str | None:
    """What is wrong with label `key` (and `value`, when given), as the API server would
    refuse it; None when both are valid."""
    prefix, _, name = key.rpartition("/")
    if (
        not _LABEL_NAME.fullmatch(name)
        or len(name) > 63
        or ("/" in key and (not _PREFIX.match(prefix) or len(prefix) > 253))
    ):
        return (
            f"{key!r} is not a label key; write a name of at most 63 letters, digits, '-', "
            "'_' or '.', starting and ending with a letter or digit, optionally after a DNS "
            "prefix and '/' (e.g. pool, example.com/tier)"
        )
    if value is not None and value and (not _LABEL_NAME.fullmatch(value) or len(value) > 63):
        return (
            f"{value!r} (of label {key!r}) is not a label value; write at most 63 letters, "
            "digits, '-', '_' or '.', starting and ending with a letter or digit, or nothing"
        )
    return None


class _Open(BaseModel):
    """A Kubernetes object part: the fields named here are checked, others pass through."""

    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=True)


class EnvVar(_Open):
    """One ``env`` entry: the operator replaces entries by `name`."""

    name: str = Field(min_length=1, description="The variable's name.")


# -- the fields the Pod Security checks read, typed as the API types them ---------------------


class Profile(_Open):
    """A seccompProfile or appArmorProfile."""

    type: str | None = None


class SELinuxOptions(_Open):
    user: str | None = None
    role: str | None = None
    type: str | None = None
    level: str | None = None


class WindowsOptions(_Open):
    host_process: bool | None = Field(default=None, alias="hostProcess")


class Capabilities(_Open):
    add: list[str] | None = None
    drop: list[str] | None = None


class Sysctl(_Open):
    name: str
    value: str | None = None


class _Contexts(_Open):
    """What pod and container security contexts share."""

    run_as_non_root: bool | None = Field(default=None, alias="runAsNonRoot")
    run_as_user: int | None = Field(default=None, alias="runAsUser")
    seccomp_profile: Profile | None = Field(default=None, alias="seccompProfile")
    app_armor_profile: Profile | None = Field(default=None, alias="appArmorProfile")
    se_linux_options: SELinuxOptions | None = Field(default=None, alias="seLinuxOptions")
    windows_options: WindowsOptions | None = Field(default=None, alias="windowsOptions")


class SecurityContext(_Contexts):
    """A container's securityContext."""

    privileged: bool | None = None
    allow_privilege_escalation: bool | None = Field(default=None, alias="allowPrivilegeEscalation")
    proc_mount: str | None = Field(default=None, alias="procMount")
    capabilities: Capabilities | None = None


class PodSecurityContext(_Contexts):
    """The pod's securityContext."""

    sysctls: list[Sysctl] | None = None


class ContainerPort(_Open):
    host_port: int | None = Field(default=None, alias="hostPort")


class HostHandler(_Open):
    """An httpGet or tcpSocket action: the host it may name."""

    host: str | None = None


class Handler(_Open):
    """A probe or lifecycle hook."""

    http_get: HostHandler | None = Field(default=None, alias="httpGet")
    tcp_socket: HostHandler | None = Field(default=None, alias="tcpSocket")


class ContainerLifecycle(_Open):
    post_start: Handler | None = Field(default=None, alias="postStart")
    pre_stop: Handler | None = Field(default=None, alias="preStop")


class Container(_Open):
    """A container or init container: the operator adds the task's environment to it."""

    name: str = Field(min_length=1, description="The container's name (required by Pods).")
    image: str = Field(min_length=1, description="The image to run (required by Pods).")
    command: list[str] | None = Field(default=None, description="The entrypoint's argv.")
    args: list[str] | None = Field(default=None, description="Arguments to the entrypoint.")
    env: list[EnvVar] | None = Field(default=None, description="Environment variables.")
    security_context: SecurityContext | None = Field(default=None, alias="securityContext")
    ports: list[ContainerPort] | None = None
    liveness_probe: Handler | None = Field(default=None, alias="livenessProbe")
    readiness_probe: Handler | None = Field(default=None, alias="readinessProbe")
    startup_probe: Handler | None = Field(default=None, alias="startupProbe")
    lifecycle: ContainerLifecycle | None = None


class ProjectedSource(_Open):
    service_account_token: _Open | None = Field(default=None, alias="serviceAccountToken")


class Projected(_Open):
    sources: list[ProjectedSource] | None = None


class Volume(_Open):
    """A volume: its name, and the sources the checks look at (others pass through)."""

    name: str = Field(min_length=1)
    host_path: _Open | None = Field(default=None, alias="hostPath")
    projected: Projected | None = None


class PodOS(_Open):
    name: str | None = None


class SchedulingGate(_Open):
    """One ``schedulingGates`` entry: the operator adds and removes ``idlegate.io/release``."""

    name: str = Field(min_length=1, description="The gate's name.")


class TemplateMetadata(_Open):
    """The template's metadata: its labels and annotations are copied onto each task pod."""

    labels: dict[str, str] | None = Field(default=None, description="Labels (string values).")
    annotations: dict[str, str] | None = Field(
        default=None, description="Annotations (string values)."
    )


class TemplatePodSpec(_Open):
    """The pod spec of a task pod, as far as the operator reads or writes it."""

    containers: list[Container] = Field(
        min_length=1, description="The task's containers (at least one)."
    )
    init_containers: list[Container] | None = Field(
        default=None, alias="initContainers", description="Init containers."
    )
    scheduling_gates: list[SchedulingGate] | None = Field(
        default=None,
        alias="schedulingGates",
        description="The template's own gates (kept; the operator only removes its own).",
    )
    ephemeral_containers: list[Container] | None = Field(default=None, alias="ephemeralContainers")
    security_context: PodSecurityContext | None = Field(default=None, alias="securityContext")
    node_selector: dict[str, str] | None = Field(default=None, alias="nodeSelector")
    """Labels the node must have: keys and values as an ExecutorPool's (`label_problem`),
    which the API server would refuse the pod for."""
    volumes: list[Volume] | None = None
    host_network: bool | None = Field(default=None, alias="hostNetwork")
    host_pid: bool | None = Field(default=None, alias="hostPID")
    host_ipc: bool | None = Field(default=None, alias="hostIPC")
    host_users: bool | None = Field(default=None, alias="hostUsers")
    os: PodOS | None = None
    service_account_name: str | None = Field(default=None, alias="serviceAccountName")
    service_account: str | None = Field(default=None, alias="serviceAccount")
    automount_service_account_token: bool | None = Field(
        default=None, alias="automountServiceAccountToken"
    )
    node_name: str | None = Field(default=None, alias="nodeName")

    @field_validator("node_selector")
    @classmethod
    def _labels(cls, pairs: dict[str, str] | None) -> dict[str, str] | None:
        for key, value in (pairs or {}).items():
            problem = label_problem(key, value)
            if problem is not None:
                raise ValueError(problem)
        return pairs


class PodTemplate(BaseModel):
    """A pod template (``metadata`` and ``spec``), as a PodTemplateSpec has nothing else."""

    model_config = ConfigDict(extra="forbid", strict=True)

    metadata: TemplateMetadata | None = Field(default=None, description="Labels, annotations.")
    spec: TemplatePodSpec = Field(description="The pod spec of the task pods.")


def _path(loc: tuple[int | str, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


_EXPECTED = {
    "model_type": "must be a mapping (an object)",
    "dict_type": "must be a mapping (an object)",
    "list_type": "must be a list",
    "string_type": "must be a string",
    "bool_type": "must be a boolean (true or false)",
    "int_type": "must be an integer",
}


def _problem(error: Any, where: str) -> str:
    kind, value = error["type"], error["input"]
    if kind == "string_type" and isinstance(value, int | float):  # `command: [sleep, 5]`
        message = not_a_string(value)
    elif kind in _EXPECTED:
        message = f"{_EXPECTED[kind]}, not {describe(value)}"
    elif kind == "missing":
        message = "is required"
    elif kind == "too_short":
        message = "needs at least one entry"
    elif kind == "string_too_short":
        message = "must not be empty"
    elif kind == "value_error":  # (a validator's own sentence, e.g. `label_problem`'s)
        message = str(error["ctx"]["error"])
    elif kind == "extra_forbidden":
        message = "is not a field of a pod template (it has only metadata and spec)"
    else:
        message = str(error["msg"])
    return f"{where}{_path(tuple(error['loc']))} {message}"


def template_problems(template: Any, where: str = "template") -> list[str]:
    """Each way `template` (a stage's ``template``; None is the default template) is not
    a pod template the operator can build pods from, naming the field under `where`."""
    if template is None:
        return []
    try:
        PodTemplate.model_validate(template)
    except ValidationError as exc:
        return [_problem(e, where) for e in exc.errors()]
    return []


def invalid_template(problems: list[str]) -> SpecError:
    """The one sentence of a template's `problems` (the first `MAX_REPORTED`, then how
    many more)."""
    shown = problems[:MAX_REPORTED]
    if len(problems) > MAX_REPORTED:
        shown.append(f"and {len(problems) - MAX_REPORTED} more problem(s)")
    return SpecError("invalid pod template: " + "; ".join(shown))


def check_stage_templates(spec: WorkflowSpec, where: str = "spec") -> None:
    """SpecError (`invalid_template`) for the first stage of `spec` whose template is not
    a pod template (`template_problems`), naming its field under `where`, the path of the
    workflow's spec in its document (``spec``; empty for a bare workflow)."""
    at = f"{where}.stages" if where else "stages"
    for i, stage in enumerate(spec.stages):
        problems = template_problems(stage.template, f"{at}[{i}].template")
        if problems:
            raise invalid_template(problems)


def load_workflow_file(path: str | Path) -> list[WorkflowSpec]:
    """Read workflows from a YAML, JSON or JSON Lines (`.jsonl`) file.

    Accepts one workflow (`{stages: [...]}`), a `DagWorkflow` resource (its `spec`),
    a list of either, or a multi-document YAML stream.
    """
    specs = []
    for item in read_workflow_items(path):
        spec = parse_workflow(item.spec, item.source)
        try:
            check_stage_templates(spec, "" if item.spec is item.raw else "spec")
        except SpecError as exc:
            raise SpecError(f"{item.source}: {exc}") from None
        specs.append(spec)
    return specs
