"""ASCII's updates as functions of what an agent holds: the SAMME code, the model weight α, the scores it
passes on, and the exponential loss."""

from __future__ import annotations

import math

import torch
from torch import Tensor

MIN_ERROR = 1e-10  # a perfect weighted fit has α = ∞; the error is clipped here (α ≈ 23 + log(K − 1))


# --- the updates, as functions of what an agent holds ------------------------------------------------
def samme_code(classes: Tensor, num_classes: int) -> Tensor:
    """Eq. 1: 1 for the class, −1/(K−1) elsewhere (N × K)."""
    code = torch.full((classes.shape[0], num_classes), -1.0 / (num_classes - 1), device=classes.device)
    code[torch.arange(classes.shape[0], device=classes.device), classes.long()] = 1.0
    return code


def model_weight(w: Tensor, r: Tensor, num_classes: int, joint: Tensor | None = None) -> float:
    """α = log(Σ wφ r / Σ wφ (1 − r)) + log(K − 1): eq. 9 (and ``exact``) with φ = 1, eqs 11 and 13 as
    printed (``paper``) with φ = ``joint``."""
    v = w.to(torch.float64) if joint is None else w.to(torch.float64) * joint.to(torch.float64)
    r = r.to(torch.float64)
    good, bad = float((v * r).sum()), float((v * (1.0 - r)).sum())
    if good <= 0.0:
        return -math.inf
    error = max(bad / (good + bad), MIN_ERROR)
    return math.log((1.0 - error) / error) + math.log(num_classes - 1)


def pass_on(w: Tensor, r: Tensor, alpha: float) -> Tensor:
    """Eqs 10 and 12: ``w' = w · exp(α (1 − r))``, normalized to sum to one."""
    out = w.to(torch.float64) * torch.exp(alpha * (1.0 - r.to(torch.float64)))
    return out / out.sum()


def joint_factor(scores: Tensor, round_start: Tensor) -> Tensor:
    """φ ∝ Π_{j<m} exp(α_j (1 − r_j)) = scores / round_start (0 where both are 0); scaled to max 1."""
    scores, start = scores.to(torch.float64), round_start.to(torch.float64)
    phi = torch.where(start > 0, scores / start.clamp_min(1e-300), torch.zeros_like(scores))
    return phi / phi.max().clamp_min(1e-300)


def exponential_loss(votes: Tensor, labels: Tensor) -> float:
    """Mean of ``exp(−yᵀf / K)`` with f = Σ β g and β = (K−1)²/K · α (the loss ASCII minimizes)."""
    k = votes.shape[1]
    margin = (samme_code(labels, k) * votes).sum(1) * (k - 1) ** 2 / k**2
    return float(torch.exp(-margin).mean())
