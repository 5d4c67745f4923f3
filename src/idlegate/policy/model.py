"""The learned policy's model: a Decima-style graph network with stage, cap and idle heads.

Torch lives here (model definition) and in `training/`; inference runs the ONNX export
of this model (`policy.onnx_runtime`), so nothing outside those imports torch.

Architecture (Mao et al., SIGCOMM 2019, §5.1, with the idle head of Duan & Wu);
N stages, J jobs, E edges, L cap levels, M idle-eligible stages, I idle levels:

1. Stage embedding x = σ(stage_x W_s + (job_x W_j)[stage_job] + b)             [N, D]
2. Message passing over each job's DAG, children → parents, T shared steps:
   h⁰ = σ(x + b_g), hᵗ⁺¹_v = σ(x_v + W_g Σ_{c ∈ children(v)} f(hᵗ_c) + b_g), f = σ∘Linear.
   After T ≥ depth − 1 steps this is exactly the bottom-up recursion
   e_v = σ(x_v + g(Σ f(e_c))) (a node of height k is final from step k on); deeper
   DAGs see descendants up to T levels down. Decima adds x_v after g's activation;
   adding it before lets onnxruntime fuse a step's GEMM, residual and activation.  [N, D]
3. Job summary y_j = σ(W_y Σ_{v ∈ j} f_y(e_v) + job_x_j W + b)                     [J, D]
4. Global summary z = σ(W_z Σ_j f_z(y_j) + global_x W + b)                         [1, D]
5. Heads, two-layer MLPs whose first layer is split by input, so that scoring all
   (row, level) pairs is one broadcast add instead of a concatenation:
   stage  q(e_v, y_j(v), z)      → masked log-softmax over the stages             [N]
   cap    w(y_j, z, level / K)   → masked log-softmax per job over the levels above
          what the job holds; one shared score for every level (Decima's
          parallelism-limit trick: the head does not grow with K)               [J, L]
   idle   u(e_v + y_j(v), z, g/G) → log-softmax over g = 0..G, only for the stages
          that may idle (`idle_rows`); all others launch                        [M, I]
   wait   v(z) → one more entry of the stage softmax: WAIT, launch nothing until the
          next event (masked unless `wait_mask` and `ActionConfig.wait_action`)   [1]

With the resource columns (`FeatureConfig(resource_features=True)`, `policy.columns`) a
`ResourceAdapter` reads them and adds its terms to the pre-activations of 1, 3 and 4; the
base layers read the other columns only. The adapter has no bias and gives exactly 0 on
the all-zero columns of a pods-only pool, so there the model is its base, bit for bit.

Aggregations are index_add over index tensors (edge index, stage → job), exported as
ONNX `ScatterND(reduction="add")`, with dynamic numbers of stages, jobs and edges.
For training, `evaluate_batch` runs many observations as one disjoint graph (global
summary and stage softmax per observation) and returns differentiable log-probs.

Checkpoint format (`torch.save` of a dict; `checkpoint_dict` builds it):

    {"format": "idlegate-policy", "version": 1,
     "model_config": ModelConfig.model_dump(),   # nested feature and action configs
     "feature_schema_version": FEATURE_SCHEMA_VERSION,
     "state_dict": model.state_dict(),
     ...}                                    # training may add keys, e.g. "training_config"
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F  # noqa: N812

from idlegate.errors import IdlegateError
from idlegate.policy.actions import (
    MASKED,
    ActionChoice,
    idle_slot,
)
from idlegate.policy.columns import (
    FEATURE_SCHEMA_VERSION,
    NUM_JOB_FEATURES,
    NUM_STAGE_FEATURES,
    RESOURCE_GLOBAL_FEATURES,
    RESOURCE_JOB_FEATURES,
    RESOURCE_STAGE_FEATURES,
    num_global_features,
)
from idlegate.policy.features import Observation
from idlegate.policy.model_config import ModelConfig

CHECKPOINT_FORMAT: Final = "idlegate-policy"
CHECKPOINT_VERSION: Final = 1


# ---------------------------------------------------------------------------------------
# layers


class _ScatterAddRows(torch.autograd.Function):
    """base.index_add(0, rows[:, 0], values), exported as ONNX ScatterND(reduction="add").

    torch's own export of index_add is a ScatterND without reduction followed by Add,
    which is wrong for repeated indices, and scatter_add's ScatterElements is about 4x
    slower in onnxruntime (11 µs against 2.5 µs for 130 rows of 16 here).
    """

    @staticmethod
    def forward(ctx: Any, base: Tensor, rows: Tensor, values: Tensor) -> Tensor:
        index = rows[:, 0]
        ctx.save_for_backward(index)
        return base.index_add(0, index, values)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, Tensor]:
        (index,) = ctx.saved_tensors
        return grad, None, grad.index_select(0, index)

    @staticmethod
    def symbolic(g: Any, base: Any, rows: Any, values: Any) -> Any:
        return g.op("ScatterND", base, rows, values, reduction_s="add")


def index_add(base: Tensor, rows: Tensor, values: Tensor) -> Tensor:
    """base [R, D] plus each row of `values` [M, D] added at row rows[m, 0] (repeats sum).

    `rows` is the [M, 1] column of target rows (ScatterND's index layout); make it once
    with `index.unsqueeze(1)` and reuse it across steps.
    """
    return _ScatterAddRows.apply(base, rows, values)


class StageEmbedding(nn.Module):
    """x = σ(stage_x W_s + (job_x W_j)[stage_job] + b): stage_x [N, Fs], job_x [J, Fj] → [N, D]."""

    def __init__(self, stage_dim: int, job_dim: int, dim: int, slope: float) -> None:
        super().__init__()
        self.stage = nn.Linear(stage_dim, dim)
        self.job = nn.Linear(job_dim, dim, bias=False)
        self.act = nn.LeakyReLU(slope)

    def forward(
        self, stage_x: Tensor, job_x: Tensor, stage_job: Tensor, extra: Tensor | None = None
    ) -> Tensor:
        pre = self.stage(stage_x) + self.job(job_x)[stage_job]
        return self.act(pre if extra is None else pre + extra)  # extra: `ResourceAdapter`'s


class MessagePassing(nn.Module):
    """T steps of hᵗ⁺¹ = σ(x + g(Σ_{children} f(hᵗ))), h⁰ = σ(x + g(0)): x [N, D], edges [E] → [N, D].

    f is Linear + leaky ReLU σ, g is Linear; both are shared over steps and jobs.
    Messages go from `edge_src` (child) to `edge_dst` (parent); a node without children
    gets σ(x + b_g). The residual x enters before σ so that the step exports as one
    fused GEMM + add + activation.
    """

    def __init__(self, dim: int, steps: int, slope: float) -> None:
        super().__init__()
        self.steps = steps
        self.f = nn.Linear(dim, dim)
        self.g = nn.Linear(dim, dim)
        self.act = nn.LeakyReLU(slope)

    def forward(self, x: Tensor, edge_src: Tensor, edge_dst: Tensor) -> Tensor:
        zeros = torch.zeros_like(x)  # [N, D], shared by every step (index_add copies)
        parents = edge_dst.unsqueeze(1)  # [E, 1]
        residual = x + self.g.bias  # [N, D]: the GEMM's addend, the same at every step
        h = self.act(residual)  # a leaf's final value (no children): final after 0 steps
        for _ in range(self.steps):
            messages = self.act(self.f(h))[edge_src]  # f on N rows, then gather: [E, D]
            summed = index_add(zeros, parents, messages)  # [N, D]
            h = self.act(torch.addmm(residual, summed, self.g.weight.t()))  # one ONNX Gemm
        return h


class JobSummary(nn.Module):
    """y = σ(g(Σ_{v ∈ job} f(e_v)) + job_x W): e [N, D], job_x [J, Fj], stage_job [N] → [J, D]."""

    def __init__(self, dim: int, job_dim: int, slope: float) -> None:
        super().__init__()
        self.f = nn.Linear(dim, dim)
        self.g = nn.Linear(dim, dim)
        self.job = nn.Linear(job_dim, dim, bias=False)
        self.act = nn.LeakyReLU(slope)

    def forward(
        self, e: Tensor, job_x: Tensor, stage_job: Tensor, extra: Tensor | None = None
    ) -> Tensor:
        base = self.job(job_x)  # [J, D]
        rows = stage_job.unsqueeze(1)  # [N, 1]
        pooled = index_add(torch.zeros_like(base), rows, self.act(self.f(e)))  # [J, D]
        pre = self.g(pooled) + base
        return self.act(pre if extra is None else pre + extra)


class GlobalSummary(nn.Module):
    """z = σ(g(Σ_j f(y_j)) + global_x W): y [J, D], global_x [B, Fg] → [B, D].

    One observation: B = 1 and the sum runs over all jobs. A batch of B observations
    (training) passes `job_graph` [J], the observation of each job, to sum per observation.
    """

    def __init__(self, dim: int, global_dim: int, slope: float) -> None:
        super().__init__()
        self.f = nn.Linear(dim, dim)
        self.g = nn.Linear(dim, dim)
        self.glob = nn.Linear(global_dim, dim, bias=False)
        self.act = nn.LeakyReLU(slope)

    def forward(
        self,
        y: Tensor,
        global_x: Tensor,
        job_graph: Tensor | None = None,
        extra: Tensor | None = None,
    ) -> Tensor:
        base = self.glob(global_x)  # [B, D]
        messages = self.act(self.f(y))  # [J, D]
        if job_graph is None:
            pooled = messages.sum(dim=0, keepdim=True)  # [1, D]
        else:
            pooled = index_add(torch.zeros_like(base), job_graph.unsqueeze(1), messages)
        pre = self.g(pooled) + base
        return self.act(pre if extra is None else pre + extra)


class ResourceAdapter(nn.Module):
    """Residual terms from the resource columns (`policy.columns`, "Resource features"),
    added to the stage embedding's, job summary's and global summary's pre-activations.

    stage_r [N, 2], job_r [J, 2], global_r [B, 3], stage_job [N], and for a batch the
    observation of each stage row and job row → ([N, D], [J, D], [B, D]):

        stage  W_s σ(stage_r A + (job_r B)[stage_job] + (global_r C)[observation])
        job    W_j σ(job_r B' + (global_r C')[observation])
        global W_g σ(global_r C'')

    Nothing has a bias and σ(0) = 0, so zero columns (a pods-only pool, whose columns are
    all 0) give exactly zero terms, and the pre-activations they are added to keep every
    bit: the model answers as the one without the adapter. W_s, W_j, W_g start at zero,
    so a new adapter starts as no adapter at all.
    """

    def __init__(self, dim: int, hidden: int, slope: float) -> None:
        super().__init__()
        rs, rj, rg = (
            len(RESOURCE_STAGE_FEATURES),
            len(RESOURCE_JOB_FEATURES),
            len(RESOURCE_GLOBAL_FEATURES),
        )
        self.stage_in = nn.Linear(rs, hidden, bias=False)
        self.stage_job = nn.Linear(rj, hidden, bias=False)
        self.stage_glob = nn.Linear(rg, hidden, bias=False)
        self.stage_out = nn.Linear(hidden, dim, bias=False)
        self.job_in = nn.Linear(rj, hidden, bias=False)
        self.job_glob = nn.Linear(rg, hidden, bias=False)
        self.job_out = nn.Linear(hidden, dim, bias=False)
        self.glob_in = nn.Linear(rg, hidden, bias=False)
        self.glob_out = nn.Linear(hidden, dim, bias=False)
        self.act = nn.LeakyReLU(slope)
        for out in (self.stage_out, self.job_out, self.glob_out):
            nn.init.zeros_(out.weight)

    def forward(
        self,
        stage_r: Tensor,
        job_r: Tensor,
        global_r: Tensor,
        stage_job: Tensor,
        graphs: Graphs | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        g_stage, g_job = self.stage_glob(global_r), self.job_glob(global_r)  # [B, H]
        if graphs is not None:  # a batch: each row gets its own observation's
            g_stage, g_job = g_stage[graphs.stage_graph], g_job[graphs.job_graph]
        stage = self.stage_in(stage_r) + self.stage_job(job_r)[stage_job] + g_stage
        job = self.job_in(job_r) + g_job
        return (
            self.stage_out(self.act(stage)),
            self.job_out(self.act(job)),
            self.glob_out(self.act(self.glob_in(global_r))),
        )


class StageHead(nn.Module):
    """q(e_v, y_job(v), z) → score per stage: e, ys = y[stage_job] [N, D], z [1 or N, D] → [N].

    No output bias: a softmax does not change when every score moves by a constant.
    """

    def __init__(self, dim: int, hidden: int, slope: float) -> None:
        super().__init__()
        self.node = nn.Linear(2 * dim, hidden)  # on [e_v, y_job(v)]
        self.glob = nn.Linear(dim, hidden, bias=False)
        self.out = nn.Linear(hidden, 1, bias=False)
        self.act = nn.LeakyReLU(slope)

    def forward(self, e: Tensor, ys: Tensor, z: Tensor) -> Tensor:
        shift = self.glob(z) + self.node.bias  # [1 or N, H]: the GEMM's addend
        hidden = self.act(torch.addmm(shift, torch.cat([e, ys], dim=1), self.node.weight.t()))
        return self.out(hidden).squeeze(1)  # [N, H] -> [N, 1] -> [N] (a 2-D GEMM)


class LevelHead(nn.Module):
    """One shared score w(row embedding, z, level) for every (row, level) pair.

    rows [R, D], z [1 or R, D], level_x [L] (or [R, L]: levels per row) → [R, L]. The
    first layer is split by input,
    so the hidden tensor is one broadcast add, laid out [R, H, L] (levels innermost:
    onnxruntime broadcasts long inner spans several times faster than [R, L, H]).
    The head's size does not depend on L — Decima's parallelism-limit trick, reused for
    the idle levels. No output bias: the softmax over levels ignores it.
    """

    def __init__(self, dim: int, hidden: int, slope: float) -> None:
        super().__init__()
        self.row = nn.Linear(dim, hidden)
        self.glob = nn.Linear(dim, hidden, bias=False)
        self.level = nn.Linear(1, hidden, bias=False)
        self.out = nn.Linear(hidden, 1, bias=False)
        self.act = nn.LeakyReLU(slope)

    def forward(self, rows: Tensor, z: Tensor, level_x: Tensor) -> Tensor:
        base = self.row(rows) + self.glob(z)  # [R, H]
        per_level = self.level.weight * level_x.unsqueeze(-2)  # [H, L] (or [R, H, L])
        hidden = self.act(base.unsqueeze(2) + per_level)  # [R, H, L]
        return (self.out.weight @ hidden).squeeze(1)  # [1, H] @ [R, H, L] -> [R, L]

    def forward_fixed(self, rows: Tensor, z: Tensor, level_x: Tensor) -> Tensor:
        """The same function for a few levels known when the model is built (the idle levels).

        rows [R, D], z [1 or R, D], level_x [L] (a buffer) → [R, L]. The levels are tiled
        into the weights — hidden column l·H + h is unit h at level l — so the whole head
        is two 2-D GEMMs; the tiled weights depend only on parameters and buffers, so
        the ONNX export folds them into constants.
        """
        levels = level_x.shape[0]
        w_row = self.row.weight.repeat(levels, 1)  # [L·H, D]
        b_row = (self.row.bias + level_x.unsqueeze(1) * self.level.weight[:, 0]).reshape(-1)
        w_glob = self.glob.weight.repeat(levels, 1)  # [L·H, D]
        shift = F.linear(z, w_glob, b_row)  # [1 or R, L·H]: the GEMM's addend
        hidden = self.act(torch.addmm(shift, rows, w_row.t()))  # [R, L·H]
        eye = torch.eye(levels, dtype=rows.dtype).unsqueeze(2)  # [L, L, 1]
        w_out = (eye * self.out.weight[0]).reshape(levels, -1)  # block-diagonal [L, L·H]
        return F.linear(hidden, w_out)  # [R, L]


def masked_log_softmax(scores: Tensor, mask: Tensor, dim: int = -1) -> Tensor:
    """log-softmax of `scores` over the entries where `mask` is true; the rest get ≈ −1e9.

    A finite fill (not −inf) keeps an all-masked row finite (uniform) instead of NaN,
    and exp() of the fill is exactly 0, so masked entries have zero probability.
    """
    fill = torch.tensor(MASKED, dtype=scores.dtype)
    return torch.log_softmax(torch.where(mask, scores, fill), dim=dim)


class WaitHead(nn.Module):
    """v(z) → the WAIT score of each observation: z [B, D] → [B].

    It has an output bias, unlike the stage head: WAIT competes with the stage scores
    in one softmax, so its level relative to them matters.
    """

    def __init__(self, dim: int, hidden: int, slope: float) -> None:
        super().__init__()
        self.hidden = nn.Linear(dim, hidden)
        self.out = nn.Linear(hidden, 1)
        self.act = nn.LeakyReLU(slope)

    def forward(self, z: Tensor) -> Tensor:
        return self.out(self.act(self.hidden(z))).squeeze(1)


def segment_log_softmax(scores: Tensor, mask: Tensor, segment: Tensor, segments: int) -> Tensor:
    """`masked_log_softmax` of [N] scores within each segment (segment [N] in 0..segments−1)."""
    fill = torch.tensor(MASKED, dtype=scores.dtype)
    x = torch.where(mask, scores, fill)
    top = torch.full((segments,), MASKED, dtype=x.dtype).scatter_reduce(
        0, segment, x.detach(), "amax", include_self=True
    )
    x = x - top[segment]  # a shift per segment: the softmax is unchanged, exp() cannot overflow
    total = torch.zeros(segments, dtype=x.dtype).index_add(0, segment, x.exp())
    return x - total.log()[segment]


@dataclass(frozen=True)
class Graphs:
    """Which observation each stage and job row of a batch belongs to."""

    stage_graph: Tensor
    """[N] int64."""
    job_graph: Tensor
    """[J] int64."""
    count: int
    """B: observations in the batch."""


class PolicyNet(nn.Module):
    """The whole model: Observation tensors (`MODEL_INPUTS`) → (stage_logp, cap_logp, idle_logp).

    Inputs: stage_x [N, Fs] f32, job_x [J, Fj] f32, global_x [1, Fg] f32, edge_src [E]
    i64, edge_dst [E] i64, stage_job [N] i64, stage_mask [N] bool, idle_rows [M] i64,
    cap_x [L] f32, cap_mask [J, L] bool, wait_mask [1] bool. Outputs: stage_logp [N],
    cap_logp [J, L], idle_logp [M, I] for the stages that may idle (I = G + 1, or 1
    without the idle head: all zeros, "launch"), wait_logp [1] (stage_logp and wait_logp
    together are one distribution). Scoring only the M idle-eligible stages, not all N,
    keeps the widest tensor of the model small.
    """

    idle_x: Tensor
    """[I] f32: the idle levels g/G (a buffer, so it moves with the model)."""

    def __init__(self, config: ModelConfig | None = None) -> None:
        super().__init__()
        self.config = cfg = config or ModelConfig()
        d, h, s = cfg.embed_dim, cfg.hidden_dim, cfg.negative_slope
        self.embed = StageEmbedding(NUM_STAGE_FEATURES, NUM_JOB_FEATURES, d, s)
        self.message = MessagePassing(d, cfg.mp_steps, s)
        self.job_summary = JobSummary(d, NUM_JOB_FEATURES, s)
        base_global = num_global_features(cfg.features, resources=False)
        self.global_summary = GlobalSummary(d, base_global, s)
        self.adapter = (
            ResourceAdapter(d, cfg.hidden_dim, s) if cfg.features.resource_features else None
        )
        """Reads the resource columns (appended after the others); None without them."""
        self.stage_head = StageHead(d, h, s)
        lh = cfg.level_hidden_dim
        self.cap_head = LevelHead(d, lh, s)
        self.idle_head = LevelHead(d, lh, s) if cfg.actions.idle_head else None
        self.wait_head = WaitHead(d, lh, s)
        g = cfg.actions.idle_levels
        self.register_buffer(
            "idle_x", torch.arange(g + 1, dtype=torch.float32) / g, persistent=False
        )

    def forward(
        self,
        stage_x: Tensor,
        job_x: Tensor,
        global_x: Tensor,
        edge_src: Tensor,
        edge_dst: Tensor,
        stage_job: Tensor,
        stage_mask: Tensor,
        idle_rows: Tensor,
        cap_x: Tensor,
        cap_mask: Tensor,
        wait_mask: Tensor,
        graphs: Graphs | None = None,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        job_graph = None if graphs is None else graphs.job_graph
        if self.adapter is None:
            x = self.embed(stage_x, job_x, stage_job)  # [N, D]
            e = self.message(x, edge_src, edge_dst)  # [N, D]
            y = self.job_summary(e, job_x, stage_job)  # [J, D]
            z = self.global_summary(y, global_x, job_graph)  # [B, D]
        else:  # the base layers read the columns before the resource ones
            fs, fj, fg = NUM_STAGE_FEATURES, NUM_JOB_FEATURES, self.global_summary.glob.in_features
            add_s, add_j, add_g = self.adapter(
                stage_x[:, fs:], job_x[:, fj:], global_x[:, fg:], stage_job, graphs
            )
            stage_x, job_x, global_x = stage_x[:, :fs], job_x[:, :fj], global_x[:, :fg]
            x = self.embed(stage_x, job_x, stage_job, add_s)
            e = self.message(x, edge_src, edge_dst)
            y = self.job_summary(e, job_x, stage_job, add_j)
            z = self.global_summary(y, global_x, job_graph, add_g)
        ys = y[stage_job]  # [N, D]: each stage's job summary
        wait_score = self.wait_head(z)  # [B]
        if not self.config.actions.wait_action:
            wait_mask = torch.zeros_like(wait_mask)
        # WAIT is one more entry of each observation's stage softmax, after its stages
        mask = torch.cat([stage_mask, wait_mask])  # [N + B]
        n = stage_mask.shape[0]
        if graphs is None:  # one observation: z [1, D] broadcasts (the exported path)
            z_stage = z_job = z_idle = z
            scores = torch.cat([self.stage_head(e, ys, z), wait_score])
            both = masked_log_softmax(scores, mask)
        else:  # a batch: each row gets its own observation's z, softmax per observation
            z_stage, z_job = z[graphs.stage_graph], z[graphs.job_graph]
            z_idle = z_stage[idle_rows]
            scores = torch.cat([self.stage_head(e, ys, z_stage), wait_score])
            segment = torch.cat([graphs.stage_graph, torch.arange(graphs.count)])
            both = segment_log_softmax(scores, mask, segment, graphs.count)
        stage_logp, wait_logp = both[:n], both[n:]
        cap_logp = masked_log_softmax(self.cap_head(y, z_job, cap_x), cap_mask)
        if self.idle_head is None:
            idle_logp = torch.zeros_like(idle_rows, dtype=stage_x.dtype).unsqueeze(1)  # [M, 1]
        else:
            rows = (e + ys)[idle_rows]  # [M, D]: the idle-eligible stages in their jobs
            scores = self.idle_head.forward_fixed(rows, z_idle, self.idle_x)  # [M, I]
            idle_logp = torch.log_softmax(scores, 1)
        return stage_logp, cap_logp, idle_logp, wait_logp

    def run(self, obs: Observation) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """`forward` on an Observation's arrays (shared memory, no copies)."""
        return self(*observation_tensors(obs))


