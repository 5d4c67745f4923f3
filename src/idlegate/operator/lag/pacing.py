"""How often the operator writes one object (issue 79): its status at most once per
``--status-interval``, coalesced; an Event said again, one Event whose count goes up.

* `Pace`: one object's status writes. A write starts at least `spacing` seconds after the
  previous one started; the changes meanwhile are coalesced into it (the last status wins:
  it carries the whole state, so nothing is lost). A change that is not urgent (only
  counts changed) also waits `BATCHED` of `spacing` after it came, to be batched with the
  next ones. A write a pod's release waits for (an idle slot persisted first) is not
  held: the applier sends it at once.
* `EventBook`: the Events of each object, as the API server's own series (client-go's
  recorder): an Event equal to one said before on the same object (type, reason and
  message) is no new Event, it adds to that one's ``count`` and moves its
  ``lastTimestamp`` (`Series`), written by one PATCH at most every `SERIES_SECONDS` from
  its post (a burst's repeats are one write, after the burst); an Event said while one of
  the same type and reason on the same object waits to be posted (`EventBook.join`) is
  joined to it: one Event says both, its ``count`` the times said, its ``firstTimestamp``
  the first's and ``lastTimestamp`` the last's (a flood's burst of decisions about one
  workflow is one request, not one each); and an object gets at most `per_object` distinct
  Events, after which only the first of each new type and reason is posted. The
  operator's messages repeat equal (:mod:`idlegate.api.notices`), so a stage of 100,000
  tasks leaves a handful of Events. An Event is named after what makes it equal (`event_name`), so the API server
  itself refuses an equal one (409) that a restarted operator posts again with its book
  empty (the count it writes later is the one it saw since its start).
* `Priority` and `Slots`: in what order the writes ready at once take the API client's
  connections: a pod about to run first, then the Events, then the other pod writes,
  then statuses (with a share of the slots, so that none waits for ever).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import itertools
import math
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass, field
from enum import IntEnum
from time import thread_time
from typing import Any

from idlegate.api.settings import ARRIVALS_ROUND
from idlegate.api.status import MAX_MESSAGE
from idlegate.api.task_pods import Owner
from idlegate.sim.timestamps import stamp

SERIES_SECONDS = 30.0
"""Least seconds from an Event's post to the first write of its count, and between two
(client-go's series write the second occurrence at once and later ones every 30 minutes;
the count here is current to half a minute, and repeats in a burst cost one write)."""
ROOM_SECONDS = ARRIVALS_ROUND
"""Least loop seconds between two readings of a followed pool's nodes' room
(`Pools.room_soon`), the arrivals' window: a reading costs the nodes, each may start a
round, and a flood's pods end by the dozen a second."""
MAX_BOOKS = 4096
"""Objects whose Events are remembered (the least recent are forgotten)."""


class Coalesced:
    """A job many changes ask for (`ask`), run once for all those asked meanwhile: at the
    end of the loop's turn, and `every` loop seconds after the last run at the earliest
    (`paced`: or nine times its CPU, `pause_after`). A flood's arrivals and pod ends are
    a round each `ARRIVALS_ROUND`, a burst of pod events a reading of the room each
    `ROOM_SECONDS`. Only a paced job reads the thread's CPU clock: a system call, unlike
    the loop's clock, where 54 of the loop's samples in a flood's first 30 s sat."""

    def __init__(self, run: Callable[[], None], every: float, paced: bool = False) -> None:
        self.run, self.every, self.paced = run, every, paced
        self.due, self._last, self._wait = False, -math.inf, every

    def ask(self) -> None:
        if not self.due:
            self.due, loop = True, asyncio.get_running_loop()
            if loop.time() < self._last + self._wait:
                loop.call_at(self._last + self._wait, self._now)
            else:
                loop.call_soon(self._now)

    def busy(self) -> bool:
        """A run is due, or one ran less than `every` ago: what is asked now waits for it."""
        return self.due or asyncio.get_running_loop().time() < self._last + self._wait

    def ran(self) -> None:
        """The job ran now, by its caller (at once, not asked): the next waits for `every`."""
        self._last = asyncio.get_running_loop().time()

    def _now(self) -> None:
        self.due, self._last = False, asyncio.get_running_loop().time()
        if not self.paced:
            self.run()
            return
        cpu = thread_time()
        self.run()
        self._wait = pause_after(thread_time() - cpu, self.every)


