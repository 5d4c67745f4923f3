"""Decision latency of the learned policy: ONNX with and without the bounded observation, torch.

Two trajectories, each driven by a simple rule that hands out one executor per
decision, jobs in arrival order (many decisions per state, as a learned policy makes):

* **stream**: a TPC-H-like stream (50 executors, offered load 1.2), so the queue grows
  through 5, 20 and 50 jobs. Whenever 2 or fewer jobs away from a target size, every
  policy is run on the very same cluster view, so its feature cache sees the real
  sequence of states (a decision usually changes one or two jobs); timings are kept
  when exactly 5, 20 or 50 jobs are in the system.
* **queue**: 1,000 TPC-H-like workflows submitted at t=0 plus a stream at offered load
  1.0 (50 executors): timings are kept while 1,000 to 1,050 jobs are in the system (at
  least 950 of them queued), reported as the row "1000".

Columns: ``onnx`` sees every job; ``window`` is the same ONNX model with the bounded
observation (`idlegate.policy.bounded.WindowConfig()`, the defaults: above 32 jobs at
most 32 visible), so at 5 and 20 jobs it computes the very same thing; ``torch`` is
the model in torch (stream only: at 1,000 jobs it would take minutes). A decision's
time is features (with the window: selecting the jobs too) + model + choosing/decoding
the action, what `decide` does, reported split up and as p50 / p99 in milliseconds.
The driver's decision is the one applied, so every column is timed on identical states.
On a shared machine the wall-clock p99 measures the other processes as much as the
policy; `--clock cpu` times this thread's CPU time instead.

    python benchmarks/inference.py [--samples 500] [--seed 0] [--model policy.onnx]
                                   [--clock wall|cpu]

Without `--model` an untrained model (default config, fixed seed) is exported to a
temporary file; latency does not depend on the weights.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from idlegate.flags import description
from idlegate.policy.actions import ActionConfig, choose, decode
from idlegate.policy.bounded import WindowConfig
from idlegate.policy.features import Featurizer, Observation
from idlegate.policy.heuristics import best_stage
from idlegate.policy.model import PolicyNet, observation_tensors
from idlegate.policy.model_config import ModelConfig
from idlegate.policy.onnx_export import export_model
from idlegate.policy.onnx_runtime import OnnxPolicy
from idlegate.sim.engine import simulate
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision
from idlegate.sim.workloads import build_workload

PARTS = ("features", "model", "decode", "total")
TARGET_P50_MS = 0.3
TARGET_P99_MS = 1.0
QUEUE_TARGET_P99_MS = 1.0
QUEUED = 1000
"""The row of the queue trajectory: kept while QUEUED..QUEUED + 50 jobs are in the system."""


@dataclass(frozen=True)
class Trajectory:
    """A workload the driver runs, and which states are timed (jobs in system -> row)."""

    name: str
    options: dict[str, Any]
    rows: tuple[int, ...]
    near: Callable[[int], bool]
    """Run the policies on this state (so their caches follow the trajectory)."""
    row: Callable[[int], int | None]
    """The row a state's timings go to, or None (not kept)."""


STREAM = Trajectory(
    "stream",
    {"num_executors": 50, "init": 1, "num_stream": 300, "load": 1.2},
    (5, 20, 50),
    near=lambda n: min(abs(n - t) for t in (5, 20, 50)) <= 2,
    row=lambda n: n if n in (5, 20, 50) else None,
)
QUEUE = Trajectory(
    "queue",
    {"num_executors": 50, "init": QUEUED, "num_stream": 1000, "load": 1.0},
    (QUEUED,),
    near=lambda n: QUEUED - 2 <= n <= QUEUED + 50,
    row=lambda n: QUEUED if QUEUED <= n <= QUEUED + 50 else None,
)


def one_executor(view: ClusterView) -> Action:
    """The driver: the first job (arrival order) with a launchable stage gets one more executor."""
    free = view.free_executors
    for job in view.jobs:
        stage = best_stage(view.runnable(job), free)
        if stage is not None:
            return Decision(stage, job.held + (stage.tasks if stage.gang else 1))
    return WAIT


class Probe:
    """Drives the simulation with `one_executor` and times one policy's decisions.

    `observe(view)` builds the observation (the policy's featurizer, with its window if
    any) and `evaluate(obs)` is the model call returning the four numpy tables; the
    probe times features, model and decoding separately, as `decide` runs them.
    """

    name = "probe"

    def __init__(
        self,
        observe: Callable[[ClusterView], Observation],
        reset: Callable[[], None],
        evaluate: Callable[[Observation], Sequence[np.ndarray]],
        actions: ActionConfig,
        trajectory: Trajectory,
        samples: int,
        applied: Callable[[Action], None] | None = None,
    ) -> None:
        self.observe = observe
        self.applied = applied
        """Told the driver's action whenever the policy observed the state (see
        `OnnxPolicy.applied`: the window's selector follows the jobs it names)."""
        self._reset = reset
        self.evaluate = evaluate
        self.actions = actions
        self.trajectory = trajectory
        self.samples = samples
        self.times: dict[tuple[int, str], list[int]] = defaultdict(list)
        """(row, part) -> nanoseconds per decision."""
        self.clock: Callable[[], int] = time.perf_counter_ns
        """Wall clock (the default) or this thread's CPU time (`--clock cpu`)."""

    def reset(self, rng: Any) -> None:
        self._reset()

    def done(self) -> bool:
        return all(len(self.times[n, "total"]) >= self.samples for n in self.trajectory.rows)

    def decide(self, view: ClusterView) -> Action:
        n = len(view.jobs)
        if not self.done() and self.trajectory.near(n):
            row = self.trajectory.row(n)
            keep = row is not None and len(self.times[row, "total"]) < self.samples
            self._time(view, row if keep else None)
        action = one_executor(view)
        if self.applied is not None:
            self.applied(action)
        return action

    def _time(self, view: ClusterView, row: int | None) -> None:
        clock = self.clock
        t0 = clock()
        obs = self.observe(view)
        if not obs.stage_mask.any():
            return
        t1 = clock()
        out = self.evaluate(obs)
        t2 = clock()
        decode(obs, choose(obs, *out), self.actions)
        t3 = clock()
        if row is not None:
            for part, ns in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t3 - t0), strict=True):
                self.times[row, part].append(ns)


