"""The seeds of a training run: arrival sequences drawn from the run's Generator, never
one of the validation seeds (so validation measures episodes the policy never trained on).
"""

from __future__ import annotations

import numpy as np

from idlegate.training.config import WorkloadSpec
from idlegate.training.rollout import WorkloadRef

SEED_RANGE = 2**31 - 1
"""Seeds are drawn uniformly from [0, SEED_RANGE)."""


def workload_ref(spec: WorkloadSpec, seed: int) -> WorkloadRef:
    resources = None if spec.resources is None else spec.resources.format()
    return WorkloadRef.of(spec.name, spec.options, seed, resources)


def draw_seed(rng: np.random.Generator, forbidden: set[int]) -> int:
    """A training seed that is not a validation seed."""
    while True:
        seed = int(rng.integers(SEED_RANGE))
        if seed not in forbidden:
            return seed
