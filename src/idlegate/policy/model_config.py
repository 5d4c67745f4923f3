"""The learned policy's configuration: the network's sizes and its feature and action configs.

Stored with every checkpoint and ONNX export (`ModelConfig.model_dump()`, with its
`config_hash`), and the `model` section of a training config. Apart from the network
(`policy.model`, torch) so that the command line and the ONNX runtime read it without
torch.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import ConfigDict, Field, StrictInt

from idlegate.config import Config
from idlegate.policy.actions import ActionConfig
from idlegate.policy.columns import FeatureConfig


class ModelConfig(Config):
    """Sizes of the network plus the feature and action configs it was built for."""

    model_config = ConfigDict(title="the model")

    embed_dim: StrictInt = Field(8, ge=1)
    """D: width of stage, job and global embeddings (Decima's output_dim is 8 too)."""
    hidden_dim: StrictInt = Field(16, ge=1)
    """H: hidden width of the stage head."""
    level_hidden_dim: StrictInt = Field(8, ge=1)
    """Hidden width of the cap and idle heads, which run on every (row, level) pair. The
    default widths are Decima's (hidden 16, embeddings 8); 16/32/16 make the model about
    20 % slower in onnxruntime (≈ 40 µs per decision at 20 jobs)."""
    mp_steps: StrictInt = Field(8, ge=0)
    """T: message-passing steps (TPC-H DAGs are at most 9 stages deep: 8 steps suffice)."""
    negative_slope: float = 0.2
    """Slope of the leaky ReLU used throughout."""
    features: FeatureConfig = FeatureConfig()
    """How features are computed (`policy.columns`)."""
    actions: ActionConfig = ActionConfig()
    """The idle levels and the WAIT action (`policy.actions`)."""

    def config_hash(self) -> str:
        """A short stable hash of the config (recorded in checkpoints and ONNX metadata)."""
        text = json.dumps(self.model_dump(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
