"""The real control plane as the end-to-end tests see it: :class:`RealApiServer` has the
test API server's interface (:class:`tests.k8s.harness.ApiServer`: ``get``, ``list``,
``create``, ``patch``, ``delete``, ``kubectl``, ``subscribe``, ``kubeconfig``), over a
kube-apiserver with etcd, kube-scheduler, kube-controller-manager and KWOK started by
:mod:`idlegate.controlplane` from ``make cluster``'s binaries.

So one scenario runs on either: tests/real/ imports scenarios of the test_e2e_* modules and
runs them here, with KWOK in the simulated kubelet's place (its stages run each pod for its
declared duration, at the e2e clock's SPEED) and kube-scheduler in the stand-in's.

A subscription is a watch per resource, from the resourceVersion of a list taken when it
starts (as the emulator's, it sees only what is written after it), relisted on 410 Gone.
Events of two resources reach the callback from two threads, each in its own order, not
in one order across resources as the emulator's do.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import kmock

from idlegate.api.crd import KINDS, render_crd
from idlegate.controlplane.client import PATCH_TYPES, ApiRefusal
from idlegate.controlplane.launcher import NodeSpec, Plane, binaries, start, stop
from tests.k8s.harness import says_nothing

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("IDLEGATE_CLUSTER_BIN", ROOT / "out" / "cluster" / "bin"))
"""Where ``make cluster`` puts the binaries (``IDLEGATE_CLUSTER_BIN`` moves it)."""

PANIC = re.compile(r"Observed a panic|^panic: ")
"""A panic the API server recovered from (it answers 500), or one it died of."""
Callback = Callable[[kmock.resource, str, dict[str, Any]], None]


class RealApiServer:
    """A running plane, with the test API server's accessors (see the module docstring)."""

    def __init__(self, plane: Plane) -> None:
        self.plane = plane
        self.directory = plane.directory
        self.kubeconfig = plane.kubeconfig
        self.url = plane.url
        self.client = plane.client()
        self._resources: dict[str, tuple[str, bool]] = {}
        """plural -> (its path prefix without a namespace, whether it is namespaced)"""
        self._lock = threading.Lock()

    # -- resources --------------------------------------------------------------------------

    def resource(self, spec: kmock.resource | str) -> kmock.resource:
        """``pods``, ``v1/pods``, ``group/version/plural`` as a kmock resource."""
        if isinstance(spec, kmock.resource):
            return spec
        parts = spec.split("/")
        if len(parts) == 3:
            return kmock.resource(parts[0], parts[1], parts[2])
        if len(parts) == 2:
            return kmock.resource("", parts[0], parts[1])
        group, version = self._group_version(spec)
        return kmock.resource(group, version, spec)

    def _group_version(self, plural: str) -> tuple[str, str]:
        if plural not in self._resources:  # (a CRD created since the last discovery)
            self._discover()
        prefix, _ = self._resources[plural]
        if prefix == "/api/v1":
            return "", "v1"
        _, _, group, version = prefix.split("/", 3)
        return group, version

    def _discover(self) -> None:
        """Every served resource's path, from the discovery documents."""
        found: dict[str, tuple[str, bool]] = {}
        for item in self.client.request("GET", "/api/v1")["resources"]:
            if "/" not in item["name"]:
                found[item["name"]] = ("/api/v1", item["namespaced"])
        for group in self.client.request("GET", "/apis")["groups"]:
            for version in group["versions"]:
                prefix = f"/apis/{version['groupVersion']}"
                for item in self.client.request("GET", prefix)["resources"]:
                    if "/" not in item["name"]:
                        found.setdefault(item["name"], (prefix, item["namespaced"]))
        with self._lock:
            self._resources = found

    def path(self, spec: kmock.resource | str, namespace: str | None, name: str = "") -> str:
        res = self.resource(spec)
        prefix = f"/api/{res.version}" if not res.group else f"/apis/{res.group}/{res.version}"
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"{prefix}{where}/{res.plural}" + (f"/{name}" if name else "")

    # -- the test API server's accessors ----------------------------------------------------

    def get(self, res: kmock.resource | str, namespace: str | None, name: str) -> dict | None:
        try:
            return self.client.request("GET", self.path(res, namespace, name))
        except ApiRefusal as exc:
            if exc.status == 404:
                return None
            raise

    def list(
        self, res: kmock.resource | str, namespace: str | None = None, **selectors: str
    ) -> list:
        query = {k.replace("_selector", "Selector"): v for k, v in selectors.items()}
        return self.client.request("GET", self.path(res, namespace), query=query)["items"]

    def create(self, res: kmock.resource | str, body: dict, namespace: str | None = None) -> dict:
        created = self.client.request("POST", self.path(res, namespace), body)
        if self.resource(res).plural == "customresourcedefinitions":
            self._established(created["metadata"]["name"])
        return created

    def patch(
        self,
        res: kmock.resource | str,
        namespace: str | None,
        name: str,
        patch: Any,
        **options: str,
    ) -> dict:
        kind = PATCH_TYPES[options.get("patch_type", "merge")]
        path = self.path(res, namespace, name)
        if sub := options.get("subresource"):
            path += f"/{sub}"
        return self.client.request("PATCH", path, patch, content_type=kind)

    def delete(self, res: kmock.resource | str, namespace: str | None, name: str) -> dict:
        return self.client.request("DELETE", self.path(res, namespace, name))

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The real ``kubectl`` against this plane; fail on a non-zero exit."""
        binary = shutil.which("kubectl")
        assert binary is not None, "kubectl is not installed"
        command = [binary, f"--kubeconfig={self.kubeconfig}", *args]
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
        assert result.returncode == 0, f"kubectl {' '.join(args)}:\n{result.stdout}{result.stderr}"
        return result

    def subscribe(self, callback: Callback, plurals: tuple[str, ...] = ("pods",)) -> Callable:
        """`callback(resource, event type, object)` for every write to `plurals` from now on,
        until the returned function is called."""
        stopped = threading.Event()
        for plural in plurals:
            res = self.resource(plural)
            thread = threading.Thread(
                target=self._watch, args=(res, callback, stopped), daemon=True
            )
            thread.start()
        return stopped.set

    def _watch(self, res: kmock.resource, callback: Callback, stopped: threading.Event) -> None:
        path = self.path(res, None)
        version = self.client.request("GET", path, query={"limit": "1"})["metadata"][
            "resourceVersion"
        ]
        while not stopped.is_set():
            query = {"watch": "1", "resourceVersion": version, "timeoutSeconds": "10"}
            try:
                for event in self.client.stream(path, query=query, timeout=30):
                    if stopped.is_set():
                        return
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        if obj.get("code") == 410:  # expired: start again from now
                            version = self.client.request("GET", path, query={"limit": "1"})[
                                "metadata"
                            ]["resourceVersion"]
                        break
                    version = obj["metadata"]["resourceVersion"]
                    callback(res, event["type"], obj)
            except (ApiRefusal, OSError):
                if stopped.wait(0.2):
                    return

    # -- checks at the end ------------------------------------------------------------------

    def assert_no_internal_errors(self) -> None:
        """Fail if the API server logged a panic (a 500 of its own)."""
        log = (self.directory / "logs" / "kube-apiserver.log").read_text(errors="replace")
        panics = [line for line in log.splitlines() if PANIC.search(line)]
        assert not panics, "\n".join(panics[:5])

    def assert_events_say_why(self, namespace: str | None = None) -> None:
        """Fail if the operator posted an Event with an empty reason, message or clause."""
        mute = [
            why
            for event in self.list("events", namespace)
            if event.get("reportingComponent") and (why := says_nothing(event))
        ]
        assert not mute, "\n".join(mute)

    def _established(self, name: str) -> None:
        """Until the CRD `name` serves (its Established condition), then rediscover."""
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        for _ in range(600):
            crd = self.client.request("GET", path)
            # A new CRD's status says `conditions: null` until its controller has looked.
            status = crd.get("status") or {}
            conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
            if conditions.get("Established") == "True":
                self._discover()
                return
            time.sleep(0.05)
        raise TimeoutError(f"the CRD {name} was not established in 30 s")

    real = True

    def namespace_ready(self, namespace: str) -> None:
        """Until the namespace's ``default`` ServiceAccount exists: kube-controller-manager
        makes it, and the API server refuses a pod of a namespace without it."""
        for _ in range(6000):
            if self.get("serviceaccounts", namespace, "default") is not None:
                return
            time.sleep(0.05)
        raise TimeoutError(f"no default ServiceAccount in {namespace} after 300 s")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self.plane)


def need_binaries() -> Path:
    """``make cluster``'s binaries (:data:`BIN`), or the launcher's error saying to build them."""
    binaries(BIN)
    return BIN


def real_plane(
    directory: Path, time_factor: float, nodes: list[NodeSpec]
) -> Iterator[RealApiServer]:
    """A plane serving the project's CRDs, for a fixture to ``yield from``; at the end it
    fails if the API server panicked, and stops the plane."""
    plane = start(directory, need_binaries(), nodes, time_factor)
    with RealApiServer(plane) as api:
        for kind in KINDS:
            api.create("customresourcedefinitions", render_crd(kind))
        yield api
        api.assert_no_internal_errors()
