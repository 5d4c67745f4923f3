"""``idlegate lint``: check DagWorkflow, DagCronWorkflow and ExecutorPool manifests offline.

What `argo lint` is to Argo users: run it before ``kubectl apply`` and learn, without a
cluster, whether the operator would mark a workflow ``Invalid``. The checks are not
re-implemented here; a DagWorkflow passes exactly when the operator's admission
(:meth:`idlegate.operator.kinds.workflow.Admission.admit`) would accept it:

* ``metadata.name``: :func:`idlegate.api.crd.check_workflow_name` (an RFC 1123
  subdomain, as the API server requires of every object's name, so that task pod names
  derived from it are valid; and a label value on every task pod, as the CRD's CEL rule
  says);
* ``spec``: :func:`idlegate.sim.spec.parse_workflow` (types, bounds, names, unknown
  dependencies, cycles: the simulator's model), and the object's size with the status its
  stages need (:func:`idlegate.api.status.check_object_size`, with ``--history-samples``
  durations a stage: the operator's setting, default 20);
* each stage's pod template: :func:`idlegate.api.template.check_templates`, with a
  :class:`~idlegate.api.podsecurity.NamespacePolicy` standing in for the namespace
  the manifest will be applied to (there is none offline): the Pod Security level of
  ``--pod-security`` (default baseline, the operator's default for a namespace without
  the label) and the service accounts of ``--allowed-service-accounts``;
* with ``pool_size`` (the operator's ``--pool-size``): no gang stage larger than the pool,
  checked by :meth:`idlegate.sim.cluster.Cluster.add_job` as the operator does; with
  ``pool_resources`` (``--pool-resources cpu=8,memory=32Gi``) also no stage whose requests
  (a gang's, all its tasks') exceed the pool's, by the same check (the simulator's
  resource rule, `idlegate.sim.cluster`), nor of an Argo workflow or Airflow DAG one whose
  pods' do (`lint_render.misfits`). Without them these checks are skipped, since the
  pool is a property of the cluster, not the manifest.

Around them, what ``kubectl apply`` would trip over first: YAML or JSON that does not parse
(with its line and column; also duplicate keys, which kubectl's strict decoding rejects but
PyYAML silently resolves to the last; in a file not named ``.yaml``, ``.yml`` or ``.json``, with
what lint reads, and a Python file, an Airflow DAG file most likely, is not parsed but said to
be one), an unreadable file (a path that does not exist is an error of the command, as in every
command), a DagWorkflow under the wrong or no ``apiVersion``, another kind in the
``idlegate.io`` group (or ``DagWorkflow`` in another case), a missing name. A bare workflow
(``idlegate simulate``'s format: a mapping with a ``stages`` list and no kind, alone or in a
list, with a history's keys or not, and a ``.jsonl`` file's lines, a history sink's) is checked
as ``simulate -w file`` reads it (:func:`sim.history.parse_record`), and against the pool as a
DagWorkflow is. Everything else (a ConfigMap, a Kustomization, a document with no kind such as a
dashboard JSON) is skipped with a note (but a ``--queues`` file, a list of queues, or one
queue not in a list, which is read as `simulate --queues` reads it, against the pool of
``--pool-size`` when given, else with a note, and against the queues the workflows of the
default pool name: `lint_pools.QueueFiles`), and ``List``/``DagWorkflowList`` documents are checked
item by item, so a directory of mixed files can be linted as a whole.

The operator reports one problem at a time in its ``Valid`` condition (one message per
check that fails; a message may list several fields, joined by ``"; "``). Lint splits such
messages into one :class:`Problem` per field (:func:`idlegate.api.lint_fields.split_message`),
and locates the stage a DAG message names (``stage 'b' depends on 'x' …`` is
``spec.stages[1].dependsOn``); a message it cannot split is kept whole, so no wording of the
checks is lost.

A ``DagCronWorkflow`` is checked the same way (:func:`cron_problems`): its name leaves room for
its runs' names, its schedule, time zone and policies parse
(:func:`idlegate.api.cron_spec.cron_spec_problems`, the problems the operator's message joins),
and its ``workflowSpec`` passes the checks above as each run's spec will, with its problems
under ``spec.workflowSpec``. An ``ExecutorPool`` (:func:`pool_spec.pool_problems`): its spec,
its policy's syntax, no namespace and not the implicit pool's name. Those two kinds' problems
come one per field from the models' checks, not from splitting a message.

This module imports neither kopf nor kubernetes (nor torch): linting needs only the base
package.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

import yaml

from idlegate.api.crd import check_workflow_name
from idlegate.api.cron_spec import check_cron_name, cron_spec_problems
from idlegate.api.kinds import API_VERSION, CRON_KIND, GROUP, KIND, LIST_KIND, POOL_KIND
from idlegate.api.lint_fields import queue_place, split_message
from idlegate.api.lint_pools import (
    InPools,
    QueueFiles,
    check_pool_requested,
    is_queue_file,
)
from idlegate.api.lint_render import PoolFactory, linted_pool
from idlegate.api.lint_report import LintReport, Note, Problem
from idlegate.api.podsecurity import NamespacePolicy
from idlegate.api.pool_spec import DEFAULT_POOL, pool_problems
from idlegate.api.status import HISTORY_SAMPLES, MAX_MEASURED, check_object_size
from idlegate.api.template import check_templates
from idlegate.documents import PyYamlLoader, YamlRefusal, json_document
from idlegate.errors import IdlegateError
from idlegate.sim.airflow import is_airflow
from idlegate.sim.argo import is_argo
from idlegate.sim.arrival_kinds import ARRIVALS, Arrivals
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import describe, parse_workflow

if TYPE_CHECKING:  # (each kind's mapping is imported when a document of it is linted)
    from idlegate.api.lint_argo import ArgoDocument
from idlegate.textfiles import not_utf8, read_stdin

STDIN = "-"
"""The path that means standard input."""
STDIN_NAME = "<stdin>"
"""How standard input is named in problems."""
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""Files a directory is searched for (recursively, hidden ones left out); a file named
explicitly is always read."""
READS = (
    "YAML, JSON or JSON Lines (.jsonl): DagWorkflows (and DagCronWorkflows, ExecutorPools), "
    "bare workflows and history records (as simulate -w file reads them), Argo "
    "Workflows, and Airflow DAGs as the JSON export `idlegate history airflow --raw` writes "
    "(Airflow's REST API's answers)"
)
"""What lint reads, for the message about a file that is none of it."""
NO_POOL = (
    "its quotas were not checked against a pool: give --pool-size (simulate's -k) or "
    "--pool-resources to check them as simulate --queues does"
)
"""The note on a queues file linted without a pool."""


