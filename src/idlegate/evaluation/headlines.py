"""Issue 9's headline deltas (paired per seed) and the count of idle slots fired."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from idlegate.evaluation.comparison import SchedulerResult
from idlegate.evaluation.suites import BASELINES
from idlegate.sim.metrics import (
    Estimate,
    paired_relative_change,
)

__all__ = [
    "HEADLINES",
    "Headline",
    "HeadlineValue",
    "IdleUse",
    "best_baseline",
    "compute_headlines",
]


@dataclass(frozen=True)
class Headline:
    """A paired relative change of the average JCT: subject / reference − 1, per seed."""

    key: str
    title: str
    subject: str
    reference: str | None
    """The reference label; None: the best baseline of the workload (:func:`best_baseline`)."""
    targets: Mapping[str, float]
    """Target per workload family; ``"*"`` stands for every family not named."""
    at_most: bool = True
    """True: the change must be at most the target (−0.05: at least 5 % lower); False: at
    least the target (+0.05: removing something must cost at least 5 %)."""

    def target(self, family: str) -> float | None:
        """The family's target (None: none)."""
        return self.targets.get(family, self.targets.get("*"))

    def met(self, family: str, est: Estimate) -> bool | None:
        """Whether the mean reaches the family's target (None: no target or no estimate)."""
        target = self.target(family)
        if target is None or not math.isfinite(est.mean):
            return None
        return est.mean <= target if self.at_most else est.mean >= target


HEADLINES: Final[tuple[Headline, ...]] = (
    Headline(
        "learned_vs_best",
        "learned vs best heuristic",
        "learned",
        None,
        {"tpch": -0.05, "tpch-like": -0.05, "*": 0.0},
    ),
    Headline(
        "lookahead_vs_base",
        "lookahead vs its base",
        "lookahead",
        "lookahead-base",
        {"tpch": -0.10, "tpch-like": -0.10},
    ),
    Headline(
        "idle_vs_no_idle",
        "with idle vs without idle",
        "learned",
        "learned-no-idle",
        {"bursty": -0.05, "*": 0.01},
    ),
    Headline(
        "no_cp_vs_full",
        "without CP/width features vs full",
        "learned-no-cp",
        "learned",
        {"synthetic": 0.05, "tpch": 0.05, "mixed": 0.05},
        at_most=False,
    ),
)
"""Issue 9's targets: the learned policy no worse than the best heuristic anywhere and
≥ 5 % better on TPC-H and tpch-like; the lookahead planner ≥ 10 % better than its base
(name the two ``lookahead`` and ``lookahead-base`` with --schedulers) on TPC-H and tpch-like;
the idle head ≥ 5 % better on bursty and nowhere more than 1 % worse; and (kept from the
idle-slot papers' ablation) removing the CP/width features costs ≥ 5 %."""


@dataclass(frozen=True)
class HeadlineValue:
    """One headline on one workload: the paired change and the label it is relative to."""

    estimate: Estimate
    reference: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the estimate's fields and ``reference``."""
        return {**self.estimate.to_dict(), "reference": self.reference}


def best_baseline(avg_jct: Mapping[str, Sequence[float]], baselines: Sequence[str]) -> str | None:
    """The label among `baselines` (those present) with the lowest mean average JCT."""
    present = [b for b in baselines if b in avg_jct and len(avg_jct[b])]
    if not present:
        return None
    return min(present, key=lambda b: float(np.mean(avg_jct[b])))


def compute_headlines(
    avg_jct: Mapping[str, Sequence[float]],
    confidence: float = 0.95,
    baselines: Sequence[str] | None = None,
) -> dict[str, HeadlineValue]:
    """The headline deltas from per-seed average JCTs by label (same seed order for all).

    A headline without a fixed reference is taken against :func:`best_baseline` among
    `baselines` (default: the labels of :data:`BASELINES`). Only headlines whose two
    labels are both present are returned.
    """
    candidates = [b for b, _ in BASELINES] if baselines is None else list(baselines)
    out = {}
    for h in HEADLINES:
        reference = h.reference or best_baseline(avg_jct, candidates)
        if h.subject in avg_jct and reference is not None and reference in avg_jct:
            est = paired_relative_change(avg_jct[h.subject], avg_jct[reference], confidence)
            out[h.key] = HeadlineValue(est, reference)
    return out


@dataclass(frozen=True)
class IdleUse:
    """How often one scheduler fired deliberate idle slots on one workload, over its seeds."""

    jobs: int
    """Finished jobs, summed over seeds."""
    delayed_jobs: int
    """Of those, the jobs with an idle slot of more than 0 s."""
    seconds: float
    """Idle seconds inserted, summed over seeds."""

    @classmethod
    def of(cls, result: SchedulerResult) -> IdleUse:
        """Count `result`'s per-job idle arrays (all seeds)."""
        return cls(
            jobs=int(sum(a.size for a in result.idle)),
            delayed_jobs=int(sum(int((a > 0).sum()) for a in result.idle)),
            seconds=float(sum(float(a.sum()) for a in result.idle)),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"jobs": self.jobs, "delayed_jobs": self.delayed_jobs, "seconds": self.seconds}
