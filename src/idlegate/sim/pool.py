"""The pool's resources in the cluster state machine: capacity, free amounts, demands.

The part of `idlegate.sim.cluster.Cluster` that keeps the resource rule of its header
(a task starts only where its demand fits the free capacity): `Cluster` derives from
`PoolResources`, which holds the pool's capacity, its free amounts of each resource it
counts beyond pods (pods are the cluster's executors) and each stage's `Need`.
"""

from __future__ import annotations

from idlegate.errors import DemandTooLargeError, IdlegateError
from idlegate.sim.protocol import Job, Need
from idlegate.sim.resources import MILLI, ResourceVector


class PoolResources:
    """Capacity and free amounts of a pool's resources (see the module docstring)."""

    num_executors: int
    free_executors: int

    def _init_resources(self, resources: ResourceVector | None) -> None:
        num_executors = self.num_executors
        resources = resources or ResourceVector()
        if "pods" in resources and resources["pods"] != num_executors * MILLI:
            raise IdlegateError(
                f"the pool's resources say pods={resources.units('pods')}, but it has "
                f"{num_executors} executors; give the pods once (the executors are its pods)"
            )
        self.capacity = ResourceVector({**resources, "pods": num_executors * MILLI})
        """The pool's capacity: its executors as `pods`, and its other resources."""
        self.resource_names: tuple[str, ...] = tuple(n for n in resources if n != "pods")
        """The resources beyond pods the pool counts (empty: a pods-only pool)."""
        self._free_r = [self.capacity[n] for n in self.resource_names]
        """Free milli-units of each of `resource_names`, in order (below 0 after a restore
        of more than the pool holds)."""
        self._held = [0.0] * len(self.resource_names)
        """Milli-unit-seconds of each of `resource_names` held by tasks that ended."""

    @property
    def free_resources(self) -> ResourceVector:
        """The free capacity: free executors as `pods`, and the pool's other resources."""
        free = zip(self.resource_names, self._free_r, strict=True)
        return ResourceVector({"pods": self.free_executors * MILLI, **dict(free)})

    @property
    def used_resources(self) -> ResourceVector:
        """What the running tasks request of the pool's resources beyond pods."""
        used = zip(self.resource_names, self._free_r, strict=True)
        return ResourceVector({n: self.capacity[n] - free for n, free in used})

    def _set_needs(self, job: Job) -> None:
        """Give each stage its demand on the pool's resources (`Stage.need`), after
        checking that it can ever fit."""
        names, capacity = self.resource_names, self.capacity
        for stage in job.stages:
            demand = stage.demand.restricted(names)
            if not demand:
                continue
            need = demand * stage.tasks if stage.gang else demand
            if not need.fits(capacity):
                over = need.too_large(capacity)
                each = f" ({stage.tasks} tasks of {demand.format()})" if stage.gang else ""
                raise DemandTooLargeError(
                    f"stage {stage.name!r} of {job.name} needs {need.format()} at once{each}, "
                    f"more {' and '.join(over)} than the pool has (its resources: "
                    f"{capacity.restricted(names).format()}), so it could never start; lower "
                    "the stage's requests or give the pool more",
                    need,
                )
            stage.need = Need(tuple(demand[n] for n in names), self._free_r)

    def _held_for(self, need: Need, seconds: float) -> None:
        """Count a task of demand `need` that held it for `seconds`."""
        held = self._held
        for i, n in enumerate(need.amounts):
            held[i] += n * seconds

    def _give_back(self, need: Need, tasks: int) -> None:
        """Return the resources of `tasks` tasks of demand `need` (negative: take them)."""
        free = self._free_r
        for i, n in enumerate(need.amounts):
            free[i] += n * tasks
