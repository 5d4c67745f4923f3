"""``idlegate lint`` on Argo manifests: the job each Workflow maps to, or why it does not.

Lint collects the documents of Argo's group (``apiVersion: argoproj.io/...``) while it reads
its inputs, then maps them all at the end (:func:`lint_argo`), so a ``templateRef`` or
``workflowTemplateRef`` finds a WorkflowTemplate given in any input. Each Workflow,
WorkflowTemplate, ClusterWorkflowTemplate and CronWorkflow that maps becomes an
:class:`ArgoLintJob` (its counts and stages, printed by the CLI); one that idlegate would not
schedule (recursion, a daemon, a template library with no entrypoint, no pod) becomes a
note with the reason, since it is valid for Argo; a broken one (an entrypoint or task
calling a template that is not defined, ``dag.tasks`` or ``steps`` of the wrong shape, a
task depending on a task that does not exist, a cycle, a bad
``idlegate.io/task-duration-seconds``) is a problem.
Other kinds of Argo's group (WorkflowEventBinding, ...) are skipped with a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from idlegate.api.lint_render import PoolFactory, head_line, misfits, stage_lines
from idlegate.errors import IdlegateError
from idlegate.sim.argo import (
    WORKFLOW_KINDS,
    ArgoJob,
    ArgoRefusal,
    ArgoRefusalReason,
    map_workflow,
    template_index,
    workflow_name,
)

PROBLEM_REASONS = frozenset(
    {ArgoRefusalReason.BAD_DAG, ArgoRefusalReason.INVALID, ArgoRefusalReason.MISSING_TEMPLATE}
)
"""Refusals that are mistakes in the manifest, which Argo refuses too (a problem), not
features idlegate leaves to Argo (a note). A template missing from the manifest is one; a
WorkflowTemplate not given may exist in the cluster, so it is a note."""


@dataclass(frozen=True)
class ArgoDocument:
    """One Argo object lint read: where it is, and the object."""

    file: str
    document: int
    item: int | None
    obj: Any


@dataclass(frozen=True)
class ArgoLintJob:
    """An Argo manifest that maps to a job."""

    file: str
    document: int
    item: int | None
    job: ArgoJob

    def lines(self) -> list[str]:
        """The job as lint prints it: a head line with the counts, one line per stage."""
        head = head_line(
            self.file, self.document, self.item, f"{self.job.kind} {self.job.name}", self.job.counts
        )
        if self.job.parallelism is not None:
            head += f", parallelism {self.job.parallelism}"
        return [head, *stage_lines(self.job.live_stages, "? tasks (known as it runs)")]

    def to_json(self) -> dict[str, Any]:
        """Machine output: where, kind, name, counts and stages."""
        return {
            "file": self.file,
            "document": self.document,
            "item": self.item,
            "kind": self.job.kind,
            "name": self.job.name,
            "counts": self.job.counts,
            "parallelism": self.job.parallelism,
            "stages": [
                {
                    "name": s.name,
                    "path": s.path,
                    "tasks": s.tasks,
                    "tasks_known": s.tasks_known,
                    "duration_seconds": s.duration,
                    "duration_source": str(s.duration_source),
                    "depends_on": list(s.depends_on),
                    "retries": s.retries,
                    "resources": s.demand.to_list(),
                    "condition": None if s.condition is None else str(s.condition),
                }
                for s in self.job.live_stages
            ],
        }


@dataclass
class ArgoLintResult:
    """What lint found in the Argo documents: jobs, notes and problems, each note and
    problem as (document, message, the refusal's reason or None)."""

    jobs: list[ArgoLintJob] = field(default_factory=list)
    notes: list[tuple[ArgoDocument, str, ArgoRefusalReason | None]] = field(default_factory=list)
    problems: list[tuple[ArgoDocument, str, ArgoRefusalReason | None]] = field(default_factory=list)
    workflows: int = 0
    """Documents of a workflow kind (`WORKFLOW_KINDS`): mapped, left to Argo or broken."""


def lint_argo(documents: list[ArgoDocument], pool: PoolFactory | None = None) -> ArgoLintResult:
    """Map every Argo workflow of `documents` (templates looked up among all of them); with
    a `pool`, a stage whose pods can never fit it is a problem naming its node."""
    lookup = template_index(d.obj for d in documents)
    out = ArgoLintResult()
    for doc in documents:
        kind = doc.obj.get("kind")
        if kind not in WORKFLOW_KINDS:
            out.notes.append((doc, f"skipped: a {kind} of Argo, not a workflow", None))
            continue
        out.workflows += 1
        where = f"{kind} {workflow_name(doc.obj)}"
        try:
            job = map_workflow(doc.obj, templates=lookup)
            job.spec()
        except ArgoRefusal as exc:
            target = out.problems if exc.reason in PROBLEM_REASONS else out.notes
            target.append((doc, f"not scheduled by idlegate ({exc.reason}): {exc}", exc.reason))
            continue
        except IdlegateError as exc:
            out.problems.append((doc, str(exc), None))
            continue
        too_large = "" if pool is None else misfits(job.live_stages, pool, where)
        if too_large:
            out.problems.append((doc, too_large, None))
            continue
        out.jobs.append(ArgoLintJob(doc.file, doc.document, doc.item, job))
    return out
