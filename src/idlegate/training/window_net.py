"""The split-window agent's network (`training.window` trains it, `policy.window` runs
its ONNX export).

`WindowNet` is the torch model that is trained and exported; `NumpyWindowNet` runs its
weights in numpy during rollouts (a tenth of a batch-1 torch call); `WindowDecisions`
binds it to an iteration's decisions for `training.ppo`.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch import Tensor, nn

from idlegate.policy.window import (
    CAN_START,
    CLUSTER_FEATURES,
    ILLEGAL_LOGIT,
    PRESENT,
    RUNNING,
    SLOT_FEATURES,
    check_window,
    legal_actions,
)
from idlegate.training.math import categorical, to_tensor
from idlegate.training.ppo import ActionEvaluation

FORWARD_PRIOR = 2.0
"""The forward logit's initial bias is −FORWARD_PRIOR (see `WindowNet`)."""


class WindowNet(nn.Module):
    """Slot scorer + forward/value heads over the window (see `policy.window` for shapes).

    Each slot's features, joined with the cluster features, go through one shared MLP
    to a hidden vector and a logit (so a job is scored the same in any slot, and head
    and tail slots differ only by their tail flag). The mean of the present slots'
    hidden vectors with the cluster features feeds the forward logit and the value.
    Illegal actions (`policy.window.legal_actions`) get `ILLEGAL_LOGIT`.
    """

    def __init__(self, m_head: int, m_tail: int, hidden: int = 32) -> None:
        super().__init__()
        check_window(m_head, m_tail)
        self.m_head, self.m_tail, self.hidden = m_head, m_tail, hidden
        h2 = max(4, hidden // 2)
        self.slot = nn.Sequential(
            nn.Linear(SLOT_FEATURES + CLUSTER_FEATURES, hidden),
            nn.Tanh(),
            nn.Linear(hidden, h2),
            nn.Tanh(),
        )
        self.slot_logit = nn.Linear(h2, 1)
        self.forward_head = nn.Sequential(
            nn.Linear(h2 + CLUSTER_FEATURES, hidden), nn.Tanh(), nn.Linear(hidden, 1)
        )
        self.value_head = nn.Sequential(
            nn.Linear(h2 + CLUSTER_FEATURES, hidden), nn.Tanh(), nn.Linear(hidden, 1)
        )
        # start close to work-conserving: forward about e^-FORWARD_PRIOR times as likely
        # as a pick, so early rollouts do not waste most decisions idling
        with torch.no_grad():
            self.forward_head[-1].bias.fill_(-FORWARD_PRIOR)

    def forward(self, slots: Tensor, cluster: Tensor) -> tuple[Tensor, Tensor]:
        """(log-probabilities [B, M + 1], value [B]) of slots [B, M, F] and cluster [B, C]."""
        m = slots.shape[1]
        joined = torch.cat([slots, cluster.unsqueeze(1).expand(-1, m, -1)], dim=-1)
        hidden = self.slot(joined)
        present = slots[..., PRESENT : PRESENT + 1]
        pooled = (hidden * present).sum(1) / present.sum(1).clamp(min=1.0)
        summary = torch.cat([pooled, cluster], dim=-1)
        logits = torch.cat([self.slot_logit(hidden).squeeze(-1), self.forward_head(summary)], -1)
        legal = torch.cat(
            [
                (slots[..., PRESENT] > 0.5) & (slots[..., CAN_START] > 0.5),
                cluster[..., RUNNING : RUNNING + 1] > 0.5,
            ],
            dim=-1,
        )
        logits = torch.where(legal, logits, torch.full_like(logits, ILLEGAL_LOGIT))
        return torch.log_softmax(logits, dim=-1), self.value_head(summary).squeeze(-1)


class NumpyWindowNet:
    """A numpy copy of a `WindowNet`'s forward pass for one observation (fast rollouts).

    Batch-1 torch calls cost about 1 ms per decision in module overhead; this costs a
    tenth of that. `tests/test_window.py` checks it against the torch model.
    """

    def __init__(self, model: WindowNet) -> None:
        self.w = {k: v.detach().numpy().astype(np.float64) for k, v in model.state_dict().items()}

    def _linear(self, name: str, x: np.ndarray) -> np.ndarray:
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def __call__(self, slots: np.ndarray, cluster: np.ndarray) -> tuple[np.ndarray, float]:
        """(log-probabilities [M + 1], value) of slots [M, F] and cluster [C]."""
        m = slots.shape[0]
        joined = np.concatenate([slots, np.broadcast_to(cluster, (m, cluster.size))], axis=1)
        hidden = np.tanh(self._linear("slot.2", np.tanh(self._linear("slot.0", joined))))
        present = slots[:, PRESENT : PRESENT + 1]
        pooled = (hidden * present).sum(0) / max(float(present.sum()), 1.0)
        summary = np.concatenate([pooled, cluster])
        forward = self._linear("forward_head.2", np.tanh(self._linear("forward_head.0", summary)))
        value = self._linear("value_head.2", np.tanh(self._linear("value_head.0", summary)))
        logits = np.concatenate([self._linear("slot_logit", hidden)[:, 0], forward])
        logits = np.where(legal_actions(slots, cluster), logits, ILLEGAL_LOGIT)
        shifted = logits - logits.max()
        return shifted - np.log(np.exp(shifted).sum()), float(value[0])


class WindowDecisions:
    """The model bound to an iteration's decisions (a `training.ppo` Agent)."""

    def __init__(
        self, model: WindowNet, slots: np.ndarray, cluster: np.ndarray, actions: np.ndarray
    ) -> None:
        self.model = model
        self.slots, self.cluster = to_tensor(slots), to_tensor(cluster)
        self.actions = torch.as_tensor(actions)

    def parameters(self) -> Iterator[nn.Parameter]:
        return self.model.parameters()

    def evaluate(self, rows: np.ndarray) -> ActionEvaluation:
        at = torch.as_tensor(rows)
        log_probs, values = self.model(self.slots[at], self.cluster[at])
        return ActionEvaluation(*categorical(log_probs, self.actions[at]), values)
