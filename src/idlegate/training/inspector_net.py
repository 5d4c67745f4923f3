"""The inspector's network and the judges that decide with it (`training.inspector`).

`InspectorNet` is the torch MLP that is trained and exported; `NumpyMlp` runs its
weights in numpy during rollouts (no torch per decision); a judge is what
`policy.inspector.InspectorScheduler` asks about each pick, and records what it saw and
answered: `SamplingJudge` draws from the net, `ReplayJudge` replays forced answers then
takes the net's argmax, `RuleJudge` is the hand-set rule the warm start clones.
`InspectorDecisions` binds the net to an iteration's decisions for `training.ppo`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from idlegate.policy.inspector import (
    ACCEPT,
    FEATURE_NAMES,
    NUM_FEATURES,
    REJECT,
    WAIT_SCALE,
    log_scaled,
)
from idlegate.training.math import categorical, to_tensor
from idlegate.training.ppo import ActionEvaluation


class InspectorNet(nn.Module):
    """[B, F] features → [B, 2] logits (accept, reject); tanh hidden layers."""

    def __init__(self, hidden: tuple[int, ...] = (32, 16, 8), initial_reject: float = 0.5) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = NUM_FEATURES
        for h in hidden:
            layers += [nn.Linear(width, h), nn.Tanh()]
            width = h
        out = nn.Linear(width, 2)
        # first decisions nearly independent of the features: reject with `initial_reject`
        nn.init.normal_(out.weight, std=0.01)
        nn.init.zeros_(out.bias)
        with torch.no_grad():
            out.bias[REJECT] = math.log(initial_reject / (1.0 - initial_reject))
        self.net = nn.Sequential(*layers, out)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features)


class NumpyMlp:
    """The net's weights as numpy arrays: its forward pass without torch (for rollouts)."""

    def __init__(self, net: InspectorNet) -> None:
        linears = [m for m in net.net if isinstance(m, nn.Linear)]
        self.layers = [
            (
                m.weight.detach().numpy().T.astype(np.float64),
                m.bias.detach().numpy().astype(np.float64),
            )
            for m in linears
        ]

    def logits(self, x: np.ndarray) -> np.ndarray:
        """[F] features → [2] logits."""
        h = np.asarray(x, dtype=np.float64)
        for w, b in self.layers[:-1]:
            h = np.tanh(h @ w + b)
        w, b = self.layers[-1]
        return h @ w + b


@dataclass
class SamplingJudge:
    """A judge that draws accept/reject from the MLP (or takes the argmax) and records them."""

    mlp: NumpyMlp
    rng: np.random.Generator
    greedy: bool = False
    features: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)

    def __call__(self, features: np.ndarray) -> bool:
        logits = self.mlp.logits(features)
        if self.greedy:
            action = ACCEPT if logits[ACCEPT] >= logits[REJECT] else REJECT
        else:
            p_reject = 1.0 / (1.0 + math.exp(logits[ACCEPT] - logits[REJECT]))
            action = REJECT if self.rng.random() < p_reject else ACCEPT
        self.features.append(features)
        self.actions.append(action)
        return action == ACCEPT


@dataclass
class ReplayJudge:
    """Replays `forced` actions for its first calls, then takes the MLP's argmax; records all.

    The simulator is deterministic for rigid jobs, so a rerun with the first k actions of
    a run reaches the same k-th state: flipping action k measures what it was worth.
    """

    mlp: NumpyMlp
    forced: list[int] = field(default_factory=list)
    features: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)

    def __call__(self, features: np.ndarray) -> bool:
        i = len(self.actions)
        if i < len(self.forced):
            action = self.forced[i]
        else:
            logits = self.mlp.logits(features)
            action = ACCEPT if logits[ACCEPT] >= logits[REJECT] else REJECT
        self.features.append(features)
        self.actions.append(action)
        return action == ACCEPT


@dataclass
class RuleJudge:
    """The hand-set rule: accept iff the pick could start within `seconds`; records all."""

    seconds: float
    features: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)

    def accepts(self, features: np.ndarray) -> bool:
        """True iff the `start_delay` feature is below the rule's threshold."""
        index = FEATURE_NAMES.index("start_delay")
        return bool(features[index] < log_scaled(self.seconds, WAIT_SCALE))

    def __call__(self, features: np.ndarray) -> bool:
        accept = self.accepts(features)
        self.features.append(features)
        self.actions.append(ACCEPT if accept else REJECT)
        return accept


class InspectorDecisions:
    """The net bound to an iteration's [D, F] features and [D] actions (a `training.ppo`
    Agent)."""

    def __init__(self, net: InspectorNet, features: np.ndarray, actions: np.ndarray) -> None:
        self.net = net
        self.x = to_tensor(features)
        self.actions = torch.as_tensor(actions, dtype=torch.long)

    def parameters(self) -> Iterator[nn.Parameter]:
        return self.net.parameters()

    def evaluate(self, rows: np.ndarray) -> ActionEvaluation:
        at = torch.as_tensor(rows)
        log_probs = torch.log_softmax(self.net(self.x[at]), dim=-1)
        return ActionEvaluation(*categorical(log_probs, self.actions[at]))
