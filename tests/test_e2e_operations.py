"""docs/operations.md end to end, against the emulator: from a cluster's history to a new
policy in production.

One test walks the runbook's five steps with the real kopf operator (tests/e2e.py), the
test API server and a simulated kubelet, and the real commands (through the CLI):

1. a "week" of workflows runs under default (the portfolio) with the history sink
   (``--history-file``);
2. ``idlegate history export`` reads it through the API and from the sink: the same
   finished workflows, with their pool, policy and measured run times;
3. ``idlegate advise`` replays the last part and recommends (a small candidate set);
4. ``idlegate train --preset cluster --history`` trains a tiny policy on the first part,
   and its ONNX metadata names the exported history;
5. the operator restarts with the policy read from a file and the trained model as
   ``--shadow`` (agreement and expected change are measured); the trained model is
   swapped into the policy's file and hot-reloaded: the operator decides with it
   (metadata, metrics, the ``PolicyReloaded`` Event on its Pod; the shadow, now the same
   model, agrees at every decision and expects no change), further workflows finish, and
   a broken file after that keeps it (``PolicyReloadFailed``).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from idlegate.cli import app
from idlegate.operator.edge.reload import digest
from idlegate.operator.runtime import Operator
from idlegate.policy import DEFAULT_POLICY_PATH
from idlegate.sim.history import history_facts, load_history
from tests.clocks import ScaledClock
from tests.e2e import (
    DWF,
    SPEED,
    PodMonitor,
    events_of,
    running_operator,
    stage,
    status_of,
    wait,
    wait_phase,
    workflow,
)
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet

# On an accelerated wall clock, not fake loop time: the real operator, the API emulator
# and the simulated kubelet run in threads (or processes) of their own; why: tests/e2e.py,
# at SPEED.

pytestmark = pytest.mark.slow

POOL = 3
OPERATOR_POD = "idlegate-operator-0"
TINY_TRAINING = """\
workers: 1
validation: {seeds: [1000000], every: 1, reference_schedulers: [fifo]}
bc: {heuristic: srpt, episodes: 1, epochs: 1, dagger_rounds: 0}
"""
"""The smallest training that still learns from a teacher and exports an ONNX policy."""


def wave(i: int) -> list[dict[str, Any]]:
    """Four workflows arriving together: a long two-stage ETL among short ones, so that
    the order matters to the average JCT."""
    return [
        workflow(f"etl-{i}", stage("extract", 2, 12), stage("load", 1, 6, ("extract",))),
        workflow(f"query-{i}", stage("scan", 1, 2)),
        workflow(f"agg-{i}", stage("map", 3, 4)),
        workflow(f"ping-{i}", stage("probe", 1, 1)),
    ]


def run_waves(api: ApiServer, ns: str, waves: range, gap: float = 1.5) -> list[str]:
    """Create `waves` `gap` wall seconds apart (the API stamps creation to the second), and
    wait until every workflow has succeeded; their names."""
    names: list[str] = []
    for n, i in enumerate(waves):
        if n:
            time.sleep(gap)
        for body in wave(i):
            api.create(DWF, body, namespace=ns)
            names.append(body["metadata"]["name"])
    for name in names:
        status = wait_phase(api, ns, name, ("Succeeded", "Failed"), timeout=60)
        assert status["phase"] == "Succeeded", (name, status)
    return names


def idlegate(command: str) -> str:
    """Run ``idlegate COMMAND`` as the runbook writes it; its standard output."""
    result = CliRunner().invoke(app, shlex.split(command))
    assert result.exit_code == 0, result.output
    return result.stdout


def swap_in(target: Path, content: bytes) -> None:
    """Replace `target` by a rename, as a ConfigMap update does (never half written)."""
    staged = target.with_name(f".{target.name}.new")
    staged.write_bytes(content)
    os.replace(staged, target)


def pod_events(api: ApiServer, ns: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the Events on the operator's own Pod."""
    return [(e["type"], e["reason"], e["message"]) for e in events_of(api, ns, OPERATOR_POD)]


