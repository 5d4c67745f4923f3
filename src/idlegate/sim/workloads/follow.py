"""The `follow` workload: each long job is followed, after a random lag, by a session of short jobs.

A big ETL run is followed within minutes by the short queries that read its output.
Each trigger (`triggered`) releases a long job at its time and, `lag` seconds later
(drawn by `lag_distribution`), the first of `session_size` short jobs, the next ones
`session_gap` seconds apart on average (exponential gaps). A share `uncorrelated` of the
jobs arrives on its own Poisson stream. Holding the last free executor back from a long
job pays here when the session it announces comes soon: the workload on which the
issue measured idling's room.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from idlegate.sim.engine import Workload
from idlegate.sim.workloads.base import SeedLike
from idlegate.sim.workloads.triggered import (
    LagDistribution,
    Releases,
    TriggeredOptions,
    lags,
    session_counts,
    triggered_workload,
)


class FollowConfig(TriggeredOptions):
    """Long jobs, each followed by a session of short jobs (module docs).

    Default: 100 one-task jobs on 4 executors at offered load 0.7; long jobs of 100 s,
    each followed after an exponential lag of mean 10 s by 3 or 4 short jobs of 10 s,
    2 s apart on average; one job in five uncorrelated.
    """

    lag: float = Field(10.0, ge=0)
    """Mean seconds from a long job's arrival to the first short job of its session."""
    lag_distribution: LagDistribution = "exponential"
    """How the lag is drawn: exponential, uniform on [0, 2·lag], or fixed (= lag)."""
    session_gap: float = Field(2.0, ge=0)
    """Mean seconds between consecutive short jobs of a session (exponential gaps)."""


def follow_releases(c: FollowConfig) -> Releases:
    """Each trigger: the long job at 0, then its session (`triggered.Releases`)."""

    def releases(rng: np.random.Generator, triggers: int) -> tuple[np.ndarray, np.ndarray]:
        most = math.ceil(c.session_size)
        u = rng.random((triggers, 2 + max(most - 1, 0)))
        count = session_counts(u[:, 0], c.session_size)
        first = lags(u[:, 1], c.lag, c.lag_distribution)
        later = -c.session_gap * np.log1p(-u[:, 2:])
        shorts = (
            first[:, None]
            + np.concatenate([np.zeros((triggers, 1)), np.cumsum(later, axis=1)], axis=1)[:, :most]
        )
        shorts[np.arange(most)[None, :] >= count[:, None]] = np.nan
        offsets = np.concatenate([np.zeros((triggers, 1)), shorts], axis=1)
        long = np.zeros(offsets.shape, bool)
        long[:, 0] = True
        return offsets, long

    return releases


def follow_workload(config: FollowConfig | None = None, seed: SeedLike = 0) -> Workload:
    """Long jobs followed by sessions of short ones, plus uncorrelated jobs (module docs)."""
    c = config or FollowConfig()
    return triggered_workload("follow", c, follow_releases(c), seed)
