"""A ``--queues`` file checked against the workflows that name its queues: the one check
`simulate --queues` and `lint` share, so that they agree on a file and say the same of
it (which workflow, which queue, which file)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from idlegate.errors import IdlegateError
from idlegate.sim.queues import QueueSpec

__all__ = ["check_named", "queue_problem"]


def queue_problem(
    queues: Sequence[QueueSpec], file: str, workflow: str, queue: str | None
) -> str | None:
    """What is wrong with `workflow` (its name, and where it is: ``'etl' of flows.yaml``)
    naming `queue` in a pool of the queues of `file`: a queue the file does not declare
    (`idlegate.sim.queues.queue_index` refuses it at the run). None when it declares it, or
    when the workflow names none (it joins the default queue)."""
    names = [q.name for q in queues]
    if queue is None or queue in names:
        return None
    return (
        f"workflow {workflow} names queue {queue!r}, which the queues file {file} does not "
        f"declare (its queues: {', '.join(names)}); declare it there, or name one of them"
    )


def check_named(
    queues: Sequence[QueueSpec], file: str, workflows: Iterable[tuple[str, str | None]]
) -> None:
    """IdlegateError for the first of `workflows` (each its name and where it is, and the
    queue it names) whose `queue_problem` there is."""
    for workflow, queue in workflows:
        problem = queue_problem(queues, file, workflow, queue)
        if problem is not None:
            raise IdlegateError(problem)