def observation_tensors(obs: Observation) -> tuple[Tensor, ...]:
    """The model inputs of `obs` as tensors, in `MODEL_INPUTS` order."""
    return tuple(torch.from_numpy(a) for a in obs.inputs().values())


# ---------------------------------------------------------------------------------------
# training: many decisions at once


class Batch(NamedTuple):
    """Several observations as one disjoint graph, for evaluating many decisions at once."""

    inputs: tuple[Tensor, ...]
    """The `MODEL_INPUTS`, concatenated (indices shifted); cap_x is [J, L], levels per job."""
    graphs: Graphs
    stage_offsets: Tensor
    """[B] first stage row of each observation."""
    job_offsets: Tensor
    """[B] first job row of each observation."""
    idle_offsets: Tensor
    """[B] first idle row of each observation."""


def batch_observations(observations: Sequence[Observation]) -> Batch:
    """One `Batch` of `observations` (cap levels padded to the longest, masked beyond)."""
    if not observations:
        raise IdlegateError("cannot batch zero observations")
    n = [o.num_stages for o in observations]
    j = [o.num_jobs for o in observations]
    m = [len(o.idle_rows) for o in observations]
    so, jo, io = (np.cumsum([0, *c])[:-1] for c in (n, j, m))
    levels = max(len(o.cap_x) for o in observations)
    cap_x = np.zeros((sum(j), levels), dtype=np.float32)
    cap_mask = np.zeros((sum(j), levels), dtype=bool)
    for o, start in zip(observations, jo, strict=True):
        width = len(o.cap_x)
        cap_x[start : start + o.num_jobs, :width] = o.cap_x
        cap_mask[start : start + o.num_jobs, :width] = o.cap_mask

    def cat(name: str, shift: np.ndarray | None = None) -> Tensor:
        parts = [getattr(o, name) for o in observations]
        if shift is not None:
            parts = [p + s for p, s in zip(parts, shift, strict=True)]
        return torch.from_numpy(np.concatenate(parts))

    inputs = (
        cat("stage_x"),
        cat("job_x"),
        cat("global_x"),
        cat("edge_src", so),
        cat("edge_dst", so),
        cat("stage_job", jo),
        cat("stage_mask"),
        cat("idle_rows", so),
        torch.from_numpy(cap_x),
        torch.from_numpy(cap_mask),
        cat("wait_mask"),
    )
    count = len(observations)
    graphs = Graphs(
        torch.repeat_interleave(torch.arange(count), torch.tensor(n)),
        torch.repeat_interleave(torch.arange(count), torch.tensor(j)),
        count,
    )
    offsets = (torch.from_numpy(a.astype(np.int64)) for a in (so, jo, io))
    return Batch(inputs, graphs, *offsets)


