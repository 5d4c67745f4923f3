"""How late the operator is (issue 79): measured against the API server's own times and its
event loop's, exported, and bounded.

Three lags, each a histogram (`Lag`, declared in the operator's registry):

* ``idlegate_watch_lag_seconds{kind}``: from an object's change, as the API server dated
  it, to the operator's handling of it (its kopf handler starting): ``pod``,
  ``dagworkflow``, ``node``, and Argo's ``workflow`` (``--argo``). The change's time is
  the newest time the server (or a controller writing through it) put on the object
  (`server_times`): ``metadata.managedFields[].time`` (real Kubernetes stamps each write of
  each field manager; the test API server in tests/k8s does not), ``creationTimestamp``,
  ``status.conditions[].lastTransitionTime`` (a pod bound, ready, ended), a container's
  ``startedAt`` and ``finishedAt`` and ``status.startTime``. ``deletionTimestamp`` is not
  one: the server sets it a grace period ahead. A change is measured by the newest time
  it added to the object (`Stamps`), so a change that adds none (a label, the operator's
  own gate removal) is never read as a long lag, nor is kopf's list of every object at a
  start (their age). These times are whole seconds on both
  servers: the change is taken at the middle of its second, so one reading is within half
  a second either way, and so are the quantiles.
* ``idlegate_write_lag_seconds{write}``: from a decision (or change) being made to the API
  write carrying it having completed: ``release`` (a pod released to run: its gate
  removed, or created released), ``pod`` (another pod write), ``status`` (from the first
  change the write carries), ``event`` (a new Event posted), ``workflow`` (a cron's run
  created, a workflow deleted). Loop time, in seconds.
* ``idlegate_loop_stall_seconds``: how late a heartbeat task on the operator's event loop
  woke, sleeping `HEARTBEAT` seconds at a time (`Lag.heartbeat`): what any handler or
  write of the operator waits for the loop at that moment.

`LagBound` decides when lag *stays* above ``--lag-bound``: the p90 of a lag's readings over
the last `WINDOW` seconds above the bound at every heartbeat for `HOLD` seconds; it clears
once every lag was within the bound for `HOLD` seconds. The lags it reads: the watch lag,
the write lag of releases and Events (`BOUNDED`), the loop's stalls. The operator then
says so (docs/operations.md, "When the operator lags"): a Warning ``Lagging`` on each
ExecutorPool and its own Pod, the pools' condition ``Lagging``, ``idlegate_lagging`` 1 and
a log line; ``LagRecovered`` when it clears.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Gauge, Histogram

from idlegate.api.pool_spec import LAGGING
from idlegate.sim.timestamps import parse_time, timestamp_precision

if TYPE_CHECKING:
    from idlegate.api.notices import Notice

log = logging.getLogger(__name__)

HEARTBEAT = 1.0
"""Seconds the heartbeat sleeps between two wakes (loop time)."""
HOLD = 30.0
"""Seconds a lag must stay above the bound before the operator says it lags (and within
it before it says it recovered)."""
WINDOW = 10.0
"""Seconds of readings a lag's p90 is taken over at each check: a burst of slow readings
keeps the p90 above the bound up to this much longer than it lasted."""
QUANTILE = 0.9
"""The quantile of a window's readings compared with the bound: one slow reading in ten
is noise, not lag."""
LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
STALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
MAX_READINGS = 2048
"""Readings of one source the bound keeps (the latest): its p90 costs a sort of as many
a second, however busy the watch."""
MAX_OBJECTS = 65_536
"""Objects whose times are remembered (the least recent are forgotten: a change of one
forgotten is not measured); a few hundred bytes each."""
RECOVERED = "LagRecovered"
"""The reason of the Normal Event that says the lag is within the bound again."""
BOUNDED = ("release", "event")
"""The writes whose lag the bound reads: a status write waits by design (batched, and one
that only changes counts yields to every other write under load)."""
WHAT = {"watch": "watch lag", "write": "release and Event write lag", "loop": "event-loop stall"}
"""What each of the bound's sources is called in its sentences."""


