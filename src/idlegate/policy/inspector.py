"""The learned inspector for rigid jobs (SchedInspector, Zhang et al., HPDC 2022): runtime.

A rigid base scheduler (``strict:ORDER`` or ``easy:ORDER``, `idlegate.policy.rigid`)
picks the job it would start; the *inspector* looks at that pick and the system and
says **accept** (the base goes on as usual) or **reject** (nothing starts now; at the
next scheduling point the base picks again, possibly another job). The mechanics are
those of the reject rule (`RejectScheduler`, which this class extends): a rejection
lasts until the next scheduling point (a start, an arrival, a completion, or `interval`
seconds, 600, without an event); the points the cluster did not stop at are replayed at
its next question, the judge seeing the system as it is then; after `max_rejections`
(72) a job is accepted without asking. The decision is an MLP in
ONNX (hidden 32-16-8, two logits: accept, reject), run by onnxruntime and numpy only.

Which picks are inspected (``ask``, from the model's metadata):

* ``blocked`` — only picks that cannot start now (the picks the reject rule rejects);
  accepting every one is the base, rejecting every one is the reject rule;
* ``all`` — every pick not yet committed, as SchedInspector (a pick that could start may
  be rejected too, except on an empty machine, where nothing else would wake it up).

**Features** (`inspector_features`, [F] float32 in [0, 1], F = len(FEATURE_NAMES),
version `FEATURE_VERSION`). With K executors, the pick's requested time r, size n and
wait so far w, and ``lg(x, s) = min(1, log1p(max(x, 0)) / log1p(s))``:

=================  =======================================================================
name               value
=================  =======================================================================
``wait``           lg(w, 12 h): the pick's wait so far (12 h is the rejection cap's span)
``requested``      lg(r, 2 days)
``size``           n / K
``rejected``       times the pick was rejected so far / max_rejections (0 with a cap of 0)
``free``           free executors / K
``can_start``      1 if the pick fits the free executors now, else 0
``start_delay``    lg(shadow − now, 12 h): when the pick could start if running jobs end
                   at start + requested time (EASY's shadow time; 0 if it fits now)
``slowdown``       lg(bsld − 1, 100) of the pick if it starts at the shadow time:
                   bsld = (w + shadow − now + r) / max(r, 10)
``queue_length``   lg(waiting jobs, 256)
``queue_wait``     lg(mean wait of the waiting jobs, 12 h)
``queue_work``     lg(Σ r·n of the waiting jobs / K, 2 days): seconds of full-machine work
``fit_now``        share of the other waiting jobs that fit the free executors now
=================  =======================================================================

The ONNX file (written by `idlegate.training.inspector`) takes ``features`` [B, F] float32
and returns ``logits`` [B, 2] (index 0 accept, 1 reject); its metadata (`METADATA_KEYS`)
says it is an idlegate inspector, its feature version and how it was trained (ask mode,
rejection cap and interval, which are this scheduler's defaults). `make_inspector` builds
the spec ``inspect:PATH.onnx:BASE``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal, cast

import numpy as np

from idlegate.errors import IdlegateError
from idlegate.policy.heuristics import best_stage
from idlegate.policy.rigid import (
    DEFAULT_MAX_REJECTIONS,
    DEFAULT_REJECT_INTERVAL,
    RejectScheduler,
    StrictScheduler,
    fits,
    make_base,
    requested_time,
    reservation,
)
from idlegate.policy.spec import SchedulerSpec
from idlegate.sim.protocol import ClusterView, Job, Stage

FEATURE_VERSION: Final = 1
"""Bumped whenever a feature's meaning or order changes; a model must match it."""
FEATURE_NAMES: Final = (
    "wait",
    "requested",
    "size",
    "rejected",
    "free",
    "can_start",
    "start_delay",
    "slowdown",
    "queue_length",
    "queue_wait",
    "queue_work",
    "fit_now",
)
NUM_FEATURES: Final = len(FEATURE_NAMES)
WAIT_SCALE: Final = 12 * 3600.0
"""Seconds: waits and delays reach 1 at 12 h (SchedInspector's rejection cap)."""
RUN_SCALE: Final = 2 * 86400.0
"""Seconds: requested times and queue work reach 1 at two days."""
SLOWDOWN_SCALE: Final = 100.0
QUEUE_SCALE: Final = 256.0
BSLD_MIN_RUN: Final = 10.0
"""The bounded slowdown's floor on the run time (`sim.metrics`)."""

