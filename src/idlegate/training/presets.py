"""The named training presets: config data a YAML file's values are merged over.

`training.config` validates them (`load_config`); they are plain data
here so the presets read as one table.

Presets (wall times measured on this shared 2-core machine with 2 workers):

* ``quick`` — TPC-H-like DAGs on 10 executors at load 0.85 (1 + 60 jobs per training
  sequence, 1 + 40 per validation sequence): BC warm start from SJF-CP, then 120
  REINFORCE iterations of 8 rollouts; 6 min 48 s (≤ 10 minutes); beats FIFO (and
  SJF-CP) on its 8 validation seeds.
* ``full`` — Decima's TPC-H streaming setting (50 executors, 1 + 200 jobs, mean
  interarrival 25 s, moving delay and measured task waves; needs the traces, see
  `idlegate.sim.tpch`): BC warm start from fair (its WAITs included) with 3 DAgger
  rounds, then 150 REINFORCE iterations with small steps (lr 3e-4, entropy weight
  0.001); 34 minutes (≤ 1 hour).
* ``default`` — the shipped `policy/default.onnx`: the lookahead planner
  (`lookahead:srpt`, switching between fair, SRPT, SJF-CP and weighted fair by
  simulation) distilled by behaviour cloning and 2 DAgger rounds over a mixture of
  workloads (the demo's TPC-H-like setting, TPC-H at 25 s and 15 s, TPC-H-like on 10
  executors, synthetic two-type, bursty; needs the TPC-H traces); no RL iterations.
* ``resources`` — the shipped policy taught pools of CPU, memory and GPUs: its weights
  fixed (``base_policy: default``), only the resource adapter learns
  (`training.adapter`), by behaviour cloning of SRPT (which weighs work by demand on
  such a pool and backfills with a reservation) and 3 DAgger rounds on ``k8s-batch``
  with requests: 40 executors and 24, 32 or 40 CPUs (4 GiB per CPU, 2-4 GPUs), and
  docs/resources.md's pool (330 pods, 24 CPUs); validated on 40 executors and 32 CPUs.
* ``cluster`` — a cluster's own history (``--history HISTORY``, required): the train
  part of its time split replayed at its recorded arrivals on its pool, validated on the
  same part (4 duration seeds); BC warm start from the planner (`lookahead:srpt`) with
  1 DAgger round, no RL iterations (``--iterations N`` adds REINFORCE steps over whole
  replays of the part; 5 and 10 of them did not lower the validation JCT on k8s-batch).
  22 minutes on a 1,000-workflow k8s-batch history (700 in the train part), measured on
  this 2-core machine shared with five other jobs; the planner's teacher episodes
  dominate (docs/advise.md). `idlegate advise HISTORY --policy
  out/train-cluster/policy.onnx` reports on the rest of the history.
"""

from __future__ import annotations

from typing import Any

IDLE_TEACHER = (
    "lookahead?mode=decision&horizon=600&terminal_weight=0&futures=oracle"
    "&idle_levels=8&idle_ratio=0.5:analytic:sjf"
)
"""The ``idle`` preset's teacher: the oracle planner, its idle slots the student's levels."""


def _structured(name: str, k: int, **options: Any) -> dict[str, Any]:
    return {"name": name, "options": {"num_executors": k, "load": 0.7, **options}}


_QUICK_WORKLOAD = {
    "name": "tpch-like",
    "options": {"num_executors": 10, "init": 1, "num_stream": 60, "load": 0.85},
}

_REQUESTS_WORKLOAD = {"name": "k8s-batch", "options": {"num_executors": 40, "requests": True}}
"""k8s-batch with requests (CPU 0.1-8, memory to match, GPUs on half the train stages)."""

