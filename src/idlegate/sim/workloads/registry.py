"""The workload registry: names, their configs and generators, and `build_workload`.

`WORKLOADS` is what `idlegate simulate`, `idlegate compare` and training look workloads up
in; `workload_config` validates a CLI's options (with '-' or '_') into the typed config and
turns validation errors into `IdlegateError` sentences.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from idlegate.config import Config, describe
from idlegate.errors import IdlegateError, reject_unknown
from idlegate.sim.engine import Workload
from idlegate.sim.lublin import LublinConfig, lublin_workload
from idlegate.sim.swf import SwfConfig, swf_workload
from idlegate.sim.workloads.airflow_shapes import AirflowShapesConfig, airflow_shapes_workload
from idlegate.sim.workloads.alibaba import AlibabaConfig, alibaba_workload
from idlegate.sim.workloads.argo_shapes import ArgoShapesConfig, argo_shapes_workload
from idlegate.sim.workloads.base import SeedLike, as_rng
from idlegate.sim.workloads.file import FileConfig, file_workload
from idlegate.sim.workloads.follow import FollowConfig, follow_workload
from idlegate.sim.workloads.generators import (
    bursty_workload,
    mixed_workload,
    synthetic_workload,
    tpch_like_workload,
    tpch_workload,
)
from idlegate.sim.workloads.k8s_batch import K8sBatchConfig, k8s_batch_workload
from idlegate.sim.workloads.options import (
    BurstyConfig,
    MixedConfig,
    SyntheticConfig,
    TpchConfig,
    TpchLikeConfig,
)
from idlegate.sim.workloads.push import PushConfig, push_workload
from idlegate.sim.workloads.recurring import RecurringConfig, recurring_workload
from idlegate.sim.workloads.shared import SharedConfig, shared_workload
from idlegate.sim.workloads.shift import ShiftConfig, shift_workload
from idlegate.sim.workloads.teams import TeamsConfig, teams_workload


@dataclass(frozen=True)
class WorkloadKind:
    """A named workload: its config model and its generator."""

    name: str
    config: type[Config]
    """Its options; input-only ones are the model's `EXTRA_OPTIONS` (the rigid workloads'
    models, below this package, have none)."""
    generate: Callable[[Any, SeedLike], Workload]
    summary: str

    def options(self) -> dict[str, str]:
        """Option name → description (what `build_workload` accepts for this workload)."""
        out = {k: f.description or "" for k, f in self.config.model_fields.items()}
        out.update(getattr(self.config, "EXTRA_OPTIONS", {}))
        return dict(sorted(out.items()))


WORKLOADS: dict[str, WorkloadKind] = {
    k.name: k
    for k in (
        WorkloadKind(
            "synthetic",
            SyntheticConfig,
            synthetic_workload,
            "one-stage jobs of 10 s or 50 s work, Poisson arrivals (idle-slot papers)",
        ),
        WorkloadKind(
            "tpch",
            TpchConfig,
            tpch_workload,
            "Decima's streaming TPC-H (needs the traces: --tpch-dir or IDLEGATE_TPCH_DIR)",
        ),
        WorkloadKind(
            "tpch-like",
            TpchLikeConfig,
            tpch_like_workload,
            "synthetic random DAGs shaped like TPC-H query plans (no data needed)",
        ),
        WorkloadKind(
            "mixed",
            MixedConfig,
            mixed_workload,
            "one stream: fraction alpha synthetic two-type jobs, the rest TPC-H(-like) DAGs",
        ),
        WorkloadKind(
            "bursty",
            BurstyConfig,
            bursty_workload,
            "sessions of ~4 short jobs (ON/OFF Markov-modulated) plus Poisson long jobs, load 0.7",
        ),
        WorkloadKind(
            "k8s-batch",
            K8sBatchConfig,
            k8s_batch_workload,
            "Argo/Airflow-style pod pipelines of minutes: cron bursts every 15 min + ad-hoc "
            "jobs, load 0.7",
        ),
        WorkloadKind(
            "argo-shapes",
            ArgoShapesConfig,
            argo_shapes_workload,
            "Argo Workflows shaped like Argo's examples (diamonds, steps, loops, map-reduce, "
            "CI), pods of minutes, load 0.7",
        ),
        WorkloadKind(
            "airflow-shapes",
            AirflowShapesConfig,
            airflow_shapes_workload,
            "Airflow DAG runs shaped like Airflow's example DAGs (task groups, mapped tasks, "
            "fan-outs, example_complex), pods of minutes, load 0.7",
        ),
        WorkloadKind(
            "alibaba",
            AlibabaConfig,
            alibaba_workload,
            "DAG jobs of Alibaba's 2018 production trace, Poisson arrivals, 100 executors, "
            "load 0.85 (needs the trace: --alibaba-dir or IDLEGATE_ALIBABA_DIR)",
        ),
        WorkloadKind(
            "follow",
            FollowConfig,
            follow_workload,
            "each long job followed after a random lag by a session of 3-4 short jobs, load 0.7",
        ),
        WorkloadKind(
            "push",
            PushConfig,
            push_workload,
            "one long and 3-4 short workflows per push, seconds apart, load 0.7",
        ),
        WorkloadKind(
            "recurring",
            RecurringConfig,
            recurring_workload,
            "named pipelines on cron-like schedules (period, phase, jitter) + ad-hoc jobs",
        ),
        WorkloadKind(
            "shift",
            ShiftConfig,
            shift_workload,
            "a regime shift: one generated workload, then another on the same cluster "
            "(TPC-H-like DAGs, then k8s-batch pods)",
        ),
        WorkloadKind(
            "teams",
            TeamsConfig,
            teams_workload,
            "teams of equal quota sharing one pool, each a queue (one floods, or carries "
            "one large workflow)",
        ),
        WorkloadKind(
            "shared",
            SharedConfig,
            shared_workload,
            "three teams on one pool of 96: Alibaba's heavy-tailed DAG jobs, scientific "
            "workflows of tens to hundreds of stages, small jobs bursting 5x an hour in",
        ),
        WorkloadKind(
            "file",
            FileConfig,
            file_workload,
            "workflows from a YAML/JSON file, or a history replayed at its recorded times",
        ),
        WorkloadKind(
            "swf",
            SwfConfig,
            swf_workload,
            "rigid jobs from an SWF trace (--file), a seeded window of --jobs-count jobs",
        ),
        WorkloadKind(
            "lublin",
            LublinConfig,
            lublin_workload,
            "rigid jobs from the Lublin-Feitelson model (256 nodes, daily cycle)",
        ),
    )
}


def workload_kind(name: str) -> WorkloadKind:
    """The registry entry `name`, or an IdlegateError listing the valid names."""
    kind = WORKLOADS.get(name)
    if kind is None:
        # a file named where the workload's name goes: the `file` workload reads it
        hint = ""
        if name.lower().endswith(".swf"):
            hint = f" (to run the jobs of an SWF trace: --workload swf --file {name})"
        elif name.lower().endswith(FILE_SUFFIXES):
            hint = f" (to run the workflows of a file: --workload file --file {name})"
        raise IdlegateError(
            f"unknown workload {name!r}; choose one of: {', '.join(WORKLOADS)}{hint}"
        )
    return kind


FILE_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")
"""Endings of a file name given as a workload's name."""


def workload_config(name: str, **options: Any) -> Config:
    """Validate `options` for workload `name` into its typed config.

    Option names may use '-' or '_' ('num-executors' = 'num_executors'); options whose
    value is None are dropped (so a CLI can forward every flag it has).
    """
    kind = workload_kind(name)
    opts = {k.replace("-", "_"): v for k, v in options.items() if v is not None}
    valid = kind.options()
    reject_unknown(opts, valid, f"workload {name!r}", noun="option")
    try:
        return kind.config.model_validate(opts)
    except ValidationError as exc:
        raise IdlegateError(f"workload {name!r}: {describe(exc, kind.config)}") from None


def build_workload(name: str, seed: int = 0, **options: Any) -> Workload:
    """The workload `name` with `options` and `seed`: a pure function of the three."""
    config = workload_config(name, **options)
    rng = as_rng(seed)
    return workload_kind(name).generate(config, rng)


def describe_workloads() -> str:
    """One line per workload: name and summary (for CLI help)."""
    width = max(map(len, WORKLOADS))
    return "\n".join(f"{k.name:<{width}}  {k.summary}" for k in WORKLOADS.values())
