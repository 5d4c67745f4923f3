"""Evaluation of learned policies against the baselines (``idlegate evaluate``).

For every workload of a *suite*, every scheduler — the models given as ``LABEL=PATH.onnx``
or ``LABEL=SPEC`` (any scheduler spec, e.g. ``lookahead=lookahead:srpt``), the analytic
idle rule on fair and on SJF-CP, fair, weighted fair, SJF-CP, SRPT, SJF and FIFO — runs on
the *same* arrival sequences (one per seed, common random
numbers; :func:`idlegate.compare.run_comparison` does the running and the paired
statistics). Results are mean ± 95 % CI over seeds; relative changes are paired per seed.

Seeds. Evaluation seeds start at :data:`DEFAULT_FIRST_SEED` (1000). An evaluation is
only honest on arrival sequences the policy never trained on: the seeds given here must
never be training or validation seeds of the evaluated models. The validation seeds of
the training presets are 1,000,000 and up, so they do not meet these. The training loop
(`idlegate.training.reinforce`) draws its arrival seeds uniformly from [0, 2³¹ − 1)
minus the validation seeds; a clash with a given evaluation seed is unlikely (about
iterations / 2³¹) but not excluded until training also forbids
:data:`EVALUATION_SEED_RANGE`.

Workloads (:func:`suite_cases`), full suite:

* ``synthetic-0.6``, ``synthetic-0.8`` — the two-type synthetic set (one-stage jobs of
  10 s or 50 s work, 4 executors, 1 + 99 jobs) at offered load 0.6 and 0.8;
* ``tpch-15s``, ``tpch-25s`` — Decima's streaming TPC-H, 50 executors, 1 + 200 jobs,
  mean interarrival 15 s and 25 s (skipped, with the reason in the report, when the
  traces are not found: pass ``--tpch-dir`` or set ``IDLEGATE_TPCH_DIR``);
* ``tpch-like-0.85`` — generated TPC-H-like DAGs in the setting of ``idlegate demo``:
  50 executors, 1 + 100 jobs, offered load 0.85;
* ``bursty-0.7`` — sessions of short jobs mixed with long jobs, the workload's defaults
  (4 executors, 1 + 99 jobs, offered load 0.7);
* ``mixed-0.5`` — one stream, half synthetic two-type jobs, half TPC-H jobs (TPC-H-like
  generated DAGs when the traces are absent; the report says which), 50 executors,
  1 + 200 jobs, mean interarrival 25 s.

Headlines (:data:`HEADLINES`), paired per seed: ``learned`` against the best baseline of
each workload, ``lookahead`` against ``lookahead-base``, ``learned`` against
``learned-no-idle``, and ``learned-no-cp`` against ``learned``; each is computed where
both labels were given. The report also counts where idle slots fired.

The quick suite runs the same workloads with fewer jobs (for tests and a 1–2 minute run).

Outputs in ``--out`` (:func:`write_evaluation`): per workload ``<key>/compare.json``,
``<key>/compare.md`` and ``<key>/jct_cdf.png`` (compare's formats);
``evaluation.json`` and ``evaluation.md`` (all workloads, the headline deltas, the
models); ``idle_sweep.png`` (the idle-slot papers' Fig. 6: idle inserted by the learned
policy against the arrival rate and against the long-job length, :func:`run_idle_sweep`);
``training_curve.png`` when a training log is given (:func:`read_training_log`).

Runs are independent pure functions of (workload, scheduler, seed); with ``jobs > 1``
they are spread over processes, and the results do not depend on ``jobs``.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from idlegate import __version__
from idlegate.compare import (
    CompareConfig,
    Comparison,
    SchedulerResult,
    WorkloadOptions,
    _mp_context,
    check_out_dir,
    markdown_table,
    plot_jct_cdf,
    render_comparison_table,
    run_comparison,
    split_entry,
    stderr_progress,
    write_file,
    write_json,
    write_markdown,
    write_text,
)
from idlegate.errors import IdlegateError
from idlegate.policy import SCHEDULERS, SPEC_PREFIXES, make_scheduler
from idlegate.sim.engine import simulate
from idlegate.sim.metrics import Estimate, mean_ci, paired_relative_change
from idlegate.sim.tpch import resolve_tpch_dir
from idlegate.sim.workloads import build_workload, mean_job_work, workload_config

if TYPE_CHECKING:
    from rich.table import Table

__all__ = [
    "BASELINES",
    "DEFAULT_FIRST_SEED",
    "DEMO_EXECUTORS",
    "DEMO_LOAD",
    "DEMO_STREAMED_JOBS",
    "DEMO_WORKLOAD",
    "EVALUATION_SEED_RANGE",
    "HEADLINES",
    "SUITES",
    "CaseResult",
    "EvaluateConfig",
    "Evaluation",
    "Headline",
    "HeadlineValue",
    "IdleUse",
    "ModelSpec",
    "SweepConfig",
    "SweepPoint",
    "SweepResult",
    "TrainingCurve",
    "WorkloadCase",
    "as_spec",
    "best_baseline",
    "compute_headlines",
    "parse_list",
    "parse_models",
    "plot_idle_sweep",
    "plot_training_curve",
    "read_training_log",
    "run_cli",
    "run_evaluation",
    "run_idle_sweep",
    "suite_cases",
    "sweep_config",
    "to_markdown",
    "write_evaluation",
]

DEFAULT_FIRST_SEED: Final = 1000
"""First evaluation seed; seeds run first_seed, first_seed + 1, …"""

EVALUATION_SEED_RANGE: Final = range(1000, 100_000)
"""Seeds reserved for evaluation: training should never draw an arrival seed from here."""

SUITES: Final = ("quick", "full")
DEFAULT_SEEDS: Final = {"quick": 3, "full": 10}
"""Seeds per suite unless --seeds says otherwise."""

BASELINES: Final[tuple[tuple[str, str], ...]] = (
    ("analytic-fair", "analytic:fair"),
    ("analytic-sjf-cp", "analytic:sjf-cp"),
    ("fair", "fair"),
    ("weighted-fair", "weighted-fair"),
    ("sjf-cp", "sjf-cp"),
    ("srpt", "srpt"),
    ("sjf", "sjf"),
    ("fifo", "fifo"),
)
"""(label, scheduler spec) of the baselines every model is compared with. All of them,
the analytic idle rule included, are candidates for "the best heuristic" of a workload."""

DEMO_WORKLOAD: Final = "tpch-like"
DEMO_EXECUTORS: Final = 50
DEMO_STREAMED_JOBS: Final = 100
DEMO_LOAD: Final = 0.85
"""The setting of `idlegate demo` (1 + 100 streamed TPC-H-like jobs on 50 executors at
offered load 0.85), which the suite's ``tpch-like`` case measures too."""

