"""The portfolio's prior: what to follow before the cluster's own replays can tell.

`prior.json` (shipped with the package, written by `benchmarks/brain_prior.py` on tuning
seeds) holds, per workload of the evaluation suite, the features of its workflows
(`workload_features`) and each fixed candidate's loss against the workload's best on
short streams: the mean over the seeds and the worst seed. The scheduler looks the
workflows that have arrived up in it (`Prior.safest`): among the `NEIGHBOURS` workloads
nearest by their features (`distance`, where the pool's size weighs `POOL_WEIGHT`;
within `REACH`, or if none is, within it once the workflows' mean features are taken
their standard error nearer: `features_error`; and within `ALIKE` times the nearest
one's distance), the candidate whose worst loss over all of them is
the smallest, so a lookup that lands on the wrong one of two alike workloads
still picks a candidate that is safe on both.

**How far it trusts itself** (`Prior.reach`, `REACH` unless the file gives one). The
reach is checked on the prior's own streams (`benchmarks/brain_prior.py` prints, per
workload, the share of its lookups at 4 to 64 arrivals, every tuning seed, whose distance
to their own workload's features, less their standard error, is within it). Workflows
farther than that from every workload are unlike any the prior knows: its pick for the
nearest would be a guess, so the scheduler follows the candidate safest over *every*
workload the prior knows (`Prior.safest_overall`: the smallest worst-seed loss over all
of them).

**A learned candidate's range** (`TrainedRange`). The prior also keeps the features of
the streams the shipped ONNX policy was trained on (the workloads its metadata names,
``idlegate.trained_on``): per feature the lowest and highest. A window whose features lie
outside that box (by more than their standard error) is outside what the policy was
trained on, and the portfolio does not follow it there.

**A pool of several queues** (`Prior.queues`). A workload's losses hold for the pool
they were measured on, its queues included: through a queue's view a rule's caps and
shares are read against the queue's entitlement (`sim.admission_view`), so `srpt?cap=0.9`,
the safest on one queue of every workload the prior knows, keeps a tenth of each
*queue's* entitlement idle and is not what was measured. An entry measured under queues
says how many (``"queues"`` in the file; absent: one). A lookup on a pool of several
queues weighs only such entries, and one on a pool of one queue only the others, so the
lookups of a pool of one queue are what they were before queued entries existed; a prior
without queued entries answers a pool of queues as one of one queue.

A prior file that cannot be read is no prior: the scheduler warns once and follows
`start` (`load_prior`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Final

from idlegate.sim.dag import Dag

__all__ = [
    "ALIKE",
    "ALIKE_FLOOR",
    "NEIGHBOURS",
    "POOL_WEIGHT",
    "PRIOR_PATH",
    "REACH",
    "Prior",
    "TrainedRange",
    "distance",
    "features_error",
    "load_prior",
    "workflow_features",
    "workload_features",
]

PRIOR_PATH: Final = Path(__file__).resolve().with_name("prior.json")
"""The shipped prior."""
NEIGHBOURS: Final = 3
"""Workloads of the suite a lookup weighs (the nearest ones)."""
REACH: Final = 1.0
"""The largest feature distance at which a workload of the suite counts as alike, when
the prior file has no calibrated one (`Prior.reach`)."""
ALIKE: Final = 3.0
"""… and no more than this many times the nearest one's distance (or `ALIKE_FLOOR`,
whichever is larger): TPC-H's first workflows are 0.23 from the TPC-H workloads and
0.97 from the TPC-H-like one, and counting both chose a candidate 9 % behind fair."""
ALIKE_FLOOR: Final = 0.25
"""The distance within which a workload counts as alike however near the nearest is."""
POOL_WEIGHT: Final = 2.0
"""How much the pool's size counts in a distance, against the workflows' features
(`distance`): a factor of two in executors is 1.39, beyond `REACH`. The pool is known
exactly, and the losses of a workload were measured on its own pool; at weight 1 the first
workflows of `mixed` (50 executors) counted Alibaba's (100 executors) alike in 22 of 70
lookups on the tuning streams, and its start followed Alibaba's candidate."""

log = logging.getLogger(__name__)


def workflow_features(dag: Dag) -> tuple[float, float, float]:
    """One workflow's features, in natural logs: its task count, stage count and mean task
    duration (what `workload_features` averages, and what `arrivals.ArrivalWatch` watches)."""
    tasks = max(sum(dag.tasks), 1)
    return (
        math.log(tasks),
        math.log(max(dag.num_stages, 1)),
        math.log(max(dag.total_work / tasks, 1e-3)),
    )


def distance(a: Sequence[float], b: Sequence[float], error: float = 0.0) -> float:
    """The distance of two `workload_features`: the pool's log size weighs `POOL_WEIGHT`,
    and the workflows' features count less `error` (their standard error,
    `features_error`; never below 0), which widens only what is measured with noise."""
    pool = POOL_WEIGHT * (a[0] - b[0])
    return math.hypot(pool, max(0.0, math.dist(a[1:], b[1:]) - error))


def workload_features(dags: Sequence[Dag], num_executors: int) -> tuple[float, ...]:
    """What a lookup compares, all in natural logs (so distances are ratios): the pool's
    size, and the workflows' mean log task count, stage count and mean task duration
    (`workflow_features`)."""
    if not dags:
        raise ValueError("features need at least one workflow")
    each = [workflow_features(d) for d in dags]
    return (math.log(max(num_executors, 1)), *(sum(f) / len(each) for f in zip(*each, strict=True)))


