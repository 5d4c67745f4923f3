"""The conditional arrival model: what arrives next, given what arrived (`ConditionalModel`).

The model behind ``futures=conditional`` and ``auto`` of the lookahead planner
(`policy.futures`): `fit(arrivals)` on past arrivals (online: the jobs the planner saw;
offline: a history file, `policy.futures.history_arrivals`), `sample(now, horizon, rng)`
a future, `log_likelihood` of held-out arrivals to test it against plain Poisson.

What it sees is what an operator sees: each arrival's time, its estimated work and its
name's *stem* (the name without a trailing index or random suffix, `stem`), never a
generator's labels. Arrivals fall into *types*:

* a stem whose last runs came at regular gaps (`detect_schedule`: coefficient of
  variation of the gaps at most `schedule_cv`) is *scheduled*: its next runs are expected
  at last run + k·period, with a normal error of the gaps' spread;
* every other arrival is of a *size class*, cut where the sorted log works have their
  widest gaps (`size_breaks`).

Size classes excite each other as a multivariate Hawkes process with histogram kernels:
the intensity of class c at t is

    λ_c(t) = μ_c + Σ_{i: t−L < t_i < t} α[c_i, c] · h[c_i, c](t − t_i)

(μ: background rates; α[a, b]: expected arrivals of class b that one arrival of class a
brings; h: their lag density over (0, L], `lag_bins` bins), fitted by EM (stochastic
declustering: Marsan & Lengliné 2008; each arrival's responsibilities between the
background and its predecessors). A long job followed by a session of short ones gives
α[long, short] ≈ the session size, with h its lag; on Poisson arrivals α ≈ 0. A sampled
future draws the background, the remaining offspring of the recent arrivals (Poisson
with mean α·(1 − H(elapsed)), lags from h beyond the elapsed time), their own offspring,
and the scheduled runs; each arrival copies a recent job of its type.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import erf, log, sqrt
from typing import Any, NamedTuple

import numpy as np
from pydantic import ConfigDict, Field, StrictInt

from idlegate.config import Config, NonNegative, Positive
from idlegate.errors import IdlegateError


class FuturesConfig(Config):
    """The conditional arrival model and its selection (every field has a working default)."""

    model_config = ConfigDict(title="the future model")

    history: StrictInt = Field(200, ge=10)
    """Arrivals the model is fitted on (the most recent ones)."""
    min_arrivals: StrictInt = Field(20, ge=2)
    """Below this many arrivals seen, futures are Poisson (too little to fit)."""
    size_classes: StrictInt = Field(3, ge=1, le=8)
    """At most this many size classes."""
    class_ratio: Positive = 2.0
    """Two size classes are cut only where the works' ratio jumps by at least this."""
    max_lag: Positive = 60.0
    """L: seconds after an arrival over which it may bring others."""
    lag_bins: StrictInt = Field(20, ge=1)
    """Bins of the lag density h over (0, L]."""
    iterations: StrictInt = Field(30, ge=1)
    """EM iterations per fit."""
    schedule_runs: StrictInt = Field(4, ge=3)
    """A stem is scheduled after this many runs at regular gaps."""
    schedule_cv: Positive = 0.2
    """Regular gaps: their standard deviation / mean at most this."""
    score_window: StrictInt = Field(40, ge=1)
    """``auto``: the arrivals over which the two models' held-out scores are compared."""
    margin: NonNegative = 0.05
    """``auto``, ``expected``: the conditional model is used when it beats Poisson by
    this many nats per arrival."""
    expected_draws: StrictInt = Field(32, ge=1)
    """``expected``: sampled futures behind the one expected future."""


class Arrival(NamedTuple):
    """One arrival as a future model sees it."""

    time: float
    work: float
    """Estimated total work (executor-seconds)."""
    stem: str
    """The name's stem (`stem`)."""
    job: Any
    """What a future copies when it draws this arrival's type (a `JobArrival` template)."""


_SUFFIX = re.compile(r"-(\d+|[a-z0-9]{5})$")


def stem(name: str) -> str:
    """A workflow's name without its index or generated suffix: ``etl-report-7`` and
    ``etl-report-x7k2q`` → ``etl-report``."""
    return _SUFFIX.sub("", name)


# -- the math, in small functions ---------------------------------------------------------