BATCHED = 0.5
"""Of a status interval, how long a change that is not urgent waits for others (`Pace`):
half, so that a pod end answered only by its workflow's counts is written within the
interval (issue 79's watch lag bound, 1 s, is the default interval; batched for a whole
one, such answers came at 1.00-1.08 s and set the live benchmark's p99, benchmarks/
README.md), while a busy object is still written once an interval."""


@dataclass
class Pace:
    """When one object's next status write may start (times: loop seconds)."""

    spacing: float
    """Least seconds between two writes' starts (``--status-interval``; 0: every change at
    once); a change that is not urgent waits `BATCHED` of it to be batched."""
    last: float = -math.inf
    """When the last write started."""
    since: float | None = None
    """When the first change not written yet came (None: every change is written)."""
    urgent: bool = False
    """Some change not written yet is urgent (a phase, an idle slot)."""

    def change(self, at: float, urgent: bool) -> None:
        """A change came at `at`."""
        if self.since is None:
            self.since = at
        self.urgent |= urgent

    def due(self) -> float | None:
        """When the write of the changes not written yet may start (None: there are none)."""
        if self.since is None:
            return None
        batched = self.since if self.urgent else self.since + self.spacing * BATCHED
        return max(batched, self.last + self.spacing)

    def idle_until(self) -> float:
        """Until when a write would still have to wait for the last one (after it, this
        pace may be forgotten: a new one knows as much)."""
        return self.last + self.spacing

    def sent(self, at: float) -> float:
        """A write of every change so far starts at `at`; returns when the first of them came."""
        since = at if self.since is None else self.since
        self.last, self.since, self.urgent = at, None, False
        return since


@dataclass
class Series:
    """One Event and how often it was said."""

    name: str
    body: dict[str, Any]
    """The Event as it is first posted (`event_body`)."""
    count: int = 1
    last: str = ""
    """When it was last said (the API's time format)."""
    patched: float = -math.inf
    """Loop time it was posted, then the last write of its count started."""
    pending: bool = False
    """A write of its count is armed or queued."""
    waits: dict[tuple[str, str], Series] | None = None
    """While its post waits (`EventBook.join`): its object's Events waiting to be posted,
    where it is, by type and reason."""

    def posted(self) -> dict[str, Any]:
        """Its post starts: the Event as it is to be posted, what was joined to it too
        (later ones said of its object are Events of their own, or its count)."""
        key = (self.body["type"], self.body["reason"])
        if self.waits is not None and self.waits.get(key) is self:  # (not one after it)
            del self.waits[key]
        self.waits = None
        return {**self.body, "count": self.count, "lastTimestamp": self.last}

    def patch(self) -> dict[str, Any]:
        """The merge patch writing its count and last time (core/v1 Event)."""
        return {"count": self.count, "lastTimestamp": self.last}


@dataclass
class _Book:
    said: dict[tuple[str, str, str], Series] = field(default_factory=dict)
    reasons: set[tuple[str, str]] = field(default_factory=set)
    waits: dict[tuple[str, str], Series] = field(default_factory=dict)


class EventBook:
    """The Events said of each object, the least recent objects forgotten beyond `size`;
    they are posted by `component`'s replica `instance`. With `join`, an Event said while
    one of the same type and reason on the same object waits to be posted is joined to it
    (its message added, if the two fit in `MAX_MESSAGE`; the caller says when the post
    starts, `Series.posted`)."""

    def __init__(
        self,
        per_object: int,
        component: str,
        instance: str,
        size: int = MAX_BOOKS,
        join: bool = False,
    ) -> None:
        self.per_object, self.size, self.join = per_object, size, join
        self.component, self.instance = component, instance
        self._books: OrderedDict[str, _Book] = OrderedDict()

    def record(
        self, owner: Owner, said: tuple[str, str, str], wall: float, at: float
    ) -> Series | None:
        """The Event `said` (type, reason, message) of `owner` at epoch second `wall`
        (loop time `at`): its series (``count`` 1: a new Event to post; more: one said before, its count to
        write), or None if it is not posted (the object had `per_object` distinct Events,
        and one of this type and reason)."""
        key = owner.uid or f"{owner.namespace}/{owner.name}"
        book = self._books.pop(key, None) or _Book()
        self._books[key] = book
        while len(self._books) > self.size:
            self._books.popitem(last=False)
        series = book.said.get(said)
        if series is None and (waiting := book.waits.get(said[:2])) is not None:
            message = f"{waiting.body['message']} {said[2]}"
            if len(message) <= MAX_MESSAGE:  # (joined to the one waiting to be posted)
                waiting.body = {**waiting.body, "message": message}
                series = waiting
        if series is not None:
            series.count += 1
            series.last = stamp(wall)
            return series
        if len(book.said) >= self.per_object and said[:2] in book.reasons:
            return None
        name = event_name(owner.name, key, *said)
        body = event_body(owner, name, said, stamp(wall), (self.component, self.instance))
        series = book.said[said] = Series(name, body, last=stamp(wall), patched=at)
        book.reasons.add((said[0], said[1]))
        if self.join:
            series.waits, book.waits[said[:2]] = book.waits, series
        return series