def server_times(body: Mapping[str, Any]) -> dict[str, float]:
    """Each time the API server (or a controller writing through it) put on `body`, by
    where it is (the module's docstring says which), in epoch seconds: at the middle of its
    second for a whole-second time."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    found: dict[str, Any] = {
        "created": meta.get("creationTimestamp"),
        "started": status.get("startTime"),
    }
    for f in _dicts(meta.get("managedFields")):
        found[f"managed/{f.get('manager')}/{f.get('operation')}/{f.get('subresource')}"] = f.get(
            "time"
        )
    for c in _dicts(status.get("conditions")):
        found[f"condition/{c.get('type')}"] = c.get("lastTransitionTime")
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in _dicts(status.get(key)):
            for name, state in (container.get("state") or {}).items():
                for field in ("startedAt", "finishedAt") if isinstance(state, dict) else ():
                    found[f"{key}/{container.get('name')}/{name}/{field}"] = state.get(field)
    times = {}
    for where, value in found.items():
        t = parse_time(value)
        if t is not None:
            times[where] = t + (timestamp_precision(value) if isinstance(value, str) else 0) / 2
    return times


def changed_at(body: Mapping[str, Any]) -> float | None:
    """Epoch seconds of `body`'s latest change as the API server dated it (`server_times`'
    newest); None if it carries no time."""
    return max(server_times(body).values(), default=None)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


class Stamps:
    """The server's times each object carried when last seen (by uid): a change is
    measured by the newest time it added, once; a change that added none (a label, the
    operator's own gate removal) is not measured, nor is the first sight of an object
    but by a watch's ADDED (the list at a start would read its age as lag)."""

    def __init__(self, size: int = MAX_OBJECTS) -> None:
        self.size = size
        self._seen: OrderedDict[str, frozenset[int]] = OrderedDict()

    def lag(
        self,
        body: Mapping[str, Any],
        now: float,
        event: str | None = "ADDED",
        to_clock: Callable[[float], float] = float,
    ) -> float | None:
        """Seconds from `body`'s change to `now` (the operator clock's epoch seconds, onto
        which `to_clock` maps the API's; never below 0), or None if it is not measured.
        `event`: the watch event's type (None: a list); a DELETED object is forgotten."""
        uid = str((body.get("metadata") or {}).get("uid") or "")
        times = {where: to_clock(t) for where, t in server_times(body).items()}
        seen = frozenset(hash(item) for item in times.items())
        before = self._seen.pop(uid, None)
        if uid and event != "DELETED":
            self._seen[uid] = seen
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)
        if before is None and event != "ADDED":
            return None
        new = [t for where, t in times.items() if hash((where, t)) not in (before or ())]
        return max(0.0, now - max(new)) if uid and new else None