def size_breaks(works: Sequence[float], classes: int, ratio: float) -> list[float]:
    """Thresholds cutting `works` into at most `classes` size classes: at the geometric
    midpoints of the widest gaps of the sorted log works that exceed log(`ratio`)."""
    logs = np.unique(np.log(np.maximum(np.asarray(works, float), 1e-9)))
    if classes < 2 or len(logs) < 2:
        return []
    gaps = np.diff(logs)
    widest = [i for i in np.argsort(-gaps, kind="stable")[: classes - 1] if gaps[i] >= log(ratio)]
    return sorted(float(np.exp((logs[i] + logs[i + 1]) / 2)) for i in widest)


def size_class(work: float, breaks: Sequence[float]) -> int:
    """The index of `work`'s class under `breaks` (0: the smallest works)."""
    return int(np.searchsorted(breaks, work))


class DetectedSchedule(NamedTuple):
    """A detected schedule: runs every `period` seconds, each off by `spread` (sd)."""

    period: float
    spread: float


def detect_schedule(times: Sequence[float], runs: int, cv: float) -> DetectedSchedule | None:
    """The schedule of the last `runs` of `times`, if their gaps are regular (sd/mean ≤ cv)."""
    if len(times) < runs:
        return None
    gaps = np.diff(np.asarray(times[-runs:], float))
    mean = float(gaps.mean())
    if mean <= 0 or float(gaps.std()) > cv * mean:
        return None
    return DetectedSchedule(mean, max(float(gaps.std()), 0.02 * mean))


def _phi(x: float) -> float:
    return 0.5 * (1.0 + erf(x / sqrt(2.0)))


def schedule_mass(s: DetectedSchedule, last: float, start: float, end: float) -> float:
    """Expected runs in (start, end] of a schedule whose last run was at `last`: the
    normal masses of the runs last + k·period, k ≥ 1."""
    total, k = 0.0, 1
    while last + k * s.period - 4 * s.spread <= end:
        mid = last + k * s.period
        total += _phi((end - mid) / s.spread) - _phi((start - mid) / s.spread)
        k += 1
    return total


def schedule_density(s: DetectedSchedule, last: float, t: float) -> float:
    """Intensity of the schedule at t (a sum of normal densities at last + k·period)."""
    k = max(1, round((t - last) / s.period))
    z = (t - last - k * s.period) / s.spread
    return float(np.exp(-0.5 * z * z) / (s.spread * sqrt(2 * np.pi)))


def kernel_cdf(h: np.ndarray, width: float, x: Any) -> np.ndarray:
    """H(x): the mass of the histogram density h (bins of `width` from lag 0, on its last
    axis) up to lag x (0 below 0, 1 beyond the last bin); x broadcasts with h.shape[:-1]."""
    bins = h.shape[-1]
    shape = np.broadcast_shapes(h.shape[:-1], np.shape(x))
    h = np.broadcast_to(h, (*shape, bins))
    pos = np.broadcast_to(np.clip(np.asarray(x, float) / width, 0.0, bins), shape)
    whole = np.minimum(pos.astype(int), bins - 1)[..., None]
    below = np.cumsum(h, axis=-1) - h
    inside = np.take_along_axis(h, whole, -1)[..., 0] * (pos - whole[..., 0])
    return np.take_along_axis(below, whole, -1)[..., 0] + inside


def pairs(times: np.ndarray, max_lag: float) -> tuple[np.ndarray, np.ndarray]:
    """(parent, child) indices of the ordered pairs of sorted `times` with child after
    parent (by index) and t_child − t_parent ≤ L."""
    lag = times[None, :] - times[:, None]
    parent, child = np.nonzero(np.triu(lag <= max_lag, k=1))
    return parent, child


