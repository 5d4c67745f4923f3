"""Tasks beyond the pool, the operator's (`idlegate.sim.cluster`'s docstring says what
they are): the cluster's part that runs them, adopts them on free executors and forgets
them (`Beyond`, a base of `Cluster`; the simulator never has any)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from idlegate.errors import IllegalDecisionError
from idlegate.sim.protocol import Decision, Launch, Stage


class Beyond:
    """A cluster's tasks beyond the pool: `beyond`, oldest first, (stage, the driver's
    token) each, until an executor is its own."""

    num_executors: int
    free_executors: int
    beyond: list[tuple[Stage, Any]]
    check: Callable[[Decision], None]
    apply: Callable[[Decision, float], list[Launch]]
    idle_expired: Callable[[Stage, float], None]
    """The cluster's (`Cluster.check`, `apply`, `idle_expired`)."""

    @property
    def busy(self) -> int:
        """Tasks running: on executors of the pool, and beyond it."""
        return self.num_executors - self.free_executors + len(self.beyond)

    def run_beyond(self, stage: Stage, token: Any) -> None:
        """A task of `stage` (the driver's `token`) runs beyond the pool until an executor
        is its own (`adopt_beyond`)."""
        self.beyond.append((stage, token))

    def started_unasked(self, stage: Stage, now: float, token: Any) -> list[tuple[Launch, Any]]:
        """A task of `stage` started without a decision (its gate removed by someone else).

        It has started, so the stage's idle slot (if any) is over. It is launched on a free
        executor, as `adopt_beyond` launches one, or, with none free, runs beyond the pool
        (the answer is then empty).
        """
        self.idle_expired(stage, now)
        launched = self._adopt(stage, token, now)
        if launched is None:
            self.run_beyond(stage, token)
            return []
        return launched

    def adopt_beyond(self, now: float) -> list[tuple[Launch, Any]]:
        """Give free executors to the tasks running beyond the pool, oldest first.

        Each is launched on its stage with a cap of what the job holds plus what it needs
        (the policy's next decision sets its own): one executor, or for a gang every task
        it has left (the gang's other tasks beyond the pool first, then new ones, whose
        token is None: the driver starts them). A task whose gang does not fit waits.
        Returns each launch with its token.
        """
        adopted: list[tuple[Launch, Any]] = []
        for stage, token in list(self.beyond):
            if not self.free_executors:
                break
            if any(t is token for _, t in self.beyond):  # (not adopted with its gang)
                adopted += self._adopt(stage, token, now) or []
        return adopted

    def drop_beyond(self, token: Any) -> None:
        """The task `token` ended beyond the pool without being counted (it failed: its
        retry waits for a decision like any task)."""
        self.beyond = [(s, t) for s, t in self.beyond if t is not token]

    def _adopt(self, stage: Stage, token: Any, now: float) -> list[tuple[Launch, Any]] | None:
        need = stage.tasks - stage.launched if stage.gang else 1
        if need > self.free_executors:
            return None
        decision = Decision(stage, stage.job.held + need)
        try:
            self.check(decision)
        except IllegalDecisionError:
            return None
        launches = self.apply(decision, now)
        mates = [t for s, t in self.beyond if s is stage and t is not token]
        tokens = [token, *mates][: len(launches)]
        self.beyond = [(s, t) for s, t in self.beyond if not any(t is k for k in tokens)]
        return list(zip(launches, [*tokens, *[None] * (len(launches) - len(tokens))], strict=True))
