"""How many measured task durations a stage's status keeps: the operator's setting and
``lint``'s option read these without importing the status model (`api.status`)."""

MAX_MEASURED = 64
"""Most measured task durations a stage's status keeps (`Settings.history_samples`'s bound)."""
HISTORY_SAMPLES = 20
"""Measured task durations a stage's status keeps unless the operator is told otherwise
(`Settings.history_samples`' default, ``--history-samples``)."""
