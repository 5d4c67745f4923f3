"""benchmarks/live_audit.py: live_pool's figures on the real control plane, from
kube-apiserver's audit log (a small log in its format: tests/data/audit/live_pool.log)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from idlegate.controlplane import launcher
from idlegate.errors import IdlegateError
from tests.helpers import load_benchmark

LOG = Path(__file__).parent / "data" / "audit" / "live_pool.log"
T0 = 1_795_937_280.0  # 2026-11-29T07:28:00Z
audit = load_benchmark("live_audit")
live = load_benchmark("live_figures")


def test_the_audit_logs_writes_give_live_pools_figures() -> None:
    entries, requests, jcts = audit.read(LOG.read_text().splitlines())
    # the writes in the time's order, the binding on the pod as last written
    pods = [(e.t - T0, e.phase, e.gated, e.node) for e in entries if e.kind == "pods"]
    assert pods == [
        (pytest.approx(790.1), "Pending", True, ""),  # the operator creates p0 gated
        (pytest.approx(790.2), "Pending", False, ""),  # and releases it
        (pytest.approx(790.3), "Pending", False, "node-0"),  # kube-scheduler binds it
        (pytest.approx(790.4), "Running", False, "node-0"),  # KWOK runs it
        (pytest.approx(791.0), "Succeeded", False, "node-0"),  # and ends it
    ]
    assert [e.version for e in entries] == sorted(e.version for e in entries)
    assert jcts == {("ns", "w"): 1.6}
    # the operator's requests only (its User-Agents), refused ones too
    assert [(r.method, r.kind, r.subresource, r.status) for r in requests] == [
        ("PATCH", "executorpools", "status", 200),
        ("POST", "pods", "", 201),
        ("PATCH", "pods", "", 200),
        ("PATCH", "pods", "", 409),
        ("PATCH", "dagworkflows", "status", 200),
        ("POST", "events", "", 201),
        ("POST", "leases", "", 201),
    ]
    found = live.figures(entries, requests)
    assert found.pods == 1
    assert found.binds == pytest.approx([0.1], abs=1e-6)
    assert found.watch_lags == pytest.approx([0.6], abs=1e-6) and found.watch_by == ["dagworkflows"]
    assert found.event_lags == pytest.approx(
        [0.1], abs=1e-6
    )  # stamped 11 s, said of the write at 11.6
    assert found.requests == {"pool status": 1, "pod creates": 1, "pod patches": 2,
                              "status": 1, "events": 1, "other": 1}  # fmt: skip


def test_the_audit_recorder_follows_the_log_as_it_grows(tmp_path: Path) -> None:
    lines = LOG.read_text().splitlines(keepends=True)
    path = tmp_path / "audit.log"
    recorder = audit.AuditRecorder(path, every=3600)  # (read here, not by its thread)
    recorder._read_new()  # (no log yet)
    path.write_text(lines[0][:50])  # the pool's write, half written
    recorder._read_new()
    assert not recorder.pool_seen.is_set()
    path.write_text("".join(lines[:-3]))
    recorder._read_new()
    assert recorder.pool_seen.is_set() and not recorder.ended([("ns", "w")])
    path.write_text("".join(lines))
    recorder._read_new()
    assert recorder.ended([("ns", "w")])
    entries, requests, jcts = recorder.close()
    assert (len(entries), len(requests), jcts) == (9, 7, {("ns", "w"): 1.6})


def test_the_planes_audit_policy_keeps_the_objects_written_and_no_reads(tmp_path: Path) -> None:
    flags = launcher.audit_flags(tmp_path)
    assert f"--audit-log-path={tmp_path / launcher.AUDIT_LOG}" in flags
    policy = yaml.safe_load((tmp_path / "audit-policy.yaml").read_text())
    assert policy == launcher.AUDIT_POLICY and policy["omitStages"] == ["RequestReceived"]
    reads, objects, others = policy["rules"]
    assert reads["level"] == "None" and "watch" in reads["verbs"]
    core = objects["resources"][0]["resources"]
    assert objects["level"] == "RequestResponse" and {"pods/binding", "events"} <= set(core)
    assert others["level"] == "Metadata"


def test_live_pool_refuses_a_plane_it_does_not_know_or_cannot_start(monkeypatch, tmp_path) -> None:
    live_pool = load_benchmark("live_pool")
    with pytest.raises(IdlegateError, match="no plane 'kind': give test or real"):
        live_pool.check_planes("test,kind")

    monkeypatch.setattr("tests.k8s.real.BIN", tmp_path)  # (no binary built there)
    with pytest.raises(IdlegateError, match="build the control plane first with `make cluster`"):
        live_pool.check_planes("test,real")
    assert live_pool.check_planes("test") == ["test"]


def test_scale_real_sets_the_planes_side_by_side() -> None:
    scale_real = load_benchmark("scale_real")
    run = {"nodes": 1000, "pods": 4992, "wall_seconds": 312.4, "pods_per_second": 16.0,
           "decision_p99_ms": 0.8, "cpu_ms_per_pod": 9.1, "operator": {"peak_rss_mib": 300}}  # fmt: skip
    lines = scale_real.table({"test": run, "real": {**run, "decision_p99_ms": None}}).splitlines()
    assert lines[0].split()[:4] == ["plane", "nodes", "pods", "wall"]
    assert lines[1].split() == ["test", "1000", "4992", "312", "16.0", "0.80", "9.1", "300"]
    assert lines[2].split()[5] == "-"
    with pytest.raises(IdlegateError, match="12 pods or more"):
        scale_real.measure(scale_real.parser().parse_args(["--pods", "5"]))
