"""The split-window agent: window slots, features, action rules, rewards, training, export."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from idlegate.errors import IdlegateError
from idlegate.policy import DEFAULT_POLICY_PATH, make_scheduler
from idlegate.policy.heuristics import best_stage, launch_decision
from idlegate.policy.rigid import reservation
from idlegate.policy.window import (
    AREA,
    BACKFILL_SAFE,
    CAN_START,
    CLUSTER_FEATURES,
    FREE,
    HEAD_DELAY,
    MEAN_REMAINING,
    PRESENT,
    QUEUE,
    REQUESTED,
    RUNNING,
    SIZE,
    SLOT_FEATURES,
    TAIL,
    VISIBLE,
    WAITED,
    WindowObserver,
    WindowScheduler,
    greedy_action,
    log_time,
    resolve,
    window_jobs,
)
from idlegate.sim.cluster import Cluster
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import run_metrics
from idlegate.sim.protocol import Job
from idlegate.sim.rigid import RigidJob, RigidRun, rigid_dag, rigid_workload
from idlegate.training.config import WindowTrainConfig
from idlegate.training.window import (
    export_window,
    reward_terms,
    train_window,
)
from idlegate.training.window_net import NumpyWindowNet, WindowNet
from tests.helpers import need_shared


def _add(cluster: Cluster, n: int, r: float, at: float) -> Job:
    return cluster.add_job(rigid_dag(n, r), at, payload=RigidRun(r))


def _start(cluster: Cluster, job: Job) -> None:
    stage = best_stage(cluster.runnable(job), cluster.free_executors)
    assert stage is not None
    cluster.apply(launch_decision(stage, cluster.num_executors), cluster.now)


@pytest.fixture
def busy_cluster() -> tuple[Cluster, list[Job]]:
    """16 executors: A (12 wide, r 100) runs from 0; at t = 10, B (14 wide), C (2), D (4) wait."""
    cluster = Cluster(16)
    a = _add(cluster, 12, 100.0, 0.0)
    _start(cluster, a)
    b = _add(cluster, 14, 50.0, 5.0)
    c = _add(cluster, 2, 50.0, 6.0)
    d = _add(cluster, 4, 200.0, 8.0)
    cluster.advance(10.0)
    return cluster, [b, c, d]


def test_window_slots_hold_head_then_tail_without_repeats() -> None:
    q = ["q0", "q1", "q2", "q3"]
    assert window_jobs(q, 2, 2) == ["q0", "q1", "q2", "q3"]
    assert window_jobs(q, 2, 1) == ["q0", "q1", "q3"]
    assert window_jobs(q, 1, 2) == ["q0", "q2", "q3"]
    assert window_jobs(q[:3], 2, 2) == ["q0", "q1", "q2", None]
    assert window_jobs(q[:1], 2, 2) == ["q0", None, None, None]
    assert window_jobs(q, 3, 0) == ["q0", "q1", "q2"]  # head-only
    assert window_jobs([], 1, 1) == [None, None]


def test_observation_of_a_hand_built_queue(busy_cluster: tuple[Cluster, list[Job]]) -> None:
    cluster, (b, c, d) = busy_cluster
    obs = WindowObserver(1, 3)(cluster)
    assert obs.jobs == (b, c, d, None)
    s = obs.slots
    assert s.shape == (4, SLOT_FEATURES) and s.dtype == np.float32
    assert s[:, PRESENT].tolist() == [1, 1, 1, 0]
    assert s[:, TAIL].tolist() == [0, 1, 1, 0]  # the empty slot is all zeros
    assert not s[3].any()
    # 4 executors are free: B (14) cannot start, C (2) and D (4) can
    assert s[:, CAN_START].tolist() == [0, 1, 1, 0]
    # B's reservation: A ends at 100, then 16 free, 2 beyond B's 14. C ends by 100 (safe);
    # D would end at 210 and needs 4 > 2 extra executors (it would delay B)
    assert s[:, BACKFILL_SAFE].tolist() == [0, 1, 0, 0]
    assert s[0, SIZE] == pytest.approx(14 / 16)
    assert s[1, REQUESTED] == pytest.approx(log_time(50))
    assert s[2, WAITED] == pytest.approx(log_time(2))
    assert s[2, AREA] == pytest.approx(log_time(200 * 4 / 16))
    k = obs.cluster
    assert k.shape == (CLUSTER_FEATURES,)
    assert k[FREE] == pytest.approx(4 / 16)
    assert k[QUEUE] == pytest.approx(math.log10(4) / 3)
    assert k[MEAN_REMAINING] == pytest.approx(log_time(90))
    assert k[RUNNING] == 1 and k[VISIBLE] == 1
    assert k[HEAD_DELAY] == pytest.approx(log_time(90))
    # a window smaller than the queue shows its share
    assert WindowObserver(1, 1)(cluster).cluster[VISIBLE] == pytest.approx(2 / 3)


def test_the_head_reservation_is_easy_backfillings(
    busy_cluster: tuple[Cluster, list[Job]],
) -> None:
    # B needs 14 of 16 executors, 4 are free; A (12) ends at 100: then 16 free, 2 extra
    cluster, _ = busy_cluster
    assert reservation(cluster, 14) == (100.0, 2)


def test_invalid_pick_forwards_and_idle_forward_starts_a_job(
    busy_cluster: tuple[Cluster, list[Job]],
) -> None:
    cluster, (_b, c, d) = busy_cluster
    obs = WindowObserver(1, 3)(cluster)
    assert resolve(obs, 0) is None  # B cannot start now: forward
    assert resolve(obs, 3) is None  # empty slot: forward
    assert resolve(obs, 4) is None  # forward itself
    assert resolve(obs, 1) is c and resolve(obs, 2) is d
    with pytest.raises(IdlegateError, match="out of range"):
        resolve(obs, 5)
    # with nothing running, forwarding could strand the queue: the first legal slot starts
    idle = Cluster(4)
    first = _add(idle, 2, 10.0, 0.0)
    _add(idle, 4, 10.0, 0.0)
    idle_obs = WindowObserver(2, 0)(idle)
    assert idle_obs.cluster[RUNNING] == 0
    assert resolve(idle_obs, 2) is first


def test_greedy_action_is_two_level() -> None:
    # forward 0.4 beats each pick (0.3) but starting something is likelier (0.6)
    assert greedy_action(np.log([0.3, 0.3, 0.4])) == 0
    assert greedy_action(np.log([0.2, 0.3, 0.5])) == 2  # waiting is at least as likely
    assert greedy_action(np.log([0.1, 0.7, 0.2])) == 1
    assert greedy_action(np.log([1.0])) == 0  # no slot: only forward


def test_reward_terms_known_answer() -> None:
    # K = 4. Job 0 (2 wide) runs [0, 10). Job 1 (4 wide, r 10) waits [0, 10), runs
    # [10, 20). Job 2 (1 wide, r 5) arrives at 5, waits [5, 20), runs [20, 25).
    idle, queue, slow = reward_terms(
        np.array([0.0, 10.0, 20.0]),
        arrival=np.array([0.0, 0.0, 5.0]),
        start=np.array([0.0, 10.0, 20.0]),
        finish=np.array([10.0, 20.0, 25.0]),
        size=np.array([2, 4, 1]),
        requested=np.array([10.0, 10.0, 5.0]),
        num_executors=4,
    )
    # [0, 10): half the machine idle with a queue; 1 job waits, then 2 from t = 5;
    # each waiting job accrues 1 / max(r, 10) = 0.1 per second
    assert idle.tolist() == pytest.approx([5.0, 0.0, 0.0])
    assert queue.tolist() == pytest.approx([15.0, 10.0, 0.0])
    assert slow.tolist() == pytest.approx([1.5, 1.0, 0.0])
    # the totals are the total wait and the waits over max(r, 10)
    assert queue.sum() == pytest.approx(10 + 15)
    assert slow.sum() == pytest.approx(10 / 10 + 15 / 10)


def test_time_baseline_advantages_of_one_sequence() -> None:
    from idlegate.training.window import Episode, _advantages

    def episode(rewards: list[float]) -> Episode:
        n = len(rewards)
        e = Episode(
            np.zeros((n, 1, SLOT_FEATURES)),
            np.zeros((n, CLUSTER_FEATURES)),
            np.zeros(n, dtype=np.int64),
            np.zeros(n),
            np.zeros(n),
            np.array([0.0, 10.0]),
        )
        e.rewards, e.end_time = np.array(rewards), 20.0
        return e

    good, bad = episode([-1.0, -1.0]), episode([-3.0, -1.0])
    _advantages([good, bad], WindowTrainConfig())
    # returns [-2, -1] and [-4, -1]; baselines at t = 0 and 10: -3 and -1; the raw
    # advantages [1, 0] and [-1, 0] are divided by their pooled std, √0.5
    assert good.returns.tolist() == [-2.0, -1.0] and bad.returns.tolist() == [-4.0, -1.0]
    assert good.advantages.tolist() == pytest.approx([2**0.5, 0.0])
    assert bad.advantages.tolist() == pytest.approx([-(2**0.5), 0.0])


def test_average_queue_length_metric() -> None:
    """Two 16-wide jobs at t = 0 on 16 executors: the second waits 100 s of 105."""
    jobs = [RigidJob(1, 0.0, 100.0, 16, 100.0), RigidJob(2, 0.0, 5.0, 16, 5.0)]
    m = run_metrics(simulate(rigid_workload("two", jobs, 16), make_scheduler("fcfs")))
    assert m.avg_queue_length == pytest.approx(100 / 105)
    assert m.to_dict()["avg_queue_length"] == pytest.approx(100 / 105)


def test_numpy_forward_matches_torch(busy_cluster: tuple[Cluster, list[Job]]) -> None:
    torch.manual_seed(3)
    model = WindowNet(1, 3, hidden=16)
    obs = WindowObserver(1, 3)(busy_cluster[0])
    logp, value = NumpyWindowNet(model)(obs.slots, obs.cluster)
    with torch.no_grad():
        t_logp, t_value = model(
            torch.from_numpy(obs.slots[None]), torch.from_numpy(obs.cluster[None])
        )
    legal = [1, 2, 4]  # C, D, forward (float32 rounds the illegal entries' -1e9)
    assert logp[legal] == pytest.approx(t_logp[0].numpy()[legal], abs=1e-5)
    assert value == pytest.approx(float(t_value[0]), abs=1e-5)
    # illegal actions (B, the empty slot) get no probability; forward and C, D share it
    assert np.exp(logp)[[0, 3]] == pytest.approx([0, 0], abs=1e-12)
    assert np.exp(logp).sum() == pytest.approx(1)


def test_export_parity_and_metadata(
    tmp_path: Path, busy_cluster: tuple[Cluster, list[Job]]
) -> None:
    torch.manual_seed(0)
    model = WindowNet(1, 3, hidden=8)
    path = tmp_path / "w.onnx"
    export_window(model, path, WindowTrainConfig(m_head=1, m_tail=3))
    scheduler = make_scheduler(f"window:{path}")
    assert isinstance(scheduler, WindowScheduler)
    assert (scheduler.m_head, scheduler.m_tail, scheduler.name) == (1, 3, "window-w")
    obs = scheduler.observer(busy_cluster[0])
    logp, value = scheduler.evaluate(obs)
    with torch.no_grad():
        t_logp, t_value = model(
            torch.from_numpy(obs.slots[None]), torch.from_numpy(obs.cluster[None])
        )
    assert logp == pytest.approx(t_logp[0].numpy(), rel=1e-6, abs=1e-5)
    assert value == pytest.approx(float(t_value[0]), abs=1e-5)


def test_tiny_training_run_gives_a_working_scheduler(tmp_path: Path) -> None:
    config = WindowTrainConfig(
        m_head=2, m_tail=2, iterations=2, sequences=1, rollouts=2, num_jobs=24, validation_seeds=1,
        eval_every=1, minibatch=16,
    )  # fmt: skip
    lines: list[str] = []
    result = train_window(config, tmp_path / "tiny.onnx", log=lines.append)
    assert result.iterations == 2 and (tmp_path / "tiny.onnx").stat().st_size < 50_000
    assert lines[0].startswith("iteration 0") and "validation avg wait" in lines[-1]
    from idlegate.sim.workloads import build_workload

    workload = build_workload("lublin", 7, num_jobs=40)
    m = run_metrics(simulate(workload, make_scheduler(f"window:{tmp_path / 'tiny.onnx'}"), 7))
    assert m.jobs == 40 and m.unfinished == 0 and m.avg_wait >= 0


def test_spec_errors(tmp_path: Path) -> None:
    with pytest.raises(IdlegateError, match="does not exist"):
        make_scheduler(f"window:{tmp_path / 'missing.onnx'}")
    with pytest.raises(IdlegateError, match="needs a model path"):
        make_scheduler("window:")
    with pytest.raises(IdlegateError, match="no parameter 'base'"):
        make_scheduler("window:x.onnx", base="fcfs")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not onnx")
    with pytest.raises(IdlegateError, match=r"is not an ONNX model.*train-window"):
        make_scheduler(f"window:{junk}")
    if DEFAULT_POLICY_PATH.is_file():  # a DAG policy is not a window model
        with pytest.raises(IdlegateError, match="not a split-window model"):
            make_scheduler(f"window:{DEFAULT_POLICY_PATH}")
    path = tmp_path / "w.onnx"
    export_window(WindowNet(2, 0, hidden=8), path, WindowTrainConfig(m_head=2, m_tail=0))
    for key, value, message in (
        ("idlegate.window.feature_version", "999", "features version 999"),
        ("idlegate.window.m_head", "5", "should have shape"),
        ("idlegate.window.m_tail", "x", "no valid"),
    ):
        proto = onnx.load(path)
        onnx.helper.set_model_props(
            proto,
            {**{p.key: p.value for p in proto.metadata_props}, key: value},
        )
        bad = tmp_path / "bad.onnx"
        onnx.save(proto, bad)
        with pytest.raises(IdlegateError, match=message):
            make_scheduler(f"window:{bad}")
    with pytest.raises(IdlegateError, match="at least one slot"):
        WindowTrainConfig(m_head=0, m_tail=0)
    with pytest.raises(IdlegateError, match="needs an SWF trace"):
        WindowTrainConfig(workload="swf")


def test_train_window_command(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from idlegate.cli import app

    out = tmp_path / "cli.onnx"
    args = ["train-window", "--out", str(out), "--m-head", "2", "--m-tail", "1"]
    result = CliRunner().invoke(
        app, [*args, "--iterations", "1", "--jobs-count", "12", "--time-limit", "600"]
    )
    assert result.exit_code == 0, result.output
    assert "iteration 1/1" in result.output and "wrote" in result.output
    assert make_scheduler(f"window:{out}").m_tail == 1
    bad = CliRunner().invoke(
        app, ["train-window", "--out", str(out), "--m-head", "0", "--m-tail", "0"]
    )
    assert bad.exit_code == 1 and "at least one slot" in bad.output


def test_benchmark_pairs_head_and_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("window_bench", root / "benchmarks" / "window.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for label, (head, tail) in {"head-2": (2, 0), "split-2": (1, 1)}.items():
        export_window(WindowNet(head, tail, 8), tmp_path / f"{label}.onnx", WindowTrainConfig())
    models = [f"--scheduler={m}=window:{tmp_path / m}.onnx" for m in ("head-2", "split-2")]
    assert bench.main([*models, "--seeds", "2", "--jobs", "40"]) == 0
    out = capsys.readouterr().out
    assert "| easy:fcfs |" in out and "| split-2 |" in out
    assert "split-2 vs head-2: avg wait" in out and "lower wait on" in out


def test_swf_episodes_come_from_the_train_part() -> None:
    from idlegate.training.window import episode_workload

    sample = need_shared("swf", "lublin_256.swf")
    config = WindowTrainConfig(workload="swf", file=str(sample), num_jobs=64)
    a, b = episode_workload(config, 1), episode_workload(config, 2)
    assert len(a.jobs) == 64 and a.num_executors == 256
    assert a.jobs != b.jobs  # the seed draws the window
    # the train part is the trace's first 20 % (10,000 jobs): job numbers up to 2,000
    assert all(int(j.name.removeprefix("job-")) <= 2000 for j in (*a.jobs, *b.jobs))
