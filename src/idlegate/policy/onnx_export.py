"""Export a trained policy to ONNX (torch side; the runtime is `policy.onnx_runtime`).

The graph takes the `MODEL_INPUTS` with dynamic numbers of stages, jobs, edges, cap
levels and idle-eligible stages and returns the `MODEL_OUTPUTS` (shapes in
`policy.model.PolicyNet`):

    inputs   stage_x [N, Fs] f32, job_x [J, Fj] f32, global_x [1, Fg] f32,
             edge_src [E] i64, edge_dst [E] i64, stage_job [N] i64, stage_mask [N] bool,
             idle_rows [M] i64, cap_x [L] f32, cap_mask [J, L] bool, wait_mask [1] bool
    outputs  stage_logp [N], cap_logp [J, L], idle_logp [M, I], wait_logp [1]
             (f32 log-probabilities; stage_logp and wait_logp are one distribution)

It is written by torch's TorchScript-based exporter (`dynamo=False`): the
torch.export-based one needs the `onnxscript` package, which idlegate does not depend
on, and the model has no data-dependent control flow, so tracing is exact. The
aggregations export through a custom symbolic as ScatterND(reduction="add"), opset 17.

Metadata (ONNX `metadata_props`, all strings): see `METADATA_KEYS`; the runtime reads
the feature and action configs from it, so an exported file is self-describing.
"""

from __future__ import annotations

import hashlib
import io
import json
import warnings
from pathlib import Path
from typing import Any, Final

import numpy as np
import onnx
import onnxruntime as ort
import torch

from idlegate.errors import IdlegateError
from idlegate.policy.actions import MODEL_OUTPUTS
from idlegate.policy.columns import (
    FEATURE_SCHEMA_VERSION,
    NUM_GLOBAL_FEATURES,
    NUM_JOB_FEATURES,
    NUM_STAGE_FEATURES,
    num_global_features,
    num_job_features,
    num_stage_features,
)
from idlegate.policy.features import MODEL_INPUTS
from idlegate.policy.model import PolicyNet, load_checkpoint, model_from_checkpoint
from idlegate.policy.onnx_runtime import session_options

OPSET: Final = 17
"""ScatterElements with reduction="add" needs opset >= 16."""

METADATA_KEYS: Final = (
    "idlegate.format",  # "idlegate-policy-onnx"
    "idlegate.feature_schema_version",  # FEATURE_SCHEMA_VERSION, e.g. "1"
    "idlegate.model_config",  # ModelConfig.model_dump() as JSON (nested features, actions)
    "idlegate.config_hash",  # ModelConfig.config_hash()
    "idlegate.training_config_hash",  # sha256[:16] of the checkpoint's training_config, or ""
    "idlegate.idle_levels",  # G
    "idlegate.idle_ratio",  # r
    "idlegate.ablation.idle_head",  # "true" / "false"
    "idlegate.ablation.cp_features",  # "true" / "false"
    "idlegate.wait_action",  # "true" / "false"
    "idlegate.trained_on",  # JSON: preset, teacher, workloads, iterations (`trained_on`)
    "idlegate.history",  # JSON: the cluster history trained on (`trained_history`), or ""
    "idlegate.adapter.trained_on",  # JSON: what the resource adapter was trained on, or ""
)
ONNX_FORMAT: Final = "idlegate-policy-onnx"

_DYNAMIC_AXES: Final = {
    "stage_x": {0: "stages"},
    "job_x": {0: "jobs"},
    "edge_src": {0: "edges"},
    "edge_dst": {0: "edges"},
    "stage_job": {0: "stages"},
    "stage_mask": {0: "stages"},
    "idle_rows": {0: "idle_stages"},
    "cap_x": {0: "levels"},
    "cap_mask": {0: "jobs", 1: "levels"},
    "stage_logp": {0: "stages"},
    "cap_logp": {0: "jobs", 1: "levels"},
    "idle_logp": {0: "idle_stages"},
}


