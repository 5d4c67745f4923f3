"""What if: "if I submit this DagWorkflow now, when does it start and finish, and how sure?"

The operator answers ``POST /visibility/forecast`` (`api.visibility_http`) with a DagWorkflow:
placed by the one door (`Pools.place`), :func:`what_if` adds it to a fork of its pool's
state in the event loop, :func:`answer` replays that fork in a worker thread as the pool's
refresh replays its own (`api.forecast_replay.compute`: its arrivals, and its calibration
to widen the interval), and :func:`sureness` says how sure the answer is.

* **Within a person's patience.** The replays stop at the workflow's own finish (`watch`:
  what comes after it is not replayed); no replay starts that would end past `SECONDS`
  of the wall clock, and none goes on past `CUT`, the first one too: a person waits on
  the answer, and the operator's thread shares its interpreter with the decisions (and a
  node's cores with the rest), so its CPU is not the time waited. A replay that cannot
  end by `CUT` gives an Unavailable with why, never a guess (docs/forecast.md, "What
  if").
* **How sure.** The answer carries its replays and the pool's measured coverage: of its
  last forecasts that resolved, how many started and finished inside the 80 % interval
  shown (`ForecastRefresh.coverage`), which the CLI says beside the interval.

Pure but for the worker thread's replays; no kopf, no API.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from idlegate.api.forecast_refresh import REPLAYS, Shown, as_shown
from idlegate.api.forecast_replay import Snapshot, compute
from idlegate.errors import SpecError
from idlegate.sim import forecast as sim_forecast
from idlegate.sim.cluster import Cluster
from idlegate.sim.forecast_calibration import Calibration, calibrations
from idlegate.sim.protocol import Scheduler
from idlegate.sim.rollout import planning_fork

WHAT_IF_PATH = "/visibility/forecast"
"""Where the operator answers a what-if (POST a DagWorkflow, YAML or JSON)."""
WHAT_IF_ID = -1
"""The job id the what-if's workflow gets in its fork (no live job has it)."""
SECONDS = 0.5
"""Wall-clock seconds a what-if's replays aim at (`answer`): no replay starts that would,
at their mean cost so far, end past them (the first always starts)."""
CUT = 0.9
"""Wall-clock seconds no replay of a what-if goes on past, the first one too: with the
CLI's own start (about a second) an answer within 2 s (benchmarks/what_if.py measures
both; docs/forecast.md, "What if")."""


def read_what_if(text: str) -> dict[str, Any]:
    """A what-if's body (YAML or JSON) as the operator takes it: a DagWorkflow whose spec
    the one parser takes (`parse_workflow`), its pod templates of the shape admission
    takes (`check_templates`, as lint). SpecError (a sentence) if it is not: the
    operator answers it with 400, and ``idlegate forecast FILE`` says it before asking."""
    import yaml

    from idlegate.api.kinds import KIND
    from idlegate.api.template import check_templates
    from idlegate.sim.spec import parse_workflow

    try:
        body = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"it is not YAML or JSON ({' '.join(str(exc).split())})") from None
    if not isinstance(body, dict) or body.get("kind", KIND) != KIND:
        kind = body.get("kind") if isinstance(body, dict) else None
        was = f"it is a {kind}, not" if isinstance(kind, str) else "it is not"
        raise SpecError(f"{was} a {KIND} (kind: {KIND}, with a spec)")
    check_templates(parse_workflow(body.get("spec"), "spec"), "spec")  # (as admission would)
    return body


def what_if(
    cluster: Cluster,
    scheduler: Scheduler,
    body: Any,
    queue: int,
    priority: int,
    now: float,
) -> tuple[Snapshot, int]:
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
    return Snapshot(fork, scheduler, 0, jobs={job.id: job}), job.id


def answer(
    snap: Snapshot,
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
    result, _ = compute(snap, replays, budget, seconds, clock=clock, watch=(job_id,), cut=cut)
    entry = result.of(job_id)
    shown = as_shown(entry, result.now, calibration or calibrations(snap.arrivals != "none"))
    return shown, result.replays


def sureness(replays: int, held: Mapping[str, Any] | None) -> str:
    """A what-if answer's second line: how many replays gave its 80 % intervals and how
    often the pool's resolved forecasts fell inside theirs (`held`: kind → (inside,
    resolved), `ForecastRefresh.coverage`; None or empty: not measured)."""
    said = f"80 % intervals from {replays} replay{'s' * (replays != 1)}"
    (s_in, s_of), (f_in, f_of) = ((held or {}).get(k) or (0, 0) for k in ("start", "finish"))
    if not s_of and not f_of:
        return (
            f"{said}; none of this pool's forecasts has resolved yet, so how often they "
            "hold here is not measured."
        )

    def share(inside: int, resolved: int, what: str) -> str:
        if not resolved:
            return f"no {what} yet"
        return f"{inside} of {resolved} {what} ({100 * inside / resolved:.0f} %)"

    return (
        f"{said}; this pool's last forecasts held {share(s_in, s_of, 'starts')} and "
        f"{share(f_in, f_of, 'finishes')} inside their intervals."
    )
