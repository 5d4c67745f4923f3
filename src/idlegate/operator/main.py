"""The operator process: wiring the settings into kopf, the bridge, timers and metrics.

``idlegate operator --standalone --pool-size=8`` ends up in :func:`run`. Tests build an
:class:`Operator` and run ``build_registry(operator)`` with ``kopf.testing.KopfRunner``.
The process imports kopf, the kubernetes client, onnxruntime (for an ONNX policy) and the
simulator's state machine, never torch.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from idlegate.operator.decisions import RecordingScheduler, load_scheduler
from idlegate.operator.handlers import build_registry
from idlegate.operator.kube import (
    ApiError,
    KubeApi,
    KubernetesApi,
    connection_info,
    load_configuration,
)
from idlegate.operator.metrics import Metrics
from idlegate.operator.settings import Settings
from idlegate.operator.state import Bridge
from idlegate.operator.timers import IdleTimers

log = logging.getLogger(__name__)


class Operator:
    """One operator instance: its policy, metrics, timers and (once started) its bridge."""

    def __init__(self, settings: Settings, *, kube: KubeApi | None = None) -> None:
        self.settings = settings
        inner = settings.scheduler or load_scheduler(settings.policy)
        self.metrics = Metrics(settings.pool_size, str(getattr(inner, "name", inner)))
        self.scheduler = RecordingScheduler(inner, self.metrics)
        self.timers = IdleTimers(settings.clock)
        self._kube = kube
        self._owns_kube = kube is None
        self._configuration: Any = None
        self._bridge: Bridge | None = None
        self.metrics_port: int | None = None

    @property
    def configuration(self) -> Any:
        """The kubernetes client's configuration (credentials), loaded on first use."""
        if self._configuration is None:
            self._configuration = load_configuration(self.settings.kubeconfig)
        return self._configuration

    def connection_info(self) -> kopf.ConnectionInfo:
        """kopf's credentials: the same as the operator's own client."""
        return connection_info(self.configuration)

    @property
    def bridge(self) -> Bridge:
        if self._bridge is None:
            raise RuntimeError("the operator has not started yet")
        return self._bridge

    @property
    def kube(self) -> KubeApi:
        if self._kube is None:
            self._kube = KubernetesApi(
                self.configuration,
                concurrency=self.settings.api_concurrency,
                timeout=self.settings.api_timeout,
            )
        return self._kube

    async def start(self) -> None:
        """Start timers and metrics and rebuild the state (idempotent: kopf may retry it)."""
        s = self.settings
        self.timers.start()
        if self._bridge is None:
            self._bridge = Bridge(
                s, self.kube, self.scheduler, metrics=self.metrics, timers=self.timers
            )
        if s.metrics_port is not None and self.metrics_port is None:
            self.metrics_port = self.metrics.serve(s.metrics_port, s.listen_host)
            log.info("Metrics at http://%s:%d/metrics", s.listen_host, self.metrics_port)
        log.info(
            "Starting: pool of %d executors, policy %s, %s, clock %r.",
            s.pool_size,
            self.scheduler.name,
            f"namespaces {', '.join(s.namespaces)}" if s.namespaces else "all namespaces",
            s.clock,
        )
        await self.warn_missing_namespaces()
        await self.bridge.rebuild()

    async def warn_missing_namespaces(self) -> list[str]:
        """Log a warning for each ``--namespace`` that does not exist (a typo serves nothing,
        silently); returns them. The operator still serves them, should they be created."""
        wanted = self.settings.namespaces
        if not wanted:
            return []
        try:
            existing = set(await self.kube.list_namespaces())
        except ApiError as exc:
            log.info("Cannot list namespaces to check --namespace (%s); not checked.", exc)
            return []
        missing = [ns for ns in wanted if ns not in existing]
        for ns in missing:
            log.warning(
                "Namespace %r does not exist (yet): nothing there to serve until it is created; "
                "check --namespace (existing: %s).",
                ns,
                ", ".join(sorted(existing)[:10]) or "none",
            )
        return missing

    async def stop(self) -> None:
        """Drop timers and pending writes (the state to resume from is in the API)."""
        self.timers.shutdown()
        if self._bridge is not None:
            await self._bridge.actuator.close()
        self.metrics.stop()
        self.metrics_port = None
        if self._owns_kube and self._kube is not None:
            self._kube.close()
            self._kube = None

    def summary(self) -> dict[str, Any]:
        """The health probe's payload."""
        if self._bridge is None:
            return {"ready": False, "policy": self.scheduler.name}
        return self._bridge.summary()


def liveness_endpoint(settings: Settings) -> str | None:
    """kopf's health endpoint URL (``/healthz``), or None without a health port."""
    if settings.health_port is None:
        return None
    return f"http://{settings.listen_host}:{settings.health_port}/healthz"


class QuietEventHandlers(logging.Filter):
    """Drops kopf's "Handler 'pod-events' succeeded." lines: one per watch event, noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith("Handler '") and message.endswith("-events' succeeded."))


def run(settings: Settings, *, verbose: bool = False, debug: bool = False) -> None:
    """Run the operator in this process until it is stopped (SIGINT/SIGTERM)."""
    kopf.configure(verbose=verbose, debug=debug)
    if not (verbose or debug):
        logging.getLogger("kopf.objects").addFilter(QuietEventHandlers())
    operator = Operator(settings)
    kopf.run(
        registry=build_registry(operator),
        standalone=settings.standalone,
        clusterwide=not settings.namespaces,
        namespaces=list(settings.namespaces),
        liveness_endpoint=liveness_endpoint(settings),
    )
