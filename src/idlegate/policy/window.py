"""The split-window agent for rigid jobs (Deep Back-Filling) at inference: numpy + onnxruntime.

A learned scheduler that sees a fixed-size *window* of a long queue: the `m_head` oldest
waiting jobs (the queue head, where FCFS and EASY look) and the `m_tail` newest (the
tail, where short fresh jobs that could backfill arrive), plus a summary of the cluster.
At each decision it picks one of the M = m_head + m_tail slots, or *forwards*: starts
nothing and waits until the next arrival or completion. Head-only is ``m_tail = 0``.

**Window.** The waiting jobs (arrived, not started), in arrival order, are q_0 … q_{n−1}.
Head slot i (0 ≤ i < m_head) holds q_i; tail slot j (0 ≤ j < m_tail) holds
q_{max(m_head, n − m_tail) + j}, so the tail shows the newest jobs in arrival order and
never repeats a head job. Slots without a job are empty (their mask feature is 0).

**Slot features** (`SLOT_FEATURES`, one row per slot, all in about [0, 1]; an empty
slot is all zeros). Times are log-scaled, log10(1 + seconds) / `LOG_TIME_SCALE` (1.0 is
about 28 hours):

====  ========================================================================
0     present: 1 for a job, 0 for an empty slot (the mask)
1     requested time r (log-scaled)
2     size n / K
3     wait so far, now − arrival (log-scaled)
4     can start now: n ≤ free executors
5     backfill-safe: can start now without delaying the oldest waiting job, i.e.
      it is that job, or it ends by the job's EASY reservation (now + r ≤ shadow
      time) or uses only executors the reservation does not need (`reservation`)
6     area r·n / K (log-scaled)
7     tail slot: 1 in a tail slot, 0 in a head slot
====  ========================================================================

**Cluster features** (`CLUSTER_FEATURES`):

====  ========================================================================
0     free executors / K
1     queue length n, log10(1 + n) / 3
2     running jobs' remaining requested time, mean weighted by executors held
      (log-scaled); a running job's is max(0, start + r − now)
3     the smallest remaining requested time of a running job (log-scaled)
4     something runs (1/0): forwarding can only wait for a completion or an
      arrival, and on an idle machine it could strand the queue (see below)
5     the oldest waiting job's wait for its reservation, shadow − now
      (log-scaled; 0 when it fits now or nothing waits)
6     share of the queue the window shows, min(1, M / n) (1 for an empty queue)
====  ========================================================================

**Actions** are 0 … M−1 (start the slot's job) and M (forward). A pick is *legal* when
its slot holds a job that can start now; forward is legal when something runs. An
illegal pick forwards. Forward with nothing running would leave an idle machine
waiting for an arrival that may never come (the end of a trace), so it starts the
first legal slot instead (head slots first). The model masks illegal actions itself
(log-probability about −1e9), so it only picks legal ones; the rules above are what
the runtime does with any index.

**The ONNX model** takes ``slots`` [B, M, 8] and ``cluster`` [B, 7] (float32) and returns
``logp`` [B, M + 1] (log-probabilities of the actions) and ``value`` [B]. Its metadata
holds ``idlegate.format`` = ``idlegate-window-onnx``, the window sizes and
`WINDOW_FEATURE_VERSION`; `WindowScheduler` refuses a file whose metadata or input
shapes do not match. Training and export: `idlegate.training.window`; spec
``window:PATH.onnx`` (`policy.make_scheduler`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from idlegate.errors import IdlegateError, reject_unknown
from idlegate.policy.heuristics import best_stage, launch_decision
from idlegate.policy.rigid import fits, job_size, requested_time, reservation
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.protocol import WAIT, Action, ClusterView, Job

WINDOW_FORMAT = "idlegate-window-onnx"
WINDOW_FEATURE_VERSION = 1
"""Bump when a feature's meaning or order changes; models of another version are refused."""
SLOT_FEATURES = 8
CLUSTER_FEATURES = 7
LOG_TIME_SCALE = 5.0
"""log10 seconds that map to 1.0 (10^5 s ≈ 28 h)."""
LOG_QUEUE_SCALE = 3.0
"""log10(1 + queue length) that maps to 1.0 (about 1,000 waiting jobs)."""
ILLEGAL_LOGIT = -1e9
"""The logit of an illegal action inside the model (finite, so no NaN in softmax)."""