SWEEP_REFERENCE: Final = ("analytic-sjf-cp", "analytic:sjf-cp")
"""The interpretable idle rule drawn next to the learned policies in the Fig. 6 sweep."""

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")

ProgressFn = Callable[[int, int, str], None]
"""Called as ``progress(done, total, what)`` after each finished run."""


# ---------------------------------------------------------------------------------------
# Configuration


def as_spec(value: str | Path) -> str:
    """A ``--models`` value as a scheduler spec: a spec stays itself, a file path becomes
    ``learned:PATH``.

    A spec is a registered name ("srpt") or ``KIND:ARGUMENT`` with a kind of
    :data:`~idlegate.policy.SPEC_PREFIXES` ("lookahead:srpt", "learned:policy/default.onnx");
    anything else (and every Path) is the path of an exported ONNX policy.
    """
    if isinstance(value, Path):
        return f"learned:{value}"
    text = value.strip()
    kind, sep, _ = text.partition(":")
    if (sep and kind.strip().lower() in SPEC_PREFIXES) or text.lower() in SCHEDULERS:
        return text
    return f"learned:{text}"


@dataclass(frozen=True)
class ModelSpec:
    """A scheduler to evaluate next to the baselines: its row label and its spec.

    `spec` is anything :func:`as_spec` takes: a scheduler spec (``lookahead:srpt``,
    ``learned:policy/default.onnx``) or an ONNX file's path (str or Path), stored as the
    spec ``learned:PATH``.
    """

    label: str
    spec: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec", as_spec(self.spec))

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """``LABEL=SPEC`` or ``LABEL=PATH.onnx`` → ModelSpec (IdlegateError on bad syntax;
        nothing is loaded)."""
        label, sep, spec = text.partition("=")
        label, spec = label.strip(), spec.strip()
        if not sep or not label or not spec:
            raise IdlegateError(
                f"--models {text!r}: write LABEL=PATH.onnx or LABEL=SPEC, e.g. "
                "learned=out/train/policy.onnx or lookahead=lookahead:srpt"
            )
        if not _LABEL.match(label):
            raise IdlegateError(
                f"model label {label!r}: use letters, digits and . _ + - "
                "(e.g. learned, learned-no-idle)"
            )
        return cls(label, spec)

    @property
    def path(self) -> Path | None:
        """The ONNX file of a ``learned:PATH`` spec (None for any other spec)."""
        kind, _, argument = self.spec.partition(":")
        return Path(argument.strip()).expanduser() if kind == "learned" else None

    @property
    def entry(self) -> str:
        """The compare entry ``LABEL=SPEC``."""
        return f"{self.label}={self.spec}"

    def check(self) -> dict[str, str]:
        """Build the scheduler once (IdlegateError if it cannot be); its ONNX metadata, if any."""
        path = self.path
        if path is not None and not path.is_file():
            raise IdlegateError(
                f"model {self.label!r}: file {str(path.resolve())!r} does not exist; "
                "give the path of an exported policy (idlegate export-onnx) or a scheduler "
                f"spec: a name ({', '.join(SCHEDULERS)}) or "
                + ", ".join(f"{p}:…" for p in SPEC_PREFIXES)
            )
        try:
            policy = make_scheduler(self.spec)
        except IdlegateError as exc:
            raise IdlegateError(f"model {self.label!r} ({self.spec}): {exc}") from None
        return dict(getattr(policy, "metadata", {}))


def parse_list(values: str | Sequence[str]) -> tuple[str, ...]:
    """Comma-separated and/or repeated option values as one tuple of non-empty items."""
    items = [values] if isinstance(values, str) else list(values)
    return tuple(x.strip() for v in items for x in v.split(",") if x.strip())


def parse_models(values: str | Sequence[str]) -> tuple[ModelSpec, ...]:
    """``--models`` values (repeatable, comma-separated) as ModelSpecs."""
    items = parse_list(values)
    if not items:
        raise IdlegateError("no model given; pass --models LABEL=PATH.onnx or LABEL=SPEC")
    return tuple(ModelSpec.parse(x) for x in items)


@dataclass(frozen=True)
class WorkloadCase:
    """One workload of a suite: a `build_workload` name and options, and how to call it."""

    key: str
    """Short, file-name safe identity (the report's sub-directory), e.g. "tpch-15s"."""
    title: str
    family: str
    """"synthetic", "tpch", "tpch-like", "bursty" or "mixed" (selects the headline targets)."""
    workload: str
    options: WorkloadOptions
    skip_reason: str | None = None
    """Why this case cannot run here (e.g. no TPC-H traces); None: it runs."""


@dataclass(frozen=True)
class SweepConfig:
    """The Fig. 6 sweep: the synthetic workload over arrival rates and long-job lengths."""

    loads: tuple[float, ...]
    """Offered loads; each is plotted at its arrival rate (jobs/s)."""
    long_seconds: tuple[float, ...]
    """Work of a long job (executor-s); swept at offered load `long_load`."""
    long_load: float = 0.8
    """Offered load held fixed while long_seconds varies (the arrival rate follows)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Other synthetic options (num_stream, num_executors, …)."""


