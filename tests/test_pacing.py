"""The operator's requests cut (issue 79, src/idlegate/operator/lag/pacing.py): one object's status
written once per ``--status-interval`` at most, the last status winning; an Event said
again one Event whose count goes up, not a new one; and how late each write lands after
its decision (``idlegate_write_lag_seconds``). Requests are counted on the in-memory API
(tests/operator_fakes.py), in fake loop time (looptime)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math

import pytest

from idlegate.api.task_pods import Owner
from idlegate.operator.core.intents import PatchStatus, PostEvent
from idlegate.operator.edge.lanes import Op
from idlegate.operator.lag import pacing
from idlegate.operator.lag.pacing import SERIES_SECONDS, EventBook, Pace, event_name
from tests.test_edge_applier import Edge, create, release

T0 = 1_700_000_000.0


# -- known answers ---------------------------------------------------------------------------


def test_a_pace_spaces_writes_and_batches_changes_that_are_not_urgent():
    pace = Pace(1.0)
    assert pace.due() is None and pace.idle_until() == -math.inf
    pace.change(10.0, urgent=True)
    assert pace.due() == 10.0  # (nothing written before: at once)
    assert pace.sent(10.0) == 10.0 and pace.due() is None
    pace.change(10.2, urgent=True)
    pace.change(10.4, urgent=False)
    assert pace.due() == 11.0  # one write a second: 1 s after the last one started
    assert pace.sent(11.0) == 10.2  # (the first change it carries: its lag is read from it)
    pace.change(15.0, urgent=False)
    assert pace.due() == 15.5  # counts only: batched for half a second (within the second)
    pace.change(15.2, urgent=True)
    assert pace.due() == 15.0  # then a phase: as soon as the pace allows (past: at once)
    assert pace.idle_until() == 12.0
    pace.sent(15.2)
    pace.change(15.3, urgent=False)
    assert pace.due() == 16.2  # (still one write a second)
    at_once = Pace(0.0)
    at_once.change(3.0, urgent=False)
    assert at_once.due() == 3.0


def test_an_event_said_again_is_its_series_and_an_objects_events_are_bounded():
    book = EventBook(2, "idlegate", "replica-1")
    owner = Owner("default", "w", "uid-w")
    first = book.record(owner, ("Normal", "Released", "one"), T0, 5.0)
    assert first is not None and (first.count, first.patched) == (1, 5.0)
    assert first.name == event_name("w", "uid-w", "Normal", "Released", "one")
    assert first.name.startswith("w.") and len(first.name) == len("w.") + 16
    body = first.body
    assert (body["count"], body["firstTimestamp"], body["reportingInstance"]) == (
        1,
        "2023-11-14T22:13:20Z",
        "replica-1",
    )
    assert body["involvedObject"]["uid"] == "uid-w" and body["metadata"]["namespace"] == "default"
    again = book.record(owner, ("Normal", "Released", "one"), T0 + 90, 95.0)
    assert again is first and first.count == 2
    assert first.patch() == {"count": 2, "lastTimestamp": "2023-11-14T22:14:50Z"}
    second = book.record(owner, ("Normal", "Released", "two"), T0, 0)
    assert second is not None and second.name != first.name
    # two distinct Events: a third of a type and reason it had is not posted, a new one is
    assert book.record(owner, ("Normal", "Released", "three"), T0, 0) is None
    assert book.record(owner, ("Normal", "Succeeded", "done"), T0, 0) is not None
    other = book.record(Owner("default", "v", "uid-v"), ("Normal", "Released", "one"), T0, 0)
    assert other is not None and other.count == 1  # (another object's)


def test_an_event_said_while_one_of_its_reason_waits_to_be_posted_is_joined_to_it():
    book = EventBook(30, "idlegate", "r", join=True)
    owner = Owner("default", "w", "uid-w")
    first = book.record(owner, ("Normal", "Released", "Stage 'b': 1."), T0, 0)
    assert first is not None and first.count == 1  # (a new Event: its post is asked for)
    joined = book.record(owner, ("Normal", "Released", "Stage 'c': 1."), T0 + 2, 2)
    waiting = book.record(owner, ("Normal", "Waiting", "Stage 'd' waits."), T0 + 2, 2)
    assert joined is first and first.count == 2  # (one Event says both)
    assert waiting is not None and waiting is not first  # (another reason: its own)
    too_long = book.record(owner, ("Normal", "Released", "x" * 1010), T0 + 3, 3)
    assert too_long is not None and too_long.count == 1  # (not joined: it would not fit)
    body = first.posted()  # (the one waiting now is `too_long`: it still takes what comes)
    assert book.record(owner, ("Normal", "Released", "y"), T0 + 4, 4) is too_long
    assert body["message"] == "Stage 'b': 1. Stage 'c': 1."
    assert (body["count"], body["firstTimestamp"], body["lastTimestamp"]) == (
        2,
        "2023-11-14T22:13:20Z",
        "2023-11-14T22:13:22Z",
    )
    later = book.record(owner, ("Normal", "Released", "Stage 'b': 2."), T0 + 5, 5)
    assert later is not None and later.count == 1  # (posted: a new Event again)
    plain = EventBook(30, "idlegate", "r")  # (without join: each message its own Event)
    plain.record(owner, ("Normal", "Released", "one"), T0, 0)
    two = plain.record(owner, ("Normal", "Released", "two"), T0, 0)
    assert two is not None and two.count == 1


def test_the_least_recent_objects_are_forgotten():
    book = EventBook(30, "idlegate", "r", size=1)
    a, b = Owner("default", "a", "uid-a"), Owner("default", "b", "uid-b")
    book.record(a, ("Normal", "Accepted", "x"), T0, 0)
    book.record(b, ("Normal", "Accepted", "x"), T0, 0)
    series = book.record(a, ("Normal", "Accepted", "x"), T0, 0)
    assert series is not None and series.count == 1


# -- requests, on the in-memory API ----------------------------------------------------------


@pytest.mark.looptime
@pytest.mark.asyncio
async def test_a_status_is_written_once_a_second_at_most_and_the_last_one_wins():
    """Twenty changes, a phase each, 0.1 s apart: written 3 times (at 0, 1 and 2 s), not 20,
    each write a second after the one before, the last one the last change's."""
    e = Edge(status_interval=1.0)
    owner, _ = e.workflow("w")
    loop = asyncio.get_running_loop()
    start = loop.time()
    for n in range(1, 21):
        e.applier.apply([PatchStatus(owner, {"phase": "Running", "n": n})])
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)
    await e.settle()
    writes = [t - start for t, method, _ in e.kube.done if method == "patch_workflow_status"]
    assert len(writes) == 3, writes
    assert all(b - a >= 1.0 - 1e-9 for a, b in itertools.pairwise(writes)), writes
    assert e.kube.workflows[("default", "w")]["status"]["n"] == 20
    written = [o.intent.status["n"] for o in e.outcomes if isinstance(o.intent, PatchStatus)]
    assert written[0] == 1 and written[-1] == 20 and written == sorted(written)
    # its lag: from the first change each write carried to the write's end
    assert e.metrics.value("idlegate_write_lag_seconds_count", write="status") == 3


