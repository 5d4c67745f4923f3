"""The history of finished DagWorkflows: a record of each, for replays and training, and
``idlegate history export``, which writes them as a history file of the `file` workload
(docs/workloads.md, "Exporting the cluster's history").

A record is a :class:`idlegate.sim.history.HistoryWorkflow`: DAG and estimates, arrival,
each stage's measured task durations, outcome, JCT, policy and pool size. One function,
:func:`history_workflow`, builds it from the workflow's status, so the operator's sink's
records (:mod:`idlegate.operator.features.history`) and those exported from live objects
are the same:

* ``arrival``: ``completionTime - jctSeconds``, the arrival the operator measured the JCT
  from (the creation, on its clock), else ``metadata.creationTimestamp``;
* ``measuredDurationSeconds``: a uniform sample of at most ``--history-samples`` run times
  per stage (from the pods' container states: :func:`idlegate.api.task_pods.ran`);
* ``policy``: the status's ``scheduler``, the canonical text of the spec its pool ran
  (``default``, ``--scheduler``'s, the ExecutorPool's policy), which ``idlegate advise``
  rebuilds; without one (a scheduler object, an older status) the status's ``policy``, the
  name of the rule that released the workflow's last tasks.

The export reads one source: the live DagWorkflows (listed by the caller), the operator's
sink with its rotated files (`sink_files`, which keep the records of deleted workflows
too), or a document of DagWorkflows (``kubectl get dwf -A -o json``, or YAML) from a file
or standard input. The records are sorted by arrival, a record seen twice (a sink line
written again by an operator that stopped before marking it) is kept once, and ``--since``
keeps those that arrived in the last span or since a time; when it keeps none of those
read, a note says when the newest arrived (`since_note`).
"""

from __future__ import annotations

import glob
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from idlegate.api.kinds import KIND, LIST_KIND
from idlegate.api.status import FINISHED
from idlegate.documents import YamlLoader, YamlRefusal
from idlegate.errors import IdlegateError
from idlegate.sim.history import HistoryWorkflow, history_text, load_history, write_history
from idlegate.sim.spec import WorkflowSpec, parse_workflow
from idlegate.sim.timestamps import from_datetime, stamp, timestamp_precision
from idlegate.textfiles import read_stdin, read_text


