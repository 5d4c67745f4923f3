"""Training throughput: rollouts per minute at 1 and 2 workers, and learner updates per minute.

The quick preset's training workload and rollout settings: each round runs the
preset's N rollouts of one arrival sequence, stopped at max_time = the curriculum's
mean at mid-training (fixed here, so that every round does comparable work), with the
policy of `--checkpoint` (default: a freshly initialised model, which idles and decides
more often than a trained one; pass e.g. out/train-quick/best.pt for numbers closer to
real training). Per worker count and inference backend it reports rollouts
per minute, decisions per second inside rollouts, and the ratio to one worker; then
the learner's update time on one round's decisions (updates per minute).

    python benchmarks/train_speed.py [--rounds 4] [--backend onnx,torch] [--checkpoint CKPT]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from idlegate.flags import description
from idlegate.policy.model import PolicyNet, load_checkpoint, model_from_checkpoint
from idlegate.training import math as rl
from idlegate.training.config import load_config
from idlegate.training.reinforce import algorithm_update, returns_and_advantages
from idlegate.training.rollout import RolloutRunner, RolloutTask, make_blob
from idlegate.training.seeds import workload_ref


def rounds_of_tasks(cfg, rounds: int) -> list[list[RolloutTask]]:
    cur = cfg.curriculum
    mid = rl.curriculum_mean(
        cfg.iterations // 2, cur.initial_mean_seconds, cur.increment_seconds, cur.max_mean_seconds
    )
    out = []
    for r in range(rounds):
        ref = workload_ref(cfg.workload, 7_000 + r)
        out.append([RolloutTask(ref, 100 * r + i, mid) for i in range(cfg.rollouts_per_sequence)])
    return out


def measure(model, cfg, backend: str, workers: int, rounds: int):
    tasks = rounds_of_tasks(cfg, rounds)
    with RolloutRunner(workers, cfg.mp_context) as runner:
        blob = make_blob(model, backend)
        runner.run(blob, tasks[0][:workers])  # start the workers, build the workload
        start = time.perf_counter()
        results = []
        for batch in tasks:
            blob = make_blob(model, backend)  # as in training: a fresh export per round
            results.append(runner.run(blob, batch))
        seconds = time.perf_counter() - start
    rollouts = sum(len(b) for b in results)
    decisions = sum(r.decisions for b in results for r in b)
    return seconds, rollouts, decisions, results


def main() -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--backend", default="onnx,torch")
    parser.add_argument("--checkpoint", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = load_config(preset=args.preset)
    if args.checkpoint:
        model = model_from_checkpoint(load_checkpoint(args.checkpoint))
    else:
        torch.manual_seed(cfg.seed)
        model = PolicyNet(cfg.model).eval()
    print(
        f"preset {args.preset}: workload {cfg.workload.name} {cfg.workload.options}, "
        f"{cfg.rollouts_per_sequence} rollouts per round, {args.rounds} rounds"
    )
    print(
        f"{'backend':<8} {'workers':>7} {'rollouts/min':>13} {'decisions/s':>12} "
        f"{'vs 1 worker':>12}"
    )
    last = None
    for backend in args.backend.split(","):
        base = None
        for workers in (1, 2):
            seconds, rollouts, decisions, results = measure(
                model, cfg, backend, workers, args.rounds
            )
            per_min = rollouts / seconds * 60
            base = base or per_min
            print(
                f"{backend:<8} {workers:>7} {per_min:>13.1f} {decisions / seconds:>12.0f} "
                f"{per_min / base:>11.2f}x"
            )
            last = results
    # the learner: one update per round's rollouts (as in training)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    decisions = 0
    for batch in last or []:
        _, _, adv = returns_and_advantages(batch, cfg)
        algorithm_update(model, optimizer, batch, adv, cfg, 0.01, rng)
        decisions += sum(r.decisions for r in batch)
    seconds = time.perf_counter() - start
    n = len(last or [])
    print(
        f"learner: {n / seconds * 60:.1f} updates/min ({decisions / max(n, 1):.0f} decisions "
        f"per update, {decisions / seconds:.0f} decisions/s, {cfg.learner_threads} thread)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