def evaluate_batch(
    model: PolicyNet, observations: Sequence[Observation], choices: Sequence[ActionChoice]
) -> tuple[Tensor, Tensor]:
    """(log π(choice) [B], entropy [B]) of many decisions in one forward pass, with gradients.

    The same numbers as each observation alone (its `policy.actions.choice_log_prob`).
    """
    if len(observations) != len(choices):
        raise IdlegateError(f"{len(observations)} observations but {len(choices)} choices")
    batch = batch_observations(observations)
    stage_logp, cap_logp, idle_logp, wait_logp = model(*batch.inputs, graphs=batch.graphs)
    count = batch.graphs.count
    waits = torch.tensor([c.is_wait for c in choices])
    rows = torch.tensor([max(c.stage_row, 0) for c in choices]) + batch.stage_offsets
    log_prob = torch.where(waits, wait_logp, stage_logp[rows])  # WAIT rows: row 0 unused
    plogp = stage_logp.exp() * stage_logp  # masked entries: 0 · (−1e9) = 0
    entropy = -torch.zeros(count).index_add(0, batch.graphs.stage_graph, plogp)
    entropy = entropy - wait_logp.exp() * wait_logp
    slots = [
        -1 if c.is_wait else idle_slot(o, c.stage_row)
        for o, c in zip(observations, choices, strict=True)
    ]
    with_idle = [b for b, slot in enumerate(slots) if slot >= 0 and idle_logp.shape[1] > 1]
    if with_idle:
        at = torch.tensor(with_idle)
        idle_rows = torch.tensor([slots[b] for b in with_idle]) + batch.idle_offsets[at]
        levels = torch.tensor([choices[b].idle_level for b in with_idle])
        table = idle_logp[idle_rows]  # [b, I]
        log_prob = log_prob.index_add(0, at, table.gather(1, levels.unsqueeze(1)).squeeze(1))
        entropy = entropy.index_add(0, at, -(table.exp() * table).sum(1))
    launches = [b for b, c in enumerate(choices) if c.cap_index >= 0]
    if launches:
        at = torch.tensor(launches)
        jobs = torch.from_numpy(
            np.array([observations[b].stage_job[choices[b].stage_row] for b in launches])
        )
        table = cap_logp[jobs + batch.job_offsets[at]]  # [b, L]
        caps = torch.tensor([choices[b].cap_index for b in launches])
        log_prob = log_prob.index_add(0, at, table.gather(1, caps.unsqueeze(1)).squeeze(1))
        entropy = entropy.index_add(0, at, -(table.exp() * table).sum(1))
    return log_prob, entropy


