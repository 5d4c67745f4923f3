"""Where in a manifest each of the operator's messages points: ``idlegate lint``'s field paths.

The operator reports one problem at a time in a DagWorkflow's ``Valid`` condition (one
message per check that fails; a message may list several fields, joined by ``"; "``).
:func:`split_message` splits such a message into one (field path, text) pair per field,
and locates the stage a DAG message names (``stage 'b' depends on 'x' …`` is
``spec.stages[1].dependsOn``); a message it cannot split is kept whole, so no wording of
the checks is lost.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_PATH = r"[A-Za-z_]\w*(?:\[\d+\]|\.[A-Za-z_]\w*)*"
_SPEC_PREFIX = "spec: "
_TEMPLATE_PREFIX = "invalid pod template: "
# (a DAG's problems, `sim.spec.check_dag`, each start "stage 'NAME'" or "stage name 'NAME'")
_SPEC_PARTS = re.compile(rf"; (?={_PATH}: |and \d+ more problem|stage (?:name )?')")
_SPEC_FIELD = re.compile(rf"^({_PATH}): (.*)$", re.S)
_TEMPLATE_PARTS = re.compile(r"; (?=spec\.stages\[\d+\]\.template|and \d+ more problem)")
# shape problems read "PATH must ...", namespace rules "PATH: ... is not allowed"
_TEMPLATE_FIELD = re.compile(r"^(spec\.stages\[\d+\]\.template\S*?):? (.*)$", re.S)
_NAMED_STAGE = re.compile(r"^stage (?:name )?'([^']+)'(.*)$", re.S)
_CYCLE = re.compile(r"^the dependencies form a cycle: ([^ ]+) ->")


def split_message(message: str, spec: Any) -> list[tuple[str | None, str]]:
    """(field path, text) pairs of one operator message; `spec` (the raw ``spec``) is used
    to find the index of a stage the message names. A message of unknown form is one pair
    with no field."""
    if message.startswith(_TEMPLATE_PREFIX):
        parts = _TEMPLATE_PARTS.split(message.removeprefix(_TEMPLATE_PREFIX))
        return [_match(_TEMPLATE_FIELD, p, "spec", "invalid pod template: ") for p in parts]
    if message.startswith(_SPEC_PREFIX):
        return [_spec_part(p, spec) for p in _SPEC_PARTS.split(message.removeprefix(_SPEC_PREFIX))]
    if message.startswith("the name "):
        return [("metadata.name", message)]
    named = _NAMED_STAGE.match(message)  # a gang larger than the pool
    if named and "is a gang" in named.group(2):
        return [(_stage_path(spec, named.group(1), "tasks"), message)]
    return [(None, message)]


_QUEUE_PLACE = re.compile(r"^(queues\S*): (.*)$", re.S)


def queue_place(problem: str) -> tuple[str | None, str]:
    """(field path, text) of a queues file's problem, which leads with its place
    (``queues[0][a].preemption.reclaim: …``, `idlegate.sim.queues.queue_problems`): lint
    says its place where it says a manifest's field, ``file[0] PLACE: text``."""
    found = _QUEUE_PLACE.match(problem)
    return (found.group(1), found.group(2)) if found else (None, problem)


def _match(pattern: re.Pattern[str], part: str, default: str, context: str) -> tuple[str, str]:
    found = pattern.match(part)
    return (found.group(1), found.group(2)) if found else (default, context + part)


def _spec_part(part: str, spec: Any) -> tuple[str | None, str]:
    found = _SPEC_FIELD.match(part)
    if found:
        return f"spec.{found.group(1)}", found.group(2)
    named = _NAMED_STAGE.match(part)
    if named:
        rest = named.group(2)
        if rest.startswith(" appears twice"):
            return _stage_path(spec, named.group(1), "name", occurrence=2), part
        return _stage_path(spec, named.group(1), "dependsOn"), part
    cycle = _CYCLE.match(part)
    if cycle:  # the first stage of the cycle depends on the next one: its dependsOn
        return _stage_path(spec, cycle.group(1), "dependsOn"), part
    return "spec", part


def _stage_path(spec: Any, name: str, leaf: str, occurrence: int = 1) -> str:
    """``spec.stages[i].<leaf>`` of the `occurrence`-th stage named `name`, else
    ``spec.stages``."""
    stages = spec.get("stages") if isinstance(spec, Mapping) else None
    seen = 0
    for i, stage in enumerate(stages if isinstance(stages, list) else []):
        if isinstance(stage, Mapping) and stage.get("name") == name:
            seen += 1
            if seen == occurrence:
                return f"spec.stages[{i}].{leaf}"
    return "spec.stages"
