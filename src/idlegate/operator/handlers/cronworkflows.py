"""DagCronWorkflows: synced on every change, forgotten when deleted (their runs' events:
:mod:`.workflows`)."""

from __future__ import annotations

from typing import Any

import kopf

from idlegate.operator.runtime import Operator


async def cron_sync(
    operator: Operator, body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> None:
    # (kopf's None namespace: a cluster-scoped resource; this is not)
    await operator.cron_synced(body, namespace or "", name)


async def cron_event(
    operator: Operator, type: str | None, namespace: str | None, name: str, **_: Any
) -> None:
    operator.cron_seen(type, namespace or "", name)
