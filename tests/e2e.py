"""The end-to-end tests' shared pieces: the real kopf operator in a thread, the workflows it
is given, and what the emulator really holds.

* :func:`running_operator`: the operator in ``kopf.testing.KopfRunner`` with an accelerated
  clock (`SPEED`), serving one namespace, through any kubeconfig (the API server's, or a
  :class:`~tests.k8s.faults.FaultProxy`'s);
* :class:`OperatorProcess`: ``idlegate operator`` as a process of its own, to be killed -9;
* :class:`PodMonitor`: every pod write in the emulator, as it happens: which pods hold an
  executor (ungated, not ended), the most at once, and each pod's creations (a duplicate
  is a name created twice);
* :func:`workflow`, :func:`stage`: DagWorkflow bodies; :func:`wait_phase`, :func:`status_of`,
  :func:`events_of`, :func:`pods_of`: what the API holds about one;
* :class:`Journal`: every pod and workflow write of a namespace, in order (what happened
  before what, which a poll can miss);
* :func:`holding_first_runs`: a kubelet's pod durations that keep chosen pods running;
* :class:`Periodic`: a thread taking one observation every so often (benchmarks/api_faults.py's
  pool sampler);
* :func:`serving_proxy`: a :class:`~tests.k8s.faults.FaultProxy` before the API server, for
  a module fixture.

Used by tests/test_e2e_*.py, tests/failover.py and benchmarks/api_faults.py.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Self

import kmock
from kopf.testing import KopfRunner

import idlegate
from idlegate.api.kinds import API_VERSION
from idlegate.api.labels import ANNOTATION_ATTEMPT, GATE, LABEL_STAGE, LABEL_TASK, LABEL_WORKFLOW
from idlegate.api.settings import Clock, Settings
from idlegate.operator.main import build_registry
from idlegate.operator.runtime import Operator
from tests.clocks import ScaledClock
from tests.k8s.apiserver import PODS
from tests.k8s.faults import FaultProxy
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet, duration_of

# Why an accelerated wall clock here, not fake loop time (looptime, as the operator's
# in-memory tests use: tests/test_operator_bridge.py and the like): looptime fakes the
# time of one event loop, and an end-to-end test has three that talk through real sockets
# and threads. The operator is the real kopf operator in KopfRunner (a thread with its own
# loop, or a process of its own: OperatorProcess), the API emulator serves HTTP from a
# thread of its own, and the simulated kubelet runs pods with time.sleep in its threads.
# Fake time in the operator's loop would jump to its next timer while an answer from the
# emulator or a pod's end is still on its way in real time (a watch's timeout, a retry's
# back-off, an idle slot firing early). So the operator's clock and the kubelet share one
# accelerated wall clock (SPEED), and every wait is on what the emulator holds (`wait`).
SPEED = 20.0
"""Simulated seconds per wall second, for the operator's clock and the kubelet alike."""
DWF = "idlegate.io/v1alpha1/dagworkflows"
HANG_SECONDS = 300.0
"""The least wall-clock time a :func:`wait` (or the operator's exit) gets before it is
taken for a hang: a safety net, never a bound on speed."""


