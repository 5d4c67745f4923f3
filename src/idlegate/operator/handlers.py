"""The kopf handlers: thin, level-triggered, and all in one registry per operator.

* DagWorkflow **create** and **resume** -> admit the workflow (idempotent: a workflow the
  bridge knows is skipped; its pods are read first, so a restart never duplicates them).
  Retries use ``kopf.TemporaryError(delay=...)``; what retrying cannot fix raises
  ``kopf.PermanentError``. An invalid spec is not an error of the handler: the workflow
  is marked ``Invalid`` (status, condition, Event) and the handler succeeds.
* DagWorkflow **update of spec** -> re-validate an invalid workflow, refuse to change a
  running one (a Warning Event).
* DagWorkflow **events** -> a deleted (or foreground-deleting) workflow leaves the state
  machine. No finalizer: the pods are owned by the workflow and garbage-collected with
  it, the operator's only clean-up is in memory, and a workflow deleted while the
  operator is down simply is not there when it rebuilds. A finalizer would only block
  deletions whenever the operator is not running.
* Pod **events** (pods labelled ``idlegate.io/workflow``) -> the bridge reads the pod as
  it is now; the same state twice is a no-op.

Handlers return nothing: kopf would store results in ``status.<handler-id>``, which the
CRD's schema prunes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import kopf

from idlegate.operator.admission import AdmitLaterError
from idlegate.operator.crd import GROUP, PLURAL, VERSION
from idlegate.operator.kube import ApiError
from idlegate.operator.pods import LABEL_WORKFLOW
from idlegate.operator.settings import Settings

if TYPE_CHECKING:
    from idlegate.operator.main import Operator

ANNOTATION_PREFIX = "idlegate.io"
"""kopf's own annotations (handler progress, last handled spec) use this prefix."""
RETRY_DELAY = 5.0


def configure_kopf(settings: kopf.OperatorSettings, ours: Settings) -> None:
    """kopf's settings as its documentation advises for this operator."""
    # watches: the server closes each after server_timeout; a silent connection is given up
    # after client_timeout (without them a stuck watch is never noticed)
    settings.watching.server_timeout = ours.watch_server_timeout
    settings.watching.client_timeout = ours.watch_client_timeout
    settings.watching.connect_timeout = min(60.0, ours.watch_server_timeout)
    settings.networking.request_timeout = max(ours.api_timeout, 30.0)
    # kopf's bookkeeping in annotations only: the status is ours (and schema-pruned)
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=ANNOTATION_PREFIX
    )
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATION_PREFIX, key="last-handled-configuration"
    )
    # our Events are posted by the operator itself; kopf posts only its own warnings
    settings.posting.level = logging.WARNING


def plain(value: Any) -> Any:
    """kopf's read-only views of a body as plain dicts and lists (what the bridge reads)."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _temporary(exc: Exception) -> kopf.TemporaryError:
    return kopf.TemporaryError(str(exc), delay=RETRY_DELAY)


def build_registry(operator: Operator) -> kopf.OperatorRegistry:
    """A fresh registry with the operator's handlers (one per operator instance)."""
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure_kopf(settings, operator.settings)
        try:
            await operator.start()
        except ApiError as exc:
            if exc.retryable:
                raise _temporary(exc) from exc
            raise kopf.PermanentError(f"cannot read the cluster's state: {exc}") from exc

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        await operator.stop()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return operator.connection_info()

    @kopf.on.probe(registry=registry, id="idlegate")
    async def probe(**_: Any) -> dict[str, Any]:
        return operator.summary()

    @kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry, id="admit")
    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry, id="admit")
    async def admit(body: kopf.Body, **_: Any) -> None:
        try:
            await operator.bridge.admit_from_api(plain(body))
        except AdmitLaterError as exc:
            raise _temporary(exc) from exc
        except ApiError as exc:
            if exc.retryable or exc.status == 409:
                raise _temporary(exc) from exc
            raise kopf.PermanentError(f"cannot admit the workflow: {exc}") from exc

    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry, id="spec", field="spec")
    async def spec_changed(body: kopf.Body, **_: Any) -> None:
        try:
            await operator.bridge.spec_changed(plain(body))
        except (AdmitLaterError, ApiError) as exc:
            raise _temporary(exc) from exc

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry, id="workflow-events")
    async def workflow_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        meta = body.get("metadata") or {}
        if type == "DELETED" or meta.get("deletionTimestamp"):
            operator.bridge.forget(meta.get("namespace", ""), meta.get("name", ""), meta.get("uid"))

    @kopf.on.event(
        "v1", "pods", registry=registry, id="pod-events", labels={LABEL_WORKFLOW: kopf.PRESENT}
    )
    async def pod_event(type: str | None, event: kopf.RawEvent, **_: Any) -> None:
        operator.bridge.observe_pod(event["object"], deleted=type == "DELETED")

    return registry