# -- the operator's admission checks ----------------------------------------------------------


def admission_errors(
    obj: Mapping[str, Any],
    pool_size: int | None = None,
    policy: NamespacePolicy | None = None,
    resources: ResourceVector | None = None,
    samples: int = HISTORY_SAMPLES,
) -> list[str]:
    """The messages the operator would mark DagWorkflow `obj` ``Invalid`` with, one per
    check that fails (empty: it would be admitted). `pool_size`: also check gang stages
    against a pool of that many executors (the default pool's: not a workflow whose
    spec.pool names an ExecutorPool, which waits while that pool is too small); `policy`:
    also hold the templates to what a namespace allows; `samples`: the operator's
    ``--history-samples``, which the object's size counts."""
    errors = []
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if isinstance(name, str):
        try:
            check_workflow_name(name)
        except IdlegateError as exc:
            errors.append(str(exc))
    try:
        spec = parse_workflow(obj.get("spec"), "spec")
        check_object_size(obj, spec, samples)
        check_templates(spec, "spec", policy)
        if (pool_size is not None or resources is not None) and spec.pool in (None, DEFAULT_POOL):
            job = f"{meta['namespace']}/{name}" if _has(meta, "namespace") else name
            from idlegate.sim.dag import Dag  # (the pool's simulator: only with a pool)

            pool = linted_pool(pool_size, resources)
            pool.add_job(Dag.from_spec(spec), 0.0, str(job or "the workflow"))
    except IdlegateError as exc:
        errors.append(str(exc))
    return errors


