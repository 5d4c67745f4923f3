"""When a reclaim is worth its work lost: two rules on the running tasks' declared
durations that keep a pool from stopping work that would soon give the room back
anyway (issue 82; `idlegate.sim.reclaim_plan` applies them, `Calm` holds their
settings).

Pure and clock-free, like `idlegate.sim.cluster`: every call carries what it reads.

Semantics (a running task started at s of a stage declaring d seconds a task, at `now`):

* Its *expected remaining* is s + d − now, and at least `OVERDUE_FRACTION` of d: past
  its estimate it is overdue and about to end (the forecaster's rollouts assume as
  much: `idlegate.sim.rollout`); a stage declaring no positive finite duration has
  none (None), and no rule below reads it as ending.
* *Patience.* A claimant whose ready task has waited w seconds stops nothing while the
  running tasks of the queues it could take room from, and its own, are expected to give
  it the room within ``patience`` − w: ending at their expected remaining, one after
  another (soonest first), their room added to the free room makes its task fit (on a
  pool of nodes: on one node). The work a stop loses is then spent to save less than
  ``patience`` of wait. Once its task has waited ``patience`` (an estimate was wrong: the
  task ran longer than declared), it stops what the rules choose: the driver asks the
  question again then (`Admission.next_bound`), so the owner waits at most ``patience``
  more than by the rules alone.
* *Ending.* A running task within its estimate whose expected remaining is less than
  ``ending`` × the time it has run is no victim: stopping it loses more than
  ``1/ending`` times the wait it could save its owner (at most its remaining). A task
  past its estimate is one (when it ends is not known: were it spared as about to end,
  a task that overran far would never be stopped), and so is a checkpointed task, which
  loses nothing.

With ``patience`` 0 and ``ending`` 0 neither rule stops anything the rules would stop,
and neither reads a duration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from math import isfinite

from idlegate.sim.reclaim import fits

OVERDUE_FRACTION = 0.05
"""A running task past its estimate ends after this fraction of the estimate (the
forecaster's rollouts, `idlegate.sim.rollout`, and the rules here assume as much)."""


def expected_left(duration: float, elapsed: float) -> float | None:
    """Seconds a task declaring `duration` seconds, having run `elapsed`, is expected to
    run still (the module docstring; None: it declares none)."""
    if not isfinite(duration) or duration <= 0:
        return None  # (none declared: no rule reads it as ending)
    return max(duration - elapsed, OVERDUE_FRACTION * duration)


def ending(duration: float, elapsed: float, ratio: float) -> bool:
    """Whether a task that ran `elapsed` of its declared `duration` is too near its end
    to be a victim at `ratio` (the module docstring's *ending*)."""
    if ratio <= 0 or elapsed <= 0 or not elapsed < duration:
        return False  # (past its estimate, or none: when it ends is not known)
    return duration - elapsed < ratio * elapsed


def room_within(
    need: Mapping[str, int],
    rooms: Sequence[Mapping[str, int]],
    running: Iterable[tuple[float, Mapping[str, int], int | None]],
    within: float,
) -> bool:
    """Whether a task needing `need` fits one of `rooms` (the pool's free amounts, one
    room; or each node's) once the `running` tasks expected to end within `within`
    seconds have ended, soonest first: each (its expected remaining, what it holds, its
    room's index: None on a pool without nodes, where it is the only room)."""
    if within < 0:
        return False
    soon = sorted(
        ((left, i, held, at) for i, (left, held, at) in enumerate(running) if left <= within),
        key=lambda row: (row[0], row[1]),
    )
    back: list[dict[str, int]] = [dict(r) for r in rooms]
    if any(fits(need, r, ()) for r in back):
        return True
    for _left, _i, held, at in soon:
        n = 0 if at is None and len(back) == 1 else at
        if n is None or n >= len(back):
            continue  # (a task on no node, or on one the task may not use, gives it none)
        room = back[n]
        for name, amount in held.items():
            room[name] = room.get(name, 0) + amount
        if fits(need, room, ()):
            return True
    return False


__all__ = ["OVERDUE_FRACTION", "ending", "expected_left", "room_within"]
