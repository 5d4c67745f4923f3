"""What if: "if I submit this DagWorkflow now, when does it start and finish, and how sure?"

The operator answers ``POST /visibility/forecast`` (`operator.edge.visibility_http`) with a DagWorkflow:
placed by the one door (`Pools.place`), :func:`what_if` adds it to a fork of its pool's
state in the event loop, :func:`answer` replays that fork in a worker thread as the pool's
refresh replays its own (`operator.forecasting.request.compute`: its arrivals, and its calibration
to widen the interval), and `api.forecast_ask` reads the
question and says how sure the answer is.

* **Within a person's patience.** The replays stop at the workflow's own finish (`watch`:
  what comes after it is not replayed); no replay starts that would end past `SECONDS`
  of the wall clock, and none goes on past `CUT`, the first one too: a person waits on
  the answer, and the operator's thread shares its interpreter with the decisions (and a
  node's cores with the rest), so its CPU is not the time waited. A replay that cannot
  end by `CUT` gives an Unavailable with why, never a guess (docs/research/forecasts.md, "What
  if").
* **How sure.** The answer carries its replays and the pool's measured coverage: of its
  last forecasts that resolved, how many started and finished inside the 80 % interval
  shown (`ForecastBook.coverage`), which the CLI says beside the interval.

Pure but for the worker thread's replays; no kopf, no API.
"""

from __future__ import annotations

import time
from typing import Any

from idlegate.errors import SpecError
from idlegate.operator.forecasting.book import REPLAYS, Shown, as_shown
from idlegate.operator.forecasting.request import ForecastRequest, compute
from idlegate.sim import forecast as sim_forecast
from idlegate.sim.cluster import Cluster
from idlegate.sim.forecast_calibration import Calibration, calibrations
from idlegate.sim.protocol import Scheduler
from idlegate.sim.rollout import planning_fork

WHAT_IF_ID = -1
"""The job id the what-if's workflow gets in its fork (no live job has it)."""
SECONDS = 0.5
"""Wall-clock seconds a what-if's replays aim at (`answer`): no replay starts that would,
at their mean cost so far, end past them (the first always starts)."""
CUT = 0.9
"""Wall-clock seconds no replay of a what-if goes on past, the first one too: with the
CLI's own start (about a second) an answer within 2 s (benchmarks/what_if.py measures
both; docs/research/forecasts.md, "What if")."""


def what_if(
    cluster: Cluster,
    scheduler: Scheduler,
    body: Any,
    queue: int,
    priority: int,
    now: float,
) -> tuple[ForecastRequest, int]:
    """Event loop: a fork of the pool (`cluster`) at `now` with the DagWorkflow `body` added
    as it would arrive now, in its `queue` with its `priority` (`Pools.place`'s), and the
    scheduler to replay (a copy); the fork's id of the added job. SpecError (a sentence):
    `body` is not a DagWorkflow the operator would admit."""
    from idlegate.sim.dag import Dag
    from idlegate.sim.durations import MeasuredDurations
    from idlegate.sim.spec import parse_workflow

    if not isinstance(body, dict):
        raise SpecError("the what-if's body is not a DagWorkflow (a mapping with a spec)")
    spec = parse_workflow(body.get("spec"), "spec")
    fork = planning_fork(cluster)
    if fork.now < now:
        fork.advance(now)
    name = str((body.get("metadata") or {}).get("name") or "what-if")
    model = MeasuredDurations([s.task_duration_seconds for s in spec.stages]).frozen()
    job = fork.add_job(Dag.from_spec(spec), fork.now, name, model)
    job.queue, job.priority = queue, priority
    return ForecastRequest(fork, scheduler, 0), job.id


def answer(
    request: ForecastRequest,
    job_id: int,
    replays: int = REPLAYS,
    budget: int = sim_forecast.BUDGET,
    calibration: dict[str, Calibration] | None = None,
    seconds: float = SECONDS,
    cut: float = CUT,
    clock: Any = time.monotonic,
) -> tuple[Shown, int]:
    """Worker thread: the forecast of the what-if's workflow (`what_if`'s) and how many
    replays gave it, within the refresh's budget of events, `seconds` of `clock`, and cut
    at `cut` (the module docstring)."""
    result, _ = compute(request, replays, budget, seconds, clock=clock, watch=(job_id,), cut=cut)
    entry = result.of(job_id)
    shown = as_shown(entry, result.now, calibration or calibrations(request.arrivals != "none"))
    return shown, result.replays
