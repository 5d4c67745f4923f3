"""Metrics of simulator runs, and paired statistics for comparing schedulers over seeds.

Pure (numpy only). Two layers:

* per run: :func:`job_metrics` (one row per finished job) and :func:`run_metrics` (the
  aggregates of one :class:`~idlegate.sim.engine.SimResult` as a :class:`RunMetrics`);
* over seeds: :func:`mean_ci` (mean and Student-t confidence interval) and
  :func:`paired_relative_change` (mean of per-seed ratios against a baseline that ran on
  the same arrival sequences, minus one, with its interval).

Definitions (for a run with K executors that ends at ``end_time``):

* JCT = finish − arrival; percentiles use numpy's default (linear interpolation);
* makespan = ``end_time`` (the run's clock starts at 0; when every job finishes this is
  the last finish time);
* utilisation by resource (a pool that counts resources beyond pods) = unit-seconds of
  the resource that running tasks requested / (its capacity × makespan);
* utilisation = executor-seconds running tasks / (K × makespan); the moving delay of an
  executor new to a job is not task execution and counts in ``overhead`` = moving-delay
  executor-seconds / (K × makespan) instead (warm-up stays in the task durations: the
  measured duration model draws a moved executor's fresh task as one number);
* mean jobs in system = ∫ jobs-in-system dt / makespan (Little's law: when every job
  finishes, ∫ jobs-in-system dt equals the sum of JCTs);
* per-job lower bound = max(critical path, total work / K) on the estimated task
  durations; ``lb_ratio`` = average JCT / average lower bound (≥ 1 when tasks run for
  their estimates; sampled durations can take it slightly below 1).
* wait = first task start − arrival; run = finish − first task start (for a rigid job,
  its actual run time); bounded slowdown (bsld) = max(1, (wait + run) / max(run, 10)),
  the HPC metric of SchedInspector and Deep Back-Filling (10 s bounds the slowdown of
  very short jobs).
* average queue length = ∫ waiting jobs dt / makespan, a job waiting from its arrival
  to its first task start; ∫ waiting jobs dt = Σ waits over finished jobs (jobs that
  never started before a time limit are not counted, so it is exact when every job
  finishes).
* preempted = tasks stopped to give quota back (each ran again); work lost = the
  executor-seconds they had run when stopped (none for a checkpointed stage), part of
  the utilisation's executor-seconds; ``lost_share`` = work lost / executor-seconds run.
  A run that stopped nothing leaves the three out of `RunMetrics.to_dict`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from idlegate.errors import IdlegateError

if TYPE_CHECKING:
    from idlegate.sim.engine import SimResult

__all__ = [
    "Estimate",
    "JobMetrics",
    "RunMetrics",
    "change_text",
    "job_metrics",
    "mean_ci",
    "paired_relative_change",
    "percentile",
    "run_metrics",
    "t_quantile",
]


# ---------------------------------------------------------------------------------------
# Per job

BSLD_MIN_RUN = 10.0
"""Run times below this many seconds count as this long in the bounded slowdown."""


@dataclass(frozen=True, eq=False)
class JobMetrics:
    """Per-job metrics of one run: parallel arrays, one entry per finished job (by job id)."""

    id: np.ndarray
    arrival: np.ndarray
    first_start: np.ndarray
    finish: np.ndarray
    jct: np.ndarray
    idle_inserted: np.ndarray
    lower_bound: np.ndarray
    """max(critical path, total work / K) of each job, on estimated durations."""

    def __len__(self) -> int:
        return int(self.jct.size)

    @property
    def wait(self) -> np.ndarray:
        """Seconds from arrival to the first task start."""
        return self.first_start - self.arrival

    @property
    def run(self) -> np.ndarray:
        """Seconds from the first task start to the finish (a rigid job's actual run time)."""
        return self.finish - self.first_start

    @property
    def bounded_slowdown(self) -> np.ndarray:
        """max(1, (wait + run) / max(run, 10)) per job."""
        return np.maximum(1.0, self.jct / np.maximum(self.run, BSLD_MIN_RUN))

    def to_dict(self) -> dict[str, list[float] | list[int]]:
        """Column lists, JSON-ready."""
        return {
            "id": [int(x) for x in self.id],
            "arrival": self.arrival.tolist(),
            "first_start": self.first_start.tolist(),
            "finish": self.finish.tolist(),
            "jct": self.jct.tolist(),
            "idle_inserted": self.idle_inserted.tolist(),
            "lower_bound": self.lower_bound.tolist(),
        }


def job_metrics(result: SimResult) -> JobMetrics:
    """Per-job metrics of the finished jobs of `result`."""
    recs = result.records
    k = result.num_executors

    def col(values: Sequence[float]) -> np.ndarray:
        return np.asarray(values, dtype=float)

    arrival = col([r.arrival for r in recs])
    finish = col([r.finish for r in recs])
    return JobMetrics(
        id=np.asarray([r.id for r in recs], dtype=np.int64),
        arrival=arrival,
        first_start=col([r.first_start for r in recs]),
        finish=finish,
        jct=finish - arrival,
        idle_inserted=col([r.idle_inserted for r in recs]),
        lower_bound=col([max(r.critical_path, r.total_work / k) for r in recs]),
    )


# ---------------------------------------------------------------------------------------
# Per run


@dataclass(frozen=True)
class RunMetrics:
    """The aggregates of one run. Times in seconds; NaN where undefined (no finished job)."""

    workload: str
    scheduler: str
    seed: int
    num_executors: int
    jobs: int
    """Finished jobs."""
    unfinished: int
    """Jobs still in the system when the run stopped (only with a time limit)."""
    avg_jct: float
    median_jct: float
    p95_jct: float
    p99_jct: float
    max_jct: float
    makespan: float
    utilisation: float
    """Fraction of executor-time running tasks (moving delay excluded)."""
    mean_jobs_in_system: float
    """Time-average number of jobs in the system over [0, makespan]."""
    idle_inserted: float
    """Total seconds of deliberate idle slots, summed over finished jobs."""
    lb_avg_jct: float
    """Average over finished jobs of max(critical path, work / K)."""
    lb_ratio: float
    """avg_jct / lb_avg_jct."""
    avg_wait: float
    """Average seconds from arrival to the first task start."""
    avg_bsld: float
    """Average bounded slowdown max(1, (wait + run) / max(run, 10))."""
    max_bsld: float
    """Largest bounded slowdown of a finished job."""
    decisions: int
    events: int
    overhead: float = 0.0
    """Fraction of executor-time spent moving between jobs (the moving delay)."""
    avg_queue_length: float = math.nan
    """Time-average number of waiting jobs (arrived, no task started) over [0, makespan]."""
    utilisation_by_resource: dict[str, float] | None = None
    """Per resource the pool counts beyond pods, the fraction of its capacity running tasks
    requested over [0, makespan]; None for a pods-only pool."""
    pods_pended: int | None = None
    """Pods released that pended, not fitting the cluster (a run behind a pods-only gate,
    `idlegate.sim.gate`); None for any other run."""
    pending_seconds: float | None = None
    """Seconds those pods pended, summed; None as `pods_pended`."""
    preempted: int = 0
    """Tasks stopped to give quota back (`Cluster.stop`), each run again."""
    lost_seconds: float = 0.0
    """Executor-seconds of work the stopped tasks lost (none for checkpointed stages)."""
    lost_share: float = 0.0
    """`lost_seconds` over the executor-seconds run (0 when nothing was stopped)."""
    verdicts: dict[str, int] | None = None
    """The forecast judge's verdicts by case (`SimResult.verdicts`: ``decide: Forecast``
    queues' stops that went ahead by ``bound`` or ``pays``, were ``declined`` or ``cut``
    and decided by the rules); None where it gave none."""

    def to_dict(self) -> dict[str, Any]:
        """Field dict, JSON-ready (NaN becomes None; no utilisation by resource for a
        pods-only pool, no pending pods but behind a pods-only gate, nothing of preemption
        for a run that stopped nothing: its figures are those of a run without reclaim)."""
        out = asdict(self)
        for name in ("pods_pended", "pending_seconds"):
            if out[name] is None:
                del out[name]
        if not self.preempted:
            for name in ("preempted", "lost_seconds", "lost_share"):
                del out[name]
        if self.verdicts is None:  # (a run the forecast judge gave no verdict in)
            del out["verdicts"]
        if out["utilisation_by_resource"] is None:
            del out["utilisation_by_resource"]
        else:
            out["utilisation_by_resource"] = {
                k: _json_float(v) for k, v in out["utilisation_by_resource"].items()
            }
        return {k: v if isinstance(v, dict) else _json_float(v) for k, v in out.items()}


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The q-th percentile (0–100) with linear interpolation; NaN for no values."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return math.nan
    return float(np.percentile(a, q))


def run_metrics(result: SimResult, jobs: JobMetrics | None = None) -> RunMetrics:
    """Aggregate one run. `jobs` may pass the already computed :func:`job_metrics`."""
    jm = job_metrics(result) if jobs is None else jobs
    jct = jm.jct
    n = len(jm)
    horizon = float(result.end_time)
    k = result.num_executors
    avg = float(jct.mean()) if n else math.nan
    lb = float(jm.lower_bound.mean()) if n else math.nan
    bsld = jm.bounded_slowdown
    return RunMetrics(
        workload=result.workload,
        scheduler=result.scheduler,
        seed=int(result.seed),
        num_executors=int(k),
        jobs=n,
        unfinished=int(result.unfinished),
        avg_jct=avg,
        median_jct=percentile(jct, 50),
        p95_jct=percentile(jct, 95),
        p99_jct=percentile(jct, 99),
        max_jct=float(jct.max()) if n else math.nan,
        makespan=horizon,
        utilisation=(result.busy_seconds - result.overhead_seconds) / (k * horizon)
        if horizon > 0
        else math.nan,
        mean_jobs_in_system=result.jobs_time_integral / horizon if horizon > 0 else math.nan,
        idle_inserted=float(jm.idle_inserted.sum()),
        lb_avg_jct=lb,
        lb_ratio=avg / lb if n and lb > 0 else math.nan,
        avg_wait=float(jm.wait.mean()) if n else math.nan,
        avg_bsld=float(bsld.mean()) if n else math.nan,
        max_bsld=float(bsld.max()) if n else math.nan,
        decisions=int(result.decisions),
        events=int(result.events),
        overhead=result.overhead_seconds / (k * horizon) if horizon > 0 else math.nan,
        avg_queue_length=float(jm.wait.sum()) / horizon if horizon > 0 else math.nan,
        utilisation_by_resource=_by_resource(result, horizon),
        pods_pended=None if result.pending is None else result.pending[0],
        pending_seconds=None if result.pending is None else result.pending[1],
        preempted=result.preempted,
        lost_seconds=result.preempted_seconds,
        lost_share=result.preempted_seconds / result.busy_seconds if result.preempted else 0.0,
        verdicts=None if result.verdicts is None else dict(result.verdicts),
    )


def _by_resource(result: SimResult, horizon: float) -> dict[str, float] | None:
    """Utilisation of each resource the pool counts beyond pods (module docstring)."""
    if result.resource_seconds is None or result.capacity is None:
        return None
    return {
        name: held / (float(result.capacity.units(name)) * horizon) if horizon > 0 else math.nan
        for name, held in result.resource_seconds.items()
    }


# ---------------------------------------------------------------------------------------
# Over seeds


@dataclass(frozen=True)
class Estimate:
    """A mean over `n` paired samples and its two-sided confidence interval.

    With one sample the interval is undefined (NaN bounds).
    """

    mean: float
    low: float
    high: float
    n: int
    confidence: float = 0.95

    @property
    def half_width(self) -> float:
        """Half the interval's width (NaN when undefined)."""
        return (self.high - self.low) / 2

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN becomes None)."""
        return {
            "mean": _json_float(self.mean),
            "low": _json_float(self.low),
            "high": _json_float(self.high),
            "half_width": _json_float(self.half_width),
            "n": self.n,
            "confidence": self.confidence,
        }


def mean_ci(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> Estimate:
    """Sample mean and Student-t interval ``mean ± t(1−α/2, n−1) · s / √n``."""
    a = np.asarray(values, dtype=float)
    _check_confidence(confidence)
    n = int(a.size)
    if n == 0:
        raise IdlegateError("cannot average zero samples; run at least one seed")
    m = float(a.mean())
    if n == 1 or not np.all(np.isfinite(a)):
        return Estimate(m, math.nan, math.nan, n, confidence)
    h = t_quantile(0.5 + confidence / 2, n - 1) * float(a.std(ddof=1)) / math.sqrt(n)
    return Estimate(m, m - h, m + h, n, confidence)


def paired_relative_change(
    values: Sequence[float] | np.ndarray,
    baseline: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
) -> Estimate:
    """Relative change against a baseline run on the same seeds: mean of x_s / b_s, minus 1.

    Paired per seed (common random numbers), so seed-to-seed variation of the workload
    cancels out of the interval. −0.1 means 10 % lower than the baseline.
    """
    x = np.asarray(values, dtype=float)
    b = np.asarray(baseline, dtype=float)
    if x.shape != b.shape:
        raise IdlegateError(
            f"paired comparison needs one baseline value per seed: {x.size} vs {b.size}"
        )
    if np.any(b == 0):
        raise IdlegateError("the baseline is 0 for some seed; a relative change is undefined")
    est = mean_ci(x / b, confidence)
    return Estimate(est.mean - 1, est.low - 1, est.high - 1, est.n, confidence)


def change_text(mean: float, half_width: float) -> str:
    """A relative change as "+1.2% ± 0.8%"; "± n/a" when the interval is undefined (one
    seed), so tables never show "nan"."""
    spread = f"{half_width:.1%}" if math.isfinite(half_width) else "n/a"
    return f"{mean:+.1%} ± {spread}"


# ---------------------------------------------------------------------------------------
# Student t quantile (no scipy): regularized incomplete beta + bisection


def t_cdf(x: float, df: float) -> float:
    """CDF of Student's t distribution with `df` degrees of freedom."""
    if df <= 0:
        raise IdlegateError(f"degrees of freedom must be positive, got {df}")
    if x == 0:
        return 0.5
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + x * x))
    return 1 - tail if x > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The `p`-quantile of Student's t with `df` degrees of freedom (|error| < 1e-10)."""
    if not 0 < p < 1:
        raise IdlegateError(f"a quantile needs 0 < p < 1, got {p}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) (continued fraction, Numerical Recipes 6.4)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    ln_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(ln_front)
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1 + aa * d
        d = 1 / (d if abs(d) > tiny else tiny)
        c = 1 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1 + aa * d
        d = 1 / (d if abs(d) > tiny else tiny)
        c = 1 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return h


# ---------------------------------------------------------------------------------------


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise IdlegateError(f"confidence must be between 0 and 1, got {confidence}")


def _json_float(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
