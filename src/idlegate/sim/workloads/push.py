"""The `push` workload: one trigger starts one long and several short workflows, seconds apart.

A push to a repository starts its CI workflows together: one long build and a few short
checks, registered a few seconds apart. Each trigger (`triggered`) releases
`session_size` short workflows and one long one, consecutive workflows `spacing` seconds
apart on average (drawn by `spacing_distribution`); the long one comes first, or at a
uniformly random place (`long_position`). A share `uncorrelated` of the workflows
arrives on its own Poisson stream. When the long one comes first, the short ones it
announces arrive within seconds: the clearest case for keeping an executor free.
"""

from __future__ import annotations

import math
from typing import Literal

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


class PushConfig(TriggeredOptions):
    """One long and several short workflows per trigger, seconds apart (module docs).

    Default: 100 one-task workflows on 4 executors at offered load 0.7; per push one long
    workflow of 100 s first, then 3 or 4 short ones of 10 s, uniformly 0-6 s apart; one
    workflow in five uncorrelated.
    """

    spacing: float = Field(3.0, ge=0)
    """Mean seconds between consecutive workflows of one push."""
    spacing_distribution: LagDistribution = "uniform"
    """How each gap is drawn: exponential, uniform on [0, 2·spacing], or fixed (= spacing)."""
    long_position: Literal["first", "random"] = "first"
    """Where the long workflow is among its push's: first, or at a uniformly random place."""


def push_releases(c: PushConfig) -> Releases:
    """Each trigger: its workflows at cumulative gaps from 0 (`triggered.Releases`)."""

    def releases(rng: np.random.Generator, triggers: int) -> tuple[np.ndarray, np.ndarray]:
        width = 1 + math.ceil(c.session_size)
        u = rng.random((triggers, 1 + width))
        count = 1 + session_counts(u[:, 0], c.session_size)
        gaps = lags(u[:, 2:], c.spacing, c.spacing_distribution)
        offsets = np.concatenate([np.zeros((triggers, 1)), np.cumsum(gaps, axis=1)], axis=1)
        slot = np.arange(width)[None, :]
        offsets[slot >= count[:, None]] = np.nan
        place = np.zeros(triggers, int)
        if c.long_position == "random":
            place = np.minimum((u[:, 1] * count).astype(int), count - 1)
        return offsets, slot == place[:, None]

    return releases


def push_workload(config: PushConfig | None = None, seed: SeedLike = 0) -> Workload:
    """One long and several short workflows per push, plus uncorrelated ones (module docs)."""
    c = config or PushConfig()
    return triggered_workload("push", c, push_releases(c), seed)