def features_error(dags: Sequence[Dag]) -> float:
    """The standard error of `workload_features`' workflow means (the distance a lookup
    measures, so the root of the features' summed variances over the count); 0 for one."""
    n = len(dags)
    if n < 2:
        return 0.0
    each = [workflow_features(d) for d in dags]
    total = 0.0
    for values in zip(*each, strict=True):
        mean = sum(values) / n
        total += sum((v - mean) ** 2 for v in values) / (n - 1)
    return math.sqrt(total / n)


@dataclass(frozen=True)
class TrainedRange:
    """The features (`workload_features`) of the streams a learned policy was trained on:
    per feature the lowest and the highest."""

    trained_on: str
    """The policy's ``idlegate.trained_on`` metadata (JSON) the range was measured for."""
    low: tuple[float, ...]
    high: tuple[float, ...]

    def holds(self, features: Sequence[float], error: float = 0.0) -> bool:
        """True if `features` lie within the range, each by `error` (their standard
        error, `features_error`) at most outside it."""
        if len(features) != len(self.low):
            return True  # (features of another kind: no judgement)
        return all(
            lo - error <= f <= hi + error
            for f, lo, hi in zip(features, self.low, self.high, strict=True)
        )


@dataclass(frozen=True)
class Prior:
    """Per workload of the suite: its features and each candidate's (mean, worst) loss;
    the calibrated reach, and the shipped learned policy's range."""

    features: Mapping[str, tuple[float, ...]]
    losses: Mapping[str, Mapping[str, tuple[float, float]]]
    reach: float = REACH
    """The distance within which a workload counts as alike (module docstring)."""
    learned: TrainedRange | None = None
    """The shipped learned policy's range (None: not measured, no judgement)."""
    queues: Mapping[str, int] = field(default_factory=dict)
    """Per workload measured under several queues, how many (absent: one queue)."""

    def of_kind(self, queued: bool = False, among: Collection[str] | None = None) -> list[str]:
        """The workloads (of `among`, default those with losses) a lookup on a pool of
        several queues (`queued`), or of one, weighs: those measured under several queues,
        or under one. A pool of queues with no such entry weighs every workload (as before
        queued entries existed)."""
        names = list(self.losses if among is None else among)
        kind = [w for w in names if (self.queues.get(w, 1) > 1) == queued]
        return kind if kind or not queued else names

    def neighbours(
        self, features: Sequence[float], error: float = 0.0, queued: bool = False
    ) -> list[str]:
        """The `NEIGHBOURS` workloads nearest to `features` (`distance`, the workflows'
        features less `error`) of the kind of the pool (`of_kind`), within the reach and
        within `ALIKE` times the nearest one's distance (at least `ALIKE_FLOOR`)."""
        reach = self.reach
        kind = set(self.of_kind(queued, self.features))
        dist = {
            w: distance(f, features, error)
            for w, f in self.features.items()
            if len(f) == len(features) and w in kind
        }
        near = sorted((d, w) for w, d in dist.items() if d <= reach)
        if not near:
            return []
        alike = max(ALIKE * near[0][0], ALIKE_FLOOR)
        return [w for d, w in near[:NEIGHBOURS] if d <= alike]

    def safest(
        self,
        features: Sequence[float],
        allowed: Collection[str],
        error: float = 0.0,
        queued: bool = False,
    ) -> str | None:
        """The candidate of `allowed` (spec texts) with the smallest worst-seed loss over
        the nearest workloads (`neighbours`; the smallest mean loss among equals), of
        those known on every one of them; None when no workload is near or none is.

        `error` is the standard error of `features` (`features_error`): with none within
        the reach, the workloads within it once the workflows' features are taken `error`
        nearer count (`distance`; the pool's size is exact). A few workflows of a mix of
        kinds (one-task jobs and TPC-H-like DAGs) have a mean far from the mix's, by
        chance, and would otherwise count as like no workload. `queued`: the pool has
        several queues (`of_kind`)."""
        near = self.neighbours(features, 0.0, queued) or self.neighbours(features, error, queued)
        return self._safest_over(near, allowed) if near else None

    def safest_overall(self, allowed: Collection[str], queued: bool = False) -> str | None:
        """The candidate of `allowed` with the smallest worst-seed loss over every workload
        the prior knows of the pool's kind (`of_kind`: what to follow for workflows like
        none of them); None if none is known on all."""
        return self._safest_over(self.of_kind(queued), allowed)

    def _safest_over(self, workloads: Sequence[str], allowed: Collection[str]) -> str | None:
        known = [c for c in allowed if all(c in self.losses[w] for w in workloads)]
        if not known:
            return None

        def risk(c: str) -> tuple[float, float]:
            return (
                max(self.losses[w][c][1] for w in workloads),
                max(self.losses[w][c][0] for w in workloads),
            )

        return min(known, key=risk)


@lru_cache(maxsize=4)
def load_prior(path: Path = PRIOR_PATH) -> Prior | None:
    """The prior of `path`; None (and a warning, once) when it cannot be read."""
    try:
        data = json.loads(path.read_text())
        workloads = data["workloads"]
        features = {w: tuple(float(x) for x in v["features"]) for w, v in workloads.items()}
        losses = {
            w: {c: (float(m), float(x)) for c, (m, x) in v["losses"].items()}
            for w, v in workloads.items()
        }
        queues = {w: int(v["queues"]) for w, v in workloads.items() if "queues" in v}
        reach = float(data.get("reach", REACH))
        learned = data.get("learned")
        trained = None
        if learned is not None:
            low = tuple(float(x) for x in learned["low"])
            high = tuple(float(x) for x in learned["high"])
            trained = TrainedRange(str(learned["trained_on"]), low, high)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning(
            "the portfolio's prior %s cannot be read (%s): it starts from its start "
            "candidate; regenerate it with benchmarks/brain_prior.py",
            path,
            exc,
        )
        return None
    return Prior(features, losses, reach, trained, queues)
