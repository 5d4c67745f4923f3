"""Behaviour-cloning warm start: imitate a heuristic's decisions before REINFORCE.

The teacher (fair or SJF-CP) runs whole episodes of the training workload. At each of
its decisions we record the policy's `Observation` of that state and the teacher's
`Decision` mapped into the policy's action space (`decision_to_choice`): the stage's
row, idle level 0 (or the nearest level for a teacher that idles), and the smallest
legal cap level at or above the teacher's cap. A WAIT answer becomes the policy's WAIT
choice when WAIT is legal for the policy (`Observation.wait_mask`, and the model has
the WAIT action); otherwise it is skipped.

The model then minimises the cross-entropy −(1/B) Σ log π(a_teacher | s) over
minibatches (Adam), the log-probabilities coming from `policy.model.evaluate_batch`
exactly as in the RL update. Imitation accuracy is the fraction of recorded states
where the greedy policy (`policy.actions.choose`, argmax of stage, then idle level,
then cap) picks exactly the teacher's choice.

A cloned policy drifts into states the teacher never visits, where it has no examples
(its errors compound). `BCSpec.dagger_rounds` adds DAgger rounds (Ross, Gordon & Bagnell,
AISTATS 2011): the cloned policy acts, the teacher labels every state it visits
(`Imitator` with an `actor`), and the model is fitted again on all decisions so far.

The teacher may know the future: the simulator tells the `Imitator` the run's arrivals
(`foresee`) and it passes them on, so the oracle planner
(``lookahead?futures=oracle:BASE``) labels states while the student sees only the past
(the ``idle`` preset, `training.presets`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import inf
from typing import Any

import numpy as np
import torch

from idlegate.policy import make_scheduler
from idlegate.policy.actions import (
    WAIT_CHOICE,
    ActionChoice,
    ActionConfig,
    choose,
    decode,
    idle_slot,
)
from idlegate.policy.columns import FeatureConfig
from idlegate.policy.features import Featurizer, Observation
from idlegate.policy.model import PolicyNet, evaluate_batch
from idlegate.policy.model_config import ModelConfig
from idlegate.sim.engine import JobArrival, Workload, simulate
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision, Scheduler
from idlegate.training.rollout import PackedObservations, onnx_evaluator


def decision_to_choice(obs: Observation, decision: Decision, actions: ActionConfig) -> ActionChoice:
    """The `ActionChoice` indices closest to a heuristic's `decision` in the policy's action space.

    Idle: level g = round(d / (r·l/G)) clipped to 1..G (only with the idle head, for a
    stage that may idle; otherwise the decision counts as a launch). Launch: the first
    legal cap level (above what the job holds) at or above the decision's cap, else the
    highest legal level.
    """
    row = obs.row_of(decision.stage)
    if decision.idle_delay > 0 and actions.idle_head and idle_slot(obs, row) >= 0:
        unit = actions.idle_ratio * decision.stage.duration / actions.idle_levels
        level = round(decision.idle_delay / unit) if unit > 0 else actions.idle_levels
        return ActionChoice(row, int(min(max(level, 1), actions.idle_levels)), -1)
    job = int(obs.stage_job[row])
    legal = np.flatnonzero(obs.cap_mask[job])
    at_least = legal[obs.cap_levels[legal] >= decision.parallelism_cap]
    cap = int(at_least[0]) if at_least.size else int(legal[-1])
    return ActionChoice(row, 0, cap)


Actor = Callable[[Observation], ActionChoice]
"""Picks the choice that is carried out in a state (DAgger: the policy being trained)."""


class Imitator:
    """Wraps a heuristic `Scheduler`: records its decision in every state.

    Without an `actor` the teacher's decisions are also carried out (plain behaviour
    cloning). With one, the actor's choice is carried out instead, so the recorded states
    are those the actor visits, each labelled with what the teacher would have done there
    (DAgger, Ross et al. 2011).
    """

    def __init__(
        self,
        teacher: Scheduler,
        features: FeatureConfig,
        actions: ActionConfig,
        actor: Actor | None = None,
    ) -> None:
        self.teacher = teacher
        self.name = f"imitate-{teacher.name}"
        self.featurizer = Featurizer(features)
        self.actions = actions
        self.actor = actor
        self.observations: list[Observation] = []
        self.choices: list[ActionChoice] = []

    def reset(self, rng: Any) -> None:
        self.teacher.reset(rng)
        self.featurizer.reset()
        self.observations, self.choices = [], []

    def foresee(self, arrivals: Sequence[JobArrival]) -> None:
        """The simulator tells the run's arrivals: passed on to a teacher that uses them
        (the oracle planner, ``futures=oracle``); the student never sees them."""
        if callable(tell := getattr(self.teacher, "foresee", None)):
            tell(arrivals)

    def decide(self, view: ClusterView) -> Action:
        action = self.teacher.decide(view)
        obs = self.featurizer(view)
        if isinstance(action, Decision):
            label: ActionChoice | None = decision_to_choice(obs, action, self.actions)
        elif self.actions.wait_action and obs.wait_mask[0] and obs.stage_mask.any():
            label = WAIT_CHOICE
        else:
            label = None
        if label is not None:
            self.observations.append(obs.stored())
            self.choices.append(label)
        if self.actor is None:
            return action
        if not obs.stage_mask.any():
            return WAIT
        return decode(obs, self.actor(obs), self.actions)


@dataclass
class Demonstrations:
    """A teacher's recorded decisions (from one or more episodes)."""

    observations: list[Observation]
    choices: list[ActionChoice]
    avg_jct: float
    """The teacher's average JCT over the finished jobs of the episodes."""

    def __getstate__(self) -> dict[str, Any]:  # pack the observations for the trip home
        return {**self.__dict__, "observations": PackedObservations(self.observations)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({**state, "observations": state["observations"].unpack()})


def record_demonstrations(
    workload: Workload,
    seed: int,
    *,
    heuristic: str,
    model_config: dict[str, Any],
    max_time: float = inf,
    actor_onnx: bytes | None = None,
) -> Demonstrations:
    """One episode labelled by the teacher (a top-level function so that workers can run it).

    `heuristic` is any scheduler spec: a heuristic, ``analytic:BASE`` or the planner
    ``lookahead:BASE`` (whose WAITs and idle slots then become labels too).

    With `actor_onnx` (an exported policy) that policy acts, greedily, and the teacher
    only labels the states it visits; `avg_jct` is then the policy's.
    """
    cfg = ModelConfig.of(model_config)
    actor = None if actor_onnx is None else greedy_actor(actor_onnx)
    imitator = Imitator(make_scheduler(heuristic), cfg.features, cfg.actions, actor)
    result = simulate(workload, imitator, seed=seed, max_time=max_time)
    jcts = [r.jct for r in result.records]
    return Demonstrations(
        imitator.observations, imitator.choices, float(np.mean(jcts)) if jcts else inf
    )


def greedy_actor(onnx_bytes: bytes) -> Actor:
    """The exported policy's greedy choice (onnxruntime, one thread)."""
    evaluate = onnx_evaluator(onnx_bytes)

    def act(obs: Observation) -> ActionChoice:
        return choose(obs, *evaluate(obs), greedy=True)

    return act


@dataclass(frozen=True)
class BCReport:
    """What the warm start achieved."""

    samples: int
    epochs: int
    losses: tuple[float, ...]
    """Mean cross-entropy per epoch."""
    accuracy: float
    """Greedy imitation accuracy (exact stage, idle level and cap) on `accuracy_samples`."""
    accuracy_samples: int
    stage_accuracy: float
    """The same, for the stage alone."""
    teacher_avg_jct: float
    seconds: float = 0.0


def imitation_accuracy(
    model: PolicyNet, observations: Sequence[Observation], choices: Sequence[ActionChoice]
) -> tuple[float, float]:
    """(exact, stage-only) fraction of `observations` where the greedy choice is the target."""
    if not observations:
        return float("nan"), float("nan")
    exact = stage = 0
    with torch.inference_mode():
        for obs, target in zip(observations, choices, strict=True):
            out = [t.numpy() for t in model.run(obs)]
            got = choose(obs, *out, greedy=True)
            exact += got == target
            stage += got.stage_row == target.stage_row
    return exact / len(observations), stage / len(observations)


def behaviour_cloning(
    model: PolicyNet,
    demos: Demonstrations,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    rng: np.random.Generator,
    accuracy_samples: int = 2000,
    progress: Any = None,
) -> BCReport:
    """Fit `model` to the demonstrations by minibatch cross-entropy (in place).

    `progress(epoch, loss)` is called after each epoch when given.
    """
    obs, choices = demos.observations, demos.choices
    n = len(obs)
    # (a model on a fixed base policy trains its adapter only: `training.adapter`)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    losses: list[float] = []
    model.train()
    for epoch in range(epochs):
        order = rng.permutation(n)
        total = 0.0
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size].tolist()
            batch = [obs[i] for i in idx]
            log_prob, _ = evaluate_batch(model, batch, [choices[i] for i in idx])
            loss = -log_prob.mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
        losses.append(total / max(n, 1))
        if progress is not None:
            progress(epoch, losses[-1])
    model.eval()
    pick = rng.permutation(n)[: min(n, accuracy_samples)].tolist()
    acc, stage_acc = imitation_accuracy(model, [obs[i] for i in pick], [choices[i] for i in pick])
    return BCReport(
        samples=n,
        epochs=epochs,
        losses=tuple(losses),
        accuracy=acc,
        accuracy_samples=len(pick),
        stage_accuracy=stage_acc,
        teacher_avg_jct=demos.avg_jct,
    )


def merge_demonstrations(
    parts: Sequence[Demonstrations], *, teacher_avg_jct: float | None = None
) -> Demonstrations:
    """All episodes' decisions in one set.

    Its `avg_jct` is `teacher_avg_jct` when given (DAgger parts carry the acting policy's
    JCT, not the teacher's), else the mean over the parts.
    """
    obs = [o for p in parts for o in p.observations]
    choices = [c for p in parts for c in p.choices]
    if teacher_avg_jct is None:
        jcts = [p.avg_jct for p in parts if p.avg_jct < inf]
        teacher_avg_jct = float(np.mean(jcts)) if jcts else inf
    return Demonstrations(obs, choices, teacher_avg_jct)
