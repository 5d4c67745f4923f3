"""``status.forecast``: when a waiting workflow is forecast to start and finish.

The one shape every writer (the operator, from the forecaster) and reader (the visibility
API, the dashboard, ``kubectl get -o yaml``) of a forecast shares, with its parser and
serializer. Times are RFC 3339 (UTC, as every timestamp of a status); each forecast time
comes with its 80 % interval ``[lo, hi]`` (lo ≤ time ≤ hi)::

    status:
      forecast:
        computedAt: "2026-11-27T03:00:00Z"   # when it was made (its age says how stale)
        position: 3                           # in its queue, 1 first (absent: not queued)
        start: "2026-11-27T03:04:10Z"
        startInterval: ["2026-11-27T03:02:00Z", "2026-11-27T03:07:30Z"]
        finish: "2026-11-27T03:15:00Z"
        finishInterval: ["2026-11-27T03:11:00Z", "2026-11-27T03:21:00Z"]

or, when it could not be computed (no history, a stage with no estimate, a policy that
raised), why, and never a made-up number::

    status:
      forecast:
        computedAt: "2026-11-27T03:00:00Z"
        unavailable: "stage 'load' has no duration estimate and no history"

Absent: no forecast yet (readers say so). A workflow that has started has no ``start``
interval left to forecast, nor a position, but keeps ``start``: when it started; one that
finished has none (the operator clears it as it ends: what happened is in ``startSummary``,
``finishSummary`` and ``completionTime``). `columns` gives ``kubectl get``'s START and
FINISH. The operator writes it by JSON merge patch, which keeps every key it omits: each key
a forecast lacks is written as null (`patch`), or the last one's stays beside it.

Pure: no clock, no I/O. Internally times are seconds since the epoch (floats).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from idlegate.api.status import ForecastState, json_names, with_nulls
from idlegate.errors import IdlegateError

UNAVAILABLE_REASON = "ForecastUnavailable"
"""The condition and Event reason of a workflow whose forecast cannot be computed."""


class ForecastFormatError(IdlegateError):
    """A ``status.forecast`` that is not of the module's shape."""


@dataclass(frozen=True, slots=True)
class Forecast:
    """A forecast start and finish, each with its 80 % interval (epoch seconds)."""

    computed_at: float
    start: float
    start_interval: tuple[float, float] | None
    """None: it had started when it was made (`start` is when), nothing of it is forecast."""
    finish: float
    finish_interval: tuple[float, float]
    position: int | None = None
    """1-based position in its queue when it was made; None: not queued (running)."""

    def __post_init__(self) -> None:
        for what, t, interval in (
            ("start", self.start, self.start_interval),
            ("finish", self.finish, self.finish_interval),
        ):
            if interval is None:
                continue
            lo, hi = interval
            if not lo <= t <= hi:
                raise ForecastFormatError(
                    f"the forecast {what} is outside its interval [{lo}, {hi}]; a forecast "
                    "time lies within its own 80 % interval"
                )
        if self.finish < self.start:
            raise ForecastFormatError("the forecast finish is before its start")
        if self.position is not None and self.position < 1:
            raise ForecastFormatError(f"position {self.position} is not 1 or more")


