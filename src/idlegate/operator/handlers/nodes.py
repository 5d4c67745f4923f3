"""Nodes: kopf's index of them and their events, the room of the pools that follow them."""

from __future__ import annotations

from typing import Any

import kopf

from idlegate.operator.runtime import Operator


async def cluster_nodes(name: str, body: kopf.Body, **_: Any) -> Any:
    return {name: body}


async def node_event(operator: Operator, event: kopf.RawEvent, **_: Any) -> None:
    operator.node_seen(event)