def pause_after(cost: float, least: float = 0.0) -> float:
    """Seconds the next run of a repeated costly job (a remap of thousands of steps, a
    reading of a thousand nodes) waits after one that took `cost` seconds of CPU: nine
    times that, so it takes a tenth of a core at most, once it took over 10 ms (a small
    one never waits); at least `least`."""
    return max(least, 9 * cost) if cost > 0.01 else least


def event_name(name: str, key: str, type_: str, reason: str, message: str) -> str:
    """``<object>.<16 hex digits>``, as client-go's names; the digits are those of what
    makes the Event equal, not of the time: an equal Event gets the same name."""
    equal = "\0".join((key, type_, reason, message)).encode()
    return f"{name}.{hashlib.sha256(equal).hexdigest()[:16]}"


def event_body(
    owner: Owner, name: str, said: tuple[str, str, str], at: str, by: tuple[str, str]
) -> dict[str, Any]:
    """The core/v1 Event `name` saying `said` (type, reason, message) of `owner` at `at`,
    by `by` (the component and its replica)."""
    type_, reason, message = said
    component, instance = by
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": owner.namespace},
        "involvedObject": owner.object_reference(),
        "type": type_,
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": instance,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    }


class Priority(IntEnum):
    """Who goes first when more ops are ready than the API concurrency allows."""

    RUN = 0
    """A pod about to run: a gate removal, or a creation without gate."""
    EVENT = 1
    """An Event: what was decided, said as it is decided (issue 79: behind the burst of
    gated creations that a hundred workflows admitted at once bring, Events came as late
    as the burst lasted)."""
    POD = 2
    """Another pod write: a gated creation (ahead of its release), a deletion."""
    STATUS = 3
    COUNTS = 4
    """A status write that only changes counts (the next write carries them anyway)."""


class Slots:
    """At most `size` ops talking to the API at once (the client's concurrency, so that
    none queues in its thread pool, first come first served); the most urgent waiting op
    takes the next free slot. So a gate removal waits behind no Event or status write,
    but every `SHARE`-th slot goes to a waiting STATUS op (the oldest): else the pod
    writes queued at scale held every workflow's phase back until the last pod ended
    (issue 61). COUNTS get no share: under load they wait, coalesced."""

    SHARE = 4

    def __init__(self, size: int) -> None:
        self.free = size
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._shared: list[tuple[int, int, asyncio.Future[None]]] = []  # (also in _waiting)
        self._given = 0
        self._order = itertools.count()
        self._turns: dict[Hashable, tuple[Priority, asyncio.Future[None]]] = {}
        """Each lane's op waiting for a slot, and its priority."""

    @contextlib.asynccontextmanager
    async def taken(self, priority: Priority, lane: Hashable) -> AsyncIterator[None]:
        """Hold a slot for the block (waiting for one, by `priority`, then arrival)."""
        if self.free > 0 and not self._waiting:
            self.free -= 1
        else:
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._push(priority, turn)
            self._turns[lane] = (priority, turn)
            try:
                await turn
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():
                    self._give()  # handed a slot as it was cancelled: pass it on
                raise
            finally:
                del self._turns[lane]
        try:
            yield
        finally:
            self._give()

    def hurry(self, lane: Hashable, priority: Priority) -> None:
        """An op of `priority` queued behind `lane`'s waiting op lends it that priority: a
        gate removal never waits for its pod's creation to come up among hundreds."""
        waiting = self._turns.get(lane)
        if waiting is not None and priority < waiting[0]:
            self._turns[lane] = (priority, waiting[1])  # (its older entry is skipped)
            self._push(priority, waiting[1])

    def _push(self, priority: Priority, turn: asyncio.Future[None]) -> None:
        shared = priority is Priority.STATUS
        for heap in (self._waiting, self._shared)[: 1 + shared]:
            heapq.heappush(heap, (priority, next(self._order), turn))

    def _give(self) -> None:
        self._given += 1
        for heap in (self._shared, self._waiting)[self._given % self.SHARE != 0 :]:
            while heap:
                _, _, turn = heapq.heappop(heap)
                if not turn.done():
                    turn.set_result(None)
                    return
        self.free += 1
