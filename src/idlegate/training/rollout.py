"""Rollouts: simulate() with a sampling policy that records every decision, in worker processes.

A rollout is one `simulate(workload, policy, seed, max_time=T)` where the policy samples
its actions from the run's Generator and records, per decision k: the stored observation
(`Observation.stored()`: numpy arrays only, no `Stage`/`Job` objects, so it pickles small), the
`ActionChoice`, the decision time t_k and the jobs-in-system integral I(t_k) (the cluster's
`jobs_time_integral`). The episode stops at T (memoryless termination, drawn by the
trainer) or when every job is done; rewards stop there too (`training.math`).

Inference runs either in torch (`PolicyNet` under `inference_mode`) or in onnxruntime on
the model exported for the iteration (about 5x faster per decision). Both go through
`policy.actions.choose`/`decode`, so the choice is masked and legal either way.

Parallelism: `RolloutRunner` sends each task (model weights or ONNX bytes, workload,
seeds, T) to a pool of `workers` processes (forkserver or spawn), or to Ray with
``ray="auto"``/an address (`idlegate.parallel`), and returns the results in task order.
A rollout is a pure function of its task, and torch/onnxruntime run one thread each, so
results are identical whatever the worker count (1 = in-process) or backend.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from math import inf
from typing import Any

import numpy as np
import torch

from idlegate.errors import IdlegateError
from idlegate.parallel import LocalPool, RayPool, TaskPool
from idlegate.policy.actions import ActionChoice, ActionConfig, choose, decode
from idlegate.policy.columns import FeatureConfig
from idlegate.policy.features import ARRAYS, Featurizer, Observation
from idlegate.policy.heuristics import make_scheduler
from idlegate.policy.model import PolicyNet
from idlegate.policy.model_config import ModelConfig
from idlegate.sim.engine import Workload, simulate
from idlegate.sim.protocol import WAIT, Action, ClusterView
from idlegate.sim.resources import ResourceVector
from idlegate.sim.workloads import build_workload

Evaluator = Callable[[Observation], tuple[np.ndarray, ...]]
"""Observation → (stage_logp, cap_logp, idle_logp, wait_logp) as numpy arrays."""


# ---------------------------------------------------------------------------------------
# what a rollout records


class PackedObservations:
    """Many stored observations as one concatenated array each (pickles ~20x faster).

    `data[name]` stacks every observation's `name` (`policy.features.ARRAYS`) along axis
    0; `sizes[name][i]` is observation i's length on that axis. `unpack()` gives the
    stored observations back, their arrays views into `data` (no copies).
    """

    __slots__ = ("count", "data", "sizes")

    def __init__(self, observations: Sequence[Observation]) -> None:
        self.count = len(observations)
        self.data: dict[str, np.ndarray] = {}
        self.sizes: dict[str, np.ndarray] = {}
        for name in ARRAYS:
            parts = [getattr(o, name) for o in observations]
            self.sizes[name] = np.fromiter((len(p) for p in parts), np.int64, self.count)
            self.data[name] = np.concatenate(parts) if parts else np.zeros(0)

    def __len__(self) -> int:
        return self.count

    def unpack(self) -> list[Observation]:
        if self.count == 0:
            return []
        splits = {
            name: np.split(self.data[name], np.cumsum(self.sizes[name])[:-1]) for name in ARRAYS
        }
        return [
            Observation.from_arrays({name: splits[name][i] for name in ARRAYS})
            for i in range(self.count)
        ]


@dataclass
class Rollout:
    """One recorded episode: K decisions and how the episode ended."""

    seed: int
    """The simulate() seed (task durations and the policy's draws)."""
    arrival_seed: int
    """The workload seed (the arrival sequence)."""
    max_time: float
    packed: PackedObservations
    """The observations, packed for transfer (`observations` unpacks them)."""
    choices: np.ndarray
    """[K, 3] int64: stage_row, idle_level, cap_index per decision."""
    times: np.ndarray
    """[K] decision times t_k."""
    integrals: np.ndarray
    """[K] I(t_k) = ∫₀^{t_k} jobs in system dt."""
    end_time: float
    """T: when the episode stopped (max_time, or the last event if every job finished)."""
    end_integral: float
    """I(T)."""
    jobs_done: int
    jobs_total: int
    jct_sum: float
    """Sum of the JCTs of the jobs that finished."""
    idle_decisions: int = 0
    wait_decisions: int = 0

    @property
    def decisions(self) -> int:
        return len(self.times)

    @property
    def observations(self) -> list[Observation]:
        """Every decision's stored observation (views into the packed arrays)."""
        return self.packed.unpack()

    def choice_list(self) -> list[ActionChoice]:
        return [ActionChoice(int(a), int(b), int(c)) for a, b, c in self.choices.tolist()]


@dataclass(frozen=True)
class EvalResult:
    """A whole greedy (or heuristic) episode on one validation seed."""

    seed: int
    scheduler: str
    avg_jct: float
    jobs_done: int
    jobs_total: int
    decisions: int
    idle_seconds: float


# ---------------------------------------------------------------------------------------
# the recording scheduler


class RecordingPolicy:
    """A `Scheduler` that chooses with `evaluator` (sampling or greedy) and records decisions."""

    def __init__(
        self,
        evaluator: Evaluator,
        features: FeatureConfig,
        actions: ActionConfig,
        *,
        greedy: bool = False,
        record: bool = True,
        name: str = "learned-rollout",
    ) -> None:
        self.evaluate = evaluator
        self.featurizer = Featurizer(features)
        self.actions = actions
        self.greedy = greedy
        self.record = record
        self.name = name
        self._rng: np.random.Generator | None = None
        self.observations: list[Observation] = []
        self.choices: list[ActionChoice] = []
        self.times: list[float] = []
        self.integrals: list[float] = []

    def reset(self, rng: Any) -> None:
        self._rng = rng
        self.featurizer.reset()
        self.observations, self.choices, self.times, self.integrals = [], [], [], []

    def decide(self, view: ClusterView) -> Action:
        obs = self.featurizer(view)
        if not obs.stage_mask.any():
            return WAIT
        choice = choose(obs, *self.evaluate(obs), greedy=self.greedy, rng=self._rng)
        if self.record:
            integral = getattr(view, "jobs_time_integral", None)
            if integral is None:
                raise IdlegateError(
                    "rollouts need the cluster's jobs_time_integral; run them in the simulator"
                )
            self.observations.append(obs.stored())
            self.choices.append(choice)
            self.times.append(view.now)
            self.integrals.append(float(integral))
        return decode(obs, choice, self.actions)


def torch_evaluator(model: PolicyNet) -> Evaluator:
    """Run the torch model without autograd."""

    def evaluate(obs: Observation) -> tuple[np.ndarray, ...]:
        with torch.inference_mode():
            out = model.run(obs)
        return tuple(t.numpy() for t in out)

    return evaluate


def onnx_evaluator(onnx_bytes: bytes) -> Evaluator:
    """Run an exported model in onnxruntime (one thread)."""
    from idlegate.policy.onnx_runtime import OnnxPolicy

    return OnnxPolicy(onnx_bytes, threads=1).evaluate


def export_onnx_bytes(model: PolicyNet) -> bytes:
    """The ONNX export of `model` as bytes (`policy.onnx_export.policy_onnx`)."""
    from idlegate.policy.onnx_export import policy_onnx

    return policy_onnx(model)[0]


def run_rollout(
    policy: RecordingPolicy,
    workload: Workload,
    *,
    seed: int,
    arrival_seed: int,
    max_time: float = inf,
) -> Rollout:
    """Simulate `workload` with `policy` (recording) until `max_time`; the recorded Rollout."""
    result = simulate(workload, policy, seed=seed, max_time=max_time)
    idle = sum(1 for c in policy.choices if c.idle_level > 0)
    waits = sum(1 for c in policy.choices if c.is_wait)
    choices = (
        np.asarray(policy.choices, dtype=np.int64).reshape(-1, 3)
        if policy.choices
        else np.zeros((0, 3), dtype=np.int64)
    )
    return Rollout(
        seed=seed,
        arrival_seed=arrival_seed,
        max_time=max_time,
        packed=PackedObservations(policy.observations),
        choices=choices,
        times=np.asarray(policy.times, dtype=np.float64),
        integrals=np.asarray(policy.integrals, dtype=np.float64),
        end_time=float(result.end_time),
        end_integral=float(result.jobs_time_integral),
        jobs_done=len(result.records),
        jobs_total=len(workload.jobs),
        jct_sum=float(sum(r.jct for r in result.records)),
        idle_decisions=idle,
        wait_decisions=waits,
    )


def evaluate_episode(scheduler: Any, workload: Workload, seed: int, name: str) -> EvalResult:
    """A whole episode of `scheduler`; average JCT over all jobs (unfinished ones: +inf)."""
    result = simulate(workload, scheduler, seed=seed)
    jcts = [r.jct for r in result.records]
    avg = statistics.fmean(jcts) if jcts and result.unfinished == 0 else inf
    return EvalResult(
        seed=seed,
        scheduler=name,
        avg_jct=avg,
        jobs_done=len(jcts),
        jobs_total=len(workload.jobs),
        decisions=result.decisions,
        idle_seconds=float(sum(r.idle_inserted for r in result.records)),
    )


# ---------------------------------------------------------------------------------------
# tasks and the worker side


@dataclass(frozen=True)
class PolicyBlob:
    """What a worker needs to rebuild the policy: config plus weights or ONNX bytes."""

    model_config: dict[str, Any]
    state: dict[str, np.ndarray] | None = None
    onnx: bytes | None = None
    version: str = ""
    """A hash of the content (workers cache the rebuilt evaluator by it)."""


def make_blob(model: PolicyNet, backend: str) -> PolicyBlob:
    """Snapshot `model` for workers: numpy weights (torch backend) or ONNX bytes."""
    cfg = model.config.model_dump()
    digest = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode())
    if backend == "onnx":
        data = export_onnx_bytes(model)
        digest.update(data)
        return PolicyBlob(cfg, onnx=data, version=digest.hexdigest())
    if backend == "torch":
        state = {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}
        for k, v in state.items():
            digest.update(k.encode())
            digest.update(v.tobytes())
        return PolicyBlob(cfg, state=state, version=digest.hexdigest())
    raise IdlegateError(f"unknown rollout backend {backend!r}; use onnx or torch")


