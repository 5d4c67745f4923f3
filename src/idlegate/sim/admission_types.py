"""What the admission, the legality rule and the policy's views read of a pool (`PoolState`),
so that they name the cluster by what they read of it rather than by its class: the cluster
(`idlegate.sim.cluster.Cluster`) imports them, and none of them imports it, so the
simulator's modules import in one direction (tests/test_layers.py counts the imports
under TYPE_CHECKING too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from idlegate.sim.orders import Order
from idlegate.sim.protocol import Job, Stage
from idlegate.sim.resources import ResourceVector


class PoolState(Protocol):
    """A pool at a question: its clock, jobs, free room and the rules of its fit (what
    `idlegate.sim.cluster.Cluster` is, read-only)."""

    now: float
    jobs: list[Job]
    order_key: str | None
    num_executors: int
    free_executors: int
    decisions: int
    beyond: list[tuple[Stage, Any]]

    @property
    def resource_names(self) -> Sequence[str]: ...

    @property
    def capacity(self) -> ResourceVector: ...

    @property
    def free_resources(self) -> ResourceVector: ...

    @property
    def used_resources(self) -> Mapping[str, int]: ...

    @property
    def follows_nodes(self) -> bool: ...

    def running_tasks(self) -> list[tuple[int, Stage, float]]: ...

    def running_newest(
        self, queues: set[int], now: float
    ) -> Iterator[tuple[float, int, Stage, bool]]: ...

    def running_oldest(self, queues: set[int]) -> Iterator[tuple[float, int, Stage]]: ...

    def rerun_of(self, executor: int) -> float | None: ...

    def stage_on(self, executor: int) -> Stage | None: ...

    def runs(self, executor: int, start: float) -> bool: ...

    def placed_nodes(self) -> tuple[Sequence[list[int]], Mapping[int, int]] | None: ...

    def reclaim_nodes(
        self,
    ) -> tuple[Sequence[list[int]], Callable[[int], int | None], list[list[int]]] | None: ...

    def free_executors_from(self, job: Job | None) -> int: ...

    def runnable_stages(self) -> list[Stage]: ...

    def why_unfit(self, stage: Stage) -> str | None: ...

    def never_fits(self, stage: Stage) -> bool: ...

    def fits_no_node(self, stage: Stage) -> str | None: ...

    def fork(self, only: Iterable[Job] | None = None) -> Any: ...

    def order(self, key: str, queue: int | None = None) -> Order: ...