def cron_problems(
    obj: Mapping[str, Any],
    pool_size: int | None = None,
    policy: NamespacePolicy | None = None,
    resources: ResourceVector | None = None,
    samples: int = HISTORY_SAMPLES,
) -> list[tuple[str | None, str]]:
    """(field path, text) of what the operator would refuse in DagCronWorkflow `obj`: its
    name (room for its runs' names), its schedule, time zone and other fields, and its
    workflowSpec, checked as each run's spec will be (its size as the run's object,
    :func:`idlegate.api.cron_runs.sized_run`)."""
    out: list[tuple[str | None, str]] = []
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if isinstance(name, str):
        try:
            check_cron_name(name)
        except IdlegateError as exc:
            out.append(("metadata.name", str(exc)))
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return [
            *out,
            ("spec", f"must be a mapping with schedule and workflowSpec, not {describe(spec)}"),
        ]
    out.extend((f"spec.{p}" if p else "spec", text) for p, text in cron_spec_problems(spec))
    if "workflowSpec" not in spec:
        return out
    from idlegate.api.cron_runs import sized_run  # (the simulator's runs: cron only)

    for message in admission_errors(sized_run(obj), pool_size, policy, resources, samples):
        for path, text in split_message(message, spec["workflowSpec"]):
            if path is not None and path.startswith("spec") and not path.startswith("metadata"):
                path = "spec.workflowSpec" + path.removeprefix("spec")
            out.append((path, text))
    return out


def _bare(obj: Any) -> bool:
    """A bare workflow: a mapping with `stages` and neither kind nor apiVersion."""
    return (
        isinstance(obj, Mapping)
        and "stages" in obj
        and not _text(obj.get("kind"))
        and not _text(obj.get("apiVersion"))
    )


def _ours_object(obj: Any) -> bool:
    """A mapping whose kind or API group is idlegate's (`_ours`)."""
    return isinstance(obj, Mapping) and bool(_ours(obj.get("kind"), obj.get("apiVersion")))


def _has(meta: Any, key: str) -> bool:
    return isinstance(meta, Mapping) and _text(meta.get(key))


KINDS = (KIND, CRON_KIND, POOL_KIND)
"""The kinds lint checks."""


def _ours(kind: Any, api: Any) -> bool:
    """One of ours, or meant to be: its kind (in any case) or its API group says so."""
    return (_text(kind) and kind.lower() in {k.lower() for k in KINDS}) or (
        _text(api) and api.split("/")[0] == GROUP
    )


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


# -- reading manifests ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    name: str
    path: Path | None  # None: standard input


def _sources(paths: Sequence[str], report: LintReport) -> Iterator[_Source]:
    for raw in paths:
        if raw == STDIN:
            yield _Source(STDIN_NAME, None)
            continue
        path = Path(raw)
        if not path.is_dir():
            yield _Source(raw, path)
            continue
        found = sorted(_manifests_under(path))
        if not found:
            report.problems.append(
                Problem(raw, "is a directory with no *.yaml, *.yml or *.json file in it")
            )
        for p in found:
            yield _Source(str(p), p)


