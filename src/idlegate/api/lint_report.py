"""What ``idlegate lint`` found (:mod:`idlegate.api.lint`): each problem with the file, the
document and the field it is in, the notes on what it did not check, the counts of what
it checked, and the report as lint prints it (a line each, then a summary) or as JSON.

Inputs with nothing lint checks (an empty file, a folder of other kinds) are no pass: a
wrong path or glob would otherwise read as a clean bill.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from idlegate.api.lint_pools import OWN

if TYPE_CHECKING:  # (lint imports the mappings only for their kinds: idlegate.cli's start)
    from idlegate.api.lint_airflow import AirflowLintJob
    from idlegate.api.lint_argo import ArgoLintJob


@dataclass(frozen=True)
class Problem:
    """One reason a manifest would be refused (by kubectl, or by the operator as Invalid)."""

    file: str
    """The file as given (or found in a directory given), ``<stdin>`` for standard input."""
    message: str
    """What is wrong, in the operator's words where the operator checks it."""
    document: int | None = None
    """0-based index of the YAML document in the file (None: the file as a whole)."""
    item: int | None = None
    """0-based index in the ``items`` of a ``List`` document, else None."""
    field: str | None = None
    """Path of the offending field in the object, e.g. ``spec.stages[1].dependsOn``."""
    line: int | None = None
    """1-based line of a syntax error, else None."""
    column: int | None = None
    """1-based column of a syntax error, else None."""
    reason: str | None = None
    """Why an Argo workflow does not map (:class:`~idlegate.sim.argo.RefusalReason`, e.g.
    ``missing-template``), else None."""

    def where(self) -> str:
        """``file``, ``file[doc]`` or ``file[doc].items[i]``."""
        out = self.file
        if self.document is not None:
            out += f"[{self.document}]"
        if self.item is not None:
            out += f".items[{self.item}]"
        return out

    def __str__(self) -> str:
        place = []
        if self.line is not None:
            place.append(f"line {self.line}, column {self.column}")
        if self.field:
            place.append(self.field)
        head = " ".join([self.where(), *place])
        return " ".join(f"{head}: {self.message}".split())  # one line, whatever the message


@dataclass(frozen=True)
class Note:
    """Something lint did not check, and why (e.g. a document of another kind)."""

    file: str
    """The file the note is about."""
    message: str
    """The note."""
    document: int | None = None
    """0-based document index, as in :class:`Problem`."""
    item: int | None = None
    """0-based index in a ``List``'s items, as in :class:`Problem`."""
    reason: str | None = None
    """Why idlegate leaves an Argo workflow to Argo (e.g. ``daemon``) or an Airflow DAG to
    Airflow (e.g. ``no-tasks``), else None."""
    airflow: bool = False
    """The note is about an Airflow DAG export (else an Argo workflow, or none)."""

    def __str__(self) -> str:
        where = Problem(self.file, "", self.document, self.item).where()
        return f"{where}: {self.message}"


