"""The learned inspector: features, the scheduler's mechanics, the ONNX file, training."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.policy.heuristics import launch_decision
from idlegate.policy.inspector import (
    FEATURE_NAMES,
    NUM_FEATURES,
    InspectorScheduler,
    OnnxInspector,
    inspector_features,
    log_scaled,
    make_base,
)
from idlegate.policy.onnx_export import check_parity
from idlegate.policy.rigid import RejectScheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import run_metrics
from idlegate.sim.rigid import rigid_dag
from idlegate.sim.workloads import build_workload
from idlegate.training.config import InspectorConfig
from idlegate.training.inspector import (
    group_advantages,
    onnx_bytes,
    percentage_reward,
    train_inspector,
)
from idlegate.training.inspector_net import InspectorNet

ROOT = Path(__file__).resolve().parents[1]


def _workload(seed: int = 3):
    # a loaded Lublin stream: picks are often blocked, so the inspector is asked
    return build_workload("lublin", num_jobs=150, interarrival_scale=0.5, seed=seed)


def _net(accept_bias: float | None = None, seed: int = 0) -> InspectorNet:
    torch.manual_seed(seed)
    net = InspectorNet()
    if accept_bias is not None:
        out = net.net[-1]
        with torch.no_grad():
            out.weight.zero_()
            out.bias.copy_(torch.tensor([accept_bias, 0.0]))
    return net


def _model(tmp_path: Path, net: InspectorNet, name: str = "insp.onnx", **cfg) -> Path:
    config = InspectorConfig(trace="unused.swf", **cfg)
    path = tmp_path / name
    path.write_bytes(onnx_bytes(net, config, 0))
    return path


def _records(result) -> list[tuple[int, float, float]]:
    return [(r.id, r.first_start, r.finish) for r in result.records]


# -- features -----------------------------------------------------------------------------


def test_features_of_a_hand_built_cluster():
    # K=4; A (3 executors, r=100) runs since t=0; B (2, r=50) arrived at 10, C (1, r=20) at 20
    cluster = Cluster(4)
    a = cluster.add_job(rigid_dag(3, 100.0), 0.0)
    cluster.apply(launch_decision(a.stages[0], 4), 0.0)
    b = cluster.add_job(rigid_dag(2, 50.0), 10.0)
    c = cluster.add_job(rigid_dag(1, 20.0), 20.0)
    cluster.advance(30.0)
    x = inspector_features(cluster, b, b.stages[0], 3, 72, [b, c])
    day12, days2 = 12 * 3600.0, 2 * 86400.0
    expected = {
        "wait": log_scaled(20.0, day12),
        "requested": log_scaled(50.0, days2),
        "size": 0.5,
        "rejected": 3 / 72,
        "free": 0.25,
        "can_start": 0.0,
        # B needs 2, 1 is free: A's 3 executors free at 0 + 100 → starts 70 s from now
        "start_delay": log_scaled(70.0, day12),
        # bsld if it starts then: (20 + 70 + 50) / 50 = 2.8
        "slowdown": log_scaled(1.8, 100.0),
        "queue_length": log_scaled(2.0, 256.0),
        "queue_wait": log_scaled(15.0, day12),  # (20 + 10) / 2
        "queue_work": log_scaled(30.0, days2),  # (2·50 + 1·20) / 4
        "fit_now": 1.0,  # C fits the free executor
    }
    assert x.shape == (NUM_FEATURES,) and x.dtype == np.float32
    assert list(expected) == list(FEATURE_NAMES)
    np.testing.assert_allclose(x, list(expected.values()), rtol=1e-6)
    # C fits now: no delay, its bsld is its wait over max(r, 10)
    y = dict(
        zip(FEATURE_NAMES, inspector_features(cluster, c, c.stages[0], 0, 0, [b, c]), strict=True)
    )
    assert y["can_start"] == 1.0 and y["start_delay"] == 0.0 and y["rejected"] == 0.0
    assert y["slowdown"] == pytest.approx(log_scaled((10 + 20) / 20 - 1, 100.0))
    assert y["fit_now"] == 0.0  # B does not fit one executor


def test_log_scaled_known_values():
    assert log_scaled(0.0, 10.0) == 0.0 and log_scaled(-5.0, 10.0) == 0.0
    assert log_scaled(10.0, 10.0) == 1.0 and log_scaled(1e9, 10.0) == 1.0
    assert log_scaled(math.e - 1, math.e**2 - 1) == pytest.approx(0.5)


# -- the scheduler ------------------------------------------------------------------------


@pytest.mark.parametrize("base", ["easy:sjf", "strict:sjf"])
def test_accept_all_onnx_inspector_is_the_base(tmp_path, base):
    path = _model(tmp_path, _net(accept_bias=5.0), ask="all")
    w = _workload()
    inspector = make_scheduler(f"inspect:{path}:{base}")
    inspected = simulate(w, inspector, 0)
    alone = simulate(w, make_scheduler(base), 0)
    assert inspector.asked > 0 and inspector.rejected == 0
    assert _records(inspected) == _records(alone)
    assert inspector.name == f"inspect:insp:{base}"


def test_reject_all_when_blocked_is_the_reject_rule():
    w = _workload()
    inspector = InspectorScheduler(make_base("sjf"), lambda x: False, ask="blocked")
    rule = RejectScheduler(make_base("sjf"))
    inspected, rejected = simulate(w, inspector, 0), simulate(w, rule, 0)
    assert inspector.rejected > 0
    assert _records(inspected) == _records(rejected)
    assert inspector.rejections == rule.rejections


@pytest.mark.parametrize("cap", [0, 2])
def test_reject_cap_is_respected(cap):
    w = _workload()
    seen: list[float] = []

    def reject(x: np.ndarray) -> bool:
        seen.append(float(x[FEATURE_NAMES.index("rejected")]))
        return False

    inspector = InspectorScheduler(make_base("easy:sjf"), reject, ask="all", max_rejections=cap)
    result = simulate(w, inspector, 0)
    assert result.unfinished == 0
    assert inspector.asked == len(seen) == inspector.rejected
    # the judge is asked only while the pick's count (missed points included) is below the
    # cap, so a job is rejected by it at most `cap` times
    assert all(r < 1.0 for r in seen)
    assert inspector.rejected <= cap * len(w.jobs)
    if cap == 0:
        assert inspector.asked == 0
        assert _records(result) == _records(simulate(w, make_base("easy:sjf"), 0))
    else:
        assert inspector.rejected > 0 and any(r == 0.5 for r in seen)


# -- reward -------------------------------------------------------------------------------


def test_percentage_reward_known_answers():
    assert percentage_reward(100.0, 50.0) == 0.5
    assert percentage_reward(50.0, 100.0) == -0.5
    assert percentage_reward(40.0, 40.0) == 0.0
    assert percentage_reward(0.0, 0.0) == 0.0
    assert percentage_reward(10.0, 1.0) == pytest.approx(0.9)
    np.testing.assert_allclose(
        group_advantages(np.array([[0.1, 0.3], [-0.2, -0.2]])), [[-0.1, 0.1], [0.0, 0.0]]
    )


# -- ONNX ---------------------------------------------------------------------------------


def test_onnx_decisions_match_the_torch_model(tmp_path):
    net = _net(seed=4)
    x = np.random.default_rng(1).random((500, NUM_FEATURES), dtype=np.float32)
    with torch.no_grad():  # shift the accept logit so that both decisions occur
        net.net[-1].weight.mul_(100.0)
        logits = net(torch.as_tensor(x)).numpy()
        net.net[-1].bias[0] -= float(np.median(logits[:, 0] - logits[:, 1]))
    path = _model(tmp_path, net)
    assert check_parity(net, path.read_bytes(), {"features": x}) < 1e-4
    judge = OnnxInspector(path)
    with torch.no_grad():
        logits = net(torch.as_tensor(x)).numpy()
    torch_accepts = logits[:, 0] >= logits[:, 1]
    assert 0 < torch_accepts.sum() < len(x)
    assert [judge(row) for row in x] == torch_accepts.tolist()
    assert judge.ask == "blocked" and judge.max_rejections == 72 and judge.interval == 600.0


def test_spec_errors(tmp_path):
    good = _model(tmp_path, _net())
    with pytest.raises(IdlegateError, match="does not exist"):
        make_scheduler(f"inspect:{tmp_path / 'missing.onnx'}:easy:sjf")
    with pytest.raises(IdlegateError, match=r"not inspect:PATH\.onnx:BASE"):
        make_scheduler(f"inspect:{good}")
    with pytest.raises(IdlegateError, match="base is ORDER"):
        make_scheduler(f"inspect:{good}:reject:sjf")
    with pytest.raises(IdlegateError, match="unknown rigid priority order"):
        make_scheduler(f"inspect:{good}:easy:nope")
    with pytest.raises(IdlegateError, match="not an idlegate inspector"):
        make_scheduler(f"inspect:{ROOT / 'src' / 'idlegate' / 'policy' / 'default.onnx'}:easy:sjf")
    proto = onnx.load(good)
    for prop in proto.metadata_props:
        if prop.key == "idlegate.inspector.feature_version":
            prop.value = "0"
    old = tmp_path / "old.onnx"
    onnx.save(proto, old)
    with pytest.raises(IdlegateError, match="feature version 0"):
        make_scheduler(f"inspect:{old}:easy:sjf")
    # parameters: the cap and interval override the model's, others go to the base
    s = make_scheduler(f"inspect:{good}:easy:sjf", max_rejections=3, extra_nodes=False)
    assert s.max_rejections == 3 and s.base.extra_nodes is False


def test_operator_accepts_an_inspect_policy(tmp_path):
    from idlegate.operator.decisions import load_scheduler

    path = _model(tmp_path, _net())
    scheduler = load_scheduler(f"inspect:{path}:easy:fcfs")
    assert isinstance(scheduler, InspectorScheduler)
    assert scheduler.name == "inspect:insp:easy:fcfs"


# -- training -----------------------------------------------------------------------------


def _swf(path: Path, jobs: int = 200, machine: int = 16, seed: int = 0) -> Path:
    """A small synthetic SWF trace: Poisson arrivals, sizes 1–16, run times 60 s–2 h."""
    rng = np.random.default_rng(seed)
    lines = [f"; MaxProcs: {machine}"]
    t = 0.0
    for i in range(1, jobs + 1):
        t += float(rng.exponential(300.0))
        run = float(rng.uniform(60.0, 7200.0))
        n = int(rng.choice([1, 2, 4, 8, 16]))
        fields = [i, round(t), 0, round(run), n, -1, -1, n, round(run)] + [-1] * 9
        lines.append(" ".join(str(f) for f in fields))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("advantage", ["probes", "rollouts"])
def test_tiny_training_run_writes_a_loadable_inspector(tmp_path, advantage):
    trace = _swf(tmp_path / "tiny.swf")
    out = tmp_path / "tiny.onnx"
    cfg = InspectorConfig(
        trace=str(trace),
        base="strict:sjf",
        out=str(out),
        iterations=2,
        sequence_length=32,
        sequences=2,
        rollouts=2,
        validation_sequences=2,
        validate_every=1,
        advantage=advantage,
        probes=3,
    )
    lines: list[str] = []
    result = train_inspector(cfg, progress=lines.append)
    assert result.iterations == 2 and out.is_file()
    assert len(lines) == 3 and lines[1].startswith("iter    1")
    scheduler = make_scheduler(f"inspect:{out}:strict:sjf")
    w = build_workload("swf", path=str(trace), num_jobs=32, start=100, requested_time="run")
    assert run_metrics(simulate(w, scheduler, 0)).unfinished == 0


def test_training_options_are_checked():
    with pytest.raises(IdlegateError, match="rollouts"):
        InspectorConfig(trace="x.swf", rollouts=0)
    with pytest.raises(IdlegateError, match=r"cannot read|does not exist|No such file"):
        train_inspector(InspectorConfig(trace="/no/such/trace.swf"))


def test_warm_start_clones_the_delay_rule(tmp_path):
    from idlegate.training.inspector import Windows, warm_start
    from idlegate.training.inspector_net import RuleJudge

    rule = RuleJudge(300.0)
    x = np.zeros(NUM_FEATURES, dtype=np.float32)
    x[FEATURE_NAMES.index("start_delay")] = log_scaled(299.0, 12 * 3600.0)
    assert rule(x) and rule.actions == [0]
    x[FEATURE_NAMES.index("start_delay")] = log_scaled(301.0, 12 * 3600.0)
    assert not rule(x) and rule.actions == [0, 1]
    cfg = InspectorConfig(
        trace=str(_swf(tmp_path / "tiny.swf")),
        base="easy:sjf",
        sequence_length=32,
        warm_start_delay=600.0,
        warm_start_sequences=3,
        warm_start_steps=200,
    )
    cloned, agreement = warm_start(_net(), Windows(cfg, "train"), cfg, np.random.default_rng(0))
    assert cloned > 0 and agreement >= 0.95


def test_training_mixes_lublin_windows_and_rewards_on_wait(tmp_path):
    from idlegate.training.inspector import Windows, lublin_window

    trace = str(_swf(tmp_path / "tiny.swf"))
    only_trace = Windows(InspectorConfig(trace=trace, sequence_length=32), "train")
    assert all(0 <= k < only_trace.count for k in only_trace.draw(np.random.default_rng(0), 20))
    cfg = InspectorConfig(
        trace=trace,
        sequence_length=32,
        reward="wait",
        lublin_share=1.0,
        lublin_executors=(16, 32),
        lublin_interarrival=(0.5,),
    )
    windows = Windows(cfg, "train")
    keys = windows.draw(np.random.default_rng(0), 8)
    assert all(k < 0 for k in keys)
    sizes = {windows.workload(k).num_executors for k in keys}
    assert sizes <= {16, 32} and len(windows.workload(keys[0]).jobs) == 32
    base = windows.base_metrics(keys[0])
    assert windows.base_score(keys[0]) == base.avg_wait != base.avg_bsld
    # the test part's Lublin windows are other jobs than the train part's of the same index
    train, test = lublin_window(0, "train", cfg), lublin_window(0, "test", cfg)
    assert [j.time for j in train.jobs] != [j.time for j in test.jobs]


def test_the_shipped_inspector_loads_and_says_what_it_was_trained_on():
    path = ROOT / "src" / "idlegate" / "policy" / "inspectors" / "easy-sjf.onnx"
    scheduler = make_scheduler(f"inspect:{path}:easy:sjf")
    assert scheduler.name == "inspect:easy-sjf:easy:sjf" and scheduler.ask == "blocked"
    assert path.stat().st_size < 50_000
    trained_on = OnnxInspector(path).metadata["idlegate.inspector.trained_on"]
    assert '"base": "easy:sjf"' in trained_on and '"trace": "lublin_256.swf"' in trained_on
