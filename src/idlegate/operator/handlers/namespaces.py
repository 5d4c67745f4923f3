"""Namespaces: kopf's index of them (a workflow's Pod Security level and labels), which
kopf fills before any handler runs. Async: kopf hops a plain index to a thread."""

from __future__ import annotations

from typing import Any

import kopf


async def namespaces(name: str, body: kopf.Body, **_: Any) -> Any:
    return {name: body}