@dataclass(frozen=True)
class EvaluateConfig:
    """What `idlegate evaluate` runs."""

    models: tuple[ModelSpec, ...]
    suite: str = "quick"
    seeds: int | None = None
    """Number of seeds (None: the suite's default, 3 quick / 10 full)."""
    first_seed: int = DEFAULT_FIRST_SEED
    jobs: int = 1
    tpch_dir: Path | None = None
    workloads: tuple[str, ...] | None = None
    """Case keys or families to run (None: the whole suite)."""
    training_log: Path | None = None
    sweep: bool = True
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not self.models:
            raise IdlegateError("no model to evaluate; pass --models LABEL=PATH.onnx or LABEL=SPEC")
        labels = [m.label for m in self.models]
        taken = {b for b, _ in BASELINES} | {SWEEP_REFERENCE[0]}
        for label in labels:
            if labels.count(label) > 1:
                raise IdlegateError(f"model label {label!r} given twice")
            if label in taken:
                raise IdlegateError(f"model label {label!r} is a baseline's name; choose another")
        if self.suite not in SUITES:
            raise IdlegateError(f"unknown suite {self.suite!r}; choose one of: {', '.join(SUITES)}")
        if self.seeds is not None and (not isinstance(self.seeds, int) or self.seeds < 1):
            raise IdlegateError(f"--seeds must be at least 1, got {self.seeds!r}")
        if not isinstance(self.first_seed, int) or self.first_seed < 0:
            raise IdlegateError(f"--first-seed must be a whole number >= 0, got {self.first_seed}")
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 1:
            raise IdlegateError(f"--jobs must be a whole number >= 1, got {self.jobs!r}")
        if self.training_log is not None and not Path(self.training_log).is_file():
            raise IdlegateError(f"training log {str(self.training_log)!r} does not exist")
        if not 0 < self.confidence < 1:
            raise IdlegateError(f"confidence must be between 0 and 1, got {self.confidence}")

    @property
    def seed_list(self) -> tuple[int, ...]:
        """The evaluation seeds, first_seed upwards."""
        n = self.seeds if self.seeds is not None else DEFAULT_SEEDS[self.suite]
        return tuple(range(self.first_seed, self.first_seed + n))

    def entries(self) -> tuple[str, ...]:
        """The compared schedulers as compare entries: the models, then the baselines."""
        return (*(m.entry for m in self.models), *(f"{b}={s}" for b, s in BASELINES))

    def command_line(self) -> str:
        """The `idlegate evaluate` command that reproduces this evaluation."""
        parts = ["idlegate", "evaluate", "--suite", self.suite]
        for m in self.models:
            parts += ["--models", m.entry]
        parts += ["--seeds", str(len(self.seed_list)), "--first-seed", str(self.first_seed)]
        if self.tpch_dir is not None:
            parts += ["--tpch-dir", str(self.tpch_dir)]
        if self.workloads is not None:
            parts += ["--workloads", ",".join(self.workloads)]
        if self.training_log is not None:
            parts += ["--training-log", str(self.training_log)]
        if not self.sweep:
            parts.append("--no-sweep")
        return shlex.join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (no wall-clock data, no --jobs: results do not depend on it)."""
        return {
            "suite": self.suite,
            "models": {m.label: m.spec for m in self.models},
            "baselines": dict(BASELINES),
            "seeds": list(self.seed_list),
            "tpch_dir": None if self.tpch_dir is None else str(self.tpch_dir),
            "workloads": None if self.workloads is None else list(self.workloads),
            "training_log": None if self.training_log is None else str(self.training_log),
            "sweep": self.sweep,
            "confidence": self.confidence,
            "command": self.command_line(),
        }


# ---------------------------------------------------------------------------------------
# Suites


def _tpch_available(tpch_dir: Path | None) -> str | None:
    """None if the TPC-H traces are found, else why not (a sentence)."""
    try:
        path = resolve_tpch_dir(tpch_dir)
    except IdlegateError as exc:
        return f"skipped: {exc}"
    if not any(path.glob("*/q*.json")):
        return f"skipped: no TPC-H traces (<size>/q<N>.json) under {path}"
    return None


def suite_cases(suite: str, tpch_dir: Path | None = None) -> tuple[WorkloadCase, ...]:
    """The workloads of `suite` ("quick" or "full"); TPC-H cases carry a skip reason if needed."""
    if suite not in SUITES:
        raise IdlegateError(f"unknown suite {suite!r}; choose one of: {', '.join(SUITES)}")
    quick = suite == "quick"
    synthetic_stream = 49 if quick else 99
    dag_stream = 40 if quick else 200
    missing = _tpch_available(tpch_dir)
    cases = [
        WorkloadCase(
            f"synthetic-{load}",
            f"synthetic two-type, load {load} (4 executors, 1 + {synthetic_stream} jobs)",
            "synthetic",
            "synthetic",
            WorkloadOptions(load=load, extra={"init": 1, "num_stream": synthetic_stream}),
        )
        for load in (0.6, 0.8)
    ]
    cases += [
        WorkloadCase(
            f"tpch-{ia}s",
            f"TPC-H streaming, interarrival {ia} s (50 executors, 1 + {dag_stream} jobs)",
            "tpch",
            "tpch",
            WorkloadOptions(
                num_executors=50,
                interarrival=float(ia),
                tpch_dir=tpch_dir,
                extra={"init": 1, "num_stream": dag_stream},
            ),
            skip_reason=missing,
        )
        for ia in (15, 25)
    ]
    demo_stream = 40 if quick else DEMO_STREAMED_JOBS
    cases.append(
        WorkloadCase(
            f"tpch-like-{DEMO_LOAD}",
            f"TPC-H-like DAGs, load {DEMO_LOAD}, the demo's setting ({DEMO_EXECUTORS} "
            f"executors, 1 + {demo_stream} jobs)",
            "tpch-like",
            DEMO_WORKLOAD,
            WorkloadOptions(
                num_executors=DEMO_EXECUTORS,
                load=DEMO_LOAD,
                extra={"init": 1, "num_stream": demo_stream},
            ),
        )
    )
    bursty = workload_config("bursty")
    bursty_stream = 49 if quick else bursty.num_stream
    cases.append(
        WorkloadCase(
            f"bursty-{bursty.DEFAULT_LOAD}",
            f"bursty: sessions of short jobs + long jobs, load {bursty.DEFAULT_LOAD} "
            f"({bursty.num_executors} executors, {bursty.init} + {bursty_stream} jobs)",
            "bursty",
            "bursty",
            WorkloadOptions(extra={"num_stream": bursty_stream}),
        )
    )
    dags = "tpch-like" if missing else "tpch"
    source = "TPC-H-like generated DAGs (no TPC-H traces)" if missing else "TPC-H"
    cases.append(
        WorkloadCase(
            "mixed-0.5",
            f"mixed α = 0.5: two-type + {source} (50 executors, 1 + {dag_stream} jobs, 25 s)",
            "mixed",
            "mixed",
            WorkloadOptions(
                num_executors=50,
                interarrival=25.0,
                alpha=0.5,
                tpch_dir=None if missing else tpch_dir,
                extra={"init": 1, "num_stream": dag_stream, "dags": dags},
            ),
        )
    )
    return tuple(cases)


def select_cases(
    cases: Sequence[WorkloadCase], wanted: Sequence[str] | None
) -> tuple[WorkloadCase, ...]:
    """The cases whose key or family is in `wanted` (all if None); IdlegateError if unknown."""
    if wanted is None:
        return tuple(cases)
    known = {c.key for c in cases} | {c.family for c in cases}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        choices = ", ".join([*(c.key for c in cases), *sorted({c.family for c in cases})])
        raise IdlegateError(f"unknown workload {unknown[0]!r}; choose from: {choices}")
    return tuple(c for c in cases if c.key in wanted or c.family in wanted)


def sweep_config(suite: str) -> SweepConfig:
    """The Fig. 6 sweep of `suite`."""
    if suite == "quick":
        return SweepConfig(
            loads=(0.4, 0.6, 0.8), long_seconds=(30.0, 50.0, 90.0), options={"num_stream": 49}
        )
    return SweepConfig(
        loads=(0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
        long_seconds=(20.0, 30.0, 50.0, 70.0, 100.0, 150.0),
        options={"num_stream": 99},
    )


# ---------------------------------------------------------------------------------------
# Headline deltas


@dataclass(frozen=True)
class Headline:
    """A paired relative change of the average JCT: subject / reference − 1, per seed."""

    key: str
    title: str
    subject: str
    reference: str | None
    """The reference label; None: the best baseline of the workload (:func:`best_baseline`)."""
    targets: Mapping[str, float]
    """Target per workload family; ``"*"`` stands for every family not named."""
    at_most: bool = True
    """True: the change must be at most the target (−0.05: at least 5 % lower); False: at
    least the target (+0.05: removing something must cost at least 5 %)."""

    def target(self, family: str) -> float | None:
        """The family's target (None: none)."""
        return self.targets.get(family, self.targets.get("*"))

    def met(self, family: str, est: Estimate) -> bool | None:
        """Whether the mean reaches the family's target (None: no target or no estimate)."""
        target = self.target(family)
        if target is None or not math.isfinite(est.mean):
            return None
        return est.mean <= target if self.at_most else est.mean >= target


