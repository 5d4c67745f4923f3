"""ExecutorPools: a change rebuilds the pool's state machine; the status counts are
refreshed on kopf's timer (every `POOL_STATUS_SECONDS` of the operator's clock); a
deletion sends its workflows to wait. Each returns the status to write into `patch`."""

from __future__ import annotations

from typing import Any

import kopf

from idlegate.operator.runtime import Operator


async def pool_sync(
    operator: Operator, body: kopf.Body, meta: kopf.Meta, patch: kopf.Patch, **_: Any
) -> None:
    patch.status.update(await operator.pool_synced(body, meta))


async def pool_counts(
    operator: Operator, name: str, body: kopf.Body, patch: kopf.Patch, **_: Any
) -> None:
    patch.status.update(operator.pool_counts(name, body))


async def pool_event(operator: Operator, type: str | None, name: str, **_: Any) -> None:
    await operator.pool_seen(type, name)