def test_from_a_history_to_a_new_policy_in_production(
    api: ApiServer,
    ns: str,
    kubelet: SimKubelet,
    monitor: PodMonitor,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    clock = ScaledClock(SPEED)  # shared by both runs: one timeline across the restart
    sink = tmp_path / "var" / "history.jsonl"

    # -- 1. a week of history: default, the portfolio (no --scheduler), with the sink -------
    with running_operator(api, ns, pool=POOL, policy=None, clock=clock, history_file=sink) as op:
        assert op.scheduler.name == "portfolio"
        week = run_waves(api, ns, range(4))
        wait(
            lambda: op.metrics.value("idlegate_history_records_total") == len(week),
            10,
            "a sink record of every workflow",
        )
    assert not monitor.duplicates and monitor.max_total <= POOL

    # -- 2. export: through the API, and from the sink --------------------------------------
    history = tmp_path / "history.jsonl"
    idlegate(f"history export --kubeconfig {api.kubeconfig} -n {ns} -o {history}")
    idlegate(f"history export --from-sink {sink} -o {tmp_path / 'sink.jsonl'}")
    live, kept = load_history(history), load_history(tmp_path / "sink.jsonl")
    assert sorted(w.name for w in live) == sorted(f"{ns}/{n}" for n in week)
    assert [(w.name, w.outcome, w.policy, w.pool_size) for w in live] == [
        (w.name, w.outcome, w.policy, w.pool_size) for w in kept
    ]
    assert {(w.outcome, w.policy, w.pool_size) for w in live} == {("Succeeded", "default", POOL)}
    for w in live:
        assert w.jct is not None and w.jct > 0
        assert all(m and all(d > 0 for d in m) for m in w.measured), w  # every stage measured
    etl = next(w for w in live if w.name == f"{ns}/etl-0")
    assert [len(m or ()) for m in etl.measured] == [2, 1]
    facts = history_facts(history)
    assert facts.workflows == 16 and facts.pool_size == POOL

    # -- 3. advise: the last half of the span, paired against what the cluster ran ---------
    advice = tmp_path / "advice"
    printed = idlegate(
        f"advise {history} --train-fraction 0.5 --heuristics fifo,srpt --seeds 2 --out {advice}"
    )
    report = json.loads((advice / "advise.json").read_text())
    assert report["cluster_policy"] == {"row": "default", "source": "recorded"}
    assert report["pool_size"] == POOL and report["history"]["sha256"] == facts.sha256
    reported, trained_on = report["reported_workflows"], report["train_workflows"]
    assert reported + trained_on == 16 and reported >= 4 and trained_on >= 4
    recommendation = report["recommendation"]
    assert recommendation["text"] in printed and printed.count("Recommendation:") == 1
    if recommendation["switch"]:  # a switch is only recommended with its interval below 0
        assert recommendation["avg_jct_change"]["high"] < 0
    else:
        assert recommendation["scheduler"] == "default"
    # (one row of default's: in bold where it is the best, which the recorded history decides)
    rows = re.findall(r"^\| (?:\*\*)?default(?:\*\*)? \|", (advice / "advise.md").read_text(), re.M)
    assert len(rows) == 1

    # -- 4. train on the first half; the model names the history it learned from ----------
    (tmp_path / "tiny.yaml").write_text(TINY_TRAINING)
    run = tmp_path / "train-cluster"
    idlegate(
        f"train --preset cluster --history {history} --train-fraction 0.5 "
        f"--config {tmp_path / 'tiny.yaml'} --out {run}"
    )
    trained = run / "policy.onnx"
    idlegate(
        f"advise {history} --train-fraction 0.5 --heuristics fifo --seeds 2 "
        f"--policy {trained} --out {advice}"
    )
    judged = json.loads((advice / "advise.json").read_text())
    assert list(judged["comparison"]["schedulers"]) == [
        "fifo",
        "learned:default",
        "default",
        "trained",
    ]
    assert "trained was trained on the first 50 % of this history's span" in judged["notes"]

    # -- 5. shadow, then switch: the policy from a file (a ConfigMap), the trained one beside it
    policy_file, shadow_file = (
        tmp_path / "policy" / "model.onnx",
        tmp_path / "shadow" / "model.onnx",
    )
    for path, source in ((policy_file, DEFAULT_POLICY_PATH), (shadow_file, trained)):
        path.parent.mkdir()
        shutil.copyfile(source, path)
    monkeypatch.setenv("POD_ID", OPERATOR_POD)  # (the downward API's, as the Deployment sets)
    monkeypatch.setenv("POD_NAMESPACE", ns)
    with running_operator(
        api,
        ns,
        pool=POOL,
        policy=f"learned:{policy_file}",
        shadow=f"learned:{shadow_file}",
        policy_reload_interval=0.1,
        clock=clock,
        history_file=sink,
    ) as op:
        value = op.metrics.value
        assert op.scheduler.metadata.get("idlegate.history") is None  # the shipped model

        # shadow: every decision compared; agreement and the expected change exported
        shadowed = run_waves(api, ns, range(4, 6))
        wait(lambda: not math.isnan(value("idlegate_shadow_agreement_ratio")), 20, "agreement")
        wait(lambda: math.isfinite(value("idlegate_shadow_expected_change")), 30, "an estimate")
        compared = sum(value("idlegate_shadow_decisions_total", agree=a) for a in ("true", "false"))
        assert compared >= 1 and 0 <= value("idlegate_shadow_agreement_ratio") <= 1
        assert value("idlegate_shadow_errors_total") == 0

        # switch: the trained model replaces the policy's file; it takes over, no restart
        decisions = op.metrics.decision_count()
        swap_in(policy_file, trained.read_bytes())
        wait(
            lambda: value("idlegate_policy_reloads_total", role="active", result="ok") == 1,
            10,
            "the reload",
        )
        for policy in (op.scheduler, op.bridge.core.scheduler, op.bridge.core.decider.policy):
            assert json.loads(policy.metadata["idlegate.history"])["sha256"] == facts.sha256
        sha = digest((policy_file,))
        wait(lambda: any(r == "PolicyReloaded" for _, r, _ in pod_events(api, ns)), 10, "Event")
        [(kind, _, message)] = [e for e in pod_events(api, ns) if e[1] == "PolicyReloaded"]
        assert kind == "Normal" and str(policy_file) in message and sha[:12] in message

        # the shadow is now the same model as the policy: it agrees from here on
        settle_shadow(op)
        disagreed = value("idlegate_shadow_decisions_total", agree="false")
        agreed = value("idlegate_shadow_decisions_total", agree="true")
        switched = run_waves(api, ns, range(6, 8))
        settle_shadow(op)
        assert value("idlegate_shadow_decisions_total", agree="true") > agreed
        assert value("idlegate_shadow_decisions_total", agree="false") == disagreed
        assert value("idlegate_shadow_expected_change") == pytest.approx(0.0, abs=1e-9)
        assert op.metrics.decision_count() > decisions
        assert value("idlegate_policy_errors_total", policy=op.scheduler.name) == 0
        for name in switched:
            assert status_of(api, ns, name)["policy"] == "model"  # the file's name

        # a broken model later: the trained one stays, with a Warning and a metric
        swap_in(policy_file, b"not an ONNX model")
        wait(
            lambda: value("idlegate_policy_reloads_total", role="active", result="failed") == 1,
            10,
            "the failed reload",
        )
        assert json.loads(op.scheduler.metadata["idlegate.history"])["sha256"] == facts.sha256
        wait(lambda: any(r == "PolicyReloadFailed" for _, r, _ in pod_events(api, ns)), 10, "Warn")
        [(kind, _, message)] = [e for e in pod_events(api, ns) if e[1] == "PolicyReloadFailed"]
        assert kind == "Warning" and "keeps the policy model" in message
        after = run_waves(api, ns, range(8, 9))
        wait(lambda: op.bridge.lanes.pending() == 0, 5, "the last writes")
    assert not monitor.duplicates and monitor.max_total <= POOL
    # the sink kept recording across the restart: the next week's history is there too
    records = load_history(sink)
    assert len(records) == len(week) + len(shadowed) + len(switched) + len(after)
    # (the sink records the --scheduler spec, which advise rebuilds; the status the rule)
    ran = {r.policy for r in records if r.name in {f"{ns}/{n}" for n in switched}}
    assert ran == {f"learned:{policy_file}"}


def settle_shadow(op: Operator) -> None:
    """Wait until the shadow's worker has replayed every round handed to it so far."""
    shadow = op.shadow
    assert shadow is not None
    wait(lambda: all(f.done() for f in list(shadow._pending)), 20, "the shadow's worker")
