"""A policy file that turns non-finite past a queue length: the shipped model, with NaN
added to every output once the state holds more than `jobs` jobs.

It passes the load-time probe (two jobs), as a model that overflows only on larger states
would, so what catches it is the check at decision time (`policy.onnx_runtime`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def nan_after(path: Path, jobs: int = 2) -> Path:
    """Write the model at `path` and return it (skips the test without onnx or the model)."""
    onnx = pytest.importorskip("onnx", reason="onnx (the train extra) writes the model")
    from onnx import TensorProto, helper, numpy_helper

    from idlegate.policy import DEFAULT_POLICY_PATH

    if not DEFAULT_POLICY_PATH.is_file():
        pytest.skip("no bundled policy to derive the model from")
    model = onnx.load(str(DEFAULT_POLICY_PATH))
    graph = model.graph
    outputs = [o.name for o in graph.output]
    for node in graph.node:  # each output now comes out of the original graph as NAME_raw
        node.output[:] = [f"{o}_raw" if o in outputs else o for o in node.output]
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(0, dtype=np.int64), "nan_row"),
            numpy_helper.from_array(np.array(jobs, dtype=np.int64), "nan_jobs"),
            numpy_helper.from_array(np.array(np.nan, dtype=np.float32), "nan_value"),
            numpy_helper.from_array(np.array(0.0, dtype=np.float32), "nan_zero"),
        ]
    )
    graph.node.extend(
        [
            helper.make_node("Shape", ["job_x"], ["nan_shape"]),
            helper.make_node("Gather", ["nan_shape", "nan_row"], ["nan_count"], axis=0),
            helper.make_node("Greater", ["nan_count", "nan_jobs"], ["nan_on"]),
            helper.make_node("Where", ["nan_on", "nan_value", "nan_zero"], ["nan_bump"]),
            *(helper.make_node("Add", [f"{o}_raw", "nan_bump"], [o]) for o in outputs),
        ]
    )
    assert all(o.type.tensor_type.elem_type == TensorProto.FLOAT for o in graph.output)
    onnx.save(model, str(path))
    return path
