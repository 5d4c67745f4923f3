"""How ``idlegate lint`` prints a mapped job, shared by its Argo and Airflow parts.

Both print a head line naming where the job came from and its counts, then one line per
live stage (its tasks, estimate, dependencies and whether it may be skipped); the
differences (Argo's parallelism, Airflow's priorities and tasks left to it) are added by
each part around these lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol


class LintStage(Protocol):
    """The fields of a mapped stage that a stage line shows."""

    @property
    def name(self) -> str: ...
    @property
    def tasks(self) -> int: ...
    @property
    def tasks_known(self) -> bool: ...
    @property
    def duration(self) -> float: ...
    @property
    def duration_source(self) -> object: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...
    @property
    def condition(self) -> object | None: ...


def head_line(
    file: str, document: int, item: int | None, what: str, counts: Mapping[str, int]
) -> str:
    """``file[document](.items[item]): <what> maps to N stages, M edges, K tasks``."""
    where = f"{file}[{document}]" + (f".items[{item}]" if item is not None else "")
    return (
        f"{where}: {what} maps to {counts['stages']} stages, "
        f"{counts['edges']} edges, {counts['tasks']} tasks"
    )


def stage_lines(
    stages: Iterable[LintStage], unknown: str, detail: Mapping[str, str] | None = None
) -> list[str]:
    """One line per stage; `unknown` stands for the count of a stage whose fan-out is not
    known yet, and `detail` (by stage name) is appended to its estimate."""
    out = []
    for stage in stages:
        count = f"{stage.tasks} task{'s' if stage.tasks != 1 else ''}"
        if not stage.tasks_known:
            count = unknown
        line = f"  {stage.name}: {count} x {stage.duration:g} s ({stage.duration_source})"
        line += (detail or {}).get(stage.name, "")
        if stage.depends_on:
            line += f" after {', '.join(stage.depends_on)}"
        if stage.condition is not None:
            line += f"; may be skipped ({stage.condition})"
        out.append(line)
    return out
