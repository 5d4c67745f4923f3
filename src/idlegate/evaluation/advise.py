"""`idlegate advise HISTORY`: what the cluster's own history says it should run.

The history (`sim.history`) is replayed in the simulator with its recorded arrivals and
measured task durations on its recorded pool size, once per candidate: the heuristics,
the shipped policy (`learned:default`), `default` (what the operator runs without
``--scheduler``: the portfolio, which replays its own recent workflows as it goes, so its
row is the slowest to compute), the policy the cluster ran (the history's `policy` key)
and, if given, a policy trained on this history. It is a `comparison` of the `file`
workload, so every candidate replays the same arrivals and the same duration draws per
seed; the seeds resample the measured durations, and each candidate's change against
what the cluster ran is paired per seed.

A time split keeps it honest: the report covers only the workflows that arrived after
the first `train_fraction` of the recorded span (`sim.history.split_history`), the part
a policy trained with ``idlegate train --preset cluster`` never saw. The replay of that
part starts from an empty cluster.

The recommendation moves off what the cluster ran only when a candidate is better with
the report's confidence: the upper end of its paired interval is below 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import ConfigDict, Field

from idlegate.config import Config, Flag
from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import (
    CompareConfig,
    Comparison,
    ProgressCallback,
    SchedulerResult,
    Schedulers,
    WorkloadOptions,
    build,
    parse_list,
    run_comparison,
)
from idlegate.parallel import TaskPool
from idlegate.policy import DEFAULT_SCHEDULER, SchedulerSpec, model_files
from idlegate.policy.portfolio import RULES
from idlegate.sim.history import (
    HistoryFacts,
    HistoryWorkflow,
    check_history_file,
    history_facts,
    load_history,
    most_recorded,
    require_arrivals,
    split_history,
)
from idlegate.sim.metrics import Estimate, mean_ci
from idlegate.sim.resources import ResourceVector

__all__ = [
    "Advice",
    "AdviseConfig",
    "Recommendation",
    "history_meta",
    "run_advise",
]

SHIPPED = SchedulerSpec("learned", "default")
"""The policy shipped in the package."""
TRAINED_LABEL = "trained"
"""The row of the policy given with --policy (trained on this history)."""


class AdviseConfig(Config):
    """How `idlegate advise` replays a history and what it compares."""

    model_config = ConfigDict(title="the advice")

    pool_size: Annotated[int | None, Flag("--pool-size", "-k")] = Field(None, ge=1)
    """Executors of the replayed pool (default: the poolSize the history records)."""
    pool_resources: ResourceVector | None = None
    """The replayed pool's resources beyond its pods, e.g. cpu=24,memory=96Gi (the
    operator's --pool-resources): the workflows' recorded requests count against them
    (docs/resources.md). Unset: a pods-only pool."""
    queues: Path | None = None
    """A YAML file of the replayed pool's queues (docs/queues.md): each workflow replays in
    the queue its record's queueName names. Unset: one queue."""
    train_fraction: float = Field(0.7, ge=0, lt=1)
    """Report on the workflows after this fraction of the recorded span (the part a policy
    trained with `idlegate train --preset cluster` never saw); 0: the whole history."""
    policy: Path | None = None
    """An ONNX policy trained on this history (idlegate train --preset cluster --history),
    compared as the row 'trained'."""
    cluster_policy: SchedulerSpec | None = None
    """What the cluster ran, the reference of the change column (default: the policy the
    history records, else default)."""
    heuristics: Schedulers = Field(parse_list(",".join(RULES)), validate_default=True)
    """The heuristics compared, comma-separated scheduler specs."""
    seeds: int = Field(10, ge=2)
    """Duration seeds: each resamples the measured task durations (paired runs)."""
    first_seed: int = Field(0, ge=0)
    """First seed."""
    jobs: Annotated[int, Flag("-j")] = Field(1, ge=1)
    """Worker processes (1: run in this process)."""
    confidence: float = Field(0.95, gt=0, lt=1)
    """Confidence level of the intervals."""


@dataclass(frozen=True)
class Recommendation:
    """The one-line answer: what to run, and its expected change against the cluster's."""

    scheduler: str
    """The row to run (the cluster's own when nothing is better with confidence)."""
    switch: bool
    """True: a candidate is better than what the cluster ran with the report's confidence."""
    best: str
    """The candidate with the lowest average JCT other than what the cluster ran."""
    change: Estimate
    """`best`'s paired change of the average JCT against what the cluster ran."""
    text: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "scheduler": self.scheduler,
            "switch": self.switch,
            "best_candidate": self.best,
            "avg_jct_change": self.change.to_dict(),
            "text": self.text,
        }


