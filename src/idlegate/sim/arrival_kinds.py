"""The kinds of arrivals a forecast invents (`sim.forecast_arrivals` draws them), apart
from the drawing: a pool's spec and ``lint`` name them without importing numpy."""

from __future__ import annotations

from typing import Literal, get_args

Arrivals = Literal["none", "poisson", "queues"]
"""What a forecast's replays invent (`sim.forecast_arrivals`' docstring)."""
ARRIVALS: tuple[str, ...] = get_args(Arrivals)