def _manifests_under(root: Path) -> Iterator[Path]:
    """The manifest files under `root`, skipping hidden files and directories (``.git``,
    ``.venv``: linting a repository's root should not wade through them)."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.startswith(".") and Path(name).suffix.lower() in MANIFEST_SUFFIXES:
                yield Path(folder, name)


def _read(source: _Source, stdin: TextIO) -> str:
    if source.path is None:
        return read_stdin(stdin)
    try:
        return source.path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise IdlegateError("cannot read: no such file or directory") from None
    except UnicodeDecodeError as exc:
        raise IdlegateError(not_utf8(exc)) from None
    except OSError as exc:
        raise IdlegateError(f"cannot read: {exc.strerror or exc}") from None


def _documents(text: str, source: _Source, report: LintReport) -> Iterator[tuple[int, Any]]:
    """(index, parsed document) of each document; a syntax error becomes a problem (with
    the index of the document it is in) and ends the file."""
    suffix = "" if source.path is None else source.path.suffix.lower()
    if suffix == ".py":  # an Airflow DAG file, most likely: YAML would parse part of it
        report.problems.append(
            Problem(
                source.name,
                f"is Python source, which lint does not read (it reads {READS}); export an "
                "Airflow DAG with `idlegate history airflow --dag DAG_ID --raw -o DAG_ID.json` "
                "and lint that",
            )
        )
        return
    # a file not named as a manifest that does not parse is likely no manifest at all
    hint = "" if source.path is None or suffix in MANIFEST_SUFFIXES else f"; lint reads {READS}"
    if suffix == ".json":
        try:
            yield 0, json_document(text)
        except json.JSONDecodeError as exc:
            _unreadable(
                report,
                Problem(
                    source.name, f"invalid JSON: {exc.msg}", 0, None, None, exc.lineno, exc.colno
                ),
            )
        return
    if suffix == ".jsonl":  # JSON Lines, as simulate -w file reads (a history sink's)
        for n, line in enumerate(text.splitlines()):
            if not line.strip():
                continue
            try:
                yield n, json_document(line)
            except json.JSONDecodeError as exc:
                _unreadable(
                    report,
                    Problem(
                        source.name, f"invalid JSON: {exc.msg}", n, None, None, n + 1, exc.colno
                    ),
                )
        return
    count = 0  # documents parsed so far: the index of the one a syntax error is in
    try:
        for doc in yaml.load_all(text, Loader=PyYamlLoader):
            yield count, doc
            count += 1
    except YamlRefusal as exc:  # (a key given twice, too deep, aliases: its own sentence)
        _unreadable(
            report, Problem(source.name, exc.sentence, count, None, None, exc.line, exc.column)
        )
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = ", ".join(filter(None, [exc.context, exc.problem]))
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        _unreadable(
            report,
            Problem(source.name, f"invalid YAML: {what}{hint}", count, None, None, line, column),
        )
    except yaml.YAMLError as exc:  # e.g. a character YAML does not allow (with no mark)
        _unreadable(report, Problem(source.name, f"invalid YAML: {exc}{hint}", count))


def _unreadable(report: LintReport, problem: Problem) -> None:
    """`problem`, a file's that does not parse: counted apart (`LintReport.unreadable`),
    as no object of it past the error was checked, valid or not."""
    report.problems.append(problem)
    report.unreadable.add(problem.file)


# -- checking objects ---------------------------------------------------------------------------


@dataclass
class _Linter:
    """Checks documents into a report."""

    report: LintReport
    pool_size: int | None
    policy: NamespacePolicy
    resources: ResourceVector | None = None
    """The pool's resources beyond pods (``--pool-resources``), or None."""
    samples: int = HISTORY_SAMPLES
    """The operator's ``--history-samples``, which a workflow's size counts."""
    argo: list[ArgoDocument] = field(default_factory=list)
    """Argo's documents, mapped once every input is read (templates may be anywhere)."""
    in_pools: InPools = field(default_factory=InPools)
    queues: QueueFiles = field(default_factory=QueueFiles)

    def pool(self) -> PoolFactory | None:
        """The linted pool, when it counts resources (only they can exceed it here)."""
        size, resources = self.pool_size, self.resources
        return None if resources is None else lambda: linted_pool(size, resources)

    def document(self, source: str, index: int, doc: Any) -> None:
        if doc is None:  # an empty document (e.g. after a trailing ---): kubectl skips it too
            return
        kind = doc.get("kind") if isinstance(doc, Mapping) else None
        lists = ("List", LIST_KIND, f"{CRON_KIND}List", f"{POOL_KIND}List")
        if kind in lists and isinstance(doc, Mapping) and "items" in doc:
            items = doc["items"]
            if not isinstance(items, list):
                what = f"must be a list, not {describe(items)}"
                self._problem(source, index, None, "items", what)
                return
            for i, item in enumerate(items):
                self.object(source, index, i, item)
            return
        if isinstance(doc, list) and doc and all(is_airflow(d) for d in doc):
            for i, item in enumerate(doc):  # a JSON list of DAG exports
                self.object(source, index, i, item)
            return
        if is_queue_file(doc):  # (read as simulate --queues reads it: QueueFiles)
            problems = self.queues.add(source, doc, self.pool_size, self.resources)
            for problem in problems:
                self._problem(source, index, None, *queue_place(problem))
            if problems:
                self.report.invalid += 1
            elif self.pool_size is None and self.resources is None:
                self.report.notes.append(Note(source, NO_POOL))
            return
        if isinstance(doc, list) and any(_bare(d) or _ours_object(d) for d in doc):
            for i, item in enumerate(doc):  # a list of workflows, as simulate -w file reads
                self.object(source, index, i, item, in_list=True)
            return
        self.object(source, index, None, doc)

    def airflow(self, source: str, index: int, item: int | None, obj: Mapping[str, Any]) -> None:
        """An Airflow DAG export: its job, or a note or problem with the reason."""
        self.report.airflow_dags += 1
        from idlegate.api.lint_airflow import lint_airflow

        found = lint_airflow(source, index, item, obj, self.pool())
        if found.job is not None:
            self.report.airflow_jobs.append(found.job)
        elif found.note is not None:
            self.report.notes.append(
                Note(source, found.note, index, item, found.reason, airflow=True)
            )
        else:
            self.report.problems.append(
                Problem(source, found.problem or "", index, item, reason=found.reason)
            )
            self.report.invalid += 1

    def bare(self, source: str, index: int, item: int | None, obj: Any) -> None:
        """A bare workflow (`idlegate simulate`'s format, a history's record), checked as
        `simulate -w file` reads it (`sim.history.parse_record`)."""
        self.report.bare_workflows += 1
        try:
            if isinstance(obj, dict):
                from idlegate.sim.history import parse_record  # (bare workflows only)

                record = parse_record(obj, obj, None, "workflow")
                spec, name = record.spec, record.name
            else:
                spec, name = parse_workflow(obj, "workflow"), None
            self.in_pools.requests(spec)
            self.queues.join((source, index, item), name, obj)
            if self.pool_size is not None or self.resources is not None:  # as a DagWorkflow's
                from idlegate.sim.dag import Dag

                pool = linted_pool(self.pool_size, self.resources)
                pool.add_job(Dag.from_spec(spec), 0.0, f"workflow {name or '#' + str(index)}")
        except IdlegateError as exc:
            self._problem(source, index, item, None, str(exc))
            self.report.invalid += 1

    def object(
        self, source: str, index: int, item: int | None, obj: Any, in_list: bool = False
    ) -> None:
        """One object (a document, or an item of a List); `in_list`: an item of a list of
        bare workflows, where anything that is no object of a known kind is one."""
        known = isinstance(obj, Mapping) and (
            _text(obj.get("kind")) or _text(obj.get("apiVersion"))
        )
        if _bare(obj) or (in_list and not known and not is_airflow(obj)):
            self.bare(source, index, item, obj)
            return
        if not isinstance(obj, Mapping):
            what = f"{describe(obj)}, not a Kubernetes object"
            self.report.notes.append(Note(source, f"skipped: {what}", index, item))
            return
        kind, api = obj.get("kind"), obj.get("apiVersion")
        if is_argo(obj):
            from idlegate.api.lint_argo import ArgoDocument

            self.argo.append(ArgoDocument(source, index, item, obj))
            return
        if is_airflow(obj):
            self.airflow(source, index, item, obj)
            return
        if self.in_pools.node(obj):  # (what the node pools' quotas are checked against)
            return
        if not _ours(kind, api):
            what = f"a {kind} ({api})" if _text(kind) else "a document with no kind"
            # e.g. a workflow file of `idlegate simulate`: a bare spec, no manifest
            hint = (
                f" (to lint a bare workflow, put it under spec of a {KIND})"
                if "stages" in obj
                else ""
            )
            self.report.notes.append(
                Note(
                    source, f"skipped: {what}, not one of the kinds lint checks{hint}", index, item
                )
            )
            return
        self.report.workflows += 1
        before = len(self.report.problems)
        if not _text(kind):
            self._problem(source, index, item, "kind", f"is missing; use kind: {KIND}")
        elif kind not in KINDS:
            meant = [k for k in KINDS if k.lower() == kind.lower()]
            why = (
                f"is not {meant[0]}: kinds are case-sensitive"
                if meant
                else f"is not a kind of {GROUP}"
            )
            use = meant[0] if meant else f"{KIND} (or {CRON_KIND})"
            self._problem(source, index, item, "kind", f"{kind!r} {why}; use kind: {use}")
        if not _text(api):
            self._problem(source, index, item, "apiVersion", f"is missing; use {API_VERSION}")
        elif api != API_VERSION:
            self._problem(
                source,
                index,
                item,
                "apiVersion",
                f"{api!r} does not serve {kind if kind in KINDS else KIND}; use {API_VERSION}",
            )
        meant = next((k for k in KINDS if _text(kind) and k.lower() == kind.lower()), KIND)
        self._metadata(source, index, item, obj.get("metadata"), meant)
        if _text(kind) and kind.lower() == CRON_KIND.lower():  # miscased: still checked as one
            self.report.cron_workflows += 1
            self.in_pools.cron(obj)
            found = cron_problems(obj, self.pool_size, self.policy, self.resources, self.samples)
        elif _text(kind) and kind.lower() == POOL_KIND.lower():
            self.report.pools += 1
            found = pool_problems(obj)
            self.in_pools.pool((source, index, item), obj)
        else:
            self.in_pools.workflow((source, index, item), obj)
            meta = obj.get("metadata")
            named = meta.get("name") if isinstance(meta, Mapping) else None
            self.queues.join((source, index, item), named, obj.get("spec"))
            errors = admission_errors(
                obj, self.pool_size, self.policy, self.resources, self.samples
            )
            found = [pair for message in errors for pair in split_message(message, obj.get("spec"))]
        for path, text in found:
            self._problem(source, index, item, path, text)
        if len(self.report.problems) > before:
            self.report.invalid += 1

    def _metadata(
        self, source: str, index: int, item: int | None, meta: Any, kind: str = KIND
    ) -> None:
        if not isinstance(meta, Mapping):
            what = "is missing" if meta is None else f"must be a mapping, not {describe(meta)}"
            article = "an" if kind[0] in "AEIOU" else "a"
            self._problem(source, index, item, "metadata", f"{what}; {article} {kind} needs a name")
        elif not _has(meta, "name") and not _has(meta, "generateName"):
            self._problem(
                source,
                index,
                item,
                "metadata.name",
                f"is missing; give the {kind} a name (or a generateName, for kubectl create)",
            )

    def _problem(
        self, source: str, index: int, item: int | None, path: str | None, message: str
    ) -> None:
        self.report.problems.append(Problem(source, message, index, item, path))


