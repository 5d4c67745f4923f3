"""A local control plane on loopback: etcd, kube-apiserver, kube-scheduler,
kube-controller-manager and KWOK, each a process of its own, all in one folder.

``up`` (:func:`start`) makes the certificates (:mod:`idlegate.controlplane.pki`), starts the
components in order, each once the one before answers, writes ``kubeconfig`` (the admin)
beside them, creates the Nodes KWOK plays, and records every process in ``state.json``;
Each ``up`` starts an empty cluster (etcd's data of the last run is removed); the
certificates are kept. ``down`` (:func:`stop`) ends them in the reverse order, SIGTERM then SIGKILL after a grace
period, and removes the record. Logs go to ``logs/<component>.log``. The binaries are
``make cluster``'s, built from the Go modules pinned in ``deploy/local/go.mod``.

With ``audit=True`` kube-apiserver also keeps an audit log, ``logs/audit.log``
(:data:`AUDIT_POLICY`): one JSON line per request once answered, the object after each
write of the kinds whose timing a benchmark reads. It is off by default, so the tests pay
nothing for it.

Every port is chosen free at start, so several planes (one per test worker) can run side
by side. etcd runs without fsync: a local plane is thrown away, and fsync on a busy disk
is what makes an API server slow to answer writes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from idlegate.controlplane import kwok
from idlegate.controlplane.client import ApiRefusal, Client
from idlegate.controlplane.pki import CLIENTS, Pki, ensure_pki
from idlegate.errors import IdlegateError

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
"""In the order they start (and the reverse of the order they stop)."""
START_SECONDS = 120.0
"""The longest a component may take to answer before ``up`` gives up (a safety net)."""
STOP_SECONDS = 10.0
"""How long a component gets to exit after SIGTERM before it is killed."""
SERVICE_RANGE = "10.96.0.0/16"
K8S_VERSION = "v1.36.3"
"""The release built (deploy/local/go.mod); its version is stamped into the binaries."""
AUDIT_LOG = Path("logs") / "audit.log"
"""The audit log's place in a plane's folder (with ``start(audit=True)``)."""
WRITES = ["create", "update", "patch", "delete", "deletecollection"]
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    # one line per request, once answered: the timestamps a reader needs are on it
    "omitStages": ["RequestReceived"],
    "rules": [
        # reads are most requests and tell nothing of who wrote what and when
        {"level": "None", "verbs": ["get", "list", "watch"]},
        # a write's response carries the object after it (a patch's request is only the
        # delta) and its resourceVersion, which orders it among every other write
        {
            "level": "RequestResponse",
            "verbs": WRITES,
            "resources": [
                {"group": "", "resources": ["pods", "pods/status", "pods/binding", "events"]},
                {"group": "idlegate.io", "resources": ["*"]},
                # (a Job's suspend, flipped by Kueue, is its admission and its eviction)
                {"group": "batch", "resources": ["jobs"]},
            ],
        },
        {"level": "Metadata", "verbs": WRITES},
    ],
}
"""What the audit log keeps: the object after each write of pods (their status and binding
too), Events, Jobs and idlegate's kinds; who made every other write; no reads."""


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """`count` Nodes named ``<prefix>-<i>``, each with this capacity."""

    count: int = 3
    cpu: str = "8"
    memory: str = "32Gi"
    gpu: int = 0
    prefix: str = "kwok-node"

    def bodies(self) -> list[dict[str, Any]]:
        return [
            kwok.node(f"{self.prefix}-{i}", self.cpu, self.memory, self.gpu)
            for i in range(self.count)
        ]


@dataclasses.dataclass
class Plane:
    """A running plane: its folder, its API server's URL and its processes."""

    directory: Path
    url: str
    pids: dict[str, int]
    time_factor: float = 1.0

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    def kubeconfig_of(self, name: str) -> Path:
        """The kubeconfig of the client `name` of :data:`~idlegate.controlplane.pki.CLIENTS`."""
        return _kubeconfig_path(self.directory, name)

    @property
    def pki(self) -> Pki:
        return Pki(self.directory / "pki")

    def client(self, name: str = "admin") -> Client:
        return Client(self.url, self.pki, name)

    def save(self) -> None:
        record = {"url": self.url, "pids": self.pids, "time_factor": self.time_factor}
        (self.directory / "state.json").write_text(json.dumps(record, indent=1))

    @classmethod
    def load(cls, directory: Path) -> Plane | None:
        """The plane recorded in `directory`, or None if none is."""
        path = directory / "state.json"
        if not path.exists():
            return None
        record = json.loads(path.read_text())
        return cls(directory, record["url"], record["pids"], record.get("time_factor", 1.0))

    def alive(self) -> dict[str, bool]:
        """Whether each recorded process still runs."""
        return {name: running(pid) for name, pid in self.pids.items()}


