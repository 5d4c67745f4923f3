"""The suites of `idlegate evaluate`: workload cases, baselines, models and the run's config.

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
* ``k8s-batch-0.7`` — Argo/Airflow-style pipelines of pods running minutes, cron bursts
  every 15 min plus ad-hoc jobs, no moving delay, the workload's defaults (40 executors,
  offered load 0.7, 200 jobs; 50 in the quick suite);
* ``follow-0.7``, ``push-0.7``, ``recurring-0.7`` — arrivals with structure (4 executors,
  one-stage jobs, offered load 0.7; 100 jobs, 50 in the quick suite): each long job
  followed after a random lag by a session of short ones; one long and several short
  workflows per push, seconds apart; named pipelines on cron-like schedules plus ad-hoc
  jobs. Where idling pays with perfect knowledge (docs/research/idle.md);
* ``mixed-0.5`` — one stream, half synthetic two-type jobs, half TPC-H jobs (TPC-H-like
  generated DAGs when the traces are absent; the report says which), 50 executors,
  1 + 200 jobs, mean interarrival 25 s;
* ``alibaba-0.85`` — DAG jobs of Alibaba's 2018 production trace, 100 executors, 200
  jobs (40 in the quick suite), offered load 0.85, the setting of Decima's Alibaba
  result (skipped, with the reason in the report, when the trace is not found: pass
  ``--alibaba-dir`` or set ``IDLEGATE_ALIBABA_DIR``).

Headlines (:data:`idlegate.evaluation.headlines.HEADLINES`), paired per seed: ``learned`` against the best baseline of
each workload, ``lookahead`` against ``lookahead-base``, ``learned`` against
``learned-no-idle``, and ``learned-no-cp`` against ``learned``; each is computed where
both labels were given. The report also counts where idle slots fired.

The quick suite runs the same workloads with fewer jobs (for tests and a 1–2 minute run).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, FilePath

from idlegate.config import Config, Flag
from idlegate.errors import IdlegateError
from idlegate.evaluation.comparison import Schedulers, WorkloadOptions, parse_list
from idlegate.policy import SchedulerSpec, make_scheduler
from idlegate.sim.alibaba import open_alibaba_trace
from idlegate.sim.tpch import resolve_tpch_dir
from idlegate.sim.workloads import workload_config

__all__ = [
    "BASELINES",
    "DEFAULT_FIRST_SEED",
    "DEFAULT_SEEDS",
    "DEMO_EXECUTORS",
    "DEMO_LOAD",
    "DEMO_STREAMED_JOBS",
    "DEMO_WORKLOAD",
    "EVALUATION_SEED_RANGE",
    "SUITES",
    "SWEEP_REFERENCE",
    "EvaluateConfig",
    "WorkloadCase",
    "check_model",
    "select_cases",
    "suite_cases",
]


DEFAULT_FIRST_SEED: Final = 1000
"""First evaluation seed; seeds run first_seed, first_seed + 1, …"""

EVALUATION_SEED_RANGE: Final = range(1000, 100_000)
"""Seeds reserved for evaluation: training should never draw an arrival seed from here."""

Suite = Literal["quick", "full"]
SUITES: Final = get_args(Suite)
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


def check_model(model: SchedulerSpec) -> dict[str, str]:
    """Build `model` once (IdlegateError naming it if it cannot be); its ONNX metadata, if any."""
    try:
        policy = make_scheduler(model)
    except IdlegateError as exc:
        raise IdlegateError(f"model {model.title!r}: {exc}") from None
    return dict(getattr(policy, "metadata", {}))


@dataclass(frozen=True)
class WorkloadCase:
    """One workload of a suite: a `build_workload` name and options, and how to call it."""

    key: str
    """Short, file-name safe identity (the report's sub-directory), e.g. "tpch-15s"."""
    title: str
    family: str
    """"synthetic", "tpch", "tpch-like", "bursty", "k8s-batch", "follow", "push",
    "recurring", "mixed" or "alibaba" (selects the headline targets)."""
    workload: str
    options: WorkloadOptions
    skip_reason: str | None = None
    """Why this case cannot run here (e.g. no TPC-H traces); None: it runs."""


def _own_labels(models: tuple[SchedulerSpec, ...]) -> tuple[SchedulerSpec, ...]:
    """The models, each with a label of its own: no baseline's (a row evaluate runs anyway)."""
    labels = [m.title for m in models]
    taken = [b for b, _ in BASELINES]
    taken += [SWEEP_REFERENCE[0]] if SWEEP_REFERENCE[0] not in taken else []
    for label in labels:
        if labels.count(label) > 1:
            raise ValueError(
                f"{label!r} is given twice; give each scheduler a label of its own as "
                "LABEL=SPEC, e.g. a=learned:a.onnx,b=learned:b.onnx"
            )
        if label in taken:
            raise ValueError(
                f"{label!r} is a baseline, which evaluate runs anyway ({', '.join(taken)}); "
                "the schedulers to evaluate against them need labels of their own: write "
                f"LABEL=SPEC, e.g. my-{label}={label}"
            )
    return models


def _some_workloads(workloads: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """At least one workload when the list is given (an empty one ran nothing, exit 0)."""
    if workloads is not None and not workloads:
        raise ValueError(
            "give at least one workload, comma-separated, e.g. synthetic-0.8,alibaba; "
            "leave the flag out for the whole suite"
        )
    return workloads


class EvaluateConfig(Config):
    """What `idlegate evaluate` runs."""

    model_config = ConfigDict(title="the evaluation")

    models: Annotated[Schedulers, Flag("--schedulers"), AfterValidator(_own_labels)]
    """Scheduler specs to evaluate, each optionally LABEL=SPEC (repeatable or
    comma-separated), e.g. learned=a.onnx learned-no-idle=b.onnx
    lookahead=lookahead:srpt lookahead-base=srpt."""
    suite: Suite = "quick"
    """quick (a few seconds) or full (the issue's workloads)."""
    seeds: int | None = Field(None, ge=1)
    """Seeds per workload (default 3 quick, 10 full)."""
    first_seed: int = Field(DEFAULT_FIRST_SEED, ge=0)
    """First seed; never one the models trained on."""
    jobs: Annotated[int, Flag("-j")] = Field(1, ge=1)
    """Worker processes."""
    tpch_dir: Path | None = None
    """Directory of TPC-H traces (workloads tpch, mixed)."""
    alibaba_dir: Path | None = None
    """Directory of Alibaba's trace (workload alibaba)."""
    workloads: Annotated[
        tuple[str, ...] | None, BeforeValidator(parse_list), AfterValidator(_some_workloads)
    ] = None
    """Only these workloads (keys or families), comma-separated (default: the whole suite)."""
    training_log: FilePath | None = None
    """A training CSV (train_log.csv) to plot."""
    sweep: bool = True
    """Run the idle-length sweep (Fig. 6)."""
    confidence: float = Field(0.95, gt=0, lt=1)
    """Confidence level of the intervals."""

    @property
    def seed_list(self) -> tuple[int, ...]:
        """The evaluation seeds, first_seed upwards."""
        n = self.seeds if self.seeds is not None else DEFAULT_SEEDS[self.suite]
        return tuple(range(self.first_seed, self.first_seed + n))

    def entries(self) -> tuple[SchedulerSpec, ...]:
        """The compared schedulers: the models, then the baselines."""
        return (*self.models, *(SchedulerSpec.parse(f"{b}={s}") for b, s in BASELINES))

    def command_line(self) -> str:
        """The `idlegate evaluate` command that reproduces this evaluation."""
        parts = ["idlegate", "evaluate", "--suite", self.suite]
        for m in self.models:
            parts += ["--schedulers", m.format()]
        parts += ["--seeds", str(len(self.seed_list)), "--first-seed", str(self.first_seed)]
        if self.tpch_dir is not None:
            parts += ["--tpch-dir", str(self.tpch_dir)]
        if self.alibaba_dir is not None:
            parts += ["--alibaba-dir", str(self.alibaba_dir)]
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
            "models": {m.title: m.format(label=False) for m in self.models},
            "baselines": dict(BASELINES),
            "seeds": list(self.seed_list),
            "tpch_dir": None if self.tpch_dir is None else str(self.tpch_dir),
            "alibaba_dir": None if self.alibaba_dir is None else str(self.alibaba_dir),
            "workloads": None if self.workloads is None else list(self.workloads),
            "training_log": None if self.training_log is None else str(self.training_log),
            "sweep": self.sweep,
            "confidence": self.confidence,
            "command": self.command_line(),
        }


def _tpch_available(tpch_dir: Path | None) -> str | None:
    """None if the TPC-H traces are found, else why not (a sentence)."""
    try:
        path = resolve_tpch_dir(tpch_dir)
    except IdlegateError as exc:
        return f"skipped: {exc}"
    if not any(path.glob("*/q*.json")):
        return f"skipped: no TPC-H traces (<size>/q<N>.json) under {path}"
    return None


def _alibaba_available(alibaba_dir: Path | None) -> str | None:
    """None if Alibaba's trace is found and reads, else why not (a sentence)."""
    try:
        open_alibaba_trace(alibaba_dir)
    except IdlegateError as exc:
        return f"skipped: {exc}"
    return None


# long: one declaration per workload case, read top to bottom as the suite's table
def suite_cases(
    suite: str, tpch_dir: Path | None = None, alibaba_dir: Path | None = None
) -> tuple[WorkloadCase, ...]:
    """The workloads of `suite` ("quick" or "full"); the cases of a trace (TPC-H,
    Alibaba) carry a skip reason if it is not found."""
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
    cases.append(_k8s_batch_case(quick))
    cases += [_structured_case(name, quick) for name in STRUCTURED]
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
    cases.append(_alibaba_case(quick, alibaba_dir))
    return tuple(cases)


def _alibaba_case(quick: bool, alibaba_dir: Path | None) -> WorkloadCase:
    """Alibaba's trace in Decima's setting for it: 100 executors, load 0.85."""
    config = workload_config("alibaba")
    jobs = 40 if quick else config.num_jobs
    load = config.DEFAULT_LOAD
    return WorkloadCase(
        f"alibaba-{load}",
        f"Alibaba's 2018 trace: production DAG jobs, load {load} ({config.num_executors} "
        f"executors, {jobs} jobs)",
        "alibaba",
        "alibaba",
        WorkloadOptions(
            num_executors=config.num_executors,
            load=load,
            alibaba_dir=alibaba_dir,
            extra={"num_jobs": jobs},
        ),
        skip_reason=_alibaba_available(alibaba_dir),
    )


def _k8s_batch_case(quick: bool) -> WorkloadCase:
    """Minute-scale pod pipelines, cron bursts + ad-hoc jobs, the workload's defaults."""
    k8s = workload_config("k8s-batch")
    jobs = 50 if quick else 200
    return WorkloadCase(
        f"k8s-batch-{k8s.DEFAULT_LOAD}",
        f"k8s-batch: pod pipelines of minutes, cron bursts every {k8s.period / 60:g} min + "
        f"ad-hoc jobs, load {k8s.DEFAULT_LOAD} ({k8s.num_executors} executors, {jobs} jobs)",
        "k8s-batch",
        "k8s-batch",
        WorkloadOptions(extra={"num_jobs": jobs}),
    )


STRUCTURED: Final = ("follow", "push", "recurring")
"""The workloads with arrival structure (issue 23), each a case at its defaults."""

_STRUCTURED_TITLES: Final = {
    "follow": "long jobs each followed by a session of short ones",
    "push": "one long and several short workflows per push, seconds apart",
    "recurring": "named pipelines on cron-like schedules + ad-hoc jobs",
}


def _structured_case(name: str, quick: bool) -> WorkloadCase:
    """A workload with arrival structure at its defaults (load 0.7), fewer jobs if quick."""
    config = workload_config(name)
    jobs = 50 if quick else config.num_jobs
    load = 0.7
    return WorkloadCase(
        f"{name}-{load}",
        f"{name}: {_STRUCTURED_TITLES[name]}, load {load} ({config.num_executors} executors, "
        f"{jobs} jobs)",
        name,
        name,
        WorkloadOptions(load=load, extra={"num_jobs": jobs}),
    )


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
