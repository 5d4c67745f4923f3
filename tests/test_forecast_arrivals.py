"""The arrivals a forecast invents (idlegate.sim.forecast_arrivals): the operator's refresh
invents them as its pool's setting says (--forecast-arrivals, an ExecutorPool's
forecastArrivals), from the pool's recent arrivals it keeps, seeded by the refresh; and
`forecast evaluate` measures the very same futures. On fake time: the pool's own clock."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from idlegate.api.forecast_status import Forecast
from idlegate.api.pool_spec import parse_pool_spec, pool_problems
from idlegate.api.settings import Settings
from idlegate.api.task_pods import Owner
from idlegate.cli import app
from idlegate.errors import IdlegateError, SpecError
from idlegate.evaluation.comparison import WorkloadOptions, build
from idlegate.evaluation.forecast_eval import EvalSettings, _futures
from idlegate.operator.forecasting.refresh import ForecastRefresh
from idlegate.operator.forecasting.request import ARRIVALS_STREAM, ForecastRequest, futures
from idlegate.policy import make_scheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.durations import MeasuredDurations
from idlegate.sim.engine import Engine
from idlegate.sim.forecast import forecast
from idlegate.sim.forecast_arrivals import INVENTED, TEMPLATES, invent, poisson_copies, templates
from idlegate.sim.rollout import planning_fork
from tests.helpers import chain
from tests.test_forecast_refresh import Held

T0 = 1_800_000_000.0
SMALL, BIG, GAP = 10.0, 1000.0, 12.0
"""A stream of small workflows of SMALL seconds every GAP seconds, then a BIG one."""


def held(name: str, seconds: float) -> Held:
    return Held(Owner("t", name, f"uid-{name}", "DagWorkflow"), MeasuredDurations([seconds]))


def srpt_pool(*refreshes_of: str) -> tuple[Cluster, list[ForecastRefresh]]:
    """One executor under srpt, a refresh per arrivals kind in `refreshes_of`, each told of
    every event (as the bridge tells it): 30 small workflows arrive every GAP seconds and
    finish; then a 100 s workflow runs and a BIG one waits behind it. With arrivals like
    the recent ones, srpt would start later small ones before the big one."""
    cluster = Cluster(1)
    cluster.advance(T0)
    rule = make_scheduler("srpt")
    refreshes = [
        ForecastRefresh(
            cluster,
            lambda: (make_scheduler("srpt"), None, None),
            now=lambda: cluster.now,
            later=lambda key, at, fire: None,
            write=lambda moved: None,
            arrivals=kind,
            seconds=None,  # (a CPU bound would make the replays run depend on the machine)
        )
        for kind in refreshes_of
    ]

    def arrive(name: str, seconds: float, t: float) -> None:
        cluster.add_job(chain(seconds), t, name, held(name, seconds))
        for refresh in refreshes:
            refresh.changed()
        while cluster.decide_once(rule, t) is not None:
            pass

    t = T0
    for i in range(30):
        arrive(f"small-{i}", SMALL, t)
        cluster.advance(t + SMALL)
        cluster.task_finished(0, t + SMALL)  # (the pool's one executor)
        for refresh in refreshes:
            refresh.changed()
        t += GAP
    arrive("running", 100.0, t)
    arrive("big", BIG, t + 1.0)
    assert [j.name for j in cluster.jobs] == ["running", "big"]
    assert cluster.jobs[1].first_start is None  # (it waits)
    return cluster, refreshes


def start_of(refresh: ForecastRefresh, name: str) -> float:
    shown = refresh.shown[f"uid-{name}"]
    assert isinstance(shown, Forecast)
    return shown.start


def test_poisson_arrivals_forecast_a_waiting_big_workflow_later_under_srpt():
    cluster, (none, poisson) = srpt_pool("none", "poisson")
    none.poke()  # (no loop: in place)
    poisson.poke()
    # without arrivals the big one starts when the running one ends, 99 s from now
    assert start_of(none, "big") == pytest.approx(cluster.now + 99.0)
    # small copies of the recent stream overtake it under srpt: a later start
    assert start_of(poisson, "big") > start_of(none, "big") + GAP
    # the running one is not overtaken
    assert start_of(poisson, "running") == start_of(none, "running")
    # the refresh kept the pool's last arrivals, the finished ones included, oldest first
    assert len(poisson.recent) == 32 and poisson.recent[0].name == "small-0"


def test_the_recent_arrivals_are_bounded_and_in_arrival_order():
    cluster = Cluster(2)
    refresh = ForecastRefresh(
        cluster,
        lambda: (make_scheduler("fifo"), None, None),
        now=lambda: cluster.now,
        later=lambda key, at, fire: None,
        write=lambda moved: None,
        arrivals="poisson",
    )
    for i in range(TEMPLATES + 7):
        job = cluster.add_job(chain(1.0), float(i), f"w{i}", held(f"w{i}", 1.0))
        refresh.changed()  # (after each event, as the bridge calls it)
        cluster.remove_job(job, float(i))  # (deleted: still an arrival to copy)
        refresh.changed()
    names = [j.name for j in refresh.recent]
    assert names == [f"w{i}" for i in range(7, TEMPLATES + 7)]


def test_the_same_state_and_seed_give_the_same_forecast():
    shown = []
    for _ in range(2):
        _, (refresh,) = srpt_pool("poisson")
        refresh.poke()
        shown.append({uid: f for uid, f in refresh.shown.items()})
    assert shown[0] == shown[1]
    # and the futures are the refresh's seed's, not the replays' own stream
    _, (refresh,) = srpt_pool("poisson")
    snap = refresh.request()
    again = futures(snap, 5)
    assert again is not None
    assert [f.arrivals for f in again] == [f.arrivals for f in futures(snap, 5) or []]
    other = ForecastRequest(
        snap.fork, snap.scheduler, snap.seed + 1, arrivals="poisson", recent=snap.recent
    )
    assert [f.arrivals for f in futures(other, 5) or []] != [f.arrivals for f in again]
    assert futures(ForecastRequest(snap.fork, snap.scheduler, snap.seed), 5) is None  # (none)


@pytest.mark.parametrize("arrivals", ["poisson", "queues"])
def test_the_evaluation_and_the_operator_invent_the_same_futures(arrivals: str):
    # a teams run (three queues) stopped while workflows wait: the futures `forecast
    # evaluate` replays and those the operator's refresh replays from the same pool, the
    # same recent arrivals and the same generator are the same arrivals, one for one
    built = build("teams", 100, WorkloadOptions(num_jobs=4))
    engine = Engine.for_workload(built, make_scheduler("fair"), 100)
    engine.run(built.jobs[6].time)
    cluster = engine.cluster
    assert cluster.admission is not None and any(j.first_start is None for j in cluster.jobs)
    recent = list(cluster.jobs)[-TEMPLATES:]
    settings = EvalSettings("teams", replays=4, arrivals=arrivals)  # type: ignore[arg-type]
    seed = 7

    def rng() -> np.random.Generator:
        return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(ARRIVALS_STREAM,)))

    measured = _futures(settings, cluster, recent, rng())
    fork = planning_fork(cluster)
    snap = ForecastRequest(fork, make_scheduler("fair"), seed, arrivals, templates(recent))
    shipped = futures(snap, settings.replays)
    assert measured is not None and shipped is not None
    assert sum(len(f.arrivals) for f in measured) > 0

    def plain(fs: Any) -> list[Any]:
        return [
            (f.seed, [(a.time, a.name, a.queue, id(a.dag), id(a.durations)) for a in f.arrivals])
            for f in fs
        ]

    assert plain(shipped) == plain(measured)


def test_queues_on_a_pool_without_queues_is_refused_with_how_to_fix_it():
    why = (
        "invents a forecast's arrivals per queue, but {pool} has no queues; give it "
        "{queues}, or choose poisson (arrivals at the pool's rate) or none"
    )
    with pytest.raises(IdlegateError) as flag:
        Settings(pool_size=2, forecast_arrivals="queues")
    assert why.format(pool="the default pool", queues="--queues") in str(flag.value)
    with pytest.raises(SpecError) as spec:
        parse_pool_spec({"size": 2, "forecastArrivals": "queues"}, "p")
    assert why.format(pool="the pool", queues="queues") in str(spec.value)
    pool = {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "ExecutorPool",
        "metadata": {"name": "p"},
        "spec": {"size": 2, "forecastArrivals": "queues"},
    }
    ((path, text),) = pool_problems(pool)
    assert path == "spec" and why.format(pool="the pool", queues="queues") in text
    # with queues, or poisson without, it is a pool's setting
    queued = {"size": 2, "forecastArrivals": "queues", "queues": [{"name": "a"}]}
    assert parse_pool_spec(queued, "p").forecast_arrivals == "queues"
    assert parse_pool_spec({"size": 2, "forecastArrivals": "poisson"}, "p").forecast_arrivals == (
        "poisson"
    )
    assert Settings(pool_size=2).forecast_arrivals == "none"  # (the default: as before)


def test_a_bad_value_is_one_sentence_on_the_command_line():
    runner = CliRunner()
    result = runner.invoke(app, ["operator", "--pool-size", "2", "--forecast-arrivals", "queues"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "--forecast-arrivals queues invents a forecast's arrivals per queue" in result.output
    result = runner.invoke(app, ["operator", "--pool-size", "2", "--forecast-arrivals", "often"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "--forecast-arrivals: Input should be 'none', 'poisson' or 'queues'" in result.output
    with pytest.raises(SpecError, match="the forecast's arrivals 'often' are none of"):
        ForecastRefresh(
            Cluster(1),
            lambda: (make_scheduler("fifo"), None, None),
            now=lambda: 0.0,
            later=lambda key, at, fire: None,
            write=lambda moved: None,
            arrivals="often",
        )


# -- in the operator: the flag, an ExecutorPool's own, and the bridge telling the refresh ----


async def operator_pool(arrivals: str) -> Any:
    """An operator pool of one executor under srpt (the fakes, fake time): 12 small
    workflows come and finish one after the other, then a 100 s one runs and a big one
    waits; forecast with `arrivals` (--forecast-arrivals)."""
    from tests.operator_fakes import FakeClock, FakeKube, Harness, stage

    h = Harness(
        FakeKube(), FakeClock(T0), 1, make_scheduler("srpt"), forecast_interval=30.0,
        forecast_arrivals=arrivals,
    )  # fmt: skip

    async def submit(name: str, seconds: float) -> None:
        body = h.kube.add_workflow(name, {"stages": [stage("a", duration=seconds)]})
        created = datetime.fromtimestamp(h.clock.now(), UTC)  # (its arrival: created now)
        body["metadata"]["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
        h.admit(body)
        await h.settle()

    for i in range(12):
        await submit(f"small-{i}", SMALL)
        (pod,) = h.released(f"small-{i}")
        await h.finish(pod, after=SMALL)
        h.clock.advance(GAP - SMALL)
    await submit("running", 100.0)
    await submit("big", BIG)
    assert h.released("running") and not h.released("big")
    refresh = h.bridge.forecasts
    assert refresh is not None and refresh.arrivals == arrivals
    refresh.poke()
    await refresh.idle()
    return h, refresh


@pytest.mark.asyncio
async def test_the_operators_pool_invents_what_its_flag_says():
    _, none = await operator_pool("none")
    _, poisson = await operator_pool("poisson")
    # the bridge told the refresh of every arrival, the finished ones included
    assert [j.name for j in poisson.recent][:2] == ["default/small-0", "default/small-1"]
    assert len(poisson.recent) == 14

    def start(refresh: ForecastRefresh) -> float:
        (shown,) = [f for f in refresh.shown.values() if isinstance(f, Forecast) and f.position]
        return shown.start

    assert start(poisson) > start(none) + GAP  # (the big one: small copies overtake it)


@pytest.mark.asyncio
async def test_an_executor_pools_arrivals_are_its_own_or_the_flags_and_change_in_place():
    from idlegate.api.pool_spec import ExecutorPoolSpec
    from tests.operator_fakes import harness

    h = harness(pool=2, forecast_interval=30.0, forecast_arrivals="poisson")
    pools = h.pools
    pools.apply("inherits", ExecutorPoolSpec.model_validate({"size": 1}))
    own = {"size": 2, "queues": [{"name": "a"}, {"name": "b"}], "forecastArrivals": "queues"}
    pools.apply("own", ExecutorPoolSpec.model_validate(own))
    refreshes = {name: b.forecasts for name, b in pools.bridges.items()}
    assert {n: r.arrivals for n, r in refreshes.items() if r} == {
        "default": "poisson",
        "inherits": "poisson",
        "own": "queues",
    }
    # a change of forecastArrivals alone: the same pool (no restart), the next refresh's
    bridge = pools.bridges["own"]
    pools.apply("own", ExecutorPoolSpec.model_validate({**own, "forecastArrivals": "none"}))
    assert pools.bridges["own"] is bridge and bridge.forecasts is not None
    assert bridge.forecasts.arrivals == "none" == bridge.settings.forecast_arrivals
    pools.apply(
        "own",
        ExecutorPoolSpec.model_validate({k: v for k, v in own.items() if k != "forecastArrivals"}),
    )
    assert pools.bridges["own"] is bridge and bridge.forecasts.arrivals == "poisson"


def test_a_what_if_on_the_pool_invents_the_arrivals_its_refresh_does():
    from idlegate.operator.forecasting.whatif import answer, what_if

    cluster, refreshes = srpt_pool("none", "poisson")
    stages = [{"name": "a", "tasks": 1, "taskDurationSeconds": BIG}]
    body = {"metadata": {"name": "later"}, "spec": {"stages": stages}}
    starts = {}
    for refresh in refreshes:
        snap, job_id = what_if(cluster, make_scheduler("srpt"), body, 0, 0, cluster.now)
        snap, _ = refresh.for_what_if(snap)  # (as the visibility API's route does)
        shown, _ = answer(snap, job_id)
        assert isinstance(shown, Forecast)
        starts[refresh.arrivals] = shown.start
    assert starts["poisson"] > starts["none"] + GAP


def test_queues_on_a_pool_without_queues_invents_as_poisson():
    # an ExecutorPool without queues that takes `queues` from --forecast-arrivals (the
    # default pool has queues): arrivals at its own rate, as `poisson`, as the evaluation does
    from idlegate.sim.forecast_arrivals import invent

    cluster, (refresh,) = srpt_pool("poisson")
    recent = templates(refresh.recent)
    drawn = {
        kind: list(invent(kind, cluster, recent, 3, np.random.default_rng(5)) or [])
        for kind in ("queues", "poisson")
    }
    assert drawn["queues"] == drawn["poisson"] and any(f.arrivals for f in drawn["poisson"])
    assert invent("none", cluster, recent, 3, np.random.default_rng(5)) is None


@pytest.mark.parametrize(
    ("spec", "refused"),
    [
        ({"size": 2, "forecastArrivals": "queues"}, True),
        ({"size": 2, "forecastArrivals": "queues", "queues": [{"name": "a"}]}, False),
        ({"size": 2, "forecastArrivals": "poisson"}, False),
        ({"size": 2}, False),
    ],
)
def test_the_crd_refuses_arrivals_per_queue_on_a_pool_without_queues(spec, refused):
    from tests.test_deploy_crd import BASE, api_server_problems, load_yaml

    schema = load_yaml(BASE / "pool-crd.yaml")["spec"]["versions"][0]["schema"]
    pool = {
        "apiVersion": "idlegate.io/v1alpha1",
        "kind": "ExecutorPool",
        "metadata": {"name": "p"},
        "spec": spec,
    }
    problems = api_server_problems(pool, schema["openAPIV3Schema"])
    message = "spec: forecastArrivals: queues invents a forecast's arrivals per queue"
    assert [p.startswith(message) for p in problems] == ([True] if refused else [])
    assert bool(pool_problems(pool)) == refused  # (the model, lint and the operator: alike)
    bad = {**pool, "spec": {"size": 2, "forecastArrivals": "often"}}
    assert any("forecastArrivals" in p for p in api_server_problems(bad, schema["openAPIV3Schema"]))


def test_a_future_invents_at_most_its_limit_the_earliest_of_the_same_draw():
    """`poisson_copies` with a limit keeps the first arrivals of what it draws without one
    (the same generator, the same times and copies), and `invent` bounds each future by
    `INVENTED` on a pool offered far more than it runs (a horizon of days)."""

    def copy(i: int) -> tuple[Any, Any]:
        return chain(1.0), None

    whole = list(poisson_copies(3, copy, 2.0, 0.0, 100.0, 2, np.random.default_rng(7)))
    cut = list(poisson_copies(3, copy, 2.0, 0.0, 100.0, 2, np.random.default_rng(7), limit=5))
    assert [len(f.arrivals) for f in cut] == [5, 5]
    assert [a.time for a in cut[0].arrivals] == [a.time for a in whole[0].arrivals[:5]]
    assert len(whole[0].arrivals) > 100  # (2 a second over 100 s: the limit did cut)

    cluster = Cluster(1)
    for k in range(40):  # one every second, each an hour of work: far more than it runs
        cluster.add_job(chain(3600.0), float(k), f"w{k}")
    drawn = invent("poisson", cluster, cluster.jobs, 2, np.random.default_rng(0))
    assert drawn is not None
    assert [len(f.arrivals) for f in drawn] == [INVENTED, INVENTED]


def test_a_forecast_draws_only_the_futures_of_the_replays_its_budget_runs():
    """`poisson` futures are drawn as the forecast reads them: a budget that lets one
    replay run draws one future of the twenty asked (the generator is where one draw
    leaves it), and that future is the first of the twenty drawn at once."""
    cluster, (refresh,) = srpt_pool("poisson")
    recent = templates(refresh.recent)
    drawing, one = np.random.default_rng(3), np.random.default_rng(3)
    out = forecast(
        cluster,
        make_scheduler("srpt"),
        futures=invent("poisson", cluster, recent, 20, drawing),
        budget=1,
    )
    first = next(iter(invent("poisson", cluster, recent, 20, one) or []))
    assert out.replays == 1
    assert drawing.bit_generator.state == one.bit_generator.state
    whole = list(invent("poisson", cluster, recent, 20, np.random.default_rng(3)) or [])
    assert whole[0] == first and len(whole) == 20


def test_a_pool_that_invents_arrivals_starts_with_the_smaller_start_prior():
    """A cold pool that invents arrivals widens by `START_PRIOR_INVENTED`, one that does not
    by `START_PRIOR` (why each is what it is: tests/test_forecast_calibration.py's refit on
    training seeds), and a change of the setting moves the prior at the next refresh, as
    `forecast evaluate`'s run with and without `--arrivals` takes it."""
    from idlegate.evaluation.forecast_eval import Tuning
    from idlegate.sim.forecast_calibration import START_PRIOR, START_PRIOR_INVENTED

    assert Tuning(invented=True).start.prior == START_PRIOR_INVENTED
    assert Tuning(invented=False).start.prior == START_PRIOR
    _, (poisson, none) = srpt_pool("poisson", "none")
    for refresh in (poisson, none):
        refresh.poke()
    assert poisson.calibration["start"].prior == START_PRIOR_INVENTED
    assert none.calibration["start"].prior == START_PRIOR
    none.arrivals = "poisson"  # (what `Bridge.forecast_arrivals` does on a spec change)
    none.not_before = -math.inf  # (the duty cap's pause, which a frozen clock never ends)
    none.poke()
    assert none.calibration["start"].prior == START_PRIOR_INVENTED
