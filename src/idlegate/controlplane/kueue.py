"""Kueue's controller manager beside a local control plane (:mod:`idlegate.controlplane`).

``make kueue`` builds the manager from its Go module (sigs.k8s.io/kueue, the release
:data:`VERSION` pinned in deploy/local/kueue/go.mod) into ``out/kueue/bin/kueue`` and copies,
from the same module, its CRDs, webhook configurations, RBAC and default configuration into
``out/kueue/config``. :func:`start` installs them on a running plane and starts the
manager against it, on the plane's KWOK nodes:

* its CRDs, as ``config/components/crd`` lists them, with the conversion webhook its
  kustomization patches in (``/convert``);
* its ClusterRole and Role (``config/components/rbac``: ``role.yaml``,
  ``manager_secrets_role.yaml``), bound to the user ``kueue`` whose client certificate the
  plane made (:data:`~idlegate.controlplane.pki.CLIENTS`): it runs with the rights its
  release asks, as in a cluster;
* its webhooks reached on loopback by URL (``https://127.0.0.1:<port>/<path>``), where a
  cluster routes them through a Service: Kueue's defaulting and validation of its own
  kinds and of a ``batch/v1`` Job are the ones its users get. Only the webhooks of Kueue's
  kinds and of the enabled integrations (:data:`FRAMEWORKS`) are installed: the others'
  handlers are not served (a pod's, e.g., would fail every pod creation of the plane);
* its certificates managed as by default (``internalCertManagement``: its rotator keeps a
  CA and a serving certificate in a Secret, reads them from its ``certDir``, where a
  kubelet mounts the Secret, and injects the CA into its webhook configurations and
  CRDs), from a Secret made here first (:func:`certificates`): a CA of its own
  (:func:`~idlegate.controlplane.pki.authority`) and a serving certificate valid for its
  Service's name, which its rotator checks, and for 127.0.0.1, which the API server calls
  (the rotator would make one for the Service's name alone). With its certificate
  management off, v0.17.0 reads its metrics server's certificate from a fixed path under
  /etc, which a plane on loopback does not write;
* its default configuration (``config/components/manager/controller_manager_config.yaml``)
  with what a plane on loopback changes (:func:`configuration`): no leader election,
  ports chosen free on 127.0.0.1, no metrics server, the integrations of
  :data:`FRAMEWORKS`. The visibility API server (the feature gate ``VisibilityOnDemand``)
  is off: it is an aggregated API server reached through a Service and an APIService,
  which nothing here reads.

:func:`stop` removes the webhook configurations (no call of the API server then waits on
a manager that is gone) and ends the process.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import os
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from idlegate.controlplane.client import ApiRefusal, Client
from idlegate.controlplane.launcher import START_SECONDS, Plane, end, free_ports, running, spawn
from idlegate.controlplane.pki import Pki, authority, pkcs1, serving
from idlegate.errors import IdlegateError

VERSION = "v0.17.0"
"""The release built (deploy/local/kueue/go.mod)."""
NAMESPACE = "kueue-system"
USER = "kueue"
"""The manager's user (its client certificate), bound to the module's roles."""
FRAMEWORKS: dict[str, tuple[str, str]] = {"batch/job": ("batch", "jobs")}
"""The integrations enabled: each framework's (API group, resource), whose webhooks are
installed. A Job is what the benchmark submits; Kueue has no DAG workflow of its own."""
GROUP = "kueue.x-k8s.io"
SERVICE = "kueue-webhook-service"
SECRET = "kueue-webhook-server-cert"
"""Its webhook Service's and certificates' Secret's names (its defaults): its rotator
names the webhook configurations after the first (``kueue-validating-webhook-configuration``)
and checks the certificate against ``<SERVICE>.<NAMESPACE>.svc``."""
CA_NAME = "kueue-ca"
"""The name its rotator checks its CA for."""
FEATURE_GATES = "VisibilityOnDemand=false"
MANAGER = "idlegate-kueue"
"""The field manager of what :func:`start` applies."""
PATHS: dict[str, tuple[str, str]] = {
    "Namespace": ("/api/v1", "namespaces"),
    "Secret": ("/api/v1", "secrets"),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions"),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles"),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings"),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
    "MutatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
    ),
    "ValidatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
    ),
}
"""Where each kind :func:`start` installs lives in the API."""


@dataclasses.dataclass
class Kueue:
    """A running manager: its process, its log and the webhook configurations it answers."""

    pid: int
    log: Path
    plane: Plane
    webhooks: list[tuple[str, str]]
    """(kind, name) of each webhook configuration installed for it."""

    def alive(self) -> bool:
        return running(self.pid)


def binary(home: Path) -> Path:
    """The manager ``make kueue`` built in `home`; an error saying how to build it."""
    exe = home / "bin" / "kueue"
    if not os.access(exe, os.X_OK) or not (home / "config" / "crd").is_dir():
        raise IdlegateError(
            f"Kueue is not built in {home}: run `make kueue` (its Go module from the module "
            "proxy: the manager, and its CRDs and configuration from the same module)."
        )
    return exe


def start(plane: Plane, home: Path, directory: Path) -> Kueue:
    """Kueue's manager (``make kueue``'s, in `home`) running against `plane`, its files and
    log in `directory`, once it answers ready (the module's docstring); an error with the
    end of its log if it does not come up."""
    exe = binary(home)
    config = home / "config"
    directory.mkdir(parents=True, exist_ok=True)
    health, webhook = free_ports(2)
    ca, files = certificates(directory)
    webhooks = webhook_configurations(config, ca, webhook)
    for body in (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        *crds(config, ca, webhook),
        *roles(config),
        secret(files),
        *webhooks,
    ):
        apply(plane.client(), body)
    settings = directory / "config.yaml"
    defaults = yaml.safe_load((config / "manager" / "controller_manager_config.yaml").read_text())
    settings.write_text(yaml.safe_dump(configuration(defaults, health, webhook, directory)))
    command = [
        str(exe),
        f"--config={settings}",
        f"--kubeconfig={plane.kubeconfig_of('kueue')}",
        f"--feature-gates={FEATURE_GATES}",
    ]
    log = directory / "kueue.log"
    named = [(body["kind"], body["metadata"]["name"]) for body in webhooks]
    kueue = Kueue(spawn(command, log), log, plane, named)
    try:
        _wait_ready(kueue, health)
    except BaseException:
        stop(kueue)
        raise
    return kueue


def certificates(directory: Path) -> tuple[Pki, dict[str, bytes]]:
    """Its CA (in `directory`/pki) and the files of its certificates' Secret, also written
    into its ``certDir`` (`directory`/certs) as the kubelet mounts the Secret in its pod:
    its rotator keeps the Secret and reads the files."""
    ca = authority(directory / "pki", f"/CN={CA_NAME}/O=kueue", (f"DNS:{CA_NAME}",))
    crt, key = serving(ca, "webhook", (f"DNS:{SERVICE}.{NAMESPACE}.svc", "IP:127.0.0.1"))
    files = {"ca.crt": ca.ca.read_bytes(), "ca.key": pkcs1(ca.ca_key)}
    files |= {"tls.crt": crt.read_bytes(), "tls.key": key.read_bytes()}
    shutil.rmtree(directory / "certs", ignore_errors=True)
    (directory / "certs").mkdir()
    for name, data in files.items():
        (directory / "certs" / name).write_bytes(data)
    return ca, files


def secret(files: dict[str, bytes]) -> dict[str, Any]:
    """The Secret its certificate management reads (:data:`SECRET`)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": NAMESPACE},
        "data": {k: base64.b64encode(v).decode() for k, v in files.items()},
    }


