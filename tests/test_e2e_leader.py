"""Two replicas of the real operator with leader election (``--leader-election``), the
leader stopped in the middle of a burst of workflows (the scenarios are tests/failover.py's):

* killed -9 at 30 % of 200 workflows: the standby takes the Lease and releases pods again
  within the lease duration plus 20 s, measured on the emulator's clock;
* SIGTERM: it releases the Lease, which the standby takes without waiting for it to expire;
* SIGTERM to the leader and, 0.3 s later, to the standby: the standby, told to stop, never
  takes the Lease, which the next replica takes at once (released, not left to expire);
* both replicas started under one name (POD_NAME), the leader killed and started again
  under it: never two leaders.

In each, no pod is created twice, no workflow is lost, the pool's bound holds, and only the
Lease's holder writes: the API server's audit (each write names its replica's identity in
its User-Agent) shows no write by a replica that did not hold it. A workflow that finished
before the stop keeps its status (no startTime, completionTime, jctSeconds or condition
rewritten), the last leader's idlegate_workflows_finished_total counts only the workflows it
finished, and no workflow is recorded twice across the replicas' history files (the
replica queued while standing by; what it queued acts on the state it reads as leader).
How soon a SIGTERM ends a replica is benchmarks/failover.py's figure, not a test's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.failover import Failover, failover, replica_of
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


def held(run: Failover, workflows: int, pool: int) -> None:
    """What every scenario keeps."""
    assert run.second_writers == [], (run.writes, run.second_writers[:5])
    assert run.duplicates == []
    assert run.finished == {f"wf-{i}": "Succeeded" for i in range(workflows)}
    assert run.max_running <= pool, run.max_running
    assert run.rewritten == [], run.rewritten
    assert run.counted[0] == run.counted[1], run.counted
    assert run.recorded_twice == [], run.recorded_twice


def test_the_standby_takes_over_a_burst_when_the_leader_is_killed(api, tmp_path):
    run = failover(api, tmp_path, workflows=200, pool=8, lease=LEASE, kill_after=60)
    held(run, 200, 8)
    # both wrote (the killed leader before, the standby after), each only while it led
    assert {replica_of(i) for i in run.writes} == {"replica-a", "replica-b"}, run.writes
    assert run.to_release <= LEASE[0] + TAKEOVER_BUDGET, run
    assert run.to_lease <= run.to_release
    # a takeover's cost does not grow with finished workflows: none is written, and no
    # Event already there is posted again
    assert run.finished_writes == [], (len(run.finished_writes), run.finished_writes[:3])
    assert run.events_again == 0, run.events_again


def test_a_leader_stopped_on_purpose_releases_the_lease_to_the_standby(api, tmp_path):
    run = failover(api, tmp_path, workflows=30, pool=4, lease=LEASE, kill_after=5, scenario="term")
    held(run, 30, 4)
    assert run.exit_codes == [0] and run.taken_when_told_to_stop == []
    # released ("" written), then taken by the standby: not left to expire
    assert len(run.holders) == 2 and run.holders[0] == "", run.holders


def test_a_standby_told_to_stop_never_takes_the_lease(api, tmp_path):
    run = failover(
        api, tmp_path, workflows=30, pool=4, lease=LEASE, kill_after=5, scenario="term-both"
    )
    held(run, 30, 4)
    assert run.exit_codes == [0, 0]
    # the standby may take the released Lease in the 0.3 s before its own SIGTERM, never
    # after; the last to stop releases it, which the next replica takes (not left to expire)
    assert run.taken_when_told_to_stop == [], run.holders
    assert [replica_of(h) for h in run.holders[-2:]] == ["", "replica-c"], run.holders


def test_two_replicas_under_one_name_never_both_lead(api, tmp_path):
    run = failover(
        api, tmp_path, workflows=30, pool=4, lease=LEASE, kill_after=5, scenario="same-name"
    )
    held(run, 30, 4)
    # the killed leader, then another: two identities under one name (one, and two leaders,
    # before identities were unique; second writers are then invisible to the audit)
    assert len(run.writes) >= 2, run.writes
