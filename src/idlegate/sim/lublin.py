"""The Lublin–Feitelson workload model of rigid parallel jobs, seeded (the `lublin` workload).

Model and parameters: U. Lublin and D. G. Feitelson, "The workload on parallel
supercomputers: modeling the characteristics of rigid jobs", J. Parallel and Distributed
Computing 63(11):1105–1122, 2003 (Hebrew University tech. report 2001-12; the model's
reference generator is known as ``lublin99``). Per job type (the "typeless" whole-sample
fit by default, or separate batch and interactive streams):

* **Size.** With probability ``serial_prob`` the job is serial (1 node). Otherwise
  ``par = log2(size)`` is drawn from a *two-stage uniform*: U[ulow, umed] with
  probability ``uprob``, else U[umed, uhi]; with probability ``pow2_prob`` (of all jobs)
  ``par`` is rounded to an integer, so the size is a power of two; size = round(2^par).
  ``uhi`` = log2(machine size).
* **Run time** is ``exp(hg)`` seconds, with hg hyper-gamma: Gamma(a1, b1) with
  probability p, else Gamma(a2, b2), where p = pa·size + pb (clipped to [0, 1]) so
  larger jobs tend to run longer; draws above 12 (≈ 45 h) are redrawn.
* **Arrivals** follow a daily cycle: the day is 48 half-hour buckets whose weights are
  the Gamma(anum, bnum) probabilities of the hours 11..35 (wrapped onto 0..24); an
  inter-arrival "budget" exp(Gamma(aarr·arar, barr)) (draws above 13 redrawn) is spent
  on buckets, each costing its weight per half hour, so busy hours get dense arrivals.
  The run starts at midnight.

Times are whole seconds (as the model's SWF output). Requested time = run time (the
model has no estimates). This implementation is written from the published parameters;
`tests/test_rigid_workloads.py` checks its statistics against a 10,000-job sample of the
model on 256 nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from pydantic import ConfigDict, Field

from idlegate.config import Config
from idlegate.sim.engine import Workload
from idlegate.sim.rigid import RigidJob, rigid_workload

BUCKETS = 48
BUCKET_SECONDS = 24 * 3600 / BUCKETS
CYCLIC_DAY_START = 11
MAX_LOG_RUN = 12.0
MAX_LOG_GAP = 13.0


@dataclass(frozen=True)
class JobTypeParams:
    """The model's parameters for one job type (names as in the paper)."""

    serial_prob: float
    pow2_prob: float
    ulow: float
    umed_below_uhi: float
    """uhi − umed (the paper advises 1.5–3.5)."""
    uhi_below_log2k: float
    """log2(machine size) − uhi (0: the largest job fills the machine)."""
    uprob: float
    a1: float
    b1: float
    a2: float
    b2: float
    pa: float
    pb: float
    aarr: float
    barr: float
    anum: float
    bnum: float
    arar: float


TYPELESS = JobTypeParams(
    0.244, 0.576, 0.8, 2.5, 0.0, 0.86, 4.2, 0.94, 312.0, 0.03, -0.0054, 0.78,
    10.2303, 0.4871, 8.1737, 3.9631, 1.0225,
)  # fmt: skip
"""The whole-sample fit (all jobs one type); the 10,000-job sample file was made with it."""
BATCH = JobTypeParams(
    0.2927, 0.6686, 1.2, 2.0, 0.0, 0.875, 6.57, 0.823, 639.1, 0.0156, -0.003, 0.6986,
    6.0415, 0.8531, 6.1271, 5.2740, 1.0519,
)  # fmt: skip
INTERACTIVE = JobTypeParams(
    0.1541, 0.625, 1.0, 2.5, 1.5, 0.705, 3.8351, 0.6605, 7.073, 0.6856, -0.0118, 0.9156,
    6.5510, 0.6621, 8.9186, 3.6680, 0.9797,
)  # fmt: skip


class LublinConfig(Config):
    """The `lublin` workload: rigid jobs from the Lublin–Feitelson model."""

    model_config = ConfigDict(allow_inf_nan=False)  # as every workload's options

    num_jobs: int = Field(256, ge=1, le=1_000_000)
    """Jobs (--jobs-count)."""
    num_executors: int = Field(256, ge=12, le=100_000)
    """Executors (nodes); the largest job size is this (uhi = log2 of it). At least 12:
    below, umed (uhi less 2.5 for the interactive fit) falls under ulow (1.0) and the
    model draws from no interval."""
    job_types: Literal["typeless", "batch-interactive"] = "typeless"
    """typeless: the whole-sample fit; batch-interactive: two streams with their own
    parameters, merged by arrival time."""
    interarrival_scale: float = Field(1.0, gt=0, le=1000)
    """Multiply every inter-arrival time (below 1: more load)."""