@dataclass
class Hawkes:
    """A fitted multivariate Hawkes process with histogram kernels (module docstring)."""

    mu: np.ndarray
    """(C,) background rates per second."""
    alpha: np.ndarray
    """(C, C) expected children of class b per arrival of class a."""
    h: np.ndarray
    """(C, C, B) lag mass per bin (sums to 1 over bins)."""
    width: float
    """Seconds per lag bin."""

    @property
    def max_lag(self) -> float:
        return self.width * self.h.shape[-1]

    def intensity(self, times: np.ndarray, classes: np.ndarray, j: int) -> float:
        """λ_{c_j}(t_j) given the arrivals before j (by index)."""
        t, c = times[j], classes[j]
        lo = int(np.searchsorted(times, t - self.max_lag, side="left"))
        lags = t - times[lo:j]
        bins = np.minimum((lags / self.width).astype(int), self.h.shape[-1] - 1)
        parents = classes[lo:j]
        excite = self.alpha[parents, c] * self.h[parents, c, bins] / self.width
        return float(self.mu[c] + excite[lags <= self.max_lag].sum())

    def mass(self, times: np.ndarray, classes: np.ndarray, start: float, end: float) -> float:
        """∫ Σ_c λ_c over (start, end], the arrivals at or before `end` as parents."""
        total = float(self.mu.sum()) * (end - start)
        keep = (times <= end) & (times > start - self.max_lag)
        for t, a in zip(times[keep], classes[keep], strict=True):
            grown = kernel_cdf(self.h[a], self.width, end - t)
            before = kernel_cdf(self.h[a], self.width, max(start - t, 0.0))
            total += float((self.alpha[a] * (grown - before)).sum())
        return total


def fit_hawkes(
    times: np.ndarray, classes: np.ndarray, n_classes: int, span: float, cfg: FuturesConfig
) -> Hawkes:
    """EM fit of `Hawkes` to sorted `times` with `classes` over an exposure of `span` s."""
    c, b = n_classes, cfg.lag_bins
    width = cfg.max_lag / b
    parent, child = pairs(times, cfg.max_lag)
    lag_bin = np.minimum(((times[child] - times[parent]) / width).astype(int), b - 1)
    pc, cc = classes[parent], classes[child]
    counts = np.bincount(classes, minlength=c).astype(float)
    model = Hawkes(
        counts / max(span, 1e-9) / 2, np.full((c, c), 0.1), np.full((c, c, b), 1.0 / b), width
    )
    end = times[-1] if len(times) else 0.0
    for _ in range(cfg.iterations):
        excite = model.alpha[pc, cc] * model.h[pc, cc, lag_bin] / width
        total = model.mu[classes].copy()
        np.add.at(total, child, excite)
        resp = excite / total[child]
        background = model.mu[classes] / total
        model.mu = np.bincount(classes, background, minlength=c) / max(span, 1e-9)
        # a parent near the end has had only H(end − t) of its children's time yet
        seen = kernel_cdf(model.h[classes], width, (end - times)[:, None])
        exposure = np.zeros((c, c))
        np.add.at(exposure, classes, seen)
        kids = np.zeros((c, c))
        np.add.at(kids, (pc, cc), resp)
        model.alpha = kids / np.maximum(exposure, 1e-9)
        hist = np.full((c, c, b), 0.01)
        np.add.at(hist, (pc, cc, lag_bin), resp)
        model.h = hist / hist.sum(axis=-1, keepdims=True)
    return model


def sample_lags(
    h: np.ndarray, width: float, elapsed: float, n: int, rng: np.random.Generator
) -> np.ndarray:
    """`n` lags from the histogram density h, given that they exceed `elapsed`."""
    edges = np.arange(len(h) + 1) * width
    weight = h * np.clip((edges[1:] - elapsed) / width, 0.0, 1.0)
    if n == 0 or weight.sum() <= 0:
        return np.empty(0)
    bins = rng.choice(len(h), size=n, p=weight / weight.sum())
    low = np.maximum(edges[bins], elapsed)
    return low + rng.random(n) * (edges[bins + 1] - low)


# -- the model ----------------------------------------------------------------------------


_FLOOR = 0.02
"""Share of a type's plain Poisson rate kept as its least intensity: one arrival no
model explains costs a bounded score, not −∞."""


