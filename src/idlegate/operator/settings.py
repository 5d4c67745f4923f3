"""The operator's settings: one typed object, filled from the command line (or by tests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from idlegate.errors import IdlegateError
from idlegate.operator.clock import Clock, WallClock
from idlegate.sim.protocol import Scheduler


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything `idlegate operator` can be told. Validated on construction."""

    pool_size: int
    """Executors: task pods that may run at once over all workflows (``--pool-size``)."""

    policy: str | None = None
    """The scheduler, as a spec of `idlegate.policy.make_scheduler` (``fair``,
    ``analytic:fair``, ``learned:PATH.onnx``; a bare ``PATH.onnx`` too); None picks the
    bundled ONNX policy, or ``fair`` with a warning if it is missing or broken."""

    scheduler: Scheduler | None = None
    """A scheduler object to use instead of `policy` (for tests and embedding)."""

    namespaces: tuple[str, ...] = ()
    """Namespaces to serve (``--namespace``, repeatable); empty: all namespaces."""

    standalone: bool = True
    """Run kopf without peering (``--standalone``): one replica owns the executor pool."""

    metrics_port: int | None = 9090
    """Port of the Prometheus endpoint ``/metrics``; None: no endpoint."""

    health_port: int | None = 8080
    """Port of the health endpoint ``/healthz`` (kopf's liveness probe); None: none."""

    listen_host: str = "0.0.0.0"
    """Address the metrics and health endpoints listen on."""

    kubeconfig: Path | None = None
    """A kubeconfig file; None: the in-cluster service account, else ``$KUBECONFIG``
    or ``~/.kube/config``."""

    watch_server_timeout: float = 300.0
    """Seconds the API server keeps one watch request open (kopf's
    ``settings.watching.server_timeout``); kopf then re-lists and re-watches."""

    watch_client_timeout: float = 330.0
    """Seconds after which the operator gives up a watch request that went silent (kopf's
    ``settings.watching.client_timeout``); above `watch_server_timeout`."""

    gated_pods_per_stage: int | None = None
    """Task pods created ahead (gated) for a runnable stage; the rest are created as the
    stage's tasks are released. None: the pool size."""

    api_concurrency: int = 8
    """API requests the operator runs at once (its own writes; kopf's watches aside)."""

    api_timeout: float = 30.0
    """Seconds before one API request of the operator's own is given up and retried."""

    retry_delays: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
    """Back-off between retries of a failed API write (the last one repeats)."""

    status_interval: float = 1.0
    """Wall-clock seconds over which changes of a workflow's task counts are batched into
    one status write; phase changes and idle slots are written at once. 0: every change."""

    max_events_per_workflow: int = 30
    """Distinct Events one workflow gets; further messages are folded into one Event per
    type and reason (``(combined from similar events): ...``). Repeats of an Event only
    raise its ``count``."""

    event_interval: float = 5.0
    """Wall-clock seconds between two updates (count, lastTimestamp) of one repeated Event;
    repetitions in between are written with the next update. 0: every repetition."""

    seed: int = 0
    """Seed of the scheduler's random generator (for policies that sample)."""

    component: str = "idlegate-operator"
    """The Events' source and reporting component."""

    clock: Clock = field(default_factory=WallClock)
    """Where time comes from (tests pass an accelerated or fake clock)."""

    def __post_init__(self) -> None:
        if isinstance(self.pool_size, bool) or not isinstance(self.pool_size, int):
            raise IdlegateError(f"the pool size must be a whole number, got {self.pool_size!r}")
        if self.pool_size < 1:
            raise IdlegateError(
                f"the pool size must be at least 1 task pod, got {self.pool_size}; "
                "pass --pool-size N with N >= 1"
            )
        for name in ("metrics_port", "health_port"):
            port = getattr(self, name)
            if port is not None and not 0 <= port <= 65535:
                raise IdlegateError(f"{name.replace('_', '-')} {port} is not a TCP port (0-65535)")
        if self.gated_pods_per_stage is not None and self.gated_pods_per_stage < 0:
            raise IdlegateError("gated pods per stage cannot be negative")
        if self.api_concurrency < 1:
            raise IdlegateError("the operator needs at least 1 concurrent API request")
        if not 0 < self.watch_server_timeout < self.watch_client_timeout:
            raise IdlegateError(
                f"the watch client timeout ({self.watch_client_timeout:g} s) must exceed the "
                f"server timeout ({self.watch_server_timeout:g} s), which must be positive"
            )
        if self.max_events_per_workflow < 1:
            raise IdlegateError("a workflow needs room for at least 1 Event")
        if self.event_interval < 0:
            raise IdlegateError("the Event update interval cannot be negative")
        if self.status_interval < 0:
            raise IdlegateError("the status interval cannot be negative")
        if not self.retry_delays or min(self.retry_delays) < 0:
            raise IdlegateError("retry delays must be a non-empty list of seconds >= 0")
        if len(set(self.namespaces)) != len(self.namespaces):
            raise IdlegateError(f"a namespace is given twice in {list(self.namespaces)}")

    @property
    def window(self) -> int:
        """Gated pods created ahead per runnable stage."""
        return self.pool_size if self.gated_pods_per_stage is None else self.gated_pods_per_stage