ONNX_FORMAT: Final = "idlegate-inspector-onnx"
INPUT_NAME: Final = "features"
OUTPUT_NAME: Final = "logits"
ACCEPT, REJECT = 0, 1
"""Logit indices."""
METADATA_KEYS: Final = (
    "idlegate.format",  # ONNX_FORMAT
    "idlegate.inspector.feature_version",  # FEATURE_VERSION
    "idlegate.inspector.features",  # FEATURE_NAMES joined by commas
    "idlegate.inspector.ask",  # "blocked" or "all"
    "idlegate.inspector.max_rejections",  # the training's cap, e.g. "72"
    "idlegate.inspector.interval",  # the training's interval in seconds, e.g. "600.0"
    "idlegate.inspector.trained_on",  # JSON: trace, base, iterations, seed
)

AskMode = Literal["blocked", "all"]
ASK_MODES: Final = ("blocked", "all")

Judge = Callable[[np.ndarray], bool]
"""Accept (True) or reject (False) a pick, given its [F] features."""


# ---------------------------------------------------------------------------------------
# Features


def log_scaled(x: float, scale: float) -> float:
    """min(1, log1p(max(x, 0)) / log1p(scale)): 0 at 0, 1 at `scale` and beyond."""
    return min(1.0, math.log1p(max(x, 0.0)) / math.log1p(scale))


def inspector_features(
    view: ClusterView,
    pick: Job,
    stage: Stage,
    rejected: int,
    max_rejections: int,
    waiting: list[Job],
) -> np.ndarray:
    """The [NUM_FEATURES] float32 features of `pick` (its launchable `stage`) and the system.

    `waiting` are the jobs waiting to start (the pick among them); `rejected` is how often
    the pick was rejected so far. See the module docstring for each feature.
    """
    k = view.num_executors
    free = view.free_executors
    now = view.now
    r = requested_time(pick)
    n = stage.tasks
    wait = now - pick.arrival
    can_start = fits(stage, free)
    shadow = now if can_start else reservation(view, n)[0]
    delay = shadow - now
    bsld = (wait + delay + r) / max(r, BSLD_MIN_RUN)
    others = [j for j in waiting if j is not pick]
    fit = sum(1 for j in others if best_stage(view.runnable(j), free) is not None)
    queue_wait = sum(now - j.arrival for j in waiting) / len(waiting) if waiting else 0.0
    queue_work = sum(j.dag.total_work for j in waiting) / k
    return np.array(
        [
            log_scaled(wait, WAIT_SCALE),
            log_scaled(r, RUN_SCALE),
            n / k,
            rejected / max_rejections if max_rejections > 0 else 0.0,
            free / k,
            1.0 if can_start else 0.0,
            log_scaled(delay, WAIT_SCALE),
            log_scaled(bsld - 1.0, SLOWDOWN_SCALE),
            log_scaled(len(waiting), QUEUE_SCALE),
            log_scaled(queue_wait, WAIT_SCALE),
            log_scaled(queue_work, RUN_SCALE),
            fit / len(others) if others else 0.0,
        ],
        dtype=np.float32,
    )


# ---------------------------------------------------------------------------------------
# The scheduler


class InspectorScheduler(RejectScheduler):
    """The base's pick, accepted or rejected by `judge` (see the module docstring).

    `judge` maps a pick's [F] features to True (accept) or False (reject): an
    `OnnxInspector`, or the sampling policy during training. `asked` and `rejected`
    count the judge's calls and rejections in the current run.
    """

    def __init__(
        self,
        base: StrictScheduler,
        judge: Judge,
        *,
        ask: AskMode = "blocked",
        max_rejections: int = DEFAULT_MAX_REJECTIONS,
        interval: float = DEFAULT_REJECT_INTERVAL,
        name: str | None = None,
    ) -> None:
        if ask not in ASK_MODES:
            raise IdlegateError(f"ask must be one of {', '.join(ASK_MODES)}, got {ask!r}")
        super().__init__(base, max_rejections=max_rejections, interval=interval)
        self.judge = judge
        self.ask: AskMode = ask
        self.name = name or f"inspect:{base.name}"
        self.asked = 0
        self.rejected = 0

    def reset(self, rng: Any) -> None:
        super().reset(rng)
        self.asked = 0
        self.rejected = 0

    def __repr__(self) -> str:
        return f"InspectorScheduler({self.name!r}, ask={self.ask!r})"

    def inspects(self, view: ClusterView, stage: Stage) -> bool:
        free = view.free_executors
        if not fits(stage, free):
            return True
        # an empty machine has no completion to wake the rejected pick up again
        return self.ask == "all" and free < view.num_executors

    def rejects(self, view: ClusterView, job: Job, stage: Stage, count: int) -> bool:
        features = inspector_features(
            view, job, stage, count, self.max_rejections, self.base.waiting(view)
        )
        self.asked += 1
        if self.judge(features):
            return False
        self.rejected += 1
        return True


