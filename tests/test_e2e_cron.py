"""A DagCronWorkflow over a simulated day, against the emulated API server, with the real
operator (kopf) stopped for three hours in the middle.

The clock runs 1,440 times faster than the wall (a day in a minute), the kubelet too. The
schedule is hourly with a starting deadline of two hours, so the runs that fell due while
the operator was down are missed except the latest, which starts on the restart: the runs'
scheduled times are hourly apart everywhere except one gap, and every run starts once.
"""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from idlegate.api.kinds import API_VERSION
from idlegate.api.labels import ANNOTATION_SCHEDULED, LABEL_CRON
from tests.clocks import ScaledClock
from tests.e2e import events_of, kubelet_for, running_operator, stage, wait
from tests.k8s.harness import ApiServer

# On an accelerated wall clock, not fake loop time: the real operator, the API emulator
# and the simulated kubelet run in threads (or processes) of their own; why: tests/e2e.py,
# at SPEED.

pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")

SPEED = 1440.0
"""A simulated day in 60 wall seconds; an hourly run every 2.5 s (a timer that fires 2.5 s
late misses one, as CronJob semantics say: the test accepts such a gap when the run after
it counts the missed one)."""
HOUR = 3600.0
DCWF = "idlegate.io/v1alpha1/dagcronworkflows"
DWF = "idlegate.io/v1alpha1/dagworkflows"


def cron(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "DagCronWorkflow",
        "metadata": {"name": name},
        "spec": {
            "schedule": "@hourly",
            "workflowSpec": {"stages": [stage("work", 1, 600)]},  # 10 min: 0.2 s wall
            **spec,
        },
    }


def runs(api: ApiServer, ns: str, name: str) -> list[float]:
    """The scheduled times of the cron workflow's runs, in order."""
    found = api.list(DWF, ns, label_selector=f"{LABEL_CRON}={name}")
    return sorted(float(r["metadata"]["annotations"][ANNOTATION_SCHEDULED]) for r in found)


def test_a_day_of_hourly_runs_with_a_restart_in_the_middle(api: ApiServer, ns: str):
    clock = ScaledClock(SPEED)  # one clock across both operator runs, as the wall is
    body = cron("hourly", startingDeadlineSeconds=int(2 * HOUR), successfulJobsHistoryLimit=100)
    with kubelet_for(api, ns, speed=SPEED):
        with running_operator(api, ns, pool=2, clock=clock):
            api.create(DCWF, body, namespace=ns)
            wait(lambda: len(runs(api, ns, "hourly")) >= 10, 60, "ten hourly runs")
        before = runs(api, ns, "hourly")
        time.sleep(3 * HOUR / SPEED)  # three hours without an operator
        with running_operator(api, ns, pool=2, clock=clock):
            wait(lambda: len(runs(api, ns, "hourly")) >= len(before) + 10, 60, "ten more runs")
            wait(
                lambda: all(
                    (r.get("status") or {}).get("phase") == "Succeeded"
                    for r in api.list(DWF, ns, label_selector=f"{LABEL_CRON}=hourly")[:-1]
                ),
                10,
                "the runs to succeed",
            )
    times = runs(api, ns, "hourly")
    gaps = [round((b - a) / HOUR) for a, b in itertools.pairwise(times)]
    # one gap of three hours or more: those the operator was down, all missed but the
    # latest (within 2 h), started on the restart
    assert len([g for g in gaps if g >= 3]) == 1, gaps
    assert times[: len(before)] == before  # nothing started twice, nothing lost
    assert all(t % HOUR == 0 for t in times)
    events = events_of(api, ns, "hourly")
    started = [e for e in events if e["reason"] == "RunStarted"]
    assert sum(e.get("count", 1) for e in started) == len(times)
    # every run after a gap (the restart's; or a timer that fired an hour late, 2.5 s of
    # wall time on a busy machine) counts the runs it missed within the deadline (2 h)
    missed = [e for e in events if e["reason"] == "MissedSchedule"]
    for gap, after in zip(gaps, times[1:], strict=True):
        if gap == 1:
            continue
        due = datetime.fromtimestamp(after, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        (said,) = [e for e in missed if e["message"].endswith(due)]
        assert 1 <= int(said["message"].split(" ")[0]) <= min(gap - 1, 2)
    status = api.get(DCWF, ns, "hourly")["status"]
    valid = {c["type"]: c for c in status["conditions"]}["Valid"]
    assert valid["status"] == "True"
    assert status["nextScheduleTime"] > status["lastScheduleTime"]
