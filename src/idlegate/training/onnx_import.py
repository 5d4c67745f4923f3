"""A policy's torch model read back from its ONNX export: the weights to train further.

The shipped policy (`policy/default.onnx`) is a file without a checkpoint beside it. To
train an adapter on top of it (`training.adapter`) its weights must come back into a
`PolicyNet`. The export keeps most parameters under their own names; constant folding
stored the rest transposed (a Linear without bias becomes a MatMul by Wᵀ) or folded into
the idle head's tiled weights (`policy.model.LevelHead.forward_fixed`: b_row, whose level 0
block is the row bias and level g's adds g/G times the level weight, and a block-diagonal
output layer). `model_from_onnx` finds which is which by exporting a probe model of the
same config whose every weight is distinct, then reads each parameter back, and checks
that exporting the model it built gives the file's weights bit for bit: what it returns
is the policy that file runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from idlegate.errors import IdlegateError
from idlegate.policy.model import PolicyNet
from idlegate.policy.model_config import ModelConfig
from idlegate.policy.onnx_export import policy_onnx

_IDLE_BIAS, _IDLE_LEVEL, _IDLE_OUT = (
    "idle_head.row.bias",
    "idle_head.level.weight",
    "idle_head.out.weight",
)


def _weights(proto: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}


def _probe(config: ModelConfig) -> tuple[PolicyNet, dict[str, np.ndarray]]:
    """A model of `config` whose weights are all distinct, and its export's weights."""
    model = PolicyNet(config)
    with torch.no_grad():
        start = 1.0
        for p in model.parameters():
            p.copy_(torch.arange(start, start + p.numel()).reshape(p.shape))
            start += p.numel() + 1000
    data, _ = policy_onnx(model)
    return model, _weights(onnx.load_from_string(data))


def model_from_onnx(path: str | Path) -> PolicyNet:
    """The `PolicyNet` an exported policy file runs (module docstring); IdlegateError for a
    file this idlegate's exporter did not write the same way."""
    proto = onnx.load(str(path))
    meta = {p.key: p.value for p in proto.metadata_props}
    if "idlegate.model_config" not in meta:
        raise IdlegateError(f"{str(path)!r} is not an idlegate policy (no idlegate metadata)")
    config = ModelConfig.of(json.loads(meta["idlegate.model_config"]))
    probe, probe_w = _probe(config)
    have = _weights(proto)
    if {k: v.shape for k, v in have.items()} != {k: v.shape for k, v in probe_w.items()}:
        raise IdlegateError(
            f"{str(path)!r} was exported with another graph than this idlegate writes; "
            "read its weights with the idlegate version that exported it"
        )
    params = dict(probe.named_parameters())
    state = {k: torch.from_numpy(have[k].copy()) for k in params if k in have}
    for name, value in probe_w.items():
        if name in params:
            continue
        for key, p in params.items():
            v = p.detach().numpy()
            if v.ndim == 2 and value.shape == v.T.shape and np.array_equal(value, v.T):
                state[key] = torch.from_numpy(have[name].T.copy())
            elif value.shape == v.shape and np.array_equal(value, v):
                state[key] = torch.from_numpy(have[name].copy())
    if probe.idle_head is not None:
        state.update(_idle_head(probe, probe_w, have))
    missing = sorted(set(params) - set(state))
    if missing:
        raise IdlegateError(f"cannot find {', '.join(missing)} in {str(path)!r}")
    model = PolicyNet(config)
    model.load_state_dict(state, strict=False)
    model.eval()
    _check_same(model, have, path)
    return model


def _idle_head(
    probe: PolicyNet, probe_w: dict[str, np.ndarray], have: dict[str, np.ndarray]
) -> dict[str, torch.Tensor]:
    """The idle head's row bias, level weight and output weight, from its folded b_row
    [L·H] and block-diagonal output [L·H, L] (`LevelHead.forward_fixed`)."""
    head = probe.idle_head
    assert head is not None
    hidden = head.row.bias.numel()
    levels = probe.idle_x.numel()
    b_name = next(k for k, v in probe_w.items() if v.shape == (levels * hidden,))
    o_name = next(k for k, v in probe_w.items() if v.shape == (levels * hidden, levels))
    b_row, out = have[b_name].reshape(levels, hidden), have[o_name]
    bias = b_row[0]  # level 0: the row bias plus 0 x the level weight
    top = probe.idle_x[-1].item()  # level G's g/G, 1
    level = ((b_row[-1] - bias) / np.float32(top)).astype(np.float32)
    return {
        _IDLE_BIAS: torch.from_numpy(bias.copy()),
        _IDLE_LEVEL: torch.from_numpy(level.reshape(hidden, 1).copy()),
        _IDLE_OUT: torch.from_numpy(out[:hidden, 0].reshape(1, hidden).copy()),
    }


def _check_same(model: PolicyNet, have: dict[str, np.ndarray], path: str | Path) -> None:
    """IdlegateError unless exporting `model` gives exactly the weights `have`."""
    data, _ = policy_onnx(model)
    again = _weights(onnx.load_from_string(data))
    differ = sorted(k for k in have if not np.array_equal(have[k], again[k]))
    if differ:
        raise IdlegateError(
            f"the weights read from {str(path)!r} do not export back to the same file "
            f"({', '.join(differ)} differ)"
        )
