"""Leader election on a Lease (src/idlegate/operator/edge/leader.py), in fake loop time
(looptime): acquire, renew, lose at the renew deadline, a standby's takeover after the
lease duration, a resourceVersion conflict lost cleanly, a release; and that the applier
and the API client write nothing while their replica does not lead."""

from __future__ import annotations

import asyncio
import copy
import itertools
import logging
import signal
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from idlegate.api.settings import Settings
from idlegate.api.task_pods import Owner
from idlegate.operator.core.intents import PostEvent
from idlegate.operator.edge.applier import Applier
from idlegate.operator.edge.kube import ApiError, NotLeaderError, WriteGate
from idlegate.operator.edge.lanes import Lanes
from idlegate.operator.edge.leader import Elector, identity
from idlegate.operator.edge.recorder import EventRecorder
from idlegate.operator.kopf_settings import quiet_event_handlers
from idlegate.operator.main import build_registry
from idlegate.operator.metrics import Metrics
from idlegate.operator.runtime import Operator
from tests.operator_fakes import FakeKube

pytestmark = [pytest.mark.looptime, pytest.mark.asyncio]

NS, NAME = "idlegate-system", "idlegate-operator"
DURATION, DEADLINE, RETRY = 15, 10.0, 2.0


class Leases:
    """The Lease API in memory, with the API server's resourceVersion semantics: a create
    of an existing name and a replace carrying another resourceVersion are 409. While
    `hang` is set, every request waits (an API that does not answer: the client retries)."""

    def __init__(self) -> None:
        self.stored: dict[str, Any] | None = None
        self.hang = False
        self._unhung = asyncio.Event()
        self._rv = itertools.count(1)
        self.gate_replace: asyncio.Event | None = None
        """When set: replaces wait for it (to line two replicas up on one resourceVersion)."""

    async def _answer(self) -> None:
        while self.hang:
            await self._unhung.wait()

    def answer(self) -> None:
        self.hang = False
        self._unhung.set()

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        await self._answer()
        return copy.deepcopy(self.stored)

    async def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        await self._answer()
        if self.stored is not None:
            raise ApiError(409, "AlreadyExists", "leases already exists")
        body = copy.deepcopy(body)
        body["metadata"].update(uid=str(uuid.uuid4()), resourceVersion=str(next(self._rv)))
        self.stored = body
        return copy.deepcopy(body)

    async def replace_lease(
        self, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        if self.gate_replace is not None:
            await self.gate_replace.wait()
        await self._answer()
        assert self.stored is not None
        if body["metadata"].get("resourceVersion") != self.stored["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        body = copy.deepcopy(body)
        body["metadata"].update(resourceVersion=str(next(self._rv)))
        self.stored = body
        return copy.deepcopy(body)

    @property
    def holder(self) -> str:
        return ((self.stored or {}).get("spec") or {}).get("holderIdentity", "")


class Replica:
    """One replica's elector, and what its callbacks were told."""

    def __init__(self, leases: Leases, identity: str) -> None:
        self.elected = 0
        self.lost: list[str] = []
        self.elector = Elector(
            leases,
            identity,
            NS,
            NAME,
            duration=DURATION,
            renew_deadline=DEADLINE,
            retry_period=RETRY,
            on_elected=self._elected,
            on_lost=self.lost.append,
        )

    def _elected(self) -> None:
        self.elected += 1


def now() -> float:
    return asyncio.get_running_loop().time()


async def test_the_first_replica_acquires_the_lease_and_renews_it():
    leases = Leases()
    a = Replica(leases, "a")
    await a.elector.step()
    assert a.elector.is_leader and a.elected == 1 and leases.holder == "a"
    spec = leases.stored["spec"]
    assert (spec["leaseDurationSeconds"], spec["leaseTransitions"]) == (DURATION, 0)
    first = spec["renewTime"]
    await asyncio.sleep(DEADLINE - 1)
    await a.elector.step()  # renewed: it leads past its first deadline
    await asyncio.sleep(2)
    assert a.elector.is_leader and a.elected == 1 and a.lost == []
    assert leases.stored["spec"]["renewTime"] != first


async def test_a_leader_that_cannot_renew_stops_writing_at_its_deadline_and_loses():
    leases = Leases()
    a = Replica(leases, "a")
    await a.elector.step()
    await asyncio.sleep(DEADLINE - 0.5)  # its loop is stuck: no renewal
    assert a.elector.is_leader
    await asyncio.sleep(0.5)
    assert not a.elector.is_leader and a.lost == []  # at the deadline, before its loop runs
    await asyncio.sleep(DURATION)
    leases.hang = True  # ... and the API no longer answers: the renewal hangs
    await a.elector.step()
    assert a.lost == [f"it could not renew the Lease within {DEADLINE:g} s"]
    assert a.elector.ended and leases.holder == "a"


async def test_a_leader_whose_renewal_hangs_loses_at_its_deadline():
    leases = Leases()
    a = Replica(leases, "a")
    await a.elector.step()
    leases.hang = True
    started = now()
    await a.elector.step()
    assert now() - started == pytest.approx(DEADLINE)
    assert not a.elector.is_leader and a.elector.ended
    assert a.lost == [f"it could not renew the Lease within {DEADLINE:g} s"]
    leases.answer()  # the hung renewal lands late: it does not make it lead again
    await a.elector.step()
    await asyncio.sleep(RETRY)
    assert not a.elector.is_leader and a.elected == 1 and len(a.lost) == 1


async def test_a_standby_takes_over_once_the_lease_expired_as_it_observed_it():
    leases = Leases()
    a, b = Replica(leases, "a"), Replica(leases, "b")
    runs = [asyncio.create_task(r.elector.run()) for r in (a, b)]
    await asyncio.sleep(30)
    assert a.elector.is_leader and not b.elector.is_leader and b.elector.holder == "a"
    runs[0].cancel()  # a is killed (-9): nobody renews
    killed = now()
    await b.elector.elected.wait()
    waited = now() - killed
    # its lease counted from the last change b saw (b looks every 2 to 2.4 s), and b looks
    # again at the expiry itself, not at its next look after it
    assert DURATION - RETRY <= waited <= DURATION + RETRY * 1.2, waited
    assert now() == pytest.approx(b.elector.expires, abs=1e-6)
    assert leases.holder == "b" and leases.stored["spec"]["leaseTransitions"] == 1
    assert (a.elected, b.elected, a.lost, b.lost) == (1, 1, [], [])
    runs[1].cancel()
    await asyncio.gather(*runs, return_exceptions=True)


async def test_a_standby_that_looks_a_hair_before_the_expiry_takes_the_lease():
    # The loop fires the timer set for the expiry up to its clock's resolution early (the
    # fake loop rounds sleeps to 1 µs): the standby must not see the Lease as held still,
    # or it sleeps that hair again and again at one loop time (it hung a test so).
    leases = Leases()
    await Replica(leases, "gone").elector.step()
    clock = [100.0]
    b = Elector(
        leases,
        "b",
        NS,
        NAME,
        duration=DURATION,
        renew_deadline=DEADLINE,
        retry_period=RETRY,
        now=lambda: clock[0],
    )
    await b.step()
    assert not b.is_leader and b.expires == 100.0 + DURATION
    clock[0] = b.expires - 1e-9
    await b.step()
    assert b.is_leader and leases.holder == "b"


async def test_of_two_standbys_racing_for_an_expired_lease_one_wins_the_other_gets_409():
    leases = Leases()
    gone = Replica(leases, "gone")
    await gone.elector.step()
    b, c = Replica(leases, "b"), Replica(leases, "c")
    await b.elector.step()
    await c.elector.step()  # both have seen it held
    await asyncio.sleep(DURATION)
    leases.gate_replace = asyncio.Event()
    race = asyncio.gather(b.elector.step(), c.elector.step())
    await asyncio.sleep(0.1)  # both have read the same resourceVersion
    leases.gate_replace.set()
    await race
    winners = [r for r in (b, c) if r.elector.is_leader]
    assert len(winners) == 1 and leases.holder == winners[0].elector.identity
    loser = c if winners[0] is b else b
    assert (loser.elected, loser.lost, loser.elector.ended) == (0, [], False)
    await loser.elector.step()  # its next look: a standby of the winner
    assert not loser.elector.is_leader and loser.elector.holder == winners[0].elector.identity


async def test_a_leader_whose_renewal_meets_a_conflict_loses_at_once():
    leases = Leases()
    a = Replica(leases, "a")
    await a.elector.step()
    leases.gate_replace = asyncio.Event()
    renewing = asyncio.create_task(a.elector.step())
    await asyncio.sleep(0.1)  # it has read the Lease; another write lands before its own
    leases.stored["metadata"]["resourceVersion"] = "999"
    leases.gate_replace.set()
    await renewing
    assert not a.elector.is_leader and a.elector.ended
    assert a.lost == ["another replica wrote the Lease first (409 Conflict)"]


async def test_a_released_lease_is_taken_at_the_standbys_next_look():
    leases = Leases()
    a, b = Replica(leases, "a"), Replica(leases, "b")
    await a.elector.step()
    await b.elector.step()
    await a.elector.release()
    assert leases.holder == "" and not a.elector.is_leader and a.lost == []
    await b.elector.step()
    assert b.elector.is_leader and leases.holder == "b"


class Standing:
    """An elector's standing, set by the test."""

    is_leader = False


async def test_a_replica_that_does_not_lead_applies_no_intent_and_sends_no_write():
    kube = FakeKube()
    standing = Standing()
    gate = WriteGate()
    gate.follow(lambda: standing.is_leader)
    lanes = Lanes(kube, gate=gate)  # type: ignore[arg-type]
    events = EventRecorder(lanes, Settings(pool_size=1))
    applier = Applier(lanes, events, Metrics(1, "fair"), lambda _: None)
    owner = Owner("default", "w", "uid-w")
    applier.apply([PostEvent(owner, "Normal", "Test", "not posted")])
    await lanes.wait_idle(60)
    assert kube.events == []
    standing.is_leader = True
    applier.apply([PostEvent(owner, "Normal", "Test", "queued, then lost")])
    standing.is_leader = False  # lost before the queued write's turn came: it is dropped
    await lanes.wait_idle(60)
    assert kube.events == []
    standing.is_leader = True
    applier.apply([PostEvent(owner, "Normal", "Test", "posted")])
    await lanes.wait_idle(60)
    assert [e["message"] for e in kube.events] == ["posted"]


async def test_the_api_client_refuses_writes_of_a_replica_that_does_not_lead(tmp_path):
    from idlegate.kubeconfig import load_configuration
    from idlegate.operator.edge.kube import KubeApi
    from tests.k8s.harness import write_kubeconfig

    write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")  # (nothing is sent)
    gate = WriteGate()
    gate.follow(lambda: Standing.is_leader)  # (does not lead)
    kube = KubeApi(load_configuration(tmp_path / "kubeconfig"), gate=gate)
    try:
        # (were they sent, the client would retry them for ever: no server listens there)
        with pytest.raises(NotLeaderError):
            await asyncio.wait_for(kube.create_pod("default", {"metadata": {"name": "p"}}), 5)
        with pytest.raises(NotLeaderError):
            await asyncio.wait_for(kube.delete_workflow("default", "w"), 5)
    finally:
        kube.close()


async def test_a_write_gate_follows_one_elector_only():
    gate = WriteGate()
    assert gate.open()  # (no election: always)
    gate.follow(lambda: Standing.is_leader)
    assert not gate.open()
    with pytest.raises(RuntimeError):
        gate.follow(lambda: Standing.is_leader)


async def test_a_standby_told_to_stop_never_takes_the_lease():
    leases = Leases()
    a, b = Replica(leases, "a"), Replica(leases, "b")
    await a.elector.step()
    await b.elector.step()
    await a.elector.release()
    b.elector.stopping = True  # (its SIGTERM)
    await b.elector.step()
    assert not b.elector.is_leader and b.elected == 0 and leases.holder == ""


async def test_an_acquire_that_lands_as_the_standby_is_told_to_stop_is_released():
    leases = Leases()
    a, b = Replica(leases, "a"), Replica(leases, "b")
    await a.elector.step()
    await a.elector.release()
    leases.gate_replace = asyncio.Event()
    step = asyncio.create_task(b.elector.step())
    await asyncio.sleep(0.1)  # (its write of itself is on its way)
    b.elector.stopping = True
    leases.gate_replace.set()
    await step
    assert leases.holder == "b" and not b.elector.is_leader and b.elected == 0
    await b.elector.release()
    assert leases.holder == ""
    c = Replica(leases, "c")  # (the next replica) takes it at once
    await c.elector.step()
    assert leases.holder == "c"


async def test_two_processes_under_one_name_have_two_identities(monkeypatch):
    monkeypatch.setenv("POD_NAME", "idlegate-operator-0")
    first, second = identity.__wrapped__(), identity.__wrapped__()
    assert first != second and first.startswith("idlegate-operator-0_"), (first, second)
    assert identity() == identity()  # (one per process: its Lease and its User-Agent)


async def test_the_events_name_the_replica_by_its_identity_suffix_included(monkeypatch):
    # issue 60, item 13: two replicas under one Pod name reported the same instance
    monkeypatch.setenv("POD_ID", "idlegate-operator-0")
    recorder = EventRecorder(Lanes(FakeKube()), Settings(pool_size=1))  # type: ignore[arg-type]
    assert recorder.instance == identity() and recorder.instance != "idlegate-operator-0"


async def test_a_signal_stops_the_election_and_the_handlers_waiting_for_a_rebuild():
    operator = Operator(Settings(pool_size=1, policy="fair", leader_election=True))
    operator.elector = Replica(Leases(), "b").elector
    operator.watchdog = SimpleNamespace(rebuilt=asyncio.Event())  # (never rebuilt: a standby)
    handler = asyncio.create_task(operator.ready_pools())
    await asyncio.sleep(1)
    operator.terminate(signal.SIGTERM)
    await asyncio.wait({handler}, timeout=5)
    assert handler.cancelled()  # (kopf escalates a cancelled handler: no write, no retry)
    assert operator.elector.stopping and operator.stopped.is_set() and not operator.lost


async def test_kopf_is_blind_to_workflows_while_standing_by_and_to_finished_ones():
    # issue 60, item 12: a standby's handlers waited for its election, then kopf wrote its
    # bookkeeping annotation to every workflow they had seen, the finished ones too
    operator = Operator(Settings(pool_size=1, policy="fair", leader_election=True))
    replica = Replica(Leases(), "b")
    operator.elector = replica.elector
    registry = build_registry(operator)
    ours = [h for h in registry._changing.get_all_handlers() if h.id in ("admit", "spec/spec")]
    assert len(ours) == 3  # (admit on create and on resume, spec on update)
    running, finished = {"phase": "Running"}, {"phase": "Succeeded"}
    assert not any(h.when(status=running) for h in ours if h.when)  # (standing by)
    await replica.elector.step()  # (elected: the Lease is free)
    assert operator.elector.elected.is_set()
    assert all(h.when is not None and h.when(status=running) for h in ours)
    assert not any(h.when(status=finished) for h in ours if h.when)


async def test_the_log_drops_kopfs_line_for_each_handler_a_stop_cancels():
    def kept(message: str) -> bool:
        return quiet_event_handlers(logging.makeLogRecord({"msg": message}))

    assert not kept("Handler 'admit' is cancelled. Will escalate.")
    assert not kept("Handler 'pod-events' succeeded.")
    assert kept("Handler 'admit' failed with an exception. Will retry.")
