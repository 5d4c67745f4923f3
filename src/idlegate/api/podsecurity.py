"""Pod Security Standards and service-account rules for the pod template of a stage.

The operator's service account may create pods in every namespace (it must), and it
builds every task pod from the workflow's ``template``. Unchecked, creating a DagWorkflow
would let its author run any pod the operator may create: a privileged one where the
namespace has no Pod Security label, or one running as any service account there. This
module judges a template before any pod exists, as Pod Security admission judges a pod:

* the level (privileged, baseline, restricted) is the namespace's
  ``pod-security.kubernetes.io/enforce`` label; a namespace without it gets the
  operator's ``--pod-security`` (default baseline), and a value that is no level counts
  as restricted (a typo must not open the namespace up);
* the controls are those Kubernetes' Pod Security admission checks at policy version
  ``latest`` (Kubernetes 1.36), field by field and with its exemptions: Windows pods
  (``spec.os.name: windows``) from the restricted seccomp, capability and privilege
  escalation controls, user-namespace pods (``hostUsers: false``) from restricted
  non-root and from the baseline ``/proc`` mount control. The optional "non-root groups"
  control, which Pod Security admission does not enforce either, is left out;
* at every level a template names no service account but ``default`` or one on the
  namespace's allow-list (annotation ``idlegate.io/allowed-service-accounts: a,b``),
  gets a service account token only for one on that list, and leaves alone what the
  operator owns: the namespace, its labels and annotations, the scheduling gates, and
  the placement (``nodeName``, which the API server refuses beside scheduling gates).

Each problem is a :class:`Violation` naming the field path and the control. The same
rules run at the API server as the ValidatingAdmissionPolicy of
``deploy/components/pod-security``; tests/test_security.py runs both on one table of
cases, so the two cannot drift apart. Pure: no Kubernetes client, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from idlegate.api.labels import (
    ANNOTATION_ATTEMPT,
    ANNOTATION_EXECUTOR,
    DEFAULT_SERVICE_ACCOUNT,
    LABEL_STAGE,
    LABEL_TASK,
    LABEL_WORKFLOW,
)
from idlegate.api.pod_levels import DEFAULT_LEVEL as DEFAULT_LEVEL  # (re-exported)
from idlegate.api.pod_levels import Level as Level

LEVEL_LABEL = "pod-security.kubernetes.io/enforce"
SERVICE_ACCOUNTS_ANNOTATION = "idlegate.io/allowed-service-accounts"
"""Namespace annotation: the service accounts (comma-separated) templates may name."""

BASELINE_CAPABILITIES = (
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
)
"""Capabilities a container may add at baseline (the container runtimes' default set)."""
SAFE_SYSCTLS = (
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ping_group_range",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.tcp_wmem",
)
"""Sysctls namespaced to the pod and isolated from other pods (baseline's safe set)."""
SELINUX_TYPES = ("container_t", "container_init_t", "container_kvm_t", "container_engine_t")
RESTRICTED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
"""Volume types allowed at restricted."""
PROFILES = ("RuntimeDefault", "Localhost")
"""Seccomp and AppArmor profile types allowed (unset is allowed too, except as noted)."""
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
"""Prefix of the (deprecated, still honoured) per-container AppArmor annotations."""
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
HANDLERS = (
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle.postStart",
    "lifecycle.preStop",
)
"""Probes and lifecycle hooks, whose httpGet/tcpSocket may name a host."""
OPERATOR_LABELS = (LABEL_WORKFLOW, LABEL_STAGE, LABEL_TASK)
OPERATOR_ANNOTATIONS = (ANNOTATION_ATTEMPT, ANNOTATION_EXECUTOR)


@dataclass(frozen=True, slots=True)
class Violation:
    """One field of a template its namespace does not allow."""

    path: str
    """The field, e.g. ``spec.stages[0].template.spec.hostNetwork``."""
    control: str
    """The control it breaks, e.g. ``Host Namespaces`` (Pod Security) or ``Service Account``."""
    message: str
    """What is not allowed, and at which level for a Pod Security control."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True, slots=True)
class NamespacePolicy:
    """What a namespace allows its task pods."""

    level: Level = DEFAULT_LEVEL
    """The Pod Security level templates are checked against."""
    allowed_service_accounts: frozenset[str] = frozenset()
    """Service accounts (besides ``default``) a template may name and get a token for."""


def parse_service_accounts(text: str) -> frozenset[str]:
    """The names of a comma-separated list (``"a, b"``), blanks left out."""
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def namespace_policy(
    namespace: Mapping[str, Any] | None, default_level: Level = DEFAULT_LEVEL
) -> NamespacePolicy:
    """The policy of a Namespace object (as the API returns it): its
    ``pod-security.kubernetes.io/enforce`` label (missing: `default_level`, the operator's
    ``--pod-security``; not a level: restricted) and its allow-list annotation."""
    meta = _map(_map(namespace).get("metadata"))
    labels, annotations = _map(meta.get("labels")), _map(meta.get("annotations"))
    level = default_level
    if LEVEL_LABEL in labels:
        try:
            level = Level(labels[LEVEL_LABEL])
        except ValueError:
            level = Level.RESTRICTED
    accounts = annotations.get(SERVICE_ACCOUNTS_ANNOTATION)
    allowed = parse_service_accounts(accounts) if isinstance(accounts, str) else frozenset()
    return NamespacePolicy(level, allowed)


def check_template(
    template: Any,
    *,
    level: Level,
    allowed_service_accounts: Iterable[str] = (),
    path_prefix: str = "template",
) -> list[Violation]:
    """Every field of pod template `template` (``metadata`` and ``spec``, as the API
    server would take them) above `level` or against the service-account and operator
    rules, with paths under `path_prefix` (e.g. ``spec.stages[0].template``); empty when
    the template may run. Fields of the wrong type are left to the API server, which
    refuses such a pod anyway."""
    pod = _pod(template, level, tuple(allowed_service_accounts))
    found = []
    for rule in RULES:
        if level in rule.levels:
            message = rule.sentence + (f" at Pod Security level {level}" if rule.pss else "")
            found += [
                Violation(f"{path_prefix}.{p}", rule.control, message) for p in rule.find(pod)
            ]
    return found


# -- the template, as the rules read it ----------------------------------------------------


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """(index, entry) of the mappings in a list."""
    for i, item in enumerate(value if isinstance(value, list) else []):
        if isinstance(item, Mapping):
            yield i, item


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class _Container:
    at: str
    """Its path, e.g. ``spec.initContainers[0]``."""
    body: Mapping[str, Any]
    sc: Mapping[str, Any]
    """Its securityContext (empty if unset)."""


@dataclass(frozen=True, slots=True)
class _Pod:
    level: Level
    allowed: tuple[str, ...]
    meta: Mapping[str, Any]
    spec: Mapping[str, Any]
    context: Mapping[str, Any]
    """The pod's securityContext (empty if unset)."""
    containers: list[_Container]
    """Init, regular and ephemeral containers, in the order Pod Security admission visits."""
    volumes: list[tuple[str, Mapping[str, Any]]]

    @property
    def contexts(self) -> list[tuple[str, Mapping[str, Any]]]:
        """(owner path, securityContext) of the pod and then of each container."""
        return [("spec", self.context), *((c.at, c.sc) for c in self.containers)]

    @property
    def windows(self) -> bool:
        return _map(self.spec.get("os")).get("name") == "windows"

    @property
    def user_namespace(self) -> bool:
        return self.spec.get("hostUsers") is False


def _pod(template: Any, level: Level, allowed: tuple[str, ...]) -> _Pod:
    meta, spec = _map(_map(template).get("metadata")), _map(_map(template).get("spec"))
    containers = [
        _Container(f"spec.{kind}[{i}]", c, _map(c.get("securityContext")))
        for kind in CONTAINER_LISTS
        for i, c in _items(spec.get(kind))
    ]
    volumes = [(f"spec.volumes[{i}]", v) for i, v in _items(spec.get("volumes"))]
    context = _map(spec.get("securityContext"))
    return _Pod(level, allowed, meta, spec, context, containers, volumes)


# -- the rules, in the order violations are reported (the admission policy's order) --------


@dataclass(frozen=True, slots=True)
class _Rule:
    control: str
    sentence: str
    levels: frozenset[Level]
    find: Callable[[_Pod], Iterator[str]]
    """The paths (under the template) of the fields that break the rule."""
    pss: bool
    """A Pod Security control (its message names the level)."""


RULES: list[_Rule] = []

_BASELINE = frozenset({Level.BASELINE})  # a restricted rule takes its place at restricted
_ABOVE_PRIVILEGED = frozenset({Level.BASELINE, Level.RESTRICTED})
_RESTRICTED = frozenset({Level.RESTRICTED})
_EVERY = frozenset(Level)


def _rule(
    control: str, sentence: str, levels: frozenset[Level], *, pss: bool = True
) -> Callable[[Callable[[_Pod], Iterator[str]]], Callable[[_Pod], Iterator[str]]]:
    """Register the decorated finder as a rule of :data:`RULES`."""

    def register(find: Callable[[_Pod], Iterator[str]]) -> Callable[[_Pod], Iterator[str]]:
        RULES.append(_Rule(control, sentence, levels, find, pss))
        return find

    return register


def _listing(names: Iterable[str]) -> str:
    *head, last = names
    return f"{', '.join(head)} and {last}"


_PROFILE_TYPES = _listing(PROFILES)
_ALLOW_LIST = f"the namespace's allow-list (annotation {SERVICE_ACCOUNTS_ANNOTATION})"


# -- baseline -------------------------------------------------------------------------------


@_rule("Host Namespaces", "host namespaces are not allowed", _ABOVE_PRIVILEGED)
def _host_namespaces(pod: _Pod) -> Iterator[str]:
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.spec.get(key) is True:
            yield f"spec.{key}"


@_rule("Privileged Containers", "privileged containers are not allowed", _ABOVE_PRIVILEGED)
def _privileged(pod: _Pod) -> Iterator[str]:
    for c in pod.containers:
        if c.sc.get("privileged") is True:
            yield f"{c.at}.securityContext.privileged"


@_rule("HostProcess", "HostProcess containers are not allowed", _ABOVE_PRIVILEGED)
def _host_process(pod: _Pod) -> Iterator[str]:
    for at, sc in pod.contexts:
        if _map(sc.get("windowsOptions")).get("hostProcess") is True:
            yield f"{at}.securityContext.windowsOptions.hostProcess"


@_rule("HostPath Volumes", "hostPath volumes are not allowed", _BASELINE)
def _host_path(pod: _Pod) -> Iterator[str]:
    for at, volume in pod.volumes:
        if isinstance(volume.get("hostPath"), Mapping):
            yield f"{at}.hostPath"


@_rule("Host Ports", "host ports are not allowed", _ABOVE_PRIVILEGED)
def _host_ports(pod: _Pod) -> Iterator[str]:
    for c in pod.containers:
        for j, port in _items(c.body.get("ports")):
            if port.get("hostPort") not in (None, 0):
                yield f"{c.at}.ports[{j}].hostPort"


def _added(c: _Container) -> Iterator[tuple[str, Any]]:
    """(path, capability) of each capability `c` adds."""
    for k, cap in enumerate(_list(_map(c.sc.get("capabilities")).get("add"))):
        yield f"{c.at}.securityContext.capabilities.add[{k}]", cap


@_rule("Capabilities", "adding capabilities beyond the baseline set is not allowed", _BASELINE)
def _baseline_capabilities(pod: _Pod) -> Iterator[str]:
    for c in pod.containers:
        yield from (path for path, cap in _added(c) if cap not in BASELINE_CAPABILITIES)


@_rule(
    "AppArmor", f"AppArmor profiles other than {_PROFILE_TYPES} are not allowed", _ABOVE_PRIVILEGED
)
def _apparmor(pod: _Pod) -> Iterator[str]:
    for at, sc in pod.contexts:
        profile = sc.get("appArmorProfile")
        if isinstance(profile, Mapping) and profile.get("type") not in PROFILES:
            yield f"{at}.securityContext.appArmorProfile.type"
    annotations = _map(pod.meta.get("annotations"))
    for key in sorted(k for k in annotations if str(k).startswith(APPARMOR_ANNOTATION)):
        value = annotations[key]
        if value not in ("", "runtime/default") and not str(value).startswith("localhost/"):
            yield f"metadata.annotations[{key}]"


@_rule(
    "SELinux",
    f"SELinux types other than {_listing(SELINUX_TYPES)} are not allowed",
    _ABOVE_PRIVILEGED,
)
def _selinux_type(pod: _Pod) -> Iterator[str]:
    for at, sc in pod.contexts:
        options = _map(sc.get("seLinuxOptions"))
        if "type" in options and options["type"] not in ("", *SELINUX_TYPES):
            yield f"{at}.securityContext.seLinuxOptions.type"


@_rule("SELinux", "custom SELinux users and roles are not allowed", _ABOVE_PRIVILEGED)
def _selinux_user_role(pod: _Pod) -> Iterator[str]:
    for at, sc in pod.contexts:
        options = _map(sc.get("seLinuxOptions"))
        for key in ("user", "role"):
            if options.get(key) not in (None, ""):
                yield f"{at}.securityContext.seLinuxOptions.{key}"


@_rule(
    "/proc Mount Type", "/proc mount types other than Default are not allowed", _ABOVE_PRIVILEGED
)
def _proc_mount(pod: _Pod) -> Iterator[str]:
    if pod.user_namespace and pod.level is Level.BASELINE:
        return  # user namespaces relax baseline only; restricted still wants Default
    for c in pod.containers:
        if c.sc.get("procMount") not in (None, "Default"):
            yield f"{c.at}.securityContext.procMount"


@_rule(
    "Seccomp", f"seccomp profiles other than {_PROFILE_TYPES} are not allowed", _ABOVE_PRIVILEGED
)
def _seccomp_values(pod: _Pod) -> Iterator[str]:
    if pod.windows and pod.level is Level.RESTRICTED:
        return  # restricted's seccomp control replaces baseline's and exempts Windows
    for at, sc in pod.contexts:
        profile = sc.get("seccompProfile")
        if isinstance(profile, Mapping) and profile.get("type") not in PROFILES:
            yield f"{at}.securityContext.seccompProfile.type"


@_rule("Sysctls", "sysctls outside the safe set are not allowed", _ABOVE_PRIVILEGED)
def _sysctls(pod: _Pod) -> Iterator[str]:
    for i, sysctl in _items(pod.context.get("sysctls")):
        if sysctl.get("name") not in SAFE_SYSCTLS:
            yield f"spec.securityContext.sysctls[{i}].name"


@_rule(
    "Probe and Lifecycle Hosts", "probe and lifecycle hook hosts are not allowed", _ABOVE_PRIVILEGED
)
def _probe_hosts(pod: _Pod) -> Iterator[str]:
    for c in pod.containers:
        for handler in HANDLERS:
            head, _, tail = handler.partition(".")
            body = _map(_map(c.body.get(head)).get(tail)) if tail else _map(c.body.get(head))
            for kind in ("httpGet", "tcpSocket"):
                if _map(body.get(kind)).get("host") not in (None, ""):
                    yield f"{c.at}.{handler}.{kind}.host"


# -- restricted -----------------------------------------------------------------------------


@_rule(
    "Volume Types",
    f"volume types other than {_listing(RESTRICTED_VOLUMES)} are not allowed",
    _RESTRICTED,
)
def _volume_types(pod: _Pod) -> Iterator[str]:
    for at, volume in pod.volumes:
        # a volume with no source is an emptyDir (the API server's default)
        sources = [k for k, v in volume.items() if isinstance(v, Mapping)]
        if sources and not any(k in RESTRICTED_VOLUMES for k in sources):
            yield f"{at}.{sources[0]}"


@_rule("Privilege Escalation", "allowPrivilegeEscalation must be false", _RESTRICTED)
def _privilege_escalation(pod: _Pod) -> Iterator[str]:
    if pod.windows:
        return
    for c in pod.containers:
        if c.sc.get("allowPrivilegeEscalation") is not False:
            yield f"{c.at}.securityContext.allowPrivilegeEscalation"


@_rule("Running as Non-root", "containers must run as non-root (runAsNonRoot: true)", _RESTRICTED)
def _run_as_non_root(pod: _Pod) -> Iterator[str]:
    if pod.user_namespace:
        return  # root in a user namespace is not root on the node
    pod_value = pod.context.get("runAsNonRoot")
    if pod_value is False:
        yield "spec.securityContext.runAsNonRoot"
    for c in pod.containers:
        value = c.sc.get("runAsNonRoot")
        if value is False or (value is None and pod_value is not True):
            yield f"{c.at}.securityContext.runAsNonRoot"


@_rule("Running as Non-root user", "running as user 0 (root) is not allowed", _RESTRICTED)
def _run_as_user(pod: _Pod) -> Iterator[str]:
    if pod.user_namespace:
        return
    for at, sc in pod.contexts:
        if "runAsUser" in sc and sc["runAsUser"] == 0:
            yield f"{at}.securityContext.runAsUser"


@_rule("Seccomp", f"a seccomp profile ({' or '.join(PROFILES)}) is required", _RESTRICTED)
def _seccomp_required(pod: _Pod) -> Iterator[str]:
    profile = pod.context.get("seccompProfile")
    if pod.windows or (isinstance(profile, Mapping) and profile.get("type") in PROFILES):
        return  # containers inherit a valid pod-level profile
    for c in pod.containers:
        if not isinstance(c.sc.get("seccompProfile"), Mapping):
            yield f"{c.at}.securityContext.seccompProfile.type"


@_rule("Capabilities", "containers must drop ALL capabilities", _RESTRICTED)
def _drop_all(pod: _Pod) -> Iterator[str]:
    if pod.windows:
        return
    for c in pod.containers:
        if "ALL" not in _list(_map(c.sc.get("capabilities")).get("drop")):
            yield f"{c.at}.securityContext.capabilities.drop"


@_rule(
    "Capabilities", "adding capabilities other than NET_BIND_SERVICE is not allowed", _RESTRICTED
)
def _restricted_capabilities(pod: _Pod) -> Iterator[str]:
    if pod.windows:
        return
    for c in pod.containers:
        yield from (path for path, cap in _added(c) if cap != "NET_BIND_SERVICE")


# -- every level: service accounts and what the operator owns -----------------------------------


@_rule(
    "Service Account",
    f"only the default service account or one on {_ALLOW_LIST} may be named",
    _EVERY,
    pss=False,
)
def _service_account(pod: _Pod) -> Iterator[str]:
    # serviceAccount is the deprecated alias of serviceAccountName: both are checked
    for key in ("serviceAccountName", "serviceAccount"):
        name = pod.spec.get(key)
        if name not in (None, "", DEFAULT_SERVICE_ACCOUNT) and name not in pod.allowed:
            yield f"spec.{key}"


@_rule(
    "Service Account Token",
    f"a service account token may be mounted only for a service account on {_ALLOW_LIST}",
    _EVERY,
    pss=False,
)
def _service_account_token(pod: _Pod) -> Iterator[str]:
    spec = pod.spec
    account = (
        spec.get("serviceAccountName") or spec.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT
    )
    if account in pod.allowed:
        return
    if spec.get("automountServiceAccountToken") is True:
        yield "spec.automountServiceAccountToken"
    for at, volume in pod.volumes:
        for j, source in _items(_map(volume.get("projected")).get("sources")):
            if isinstance(source.get("serviceAccountToken"), Mapping):
                yield f"{at}.projected.sources[{j}].serviceAccountToken"


@_rule(
    "Namespace",
    "a template cannot set the namespace: task pods run in the workflow's namespace",
    _EVERY,
    pss=False,
)
def _namespace(pod: _Pod) -> Iterator[str]:
    if "namespace" in pod.meta:
        yield "metadata.namespace"


@_rule(
    "Operator Metadata",
    "the operator's own labels and annotations cannot be set by a template",
    _EVERY,
    pss=False,
)
def _operator_metadata(pod: _Pod) -> Iterator[str]:
    for kind, keys in (("labels", OPERATOR_LABELS), ("annotations", OPERATOR_ANNOTATIONS)):
        present = _map(pod.meta.get(kind))
        yield from (f"metadata.{kind}[{key}]" for key in keys if key in present)


@_rule(
    "Scheduling Gates",
    "a template cannot set schedulingGates: the operator gates its task pods itself, and a pod "
    "kept by another gate would hold an executor without running",
    _EVERY,
    pss=False,
)
def _scheduling_gates(pod: _Pod) -> Iterator[str]:
    for i, _gate in enumerate(_list(pod.spec.get("schedulingGates"))):
        yield f"spec.schedulingGates[{i}]"


@_rule(
    "Node Name",
    "a template cannot set nodeName: the operator gates every task pod until it releases it, "
    "and the API server refuses a pod with both nodeName and schedulingGates",
    _EVERY,
    pss=False,
)
def _node_name(pod: _Pod) -> Iterator[str]:
    if pod.spec.get("nodeName") not in (None, ""):
        yield "spec.nodeName"