class PodMonitor:
    """Watches every pod write of `namespace` (and of the `others`, e.g. one queue's
    namespaces, whose pods' names differ) in the emulator: pool occupancy, creations and
    gate removals, exactly."""

    def __init__(self, api: ApiServer, namespace: str, *others: str) -> None:
        self.api, self.namespace = api, namespace
        self.namespaces = {namespace, *others}
        self.occupying: dict[str, str] = {}  # pod -> workflow, while it holds an executor
        self.max_total = 0
        self.max_per_workflow: Counter[str] = Counter()
        self.created: Counter[str] = Counter()
        self.tasks: Counter[tuple[str, str, str, str]] = Counter()
        """Pods created per (workflow, stage, task, attempt), from their labels."""
        self.gated: set[str] = set()
        """Pods that carried the operator's gate at some point."""
        self.released: set[str] = set()
        """Pods whose gate was removed (each one release, whoever removed it)."""
        self.gated_now: set[str] = set()
        """Pods carrying the gate now (work ready to run, waiting for an executor)."""
        self._lock = threading.Lock()
        self._unsubscribe = api.subscribe(self._on_event)

    def _on_event(self, res: kmock.resource, etype: str, obj: dict[str, Any]) -> None:
        if res != PODS:
            return
        meta = obj.get("metadata") or {}
        if meta.get("namespace") not in self.namespaces:
            return
        name, workflow = meta["name"], (meta.get("labels") or {}).get(LABEL_WORKFLOW, "")
        holds = (
            etype != "DELETED"
            and not (obj.get("spec") or {}).get("schedulingGates")
            and (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not meta.get("deletionTimestamp")
        )
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        gates = [g.get("name") for g in (obj.get("spec") or {}).get("schedulingGates") or []]
        with self._lock:
            if etype == "ADDED":
                self.created[name] += 1
                task = (
                    labels.get(LABEL_WORKFLOW, ""),
                    labels.get(LABEL_STAGE, ""),
                    labels.get(LABEL_TASK, ""),
                    annotations.get(ANNOTATION_ATTEMPT, "0"),
                )
                self.tasks[task] += 1
            if GATE in gates and etype != "DELETED":
                self.gated_now.add(name)
            else:
                self.gated_now.discard(name)
            if GATE in gates:
                self.gated.add(name)
            elif name in self.gated and etype != "DELETED":
                self.released.add(name)
            if holds:
                self.occupying[name] = workflow
            else:
                self.occupying.pop(name, None)
            self.max_total = max(self.max_total, len(self.occupying))
            per = Counter(self.occupying.values())
            for wf, n in per.items():
                self.max_per_workflow[wf] = max(self.max_per_workflow[wf], n)

    def close(self) -> None:
        self._unsubscribe()

    @property
    def duplicates(self) -> list[Any]:
        """Pod names created twice, and (workflow, stage, task, attempt) with two pods."""
        with self._lock:
            names = [name for name, n in self.created.items() if n > 1]
            return names + [task for task, n in self.tasks.items() if n > 1]

    def workflows(self) -> set[str]:
        """The DagWorkflows that have had a pod."""
        with self._lock:
            return {workflow for workflow, *_ in self.tasks if workflow}

    def running(self) -> set[str]:
        """The pods holding an executor now."""
        with self._lock:
            return set(self.occupying)

    def counts(self) -> tuple[int, int]:
        """(pods holding an executor, gated pods waiting for one) now."""
        with self._lock:
            return len(self.occupying), len(self.gated_now)


class Journal:
    """Every write to pods and DagWorkflows of one namespace, in the emulator's order, as
    (plural, event type, name, phase, the workflow a pod belongs to): what happened before
    what, without polling (a poll can miss a state that lasts less than its interval)."""

    def __init__(self, api: ApiServer, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.entries: list[tuple[str, str, str, str, str]] = []
        self._lock = threading.Lock()
        self._unsubscribe = api.subscribe(self._on_event, ("pods", "dagworkflows"))

    def _on_event(self, res: kmock.resource, etype: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("namespace") != self.namespace or res.plural not in ("pods", "dagworkflows"):
            return
        phase = (obj.get("status") or {}).get("phase") or ""
        owner = (meta.get("labels") or {}).get(LABEL_WORKFLOW, "")
        with self._lock:
            self.entries.append((res.plural, etype, meta["name"], phase, owner))

    def close(self) -> None:
        self._unsubscribe()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def index(
        self, plural: str, name: str, etype: str | None = None, phase: str | None = None
    ) -> int | None:
        """The position of the first write to `name` of that type (any if None) leaving it in
        that phase (any if None), or None if there was none (yet)."""
        with self._lock:
            for i, (p, e, n, ph, _) in enumerate(self.entries):
                if (p, n) == (plural, name) and etype in (None, e) and phase in (None, ph):
                    return i
        return None

    def pods_of(self, workflow: str) -> set[str]:
        """The names of every pod of `workflow` ever written."""
        with self._lock:
            return {n for p, _, n, _, owner in self.entries if p == "pods" and owner == workflow}


HOLD_SECONDS = 1e6
"""A run time no test waits out: the pod ends only when deleted (evicted, cut, collected)."""


def holding_first_runs(*names: str) -> Callable[[Mapping[str, Any]], float]:
    """A :class:`~tests.k8s.kubelet.SimKubelet` ``durations``: the first run of each pod named
    in `names` lasts :data:`HOLD_SECONDS`; later runs, and every other pod, what they declare.

    A test that needs a pod still running when something happens (a deadline, a suspend)
    holds it so, instead of betting that the operator acts before the pod's time is up."""
    started: set[str] = set()

    def durations(pod: Mapping[str, Any]) -> float:
        name = pod["metadata"]["name"]
        if name in names and name not in started:
            started.add(name)
            return HOLD_SECONDS
        return duration_of(pod)

    return durations


class Periodic:
    """Calls :meth:`tick` every `interval` s in a daemon thread, from enter to exit."""

    def __init__(self, interval: float, name: str) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()

    def tick(self) -> None:
        """One observation (a subclass says what)."""
        raise NotImplementedError


def serving_proxy(api: ApiServer, directory: Path) -> Iterator[FaultProxy]:
    """A fault proxy before `api`, writing its kubeconfig in `directory`, for a module
    fixture to ``yield from`` (after one serving `api` with ``serving_crd``)."""
    with FaultProxy(api, directory) as proxy:
        yield proxy


@contextlib.contextmanager
def running_operator(
    api: ApiServer,
    namespace: str,
    *,
    pool: int,
    scheduler: Any = None,
    policy: str | None = "fair",
    clock: Clock | None = None,
    kubeconfig: Path | None = None,
    **overrides: Any,
) -> Iterator[Operator]:
    """The real kopf operator in a thread (KopfRunner), serving `namespace`, through
    `kubeconfig` (default: the API server's); `overrides` replace fields of its Settings.
    If it exits before the block ends, the block's failure says so, with its last output."""
    fields: dict[str, Any] = dict(
        pool_size=pool,
        policy=policy,
        scheduler=scheduler,
        namespaces=(namespace,),
        standalone=True,
        metrics_port=None,
        health_port=None,
        kubeconfig=kubeconfig or api.kubeconfig,
        clock=clock or ScaledClock(SPEED),
        retry_backoff_max=0.5,
        status_interval=0.2,
        watch_server_timeout=60,
        watch_client_timeout=90,
    )
    operator = Operator(Settings(**{**fields, **overrides}))
    args = ["run", "--standalone"]
    for served in operator.settings.namespaces:  # (overrides may serve several)
        args += ["--namespace", served]
    with KopfRunner(args, registry=build_registry(operator), timeout=HANG_SECONDS) as runner:
        wait(
            lambda: operator._pools is not None and operator.bridge.rebuilt,
            20,
            "operator start",
        )
        try:
            yield operator
        except Exception as exc:
            if runner.future.done():
                output = runner.output[-4000:]
                raise AssertionError(f"the operator exited; its last output:\n{output}") from exc
            raise
    if runner.exception is not None or runner.exit_code != 0:
        raise AssertionError(f"the operator failed:\n{runner.output}") from runner.exception


class OperatorProcess:
    """``idlegate operator`` serving `namespace` as a process of its own (so that it can be
    killed -9), on free ports of 127.0.0.1, its output in `log`; `flags` are added to its
    command line, `env` to its environment (e.g. POD_NAME, its name in a Lease)."""

    def __init__(
        self,
        api: ApiServer,
        namespace: str,
        pool: int,
        log: Path,
        *flags: str,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.log = log
        self.metrics_port, health_port = _free_port(), _free_port()
        src = str(Path(idlegate.__file__).resolve().parents[1])
        environ = {**os.environ, **(env or {})}
        environ["PYTHONPATH"] = src + os.pathsep + os.environ.get("PYTHONPATH", "")
        args = [
            sys.executable,
            "-m",
            "idlegate",
            "operator",
            f"--pool-size={pool}",
            "--standalone",
            "--scheduler=fair",
            f"--namespace={namespace}",
            f"--kubeconfig={api.kubeconfig}",
            "--listen-host=127.0.0.1",
            f"--metrics-port={self.metrics_port}",
            f"--health-port={health_port}",
            "--status-interval=0.2",
            *flags,
        ]
        with log.open("wb") as out:
            self.process = subprocess.Popen(args, env=environ, stdout=out, stderr=subprocess.STDOUT)

    def readiness(self) -> dict[str, Any] | None:
        """What its /readyz answers now; None before it listens."""
        url = f"http://127.0.0.1:{self.metrics_port}/readyz"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read())
        except OSError:
            return None

    def kill(self, how: signal.Signals = signal.SIGKILL) -> None:
        """kill -9 (or send `how`), and reap it."""
        if self.process.poll() is None:
            self.process.send_signal(how)
        self.process.wait(HANG_SECONDS)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@contextlib.contextmanager
def operator_processes(logs: Path) -> Iterator[list[OperatorProcess]]:
    """The operator processes a test starts (it appends them to the list yielded), each
    killed at the end; a hang (TimeoutError) fails with their logs' (`logs`/*.log) ends."""
    started: list[OperatorProcess] = []
    try:
        yield started
    except TimeoutError as exc:
        said = "\n".join(p.read_text()[-3000:] for p in sorted(logs.glob("*.log")))
        raise AssertionError(f"{exc}; the operators' last output:\n{said}") from exc
    finally:
        for process in started:
            process.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_namespaces = itertools.count()


def new_namespace(api: ApiServer, prefix: str) -> str:
    """A fresh namespace on `api`, unique across tests and xdist workers, once pods may be
    created in it."""
    name = f"{prefix}-{os.getpid() % 10000}-{next(_namespaces)}"
    api.create("namespaces", {"metadata": {"name": name}})
    api.namespace_ready(name)
    return name


def kubelet_for(
    api: ApiServer, namespace: str, speed: float = SPEED, **options: Any
) -> contextlib.AbstractContextManager:
    """What runs the namespace's pods, from enter to exit, `speed` times faster than they
    declare: the simulated kubelet on the test API server (`options` are its own); nothing
    on the real control plane, where KWOK runs every pod at the plane's time factor (the
    e2e clock's SPEED: tests/real/conftest.py)."""
    if getattr(api, "real", False):
        return contextlib.nullcontext()
    return SimKubelet(api, namespace, time_factor=1 / speed, **options)


def wait(predicate: Any, timeout: float, what: str) -> Any:
    """Polls `predicate` until it returns something truthy, and returns that.

    The tests wait on events (what the emulator holds), never on the wall clock's pace:
    `timeout` (at least :data:`HANG_SECONDS`) is only a safety net that turns a hang into a
    failure naming `what`, however slow or loaded the machine is."""
    timeout = max(timeout, HANG_SECONDS)
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {timeout} s: taken for a hang")
        time.sleep(0.02)


def workflow(name: str, *stages: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "DagWorkflow",
        "metadata": {"name": name},
        "spec": {"stages": list(stages)},
    }


def stage(name: str, tasks: int = 1, duration: float = 10, deps: tuple[str, ...] = (), **kw):
    return {
        "name": name,
        "tasks": tasks,
        "taskDurationSeconds": duration,
        "dependsOn": list(deps),
        **kw,
    }


def status_of(api: ApiServer, ns: str, name: str) -> dict[str, Any]:
    return (api.get(DWF, ns, name) or {}).get("status") or {}


def wait_phase(api: ApiServer, ns: str, name: str, phases: tuple[str, ...], timeout: float = 30):
    return wait(
        lambda: status_of(api, ns, name).get("phase") in phases and status_of(api, ns, name),
        timeout,
        f"{name} to reach {phases}",
    )


def events_of(api: ApiServer, ns: str, name: str) -> list[dict[str, Any]]:
    return api.list("events", ns, field_selector=f"involvedObject.name={name}")


def pods_of(api: ApiServer, ns: str, name: str) -> list[dict[str, Any]]:
    return api.list("pods", ns, label_selector=f"{LABEL_WORKFLOW}={name}")