HEADLINES: Final[tuple[Headline, ...]] = (
    Headline(
        "learned_vs_best",
        "learned vs best heuristic",
        "learned",
        None,
        {"tpch": -0.05, "tpch-like": -0.05, "*": 0.0},
    ),
    Headline(
        "lookahead_vs_base",
        "lookahead vs its base",
        "lookahead",
        "lookahead-base",
        {"tpch": -0.10, "tpch-like": -0.10},
    ),
    Headline(
        "idle_vs_no_idle",
        "with idle vs without idle",
        "learned",
        "learned-no-idle",
        {"bursty": -0.05, "*": 0.01},
    ),
    Headline(
        "no_cp_vs_full",
        "without CP/width features vs full",
        "learned-no-cp",
        "learned",
        {"synthetic": 0.05, "tpch": 0.05, "mixed": 0.05},
        at_most=False,
    ),
)
"""Issue 9's targets: the learned policy no worse than the best heuristic anywhere and
≥ 5 % better on TPC-H and tpch-like; the lookahead planner ≥ 10 % better than its base
(name the two ``lookahead`` and ``lookahead-base`` with --models) on TPC-H and tpch-like;
the idle head ≥ 5 % better on bursty and nowhere more than 1 % worse; and (kept from the
idle-slot papers' ablation) removing the CP/width features costs ≥ 5 %."""


@dataclass(frozen=True)
class HeadlineValue:
    """One headline on one workload: the paired change and the label it is relative to."""

    estimate: Estimate
    reference: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the estimate's fields and ``reference``."""
        return {**self.estimate.to_dict(), "reference": self.reference}


def best_baseline(avg_jct: Mapping[str, Sequence[float]], baselines: Sequence[str]) -> str | None:
    """The label among `baselines` (those present) with the lowest mean average JCT."""
    present = [b for b in baselines if b in avg_jct and len(avg_jct[b])]
    if not present:
        return None
    return min(present, key=lambda b: float(np.mean(avg_jct[b])))


def compute_headlines(
    avg_jct: Mapping[str, Sequence[float]],
    confidence: float = 0.95,
    baselines: Sequence[str] | None = None,
) -> dict[str, HeadlineValue]:
    """The headline deltas from per-seed average JCTs by label (same seed order for all).

    A headline without a fixed reference is taken against :func:`best_baseline` among
    `baselines` (default: the labels of :data:`BASELINES`). Only headlines whose two
    labels are both present are returned.
    """
    candidates = [b for b, _ in BASELINES] if baselines is None else list(baselines)
    out = {}
    for h in HEADLINES:
        reference = h.reference or best_baseline(avg_jct, candidates)
        if h.subject in avg_jct and reference is not None and reference in avg_jct:
            est = paired_relative_change(avg_jct[h.subject], avg_jct[reference], confidence)
            out[h.key] = HeadlineValue(est, reference)
    return out


# ---------------------------------------------------------------------------------------
# The Fig. 6 sweep


@dataclass(frozen=True)
class SweepPoint:
    """One scheduler at one swept value: idle statistics, mean ± CI over seeds."""

    scheduler: str
    parameter: str
    """"rate" or "long_seconds"."""
    value: float
    """Arrival rate (jobs/s) or long-job work (executor-s)."""
    load: float
    idle_per_long_job: Estimate
    idle_per_short_job: Estimate
    idle_per_decision: Estimate
    delayed_long_fraction: Estimate
    avg_jct: Estimate

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        stats = ("idle_per_long_job", "idle_per_short_job", "idle_per_decision")
        return {
            "scheduler": self.scheduler,
            "parameter": self.parameter,
            "value": self.value,
            "load": self.load,
            **{k: getattr(self, k).to_dict() for k in stats},
            "delayed_long_fraction": self.delayed_long_fraction.to_dict(),
            "avg_jct": self.avg_jct.to_dict(),
        }


@dataclass(frozen=True)
class SweepResult:
    """The sweep's points, by scheduler then parameter then value."""

    config: SweepConfig
    points: tuple[SweepPoint, ...]

    def series(self, scheduler: str, parameter: str) -> list[SweepPoint]:
        """The points of one line of the plot, by value."""
        pts = [p for p in self.points if p.scheduler == scheduler and p.parameter == parameter]
        return sorted(pts, key=lambda p: p.value)

    @property
    def schedulers(self) -> list[str]:
        """Scheduler labels in first-seen order."""
        return list(dict.fromkeys(p.scheduler for p in self.points))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        c = self.config
        return {
            "loads": list(c.loads),
            "long_seconds": list(c.long_seconds),
            "long_load": c.long_load,
            "options": dict(c.options),
            "points": [p.to_dict() for p in self.points],
        }


@dataclass(frozen=True)
class _SweepTask:
    entry: str
    parameter: str
    value: float
    load: float
    options: tuple[tuple[str, Any], ...]
    seed: int


def _sweep_run(task: _SweepTask) -> tuple[float, float, float, float, float]:
    """(idle per long job, per short job, per decision, delayed long fraction, avg JCT)."""
    spec = split_entry(task.entry)[1]
    workload = build_workload("synthetic", task.seed, **dict(task.options))
    result = simulate(workload, make_scheduler(spec), seed=task.seed)
    recs = result.records
    long_idle = [r.idle_inserted for r in recs if r.name.startswith("long")]
    short_idle = [r.idle_inserted for r in recs if not r.name.startswith("long")]
    total = float(sum(r.idle_inserted for r in recs))
    return (
        float(np.mean(long_idle)) if long_idle else math.nan,
        float(np.mean(short_idle)) if short_idle else math.nan,
        total / result.decisions if result.decisions else math.nan,
        float(np.mean([x > 0 for x in long_idle])) if long_idle else math.nan,
        float(np.mean([r.jct for r in recs])) if recs else math.nan,
    )


