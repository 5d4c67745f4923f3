"""``status.firstForecast``: a DagWorkflow's first forecast, kept in its status.

The operator keeps the first forecast made while a workflow waited until the workflow starts
and ends, then scores it (`operator.forecasting.book`, "How right"). A DagWorkflow's is also
written into its status, once kept (`first_status`, with the rest of its status: the same
value each time, its ``startedAt`` added at its start), so that an operator restarted while
the workflow waits or runs reads it back as it rebuilds the pool (`restore_first`) and keeps
it again (`ForecastBook.note_arrivals`): its score goes to the metric, the calibration
and the history record as if no restart had happened (docs/research/forecasts.md, "After a
restart"). Argo Workflows and Airflow runs have none: idlegate writes nothing on them.

Times are the operator clock's, as every time of the status (which is the wall's in a
cluster), to the microsecond. Pure but for the Warning of one that cannot be read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from idlegate.api.forecast_status import FORECAST_MARK, Forecast
from idlegate.api.status import FirstForecastState
from idlegate.errors import IdlegateError, SpecError
from idlegate.sim.forecast import Span
from idlegate.sim.timestamps import from_datetime, to_datetime

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class First:
    """A DagWorkflow's first forecast as its status keeps it (``status.firstForecast``)."""

    made: Forecast
    replayed: tuple[Span, Span]
    """The replays' start and finish of `made`, before the calibration widened them."""
    started: float | None
    """When its first task started (None: not yet)."""


def first_status(
    made: Forecast, replayed: tuple[Span, Span], started: float | None
) -> dict[str, Any]:
    """A DagWorkflow's ``status.firstForecast``: its first forecast made while it waited,
    `made`, with the replays' intervals of it and its first start, if it started (what
    `parse_first` reads back; times to the microsecond, on the operator's clock as every
    time of its status, so that the restored score is the one the status's maker gives)."""
    start, finish = replayed
    assert made.start_interval is not None  # (made while it waited: `ForecastBook.take`)
    state = FirstForecastState(
        computed_at=to_datetime(made.computed_at),
        start=to_datetime(made.start),
        start_interval=[to_datetime(t) for t in made.start_interval],
        start_replayed=[to_datetime(start.low), to_datetime(start.high)],
        finish=to_datetime(made.finish),
        finish_interval=[to_datetime(t) for t in made.finish_interval],
        finish_replayed=[to_datetime(finish.low), to_datetime(finish.high)],
        started_at=None if started is None else to_datetime(started),
    )
    return state.model_dump(mode="json", by_alias=True, exclude_none=True)


def parse_first(status: Any) -> First | None:
    """The first forecast of a DagWorkflow's `status` (`first_status`'s); None: it has none.
    ValueError or an IdlegateError (a sentence) if it is not of that shape, or an interval
    does not hold its time (low ≤ time ≤ high), which no forecast written gives."""
    raw = status.get("firstForecast") if isinstance(status, Mapping) else None
    if raw is None:
        return None
    state = FirstForecastState.model_validate(raw)
    made = Forecast(
        computed_at=from_datetime(state.computed_at),
        start=from_datetime(state.start),
        start_interval=(
            from_datetime(state.start_interval[0]),
            from_datetime(state.start_interval[1]),
        ),
        finish=from_datetime(state.finish),
        finish_interval=(
            from_datetime(state.finish_interval[0]),
            from_datetime(state.finish_interval[1]),
        ),
    )
    spans = []
    for which, median, (low, high) in (
        ("start", made.start, state.start_replayed),
        ("finish", made.finish, state.finish_replayed),
    ):
        span = Span(from_datetime(low), median, from_datetime(high))
        if not span.low <= median <= span.high:
            raise SpecError(
                f"its replays' {which} interval [{low}, {high}] does not hold its {which}"
            )
        spans.append(span)
    started = None if state.started_at is None else from_datetime(state.started_at)
    return First(made, (spans[0], spans[1]), started)


def restore_first(payload: Any, status: Mapping[str, Any]) -> None:
    """A rebuilt DagWorkflow's (`payload`'s, its job restored from its pods) first forecast
    from its `status`, back where the operator that made it kept it: its `forecast_made`
    and `forecast_replayed` (its history record's, its status's) and its job's first start
    (which a restore takes for its arrival), marked for its pool's refresh to keep and
    score (`ForecastBook.note_arrivals`). One that cannot be read, or a workflow
    restored as started whose status does not say when, gives no score: a Warning in the
    log, never an error of the pool or a made-up score."""
    name = f"{payload.owner.namespace}/{payload.owner.name}"
    try:
        first = parse_first(status)
    except (ValueError, IdlegateError) as exc:  # (pydantic's ValidationError is a ValueError)
        log.warning(
            "The first forecast in the status of %s is ignored (%s); it gives no score.",
            name,
            " ".join(str(exc).split()),
        )
        return
    if first is None:
        return
    job = payload.job
    if job.first_start is not None:
        if first.started is None:
            log.warning(
                "The first forecast in the status of %s is ignored: it started, and its status "
                "does not say when; it gives no score.",
                name,
            )
            return
        job.first_start = payload.started_at = first.started
    payload.forecast_made, payload.forecast_replayed = first.made, first.replayed
    payload.forecast_restored = True


def restore_started(payload: Any, status: Mapping[str, Any]) -> None:
    """A rebuilt DagWorkflow's (`payload`'s) start as its user saw it (`started_at`: its
    first pod Running), if its job was restored as started: its first forecast's
    ``startedAt``, else its START column's time, else the restore's start."""
    job = payload.job
    if job.first_start is None or payload.started_at is not None:
        return
    said = []
    first = status.get("firstForecast")
    if isinstance(first, Mapping):
        said.append(first.get("startedAt"))
    said.append(status.get("startSummary"))  # (a time, or a forecast's, marked ~)
    for value in said:
        if isinstance(value, str) and not value.startswith(FORECAST_MARK):
            try:
                payload.started_at = from_datetime(value)
                return
            except ValueError:
                continue
    payload.started_at = job.first_start
