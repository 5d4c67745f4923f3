"""The learned policy at inference time: onnxruntime and numpy only (never torch).

`OnnxPolicy` implements the `Scheduler` protocol with an exported model
(`policy.onnx_export`). It computes features with the same `Featurizer` as training
and decodes with the same `actions.choose`/`actions.decode`, so it makes the decisions
the torch policy would make (greedy by default; with `greedy=False` it draws from the
run's Generator given to `reset`). The feature and action configs come from the
model's metadata, so the file alone describes how to use it. At load, a probe inference
on a small built-in state refuses a model whose outputs are not finite (weights
overwritten with NaN, an overflowing export), which would otherwise load and schedule
silently (every argmax of NaNs picks the first entry). A model can still turn
non-finite on a larger state than the probe's (an overflow past some queue length): every
decision checks the scores it decodes and raises `PolicyOutputError` rather than deciding
on them, so the caller's fallback (the operator's safe rules, a Warning and
``idlegate_policy_errors_total``) takes over.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from idlegate.errors import IdlegateError, PolicyOutputError
from idlegate.policy.actions import MODEL_OUTPUTS, ActionChoice, ActionConfig, choose, decode
from idlegate.policy.bounded import WindowConfig, WindowSelector
from idlegate.policy.columns import FEATURE_SCHEMA_VERSION, FeatureConfig
from idlegate.policy.features import MODEL_INPUTS, Featurizer, Observation
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import WAIT, Action, ClusterView, Decision
from idlegate.sim.spec import parse_workflow

PROBE_WORKFLOW = {
    "stages": [
        {"name": "a", "tasks": 2, "taskDurationSeconds": 3.0},
        {"name": "b", "tasks": 1, "taskDurationSeconds": 5.0, "dependsOn": ["a"]},
    ]
}
"""The built-in state of the load-time probe: two such jobs on two free executors."""


def session_options(threads: int = 1) -> ort.SessionOptions:
    """Sequential execution on `threads` threads with every graph optimisation on."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = threads
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # one decision is a few microseconds of work: spinning threads would only burn CPU
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.log_severity_level = 3
    return opts


def open_session(
    model: str | Path | bytes, *, threads: int, what: str, remedy: str
) -> tuple[ort.InferenceSession, dict[str, str]]:
    """An onnxruntime session on `model` (a path or the ONNX bytes) and its custom metadata.

    `what` names the kind of file in errors ("policy", "inspector", "window model") and
    `remedy` says how to get one. Raises IdlegateError for a bad `threads`, a missing
    file or a file onnxruntime cannot load; checking the metadata is the caller's.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise IdlegateError(f"threads must be a whole number >= 1, got {threads!r}")
    if isinstance(model, str | Path) and not Path(model).is_file():
        # relative paths resolve against the working directory, which is easy to get
        # wrong from a script or a container: name the file that was looked for
        raise IdlegateError(
            f"{what} file {str(model)!r} does not exist (looked for "
            f"{Path(model).expanduser().resolve()}); {remedy}"
        )
    source = model if isinstance(model, bytes) else str(model)
    try:
        session = ort.InferenceSession(
            source, session_options(threads), providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own exception types
        raise _unloadable(model, what, remedy, exc) from None
    return session, dict(session.get_modelmeta().custom_metadata_map)


def _unloadable(model: str | Path | bytes, what: str, remedy: str, exc: Exception) -> IdlegateError:
    """The sentence for a `model` onnxruntime refused: a file that is no ONNX model at all
    (text, an empty file: not a protobuf with a graph) says so and how to make one;
    another refusal gives onnxruntime's reason."""
    reason = str(exc).rpartition("failed:")[2].strip() or str(exc)
    name = "the bytes given" if isinstance(model, bytes) else f"{what} file {str(model)!r}"
    if type(exc).__name__ == "InvalidProtobuf" or "No graph was found" in reason:
        return IdlegateError(f"{name} is not an ONNX model (onnxruntime: {reason}); {remedy}")
    return IdlegateError(f"onnxruntime cannot load {name}: {reason}; {remedy}")