def history_workflow(
    name: str,
    spec: WorkflowSpec,
    status: Mapping[str, Any],
    created: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> HistoryWorkflow | None:
    """The record, named `name` (``namespace/name``), of a finished workflow from its status
    (None: it has not finished); `created` (its ``creationTimestamp``) is the arrival when
    the status does not give the one the operator measured from. Its policy is the spec
    the pool ran (``scheduler``), else the rule that released its tasks last (``policy``).
    Its namespace (of `name`) and `labels` are kept: a replay places it in a queue by them
    as the operator did (`idlegate.sim.queues.queue_of`)."""
    phase, jct = status.get("phase"), status.get("jctSeconds")
    if phase not in FINISHED or not isinstance(jct, int | float):
        return None
    completion = status.get("completionTime")
    if isinstance(completion, str):
        arrival: float | None = from_datetime(completion) - float(jct)
    elif isinstance(created, str):
        arrival = from_datetime(created) + timestamp_precision(created)
    else:
        arrival = None
    samples = {
        s.get("name"): s.get("measuredDurationSeconds")
        for s in status.get("stages") or []
        if isinstance(s, Mapping)
    }
    measured = tuple(_positive(samples.get(stage.name)) for stage in spec.stages)
    pool = status.get("poolSize")
    return HistoryWorkflow(
        spec,
        name,
        None if arrival is None else round(arrival, 3),
        measured,
        name,
        jct=float(jct),
        outcome=phase,
        policy=status.get("scheduler") or status.get("policy") or None,
        pool_size=pool if isinstance(pool, int) and pool >= 1 else None,
        namespace=name.split("/", 1)[0] if "/" in name else None,
        labels=dict(labels) if labels else None,
    )


def object_history(obj: Mapping[str, Any]) -> HistoryWorkflow | None:
    """The record of a DagWorkflow object as the API returns it (None: not finished); a
    SpecError for a finished one whose spec is not valid (it cannot be one)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    if status.get("phase") not in FINISHED:
        return None
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    spec = parse_workflow(obj.get("spec"), f"DagWorkflow {name}: spec")
    labels = meta.get("labels")
    kept = labels if isinstance(labels, Mapping) else None
    return history_workflow(name, spec, status, meta.get("creationTimestamp"), kept)


def _positive(values: Any) -> tuple[float, ...] | None:
    if not isinstance(values, list):
        return None
    kept = tuple(float(v) for v in values if isinstance(v, int | float) and v > 0)
    return kept or None


def rotated(path: Path, n: int) -> Path:
    """The sink's `n`-th rotated file: ``history.jsonl`` -> ``history.<n>.jsonl`` (the
    suffix kept, so that it reads as a history file of its own)."""
    return path.with_name(f"{path.stem}.{n}{path.suffix}")


def sink_files(path: Path) -> list[Path]:
    """The sink's files, oldest first: the rotated ones (`rotated`), then `path`."""
    if path.is_dir():
        # (a rotated file, history.1.jsonl, is found beside the one named)
        found = sorted(p for p in path.glob("*.jsonl") if not p.stem.rpartition(".")[2].isdigit())
        example = found[0] if found else path / "history.jsonl"
        raise IdlegateError(
            f"{path} is a directory; pass the operator's --history-file, the sink's file in "
            f"it (e.g. {example})"
        )
    numbers = []
    for p in path.parent.glob(f"{glob.escape(path.stem)}.*{glob.escape(path.suffix)}"):
        n = p.name[len(path.stem) + 1 : len(p.name) - len(path.suffix)]
        if n.isdigit() and p == rotated(path, int(n)):
            numbers.append(int(n))
    files = [rotated(path, n) for n in sorted(numbers, reverse=True)]
    if path.is_file():
        files.append(path)
    if not files:
        raise IdlegateError(
            f"no history file at {path} (nor rotated ones, {rotated(path, 1).name}, ...): pass "
            "the operator's --history-file path"
        )
    return files


STDIN = "-"
_SPAN = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
EPOCH_ARRIVALS = 1e9
"""Arrivals below this (before September 2001) do not count from the epoch: a simulated
history's count from 0, so no `--since` keeps them."""


def since_time(since: str | None, now: float) -> float | None:
    """The earliest arrival `--since` keeps, in epoch seconds (None: every workflow)."""
    if since is None:
        return None
    span = _SPAN.match(since.strip())
    if span:
        return now - float(span.group(1)) * _UNIT[span.group(2)]
    try:
        return from_datetime(since.strip())
    except ValueError:
        raise IdlegateError(
            f"--since {since!r} is neither a span (e.g. 7d, 36h, 90m, 600s) nor an RFC 3339 "
            "time (e.g. 2024-06-01T00:00:00Z)"
        ) from None


def from_objects(objects: Iterable[Any]) -> list[HistoryWorkflow]:
    """The records of the finished DagWorkflows among `objects` (others are skipped)."""
    ours = (o for o in objects if isinstance(o, Mapping) and o.get("kind") in (KIND, None))
    return [record for record in map(object_history, ours) if record is not None]