def example_inputs(
    stages: tuple[int, ...] = (3, 2),
    levels: int = 5,
    seed: int = 0,
    global_width: int = NUM_GLOBAL_FEATURES,
    stage_width: int = NUM_STAGE_FEATURES,
    job_width: int = NUM_JOB_FEATURES,
) -> tuple[torch.Tensor, ...]:
    """Random model inputs for jobs with `stages` stages each (chains), in `MODEL_INPUTS` order."""
    rng = np.random.default_rng(seed)
    n, j = sum(stages), len(stages)
    offsets = np.cumsum((0, *stages))
    src = np.concatenate([np.arange(o + 1, o + s) for o, s in zip(offsets, stages, strict=False)])
    arrays: dict[str, np.ndarray] = {
        "stage_x": rng.standard_normal((n, stage_width)).astype(np.float32),
        "job_x": rng.standard_normal((j, job_width)).astype(np.float32),
        "global_x": rng.standard_normal((1, global_width)).astype(np.float32),
        "edge_src": src.astype(np.int64),
        "edge_dst": (src - 1).astype(np.int64),
        "stage_job": np.repeat(np.arange(j), stages).astype(np.int64),
        "stage_mask": rng.random(n) < 0.7,
        "idle_rows": np.flatnonzero(rng.random(n) < 0.5).astype(np.int64),
        "cap_x": (np.arange(1, levels + 1) / levels).astype(np.float32),
        "cap_mask": rng.random((j, levels)) < 0.7,
    }
    arrays["wait_mask"] = np.array([True])
    arrays["stage_mask"][0] = True
    arrays["cap_mask"][:, -1] = True
    return tuple(torch.from_numpy(arrays[k]) for k in MODEL_INPUTS)


def _hash_json(value: Any) -> str:
    if value is None:
        return ""
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def trained_on(training_config: Any) -> str:
    """What a policy was trained on, as JSON: preset, algorithm, teacher, the workloads.

    Empty when the checkpoint carries no training config (a model built in code).
    """
    if not isinstance(training_config, dict):
        return ""
    workloads = [training_config.get("workload"), *training_config.get("mixture", ())]
    bc = training_config.get("bc") or {}
    summary = {
        "preset": training_config.get("preset"),
        "algorithm": training_config.get("algorithm", "reinforce"),
        "iterations": training_config.get("iterations"),
        "teacher": bc.get("heuristic") if bc.get("enabled", True) else None,
        "dagger_rounds": bc.get("dagger_rounds"),
        "workloads": [w for w in workloads if w],
    }
    return json.dumps(summary, sort_keys=True, default=str)


def _trained_on(training_config: Any) -> dict[str, str]:
    """The two trained-on keys: of a run on a fixed base policy (``base_policy``,
    `training.adapter`), the base's own (what every answer on a pods-only pool comes
    from) and the adapter's run; else the run's, and no adapter."""
    base = training_config.get("base_policy") if isinstance(training_config, dict) else None
    if base is None:
        return {
            "idlegate.trained_on": trained_on(training_config),
            "idlegate.adapter.trained_on": "",
        }
    from idlegate.policy import DEFAULT_POLICY_PATH  # (the package imports this module)

    path = DEFAULT_POLICY_PATH if base == "default" else Path(base)
    meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    return {
        "idlegate.trained_on": meta.get("idlegate.trained_on", ""),
        "idlegate.adapter.trained_on": trained_on(training_config),
    }


def trained_history(training_config: Any) -> str:
    """The cluster history a policy was trained on, as JSON: the file's name and sha256,
    its workflow count and recorded span, the train fraction and pool size.

    Empty when the training config has no history section (`idlegate train --history`).
    """
    history = training_config.get("history") if isinstance(training_config, dict) else None
    if not isinstance(history, dict):
        return ""
    keep = ("sha256", "workflows", "span_seconds", "train_fraction", "pool_size")
    summary = {k: history.get(k) for k in keep}
    summary["file"] = Path(str(history.get("path", ""))).name
    return json.dumps(summary, sort_keys=True)


def onnx_bytes(
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    *,
    input_names: list[str],
    output_names: list[str],
    dynamic_axes: dict[str, dict[int, str]],
    metadata: dict[str, str],
    doc: str,
) -> bytes:
    """`module` (switched to eval mode) traced on `inputs` by the TorchScript exporter at
    `OPSET`, with `metadata` as its ``metadata_props`` and `doc` as its doc string,
    checked by onnx.checker (IdlegateError if it fails); the serialized model.

    Every idlegate ONNX file (the DAG policy, the inspector, the split-window agent) is
    written by this one function, so they share the exporter, opset and checks.
    """
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # the exporter warns that it is the legacy one, and about index_add-style
        # ops; ScatterElements(reduction="add") handles repeated indices correctly
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module.eval(),
            inputs,
            buffer,  # type: ignore[arg-type]  # typed as a path, but the exporter writes to a file object too
            dynamo=False,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
            opset_version=OPSET,
            do_constant_folding=True,
        )
    proto = onnx.load_from_string(buffer.getvalue())
    onnx.helper.set_model_props(proto, metadata)
    proto.producer_name = "idlegate"
    proto.doc_string = doc
    try:
        onnx.checker.check_model(proto, full_check=True)
    except onnx.checker.ValidationError as exc:
        raise IdlegateError(f"the exported ONNX model does not pass onnx.checker: {exc}") from None
    return proto.SerializeToString()


