"""Alice's two small optimizations per round (GAL Algorithm 1).

- :func:`assistance_weights`: ``ŵ = argmin_{w ∈ simplex} E ℓ(r, Σ_m w_m f_m)`` with ``w = softmax(θ)``,
  θ initialised to ones, Adam (lr 0.1, weight decay 5e-4), 100 full-batch steps.
- :func:`line_search`: ``η̂ = argmin_η E L₁(y, F + η f)`` by L-BFGS (lr 1; :mod:`vcl.optim`, torch's), η from 1,
  10 steps. It never returns an η whose loss is above the loss at η = 0 (no step at all).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from vcl import optim
from vcl.losses import local_loss
from vcl.tasks import Task


def assistance_weights(
    outputs: Tensor, residual: Tensor, loss: str, steps: int = 100, lr: float = 0.1, weight_decay: float = 5e-4
) -> Tensor:
    """Weights on the probability simplex for the M organizations' outputs (M, N, K)."""
    m = outputs.shape[0]
    if m == 1:
        return torch.ones(1, device=outputs.device)
    outputs = outputs.detach()
    theta = torch.ones(m, device=outputs.device, requires_grad=True)
    opt = optim.Adam([theta], lr=lr, weight_decay=weight_decay)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        combined = torch.einsum("m,mnk->nk", torch.softmax(theta, 0), outputs)
        local_loss(combined, residual, loss).backward()
        opt.step()
    return torch.softmax(theta.detach(), 0)


def line_search(task: Task, F: Tensor, direction: Tensor, y: Tensor, steps: int = 10, init: float = 1.0) -> float:
    """The assisted learning rate η̂ minimizing Alice's task loss along ``direction``."""
    F, direction = F.detach(), direction.detach()
    eta = torch.tensor([init], device=F.device, requires_grad=True)
    opt = optim.LBFGS([eta], lr=1.0)

    tried: list[tuple[float, float]] = []  # (loss, η) at every point L-BFGS evaluated

    def closure():
        loss, eta.grad = task.loss_along(F, direction, y, eta.detach())
        tried.append((float(loss), float(eta.detach())))
        return loss

    for _ in range(steps):
        opt.step(closure)
    found = float(eta.detach())
    with torch.no_grad():
        no_step = float(task.loss_value(F, y))
        stepped = float(task.loss_value(F + found * direction, y))
    # L-BFGS can overshoot on a non-smooth loss (L1) and end worse than where it passed: keep the best
    # point it evaluated, and never one worse than no step at all.
    candidates = [(loss, e) for loss, e in [*tried, (stepped, found)] if math.isfinite(loss)]
    best_loss, best = min(candidates, default=(math.inf, 0.0))
    return best if best_loss <= no_step else 0.0
