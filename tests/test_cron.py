"""DagCronWorkflow: the schedule's times, which run is due, and the controller's syncs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from idlegate.api.cron_spec import (
    CronSchedule,
    cron_spec_problems,
    due,
    parse_cron_spec,
    run_name,
)
from idlegate.api.labels import LABEL_CRON
from idlegate.api.lint import cron_problems
from idlegate.api.settings import Settings
from idlegate.api.status import MAX_MEASURED
from idlegate.errors import SpecError
from idlegate.operator.edge.cron import CronController
from idlegate.operator.edge.kube import ApiError
from tests.helpers import load_benchmark, wide_workflow
from tests.operator_fakes import FakeClock, FakeKube, FakeTimers, applier_on

T0 = datetime(2026, 1, 5, 0, 0, tzinfo=UTC).timestamp()  # a Monday, midnight UTC
HOUR = 3600.0
WORKFLOW = {"stages": [{"name": "only", "tasks": 1, "taskDurationSeconds": 5}]}
big = load_benchmark("big_workflows")


# -- the schedule ---------------------------------------------------------------------------


def test_hourly_fires_on_the_hour_and_strictly_after():
    s = CronSchedule.parse("@hourly")
    assert s.next_after(T0) == T0 + HOUR
    assert s.next_after(T0 + 1) == T0 + HOUR
    assert list(s.times(T0, T0 + 3 * HOUR)) == [T0 + HOUR, T0 + 2 * HOUR, T0 + 3 * HOUR]


def test_time_zone_shifts_the_schedule():
    berlin = CronSchedule.parse("0 2 * * *", "Europe/Berlin")  # 02:00 CET = 01:00 UTC in January
    assert berlin.next_after(T0) == T0 + HOUR


@pytest.mark.parametrize(
    ("schedule", "zone", "said"),
    [
        ("61 * * * *", "UTC", "not valid cron syntax"),
        ("* * *", "UTC", "five fields"),
        ("@sometimes", "UTC", "@hourly"),
        ("@daily", "Mars/Olympus", "not a known IANA time zone"),
    ],
)
def test_bad_schedules_say_what_is_wrong(schedule: str, zone: str, said: str):
    with pytest.raises(SpecError, match=said):
        CronSchedule.parse(schedule, zone)


def test_spec_errors_name_the_object_and_field():
    with pytest.raises(SpecError, match="cw: workflowSpec"):
        parse_cron_spec({"schedule": "@daily", "workflowSpec": {"stages": []}}, "cw")
    with pytest.raises(SpecError, match="concurrencyPolicy"):
        parse_cron_spec(
            {"schedule": "@daily", "workflowSpec": WORKFLOW, "concurrencyPolicy": "Never"}, "cw"
        )


# -- which run is due -------------------------------------------------------------------------


def _due(now: float, last: float | None = None, deadline: float | None = None):
    return due(
        CronSchedule.parse("@hourly"),
        now=now,
        last_scheduled=last,
        created=T0 + 60,
        starting_deadline=deadline,
    )


def test_nothing_is_due_before_the_first_time():
    d = _due(T0 + 1800)
    assert (d.run_at, d.missed, d.too_late, d.next_at) == (None, 0, None, T0 + HOUR)


def test_only_the_latest_unmet_run_is_started_and_the_rest_are_missed():
    d = _due(T0 + 5 * HOUR + 60, last=T0 + HOUR)
    assert (d.run_at, d.missed, d.next_at) == (T0 + 5 * HOUR, 3, T0 + 6 * HOUR)


def test_a_run_past_its_starting_deadline_is_not_started():
    late = _due(T0 + 5 * HOUR + 900, last=T0 + HOUR, deadline=600)
    assert late.run_at is None and late.too_late is None  # older ones are not even counted
    assert late.missed == 0
    in_time = _due(T0 + 5 * HOUR + 300, last=T0 + HOUR, deadline=600)
    assert in_time.run_at == T0 + 5 * HOUR and in_time.missed == 0


def test_run_names_are_the_scheduled_minute():
    assert run_name("nightly", T0 + HOUR) == f"nightly-{int((T0 + HOUR) // 60)}"


# -- the controller ---------------------------------------------------------------------------


class Env:
    def __init__(self, **spec: Any) -> None:
        self.kube = FakeKube()
        self.clock = FakeClock(T0)
        self.timers = FakeTimers()
        self.kube.add_cron_workflow(
            "cw", {"schedule": "@hourly", "workflowSpec": WORKFLOW, **spec}, created=T0 + 5
        )
        self.controller = self.restart()

    def restart(self) -> CronController:
        """A new controller, writing through a new applier, on the same API (an operator
        restart)."""
        self.timers = FakeTimers()
        self.told: dict[tuple[str, str], tuple] = {}
        self.told_pool: dict[tuple[str, str], str | None] = {}
        applier = applier_on(self.kube)
        self.lanes = applier.lanes
        self.controller = CronController(
            self.kube, self.timers, self.clock, applier.apply, self.foresee
        )
        return self.controller

    def foresee(self, key: tuple[str, str], runs: tuple, pool: str | None) -> None:
        self.told[key], self.told_pool[key] = runs, pool

    async def at(self, t: float) -> None:
        self.clock.advance(t - self.clock.now())
        await self.controller.resync("default", "cw")
        await self.lanes.wait_idle(600)  # (its writes, through the applier)

    @property
    def events(self) -> list[tuple[str, str, str]]:
        return [(e["type"], e["reason"], e["message"]) for e in self.kube.events]

    def runs(self) -> list[str]:
        return sorted(
            name
            for (_, name), w in self.kube.workflows.items()
            if (w["metadata"].get("labels") or {}).get(LABEL_CRON) == "cw"
        )

    def finish(self, name: str, phase: str = "Succeeded") -> None:
        self.kube.workflows[("default", name)]["status"] = {"phase": phase}

    def status(self) -> dict[str, Any]:
        return self.kube.cron_workflows[("default", "cw")].get("status") or {}

    def reasons(self) -> list[str]:
        return [r for _, r, _ in self.events]


def name_at(t: float) -> str:
    return run_name("cw", t)


@pytest.mark.asyncio
async def test_a_run_starts_when_due_owned_and_labelled_and_the_next_timer_is_armed():
    env = Env()
    await env.at(T0 + 10)
    assert env.runs() == []
    assert env.timers.armed["cron/default/cw"][0] == T0 + HOUR
    await env.at(T0 + HOUR + 1)
    assert env.runs() == [name_at(T0 + HOUR)]
    run = env.kube.workflows[("default", name_at(T0 + HOUR))]
    assert run["metadata"]["ownerReferences"][0]["kind"] == "DagCronWorkflow"
    assert run["spec"] == WORKFLOW
    status = env.status()
    assert status["lastScheduleTime"].startswith("2026-01-05T01:00:00")
    assert status["active"] == [name_at(T0 + HOUR)]
    assert status["nextScheduleTime"].startswith("2026-01-05T02:00:00")
    assert env.timers.armed["cron/default/cw"][0] == T0 + 2 * HOUR
    assert "RunStarted" in env.reasons()


@pytest.mark.asyncio
async def test_a_restart_neither_doubles_nor_forgets_a_run():
    env = Env()
    await env.at(T0 + HOUR + 1)
    env.kube.cron_workflows[("default", "cw")]["status"].pop("lastScheduleTime")  # lost write
    env.restart()
    await env.at(T0 + HOUR + 2)
    assert env.runs() == [name_at(T0 + HOUR)]  # the create answered 409: the same run
    env.restart()
    await env.at(T0 + 2 * HOUR + 5)
    assert env.runs() == [name_at(T0 + HOUR), name_at(T0 + 2 * HOUR)]


@pytest.mark.asyncio
async def test_a_create_answered_409_is_taken_as_done_through_the_applier():
    env = Env()
    # the run is there already but not listed (a stale list): the create answers 409
    env.kube.add_workflow(name_at(T0 + HOUR), WORKFLOW)
    await env.at(T0 + HOUR + 1)
    assert env.kube.calls.count("create_workflow") == 1
    assert env.status()["lastScheduleTime"].startswith("2026-01-05T01:00:00")
    assert env.status()["active"] == [name_at(T0 + HOUR)]
    assert "RunNotStarted" not in env.reasons()


@pytest.mark.asyncio
async def test_a_transient_error_on_the_create_is_retried_by_the_applier():
    env = Env()
    env.kube.fail["create_workflow"] = [ApiError(503, "ServiceUnavailable", "down")] * 2
    await env.at(T0 + HOUR + 1)
    assert env.runs() == [name_at(T0 + HOUR)]
    assert env.kube.calls.count("create_workflow") == 3
    assert env.status()["active"] == [name_at(T0 + HOUR)]


@pytest.mark.asyncio
async def test_a_run_refused_for_good_is_not_recorded_warns_and_is_tried_again():
    env = Env()
    env.kube.fail["create_workflow"] = [ApiError(403, "Forbidden", "no create for you")]
    await env.at(T0 + HOUR + 1)
    assert env.runs() == [] and "lastScheduleTime" not in env.status()
    warned = [m for t, r, m in env.events if (t, r) == ("Warning", "RunNotStarted")]
    assert warned and "no create for you" in warned[0]
    await env.at(T0 + HOUR + 60)  # the next sync starts it (still due: not recorded)
    assert env.runs() == [name_at(T0 + HOUR)]


@pytest.mark.asyncio
async def test_replace_never_deletes_the_due_run_itself_after_a_lost_status_write():
    env = Env(concurrencyPolicy="Replace")
    await env.at(T0 + HOUR + 1)
    uid = env.kube.workflows[("default", name_at(T0 + HOUR))]["metadata"]["uid"]
    env.kube.cron_workflows[("default", "cw")]["status"].pop("lastScheduleTime")  # lost write
    env.restart()
    await env.at(T0 + HOUR + 2)
    assert env.kube.workflows[("default", name_at(T0 + HOUR))]["metadata"]["uid"] == uid
    assert "Replaced" not in env.reasons()
    assert env.status()["lastScheduleTime"].startswith("2026-01-05T01:00:00")


@pytest.mark.asyncio
async def test_after_a_long_outage_the_deadline_decides():
    env = Env(startingDeadlineSeconds=600)
    await env.at(T0 + HOUR + 1)
    env.finish(name_at(T0 + HOUR))
    await env.at(T0 + 5 * HOUR + 300)  # 4 h later, 5 min past the last due time: in time
    assert env.runs() == [name_at(T0 + HOUR), name_at(T0 + 5 * HOUR)]
    env.finish(name_at(T0 + 5 * HOUR))
    await env.at(T0 + 7 * HOUR + 900)  # 15 min late: skipped
    assert env.runs() == [name_at(T0 + HOUR), name_at(T0 + 5 * HOUR)]


@pytest.mark.asyncio
async def test_without_a_deadline_missed_runs_are_counted_and_only_the_latest_starts():
    env = Env()
    await env.at(T0 + HOUR + 1)
    await env.at(T0 + 4 * HOUR + 1)
    assert env.runs() == [name_at(T0 + HOUR), name_at(T0 + 4 * HOUR)]
    assert any("2 earlier run(s) were missed" in m for _, _, m in env.events)


@pytest.mark.asyncio
async def test_forbid_skips_while_active_then_starts_within_the_deadline():
    env = Env(concurrencyPolicy="Forbid", startingDeadlineSeconds=1200)
    await env.at(T0 + HOUR + 1)
    await env.at(T0 + 2 * HOUR + 1)
    assert env.runs() == [name_at(T0 + HOUR)]
    assert "RunAlreadyActive" in env.reasons()
    env.finish(name_at(T0 + HOUR))
    await env.at(T0 + 2 * HOUR + 600)  # the first run finished: the due one starts
    assert env.runs() == [name_at(T0 + HOUR), name_at(T0 + 2 * HOUR)]


@pytest.mark.asyncio
async def test_replace_deletes_the_active_run_first():
    env = Env(concurrencyPolicy="Replace")
    await env.at(T0 + HOUR + 1)
    await env.at(T0 + 2 * HOUR + 1)
    assert env.runs() == [name_at(T0 + 2 * HOUR)]
    assert "Replaced" in env.reasons()


@pytest.mark.asyncio
async def test_finished_runs_beyond_the_history_limits_are_deleted_oldest_first():
    env = Env(successfulJobsHistoryLimit=2, failedJobsHistoryLimit=0)
    for h in range(1, 5):
        await env.at(T0 + h * HOUR + 1)
        env.finish(name_at(T0 + h * HOUR), "Failed" if h == 2 else "Succeeded")
    await env.at(T0 + 4 * HOUR + 2)
    assert env.runs() == [name_at(T0 + 3 * HOUR), name_at(T0 + 4 * HOUR)]
    assert env.status()["lastSuccessfulTime"].startswith("2026-01-05T04:00:00")


@pytest.mark.asyncio
async def test_suspend_holds_runs_and_resume_starts_the_latest_in_time():
    env = Env(suspend=True, startingDeadlineSeconds=600)
    await env.at(T0 + HOUR + 1)
    await env.at(T0 + 2 * HOUR + 1)
    assert env.runs() == []
    env.kube.cron_workflows[("default", "cw")]["spec"]["suspend"] = False
    await env.at(T0 + 2 * HOUR + 120)
    assert env.runs() == [name_at(T0 + 2 * HOUR)]


@pytest.mark.asyncio
async def test_an_invalid_schedule_is_reported_and_arms_no_timer():
    env = Env()
    env.kube.cron_workflows[("default", "cw")]["spec"]["schedule"] = "every hour"
    await env.at(T0 + HOUR + 1)
    valid = env.status()["conditions"][0]
    assert (valid["type"], valid["status"], valid["reason"]) == ("Valid", "False", "Invalid")
    assert "not valid cron syntax" in valid["message"]
    assert env.timers.armed == {} and env.runs() == []


@pytest.mark.asyncio
async def test_a_cron_workflow_whose_runs_would_not_fit_their_object_is_invalid_and_starts_none():
    env = Env(workflowSpec=big.layered(4000)["spec"])
    await env.at(T0 + HOUR + 1)
    valid = env.status()["conditions"][0]
    assert (valid["type"], valid["status"], valid["reason"]) == ("Valid", "False", "Invalid")
    said = valid["message"]
    assert said.startswith("the workflow's 4,000 stages make an object of about ")
    assert "\n" not in said and said.count(". ") == 0  # one sentence
    assert env.timers.armed == {} and env.runs() == []
    # lint says it of the same object, in the same words (the same run, the same estimate)
    assert cron_problems(env.kube.cron_workflows[("default", "cw")]) == [(None, said)]


@pytest.mark.asyncio
async def test_a_cron_workflows_runs_are_sized_with_the_operators_history_samples():
    wide = wide_workflow()["spec"]
    env = Env(workflowSpec=wide)  # fits with the default 20 durations a stage
    await env.at(T0 + HOUR + 1)
    assert env.runs() == [name_at(T0 + HOUR)]
    env = Env(workflowSpec=wide)
    env.controller.history_samples = MAX_MEASURED
    await env.at(T0 + HOUR + 1)
    assert env.runs() == []
    said = env.status()["conditions"][0]["message"]
    assert said.startswith("the workflow's 2,200 stages make an object of about ")
    cron = env.kube.cron_workflows[("default", "cw")]
    assert cron_problems(cron, samples=MAX_MEASURED) == [(None, said)]
    assert cron_problems(cron) == []


@pytest.mark.asyncio
async def test_the_operator_gives_its_cron_controller_its_history_samples():
    from idlegate.operator.runtime import Operator

    settings = Settings(pool_size=2, history_samples=MAX_MEASURED, clock=FakeClock(T0))
    quiet = {"metrics_port": None, "health_port": None}  # (no server: no port taken)
    operator = Operator(settings.model_copy(update=quiet), kube=FakeKube())
    await operator.start()
    try:
        assert operator.cron.history_samples == MAX_MEASURED
    finally:
        await operator.stop()


@pytest.mark.asyncio
async def test_a_deleted_cron_workflow_drops_its_timer():
    env = Env()
    await env.at(T0 + 10)
    del env.kube.cron_workflows[("default", "cw")]
    await env.at(T0 + 20)
    assert env.timers.armed == {}


@pytest.mark.asyncio
async def test_a_timer_whose_sync_fails_is_armed_again():
    env = Env()
    await env.at(T0 + 10)
    env.clock.advance(HOUR)
    env.kube.fail["get_cron_workflow"] = [ApiError(503, "ServiceUnavailable", "down")]
    assert await env.timers.fire_due(env.clock.now()) == 1
    assert env.timers.armed["cron/default/cw"][0] == env.clock.now() + 5
    env.clock.advance(5)
    await env.timers.fire_due(env.clock.now())
    await env.lanes.wait_idle(600)
    assert env.runs() == [name_at(T0 + HOUR)]


@pytest.mark.asyncio
async def test_the_upcoming_runs_are_told_and_withdrawn():
    env = Env()
    await env.at(T0 + 10)
    runs = env.told[("default", "cw")]
    assert [r.time for r in runs] == [T0 + h * HOUR for h in range(1, 9)]  # FORESEE_RUNS
    assert runs[0].name == name_at(T0 + HOUR) and all(r.scheduled for r in runs)
    assert runs[0].dag.num_stages == 1 and runs[0].dag.total_work == 5.0
    assert env.told_pool[("default", "cw")] is None  # (by its namespace's labels)
    env.kube.cron_workflows[("default", "cw")]["spec"]["workflowSpec"] = {**WORKFLOW, "pool": "gpu"}
    await env.at(T0 + 15)
    assert env.told_pool[("default", "cw")] == "gpu"  # where its runs will be routed
    env.kube.cron_workflows[("default", "cw")]["spec"]["suspend"] = True
    await env.at(T0 + 20)
    assert env.told[("default", "cw")] == ()
    env.kube.cron_workflows[("default", "cw")]["spec"]["suspend"] = False
    await env.at(T0 + 30)
    del env.kube.cron_workflows[("default", "cw")]
    await env.at(T0 + 40)
    assert env.told[("default", "cw")] == ()


def test_a_bad_time_zone_or_policy_does_not_hide_a_bad_schedule():
    with pytest.raises(SpecError) as exc:
        CronSchedule.parse("every night", "Mars/Olympus")
    assert str(exc.value).startswith("timeZone: 'Mars/Olympus' is not a known IANA time zone")
    assert "; schedule: 'every night' is not valid cron syntax" in str(exc.value)
    raw = {
        "schedule": "every night",
        "concurrencyPolicy": "Never",
        "suspend": "true",
        "workflowSpec": {"stages": [{"name": "a", "tasks": "1", "taskDurationSeconds": 1}]},
    }
    with pytest.raises(SpecError) as exc:
        parse_cron_spec(raw, "cw")
    said = str(exc.value)
    assert said.startswith("cw: workflowSpec: stages[0].tasks: must be an integer"), said
    for part in ("; concurrencyPolicy: ", "; suspend: must be true or false", "; schedule: "):
        assert part in said, said
    assert cron_spec_problems(raw)[0] == (
        "concurrencyPolicy",
        "Input should be 'Allow', 'Forbid' or 'Replace'",
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("suspend", "yes"),
        ("suspend", 1),
        ("startingDeadlineSeconds", "3600"),
        ("successfulJobsHistoryLimit", "3"),
        ("failedJobsHistoryLimit", True),
    ],
)
def test_cron_fields_take_only_the_types_the_crd_gives_them(field, value):
    raw = {"schedule": "@daily", "workflowSpec": WORKFLOW, field: value}
    ((path, _),) = cron_spec_problems(raw)
    assert path == field
    with pytest.raises(SpecError, match=field):
        parse_cron_spec(raw, "cw")