@pytest.mark.looptime
@pytest.mark.asyncio
async def test_a_release_that_waits_for_a_status_is_not_held_by_the_pace():
    e = Edge(status_interval=1.0)
    owner, spec = e.workflow("w")
    e.applier.apply([create(owner, spec, 0), PatchStatus(owner, {"phase": "Pending"})])
    await e.settle()
    start = asyncio.get_running_loop().time()
    slot = PatchStatus(owner, {"phase": "Pending", "idleSlots": [{"stage": "a"}]})
    waiting = dataclasses.replace(release(owner, spec, 0, 1), after_status=True)
    e.applier.apply([slot, waiting])  # (the slot is persisted before the release)
    await e.settle()
    released = [t for t, method, _ in e.kube.done if method == "patch_pod"]
    assert released == [start]  # at once: not a second later
    assert e.kube.workflows[("default", "w")]["status"]["idleSlots"] == [{"stage": "a"}]


@pytest.mark.looptime
@pytest.mark.asyncio
async def test_an_event_said_again_is_counted_in_one_event_patched_every_half_minute():
    """An Event said 50 times, every 2 s, is one Event (one POST) whose count is written by
    a PATCH at most every SERIES_SECONDS from its post: 5 requests, not 50, and the count
    right."""
    e = Edge()
    owner, _ = e.workflow("w")
    start = asyncio.get_running_loop().time()
    for _ in range(50):
        e.applier.apply([PostEvent(owner, "Normal", "Released", "the next task")])
        await asyncio.sleep(2.0)
    await asyncio.sleep(SERIES_SECONDS)
    await e.settle()
    (event,) = e.kube.events
    assert event["count"] == 50
    assert e.kube.calls.count("create_event") == 1
    patched = [t - start for t, method, _ in e.kube.attempts if method == "patch_event"]
    assert patched == [30.0, 60.0, 90.0, 120.0]  # (SERIES_SECONDS = 30)
    assert e.metrics.value("idlegate_write_lag_seconds_count", write="event") == 1


