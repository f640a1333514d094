#!/usr/bin/env python
"""Where a linear organization's step goes: one step of GAL's stacked linear fit in the blocks' order
(``learner.shuffle: blocks``), and each of its parts, timed side by side in one run.

    python benchmarks/linear_step.py --out linear_step.json   # ~1 min on 2 cores

The fit of ``benchmarks/scale.py``'s round: 8 organizations of 8 features stacked, 4 targets, the paper's batch
(1,024 rows), the learner's own optimizer and clipping (``ResidualRegressor.steps``: torch's SGD, momentum 0.9,
weight decay 5e-4, its schedule attached, each organization's gradient clipped to norm 1). Each batch's ℓ₂ sums are
computed before the first step (:class:`vcl.engine.linear.LinearSteps`), so a step touches no row: it is a handful
of calls on (8, 9, 4) tensors, and their Python dispatch is its time. Timed, as µs a step (the median of
``--repeats`` passes over an epoch of batches):

- ``step``: ``LinearSteps.step``, the whole of what the fit does per batch;
- ``gradient``: its one product ``(2/K)(G Θ − C)`` into the gradient's buffer;
- ``clip``: the per-organization clipping;
- ``optimizer_step``: torch's ``optimizer.step()`` (the schedule's and the profiler's wrappers, hooks, its
  parameter group gathered, then the fused kernel);
- ``functional_sgd``: torch's functional ``torch.optim.sgd.sgd`` on the same tensors: the kernel ``optimizer.step()``
  calls, without the wrappers; ``optimizer_step`` less it is what keeping torch's optimizer object costs a step.

The report gives each part's share of a step and its seconds in a round at ``--rows`` rows (``scale.py``'s round: 100
epochs of the training rows, 80 % of them, in batches of 1,024).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
from common import write_records
from torch.optim.sgd import sgd
from vcl.models import ResidualRegressor

from vcl.engine.concurrent import BlockOrder, _clip_per_model
from vcl.engine.linear import LinearSteps

ORGANIZATIONS, FEATURES, TARGETS, BATCH, EPOCHS, TRAIN = 8, 8, 4, 1024, 100, 0.8


def timed(call, batches: list, repeats: int) -> float:
    """Median µs per call over ``repeats`` passes of ``call(batch)`` over ``batches`` (one pass to warm up)."""
    passes = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        for batch in batches:
            call(batch)
        passes.append((time.perf_counter() - start) / len(batches) * 1e6)
    return statistics.median(passes[1:])


def measure(repeats: int, batches_per_pass: int) -> dict:
    n = batches_per_pass * BATCH
    g = torch.Generator().manual_seed(0)
    x = torch.randn(ORGANIZATIONS, n, FEATURES, generator=g)
    y = torch.randn(n, TARGETS, generator=g)
    learner = ResidualRegressor(FEATURES, TARGETS, shuffle="blocks", seed=0)  # hidden=(): Linear
    order = BlockOrder(n, BATCH, [torch.Generator().manual_seed(s) for s in range(ORGANIZATIONS)])
    theta = torch.zeros(ORGANIZATIONS, FEATURES + 1, TARGETS)
    linear = LinearSteps(theta, lambda p: learner.steps(p, "cpu", clip_with=_clip_per_model), x, y, "l2", blocks=order)
    batches = order.epoch()
    opt = linear.steps.optimizer
    grad, scale = linear.theta.grad, 2.0 / TARGETS
    out = {"step": timed(linear.step, batches, repeats)}  # first: the optimizer's state exists for the others

    def gradient(batch):
        gram, c = linear.fixed[batch.start, batch.stop]
        torch.baddbmm(c, gram, linear.theta, beta=-scale, alpha=scale, out=grad)

    group, state = opt.param_groups[0], opt.state[linear.theta]

    def functional(batch):
        sgd(
            [linear.theta], [grad], [state["momentum_buffer"]], weight_decay=group["weight_decay"],
            momentum=group["momentum"], lr=group["lr"], dampening=group["dampening"], nesterov=group["nesterov"],
            maximize=group["maximize"], foreach=group["foreach"], fused=group["fused"],
        )  # fmt: skip

    out["gradient"] = timed(gradient, batches, repeats)
    out["clip"] = timed(lambda b: _clip_per_model([linear.theta], 1.0), batches, repeats)
    out["optimizer_step"] = timed(lambda b: opt.step(), batches, repeats)
    out["functional_sgd"] = timed(functional, batches, repeats)
    return out


def report(records: list[dict]) -> str:
    r = records[0]
    us, steps = r["microseconds"], r["round_steps"]
    lines = [
        f"A step of the stacked linear fit ({r['organizations']} organizations, batch {r['batch']}, "
        f"{r['threads']} threads), µs (median of {r['repeats']} passes); seconds in a round at {r['rows']:,} rows "
        f"({steps:,} steps):",
        "",
        "| part | µs a step | share of a step | s a round |",
        "|---|---|---|---|",
    ]
    for part in ("step", "gradient", "clip", "optimizer_step", "functional_sgd"):
        lines.append(f"| {part} | {us[part]:.1f} | {us[part] / us['step']:.0%} | {us[part] * steps / 1e6:.1f} |")
    wrapper = us["optimizer_step"] - us["functional_sgd"]
    lines += ["", f"torch's optimizer object around its kernel: {wrapper:.1f} µs a step, {wrapper * steps / 1e6:.1f} s "
              f"a round at {r['rows']:,} rows ({wrapper / us['step']:.0%} of a step)."]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=20, help="passes over an epoch's batches per part")
    p.add_argument("--batches", type=int, default=512, help="batches in a pass")
    p.add_argument("--rows", type=int, default=10**7, help="rows per organization of the round the report sizes")
    p.add_argument("--out", default=None, help="write the record to this JSON file")
    args = p.parse_args()
    record = {
        "benchmark": "linear_step", "organizations": ORGANIZATIONS, "features": FEATURES, "targets": TARGETS,
        "batch": BATCH, "threads": torch.get_num_threads(), "repeats": args.repeats, "rows": args.rows,
        "round_steps": EPOCHS * math.ceil(TRAIN * args.rows / BATCH),
        "microseconds": measure(args.repeats, args.batches),
    }  # fmt: skip
    write_records([record], args.out)
    print(report([record]))


if __name__ == "__main__":
    main()
