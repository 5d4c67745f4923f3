"""Comparing schedulers and evaluating learned policies (`idlegate compare`, `idlegate evaluate`).

The modules, in the order they import one another (each only imports those above it):

* `pool` — independent runs over a process pool, results in task order;
* `comparison` — `compare`'s config, runs on common random numbers, paired statistics;
* `suites` — `evaluate`'s workload cases, baselines and config;
* `headlines` — issue 9's headline deltas (paired per seed) and idle slots fired;
* `sweep` — the idle-slot papers' Fig. 6 sweep;
* `training_log` — reading a training CSV for the report's curve;
* `running` — one evaluation: every case, its headlines, the sweep, the curve;
* `files`, `plots`, `compare_report`, `evaluation_report` — the files in ``--out``
  (markdown, JSON, PNG);
* `console` — what the two commands print (rich tables, a progress bar on stderr).

This package sits above `idlegate.policy` and `idlegate.sim` and below `idlegate.cli`;
nothing in `sim`, `policy`, `training` or `operator` imports it. The names below are the
ones the CLI and most callers need.
"""

from idlegate.evaluation.compare_report import write_reports
from idlegate.evaluation.comparison import (
    CompareConfig,
    Comparison,
    WorkloadOptions,
    run_comparison,
    run_one,
)
from idlegate.evaluation.evaluation_report import write_evaluation
from idlegate.evaluation.running import Evaluation, run_evaluation
from idlegate.evaluation.suites import EvaluateConfig

__all__ = [
    "CompareConfig",
    "Comparison",
    "EvaluateConfig",
    "Evaluation",
    "WorkloadOptions",
    "run_comparison",
    "run_evaluation",
    "run_one",
    "write_evaluation",
    "write_reports",
]
