"""The learned policy's feature columns: their names, order and normalisation (the schema).

`policy.features.Featurizer` fills these columns; the model (`policy.model`) reads them
by position, and checkpoints and ONNX files record `FEATURE_SCHEMA_VERSION`, so a model
only runs on the columns it was trained on. `FeatureConfig`, the normalisation's
settings, is stored with every model for the same reason.

Normalisation: counts and times span orders of magnitude (tasks 1–10⁵, seconds
0.1–10⁵), so they enter as ``log1p(x)``, times first divided by ``time_unit``; executor
counts enter as fractions of the cluster size K; flags are 0/1. Columns marked [CP]
are the idle-slot papers' critical-path/average-width features: with
``FeatureConfig(cp_features=False)`` they are zero (the ablation). Zeroing rather than
dropping keeps one input width for every model; a zero input column is exactly a
dropped one (its first-layer weights never affect the output nor get a gradient).

Stage features (`stage_x`, one row per stage):

=================  ======================================================================
remaining_tasks    log1p(tasks − launched): tasks not launched yet
executors          stage.executors / K: executors of its job working on it now
task_duration      log1p(duration / time_unit): the mean task duration (the estimate)
remaining_work     log1p((tasks − finished) · duration / time_unit)
bottom_level       log1p(bottom_level / time_unit): longest chain to an exit [CP]
runnable           1 if a decision may name it now (the stage mask)
delayed            1 if it already had its one idle slot
may_idle           1 if a decision may idle it now (the idle mask)
idling             1 while it is inside its idle slot
gang               1 for a gang stage (all tasks start together)
progress           finished / tasks
=================  ======================================================================

Job features (`job_x`, one row per job in the system):

=================  ======================================================================
remaining_cp       log1p(remaining_cp / time_unit): least time left on ∞ executors [CP]
average_width      log1p(total_work / critical_path) [CP]
remaining_width    log1p(remaining_work / remaining_cp), 0 when done [CP]
remaining_work     log1p(remaining_work / time_unit)
total_work         log1p(total_work / time_unit)
held               held / K: executors working for the job now
cap                cap / K: parallelism cap of the latest decision (0: none yet)
time_in_system     log1p((now − arrival) / time_unit)
unlaunched         log1p(tasks of the job not launched yet)
local_free         free_executors_from(job) / K: free executors local to the job
launchable         log1p(number of the job's stages in the stage mask)
idle_inserted      log1p(idle seconds inserted so far / time_unit)
=================  ======================================================================

Global features (`global_x`, shape [1, F]); the window is the last ``arrival_window``
entries of `view.arrival_log`, n of them, the oldest at t₁:

=================  ======================================================================
free_executors     free / K
jobs               log1p(jobs in system)
executors          log1p(K)
backlog            log1p(Σ remaining_work / K / time_unit): seconds of queued work
arrival_rate       log1p(λ · time_unit), λ = (n − 1) / max(now − t₁, time_unit)
offered_load       min(λ · mean work in window / K, load_clip): the recent offered load
size_mean          mean of log1p(work / time_unit) over the window
size_std           standard deviation of the same
size_max           maximum of the same
since_arrival      log1p((now − latest arrival) / time_unit)
=================  ======================================================================

Arrival-history features (`global_x`, after the columns above, only with
``FeatureConfig(arrival_features=True)``; off by default, so every model trained without
them keeps its input width and its answers). Over the same window, an arrival is
*large* when its work is at least `large_ratio` times the window's smallest:

=================  ======================================================================
since_large        log1p((now − latest large arrival) / time_unit); none: of the oldest
since_small        the same for the latest small arrival
large_recent       log1p(large arrivals in the last `recent_seconds`)
small_recent       log1p(small arrivals in the last `recent_seconds`)
small_after_large  log1p(small arrivals since the latest large one)
=================  ======================================================================

Resource features (appended to `stage_x`, `job_x` and `global_x`, in this order after
every other column, only with ``FeatureConfig(resource_features=True)``; off by default,
so every model trained without them keeps its widths and its answers). They say what a
pool of CPU, memory and GPUs adds to a pool of pods (`idlegate.sim.pool`): each is 0 on
a pods-only pool (`--pool-size N`), and 0 for a stage whose tasks take no more of any
resource than their one pod's share 1/K, so a model reads them through a residual
adapter (`policy.model.ResourceAdapter`) that adds exactly nothing there. A task's
*pod units* u = max(1, K · its dominant share of the pool) (`policy.drf.task_share`): 1
for a task that takes no more than one pod's share of anything, K for one that takes a
whole resource.

====================  ====================================================================
demand_share          stage: log u, the task's size in pods' shares
short_of_room         stage: the fraction of its tasks not launched yet that the free
                      resources cannot hold now (0 for a stage that needs only a pod,
                      or that is not runnable)
dominant_held         job: its dominant share of the pool minus held / K (DRF's share
                      beyond its pods')
weighted_work         job: log(Σ u · w / Σ w) over its unfinished stages, w their
                      remaining work: how much heavier its work is in the pool's measure
free_cpu              global: free CPU / CPU capacity − free / K (0 if not counted)
free_memory           global: the same for memory
free_other            global: the least of the same over the other resources counted
====================  ====================================================================

Schema history: 2 added `wait_mask` (the WAIT action), later the optional arrival-history
and resource columns (absent unless enabled: version 2 models are unchanged); 1 was the first release.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from pydantic import ConfigDict, Field, StrictBool, StrictInt

from idlegate.config import Config

FEATURE_SCHEMA_VERSION: Final = 2
"""Bump whenever a column, its order or its normalisation changes (models record it)."""

STAGE_FEATURES: Final = (
    "remaining_tasks",
    "executors",
    "task_duration",
    "remaining_work",
    "bottom_level",
    "runnable",
    "delayed",
    "may_idle",
    "idling",
    "gang",
    "progress",
)
JOB_FEATURES: Final = (
    "remaining_cp",
    "average_width",
    "remaining_width",
    "remaining_work",
    "total_work",
    "held",
    "cap",
    "time_in_system",
    "unlaunched",
    "local_free",
    "launchable",
    "idle_inserted",
)
GLOBAL_FEATURES: Final = (
    "free_executors",
    "jobs",
    "executors",
    "backlog",
    "arrival_rate",
    "offered_load",
    "size_mean",
    "size_std",
    "size_max",
    "since_arrival",
)
ARRIVAL_FEATURES: Final = (
    "since_large",
    "since_small",
    "large_recent",
    "small_recent",
    "small_after_large",
)
RESOURCE_STAGE_FEATURES: Final = ("demand_share", "short_of_room")
RESOURCE_JOB_FEATURES: Final = ("dominant_held", "weighted_work")
RESOURCE_GLOBAL_FEATURES: Final = ("free_cpu", "free_memory", "free_other")
CP_STAGE_FEATURES: Final = ("bottom_level",)
CP_JOB_FEATURES: Final = ("remaining_cp", "average_width", "remaining_width")
NUM_STAGE_FEATURES: Final = len(STAGE_FEATURES)
NUM_JOB_FEATURES: Final = len(JOB_FEATURES)
NUM_GLOBAL_FEATURES: Final = len(GLOBAL_FEATURES)


class FeatureConfig(Config):
    """How features are computed; stored with every model so inference matches training."""

    model_config = ConfigDict(title="the featurizer")

    cp_features: StrictBool = True
    """False: zero the [CP] columns (the papers' ablation without CP/width features)."""
    time_unit: float = Field(1.0, gt=0)
    """Seconds per unit before log1p: durations and works are log1p(seconds / time_unit)."""
    arrival_window: StrictInt = Field(20, ge=2)
    """How many recent arrivals the arrival-rate and job-size estimates use."""
    max_cap_levels: StrictInt = Field(64, ge=2)
    """Most cap levels offered; clusters with more executors get geometric levels."""
    load_clip: float = Field(4.0, gt=0)
    """Upper clip of the offered-load estimate (bursts at t=0 would give infinity)."""
    arrival_features: StrictBool = False
    """True: append the arrival-history columns (`ARRIVAL_FEATURES`) to `global_x`."""
    large_ratio: float = Field(4.0, gt=1)
    """Arrival history: an arrival is large at this many times the window's least work."""
    recent_seconds: float = Field(60.0, gt=0)
    """Arrival history: the span of the recent-arrival counts."""
    resource_features: StrictBool = False
    """True: append the resource columns (`RESOURCE_STAGE_FEATURES`, `RESOURCE_JOB_FEATURES`,
    `RESOURCE_GLOBAL_FEATURES`), all 0 on a pods-only pool."""


def num_stage_features(config: FeatureConfig) -> int:
    """The width of `stage_x` under `config` (the resource columns when enabled)."""
    return NUM_STAGE_FEATURES + (len(RESOURCE_STAGE_FEATURES) if config.resource_features else 0)


def num_job_features(config: FeatureConfig) -> int:
    """The width of `job_x` under `config` (the resource columns when enabled)."""
    return NUM_JOB_FEATURES + (len(RESOURCE_JOB_FEATURES) if config.resource_features else 0)


def num_global_features(config: FeatureConfig, *, resources: bool = True) -> int:
    """The width of `global_x` under `config`: the arrival-history columns when enabled,
    then the resource columns when enabled (and `resources`: without them, the width a
    model's base layers read)."""
    width = NUM_GLOBAL_FEATURES + (len(ARRIVAL_FEATURES) if config.arrival_features else 0)
    if resources and config.resource_features:
        width += len(RESOURCE_GLOBAL_FEATURES)
    return width


def cap_levels(num_executors: int, max_levels: int) -> np.ndarray:
    """The parallelism caps a decision may choose from: 1..K, or geometric levels ending at K."""
    if num_executors <= max_levels:
        return np.arange(1, num_executors + 1, dtype=np.int64)
    levels = np.unique(np.rint(np.geomspace(1, num_executors, max_levels)).astype(np.int64))
    levels[-1] = num_executors
    return levels