# ---------------------------------------------------------------------------------------
# checkpoints


def checkpoint_dict(model: PolicyNet, **extra: Any) -> dict[str, Any]:
    """The checkpoint of `model` (see the module docstring); `extra` keys are kept as given."""
    return {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "model_config": model.config.model_dump(),
        "feature_schema_version": FEATURE_SCHEMA_VERSION,
        "state_dict": model.state_dict(),
        **extra,
    }


def save_checkpoint(model: PolicyNet, path: str | Path, **extra: Any) -> Path:
    """torch.save the checkpoint of `model` (plus `extra`) to `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint_dict(model, **extra), path)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint dict at `path`, checked for format and feature schema."""
    path = Path(path)
    if path.is_dir():
        raise IdlegateError(
            f"checkpoint {str(path)!r} is a directory, not a checkpoint file; give the .pt file "
            f"in it, e.g. {str(path / 'best.pt')!r} (idlegate train writes best.pt into --out)"
        )
    if not path.is_file():
        raise IdlegateError(f"checkpoint {str(path)!r} does not exist; give the path of a .pt file")
    if not zipfile.is_zipfile(path):  # what torch.save writes; torch's own errors are pages long
        what = (
            "an ONNX policy, which export-onnx writes (use it as the scheduler learned:PATH)"
            if _is_onnx(path)
            else "not a checkpoint (torch.save writes a zip archive)"
        )
        raise IdlegateError(
            f"{str(path)!r} is {what}; give a checkpoint written by idlegate train "
            "(best.pt in its --out folder, e.g. out/train/best.pt)"
        )
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a bad file
        raise IdlegateError(
            f"cannot read checkpoint {str(path)!r} ({type(exc).__name__}); it is damaged or "
            "not written by idlegate train"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise IdlegateError(f"{str(path)!r} is not an idlegate policy checkpoint")
    if ckpt.get("feature_schema_version") != FEATURE_SCHEMA_VERSION:
        raise IdlegateError(
            f"checkpoint {str(path)!r} uses feature schema {ckpt.get('feature_schema_version')}, "
            f"this idlegate computes schema {FEATURE_SCHEMA_VERSION}; retrain the policy"
        )
    return ckpt


def _is_onnx(path: Path) -> bool:
    """The file is an ONNX model: a protobuf whose first field is the IR version."""
    if path.suffix == ".onnx":
        return True
    with path.open("rb") as f:
        head = f.read(2)
    return len(head) == 2 and head[0] == 0x08 and 0 < head[1] < 0x20


def model_from_checkpoint(ckpt: dict[str, Any]) -> PolicyNet:
    """Rebuild the model of a checkpoint dict (from `load_checkpoint` or `checkpoint_dict`)."""
    model = PolicyNet(ModelConfig.of(ckpt["model_config"]))
    model.load_state_dict(ckpt["state_dict"])
    model.eval()
    return model