def lint_paths(
    paths: Sequence[str],
    *,
    pool_size: int | None = None,
    policy: NamespacePolicy | None = None,
    stdin: TextIO | None = None,
    pool_resources: ResourceVector | None = None,
    history_samples: int = HISTORY_SAMPLES,
    forecast_arrivals: str = "none",
) -> LintReport:
    """Lint files, directories (recursively, their ``*.yaml``/``*.yml``/``*.json`` files)
    and ``-`` (standard input, read as YAML), holding templates to `policy` (by default
    baseline, no service account but ``default``) and sizing workflows with
    `history_samples` durations a stage (the operator's ``--history-samples``); the
    ExecutorPools are noted that would not invent the operator's `forecast_arrivals`
    (``--forecast-arrivals``: `lint_pools.InPools.fallbacks`). Unreadable
    files and syntax errors are problems of the report, not exceptions. IdlegateError for a
    bad `pool_size` or `history_samples` and for paths that do not exist (a mistake in the
    command, not in a manifest: reported before anything is linted, as every command
    reports its arguments' mistakes)."""
    if pool_size is not None and pool_size < 1:
        raise IdlegateError(f"--pool-size must be at least 1, got {pool_size}")
    if not 1 <= history_samples <= MAX_MEASURED:
        raise IdlegateError(
            f"--history-samples must be between 1 and {MAX_MEASURED} (the operator's bounds), "
            f"got {history_samples}; give the operator's own --history-samples"
        )
    if forecast_arrivals not in ARRIVALS:
        raise IdlegateError(
            f"--forecast-arrivals must be one of {', '.join(ARRIVALS)} (the operator's), got "
            f"{forecast_arrivals!r}"
        )
    if pool_resources is not None:
        linted_pool(pool_size, pool_resources)  # (pods that contradict --pool-size: said once)
    missing = [p for p in paths if p != STDIN and not Path(p).exists()]
    if missing:
        raise IdlegateError(
            f"no such file or directory: {', '.join(missing)}; name manifest files, "
            f"directories of them, or {STDIN} for standard input"
        )
    report = LintReport()
    linter = _Linter(
        report, pool_size, policy or NamespacePolicy(), pool_resources, samples=history_samples
    )
    for source in _sources(paths, report):
        report.files += 1  # (one that cannot be read too: it was checked, and is a problem)
        try:
            text = _read(source, stdin or sys.stdin)
        except IdlegateError as exc:
            report.problems.append(Problem(source.name, str(exc)))
            report.unreadable.add(source.name)
            continue
        documents = 0
        for index, doc in _documents(text, source, report):
            documents += doc is not None
            linter.document(source.name, index, doc)
        if not documents and not any(p.file == source.name for p in report.problems):
            report.notes.append(Note(source.name, "holds no document; nothing to check"))
    _add_argo(report, linter.argo, linter.pool())
    report.queue_files = linter.queues.read
    for (file, index, item), text in [*linter.queues.problems(), *linter.in_pools.quotas()]:
        before = any((p.file, p.document, p.item) == (file, index, item) for p in report.problems)
        report.problems.append(Problem(file, text, index, item))
        report.invalid += not before
    check_pool_requested(linter.in_pools, [*report.argo_jobs, *report.airflow_jobs], pool_resources)
    report.notes.extend(
        Note(f, text, i, j, why) for (f, i, j), text, why in linter.in_pools.notes()
    )
    report.notes.extend(
        Note(f, text, i, j, why)
        for (f, i, j), text, why in linter.in_pools.fallbacks(cast(Arrivals, forecast_arrivals))
    )
    return report


def _add_argo(report: LintReport, documents: list[ArgoDocument], pool: PoolFactory | None) -> None:
    """The Argo documents' jobs, notes and problems, into the report."""
    from idlegate.api.lint_argo import lint_argo

    found = lint_argo(documents, pool)
    report.argo_jobs.extend(found.jobs)
    report.argo_workflows += found.workflows
    for doc, text, reason in found.notes:
        report.notes.append(Note(doc.file, text, doc.document, doc.item, reason))
    for doc, text, reason in found.problems:
        report.problems.append(Problem(doc.file, text, doc.document, doc.item, reason=reason))
    report.invalid += len({(d.file, d.document, d.item) for d, _, _ in found.problems})