def run_probe(probe: Probe, seed: int, trajectory: Trajectory) -> dict[tuple[int, str], list[int]]:
    """One pass over the trajectory (the same for every policy: fixed driver)."""
    workload = build_workload("tpch-like", seed=seed, **trajectory.options)
    simulate(workload, probe, seed=seed)
    return probe.times


def onnx_probe(policy: OnnxPolicy, trajectory: Trajectory, samples: int) -> Probe:
    return Probe(
        policy.observe,
        policy.featurizer.reset,
        policy.evaluate,
        policy.action_config,
        trajectory,
        samples,
        policy.applied,
    )


def torch_probe(model: PolicyNet, trajectory: Trajectory, samples: int) -> Probe:
    def evaluate(obs: Observation) -> list[np.ndarray]:
        with torch.inference_mode():
            return [t.numpy() for t in model(*observation_tensors(obs))]

    featurizer = Featurizer(model.config.features)
    return Probe(featurizer, featurizer.reset, evaluate, model.config.actions, trajectory, samples)


def percentiles(ns: list[int]) -> tuple[float, float]:
    a = np.asarray(ns, dtype=np.float64) / 1e6
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


COLUMNS = ("onnx", "window", "torch")


def report(times: dict[str, dict[tuple[int, str], list[int]]], rows: Sequence[int]) -> None:
    """Print the table: one line per (jobs in system, part), p50 and p99 per column."""
    head = " | ".join(f"{c + ' p50':>10} {'p99':>7}" for c in COLUMNS)
    print(f"{'jobs':>5} {'part':<9} {'samples':>7} | {head}")
    for n in rows:
        for part in PARTS:
            cells = []
            count = 0
            for column in COLUMNS:
                ns = times.get(column, {}).get((n, part), [])
                if ns:
                    p50, p99 = percentiles(ns)
                    cells.append(f"{p50:>10.3f} {p99:>7.3f}")
                    count = max(count, len(ns))
                else:
                    cells.append(f"{'-':>10} {'-':>7}")
            print(f"{n:>5} {part:<9} {count:>7} | " + " | ".join(cells))


def verdicts(times: dict[str, dict[tuple[int, str], list[int]]]) -> list[str]:
    """One line per latency target: the measured figures and met / NOT met."""
    lines = []
    for column, n, p50_max, p99_max in (
        ("onnx", 20, TARGET_P50_MS, TARGET_P99_MS),
        ("window", QUEUED, None, QUEUE_TARGET_P99_MS),
    ):
        ns = times.get(column, {}).get((n, "total"), [])
        if not ns:
            lines.append(f"{column} at {n} jobs: no state reached")
            continue
        p50, p99 = percentiles(ns)
        met = p99 <= p99_max and (p50_max is None or p50 <= p50_max)
        goal = (f"p50 <= {p50_max} ms, " if p50_max is not None else "") + f"p99 <= {p99_max} ms"
        lines.append(
            f"{column} total at {n} jobs: p50 {p50:.3f} ms, p99 {p99:.3f} ms "
            f"(target {goal}): {'met' if met else 'NOT met'}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--samples", type=int, default=500, help="decisions kept per row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="an exported policy (default: untrained)")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: elapsed time (what a caller waits); cpu: this thread's CPU time, which "
        "leaves out the time other processes hold the core (for a shared machine)",
    )
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)
    model = PolicyNet(ModelConfig()).eval()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.model) if args.model else Path(tmp) / "policy.onnx"
        if not args.model:
            export_model(model, path)
        plain = OnnxPolicy(path, threads=1)
        windowed = OnnxPolicy(path, threads=1, window=WindowConfig())
    start = time.perf_counter()
    times: dict[str, dict[tuple[int, str], list[int]]] = {c: {} for c in COLUMNS}
    # one pass per column and trajectory, so no runtime evicts another's caches
    for trajectory in (STREAM, QUEUE):
        probes = {
            "onnx": onnx_probe(plain, trajectory, args.samples),
            "window": onnx_probe(windowed, trajectory, args.samples),
        }
        if trajectory is STREAM:
            probes["torch"] = torch_probe(model, trajectory, args.samples)
        for column, probe in probes.items():
            if args.clock == "cpu":
                probe.clock = time.thread_time_ns
            times[column].update(run_probe(probe, args.seed, trajectory))
    print(
        f"tpch-like, 50 executors: stream at load 1.2, queue of {QUEUED} + stream at load "
        f"1.0; seed {args.seed}; {time.perf_counter() - start:.1f} s; 1 thread each; "
        f"{args.clock} times in ms; window = WindowConfig() (threshold {WindowConfig().threshold}, "
        f"at most {WindowConfig().size} jobs visible)"
    )
    report(times, (*STREAM.rows, *QUEUE.rows))
    for line in verdicts(times):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
