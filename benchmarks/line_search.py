#!/usr/bin/env python
"""GAL's line search on the lines of a real run: GAL Figure 4's MNIST-subset run (``gal_fig4.py``'s settings), each
round's line searched by the authors' call (``torch.optim.LBFGS(lr=1)``, no line-search function) and by vcl's (the
same with ``line_search_fn="strong_wolfe"``), from η = 1 and from η = 0, beside a dense grid's minimum.

    python benchmarks/line_search.py --seeds 0 --out runs/bench/line_search.json

The run takes the authors' η each round (vcl's line search before 2026-12-07), so its rounds are those of
``gal_fig4.json`` for the seed; the other searches only look at the same lines. One record per round:
``{"benchmark": "line_search", "round", "seed", "grid": {"eta", "loss"}, "loss_at_0", "slope_at_0",
"authors_from_1" / "authors_from_0" / "vcl_from_1" / "vcl_from_0": {"eta", "loss", "evaluations"}}``.
"""

from __future__ import annotations

import numpy as np
import torch
from common import parse_args, write_records
from gal_fig4 import config

import vcl.methods.gal.coordinator as coordinator
from vcl.coordinator.runner import train
from vcl.methods.gal import assistance

GRID = np.concatenate([np.linspace(0, 5, 2001), np.linspace(5, 200, 7801)])  # η: 0.0025 apart, then 0.025


def search(along, init: float, wolfe: bool, steps: int = 10) -> dict:
    """L-BFGS on η as the authors call it (``wolfe`` False) or as vcl does; where it ends and how many evaluations."""
    eta = torch.tensor([init], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([eta], lr=1.0, line_search_fn="strong_wolfe" if wolfe else None)
    count = [0]

    def closure() -> torch.Tensor:
        count[0] += 1
        loss, slope = along(eta.item())
        eta.grad = torch.tensor([slope], dtype=torch.float64)
        return torch.tensor(loss, dtype=torch.float64)

    for _ in range(steps):
        opt.step(closure)
    return {"eta": eta.item(), "loss": along(eta.item())[0], "evaluations": count[0]}


def searched(rounds: list[dict], seed: int):
    """A stand-in for GAL's ``line_search`` that records each round's line searched every way (into ``rounds``) and
    returns the authors' η."""

    def authors(task, F, direction, y, steps=10, init=1.0):
        along = task.along(F, direction, y)
        losses = np.array([along(e)[0] for e in GRID])
        found = {f"{who}_from_{s:g}": search(along, s, who == "vcl", steps) for who in ("authors", "vcl")
                 for s in (1.0, 0.0)}  # fmt: skip
        rounds.append({"benchmark": "line_search", "dataset": "mnist_subset", "seed": seed, "round": len(rounds) + 1,
                       "grid": {"eta": float(GRID[losses.argmin()]), "loss": float(losses.min())},
                       "loss_at_0": along(0.0)[0], "slope_at_0": along(0.0)[1], **found})  # fmt: skip
        return found[f"authors_from_{init:g}"]["eta"]

    return authors


WAYS = ("authors_from_1", "authors_from_0", "vcl_from_1", "vcl_from_0")


def report(records: list[dict]) -> str:
    """Per round: the grid's minimum and where each search ended (η, loss, evaluations)."""
    head = "| seed | round | grid η (loss) | " + " | ".join(w.replace("_", " ") for w in WAYS) + " |"
    lines = [head, "|" + "---|" * (3 + len(WAYS))]
    for r in records:
        ways = " | ".join(f"{r[w]['eta']:.3f} ({r[w]['loss']:.4f}, {r[w]['evaluations']})" for w in WAYS)
        lines.append(f"| {r['seed']} | {r['round']} | {r['grid']['eta']:.3f} ({r['grid']['loss']:.4f}) | {ways} |")
    return "\n".join(lines)


def main() -> None:
    args = parse_args(__doc__)
    records = []
    for seed in args.seeds:
        rounds: list[dict] = []
        coordinator.line_search = searched(rounds, seed)  # this run steps by the authors' η
        train(config("mnist_subset", "gal", seed), verbose=False, write=False)
        coordinator.line_search = assistance.line_search
        records += rounds
    write_records(records, args.out)
    print(report(records))


if __name__ == "__main__":
    main()