def _arrival_rate(options: Mapping[str, Any]) -> float:
    """Jobs per second of the synthetic workload with `options`."""
    cfg = workload_config("synthetic", **options)
    gap = cfg.mean_interarrival(lambda: mean_job_work(cfg), cfg.num_executors)
    return 1.0 / gap


def _sweep_tasks(
    config: SweepConfig, entries: Sequence[str], seeds: Sequence[int]
) -> list[_SweepTask]:
    base = dict(config.options)
    grid: list[tuple[str, float, float, dict[str, Any]]] = []
    for load in config.loads:
        opts = {**base, "load": load}
        grid.append(("rate", _arrival_rate(opts), load, opts))
    for long in config.long_seconds:
        opts = {**base, "load": config.long_load, "long_seconds": long}
        grid.append(("long_seconds", long, config.long_load, opts))
    return [
        _SweepTask(e, param, value, load, tuple(sorted(opts.items())), s)
        for e in entries
        for param, value, load, opts in grid
        for s in seeds
    ]


def run_idle_sweep(
    config: SweepConfig,
    entries: Sequence[str],
    seeds: Sequence[int],
    jobs: int = 1,
    progress: ProgressFn | None = None,
    confidence: float = 0.95,
) -> SweepResult:
    """Run each ``LABEL=SPEC`` entry over the sweep's grid and seeds; summarise per point."""
    tasks = _sweep_tasks(config, entries, seeds)
    outcomes = _run_tasks(_sweep_run, tasks, jobs, progress, lambda t: f"sweep {t.entry}")
    groups: dict[tuple[str, str, float, float], list[tuple[float, ...]]] = {}
    for task, out in zip(tasks, outcomes, strict=True):
        label = split_entry(task.entry)[0]
        groups.setdefault((label, task.parameter, task.value, task.load), []).append(out)
    points = []
    for (label, param, value, load), rows in groups.items():
        cols = [mean_ci(_finite(c), confidence) for c in zip(*rows, strict=True)]
        points.append(SweepPoint(label, param, value, load, *cols))
    return SweepResult(config, tuple(points))


def _finite(values: Sequence[float]) -> list[float]:
    """The finite values, or [nan] if none (a run without long jobs has no per-long mean)."""
    out = [v for v in values if math.isfinite(v)]
    return out or [math.nan]


# ---------------------------------------------------------------------------------------
# Training curve


@dataclass(frozen=True)
class TrainingCurve:
    """Validation average JCT per iteration from a training CSV, and reference lines."""

    path: Path
    iteration_column: str
    value_column: str
    iterations: tuple[float, ...]
    values: tuple[float, ...]
    references: Mapping[str, float]
    """Constant reference JCTs by scheduler (``ref_<name>`` columns)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "path": str(self.path),
            "iteration_column": self.iteration_column,
            "value_column": self.value_column,
            "iterations": list(self.iterations),
            "values": list(self.values),
            "references": dict(self.references),
        }


_ITERATION_COLUMNS: Final = ("iteration", "iter", "step", "epoch", "update")
_VALUE_COLUMNS: Final = ("val_avg_jct", "validation_avg_jct", "valid_avg_jct", "val_jct")


def _number(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else math.nan
    except ValueError:
        return math.nan


def read_training_log(path: str | Path) -> TrainingCurve:
    """Read a training CSV defensively: an iteration column and a validation-JCT column.

    The iteration column is the first of iteration/iter/step/epoch/update; the value
    column is val_avg_jct (or the first column naming both "val" and "jct"); rows with
    no value are skipped (validation runs every few iterations); ``ref_<scheduler>``
    columns become reference lines.
    """
    p = Path(path)
    try:
        with p.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = [h.strip() for h in reader.fieldnames or []]
            rows = [{(k or "").strip(): v for k, v in r.items()} for r in reader]
    except OSError as exc:
        raise IdlegateError(f"cannot read training log {p}: {exc.strerror}") from None
    lower = {h.lower(): h for h in header}
    it_col = next((lower[c] for c in _ITERATION_COLUMNS if c in lower), None)
    val_col = next((lower[c] for c in _VALUE_COLUMNS if c in lower), None)
    if val_col is None:
        val_col = next((h for h in header if "val" in h.lower() and "jct" in h.lower()), None)
    if it_col is None or val_col is None:
        raise IdlegateError(
            f"training log {p} needs an iteration column and a validation JCT column "
            f"(e.g. iteration, val_avg_jct); it has: {', '.join(header) or 'no header'}"
        )
    its, vals = [], []
    for i, r in enumerate(rows):
        v = _number(r.get(val_col))
        if math.isfinite(v):
            it = _number(r.get(it_col))
            its.append(it if math.isfinite(it) else float(i))
            vals.append(v)
    refs = {}
    for h in header:
        if h.lower().startswith("ref_"):
            xs = [_number(r.get(h)) for r in rows]
            finite = [x for x in xs if math.isfinite(x)]
            if finite:
                refs[h[4:]] = finite[-1]
    return TrainingCurve(p, it_col, val_col, tuple(its), tuple(vals), refs)


# ---------------------------------------------------------------------------------------
# Running


@dataclass(frozen=True)
class IdleUse:
    """How often one scheduler fired deliberate idle slots on one workload, over its seeds."""

    jobs: int
    """Finished jobs, summed over seeds."""
    delayed_jobs: int
    """Of those, the jobs with an idle slot of more than 0 s."""
    seconds: float
    """Idle seconds inserted, summed over seeds."""

    @classmethod
    def of(cls, result: SchedulerResult) -> IdleUse:
        """Count `result`'s per-job idle arrays (all seeds)."""
        return cls(
            jobs=int(sum(a.size for a in result.idle)),
            delayed_jobs=int(sum(int((a > 0).sum()) for a in result.idle)),
            seconds=float(sum(float(a.sum()) for a in result.idle)),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"jobs": self.jobs, "delayed_jobs": self.delayed_jobs, "seconds": self.seconds}