@dataclass(frozen=True)
class WorkloadRef:
    """A workload by name, options and seed (built, and cached, where it is used)."""

    name: str
    options: tuple[tuple[str, Any], ...]
    seed: int
    resources: str | None = None
    """The pool's resources beyond pods (``cpu=32,memory=128Gi``), or None: pods only."""

    @classmethod
    def of(
        cls, name: str, options: dict[str, Any], seed: int, resources: str | None = None
    ) -> WorkloadRef:
        frozen = tuple(sorted((k, _frozen(v)) for k, v in options.items()))
        return cls(name, frozen, int(seed), resources)


def _frozen(value: Any) -> Any:
    """A hashable stand-in for an option value (lists become tuples)."""
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value


@dataclass(frozen=True)
class RolloutTask:
    """Sample one episode of `workload` with the blob's policy."""

    workload: WorkloadRef
    seed: int
    max_time: float = inf


@dataclass(frozen=True)
class EvalTask:
    """A whole episode: the blob's policy greedily (`scheduler` None) or a heuristic."""

    workload: WorkloadRef
    seed: int
    scheduler: str | None = None


@dataclass(frozen=True)
class CustomTask:
    """Any picklable top-level function called as fn(workload, seed, **kwargs) in a worker."""

    workload: WorkloadRef
    seed: int
    fn: Callable[..., Any]
    kwargs: tuple[tuple[str, Any], ...] = ()


