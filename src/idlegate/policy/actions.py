"""The learned policy's action: choosing from the model's log-probabilities, and decoding.

Shared by training (torch) and inference (ONNX), numpy only. A model returns four
masked log-probability tables for an `Observation` (names `MODEL_OUTPUTS`):

* `stage_logp` [N] and `wait_logp` [1] — one distribution over the stage rows plus
  WAIT (launch nothing until the next event); zero probability outside the stage mask,
  and for WAIT outside `wait_mask` or without `ActionConfig.wait_action`;
* `idle_logp` [M, I] — for each stage row that may idle (`Observation.idle_rows`, in that
  order) over idle levels g = 0..I−1 (I = G+1, or 1 without the idle head); every other
  stage launches (level 0) with probability 1;
* `cap_logp` [J, L] — per job row over cap levels; zero probability at levels not above
  the executors the job holds.

An action is chosen in that order — the stage (or WAIT), then its idle level, then
(only for a launch, g = 0) its job's cap level — and `decode` turns it into a `Decision`
or `WAIT`:

* WAIT (`WAIT_CHOICE`, stage row −1): nothing launches; free executors stay free until
  the next scheduling event (offered only where fair would wait: see `wait_mask`).
  Without it a policy must launch whenever an executor is free and a stage is runnable,
  which costs fair 40 % on the TPC-H traces (`benchmarks/fair_variants.py`), so a
  policy without WAIT cannot match fair;

* g > 0: idle the stage for d = r · l · g / G seconds, l = the stage's length (one task
  duration, `Stage.duration`), G = `idle_levels`, r = `idle_ratio`; the job's cap stays
  as it was (an idle decision launches nothing, so no cap is chosen);
* g = 0: launch with cap = the chosen level, raised to held + tasks for a gang stage (so
  all of its tasks start at once; the raise is a deterministic function of the sampled
  level, so the sampled level's log-probability stays the action's).

Every choice is re-masked here before the argmax or the draw, so a decoded action is
legal for the cluster whatever numbers the model produced.
"""

from __future__ import annotations

from typing import Final, NamedTuple

import numpy as np
from pydantic import ConfigDict, Field, StrictBool, StrictInt

from idlegate.config import Config
from idlegate.errors import IdlegateError
from idlegate.policy.features import Observation
from idlegate.sim.protocol import WAIT, Action, Decision

MODEL_OUTPUTS: Final = ("stage_logp", "cap_logp", "idle_logp", "wait_logp")
"""The model's outputs, in order (torch forward results and ONNX output names)."""

MASKED: Final = -1e9
"""Log-probability fill for masked entries inside the model: exp() of it is exactly 0."""


class ActionConfig(Config):
    """The idle part of the action space (the cap levels come from the features)."""

    model_config = ConfigDict(title="the action space")

    idle_head: StrictBool = True
    """False: no idle head, every decision launches (the Decima ablation)."""
    idle_levels: StrictInt = Field(4, ge=1)
    """G: idle lengths are d = r · l · g / G for g = 0..G."""
    idle_ratio: float = Field(1.0, gt=0, allow_inf_nan=False)
    """r: the longest idle slot is r times the stage's length."""
    wait_action: StrictBool = True
    """False: no WAIT action; the policy launches whenever it is asked (an ablation)."""

    @property
    def num_idle_levels(self) -> int:
        """I: the width of the idle table (G + 1 with the idle head, else 1)."""
        return self.idle_levels + 1 if self.idle_head else 1


class ActionChoice(NamedTuple):
    """A chosen action as indices into the model's tables."""

    stage_row: int
    """The stage row, or -1 for WAIT."""
    idle_level: int
    cap_index: int
    """Index into `Observation.cap_levels`; -1 for an idle decision or WAIT (no cap chosen)."""

    @property
    def is_wait(self) -> bool:
        return self.stage_row < 0


WAIT_CHOICE: Final = ActionChoice(-1, 0, -1)
"""The WAIT action as an ActionChoice."""