@dataclass(frozen=True)
class CaseResult:
    """One workload's outcome: its comparison, or why it was skipped."""

    case: WorkloadCase
    comparison: Comparison | None
    headlines: Mapping[str, HeadlineValue] = field(default_factory=dict)

    @property
    def skipped(self) -> bool:
        return self.comparison is None

    @property
    def idle(self) -> dict[str, IdleUse]:
        """Idle slots fired per scheduler label (empty when skipped)."""
        if self.comparison is None:
            return {}
        return {r.name: IdleUse.of(r) for r in self.comparison.results}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the full per-job data is in ``<key>/compare.json``)."""
        out: dict[str, Any] = {
            "key": self.case.key,
            "title": self.case.title,
            "family": self.case.family,
            "workload": self.case.workload,
            "options": self.case.options.to_kwargs(),
            "skipped": self.case.skip_reason,
        }
        if self.comparison is not None:
            cmp = self.comparison
            out["num_executors"] = cmp.num_executors
            out["baseline"] = cmp.config.baseline_name
            out["best"] = cmp.best.name
            out["schedulers"] = {
                r.name: {
                    "summary": {k: v.to_dict() for k, v in r.summary.items()},
                    "avg_jct_vs_baseline": r.vs_baseline.to_dict(),
                    "avg_jct_per_seed": [m.to_dict()["avg_jct"] for m in r.runs],
                }
                for r in cmp.results
            }
            out["headlines"] = {k: v.to_dict() for k, v in self.headlines.items()}
            out["idle"] = {k: v.to_dict() for k, v in self.idle.items()}
        return out


@dataclass(frozen=True)
class Evaluation:
    """Everything `idlegate evaluate` measured."""

    config: EvaluateConfig
    models: Mapping[str, Mapping[str, str]]
    """ONNX metadata by model label."""
    cases: tuple[CaseResult, ...]
    sweep: SweepResult | None
    training: TrainingCurve | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (deterministic: no wall-clock data)."""
        return {
            "idlegate_version": __version__,
            "config": self.config.to_dict(),
            "models": {k: _model_info(v) for k, v in self.models.items()},
            "workloads": [c.to_dict() for c in self.cases],
            "idle_sweep": None if self.sweep is None else self.sweep.to_dict(),
            "training_curve": None if self.training is None else self.training.to_dict(),
        }


def _model_info(meta: Mapping[str, str]) -> dict[str, Any]:
    """The metadata that tells the models apart (ablation switches, G, r, hashes)."""

    def flag(key: str) -> bool | None:
        value = meta.get(f"idlegate.ablation.{key}")
        return None if value is None else value == "true"

    return {
        "idle_head": flag("idle_head"),
        "cp_features": flag("cp_features"),
        "idle_levels": meta.get("idlegate.idle_levels"),
        "idle_ratio": meta.get("idlegate.idle_ratio"),
        "config_hash": meta.get("idlegate.config_hash"),
        "training_config_hash": meta.get("idlegate.training_config_hash"),
    }


def _run_tasks(
    fn: Callable[[Any], Any],
    tasks: Sequence[Any],
    jobs: int,
    progress: ProgressFn | None,
    describe: Callable[[Any], str],
) -> list[Any]:
    """`fn` over `tasks` (in order of the result list), in `jobs` processes if > 1."""
    results: list[Any] = [None] * len(tasks)
    done = 0

    def finished(i: int, value: Any) -> None:
        nonlocal done
        results[i] = value
        done += 1
        if progress is not None:
            progress(done, len(tasks), describe(tasks[i]))

    workers = min(jobs, len(tasks))
    if workers <= 1:
        for i, t in enumerate(tasks):
            finished(i, fn(t))
        return results
    with ProcessPoolExecutor(workers, mp_context=_mp_context()) as pool:
        futures = {pool.submit(fn, t): i for i, t in enumerate(tasks)}
        for fut in as_completed(futures):
            finished(futures[fut], fut.result())
    return results


def _case_headlines(cmp: Comparison, confidence: float) -> dict[str, HeadlineValue]:
    per_label = {r.name: [m.avg_jct for m in r.runs] for r in cmp.results}
    return compute_headlines(per_label, confidence)


def _planned_runs(config: EvaluateConfig, cases: Sequence[WorkloadCase], sweep_n: int) -> int:
    per_case = len(config.entries()) * len(config.seed_list)
    return per_case * sum(c.skip_reason is None for c in cases) + sweep_n