def binaries(bin_dir: Path) -> dict[str, Path]:
    """Each component's binary in `bin_dir`; an error naming what is missing and how to
    build it."""
    found = {name: bin_dir / name for name in COMPONENTS}
    missing = [name for name, path in found.items() if not os.access(path, os.X_OK)]
    if missing:
        raise IdlegateError(
            f"{', '.join(missing)} not found in {bin_dir}: build the control plane first "
            "with `make cluster` (Go modules from the module proxy; see docs/local-cluster.md)."
        )
    return found


def start(
    directory: Path,
    bin_dir: Path,
    nodes: Iterable[NodeSpec] = (NodeSpec(),),
    time_factor: float = 1.0,
    audit: bool = False,
) -> Plane:
    """Start a plane in `directory` (see the module's docstring), kube-apiserver keeping an
    audit log if `audit` (:data:`AUDIT_LOG`); stops what it started if a component fails to
    come up, and says which, with the end of its log."""
    if time_factor <= 0:
        raise IdlegateError(f"--time-factor must be above 0, not {time_factor}.")
    exes = binaries(bin_dir)
    directory = directory.resolve()
    if (old := Plane.load(directory)) is not None and any(old.alive().values()):
        raise IdlegateError(
            f"A control plane already runs from {directory}: stop it first "
            f"(python -m idlegate.controlplane down --dir {directory})."
        )
    pki = ensure_pki(directory / "pki")
    shutil.rmtree(directory / "etcd", ignore_errors=True)  # a fresh cluster each time
    (directory / "logs").mkdir(parents=True, exist_ok=True)
    ports = free_ports(3)
    url = f"https://127.0.0.1:{ports[2]}"
    plane = Plane(directory, url, {}, time_factor)
    for name in ("admin", *_CLIENTS):
        write_kubeconfig(_kubeconfig_path(directory, name), url, pki, name)
    (directory / "kwok.yaml").write_text(yaml.safe_dump_all(kwok.stages(time_factor)))
    (directory / AUDIT_LOG).unlink(missing_ok=True)  # (a fresh cluster's requests only)
    try:
        for name in COMPONENTS:
            command = _command(name, exes[name], directory, pki, ports)
            if audit and name == "kube-apiserver":
                command += audit_flags(directory)
            plane.pids[name] = spawn(command, directory / "logs" / f"{name}.log")
            plane.save()
            _wait_ready(plane, name, ports)
        _create_nodes(plane.client(), nodes)
    except ApiRefusal as exc:
        stop(plane)
        raise IdlegateError(f"The new control plane refused its nodes: {exc}") from None
    except BaseException:
        stop(plane)
        raise
    return plane


def stop(plane: Plane) -> list[str]:
    """End the plane's processes, newest first; the names of those that had to be killed."""
    killed = []
    for name in reversed(COMPONENTS):
        pid = plane.pids.get(name)
        if pid is not None and end(pid):
            killed.append(name)
    (plane.directory / "state.json").unlink(missing_ok=True)
    return killed


def end(pid: int) -> bool:
    """End the process `pid` if it runs, SIGTERM then SIGKILL after :data:`STOP_SECONDS`;
    whether it had to be killed."""
    if not running(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    if _exited(pid, STOP_SECONDS):
        return False
    os.kill(pid, signal.SIGKILL)
    _exited(pid, STOP_SECONDS)
    return True


def audit_flags(directory: Path) -> list[str]:
    """kube-apiserver's flags for an audit log in `directory` (:data:`AUDIT_LOG`), its
    policy written beside it."""
    policy = directory / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={directory / AUDIT_LOG}",
        # never rotated during a run (the default rotates at 100 MB), nor batched: each
        # line is written before its request is answered
        "--audit-log-maxsize=100000",
        "--audit-log-mode=blocking",
        "--audit-log-format=json",
    ]


