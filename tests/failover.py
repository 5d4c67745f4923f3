"""Two replicas of the operator with leader election, the leader killed -9 mid-burst: the
scenario of tests/test_e2e_leader.py and benchmarks/failover.py.

:func:`failover` runs two ``idlegate operator --leader-election`` processes against the
test API server (:class:`~tests.e2e.OperatorProcess`, the Lease in the test's namespace),
creates a burst of workflows, kills the leader once some have finished, and waits (on
what the emulator holds, never on the wall clock's pace) until every workflow has
finished. A replica that ends on its own (it lost the Lease: a renewal held up longer than
its deadline on a loaded machine) is started again under its name, as its Deployment
would restart it; the killed one is not (its node is gone). :class:`Timeline` records, in the emulator's event loop and on its clock, each
gate removal and each change of the Lease's holder, so the failover is measured where
the writes land: from the kill to the new leader's Lease, and to its first release. It
also reads the API server's audit of each write the operator's own client sends (every
pod creation, gate removal, status patch and Event; each names its replica in its
User-Agent): one sent by a replica that did not hold the Lease as it landed is a second
writer.
"""

from __future__ import annotations

import asyncio
import collections
import re
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kmock

from idlegate.api.labels import GATE
from tests.e2e import (
    DWF,
    SPEED,
    OperatorProcess,
    Periodic,
    PodMonitor,
    new_namespace,
    stage,
    wait,
    workflow,
)
from tests.k8s.apiserver import LEASES, PODS, Write
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet

LEASE = "idlegate-operator"
REPLICAS = ("replica-a", "replica-b")
OPERATOR_AGENT = re.compile(r"idlegate/\S+ \((?P<identity>.*)\)")
"""The User-Agent of the operator's client (idlegate.operator.edge.kube.user_agent)."""


