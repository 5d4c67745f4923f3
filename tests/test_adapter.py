"""The resource adapter (`policy.model.ResourceAdapter`) and training on a fixed base
policy (`training.adapter`): exactly the base's answers on pods-only inputs, in torch and
in onnxruntime; parity on resource inputs; the base's weights read back from its ONNX
file and kept fixed while the adapter learns."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from idlegate.errors import IdlegateError  # noqa: E402
from idlegate.policy import DEFAULT_POLICY_PATH  # noqa: E402
from idlegate.policy.columns import (  # noqa: E402
    RESOURCE_GLOBAL_FEATURES,
    RESOURCE_JOB_FEATURES,
    RESOURCE_STAGE_FEATURES,
    FeatureConfig,
)
from idlegate.policy.features import MODEL_INPUTS  # noqa: E402
from idlegate.policy.model import PolicyNet  # noqa: E402
from idlegate.policy.model_config import ModelConfig  # noqa: E402
from idlegate.policy.onnx_export import export_model  # noqa: E402
from idlegate.policy.onnx_runtime import OnnxPolicy  # noqa: E402
from idlegate.sim.engine import simulate  # noqa: E402
from idlegate.sim.resources import ResourceVector  # noqa: E402
from idlegate.sim.workloads import build_workload  # noqa: E402
from idlegate.training.adapter import adapt, freeze_base  # noqa: E402
from idlegate.training.bc import behaviour_cloning, record_demonstrations  # noqa: E402
from idlegate.training.onnx_import import model_from_onnx  # noqa: E402
from tests.test_onnx import random_inputs  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WIDTHS = (len(RESOURCE_STAGE_FEATURES), len(RESOURCE_JOB_FEATURES), len(RESOURCE_GLOBAL_FEATURES))


def adapted(seed: int = 0) -> tuple[PolicyNet, PolicyNet]:
    """(base without the resource columns, the same base with a random adapter)."""
    torch.manual_seed(seed)
    base = PolicyNet(ModelConfig()).eval()
    model = PolicyNet(ModelConfig(features=FeatureConfig(resource_features=True)))
    model.load_state_dict(base.state_dict(), strict=False)
    with torch.no_grad():  # a trained adapter's weights are not zero: nor are these
        for p in model.adapter.parameters():
            p.normal_(0.0, 1.0)
    return base, model.eval()


def widen(inputs: dict[str, np.ndarray], rng: np.random.Generator | None) -> dict[str, np.ndarray]:
    """`inputs` with the resource columns appended: random, or zeros without `rng`."""
    out = dict(inputs)
    for name, width in zip(("stage_x", "job_x", "global_x"), WIDTHS, strict=True):
        rows = inputs[name].shape[0]
        extra = np.zeros((rows, width)) if rng is None else rng.uniform(-1, 2, (rows, width))
        out[name] = np.concatenate([inputs[name], extra.astype(np.float32)], axis=1)
    return out


def same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal but for the last float32 bits (4 ulp): a layer wider by the zero columns may
    run another BLAS kernel, whose sums round differently on some CPUs (2 ulp seen on an
    AMD EPYC, none elsewhere)."""
    np.testing.assert_array_max_ulp(got, want, maxulp=4)