_CLIENTS = tuple(name for name in CLIENTS if name != "admin")
"""The components with a kubeconfig of their own (the admin's is ``kubeconfig``)."""


def _kubeconfig_path(directory: Path, name: str) -> Path:
    return directory / ("kubeconfig" if name == "admin" else f"{name}.kubeconfig")


def write_kubeconfig(path: Path, url: str, pki: Pki, name: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "idlegate-local",
                "cluster": {"server": url, "certificate-authority": str(pki.ca)},
            }
        ],
        "users": [
            {
                "name": name,
                "user": {
                    "client-certificate": str(pki.cert(name)),
                    "client-key": str(pki.key(name)),
                },
            }
        ],
        "contexts": [
            {"name": "idlegate-local", "context": {"cluster": "idlegate-local", "user": name}}
        ],
        "current-context": "idlegate-local",
    }
    path.write_text(yaml.safe_dump(config))


def _command(name: str, exe: Path, directory: Path, pki: Pki, ports: list[int]) -> list[str]:
    etcd_client, etcd_peer, apiserver = ports
    kubeconfig = str(_kubeconfig_path(directory, name))
    if name == "etcd":
        return [
            str(exe),
            f"--data-dir={directory / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_client}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ]
    if name == "kube-apiserver":
        return [
            str(exe),
            f"--etcd-servers=http://127.0.0.1:{etcd_client}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={apiserver}",
            f"--cert-dir={directory / 'apiserver-certs'}",
            f"--tls-cert-file={pki.cert('apiserver')}",
            f"--tls-private-key-file={pki.key('apiserver')}",
            f"--client-ca-file={pki.ca}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            "--authorization-mode=RBAC",
            "--allow-privileged=true",
            "--profiling=false",
            "--event-ttl=1h",
            # the `kubernetes` Service's endpoint would be 127.0.0.1, which the API refuses
            "--endpoint-reconciler-type=none",
        ]
    common = [f"--kubeconfig={kubeconfig}", "--leader-elect=false", "--secure-port=0"]
    if name == "kube-controller-manager":
        return [
            str(exe),
            *common,
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca}",
            # each controller under its own service account and bootstrap role, as kubeadm
            # runs it: RBAC then grants each what Kubernetes grants it on a real cluster
            "--use-service-account-credentials=true",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
        ]
    if name == "kube-scheduler":
        return [str(exe), *common]
    return [
        str(exe),
        f"--kubeconfig={kubeconfig}",
        f"--config={directory / 'kwok.yaml'}",
        f"--manage-nodes-with-annotation-selector={kwok.NODE_ANNOTATION}=fake",
        "--node-lease-duration-seconds=40",
        "--cidr=10.0.0.0/16",
    ]


def spawn(command: list[str], log: Path) -> int:
    """Start `command` in a session of its own (a Ctrl-C in the caller's terminal does not
    reach it; ``down`` stops it), its output written to `log` (a fresh one each run)."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    return process.pid


def _wait_ready(plane: Plane, name: str, ports: list[int]) -> None:
    """Until `name` answers (etcd: its port; the API server: /readyz; the others: a sign
    in the API of their work), or fail with the end of its log."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if not running(plane.pids[name]):
            break
        if _answers(plane, name, ports):
            return
        time.sleep(0.1)
    log = plane.directory / "logs" / f"{name}.log"
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    state = "exited" if not running(plane.pids[name]) else f"did not answer in {START_SECONDS} s"
    raise IdlegateError(f"{name} {state}; the end of its log ({log}):\n{tail}")


def _answers(plane: Plane, name: str, ports: list[int]) -> bool:
    if name == "etcd":
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", ports[0])) == 0
    client = plane.client()
    try:
        if name == "kube-apiserver":
            return client.text("/readyz").strip() == "ok"
        if name == "kube-controller-manager":
            # its service-account controller makes every namespace's `default` account
            client.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")
            return True
        return True  # the scheduler and KWOK have no sign before there is work
    except (ApiRefusal, OSError):
        return False


def _create_nodes(client: Client, specs: Iterable[NodeSpec]) -> None:
    for spec in specs:
        for body in spec.bodies():
            client.request("POST", "/api/v1/nodes", body)


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def running(pid: int) -> bool:
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")
    except OSError:
        return False


def _exited(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not running(pid):
            return True
        time.sleep(0.05)
    return not running(pid)
