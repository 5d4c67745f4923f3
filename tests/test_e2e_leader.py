"""Two replicas of the real operator with leader election (``--leader-election``), the
leader killed -9 in the middle of a burst of 200 workflows (the scenario is
tests/failover.py's): the standby takes the Lease and releases pods again within the
lease duration plus 20 s, measured on the emulator's clock; no pod is created twice, no
workflow is lost and the pool's bound holds throughout. Only the Lease's holder writes: the
API server's audit (each write names its replica in its User-Agent) shows no write of the
standby before the kill and none of the killed leader after the takeover. A leader stopped on purpose
(SIGTERM) releases the Lease, which the standby takes without waiting for it to expire."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tests.failover import REPLICAS, failover
from tests.k8s.harness import ApiServer, serving_crd

pytestmark = pytest.mark.slow

LEASE = (15, 10.0, 2.0)
"""(duration, renew deadline, retry period) in seconds: the operator's defaults."""
TAKEOVER_BUDGET = 20.0
"""Seconds beyond the lease duration the standby may take to release again: its looks at
the Lease (every retry period), its rebuild of the state, its first decision."""


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    yield from serving_crd(tmp_path_factory.mktemp("k8s"))


def test_the_standby_takes_over_a_burst_when_the_leader_is_killed(api, tmp_path):
    pool = 8
    run = failover(api, tmp_path, workflows=200, pool=pool, lease=LEASE, kill_after=40)
    # both wrote (the killed leader before, the standby after), each only while it led
    assert sorted(run.writes) == sorted(REPLICAS), run.writes
    assert run.second_writers == [], (run.writes, run.second_writers[:5])
    assert run.to_release <= LEASE[0] + TAKEOVER_BUDGET, run
    assert run.to_lease <= run.to_release
    assert run.duplicates == []
    assert run.finished == {f"wf-{i}": "Succeeded" for i in range(200)}
    assert run.max_running <= pool, run.max_running


def test_a_leader_stopped_on_purpose_releases_the_lease_to_the_standby(api, tmp_path):
    pool = 4
    run = failover(
        api, tmp_path, workflows=30, pool=pool, lease=LEASE, kill_after=5, how=signal.SIGTERM
    )
    assert run.second_writers == [], (run.writes, run.second_writers[:5])
    assert run.exit_code == 0
    # released ("" written), then taken by the standby: not left to expire
    assert len(run.holders) == 2 and run.holders[0] == "", run.holders
    assert run.duplicates == []
    assert run.finished == {f"wf-{i}": "Succeeded" for i in range(30)}
    assert run.max_running <= pool, run.max_running
