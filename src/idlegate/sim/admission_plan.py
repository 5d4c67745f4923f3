"""The admission's answer to one question (`AdmissionPlan`): what may start, and why the
rest waits.

`idlegate.sim.admission` runs its phases over the pool as it is at a question and answers
with a plan; it changes nothing of the pool. `Cluster.decide_once` then asks the policy
with the plan's views (`idlegate.sim.admission_view`, one per queue served) and applies
the answer itself, its cap cut to the plan's `room` for its stage; the entries
(`idlegate.sim.admission_entries`) read the plan's holds. A plan is frozen: what was
decided at a question is not changed by whoever reads it, and it is the one place each
decision of the question is kept (Kueue's scheduling cycle keeps the same in its
`entry`: nominated, then assigned or not, with its reason).

The plan says, in the phases' order (the admission's docstring numbers them):

* ``forced`` (phase 4): the decision a task past its wait bound makes without the policy;
* ``served`` (5) and, per queue served, its ``phase`` (within its nominal quota, or
  borrowing) and the shapes it may start with their tasks (``rooms``, after phase 6's
  priority; ``allowed``, before it): each stage's cap;
* ``reserve`` (4, read by 7): the room kept for a task past its bound, and its shadow time;
* the holds written as the phases decided them (``forced_hold``, ``blocked``/``holds``,
  ``reserve_hold``, ``quota``, ``ranked_out``); phase 3's are kept per queue across
  questions (`Admission.limits`), and phase 5's where it adds nothing to the queue's
  name (`Admission.quota`); the entries read them, and nothing makes one again;
* ``visible``: a baseline's answer instead (``kueue``, ``drf``: the stages its rule lets
  start, with their tasks);
* ``stop``: the executors whose running tasks to stop (preemption, issue 82): the
  victims `idlegate.sim.reclaim` chooses, stopped by the driver's step
  (`Cluster.stop`, `idlegate.sim.reclaim_stop`: the engine's, or the operator's through
  the Eviction API first). The reclaim phase fills it (`idlegate.sim.reclaim_plan`,
  before the others: a plan with stops says nothing else, and the question is asked
  again once they are applied); empty where no queue's ``preemption`` allows a stop.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from idlegate.sim.admission_snapshot import Group, demand_of, group_of, need_of

if TYPE_CHECKING:
    from idlegate.sim.admission_result import Verdict
    from idlegate.sim.protocol import Decision, Stage
    from idlegate.sim.reclaim_plan import Reclaim

NOMINAL, BORROW = "nominal", "borrow"
"""A served queue's phase: it starts within its nominal quota, or borrows."""


class _Empty(Mapping[Any, Any]):
    """An empty mapping that cannot be written, and pickles: a plan stays on its pool, and
    a fork of the pool goes to the operator's replay process pickled (a `MappingProxyType`
    would not)."""

    def __getitem__(self, key: Any) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __len__(self) -> int:
        return 0


_NONE: Mapping[Any, Any] = _Empty()
"""The empty mapping every plan shares (a plan's mappings are read, never written)."""


@dataclass(frozen=True, slots=True)
class Reserve:
    """Phase 4's reservation: the room kept for `stage`, past its queue's wait bound and
    entitled, until `shadow` (when the running tasks' estimated ends free it: EASY's
    shadow time), with the pool's `free` amounts and the clock (`now`) at the question."""

    stage: Stage
    shadow: float
    now: float
    free: tuple[float, ...]
    want: tuple[float, ...]
    """One task of `stage`'s demand (what the room is kept for, per task)."""


class AdmissionPlan(NamedTuple):
    """The admission's answer to one question (the module docstring). Immutable, and a
    tuple: one is made at every question, so it costs what a tuple does."""

    forced: Decision | None = None
    forced_hold: Verdict | None = None
    """Phase 4's hold of every other stage while `forced` starts first."""
    served: tuple[int, ...] = ()
    """The queues whose stages may start, in the order the policy is asked of them."""
    phase: Mapping[int, str] = _NONE
    rooms: Mapping[int, Mapping[Group, int]] = _NONE
    """Per queue served: each shape it may start (its top priority) and how many tasks."""
    allowed: Mapping[int, frozenset[Group]] = _NONE
    """Per queue served: every shape it may start, before the priority phase."""
    top: Mapping[int, int] = _NONE
    """Per queue served: the priority whose stages it may start."""
    blocked: Mapping[int, Stage] = _NONE
    """Per queue: its task past the wait bound that goes first in it."""
    holds: Mapping[int, Verdict] = _NONE
    """Per queue of `blocked`: the hold of its other stages."""
    reserve: Reserve | None = None
    reserve_hold: Verdict | None = None
    """Phase 4's hold of a stage the reservation leaves no room (`reserve`)."""
    ranked_out: Mapping[int, Mapping[Group, Verdict]] = _NONE
    """Per queue served: its shapes of a lower priority, and their hold."""
    quota: tuple[Verdict, ...] = ()
    """Phase 5's hold of each queue's stages beyond its nominal quota, by queue, when a
    queue borrows first (empty: the queues start within theirs first, `Admission.quota`)."""
    visible: Mapping[Stage, int] | None = None
    """A baseline's stages that may start and their tasks (None: idlegate's phases)."""
    stop: tuple[int, ...] = ()
    """The executors whose tasks to stop first (preemption's; the module docstring)."""
    reclaim: Reclaim | None = None
    """The stops' account: for whom, why, the work lost (`idlegate.sim.reclaim_plan`)."""

    def room(self, stage: Stage) -> int:
        """Phase 7: how many tasks of `stage` the plan lets start (a decision's cap is cut
        to it; 0: it may not start), its fit to the free resources aside."""
        forced = self.forced
        if forced is not None:
            return need_of(stage) if forced.stage is stage else 0
        if self.visible is not None:
            return self.visible.get(stage, 0)
        rooms = self.rooms.get(stage.job.queue)
        if rooms is None or stage not in stage.job.runnable:
            return 0
        n = rooms.get(group_of(stage), 0)
        return n if n and self.reserve is None else self._beside(stage, n)

    def _beside(self, stage: Stage, n: int) -> int:
        """Of `n` tasks of `stage`, those that may start beside the reservation: all if
        they end by its shadow time, else those its room leaves (at least a start's)."""
        reserve = self.reserve
        if not n or reserve is None:
            return n
        if reserve.now + stage.duration <= reserve.shadow:
            return n
        a = demand_of(stage, len(reserve.free))
        spare = min(
            (
                int((f - w) // x)
                for f, w, x in zip(reserve.free, reserve.want, a, strict=True)
                if x > 0
            ),
            default=n,
        )
        return min(n, spare) if spare >= need_of(stage) else 0


CLOSED = AdmissionPlan()
"""The plan of a question where nothing may start (no executor free, tasks beyond the
pool, or not worked out yet)."""