class OnnxPolicy:
    """An exported policy as a `Scheduler`: `OnnxPolicy("policy.onnx")`.

    `model` is a path or the ONNX bytes; `window` bounds what it sees of a long queue
    (`policy.bounded`; None, the default: every job). Raises IdlegateError if the file is missing,
    not an idlegate policy, or built for another feature schema.
    """

    def __init__(
        self,
        model: str | Path | bytes,
        *,
        greedy: bool = True,
        threads: int = 1,
        name: str = "learned",
        window: WindowConfig | None = None,
    ) -> None:
        self.session, self.metadata = open_session(
            model,
            threads=threads,
            what="policy",
            remedy="give the path of an exported policy, or export one with "
            "`idlegate export-onnx CKPT OUT.onnx`",
        )
        self._check_metadata()
        config = json.loads(self.metadata["idlegate.model_config"])
        self.feature_config = FeatureConfig.of(config["features"])
        self.action_config = ActionConfig.of(config["actions"])
        self.featurizer = Featurizer(self.feature_config)
        self.greedy = greedy
        self.name = name
        self.window = window
        """The bounded observation (`policy.bounded`), or None: the policy sees every job."""
        self._selector = None if window is None else WindowSelector(window)
        self._rng: np.random.Generator | None = None
        self._run = self.session.run
        self._outputs = list(MODEL_OUTPUTS)
        self._probe()

    def _check_metadata(self) -> None:
        meta = self.metadata
        if meta.get("idlegate.format") != "idlegate-policy-onnx":
            raise IdlegateError("the ONNX file is not an idlegate policy (no idlegate metadata)")
        version = meta.get("idlegate.feature_schema_version")
        if version != str(FEATURE_SCHEMA_VERSION):
            raise IdlegateError(
                f"the policy was trained on feature schema {version}, this idlegate computes "
                f"schema {FEATURE_SCHEMA_VERSION}; export a policy trained with this version"
            )
        names = [i.name for i in self.session.get_inputs()]
        unknown = sorted(set(names) - set(MODEL_INPUTS))
        if unknown:
            raise IdlegateError(
                f"the policy needs inputs {unknown} that idlegate does not compute "
                f"(it computes {', '.join(MODEL_INPUTS)}); re-export it"
            )
        # the exporter drops inputs a configuration does not use (no message passing)
        self.input_names = names

    def __deepcopy__(self, memo: dict[int, Any]) -> OnnxPolicy:
        """A copy with its own state (featurizer, window, generator) and the same
        onnxruntime session, which cannot be copied and need not be: inference leaves
        it as it was (a judge's or a forecast's replays copy the pool's scheduler)."""
        out = OnnxPolicy.__new__(OnnxPolicy)
        memo[id(self)] = out
        shared = {"session", "_run"}
        for key, value in self.__dict__.items():
            out.__dict__[key] = value if key in shared else copy.deepcopy(value, memo)
        return out

    def _probe(self) -> None:
        """Raise IdlegateError unless the model's outputs on a small state are all finite
        (masked entries are large negative numbers, never infinities)."""
        dag = Dag.from_spec(parse_workflow(PROBE_WORKFLOW, "the probe workflow"))
        cluster = Cluster(2)
        for _ in range(2):
            cluster.add_job(dag, 0.0)
        try:
            outputs = self.evaluate(self.featurizer(cluster))
        except Exception as exc:  # onnxruntime raises its own exception types
            raise IdlegateError(f"the ONNX policy fails on a small test state: {exc}") from None
        finally:
            self.featurizer.reset()
        broken = [
            name
            for name, out in zip(self._outputs, outputs, strict=True)
            if not np.isfinite(out).all()
        ]
        if broken:
            raise IdlegateError(
                f"the ONNX policy's outputs {', '.join(broken)} are not finite (NaN or "
                "infinite) on a small test state, so its weights are broken; export it again "
                "from a good checkpoint with `idlegate export-onnx CKPT OUT.onnx`"
            )

    def reset(self, rng: Any) -> None:
        """Start of a run: use `rng` for draws (if not greedy) and forget cached jobs."""
        self._rng = rng
        self.featurizer.reset()
        if self._selector is not None:
            self._selector.reset()

    def evaluate(self, obs: Observation) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The model's (stage_logp, cap_logp, idle_logp, wait_logp) for `obs`."""
        feed = {name: getattr(obs, name) for name in self.input_names}
        stage_logp, cap_logp, idle_logp, wait_logp = self._run(self._outputs, feed)
        return stage_logp, cap_logp, idle_logp, wait_logp

    def choose(self, obs: Observation) -> ActionChoice:
        """The action indices for `obs` (argmax, or a draw from the run's Generator).

        PolicyOutputError if a score is NaN or infinite (masked entries are large
        negative numbers, never infinities).
        """
        outputs = self.evaluate(obs)
        for name, out in zip(self._outputs, outputs, strict=True):
            if not np.isfinite(out).all():
                raise PolicyOutputError(
                    f"the ONNX policy {self.name} gave non-finite {name} scores (NaN or "
                    f"infinite) on a state of {len(obs.job_x)} job(s), so it cannot decide; "
                    "retrain it or export it again from a good checkpoint"
                )
        return choose(obs, *outputs, greedy=self.greedy, rng=self._rng)

    def observe(self, view: ClusterView) -> Observation:
        """The features of `view`: of every job, or of the window's jobs above its threshold."""
        window, selector = self.window, self._selector
        if window is None or selector is None:
            return self.featurizer(view)
        if len(view.jobs) <= window.threshold:
            if selector.following:  # it can follow the jobs only if asked at every decision
                selector.reset()
            return self.featurizer(view)
        visible, rest = selector(view)
        return self.featurizer(view, visible, rest if window.summary else None)

    def decide(self, view: ClusterView) -> Action:
        obs = self.observe(view)
        if not obs.stage_mask.any():
            return WAIT
        action = decode(obs, self.choose(obs), self.action_config)
        self.applied(action)
        return action

    def applied(self, action: Action) -> None:
        """`action` is what happens at the view last observed (`decide` calls this; a
        caller that observes but applies another scheduler's action calls it with that
        one): the window's selector re-reads the job it names at the next call."""
        if self._selector is not None and isinstance(action, Decision):
            self._selector.decided(action)