# ---------------------------------------------------------------------------------------
# The ONNX judge


class OnnxInspector:
    """An exported inspector: ``OnnxInspector("insp.onnx")(features) -> accept?`` (greedy).

    `model` is a path or the ONNX bytes. Raises IdlegateError if the file is missing, is
    not an idlegate inspector, or was built for another feature version.
    """

    def __init__(self, model: str | Path | bytes, *, threads: int = 1) -> None:
        from idlegate.policy.onnx_runtime import open_session  # only when one is built

        self.session, self.metadata = open_session(
            model,
            threads=threads,
            what="inspector",
            remedy="train one with `idlegate train-inspector --file TRACE --base easy:sjf "
            "--out PATH.onnx`",
        )
        self._check()
        self.ask = cast(AskMode, self.metadata["idlegate.inspector.ask"])  # (`_check`ed)
        self.max_rejections = int(self.metadata["idlegate.inspector.max_rejections"])
        self.interval = float(self.metadata["idlegate.inspector.interval"])
        self._run = self.session.run

    def _check(self) -> None:
        meta = self.metadata
        if meta.get("idlegate.format") != ONNX_FORMAT:
            raise IdlegateError(
                "the ONNX file is not an idlegate inspector (its metadata lacks "
                f"idlegate.format={ONNX_FORMAT}); inspect:PATH.onnx:BASE needs a model written "
                "by `idlegate train-inspector` (a learned DAG policy goes in learned:PATH.onnx)"
            )
        version = meta.get("idlegate.inspector.feature_version")
        if version != str(FEATURE_VERSION):
            raise IdlegateError(
                f"the inspector was trained on feature version {version}, this idlegate "
                f"computes version {FEATURE_VERSION}; retrain it with `idlegate train-inspector`"
            )
        if meta.get("idlegate.inspector.ask") not in ASK_MODES:
            raise IdlegateError(
                f"the inspector's metadata names no valid ask mode ({ASK_MODES}); re-export it"
            )
        inputs = self.session.get_inputs()
        if [i.name for i in inputs] != [INPUT_NAME] or inputs[0].shape[-1] != NUM_FEATURES:
            raise IdlegateError(
                f"the inspector must take one input {INPUT_NAME!r} of {NUM_FEATURES} features; "
                "re-export it with this idlegate"
            )

    def logits(self, features: np.ndarray) -> np.ndarray:
        """[B, F] (or [F]) features → [B, 2] logits (accept, reject)."""
        x = np.asarray(features, dtype=np.float32).reshape(-1, NUM_FEATURES)
        return self._run([OUTPUT_NAME], {INPUT_NAME: x})[0]

    def __call__(self, features: np.ndarray) -> bool:
        """Accept unless the reject logit is strictly larger."""
        logits = self.logits(features)[0]
        return bool(logits[ACCEPT] >= logits[REJECT])


# ---------------------------------------------------------------------------------------
# The spec


def make_inspector(spec: SchedulerSpec, /, **params: Any) -> InspectorScheduler:
    """Build ``inspect:PATH.onnx:BASE`` (`spec`) with its and the keyword parameters:
    ``threads``, ``name``, ``max_rejections`` and ``interval`` (by default the cap and
    interval the model was trained with, from its metadata); the others go to the base
    (``extra_nodes``, ``backfill_order``)."""
    params = spec.keywords(params)
    threads = params.pop("threads", 1)
    name = params.pop("name", None)
    max_rejections = params.pop("max_rejections", None)
    interval = params.pop("interval", None)
    base = make_base(spec.base or "", **params)
    model = Path(spec.argument or "").expanduser()
    judge = OnnxInspector(model, threads=threads)
    return InspectorScheduler(
        base,
        judge,
        ask=judge.ask,
        max_rejections=judge.max_rejections if max_rejections is None else max_rejections,
        interval=judge.interval if interval is None else interval,
        name=name or f"inspect:{model.stem}:{base.name}",
    )
