"""Two replicas of the operator with leader election, the leader stopped mid-burst: the
scenarios of tests/test_e2e_leader.py and benchmarks/failover.py.

:func:`failover` runs two ``idlegate operator --leader-election`` processes against the
test API server (:class:`~tests.e2e.OperatorProcess`, the Lease in the test's namespace),
creates a burst of workflows, stops the leader once some have finished, and waits (on
what the emulator holds, never on the wall clock's pace) until every workflow has
finished. How it stops (:data:`SCENARIOS`): killed -9; SIGTERM; SIGTERM to the leader and,
0.3 s later, to the standby, after which a third replica starts (the Deployment's next
Pod); or both replicas share one name (POD_NAME), and the killed leader starts again
under it. A replica that ends on its own (it lost the Lease: a renewal held up longer than
its deadline on a loaded machine) is started again under its name, as its Deployment
would restart it; a stopped one is not (its node is gone).

:class:`Timeline` records, in the emulator's event loop and on its clock, each gate
removal, each change of the Lease's holder and each workflow's status from its finish on,
so the failover is measured where the writes land: from the stop to the new leader's
Lease, and to its first release; and a finished workflow whose status changed after it
finished is one the failover rewrote. It also reads the API server's audit of each write
the operator's own client sends (every pod creation, gate removal, status patch and Event;
each names its replica's identity in its User-Agent): one sent by a replica that did not
hold the Lease as it landed is a second writer. Each replica keeps a ``--history-file``;
a workflow recorded twice across them is a duplicate, unless the first record's mark
(``historyRecorded``) had not landed when its writer was stopped.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import signal
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kmock

from idlegate.api.kinds import PLURAL
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
from tests.k8s.apiserver import EVENTS, LEASES, PODS, Write
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet

LEASE = "idlegate-operator"
REPLICAS = ("replica-a", "replica-b")
SCENARIOS = ("kill", "term", "term-both", "same-name")
TERM_GAP = 0.3
"""Seconds between the SIGTERMs of the leader and of the standby (`term-both`)."""
OPERATOR_AGENT = re.compile(r"idlegate/\S+ \((?P<identity>.*)\)")
"""The User-Agent of the operator's client (idlegate.api.paths.user_agent)."""