@pytest.mark.looptime
@pytest.mark.asyncio
async def test_a_release_write_lag_is_from_its_decision_to_the_writes_end():
    """The one connection is held 3 s: the release decided meanwhile lands 3 s after its
    decision, and idlegate_write_lag_seconds says so (the pod's creation before it too)."""
    e = Edge(concurrency=1)
    owner, spec = e.workflow("w")
    held = asyncio.get_running_loop().create_future()
    e.lanes.submit("x", Op("busy", lambda api: held), lane="busy")
    await asyncio.sleep(0)
    e.applier.apply([create(owner, spec, 0, executor=1)])  # (created released)
    asyncio.get_running_loop().call_later(3.0, held.set_result, None)
    await e.settle()
    assert e.metrics.value("idlegate_write_lag_seconds_sum", write="release") == 3.0
    assert e.metrics.value("idlegate_write_lag_seconds_bucket", write="release", le="2.0") == 0
    assert e.metrics.value("idlegate_write_lag_seconds_bucket", write="release", le="5.0") == 1
    assert e.metrics.value("idlegate_write_lag_seconds_count", write="pod") == 0


@pytest.mark.looptime
@pytest.mark.asyncio
async def test_events_said_of_a_workflow_while_its_post_waits_are_one_event():
    """The one connection is held 3 s: three Released of workflow w and a Waiting said
    meanwhile are two Events (each reason's messages joined, counted), another workflow's
    its own; one said after the post is a new Event, and no count is patched later."""
    e = Edge(concurrency=1)
    w, _ = e.workflow("w")
    v, _ = e.workflow("v")
    held = asyncio.get_running_loop().create_future()
    e.lanes.submit("x", Op("busy", lambda api: held), lane="busy")
    await asyncio.sleep(0)
    for n in (1, 2, 3):
        e.applier.apply([PostEvent(w, "Normal", "Released", f"Released {n} of 3.")])
        await asyncio.sleep(0.5)
    e.applier.apply([PostEvent(w, "Normal", "Waiting", "Stage 'c' waits.")])
    e.applier.apply([PostEvent(v, "Normal", "Released", "Released 1 of 3.")])
    asyncio.get_running_loop().call_later(3.0, held.set_result, None)
    await e.settle()
    said = {(x["involvedObject"]["name"], x["reason"]): x for x in e.kube.events}
    released = said[("w", "Released")]
    assert released["message"] == "Released 1 of 3. Released 2 of 3. Released 3 of 3."
    assert released["count"] == 3  # (its first and last times: the known answer above)
    assert said[("w", "Waiting")]["count"] == 1 and said[("v", "Released")]["count"] == 1
    assert e.kube.calls.count("create_event") == 3
    e.applier.apply([PostEvent(w, "Normal", "Released", "Released 1 of 2.")])
    await asyncio.sleep(SERIES_SECONDS * 2)
    await e.settle()
    assert e.kube.calls.count("create_event") == 4 and "patch_event" not in e.kube.calls


@pytest.mark.looptime
@pytest.mark.asyncio
async def test_an_event_dropped_unsent_takes_no_later_one_with_it():
    """An Event whose post waits is dropped with its workflow's writes (the workflow left):
    one of the same reason said after is posted, not joined to the one never sent."""
    e = Edge(concurrency=1)
    w, _ = e.workflow("w")
    held = asyncio.get_running_loop().create_future()
    e.lanes.submit("x", Op("busy", lambda api: held), lane="busy")
    await asyncio.sleep(0)
    e.applier.apply([PostEvent(w, "Normal", "Suspended", "Suspended.")])
    e.applier.cancel(w)
    e.applier.apply([PostEvent(w, "Normal", "Suspended", "Suspended again.")])
    held.set_result(None)
    await e.settle()
    assert [x["message"] for x in e.kube.events] == ["Suspended again."]


# -- coalesced jobs ----------------------------------------------------------------------------


@pytest.mark.looptime
@pytest.mark.asyncio
async def test_only_a_paced_job_reads_the_cpu_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A round (unpaced) runs without reading the thread's CPU clock, a system call; a
    reading of the room (paced) reads it around its run and waits nine times its CPU."""
    reads: list[float] = []
    cpu = iter([1.0, 1.5])  # (the paced run's CPU: 0.5 s)

    def thread_time() -> float:
        reads.append(asyncio.get_running_loop().time())
        return next(cpu)

    monkeypatch.setattr(pacing, "thread_time", thread_time)
    ran: list[str] = []
    rounds = pacing.Coalesced(lambda: ran.append("round"), 0.2)
    room = pacing.Coalesced(lambda: ran.append("room"), 0.2, paced=True)
    rounds.ask()
    room.ask()
    await asyncio.sleep(0.1)
    assert ran == ["round", "room"] and len(reads) == 2
    await asyncio.sleep(0.2)  # (the round's next run waits 0.2 s, the room's 4.5)
    assert room.busy() and not rounds.busy()
    await asyncio.sleep(4.3)
    assert not room.busy() and len(reads) == 2