def from_document(text: str, source: str) -> list[HistoryWorkflow]:
    """The records of a ``kubectl get dwf -o json`` (or ``-o yaml``) document: a List, one
    DagWorkflow, or a YAML stream of them."""
    try:
        docs = [d for d in yaml.load_all(text, Loader=YamlLoader) if d is not None]
    except YamlRefusal as exc:
        raise IdlegateError(
            f"{exc.at(source)}; pipe `kubectl get dwf -A -o json` into it"
        ) from None
    except yaml.YAMLError as exc:
        raise IdlegateError(
            f"{source} is not a JSON or YAML document ({' '.join(str(exc).split())}); pipe "
            "`kubectl get dwf -A -o json` into it"
        ) from None
    objects: list[Any] = []
    for doc in docs:
        kind = doc.get("kind") if isinstance(doc, Mapping) else None
        if kind in ("List", LIST_KIND) and isinstance(doc.get("items"), list):
            objects.extend({"kind": KIND, **item} for item in doc["items"])
        elif kind == KIND:
            objects.append(doc)
        else:
            raise IdlegateError(
                f"{source} holds a {kind or 'document with no kind'}, not DagWorkflows; pipe "
                "`kubectl get dwf -A -o json` into it"
            )
    return from_objects(objects)


def select(workflows: Iterable[HistoryWorkflow], since: float | None) -> list[HistoryWorkflow]:
    """Sorted by arrival, each record once, only those that arrived at `since` or later."""
    seen: dict[tuple[str | None, float | None], HistoryWorkflow] = {}
    for w in workflows:
        if since is None or (w.arrival is not None and w.arrival >= since):
            seen.setdefault((w.name, w.arrival), w)
    return sorted(seen.values(), key=lambda w: (w.arrival or 0.0, w.name or ""))


def since_note(found: Sequence[HistoryWorkflow], since: str, earliest: float) -> str:
    """Why `--since` kept none of the records `found`: when the newest of them arrived."""
    head = (
        f"{len(found)} finished workflow(s) read, none arrived since {stamp(earliest)} "
        f"(--since {since})"
    )
    arrivals = [w.arrival for w in found if w.arrival is not None]
    if not arrivals:
        return f"{head}; none records its arrival"
    newest = max(arrivals)
    if newest < EPOCH_ARRIVALS:
        return (
            f"{head}; the newest arrived at {newest:g} s, which counts from 0 (as a simulated "
            "history's arrivals do), not from 1970: drop --since to export them"
        )
    return f"{head}; the newest arrived at {stamp(newest)}"


def export(
    *,
    out: Path | None,
    source: str | None = None,
    sink: Path | None = None,
    live: Callable[[Sequence[str] | None], Iterable[Any]],
    namespaces: Sequence[str] = (),
    all_namespaces: bool = False,
    since: str | None = None,
) -> tuple[list[HistoryWorkflow], str | None]:
    """Read the history from one source and write it to `out` (None: YAML on stdout);
    returns the records written, in arrival order (`select`), and why none was although
    some were read (`since_note`: ``--since`` left them all out), or None. `live` lists
    the cluster's DagWorkflows of the namespaces given (none: the current one; None: all)."""
    if source is not None and sink is not None:
        raise IdlegateError("give a document (a path or -) or --from-sink, not both")
    if (source is not None or sink is not None) and (namespaces or all_namespaces):
        raise IdlegateError("--namespace and --all-namespaces select live objects; drop them")
    if namespaces and all_namespaces:
        raise IdlegateError("give --namespace or --all-namespaces, not both")
    earliest = since_time(since, datetime.now(UTC).timestamp())
    if source == STDIN:
        found = from_document(read_stdin(sys.stdin, "standard input"), "standard input")
    elif source is not None:
        found = from_document(_read(Path(source)), source)
    elif sink is not None:
        found = [w for p in sink_files(sink) for w in load_history(p)]
    else:
        found = from_objects(live(None if all_namespaces else namespaces))
    workflows = select(found, earliest)
    if out is None:
        sys.stdout.write(history_text(workflows))
    else:
        write_history(out, workflows)
    note = None
    if found and not workflows and since is not None and earliest is not None:
        note = since_note(found, since, earliest)
    return workflows, note


def _read(path: Path) -> str:
    return read_text(path, "document", "give a DagWorkflow list, e.g. kubectl get dwf -A -o json")
