"""A per-job cap on running tasks, shared by the `argo` and `airflow` baselines.

Argo's `parallelism` and Airflow's `max_active_tasks` are the same brake: at most that
many of a job's tasks run at once. A job mapped from either carries its own on its spec;
a scheduler's option is the fallback. These read and check both.
"""

from __future__ import annotations

from idlegate.errors import IdlegateError
from idlegate.sim.protocol import Job


def spec_cap(job: Job, field: str, default: int | None = None) -> int | None:
    """The job's spec's `field` (a cap its mapping carried), else `default`."""
    own = getattr(job.dag.spec, field, None)
    return own if isinstance(own, int) else default


def checked_cap(name: str, value: int | None, unit: str) -> int | None:
    """`value` if it is None or a whole number >= 1; otherwise an error naming `name`."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise IdlegateError(f"{name} must be a whole number of {unit} >= 1, got {value!r}")
    return value