@dataclass
class ConditionalModel:
    """The conditional arrival model (module docstring): `fit`, `sample`, `log_likelihood`."""

    config: FuturesConfig = field(default_factory=FuturesConfig)
    breaks: list[float] = field(default_factory=list)
    schedules: dict[str, DetectedSchedule] = field(default_factory=dict)
    hawkes: Hawkes | None = None
    rates: dict[Any, float] = field(default_factory=dict)
    """Plain Poisson rate of each type (size class or scheduled stem) over the fit."""
    templates: dict[Any, list[Any]] = field(default_factory=dict)
    """Recent jobs of each type, copied by sampled arrivals."""
    seen: list[Arrival] = field(default_factory=list)
    """The arrivals fitted on."""

    def type_of(self, a: Arrival) -> Any:
        """A scheduled stem's name, else the size class's index."""
        return a.stem if a.stem in self.schedules else size_class(a.work, self.breaks)

    def fit(self, arrivals: Sequence[Arrival], end: float | None = None) -> ConditionalModel:
        """Fit on the last `history` of `arrivals` (sorted by time), observed up to `end`."""
        cfg = self.config
        seen = list(arrivals)[-cfg.history :]
        if len(seen) < 2:
            raise IdlegateError(
                f"the future model needs at least 2 arrivals to fit, got {len(seen)}: "
                "fit it once some jobs arrived"
            )
        self.seen = seen
        end = seen[-1].time if end is None else end
        span = max(end - seen[0].time, 1e-6)
        by_stem: dict[str, list[float]] = {}
        for a in seen:
            by_stem.setdefault(a.stem, []).append(a.time)
        self.schedules = {
            s: sch
            for s, times in by_stem.items()
            if (sch := detect_schedule(times, cfg.schedule_runs, cfg.schedule_cv)) is not None
        }
        free = [a for a in seen if a.stem not in self.schedules]
        self.breaks = size_breaks([a.work for a in free], cfg.size_classes, cfg.class_ratio)
        self.templates = {}
        for a in seen:
            self.templates.setdefault(self.type_of(a), []).append(a.job)
        counts = {t: len(js) for t, js in self.templates.items()}
        self.rates = {t: n / span for t, n in counts.items()}
        self.hawkes = None
        if free:
            times, classes = self._free_arrays(free)
            self.hawkes = fit_hawkes(times, classes, len(self.breaks) + 1, span, cfg)
            floor = _FLOOR * np.bincount(classes, minlength=len(self.breaks) + 1) / span
            self.hawkes.mu = np.maximum(self.hawkes.mu, floor)
        return self

    def _free_arrays(self, arrivals: Sequence[Arrival]) -> tuple[np.ndarray, np.ndarray]:
        free = [a for a in arrivals if a.stem not in self.schedules]
        times = np.fromiter((a.time for a in free), float, len(free))
        classes = np.fromiter((size_class(a.work, self.breaks) for a in free), int, len(free))
        return times, classes

    # -- scoring ----------------------------------------------------------------------

    def log_likelihood(self, arrivals: Sequence[Arrival], start: float, end: float) -> float:
        """log p of the arrivals in (start, end] of `arrivals` (all of them, sorted, the
        earlier ones as history) under the fitted model."""
        free_t, free_c = self._free_arrays(arrivals)
        total = 0.0
        if self.hawkes is not None:
            total -= self.hawkes.mass(free_t, free_c, start, end)
            for j in np.nonzero((free_t > start) & (free_t <= end))[0]:
                total += log(max(self.hawkes.intensity(free_t, free_c, int(j)), 1e-12))
        for s, sch in self.schedules.items():
            runs = [a.time for a in arrivals if a.stem == s]
            total += self._schedule_score(sch, runs, s, start, end)
        return total

    def _schedule_score(
        self, sch: DetectedSchedule, runs: list[float], s: str, start: float, end: float
    ) -> float:
        """log p of a scheduled stem's runs in (start, end]: a mixture of the schedule
        and `_FLOOR` of its plain rate."""
        floor = _FLOOR * self.rates.get(s, 0.0)
        total, t0 = -floor * (end - start), start
        before = [r for r in runs if r <= start]
        last = before[-1] if before else None
        for r in [r for r in runs if start < r <= end] + [None]:
            t1 = end if r is None else r
            if last is not None:
                total -= (1 - _FLOOR) * schedule_mass(sch, last, t0, t1)
            if r is not None:
                dens = 0.0 if last is None else schedule_density(sch, last, r)
                total += log(max((1 - _FLOOR) * dens + floor, 1e-12))
                last, t0 = r, r
        return total

    def poisson_log_likelihood(
        self, arrivals: Sequence[Arrival], start: float, end: float
    ) -> float:
        """The same score under plain Poisson rates per type (the alternative)."""
        total = -sum(self.rates.values()) * (end - start)
        for a in arrivals:
            if start < a.time <= end:
                total += log(max(self.rates.get(self.type_of(a), 0.0), 1e-12))
        return total

    # -- sampling ---------------------------------------------------------------------

    def sample(
        self, now: float, horizon: float, rng: np.random.Generator
    ) -> list[tuple[float, Any]]:
        """One future over (now, now + horizon]: (time, job to copy), sorted by time."""
        return self._draw(now, horizon, rng, lambda kind: self._template(kind, rng))

    def _draw(
        self,
        now: float,
        horizon: float,
        rng: np.random.Generator,
        label: Callable[[Any], Any],
    ) -> list[tuple[float, Any]]:
        """One future: (time, `label` of its type), sorted; `label` is called in drawing
        order (it may draw from `rng` too)."""
        end = now + horizon
        out: list[tuple[float, Any]] = []
        if self.hawkes is not None:
            out += [(t, label(c)) for t, c in self._sample_hawkes(now, end, rng)]
        for s, sch in self.schedules.items():
            last = max(a.time for a in self.seen if a.stem == s)
            k = 1
            while last + k * sch.period - 3 * sch.spread <= end:
                t = last + k * sch.period + float(rng.normal(0.0, sch.spread))
                if t <= now:  # overdue: it comes soon
                    t = now + float(rng.exponential(sch.spread))
                if t <= end:
                    out.append((t, label(s)))
                k += 1
        out.sort(key=lambda x: x[0])
        return out

    def expected(
        self, now: float, horizon: float, draws: int, rng: np.random.Generator
    ) -> list[tuple[float, Any]]:
        """The expected future over (now, now + horizon]: (time, job to copy), sorted.

        Of each type, round(n̄) arrivals, n̄ its mean count over `draws` sampled futures;
        the k-th at the time where the mean count of that type passes k − 1/2 (a median
        time), each a copy of the type's latest job. One deterministic future instead of
        a few noisy ones: a planner compares its candidates without sampling noise.
        """
        times: dict[Any, list[float]] = {}
        for _ in range(draws):
            for t, kind in self._draw(now, horizon, rng, lambda kind: kind):
                times.setdefault(kind, []).append(t)
        out: list[tuple[float, Any]] = []
        for kind, ts in times.items():
            ts.sort()
            template = (self.templates.get(kind) or [a.job for a in self.seen])[-1]
            for k in range(1, int(len(ts) / draws + 0.5) + 1):
                out.append((ts[min(int((k - 0.5) * draws), len(ts) - 1)], template))
        out.sort(key=lambda x: x[0])
        return out

    def _sample_hawkes(
        self, now: float, end: float, rng: np.random.Generator
    ) -> list[tuple[float, int]]:
        hk = self.hawkes
        if hk is None:
            return []
        new: list[tuple[float, int]] = []
        for c, mu in enumerate(hk.mu):
            for t in now + rng.random(rng.poisson(mu * (end - now))) * (end - now):
                new.append((float(t), c))
        times, classes = self._free_arrays(self.seen)
        recent = times > now - hk.max_lag
        parents = list(zip(times[recent].tolist(), classes[recent].tolist(), strict=True))
        queue = [(t, c, now - t) for t, c in parents] + [(t, c, 0.0) for t, c in new]
        cap = 20 * (len(queue) + 10)
        while queue and len(new) < cap:
            t, a, elapsed = queue.pop()
            # H may pass 1 by a rounding error: a negative Poisson mean is an error
            left = np.maximum(1.0 - kernel_cdf(hk.h[a], hk.width, elapsed), 0.0)
            for b in range(len(hk.mu)):
                n = int(rng.poisson(hk.alpha[a, b] * left[b]))
                for lag in sample_lags(hk.h[a, b], hk.width, elapsed, n, rng):
                    if t + lag <= end and t + lag > now:
                        new.append((t + float(lag), b))
                        queue.append((t + float(lag), b, 0.0))
        return new

    def _template(self, kind: Any, rng: np.random.Generator) -> Any:
        jobs = self.templates.get(kind) or [a.job for a in self.seen]
        return jobs[int(rng.integers(len(jobs)))]
