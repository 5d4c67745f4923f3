"""When a reclaim is worth its work lost: two rules on the running tasks' declared
durations that keep a pool from stopping work that would soon give the room back
anyway (issue 82; `idlegate.sim.reclaim_plan` applies them, `Calm` holds their
settings).

Pure and clock-free, like `idlegate.sim.cluster`: every call carries what it reads.

Semantics (a running task started at s of a stage declaring d seconds a task, at `now`):

* Its *expected remaining* is s + d − now within its estimate. Past it, it is overdue:
  at least `OVERDUE_FRACTION` of d (about to end, as the forecaster's rollouts assume:
  `idlegate.sim.rollout`), and at least as long as it has overrun d (issue 96: the
  further past its estimate, the less its end is known, so a task that overran far is
  not counted as giving the room soon for ever). A stage declaring no positive finite
  duration has none (None), and no rule below reads it as ending.
* *Room coming* (`room_after`): the running tasks of the queues a claimant could take
  room from, and its own, end at their expected remaining, one after another (soonest
  first); the first time their room added to the free room makes its task fit (on a
  pool of nodes: on one node) is when the room comes without a stop, R.
* *Patience.* A claimant whose ready task has waited w seconds stops nothing while
  R ≤ ``patience`` − w. The work a stop loses is then spent to save less than
  ``patience`` of wait. Once its task has waited ``patience`` (an estimate was wrong:
  the task ran longer than declared), it stops what the rules choose: the driver asks
  the question again then (`Admission.next_bound`), so the owner waits at most
  ``patience`` more than by the rules alone, where the stop pays (below).
* *Ending: a stop must pay.* A running task is no victim where stopping it saves its
  owner less than ``ending`` × the time it has run: it saves at most R (the room comes
  then anyway, issue 96) and, within its estimate, at most its expected remaining (it
  gives its room back then). So a task that has run longer than R / ``ending`` is
  spared, and one within its estimate whose remaining is less than ``ending`` × what it
  ran. A checkpointed task, which loses nothing, is always one.

With ``patience`` 0 and ``ending`` 0 neither rule stops anything the rules would stop,
and neither reads a duration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from math import inf, isfinite

from idlegate.sim.reclaim import fits

OVERDUE_FRACTION = 0.05
"""A running task past its estimate ends after this fraction of the estimate (the
forecaster's rollouts, `idlegate.sim.rollout`, and the rules here assume as much)."""


def expected_left(duration: float, elapsed: float) -> float | None:
    """Seconds a task declaring `duration` seconds, having run `elapsed`, is expected to
    run still (the module docstring; None: it declares none)."""
    if not isfinite(duration) or duration <= 0:
        return None  # (none declared: no rule reads it as ending)
    return max(duration - elapsed, OVERDUE_FRACTION * duration, elapsed - duration)


def ending(duration: float, elapsed: float, ratio: float, saves: float = inf) -> bool:
    """Whether stopping a task that ran `elapsed` of its declared `duration` saves its
    owner less than `ratio` times that, the room coming anyway in `saves` seconds (the
    module docstring's *ending*): then it is no victim."""
    if ratio <= 0 or elapsed <= 0:
        return False
    known = isfinite(duration) and 0 < elapsed < duration  # (past it: its end is not known)
    saved = min(duration - elapsed, saves) if known else saves
    return saved < ratio * elapsed


def room_after(
    need: Mapping[str, int],
    rooms: Sequence[Mapping[str, int]],
    running: Iterable[tuple[float, Mapping[str, int], int | None]],
) -> float:
    """Seconds until a task needing `need` fits one of `rooms` (the pool's free amounts,
    one room; or each node's) as the `running` tasks end, soonest first: each (its
    expected remaining, what it holds, its room's index: None on a pool without nodes,
    where it is the only room). 0: it fits now; inf: not even once they have all ended."""
    soon = sorted(
        ((left, i, held, at) for i, (left, held, at) in enumerate(running)),
        key=lambda row: (row[0], row[1]),
    )
    back: list[dict[str, int]] = [dict(r) for r in rooms]
    if any(fits(need, r, ()) for r in back):
        return 0.0
    for left, _i, held, at in soon:
        n = 0 if at is None and len(back) == 1 else at
        if n is None or n >= len(back):
            continue  # (a task on no node, or on one the task may not use, gives it none)
        room = back[n]
        for name, amount in held.items():
            room[name] = room.get(name, 0) + amount
        if fits(need, room, ()):
            return left
    return inf


__all__ = ["OVERDUE_FRACTION", "ending", "expected_left", "room_after"]