def _pick(
    logp: np.ndarray, mask: np.ndarray | None, greedy: bool, rng: np.random.Generator | None
) -> int:
    """Argmax, or a draw, over the entries of `logp` allowed by `mask` (None: all)."""
    if mask is not None:
        logp = np.where(mask, logp, -np.inf)
    i = int(logp.argmax())
    if logp[i] == -np.inf:
        raise IdlegateError("the policy was asked to choose among no allowed actions")
    if greedy or rng is None:
        return i
    p = np.exp(logp - logp[i])  # masked entries: exp(-inf) = 0 exactly
    cdf = np.cumsum(p)
    i = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    # rounding can land on the total: take the last entry with probability > 0
    return i if i < p.size and p[i] > 0 else int(np.flatnonzero(p)[-1])


def idle_slot(obs: Observation, row: int) -> int:
    """The row of `idle_logp` for stage row `row`, or -1 if the stage may not idle."""
    rows = obs.idle_rows
    i = int(np.searchsorted(rows, row))
    return i if i < rows.size and rows[i] == row else -1


def choose(
    obs: Observation,
    stage_logp: np.ndarray,
    cap_logp: np.ndarray,
    idle_logp: np.ndarray,
    wait_logp: np.ndarray | None = None,
    *,
    greedy: bool = True,
    rng: np.random.Generator | None = None,
) -> ActionChoice:
    """Stage or WAIT, then idle level, then (for a launch) cap level: argmax, or draws.

    `wait_logp` None (or masked by `obs.wait_mask`) leaves WAIT out of the choice.
    """
    if wait_logp is not None and bool(obs.wait_mask[0]):
        n = stage_logp.shape[0]
        both = np.concatenate([stage_logp, wait_logp[:1]])
        row = _pick(both, np.append(obs.stage_mask, True), greedy, rng)
        if row == n:
            return WAIT_CHOICE
    else:
        row = _pick(stage_logp, obs.stage_mask, greedy, rng)
    idle = 0
    if idle_logp.shape[1] > 1:
        slot = idle_slot(obs, row)
        if slot >= 0:
            idle = _pick(idle_logp[slot], None, greedy, rng)
    if idle > 0:
        return ActionChoice(row, idle, -1)
    job = int(obs.stage_job[row])
    return ActionChoice(row, 0, _pick(cap_logp[job], obs.cap_mask[job], greedy, rng))


def choice_log_prob(
    obs: Observation,
    choice: ActionChoice,
    stage_logp: np.ndarray,
    cap_logp: np.ndarray,
    idle_logp: np.ndarray,
    wait_logp: np.ndarray | None = None,
) -> float:
    """log π(choice): the sum of the parts that were chosen (numpy; for checks and logs)."""
    row, idle, cap = choice
    if choice.is_wait:
        if wait_logp is None:
            raise IdlegateError("a WAIT choice needs the model's wait_logp")
        return float(wait_logp[0])
    total = float(stage_logp[row])
    slot = idle_slot(obs, row)
    if slot >= 0:
        total += float(idle_logp[slot, idle])
    if cap >= 0:
        total += float(cap_logp[obs.stage_job[row], cap])
    return total


def idle_delay(length: float, level: int, config: ActionConfig) -> float:
    """Seconds of idle for level g of a stage of length l: r · l · g / G."""
    return config.idle_ratio * length * level / config.idle_levels


def decode(obs: Observation, choice: ActionChoice, config: ActionConfig) -> Action:
    """The `Decision` (or WAIT) for `choice` (legal whenever the choice respects the masks)."""
    if choice.is_wait:
        return WAIT
    stage = obs.stage(choice.stage_row)
    job = stage.job
    if choice.idle_level > 0:
        delay = idle_delay(stage.duration, choice.idle_level, config)
        return Decision(stage, max(job.cap, job.held), delay)
    levels = obs.cap_levels
    assert levels is not None  # a live observation's, as `obs.stage` has checked
    cap = int(levels[choice.cap_index])
    if stage.gang:
        cap = max(cap, job.held + stage.tasks)
    return Decision(stage, cap)