# slot feature columns
PRESENT, REQUESTED, SIZE, WAITED, CAN_START, BACKFILL_SAFE, AREA, TAIL = range(SLOT_FEATURES)
# cluster feature columns
FREE, QUEUE, MEAN_REMAINING, MIN_REMAINING, RUNNING, HEAD_DELAY, VISIBLE = range(CLUSTER_FEATURES)


def log_time(seconds: float) -> float:
    """log10(1 + max(0, seconds)) / LOG_TIME_SCALE: 0 for 0 s, 1 for about 28 h."""
    return math.log10(1.0 + max(0.0, seconds)) / LOG_TIME_SCALE


def waiting_jobs(view: ClusterView) -> list[Job]:
    """Jobs that arrived and have a stage to launch, in arrival order (the queue)."""
    runnable = view.runnable
    return [j for j in view.jobs if runnable(j)]


def window_jobs(queue: Sequence[Job], m_head: int, m_tail: int) -> list[Job | None]:
    """The M = m_head + m_tail slots over `queue` (arrival order); None marks an empty slot.

    Head slot i holds queue[i]; tail slot j holds queue[max(m_head, n − m_tail) + j], so
    no job is in two slots (see the module docstring).
    """
    n = len(queue)
    head: list[Job | None] = [queue[i] if i < n else None for i in range(m_head)]
    first_tail = max(m_head, n - m_tail)
    tail: list[Job | None] = [
        queue[first_tail + j] if first_tail + j < n else None for j in range(m_tail)
    ]
    return head + tail


@dataclass(frozen=True)
class WindowObservation:
    """What the model sees at one decision, and which job each slot holds."""

    slots: np.ndarray
    """[M, SLOT_FEATURES] float32."""
    cluster: np.ndarray
    """[CLUSTER_FEATURES] float32."""
    jobs: tuple[Job | None, ...]
    """The job in each slot (None: empty)."""

    @property
    def size(self) -> int:
        """M, the number of slots (the forward action is index M)."""
        return len(self.jobs)


def legal_actions(slots: np.ndarray, cluster: np.ndarray) -> np.ndarray:
    """[..., M + 1] bool: a slot whose job can start now; forward (last) when something runs.

    Works on one observation ([M, F], [C]) or a batch ([B, M, F], [B, C]); the model
    computes the same mask from the same features.
    """
    picks = (slots[..., PRESENT] > 0.5) & (slots[..., CAN_START] > 0.5)
    forward = cluster[..., RUNNING : RUNNING + 1] > 0.5
    return np.concatenate([picks, forward], axis=-1)


def greedy_action(logp: np.ndarray) -> int:
    """The greedy action of log-probabilities [M + 1]: forward if its probability is at
    least 1/2, else the most probable slot.

    The decision is two-level (start something or wait, then which job); an argmax over
    all M + 1 entries would forward whenever the picks are spread over several jobs
    even if starting one is far more likely than waiting.
    """
    m = logp.size - 1
    if m == 0 or logp[m] >= math.log(0.5):
        return m
    return int(np.argmax(logp[:m]))


def resolve(obs: WindowObservation, action: int) -> Job | None:
    """The job action `action` starts, or None to forward (see the module's rules).

    An illegal pick (empty slot, or a job that cannot start now) forwards; forwarding
    with nothing running starts the first legal slot instead.
    """
    legal = legal_actions(obs.slots, obs.cluster)
    m = obs.size
    if not 0 <= action <= m:
        raise IdlegateError(f"window action {action} is out of range 0..{m} (M = {m} slots)")
    if action < m and legal[action]:
        return obs.jobs[action]
    if legal[m]:
        return None
    picks = np.flatnonzero(legal[:m])
    return obs.jobs[int(picks[0])] if picks.size else None