def _sweep_entries(config: EvaluateConfig, models: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The models with an idle head, then the analytic reference."""
    idle = [m.entry for m in config.models if _model_info(models[m.label])["idle_head"]]
    return [*idle, "=".join(SWEEP_REFERENCE)]


def run_evaluation(config: EvaluateConfig, progress: ProgressFn | None = None) -> Evaluation:
    """Run the suite's workloads (paired over seeds), the sweep and read the training log.

    `progress(done, total, what)` is called after each of the simulated runs.
    """
    models = {m.label: m.check() for m in config.models}
    training = read_training_log(config.training_log) if config.training_log else None
    cases = select_cases(suite_cases(config.suite, config.tpch_dir), config.workloads)
    seeds = config.seed_list
    sweep_cfg = sweep_config(config.suite)
    sweep_entries = _sweep_entries(config, models) if config.sweep else []
    sweep_n = len(_sweep_tasks(sweep_cfg, sweep_entries, seeds)) if sweep_entries else 0
    total = _planned_runs(config, cases, sweep_n)
    offset = 0

    def shifted(done: int, _total: int, what: str) -> None:
        if progress is not None:
            progress(offset + done, total, what)

    results = []
    for case in cases:
        if case.skip_reason is not None:
            results.append(CaseResult(case, None))
            continue
        cmp_config = CompareConfig(
            workload=case.workload,
            schedulers=config.entries(),
            seeds=seeds,
            baseline="fair",
            options=case.options,
            jobs=config.jobs,
            confidence=config.confidence,
        )
        cmp = run_comparison(
            cmp_config, lambda d, t, name, seed, k=case.key: shifted(d, t, f"{k}: {name} {seed}")
        )
        offset += len(cmp_config.schedulers) * len(seeds)
        results.append(CaseResult(case, cmp, _case_headlines(cmp, config.confidence)))
    sweep = None
    if sweep_entries:
        sweep = run_idle_sweep(
            sweep_cfg, sweep_entries, seeds, config.jobs, shifted, config.confidence
        )
    return Evaluation(config, models, tuple(results), sweep, training)


# ---------------------------------------------------------------------------------------
# Plots


def _figure(rows: int, cols: int, size: tuple[float, float]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=120)
    return fig, fig.subplots(rows, cols, squeeze=False)


def _save(fig: Any, path: Path) -> Path:
    return write_file(path, lambda p: fig.savefig(p, format="png"))


def _errorbar(ax: Any, xs: list[float], ests: list[Estimate], label: str) -> None:
    ys = [e.mean for e in ests]
    err = [e.half_width if math.isfinite(e.half_width) else 0.0 for e in ests]
    ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, linewidth=1.5, label=label)


def plot_idle_sweep(sweep: SweepResult, path: str | Path) -> Path:
    """The Fig. 6 plot: idle per long job (top) and per decision (bottom) against the
    arrival rate (left) and the long-job length (right), one line per scheduler."""
    fig, axes = _figure(2, 2, (10, 7))
    columns = (
        ("rate", "arrival rate (jobs/s)"),
        ("long_seconds", f"long-job work (executor-s), load {sweep.config.long_load}"),
    )
    rows = (
        ("idle_per_long_job", "idle inserted per long job (s)"),
        ("idle_per_decision", "idle inserted per decision (s)"),
    )
    for j, (param, xlabel) in enumerate(columns):
        for i, (stat, ylabel) in enumerate(rows):
            ax = axes[i][j]
            for name in sweep.schedulers:
                pts = sweep.series(name, param)
                if pts:
                    _errorbar(ax, [p.value for p in pts], [getattr(p, stat) for p in pts], name)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            ax.set_ylim(bottom=0)
    axes[0][0].legend(fontsize="small")
    fig.suptitle("Idle slots inserted on the synthetic two-type workload (mean ± 95 % CI)")
    fig.tight_layout()
    return _save(fig, Path(path))


def plot_training_curve(curve: TrainingCurve, path: str | Path) -> Path:
    """Validation average JCT against iteration, with the reference heuristics as lines."""
    fig, axes = _figure(1, 1, (7, 4.5))
    ax = axes[0][0]
    ax.plot(curve.iterations, curve.values, marker="o", linewidth=1.6, label="learned (greedy)")
    for i, (name, value) in enumerate(sorted(curve.references.items())):
        ax.axhline(value, linestyle="--", linewidth=1.0, color=f"C{i + 1}", label=name)
    ax.set_xlabel(curve.iteration_column)
    ax.set_ylabel(f"validation average JCT (s) [{curve.value_column}]")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(f"Training curve — {curve.path.name}")
    fig.tight_layout()
    return _save(fig, Path(path))


# ---------------------------------------------------------------------------------------
# Reports


def _pct(est: Estimate | None) -> str:
    if est is None or not math.isfinite(est.mean):
        return "n/a"
    text = f"{est.mean * 100:+.1f} %"
    if est.n >= 2 and math.isfinite(est.half_width):
        text += f" ± {est.half_width * 100:.1f}"
    return text


def _headline_cell(h: Headline, case: CaseResult) -> str:
    value = case.headlines.get(h.key)
    if value is None:
        return "—"
    mark = {True: " ✓", False: " ✗", None: ""}[h.met(case.case.family, value.estimate)]
    versus = f" (vs {value.reference})" if h.reference is None else ""
    return _pct(value.estimate) + mark + versus


def _target_text(h: Headline) -> str:
    sign = "≤" if h.at_most else "≥"
    parts = []
    for family, t in h.targets.items():
        where = "elsewhere" if family == "*" else family
        parts.append(f"{where} {sign} {t * 100:+.0f} %")
    return ", ".join(parts)


def idle_rows(ev: Evaluation) -> tuple[list[str], list[list[str]]]:
    """Where idle slots fired: headers (workload, then every scheduler that fired one
    anywhere) and one row per run workload, each cell "delayed / jobs, seconds"."""
    names: dict[str, None] = {}
    for c in ev.cases:
        for name, use in c.idle.items():
            if use.delayed_jobs:
                names[name] = None
    rows = []
    for c in ev.cases:
        if c.skipped:
            continue
        idle = c.idle
        cells = []
        for name in names:
            use = idle.get(name)
            cells.append(
                "—"
                if use is None
                else f"{use.delayed_jobs} / {use.jobs} jobs, {use.seconds:,.0f} s"
            )
        rows.append([c.case.key, *cells])
    return ["workload", *names], rows


def headline_rows(ev: Evaluation) -> list[list[str]]:
    """One row per workload: its title and the headline cells (skipped rows say so)."""
    rows = []
    for c in ev.cases:
        if c.skipped:
            rows.append([c.case.key, *(["skipped"] * len(HEADLINES))])
        else:
            rows.append([c.case.key, *(_headline_cell(h, c) for h in HEADLINES)])
    return rows


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] * len(headers)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _caption(ev: Evaluation, cmp: Comparison) -> str:
    pct = round(ev.config.confidence * 100)
    return (
        f"{cmp.num_executors} executors, {len(cmp.config.seeds)} seeds; mean ± {pct} % CI "
        f"over seeds; % vs {cmp.config.baseline_name} paired per seed; JCT / bound = average "
        "JCT over the average of max(critical path, work / K)."
    )


def _sweep_lines(sweep: SweepResult) -> list[str]:
    rows = []
    order = {name: i for i, name in enumerate(sweep.schedulers)}
    params = {"rate": 0, "long_seconds": 1}
    for p in sorted(sweep.points, key=lambda p: (order[p.scheduler], params[p.parameter], p.value)):
        x = f"{p.value:.4f} jobs/s" if p.parameter == "rate" else f"{p.value:g} s long"
        rows.append(
            [
                p.scheduler,
                x,
                f"{p.load:g}",
                _est(p.idle_per_long_job, 2),
                _est(p.idle_per_decision, 3),
                _est(p.delayed_long_fraction, 2),
                _est(p.avg_jct, 1),
            ]
        )
    headers = [
        "scheduler",
        "swept value",
        "load",
        "idle / long job (s)",
        "idle / decision (s)",
        "long jobs delayed",
        "avg JCT (s)",
    ]
    return _md_table(headers, rows)


def _est(e: Estimate, digits: int) -> str:
    if not math.isfinite(e.mean):
        return "n/a"
    if e.n >= 2 and math.isfinite(e.half_width):
        return f"{e.mean:.{digits}f} ± {e.half_width:.{digits}f}"
    return f"{e.mean:.{digits}f}"


def to_markdown(ev: Evaluation) -> str:
    """The combined report: models, headline deltas, each workload's table, the plots."""
    cfg = ev.config
    seeds = cfg.seed_list
    lines = [
        "# idlegate evaluation",
        "",
        f"Regenerate with `{cfg.command_line()}` (idlegate {__version__}, suite {cfg.suite}).",
        "",
        f"Seeds {seeds[0]}–{seeds[-1]} ({len(seeds)}): every scheduler runs on the same "
        "arrival sequence per seed, so differences are paired per seed. Evaluation seeds must "
        "never be training or validation seeds of the evaluated models.",
        "",
        "## Models",
        "",
    ]
    model_rows = []
    for m in cfg.models:
        info = _model_info(ev.models.get(m.label, {}))
        model_rows.append(
            [
                m.label,
                f"`{m.spec}`",
                _yes_no(info["idle_head"]),
                _yes_no(info["cp_features"]),
                str(info["idle_levels"] or "?"),
            ]
        )
    lines += _md_table(["label", "spec", "idle head", "CP/width features", "G"], model_rows)
    lines += [
        "",
        "## Headline deltas (average JCT, paired per seed)",
        "",
        *_md_table(["workload", *(h.title for h in HEADLINES)], headline_rows(ev)),
        "",
        "Each cell is subject / reference − 1 (negative: the subject's average JCT is lower). "
        "Targets (✓ met / ✗ not met, by the mean): "
        + "; ".join(f"{h.title}: {_target_text(h)}" for h in HEADLINES)
        + ". The best heuristic is the baseline (any of "
        + ", ".join(b for b, _ in BASELINES)
        + ") with the lowest mean average JCT on that workload. — : a label is missing "
        "(name the models learned, learned-no-idle, learned-no-cp, lookahead, "
        "lookahead-base with --models).",
        "",
        *_idle_lines(ev),
        "## Workloads",
        "",
    ]
    for c in ev.cases:
        lines += [f"### {c.case.title}", ""]
        if c.comparison is None:
            lines += [f"*{c.case.skip_reason}*", ""]
            continue
        lines += [
            _caption(ev, c.comparison),
            "",
            markdown_table(c.comparison),
            "",
            f"![JCT CDF, {c.case.key}]({c.case.key}/jct_cdf.png)",
            "",
        ]
    if ev.sweep is not None:
        sw = ev.sweep.config
        lines += [
            "## Idle length against arrival rate and long-job length (Fig. 6)",
            "",
            f"Synthetic two-type workload; loads {', '.join(map(str, sw.loads))} (plotted at "
            f"their arrival rates) and long-job work {', '.join(f'{x:g}' for x in sw.long_seconds)}"
            f" executor-s at load {sw.long_load} (the arrival rate follows the load).",
            "",
            "![idle sweep](idle_sweep.png)",
            "",
            *_sweep_lines(ev.sweep),
            "",
        ]
    if ev.training is not None:
        tr = ev.training
        last = f"{tr.values[-1]:.1f} s" if tr.values else "n/a"
        lines += [
            "## Training curve",
            "",
            f"From `{tr.path}` ({len(tr.values)} validation points; last {last}).",
            "",
            "![training curve](training_curve.png)",
            "",
        ]
    return "\n".join(lines)


def _idle_lines(ev: Evaluation) -> list[str]:
    headers, rows = idle_rows(ev)
    lines = ["## Idle slots fired", ""]
    if len(headers) == 1:
        return [*lines, "No scheduler inserted an idle slot on any workload.", ""]
    return [
        *lines,
        "Jobs delayed by a deliberate idle slot / finished jobs, and the idle seconds "
        "inserted, summed over all seeds; only schedulers that idled somewhere are shown.",
        "",
        *_md_table(headers, rows),
        "",
    ]


def _yes_no(value: bool | None) -> str:
    return "?" if value is None else "yes" if value else "no"


def write_evaluation(ev: Evaluation, out_dir: str | Path) -> dict[str, Path]:
    """Write every report of `ev` into `out_dir` (created if needed); name → path."""
    out = check_out_dir(out_dir)
    paths: dict[str, Path] = {}
    for c in ev.cases:
        if c.comparison is None:
            continue
        d = out / c.case.key
        paths[f"{c.case.key}/json"] = write_json(c.comparison, d / "compare.json")
        paths[f"{c.case.key}/markdown"] = write_markdown(c.comparison, d / "compare.md")
        paths[f"{c.case.key}/cdf"] = plot_jct_cdf(
            c.comparison, d / "jct_cdf.png", title=f"JCT CDF — {c.case.title}"
        )
    if ev.sweep is not None:
        paths["idle_sweep"] = plot_idle_sweep(ev.sweep, out / "idle_sweep.png")
    if ev.training is not None:
        paths["training_curve"] = plot_training_curve(ev.training, out / "training_curve.png")
    text = json.dumps(ev.to_dict(), indent=2, allow_nan=False)
    paths["json"] = write_text(out / "evaluation.json", text + "\n")
    paths["markdown"] = write_text(out / "evaluation.md", to_markdown(ev))
    return paths


# ---------------------------------------------------------------------------------------
# Console


def headline_table(ev: Evaluation) -> Table:
    """The headline deltas as a rich Table."""
    from rich.table import Table

    table = Table(title="Headline deltas (average JCT, paired per seed)")
    table.add_column("workload", no_wrap=True)
    for h in HEADLINES:
        table.add_column(h.title, justify="right")
    for row in headline_rows(ev):
        table.add_row(*row)
    return table


def idle_table(ev: Evaluation) -> Table | None:
    """Where idle slots fired, as a rich Table (None when no scheduler idled anywhere)."""
    from rich.table import Table

    headers, rows = idle_rows(ev)
    if len(headers) == 1:
        return None
    table = Table(title="Idle slots fired (jobs delayed / finished, idle seconds; all seeds)")
    for i, h in enumerate(headers):
        table.add_column(h, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in rows:
        table.add_row(*row)
    return table


def run_cli(config: EvaluateConfig, out: Path | None) -> Evaluation:
    """`idlegate evaluate`: run with a progress bar on stderr, print tables, write reports."""
    from rich.console import Console

    if out is not None:
        check_out_dir(out)  # fail before the runs, not after
    start = time.perf_counter()
    with stderr_progress("evaluating", None) as update:
        ev = run_evaluation(config, update)
    elapsed = time.perf_counter() - start
    console = Console() if Console().is_terminal else Console(width=140)
    for c in ev.cases:
        if c.comparison is None:
            console.print(f"[yellow]{c.case.title}: {c.case.skip_reason}[/]", highlight=False)
            continue
        table = render_comparison_table(c.comparison)
        table.title = c.case.title
        console.print(table)
    console.print(headline_table(ev))
    idle = idle_table(ev)
    console.print(idle if idle is not None else "No scheduler inserted an idle slot.")
    runs = _planned_runs(
        config,
        [c.case for c in ev.cases],
        len(ev.sweep.points) * len(config.seed_list) if ev.sweep else 0,
    )
    console.print(f"{runs} runs in {elapsed:.1f} s")
    if out is not None:
        for p in write_evaluation(ev, out).values():
            console.print(f"wrote {p}", highlight=False)
    return ev
