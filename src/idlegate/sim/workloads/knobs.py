"""The base of every workload's option model (`idlegate.sim.workloads.base` and each
generator's knobs derive from it): a module of its own, so that a generator's knobs
(`tpch_like.DagShape`) need not import the workloads' base, which names the sources
that use them."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict

from idlegate.config import Config


class _Options(Config):
    # a workload's numbers are counts, seconds and ratios: NaN or inf in one (`--load
    # nan`) is a mistake, said as such rather than as a bound it happens to break
    model_config = ConfigDict(allow_inf_nan=False)
    EXTRA_OPTIONS: ClassVar[dict[str, str]] = {}
    """Input-only option names (translated before validation) and what they mean."""