def _remaining_requested(view: ClusterView) -> list[tuple[float, int]]:
    """(max(0, start + r − now), executors held) of every running job."""
    now = view.now
    out = []
    for job in view.jobs:
        if job.held > 0:
            start = job.first_start if job.first_start is not None else now
            out.append((max(0.0, start + requested_time(job) - now), job.held))
    return out


class WindowObserver:
    """Builds the `WindowObservation` of a cluster view for fixed window sizes."""

    def __init__(self, m_head: int, m_tail: int) -> None:
        check_window(m_head, m_tail)
        self.m_head = m_head
        self.m_tail = m_tail

    @property
    def size(self) -> int:
        """M = m_head + m_tail."""
        return self.m_head + self.m_tail

    def __call__(self, view: ClusterView) -> WindowObservation:
        queue = waiting_jobs(view)
        jobs = window_jobs(queue, self.m_head, self.m_tail)
        k = view.num_executors
        free = view.free_executors
        now = view.now
        running = _remaining_requested(view)
        # the oldest waiting job's EASY reservation, for the backfill-safe feature
        shadow, extra = now, k
        if queue and job_size(queue[0]) > free:
            shadow, extra = reservation(view, math.ceil(job_size(queue[0])))
        slots = np.zeros((len(jobs), SLOT_FEATURES), dtype=np.float32)
        for i, job in enumerate(jobs):
            if job is None:
                continue
            r, n = requested_time(job), job_size(job)
            start = best_stage(view.runnable(job), free)
            can = start is not None and fits(start, free)
            row = slots[i]
            row[PRESENT] = 1.0
            row[REQUESTED] = log_time(r)
            row[SIZE] = n / k
            row[WAITED] = log_time(now - job.arrival)
            row[CAN_START] = float(can)
            row[BACKFILL_SAFE] = float(can and (job is queue[0] or now + r <= shadow or n <= extra))
            row[AREA] = log_time(r * n / k)
            row[TAIL] = float(i >= self.m_head)
        cluster = np.zeros(CLUSTER_FEATURES, dtype=np.float32)
        cluster[FREE] = free / k
        cluster[QUEUE] = math.log10(1 + len(queue)) / LOG_QUEUE_SCALE
        if running:
            held = sum(h for _, h in running)
            cluster[MEAN_REMAINING] = log_time(sum(t * h for t, h in running) / held)
            cluster[MIN_REMAINING] = log_time(min(t for t, _ in running))
            cluster[RUNNING] = 1.0
        cluster[HEAD_DELAY] = log_time(shadow - now) if math.isfinite(shadow) else 1.0
        cluster[VISIBLE] = min(1.0, len(jobs) / len(queue)) if queue else 1.0
        return WindowObservation(slots, cluster, tuple(jobs))