PRESETS: dict[str, dict[str, Any]] = {
    "quick": {
        "preset": "quick",
        "seed": 0,
        "workload": _QUICK_WORKLOAD,
        "validation": {
            "workload": {
                "name": "tpch-like",
                "options": {"num_executors": 10, "init": 1, "num_stream": 40, "load": 0.85},
            },
            "seeds": list(range(1_000_000, 1_000_008)),
            "every": 10,
        },
        "iterations": 120,
        "rollouts_per_sequence": 8,
        "lr": 2e-3,
        "entropy": {"weight": 0.01, "decay": 0.00008, "minimum": 0.001},
        "curriculum": {
            "initial_mean_seconds": 600.0,
            "increment_seconds": 15.0,
            "max_mean_seconds": 2000.0,
        },
        "max_update_decisions": 8192,
        "bc": {"heuristic": "sjf-cp", "episodes": 10, "epochs": 8, "batch_size": 256},
        "out_dir": "out/train-quick",
    },
    "full": {
        "preset": "full",
        "seed": 0,
        "workload": {
            "name": "tpch",
            "options": {"num_executors": 50, "init": 1, "num_stream": 200, "interarrival": 25.0},
        },
        "validation": {"seeds": list(range(1_000_000, 1_000_006)), "every": 10},
        "iterations": 150,
        "rollouts_per_sequence": 6,
        # small steps from the BC policy: at lr 1e-3 and β 0.01 REINFORCE drifted away
        # from it (docs/research/results.md, "The learned policies")
        "lr": 3e-4,
        "entropy": {"weight": 0.001, "decay": 0.0, "minimum": 0.001},
        "curriculum": {
            "initial_mean_seconds": 500.0,
            "increment_seconds": 15.0,
            "max_mean_seconds": 3000.0,
        },
        "max_update_decisions": 16384,
        "bc": {
            "heuristic": "fair",
            "episodes": 6,
            "episode_seconds": 2000.0,
            "epochs": 20,
            "batch_size": 512,
            # plain cloning lands 3.4 % above fair on validation, 3 DAgger rounds 0.3 %
            # (docs/research/results.md, "The learned policies")
            "dagger_rounds": 3,
        },
        "out_dir": "out/train-full",
    },
    "default": {
        "preset": "default",
        "seed": 0,
        # the demo's setting first: it is also the validation workload
        "workload": {
            "name": "tpch-like",
            "options": {"num_executors": 50, "init": 1, "num_stream": 100, "load": 0.85},
        },
        "mixture": [
            {
                "name": "tpch",
                "options": {
                    "num_executors": 50,
                    "init": 1,
                    "num_stream": 100,
                    "interarrival": 25.0,
                },
            },
            {
                "name": "tpch-like",
                "options": {"num_executors": 10, "init": 1, "num_stream": 60, "load": 0.85},
            },
            {"name": "synthetic", "options": {"load": 0.7}},
            {"name": "bursty", "options": {}},
            {
                "name": "tpch",
                "options": {
                    "num_executors": 50,
                    "init": 1,
                    "num_stream": 100,
                    "interarrival": 15.0,
                },
            },
        ],
        "validation": {
            "seeds": list(range(1_000_000, 1_000_006)),
            "every": 10,
            "reference_schedulers": ["fair", "sjf-cp", "srpt"],
        },
        "iterations": 0,
        "bc": {
            # the planner switches between fair, srpt, sjf-cp and weighted fair by
            # simulating each for a few job lengths (policy.lookahead)
            "heuristic": "lookahead:srpt",
            "episodes": 12,
            "episode_seconds": 3000.0,
            "epochs": 5,
            "batch_size": 512,
            "dagger_rounds": 2,
        },
        "out_dir": "out/train-default",
    },
    "cluster": {
        "preset": "cluster",
        "seed": 0,
        # the workload and the history section come from --history (history_settings)
        "validation": {
            "seeds": list(range(1_000_000, 1_000_004)),
            "every": 5,
            "reference_schedulers": ["fair", "sjf-cp", "srpt"],
        },
        # RL on top did not help (docs/advise.md); the settings below serve --iterations N
        "iterations": 0,
        "rollouts_per_sequence": 4,
        "lr": 3e-4,
        "entropy": {"weight": 0.001, "decay": 0.0, "minimum": 0.001},
        # a history is one recorded arrival sequence: every rollout replays all of its
        # train part (a memoryless cut would only ever show its beginning)
        "curriculum": {"enabled": False},
        "max_update_decisions": 8192,
        "bc": {
            "heuristic": "lookahead:srpt",
            "episodes": 4,
            "epochs": 5,
            "batch_size": 512,
            "dagger_rounds": 1,
        },
        "out_dir": "out/train-cluster",
    },
    "resources": {
        "preset": "resources",
        "seed": 0,
        # the shipped policy, fixed; only the resource adapter learns (training.adapter)
        "base_policy": "default",
        "model": {"features": {"resource_features": True}},
        "workload": _REQUESTS_WORKLOAD | {"resources": "cpu=32,memory=128Gi,nvidia.com/gpu=4"},
        "mixture": [
            _REQUESTS_WORKLOAD | {"resources": "cpu=24,memory=96Gi,nvidia.com/gpu=2"},
            _REQUESTS_WORKLOAD | {"resources": "cpu=40,memory=160Gi,nvidia.com/gpu=4"},
            # docs/resources.md's pool: pods never bind, CPUs do
            {
                "name": "k8s-batch",
                "options": {"num_executors": 330, "requests": True, "interarrival": 240.0},
                "resources": "cpu=24,memory=96Gi,nvidia.com/gpu=2",
            },
        ],
        "validation": {
            "seeds": list(range(1_000_000, 1_000_006)),
            "every": 10,
            "reference_schedulers": ["fair", "sjf-cp", "srpt"],
        },
        "iterations": 0,
        "bc": {
            "heuristic": "srpt",
            "episodes": 24,
            "epochs": 8,
            "batch_size": 512,
            "dagger_rounds": 3,
        },
        "out_dir": "out/train-resources",
    },
    "idle": {
        "preset": "idle",
        "seed": 0,
        "workload": _structured("follow", 2),
        "mixture": [
            _structured("push", 2),
            _structured("recurring", 2),
            _structured("follow", 3),
            _structured("push", 3),
            _structured("recurring", 3),
            _structured("follow", 2, uncorrelated=1.0),
        ],
        "validation": {
            "seeds": list(range(1_000_000, 1_000_006)),
            "every": 10,
            "reference_schedulers": ["fair", "sjf"],
        },
        "model": {
            "features": {"arrival_features": True},
            "actions": {"idle_levels": 8, "idle_ratio": 0.5},
        },
        "iterations": 0,
        "bc": {
            "heuristic": IDLE_TEACHER,
            "episodes": 7,
            "epochs": 8,
            "batch_size": 256,
            "dagger_rounds": 1,
        },
        "out_dir": "out/train-idle",
    },
}
"""Preset name → config data (merged under a YAML file's values)."""