@dataclass(frozen=True, eq=False)
class Advice:
    """The outcome of `run_advise`: the replay's comparison and what it says."""

    path: Path
    facts: HistoryFacts
    config: AdviseConfig
    comparison: Comparison
    reported: tuple[HistoryWorkflow, ...]
    """The workflows the report covers (the test part, or all), in arrival order."""
    train_workflows: int
    """Workflows of the train part left out of the report (0 without a split)."""
    pool_size: int
    cluster: str
    """The row of what the cluster ran (the reference of the change column)."""
    cluster_source: str
    """Where `cluster` came from: given, recorded, or the default."""
    arrivals: np.ndarray
    """Replay arrival time of each reported job (seconds from the part's first arrival)."""
    recommendation: Recommendation
    notes: tuple[str, ...]
    """Caveats a reader needs (failed workflows, a policy trained on reported data, ...)."""

    @property
    def recorded_jct(self) -> np.ndarray:
        """The JCTs the cluster recorded for the reported workflows that succeeded."""
        ok = [w.jct for w in self.reported if w.jct is not None and w.outcome != "Failed"]
        return np.asarray(ok, dtype=float)

    @property
    def part(self) -> str:
        """What the report covers, in words."""
        if self.train_workflows == 0:
            return "the whole history"
        return f"the last {(1 - self.config.train_fraction) * 100:.0f} % of the history's span"

    def max_jct(self, result: SchedulerResult) -> Estimate:
        """Mean ± CI over seeds of each run's largest JCT."""
        return mean_ci([r.max_jct for r in result.runs], self.config.confidence)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (deterministic: no wall-clock data)."""
        recorded = self.recorded_jct
        return {
            "history": {"path": str(self.path), **self.facts.to_dict()},
            "train_fraction": self.config.train_fraction,
            "reported_workflows": len(self.reported),
            "train_workflows": self.train_workflows,
            "pool_size": self.pool_size,
            "cluster_policy": {"row": self.cluster, "source": self.cluster_source},
            "recorded": _recorded_dict(recorded),
            "max_jct": {r.name: self.max_jct(r).to_dict() for r in self.comparison.results},
            "recommendation": self.recommendation.to_dict(),
            "notes": list(self.notes),
            "comparison": self.comparison.to_dict(include_jct=False),
        }


def _recorded_dict(jct: np.ndarray) -> dict[str, Any] | None:
    if jct.size == 0:
        return None
    return {
        "workflows": int(jct.size),
        "avg_jct": float(jct.mean()),
        "p95_jct": float(np.percentile(jct, 95)),
        "max_jct": float(jct.max()),
    }


def history_meta(path: Path) -> dict[str, Any] | None:
    """The history an exported policy was trained on (its `idlegate.history` metadata;
    None if it names none)."""
    from idlegate.policy.onnx_runtime import open_session

    remedy = "give the policy.onnx written by idlegate train --preset cluster --history"
    _, meta = open_session(path, threads=1, what="policy", remedy=remedy)
    text = meta.get("idlegate.history")
    return json.loads(text) if text else None


def run_advise(
    path: str | Path,
    config: AdviseConfig,
    progress: ProgressCallback | None = None,
    pool: TaskPool | None = None,
) -> Advice:
    """Replay the history at `path` under every candidate (module docstring) and advise.

    The runs go to `pool` if given, else to ``config.jobs`` local processes.
    """
    p = Path(path)
    check_history_file(p)
    facts = history_facts(p)
    workflows = load_history(p)
    require_arrivals(workflows)
    if config.train_fraction > 0:
        train, reported = split_history(workflows, config.train_fraction)
    else:
        train, reported = [], list(workflows)
    pool_size = _pool_size(config, reported, p)
    cluster, source = _cluster_policy(config, reported)
    schedulers = _candidates(config, cluster)
    options = {"arrival": "recorded"}
    if train:
        options |= {"part": "test", "train_fraction": config.train_fraction}
    compare = CompareConfig(
        workload="file",
        schedulers=schedulers,
        seeds=config.seeds,
        first_seed=config.first_seed,
        baseline=cluster.title,
        options=WorkloadOptions(
            num_executors=pool_size,
            path=p,
            extra=options,
            resources=config.pool_resources,
            queues=config.queues,
        ),
        jobs=config.jobs,
        confidence=config.confidence,
    )
    cmp = run_comparison(compare, progress, pool)
    replay = build("file", config.first_seed, compare.options)
    arrivals = np.asarray([j.time for j in replay.jobs], dtype=float)
    notes = _notes(config, facts, reported, cluster.title, source)
    return Advice(
        path=p,
        facts=facts,
        config=config,
        comparison=cmp,
        reported=tuple(sorted(reported, key=lambda w: w.arrival or 0.0)),
        train_workflows=len(train),
        pool_size=pool_size,
        cluster=cluster.title,
        cluster_source=source,
        arrivals=arrivals,
        recommendation=recommend(cmp, len(reported)),
        notes=notes,
    )


def _pool_size(config: AdviseConfig, reported: Sequence[HistoryWorkflow], path: Path) -> int:
    if config.pool_size is not None:
        return config.pool_size
    recorded = most_recorded([w.pool_size for w in reported])
    if recorded is None:
        raise IdlegateError(
            f"{path} records no poolSize for the workflows to report on, so the pool to "
            "replay them on is unknown; give it with --pool-size N (the executors the "
            "operator's --pool-size allowed)"
        )
    return int(recorded)


def _cluster_policy(
    config: AdviseConfig, reported: Sequence[HistoryWorkflow]
) -> tuple[SchedulerSpec, str]:
    """What the cluster ran, and where that came from."""
    if config.cluster_policy is not None:
        return config.cluster_policy, "given"
    recorded = most_recorded([w.policy for w in reported])
    if recorded is None:
        return SchedulerSpec("default"), "not recorded; default, what the operator runs"
    try:
        spec = SchedulerSpec.parse(recorded)
    except IdlegateError:
        raise IdlegateError(
            f"the history records policy {recorded!r}, which is not a scheduler spec (an "
            "older operator recorded a learned policy by its file's name, model for "
            "learned:/m/model.onnx); name what the cluster ran with --cluster-policy SPEC"
        ) from None
    missing = [f for f in model_files(spec) if not f.is_file()]
    if missing:
        raise IdlegateError(
            f"the history records that the cluster ran {recorded}, whose model file "
            f"{missing[0]} is not on this machine; give what the cluster ran with "
            "--cluster-policy SPEC (e.g. learned:PATH.onnx with the model's path here)"
        )
    return spec, "recorded"


def _candidates(config: AdviseConfig, cluster: SchedulerSpec) -> tuple[SchedulerSpec, ...]:
    """The heuristics, the shipped policy, default, the cluster's, the trained one: each
    once (by its row title)."""
    specs: list[SchedulerSpec] = [*config.heuristics, SHIPPED, SchedulerSpec("default")]
    specs.append(cluster)
    if config.policy is not None:
        if not config.policy.is_file():
            raise IdlegateError(
                f"--policy {config.policy} does not exist; give the policy.onnx written by "
                "idlegate train --preset cluster --history HISTORY"
            )
        specs.append(SchedulerSpec.parse(f"{TRAINED_LABEL}=learned:{config.policy}"))
    out: dict[str, SchedulerSpec] = {}
    for s in specs:
        out.setdefault(s.title, s)
    return tuple(out.values())


def _notes(
    config: AdviseConfig,
    facts: HistoryFacts,
    reported: Sequence[HistoryWorkflow],
    cluster: str,
    source: str,
) -> tuple[str, ...]:
    notes = []
    if source != "recorded":
        notes.append(f"what the cluster ran: {cluster} ({source})")
    notes.append(
        f"default is what the operator runs without --scheduler: {DEFAULT_SCHEDULER}, which "
        "follows the best of its candidates on replays of its recent workflows (docs/brain.md)"
    )
    failed = sum(w.outcome == "Failed" for w in reported)
    if failed:
        notes.append(
            f"{failed} failed workflow(s) are replayed as if they succeeded; the recorded "
            "row leaves them out"
        )
    if config.policy is not None:
        notes.append(_trained_note(config, facts))
    return tuple(notes)


def _trained_note(config: AdviseConfig, facts: HistoryFacts) -> str:
    """Whether the policy given was trained on this history, and on which part of it."""
    meta = history_meta(config.policy) if config.policy is not None else None
    if meta is None:
        return f"{TRAINED_LABEL} ({config.policy}) names no training history in its metadata"
    if meta.get("sha256") != facts.sha256:
        return (
            f"{TRAINED_LABEL} ({config.policy}) was trained on another history "
            f"(sha256 {str(meta.get('sha256'))[:12]}..., {meta.get('workflows')} workflows)"
        )
    trained = float(meta.get("train_fraction", 1.0))
    if config.train_fraction == 0 or trained > config.train_fraction:
        return (
            f"{TRAINED_LABEL} was trained on the first {trained * 100:.0f} % of this history's span, "
            "part of what this report covers: its row is optimistic"
        )
    return f"{TRAINED_LABEL} was trained on the first {trained * 100:.0f} % of this history's span"


def recommend(cmp: Comparison, workflows: int) -> Recommendation:
    """The one-line recommendation of a comparison whose baseline is what the cluster ran."""
    base = cmp.baseline
    others = [r for r in cmp.results if not r.is_baseline]
    best = min(others, key=lambda r: r.summary["avg_jct"].mean)
    change = best.vs_baseline
    pct = round(cmp.config.confidence * 100)
    interval = _interval(change)
    where = f"{cmp.config.seeds} duration seeds, {workflows} workflows replayed"
    if math.isfinite(change.high) and change.high < 0:
        text = (
            f"Recommendation: switch from {base.name} to {best.name}: expected average JCT "
            f"change {change.mean * 100:+.1f} % ({pct} % CI {interval}; {where})."
        )
        return Recommendation(best.name, True, best.name, change, text)
    text = (
        f"Recommendation: keep {base.name}: no candidate lowers the average JCT with {pct} % "
        f"confidence (the best, {best.name}: {change.mean * 100:+.1f} %, {pct} % CI "
        f"{interval}; {where})."
    )
    return Recommendation(base.name, False, best.name, change, text)


def _interval(est: Estimate) -> str:
    if not (math.isfinite(est.low) and math.isfinite(est.high)):
        return "undefined"
    return f"{est.low * 100:+.1f} to {est.high * 100:+.1f} %"
