"""No thrash: what a pool remembers of the tasks it stopped, so that giving quota back
does not turn into stopping and starting the same work (issue 82, item 4). Being built:
pure and tested, not yet called by the admission.

Pure and clock-free, like `idlegate.sim.cluster`: every call carries `now`, so the
simulator's virtual clock and the operator's wall clock drive the same ledger.

Semantics (the settings are `Calm`'s):

* *Cooldown.* A task stopped at t is not stopped again before t + ``cooldown``: it is no
  candidate meanwhile, whatever it would lose (the task is the same across its runs: the
  driver's name for it, `Running.task`).
* *Budget.* At most ``per_minute`` tasks are stopped in the pool in any 60 seconds (a
  sliding window: those stopped in (now − 60, now] count). A choice that needs more than
  what is left stops nothing: stopping some of what a task needs would lose work and
  start nothing. So the search is asked for at most what is left (`most`).
* *Grace.* A lent task, one of another queue than the waiting task's (it runs on quota
  its queue borrows), younger than ``grace`` (started after now − grace) is not stopped
  where older ones would do: the choice is made first without the young lent tasks, and
  only if none fits, with them. So a task started on lent quota is not stopped at once
  when the owner's work comes back, unless nothing else frees the room. By default there
  is none (0 s): on `-w teams`' large scenario a grace of 60 s made the choice stop
  older tasks, losing more work at a worse ρ (tuning seeds, then held-out ones:
  docs/queues.md, "The grace").
* `calm_victims` is the choice under these rules, the waiting task's candidates being
  `idlegate.sim.reclaim_rules.eligible`'s and the choice `idlegate.sim.reclaim`'s;
  `StopLedger.stopped` records what the driver then stopped (the ledger does not assume a
  choice is carried out).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from idlegate.errors import IdlegateError
from idlegate.sim.reclaim import Running, Victims, choose_victims
from idlegate.sim.reclaim_rules import Claimant, Eligible

WINDOW = 60.0
"""Seconds of the budget's sliding window."""


@dataclass(frozen=True)
class Calm:
    """The no-thrash settings (the module docstring)."""

    cooldown: float = 600.0
    """Seconds a stopped task is not stopped again."""
    per_minute: int = 20
    """Tasks the pool stops at most in any 60 seconds."""
    grace: float = 0.0
    """Seconds a lent task is spared where an older one would do (none by default)."""
    patience: float = 30.0
    """Seconds a claimant's task waits for running tasks expected to give it the room
    before it stops any (`idlegate.sim.reclaim_patience`; tuned: docs/queues.md, "Less
    work lost")."""
    ending: float = 0.5
    """A task expected to run less than this times what it has run is no victim
    (`idlegate.sim.reclaim_patience`; tuned as `patience`)."""

    def __post_init__(self) -> None:
        for name, example in (("cooldown", 60), ("grace", 60), ("patience", 30), ("ending", 0.5)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                unit = "a ratio" if name == "ending" else "a number of seconds"
                raise IdlegateError(f"{name} {value!r} must be {unit} >= 0, e.g. {example}")
        if isinstance(self.per_minute, bool) or not isinstance(self.per_minute, int):
            raise IdlegateError(f"per_minute {self.per_minute!r} must be a whole number, e.g. 20")
        if self.per_minute < 1:
            raise IdlegateError(
                f"per_minute {self.per_minute} must be at least 1; to stop nothing, leave "
                "every queue's preemption at Never"
            )


class StopLedger:
    """The tasks a pool stopped and when (the module docstring)."""

    def __init__(self, calm: Calm | None = None) -> None:
        self.calm = calm or Calm()
        self._last: dict[Hashable, float] = {}
        """When each task was last stopped (kept while in its cooldown)."""
        self._recent: deque[float] = deque()
        """When each stop of the last minute was, oldest first."""

    def stopped(self, tasks: Iterable[Hashable], now: float) -> None:
        """Record that `tasks` (their names) were stopped at `now`."""
        self._forget(now)
        for task in tasks:
            self._last.pop(task, None)  # (at the end: the order stays the stops')
            self._last[task] = now
            self._recent.append(now)

    def withdraw(self, tasks: Iterable[Hashable], at: float) -> None:
        """Forget that `tasks` were stopped at `at`: their stops were asked and then not
        carried out (the operator's judge declined them, `idlegate.operator.core.judging`)."""
        for task in tasks:
            if self._last.get(task) == at:
                del self._last[task]
            if at in self._recent:
                self._recent.remove(at)

    def copy(self) -> StopLedger:
        """An independent copy (a forked pool's: its stops are not the live pool's)."""
        twin = StopLedger(self.calm)
        twin._last = dict(self._last)
        twin._recent = deque(self._recent)
        return twin

    def cooling(self, task: Hashable, now: float) -> bool:
        """Whether `task` was stopped less than ``cooldown`` seconds before `now`."""
        last = self._last.get(task)
        return last is not None and now < last + self.calm.cooldown

    def left(self, now: float) -> int:
        """How many tasks the pool may still stop at `now` (the budget)."""
        self._forget(now)
        return max(0, self.calm.per_minute - len(self._recent))

    def young(self, task: Running, claimant: Claimant, now: float) -> bool:
        """Whether `task` is a lent task in its grace period for `claimant`."""
        return task.queue != claimant.queue and task.start > now - self.calm.grace

    def _forget(self, now: float) -> None:
        recent = self._recent
        while recent and recent[0] <= now - WINDOW:
            recent.popleft()
        last, cool = self._last, self.calm.cooldown
        while len(last) > 64 and len(last) > 2 * len(recent):  # (bound its size: those
            task, at = next(iter(last.items()))  # cooled down, oldest first, go)
            if now < at + cool:
                break
            del last[task]


def calm_victims(
    ledger: StopLedger,
    claimant: Claimant,
    eligible: Eligible,
    now: float,
    *,
    free: Mapping[str, int] | None = None,
    nodes: Sequence[Mapping[str, int]] | None = None,
) -> Victims | None:
    """The choice for `claimant` among `eligible`'s candidates at `now` (the pool's
    `free` amounts, or its `nodes`'), under the ledger's cooldown, budget and grace
    (the module docstring); None: stop nothing."""
    most = ledger.left(now)
    if most == 0:
        return None
    ready = [t for t in eligible.candidates if not ledger.cooling(t.task, now)]
    older = [t for t in ready if not ledger.young(t, claimant, now)]
    for candidates in (older, ready) if len(older) < len(ready) else (ready,):
        got = choose_victims(
            claimant.need,
            candidates,
            now,
            free=free,
            nodes=nodes,
            limits=eligible.limits,
            borrowed=eligible.borrowed,
            most=most,
        )
        if got is not None:
            return got
    return None