def quantile(values: Iterable[float], q: float) -> float | None:
    """The `q` quantile of `values` by nearest rank (None if there are none)."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class LagBound:
    """Whether the operator lags: per source (watch, write, loop), readings over the last
    `window` seconds; a source is *above* at a check when their `QUANTILE` exceeds `bound`
    (none: not above). The operator lags from the check at which some source has been
    above at every check for `hold` seconds, and recovers at the check from which every
    source has been not above for `hold` seconds. Times are loop seconds, given by the
    caller (pure: no clock read)."""

    def __init__(self, bound: float, hold: float = HOLD, window: float = WINDOW) -> None:
        self.bound, self.hold, self.window = bound, hold, window
        self.readings: dict[str, deque[tuple[float, float]]] = {}
        self.above_since: dict[str, float] = {}
        """Each source above since the check at which it became so."""
        self.within_since: float | None = None
        """While lagging, the check since which no source was above (None: some is)."""
        self.lagging: str | None = None
        """While lagging, the sentence saying what lags and by how much (kept current)."""

    def observe(self, source: str, seconds: float, at: float) -> None:
        self.readings.setdefault(source, deque(maxlen=MAX_READINGS)).append((at, seconds))

    def check(self, at: float) -> bool | None:
        """Evaluate at `at`: True when the operator starts lagging now, False when it
        recovers now, None when nothing changed (`lagging` says the current state)."""
        levels: dict[str, float] = {}
        for source, window in self.readings.items():
            while window and window[0][0] <= at - self.window:
                window.popleft()
            level = quantile((s for _, s in window), QUANTILE)
            if level is not None and level > self.bound:
                levels[source] = level
                self.above_since.setdefault(source, at)
            else:
                self.above_since.pop(source, None)
        held = {s: v for s, v in levels.items() if at - self.above_since[s] >= self.hold}
        if self.lagging is None:
            if not held:
                return None
            self.lagging, self.within_since = self._say(held), None
            return True
        if levels:
            self.within_since = None
            self.lagging = self._say(levels)
            return None
        if self.within_since is None:
            self.within_since = at
        if at - self.within_since < self.hold:
            return None
        self.lagging = self.within_since = None
        return False

    def _say(self, levels: Mapping[str, float]) -> str:
        lags = "; ".join(
            f"{WHAT.get(s, s)} p90 {v:.1f} s over the last {self.window:g} s"
            for s, v in sorted(levels.items())
        )
        return f"The operator lags: {lags} (bound {self.bound:g} s, --lag-bound)."

    def recovered(self) -> str:
        return (
            f"The operator's lag is within its bound of {self.bound:g} s again (watch, "
            f"writes and event loop, for {self.hold:g} s)."
        )


class Lag:
    """The operator's lags: their series in `registry`, the objects' last changes measured
    (`Stamps`) and the bound (`LagBound`). `configure` gives it the operator's clock and
    bound; `on_change` is told the Event saying the lag's start or end."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.watch = Histogram(
            "idlegate_watch_lag_seconds",
            "From an object's change, as the API server dated it (docs/operations.md says "
            "which times), to the operator's handling of it, by kind.",
            ["kind"],
            buckets=LAG_BUCKETS,
            registry=registry,
        )
        self.write = Histogram(
            "idlegate_write_lag_seconds",
            "From a decision or change being made to the API write carrying it having "
            "completed, by write (release, pod, status, event, workflow).",
            ["write"],
            buckets=LAG_BUCKETS,
            registry=registry,
        )
        self.stall = Histogram(
            "idlegate_loop_stall_seconds",
            "How late the operator's event-loop heartbeat woke (it sleeps 1 s at a time).",
            buckets=STALL_BUCKETS,
            registry=registry,
        )
        self.gauge = Gauge(
            "idlegate_lagging",
            "1 while a lag stays above --lag-bound (the ExecutorPools' condition Lagging).",
            registry=registry,
        )
        self.stamps = Stamps()
        self.bound = LagBound(math.inf)
        """Never lags until `configure` gives it the operator's bound."""
        self.now: Callable[[], float] = time.time
        """The operator's clock (epoch seconds), against which the API's times are read."""
        self.from_wall: Callable[[float], float] = float
        """The clock's time at a wall-clock epoch time (an API timestamp)."""
        self.on_change: Callable[[Notice], None] = lambda notice: None
        """Told the Event that says the lag's start (`LAGGING`) or end (`RECOVERED`)."""

    def configure(self, settings: Any, on_change: Callable[[Notice], None]) -> Lag:
        """From the operator's `settings` (`idlegate.api.settings.Settings`): its
        bound (``--lag-bound``; 0: it never lags) and its clock; and what says the lag's
        start and end (`on_change`). Returns itself."""
        bound, clock = settings.lag_bound, settings.clock
        self.bound = LagBound(bound if bound > 0 else math.inf)
        self.now, self.from_wall, self.on_change = clock.now, clock.from_wall, on_change
        return self

    @property
    def lagging(self) -> str | None:
        return self.bound.lagging

    def seen(self, kind: str, body: Mapping[str, Any], event: str | None) -> None:
        """The operator handles `body`, of `kind`, now: a watch `event` (its type; None:
        kopf's list)."""
        lag = self.stamps.lag(body, self.now(), event, self.from_wall)
        if lag is not None:
            self.watch.labels(kind).observe(lag)
            self.bound.observe("watch", lag, _loop_time())

    def written(self, write: str, since: float) -> None:
        """A write of kind `write` ("": one not measured) completed; `since`: the loop time
        it was decided at."""
        if not write:
            return
        at = _loop_time()
        self.write.labels(write).observe(max(0.0, at - since))
        if write in BOUNDED:
            self.bound.observe("write", max(0.0, at - since), at)

    async def heartbeat(
        self, interval: float = HEARTBEAT, now: Callable[[], float] | None = None
    ) -> None:
        """Wake every `interval` seconds of loop time (`now`: the loop's clock), record how
        late each wake was, and check the bound (for ever: cancel it)."""
        now = now or asyncio.get_running_loop().time
        while True:
            due = now() + interval
            await asyncio.sleep(interval)
            at = now()
            self.stall.observe(max(0.0, at - due))
            self.bound.observe("loop", max(0.0, at - due), at)
            self.check(at)

    def check(self, at: float) -> None:
        """Check the bound at `at` (loop time); a start or end is said and handed on."""
        changed = self.bound.check(at)
        if changed is None:
            return
        self.gauge.set(1 if changed else 0)
        lagging = ("Warning", LAGGING, self.bound.lagging or "")
        notice = lagging if changed else ("Normal", RECOVERED, self.bound.recovered())
        (log.warning if changed else log.info)("%s", notice[2])
        try:
            self.on_change(notice)
        except Exception:  # (saying it must not stop the heartbeat)
            log.exception("Could not say that the operator's lag changed.")


def _loop_time() -> float:
    return asyncio.get_running_loop().time()
