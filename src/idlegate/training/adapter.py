"""Training on a fixed base policy: only the resource adapter learns (``base_policy``).

The shipped policy was distilled on pods-only pools. To teach it a pool of CPU, memory
and GPUs without changing a single answer it gives on a pods-only pool, a model with the
resource columns (`policy.columns`, "Resource features") takes the base policy's weights
and keeps them fixed: only `policy.model.ResourceAdapter` trains. The adapter adds
nothing where the resource columns are 0, which they are on every pods-only pool, so the
trained model makes there exactly the base policy's decisions (tests/test_adapter.py).
"""

from __future__ import annotations

from idlegate.errors import IdlegateError
from idlegate.policy import DEFAULT_POLICY_PATH
from idlegate.policy.model import PolicyNet
from idlegate.training.onnx_import import model_from_onnx


def freeze_base(model: PolicyNet) -> None:
    """Keep every weight of `model` but its resource adapter's fixed."""
    if model.adapter is None:
        raise IdlegateError(
            "base_policy trains the resource adapter only, and this model has none; "
            "set model.features.resource_features: true"
        )
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith("adapter."))


def adapt(model: PolicyNet, base: str) -> None:
    """Give `model` the weights of the exported policy `base` (a path, or ``default``: the
    shipped one) and keep them fixed (`freeze_base`); its adapter is left as it is."""
    path = DEFAULT_POLICY_PATH if base == "default" else base
    if model.adapter is None:
        freeze_base(model)  # (says what is wrong)
    source = model_from_onnx(path)
    ours = model.config.model_dump()
    theirs = source.config.model_dump()
    ours["features"] = {**ours["features"], "resource_features": False}
    theirs["features"] = {**theirs["features"], "resource_features": False}
    if ours != theirs:
        raise IdlegateError(
            f"base_policy {str(path)!r} was built with other model settings than the model "
            "section's; give the model section the base's settings (its features with "
            "resource_features: true)"
        )
    # a base that has an adapter itself (a policy trained so) gives its base weights only,
    # so a rerun from it trains the same adapter again
    weights = {k: v for k, v in source.state_dict().items() if not k.startswith("adapter.")}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if unexpected or any(not k.startswith("adapter.") for k in missing):
        raise IdlegateError(f"base_policy {str(path)!r} does not fit the model: {missing}")
    freeze_base(model)
