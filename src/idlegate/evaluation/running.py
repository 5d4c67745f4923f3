"""Running an evaluation: every case's comparison (paired over seeds), its headlines, the
sweep and the training curve, gathered in one :class:`Evaluation`.

Runs are independent pure functions of (workload, scheduler, seed); with ``jobs > 1``
they are spread over processes, or over Ray with ``--ray``, and the results depend on
neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from idlegate import __version__
from idlegate.evaluation.comparison import (
    CompareConfig,
    Comparison,
    SchedulerResult,
    run_comparison,
)
from idlegate.evaluation.headlines import HeadlineValue, IdleUse, compute_headlines
from idlegate.evaluation.pool import ProgressFn, open_runs_pool
from idlegate.evaluation.suites import (
    SWEEP_REFERENCE,
    EvaluateConfig,
    WorkloadCase,
    check_model,
    select_cases,
    suite_cases,
)
from idlegate.evaluation.sweep import SweepResult, run_idle_sweep, sweep_config, sweep_tasks
from idlegate.evaluation.training_log import TrainingCurve, read_training_log
from idlegate.parallel import TaskPool
from idlegate.policy import SchedulerSpec

__all__ = ["CaseResult", "Evaluation", "model_info", "planned_runs", "run_evaluation"]


@dataclass(frozen=True)
class CaseResult:
    """One workload's outcome: its comparison, or why it was skipped."""

    case: WorkloadCase
    comparison: Comparison | None
    headlines: Mapping[str, HeadlineValue] = field(default_factory=dict)

    @property
    def skipped(self) -> bool:
        return self.comparison is None

    @property
    def idle(self) -> dict[str, IdleUse]:
        """Idle slots fired per scheduler label (empty when skipped)."""
        if self.comparison is None:
            return {}
        return {r.name: IdleUse.of(r) for r in self.comparison.results}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the full per-job data is in ``<key>/compare.json``)."""
        out: dict[str, Any] = {
            "key": self.case.key,
            "title": self.case.title,
            "family": self.case.family,
            "workload": self.case.workload,
            "options": self.case.options.to_kwargs(),
            "skipped": self.case.skip_reason,
        }
        if self.comparison is not None:
            cmp = self.comparison
            out["num_executors"] = cmp.num_executors
            out["setting"] = None if cmp.setting is None else cmp.setting.to_dict()
            out["baseline"] = cmp.config.baseline_name
            out["best"] = cmp.best.name
            out["schedulers"] = {r.name: _scheduler_summary(r) for r in cmp.results}
            out["headlines"] = {k: v.to_dict() for k, v in self.headlines.items()}
            out["idle"] = {k: v.to_dict() for k, v in self.idle.items()}
        return out


def _scheduler_summary(r: SchedulerResult) -> dict[str, Any]:
    """A scheduler's row of a workload in evaluation.json (a portfolio's with the share of
    the run each candidate was followed, mean over seeds: `SchedulerResult.shares`)."""
    out: dict[str, Any] = {
        "summary": {k: v.to_dict() for k, v in r.summary.items()},
        "avg_jct_vs_baseline": r.vs_baseline.to_dict(),
        "avg_jct_per_seed": [m.to_dict()["avg_jct"] for m in r.runs],
    }
    if r.shares is not None:
        out["followed"] = r.shares
    return out


@dataclass(frozen=True)
class Evaluation:
    """Everything `idlegate evaluate` measured."""

    config: EvaluateConfig
    models: Mapping[str, Mapping[str, str]]
    """ONNX metadata by model label."""
    cases: tuple[CaseResult, ...]
    sweep: SweepResult | None
    training: TrainingCurve | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (deterministic: no wall-clock data)."""
        return {
            "idlegate_version": __version__,
            "config": self.config.to_dict(),
            "models": {k: model_info(v) for k, v in self.models.items()},
            "workloads": [c.to_dict() for c in self.cases],
            "idle_sweep": None if self.sweep is None else self.sweep.to_dict(),
            "training_curve": None if self.training is None else self.training.to_dict(),
        }