class Timeline:
    """Gate removals, Lease holders and finished workflows of one namespace, each with the
    emulator loop's time (monotonic seconds) of the write."""

    def __init__(self, api: ApiServer, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.releases: list[float] = []
        self.holders: list[tuple[float, str]] = []
        self.finished: dict[str, str] = {}
        self.writes: collections.Counter[str] = collections.Counter()
        self.foreign: list[tuple[float, str, Write]] = []
        self._gated: set[str] = set()
        self._lock = threading.Lock()
        self._unsubscribe = api.call(lambda: api.emulator.subscribe(self._on_event))
        self._unaudit = api.call(lambda: api.emulator.audit(self._on_write))

    def now(self) -> float:
        """The emulator's clock now."""
        return self.api.call(lambda: asyncio.get_running_loop().time())

    def _on_event(self, res: kmock.resource, etype: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("namespace") != self.namespace:
            return
        at = asyncio.get_running_loop().time()
        with self._lock:
            if res == PODS:
                gates = {
                    g.get("name") for g in (obj.get("spec") or {}).get("schedulingGates") or []
                }
                if GATE in gates:
                    self._gated.add(meta["name"])
                elif meta["name"] in self._gated and etype != "DELETED":
                    self._gated.discard(meta["name"])
                    self.releases.append(at)
            elif res == LEASES:
                holder = (obj.get("spec") or {}).get("holderIdentity") or ""
                if not self.holders or self.holders[-1][1] != holder:
                    self.holders.append((at, holder))
            elif res.plural == "dagworkflows":
                phase = (obj.get("status") or {}).get("phase") or ""
                if phase in ("Succeeded", "Failed"):
                    self.finished[meta["name"]] = phase

    def _on_write(self, write: Write) -> None:
        """Count the operator's writes (not the Lease's) by replica; keep each one sent by a
        replica other than the Lease's holder, with the holder of the time."""
        sender = OPERATOR_AGENT.fullmatch(write.user_agent)
        ours = write.namespace in (self.namespace, None)  # (None: cluster-scoped, the pools)
        if sender is None or not ours or write.resource == LEASES:
            return
        at, identity = asyncio.get_running_loop().time(), sender["identity"]
        with self._lock:
            self.writes[identity] += 1
            holder = self.holders[-1][1] if self.holders else ""
            if identity != holder:
                self.foreign.append((at, holder, write))

    def holder(self) -> str:
        with self._lock:
            return self.holders[-1][1] if self.holders else ""

    def done(self) -> int:
        with self._lock:
            return len(self.finished)

    def first_after(self, times: list[float], t: float) -> float | None:
        with self._lock:
            return next((x for x in times if x > t), None)

    def close(self) -> None:
        self.api.call(self._unsubscribe)
        self.api.call(self._unaudit)


@dataclass(frozen=True)
class Failover:
    """What one run measured (seconds on the emulator's clock)."""

    to_lease: float
    """From the kill to the Lease's next holder."""
    to_release: float
    """From the kill to the first gate removal after the new holder took the Lease."""
    finished: dict[str, str]
    """Each workflow's final phase."""
    duplicates: list[Any]
    """Pods created twice (by name, or by workflow, stage, task and attempt)."""
    max_running: int
    """The most pods holding an executor at once."""
    holders: list[str]
    """The Lease's holders from the kill on ("" once released)."""
    exit_code: int
    """The stopped leader's."""
    restarts: int
    """Replicas started again after they ended on their own (a lost Lease)."""
    writes: dict[str, int]
    """The operator's writes (the Lease's aside) by replica, as the API server's audit has
    them."""
    second_writers: list[tuple[float, str, Write]]
    """Those of its writes sent by a replica that did not hold the Lease as they landed:
    (seconds from the kill, the holder then, the write)."""


def failover(
    api: ApiServer,
    directory: Path,
    *,
    workflows: int = 200,
    pool: int = 8,
    lease: tuple[int, float, float] = (8, 6.0, 1.0),
    kill_after: int = 40,
    how: signal.Signals = signal.SIGKILL,
) -> Failover:
    """Run the scenario once (see the module docstring): `lease` is (duration, renew deadline,
    retry period); the leader is killed (or sent `how`) once `kill_after` workflows have
    finished."""
    ns = new_namespace(api, "failover")
    duration, deadline, retry = lease
    flags = (
        "--leader-election",
        f"--lease-namespace={ns}",
        f"--lease-duration={duration}",
        f"--lease-renew-deadline={deadline:g}",
        f"--lease-retry-period={retry:g}",
    )
    monitor, timeline = PodMonitor(api, ns), Timeline(api, ns)
    replicas: dict[str, OperatorProcess] = {}

    def start(name: str) -> None:
        log = directory / f"{ns}-{name}-{restarts.count(name)}.log"
        replicas[name] = OperatorProcess(api, ns, pool, log, *flags, env={"POD_NAME": name})

    restarts: list[str] = []
    leader = ""

    def supervise() -> None:
        for name, replica in list(replicas.items()):
            if name != leader and replica.process.poll() is not None:
                restarts.append(name)
                start(name)

    try:
        with SimKubelet(api, ns, time_factor=1 / SPEED), Supervisor(supervise):
            for name in REPLICAS:
                start(name)
            wait(lambda: timeline.holder() in replicas, 60, "a leader")
            standby = next(r for n, r in replicas.items() if n != timeline.holder())
            wait(lambda: (standby.readiness() or {}).get("ready"), 60, "the standby to be ready")
            for i in range(workflows):
                body = workflow(f"wf-{i}", stage("a", 2, 10), stage("b", 1, 10, ("a",)))
                api.create(DWF, body, namespace=ns)
            wait(lambda: timeline.done() >= kill_after, 120, f"{kill_after} workflows to finish")
            leader = timeline.holder()
            killed = timeline.now()
            replicas[leader].kill(how)
            wait(lambda: timeline.holder() not in ("", leader), 120, "a new leader")
            took = next(t for t, h in timeline.holders if t > killed and h not in ("", leader))
            wait(lambda: timeline.first_after(timeline.releases, took), 120, "a release")
            wait(lambda: timeline.done() == workflows, 300, "every workflow to finish")
    except TimeoutError as exc:
        logs = "\n".join(f"--- {n}:\n{r.tail()}" for n, r in replicas.items())
        raise AssertionError(f"{exc}; the operators' last output:\n{logs}") from exc
    finally:
        for replica in replicas.values():
            replica.kill()
        monitor.close()
        timeline.close()
    released = timeline.first_after(timeline.releases, took)
    assert released is not None
    return Failover(
        to_lease=took - killed,
        to_release=released - killed,
        finished=dict(timeline.finished),
        duplicates=monitor.duplicates,
        max_running=monitor.max_total,
        holders=[h for t, h in timeline.holders if t > killed],
        exit_code=replicas[leader].process.returncode,
        restarts=len(restarts),
        writes=dict(timeline.writes),
        second_writers=[(t - killed, h, w) for t, h, w in timeline.foreign],
    )


class Supervisor(Periodic):
    """Calls `check` every 0.2 s (a replica that ended is started again)."""

    def __init__(self, check: Callable[[], None]) -> None:
        super().__init__(0.2, "failover-supervisor")
        self.check = check

    def tick(self) -> None:
        self.check()
