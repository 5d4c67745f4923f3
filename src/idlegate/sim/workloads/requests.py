"""Realistic pod requests for the workloads of minute-scale pods (`k8s-batch`, `argo-shapes`,
`airflow-shapes`, each behind its ``requests`` option).

A pod of some kind of stage requests (`draw_requests`):

* CPU drawn log-uniformly in its kind's range (from 0.1 to 8 CPUs across the kinds), in
  steps of 100m;
* memory of 2 or 4 GiB per CPU (even odds: the ratios of general-purpose and
  memory-optimised nodes), in steps of 256 MiB and at least 256 MiB;
* one ``nvidia.com/gpu`` for a share of the stages of a kind that may use one (training,
  inference; none for most kinds).

The draws come from a stream of their own (`requests_stream`), taken from the workload's
root generator after its other streams, so a workload's jobs, run times and arrivals are
the same with and without requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class PodSize:
    """What the pods of one kind of stage request: a CPU range and a share using a GPU."""

    cpu_low: float
    """Fewest CPUs one pod requests (>= 0.1)."""
    cpu_high: float
    """Most CPUs one pod requests (<= 8 in the shipped workloads)."""
    gpu_share: float = 0.0
    """Fraction of these stages whose pods request one GPU."""


def draw_requests(rng: np.random.Generator, size: PodSize) -> dict[str, int | str]:
    """The requests of one stage's pods, as a ResourceList (module docstring)."""
    log_cpu = rng.uniform(math.log(size.cpu_low), math.log(size.cpu_high))
    cpu_tenths = max(1, round(10 * math.exp(log_cpu)))
    per_cpu = 2 if rng.random() < 0.5 else 4  # GiB per CPU
    memory = max(1, round(cpu_tenths * per_cpu * 1024 / 10 / 256)) * 256
    out: dict[str, int | str] = {"cpu": f"{cpu_tenths * 100}m", "memory": f"{memory}Mi"}
    if size.gpu_share > 0 and rng.random() < size.gpu_share:
        out[GPU] = 1
    return out


def requests_stream(root: np.random.Generator, wanted: bool) -> np.random.Generator | None:
    """The stream requests are drawn from (None unless `wanted`); call it after the
    workload's other streams are taken from `root`, so they do not move."""
    return np.random.default_rng(int(root.integers(2**63))) if wanted else None