def _gamma_pdf(x: np.ndarray, shape: float, scale: float) -> np.ndarray:
    logpdf = (shape - 1) * np.log(x) - x / scale - math.lgamma(shape) - shape * math.log(scale)
    return np.exp(logpdf)


@lru_cache(maxsize=8)
def bucket_weights(anum: float, bnum: float) -> tuple[float, ...]:
    """Per half-hour bucket of the day, its share of arrivals normalised to mean 1."""
    weights = np.zeros(BUCKETS)
    for i in range(CYCLIC_DAY_START, BUCKETS + CYCLIC_DAY_START):
        # the Gamma(anum, bnum) mass of [i − 0.5, i + 0.5] by Simpson's rule (smooth pdf)
        x = np.linspace(i - 0.5, i + 0.5, 201)
        y = _gamma_pdf(x, anum, bnum)
        h = x[1] - x[0]
        weights[(i - 1) % BUCKETS] = (
            h / 3 * (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum())
        )
    return tuple((weights / weights.mean()).tolist())


class _ArrivalStream:
    """One job type's arrival process (the daily-cycle budget walk)."""

    def __init__(self, p: JobTypeParams, rng: np.random.Generator, scale: float) -> None:
        self.w = bucket_weights(p.anum, p.bnum)
        self.shape, self.scale_b = p.aarr * p.arar, p.barr
        self.rng = rng
        self.stretch = scale
        self.bucket = 0  # the run starts at midnight
        self.points = 0.0
        self.reminder = 0.0
        self.time = 0.0
        self.advance()

    def advance(self) -> None:
        gam = self.rng.gamma(self.shape, self.scale_b)
        while gam > MAX_LOG_GAP:
            gam = self.rng.gamma(self.shape, self.scale_b)
        self.points += math.exp(gam) / BUCKET_SECONDS
        gap = 0.0
        w = self.w
        while self.points > w[self.bucket]:
            self.points -= w[self.bucket]
            self.bucket = (self.bucket + 1) % BUCKETS
            gap += BUCKET_SECONDS
        reminder = self.points / w[self.bucket]
        gap += BUCKET_SECONDS * (reminder - self.reminder)
        self.reminder = reminder
        self.time += gap * self.stretch


def job_size(p: JobTypeParams, uhi: float, rng: np.random.Generator) -> int:
    """Nodes of one job: serial, power of two, or round(2^par) (see the module docstring)."""
    u = rng.random()
    if u <= p.serial_prob:
        return 1
    umed = uhi - p.umed_below_uhi
    hi = uhi - p.uhi_below_log2k
    par = rng.uniform(p.ulow, umed) if rng.random() <= p.uprob else rng.uniform(umed, hi)
    if u <= p.serial_prob + p.pow2_prob:
        par = math.floor(par + 0.5)
    return max(1, round(2.0**par))


def run_time(p: JobTypeParams, nodes: int, rng: np.random.Generator) -> float:
    """Whole seconds exp(hyper-gamma), the first gamma's weight falling with size."""
    prob = min(1.0, max(0.0, p.pa * nodes + p.pb))
    while True:
        a, b = (p.a1, p.b1) if rng.random() <= prob else (p.a2, p.b2)
        hg = rng.gamma(a, b)
        if hg <= MAX_LOG_RUN:
            return float(max(1, math.floor(math.exp(hg))))


def lublin_jobs(config: LublinConfig, rng: np.random.Generator) -> list[RigidJob]:
    """`config.num_jobs` jobs in arrival order (sizes clipped to the machine)."""
    k = config.num_executors
    uhi = math.log2(k)
    types = [TYPELESS] if config.job_types == "typeless" else [BATCH, INTERACTIVE]
    # separate streams: arrivals, and per type sizes and run times
    streams = rng.spawn(2 * len(types))
    arrivals = [
        _ArrivalStream(p, s, config.interarrival_scale)
        for p, s in zip(types, streams[: len(types)], strict=True)
    ]
    content = streams[len(types) :]
    jobs = []
    for i in range(config.num_jobs):
        t = min(range(len(types)), key=lambda j: arrivals[j].time)
        submit = float(math.floor(arrivals[t].time))
        arrivals[t].advance()
        nodes = min(k, job_size(types[t], uhi, content[t]))
        run = run_time(types[t], nodes, content[t])
        jobs.append(RigidJob(i + 1, submit, run, nodes, run))
    return jobs


def lublin_workload(config: LublinConfig, seed: Any = 0) -> Workload:
    """The `lublin` workload: arrival times relative to the first job (requested = run)."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    jobs = lublin_jobs(config, rng)
    return rigid_workload("lublin", jobs, config.num_executors, "run")