def stop(kueue: Kueue) -> bool:
    """Remove its webhook configurations, then end the manager; whether it had to be
    killed."""
    client = kueue.plane.client()
    for kind, name in kueue.webhooks:
        prefix, plural = PATHS[kind]
        # (the plane is gone, or so is the configuration: nothing waits on it)
        with contextlib.suppress(ApiRefusal, OSError):
            client.request("DELETE", f"{prefix}/{plural}/{name}")
    kueue.webhooks.clear()
    return end(kueue.pid)


def configuration(
    defaults: dict[str, Any], health: int, webhook: int, directory: Path
) -> dict[str, Any]:
    """The module's default configuration `defaults` with what a plane on loopback needs
    (the module's docstring); its certificates written in `directory`."""
    settings = copy.deepcopy(defaults)
    settings.update(
        {
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            # "0": not served (its secure serving needs the authorization of a cluster's
            # Service; the benchmark reads the process's CPU and memory from /proc)
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": webhook, "host": "127.0.0.1", "certDir": str(directory / "certs")},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {
                "enable": True,
                "webhookServiceName": SERVICE,
                "webhookSecretName": SECRET,
            },
            "integrations": {"frameworks": list(FRAMEWORKS)},
        }
    )
    return settings


def crds(config: Path, ca: Pki, port: int) -> list[dict[str, Any]]:
    """The CRDs its kustomization lists, with the conversion webhook its patches add, on
    loopback."""
    kustomization = yaml.safe_load((config / "crd" / "kustomization.yaml").read_text())
    found = {}
    for name in kustomization["resources"]:
        body = yaml.safe_load((config / "crd" / name).read_text())
        found[body["metadata"]["name"]] = body
    for entry in kustomization.get("patches") or []:
        patch = yaml.safe_load((config / "crd" / entry["path"]).read_text())
        conversion = copy.deepcopy(patch["spec"]["conversion"])
        service = conversion["webhook"]["clientConfig"]["service"]
        conversion["webhook"]["clientConfig"] = _client_config(ca, port, service["path"])
        found[patch["metadata"]["name"]]["spec"]["conversion"] = conversion
    return list(found.values())