def check_window(m_head: Any, m_tail: Any) -> None:
    """Raise IdlegateError unless both sizes are whole numbers >= 0 with at least one slot."""
    for label, value in (("m_head", m_head), ("m_tail", m_tail)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise IdlegateError(f"{label} must be a whole number >= 0, got {value!r}")
    if m_head + m_tail < 1:
        raise IdlegateError("the window needs at least one slot: m_head + m_tail >= 1")


def start_job(job: Job, view: ClusterView) -> Action:
    """The decision that starts `job` now (its launchable stage, gang cap)."""
    stage = best_stage(view.runnable(job), view.free_executors)
    if stage is None:  # resolve() only returns jobs that can start
        return WAIT
    return launch_decision(stage, view.num_executors)


# ---------------------------------------------------------------------------------------
# The ONNX model as a scheduler


def _metadata_int(meta: dict[str, str], key: str, path: str) -> int:
    try:
        return int(meta[key])
    except (KeyError, ValueError):
        raise IdlegateError(
            f"{path}: the window model's metadata has no valid {key!r}; re-export it with "
            "`idlegate train-window`"
        ) from None


class WindowScheduler:
    """An exported split-window model as a `Scheduler`: ``WindowScheduler("w.onnx")``.

    Greedy (`greedy_action`) by default; with `greedy=False` it draws from the run's
    Generator.
    Raises IdlegateError for a missing file, a file that is not a window model, a
    feature version other than `WINDOW_FEATURE_VERSION`, or inputs of the wrong shape.
    """

    def __init__(
        self,
        model: str | Path | bytes,
        *,
        greedy: bool = True,
        threads: int = 1,
        name: str = "window",
    ) -> None:
        from idlegate.policy.onnx_runtime import open_session  # only when one is built

        label = "the window model" if isinstance(model, bytes) else str(model)
        self.session, meta = open_session(
            model,
            threads=threads,
            what="window model",
            remedy="train one with `idlegate train-window --out PATH.onnx`",
        )
        if meta.get("idlegate.format") != WINDOW_FORMAT:
            raise IdlegateError(
                f"{label} is not a split-window model (its metadata has no idlegate.format "
                f"{WINDOW_FORMAT!r}); use learned:PATH for a DAG policy"
            )
        version = _metadata_int(meta, "idlegate.window.feature_version", label)
        if version != WINDOW_FEATURE_VERSION:
            raise IdlegateError(
                f"{label} was trained on window features version {version}, this idlegate "
                f"computes version {WINDOW_FEATURE_VERSION}; train it again"
            )
        m_head = _metadata_int(meta, "idlegate.window.m_head", label)
        m_tail = _metadata_int(meta, "idlegate.window.m_tail", label)
        self.observer = WindowObserver(m_head, m_tail)
        self._check_inputs(label)
        self.metadata = meta
        self.greedy = greedy
        self.name = name
        self._rng: np.random.Generator | None = None

    @property
    def m_head(self) -> int:
        return self.observer.m_head

    @property
    def m_tail(self) -> int:
        return self.observer.m_tail

    def _check_inputs(self, label: str) -> None:
        shapes = {i.name: i.shape for i in self.session.get_inputs()}
        expected = {
            "slots": [self.observer.size, SLOT_FEATURES],
            "cluster": [CLUSTER_FEATURES],
        }
        for name, tail in expected.items():
            shape = shapes.get(name)
            if shape is None or list(shape[1:]) != tail:
                raise IdlegateError(
                    f"{label}: input {name!r} should have shape [batch, "
                    f"{', '.join(map(str, tail))}] for a window of {self.m_head} head and "
                    f"{self.m_tail} tail slots, the model has {shape}; re-export it"
                )

    def reset(self, rng: Any) -> None:
        """Start of a run: draws (if not greedy) come from `rng`."""
        self._rng = rng

    def __repr__(self) -> str:
        return f"WindowScheduler({self.name!r}, m_head={self.m_head}, m_tail={self.m_tail})"

    def evaluate(self, obs: WindowObservation) -> tuple[np.ndarray, float]:
        """(log-probabilities [M + 1], value) of one observation."""
        logp, value = self.session.run(
            ["logp", "value"], {"slots": obs.slots[None], "cluster": obs.cluster[None]}
        )
        return logp[0], float(value[0])

    def action(self, obs: WindowObservation) -> int:
        """The action index: `greedy_action`, or a draw from the run's Generator."""
        logp, _ = self.evaluate(obs)
        if self.greedy or self._rng is None:
            return greedy_action(logp)
        p = np.exp(logp - logp.max())
        return int(self._rng.choice(p.size, p=p / p.sum()))

    def decide(self, view: ClusterView) -> Action:
        obs = self.observer(view)
        job = resolve(obs, self.action(obs))
        return WAIT if job is None else start_job(job, view)


def make_window(spec: SchedulerSpec, /, **params: Any) -> WindowScheduler:
    """Build ``window:PATH.onnx`` (`spec`): the model named ``window-STEM`` unless
    ``name=`` is given; ``greedy=`` and ``threads=`` pass to `WindowScheduler`."""
    params = spec.keywords(params)
    reject_unknown(params, ("name", "greedy", "threads"), "a window scheduler")
    p = Path(spec.argument or "").expanduser()
    name = params.pop("name", None) or f"window-{p.stem}"
    return WindowScheduler(p, name=name, **params)
