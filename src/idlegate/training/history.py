"""Training on a cluster's own history: what names it, and the workload of its train part.

``idlegate train --preset cluster --history HISTORY`` turns the file into a
`HistorySource` (read once: its hash, size, span and pool) and the settings of
`history_settings`: the `history` section of the training config, and the history's
train part (`sim.history.split_history`) replayed at its recorded arrivals on its pool as
the training workload, which validation then replays too. ``idlegate advise`` reports on
the rest of the history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from idlegate.config import Config
from idlegate.errors import IdlegateError
from idlegate.sim.history import history_facts

__all__ = ["HistorySource", "history_settings", "history_source"]


class HistorySource(Config):
    """The cluster history a policy is trained on (`--history`), as it was when read.

    The facts are kept in checkpoints and in the exported model's metadata
    (``idlegate.history``), so a model names the history it learned from; a resumed run
    whose file changed since is refused (its sha256 differs).
    """

    path: str
    """The history file (`sim.history`)."""
    train_fraction: float = Field(0.7, gt=0, lt=1)
    """Train on the workflows of the first train_fraction of the recorded span; `idlegate
    advise` reports on the rest."""
    pool_size: int = Field(ge=1)
    """Executors of the replayed pool (the history's recorded poolSize unless given)."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """SHA-256 of the file's bytes."""
    workflows: int = Field(ge=1)
    """Workflows in the whole file."""
    span_seconds: float = Field(ge=0)
    """Seconds from its first recorded arrival to its last."""


def history_source(
    path: str | Path, train_fraction: float = 0.7, pool_size: int | None = None
) -> HistorySource:
    """The `HistorySource` of the history file at `path` (read now: its hash, size, span)."""
    facts = history_facts(path)
    pool = pool_size if pool_size is not None else facts.pool_size
    if pool is None:
        raise IdlegateError(
            f"{path} records no poolSize, so the pool to replay it on is unknown; give it "
            "with --executors N (the executors the operator's --pool-size allowed)"
        )
    return HistorySource(
        path=str(path),
        train_fraction=train_fraction,
        pool_size=pool,
        sha256=facts.sha256,
        workflows=facts.workflows,
        span_seconds=facts.span_seconds,
    )


def history_settings(source: HistorySource) -> dict[str, Any]:
    """The training settings of a history: its `history` section and the workload of its
    train part (validation then replays the same part)."""
    options = {
        "path": source.path,
        "part": "train",
        "train_fraction": source.train_fraction,
        "num_executors": source.pool_size,
        "arrival": "recorded",
    }
    return {
        "history": source.model_dump(),
        "workload": {"name": "file", "options": options},
    }
