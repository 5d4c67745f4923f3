"""Reading a training CSV (validation average JCT per iteration) for the report's curve."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from idlegate.errors import IdlegateError
from idlegate.textfiles import read_text

__all__ = ["TrainingCurve", "read_training_log"]


@dataclass(frozen=True)
class TrainingCurve:
    """Validation average JCT per iteration from a training CSV, and reference lines."""

    path: Path
    iteration_column: str
    value_column: str
    iterations: tuple[float, ...]
    values: tuple[float, ...]
    references: Mapping[str, float]
    """Constant reference JCTs by scheduler (``ref_<name>`` columns)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "path": str(self.path),
            "iteration_column": self.iteration_column,
            "value_column": self.value_column,
            "iterations": list(self.iterations),
            "values": list(self.values),
            "references": dict(self.references),
        }


_ITERATION_COLUMNS: Final = ("iteration", "iter", "step", "epoch", "update")
_VALUE_COLUMNS: Final = ("val_avg_jct", "validation_avg_jct", "valid_avg_jct", "val_jct")


def _number(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else math.nan
    except ValueError:
        return math.nan


def read_training_log(path: str | Path) -> TrainingCurve:
    """Read a training CSV defensively: an iteration column and a validation-JCT column.

    The iteration column is the first of iteration/iter/step/epoch/update; the value
    column is val_avg_jct (or the first column naming both "val" and "jct"); rows with
    no value are skipped (validation runs every few iterations); ``ref_<scheduler>``
    columns become reference lines.
    """
    p = Path(path)
    text = read_text(p, "training log", "give the train_log.csv idlegate train writes")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in reader.fieldnames or []]
    rows = [{(k or "").strip(): v for k, v in r.items()} for r in reader]
    lower = {h.lower(): h for h in header}
    it_col = next((lower[c] for c in _ITERATION_COLUMNS if c in lower), None)
    val_col = next((lower[c] for c in _VALUE_COLUMNS if c in lower), None)
    if val_col is None:
        val_col = next((h for h in header if "val" in h.lower() and "jct" in h.lower()), None)
    if it_col is None or val_col is None:
        raise IdlegateError(
            f"training log {p} needs an iteration column and a validation JCT column "
            f"(e.g. iteration, val_avg_jct); it has: {', '.join(header) or 'no header'}"
        )
    its, vals = [], []
    for i, r in enumerate(rows):
        v = _number(r.get(val_col))
        if math.isfinite(v):
            it = _number(r.get(it_col))
            its.append(it if math.isfinite(it) else float(i))
            vals.append(v)
    refs = {}
    for h in header:
        if h.lower().startswith("ref_"):
            xs = [_number(r.get(h)) for r in rows]
            finite = [x for x in xs if math.isfinite(x)]
            if finite:
                refs[h[4:]] = finite[-1]
    return TrainingCurve(p, it_col, val_col, tuple(its), tuple(vals), refs)
