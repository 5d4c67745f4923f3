"""What finished Argo workflows teach the estimates of their templates' next runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from idlegate.errors import SpecError
from idlegate.sim.external import DurationHistory
from idlegate.sim.history.files import load_history
from idlegate.sim.history.records import HistoryWorkflow
from idlegate.sim.history.sources import argo_history


class ArgoLearning:
    """What finished Argo workflows teach the estimates of their templates' next runs
    (the operator's, which starts from its history sink's records)."""

    def __init__(self, keep: int = 50) -> None:
        self.durations = DurationHistory(keep)
        """The estimates' history lookup (`map_workflow(durations=...)`)."""
        self.learned: set[str] = set()
        """The uids of the finished workflows looked at, each once: learned from, or not
        mapped (which a later look would not change)."""

    def load(self, path: Path) -> None:
        """Learn from the Argo records of the history file `path` (if it exists)."""
        if path.exists():
            self.durations = argo_durations(load_history(path), self.durations.keep)

    def learn(
        self, obj: Mapping[str, Any], objects: Sequence[Any] = (), **record: Any
    ) -> HistoryWorkflow | None:
        """The record of the finished Workflow `obj` (`argo_history` with `objects` and
        `record`'s keywords, `ran` among them) if it was not learned from yet, its run
        times learned now; None for one looked at before, not finished, or that does not
        map."""
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        try:
            found = argo_history(obj, objects, **record)
        except SpecError:
            self.learned.add(uid)
            return None
        if found is None or uid in self.learned:
            return None
        self.learned.add(uid)
        stages = (s.name for s in found.spec.stages)
        self.durations.add(found.template or "", stages, found.measured)
        return found


def argo_durations(workflows: Sequence[HistoryWorkflow], keep: int = 50) -> DurationHistory:
    """The Argo estimates' history lookup (`DurationHistory`) from the records of
    `workflows` that name a template; the others are not Argo's."""
    history = DurationHistory(keep)
    for w in workflows:
        if w.template is not None:
            history.add(w.template, (s.name for s in w.spec.stages), w.measured)
    return history