Task = RolloutTask | EvalTask | CustomTask


@dataclass
class _WorkerState:
    workloads: OrderedDict[WorkloadRef, Workload] = field(default_factory=OrderedDict)
    blob_version: str | None = None
    evaluator: Evaluator | None = None
    configs: tuple[FeatureConfig, ActionConfig] | None = None


_STATE = _WorkerState()
_WORKLOAD_CACHE = 16


def _init_worker(trainer_pid: int) -> None:
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    threading.Thread(target=_exit_with, args=(trainer_pid,), daemon=True).start()


def _exit_with(pid: int, period: float = 2.0) -> None:
    """Exit this worker once the trainer process is gone (a forkserver child is not its
    child, so it would otherwise idle on after the trainer was killed)."""
    while True:
        time.sleep(period)
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):  # gone, or its pid now someone else's
            os._exit(1)


def _workload(ref: WorkloadRef) -> Workload:
    cache = _STATE.workloads
    wl = cache.get(ref)
    if wl is None:
        wl = build_workload(ref.name, ref.seed, **dict(ref.options))
        if ref.resources is not None:
            wl = replace(wl, resources=ResourceVector.parse(ref.resources))
        cache[ref] = wl
        while len(cache) > _WORKLOAD_CACHE:
            cache.popitem(last=False)
    else:
        cache.move_to_end(ref)
    return wl


