"""The one exception type that idlegate raises for problems a user can fix."""


class IdlegateError(Exception):
    """A problem with the user's input or setup, stated as a sentence that says how to fix it.

    The CLI catches this type, prints the message on one line and exits non-zero;
    anything else escaping is a bug.
    """


class SpecError(IdlegateError):
    """A workflow specification is invalid (cycle, unknown dependency, bad value, ...)."""


class IllegalDecisionError(IdlegateError):
    """A scheduler returned a decision the cluster state machine cannot carry out."""