@dataclass
class LintReport:
    """The outcome of linting some inputs: valid exactly when there is no problem."""

    problems: list[Problem] = field(default_factory=list)
    """Every problem found, in input order."""
    notes: list[Note] = field(default_factory=list)
    """Documents skipped (other kinds) and inputs with nothing to check."""
    files: int = 0
    """Files checked, read or not (standard input counts as one)."""
    workflows: int = 0
    """DagWorkflow and DagCronWorkflow objects checked."""
    cron_workflows: int = 0
    """Of those, DagCronWorkflows."""
    pools: int = 0
    """ExecutorPools checked (counted among `workflows`, as objects checked)."""
    bare_workflows: int = 0
    """Bare workflows (`idlegate simulate`'s format, a history's records: a mapping with a
    `stages` list, alone or in a list), checked as `simulate -w file` reads them."""
    invalid: int = 0
    """Of those, how many have at least one problem."""
    argo_jobs: list[ArgoLintJob] = field(default_factory=list)
    """The Argo workflows that map to a job (:mod:`idlegate.api.lint_argo`)."""
    argo_workflows: int = 0
    """Argo workflows checked (Workflow, WorkflowTemplate, ...): mapped, left to Argo (a
    note with a reason) or broken. Not among `workflows`, which are idlegate's objects."""
    airflow_jobs: list[AirflowLintJob] = field(default_factory=list)
    """The Airflow DAG exports that map to a job (:mod:`idlegate.api.lint_airflow`)."""
    airflow_dags: int = 0
    """Airflow DAG exports checked: mapped, left to Airflow (a note with a reason) or
    broken."""
    unreadable: set[str] = field(default_factory=set)
    """The files that could not be read or do not parse (each a problem): none of their
    objects is among the checked, so the summary names them, not ``0 invalid`` alone."""
    queue_files: int = 0
    """``--queues`` files checked, as `simulate --queues` reads them (and the queues the
    workflows name against them)."""

    @property
    def checked(self) -> int:
        """Objects checked, of every kind lint checks (files of the queues included)."""
        kinds = (self.workflows, self.argo_workflows, self.airflow_dags, self.bare_workflows)
        return sum(kinds) + self.queue_files

    @property
    def ok(self) -> bool:
        """True when nothing would be refused and something was checked: inputs with
        nothing to check (a wrong file or folder, a document of other kinds) are no pass."""
        return not self.problems and self.checked > 0

    def summary(self) -> str:
        """One line: what was checked and what was found."""
        if self.empty:
            skipped = sum(1 for n in self.notes if n.document is not None and not n.reason)
            held = f" ({skipped} document(s) of other kinds)" if skipped else ""
            return (
                f"nothing to check in {self.files} file(s){held}: give files that hold a "
                "DagWorkflow, DagCronWorkflow, ExecutorPool, bare workflow, queues file, "
                "Argo workflow or Airflow DAG export"
            )
        plain = self.workflows - self.cron_workflows - self.pools
        counted = {
            "DagWorkflow": plain,
            "DagCronWorkflow": self.cron_workflows,
            "ExecutorPool": self.pools,
            "Argo workflow": self.argo_workflows,
            "Airflow DAG": self.airflow_dags,
            "bare workflow": self.bare_workflows,
            "queues file": self.queue_files,
        }
        kinds = [f"{n} {kind}(s)" for kind, n in counted.items() if n] or ["0 workflow(s)"]
        what = kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} and {kinds[-1]}"
        text = f"{what} in {self.files} file(s): {self.invalid} invalid"
        if self.unreadable:
            n = len(self.unreadable)
            text += f", {n} file{'' if n == 1 else 's'} unreadable"
        if self.problems:
            text += f", {len(self.problems)} problem(s)"
        if self.argo_workflows:
            text += f"; of the Argo workflows, {len(self.argo_jobs)} map to jobs"
        left = sum(1 for n in self.notes if n.reason not in (None, *OWN) and not n.airflow)
        if left:
            text += f", {left} are left to Argo (the notes say why)"
        if self.airflow_dags:
            text += f"; of the Airflow DAGs, {len(self.airflow_jobs)} map to jobs"
        left_airflow = sum(1 for n in self.notes if n.reason and n.airflow)
        if left_airflow:
            text += f", {left_airflow} are left to Airflow (the notes say why)"
        # checked documents with a reason are not among the skipped
        skipped = sum(1 for n in self.notes if n.document is not None and not n.reason)
        return text + (f"; {skipped} other document(s) skipped" if skipped else "")

    def lines(self) -> list[str]:
        """The report as ``idlegate lint`` prints it: the mapped jobs, the problems, the
        notes, the summary; not the summary of inputs with nothing to check, which
        ``idlegate lint`` raises as its error (`empty`)."""
        jobs = [line for job in [*self.argo_jobs, *self.airflow_jobs] for line in job.lines()]
        notes = [f"note: {note}" for note in self.notes]
        summary = [] if self.empty else [self.summary()]
        return [*jobs, *map(str, self.problems), *notes, *summary]

    @property
    def empty(self) -> bool:
        """True when the inputs held nothing to check and nothing was refused: a wrong file
        or folder, which is the user's error, not a report."""
        return not self.checked and not self.problems

    def to_json(self) -> dict[str, Any]:
        """Machine output: counts, problems (with their rendered line as ``text``), notes."""
        return {
            "valid": self.ok,
            "files": self.files,
            "workflows": self.workflows,
            "argo_workflows": self.argo_workflows,
            "bare_workflows": self.bare_workflows,
            "invalid": self.invalid,
            "unreadable": len(self.unreadable),
            "problems": [{**asdict(p), "text": str(p)} for p in self.problems],
            "notes": [{**asdict(n), "text": str(n)} for n in self.notes],
            "argo": [job.to_json() for job in self.argo_jobs],
            "airflow_dags": self.airflow_dags,
            "queue_files": self.queue_files,
            "airflow": [job.to_json() for job in self.airflow_jobs],
        }
