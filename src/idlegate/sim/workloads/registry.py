"""The workload catalogue: every named workload, its config and its generator, entered in
`idlegate.sim.workloads.kinds.WORKLOADS` (what `idlegate simulate`, `idlegate compare` and
training look workloads up in, with `workload_config` and `build_workload`).

The table is filled here and looked up there so that workloads made of other workloads
(`shift`'s phases, `teams`' streams) can look their parts up without importing this
module back; the package imports this module first, so the table is whole before any
workload module is used.
"""

from __future__ import annotations

from idlegate.sim.lublin import LublinConfig, lublin_workload
from idlegate.sim.swf import SwfConfig, swf_workload
from idlegate.sim.workloads.airflow_shapes import AirflowShapesConfig, airflow_shapes_workload
from idlegate.sim.workloads.alibaba import AlibabaConfig, alibaba_workload
from idlegate.sim.workloads.argo_shapes import ArgoShapesConfig, argo_shapes_workload
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
from idlegate.sim.workloads.kinds import WORKLOADS, WorkloadKind
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

CATALOGUE: tuple[WorkloadKind, ...] = (
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
"""Every named workload, in the order `describe_workloads` lists them."""

WORKLOADS.update((k.name, k) for k in CATALOGUE)
