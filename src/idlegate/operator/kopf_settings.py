"""kopf's settings for the operator: its watches, retries and storages, and its log filter.

kopf keeps its bookkeeping (handler progress, the last handled spec) in annotations under
`ANNOTATION_PREFIX`, never in the status, which is the operator's own and schema-pruned.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from idlegate.api.kinds import GROUP
from idlegate.api.settings import Settings
from idlegate.operator.kopf_retries import RetryForever
from idlegate.operator.metrics import Metrics

ANNOTATION_PREFIX = "idlegate.io"
"""kopf's own annotations (handler progress, last handled spec) use this prefix."""
DIFF_BASE_KEY = "last-handled-configuration"
"""The annotation (under `ANNOTATION_PREFIX`) of the last handled spec."""


def configure_kopf(settings: kopf.OperatorSettings, ours: Settings, metrics: Metrics) -> None:
    """kopf's settings as its documentation advises for this operator (its retries
    counted in `metrics`)."""
    # watches: the server closes each after server_timeout; a silent connection is given up
    # after client_timeout (without them a stuck watch is never noticed)
    settings.watching.server_timeout = ours.watch_server_timeout
    settings.watching.client_timeout = ours.watch_client_timeout
    settings.watching.connect_timeout = min(60.0, ours.watch_server_timeout)
    settings.networking.request_timeout = max(ours.api_timeout, 30.0)
    # retried for ever: kopf's default gives up after ~54 s and the operator would exit
    backoffs = RetryForever(ours.watch_retry_cap, metrics.watch_restarts.inc)
    settings.networking.error_backoffs = backoffs
    # kopf's bookkeeping in annotations only: the status is ours (and schema-pruned)
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=ANNOTATION_PREFIX
    )
    settings.persistence.diffbase_storage = OursOnlyDiffBase(
        prefix=ANNOTATION_PREFIX, key=DIFF_BASE_KEY
    )
    # our Events are posted by the operator itself; kopf posts only its own warnings
    settings.posting.level = logging.WARNING


class OursOnlyDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff base of our own kinds only (`GROUP`), an empty one of any other.

    kopf builds an object's essence (a deep copy of its body without its status) at every
    watch event of every kind, for the changing handlers (create, update, resume) to diff
    against; ours are all on our own kinds (`build_registry`, checked by a test). A task
    pod's essence cost 86 us of CPU at each of its five events, 3 us now (`python -m
    benchmarks.kopf_floor --essence`)."""

    def build(
        self, *, body: kopf.Body, extra_fields: Any = None
    ) -> kopf.BodyEssence:  # (kopf's own signature)
        if not str(body.get("apiVersion", "")).startswith(f"{GROUP}/"):
            return kopf.BodyEssence()
        return super().build(body=body, extra_fields=extra_fields)


def quiet_event_handlers(record: logging.LogRecord) -> bool:
    """A log filter without kopf's "Handler 'pod-events' succeeded." lines (one per watch
    event) and "Handler 'admit' is cancelled." (one per workflow a standby stops with): noise."""
    message = record.getMessage()
    return not message.startswith("Handler '") or not message.endswith(
        ("-events' succeeded.", "is cancelled. Will escalate.")
    )