def _evaluator(blob: PolicyBlob) -> tuple[Evaluator, FeatureConfig, ActionConfig]:
    if _STATE.blob_version != blob.version or _STATE.evaluator is None:
        cfg = ModelConfig.of(blob.model_config)
        if blob.onnx is not None:
            evaluator = onnx_evaluator(blob.onnx)
        else:
            model = PolicyNet(cfg)
            model.load_state_dict({k: torch.from_numpy(v) for k, v in (blob.state or {}).items()})
            model.eval()
            evaluator = torch_evaluator(model)
        _STATE.evaluator = evaluator
        _STATE.configs = (cfg.features, cfg.actions)
        _STATE.blob_version = blob.version
    assert _STATE.configs is not None
    return _STATE.evaluator, *_STATE.configs


def run_task(blob: PolicyBlob | None, task: Task) -> Rollout | EvalResult | Any:
    """Carry out one task (in a worker, or in-process with one worker)."""
    wl = _workload(task.workload)
    if isinstance(task, CustomTask):
        return task.fn(wl, task.seed, **dict(task.kwargs))
    if isinstance(task, EvalTask) and task.scheduler is not None:
        return evaluate_episode(make_scheduler(task.scheduler), wl, task.seed, task.scheduler)
    if blob is None:
        raise IdlegateError("a policy task needs the policy's weights")
    evaluator, features, actions = _evaluator(blob)
    if isinstance(task, EvalTask):
        policy = RecordingPolicy(evaluator, features, actions, greedy=True, record=False)
        return evaluate_episode(policy, wl, task.seed, "learned")
    policy = RecordingPolicy(evaluator, features, actions, greedy=False, record=True)
    return run_rollout(
        policy, wl, seed=task.seed, arrival_seed=task.workload.seed, max_time=task.max_time
    )


def _run_batch(blob: PolicyBlob | None, tasks: Sequence[Task]) -> list[Any]:
    return [run_task(blob, t) for t in tasks]


def _init_ray_worker() -> None:
    """A Ray worker's setup: one torch thread (rollouts are parallel across tasks)."""
    torch.set_num_threads(1)


class RolloutRunner:
    """Runs tasks in `workers` local processes (in-process for 1) or on Ray; results in
    task order.

    `ray` (``"auto"`` or a cluster address, see `idlegate.parallel`) sends every task to
    Ray instead, and `workers` is then unused. Use as a context manager (or call
    `close`). Tasks are handed out one at a time (an idle worker takes the next); the
    blob travels once per `run` on Ray and once per task locally, and each worker
    rebuilds a policy only when its content hash changes.
    """

    def __init__(
        self, workers: int = 1, mp_context: str = "forkserver", ray: str | None = None
    ) -> None:
        if workers < 1:
            raise IdlegateError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        self.mp_context = mp_context
        self.ray = ray
        self._pool: TaskPool | None = None

    def pool(self) -> TaskPool:
        """The task pool, started on first use (Ray connects here)."""
        if self._pool is None:
            if self.ray is not None:
                self._pool = RayPool(self.ray, initializer=_init_ray_worker)
            else:
                self._pool = LocalPool(
                    self.workers,
                    preload=("torch", "idlegate.training.rollout"),
                    initializer=_init_worker,
                    initargs=(os.getpid(),),
                    mp_context=self.mp_context,
                )
        return self._pool

    def run(self, blob: PolicyBlob | None, tasks: Sequence[Task]) -> list[Any]:
        """Results of `tasks` in order (rollouts, evaluations or custom results)."""
        if not tasks:
            return []
        if self.ray is None and self.workers == 1:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                return _run_batch(blob, tasks)
            finally:
                torch.set_num_threads(threads)
        return self.pool().map(run_task, tasks, shared=(blob,))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> RolloutRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
