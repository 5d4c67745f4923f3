"""What the features of the kinds whose pods another controller creates (Argo's
:mod:`.argo`, Airflow's :mod:`.airflow`) share: what they use of the operator (`Host`) and
of its pools (`FeaturePools`, `FeaturePool`). The mutating webhook that gates those pods
at their creation is one kopf handler per kind (`idlegate.operator.handlers.pods.gate`),
each told which pods are its kind's and how to gate them
(``api.external_pods.with_our_gate`` behind each kind's own test); the server they share
is deploy/components/webhook's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from idlegate.api.settings import Settings
from idlegate.api.task_pods import Owner

if TYPE_CHECKING:
    from idlegate.operator.features.history import HistoryRecorder
    from idlegate.operator.lag.lag import Lag
    from idlegate.operator.metrics import Metrics


class FeaturePool(Protocol):
    """What the features use of the pool a workflow enters or is in (the edge's ``Bridge``,
    which `FeaturePools.join` gives): its entry (`handle`), its clock, settings and history."""

    @property
    def settings(self) -> Settings: ...
    def now(self) -> float: ...
    def handle(self, event: Any) -> None: ...
    @property
    def history(self) -> HistoryRecorder: ...


class FeatureTimers(Protocol):
    def arm(self, key: str, at: float, fire: Callable[[], Awaitable[None]]) -> None: ...


class FeaturePools(FeaturePool, Protocol):
    """What the features use of the operator's pools (the edge's ``Pools``): `join`, the
    one door of a new workflow into the pool it is placed in (NoPlaceError,
    AdmitLaterError, DemandTooLargeError); `holder`, the pool holding one; `handle`, each
    event to the pool holding its workflow; and what every pool shares: the writes (`carry`),
    the clock, the timers, the API's reads and the history sink."""

    @property
    def timers(self) -> FeatureTimers: ...
    @property
    def workflows(self) -> Mapping[Any, Any]: ...
    def join(
        self,
        owner: Owner,
        body: Mapping[str, Any],
        namespace: Mapping[str, Any] | None,
        mapped: Any,
        arrival: float,
        pods: Sequence[Any] = (),
        seen: Sequence[Any] = (),
    ) -> FeaturePool: ...
    def holder(self, key: tuple[str, str], kind: str) -> FeaturePool | None: ...
    def carry(self, outputs: Iterable[Any]) -> None: ...
    def held(self, kind: str) -> Mapping[tuple[str, str], Any]: ...
    def ended(self, uid: str) -> bool: ...
    async def pods(
        self, namespace: str | None, selector: str
    ) -> Sequence[Mapping[str, Any]] | None: ...
    async def list_objects(
        self, api_version: str, plural: str, namespace: str | None
    ) -> list[dict[str, Any]]: ...


class Host(Protocol):
    """What this module uses of the operator (:class:`idlegate.operator.runtime.Operator`)."""

    settings: Settings
    metrics: Metrics
    lag: Lag

    @property
    def pools(self) -> FeaturePools: ...
    @property
    def ready(self) -> bool: ...
    async def ready_pools(self) -> object: ...
    async def fresh_pools(self) -> tuple[object, bool]: ...
    def namespace(self, name: str) -> Mapping[str, Any] | None: ...

    notes: list[Callable[[], str | None]]
    restorers: list[Callable[[], Awaitable[Callable[[], None]]]]  # (`Operator.restorers`)
