"""A workflow whose pods another controller creates (Argo's, Airflow's) as a job kind of the
core (:mod:`.protocol`): its job and its pods' pairing with the executors are
:class:`idlegate.operator.kinds.pairing.PodPairing`'s (pure); as a kind it says each pairing to
the API (a gate removal recording the executor), and a remap's or a move's outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from idlegate.api.eviction import NEVER_EXTERNAL
from idlegate.api.external_pods import ExternalPod
from idlegate.api.forecast_status import Forecast
from idlegate.api.status import SlotState
from idlegate.api.task_pods import Owner
from idlegate.errors import DemandTooLargeError, IdlegateError
from idlegate.operator.core.evictions import Evictions
from idlegate.operator.core.intents import Confirmed, EvictPod, Outbox, Refused, RemoveGate
from idlegate.operator.core.tracking import timer_key
from idlegate.operator.kinds.pairing import PodPairing, Release
from idlegate.operator.kinds.protocol import JobKind, Pool
from idlegate.sim.external import Mapped
from idlegate.sim.forecast import Span
from idlegate.sim.protocol import Launch

log = logging.getLogger(__name__)


class ExternalJob(PodPairing, JobKind):
    """One workflow's job in a cluster and its pods (`PodPairing`), as a
    :class:`~.protocol.JobKind`: the core only releases its pods (and says why on the
    workflow, `owner`); its idle slots persist nothing (a restart maps it again from its
    controller's state) and its controller deletes its pods."""

    stoppable = False  # (never evicted: `evict` says why)
    forecast_made: Forecast | None = None
    """Its job's first forecast made while it waited (`operator.forecasting.book`, as a
    DagWorkflow's): an Argo Workflow's history record keeps it, so that a restarted pool's
    calibration scores it as the live pool did."""
    forecast_replayed: tuple[Span, Span] | None = None
    """The replays' start and finish of `forecast_made`, before the calibration widened them."""

    # -- as a job kind -----------------------------------------------------------------------

    def remap(self, pool: Pool, mapped: Mapped) -> None:
        """Its controller settled more of it: the job `mapped` replaces the current one."""
        job = self.job
        try:
            releases = self.remapped(pool.cluster, mapped, pool.now())
        except DemandTooLargeError:  # (never runs in the pool: its feature refuses it)
            pool.drop(self)
            raise
        except IdlegateError as exc:
            where = f"{self.owner.namespace}/{self.owner.name}"
            log.warning("%s no longer maps (%s): kept as it was.", where, exc)
            return
        if self.job is not job:  # a new job: its idle slots' timers are set under its indexes
            for stage in job.stages:
                if stage.idle_until is not None:
                    pool.intents.cancel_timer(timer_key(self.owner, stage.index))
        self._say(pool, releases)
        for pod in self.take_unplaced():
            why = "its task is no stage of the job idlegate mapped"
            pool.intents.add(unscheduled(self.owner, pod.name, why))

    def enter(self, pool: Pool) -> bool:
        """Moved in from a pool that changed or went (`Moved`); False if a stage of it
        could never fit this pool (it is in none: its feature refuses it at its next
        event, as a new one)."""
        try:
            releases = self.moved(pool.cluster, pool.now())
        except DemandTooLargeError as exc:
            self.active = False
            where = f"{self.owner.namespace}/{self.owner.name}"
            log.warning("%s cannot move to pool %s: %s", where, pool.metrics.pool, exc)
            return False
        self._say(pool, releases)
        return True

    def observe(self, pool: Pool, pod: ExternalPod, *, deleted: bool = False) -> None:
        # (a pod deleted before it ended comes as Failed: its executor is free; the core
        # runs a round after each of its kind's observations, `Observed`)
        self._say(pool, self.seen(pool.cluster, pod, pool.now()))

    def launched(self, pool: Pool, stage: int, launches: list[Launch], rule: str) -> None:
        self._say(pool, self.paired(launches))

    def adopted(self, pool: Pool, launch: Launch, token: Any) -> None:
        self._say(pool, self.adopt(pool.cluster, [(launch, token)], pool.now()))

    def refused(self, pool: Pool, outcome: Refused) -> None:
        refused_release(pool.intents, outcome)

    # (its slots persist nothing, its controller deletes its pods, none of its pods is
    # stopped: see the class docstring)
    def idle_started(self, pool: Pool, stage: int, slot: SlotState) -> None: ...
    def idle_ended(self, pool: Pool, stage: int) -> None: ...
    def confirmed(self, pool: Pool, outcome: Confirmed) -> None: ...
    def dropped(self, pool: Pool) -> None: ...
    def unfit_changed(self, pool: Pool) -> None: ...
    def evicted(
        self, pool: Pool, intent: EvictPod, outcome: Confirmed | Refused
    ) -> tuple[None, None]:
        return None, None

    def evict(self, pool: Pool, stage: int, executor: int, evictions: Evictions) -> str:
        return NEVER_EXTERNAL

    def pod_on(self, stage: int, executor: int) -> tuple[None, str]:
        return None, ""  # (none of its pods is stopped: none is named to a stop)

    def _say(self, pool: Pool, releases: Iterable[Release]) -> None:
        """Remove each paired pod's gate, recording its executor on it."""
        for r in releases:
            host = None if r.executor is None else pool.cluster.host_of(r.executor)
            gate = RemoveGate(self.owner, r.stage, 0, 0, r.pod, r.executor, None, host=host)
            pool.intents.add(gate)


def unscheduled(owner: Owner, pod: str, why: str) -> RemoveGate:
    """The release of the gated `pod` of `owner` unscheduled (no stage takes it), logged
    with why."""
    log.warning("Released pod %s/%s unscheduled: %s.", owner.namespace, pod, why)
    return RemoveGate(owner, "", 0, 0, pod, None, None)


def refused_release(intents: Outbox, outcome: Refused) -> None:
    """A gate removal of a pod another controller made was refused: a Warning on its
    workflow, which goes on (the controller may delete or recreate the pod)."""
    intent = outcome.intent
    message = f"Cannot release pod {getattr(intent, 'name', '?')}: {outcome.message}"
    intents.event(intent.owner, "Warning", "PodError", message)