@dataclass(frozen=True, slots=True)
class Unavailable:
    """A forecast that could not be computed, and why (a sentence)."""

    computed_at: float
    reason: str


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(value: Any, field: str) -> float:
    if not isinstance(value, str):
        raise ForecastFormatError(f"status.forecast.{field} is {value!r}, not an RFC 3339 time")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ForecastFormatError(
            f"status.forecast.{field} is {value!r}, not an RFC 3339 time"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _interval(value: Any, field: str) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ForecastFormatError(f"status.forecast.{field} is {value!r}, not [lo, hi]")
    return _time(value[0], f"{field}[0]"), _time(value[1], f"{field}[1]")


def parse_forecast(status: Mapping[str, Any] | None) -> Forecast | Unavailable | None:
    """The forecast of a workflow's `status` (its ``forecast`` field); None if it has none.
    ForecastFormatError (a sentence) if the field is there but not of the module's shape."""
    found = (status or {}).get("forecast")
    if found is None:
        return None
    if not isinstance(found, Mapping):
        raise ForecastFormatError(f"status.forecast is {found!r}, not a mapping")
    computed = _time(found.get("computedAt"), "computedAt")
    if found.get("unavailable") is not None:  # (a null: removed, as a merge patch reads it)
        reason = found["unavailable"]
        if not isinstance(reason, str) or not reason:
            raise ForecastFormatError("status.forecast.unavailable is not a sentence")
        return Unavailable(computed, reason)
    position = found.get("position")
    if position is not None and (not isinstance(position, int) or isinstance(position, bool)):
        raise ForecastFormatError(f"status.forecast.position is {position!r}, not a number")
    interval = found.get("startInterval")
    return Forecast(
        computed_at=computed,
        start=_time(found.get("start"), "start"),
        start_interval=None if interval is None else _interval(interval, "startInterval"),
        finish=_time(found.get("finish"), "finish"),
        finish_interval=_interval(found.get("finishInterval"), "finishInterval"),
        position=position,
    )


def dump_forecast(forecast: Forecast | Unavailable) -> dict[str, Any]:
    """The ``status.forecast`` of `forecast` (what `parse_forecast` reads back; times are
    written to the second)."""
    if isinstance(forecast, Unavailable):
        return {"computedAt": rfc3339(forecast.computed_at), "unavailable": forecast.reason}
    out: dict[str, Any] = {"computedAt": rfc3339(forecast.computed_at)}
    if forecast.position is not None:
        out["position"] = forecast.position
    out["start"] = rfc3339(forecast.start)
    if forecast.start_interval is not None:
        out["startInterval"] = [rfc3339(t) for t in forecast.start_interval]
    out["finish"] = rfc3339(forecast.finish)
    out["finishInterval"] = [rfc3339(t) for t in forecast.finish_interval]
    return out


FORECAST_KEYS = json_names(ForecastState)
"""Every key of a ``status.forecast``."""


def patch(forecast: Forecast | Unavailable) -> dict[str, Any]:
    """The ``status.forecast`` of `forecast` as a merge patch writes it over the last one:
    every key it lacks is null, so that none of the last one's stays (an ``unavailable``
    beside times, a position or a start interval once it started)."""
    return with_nulls(dump_forecast(forecast), FORECAST_KEYS)


FORECAST_MARK = "~"
"""What marks a forecast time in a printer column (`columns`), before what happened."""


def columns(
    forecast: Forecast | Unavailable | None, started: float | None, finished: float | None
) -> tuple[str | None, str | None]:
    """A DagWorkflow's START and FINISH as ``kubectl get`` prints them (``status.
    startSummary`` and ``finishSummary``, printer columns of type string): each what
    happened, as a UTC time, once it did (`started`: its first task's start; `finished`:
    its completion); before, the forecast's, marked ``~`` (``~2026-11-27T03:04:10Z``);
    ``unavailable`` when it cannot be forecast (why: the ForecastUnavailable condition);
    None with neither. Text, not ``type: date``: kubectl prints a date column as an age,
    and ``<invalid>`` for a time ahead."""

    def one(actual: float | None, which: str) -> str | None:
        if actual is not None:
            return rfc3339(actual)
        if isinstance(forecast, Unavailable):
            return "unavailable"
        if isinstance(forecast, Forecast):
            return FORECAST_MARK + rfc3339(getattr(forecast, which))
        return None

    return one(started, "start"), one(finished, "finish")


def forecast_fields(
    forecast: Forecast | Unavailable | None, started: float | None, finished: float | None
) -> dict[str, Any]:
    """A DagWorkflow's status fields of its forecast (`started`, `finished`: when its first
    task started and it finished, or None): ``forecast`` while it has not finished, null
    once it has (a merge patch's null clears it as it ends, so what is left is what
    happened), and the printer columns ``startSummary`` and ``finishSummary`` (`columns`).
    A merge patch: the keys of the last forecast that this one lacks are null (`patch`)."""
    out: dict[str, Any] = {}
    if finished is not None:
        out["forecast"] = None
    elif forecast is not None:
        out["forecast"] = patch(forecast)
    start, finish = columns(forecast, started, finished)
    if start is not None:
        out["startSummary"] = start
    if finish is not None:
        out["finishSummary"] = finish
    return out


def relative(t: float, now: float) -> str:
    """`t` as a time from `now` for people: ``in 4m``, ``2h ago``, ``now``."""
    d = t - now
    size = abs(d)
    if size < 1:
        return "now"
    if size < 60:
        text = f"{size:.0f}s"
    elif size < 3600:
        text = f"{size / 60:.0f}m"
    elif size < 86400:
        text = f"{size / 3600:.1f}h"
    else:
        text = f"{size / 86400:.1f}d"
    return f"in {text}" if d > 0 else f"{text} ago"


def describe(
    forecast: Forecast | Unavailable | None, now: float, started: bool | None = None
) -> str:
    """One line for a table or a page: ``start in 4m (in 2m – in 7m), finish in 15m (in 11m
    – in 21m)``. `started`: whether the workflow has started (False: it waits to start;
    True: it runs; None: not known, or it ended, and the times are said as forecast). A
    workflow not started cannot start, nor one not ended finish, before `now`: a time of
    an old forecast (one made before an outage) that lies in the past is said to be due,
    an interval's end in the past is said as ``now``, and the forecast's age is added, so
    that no line reads "finish in 3m (15s ago – in 7m)" of a workflow that waits."""
    if forecast is None:
        return "no forecast yet"
    if isinstance(forecast, Unavailable):
        return f"forecast unavailable: {forecast.reason}"
    stale = False

    def span(t: float, lo: float, hi: float, pending: bool) -> str:
        nonlocal stale
        if pending and hi < now - 1:
            stale = True
            return f"overdue (its 80 % interval ended {relative(hi, now)})"
        if pending and t < now - 1:
            stale = True
            return f"due {relative(t, now)} (80 %: by {relative(hi, now)})"
        if pending and lo < now:
            stale = stale or lo < now - 1
            lo = now
        return f"{relative(t, now)} ({relative(lo, now)} – {relative(hi, now)})"

    if forecast.start_interval is None:  # (made once it had started: when it did)
        start = f"started {relative(forecast.start, now)}"
    else:
        start = "start " + span(forecast.start, *forecast.start_interval, pending=started is False)
    finish = span(forecast.finish, *forecast.finish_interval, pending=started is not None)
    said = f"{start}, finish {finish}"
    return f"{said}; forecast made {relative(forecast.computed_at, now)}" if stale else said
