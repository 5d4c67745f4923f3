"""Counting the operator's pod writes truthfully: each once, when its effect is confirmed.

`idlegate_pods_created_total` and `idlegate_gate_removals_total` must equal the pods the
API holds that the operator created and the gates it removed, however the API behaved. A
write answered with success (201, 200) is confirmed by that answer and counted at once. A
write that got no answer (the connection dropped, a timeout, a 5xx from the server or a
proxy in between) may or may not have been carried out: it is noted as *unconfirmed*, and
counted once a look at the pod shows its effect, whichever look comes first:

* the retry's own read, after its write was refused because the first one did happen (a
  creation's 409, a gate removal's 422 when the patch's ``test`` op no longer finds the
  gate); a fresh read that does not show the effect settles the matter: not counted (the
  retry's own write, when it succeeds, is);
* a watch event of the pod (:meth:`PodWriteCounts.observed`), which may come before the
  retry, or instead of it when the retry is no longer wanted (the pod ran and finished in
  the meantime). An event may be older than the write, so it only ever confirms; and while
  a retry of the write is on its way, the event may show the retry's own effect, which its
  answer counts, so an unconfirmed write is held back from the watch meanwhile.

A write confirmed by a look is remembered until its pod is deleted: a retry of it that
goes unanswered again (the server acted on the first try, then dropped the retry's
answer too) is not noted a second time, or the next look would count the effect twice.

What shows a creation: the pod exists, owned by the workflow that wrote it. Pod names are
per workflow, stage, task and attempt, and the writes on one pod name run one after the
other (one lane per pod, :mod:`idlegate.operator.actuator`), so no other write of the
operator created it meanwhile. What shows a gate removal: the pod has no gate of ours and
carries the executor annotation the removal set; the one write that sets both at once is
the operator's patch.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum

from idlegate.operator.metrics import Metrics
from idlegate.operator.pods import TaskPod

MAX_UNCONFIRMED = 4096
"""Unconfirmed writes remembered (the oldest are forgotten: their pods never appeared)."""


class Write(Enum):
    """The pod writes that are counted."""

    CREATE = "create"
    RELEASE = "release"


@dataclass(frozen=True, slots=True)
class Unconfirmed:
    """A pod write that got no answer."""

    write: Write
    owner_uid: str
    """The workflow that wrote it."""
    executor: int | None
    """For a gate removal: the executor slot the patch recorded."""

    def shown(self, pod: TaskPod) -> bool:
        """Whether `pod` (as it is now, or later) shows this write's effect."""
        if pod.owner_uid != self.owner_uid:
            return False
        if self.write is Write.CREATE:
            return True
        return not pod.gated and pod.executor is not None and pod.executor == self.executor


class PodWriteCounts:
    """The counters of pod creations and gate removals, with the writes not yet confirmed."""

    def __init__(self, metrics: Metrics, *, limit: int = MAX_UNCONFIRMED) -> None:
        self.metrics = metrics
        self.limit = limit
        self._open: OrderedDict[tuple[str, str], dict[Write, Unconfirmed]] = OrderedDict()
        """Per pod (namespace, name), its unconfirmed writes."""
        self._confirmed: OrderedDict[tuple[str, str], set[Unconfirmed]] = OrderedDict()
        """Per pod, the unanswered writes a look confirmed (and counted) already."""

    def sending(self, namespace: str, name: str) -> dict[Write, Unconfirmed]:
        """A write of the pod is about to be sent: its unconfirmed writes are held back
        until it is answered (a watch event meanwhile may show this write's own effect,
        which its answer will count); hand them to :meth:`answered`."""
        return self._open.pop((namespace, name), {})

    def answered(
        self, namespace: str, name: str, write: Write, held: dict[Write, Unconfirmed], ok: bool
    ) -> None:
        """The write sent after :meth:`sending` got an answer: success (`ok`: it happened,
        and no unanswered try of it did, or it would have been refused), or a refusal
        (the held writes are back, for the read that follows to settle)."""
        if not ok:
            self._restore(namespace, name, held)
            return
        self._count(write)
        if write is Write.RELEASE and Write.CREATE in held:
            self._count(Write.CREATE)  # the patched pod exists: that creation happened

    def unanswered(
        self,
        namespace: str,
        name: str,
        write: Write,
        owner_uid: str,
        executor: int | None,
        held: dict[Write, Unconfirmed] | None = None,
    ) -> None:
        """The write got no answer: it may have happened (as may the `held` ones)."""
        self._restore(namespace, name, held or {})
        self._note(namespace, name, Unconfirmed(write, owner_uid, executor))

    def _restore(self, namespace: str, name: str, held: dict[Write, Unconfirmed]) -> None:
        for pending in held.values():
            self._note(namespace, name, pending)

    def _note(self, namespace: str, name: str, pending: Unconfirmed) -> None:
        key = (namespace, name)
        if pending in self._confirmed.get(key, ()):
            return  # a retry of a write whose effect was seen and counted
        entries = self._open.setdefault(key, {})
        self._open.move_to_end(key)
        if pending.write is Write.CREATE:
            entries.pop(Write.RELEASE, None)  # (of an earlier pod of the name, now gone)
        elif Write.CREATE in entries:
            return  # a pod this creation made is released already: no gate to remove
        entries[pending.write] = pending
        while len(self._open) > self.limit:
            self._open.popitem(last=False)

    def looked(self, namespace: str, name: str, pod: TaskPod | None) -> None:
        """A fresh read of pod `name` (None: not a task pod) after a retry was refused:
        counts the unconfirmed writes it shows, forgets the others."""
        for pending in self._open.pop((namespace, name), {}).values():
            if pod is not None and pending.shown(pod):
                self._confirm(namespace, name, pending)

    def observed(self, namespace: str, pod: TaskPod, *, deleted: bool = False) -> None:
        """A watch event of the pod: counts the unconfirmed writes it shows."""
        key = (namespace, pod.name)
        if deleted or pod.deleting:
            self._confirmed.pop(key, None)  # (a pod of the name may be written again)
            return
        if not self._open:
            return
        entries = self._open.get(key)
        if entries is None:
            return
        for write, pending in list(entries.items()):
            if pending.shown(pod):
                del entries[write]
                self._confirm(namespace, pod.name, pending)
        if not entries:
            del self._open[key]

    def _confirm(self, namespace: str, name: str, pending: Unconfirmed) -> None:
        key = (namespace, name)
        self._confirmed.setdefault(key, set()).add(pending)
        self._confirmed.move_to_end(key)
        while len(self._confirmed) > self.limit:
            self._confirmed.popitem(last=False)
        self._count(pending.write)

    def unconfirmed(self) -> int:
        """Writes that got no answer and whose effect was not seen yet."""
        return sum(len(entries) for entries in self._open.values())

    def _count(self, write: Write) -> None:
        if write is Write.CREATE:
            self.metrics.pods_created.inc()
        else:
            self.metrics.gate_removals.inc()
