"""Reconstruction attacks on MPDL's released features (the experimenter's privacy check; docs/mpdl.md, "The attack").

From a source ``y`` (estimates of a party's normalized rows) the attacker builds, each clipped to [0, 1]: ``raw``
(``y``), ``mean_offset`` (``y − (m − 0.5)``, ``m`` the released mean), ``min_offset`` (``y − min(y)``), ``range``
(``y`` rescaled to [0, 1]), ``shrink`` (``m + k·(y − m)``, ``k = max(0, 1 − 2b²/Var(y))``, ``b`` the public Laplace
scale), and the oracles ``affine`` (least squares on the truth; several sources combined) and ``constant`` (the
truth's median). The reported MAE is the minimum; ``trivial_mae`` guesses each feature's mean."""

from __future__ import annotations

import torch
from torch import Tensor


def trivial_mae(truth: Tensor) -> float:
    """MAE of guessing each feature's (true) mean for every row."""
    truth = truth.double()
    return float((truth - truth.mean(0)).abs().mean())


def _estimators(y: Tensor, noise_scale: float, means: Tensor | None) -> dict[str, Tensor]:
    m = y.mean(0) if means is None else means.double()
    low, high = y.min(0).values, y.max(0).values
    span = torch.where(high - low > 0, high - low, torch.ones_like(high))
    var = y.var(0, unbiased=False)
    k = (1.0 - 2.0 * noise_scale**2 / var.clamp_min(1e-12)).clamp(0.0, 1.0)
    return {
        "raw": y,
        "mean_offset": y - (m - 0.5),
        "min_offset": y - low,
        "range": (y - low) / span,
        "shrink": m + k * (y - m),
    }


def _affine(sources: list[Tensor], truth: Tensor) -> Tensor:
    """Per column j, least squares of truth[:, j] on [1, y_1[:, j], y_2[:, j], …] (the oracle fit)."""
    n, d = truth.shape
    design = torch.stack([torch.ones(n, d, dtype=truth.dtype), *sources], dim=2).permute(1, 0, 2)  # d × n × p
    target = truth.T.unsqueeze(2)  # d × n × 1
    ridge = 1e-9 * torch.eye(design.shape[2], dtype=truth.dtype)
    coef = torch.linalg.solve(design.transpose(1, 2) @ design + ridge, design.transpose(1, 2) @ target)
    return (design @ coef).squeeze(2).T


def reconstruction_attack(
    sources: dict[str, Tensor],
    truth: Tensor,
    noise_scale: float = 0.0,
    means: Tensor | None = None,
    chunk: int = 256,
) -> dict:
    """The best reconstruction of ``truth`` (n × d, normalized features in [0, 1]) from ``sources``
    ({name: n × d}). Returns {"mae": the smallest MAE, "best": "source/estimator", "by": {name: MAE}}.
    Every estimator works column by column, so the columns are processed ``chunk`` at a time."""
    names = [name for name, y in sources.items() if bool(torch.isfinite(y).all())]
    sums: dict[str, float] = {}

    def add(name: str, estimate: Tensor, target: Tensor) -> None:
        sums[name] = sums.get(name, 0.0) + float((estimate.clamp(0.0, 1.0) - target).abs().sum())

    for lo in range(0, truth.shape[1], chunk):
        cols = slice(lo, lo + chunk)
        target = truth[:, cols].detach().double().cpu()
        ys = {name: sources[name][:, cols].detach().double().cpu() for name in names}
        m = None if means is None else means[cols].detach().cpu()
        for name, y in ys.items():
            for est, value in _estimators(y, noise_scale, m).items():
                add(f"{name}/{est}", value, target)
            add(f"{name}/affine", _affine([y], target), target)
        if len(ys) > 1:
            add("+".join(ys) + "/affine", _affine(list(ys.values()), target), target)
        add("constant", target.median(0).values.expand_as(target), target)
    by = {name: total / truth.numel() for name, total in sums.items()}
    best = min(by, key=by.get)
    return {"mae": by[best], "best": best, "by": by}


def h0_attack(released: Tensor, truth: Tensor, noise_scale: float = 0.0, means: Tensor | None = None) -> dict:
    """The attacker holds a party's h₀ outputs ``released`` (and its released means): how well can it
    rebuild the party's normalized features row by row? See :func:`reconstruction_attack`."""
    return reconstruction_attack({"h0": released}, truth, noise_scale, means)