def run(model: PolicyNet, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    with torch.no_grad():
        return [t.numpy() for t in model(*(torch.from_numpy(inputs[k]) for k in MODEL_INPUTS))]


def test_zero_resource_columns_give_the_base_models_outputs() -> None:
    base, model = adapted()
    rng = np.random.default_rng(4)
    for jobs in (1, 5, 20):
        inputs = random_inputs(rng, jobs)
        for got, want in zip(run(model, widen(inputs, None)), run(base, inputs), strict=True):
            same(got, want)
        moved = run(model, widen(inputs, rng))  # the adapter does read the columns
        assert not np.array_equal(moved[0], run(base, inputs)[0])


def test_a_new_adapter_adds_nothing_anywhere() -> None:
    torch.manual_seed(2)
    base = PolicyNet(ModelConfig()).eval()
    model = PolicyNet(ModelConfig(features=FeatureConfig(resource_features=True)))
    model.load_state_dict(base.state_dict(), strict=False)
    inputs = random_inputs(np.random.default_rng(3), 6)
    for got, want in zip(
        run(model.eval(), widen(inputs, np.random.default_rng(5))), run(base, inputs), strict=True
    ):
        same(got, want)


def test_onnx_parity_on_resource_inputs_and_exactness_on_pods_only(tmp_path) -> None:
    base, model = adapted(1)
    export_model(base, tmp_path / "base.onnx")
    export_model(model, tmp_path / "adapted.onnx")
    plain, wide = OnnxPolicy(tmp_path / "base.onnx"), OnnxPolicy(tmp_path / "adapted.onnx")
    rng = np.random.default_rng(7)
    for jobs, stages in ((1, 1), (5, 12), (20, 12), (50, 18)):
        inputs = random_inputs(rng, jobs, stages)
        resources = widen(inputs, rng)
        got = wide.session.run(None, {k: resources[k] for k in wide.input_names})
        for g, w in zip(got, run(model, resources), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)  # (1.1e-5 at 5.2 seen)
        zero = widen(inputs, None)
        got = wide.session.run(None, {k: zero[k] for k in wide.input_names})
        want = plain.session.run(None, {k: inputs[k] for k in plain.input_names})
        for g, w in zip(got, want, strict=True):
            same(g, w)


def test_an_adapted_policy_runs_a_pods_only_pool_as_its_base_and_a_resource_pool_not(
    tmp_path,
) -> None:
    base, model = adapted(3)
    export_model(base, tmp_path / "base.onnx")
    export_model(model, tmp_path / "adapted.onnx")
    plain, wide = OnnxPolicy(tmp_path / "base.onnx"), OnnxPolicy(tmp_path / "adapted.onnx")
    pods = build_workload("k8s-batch", 2, num_jobs=25, requests=True)
    assert [r.jct for r in simulate(pods, wide, seed=2).records] == [
        r.jct for r in simulate(pods, plain, seed=2).records
    ]
    pool = pods.__class__(**{**pods.__dict__, "resources": ResourceVector.parse("cpu=12")})
    moved = [r.jct for r in simulate(pool, wide, seed=2).records]
    assert moved != [r.jct for r in simulate(pool, plain, seed=2).records]


def test_the_shipped_policy_reads_back_from_its_onnx_file() -> None:
    model = model_from_onnx(DEFAULT_POLICY_PATH)  # (checks it exports back bit for bit)
    shipped = OnnxPolicy(DEFAULT_POLICY_PATH)
    rng = np.random.default_rng(0)
    for _ in range(3):
        inputs = random_inputs(rng, 8)
        if model.adapter is not None:
            inputs = widen(inputs, rng)
        got = shipped.session.run(None, {k: inputs[k] for k in shipped.input_names})
        for g, w in zip(got, run(model, inputs), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-4)  # (check_parity's)


def test_training_on_a_base_policy_moves_only_the_adapter(tmp_path) -> None:
    base, _ = adapted(4)
    export_model(base, tmp_path / "base.onnx")
    model = PolicyNet(ModelConfig(features=FeatureConfig(resource_features=True)))
    adapt(model, str(tmp_path / "base.onnx"))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    for k, v in base.state_dict().items():
        assert torch.equal(before[k], v)
    workload = build_workload("k8s-batch", 5, num_jobs=20, requests=True)
    pool = workload.__class__(**{**workload.__dict__, "resources": ResourceVector.parse("cpu=10")})
    demos = record_demonstrations(pool, 5, heuristic="srpt", model_config=model.config.model_dump())
    rng = np.random.default_rng(0)
    behaviour_cloning(model, demos, epochs=2, batch_size=64, lr=1e-2, rng=rng)
    after = model.state_dict()
    for k in before:
        assert torch.equal(before[k], after[k]) != k.startswith("adapter."), k


def test_a_base_policy_needs_the_adapter_and_the_same_settings(tmp_path) -> None:
    base, _ = adapted(5)
    export_model(base, tmp_path / "base.onnx")
    with pytest.raises(IdlegateError, match=r"set model\.features\.resource_features: true"):
        freeze_base(PolicyNet(ModelConfig()))
    other = PolicyNet(ModelConfig(embed_dim=4, features=FeatureConfig(resource_features=True)))
    with pytest.raises(IdlegateError, match="other model settings"):
        adapt(other, str(tmp_path / "base.onnx"))


def test_the_resources_preset_trains_on_resource_pools_from_the_shipped_policy() -> None:
    from idlegate.training.config import load_config
    from idlegate.training.rollout import _workload
    from idlegate.training.seeds import workload_ref

    config = load_config(preset="resources")
    assert config.base_policy == "default" and config.model.features.resource_features
    pools = [spec.resources for spec in config.training_workloads]
    assert all(p is not None and p["cpu"] > 0 for p in pools)
    built = _workload(workload_ref(config.workload, 3))
    assert built.resources == ResourceVector.parse("cpu=32,memory=128Gi,nvidia.com/gpu=4")
    assert any(d for job in built.jobs for d in job.dag.demands)  # requests=true


def test_an_adapted_export_keeps_its_bases_trained_on(tmp_path) -> None:
    from idlegate.policy.onnx_export import policy_onnx, trained_on

    base, model = adapted(6)
    run_config = {"preset": "default", "workload": {"name": "tpch-like"}}
    export_model(base, tmp_path / "base.onnx", training_config=run_config)
    adapter_run = {"preset": "resources", "base_policy": str(tmp_path / "base.onnx")}
    _, meta = policy_onnx(model, training_config=adapter_run)
    assert meta["idlegate.trained_on"] == trained_on(run_config)
    assert meta["idlegate.adapter.trained_on"] == trained_on(adapter_run)
    _, plain = policy_onnx(base, training_config=run_config)
    assert plain["idlegate.adapter.trained_on"] == ""
