"""ONNX export and runtime: parity with torch, metadata, no torch at inference, legal runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from idlegate.errors import IdlegateError  # noqa: E402
from idlegate.policy.actions import ActionConfig, choice_log_prob, choose  # noqa: E402
from idlegate.policy.columns import (  # noqa: E402
    FEATURE_SCHEMA_VERSION,
    NUM_GLOBAL_FEATURES,
    NUM_JOB_FEATURES,
    NUM_STAGE_FEATURES,
    FeatureConfig,
)
from idlegate.policy.features import MODEL_INPUTS  # noqa: E402
from idlegate.policy.heuristics import FairScheduler  # noqa: E402
from idlegate.policy.model import PolicyNet, save_checkpoint  # noqa: E402
from idlegate.policy.model_config import ModelConfig  # noqa: E402
from idlegate.policy.onnx_export import export_model, export_onnx  # noqa: E402
from idlegate.policy.onnx_runtime import OnnxPolicy  # noqa: E402
from idlegate.sim.engine import simulate  # noqa: E402
from idlegate.sim.protocol import ClusterView  # noqa: E402
from idlegate.sim.workloads import build_workload  # noqa: E402
from tests.helpers import gang_workload  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


CONFIGS = {
    "default": ModelConfig(),
    "no-idle": ModelConfig(actions=ActionConfig(idle_head=False)),
    "no-cp": ModelConfig(features=FeatureConfig(cp_features=False), mp_steps=3),
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, tuple[PolicyNet, Path, dict[str, str]]]:
    out = {}
    for i, (name, config) in enumerate(CONFIGS.items()):
        torch.manual_seed(i)
        model = PolicyNet(config).eval()
        path = tmp_path_factory.mktemp("onnx") / f"{name}.onnx"
        out[name] = (model, path, export_model(model, path))
    return out


def random_inputs(
    rng: np.random.Generator, jobs: int, max_stages: int = 12
) -> dict[str, np.ndarray]:
    """A random state: jobs with random DAGs (chains, trees, general), masks and cap levels."""
    src, dst, stage_job, n = [], [], [], 0
    for j in range(jobs):
        size = int(rng.integers(1, max_stages + 1))
        shape = rng.integers(3)
        for child in range(1, size):
            if shape == 0:  # chain
                parents = [child - 1]
            elif shape == 1:  # in-tree: each stage feeds one earlier stage
                parents = [int(rng.integers(child))]
            else:  # general DAG: up to three earlier stages
                parents = sorted(set(rng.integers(child, size=int(rng.integers(1, 4))).tolist()))
            for p in parents:
                src.append(n + child)
                dst.append(n + p)
        stage_job += [j] * size
        n += size
    levels = int(rng.integers(1, 60))
    held = rng.integers(0, levels, size=jobs)
    stage_mask = rng.random(n) < 0.5
    stage_mask[int(rng.integers(n))] = True
    return {
        "stage_x": rng.standard_normal((n, NUM_STAGE_FEATURES)).astype(np.float32),
        "job_x": rng.standard_normal((jobs, NUM_JOB_FEATURES)).astype(np.float32),
        "global_x": rng.standard_normal((1, NUM_GLOBAL_FEATURES)).astype(np.float32),
        "edge_src": np.array(src, dtype=np.int64),
        "edge_dst": np.array(dst, dtype=np.int64),
        "stage_job": np.array(stage_job, dtype=np.int64),
        "stage_mask": stage_mask,
        "idle_rows": np.flatnonzero(stage_mask & (rng.random(n) < 0.5)).astype(np.int64),
        "cap_x": (np.arange(1, levels + 1) / levels).astype(np.float32),
        "cap_mask": np.arange(1, levels + 1)[None, :] > held[:, None],
        "wait_mask": np.array([bool(rng.random() < 0.7)]),
    }


def torch_outputs(model: PolicyNet, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    with torch.no_grad():
        out = model(*(torch.from_numpy(inputs[k]) for k in MODEL_INPUTS))
    return [t.numpy() for t in out]


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("jobs,max_stages", [(1, 1), (1, 12), (5, 12), (20, 12), (20, 1), (50, 18)])
def test_torch_and_onnxruntime_agree(exported, name, jobs, max_stages) -> None:
    model, path, _ = exported[name]
    policy = OnnxPolicy(path)
    rng = np.random.default_rng(jobs * 100 + max_stages)
    for _ in range(3):
        inputs = random_inputs(rng, jobs, max_stages)
        feed = {k: inputs[k] for k in policy.input_names}
        got = policy.session.run(None, feed)
        want = torch_outputs(model, inputs)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, atol=1e-5)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_no_stage_may_idle(exported, name) -> None:
    model, path, _ = exported[name]
    inputs = random_inputs(np.random.default_rng(1), 4)
    inputs["idle_rows"] = np.zeros(0, dtype=np.int64)
    got = OnnxPolicy(path).session.run(None, inputs)
    want = torch_outputs(model, inputs)
    assert got[2].shape == want[2].shape and got[2].shape[0] == 0
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-5)


def test_metadata_and_checker(exported) -> None:
    _, path, meta = exported["default"]
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    props = {p.key: p.value for p in proto.metadata_props}
    assert props == meta
    assert props["idlegate.feature_schema_version"] == str(FEATURE_SCHEMA_VERSION)
    assert props["idlegate.idle_levels"] == "4" and props["idlegate.idle_ratio"] == "1.0"
    assert props["idlegate.ablation.idle_head"] == "true"
    assert props["idlegate.ablation.cp_features"] == "true"
    assert props["idlegate.config_hash"] == ModelConfig().config_hash()
    assert exported["no-idle"][2]["idlegate.ablation.idle_head"] == "false"
    assert exported["no-cp"][2]["idlegate.ablation.cp_features"] == "false"
    dims = {
        i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in proto.graph.input
    }
    assert dims["stage_x"][0] == "stages" and dims["cap_mask"] == ["jobs", "levels"]
    assert dims["edge_src"] == ["edges"]
    assert path.stat().st_size < 2_000_000


def test_export_from_checkpoint(tmp_path) -> None:
    torch.manual_seed(9)
    config = ModelConfig(
        embed_dim=8, mp_steps=2, actions=ActionConfig(idle_levels=2, idle_ratio=0.5)
    )
    ckpt = save_checkpoint(PolicyNet(config), tmp_path / "p.pt", training_config={"seed": 1})
    meta = export_onnx(ckpt, tmp_path / "out" / "p.onnx")
    assert meta["idlegate.idle_levels"] == "2" and meta["idlegate.idle_ratio"] == "0.5"
    assert len(meta["idlegate.training_config_hash"]) == 16
    policy = OnnxPolicy(tmp_path / "out" / "p.onnx")
    assert policy.action_config == config.actions and policy.feature_config == config.features
    with pytest.raises(IdlegateError, match="does not exist"):
        export_onnx(tmp_path / "nope.pt", tmp_path / "x.onnx")


@pytest.mark.parametrize(
    ("write", "said"),
    [
        ("onnx", "is an ONNX policy, which export-onnx writes (use it as the scheduler learned"),
        ("onnx-renamed", "is an ONNX policy"),
        ("text", "is not a checkpoint (torch.save writes a zip archive)"),
        ("empty", "is not a checkpoint"),
        ("zip", "cannot read checkpoint"),
    ],
)
def test_export_of_what_is_no_checkpoint_says_so_in_one_line(exported, tmp_path, write, said):
    # torch's answers: its 750-character weights_only advice, or IndexError: pop from empty list
    files = {
        "onnx": (tmp_path / "p.onnx", exported["default"][1].read_bytes()),
        "onnx-renamed": (tmp_path / "p.bin", exported["default"][1].read_bytes()),
        "text": (tmp_path / "p.txt", b"stages:\n  - {name: a}\n"),
        "empty": (tmp_path / "p.pt", b""),
        "zip": (tmp_path / "p.pt", b"PK\x05\x06" + bytes(18)),  # an empty zip archive
    }
    path, data = files[write]
    path.write_bytes(data)
    with pytest.raises(IdlegateError) as caught:
        export_onnx(path, tmp_path / "x.onnx")
    message = str(caught.value)
    assert said in message and "\n" not in message and len(message) < 300, message
    assert "weights_only" not in message


def test_export_to_a_folder_or_an_unwritable_path_is_a_user_error(tmp_path):
    ckpt = save_checkpoint(PolicyNet(), tmp_path / "p.pt")
    with pytest.raises(IdlegateError, match="is a folder; give the ONNX file to write"):
        export_onnx(ckpt, tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(IdlegateError, match="cannot write the ONNX policy"):
        export_onnx(ckpt, tmp_path / "file" / "x.onnx")


def test_onnx_runtime_imports_no_torch() -> None:
    code = (
        "import sys, idlegate.policy, idlegate.policy.onnx_runtime, idlegate.policy.features, "
        "idlegate.policy.actions; assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_bad_policy_files_are_user_errors(exported, tmp_path) -> None:
    with pytest.raises(IdlegateError, match="does not exist"):
        OnnxPolicy(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    with pytest.raises(IdlegateError, match=r"junk.onnx. is not an ONNX model.*export-onnx"):
        OnnxPolicy(tmp_path / "junk.onnx")
    proto = onnx.load(exported["default"][1])
    for prop in proto.metadata_props:
        if prop.key == "idlegate.feature_schema_version":
            prop.value = str(FEATURE_SCHEMA_VERSION + 1)
    with pytest.raises(IdlegateError, match="feature schema"):
        OnnxPolicy(proto.SerializeToString())
    del proto.metadata_props[:]
    with pytest.raises(IdlegateError, match="not an idlegate policy"):
        OnnxPolicy(proto.SerializeToString())


class _Twin:
    """Fair decides; at each decision the ONNX policy and the torch model see the same view."""

    name = "twin"

    def __init__(self, policy: OnnxPolicy, model: PolicyNet) -> None:
        self.policy = policy
        self.model = model
        self.fair = FairScheduler()
        self.checked = 0

    def reset(self, rng: object) -> None:
        self.policy.reset(rng)

    def decide(self, view: ClusterView):
        obs = self.policy.featurizer(view)
        if obs.stage_mask.any():
            got = self.policy.evaluate(obs)
            want = torch_outputs(self.model, obs.inputs())
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(g, w, atol=1e-5)
            # greedy choices agree up to near-ties: the ONNX pick is (near) torch's best
            onnx_pick = choose(obs, *got)
            torch_pick = choose(obs, *want)
            assert choice_log_prob(obs, onnx_pick, *want) == pytest.approx(
                choice_log_prob(obs, torch_pick, *want), abs=1e-4
            )
            self.checked += 1
        return self.fair.decide(view)


def test_parity_on_simulated_states(exported) -> None:
    model, path, _ = exported["default"]
    workload = build_workload(
        "tpch-like", seed=5, num_executors=12, init=4, num_stream=10, interarrival=3
    )
    twin = _Twin(OnnxPolicy(path), model)
    simulate(workload, twin, seed=2)
    assert twin.checked > 100


@pytest.mark.parametrize("greedy", [True, False])
def test_onnx_policy_runs_a_tpch_like_workload(exported, greedy) -> None:
    workload = build_workload(
        "tpch-like", seed=6, num_executors=8, init=2, num_stream=10, interarrival=5
    )
    policy = OnnxPolicy(exported["default"][1], greedy=greedy)
    first = simulate(workload, policy, seed=3)
    assert first.unfinished == 0 and len(first.records) == 12
    again = simulate(workload, policy, seed=3)  # reset() restarts caches and the rng
    assert [r.jct for r in again.records] == [r.jct for r in first.records]


def test_onnx_policy_runs_gang_stages_without_idle_head(exported) -> None:
    for name in ("default", "no-idle"):
        policy = OnnxPolicy(exported[name][1], greedy=False)
        result = simulate(gang_workload(11), policy, seed=4)
        assert result.unfinished == 0
        if name == "no-idle":
            assert all(r.idle_inserted == 0 for r in result.records)
