"""What a training run reports: train_log.csv (one row per iteration) and the console's
progress bars.

The CSV's columns are :data:`CSV_FIELDS`, then one constant ``ref_<scheduler>`` column per
reference heuristic; a resumed run keeps the rows up to its checkpoint's iteration.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

CSV_FIELDS: tuple[str, ...] = (
    "iteration",
    "wall_seconds",
    "mean_return",
    "mean_decisions",
    "entropy",
    "entropy_weight",
    "loss",
    "grad_norm",
    "explained_variance",
    "approx_kl",
    "clip_fraction",
    "update_steps",
    "idle_fraction",
    "wait_fraction",
    "episode_mean_seconds",
    "max_time",
    "rollout_seconds",
    "update_seconds",
    "val_avg_jct",
)
"""Columns of train_log.csv; `ref_<scheduler>` columns (constant) follow them."""


@dataclass
class IterationStats:
    """One row of the training log (NaN: not measured this iteration)."""

    iteration: int
    wall_seconds: float
    mean_return: float = math.nan
    mean_decisions: float = math.nan
    entropy: float = math.nan
    entropy_weight: float = math.nan
    loss: float = math.nan
    grad_norm: float = math.nan
    explained_variance: float = math.nan
    approx_kl: float = math.nan
    """PPO: KL(π_old ‖ π) estimated on the last minibatch before its step."""
    clip_fraction: float = math.nan
    """PPO: share of that minibatch's ratios outside 1 ± clip."""
    update_steps: float = math.nan
    """Optimizer steps this iteration (REINFORCE: 1; PPO: fewer on a KL early stop)."""
    idle_fraction: float = math.nan
    wait_fraction: float = math.nan
    episode_mean_seconds: float = math.nan
    max_time: float = math.nan
    rollout_seconds: float = math.nan
    update_seconds: float = math.nan
    val_avg_jct: float = math.nan


class TrainLog:
    """train_log.csv: one row per iteration, reference JCT columns appended."""

    def __init__(self, path: Path, references: dict[str, float], keep_until: int | None) -> None:
        self.path = path
        self.refs = references
        self.fields = [*CSV_FIELDS, *(f"ref_{k}" for k in references)]
        rows: list[dict[str, str]] = []
        if keep_until is not None and path.exists():
            with path.open(newline="") as f:
                rows = [r for r in csv.DictReader(f) if int(r["iteration"]) <= keep_until]
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.fields)
            writer.writeheader()
            writer.writerows({k: r.get(k, "") for k in self.fields} for r in rows)

    def append(self, stats: IterationStats) -> None:
        row: dict[str, Any] = {}
        for k, v in asdict(stats).items():
            row[k] = "" if isinstance(v, float) and math.isnan(v) else _fmt(v)
        row.update({f"ref_{k}": _fmt(v) for k, v in self.refs.items()})
        with self.path.open("a", newline="") as f:
            csv.DictWriter(f, fieldnames=self.fields).writerow(row)


def _fmt(v: Any) -> Any:
    return f"{v:.6g}" if isinstance(v, float) else v


def say(console: Console, text: str) -> None:
    """One line of a run's report on `console`, as written (no markup highlighting, no
    wrapping)."""
    console.print(text, highlight=False, soft_wrap=True)
