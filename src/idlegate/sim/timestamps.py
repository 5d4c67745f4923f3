"""Timestamps as the API writes them: RFC 3339 in UTC, and back to float seconds.

The state machine counts plain float seconds; the status and the pods carry RFC 3339
strings (``metav1.Time``, second precision, or ``metav1.MicroTime``). These are the two
conversions, and how precise a timestamp the API server gave is.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def to_datetime(t: float) -> datetime:
    """Clock seconds as an aware UTC datetime (what the status stores)."""
    return datetime.fromtimestamp(t, UTC)


def stamp(t: float) -> str:
    """Clock seconds as the API writes a time, to the second: ``2024-01-01T00:00:00Z``."""
    return f"{to_datetime(t):%Y-%m-%dT%H:%M:%SZ}"


def micro_time(t: float) -> str:
    """`t` (epoch seconds) as the API's MicroTime (RFC 3339, microseconds, UTC)."""
    return f"{to_datetime(t):%Y-%m-%dT%H:%M:%S.%fZ}"


def timestamp_precision(value: str) -> float:
    """Seconds of precision of an RFC 3339 timestamp: 1 for the API server's usual
    ``2024-01-01T00:00:00Z`` (metav1.Time), 0 for one with a fraction (metav1.MicroTime)."""
    return 0.0 if "." in value else 1.0


def from_datetime(value: datetime | str) -> float:
    """An aware datetime, or an RFC 3339 string as the API server returns it, as seconds."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def parse_time(value: Any) -> float | None:
    """Epoch seconds of a Kubernetes timestamp (``2019-01-03T01:23:18Z``, or the datetime
    YAML reads it as); None if unset."""
    if not isinstance(value, datetime | str) or not value:
        return None
    try:
        return from_datetime(value)
    except ValueError:  # (a malformed one: unset)
        return None
