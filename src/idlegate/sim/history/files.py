"""History files: checked, read (whole, or the tail of an operator's sink) and written.

`load_history` reads any workflow file (`sim.pod_template.load_workflow_file`) as history records,
Argo Workflows and Airflow DAG exports among them (`sources`); `tail_history` reads the
last records of JSON Lines files others write, tolerantly; `write_history` writes records
in the format `load_history` reads back; `history_facts` names a file for reports.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from idlegate.documents import json_document
from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.airflow import AirflowRefusal, is_airflow
from idlegate.sim.argo import WORKFLOW_KINDS, is_argo
from idlegate.sim.argo.runs import run_documents
from idlegate.sim.history.records import (
    HistoryWorkflow,
    history_record,
    most_recorded,
    parse_record,
    plain_workflow,
)
from idlegate.sim.history.sources import airflow_workflows, argo_workflow
from idlegate.sim.spec import parse_workflow, read_workflow_items
from idlegate.textfiles import make_dirs

log = logging.getLogger(__name__)


def check_history_file(path: str | Path) -> None:
    """IdlegateError, one sentence, unless `path` is a readable file with some content:
    checked before anything else about a command that reads a history, so that a wrong
    path is the first thing reported."""
    p = Path(path)
    hint = "give a history file written by `idlegate history export` or `idlegate history simulate`"
    if not p.exists():
        raise IdlegateError(f"the history file {p} does not exist; {hint}")
    if not p.is_file():
        raise IdlegateError(f"{p} is not a file; {hint}")
    try:
        with p.open("rb") as f:
            empty = not any(chunk.strip() for chunk in iter(lambda: f.read(1 << 16), b""))
    except OSError as exc:
        raise IdlegateError(
            f"cannot read the history file {p} ({exc.strerror or exc}); check its permissions"
        ) from None
    if empty:
        raise IdlegateError(f"the history file {p} is empty, so it records no workflow; {hint}")


def load_history(path: str | Path) -> list[HistoryWorkflow]:
    """The workflows of a history file, in file order (see the module docstring)."""
    out = []
    items = read_workflow_items(path)
    objects = [item.raw for item in items]
    left: list[AirflowRefusal] = []
    for item, run in zip(items, run_documents(objects), strict=True):
        raw, spec = item.raw, item.spec
        if is_argo(raw):  # an Argo Workflow's run, or a template its references use
            if run:
                out.append(argo_workflow(raw, objects, item.source))
            continue
        if is_airflow(raw):  # an Airflow DAG export: its finished runs, else the DAG
            try:
                out.extend(airflow_workflows(raw, item.source))
            except AirflowRefusal as exc:
                # an export of a whole Airflow holds DAGs of sensors or EmptyOperators
                # only: valid for Airflow, so the others replay (lint notes them too)
                if not exc.left_to_airflow:
                    raise
                log.warning("Left out of the history: %s", exc.note())
                left.append(exc)
            continue
        if item.name is None:
            _check_kind(raw, item.source)
        if not isinstance(raw, dict) or not isinstance(spec, dict):
            out.append(plain_workflow(parse_workflow(spec, item.source), item.source))
        else:
            out.append(parse_record(raw, spec, item.name, item.source))
    if left and not out:
        if len(left) == 1:
            raise left[0]
        raise AirflowRefusal(
            left[0].reason,
            f"{path}: none of its {len(left)} Airflow DAGs has a task idlegate schedules (each "
            "is left to Airflow, as the warnings above say); give a file with at least one DAG "
            "idlegate schedules (idlegate lint shows which do)",
        )
    return out


ACCEPTED = (
    "bare workflows (a mapping with a 'stages' list), DagWorkflows (apiVersion: "
    f"idlegate.io/v1alpha1) and Argo's {', '.join(WORKFLOW_KINDS)} (apiVersion: "
    "argoproj.io/v1alpha1) and Airflow DAG exports (a mapping of 'dag' and 'tasks' as "
    "Airflow's REST API gives them: idlegate history airflow --raw)"
)
"""What a workflow file may hold, for the message about a document it may not."""


def _check_kind(raw: Any, source: str) -> None:
    """SpecError for a Kubernetes-style object that is no workflow a file may hold: one of
    another kind, or one with no kind (metadata and spec but no apiVersion and kind), which
    would otherwise be validated as a bare workflow and blamed for lacking `stages`. A
    mapping without `kind`, `apiVersion`, `metadata` or `spec` is left to be validated as a
    bare workflow, whose message says what it lacks."""
    if not isinstance(raw, Mapping) or "stages" in raw:
        return
    kind, api = raw.get("kind"), raw.get("apiVersion")
    if isinstance(kind, str) and kind:
        what = f"is of kind {kind} (apiVersion {api!r}), which is no workflow this file may hold"
    elif any(key in raw for key in ("kind", "apiVersion", "metadata", "spec")):
        what = "has no kind (it looks like a Kubernetes object: metadata or spec, no kind)"
    else:
        return
    raise SpecError(
        f"{source} {what}; a workflow file holds {ACCEPTED}: give the document its "
        "apiVersion and kind, or leave it out"
    )


@dataclass(frozen=True)
class Tail:
    """The last workflows of JSON Lines history files (`tail_history`)."""

    workflows: list[HistoryWorkflow]
    """Oldest first, each with its arrival."""
    skipped: Counter[str]
    """What was left out by reason: ``malformed`` lines, records with ``no arrival``,
    ``unreadable`` files."""


def tail_history(
    files: Sequence[Path], count: int, keep: Callable[[HistoryWorkflow], bool]
) -> Tail:
    """The last `count` workflows that `keep` keeps in the JSON Lines history files
    `files` (oldest first: an operator's sink and its rotated files), read from the end.

    Tolerant, for a reader of files others write (a restarted operator's): a line that is
    not a plain workflow record, a record without an arrival and a file that cannot be
    read are left out, counted by reason and logged, never raised.
    """
    found: list[HistoryWorkflow] = []
    skipped: Counter[str] = Counter()
    for path in reversed(files):
        if len(found) == count:
            break
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("Cannot read the history file %s (%s); left out.", path, exc)
            skipped["unreadable"] += 1
            continue
        for n in range(len(lines) - 1, -1, -1):
            if len(found) == count:
                break
            if not lines[n].strip():
                continue
            try:
                workflow = _line_record(lines[n], f"{path} (line {n + 1})")
            except (ValueError, IdlegateError) as exc:
                if not skipped["malformed"]:
                    log.warning("Left out of the history: %s", exc)
                skipped["malformed"] += 1
                continue
            if not keep(workflow):
                continue
            if workflow.arrival is None:
                skipped["no arrival"] += 1
            else:
                found.append(workflow)
    if skipped:
        log.warning("Left out of the history %s: %s.", files[-1], dict(skipped))
    return Tail(found[::-1], skipped)


def _line_record(line: str, source: str) -> HistoryWorkflow:
    """A plain workflow record on one line of JSON."""
    try:
        doc = json_document(line)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{source} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SpecError(f"{source} is not a workflow record (a JSON object)")
    return parse_record(doc, doc, None, source)


def history_text(workflows: Sequence[HistoryWorkflow], suffix: str = ".yaml") -> str:
    """`workflows` as the text of a history file: JSON Lines for `.jsonl`, JSON for `.json`,
    else YAML."""
    docs = [history_record(w) for w in workflows]
    if suffix == ".jsonl":
        return "".join(json.dumps(d, separators=(",", ":")) + "\n" for d in docs)
    if suffix == ".json":
        return json.dumps(docs, indent=1) + "\n"
    return yaml.safe_dump(docs, sort_keys=False)


def write_history(path: str | Path, workflows: Sequence[HistoryWorkflow]) -> Path:
    """Write `workflows` as a history file (`history_text`, by the file's suffix), its
    folder made if missing (as `compare --out` makes its own)."""
    p = check_history_out(path)
    try:
        p.write_text(history_text(workflows, p.suffix))
    except OSError as exc:
        raise SpecError(f"cannot write the history file {p} ({exc.strerror}); {_OUT}") from None
    return p


def check_history_out(path: str | Path) -> Path:
    """`path` as a history file to write, its folder made now; SpecError, a sentence, for
    a directory or a folder that cannot be made. The commands that write one check it
    before their work (Alibaba's whole trace takes minutes), not when they write."""
    p = Path(path)
    if p.is_dir():
        raise SpecError(
            f"cannot write the history file {p}: it is a directory; {_OUT}, e.g. "
            f"{p / 'history.yaml'}"
        )
    try:
        make_dirs(p.parent)  # (removed again if the command fails: `discard_empty_dirs`)
    except OSError as exc:
        raise SpecError(f"cannot write the history file {p} ({exc.strerror}); {_OUT}") from None
    return p


_OUT = "give --out a file in a folder you can write to"
"""How a sentence on a history file that cannot be written ends."""


@dataclass(frozen=True)
class HistoryFacts:
    """What names a history file: its content's hash and size, and what it records."""

    sha256: str
    """SHA-256 of the file's bytes (hex): the same history, byte for byte."""
    workflows: int
    """How many workflows it holds."""
    span_seconds: float
    """Seconds from the first recorded arrival to the last (0 without arrivals)."""
    pool_size: int | None
    """The pool size its workflows record most often (None: none recorded)."""
    policy: str | None
    """The scheduler spec its workflows record most often (None: none recorded)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "sha256": self.sha256,
            "workflows": self.workflows,
            "span_seconds": self.span_seconds,
            "pool_size": self.pool_size,
            "policy": self.policy,
        }


def history_facts(path: str | Path) -> HistoryFacts:
    """The `HistoryFacts` of the history file at `path` (read and checked by `load_history`)."""
    workflows = load_history(path)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    times = [w.arrival for w in workflows if w.arrival is not None]
    span = max(times) - min(times) if times else 0.0
    return HistoryFacts(
        digest,
        len(workflows),
        span,
        most_recorded([w.pool_size for w in workflows]),
        most_recorded([w.policy for w in workflows]),
    )