def model_info(meta: Mapping[str, str]) -> dict[str, Any]:
    """The metadata that tells the models apart (ablation switches, G, r, hashes)."""

    def flag(key: str) -> bool | None:
        value = meta.get(f"idlegate.ablation.{key}")
        return None if value is None else value == "true"

    return {
        "idle_head": flag("idle_head"),
        "cp_features": flag("cp_features"),
        "idle_levels": meta.get("idlegate.idle_levels"),
        "idle_ratio": meta.get("idlegate.idle_ratio"),
        "config_hash": meta.get("idlegate.config_hash"),
        "training_config_hash": meta.get("idlegate.training_config_hash"),
    }


def _case_headlines(cmp: Comparison, confidence: float) -> dict[str, HeadlineValue]:
    per_label = {r.name: [m.avg_jct for m in r.runs] for r in cmp.results}
    return compute_headlines(per_label, confidence)


def planned_runs(config: EvaluateConfig, cases: Sequence[WorkloadCase], sweep_n: int) -> int:
    per_case = len(config.entries()) * len(config.seed_list)
    return per_case * sum(c.skip_reason is None for c in cases) + sweep_n


def _sweep_entries(
    config: EvaluateConfig, models: Mapping[str, Mapping[str, str]]
) -> list[SchedulerSpec]:
    """The models with an idle head, then the analytic reference."""
    idle = [m for m in config.models if model_info(models[m.title])["idle_head"]]
    return [*idle, SchedulerSpec.parse("=".join(SWEEP_REFERENCE))]


def run_evaluation(
    config: EvaluateConfig, progress: ProgressFn | None = None, pool: TaskPool | None = None
) -> Evaluation:
    """Run the suite's workloads (paired over seeds), the sweep and read the training log.

    `progress(done, total, what)` is called after each of the simulated runs. The runs
    go to `pool` (local processes or Ray, `open_runs_pool`) if given, else to one pool
    of ``config.jobs`` local processes shared by every case and the sweep.
    """
    if pool is None:
        with open_runs_pool(config.jobs) as local:
            return run_evaluation(config, progress, local)
    models = {m.title: check_model(m) for m in config.models}
    training = read_training_log(config.training_log) if config.training_log else None
    cases = select_cases(
        suite_cases(config.suite, config.tpch_dir, config.alibaba_dir), config.workloads
    )
    seeds = config.seed_list
    sweep_cfg = sweep_config(config.suite)
    sweep_entries = _sweep_entries(config, models) if config.sweep else []
    sweep_n = len(sweep_tasks(sweep_cfg, sweep_entries, seeds)) if sweep_entries else 0
    total = planned_runs(config, cases, sweep_n)
    offset = 0

    def shifted(done: int, _total: int, what: str) -> None:
        if progress is not None:
            progress(offset + done, total, what)

    results = []
    for case in cases:
        if case.skip_reason is not None:
            results.append(CaseResult(case, None))
            continue
        cmp_config = CompareConfig(
            workload=case.workload,
            schedulers=config.entries(),
            seeds=len(seeds),
            first_seed=seeds[0],
            baseline="fair",
            options=case.options,
            jobs=config.jobs,
            confidence=config.confidence,
        )
        cmp = run_comparison(
            cmp_config,
            lambda d, t, name, seed, k=case.key: shifted(d, t, f"{k}: {name} {seed}"),
            pool,
        )
        offset += len(cmp_config.schedulers) * len(seeds)
        results.append(CaseResult(case, cmp, _case_headlines(cmp, config.confidence)))
    sweep = None
    if sweep_entries:
        sweep = run_idle_sweep(
            sweep_cfg, sweep_entries, seeds, config.jobs, shifted, config.confidence, pool
        )
    return Evaluation(config, models, tuple(results), sweep, training)
