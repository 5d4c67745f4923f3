"""The one exception type that idlegate raises for problems a user can fix."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any


class IdlegateError(Exception):
    """A problem with the user's input or setup, stated as a sentence that says how to fix it.

    The CLI catches this type, prints the message on one line and exits non-zero;
    anything else escaping is a bug.
    """


class SpecError(IdlegateError):
    """A workflow specification is invalid (cycle, unknown dependency, bad value, ...)."""


class IllegalDecisionError(IdlegateError):
    """A scheduler returned a decision the cluster state machine cannot carry out."""

    decision: object = None
    """The illegal decision itself, when a scheduler's answer was (`Cluster.decide_once`)."""


class PolicyOutputError(IdlegateError):
    """A policy's outputs at a decision are not finite (NaN or infinite scores), so its
    decision would be arbitrary: the caller decides with a safe rule instead."""


class GangTooWideError(IdlegateError):
    """A gang stage has more tasks than the cluster has executors, so it could never start."""

    def __init__(self, message: str, tasks: int) -> None:
        super().__init__(message)
        self.tasks = tasks
        """The gang's tasks: the fewest executors it needs."""


class DemandTooLargeError(IdlegateError):
    """A stage's demand (a gang's: all its tasks together) exceeds its pool's capacity in
    some resource, so it could never start."""

    def __init__(self, message: str, demand: object, stage: str | None = None) -> None:
        super().__init__(message)
        self.demand = demand
        """What the stage needs at once (a `idlegate.sim.resources.ResourceVector`)."""
        self.stage = stage
        """The stage's name in its job, if known: where a mapping says it is."""


class UnknownNameError(IdlegateError):
    """A name given that its owner does not take (`reject_unknown`); the parts of the
    sentence are kept, so a caller that knows how the names were given (a command's
    flags) can say them so."""

    def __init__(self, owner: str, noun: str, unknown: str, accepted: list[str]) -> None:
        takes = f"it takes {', '.join(accepted)}" if accepted else f"it takes no {noun}s"
        super().__init__(f"{owner} has no {noun} {unknown!r}; {takes}")
        self.owner = owner
        self.noun = noun
        self.unknown = unknown
        """The first unknown name (sorted)."""
        self.accepted = accepted
        """Every name the owner takes, in its order."""

    def __reduce__(self) -> tuple[Any, ...]:
        # (a worker process's error crosses back pickled: by its parts, as it was made)
        return type(self), (self.owner, self.noun, self.unknown, self.accepted)


def reject_unknown(
    given: Iterable[str], accepted: Iterable[str], owner: str, *, noun: str = "parameter"
) -> None:
    """Raise UnknownNameError (an IdlegateError) if a name of `given` is not in `accepted`.

    The sentence names the first unknown name (sorted) and every accepted one, in the
    order given: ``"OWNER has no NOUN 'x'; it takes a, b, c"``. One shape for every
    option, parameter and setting check, so each reads the same to a user.
    """
    accepted = list(accepted)
    unknown = sorted(set(given) - set(accepted))
    if unknown:
        raise UnknownNameError(owner, noun, unknown[0], accepted)


def renamed(error: IdlegateError, names: Mapping[str, str]) -> IdlegateError:
    """`error` (a copy, of its type, with its attributes) with each name of `names` that
    stands as a word of its message replaced by its value: a setting said as the user gave
    it (``num_jobs`` as ``--jobs-count``). The copy calls no ``__init__``, so a type whose
    own takes other arguments (`GangTooWideError`, ``AirflowRefusal``) copies too."""
    message = str(error)
    for name, shown in names.items():
        message = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", shown, message)
    cls = type(error)
    out = cls.__new__(cls)
    out.__dict__.update(error.__dict__)
    out.args = (message,)
    return out