class Timeline:
    """Gate removals, Lease holders and finished workflows of one namespace, each with the
    emulator loop's time (monotonic seconds) of the write."""

    def __init__(self, api: ApiServer, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.releases: list[float] = []
        self.holders: list[tuple[float, str]] = []
        self.finished: dict[str, str] = {}
        self.finished_at: dict[str, float] = {}
        self.final: dict[str, dict[str, Any]] = {}
        """Each workflow's status as it finished (`historyRecorded` aside)."""
        self.rewritten: set[str] = set()
        """The workflows whose status changed after they finished."""
        self.marked: set[str] = set()
        """The workflows whose history record's mark landed."""
        self.writes: collections.Counter[str] = collections.Counter()
        self.foreign: list[tuple[float, str, Write]] = []
        self.every: list[tuple[float, Write]] = []
        """Every write to the namespace, any sender's (kopf's own too), with its time."""
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
            elif res.plural == "dagworkflows" and etype != "DELETED":
                name, status = meta["name"], dict(obj.get("status") or {})
                if status.pop("historyRecorded", False):
                    self.marked.add(name)
                if name in self.final and status != self.final[name]:
                    self.rewritten.add(name)
                elif name not in self.final and status.get("phase") in ("Succeeded", "Failed"):
                    self.finished[name], self.finished_at[name] = status["phase"], at
                    self.final[name] = status

    def _on_write(self, write: Write) -> None:
        """Count the operator's writes (not the Lease's) by replica; keep each one sent by a
        replica other than the Lease's holder, with the holder of the time."""
        sender = OPERATOR_AGENT.fullmatch(write.user_agent)
        ours = write.namespace in (self.namespace, None)  # (None: cluster-scoped, the pools)
        at = asyncio.get_running_loop().time()
        if ours and write.resource != LEASES:
            with self._lock:
                self.every.append((at, write))
        if sender is None or not ours or write.resource == LEASES:
            return
        identity = sender["identity"]
        with self._lock:
            self.writes[identity] += 1
            holder = self.holders[-1][1] if self.holders else ""
            if identity != holder:
                self.foreign.append((at, holder, write))

    def holder(self) -> str:
        """The Lease's holder now (an identity: the replica's name, "_", a suffix)."""
        with self._lock:
            return self.holders[-1][1] if self.holders else ""

    def after(self, t: float) -> list[Write]:
        """The writes that landed after `t`."""
        with self._lock:
            return [w for at, w in self.every if at > t]

    def done(self) -> int:
        with self._lock:
            return len(self.finished)

    def first_after(self, times: list[float], t: float) -> float | None:
        with self._lock:
            return next((x for x in times if x > t), None)

    def close(self) -> None:
        self.api.call(self._unsubscribe)
        self.api.call(self._unaudit)


def replica_of(identity: str) -> str:
    """The replica's name in an `identity` (its POD_NAME, before the process's suffix)."""
    return identity.rpartition("_")[0]


@dataclass(frozen=True)
class Failover:
    """What one run measured (seconds on the emulator's clock, but `exits`)."""

    to_lease: float
    """From the stop to the Lease's next holder."""
    to_release: float
    """From the stop to the first gate removal after the new holder took the Lease."""
    finished: dict[str, str]
    """Each workflow's final phase."""
    duplicates: list[Any]
    """Pods created twice (by name, or by workflow, stage, task and attempt)."""
    max_running: int
    """The most pods holding an executor at once."""
    holders: list[str]
    """The Lease's holders (identities) from the stop on ("" once released)."""
    exit_codes: list[int]
    """The stopped replicas'."""
    exits: list[float]
    """Wall seconds from each SIGTERM to its replica's exit."""
    restarts: int
    """Replicas started again after they ended on their own (a lost Lease)."""
    writes: dict[str, int]
    """The operator's writes (the Lease's aside) by identity, as the API server's audit
    has them."""
    second_writers: list[tuple[float, str, Write]]
    """Those of its writes sent by a replica that did not hold the Lease as they landed:
    (seconds from the stop, the holder then, the write)."""
    rewritten: list[str]
    """Workflows whose status changed after they had finished."""
    counted: tuple[float, int]
    """The last leader's idlegate_workflows_finished_total, and the workflows it finished."""
    recorded_twice: list[str]
    """Workflows recorded twice across the history files (those whose first record's mark
    landed before its writer stopped)."""
    taken_when_told_to_stop: list[str]
    """Identities elected after their SIGTERM (their own logs' order)."""
    finished_writes: list[Write]
    """Writes, by any sender (kopf's bookkeeping too), from the new leader's taking of the
    Lease on, to a workflow that had finished, its history record marked, before the stop:
    a takeover's cost that grows with finished workflows (a write of the stopped leader's
    may still land between the stop and then)."""
    events_again: int
    """Events posted from then on that the API server refused as already there (409)."""
    stall: float
    """The longest answer of the last leader's /metrics, asked every 0.1 s, from its taking
    of the Lease to 10 s after (its loop's longest stall there, at least)."""


def failover(
    api: ApiServer,
    directory: Path,
    *,
    workflows: int = 200,
    pool: int = 8,
    lease: tuple[int, float, float] = (8, 6.0, 1.0),
    kill_after: int = 40,
    scenario: str = "kill",
) -> Failover:
    """Run a scenario (:data:`SCENARIOS`) once (see the module docstring): `lease` is
    (duration, renew deadline, retry period); the leader is stopped once `kill_after`
    workflows have finished."""
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
    started: list[tuple[str, OperatorProcess]] = []
    stopped: set[OperatorProcess] = set()
    restarts: list[str] = []

    def start(name: str) -> OperatorProcess:
        n = sum(n == name for n, _ in started)
        log, history = (directory / f"{ns}-{name}-{n}.{ext}" for ext in ("log", "jsonl"))
        pod = "replica" if scenario == "same-name" else name
        process = OperatorProcess(
            api, ns, pool, log, *flags, f"--history-file={history}", env={"POD_NAME": pod}
        )
        started.append((name, process))
        return process

    def supervise() -> None:
        for name, replica in list(started):
            if replica not in stopped and replica.process.poll() is not None:
                stopped.add(replica)  # (replaced)
                restarts.append(name)
                start(name)

    def leading() -> OperatorProcess | None:
        """The replica whose identity holds the Lease."""
        holder = timeline.holder()
        return next((r for _, r in started if holder and _identity(r) == holder), None)

    exits: list[float] = []
    signalled: list[OperatorProcess] = []

    def stop(replica: OperatorProcess, how: signal.Signals) -> None:
        stopped.add(replica)
        signalled.append(replica)
        began = time.monotonic()
        replica.kill(how)
        exits.append(time.monotonic() - began)

    try:
        probe = Probe(lambda: [r for _, r in started if r not in stopped])
        with SimKubelet(api, ns, time_factor=1 / SPEED), Supervisor(supervise), probe:
            for name in REPLICAS:
                start(name)
            leader = wait(leading, 60, "a leader")
            standby = next(r for _, r in started if r is not leader)
            wait(lambda: (standby.readiness() or {}).get("ready"), 60, "the standby to be ready")
            for i in range(workflows):
                body = workflow(f"wf-{i}", stage("a", 2, 10), stage("b", 1, 10, ("a",)))
                api.create(DWF, body, namespace=ns)
            wait(lambda: timeline.done() >= kill_after, 120, f"{kill_after} workflows to finish")
            leader, holder = leading(), timeline.holder()
            assert leader is not None
            marked, killed = set(timeline.marked), timeline.now()
            # (one whose history record's mark had not landed is recorded and marked by
            # the new leader: one write each, for the few that finished as it stopped)
            done_before = set(timeline.finished) & marked
            if scenario == "term-both":
                threading.Timer(TERM_GAP, stop, (standby, signal.SIGTERM)).start()
            stop(leader, signal.SIGKILL if scenario in ("kill", "same-name") else signal.SIGTERM)
            if scenario == "term-both":
                wait(lambda: len(exits) == 2, 60, "the standby to exit")
                start("replica-c")  # (the Deployment's next Pod)
            elif scenario == "same-name":
                start(next(n for n, r in started if r is leader))
            wait(lambda: timeline.holder() not in ("", holder), 120, "a new leader")
            took = next(t for t, h in timeline.holders if t > killed and h not in ("", holder))
            wait(lambda: timeline.first_after(timeline.releases, took), 120, "a release")
            wait(lambda: timeline.done() == workflows, 300, "every workflow to finish")
            last = wait(leading, 60, "the last leader")
            counted = _finished_total(last.metrics_port)
            led = max(t for t, h in timeline.holders if h == _identity(last))
    except TimeoutError as exc:
        logs = "\n".join(f"--- {n}:\n{r.tail()}" for n, r in started)
        raise AssertionError(f"{exc}; the operators' last output:\n{logs}") from exc
    finally:
        for _, replica in started:
            replica.kill()
        monitor.close()
        timeline.close()
    released = timeline.first_after(timeline.releases, took)
    assert released is not None
    records = collections.Counter(
        json.loads(line)["name"].partition("/")[2]
        for path in directory.glob(f"{ns}-*.jsonl")
        for line in path.read_text().splitlines()
    )
    return Failover(
        to_lease=took - killed,
        to_release=released - killed,
        finished=dict(timeline.finished),
        duplicates=monitor.duplicates,
        max_running=monitor.max_total,
        holders=[h for t, h in timeline.holders if t > killed],
        exit_codes=[r.process.returncode for r in signalled],
        exits=exits if how_exits(scenario) else [],
        restarts=len(restarts),
        writes=dict(timeline.writes),
        second_writers=[(t - killed, h, w) for t, h, w in timeline.foreign],
        rewritten=sorted(timeline.rewritten),
        counted=(counted, sum(t > led for t in timeline.finished_at.values())),
        recorded_twice=sorted(n for n, k in records.items() if k > 1 and n in marked),
        taken_when_told_to_stop=[_identity(r) for r in signalled if _elected_when_stopping(r)],
        finished_writes=[
            w for w in timeline.after(took) if w.resource.plural == PLURAL and w.name in done_before
        ],
        events_again=sum(w.resource == EVENTS and w.status == 409 for w in timeline.after(took)),
        stall=max(
            (s for r, t, s in probe.answers if r is last and led <= t <= led + 10), default=0
        ),
    )


def how_exits(scenario: str) -> bool:
    """Whether `scenario` stops a replica with SIGTERM (its exit is timed)."""
    return scenario.startswith("term")


_IDENTITY = re.compile(r"Standing by for the Lease \S+ as (\S+) \(")
_identities: dict[OperatorProcess, str] = {}


def _identity(replica: OperatorProcess) -> str:
    """The identity `replica` logged ("" before it did)."""
    if replica not in _identities and (found := _IDENTITY.search(_head(replica))):
        _identities[replica] = found[1]
    return _identities.get(replica, "")


def _elected_when_stopping(replica: OperatorProcess) -> bool:
    log = replica.log.read_text(errors="replace")
    told = log.find("SIGTERM: stopping.")
    return told >= 0 and "Elected leader" in log[told:]


def _head(replica: OperatorProcess) -> str:
    with replica.log.open(errors="replace") as log:
        return log.read(50_000)


def _finished_total(port: int) -> float:
    """idlegate_workflows_finished_total (every outcome) on the /metrics at `port`."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    found = re.findall(r"^idlegate_workflows_finished_total\{[^}]*\} (\S+)$", text, re.M)
    return sum(map(float, found))


class Probe(Periodic):
    """Asks the /metrics of each of `replicas()` every 0.1 s; keeps (replica, the
    emulator's clock when asked, seconds to the answer)."""

    def __init__(self, replicas: Callable[[], list[OperatorProcess]]) -> None:
        super().__init__(0.1, "failover-probe")
        self.replicas = replicas
        self.answers: list[tuple[OperatorProcess, float, float]] = []

    def tick(self) -> None:
        for replica in self.replicas():
            asked = time.monotonic()  # (the emulator's loop clock: one process, one clock)
            try:
                urllib.request.urlopen(
                    f"http://127.0.0.1:{replica.metrics_port}/metrics", timeout=10
                ).read()
            except OSError:
                continue
            self.answers.append((replica, asked, time.monotonic() - asked))


class Supervisor(Periodic):
    """Calls `check` every 0.2 s (a replica that ended is started again)."""

    def __init__(self, check: Callable[[], None]) -> None:
        super().__init__(0.2, "failover-supervisor")
        self.check = check

    def tick(self) -> None:
        self.check()
