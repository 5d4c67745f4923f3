"""Arrivals a forecast invents: the one copy that `idlegate forecast evaluate` measures
and the operator's refresh runs (docs/research/forecasts.md, "Arrivals: measured, shipped per
workload").

A forecast's replays (`sim.forecast.forecast`) know the workflows present; a workflow
submitted later may overtake one waiting now. `invent` gives the replays' futures (one
per replay) of the arrivals not seen yet, by `kind`:

* ``none``: no future (the forecast then invents none);
* ``poisson``: arrivals at the pool's recent rate (the Gamma–Poisson estimate
  `arrival_rate` over the cluster's arrival log), each a copy of a workflow drawn
  uniformly among the `recent` ones (`poisson_futures`);
* ``queues``: the same per queue, each queue's stream at its own rate (`queue_rate`, whose
  prior is half the queue's quota busy) and its copies joining that queue
  (`queue_futures`), for as long as each future draws it goes on sending: a queue silent
  for long has likely stopped (`still_sending`), and one still sending stops some time
  (`stream_lasts`); on a pool without queues, as ``poisson``.

The arrivals are drawn over a horizon that covers the present's work three times over
(`horizon_of`), and at most `INVENTED` of them a future: on a pool offered more than it
can run the horizon is days long, and without that bound a refresh drew and replayed
tens of thousands of invented workflows (benchmarks/forecast.py `--arrivals`). `recent` are the pool's last `TEMPLATES` arrivals, finished ones
included: anything with their arrival time, queue, DAG and payload (the simulator's
`Job`, or the operator's frozen `Recent`). Pure: no I/O, no clock; the same generator
gives the same futures.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from math import inf
from typing import Any, Protocol

import numpy as np

from idlegate.sim.arrival_kinds import ARRIVALS as ARRIVALS  # (re-exported)
from idlegate.sim.arrival_kinds import Arrivals as Arrivals
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.durations import duration_model
from idlegate.sim.engine import JobArrival
from idlegate.sim.forecast import known_duration
from idlegate.sim.pool import effective_executors
from idlegate.sim.queues import QueueSpec
from idlegate.sim.rollout import Forkable, Future

TEMPLATES = 50
"""Recent workflows the invented arrivals copy."""
WINDOW = 50
"""Most recent arrivals a rate is estimated from (the analytic rule's default too)."""
PRIOR_LOAD = 0.5
"""The rate's prior: this share of the pool (or of a queue's share) busy with the mean
recent workflow (the analytic rule's default too)."""
PRIOR_STRENGTH = 2.0
"""The prior's weight, in pseudo-arrivals (the Gamma prior's shape)."""
STREAM_SENDS = 50.0
"""K, the arrivals a queue's stream is expected to send yet, whatever it sent before
(`still_sending`)."""
INVENTED = 1_000
"""The most arrivals a forecast's future invents (the earliest; `invent`). A replay of
more invented workflows than that simulates more events than a refresh's whole
`sim.forecast.BUDGET`, and by then a waiting workflow they keep overtaking is past what
a forecast can say anyway. On 1,000 waiting k8s-batch workflows under `srpt`, offered
five times what the pool runs, a future had 15,000 to 16,000 arrivals, and drawing
twenty of them cost more CPU than the replay."""


class Template(Protocol):
    """A recent workflow the arrivals copy: a `sim.protocol.Job`, or a `Recent`."""

    @property
    def arrival(self) -> float: ...
    @property
    def queue(self) -> int: ...
    @property
    def dag(self) -> Dag: ...
    @property
    def payload(self) -> Any: ...
    @property
    def priority(self) -> int: ...


@dataclass(frozen=True)
class Recent:
    """A recent workflow kept to be copied: its arrival, queue (the admission's index) and
    DAG, `payload` its duration model frozen when taken (a worker thread may copy it
    while the pool's own model goes on recording), and its priority (0 when read back
    from the history, which keeps the PriorityClass's name, not its value)."""

    arrival: float
    queue: int
    dag: Dag
    payload: Any
    priority: int = 0

    @classmethod
    def of(cls, job: Template) -> Recent:
        """`job` as a template, its duration model frozen now (`duration_model`)."""
        return cls(job.arrival, job.queue, job.dag, duration_model(job.payload), job.priority)


def templates(jobs: Iterable[Template]) -> tuple[Recent, ...]:
    """`jobs` as templates, their duration models frozen now (`Recent.of`), leaving out
    any with a stage that has neither an estimate nor a measured task (a copy of it could
    not be replayed: `sim.forecast.missing_estimate`)."""
    out = []
    for job in jobs:
        recent = Recent.of(job)
        if all(known_duration(recent.payload, job.dag, i) for i in range(job.dag.num_stages)):
            out.append(recent)
    return tuple(out)


def arrived(recent: deque[Any], jobs: Iterable[Template], now: float) -> None:
    """Add to `recent` (a ``deque(maxlen=TEMPLATES)``, oldest first) the `jobs` that
    arrived at `now`: the last arrivals `invent` copies, kept by a driver that steps to
    each arrival time (`evaluation.forecast_eval`, the benchmarks), as the operator's book
    keeps them as they come (`ForecastBook.recent`)."""
    recent.extend(job for job in jobs if job.arrival == now)


def invent(
    kind: str,
    cluster: Cluster,
    recent: Sequence[Template],
    samples: int,
    rng: np.random.Generator,
    horizon: float = inf,
) -> Iterable[Future] | None:
    """`samples` futures of the arrivals `kind` invents after ``cluster.now`` (module
    docstring), over at most `horizon` seconds; None for ``none``. ``poisson``'s are drawn
    as they are read (a forecast whose budget lets one replay run draws one future, not
    `samples`): a caller that draws from `rng` in between, or reads them twice, takes a
    list of them first."""
    if kind == "none":
        return None
    if kind not in ARRIVALS:
        raise ValueError(f"arrivals {kind!r}: give one of {', '.join(ARRIVALS)}")
    ahead = horizon_of(cluster, horizon)
    if kind == "poisson" or cluster.admission is None:
        return poisson_futures(cluster, recent, ahead, samples, rng, limit=INVENTED)
    return queue_futures(cluster, recent, ahead, samples, rng, limit=INVENTED)


def horizon_of(cluster: Cluster, horizon: float = inf) -> float:
    """How far ahead arrivals are drawn: three times the present's work on the pool plus
    its longest critical path, and a minute (at most `horizon`)."""
    work = sum(j.remaining_work for j in cluster.jobs) / max(1, cluster.num_executors)
    longest = max((j.remaining_cp for j in cluster.jobs), default=0.0)
    return min(horizon, 3.0 * (work + longest) + 60.0)


def gamma_poisson_rate(
    recent: Sequence[tuple[float, float]],
    works: np.ndarray,
    now: float,
    executors: float,
    prior_rate: float | None = None,
    prior_load: float = PRIOR_LOAD,
    strength: float = PRIOR_STRENGTH,
) -> float:
    """λ = (α₀ + n) / (α₀/λ₀ + T) over the (time, work) arrivals `recent` (non-empty;
    `works` their works): a Gamma(α₀, α₀/λ₀) prior updated with the n arrivals after the
    first, observed over T = now − the first. λ₀ is `prior_rate`, else `prior_load` ×
    `executors` ÷ the mean work. (`policy.analytic.estimate_arrivals` takes it from here.)"""
    prior = prior_rate
    if prior is None:
        prior = prior_load * executors / max(float(works.mean()), 1e-12)
    shape, exposure = gamma_posterior(recent, now, prior, strength)
    return shape / exposure


def gamma_posterior(
    recent: Sequence[tuple[float, float]],
    until: float,
    prior: float,
    strength: float = PRIOR_STRENGTH,
) -> tuple[float, float]:
    """The Gamma posterior (shape α₀ + n, exposure α₀/λ₀ + T) of the rate of the (time,
    work) arrivals `recent` (non-empty) observed until `until`: n the arrivals after the
    first, T = `until` − the first (arrivals at the first's instant count as one), λ₀ =
    `prior`, α₀ = `strength`; its mean is `gamma_poisson_rate`."""
    times = np.fromiter((t for t, _ in recent), dtype=float, count=len(recent))
    n = int(np.count_nonzero(times > times[0]))
    return strength + n, strength / prior + max(until - float(times[0]), 0.0)


def arrival_rate(
    arrival_log: Sequence[tuple[float, float]],
    now: float,
    executors: float,
    prior_rate: float | None = None,
) -> float:
    """The rate of the last `WINDOW` (time, work) arrivals (`gamma_poisson_rate`); 0 for
    none."""
    recent = arrival_log[-WINDOW:]
    if not recent:
        return 0.0
    works = np.fromiter((w for _, w in recent), dtype=float, count=len(recent))
    return gamma_poisson_rate(recent, works, now, executors, prior_rate)


def poisson_futures(
    view: Forkable,
    recent: Sequence[Template],
    horizon: float,
    samples: int,
    rng: np.random.Generator,
    share: float = 1.0,
    limit: int | None = None,
) -> Iterator[Future]:
    """`samples` Poisson futures, each drawn as it is read (`poisson_copies`): the Gamma–Poisson rate of the
    recent arrivals (times `share`, the part of the stream they stand for), each arrival a
    copy of a uniformly drawn job of `recent` (its DAG and duration model); at most
    `limit` a future."""
    rate = 0.0
    if recent and view.arrival_log:
        pool = effective_executors(view, [j.dag for j in recent])  # (a resource pool: tasks)
        rate = share * arrival_rate(view.arrival_log, view.now, pool)
    models: dict[int, Any] = {}

    def copy(i: int) -> tuple[Dag, Any]:
        if i not in models:  # frozen once per job: the plan may run in another thread
            models[i] = duration_model(recent[i].payload)
        return recent[i].dag, models[i]

    return poisson_copies(len(recent), copy, rate, view.now, horizon, samples, rng, limit=limit)


def poisson_copies(
    templates: int,
    copy: Callable[[int], tuple[Dag, Any]],
    rate: float,
    start: float,
    horizon: float,
    samples: int,
    rng: np.random.Generator,
    name: str = "future",
    limit: int | None = None,
) -> Iterator[Future]:
    """`samples` futures over (start, start + horizon]: arrivals a Poisson process at
    `rate` (none at 0), each `copy(i)` (a DAG and its duration model) of a template i
    drawn uniformly of `templates`, named ``NAME-m-k``, the first `limit` of them (all
    when None); each future with a duration seed drawn after its arrivals, and drawn
    as it is read (a caller that draws from `rng` in between takes a list first)."""
    most = inf if limit is None else limit
    for m in range(samples):
        arrivals: list[JobArrival] = []
        t = start
        while rate > 0 and len(arrivals) < most:
            t += float(rng.exponential(1.0 / rate))
            if t > start + horizon:
                break
            dag, model = copy(int(rng.integers(templates)))
            arrivals.append(JobArrival(t, f"{name}-{m}-{len(arrivals)}", dag, model))
        yield Future(tuple(arrivals), int(rng.integers(2**63)))


def queue_futures(
    cluster: Cluster,
    recent: Sequence[Template],
    horizon: float,
    samples: int,
    rng: np.random.Generator,
    limit: int | None = None,
) -> list[Future]:
    """`samples` futures whose arrivals come per queue: each queue's own Poisson stream at
    its recent rate (`queue_rate`), each arrival a copy of one of that queue's recent
    workflows, joining that queue; the first `limit` of a future's (all when None)."""
    if cluster.admission is None:
        raise ValueError("arrivals per queue need a pool with queues")
    specs = cluster.admission.queues
    by_queue: dict[int, list[Template]] = {}
    for job in recent:
        by_queue.setdefault(job.queue, []).append(job)
    merged: list[list[JobArrival]] = [[] for _ in range(samples)]
    pool = effective_executors(cluster, [j.dag for j in recent])
    for q, jobs in sorted(by_queue.items()):
        arrivals = [(j.arrival, j.dag.total_work) for j in jobs]
        executors = queue_share(specs, q) * pool
        rate = queue_rate(arrivals, cluster.now, executors)
        name = specs[q].name
        models: dict[int, Any] = {}

        def copy(i: int, jobs: list[Template] = jobs, models: dict[int, Any] = models) -> Any:
            if i not in models:
                models[i] = duration_model(jobs[i].payload)
            return jobs[i].dag, models[i]

        shape, exposure = queue_posterior(arrivals, executors)
        silence = cluster.now - max(t for t, _ in arrivals[-WINDOW:])
        alive = still_sending(shape, exposure, silence)
        for m in range(samples):
            lasts = stream_lasts(alive, rate, rng)
            (future,) = poisson_copies(
                len(jobs), copy, rate, cluster.now, min(horizon, lasts), 1, rng, name, limit
            )
            merged[m] += [replace(a, queue=name) for a in future.arrivals]
    return [
        Future(tuple(sorted(arrivals, key=lambda a: a.time)[:limit]), int(rng.integers(2**63)))
        for arrivals in merged
    ]


def still_sending(
    shape: float, exposure: float, silence: float, sends: float = STREAM_SENDS
) -> float:
    """P(a queue's stream still sends | nothing came for `silence` seconds since its last
    arrival), its rate λ known up to that arrival as Gamma(`shape`, `exposure`)
    (`queue_posterior`).

    Derivation: a stream that sends at rate λ stops with hazard h = λ/K (K = `sends`, the
    arrivals it is expected to send yet: its life is memoryless, its mean K/λ). Over the
    g = `silence` seconds since its last arrival, "it still sends" has likelihood
    e^(−(λ+h)g) (it did not stop, and sent nothing), and "it stopped" has
    ∫₀^g h e^(−hs) e^(−λs) ds = (1 − e^(−(λ+h)g)) / (K+1). Averaged over λ's Gamma,
    e^(−(λ+h)g) becomes E = (b / (b + (1 + 1/K) g))^a (a = `shape`, b = `exposure`), and
    Bayes gives P = (K+1)E / (1 + K E): 1 at g = 0, ½ near λg = ln K for a well-known rate,
    and a stream silent for ten of its gaps is all but surely over. A stream that stopped
    is what the plain Poisson stream cannot see: on `teams` the steady teams' streams end
    (about 700 s) long before the flood is served, and replays that went on inventing
    them put the flood's start late (docs/research/forecasts.md, "A queue's stream
    stops")."""
    if shape <= 0:
        return 0.0
    e = (exposure / (exposure + (1.0 + 1.0 / sends) * silence)) ** shape
    return (sends + 1.0) * e / (1.0 + sends * e)


def stream_lasts(alive: float, rate: float, rng: np.random.Generator) -> float:
    """How long a queue's stream goes on sending in one future: 0 with probability
    1 − `alive` (it stopped already: `still_sending`); else its memoryless life at hazard
    λ/K (`STREAM_SENDS`)."""
    if rng.random() >= alive or rate <= 0:
        return 0.0
    return float(rng.exponential(STREAM_SENDS / rate))


def queue_rate(arrivals: Sequence[tuple[float, float]], now: float, executors: float) -> float:
    """One queue's arrival rate from its recent (time, work) arrivals: the Gamma–Poisson
    estimate (`gamma_poisson_rate`) whose prior is half the queue's `executors` (its share
    of the pool) busy with its mean workflow; arrivals at the instant of the first count
    as one, so that a flood (all at once) is given a rate that fades as no more come."""
    if not arrivals:
        return 0.0
    return arrival_rate(arrivals, now, 1, queue_prior(arrivals, executors))


def queue_prior(arrivals: Sequence[tuple[float, float]], executors: float) -> float:
    """A queue's prior rate: `PRIOR_LOAD` of its `executors` busy with its mean workflow
    (of its last `WINDOW` (time, work) `arrivals`, non-empty)."""
    work = max(float(np.mean([w for _, w in arrivals[-WINDOW:]])), 1e-12)
    return PRIOR_LOAD * max(executors, 1e-9) / work


def queue_posterior(
    arrivals: Sequence[tuple[float, float]], executors: float
) -> tuple[float, float]:
    """The Gamma posterior (shape a, exposure b) of a queue's rate over its last `WINDOW`
    (time, work) `arrivals` (non-empty) until the last of them (`gamma_posterior`, the
    prior `queue_prior`), so that `queue_rate` at ``now`` is a / (b + now − last)."""
    recent = arrivals[-WINDOW:]
    last = max(t for t, _ in recent)
    return gamma_posterior(recent, last, queue_prior(arrivals, executors))


def queue_share(specs: Sequence[QueueSpec], q: int) -> float:
    """Queue `q`'s share of the pool: its nominal quota of the first resource any queue
    has a quota of, over all the queues' (equal shares where none has a quota)."""
    for name in sorted({r for spec in specs for r in spec.nominal}):
        total = sum(spec.nominal.get(name, 0) for spec in specs)
        if total > 0:
            return specs[q].nominal.get(name, 0) / total
    return 1.0 / len(specs)