def roles(config: Path) -> list[dict[str, Any]]:
    """The manager's ClusterRole and its Role in :data:`NAMESPACE` (the module's), each
    bound to :data:`USER`."""
    out = []
    for name in ("role.yaml", "manager_secrets_role.yaml"):
        for role in yaml.safe_load_all((config / "rbac" / name).read_text()):
            if not role:
                continue
            role = copy.deepcopy(role)
            role["metadata"]["name"] = f"kueue-{role['metadata']['name']}"
            namespaced = role["kind"] == "Role"
            if namespaced:
                role["metadata"]["namespace"] = NAMESPACE
            binding = {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding" if namespaced else "ClusterRoleBinding",
                "metadata": {k: v for k, v in role["metadata"].items() if k != "labels"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": role["kind"],
                    "name": role["metadata"]["name"],
                },
                "subjects": [
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}
                ],
            }
            out += [role, binding]
    return out


def webhook_configurations(config: Path, ca: Pki, port: int) -> list[dict[str, Any]]:
    """The module's webhook configurations, each webhook of Kueue's kinds or of an enabled
    integration (:data:`FRAMEWORKS`) kept, called on loopback by URL."""
    served = {(GROUP, "*"), *FRAMEWORKS.values()}
    out = []
    for body in yaml.safe_load_all((config / "webhook" / "manifests.yaml").read_text()):
        if not body:
            continue
        body = copy.deepcopy(body)
        body["metadata"] = {"name": f"kueue-{body['metadata']['name']}"}
        kept = []
        for hook in body["webhooks"]:
            rules = [
                (group, resource)
                for rule in hook.get("rules") or []
                for group in rule["apiGroups"]
                for resource in rule["resources"]
            ]
            if rules and all((g, r) in served or (g, "*") in served for g, r in rules):
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = _client_config(ca, port, path)
                kept.append(hook)
        body["webhooks"] = kept
        out.append(body)
    return out


def apply(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    """Create or update `body` (server-side apply, this module's field manager); a CRD is
    waited on until it is Established."""
    prefix, plural = PATHS[body["kind"]]
    meta = body["metadata"]
    where = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    path = f"{prefix}{where}/{plural}/{meta['name']}"
    query = {"fieldManager": MANAGER, "force": "true"}
    applied = client.request(
        "PATCH", path, body, content_type="application/apply-patch+yaml", query=query
    )
    if body["kind"] == "CustomResourceDefinition":
        _established(client, path)
    return applied


def _client_config(ca: Pki, port: int, path: str) -> dict[str, str]:
    return {
        "url": f"https://127.0.0.1:{port}{path}",
        "caBundle": base64.b64encode(ca.ca.read_bytes()).decode(),
    }


def _established(client: Client, path: str) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        conditions = (client.request("GET", path).get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return
        time.sleep(0.05)
    raise IdlegateError(f"The CRD at {path} was not Established in {START_SECONDS:g} s.")


def _wait_ready(kueue: Kueue, health: int) -> None:
    """Until the manager answers ready on its health port (its webhook server serving),
    or fail with the end of its log."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline and kueue.alive():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    tail = kueue.log.read_text(errors="replace")[-2000:] if kueue.log.exists() else ""
    state = "exited" if not kueue.alive() else f"did not answer ready in {START_SECONDS:g} s"
    raise IdlegateError(f"Kueue's manager {state}; the end of its log ({kueue.log}):\n{tail}")
