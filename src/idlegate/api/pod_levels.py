"""The Pod Security Standards levels, apart from their checks (`api.podsecurity`): the
``lint`` command's option reads them without importing the checks (`idlegate.cli`)."""

from __future__ import annotations

from enum import StrEnum


class Level(StrEnum):
    """A Pod Security Standards level, from the least to the most restricted."""

    PRIVILEGED = "privileged"
    BASELINE = "baseline"
    RESTRICTED = "restricted"


DEFAULT_LEVEL = Level.BASELINE
"""The level of a namespace without the label (the operator's ``--pod-security``)."""