def check_parity(
    module: torch.nn.Module, data: bytes, inputs: dict[str, np.ndarray], tol: float = 1e-4
) -> float:
    """The largest difference between onnxruntime's outputs of `data` (the export of
    `module`) and torch's on `inputs` (by input name, in the module's argument order);
    IdlegateError beyond `tol`."""
    session = ort.InferenceSession(data, session_options(1), providers=["CPUExecutionProvider"])
    got = session.run(None, inputs)
    with torch.no_grad():
        want = module(*(torch.from_numpy(v) for v in inputs.values()))
    want = want if isinstance(want, tuple) else (want,)
    gap = max(float(np.abs(g - w.numpy()).max()) for g, w in zip(got, want, strict=True))
    if not gap <= tol:
        raise IdlegateError(f"the exported ONNX model differs from the torch model by {gap:g}")
    return gap


def save_onnx(data: bytes, out: str | Path) -> Path:
    """Write the serialized model `data` to `out`, creating its folder; the path."""
    path = check_onnx_out(out)
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise _unwritable(path, exc) from None
    return path


def check_onnx_out(out: str | Path) -> Path:
    """`out` as a file an ONNX model can be written to, its folder made now; IdlegateError,
    a sentence, for a folder given or one that cannot be made. A training run that writes
    its model at the end (`train-window`) checks it first, not after minutes of work."""
    path = Path(out)
    if path.is_dir():
        raise IdlegateError(
            f"{path} is a folder; give the ONNX file to write, e.g. {path}/policy.onnx"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unwritable(path, exc) from None
    return path


def _unwritable(path: Path, exc: OSError) -> IdlegateError:
    return IdlegateError(
        f"cannot write the ONNX policy {path} ({exc.strerror or exc}); give a path in a "
        "folder you can write to"
    )


def policy_onnx(model: PolicyNet, *, training_config: Any = None) -> tuple[bytes, dict[str, str]]:
    """The serialized ONNX model of `model` and the metadata written into it."""
    cfg = model.config
    metadata = {
        "idlegate.format": ONNX_FORMAT,
        "idlegate.feature_schema_version": str(FEATURE_SCHEMA_VERSION),
        "idlegate.model_config": json.dumps(cfg.model_dump(), sort_keys=True),
        "idlegate.config_hash": cfg.config_hash(),
        "idlegate.training_config_hash": _hash_json(training_config),
        "idlegate.idle_levels": str(cfg.actions.idle_levels),
        "idlegate.idle_ratio": repr(cfg.actions.idle_ratio),
        "idlegate.ablation.idle_head": str(cfg.actions.idle_head).lower(),
        "idlegate.ablation.cp_features": str(cfg.features.cp_features).lower(),
        "idlegate.wait_action": str(cfg.actions.wait_action).lower(),
        **_trained_on(training_config),
        "idlegate.history": trained_history(training_config),
    }
    data = onnx_bytes(
        model,
        example_inputs(
            global_width=num_global_features(cfg.features),
            stage_width=num_stage_features(cfg.features),
            job_width=num_job_features(cfg.features),
        ),
        input_names=list(MODEL_INPUTS),
        output_names=list(MODEL_OUTPUTS),
        dynamic_axes=_DYNAMIC_AXES,
        metadata=metadata,
        doc="idlegate learned scheduling policy (stage, parallelism cap, idle length)",
    )
    return data, metadata


def export_model(
    model: PolicyNet, out_path: str | Path, *, training_config: Any = None
) -> dict[str, str]:
    """Write `model` as ONNX to `out_path`, check it, and return the metadata written."""
    data, metadata = policy_onnx(model, training_config=training_config)
    save_onnx(data, out_path)
    return metadata


def export_onnx(checkpoint_path: str | Path, out_path: str | Path) -> dict[str, str]:
    """`idlegate export-onnx CKPT OUT.onnx`: the checkpoint's model as ONNX; returns metadata."""
    ckpt = load_checkpoint(checkpoint_path)
    try:
        model = model_from_checkpoint(ckpt)
    except (KeyError, RuntimeError, TypeError) as exc:
        raise IdlegateError(
            f"checkpoint {str(checkpoint_path)!r} does not hold a usable model ({exc}); "
            "was it written by this version of idlegate?"
        ) from None
    return export_model(model, out_path, training_config=ckpt.get("training_config"))
