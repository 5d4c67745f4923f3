"""Which of a pool's forecasts its interval calibration scores, and when.

A pool's calibration (`sim.forecast_calibration`) widens its intervals by how its past
forecasts came out. Which forecasts: each waiting workflow's first (what is kept, measured
and recorded: `api.forecast_refresh`, "How right"), and on a live pool also one a refresh
`every` seconds while it waits (`Scored.note`), each scored against the workflow's start
and finish as they come (`Scored.resolve`). A burst's workflows are all first forecast at
once, before any has started; scored only so, a pool has nothing of its own to widen by
until most of a burst has run. A workflow that waits ten intervals gives ten scores instead
of one, at the lead times its later forecasts looked ahead, so the calibration follows the
pool within the first workflows that start, as `idlegate forecast evaluate --every` scores
every forecast it makes. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field

from idlegate.sim.forecast import Span
from idlegate.sim.forecast_calibration import Calibration
from idlegate.sim.protocol import Job


@dataclass
class _Waiting:
    """A workflow's forecasts made while it waited, to score: (made at, start, finish)."""

    job: Job
    made: list[tuple[float, Span, Span]] = field(default_factory=list)
    started: bool = False


class Scored:
    """The forecasts `calibration` (start, finish) is to score: each waiting workflow's
    first, and one every `every` seconds after (inf: the first alone)."""

    def __init__(self, calibration: dict[str, Calibration], every: float = math.inf) -> None:
        self.calibration = calibration
        self.every = every
        self.waiting: dict[int, _Waiting] = {}

    def note(self, job: Job, made: float, start: Span, finish: Span) -> None:
        """`job`'s forecast made at `made` while it waited (the replays' spans, before the
        calibration widened them): scored if it is its first, or `every` seconds after the
        last scored."""
        found = self.waiting.setdefault(job.id, _Waiting(job))
        if found.made and made - found.made[-1][0] < self.every:
            return
        found.made.append((made, start, finish))

    def resolve(self, live: Collection[int]) -> None:
        """Score the forecasts of the workflows that started or finished since; forget
        those gone unfinished (deleted, moved to another pool: not in `live`)."""
        for job_id, found in list(self.waiting.items()):
            job = found.job
            if job.finish is None and job_id not in live:
                del self.waiting[job_id]
                continue
            if not found.started and job.first_start is not None:
                found.started = True
                for made, start, _ in found.made:
                    self.calibration["start"].record(start, made, job.first_start)
            if job.finish is not None:
                for made, _, finish in found.made:
                    if math.isfinite(finish.median):
                        self.calibration["finish"].record(finish, made, job.finish)
                del self.waiting[job_id]
